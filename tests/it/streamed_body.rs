//! Binary `/infer` bodies streamed upstream as they arrive (`body.rs`,
//! `front::http::session::stream_body`): through the real binary, in front of a
//! demo upstream of the test's own whose counters say whether the model
//! ran. A streamed request answers exactly as one read whole; a body that
//! ends early, runs long or breaks off never completes the upstream's
//! message, and the client gets Triton's text.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tensorgate_demo::DemoUpstream;

use crate::support::raw::{header, read_answer};
use crate::support::{eventually, GatewayProcess};

/// Elements per input: 2 × 2.4 MB, above the 4 MiB streaming threshold.
pub(super) const N: usize = 600_000;

struct Setup {
    demo: DemoUpstream,
    gw: GatewayProcess,
}

fn setup() -> Setup {
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    let gw = GatewayProcess::with_upstream(demo.local_addr());
    Setup { demo, gw }
}

fn connect(gw: &GatewayProcess) -> TcpStream {
    crate::support::raw::connect(gw.addr)
}

/// `add_sub`'s inputs as FP32 bytes: INPUT0 = i, INPUT1 = 2i.
fn inputs(n: usize) -> (Vec<u8>, Vec<u8>) {
    let bytes = |k: f32| (0..n).flat_map(|i| (i as f32 * k).to_le_bytes()).collect();
    (bytes(1.0), bytes(2.0))
}

/// A binary `add_sub` request: its JSON header (declaring `n` elements
/// each) and its tail.
pub(super) fn add_sub(n: usize) -> (String, Vec<u8>) {
    let json = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[{n}],"parameters":{{"binary_data_size":{b}}}}},{{"name":"INPUT1","datatype":"FP32","shape":[{n}],"parameters":{{"binary_data_size":{b}}}}}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":true}}}}]}}"#,
        b = n * 4
    );
    let (a, b) = inputs(n);
    (json, [a, b].concat())
}

fn head(json: &str, length: &str) -> String {
    format!(
        "POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: t\r\nInference-Header-Content-Length: {}\r\n{length}\r\n",
        json.len()
    )
}

/// An `add_sub` request with `Content-Length`, its body `json` + `tail`.
pub(super) fn declared(json: &str, tail: &[u8]) -> Vec<u8> {
    let length = format!("Content-Length: {}\r\n", json.len() + tail.len());
    [head(json, &length).as_bytes(), json.as_bytes(), tail].concat()
}

/// An `add_sub` request with a chunked `body` (see [`chunked`]).
fn chunked_request(json: &str, body: &[u8], size: usize, end: bool) -> Vec<u8> {
    let mut request = head(json, "Transfer-Encoding: chunked\r\n").into_bytes();
    request.extend(chunked(body, size, end));
    request
}

/// Sends `request` and reads the answer: a 400, whose body it returns.
/// The gateway may refuse before the body has all arrived and close the
/// connection, so the rest of the write can fail (EPIPE, reset): that is
/// not the outcome under test, the answer is.
fn refused(s: &mut TcpStream, request: &[u8]) -> String {
    let _ = s.write_all(request);
    let (h, b) = read_answer(s);
    assert!(h.starts_with("HTTP/1.1 400"), "{h}");
    String::from_utf8(b).unwrap()
}

/// A small request on `s` is answered, and it is the demo's `runs`th.
fn still_served(s: &mut TcpStream, demo: &DemoUpstream, runs: u64) {
    let (json, tail) = add_sub(4);
    s.write_all(&declared(&json, &tail)).unwrap();
    let (h, b) = read_answer(s);
    assert_added(&h, &b, 4);
    assert_eq!(demo.infer_count(), runs);
}

/// The body in HTTP chunks of `size` bytes; the last chunk (`0`) only if
/// `end`.
fn chunked(body: &[u8], size: usize, end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in body.chunks(size) {
        out.extend(format!("{:x}\r\n", chunk.len()).bytes());
        out.extend(chunk);
        out.extend(b"\r\n");
    }
    if end {
        out.extend(b"0\r\n\r\n");
    }
    out
}

