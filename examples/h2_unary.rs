//! What one unary gRPC call costs on an established HTTP/2 connection, with
//! the `h2` crate and without it: issue 43's goal 2, for
//! `docs/performance.md` ("h2's share: the smallest unary call").
//!
//! The cost budget of a small request puts ~41k instructions of the floor's
//! 66.7k in `h2` (the calling side ~17k, the connection task 23.6k), which
//! alone leaves goal 1 (≤100k a request) little room. This program makes
//! `--calls N` `ModelInfer` calls one after another (add_sub, 2×16 FP32,
//! the request encoded once at start) on one connection, on one tokio
//! current-thread runtime, in one of three modes:
//!
//! - `h2`: the `h2` crate's client as `examples/floor_hop` and the gateway
//!   use it, the connection future spawned on its own task: the calling
//!   side, the cross-task hand-off and the connection task.
//! - `h2-local`: the same calls, the connection future polled on the
//!   calling task (`select!`): h2's protocol work without the hand-off.
//! - `raw`: HTTP/2 written by hand on the `TcpStream`, one task driving the
//!   socket: a HEADERS frame (HPACK block encoded once, static-table
//!   references and literals without indexing, so it serves every stream)
//!   and a DATA frame with END_STREAM in one write, the stream id patched
//!   per call; then frames read into one reused buffer until the trailers,
//!   the answers' header blocks decoded by a small HPACK decoder of its own
//!   (static and dynamic tables, size updates, Huffman), SETTINGS and PING
//!   answered, WINDOW_UPDATEs taken and sent. What HTTP/2 needs beyond that for a real client
//!   (concurrent streams from many tasks, GOAWAY's drain, stream resets,
//!   priorities, graceful errors) it does not do: it stops on them.
//!
//! Every answer must have `:status` 200, `grpc-status` 0 and the first
//! answer's message length; the first and last are decoded and their
//! outputs checked (OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 − INPUT1).
//! `scripts/bench-h2-unary` counts it under callgrind with two values of N
//! and takes the difference, start-up cancelled out.
//!
//! The HPACK decoder is ours because the maintained crates tried cost more
//! than what they decode: `loona-hpack` (and `hpack`, `fluke-hpack`, whose
//! code it carries) builds a hash map of the Huffman code for every
//! Huffman-coded string, ~200k instructions each, and the demo upstream
//! (hyper) sends a new `date` every second; `httlib-hpack` allocates every
//! field's name and value. `h2`'s own decoder is private.
//!
//! ```text
//! cargo build --release --example h2_unary
//! target/release/examples/h2_unary --upstream 127.0.0.1:8001 --calls 100 --mode raw
//! ```

use std::collections::VecDeque;
use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use prost::Message;
use tensorgate_proto::inference::ModelInferResponse;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod add_sub;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// add_sub's two inputs: 16 FP32 each.
const ELEMENTS: usize = 16;

/// The call's URI for `h2` (the authority floor_hop sends) and its parts
/// for the raw client.
const URI: &str = "http://backend/inference.GRPCInferenceService/ModelInfer";
const AUTHORITY: &[u8] = b"backend";
const PATH: &[u8] = b"/inference.GRPCInferenceService/ModelInfer";

