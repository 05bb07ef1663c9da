//! Bridge mode of system shared memory on the gRPC front: a gRPC client
//! beside the gateway registers its regions (`SystemSharedMemory*`,
//! answered by the gateway with Triton's texts and codes), names them in
//! `ModelInfer` and `ModelStreamInfer`, and finds its outputs written into
//! them, while the upstream (the demo, which cannot see this directory)
//! gets plain tensors. One region table serves both fronts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio_stream::StreamExt;
use tonic::Code;

use tensorgate::config::{Config, SharedMemoryMode};
use tensorgate::front::http::HttpRequest;
use tensorgate::proto::inference::infer_parameter::ParameterChoice;
use tensorgate::proto::inference::model_infer_request::{
    InferInputTensor, InferRequestedOutputTensor,
};
use tensorgate::proto::inference::*;
use tensorgate_demo::DemoUpstream;

use super::grpc_passthrough::{connect, serve};

/// The demo's `simple`: INT32 [1, 16] twice, sum and difference.
const BYTES: u64 = 64;

/// A fresh directory standing in for `/dev/shm`, removed at the end.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new() -> ShmDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("tensorgate-it-grpc-shm-{}-{n}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).unwrap();
        ShmDir(path)
    }

    /// An object of `len` bytes holding `data` at its start.
    fn object(&self, name: &str, len: u64, data: &[u8]) {
        let path = self.0.join(name);
        let mut bytes = data.to_vec();
        bytes.resize(len as usize, 0);
        std::fs::write(path, bytes).unwrap();
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.0.join(name)).unwrap()
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ints(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(i32::to_le_bytes).collect()
}

fn from_ints(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

struct Sidecar {
    demo: DemoUpstream,
    dir: ShmDir,
    gateway: std::sync::Arc<tensorgate::Gateway>,
    client: super::grpc_passthrough::Client,
    _server: super::grpc_passthrough::Server,
}

/// A demo upstream, a gateway in bridge mode in front of it with its gRPC
/// front, and the objects `in` (INPUT0 = 0..16, INPUT1 = 1s) and `out`.
async fn sidecar() -> Sidecar {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("demo");
    let dir = ShmDir::new();
    let mut input = ints(0..16);
    input.extend(ints([1; 16]));
    dir.object("in", 2 * BYTES, &input);
    dir.object("out", 2 * BYTES, &[]);
    let shm = dir.0.clone();
    let tweak = move |c: &mut Config| {
        c.shared_memory.mode = SharedMemoryMode::Bridge;
        c.shared_memory.dir = shm;
    };
    let (gateway, addr, server) = serve(vec![demo.local_addr().to_string()], tweak).await;
    let client = connect(addr).await;
    Sidecar {
        demo,
        dir,
        gateway,
        client,
        _server: server,
    }
}

fn register(name: &str, key: &str, byte_size: u64) -> SystemSharedMemoryRegisterRequest {
    SystemSharedMemoryRegisterRequest {
        name: name.into(),
        key: key.into(),
        offset: 0,
        byte_size,
    }
}

fn int(n: i64) -> InferParameter {
    InferParameter {
        parameter_choice: Some(ParameterChoice::Int64Param(n)),
    }
}

fn window(region: &str, offset: i64) -> HashMap<String, InferParameter> {
    HashMap::from([
        (
            "shared_memory_region".to_string(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::StringParam(region.into())),
            },
        ),
        ("shared_memory_offset".to_string(), int(offset)),
        ("shared_memory_byte_size".to_string(), int(BYTES as i64)),
    ])
}

/// `simple` with both inputs in region `input`, both outputs in `output`.
fn in_shared_memory(input: &str, output: &str) -> ModelInferRequest {
    let tensor = |name: &str, offset| InferInputTensor {
        name: name.into(),
        datatype: "INT32".into(),
        shape: vec![1, 16],
        parameters: window(input, offset),
        contents: None,
    };
    let out = |name: &str, offset| InferRequestedOutputTensor {
        name: name.into(),
        parameters: window(output, offset),
    };
    ModelInferRequest {
        model_name: "simple".into(),
        id: "shm".into(),
        inputs: vec![tensor("INPUT0", 0), tensor("INPUT1", BYTES as i64)],
        outputs: vec![out("OUTPUT0", 0), out("OUTPUT1", BYTES as i64)],
        ..Default::default()
    }
}

/// The sums and differences the outputs' region holds.
fn assert_written(dir: &ShmDir) {
    let out = dir.read("out");
    let sums = from_ints(&out[..BYTES as usize]);
    let diffs = from_ints(&out[BYTES as usize..]);
    assert_eq!(sums, (1..17).collect::<Vec<i32>>());
    assert_eq!(diffs, (-1..15).collect::<Vec<i32>>());
}