/// OUTPUT0 = INPUT0 + INPUT1 = 3i, as the answer's binary tail.
fn expected_output(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (i as f32 * 3.0).to_le_bytes())
        .collect()
}

pub(super) fn assert_added(head: &str, body: &[u8], n: usize) {
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let json_len: usize = header(head, "inference-header-content-length")
        .expect("binary answer")
        .parse()
        .unwrap();
    assert_eq!(&body[json_len..], expected_output(n).as_slice());
}

#[test]
fn a_large_body_streams_and_answers_as_one_read_whole() {
    let Setup { demo, gw } = setup();
    let (json, tail) = add_sub(N);
    // Declared length, sent in one write.
    let mut s = connect(&gw);
    s.write_all(&declared(&json, &tail)).unwrap();
    let (h, b) = read_answer(&mut s);
    assert_added(&h, &b, N);
    // Chunked, in pieces that cut the header and the tensors anywhere, on
    // the same connection (the body was read to its end).
    let body = [json.as_bytes(), &tail].concat();
    s.write_all(&chunked_request(&json, &body, 100_003, true))
        .unwrap();
    let (h, b) = read_answer(&mut s);
    assert_added(&h, &b, N);
    assert_eq!(demo.infer_count(), 2);
    // What the upstream got is the client's bytes, in order.
    let sent = demo.last_request().expect("a request");
    let (a, b) = inputs(N);
    assert_eq!(sent.raw_input_contents, vec![a, b]);
}

#[test]
fn a_chunked_body_that_ends_early_never_runs_the_model() {
    let Setup { demo, gw } = setup();
    let (json, tail) = add_sub(N);
    let body = [json.as_bytes(), &tail[..tail.len() - 1000]].concat();
    let mut s = connect(&gw);
    assert_eq!(
        refused(&mut s, &chunked_request(&json, &body, 65_536, true)),
        r#"{"error":"unexpected size for input 'INPUT1', expecting 1000 additional bytes for model 'add_sub'"}"#
    );
    assert_eq!(demo.infer_count(), 0);
    // The connection and the upstream still serve the next request.
    still_served(&mut s, &demo, 1);
}

#[test]
fn a_chunked_body_that_runs_long_never_runs_the_model() {
    let Setup { demo, gw } = setup();
    let (json, tail) = add_sub(N);
    let body = [json.as_bytes(), &tail, b"extra"].concat();
    let mut s = connect(&gw);
    assert_eq!(
        refused(&mut s, &chunked_request(&json, &body, 65_536, true)),
        r#"{"error":"unexpected additional input data for model 'add_sub'"}"#
    );
    assert_eq!(demo.infer_count(), 0);
}

#[test]
fn declared_sizes_that_miss_the_content_length_are_refused_before_sending() {
    let Setup { demo, gw } = setup();
    let (json, tail) = add_sub(N);
    let mut s = connect(&gw);
    assert_eq!(
        refused(&mut s, &declared(&json, &tail[..tail.len() - 8])),
        r#"{"error":"unexpected size for input 'INPUT1', expecting 8 additional bytes for model 'add_sub'"}"#
    );
    assert_eq!(demo.infer_count(), 0);
}

#[test]
fn a_client_that_leaves_mid_body_never_runs_the_model() {
    let Setup { demo, gw } = setup();
    let (json, tail) = add_sub(N);
    let request = declared(&json, &tail);
    let mut s = connect(&gw);
    s.write_all(&request[..request.len() / 2]).unwrap();
    drop(s);
    // The gateway keeps serving; the broken request never reached the model.
    still_served(&mut connect(&gw), &demo, 1);
}

