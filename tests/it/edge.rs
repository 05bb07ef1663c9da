//! The connection layer through the real binary (`tensorgate demo` on free
//! loopback ports): deadlines for silent, trickling and idle connections,
//! JSON refusals for every malformed request, the connection cap and the
//! file limit, and a taken port (closing and draining: `closing.rs`).
//! Deadlines here are short; the assertions only bound them from above
//! with a wide margin, so a busy machine cannot fail them.

use crate::support::raw::{self, header};
use crate::support::GatewayProcess;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A gateway process with its config, admin and gRPC ports.
pub(super) struct Gw {
    pub(super) process: GatewayProcess,
    pub(super) http: SocketAddr,
    pub(super) admin: SocketAddr,
    pub(super) grpc: SocketAddr,
    config: std::path::PathBuf,
}

impl Gw {
    /// `tensorgate demo` with `toml` as its config file, run through
    /// `prefix` (e.g. `prlimit`) if given; every listener on port 0.
    pub(super) fn start(toml: &str, prefix: &[&str]) -> Gw {
        Gw::start_logging(toml, prefix, None)
    }

    /// [`Gw::start`], its log (stderr) written to `log` if given.
    pub(super) fn start_logging(toml: &str, prefix: &[&str], log: Option<&std::path::Path>) -> Gw {
        static CONFIGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CONFIGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let config =
            std::env::temp_dir().join(format!("tensorgate-edge-{}-{n}.toml", std::process::id()));
        std::fs::write(&config, toml).unwrap();
        let program = [prefix, &[env!("CARGO_BIN_EXE_tensorgate")]].concat();
        let args = [
            "demo",
            "--config",
            config.to_str().unwrap(),
            "--admin-listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
        ];
        let process = GatewayProcess::spawn_with(&program, &args, log);
        Gw {
            http: process.addr,
            admin: process.admin.expect("admin listener"),
            grpc: process.grpc.expect("gRPC listener"),
            process,
            config,
        }
    }

    pub(super) fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.http).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
    }
}

impl Drop for Gw {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}

/// Reads until the peer closes (or the 30 s read timeout): what arrived.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("connection was not closed: {e}; got {out:?}"),
        }
    }
}

/// One answer, its body as text.
fn read_answer(stream: &mut TcpStream) -> (String, String) {
    let (head, body) = raw::read_answer(stream);
    (head, String::from_utf8(body).unwrap())
}

const SHORT: &str = "[connections]\nhandshake_timeout_ms = 2000\nheader_timeout_ms = 1000\nkeepalive_timeout_ms = 1000\n";

/// Generous upper bound for "closed within its deadline" (deadlines are
/// at most 2 s here; a debug build on a busy machine is slow, not 10 s slow).
const MARGIN: Duration = Duration::from_secs(10);

/// What a slow client does first on its connection.
type Opening = Box<dyn FnOnce(&mut TcpStream) + Send>;

