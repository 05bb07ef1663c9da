//! Unit tests of the demo upstream: the service methods are called directly
//! (no network) for Triton's validation texts and codes; two tests go
//! through a real server on `127.0.0.1:0` with a tonic client.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use tonic::{Code, Request, Status};

use super::service::{DemoService, DemoState};
use super::DemoUpstream;
use tensorgate_proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;
use tensorgate_proto::inference::grpc_inference_service_server::GrpcInferenceService;
use tensorgate_proto::inference::infer_parameter::ParameterChoice;
use tensorgate_proto::inference::model_infer_request::{
    InferInputTensor, InferRequestedOutputTensor,
};
use tensorgate_proto::inference::*;

fn service() -> DemoService {
    DemoService {
        state: Arc::new(DemoState::new()),
    }
}

fn fp32(values: &[f32]) -> Bytes {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>()
        .into()
}

fn strings(values: &[&str]) -> Bytes {
    let mut data = Vec::new();
    for v in values {
        data.extend_from_slice(&(v.len() as u32).to_le_bytes());
        data.extend_from_slice(v.as_bytes());
    }
    data.into()
}

fn param(choice: ParameterChoice) -> InferParameter {
    InferParameter {
        parameter_choice: Some(choice),
    }
}

fn input(name: &str, datatype: &str, shape: &[i64]) -> InferInputTensor {
    InferInputTensor {
        name: name.to_owned(),
        datatype: datatype.to_owned(),
        shape: shape.to_vec(),
        ..Default::default()
    }
}

fn output(name: &str, classification: Option<i64>) -> InferRequestedOutputTensor {
    let parameters = classification
        .map(|k| {
            (
                "classification".to_owned(),
                param(ParameterChoice::Int64Param(k)),
            )
        })
        .into_iter()
        .collect();
    InferRequestedOutputTensor {
        name: name.to_owned(),
        parameters,
    }
}

/// `add_sub` with INPUT0 = `a`, INPUT1 = `b` as raw data.
fn add_sub(id: &str, a: &[f32], b: &[f32]) -> ModelInferRequest {
    ModelInferRequest {
        model_name: "add_sub".to_owned(),
        id: id.to_owned(),
        inputs: vec![
            input("INPUT0", "FP32", &[a.len() as i64]),
            input("INPUT1", "FP32", &[b.len() as i64]),
        ],
        raw_input_contents: vec![fp32(a), fp32(b)],
        ..Default::default()
    }
}

/// A one-input request to `model` with raw data.
fn single(model: &str, datatype: &str, shape: &[i64], data: Bytes) -> ModelInferRequest {
    ModelInferRequest {
        model_name: model.to_owned(),
        inputs: vec![input("INPUT0", datatype, shape)],
        raw_input_contents: vec![data],
        ..Default::default()
    }
}

async fn infer(service: &DemoService, request: ModelInferRequest) -> ModelInferResponse {
    service
        .model_infer(Request::new(request))
        .await
        .expect("inference succeeds")
        .into_inner()
}

async fn infer_error(service: &DemoService, request: ModelInferRequest) -> Status {
    service
        .model_infer(Request::new(request))
        .await
        .expect_err("inference fails")
}

#[track_caller]
fn assert_status(status: &Status, code: Code, message: &str) {
    assert_eq!(status.message(), message);
    assert_eq!(status.code(), code, "{message}");
}

/// `request` after `edit`.
fn edited(
    mut request: ModelInferRequest,
    edit: impl FnOnce(&mut ModelInferRequest),
) -> ModelInferRequest {
    edit(&mut request);
    request
}

/// The one-element `add_sub` request (`[1.0]`, `[1.0]`, no id) after `edit`.
fn add_sub_with(edit: impl FnOnce(&mut ModelInferRequest)) -> ModelInferRequest {
    edited(add_sub("", &[1.0], &[1.0]), edit)
}

