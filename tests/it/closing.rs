//! Closing without losing a request, through the real binary: every close
//! after an answer is a lingering one, so a client still writing its
//! request or body reads the answer instead of a reset (over the cap,
//! after an early refusal). Nothing here waits on a timer: each step waits
//! for the gateway's answer or its close. `linger_ms` is long in these
//! configs, so the clients' own pace never meets it.

use std::io::{Read, Write};
use std::net::TcpStream;

use super::edge::Gw;
use super::process::post;
use crate::support::raw::{self, header};

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

/// Long lingering, so no client here can be slow enough to meet it.
const PATIENT: &str = "[connections]\nlinger_ms = 600000\nheader_timeout_ms = 600000\n";

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