#[test]
fn silent_partial_trickling_and_idle_connections_are_closed() {
    let gw = Gw::start(SHORT, &[]);
    let kinds: Vec<(&str, Opening)> = vec![
        ("silent", Box::new(|_| {})),
        (
            "partial head",
            Box::new(|s| s.write_all(b"GET /v2 HTTP/1.1\r\nHo").unwrap()),
        ),
        (
            "partial h2c preface",
            Box::new(|s| s.write_all(b"PRI * HTTP/2.0\r\n").unwrap()),
        ),
        (
            "idle keep-alive",
            Box::new(|s| {
                s.write_all(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
                    .unwrap();
                let (head, _) = read_answer(s);
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            }),
        ),
    ];
    let threads: Vec<_> = kinds
        .into_iter()
        .map(|(name, start)| {
            let addr = gw.http;
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(addr).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                start(&mut stream);
                let since = Instant::now();
                let rest = read_to_close(&mut stream);
                (
                    name,
                    since.elapsed(),
                    String::from_utf8_lossy(&rest).into_owned(),
                )
            })
        })
        .collect();
    // A trickle: one byte every 50 ms never finishes the head in time.
    let mut trickle = gw.connect();
    let since = Instant::now();
    let head = format!("GET /v2 HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "a".repeat(400));
    for byte in head.as_bytes() {
        if trickle.write_all(&[*byte]).is_err() || since.elapsed() > MARGIN {
            break;
        }
        trickle
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut peek = [0u8; 1];
        if trickle.peek(&mut peek).is_ok() {
            break; // the gateway answered (or closed)
        }
    }
    trickle
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut trickle)).into_owned();
    assert!(
        since.elapsed() < MARGIN,
        "trickle held {:?}",
        since.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains(r#"{"error":"the request head did not arrive within 1000 ms"#));
    for thread in threads {
        let (name, took, rest) = thread.join().unwrap();
        assert!(took < MARGIN, "{name}: held {took:?}");
        if name == "partial head" {
            assert!(rest.starts_with("HTTP/1.1 408"), "{name}: {rest}");
            assert!(rest.contains("Connection: close"), "{name}: {rest}");
        } else {
            assert_eq!(rest, "", "{name}: closed without an answer");
        }
    }
}

#[test]
fn malformed_requests_get_json_refusals() {
    let gw = Gw::start("", &[]);
    let post = "POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: t\r\n";
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "garbage",
            b"GARBAGE\r\n\r\n".to_vec(),
            400,
            "malformed HTTP request head",
        ),
        (
            "version",
            b"GET /v2 HTTP/9.9\r\n\r\n".to_vec(),
            400,
            "invalid HTTP version",
        ),
        (
            "negative length",
            format!("{post}Content-Length: -1\r\n\r\n").into_bytes(),
            400,
            "Content-Length",
        ),
        (
            "two lengths",
            format!("{post}Content-Length: 1\r\nContent-Length: 2\r\n\r\nab").into_bytes(),
            400,
            "Content-Length",
        ),
        (
            "obfuscated transfer-encoding",
            format!("{post}Transfer-Encoding: xchunked\r\n\r\n").into_bytes(),
            400,
            "Transfer-Encoding",
        ),
        (
            "chunk size zz",
            format!("{post}Transfer-Encoding: chunked\r\n\r\nzz\r\n").into_bytes(),
            400,
            "malformed chunked request body",
        ),
        (
            "chunk size -1",
            format!("{post}Transfer-Encoding: chunked\r\n\r\n-1\r\n").into_bytes(),
            400,
            "malformed chunked request body",
        ),
        (
            "chunk size 2^64",
            format!("{post}Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\nx").into_bytes(),
            400,
            "malformed chunked request body",
        ),
        (
            "10,000 headers",
            format!("GET /v2 HTTP/1.1\r\n{}\r\n", "X-A: b\r\n".repeat(10_000)).into_bytes(),
            431,
            "too many header fields",
        ),
        (
            "1 MiB URL",
            format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(1 << 20)).into_bytes(),
            431,
            "larger than 1048575 bytes",
        ),
    ];
    for (name, request, status, text) in cases {
        let mut stream = gw.connect();
        // A large head may be refused before all of it is written.
        let _ = stream.write_all(&request);
        let answer = String::from_utf8_lossy(&read_to_close(&mut stream)).into_owned();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{name}: {answer}"
        );
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert_eq!(
            header(head, "content-type").as_deref(),
            Some("application/json"),
            "{name}"
        );
        assert_eq!(
            header(head, "connection").as_deref(),
            Some("close"),
            "{name}"
        );
        // Refused heads too say who answered.
        assert_eq!(
            header(head, "via").as_deref(),
            Some("1.1 tensorgate"),
            "{name}"
        );
        assert!(body.starts_with(r#"{"error":""#), "{name}: {body}");
        assert!(body.contains(text), "{name}: {body}");
    }
}