#[test]
fn a_large_bytes_input_is_read_whole_and_its_framing_checked() {
    let Setup { demo, gw } = setup();
    let element = vec![b'x'; 2_200_000];
    let mut tail = Vec::new();
    for _ in 0..2 {
        tail.extend((element.len() as u32).to_le_bytes());
        tail.extend(&element);
    }
    let json = |size: usize| {
        format!(
            r#"{{"inputs":[{{"name":"INPUT0","datatype":"BYTES","shape":[1,2],"parameters":{{"binary_data_size":{size}}}}}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":true}}}}]}}"#
        )
    };
    let send = |tail: &[u8]| {
        let json = json(tail.len());
        let mut s = connect(&gw);
        let mut request = format!(
            "POST /v2/models/identity_bytes/infer HTTP/1.1\r\nHost: t\r\nInference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n",
            json.len(),
            json.len() + tail.len()
        )
        .into_bytes();
        request.extend(json.bytes().chain(tail.iter().copied()));
        s.write_all(&request).unwrap();
        read_answer(&mut s)
    };
    let (h, b) = send(&tail);
    assert!(h.starts_with("HTTP/1.1 200"), "{h}");
    assert!(b.ends_with(&tail));
    // One element too many for the shape: Triton core's text.
    tail.extend(1u32.to_le_bytes());
    tail.push(b'y');
    let (h, b) = send(&tail);
    assert!(h.starts_with("HTTP/1.1 400"), "{h}");
    let text = String::from_utf8(b).unwrap();
    assert!(
        text.contains("unexpected number of string elements"),
        "{text}"
    );
    assert_eq!(demo.infer_count(), 1);
}

#[test]
fn a_bytes_input_read_whole_keeps_the_whole_body_limit() {
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    let (gw, config) = with_limits(&demo, "max_body_size = 1000000\n");
    let mut tail = Vec::new();
    tail.extend(4_500_000u32.to_le_bytes());
    tail.extend(vec![b'x'; 4_500_000]);
    let json = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"parameters":{{"binary_data_size":{}}}}}]}}"#,
        tail.len()
    );
    let head = format!(
        "POST /v2/models/identity_bytes/infer HTTP/1.1\r\nHost: t\r\nInference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n{json}",
        json.len(),
        json.len() + tail.len()
    );
    let mut s = connect(&gw);
    // Refused from its declared length, before its rest is read: only the
    // head is sent, so closing after the answer cannot reset it.
    s.write_all(head.as_bytes()).unwrap();
    let (h, b) = read_answer(&mut s);
    let _ = std::fs::remove_file(&config);
    assert!(h.starts_with("HTTP/1.1 413"), "{h}");
    assert_eq!(
        String::from_utf8(b).unwrap(),
        format!(
            r#"{{"error":"request body of {} bytes exceeds the maximum allowed size of 1000000 bytes. Use --max-body-size to increase the limit."}}"#,
            json.len() + tail.len()
        )
    );
    assert_eq!(demo.infer_count(), 0);
}

/// A TCP relay in front of an upstream that counts the bytes sent to it.
pub(super) struct Relay {
    pub(super) addr: SocketAddr,
    sent: Arc<AtomicU64>,
}

impl Relay {
    pub(super) fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(upstream) else {
                    return;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let counter = counter.clone();
                std::thread::spawn(move || copy(client, server, Some(&counter)));
                std::thread::spawn(move || copy(s2, c2, None));
            }
        });
        Relay { addr, sent }
    }

    pub(super) fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

