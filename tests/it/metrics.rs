//! Metrics after a scripted mix of requests: the scraped counters and
//! histograms hold exactly the expected counts.

use crate::support::{text, Harness};

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}]}"#;

/// The value of the sample whose line starts with `series`.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_scripted_mix_is_counted_exactly() {
    let h = Harness::start().await;
    for _ in 0..3 {
        assert_eq!(h.post(ADD_SUB, BODY).await.status, 200);
    }
    assert_eq!(h.post("/v2/models/nope/infer", BODY).await.status, 404);
    assert_eq!(h.post(ADD_SUB, "{").await.status, 400);
    for _ in 0..2 {
        assert_eq!(h.get("/v2/health/ready").await.status, 200);
    }
    let m = String::from_utf8(h.gateway.metrics_text()).unwrap();
    let up = h.demo.local_addr().to_string();
    let count = |series: &str| sample(&m, series);

    assert_eq!(
        count(r#"tensorgate_requests_total{model="add_sub",route="infer",status="200"}"#),
        3.0
    );
    assert_eq!(
        count(r#"tensorgate_requests_total{model="add_sub",route="infer",status="400"}"#),
        1.0
    );
    assert_eq!(
        count(r#"tensorgate_requests_total{model="(unknown)",route="infer",status="404"}"#),
        1.0
    );
    assert_eq!(
        count(r#"tensorgate_requests_total{model="",route="health_ready",status="200"}"#),
        2.0
    );
    assert_eq!(
        count(r#"tensorgate_request_duration_seconds_count{route="infer"}"#),
        5.0
    );
    assert_eq!(
        count(r#"tensorgate_gateway_duration_seconds_count{route="infer"}"#),
        5.0
    );
    // Upstream: ModelConfig once (then cached) + 3 ModelInfer; the unknown
    // model's ModelConfig is an error; the malformed body never went out.
    assert_eq!(
        count(&format!(
            r#"tensorgate_upstream_requests_total{{backend="{up}",outcome="ok"}}"#
        )),
        4.0
    );
    assert_eq!(
        count(&format!(
            r#"tensorgate_upstream_requests_total{{backend="{up}",outcome="error"}}"#
        )),
        1.0
    );
    assert_eq!(
        count(&format!(
            r#"tensorgate_upstream_duration_seconds_count{{backend="{up}"}}"#
        )),
        5.0
    );
    let infer_bytes = (4 * BODY.len() + 1) as f64;
    assert_eq!(
        count(r#"tensorgate_request_bytes_total{route="infer"}"#),
        infer_bytes
    );
    assert_eq!(
        count(&format!(r#"tensorgate_backend_up{{backend="{up}"}}"#)),
        1.0
    );
    assert_eq!(
        count(&format!(
            r#"tensorgate_backend_inflight_requests{{backend="{up}"}}"#
        )),
        0.0
    );
    assert_eq!(
        count(r#"tensorgate_inflight_requests{listener="http"}"#),
        0.0
    );
    // Gateway time never exceeds the request time.
    let total = count(r#"tensorgate_request_duration_seconds_sum{route="infer"}"#);
    let own = count(r#"tensorgate_gateway_duration_seconds_sum{route="infer"}"#);
    assert!(own <= total, "{own} > {total}");
    let _ = text;
}

#[tokio::test]
async fn ejections_and_unreachable_calls_are_counted() {
    let h = Harness::start_with(|c| {
        c.upstream.addresses.push("127.0.0.1:1".into());
        c.upstream.health.interval_ms = 60_000;
    })
    .await;
    // 127.0.0.1:1 is never seen ready, so it gets no traffic and no calls.
    for _ in 0..4 {
        assert_eq!(h.post(ADD_SUB, BODY).await.status, 200);
    }
    let m = String::from_utf8(h.gateway.metrics_text()).unwrap();
    let view = text(&h.get("/v2/tensorgate/backends").await);
    assert_eq!(
        sample(&m, r#"tensorgate_backend_up{backend="127.0.0.1:1"}"#),
        0.0,
        "{view}"
    );
    assert!(!m.contains(r#"backend="127.0.0.1:1",outcome"#), "{m}");
}