/// Sends each request in turn; each must fail with exactly that code and message.
async fn assert_failures(
    service: &DemoService,
    cases: impl IntoIterator<Item = (ModelInferRequest, Code, &str)>,
) {
    for (request, code, message) in cases {
        let status = infer_error(service, request).await;
        assert_status(&status, code, message);
    }
}

/// Splits length-prefixed BYTES data into strings.
fn unframe(mut data: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while data.len() >= 4 {
        let len = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
        out.push(String::from_utf8_lossy(&data[4..4 + len]).into_owned());
        data = &data[4 + len..];
    }
    out
}

#[tokio::test]
async fn add_sub_returns_outputs_in_model_order() {
    let service = service();
    let mut request = add_sub("r1", &[1.0, 2.0], &[3.0, 4.0]);
    request.outputs = vec![output("OUTPUT1", None), output("OUTPUT0", None)];
    let response = infer(&service, request).await;
    assert_eq!(response.model_name, "add_sub");
    assert_eq!(response.model_version, "1");
    assert_eq!(response.id, "r1");
    let names: Vec<&str> = response.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["OUTPUT0", "OUTPUT1"]);
    assert_eq!(response.outputs[0].datatype, "FP32");
    assert_eq!(response.outputs[0].shape, [2]);
    assert_eq!(
        response.raw_output_contents,
        [fp32(&[4.0, 6.0]), fp32(&[-2.0, -2.0])]
    );

    let mut only_one = add_sub("", &[1.0], &[1.0]);
    only_one.outputs = vec![output("OUTPUT1", None)];
    let response = infer(&service, only_one).await;
    assert_eq!(response.outputs.len(), 1);
    assert_eq!(response.raw_output_contents, [fp32(&[0.0])]);
}

