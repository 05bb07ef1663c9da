//! Upstreams that are not Triton: the demo with the quirks of KServe's and
//! MLServer's gRPC fronts (`tensorgate_demo::Quirks`), and what the gateway
//! makes of them. Each test fails without the gateway's own handling of
//! that quirk.

use std::io::Write;

use tensorgate_demo::{DemoUpstream, Quirks};

use crate::streamed_body::{add_sub, assert_added, declared, N};
use crate::support::raw::read_answer;
use crate::support::{assert_answer, text, GatewayProcess, Harness};

const ADD_SUB: &str = "/v2/models/add_sub/infer";

/// `add_sub` with `[1,2]` and `[3,4]`, asking for `outputs` (JSON text).
fn add_sub_json(outputs: &str) -> String {
    format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]}},{{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}}],"outputs":[{outputs}]}}"#
    )
}

/// KServe's gRPC server answers every output, whatever `outputs` asks.
fn ignoring_outputs() -> Quirks {
    Quirks {
        ignore_requested_outputs: true,
        ..Quirks::default()
    }
}

/// grpc core's message limit, as MLServer (4 MiB) and KServe (8 MiB) have
/// it, here `limit` bytes.
fn limited(limit: usize) -> Quirks {
    Quirks {
        max_receive_message: Some(limit),
        ..Quirks::default()
    }
}

/// A server without these RPCs (KServe has no `ModelConfig`, no
/// `RepositoryIndex`).
fn lacking(missing_rpcs: &[&'static str]) -> Quirks {
    Quirks {
        missing_rpcs: missing_rpcs.to_vec(),
        ..Quirks::default()
    }
}

/// Metadata as KServe and MLServer send it.
fn oip_metadata() -> Quirks {
    Quirks {
        oip_metadata: true,
        ..Quirks::default()
    }
}

/// `add_sub`'s metadata as an Open Inference Protocol server sends it.
const ADD_SUB_OIP_METADATA: &str = r#"{"name":"add_sub","versions":[],"platform":"demo","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1],"parameters":{"content_type":"np"}},{"name":"INPUT1","datatype":"FP32","shape":[-1],"parameters":{"content_type":"np"}}],"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1],"parameters":{"content_type":"np"}},{"name":"OUTPUT1","datatype":"FP32","shape":[-1],"parameters":{"content_type":"np"}}],"parameters":{"content_type":"np"}}"#;

/// An `add_sub` JSON request of `n` elements per input.
fn add_sub_of(n: usize) -> String {
    let data = vec!["1.5"; n].join(",");
    format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[{n}],"data":[{data}]}},{{"name":"INPUT1","datatype":"FP32","shape":[{n}],"data":[{data}]}}]}}"#
    )
}

/// The size a message-size refusal names (the first number after `of`).
fn size_named(text: &str) -> u64 {
    let after = text.split(" message of ").nth(1).expect("names a size");
    after.split(' ').next().unwrap().parse().expect("a number")
}

#[tokio::test]
async fn only_the_requested_outputs_come_back_from_an_upstream_that_ignores_them() {
    let h = Harness::start().await;
    h.demo.set_quirks(ignoring_outputs());
    let r = h.post(ADD_SUB, add_sub_json(r#"{"name":"OUTPUT1"}"#)).await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT1","datatype":"FP32","shape":[2],"data":[-2.0,-2.0]}]}"#,
    );
    // Binary: only OUTPUT1's bytes follow the header.
    let binary = add_sub_json(r#"{"name":"OUTPUT1","parameters":{"binary_data":true}}"#);
    let r = h.post(ADD_SUB, binary).await;
    let header = r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT1","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}"#;
    let body = r.body_bytes();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(&body[..header.len()], header.as_bytes());
    assert_eq!(
        &body[header.len()..],
        [-2f32, -2f32].map(f32::to_le_bytes).concat()
    );
}

#[tokio::test]
async fn an_unknown_requested_output_is_refused_before_the_call() {
    let h = Harness::start().await;
    h.demo.set_quirks(ignoring_outputs());
    let outputs = r#"{"name":"OUTPUT9"},{"name":"OUTPUT1"},{"name":"OUTPUT8"}"#;
    let r = h.post(ADD_SUB, add_sub_json(outputs)).await;
    // Triton's text; the first unknown name in byte order, as its core.
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"unexpected inference output 'OUTPUT8' for model 'add_sub'"}"#,
    );
    assert_eq!(h.demo.infer_count(), 0, "{}", text(&r));
}