#[test]
fn a_taken_port_ends_the_process_at_once_naming_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tensorgate"))
        .args(["demo", "--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr} (server.listen)")),
        "{stderr}"
    );
    assert!(stderr.contains("Address already in use"), "{stderr}");
}

/// Opens connections that send one byte each (so they pass the first-bytes
/// deadline and hold their slot while the head is unfinished).
fn hold(gw: &Gw, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = gw.connect();
            s.write_all(b"G").unwrap();
            s
        })
        .collect()
}

/// A new client's answer to `GET /v2/health/live`: status and connection.
fn probe(gw: &Gw) -> (String, String) {
    let mut s = gw.connect();
    let _ = s.write_all(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n");
    let answer = String::from_utf8_lossy(&read_to_close_or_answer(&mut s)).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (head.to_string(), body.to_string())
}

/// Reads a whole answer head and body: to the close, or the end of the
/// Content-Length body on a kept-alive connection.
fn read_to_close_or_answer(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).into_owned();
            let len: usize = header(&head, "content-length").map_or(0, |v| v.parse().unwrap());
            if out.len() >= end + 4 + len {
                return out;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn the_connection_cap_refuses_at_once_and_admin_still_answers() {
    // One serving thread: it accepts and admits in the order clients
    // connected. With two, one thread could admit the probe while the
    // other had yet to admit the fourth held client, and the probe would
    // be served (seen once, under a loaded machine).
    let gw = Gw::start(
        "[server]\nthreads = 1\n[connections]\nmax_connections = 4\nheader_timeout_ms = 60000\n",
        &[],
    );
    let held = hold(&gw, 4);
    let since = Instant::now();
    let (head, body) = probe(&gw);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert_eq!(header(&head, "connection").as_deref(), Some("close"));
    assert!(body.contains("connections.max_connections is 4"), "{body}");
    assert!(since.elapsed() < MARGIN);
    // The admin listener is outside the cap.
    let mut admin = TcpStream::connect(gw.admin).unwrap();
    admin
        .write_all(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(read_answer(&mut admin).0.starts_with("HTTP/1.1 200"));
    // Over the cap, a gRPC client is told no stream was processed: the
    // server's SETTINGS, then GOAWAY with last stream 0, REFUSED_STREAM.
    let mut grpc = TcpStream::connect(gw.grpc).unwrap();
    grpc.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let goaway = [
        [0, 0, 0, 4, 0, 0, 0, 0, 0].as_slice(),
        &[0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7],
    ]
    .concat();
    assert_eq!(read_to_close(&mut grpc), goaway);
    // A freed slot serves the next client.
    drop(held);
    let served = (0..2000).any(|_| probe(&gw).0.starts_with("HTTP/1.1 200"));
    assert!(served, "a freed slot was not reused");
}

#[test]
fn with_a_1024_file_limit_new_clients_are_still_answered() {
    let gw = Gw::start(
        "[connections]\nheader_timeout_ms = 60000\n",
        &["prlimit", "--nofile=1024:1024"],
    );
    // 1024 files less the 256 reserved: 768 client connections at most.
    let held = hold(&gw, 800);
    let since = Instant::now();
    let (head, body) = probe(&gw);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(
        body.contains("connections.max_connections is 768"),
        "{body}"
    );
    assert!(since.elapsed() < MARGIN);
    let mut admin = TcpStream::connect(gw.admin).unwrap();
    admin
        .write_all(b"GET /backends HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (admin_head, _) = read_answer(&mut admin);
    assert!(admin_head.starts_with("HTTP/1.1 200"), "{admin_head}");
    drop(held);
    let served = (0..2000).any(|_| probe(&gw).0.starts_with("HTTP/1.1 200"));
    assert!(served, "clients were not served after the flood ended");
}

#[test]
fn silent_grpc_connections_are_closed() {
    let gw = Gw::start(SHORT, &[]);
    let mut silent = TcpStream::connect(gw.grpc).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let since = Instant::now();
    assert_eq!(read_to_close(&mut silent), b"");
    assert!(since.elapsed() < MARGIN);
}