#[tokio::test]
async fn unknown_models_and_versions() {
    let service = service();
    assert_failures(
        &service,
        [
            (
                add_sub_with(|r| r.model_name = "nope".into()),
                Code::NotFound,
                "Request for unknown model: 'nope' is not found",
            ),
            (
                add_sub_with(|r| r.model_version = "2".into()),
                Code::NotFound,
                "Request for unknown model: 'add_sub' version 2 is not found",
            ),
            (
                add_sub_with(|r| r.model_version = "x".into()),
                Code::InvalidArgument,
                "failed to get model version from specified version string 'x' (details: stol), \
                 version should be an integral value > 0",
            ),
        ],
    )
    .await;

    let metadata = service
        .model_metadata(Request::new(ModelMetadataRequest {
            name: "nope".into(),
            version: String::new(),
        }))
        .await
        .unwrap_err();
    assert_status(
        &metadata,
        Code::NotFound,
        "Request for unknown model: 'nope' is not found",
    );

    let ready = service
        .model_ready(Request::new(ModelReadyRequest {
            name: "nope".into(),
            version: String::new(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(!ready.ready);
}

#[tokio::test]
async fn unload_and_load() {
    let service = service();
    let unload = |name: &str| {
        Request::new(RepositoryModelUnloadRequest {
            model_name: name.to_owned(),
            ..Default::default()
        })
    };
    service
        .repository_model_unload(unload("add_sub"))
        .await
        .unwrap();
    service
        .repository_model_unload(unload("nope"))
        .await
        .unwrap();

    let status = infer_error(&service, add_sub("", &[1.0], &[1.0])).await;
    assert_status(
        &status,
        Code::NotFound,
        "Request for unknown model: 'add_sub' has no available versions",
    );
    let index = service
        .repository_index(Request::new(RepositoryIndexRequest::default()))
        .await
        .unwrap()
        .into_inner();
    let entry = index.models.iter().find(|m| m.name == "add_sub").unwrap();
    assert_eq!(
        (entry.version.as_str(), entry.state.as_str()),
        ("1", "UNAVAILABLE")
    );
    assert_eq!(entry.reason, "unloaded");
    let ready_only = service
        .repository_index(Request::new(RepositoryIndexRequest {
            ready: true,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(ready_only.models.iter().all(|m| m.state == "READY"));
    assert_eq!(ready_only.models.len(), index.models.len() - 1);
    let stats = service
        .model_statistics(Request::new(ModelStatisticsRequest {
            name: "add_sub".into(),
            version: String::new(),
        }))
        .await
        .unwrap_err();
    assert_status(
        &stats,
        Code::InvalidArgument,
        "requested model 'add_sub' is not available",
    );

    let load = |name: &str| {
        Request::new(RepositoryModelLoadRequest {
            model_name: name.to_owned(),
            ..Default::default()
        })
    };
    let status = service
        .repository_model_load(load("nope"))
        .await
        .unwrap_err();
    assert_status(
        &status,
        Code::Internal,
        "failed to load 'nope', failed to poll from model repository",
    );
    service
        .repository_model_load(load("add_sub"))
        .await
        .unwrap();
    infer(&service, add_sub("", &[1.0], &[1.0])).await;
}

#[tokio::test]
async fn input_count_texts() {
    let service = service();
    assert_failures(
        &service,
        [
            (
                add_sub_with(|r| r.inputs.truncate(1)),
                Code::InvalidArgument,
                "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model \
                 'add_sub'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. \
                 Please provide all required input(s).",
            ),
            (
                edited(add_sub("r0", &[], &[]), |r| r.inputs.clear()),
                Code::InvalidArgument,
                "[request id: r0] expected 2 inputs but got 0 inputs for model 'add_sub'. Got \
                 input(s) [], but missing required input(s) ['INPUT0','INPUT1']. Please provide \
                 all required input(s).",
            ),
            (
                add_sub_with(|r| r.inputs[1].name = "INPUT9".into()),
                Code::InvalidArgument,
                "unexpected inference input 'INPUT9' for model 'add_sub'",
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn datatype_shape_and_size_texts() {
    let service = service();
    assert_failures(
        &service,
        [
            (
                add_sub_with(|r| r.inputs[0].datatype = "BOOL".into()),
                Code::InvalidArgument,
                "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'BOOL', but \
                 model 'add_sub' expects 'FP32'",
            ),
            (
                add_sub_with(|r| r.inputs[1].shape.clear()),
                Code::InvalidArgument,
                "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model \
                 'add_sub'. Expected [-1], got []. ",
            ),
            (
                single("identity_bytes", "BYTES", &[9, 1], strings(&["a"; 9])),
                Code::InvalidArgument,
                "[request id: <id_unknown>] inference request batch-size must be <= 8 for \
                 'identity_bytes'",
            ),
            (
                edited(add_sub("", &[1.0, 2.0], &[1.0, 2.0]), |r| {
                    r.raw_input_contents[1] = fp32(&[1.0, 2.0, 3.0]);
                }),
                Code::InvalidArgument,
                "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for \
                 model 'add_sub'. Expected 8, got 12",
            ),
        ],
    )
    .await;

    let request = single("identity_fp32", "FP32", &[2, 1, 1], fp32(&[1.0, 2.0]));
    let status = infer_error(&service, request).await;
    assert!(status.message().starts_with(
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model \
         'identity_fp32'. Expected [-1,-1], got [2,1,1]. NOTE: Setting a non-zero \
         max_batch_size"
    ));
}

#[tokio::test]
async fn data_source_texts() {
    let service = service();
    assert_failures(
        &service,
        [
            (
                add_sub_with(|r| {
                    r.inputs[0].contents = Some(InferTensorContents {
                        fp32_contents: vec![1.0],
                        ..Default::default()
                    });
                }),
                Code::InvalidArgument,
                "contents field must not be specified when using raw_input_contents for \
                 'INPUT0' for model 'add_sub'",
            ),
            (
                add_sub_with(|r| {
                    r.raw_input_contents.pop();
                }),
                Code::InvalidArgument,
                "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request.",
            ),
        ],
    )
    .await;

    // Typed contents only.
    let mut request = add_sub("", &[1.0, 2.0], &[3.0, 4.0]);
    request.raw_input_contents.clear();
    for (input, values) in request.inputs.iter_mut().zip([[1.0, 2.0], [3.0, 4.0]]) {
        input.contents = Some(InferTensorContents {
            fp32_contents: values.to_vec(),
            ..Default::default()
        });
    }
    let response = infer(&service, request.clone()).await;
    assert_eq!(response.raw_output_contents[0], fp32(&[4.0, 6.0]));
    request.inputs[0].contents = Some(InferTensorContents {
        int_contents: vec![1, 2],
        ..Default::default()
    });
    let status = infer_error(&service, request).await;
    assert_status(
        &status,
        Code::InvalidArgument,
        "unexpected explicit tensor data for input tensor 'INPUT0' for model 'add_sub' of type \
         'INT32', expected datatype 'FP32'",
    );

    let mut request = single("identity_bytes", "BYTES", &[1, 2], Bytes::new());
    request.raw_input_contents.clear();
    request.inputs[0].contents = Some(InferTensorContents {
        bytes_contents: vec![Bytes::from_static(b"ab"), Bytes::from_static(b"")],
        ..Default::default()
    });
    let response = infer(&service, request).await;
    assert_eq!(unframe(&response.raw_output_contents[0]), ["ab", ""]);

    let mut request = add_sub("", &[1.0], &[1.0]);
    request.inputs[0].parameters = HashMap::from([
        (
            "shared_memory_region".to_owned(),
            param(ParameterChoice::StringParam("region0".into())),
        ),
        (
            "shared_memory_byte_size".to_owned(),
            param(ParameterChoice::Int64Param(4)),
        ),
    ]);
    let status = infer_error(&service, request).await;
    assert_status(
        &status,
        Code::NotFound,
        "Unable to find shared memory region: 'region0'",
    );
}

#[tokio::test]
async fn bytes_framing_texts() {
    let service = service();
    let bytes = |data: Bytes| single("identity_bytes", "BYTES", &[1, 2], data);
    let mut truncated = strings(&["a"]).to_vec();
    truncated.extend_from_slice(&[1, 0]);
    assert_failures(
        &service,
        [
            (
                bytes(strings(&["ab"])),
                Code::InvalidArgument,
                "[request id: <id_unknown>] expected 2 string elements for inference input \
                 'INPUT0' for model 'identity_bytes', got 1",
            ),
            (
                bytes(strings(&["a", "b", "c"])),
                Code::InvalidArgument,
                "[request id: <id_unknown>] unexpected number of string elements 3 for inference \
                 input 'INPUT0' for model 'identity_bytes', expecting 2",
            ),
            (
                bytes(truncated.into()),
                Code::InvalidArgument,
                "[request id: <id_unknown>] incomplete string length indicator for inference \
                 input 'INPUT0' for model 'identity_bytes', expecting 4 bytes but only 2 bytes \
                 available. Please make sure the string length indicator is in one buffer.",
            ),
        ],
    )
    .await;

    let request = single("string_single", "BYTES", &[1], strings(&["hello"]));
    let response = infer(&service, request).await;
    assert_eq!(response.outputs[0].datatype, "BYTES");
    assert_eq!(response.outputs[0].shape, [1]);
    assert_eq!(unframe(&response.raw_output_contents[0]), ["hello"]);
}

#[tokio::test]
async fn parameter_texts() {
    let service = service();
    let cases = [
        (
            "triton_foo",
            ParameterChoice::BoolParam(true),
            "parameter keys starting with 'triton_' are reserved for Triton usage. Only the \
             following keys starting with 'triton_' are allowed: \
             triton_enable_empty_final_response",
        ),
        (
            "custom",
            ParameterChoice::Uint64Param(1),
            "invalid value type for 'custom' parameter, expected int64_param, bool_param, or \
             string_param.",
        ),
        (
            "sequence_start",
            ParameterChoice::Int64Param(1),
            "invalid value type for 'sequence_start' parameter, expected bool_param.",
        ),
        (
            "priority",
            ParameterChoice::Int64Param(-1),
            "invalid value for 'priority', expected value >= 0.",
        ),
    ];
    for (key, choice, message) in cases {
        let mut request = add_sub("", &[1.0], &[1.0]);
        request.parameters.insert(key.to_owned(), param(choice));
        let status = infer_error(&service, request).await;
        assert_status(&status, Code::InvalidArgument, message);
    }
    let mut request = add_sub("", &[1.0], &[1.0]);
    for (key, choice) in [
        ("custom", ParameterChoice::DoubleParam(1.5)),
        ("sequence_id", ParameterChoice::StringParam("s".into())),
        ("priority", ParameterChoice::Uint64Param(1)),
        ("timeout", ParameterChoice::Int64Param(1000)),
    ] {
        request.parameters.insert(key.to_owned(), param(choice));
    }
    infer(&service, request).await;
}

#[tokio::test]
async fn output_texts() {
    let service = service();
    let decoupled = ModelInferRequest {
        model_name: "repeat_decoupled".into(),
        ..single(
            "repeat_decoupled",
            "INT32",
            &[1],
            Bytes::from_static(&[2, 0, 0, 0]),
        )
    };
    assert_failures(
        &service,
        [
            (
                add_sub_with(|r| r.outputs = vec![output("OUTPUT7", None)]),
                Code::InvalidArgument,
                "unexpected inference output 'OUTPUT7' for model 'add_sub'",
            ),
            (
                add_sub_with(|r| r.outputs = vec![output("OUTPUT0", Some(0))]),
                Code::InvalidArgument,
                "invalid value for 'classification' parameter, expected >= 0",
            ),
            (
                edited(
                    single("identity_bytes", "BYTES", &[1, 1], strings(&["a"])),
                    |r| r.outputs = vec![output("OUTPUT0", Some(1))],
                ),
                Code::InvalidArgument,
                "class result not available for output due to unsupported type 'BYTES'",
            ),
            (
                decoupled,
                Code::Unimplemented,
                "ModelInfer RPC doesn't support models with decoupled transaction policy",
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn classification() {
    let service = service();
    let mut request = add_sub("", &[1.0, 2.0], &[3.0, 4.0]);
    request.outputs = vec![output("OUTPUT0", Some(9)), output("OUTPUT1", Some(1))];
    let response = infer(&service, request).await;
    assert_eq!(response.outputs[0].datatype, "BYTES");
    assert_eq!(response.outputs[0].shape, [2]);
    assert_eq!(
        unframe(&response.raw_output_contents[0]),
        ["6.000000:1:label1", "4.000000:0:label0"]
    );
    assert_eq!(response.outputs[1].shape, [1]);
    assert_eq!(unframe(&response.raw_output_contents[1]), ["-2.000000:0"]);

    let values: Vec<u8> = [1i32, 5, 3, 7, 2, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut request = single("identity_int32", "INT32", &[2, 3], values.into());
    request.outputs = vec![output("OUTPUT0", Some(2))];
    let response = infer(&service, request).await;
    assert_eq!(response.outputs[0].shape, [2, 2]);
    assert_eq!(
        unframe(&response.raw_output_contents[0]),
        ["5:1", "3:2", "7:0", "2:1"]
    );
}

#[tokio::test]
async fn statistics_count_successes() {
    let service = service();
    infer(&service, add_sub("", &[1.0], &[1.0])).await;
    infer_error(&service, add_sub("", &[1.0], &[])).await;
    let request = single("identity_fp32", "FP32", &[3, 1], fp32(&[1.0, 2.0, 3.0]));
    infer(&service, request).await;
    let stats = service
        .model_statistics(Request::new(ModelStatisticsRequest::default()))
        .await
        .unwrap()
        .into_inner();
    let find = |name: &str| stats.model_stats.iter().find(|s| s.name == name).unwrap();
    let add_sub_stats = find("add_sub");
    assert_eq!(add_sub_stats.inference_count, 1);
    assert_eq!(add_sub_stats.execution_count, 1);
    assert_eq!(
        add_sub_stats
            .inference_stats
            .unwrap()
            .success
            .unwrap()
            .count,
        1
    );
    assert_eq!(find("identity_fp32").inference_count, 3);
    assert_eq!(find("identity_fp32").batch_stats[0].batch_size, 3);
    assert!(add_sub_stats.last_inference > 0);
}

#[tokio::test]
async fn metadata_and_config() {
    let service = service();
    let metadata = service
        .model_metadata(Request::new(ModelMetadataRequest {
            name: "identity_bytes".into(),
            version: "1".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(metadata.platform, "demo");
    assert_eq!(metadata.versions, ["1"]);
    assert_eq!(metadata.inputs[0].datatype, "BYTES");
    assert_eq!(metadata.inputs[0].shape, [-1, -1]);

    let config = service
        .model_config(Request::new(ModelConfigRequest {
            name: "repeat_decoupled".into(),
            version: String::new(),
        }))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(config.backend, "demo");
    assert_eq!(config.input[0].data_type, DataType::TypeInt32 as i32);
    assert!(config.model_transaction_policy.unwrap().decoupled);
    assert_eq!(config.instance_group[0].count, 1);

    let config = service
        .model_config(Request::new(ModelConfigRequest {
            name: "add_sub".into(),
            version: String::new(),
        }))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(config.output[0].label_filename, "add_sub_labels.txt");
    assert_eq!(config.output[1].label_filename, "");
}

/// `fixed_capacity` runs 4 requests at once and no more; the rest wait
/// their turn and are all answered, each with `add_sub`'s outputs. On this
/// test's one thread every request reaches the gate before a slot can be
/// given back, so the first 4 take the slots and the other 8 wait.
#[tokio::test]
async fn fixed_capacity_runs_four_at_once_and_queues_the_rest() {
    let service = service();
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let service = service.clone();
            let request = ModelInferRequest {
                model_name: "fixed_capacity".to_owned(),
                ..add_sub(&i.to_string(), &[1.0, 2.0], &[3.0, 5.0])
            };
            tokio::spawn(async move { infer(&service, request).await })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let response = call.await.expect("the call's task ends");
        assert_eq!(response.id, i.to_string());
        assert_eq!(
            response.raw_output_contents,
            [fp32(&[4.0, 7.0]), fp32(&[-2.0, -3.0])]
        );
    }
    let gate = service.state.gate("fixed_capacity").expect("it has slots");
    assert_eq!(gate.peak(), 4, "at most 4 at once, and 4 were busy");

    let config = service
        .model_config(Request::new(ModelConfigRequest {
            name: "fixed_capacity".into(),
            version: String::new(),
        }))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(config.instance_group[0].count, 4);
    assert_eq!(config.parameters["delay_ms"].string_value, "10");
}

#[test]
fn handle_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<DemoUpstream>();
}

#[tokio::test]
async fn serves_model_infer_over_the_network() {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("binds");
    let mut client = GrpcInferenceServiceClient::connect(format!("http://{}", demo.local_addr()))
        .await
        .expect("connects");
    let response = client
        .model_infer(add_sub("net", &[1.5], &[0.5]))
        .await
        .expect("inference succeeds")
        .into_inner();
    assert_eq!(response.raw_output_contents, [fp32(&[2.0]), fp32(&[1.0])]);
    // Empty INPUT1 passes validation; the model refuses unequal shapes.
    let status = client
        .model_infer(add_sub("", &[1.0], &[]))
        .await
        .expect_err("model error");
    assert_status(
        &status,
        Code::InvalidArgument,
        "INPUT0 and INPUT1 must have the same shape, got [1] and [0]",
    );
    assert_eq!(demo.infer_count(), 2);
    assert_eq!(
        demo.last_request().unwrap().raw_input_contents[1],
        Bytes::new()
    );
    demo.shutdown();
}

#[tokio::test]
async fn streams_decoupled_responses_and_errors() {
    use tokio_stream::StreamExt;

    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("binds");
    let mut client = GrpcInferenceServiceClient::connect(format!("http://{}", demo.local_addr()))
        .await
        .expect("connects");
    let mut repeat = single(
        "repeat_decoupled",
        "INT32",
        &[1],
        Bytes::from_static(&[3, 0, 0, 0]),
    );
    repeat.id = "rep".into();
    repeat
        .parameters
        .insert("delay_ms".into(), param(ParameterChoice::Int64Param(1)));
    let mut bad = add_sub("bad", &[1.0], &[2.0]);
    bad.raw_input_contents[1] = fp32(&[1.0, 2.0, 3.0]);
    let ok = add_sub("ok", &[1.0], &[2.0]);
    let requests = tokio_stream::iter([bad, ok, repeat]);
    let mut responses = client
        .model_stream_infer(requests)
        .await
        .expect("stream opens")
        .into_inner();

    let mut received = Vec::new();
    while let Some(message) = responses.next().await {
        received.push(message.expect("stream stays healthy"));
    }
    assert_eq!(received.len(), 5);
    assert_eq!(
        received[0].error_message,
        "[request id: bad] input byte size mismatch for input 'INPUT1' for model 'add_sub'. \
         Expected 4, got 12"
    );
    assert_eq!(received[0].infer_response.as_ref().unwrap().id, "bad");
    let final_flag = |m: &ModelStreamInferResponse| {
        m.infer_response.as_ref().unwrap().parameters["triton_final_response"]
            .parameter_choice
            .clone()
    };
    assert_eq!(received[1].infer_response.as_ref().unwrap().id, "ok");
    assert_eq!(
        final_flag(&received[1]),
        Some(ParameterChoice::BoolParam(true))
    );
    let repeats: Vec<_> = received[2..]
        .iter()
        .map(|m| {
            let response = m.infer_response.as_ref().unwrap();
            assert_eq!(response.id, "rep");
            (response.raw_output_contents[0].clone(), final_flag(m))
        })
        .collect();
    let flag = |b| Some(ParameterChoice::BoolParam(b));
    assert_eq!(
        repeats,
        [
            (Bytes::from_static(&[0, 0, 0, 0]), flag(false)),
            (Bytes::from_static(&[1, 0, 0, 0]), flag(false)),
            (Bytes::from_static(&[2, 0, 0, 0]), flag(true)),
        ]
    );
    assert_eq!(demo.infer_count(), 3);
}

#[test]
fn background_server_answers_health_and_large_tensors() {
    use tensorgate_proto::health::health_client::HealthClient;
    use tensorgate_proto::health::HealthCheckRequest;

    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).expect("binds");
    let url = format!("http://{}", demo.local_addr());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut health = HealthClient::connect(url.clone()).await.expect("connects");
        let status = health
            .check(HealthCheckRequest::default())
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, 1, "SERVING");

        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = GrpcInferenceServiceClient::new(channel)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let size = 64 << 20;
        let data = Bytes::from(vec![7u8; size]);
        let request = single("identity_uint8", "UINT8", &[1, size as i64], data.clone());
        let response = client
            .model_infer(request)
            .await
            .expect("64 MiB pass")
            .into_inner();
        assert_eq!(response.raw_output_contents[0], data);
    });
    // Closes the client's connections, so the graceful shutdown is quick.
    drop(runtime);
    demo.shutdown();
}
