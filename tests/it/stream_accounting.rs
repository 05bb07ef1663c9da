//! Every call passes the core's one door, so a call cut off in its middle
//! is accounted alike whatever it is: a unary `ModelInfer`, a
//! `/generate_stream` stream over HTTP and a `ModelStreamInfer` stream
//! over the gRPC front, each on a backend that goes away once the call is
//! under way, count one `unreachable` upstream call and — with
//! `eject_after_failures = 1` — eject the backend
//! (`tensorgate_backend_ejections_total`, the backend's `ejected`). A
//! stream its client drops counts as `cancelled` and blames nobody.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ::http::Method;
use bytes::Bytes;
use tokio_stream::StreamExt;

use tensorgate::config::Config;
use tensorgate::front::http;
use tensorgate::front::http::{Answer, HttpRequest};
use tensorgate::proto::inference::infer_parameter::ParameterChoice;
use tensorgate::proto::inference::{InferParameter, ModelInferRequest};
use tensorgate::Gateway;
use tensorgate_demo::DemoUpstream;

use super::grpc_passthrough::{connect, input, serve};

/// Generous bound for anything that should happen at once.
const PROMPTLY: Duration = Duration::from_secs(10);

/// A backend on its own runtime (so it can die like a crashed server) and
/// the gateway's settings for this story: one failure ejects; health
/// checks rare enough not to be the ones that notice.
fn backend() -> DemoUpstream {
    DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).expect("demo starts")
}

fn tweak(config: &mut Config) {
    config.upstream.health.eject_after_failures = 1;
    config.upstream.health.interval_ms = 60_000;
}

async fn gateway_over(demo: &DemoUpstream) -> Arc<Gateway> {
    let mut config = Config::default();
    config.upstream.addresses = vec![demo.local_addr().to_string()];
    tweak(&mut config);
    let gateway = Arc::new(Gateway::new(config).expect("valid config"));
    gateway.started().await;
    gateway
}