/// What the calls answer, or why not.
type Outcome<T = ()> = Result<T, String>;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    H2,
    H2Local,
    Raw,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        let at = args.iter().position(|a| a == name)?;
        args.get(at + 1).cloned()
    };
    let usage = || -> ! {
        eprintln!("usage: h2_unary --upstream HOST:PORT [--calls N] [--mode h2|h2-local|raw]");
        std::process::exit(2)
    };
    let Some(upstream) = flag("--upstream").and_then(|a| a.to_socket_addrs().ok()?.next()) else {
        usage()
    };
    let calls: usize = match flag("--calls").map(|n| n.parse()) {
        None => 100,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => usage(),
    };
    let mode = match flag("--mode").as_deref() {
        None | Some("h2") => Mode::H2,
        Some("h2-local") => Mode::H2Local,
        Some("raw") => Mode::Raw,
        Some(_) => usage(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let call = call_message();
    let mut check = Check::default();
    let outcome = runtime.block_on(async {
        match mode {
            Mode::H2 | Mode::H2Local => run_h2(upstream, &call, calls, mode, &mut check)
                .await
                .map(|()| String::new()),
            Mode::Raw => run_raw(upstream, &call, calls, &mut check).await,
        }
    });
    let name = match mode {
        Mode::H2 => "h2",
        Mode::H2Local => "h2-local",
        Mode::Raw => "raw",
    };
    match outcome {
        Ok(frames) => println!(
            "{name}: {calls} calls ok: :status 200 and grpc-status 0 each, message of {} bytes each, \
             OUTPUT0 = INPUT0+INPUT1 and OUTPUT1 = INPUT0-INPUT1 in the first and last{frames}",
            check.length.unwrap_or(0)
        ),
        Err(error) => {
            eprintln!("{name}: call {} of {calls} failed: {error}", check.calls + 1);
            std::process::exit(1);
        }
    }
}

/// The answers' check: every message as long as the first, the first and
/// the last decoded and their outputs compared with the sums.
#[derive(Default)]
struct Check {
    /// Calls checked so far.
    calls: usize,
    /// The first answer's message length.
    length: Option<usize>,
}

impl Check {
    fn answer(&mut self, message: &[u8], last: bool) -> Outcome {
        if message.len() < 5 || message[0] != 0 {
            return Err(format!("not one uncompressed gRPC message: {message:?}"));
        }
        let declared = u32::from_be_bytes([message[1], message[2], message[3], message[4]]);
        if declared as usize != message.len() - 5 {
            return Err(format!(
                "a message of {} bytes declares {declared}",
                message.len() - 5
            ));
        }
        match self.length {
            Some(length) if length != message.len() => {
                return Err(format!(
                    "{} bytes, the first answer {length}",
                    message.len()
                ))
            }
            Some(_) => {}
            None => self.length = Some(message.len()),
        }
        if self.calls == 0 || last {
            outputs(&message[5..])?;
        }
        self.calls += 1;
        Ok(())
    }
}

/// add_sub's inputs: INPUT0 = i, INPUT1 = 100 + 2i.
fn inputs() -> [Vec<f32>; 2] {
    [
        (0..ELEMENTS).map(|i| i as f32).collect(),
        (0..ELEMENTS).map(|i| 100.0 + 2.0 * i as f32).collect(),
    ]
}

/// Checks an answer's OUTPUT0 and OUTPUT1 against the inputs' sum and
/// difference.
fn outputs(message: &[u8]) -> Outcome {
    let answer = ModelInferResponse::decode(message).map_err(|e| e.to_string())?;
    let [a, b] = inputs();
    let expected = [
        (
            "OUTPUT0",
            a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<_>>(),
        ),
        ("OUTPUT1", a.iter().zip(&b).map(|(x, y)| x - y).collect()),
    ];
    for (name, want) in expected {
        let at = answer
            .outputs
            .iter()
            .position(|o| o.name == name)
            .ok_or_else(|| format!("no {name} in the answer"))?;
        let output = &answer.outputs[at];
        if output.datatype != "FP32" || output.shape != [ELEMENTS as i64] {
            return Err(format!("{name}: {} {:?}", output.datatype, output.shape));
        }
        let raw = answer
            .raw_output_contents
            .get(at)
            .ok_or_else(|| format!("no raw contents for {name}"))?;
        let got: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if got != want {
            return Err(format!("{name} = {got:?}, expected {want:?}"));
        }
    }
    Ok(())
}

/// The `ModelInfer` request as a gRPC message (5-byte prefix), made once.
fn call_message() -> Bytes {
    let [a, b] = inputs();
    add_sub::call(&a, &b, &["OUTPUT0", "OUTPUT1"])
}

// ---------------------------------------------------------------- h2 ----

/// The calls through the `h2` crate: its connection future spawned on its
/// own task (`h2`, as floor_hop and the gateway run it) or polled beside
/// each call on the calling task (`h2-local`).
async fn run_h2(
    upstream: SocketAddr,
    call: &Bytes,
    calls: usize,
    mode: Mode,
    check: &mut Check,
) -> Outcome {
    let tcp = TcpStream::connect(upstream)
        .await
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let (backend, mut connection) = h2::client::handshake(tcp)
        .await
        .map_err(|e| e.to_string())?;
    let mut message = Vec::with_capacity(1024);
    if mode == Mode::H2 {
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                eprintln!("h2 connection: {error}");
            }
        });
        for i in 0..calls {
            message.clear();
            h2_call(&backend, call, &mut message).await?;
            check.answer(&message, i + 1 == calls)?;
        }
    } else {
        for i in 0..calls {
            message.clear();
            tokio::select! {
                biased;
                answer = h2_call(&backend, call, &mut message) => answer?,
                ended = &mut connection => return Err(format!("the connection ended: {ended:?}")),
            }
            check.answer(&message, i + 1 == calls)?;
        }
    }
    Ok(())
}

/// One unary call as floor_hop makes it, the answer's message appended to
/// `message`.
async fn h2_call(
    backend: &h2::client::SendRequest<Bytes>,
    call: &Bytes,
    message: &mut Vec<u8>,
) -> Outcome {
    let request = http::Request::post(URI)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .map_err(|e| e.to_string())?;
    let mut backend = backend.clone().ready().await.map_err(|e| e.to_string())?;
    let (answer, mut send) = backend
        .send_request(request, false)
        .map_err(|e| e.to_string())?;
    send.send_data(call.clone(), true)
        .map_err(|e| e.to_string())?;
    let answer = answer.await.map_err(|e| e.to_string())?;
    if answer.status() != http::StatusCode::OK {
        return Err(format!(":status {}", answer.status()));
    }
    let mut body = answer.into_body();
    while let Some(data) = body.data().await {
        let data = data.map_err(|e| e.to_string())?;
        let _ = body.flow_control().release_capacity(data.len());
        message.extend_from_slice(&data);
    }
    let trailers = body
        .trailers()
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no trailers")?;
    match trailers.get("grpc-status") {
        Some(status) if status == "0" => Ok(()),
        status => Err(format!(
            "grpc-status {status:?}: {:?}",
            trailers.get("grpc-message")
        )),
    }
}

