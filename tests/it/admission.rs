//! Admission control (`[upstream.admission]`) as clients see it on every
//! front: requests beyond the group's limit wait, a full queue refuses at
//! once (HTTP 503 + `Retry-After`, gRPC `UNAVAILABLE`, v1 `NV-Status`
//! `UNAVAILABLE` + `Retry-After`, OpenAI's `service_unavailable`), a
//! higher priority takes the last place, deadlines bound the wait, a
//! sequence already started is never held back, a refused request never
//! reaches the upstream, and the queue shows in the metrics and the
//! backends view. The upstream is a demo held hung, so that calls stay in
//! flight exactly as long as the test wants: no test here depends on
//! timing (the queue order itself: `app::admission::tests`, on a paused
//! clock).

use std::time::Duration;

use http::Method;
use serde_json::json;
use tensorgate::config::Config;
use tensorgate::front::http::HttpResponse;
use tensorgate::proto::inference::infer_parameter::ParameterChoice;
use tensorgate::Gateway;

use crate::grpc_passthrough::{add_sub, connect, param, serve};
use crate::support::{send, text, Harness};

const ADD_SUB: &str = "/v2/models/add_sub/infer";

fn body(parameters: serde_json::Value) -> String {
    json!({
        "parameters": parameters,
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]},
            {"name": "INPUT1", "datatype": "FP32", "shape": [2], "data": [3, 4]}
        ]
    })
    .to_string()
}

/// The group's admission table, no health checks or signature refreshes
/// while the test holds the upstream hung (a hung `ServerReady` would
/// make the backend unusable).
fn admission(config: &mut Config, table: &str) {
    let text = format!(
        "[upstream]\naddresses = {:?}\nmodel_info_ttl_ms = 600000\nhealth = {{ interval_ms = 600000, timeout_ms = 600000 }}\n[upstream.admission]\n{table}\n[openai.models.chat]\nupstream_model = \"llm_vllm\"\n",
        config.upstream.addresses
    );
    *config = Config::from_toml(&text).expect("parses");
}

