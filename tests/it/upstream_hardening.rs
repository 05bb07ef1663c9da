//! Edge hardening of the upstream side. At boot (`Pool::started`) the
//! backends are known, in the metrics, and each unreachable one is named
//! with its error — in the backends view, in the 503 text and in one
//! warning. The HTTP `timeout` parameter is Triton's queueing timeout,
//! forwarded and never a deadline of the gateway's; a deadline the gRPC
//! client chose (`grpc-timeout`) never ejects a backend, while the
//! gateway's own deadline still does; a passed deadline has one 504 text,
//! in a unit that does not round it to zero.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{refused_addrs, text, Harness};
use tensorgate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;
use tensorgate::proto::inference::infer_parameter::ParameterChoice;
use tensorgate::proto::inference::model_infer_request::InferInputTensor;
use tensorgate::proto::inference::{InferParameter, ModelInferRequest};
use tensorgate::Gateway;
use tonic::Code;

const ADD_SUB: &str = "/v2/models/add_sub/infer";
const SLOW: &str = "/v2/models/slow_identity/infer";
const BODY: &str = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}]}"#;

/// `slow_identity` answering after `delay_ms`, with the `timeout`
/// parameter `us` microseconds (0: none).
fn slow(delay_ms: u64, us: u64) -> String {
    let timeout = if us == 0 {
        String::new()
    } else {
        format!(r#""timeout":{us},"#)
    };
    format!(
        r#"{{"parameters":{{{timeout}"delay_ms":{delay_ms}}},"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}}]}}"#
    )
}

/// The backend's entry in `/v2/tensorgate/backends`.
async fn listing(gateway: &Arc<Gateway>, addr: &str) -> serde_json::Value {
    let r = crate::support::send(
        gateway,
        http::Method::GET,
        "/v2/tensorgate/backends",
        &[],
        bytes::Bytes::new(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", text(&r));
    let view: serde_json::Value = serde_json::from_str(&text(&r)).expect("JSON listing");
    view["backends"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|b| b["address"] == addr)
        .unwrap_or_else(|| panic!("{addr} not listed: {view}"))
        .clone()
}

/// The backend's `tensorgate_backend_up` series is there, with `up`.
#[track_caller]
fn assert_backend_up(gateway: &Gateway, addr: &str, up: u8) {
    let metrics = String::from_utf8(gateway.metrics_text()).unwrap();
    let series = format!(r#"tensorgate_backend_up{{backend="{addr}"}} {up}"#);
    assert!(metrics.contains(&series), "{metrics}");
}

#[track_caller]
fn assert_in_service(entry: &serde_json::Value) {
    assert_eq!(entry["usable"], true, "{entry}");
    assert_eq!(entry["ejected"], false, "{entry}");
    assert_eq!(entry["last_error"], serde_json::Value::Null, "{entry}");
}

#[tokio::test]
async fn the_timeout_parameter_is_forwarded_not_a_deadline() {
    let h = Harness::start().await;
    h.gateway.started().await;
    let addr = h.demo.local_addr().to_string();
    // Triton's queueing timeout of 5 µs, to a model taking 50 ms: Triton
    // (which does not queue this request) answers, and so does the gateway.
    let r = h.post(SLOW, slow(50, 5)).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    let sent = h.demo.last_request().expect("forwarded");
    let timeout = sent
        .parameters
        .get("timeout")
        .and_then(|p| p.parameter_choice.clone());
    assert_eq!(timeout, Some(ParameterChoice::Int64Param(5)));
    assert_in_service(&listing(&h.gateway, &addr).await);
}

#[tokio::test]
async fn the_gateways_own_deadline_still_ejects() {
    let h = Harness::start_with(|c| c.upstream.request_timeout_ms = 100).await;
    h.gateway.started().await;
    let addr = h.demo.local_addr().to_string();
    // A `timeout` parameter longer than the gateway's deadline changes nothing.
    for body in [slow(1000, 0), slow(1000, 0), slow(1000, 5_000_000)] {
        let r = h.post(SLOW, body).await;
        assert_eq!(r.status, 504, "{}", text(&r));
        assert_eq!(
            text(&r),
            format!(
                r#"{{"error":"upstream {addr} did not answer within the request's deadline of 100 ms"}}"#
            )
        );
    }
    let entry = listing(&h.gateway, &addr).await;
    assert_eq!(entry["ejected"], true, "{entry}");
    assert_eq!(entry["usable"], false, "{entry}");
    let r = h.post(ADD_SUB, BODY).await;
    assert_eq!(r.status, 503, "{}", text(&r));
    let message = text(&r);
    assert!(
        message.contains(&format!(
            "{addr} (ejected after failed requests: no answer within 100 ms)"
        )),
        "{message}"
    );
}

/// The passthrough on a port-0 listener in front of `gateway`.
async fn grpc_client(
    gateway: &Arc<Gateway>,
) -> GrpcInferenceServiceClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(tensorgate::front::grpc::serve(
        gateway.clone(),
        listener,
        std::future::pending(),
    ));
    GrpcInferenceServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects")
}

fn grpc_slow(deadline: Duration) -> tonic::Request<ModelInferRequest> {
    let mut message = ModelInferRequest {
        model_name: "slow_identity".into(),
        inputs: vec![InferInputTensor {
            name: "INPUT0".into(),
            datatype: "FP32".into(),
            shape: vec![1],
            ..Default::default()
        }],
        raw_input_contents: vec![bytes::Bytes::copy_from_slice(&1f32.to_le_bytes())],
        ..Default::default()
    };
    message.parameters.insert(
        "delay_ms".into(),
        InferParameter {
            parameter_choice: Some(ParameterChoice::Int64Param(1000)),
        },
    );
    let mut request = tonic::Request::new(message);
    request.set_timeout(deadline);
    request
}

#[tokio::test]
async fn grpc_timeouts_never_eject_the_backend() {
    let h = Harness::start().await;
    let gateway = h.gateway.clone();
    gateway.started().await;
    let addr = h.demo.local_addr().to_string();
    let mut client = grpc_client(&gateway).await;
    for deadline in [Duration::from_micros(5), Duration::from_millis(200)] {
        for _ in 0..4 {
            let status = client
                .model_infer(grpc_slow(deadline))
                .await
                .expect_err("the model is slower than the deadline");
            // The gateway answers a twentieth early (190 ms); a tiny
            // deadline is the client library's own (`CANCELLED`).
            match status.code() {
                Code::DeadlineExceeded => assert_eq!(
                    status.message(),
                    format!(
                        "upstream {addr} did not answer within the request's deadline of 190 ms"
                    )
                ),
                Code::Cancelled => {}
                _ => panic!("{status:?}"),
            }
        }
    }
    assert_in_service(&listing(&gateway, &addr).await);
    let mut normal = grpc_slow(Duration::from_secs(10));
    normal.get_mut().parameters.clear();
    client
        .model_infer(normal)
        .await
        .expect("the backend still serves");
}

#[tokio::test]
async fn at_boot_the_backends_view_and_the_metrics_list_every_backend() {
    let h = Harness::start().await;
    h.gateway.started().await;
    let addr = h.demo.local_addr().to_string();
    let entry = listing(&h.gateway, &addr).await;
    assert_in_service(&entry);
    assert_eq!(entry["seen_ready"], true, "{entry}");
    assert_eq!(entry["healthy"], true, "{entry}");
    assert_backend_up(&h.gateway, &addr, 1);
    assert_eq!(h.demo.infer_count(), 0);
}

#[tokio::test]
async fn an_unreachable_backend_is_named_with_its_error() {
    let (_held, dead) = refused_addrs(1);
    let dead = dead[0].clone();
    let h = Harness::start_with(|c| c.upstream.addresses = vec![dead.clone()]).await;
    h.gateway.started().await;
    let entry = listing(&h.gateway, &dead).await;
    let why = "health check failed: connection refused";
    assert_eq!(entry["usable"], false, "{entry}");
    assert_eq!(entry["seen_ready"], false, "{entry}");
    assert_eq!(entry["healthy"], false, "{entry}");
    assert_eq!(entry["last_error"], why, "{entry}");
    assert_backend_up(&h.gateway, &dead, 0);
    let r = h.post(ADD_SUB, BODY).await;
    assert_eq!(r.status, 503);
    assert_eq!(
        text(&r),
        format!(r#"{{"error":"no upstream backend is ready: {dead} ({why})"}}"#)
    );
}

#[tokio::test]
async fn a_large_group_is_named_in_part() {
    let (_held, dead) = refused_addrs(7);
    let h = Harness::start_with(|c| c.upstream.addresses = dead.clone()).await;
    h.gateway.started().await;
    let message = text(&h.post(ADD_SUB, BODY).await);
    let named = dead.iter().filter(|a| message.contains(a.as_str())).count();
    assert_eq!(named, 5, "{message}");
    assert!(message.ends_with(", and 2 more\"}"), "{message}");
}

/// Log lines written while a test runs (the tracing subscriber's output).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn each_unreachable_backend_is_warned_about_once() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    // This test's runtime is single-threaded: the pool's loop logs here.
    let _guard = tracing::subscriber::set_default(subscriber);
    let (_held, dead) = refused_addrs(2);
    let h = Harness::start_with(|c| {
        c.upstream.addresses = dead.clone();
        c.upstream.health.interval_ms = 10;
    })
    .await;
    let gateway = &h.gateway;
    gateway.started().await;
    gateway.passes_reach(gateway.passes() + 5).await;
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    for addr in &dead {
        let warnings: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains(" WARN ") && l.contains(addr.as_str()))
            .collect();
        assert_eq!(warnings.len(), 1, "{logs}");
        assert!(warnings[0].contains("connection refused"), "{logs}");
    }
}