// --------------------------------------------------------------- raw ----

/// Frame types (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

/// Frame flags.
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

/// The frame size we take (SETTINGS_MAX_FRAME_SIZE's default: we do not
/// raise it).
const MAX_FRAME: usize = 16_384;
/// The default window of a connection and of a stream.
const DEFAULT_WINDOW: i64 = 65_535;
/// Our receive windows, the connection's and each stream's (raised from
/// the default at start).
const RECV_WINDOW: u32 = 1 << 24;
/// Connection-level bytes received before a WINDOW_UPDATE gives them back,
/// sent with the next call's frames.
const REPLENISH: u32 = 1 << 16;
/// Our dynamic table for the server's encoder (SETTINGS_HEADER_TABLE_SIZE
/// left at its default).
const HEADER_TABLE: usize = 4096;

/// One frame's head, its payload at `payload` in the read buffer until
/// the next frame is read.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: std::ops::Range<usize>,
}

/// A hand-written HTTP/2 client connection, driven by the one task that
/// calls it.
struct Raw {
    tcp: TcpStream,
    /// The read buffer, reused: bytes read at `start..end`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Control frames waiting to be written (SETTINGS and PING acks,
    /// WINDOW_UPDATEs), sent before the next read or with the next call.
    out: Vec<u8>,
    /// The call's HEADERS and DATA frames, made once; `data_at` is where
    /// the DATA frame starts.
    request: Vec<u8>,
    data_at: usize,
    /// A header block spread over CONTINUATION frames, put together.
    block: Vec<u8>,
    decoder: Hpack,
    next_stream: u32,
    /// What we may still send: on the connection, and on a new stream
    /// (the server's SETTINGS_INITIAL_WINDOW_SIZE) or the current one.
    send_window: i64,
    stream_initial_window: i64,
    stream_send_window: i64,
    /// DATA bytes received and not yet given back, the connection's and
    /// the current stream's.
    recv_unacked: u32,
    stream_recv_unacked: u32,
    /// The window the server sees for our streams: the default until it
    /// acks our SETTINGS.
    stream_recv_window: u32,
    max_frame_out: usize,
    max_concurrent: u32,
    got_settings: bool,
    settings_acked: bool,
    seen: Seen,
}

/// A frame head.
fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// An HPACK string literal, not Huffman-coded (lengths < 127 here).
fn hpack_string(block: &mut Vec<u8>, value: &[u8]) {
    assert!(value.len() < 127, "a short literal");
    block.push(value.len() as u8);
    block.extend_from_slice(value);
}

/// The call's header block: static-table entries and literals without
/// indexing only, so it leaves the server's dynamic table alone and is
/// valid on every stream.
fn request_block() -> Vec<u8> {
    let mut block = Vec::new();
    block.push(0x80 | 3); // :method POST (static 3)
    block.push(0x80 | 6); // :scheme http (static 6)
    block.push(4); // :path, name static 4, literal value without indexing
    hpack_string(&mut block, PATH);
    block.push(1); // :authority, name static 1
    hpack_string(&mut block, AUTHORITY);
    block.extend_from_slice(&[0x0f, 31 - 15]); // content-type, name static 31
    hpack_string(&mut block, b"application/grpc");
    block.push(0); // te: trailers, a literal name
    hpack_string(&mut block, b"te");
    hpack_string(&mut block, b"trailers");
    block
}

/// The calls on a hand-written HTTP/2 connection; says which control
/// frames came and went.
async fn run_raw(
    upstream: SocketAddr,
    call: &Bytes,
    calls: usize,
    check: &mut Check,
) -> Outcome<String> {
    let tcp = TcpStream::connect(upstream)
        .await
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut raw = Raw::new(tcp, call);
    raw.handshake().await?;
    let mut message = Vec::with_capacity(1024);
    for i in 0..calls {
        message.clear();
        raw.call(&mut message).await?;
        check.answer(&message, i + 1 == calls)?;
    }
    let seen = raw.seen;
    Ok(format!(
        "; control frames received: {} SETTINGS, {} PING, {} WINDOW_UPDATE; \
         WINDOW_UPDATE sent: {}",
        seen.settings, seen.pings, seen.window_updates, seen.window_updates_sent
    ))
}

/// Control frames counted, for the report.
#[derive(Default, Clone, Copy)]
struct Seen {
    settings: u32,
    pings: u32,
    window_updates: u32,
    window_updates_sent: u32,
}

