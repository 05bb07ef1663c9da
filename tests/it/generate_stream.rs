//! `/generate_stream` through the real binary (pingora writing the SSE
//! body) in front of this test's own demo upstream, whose counters show
//! what happened upstream: events reach the client while the model is
//! still generating, a client that disconnects cancels the upstream
//! stream, and a client that stops reading holds the upstream back.

use std::time::Duration;

use tensorgate::front::http;
use tensorgate::front::http::{Answer, HttpRequest};
use tensorgate_demo::DemoUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{GatewayProcess, Harness};

/// Generous bound for anything that should happen at once.
const PROMPTLY: Duration = Duration::from_secs(10);

async fn start() -> (DemoUpstream, GatewayProcess) {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("demo upstream");
    let upstream = demo.local_addr();
    let gateway = tokio::task::spawn_blocking(move || GatewayProcess::with_upstream(upstream))
        .await
        .expect("gateway starts");
    (demo, gateway)
}

/// Sends a `/generate_stream` request with `body` on a new connection.
async fn post_stream(gateway: &GatewayProcess, model: &str, body: &str) -> TcpStream {
    let mut conn = TcpStream::connect(gateway.addr).await.expect("connect");
    let request = format!(
        "POST /v2/models/{model}/generate_stream HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await.expect("send");
    conn
}

/// Reads until `received` holds `n` complete SSE events (the chunked
/// framing around them is left in place); returns everything read.
async fn read_events(conn: &mut TcpStream, received: &mut Vec<u8>, n: usize) {
    let count = |b: &[u8]| b.windows(2).filter(|w| w == b"\n\n").count();
    let read = async {
        while count(received) < n {
            let mut buf = [0u8; 4096];
            let got = conn.read(&mut buf).await.expect("read");
            assert!(
                got > 0,
                "connection closed: {}",
                String::from_utf8_lossy(received)
            );
            received.extend_from_slice(&buf[..got]);
        }
    };
    tokio::time::timeout(PROMPTLY, read)
        .await
        .expect("events arrive promptly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_as_produced_and_a_disconnect_cancels_upstream() {
    let (demo, gateway) = start().await;
    // Three responses, a minute apart: only the first exists for now.
    let mut conn = post_stream(
        &gateway,
        "repeat_decoupled",
        r#"{"INPUT0":3,"delay_ms":60000}"#,
    )
    .await;
    let mut received = Vec::new();
    read_events(&mut conn, &mut received, 1).await;
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        text.contains("Content-Type: text/event-stream; charset=utf-8\r\n"),
        "{text}"
    );
    assert!(text.contains("Transfer-Encoding: chunked\r\n"), "{text}");
    assert!(
        text.contains(
            "data: {\"OUTPUT0\":0,\"model_name\":\"repeat_decoupled\",\"model_version\":\"1\"}\n\n"
        ),
        "{text}"
    );
    assert_eq!(
        demo.streamed_responses(),
        1,
        "the model is still generating"
    );
    assert_eq!(demo.cancelled_streams(), 0);
    drop(conn);
    assert!(
        demo.wait_for_cancelled_streams(1, PROMPTLY).await,
        "the upstream saw the cancellation while the model paused"
    );
    assert_eq!(
        demo.streamed_responses(),
        1,
        "nothing produced after the cancel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_stream_ends_with_the_last_chunk() {
    let (demo, gateway) = start().await;
    let mut conn = post_stream(&gateway, "repeat_decoupled", r#"{"INPUT0":3,"delay_ms":1}"#).await;
    let mut received = Vec::new();
    read_events(&mut conn, &mut received, 3).await;
    let end = async {
        while !received.ends_with(b"\r\n0\r\n\r\n") {
            let mut buf = [0u8; 256];
            let got = conn.read(&mut buf).await.expect("read");
            assert!(got > 0, "closed before the last chunk");
            received.extend_from_slice(&buf[..got]);
        }
    };
    tokio::time::timeout(PROMPTLY, end)
        .await
        .expect("the body ends");
    assert_eq!(demo.streamed_responses(), 3);
    assert_eq!(demo.cancelled_streams(), 0);
    // The connection stays usable.
    let body = r#"{"INPUT0":[1],"INPUT1":[1]}"#;
    let request = format!(
        "POST /v2/models/add_sub/generate HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await.expect("send");
    let mut buf = vec![0u8; 4096];
    let got = tokio::time::timeout(PROMPTLY, conn.read(&mut buf))
        .await
        .expect("answer")
        .expect("read");
    let text = String::from_utf8_lossy(&buf[..got]);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
}

/// A reader that stops reading holds the upstream back: with nothing
/// read, the model gets only as far as the buffers between it and the
/// client allow (the gateway's event channel, HTTP/2 flow control, the
/// demo's own channel), far from the million responses asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_holds_the_upstream_back() {
    let h = Harness::start().await;
    let request = HttpRequest::new(
        ::http::Method::POST,
        "/v2/models/repeat_decoupled/generate_stream",
        Vec::new(),
        r#"{"INPUT0":1000000,"delay_ms":0}"#.into(),
    );
    let plan = http::plan(&h.gateway, &request.path, &request).expect("a route");
    let Answer::Streamed(mut streamed) = http::answer(&h.gateway, &plan, request).await else {
        panic!("a streamed answer");
    };
    streamed.first.take().expect("first event");
    // Wait until the upstream stops producing (its count stays put).
    let mut last = u64::MAX;
    let settled = async {
        loop {
            let now = h.demo.streamed_responses();
            if now == last {
                return now;
            }
            last = now;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let produced = tokio::time::timeout(PROMPTLY, settled)
        .await
        .expect("production stops while nobody reads");
    assert!(
        produced < 20_000,
        "the upstream ran ahead: {produced} responses"
    );
    // Reading resumes production.
    for _ in 0..1000 {
        streamed.body.recv().await.expect("event");
    }
    assert!(h.demo.streamed_responses() > produced);
    drop(streamed);
    assert!(h.demo.wait_for_cancelled_streams(1, PROMPTLY).await);
}