#[test]
fn a_streamed_answer_skips_the_outputs_not_requested() {
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    demo.set_quirks(ignoring_outputs());
    let gw = GatewayProcess::with_upstream(demo.local_addr());
    // A 4.8 MB binary body asking for OUTPUT0 only, binary: its answer is
    // streamed; the upstream also sends OUTPUT1, which must not follow.
    let (json, tail) = add_sub(N);
    let mut s = crate::support::raw::connect(gw.addr);
    s.write_all(&declared(&json, &tail)).unwrap();
    let (h, b) = read_answer(&mut s);
    assert_added(&h, &b, N);
    let header = String::from_utf8_lossy(&b[..b.len() - N * 4]);
    assert_eq!(
        header,
        r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[600000],"parameters":{"binary_data_size":2400000}}]}"#
    );
    assert_eq!(demo.infer_count(), 1);
}

#[tokio::test]
async fn an_upstream_message_limit_is_named_with_the_setting_to_raise() {
    let h = Harness::start().await;
    h.demo.set_quirks(limited(1000));
    let r = h.post(ADD_SUB, add_sub_of(300)).await;
    let body = text(&r);
    let size = size_named(&body);
    assert!(size > 2 * 300 * 4, "{body}");
    let addr = h.demo.local_addr();
    assert_answer(
        &r,
        400,
        "application/json",
        &format!(
            r#"{{"error":"backend {addr}: a gRPC message of {size} bytes is over the upstream's limit of 1000 bytes (the server said: Received message larger than max ({size} vs. 1000)); raise the server's limit (MLServer: grpc_max_message_length; KServe: --grpc_max_receive_message_length (and --grpc_max_send_message_length for answers); Triton's is fixed at 2147483647) and upstream.max_message_bytes to match, or send less per request"}}"#
        ),
    );
    assert_eq!(h.demo.infer_count(), 0);
}

#[tokio::test]
async fn the_passthrough_relays_an_upstream_message_limit_as_the_server_words_it() {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    demo.set_quirks(limited(1000));
    let (_gateway, addr, _server) =
        crate::grpc_passthrough::serve(vec![demo.local_addr().to_string()], |_| {}).await;
    let mut client = crate::grpc_passthrough::connect(addr).await;
    let a = vec![1.5f32; 300];
    let status = client
        .model_infer(crate::grpc_passthrough::add_sub(&a, &a))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    let size = status
        .message()
        .split(|c: char| !c.is_ascii_digit())
        .find(|run| !run.is_empty())
        .unwrap_or_default();
    assert_eq!(
        status.message(),
        format!("Received message larger than max ({size} vs. 1000)")
    );
}

#[tokio::test]
async fn the_gateways_own_message_limit_names_its_setting() {
    let h = Harness::start_with(|c| c.upstream.max_message_bytes = 2000).await;
    let r = h.post(ADD_SUB, add_sub_of(600)).await;
    let size = size_named(&text(&r));
    assert!(size > 2 * 600 * 4, "{}", text(&r));
    assert_answer(
        &r,
        400,
        "application/json",
        &format!(
            r#"{{"error":"a gRPC message of {size} bytes is over the gateway's limit of 2000 bytes: raise upstream.max_message_bytes (and the server's own limit to match)"}}"#
        ),
    );
    assert_eq!(h.demo.infer_count(), 0);
}