impl Raw {
    fn new(tcp: TcpStream, call: &Bytes) -> Self {
        let block = request_block();
        let mut request = Vec::with_capacity(9 + block.len() + 9 + call.len());
        frame_head(&mut request, block.len(), HEADERS, END_HEADERS, 0);
        request.extend_from_slice(&block);
        let data_at = request.len();
        frame_head(&mut request, call.len(), DATA, END_STREAM, 0);
        request.extend_from_slice(call);
        let decoder = Hpack::new(HEADER_TABLE);
        Self {
            tcp,
            buf: vec![0; 4 * (9 + MAX_FRAME)],
            start: 0,
            end: 0,
            out: Vec::with_capacity(256),
            request,
            data_at,
            block: Vec::new(),
            decoder,
            next_stream: 1,
            send_window: DEFAULT_WINDOW,
            stream_initial_window: DEFAULT_WINDOW,
            stream_send_window: DEFAULT_WINDOW,
            recv_unacked: 0,
            stream_recv_unacked: 0,
            stream_recv_window: DEFAULT_WINDOW as u32,
            max_frame_out: MAX_FRAME,
            max_concurrent: u32::MAX,
            got_settings: false,
            settings_acked: false,
            seen: Seen::default(),
        }
    }

    /// The client preface, our SETTINGS (no push, a large stream window)
    /// and a large connection window; then frames until the server's
    /// SETTINGS are acked and ours are.
    async fn handshake(&mut self) -> Outcome {
        self.out
            .extend_from_slice(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        frame_head(&mut self.out, 12, SETTINGS, 0, 0);
        self.out.extend_from_slice(&[0, 0x2, 0, 0, 0, 0]); // ENABLE_PUSH 0
        self.out.extend_from_slice(&[0, 0x4]); // INITIAL_WINDOW_SIZE
        self.out.extend_from_slice(&RECV_WINDOW.to_be_bytes());
        self.window_update(0, RECV_WINDOW - DEFAULT_WINDOW as u32);
        while !(self.got_settings && self.settings_acked) {
            let frame = self.frame().await?;
            match frame.kind {
                SETTINGS | PING | WINDOW_UPDATE | GOAWAY | PRIORITY => self.control(&frame)?,
                kind if kind <= CONTINUATION => {
                    return Err(format!("frame type {kind} before any stream"))
                }
                _ => {}
            }
        }
        self.flush().await
    }

    /// One call: HEADERS and DATA in one write, then frames until the
    /// trailers, the answer's message appended to `message`.
    async fn call(&mut self, message: &mut Vec<u8>) -> Outcome {
        let id = self.next_stream;
        self.next_stream += 2;
        if self.max_concurrent == 0 {
            return Err("the server allows no stream".into());
        }
        let data_len = self.request.len() - self.data_at - 9;
        if data_len > self.max_frame_out {
            return Err("the message exceeds the server's frame size".into());
        }
        self.stream_send_window = self.stream_initial_window;
        if self.stream_send_window < data_len as i64 {
            return Err("the server's stream window is smaller than the message".into());
        }
        while self.send_window < data_len as i64 {
            let frame = self.frame().await?;
            self.control(&frame)?;
        }
        self.send_window -= data_len as i64;
        self.stream_send_window -= data_len as i64;
        let at = self.data_at;
        self.request[5..9].copy_from_slice(&id.to_be_bytes());
        self.request[at + 5..at + 9].copy_from_slice(&id.to_be_bytes());
        if self.recv_unacked >= REPLENISH {
            self.window_update(0, self.recv_unacked);
            self.recv_unacked = 0;
        }
        self.stream_recv_unacked = 0;
        let written = if self.out.is_empty() {
            self.tcp.write_all(&self.request).await
        } else {
            self.out.extend_from_slice(&self.request);
            let written = self.tcp.write_all(&self.out).await;
            self.out.clear();
            written
        };
        written.map_err(|e| e.to_string())?;

        let mut status = None;
        let mut grpc_status = None;
        loop {
            let frame = self.frame().await?;
            match frame.kind {
                DATA => {
                    if frame.stream != id {
                        return Err(format!("DATA on stream {}", frame.stream));
                    }
                    if status.is_none() {
                        return Err("DATA before the answer's head".into());
                    }
                    let counted = frame.payload.len() as u32;
                    self.recv_unacked += counted;
                    self.stream_recv_unacked += counted;
                    let data = unpad(&self.buf[frame.payload.clone()], frame.flags, 0)?;
                    message.extend_from_slice(data);
                    if frame.flags & END_STREAM != 0 {
                        return Err("the answer ended without trailers".into());
                    }
                    // Windows given back before they run low (never, for
                    // small answers: the connection's goes with the next
                    // call, a stream's ends with it).
                    if self.recv_unacked >= RECV_WINDOW / 2 {
                        self.window_update(0, self.recv_unacked);
                        self.recv_unacked = 0;
                    }
                    if self.stream_recv_unacked >= self.stream_recv_window / 2 {
                        self.window_update(id, self.stream_recv_unacked);
                        self.stream_recv_unacked = 0;
                    }
                }
                HEADERS => {
                    if frame.stream != id {
                        return Err(format!("HEADERS on stream {}", frame.stream));
                    }
                    let end_stream = frame.flags & END_STREAM != 0;
                    let mut fields = Fields::default();
                    if frame.flags & END_HEADERS != 0 {
                        let block =
                            unpad(&self.buf[frame.payload.clone()], frame.flags, PRIORITY_FLAG)?;
                        self.decoder.decode(block, |n, v| fields.take(n, v))?;
                    } else {
                        self.continued(&frame).await?;
                        self.decoder.decode(&self.block, |n, v| fields.take(n, v))?;
                    }
                    if status.is_none() {
                        match fields.status {
                            Some(200) => status = Some(200),
                            other => return Err(format!(":status {other:?}")),
                        }
                    }
                    if fields.grpc_status.is_some() {
                        grpc_status = fields.grpc_status;
                    }
                    if end_stream {
                        return match grpc_status {
                            Some(0) => Ok(()),
                            other => {
                                Err(format!("grpc-status {other:?}: {:?}", fields.grpc_message))
                            }
                        };
                    }
                }
                RST_STREAM if frame.stream == id => {
                    let code = &self.buf[frame.payload];
                    return Err(format!("RST_STREAM {code:?}"));
                }
                PUSH_PROMISE | CONTINUATION => {
                    return Err(format!("unexpected frame type {}", frame.kind));
                }
                _ => self.control(&frame)?,
            }
        }
    }

    /// A connection-level frame: SETTINGS (acked), PING (answered),
    /// WINDOW_UPDATE, GOAWAY (an error: this client does not drain);
    /// PRIORITY, a stale stream's RST_STREAM and unknown types ignored.
    fn control(&mut self, frame: &Frame) -> Outcome {
        let payload = &self.buf[frame.payload.clone()];
        match frame.kind {
            SETTINGS => self.seen.settings += 1,
            PING => self.seen.pings += 1,
            WINDOW_UPDATE => self.seen.window_updates += 1,
            _ => {}
        }
        match frame.kind {
            SETTINGS if frame.flags & ACK != 0 => {
                self.settings_acked = true;
                self.stream_recv_window = RECV_WINDOW;
            }
            SETTINGS => {
                if !payload.len().is_multiple_of(6) || frame.stream != 0 {
                    return Err("a malformed SETTINGS frame".into());
                }
                for setting in payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([setting[0], setting[1]]);
                    let value =
                        u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
                    match id {
                        // HEADER_TABLE_SIZE bounds our encoder's table,
                        // which this client never uses.
                        0x1 => {}
                        0x3 => self.max_concurrent = value,
                        0x4 => {
                            if value > i32::MAX as u32 {
                                return Err("INITIAL_WINDOW_SIZE too large".into());
                            }
                            let delta = i64::from(value) - self.stream_initial_window;
                            self.stream_initial_window = i64::from(value);
                            self.stream_send_window += delta;
                        }
                        0x5 => self.max_frame_out = value as usize,
                        _ => {}
                    }
                }
                self.got_settings = true;
                frame_head(&mut self.out, 0, SETTINGS, ACK, 0);
            }
            PING if frame.flags & ACK == 0 => {
                if payload.len() != 8 {
                    return Err("a malformed PING frame".into());
                }
                let mut pong = [0; 8];
                pong.copy_from_slice(payload);
                frame_head(&mut self.out, 8, PING, ACK, 0);
                self.out.extend_from_slice(&pong);
            }
            WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err("a malformed WINDOW_UPDATE frame".into());
                }
                let increment =
                    u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        & !(1 << 31);
                if frame.stream == 0 {
                    self.send_window += i64::from(increment);
                } else if frame.stream + 2 == self.next_stream {
                    self.stream_send_window += i64::from(increment);
                }
            }
            GOAWAY => {
                let last = payload
                    .get(..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & !(1 << 31));
                let code = payload
                    .get(4..8)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                return Err(format!("GOAWAY: last stream {last:?}, code {code:?}"));
            }
            HEADERS | DATA | PUSH_PROMISE | CONTINUATION => {
                return Err(format!("frame type {} outside a call", frame.kind));
            }
            _ => {}
        }
        Ok(())
    }

    /// A header block continued: the HEADERS frame's fragment and its
    /// CONTINUATION frames', put together in `block`.
    async fn continued(&mut self, headers: &Frame) -> Outcome {
        let fragment = unpad(
            &self.buf[headers.payload.clone()],
            headers.flags,
            PRIORITY_FLAG,
        )?;
        self.block.clear();
        self.block.extend_from_slice(fragment);
        loop {
            let frame = self.frame().await?;
            if frame.kind != CONTINUATION || frame.stream != headers.stream {
                return Err("a header block interrupted".into());
            }
            self.block
                .extend_from_slice(&self.buf[frame.payload.clone()]);
            if frame.flags & END_HEADERS != 0 {
                return Ok(());
            }
        }
    }

    /// The next frame, read into the buffer as needed (control frames
    /// waiting are written first).
    async fn frame(&mut self) -> Outcome<Frame> {
        loop {
            let have = self.end - self.start;
            if have >= 9 {
                let head = &self.buf[self.start..self.start + 9];
                let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                if len > MAX_FRAME {
                    return Err(format!("a frame of {len} bytes"));
                }
                if have >= 9 + len {
                    let frame = Frame {
                        kind: head[3],
                        flags: head[4],
                        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]])
                            & !(1 << 31),
                        payload: self.start + 9..self.start + 9 + len,
                    };
                    self.start += 9 + len;
                    return Ok(frame);
                }
                if self.start + 9 + len > self.buf.len() {
                    self.compact();
                }
            } else if self.start + 9 > self.buf.len() {
                self.compact();
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            self.flush().await?;
            let read = self
                .tcp
                .read(&mut self.buf[self.end..])
                .await
                .map_err(|e| e.to_string())?;
            if read == 0 {
                return Err("the server closed the connection".into());
            }
            self.end += read;
        }
    }

    /// Moves the unread bytes to the buffer's start.
    fn compact(&mut self) {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
    }

    /// Writes the control frames waiting.
    async fn flush(&mut self) -> Outcome {
        if !self.out.is_empty() {
            self.tcp
                .write_all(&self.out)
                .await
                .map_err(|e| e.to_string())?;
            self.out.clear();
        }
        Ok(())
    }

    /// A WINDOW_UPDATE, queued.
    fn window_update(&mut self, stream: u32, increment: u32) {
        self.seen.window_updates_sent += 1;
        frame_head(&mut self.out, 4, WINDOW_UPDATE, 0, stream);
        self.out.extend_from_slice(&increment.to_be_bytes());
    }
}