/// Polls `cond` (a condition, not a delay: it returns as soon as it holds).
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn gauge(gateway: &Gateway, name: &str) -> i64 {
    let text = String::from_utf8(gateway.metrics_text()).unwrap();
    let line = format!("{name}{{group=\"default\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .map_or(0, |v| v.parse().unwrap())
}

fn counted(gateway: &Gateway, outcome: &str, class: &str) -> u64 {
    let text = String::from_utf8(gateway.metrics_text()).unwrap();
    let line = format!(
        "tensorgate_admission_total{{group=\"default\",outcome=\"{outcome}\",priority=\"{class}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .map_or(0, |v| v.parse().unwrap())
}

/// A harness whose only slot is taken by a hung `/infer` (returned, to be
/// answered once the upstream is let go).
async fn one_slot_taken(table: &str) -> (Harness, tokio::task::JoinHandle<HttpResponse>) {
    let h = Harness::start_with(|c| admission(c, table)).await;
    h.gateway.started().await;
    // The signatures are cached before the upstream hangs (the demo
    // counts a call once it is let go).
    assert_eq!(h.post(ADD_SUB, body(json!({}))).await.status, 200);
    assert_eq!(v1_infer(&h).await.status, 200);
    assert_eq!(completion(&h).await.status, 200);
    h.demo.set_hang(true);
    let gateway = h.gateway.clone();
    let held = tokio::spawn(async move {
        send(&gateway, Method::POST, ADD_SUB, &[], body(json!({})).into()).await
    });
    until("the first call holds the slot", || {
        gauge(&h.gateway, "tensorgate_admission_in_flight") == 1
    })
    .await;
    (h, held)
}

fn spawn_infer(
    h: &Harness,
    headers: &'static [(&'static str, &'static str)],
    parameters: serde_json::Value,
) -> tokio::task::JoinHandle<HttpResponse> {
    let gateway = h.gateway.clone();
    tokio::spawn(async move {
        send(
            &gateway,
            Method::POST,
            ADD_SUB,
            headers,
            body(parameters).into(),
        )
        .await
    })
}

async fn v1_infer(h: &Harness) -> HttpResponse {
    let header = r#"batch_size: 1 input { name: "INPUT0" dims: 4 } input { name: "INPUT1" dims: 4 } output { name: "OUTPUT0" }"#;
    h.send(
        Method::POST,
        "/api/infer/add_sub",
        &[("NV-InferRequest", header)],
        vec![0u8; 32],
    )
    .await
}

async fn completion(h: &Harness) -> HttpResponse {
    let body = json!({"model": "chat", "prompt": "one two", "max_tokens": 2});
    h.post("/v1/completions", body.to_string()).await
}

#[tokio::test]
async fn a_full_queue_refuses_at_once_and_a_higher_priority_takes_the_last_place() {
    let (h, held) = one_slot_taken(
        "max_concurrency = 1\nqueue_length = 1\nqueue_timeout_ms = 600000\npriority_header = \"x-priority\"",
    )
    .await;
    let sent = h.demo.infer_count();
    let waiting = spawn_infer(&h, &[], json!({}));
    until("one waits", || {
        gauge(&h.gateway, "tensorgate_admission_queue_length") == 1
    })
    .await;
    // Same level: refused at once, never sent.
    let refused = h.post(ADD_SUB, body(json!({}))).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("Retry-After"), Some("1"));
    assert_eq!(refused.header("Content-Type"), Some("application/json"));
    assert_eq!(
        text(&refused),
        r#"{"error":"upstream group 'default' is at capacity: its queue of 1 is full; retry later"}"#
    );
    // A better level (the header; Triton's `priority` parameter alike)
    // takes the waiter's place; the waiter is refused.
    let urgent = spawn_infer(&h, &[("x-priority", "1")], json!({}));
    let displaced = waiting.await.unwrap();
    assert_eq!(displaced.status, 503);
    assert!(text(&displaced).contains("a request of a higher priority took its place"));
    let by_parameter = h.post(ADD_SUB, body(json!({"priority": 1}))).await;
    assert_eq!(
        by_parameter.status, 503,
        "the queue holds one of level 1 already"
    );
    h.demo.set_hang(false);
    assert_eq!(held.await.unwrap().status, 200);
    assert_eq!(urgent.await.unwrap().status, 200);
    // The held call and the urgent one; none of the three refused.
    assert_eq!(h.demo.infer_count(), sent + 2, "a refused request was sent");
    assert_eq!(counted(&h.gateway, "full", "default"), 1);
    assert_eq!(counted(&h.gateway, "full", "high"), 1);
    assert_eq!(counted(&h.gateway, "displaced", "default"), 1);
    assert_eq!(gauge(&h.gateway, "tensorgate_admission_in_flight"), 0);
}

#[tokio::test]
async fn waiting_requests_are_served_when_slots_free_and_the_queue_is_shown() {
    let (h, held) =
        one_slot_taken("max_concurrency = 1\nqueue_length = 8\nqueue_timeout_ms = 600000").await;
    let waiting: Vec<_> = (0..3).map(|_| spawn_infer(&h, &[], json!({}))).collect();
    until("three wait", || {
        gauge(&h.gateway, "tensorgate_admission_queue_length") == 3
    })
    .await;
    let view = text(&h.get("/v2/tensorgate/backends").await);
    let view: serde_json::Value = serde_json::from_str(&view).unwrap();
    let admission = &view["groups"][0]["admission"];
    assert_eq!(admission["in_flight"], 1, "{view}");
    assert_eq!(admission["waiting"], 3);
    assert_eq!(admission["limit"], 1);
    assert_eq!(admission["queue_length"], 8);
    h.demo.set_hang(false);
    assert_eq!(held.await.unwrap().status, 200);
    for w in waiting {
        assert_eq!(w.await.unwrap().status, 200);
    }
    assert_eq!(gauge(&h.gateway, "tensorgate_admission_queue_length"), 0);
    let text = String::from_utf8(h.gateway.metrics_text()).unwrap();
    assert!(
        text.contains("tensorgate_admission_wait_seconds_count{group=\"default\"} 3"),
        "{text}"
    );
}

#[tokio::test]
async fn a_deadline_bounds_the_wait_whichever_way_it_is_given() {
    let (h, held) = one_slot_taken(
        "max_concurrency = 1\nqueue_timeout_ms = 600000\ndeadline_header = \"x-deadline-ms\"",
    )
    .await;
    // Triton's `timeout` parameter (microseconds), and the header.
    let by_parameter = h.post(ADD_SUB, body(json!({"timeout": 20_000}))).await;
    let by_header = h
        .send(
            Method::POST,
            ADD_SUB,
            &[("x-deadline-ms", "20")],
            body(json!({})),
        )
        .await;
    for refused in [by_parameter, by_header] {
        assert_eq!(refused.status, 503);
        assert_eq!(refused.header("Retry-After"), Some("1"));
        assert!(
            text(&refused)
                .contains("the request's deadline of 20 ms would pass before a slot freed"),
            "{}",
            text(&refused)
        );
    }
    assert_eq!(counted(&h.gateway, "deadline", "default"), 2);
    h.demo.set_hang(false);
    assert_eq!(held.await.unwrap().status, 200);
}

#[tokio::test]
async fn a_sequence_already_started_is_never_held_back() {
    let (h, held) = one_slot_taken("max_concurrency = 1\nqueue_length = 0").await;
    // Its start is new work: refused like any.
    let start = h
        .post(
            ADD_SUB,
            body(json!({"sequence_id": 7, "sequence_start": true})),
        )
        .await;
    assert_eq!(start.status, 503);
    let continuing = spawn_infer(&h, &[], json!({"sequence_id": 7}));
    until("the continuing request is admitted above the limit", || {
        gauge(&h.gateway, "tensorgate_admission_in_flight") == 2
    })
    .await;
    assert_eq!(gauge(&h.gateway, "tensorgate_admission_queue_length"), 0);
    h.demo.set_hang(false);
    assert_eq!(continuing.await.unwrap().status, 200);
    assert_eq!(held.await.unwrap().status, 200);
}

#[tokio::test]
async fn v1_and_openai_refusals_are_their_own_forms() {
    let (h, held) = one_slot_taken("max_concurrency = 1\nqueue_length = 0").await;
    let v1 = v1_infer(&h).await;
    assert_eq!(v1.status, 503);
    assert_eq!(v1.header("Retry-After"), Some("1"));
    let status = v1.header("NV-Status").unwrap();
    assert!(status.contains("code: UNAVAILABLE"), "{status}");
    assert!(status.contains("is at capacity"), "{status}");
    let openai = completion(&h).await;
    assert_eq!(openai.status, 503);
    assert_eq!(openai.header("Retry-After"), Some("1"));
    let error: serde_json::Value = serde_json::from_str(&text(&openai)).unwrap();
    assert_eq!(error["error"]["type"], "server_error");
    assert_eq!(error["error"]["code"], "service_unavailable");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("is at capacity"));
    h.demo.set_hang(false);
    assert_eq!(held.await.unwrap().status, 200);
}