fn copy(mut from: TcpStream, mut to: TcpStream, counter: Option<&AtomicU64>) {
    use std::io::Read;
    let mut buffer = vec![0; 64 << 10];
    while let Ok(n @ 1..) = from.read(&mut buffer) {
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
        if let Some(counter) = counter {
            counter.fetch_add(n as u64, Ordering::SeqCst);
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

#[test]
fn the_upstream_gets_the_first_tensor_bytes_while_the_client_still_sends() {
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    let relay = Relay::start(demo.local_addr());
    let gw = GatewayProcess::with_upstream(relay.addr);
    let (json, tail) = add_sub(N);
    let request = declared(&json, &tail);
    let half = request.len() - tail.len() / 2;
    let mut s = connect(&gw);
    let before = relay.sent();
    s.write_all(&request[..half]).unwrap();
    // The first half's bytes reach the upstream before the second half is
    // sent: all but what the queues in between hold (at most 1 MiB in the
    // gateway's body queue, and the HTTP/2 window).
    assert!(
        eventually(|| relay.sent() > before + (1 << 20)),
        "only {} bytes reached the upstream",
        relay.sent() - before
    );
    assert_eq!(demo.infer_count(), 0);
    s.write_all(&request[half..]).unwrap();
    let (h, b) = read_answer(&mut s);
    assert_added(&h, &b, N);
    assert_eq!(demo.infer_count(), 1);
}

/// A gateway in front of `demo` with the given `[limits]` lines.
fn with_limits(demo: &DemoUpstream, limits: &str) -> (GatewayProcess, std::path::PathBuf) {
    with_config(demo, &format!("[limits]\n{limits}"), &[])
}

/// A gateway in front of `demo` with `toml` as its configuration file.
pub(super) fn with_config(
    demo: &DemoUpstream,
    toml: &str,
    extra: &[&str],
) -> (GatewayProcess, std::path::PathBuf) {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("tensorgate-streamed-{}-{n}.toml", std::process::id());
    let config = std::env::temp_dir().join(name);
    std::fs::write(&config, toml).unwrap();
    let upstream = demo.local_addr().to_string();
    let gw = GatewayProcess::spawn_with(
        &[env!("CARGO_BIN_EXE_tensorgate")],
        &[
            "--upstream",
            &upstream,
            "--config",
            config.to_str().unwrap(),
        ]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>(),
        None,
    );
    (gw, config)
}

#[test]
fn a_streamed_body_has_its_own_size_limit() {
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    let (gw, config) = with_limits(
        &demo,
        "max_body_size = 1000000\nmax_streamed_body_size = 6000000\n",
    );
    let (json, tail) = add_sub(N);
    // 4.8 MB: above the whole-body limit, streamed, within its own.
    let mut s = connect(&gw);
    s.write_all(&declared(&json, &tail)).unwrap();
    let (h, b) = read_answer(&mut s);
    assert_added(&h, &b, N);
    // Chunked, just past 6 MB, and no more: the gateway reads what was
    // sent (so closing after the answer cannot reset the connection).
    let (json, tail) = add_sub(2 * N);
    let body = [json.as_bytes(), &tail].concat();
    let mut s = connect(&gw);
    s.write_all(&chunked_request(&json, &body[..6_100_000], 65_536, false))
        .unwrap();
    let (h, b) = read_answer(&mut s);
    let _ = std::fs::remove_file(&config);
    assert!(h.starts_with("HTTP/1.1 413"), "{h}");
    let text = String::from_utf8(b).unwrap();
    assert!(
        text.ends_with("exceeds the maximum allowed size of 6000000 bytes. Use limits.max_streamed_body_size to increase the limit.\"}"),
        "{text}"
    );
    assert_eq!(demo.infer_count(), 1);
}

/// A streamed answer (a streamed body, every output binary) is logged
/// at its head while its call still runs in a task of its own: its
/// access-log line still names the backend and counts the upstream time.
#[test]
fn a_streamed_answers_access_log_names_its_backend_and_upstream_time() {
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    let (gw, config) = with_config(&demo, "[log]\nformat = \"json\"\n", &[]);
    let (json, tail) = add_sub(N);
    let mut s = connect(&gw);
    // The first request also looks the model up upstream; the second
    // finds it cached, so only its streamed call is upstream.
    for _ in 0..2 {
        s.write_all(&declared(&json, &tail)).unwrap();
        let (h, b) = read_answer(&mut s);
        assert_added(&h, &b, N);
    }
    let _ = std::fs::remove_file(&config);
    let access = || {
        gw.log_text()
            .lines()
            .filter(|l| l.contains(r#""target":"tensorgate::access""#))
            .nth(1)
            .map(str::to_string)
    };
    assert!(eventually(|| access().is_some()), "{}", gw.log_text());
    let line = access().unwrap_or_default();
    let backend = format!(r#""backend":"{}""#, demo.local_addr());
    assert!(line.contains(&backend), "{backend} missing in {line}");
    let upstream_us = line
        .split(r#""upstream_us":"#)
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(upstream_us.is_some_and(|us| us > 0), "{line}");
}

/// Bytes `at..at + len` of the 1 GiB tensor: a pattern a cut or a shift
/// would break, byte `i` being `i % 251`. Made by copying one period and
/// then doubling what is there (the length stays a whole number of
/// periods): a loop over the bytes took most of the CPU of the two 1 GiB
/// tests in a debug build, measured with perf.
pub(super) fn pattern(at: usize, len: usize) -> Vec<u8> {
    const PERIOD: usize = 251;
    let mut bytes: Vec<u8> = (0..PERIOD).map(|i| ((at + i) % PERIOD) as u8).collect();
    bytes.reserve(len.saturating_sub(PERIOD));
    while bytes.len() < len {
        bytes.extend_from_within(..bytes.len().min(len - bytes.len()));
    }
    bytes.truncate(len);
    bytes
}

/// Asserts the gateway's peak RSS stayed within `limit` bytes.
pub(super) fn assert_peak_within(pid: u32, limit: u64) {
    let peak = peak_rss(pid);
    assert!(peak <= limit, "the gateway peaked at {} MiB", peak >> 20);
}

/// The gateway's peak RSS (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

#[test]
fn a_1_gib_tensor_passes_both_ways_in_bounded_memory() {
    const SIZE: usize = 1 << 30;
    const BLOCK: usize = 1 << 20;
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    // Debug builds move 2 GiB slowly on a busy machine: deadlines far
    // beyond what the transfer takes.
    let (gw, config) = with_config(
        &demo,
        "[limits]\nbody_timeout_ms = 600000\n[upstream]\nrequest_timeout_ms = 600000\n",
        &[],
    );
    let json = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"UINT8","shape":[1,{SIZE}],"parameters":{{"binary_data_size":{SIZE}}}}}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":true}}}}]}}"#
    );
    let mut s = connect(&gw);
    // The answer's head comes once the upstream has the whole gigabyte.
    s.set_read_timeout(Some(std::time::Duration::from_secs(600)))
        .unwrap();
    let mut writer = s.try_clone().unwrap();
    let head = format!(
        "POST /v2/models/identity_uint8/infer HTTP/1.1\r\nHost: t\r\nInference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n{json}",
        json.len(),
        json.len() + SIZE
    );
    // The body is written while the answer is read: neither is ever whole
    // in this process's buffers (the demo holds it, as a server would).
    let sending = std::thread::spawn(move || {
        writer.write_all(head.as_bytes()).unwrap();
        for at in (0..SIZE).step_by(BLOCK) {
            writer.write_all(&pattern(at, BLOCK)).unwrap();
        }
    });
    let mut answer_head = Vec::new();
    let mut byte = [0u8; 1];
    while !answer_head.ends_with(b"\r\n\r\n") {
        std::io::Read::read_exact(&mut s, &mut byte).unwrap();
        answer_head.push(byte[0]);
    }
    let answer_head = String::from_utf8(answer_head).unwrap();
    assert!(answer_head.starts_with("HTTP/1.1 200"), "{answer_head}");
    let json_len: usize = header(&answer_head, "inference-header-content-length")
        .unwrap()
        .parse()
        .unwrap();
    let length: usize = header(&answer_head, "content-length")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(length, json_len + SIZE);
    let mut json_back = vec![0; json_len];
    std::io::Read::read_exact(&mut s, &mut json_back).unwrap();
    assert!(String::from_utf8(json_back)
        .unwrap()
        .contains(&format!(r#""binary_data_size":{SIZE}"#)));
    let mut block = vec![0; BLOCK];
    for at in (0..SIZE).step_by(BLOCK) {
        std::io::Read::read_exact(&mut s, &mut block).unwrap();
        assert!(
            block == pattern(at, BLOCK),
            "output differs in the block at {at}"
        );
    }
    sending.join().unwrap();
    let _ = std::fs::remove_file(&config);
    assert_peak_within(gw.child.id(), 128 << 20);
    assert_eq!(demo.infer_count(), 1);
}