#[tokio::test]
async fn a_missing_model_config_is_asked_once_and_config_answers_404() {
    // No signature cache: every request needs the model's signature.
    let h = Harness::start_with(|c| c.upstream.model_info_ttl_ms = 0).await;
    h.demo.set_quirks(lacking(&["ModelConfig"]));
    let missing = format!(
        r#"{{"error":"backend {} does not implement the ModelConfig RPC"}}"#,
        h.demo.local_addr()
    );
    for _ in 0..2 {
        let r = h.get("/v2/models/add_sub/config").await;
        assert_answer(&r, 404, "application/json", &missing);
    }
    // The signature comes from ModelMetadata instead, without asking for
    // the configuration again.
    for _ in 0..3 {
        let r = h.post(ADD_SUB, add_sub_json(r#"{"name":"OUTPUT0"}"#)).await;
        assert_eq!(r.status, 200, "{}", text(&r));
    }
    assert_eq!(h.demo.calls("ModelConfig"), 1);
    assert_eq!(h.demo.calls("ModelMetadata"), 3);
}

#[tokio::test]
async fn a_missing_repository_index_is_asked_once() {
    let h = Harness::start_with(|c| {
        c.upstream.health.interval_ms = 20;
        c.upstream.model_refresh_ms = 1;
    })
    .await;
    h.demo.set_quirks(lacking(&["RepositoryIndex"]));
    let gateway = &h.gateway;
    gateway.started().await;
    gateway.passes_reach(gateway.passes() + 5).await;
    let r = h.post("/v2/repository/index", "").await;
    assert_answer(
        &r,
        404,
        "application/json",
        &format!(
            r#"{{"error":"backend {} does not implement the RepositoryIndex RPC"}}"#,
            h.demo.local_addr()
        ),
    );
    assert_eq!(h.demo.calls("RepositoryIndex"), 1);
    // The backend still serves every model.
    let r = h.post(ADD_SUB, add_sub_json(r#"{"name":"OUTPUT1"}"#)).await;
    assert_eq!(r.status, 200, "{}", text(&r));
}

#[tokio::test]
async fn without_a_signature_an_unknown_output_is_refused_on_the_answer() {
    let h = Harness::start().await;
    h.demo.set_quirks(Quirks {
        ignore_requested_outputs: true,
        missing_rpcs: vec!["ModelConfig", "ModelMetadata"],
        ..Quirks::default()
    });
    let r = h.post(ADD_SUB, add_sub_json(r#"{"name":"OUTPUT9"}"#)).await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"unexpected inference output 'OUTPUT9' for model 'add_sub'"}"#,
    );
    // The model ran: the refusal came from its answer.
    assert_eq!(h.demo.infer_count(), 1);
    let r = h.post(ADD_SUB, add_sub_json(r#"{"name":"OUTPUT1"}"#)).await;
    assert!(
        text(&r).contains(r#""outputs":[{"name":"OUTPUT1""#),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn server_metadata_keeps_the_upstreams_extensions_and_adds_the_gateways() {
    let h = Harness::start().await;
    h.demo.set_quirks(oip_metadata());
    let version = env!("CARGO_PKG_VERSION");
    assert_answer(
        &h.get("/v2").await,
        200,
        "application/json",
        &format!(
            r#"{{"name":"demo","version":"{version}","extensions":["model_repository_extension","binary_tensor_data"]}}"#
        ),
    );
}

#[tokio::test]
async fn model_metadata_keeps_the_upstreams_parameters() {
    let h = Harness::start().await;
    h.demo.set_quirks(oip_metadata());
    let r = h.get("/v2/models/add_sub").await;
    assert_answer(&r, 200, "application/json", ADD_SUB_OIP_METADATA);
    // The passthrough relays them too.
    let (_gateway, addr, _server) =
        crate::grpc_passthrough::serve(vec![h.demo.local_addr().to_string()], |_| {}).await;
    let mut client = crate::grpc_passthrough::connect(addr).await;
    let request = tensorgate::proto::inference::ModelMetadataRequest {
        name: "add_sub".into(),
        version: String::new(),
    };
    let metadata = client.model_metadata(request).await.unwrap().into_inner();
    assert_eq!(metadata.parameters.len(), 1);
    assert_eq!(metadata.outputs[1].parameters.len(), 1);
}