/// The value of one series in the gateway's metrics text (0 if absent).
fn metric(gateway: &Gateway, series: &str) -> u64 {
    let text = String::from_utf8(gateway.metrics_text()).expect("utf-8");
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

fn outcome(gateway: &Gateway, backend: SocketAddr, outcome: &str) -> u64 {
    let series =
        format!(r#"tensorgate_upstream_requests_total{{backend="{backend}",outcome="{outcome}"}}"#);
    metric(gateway, &series)
}

fn ejections(gateway: &Gateway, backend: SocketAddr) -> u64 {
    metric(
        gateway,
        &format!(r#"tensorgate_backend_ejections_total{{backend="{backend}"}}"#),
    )
}

/// Waits until the backend has received an inference request.
async fn under_way(demo: &DemoUpstream) {
    let arrived = async {
        while demo.last_request().is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(PROMPTLY, arrived)
        .await
        .expect("the call reaches the backend");
}

/// Kills the backend (every connection and call of it dropped at once).
async fn kill(demo: DemoUpstream) {
    tokio::task::spawn_blocking(move || demo.kill())
        .await
        .expect("killed");
}

/// What a call cut off by its backend leaves: one `unreachable` call, one
/// ejection, the backend ejected with the failure as its last error.
#[track_caller]
fn assert_cut_off_and_ejected(gateway: &Gateway, backend: SocketAddr) {
    assert_eq!(outcome(gateway, backend, "unreachable"), 1, "counted");
    assert_eq!(ejections(gateway, backend), 1, "ejected once");
    let state = gateway.backend(&backend).expect("still a member");
    assert!(state.ejected(), "the backend is ejected");
    assert!(
        state.last_error().is_some(),
        "with the failure as its cause"
    );
}

fn repeat(n: i32, delay_ms: i64) -> ModelInferRequest {
    let mut request = ModelInferRequest {
        model_name: "repeat_decoupled".to_owned(),
        inputs: vec![input("INPUT0", "INT32", &[1])],
        raw_input_contents: vec![Bytes::copy_from_slice(&n.to_le_bytes())],
        ..Default::default()
    };
    request.parameters.insert(
        "delay_ms".into(),
        InferParameter {
            parameter_choice: Some(ParameterChoice::Int64Param(delay_ms)),
        },
    );
    request
}

type Requests = tokio::sync::mpsc::Sender<ModelInferRequest>;
type Responses = tonic::Streaming<tensorgate::proto::inference::ModelStreamInferResponse>;

/// A `ModelStreamInfer` stream through the gRPC front at `listening`,
/// carrying one request for three responses a minute apart (the first
/// comes at once); the client's side of it.
async fn open_stream(listening: SocketAddr) -> (Requests, Responses) {
    let mut client = connect(listening).await;
    let (requests, rx) = tokio::sync::mpsc::channel(4);
    requests.send(repeat(3, 60_000)).await.unwrap();
    let responses = client
        .model_stream_infer(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("the stream opens")
        .into_inner();
    (requests, responses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_call_cut_off_is_counted_and_ejects_its_backend() {
    let demo = backend();
    let addr = demo.local_addr();
    let gateway = gateway_over(&demo).await;
    let body = r#"{"parameters":{"delay_ms":60000},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}"#;
    let call = {
        let gateway = gateway.clone();
        tokio::spawn(async move {
            let request = HttpRequest::new(
                Method::POST,
                "/v2/models/slow_identity/infer",
                Vec::new(),
                Bytes::from_static(body.as_bytes()),
            );
            http::handle(&gateway, request).await
        })
    };
    under_way(&demo).await;
    kill(demo).await;
    let answer = tokio::time::timeout(PROMPTLY, call)
        .await
        .expect("answered")
        .expect("the call's task");
    assert_eq!(answer.status, 503, "{:?}", answer.body_bytes());
    assert_cut_off_and_ejected(&gateway, addr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_stream_cut_off_is_counted_and_ejects_as_a_unary_call() {
    let demo = backend();
    let addr = demo.local_addr();
    let gateway = gateway_over(&demo).await;
    // Three responses a minute apart: the first comes at once.
    let request = HttpRequest::new(
        Method::POST,
        "/v2/models/repeat_decoupled/generate_stream",
        Vec::new(),
        Bytes::from_static(br#"{"INPUT0":3,"delay_ms":60000}"#),
    );
    let plan = http::plan(&gateway, &request.path, &request).expect("a route");
    let Answer::Streamed(mut streamed) = http::answer(&gateway, &plan, request).await else {
        panic!("a streamed answer");
    };
    let first = streamed.first.take().expect("the first event");
    assert!(first.starts_with(b"data: {"), "{first:?}");
    kill(demo).await;
    let last = tokio::time::timeout(PROMPTLY, streamed.body.recv())
        .await
        .expect("the stream ends")
        .expect("an error event");
    let last = String::from_utf8_lossy(&last);
    assert!(last.starts_with(r#"data: {"error":"#), "{last}");
    assert!(streamed.body.recv().await.is_none(), "and nothing after it");
    assert_cut_off_and_ejected(&gateway, addr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_stream_cut_off_is_counted_and_ejects_as_a_unary_call() {
    let demo = backend();
    let addr = demo.local_addr();
    let (gateway, listening, _server) = serve(vec![addr.to_string()], tweak).await;
    let (requests, mut responses) = open_stream(listening).await;
    responses
        .next()
        .await
        .expect("a first response")
        .expect("ok");
    kill(demo).await;
    let status = tokio::time::timeout(PROMPTLY, responses.next())
        .await
        .expect("the stream ends")
        .expect("with a status")
        .expect_err("an error");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert_cut_off_and_ejected(&gateway, addr);
    drop(requests);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_its_client_drops_is_cancelled_and_blames_nobody() {
    let demo = backend();
    let addr = demo.local_addr();
    let (gateway, listening, _server) = serve(vec![addr.to_string()], tweak).await;
    let (requests, mut responses) = open_stream(listening).await;
    responses.next().await.expect("a response").expect("ok");
    drop(responses);
    drop(requests);
    let counted = async {
        while outcome(&gateway, addr, "cancelled") == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(PROMPTLY, counted)
        .await
        .expect("the stream is counted as cancelled");
    assert_eq!(outcome(&gateway, addr, "unreachable"), 0);
    assert_eq!(ejections(&gateway, addr), 0);
    assert!(gateway.backend(&addr).expect("a member").usable());
    kill(demo).await;
}
