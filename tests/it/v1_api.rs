//! The legacy v1 API against the embedded demo upstream (in-process):
//! path prefix, text and JSON formats, classification with labels, STRING
//! and FP16 tensors, parameters, model control, repository index, and the
//! error answers (400 + `NV-Status` code and message, never a JSON body).

use crate::support::Harness;
use crate::v1::{client_reads_infer, descriptor, Seen};
use http::Method;
use prost::Message;
use prost_reflect::DynamicMessage;
use tensorgate::proto::inference::infer_parameter::ParameterChoice as P;
use tensorgate::proto::v1 as pb;

async fn infer(h: &Harness, target: &str, header: &str, body: Vec<u8>) -> Seen {
    Seen::from(
        h.send(Method::POST, target, &[("NV-InferRequest", header)], body)
            .await,
    )
}

fn header(text: &str) -> pb::InferRequestHeader {
    DynamicMessage::parse_text_format(descriptor("InferRequestHeader"), text)
        .expect("parses")
        .transcode_to()
        .expect("transcodes")
}

fn f32s(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[tokio::test]
async fn served_under_the_prefix_and_at_api() {
    let h = Harness::start_with(|c| {
        c.v1.path_prefix = "/base/path".into();
        c.v1.server_id = "gw:1".into();
    })
    .await;
    for path in ["/base/path/api/health/live", "/api/health/ready"] {
        let r = Seen::from(h.get(path).await);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.nv_status().server_id, "gw:1");
    }
    assert_eq!(h.get("/other/api/health/live").await.status, 404);
    assert_eq!(h.get("/base/path/v2/health/live").await.status, 404);
}

#[tokio::test]
async fn text_is_the_default_format() {
    let h = Harness::start().await;
    let r = Seen::from(h.get("/api/status/simple").await);
    r.assert_success();
    let text = String::from_utf8(r.body.clone()).expect("text status");
    let status: pb::ServerStatus =
        DynamicMessage::parse_text_format(descriptor("ServerStatus"), &text)
            .expect("DebugString parses")
            .transcode_to()
            .unwrap();
    assert_eq!(
        status.model_status["simple"]
            .config
            .as_ref()
            .unwrap()
            .max_batch_size,
        8
    );
    assert!(text.contains("\n        data_type: TYPE_INT32\n"), "{text}");

    let json = Seen::from(h.get("/api/status/simple?format=json").await);
    assert_eq!(json.header("Content-Type"), Some("application/json"));
    let value: serde_json::Value = serde_json::from_slice(&json.body).expect("json");
    assert_eq!(value["modelStatus"]["simple"]["config"]["maxBatchSize"], 8);

    let request = r#"batch_size: 1 input { name: "INPUT0" dims: 16 } input { name: "INPUT1" dims: 16 } output { name: "OUTPUT1" }"#;
    let r = infer(&h, "/api/infer/simple", request, vec![0; 128]).await;
    r.assert_success();
    let trailer = String::from_utf8(r.body[64..].to_vec()).expect("text trailer");
    assert!(
        trailer.starts_with("model_name: \"simple\"\nmodel_version: 1\nbatch_size: 1\noutput {\n"),
        "{trailer}"
    );
}

#[tokio::test]
async fn classes_carry_the_label_file() {
    let h = Harness::start().await;
    // add_sub: FP32 [-1], no batching; OUTPUT0 has labels label0..label15.
    let text = r#"batch_size: 1 input { name: "INPUT0" dims: 4 } input { name: "INPUT1" dims: 4 } output { name: "OUTPUT0" cls { count: 2 } } output { name: "OUTPUT1" }"#;
    let body = [f32s(&[1.0, 5.0, 3.0, 2.0]), f32s(&[0.5; 4])].concat();
    let r = infer(&h, "/api/infer/add_sub?format=binary", text, body).await;
    let got = client_reads_infer(&r, &header(text), "add_sub");
    assert_eq!(
        got.classes["OUTPUT0"],
        [vec![
            (1, 5.5, "label1".to_string()),
            (2, 3.5, "label2".to_string())
        ]]
    );
    assert_eq!(got.raw["OUTPUT1"], f32s(&[0.5, 4.5, 2.5, 1.5]));
    let sent = h.demo.last_request().unwrap();
    assert_eq!(sent.inputs[0].shape, [4], "no batch dimension for add_sub");
}