/// A DATA or HEADERS payload without its padding (and, for HEADERS with
/// `priority` among the flags, its priority fields).
fn unpad(payload: &[u8], flags: u8, priority: u8) -> Outcome<&[u8]> {
    let mut payload = payload;
    let mut pad = 0;
    if flags & PADDED != 0 {
        let (&len, rest) = payload.split_first().ok_or("padding of an empty frame")?;
        pad = len as usize;
        payload = rest;
    }
    if flags & priority != 0 {
        payload = payload.get(5..).ok_or("a short PRIORITY part")?;
    }
    payload
        .len()
        .checked_sub(pad)
        .map(|len| &payload[..len])
        .ok_or_else(|| "more padding than payload".into())
}

/// What a call needs of an answer's header block.
#[derive(Default)]
struct Fields {
    status: Option<u16>,
    grpc_status: Option<u32>,
    grpc_message: Option<String>,
}

impl Fields {
    fn take(&mut self, name: &[u8], value: &[u8]) {
        let number = || std::str::from_utf8(value).ok()?.parse().ok();
        match name {
            b":status" => self.status = number().map(|n: u32| n as u16),
            b"grpc-status" => self.grpc_status = number(),
            b"grpc-message" => self.grpc_message = Some(String::from_utf8_lossy(value).into()),
            _ => {}
        }
    }
}