#[tokio::test]
async fn a_grpc_client_registers_and_infers_through_the_sidecar() {
    let mut s = sidecar().await;
    for (name, key) in [("input_data", "/in"), ("output_data", "/out")] {
        s.client
            .system_shared_memory_register(register(name, key, 2 * BYTES))
            .await
            .expect("registered by the gateway");
    }
    let status = s
        .client
        .system_shared_memory_status(SystemSharedMemoryStatusRequest::default())
        .await
        .expect("status")
        .into_inner();
    let mut names: Vec<&String> = status.regions.keys().collect();
    names.sort();
    assert_eq!(names, ["input_data", "output_data"]);

    let answer = s
        .client
        .model_infer(in_shared_memory("input_data", "output_data"))
        .await
        .expect("inferred")
        .into_inner();
    // As Triton answers it: metadata only, an empty raw entry each.
    assert_eq!(answer.id, "shm");
    let outputs: Vec<(&str, &str, &[i64])> = answer
        .outputs
        .iter()
        .map(|o| (o.name.as_str(), o.datatype.as_str(), &o.shape[..]))
        .collect();
    assert_eq!(
        outputs,
        [
            ("OUTPUT0", "INT32", &[1, 16][..]),
            ("OUTPUT1", "INT32", &[1, 16][..])
        ]
    );
    assert!(answer.outputs.iter().all(|o| o.parameters.is_empty()));
    assert_eq!(answer.raw_output_contents, [Bytes::new(), Bytes::new()]);
    assert_written(&s.dir);
    // The upstream never saw a region, only the bytes.
    let sent = s.demo.last_request().expect("forwarded");
    assert!(sent.inputs.iter().all(|i| i.parameters.is_empty()));
    assert_eq!(sent.raw_input_contents.len(), 2);

    s.client
        .system_shared_memory_unregister(SystemSharedMemoryUnregisterRequest::default())
        .await
        .expect("unregistered");
    let gone = s
        .client
        .model_infer(in_shared_memory("input_data", "output_data"))
        .await
        .expect_err("the region is gone");
    assert_eq!(
        (gone.code(), gone.message()),
        (
            Code::NotFound,
            "Unable to find shared memory region: 'input_data'"
        )
    );
}

#[tokio::test]
async fn both_fronts_share_one_region_table() {
    let mut s = sidecar().await;
    for (name, key) in [("input_data", "/in"), ("output_data", "/out")] {
        let body = format!(r#"{{"key":"{key}","offset":0,"byte_size":{}}}"#, 2 * BYTES);
        let request = HttpRequest::new(
            ::http::Method::POST,
            format!("/v2/systemsharedmemory/region/{name}/register"),
            Vec::new(),
            Bytes::from(body),
        );
        let answer = tensorgate::front::http::handle(&s.gateway, request).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body_bytes());
    }
    s.client
        .model_infer(in_shared_memory("input_data", "output_data"))
        .await
        .expect("inferred over gRPC with regions registered over HTTP");
    assert_written(&s.dir);
}

#[tokio::test]
async fn a_stream_request_naming_regions_is_bridged() {
    let mut s = sidecar().await;
    for (name, key) in [("input_data", "/in"), ("output_data", "/out")] {
        s.client
            .system_shared_memory_register(register(name, key, 2 * BYTES))
            .await
            .expect("registered");
    }
    let mut missing = in_shared_memory("nowhere", "output_data");
    missing.id = "refused".into();
    let requests = tokio_stream::iter([missing, in_shared_memory("input_data", "output_data")]);
    let mut responses = s
        .client
        .model_stream_infer(requests)
        .await
        .expect("the stream opens")
        .into_inner();
    let refused = responses.next().await.expect("a message").expect("ok");
    assert_eq!(
        refused.error_message,
        "Unable to find shared memory region: 'nowhere'"
    );
    assert_eq!(refused.infer_response.expect("its id").id, "refused");
    let answered = responses.next().await.expect("a message").expect("ok");
    assert_eq!(answered.error_message, "");
    let answer = answered.infer_response.expect("a response");
    assert_eq!(answer.raw_output_contents, [Bytes::new(), Bytes::new()]);
    assert_written(&s.dir);
    assert!(responses.next().await.is_none(), "the stream ends");
}

#[tokio::test]
async fn refusals_have_tritons_texts_and_codes() {
    let mut s = sidecar().await;
    s.client
        .system_shared_memory_register(register("input_data", "/in", 2 * BYTES))
        .await
        .expect("registered");
    let refused = |status: tonic::Status| (status.code(), status.message().to_string());
    let twice = s
        .client
        .system_shared_memory_register(register("input_data", "/in", 2 * BYTES))
        .await
        .unwrap_err();
    assert_eq!(
        refused(twice),
        (
            Code::AlreadyExists,
            "shared memory region 'input_data' already in manager".into()
        )
    );
    let too_big = s
        .client
        .system_shared_memory_register(register("big", "/in", 2 * BYTES + 1))
        .await
        .unwrap_err();
    assert_eq!(
        refused(too_big),
        (
            Code::InvalidArgument,
            "failed to register shared memory region 'big': invalid args".into()
        )
    );
    let unknown = s
        .client
        .system_shared_memory_status(SystemSharedMemoryStatusRequest {
            name: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused(unknown),
        (
            Code::NotFound,
            "Unable to find system shared memory region: 'nope'".into()
        )
    );
    let mut outside = in_shared_memory("input_data", "input_data");
    outside.inputs[1].parameters = window("input_data", BYTES as i64 + 1);
    let status = s.client.model_infer(outside).await.unwrap_err();
    assert_eq!(
        refused(status),
        (
            Code::InvalidArgument,
            "Invalid offset + byte size for shared memory region: 'input_data'".into()
        )
    );
    let cuda = s
        .client
        .cuda_shared_memory_status(CudaSharedMemoryStatusRequest::default())
        .await
        .unwrap_err();
    assert_eq!(cuda.code(), Code::Unimplemented);
    assert!(cuda
        .message()
        .starts_with("CUDA shared memory is not available"));
}
