//! Closing without losing a request, through the real binary: every close
//! after an answer is a lingering one, so a client still writing its
//! request or body reads the answer instead of a reset (over the cap,
//! after an early refusal); SIGTERM serves what arrives on open
//! connections with `Connection: close`, sends h2 clients GOAWAY, closes
//! idle connections with a FIN when the grace period ends, and counts what
//! it cuts. Nothing here waits on a timer: each step waits for the
//! gateway's answer, its close, or a condition (the listener refusing
//! connections once the drain has begun). `linger_ms` is long in these
//! configs, so the clients' own pace never meets it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

use super::edge::Gw;
use super::process::post;
use crate::support::eventually;
use crate::support::raw::{self, header};

const ADD_SUB: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}]}"#;

/// One answer: head and body as text.
fn read_answer(stream: &mut TcpStream) -> (String, String) {
    let (head, body) = raw::read_answer(stream);
    (head, String::from_utf8(body).unwrap())
}

/// The gateway closed the connection with a FIN: the next read ends the
/// stream. A reset here is what this story forbids.
#[track_caller]
fn assert_fin(stream: &mut TcpStream) {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => {}
        Ok(_) => panic!("bytes after the answer"),
        Err(e) => panic!("the connection was not closed cleanly: {e}"),
    }
}

/// The connection's last answer: `status`, a body containing `text`,
/// `Connection: close`, then a FIN.
#[track_caller]
fn assert_last_answer(stream: &mut TcpStream, status: &str, text: &str) {
    let (head, body) = read_answer(stream);
    assert!(head.starts_with(&format!("HTTP/1.1 {status}")), "{head}");
    assert!(body.contains(text), "{body}");
    let close = header(&head, "connection");
    assert_eq!(close.as_deref(), Some("close"), "{head}");
    assert_fin(stream);
}