// -------------------------------------------------------------- HPACK ----

/// An HPACK decoder (RFC 7541): the static table, the dynamic table with
/// its inserts, evictions and size updates, integers, string literals
/// plain or Huffman-coded.
struct Hpack {
    /// The dynamic table, newest first, and its size as HPACK counts it.
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    /// Its maximum as the encoder last set it, and as our SETTINGS allow.
    max: usize,
    allowed: usize,
    huffman: Huffman,
    /// Huffman-decoded name and value, reused.
    name: Vec<u8>,
    value: Vec<u8>,
}

/// RFC 7541's static table (appendix A), index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

impl Hpack {
    fn new(allowed: usize) -> Self {
        Self {
            table: VecDeque::new(),
            size: 0,
            max: allowed,
            allowed,
            huffman: Huffman::new(),
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Decodes one whole header block, each field given to `field`.
    fn decode(&mut self, block: &[u8], mut field: impl FnMut(&[u8], &[u8])) -> Outcome {
        let mut at = 0;
        let mut fields = false;
        while at < block.len() {
            let first = block[at];
            if first & 0x80 != 0 {
                let index = integer(block, &mut at, 7)?;
                let (name, value) = entry(&self.table, index)?;
                field(name, value);
            } else if first & 0xe0 == 0x20 {
                if fields {
                    return Err("HPACK: a table size update after a field".into());
                }
                let max = integer(block, &mut at, 5)?;
                if max > self.allowed {
                    return Err(format!("HPACK: a table of {max} bytes"));
                }
                self.max = max;
                self.evict(0);
                continue;
            } else {
                // With incremental indexing (01), without (0000) or never
                // indexed (0001).
                let indexing = first & 0x40 != 0;
                let index = integer(block, &mut at, if indexing { 6 } else { 4 })?;
                let name = if index == 0 {
                    string(block, &mut at, &self.huffman, &mut self.name)?
                } else {
                    entry(&self.table, index)?.0
                };
                let value = string(block, &mut at, &self.huffman, &mut self.value)?;
                field(name, value);
                if indexing {
                    let entry = (name.to_vec(), value.to_vec());
                    self.insert(entry);
                }
            }
            fields = true;
        }
        Ok(())
    }

    /// Adds an entry, evicting the oldest to make room (all of them, and
    /// itself not added, when it is larger than the table).
    fn insert(&mut self, entry: (Vec<u8>, Vec<u8>)) {
        let size = entry.0.len() + entry.1.len() + 32;
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front(entry);
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((name, value)) = self.table.pop_back() else {
                break;
            };
            self.size -= name.len() + value.len() + 32;
        }
    }
}

/// The entry at an HPACK index: the static table's 1..=61, then the
/// dynamic table's, newest first.
fn entry(table: &VecDeque<(Vec<u8>, Vec<u8>)>, index: usize) -> Outcome<(&[u8], &[u8])> {
    match index {
        0 => Err("HPACK: index 0".into()),
        1..=61 => {
            let (name, value) = STATIC[index - 1];
            Ok((name.as_bytes(), value.as_bytes()))
        }
        _ => table
            .get(index - 62)
            .map(|(name, value)| (&name[..], &value[..]))
            .ok_or_else(|| format!("HPACK: index {index} beyond the table")),
    }
}

/// An HPACK integer with an N-bit prefix, at `at` (moved past it).
fn integer(block: &[u8], at: &mut usize, prefix: u8) -> Outcome<usize> {
    let mask = (1u8 << prefix) - 1;
    let first = block.get(*at).ok_or("HPACK: a truncated integer")? & mask;
    *at += 1;
    if first < mask {
        return Ok(usize::from(first));
    }
    let mut value = usize::from(mask);
    for shift in (0..28).step_by(7) {
        let byte = *block.get(*at).ok_or("HPACK: a truncated integer")?;
        *at += 1;
        value += usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("HPACK: an integer too large".into())
}

/// An HPACK string literal at `at` (moved past it): the block's own bytes,
/// or decoded into `scratch` when Huffman-coded.
fn string<'b>(
    block: &'b [u8],
    at: &mut usize,
    huffman: &Huffman,
    scratch: &'b mut Vec<u8>,
) -> Outcome<&'b [u8]> {
    let coded = block.get(*at).ok_or("HPACK: a truncated string")? & 0x80 != 0;
    let len = integer(block, at, 7)?;
    let bytes = block
        .get(*at..*at + len)
        .ok_or("HPACK: a truncated string")?;
    *at += len;
    if !coded {
        return Ok(bytes);
    }
    scratch.clear();
    huffman.decode(bytes, scratch)?;
    Ok(scratch)
}

