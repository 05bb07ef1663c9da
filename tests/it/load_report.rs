//! Load reported by the servers (`[upstream.load_report]`): two demo
//! upstreams on two loopback addresses (127.0.0.1 and 127.0.0.2, so each
//! has its own metrics endpoint at the same port, as Tritons on their own
//! hosts have), and a metrics endpoint of the test's own on 127.0.0.2
//! serving the pending count it is told. The picks avoid the backend
//! reporting a long queue while its report is fresh, and are even again
//! once the report fails, goes missing or goes stale.
//!
//! Nothing waits on time: each phase waits (polling, with a generous
//! overall limit) until the gateway shows the report it must act on.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tensorgate::config::{Balance, Config};
use tensorgate::Gateway;
use tensorgate_demo::DemoUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{send, text};

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}]}"#;

/// What the fake metrics endpoint answers.
#[derive(Clone)]
enum Answer {
    /// 200 with Triton's text: this many requests pending for one model.
    Pending(u64),
    /// 200 with a text that has no pending metric (not Triton).
    Missing,
    /// 503.
    Failing,
}

/// A metrics endpoint: HTTP/1.1, one answer per connection.
struct FakeMetrics {
    addr: SocketAddr,
    answer: Arc<Mutex<Answer>>,
}

impl FakeMetrics {
    async fn start(ip: &str, answer: Answer) -> FakeMetrics {
        let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
            .await
            .expect("bind port 0");
        let addr = listener.local_addr().unwrap();
        let answer = Arc::new(Mutex::new(answer));
        let shared = answer.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let answer = shared.lock().unwrap().clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    assert!(head.starts_with(b"GET /metrics HTTP/1.1\r\n"));
                    let (status, body) = match answer {
                        Answer::Pending(n) => ("200 OK", triton_text(n)),
                        Answer::Missing => ("200 OK", "# TYPE other gauge\nother 3\n".into()),
                        Answer::Failing => ("503 Service Unavailable", String::new()),
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        FakeMetrics { addr, answer }
    }

    fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }
}

/// Triton's metrics as 2.51 writes them (tests/fixtures/triton_metrics),
/// `n` requests waiting for one model.
fn triton_text(n: u64) -> String {
    format!(
        "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n\
         # TYPE nv_inference_request_success counter\n\
         nv_inference_request_success{{model=\"add_sub\",version=\"1\"}} 12\n\
         # HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.\n\
         # TYPE nv_inference_pending_request_count gauge\n\
         nv_inference_pending_request_count{{model=\"add_sub\",version=\"1\"}} 0\n\
         nv_inference_pending_request_count{{model=\"slow_identity\",version=\"1\"}} {n}\n"
    )
}

/// Polls `condition` every 10 ms (on the runtime: the gateway's reads run
/// on it too) until it holds, at most 20 s.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Where `n` sequential requests landed: (on 127.0.0.1, on 127.0.0.2).
async fn spread(gateway: &Arc<Gateway>, demos: &[DemoUpstream; 2], n: usize) -> (u64, u64) {
    let before = (demos[0].infer_count(), demos[1].infer_count());
    for _ in 0..n {
        let r = send(
            gateway,
            http::Method::POST,
            ADD_SUB,
            &[],
            bytes::Bytes::from_static(BODY.as_bytes()),
        )
        .await;
        assert_eq!(r.status, 200, "{}", text(&r));
    }
    (
        demos[0].infer_count() - before.0,
        demos[1].infer_count() - before.1,
    )
}

/// The backends view.
async fn view(gateway: &Arc<Gateway>) -> String {
    let path = "/v2/tensorgate/backends";
    text(&send(gateway, http::Method::GET, path, &[], bytes::Bytes::new()).await)
}

#[tokio::test]
async fn picks_avoid_a_reported_queue_and_are_even_without_a_fresh_report() {
    // The second backend's server has 50 requests waiting.
    let metrics = FakeMetrics::start("127.0.0.2", Answer::Pending(50)).await;
    let demos = [
        DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap(),
        DemoUpstream::start_in_background("127.0.0.2:0".parse().unwrap()).unwrap(),
    ];
    let [quiet, queued] = [demos[0].local_addr(), demos[1].local_addr()];
    let mut config = Config::default();
    config.upstream.addresses = vec![quiet.to_string(), queued.to_string()];
    config.upstream.balance = Balance::LeastOutstanding;
    config.upstream.health.interval_ms = 20;
    config.upstream.health.timeout_ms = 200;
    let report = &mut config.upstream.load_report;
    report.enabled = true;
    // 127.0.0.1 has no metrics endpoint at this port: its report is missing.
    report.metrics_port = metrics.addr.port();
    report.interval_ms = 20;
    report.timeout_ms = 500;
    // Long beside the interval: a busy machine must not age a report
    // served every 20 ms while the first phase runs.
    report.stale_after_ms = 1_000;
    config.validate().expect("valid");
    let gateway = Arc::new(Gateway::new(config).expect("valid config"));
    gateway.started().await;

    // The report is seen: as a gauge, and in the backends view.
    let gauge = format!("tensorgate_backend_reported_pending_requests{{backend=\"{queued}\"}} 50");
    until("the queue of 50 in the metrics", || {
        String::from_utf8(gateway.metrics_text())
            .unwrap()
            .contains(&gauge)
    })
    .await;
    let shown = view(&gateway).await;
    assert!(
        shown.contains(r#""load_report":{"pending":50,"#) && shown.contains(r#""fresh":true"#),
        "{shown}"
    );
    assert!(
        !String::from_utf8(gateway.metrics_text())
            .unwrap()
            .contains(&format!(
                "tensorgate_backend_reported_pending_requests{{backend=\"{quiet}\"}}"
            )),
        "a backend without a report has no series"
    );
    // Every pick avoids the queue: 0 in flight + 50 against 0 in flight.
    assert_eq!(spread(&gateway, &demos, 40).await, (40, 0));

    // The endpoint fails: once the last report is stale, the picks are
    // the in-flight counts' alone, even for sequential requests.
    metrics.answer(Answer::Failing);
    let backend = gateway.backend(&queued).unwrap();
    until("the failing report going stale", || {
        backend.report().is_some_and(|r| !r.fresh)
    })
    .await;
    assert!(
        backend.report_error().unwrap().contains("answered 503"),
        "{:?}",
        backend.report_error()
    );
    let (a, b) = spread(&gateway, &demos, 40).await;
    assert!(a.abs_diff(b) <= 2, "uneven without a report: {a} / {b}");

    // A fresh report again steers the picks...
    metrics.answer(Answer::Pending(50));
    until("a fresh report again", || {
        backend.report().is_some_and(|r| r.fresh)
    })
    .await;
    assert_eq!(spread(&gateway, &demos, 20).await, (20, 0));

    // ...until the metric is missing from the text (not Triton's).
    metrics.answer(Answer::Missing);
    until("the missing metric going stale", || {
        backend.report().is_some_and(|r| !r.fresh)
            && backend
                .report_error()
                .is_some_and(|e| e.contains("no nv_inference_pending_request_count"))
    })
    .await;
    let (a, b) = spread(&gateway, &demos, 40).await;
    assert!(a.abs_diff(b) <= 2, "uneven without a report: {a} / {b}");
    let shown = view(&gateway).await;
    assert!(shown.contains(r#""fresh":false"#), "{shown}");
    assert!(
        !String::from_utf8(gateway.metrics_text())
            .unwrap()
            .contains("tensorgate_backend_reported_pending_requests{"),
        "no series for a stale report"
    );
}