#[tokio::test]
async fn strings_and_half_floats_with_a_batch_dimension() {
    let h = Harness::start().await;
    let text = r#"batch_size: 2 input { name: "INPUT0" dims: 1 } output { name: "OUTPUT0" }"#;
    let body = b"\x02\x00\x00\x00ab\x00\x00\x00\x00".to_vec();
    let r = infer(
        &h,
        "/api/infer/identity_bytes?format=binary",
        text,
        body.clone(),
    )
    .await;
    let got = client_reads_infer(&r, &header(text), "identity_bytes");
    assert_eq!(got.raw["OUTPUT0"], body);
    assert_eq!(h.demo.last_request().unwrap().inputs[0].shape, [2, 1]);

    let text = r#"batch_size: 1 input { name: "INPUT0" dims: 3 } output { name: "OUTPUT0" }"#;
    let body = vec![0, 60, 0, 64, 0, 188];
    let r = infer(
        &h,
        "/api/infer/identity_fp16/1?format=binary",
        text,
        body.clone(),
    )
    .await;
    let got = client_reads_infer(&r, &header(text), "identity_fp16");
    assert_eq!(got.raw["OUTPUT0"], body);
    assert_eq!(got.header.output[0].raw.as_ref().unwrap().dims, [3]);
}

#[tokio::test]
async fn scheduling_fields_become_v2_parameters() {
    let h = Harness::start().await;
    // The timeout is Triton's queueing timeout, only forwarded.
    let text = r#"batch_size: 1 input { name: "INPUT0" dims: 1 } output { name: "OUTPUT0" } id: 77 correlation_id: 5 flags: 2 priority: 3 timeout_microseconds: 60000000"#;
    let r = infer(
        &h,
        "/api/infer/identity_int32?format=binary",
        text,
        vec![7, 0, 0, 0],
    )
    .await;
    let got = client_reads_infer(&r, &header(text), "identity_int32");
    assert_eq!((got.header.id, got.trailer.id), (77, 77));
    let sent = h.demo.last_request().unwrap();
    let param = |k: &str| {
        sent.parameters
            .get(k)
            .and_then(|p| p.parameter_choice.clone())
    };
    assert_eq!(sent.id, "77");
    assert_eq!(param("sequence_id"), Some(P::Int64Param(5)));
    assert_eq!(param("sequence_end"), Some(P::BoolParam(true)));
    assert_eq!(param("sequence_start"), None);
    assert_eq!(param("priority"), Some(P::Int64Param(3)));
    assert_eq!(param("timeout"), Some(P::Int64Param(60_000_000)));
}

/// Target, `NV-InferRequest`, body, expected code, message prefix.
type ErrorCase = (
    &'static str,
    Option<&'static str>,
    Vec<u8>,
    pb::RequestStatusCode,
    &'static str,
);