/// The Huffman code's length for each symbol, 0..=255 then EOS (RFC 7541
/// appendix B). The code is canonical: codes follow from the lengths, in
/// the order of (length, symbol).
const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

/// The EOS symbol, which a string must not contain.
const EOS: u16 = 256;

/// A canonical Huffman decoder, a bit at a time: how many codes each
/// length has, and the symbols in code order.
struct Huffman {
    counts: [u16; 31],
    symbols: [u16; 257],
}

impl Huffman {
    fn new() -> Self {
        let mut counts = [0u16; 31];
        for &len in &HUFFMAN_LENGTHS {
            counts[usize::from(len)] += 1;
        }
        let mut offsets = [0u16; 31];
        for len in 1..31 {
            offsets[len] = offsets[len - 1] + counts[len - 1];
        }
        let mut symbols = [0u16; 257];
        for (symbol, &len) in HUFFMAN_LENGTHS.iter().enumerate() {
            let at = &mut offsets[usize::from(len)];
            symbols[usize::from(*at)] = symbol as u16;
            *at += 1;
        }
        Self { counts, symbols }
    }

    /// Decodes `coded` onto `out`; the padding must be under 8 bits, all
    /// ones (EOS's first bits).
    fn decode(&self, coded: &[u8], out: &mut Vec<u8>) -> Outcome {
        // The code so far, the first code of its length, the index of that
        // code's symbol, its length, and whether its bits are all ones.
        let (mut code, mut first, mut index, mut len, mut ones) =
            (0u32, 0u32, 0usize, 0usize, true);
        for &byte in coded {
            for shift in (0..8).rev() {
                let bit = u32::from(byte >> shift) & 1;
                code |= bit;
                len += 1;
                ones &= bit == 1;
                let count = u32::from(self.counts[len]);
                if code < first + count {
                    let symbol = self.symbols[index + (code - first) as usize];
                    if symbol == EOS {
                        return Err("HPACK: EOS in a Huffman string".into());
                    }
                    out.push(symbol as u8);
                    (code, first, index, len, ones) = (0, 0, 0, 0, true);
                } else if len == 30 {
                    return Err("HPACK: a Huffman code beyond 30 bits".into());
                } else {
                    index += count as usize;
                    first = (first + count) << 1;
                    code <<= 1;
                }
            }
        }
        if len > 7 || !ones {
            return Err("HPACK: a Huffman string's padding is not EOS".into());
        }
        Ok(())
    }
}

/// The decoder against RFC 7541's examples (`cargo test --release
/// --example h2_unary`).
#[cfg(test)]
mod tests {
    use super::*;