/// A new connection, served one request and kept alive (it holds its
/// slot under the cap).
fn kept_alive(gw: &Gw) -> TcpStream {
    let mut kept = gw.connect();
    kept.write_all(b"GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (head, _) = read_answer(&mut kept);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(header(&head, "connection").as_deref(), Some("keep-alive"));
    kept
}

/// A new connection that writes `request` whole before reading anything
/// (as most HTTP clients do), then ends its side: every write must be
/// taken, none reset.
fn send_whole(gw: &Gw, request: &[u8]) -> TcpStream {
    let mut client = gw.connect();
    client
        .write_all(request)
        .expect("the request is taken, not reset");
    client.shutdown(std::net::Shutdown::Write).unwrap();
    client
}

/// Sends SIGTERM and returns once the drain has begun: its first log
/// line comes after readiness has turned false.
fn terminate(gw: &Gw) {
    let term = Command::new("kill")
        .args(["-TERM", &gw.process.child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let began = eventually(|| gw.process.log_text().contains("SIGTERM: draining"));
    assert!(began, "no drain: {}", gw.process.log_text());
}

/// Waits until the gateway has `n` requests in flight (its backends view,
/// read on a connection of its own, which stays open).
fn in_flight(gw: &Gw, n: usize) -> TcpStream {
    let mut probe = gw.connect();
    let needle = format!(r#""inflight":{n}"#);
    let seen = eventually(|| {
        probe
            .write_all(b"GET /v2/tensorgate/backends HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        read_answer(&mut probe).1.contains(&needle)
    });
    assert!(seen, "never {n} in flight");
    probe
}

/// Long lingering, so no client here can be slow enough to meet it.
const PATIENT: &str = "[connections]\nlinger_ms = 600000\nheader_timeout_ms = 600000\n";

#[test]
fn after_sigterm_kept_alive_connections_are_served_with_close_and_not_ready() {
    let mut gw = Gw::start("[server]\ngrace_period_seconds = 600\n", &[]);
    let mut kept = kept_alive(&gw);
    let mut probe = kept_alive(&gw);
    probe
        .write_all(b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(read_answer(&mut probe).0.starts_with("HTTP/1.1 200"));
    terminate(&gw);
    // A load balancer probing on its kept-alive connection sees the
    // gateway no longer ready, and is asked to close.
    probe
        .write_all(b"GET /v2/health/ready HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_last_answer(&mut probe, "400", "");
    drop(probe);
    // The connection was idle at SIGTERM; its next request is served.
    kept.write_all(&post("/v2/models/add_sub/infer", "", ADD_SUB.as_bytes()))
        .unwrap();
    assert_last_answer(&mut kept, "200", r#""data":[4.0,6.0]"#);
    drop(kept);
    // No connection left: the process exits, long before the grace period.
    assert!(gw.process.child.wait().unwrap().success());
}

#[test]
fn a_request_in_flight_at_sigterm_is_answered_with_close_then_a_fin() {
    let mut gw = Gw::start("[server]\ngrace_period_seconds = 600\n", &[]);
    let mut kept = kept_alive(&gw);
    let slow = r#"{"parameters":{"delay_ms":5000},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[7]}]}"#;
    kept.write_all(&post("/v2/models/slow_identity/infer", "", slow.as_bytes()))
        .unwrap();
    drop(in_flight(&gw, 1));
    terminate(&gw);
    assert_last_answer(&mut kept, "200", "[7.0]");
    drop(kept);
    assert!(gw.process.child.wait().unwrap().success());
}

#[test]
fn idle_connections_get_a_fin_when_the_grace_period_ends_and_cut_requests_are_counted() {
    let log = std::env::temp_dir().join(format!("tensorgate-closing-{}.log", std::process::id()));
    let config = "[server]\ngrace_period_seconds = 2\n[log]\nformat = \"json\"\n";
    let mut gw = Gw::start_logging(config, &[], Some(&log));
    let mut idle = kept_alive(&gw);
    // A request far longer than the grace period.
    let slow = r#"{"parameters":{"delay_ms":50000},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[7]}]}"#;
    let mut cut = gw.connect();
    cut.write_all(&post("/v2/models/slow_identity/infer", "", slow.as_bytes()))
        .unwrap();
    let probe = in_flight(&gw, 1);
    terminate(&gw);
    assert_fin(&mut idle);
    let mut probe = probe;
    assert_fin(&mut probe);
    assert!(gw.process.child.wait().unwrap().success());
    let mut rest = Vec::new();
    let _ = cut.read_to_end(&mut rest);
    assert!(rest.is_empty(), "the cut request has no answer");
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("grace period over"))
        .unwrap_or_else(|| panic!("no line for the cut request: {text}"));
    assert!(line.contains(r#""in_flight":1"#), "{line}");
    let _ = std::fs::remove_file(&log);
}

#[test]
fn over_the_cap_a_new_client_writes_its_whole_request_and_reads_the_503() {
    let gw = Gw::start(&format!("{PATIENT}max_connections = 4\n"), &[]);
    // Four kept-alive connections, each served once: the cap is full.
    let _held: Vec<TcpStream> = (0..4).map(|_| kept_alive(&gw)).collect();
    let body = vec![b' '; 4 << 20];
    // Writes first: the 503 was sent before the request arrived.
    let mut writer = send_whole(&gw, &post("/v2/models/add_sub/infer", "", &body));
    assert_last_answer(&mut writer, "503", "connections.max_connections is 4");
    // Reads first, then writes: the gateway still takes the request.
    let mut reader = gw.connect();
    let (head, _) = read_answer(&mut reader);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    reader
        .write_all(&post("/v2/models/add_sub/infer", "", &body))
        .expect("the request is taken, not reset");
    reader.shutdown(std::net::Shutdown::Write).unwrap();
    assert_fin(&mut reader);
}

#[test]
fn a_body_sent_after_an_early_refusal_is_taken_and_the_refusal_is_read() {
    let gw = Gw::start(&format!("{PATIENT}[limits]\nmax_body_size = 1000\n"), &[]);
    // Refused on its Content-Length, before a byte of the body is read.
    let body = vec![b' '; 4 << 20];
    let mut client = send_whole(&gw, &post("/v2/models/add_sub/infer", "", &body));
    let too_large = "exceeds the maximum allowed size of 1000 bytes";
    assert_last_answer(&mut client, "413", too_large);
}

#[test]
fn a_streamed_body_refused_before_its_end_is_taken_and_the_refusal_is_read() {
    let gw = Gw::start(PATIENT, &[]);
    // A binary body large enough to stream, for a model that does not
    // exist: refused once the header is in, long before the body's end.
    let json = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2097152],"parameters":{"binary_data_size":8388608}}]}"#;
    let mut body = json.as_bytes().to_vec();
    body.resize(json.len() + (8 << 20), 0);
    let headers = format!("Inference-Header-Content-Length: {}\r\n", json.len());
    let request = post("/v2/models/no_such_model/infer", &headers, &body);
    let mut client = send_whole(&gw, &request);
    assert_last_answer(&mut client, "4", r#"{"error":"#);
}

/// One request on an h2 connection: its status and body.
async fn h2_post(
    client: h2::client::SendRequest<bytes::Bytes>,
    uri: String,
    body: &'static str,
) -> Result<(u16, String), h2::Error> {
    let mut ready = client.ready().await?;
    let request = http::Request::post(uri).body(()).unwrap();
    let (response, mut stream) = ready.send_request(request, false)?;
    stream.send_data(bytes::Bytes::from_static(body.as_bytes()), true)?;
    let response = response.await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        out.extend_from_slice(&chunk?);
    }
    Ok((status, String::from_utf8(out).unwrap()))
}

/// A gateway with a long grace period, and a runtime whose own thread
/// drives an h2 client's connection between the test's steps.
fn draining_with_a_client() -> (Gw, tokio::runtime::Runtime) {
    let gw = Gw::start("[server]\ngrace_period_seconds = 600\n", &[]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    (gw, runtime)
}

#[test]
fn h2_streams_in_flight_at_sigterm_are_answered_after_goaway() {
    let (mut gw, runtime) = draining_with_a_client();
    let addr = gw.http;
    let (client, connection) = runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        h2::client::handshake(tcp).await.unwrap()
    });
    let connection = runtime.spawn(connection);
    let uri = format!("http://{addr}/v2/models/slow_identity/infer");
    const SLOW: &str = r#"{"parameters":{"delay_ms":5000},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[7]}]}"#;
    let first = runtime.spawn(h2_post(client.clone(), uri.clone(), SLOW));
    let probe = in_flight(&gw, 1);
    terminate(&gw);
    let (status, answer) = runtime
        .block_on(first)
        .unwrap()
        .expect("the stream in flight is answered");
    assert_eq!(status, 200);
    assert!(answer.contains("[7.0]"), "{answer}");
    // A stream opened now is answered, or refused unprocessed by the
    // GOAWAY; it is never cut once taken.
    match runtime.block_on(h2_post(client, uri, SLOW)) {
        Ok((status, _)) => assert_eq!(status, 200),
        Err(e) => assert!(
            e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM),
            "{e:?}"
        ),
    }
    drop(probe);
    let ended = runtime.block_on(connection).unwrap();
    assert!(ended.is_ok(), "{ended:?}");
    assert!(gw.process.child.wait().unwrap().success());
}

#[test]
fn grpc_health_turns_not_serving_at_sigterm() {
    use super::grpc_passthrough::{health_client, watch_until};
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::HealthCheckRequest;

    let (mut gw, runtime) = draining_with_a_client();
    let mut server = runtime.block_on(async {
        let mut health = health_client(gw.grpc).await;
        let request = HealthCheckRequest {
            service: String::new(),
        };
        let mut server = health.watch(request).await.unwrap().into_inner();
        watch_until(&mut server, ServingStatus::Serving).await;
        server
    });
    terminate(&gw);
    // A readiness probe takes the pod out of rotation while it drains.
    runtime.block_on(watch_until(&mut server, ServingStatus::NotServing));
    drop(server);
    drop(runtime);
    assert!(gw.process.child.wait().unwrap().success());
}