#[tokio::test]
async fn errors_are_400_with_a_status_code_and_message() {
    use pb::RequestStatusCode as C;
    let h = Harness::start().await;
    let simple =
        r#"batch_size: 1 input { name: "INPUT0" dims: 16 } input { name: "INPUT1" dims: 16 }"#;
    let cases: Vec<ErrorCase> = vec![
        (
            "/api/infer/simple",
            None,
            vec![],
            C::InvalidArg,
            "missing NV-InferRequest header",
        ),
        (
            "/api/infer/simple",
            Some("batch_size: 1 colour: 3"),
            vec![],
            C::InvalidArg,
            "failed to parse NV-InferRequest header",
        ),
        (
            "/api/infer/nosuch",
            Some(simple),
            vec![0; 128],
            C::NotFound,
            "Request for unknown model: 'nosuch' is not found",
        ),
        (
            "/api/infer/simple/2",
            Some(simple),
            vec![0; 128],
            C::NotFound,
            "Request for unknown model: 'simple' version 2 is not found",
        ),
        (
            "/api/infer/simple",
            Some(simple),
            vec![0; 130],
            C::InvalidArg,
            "unexpected additional input data for model 'simple'",
        ),
        (
            "/api/infer/add_sub",
            Some(
                r#"batch_size: 2 input { name: "INPUT0" dims: 1 } input { name: "INPUT1" dims: 1 }"#,
            ),
            vec![0; 16],
            C::InvalidArg,
            "inference request batch-size must be 1 for 'add_sub'",
        ),
        (
            "/api/infer/identity_bytes",
            Some(
                r#"batch_size: 1 input { name: "INPUT0" dims: 1 } output { name: "OUTPUT0" cls { count: 1 } }"#,
            ),
            b"\x01\x00\x00\x00a".to_vec(),
            C::InvalidArg,
            "class result not available for output due to unsupported type 'BYTES'",
        ),
        (
            "/api/infer/repeat_decoupled",
            Some(r#"batch_size: 1 input { name: "INPUT0" }"#),
            vec![0; 4],
            C::Unsupported,
            "v1 inference doesn't support models with decoupled transaction policy",
        ),
        (
            "/api/infer/simple?format=json",
            Some(simple),
            vec![0; 128],
            C::InvalidArg,
            "infer answers are text or binary, not json",
        ),
        (
            "/api/sharedmemorycontrol/status",
            None,
            vec![],
            C::Unsupported,
            "shared-memory control is not available",
        ),
        (
            "/api/nothing",
            None,
            vec![],
            C::InvalidArg,
            "no v1 endpoint for '/api/nothing'",
        ),
    ];
    for (target, value, body, code, message) in cases {
        let headers: Vec<(&str, &str)> =
            value.map(|v| ("NV-InferRequest", v)).into_iter().collect();
        let r = Seen::from(h.send(Method::POST, target, &headers, body).await);
        let msg = r.assert_failure(code);
        assert!(msg.starts_with(message), "{target}: {msg}");
        assert_eq!(r.header("Content-Type"), None);
    }
    let r = Seen::from(h.get("/api/infer/simple").await);
    assert_eq!((r.status, r.nv_status().code), (405, C::Unsupported as i32));
}

#[tokio::test]
async fn model_control_and_repository_index() {
    let h = Harness::start().await;
    let r = Seen::from(h.get("/api/repository/index?format=binary").await);
    r.assert_success();
    let index = pb::ModelRepositoryIndex::decode(&r.body[..]).expect("binary index");
    assert!(index.models.iter().any(|m| m.name == "simple"));

    let r = Seen::from(h.post("/api/modelcontrol/unload/simple", "").await);
    r.assert_success();
    let r = Seen::from(h.get("/api/status/simple?format=binary").await);
    let msg = r.assert_failure(pb::RequestStatusCode::NotFound);
    assert_eq!(msg, "no status available for unknown model 'simple'");
    let all = Seen::from(h.get("/api/status?format=binary").await);
    all.assert_success();
    let status = pb::ServerStatus::decode(&all.body[..]).unwrap();
    assert!(!status.model_status.contains_key("simple"));
    assert!(status.model_status.contains_key("add_sub"));

    Seen::from(h.post("/api/modelcontrol/load/simple", "").await).assert_success();
    Seen::from(h.get("/api/status/simple?format=binary").await).assert_success();
    let r = Seen::from(h.post("/api/modelcontrol/load/nosuch", "").await);
    assert_eq!(r.status, 400);
    assert_ne!(r.nv_status().code, pb::RequestStatusCode::Success as i32);
}

#[tokio::test]
async fn an_unreachable_upstream_is_unavailable() {
    let h = Harness::start_with(|c| c.upstream.addresses = vec!["127.0.0.1:9".into()]).await;
    // The gateway itself is live; the v1 status needs a backend.
    assert_eq!(h.get("/api/health/live").await.status, 200);
    let r = Seen::from(h.get("/api/status").await);
    let msg = r.assert_failure(pb::RequestStatusCode::Unavailable);
    assert!(msg.starts_with("no upstream backend is ready"), "{msg}");
}