#[tokio::test]
async fn grpc_clients_get_unavailable_on_the_decoded_and_the_relayed_way() {
    let demo = tensorgate_demo::DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |c| {
        admission(
            c,
            "max_concurrency = 1\nqueue_length = 1\nqueue_timeout_ms = 600000\npriority_header = \"x-priority\"",
        )
    })
    .await;
    let mut client = connect(addr).await;
    assert!(client.model_infer(add_sub(&[1.0], &[2.0])).await.is_ok());
    demo.set_hang(true);
    let mut c = client.clone();
    let held = tokio::spawn(async move { c.model_infer(add_sub(&[1.0], &[2.0])).await });
    until("the first call holds the slot", || {
        gauge(&gateway, "tensorgate_admission_in_flight") == 1
    })
    .await;
    // Waits (the metadata's priority is read by the relayed way too) ...
    let mut c = client.clone();
    let waiting = tokio::spawn(async move {
        let mut request = tonic::Request::new(add_sub(&[1.0], &[2.0]));
        request
            .metadata_mut()
            .insert("x-priority", "3".parse().unwrap());
        c.model_infer(request).await
    });
    until("one waits", || {
        gauge(&gateway, "tensorgate_admission_queue_length") == 1
    })
    .await;
    // ... and is displaced by a better level given as Triton's parameter.
    let mut urgent = add_sub(&[1.0], &[2.0]);
    urgent
        .parameters
        .insert("priority".into(), param(ParameterChoice::Uint64Param(1)));
    let mut c = client.clone();
    let urgent = tokio::spawn(async move { c.model_infer(urgent).await });
    let displaced = waiting.await.unwrap().unwrap_err();
    assert_eq!(displaced.code(), tonic::Code::Unavailable);
    assert!(
        displaced.message().contains("is at capacity"),
        "{displaced:?}"
    );
    // A full queue: at once; a message with a version takes the decoded
    // way (`relay_model_infer`), refused alike.
    let mut versioned = add_sub(&[1.0], &[2.0]);
    versioned.model_version = "1".into();
    let full = client.model_infer(versioned).await.unwrap_err();
    assert_eq!(full.code(), tonic::Code::Unavailable);
    assert!(
        full.message().contains("its queue of 1 is full"),
        "{full:?}"
    );
    demo.set_hang(false);
    assert!(held.await.unwrap().is_ok());
    assert!(urgent.await.unwrap().is_ok());
    assert_eq!(gauge(&gateway, "tensorgate_admission_in_flight"), 0);
}