    fn decode(hpack: &mut Hpack, block: &[u8]) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        hpack
            .decode(block, |n, v| fields.push((text(n), text(v))))
            .unwrap();
        fields
    }

    fn table(hpack: &Hpack) -> Vec<(&[u8], &[u8])> {
        hpack.table.iter().map(|(n, v)| (&n[..], &v[..])).collect()
    }

    /// C.6: three responses, Huffman-coded, in a 256-byte table (inserts
    /// and evictions).
    #[test]
    fn responses_with_huffman() {
        let mut hpack = Hpack::new(256);
        let first = decode(
            &mut hpack,
            &[
                0x48, 0x82, 0x64, 0x02, 0x58, 0x85, 0xae, 0xc3, 0x77, 0x1a, 0x4b, 0x61, 0x96, 0xd0,
                0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04, 0x0b, 0x81,
                0x66, 0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff, 0x6e, 0x91, 0x9d, 0x29, 0xad, 0x17, 0x18,
                0x63, 0xc7, 0x8f, 0x0b, 0x97, 0xc8, 0xe9, 0xae, 0x82, 0xae, 0x43, 0xd3,
            ],
        );
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            first,
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ])
        );
        assert_eq!(hpack.size, 222);
        let second = decode(
            &mut hpack,
            &[0x48, 0x83, 0x64, 0x0e, 0xff, 0xc1, 0xc0, 0xbf],
        );
        assert_eq!(second[0], (":status".into(), "307".into()));
        assert_eq!(
            second[3],
            ("location".into(), "https://www.example.com".into())
        );
        assert_eq!(hpack.size, 222);
        let third = decode(
            &mut hpack,
            &[
                0x88, 0xc1, 0x61, 0x96, 0xd0, 0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20,
                0x05, 0x95, 0x04, 0x0b, 0x81, 0x66, 0xe0, 0x84, 0xa6, 0x2d, 0x1b, 0xff, 0xc0, 0x5a,
                0x83, 0x9b, 0xd9, 0xab, 0x77, 0xad, 0x94, 0xe7, 0x82, 0x1d, 0xd7, 0xf2, 0xe6, 0xc7,
                0xb3, 0x35, 0xdf, 0xdf, 0xcd, 0x5b, 0x39, 0x60, 0xd5, 0xaf, 0x27, 0x08, 0x7f, 0x36,
                0x72, 0xc1, 0xab, 0x27, 0x0f, 0xb5, 0x29, 0x1f, 0x95, 0x87, 0x31, 0x60, 0x65, 0xc0,
                0x03, 0xed, 0x4e, 0xe5, 0xb1, 0x06, 0x3d, 0x50, 0x07,
            ],
        );
        assert_eq!(
            third,
            pairs(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ("location", "https://www.example.com"),
                ("content-encoding", "gzip"),
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
                ),
            ])
        );
        let set_cookie: &[u8] = b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        assert_eq!(
            table(&hpack),
            [
                (&b"set-cookie"[..], set_cookie),
                (b"content-encoding", b"gzip"),
                (b"date", b"Mon, 21 Oct 2013 20:13:22 GMT"),
            ]
        );
        assert_eq!(hpack.size, 215);
    }

    /// A size update: allowed first, evicting; refused after a field or
    /// above our SETTINGS.
    #[test]
    fn size_updates() {
        let mut hpack = Hpack::new(4096);
        // A literal with indexing (custom-key: custom-header, C.2.1).
        let mut block = vec![0x40, 0x0a];
        block.extend_from_slice(b"custom-key");
        block.push(0x0d);
        block.extend_from_slice(b"custom-header");
        decode(&mut hpack, &block);
        assert_eq!(hpack.size, 55);
        decode(&mut hpack, &[0x20, 0x82]);
        assert_eq!((hpack.size, hpack.table.len()), (0, 0));
        assert!(hpack.decode(&[0x82, 0x20], |_, _| {}).is_err());
        assert!(hpack.decode(&[0x3f, 0xe2, 0x1f], |_, _| {}).is_err());
    }

    /// The answer check takes the sums and refuses anything else.
    #[test]
    fn answer_check() {
        use tensorgate_proto::inference::model_infer_response::InferOutputTensor;
        let [a, b] = inputs();
        let answer = |skew: f32| {
            let output = |name: &str| InferOutputTensor {
                name: name.into(),
                datatype: "FP32".into(),
                shape: vec![ELEMENTS as i64],
                ..Default::default()
            };
            let raw = |v: Vec<f32>| -> Bytes { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
            ModelInferResponse {
                outputs: vec![output("OUTPUT1"), output("OUTPUT0")],
                raw_output_contents: vec![
                    raw(a.iter().zip(&b).map(|(x, y)| x - y).collect()),
                    raw(a.iter().zip(&b).map(|(x, y)| x + y + skew).collect()),
                ],
                ..Default::default()
            }
            .encode_to_vec()
        };
        assert_eq!(outputs(&answer(0.0)), Ok(()));
        assert!(outputs(&answer(1.0)).is_err());
        let mut framed = vec![0, 0, 0, 0, answer(0.0).len() as u8];
        framed.extend_from_slice(&answer(0.0));
        let mut check = Check::default();
        assert_eq!(check.answer(&framed, false), Ok(()));
        assert!(check.answer(&framed[..framed.len() - 1], false).is_err());
    }

    /// Huffman padding longer than 7 bits or not all ones is refused.
    #[test]
    fn huffman_padding() {
        let huffman = Huffman::new();
        let mut out = Vec::new();
        // "www.example.com" (C.4.1).
        let coded = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        huffman.decode(&coded, &mut out).unwrap();
        assert_eq!(out, b"www.example.com");
        assert!(huffman
            .decode(&[0xf1, 0xe3, 0xff], &mut Vec::new())
            .is_err());
        assert!(huffman.decode(&[0x00], &mut Vec::new()).is_err());
    }
}
