//! The v1 gRPC service (`nvidia.inferenceserver.GRPCService`) served
//! in-process on an ephemeral port, in front of the embedded demo upstream,
//! called with a generated v1 client: health, status, infer (raw and
//! classes, batch 2), errors in `request_status`, and a stream.

use std::sync::Arc;

use tensorgate::config::Config;
use tensorgate::front::grpc::V1GrpcService;
use tensorgate::proto::v1 as pb;
use tensorgate::Gateway;
use tensorgate_demo::DemoUpstream;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Channel;

use pb::grpc_service_client::GrpcServiceClient;
use pb::infer_request_header::{output::Class, Input, Output};

struct Setup {
    _demo: DemoUpstream,
    client: GrpcServiceClient<Channel>,
}

async fn start() -> Setup {
    start_with(|_| {}).await
}

async fn start_with(tweak: impl FnOnce(&mut Config)) -> Setup {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("demo upstream");
    let mut config = Config::default();
    config.upstream.addresses = vec![demo.local_addr().to_string()];
    tweak(&mut config);
    let gateway = Arc::new(Gateway::new(config).expect("valid config"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let service = V1GrpcService::new(gateway).server();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    let client = GrpcServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    Setup {
        _demo: demo,
        client,
    }
}

fn code(status: &Option<pb::RequestStatus>) -> (pb::RequestStatusCode, String) {
    let status = status.clone().expect("request_status");
    assert_eq!(status.server_id, "inference:0");
    (status.code(), status.msg)
}

fn simple_request(batch: u32, outputs: Vec<Output>) -> pb::InferRequest {
    let input = |name: &str| Input {
        name: name.into(),
        dims: vec![16],
        ..Default::default()
    };
    let ints = |range: std::ops::Range<i32>| -> bytes::Bytes {
        range.flat_map(i32::to_le_bytes).collect::<Vec<u8>>().into()
    };
    pb::InferRequest {
        model_name: "simple".into(),
        model_version: -1,
        meta_data: Some(pb::InferRequestHeader {
            batch_size: batch,
            input: vec![input("INPUT0"), input("INPUT1")],
            output: outputs,
            id: 3,
            ..Default::default()
        }),
        raw_input: vec![
            ints(0..16 * batch as i32),
            ints(100..100 + 16 * batch as i32),
        ],
    }
}

#[tokio::test]
async fn health_and_status() {
    let mut s = start().await;
    for mode in ["live", "ready"] {
        let r = s
            .client
            .health(pb::HealthRequest { mode: mode.into() })
            .await
            .unwrap()
            .into_inner();
        assert!(r.health);
        assert_eq!(code(&r.request_status).0, pb::RequestStatusCode::Success);
    }
    let r = s
        .client
        .health(pb::HealthRequest { mode: "x".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(&r.request_status),
        (
            pb::RequestStatusCode::InvalidArg,
            "unknown health mode 'x'".into()
        )
    );
    let r = s
        .client
        .status(pb::StatusRequest {
            model_name: "simple".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&r.request_status).0, pb::RequestStatusCode::Success);
    let status = r.server_status.expect("server_status");
    assert_eq!(
        status.model_status["simple"]
            .config
            .as_ref()
            .unwrap()
            .max_batch_size,
        8
    );
    let r = s
        .client
        .status(pb::StatusRequest {
            model_name: "nosuch".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code(&r.request_status),
        (
            pb::RequestStatusCode::NotFound,
            "no status available for unknown model 'nosuch'".into()
        )
    );
}

#[tokio::test]
async fn infer_raw_and_classes_at_batch_two() {
    let mut s = start().await;
    let outputs = vec![
        Output {
            name: "OUTPUT1".into(),
            ..Default::default()
        },
        Output {
            name: "OUTPUT0".into(),
            cls: Some(Class { count: 1 }),
            ..Default::default()
        },
    ];
    let r = s
        .client
        .infer(simple_request(2, outputs))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&r.request_status).0, pb::RequestStatusCode::Success);
    let meta = r.meta_data.expect("meta_data");
    assert_eq!(
        (meta.model_name.as_str(), meta.batch_size, meta.id),
        ("simple", 2, 3)
    );
    assert_eq!(r.raw_output.len(), 2);
    assert!(r.raw_output[1].is_empty(), "OUTPUT0 is a class output");
    let diff: Vec<i32> = r.raw_output[0]
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(diff, vec![-100; 32]);
    let classes: Vec<(i32, f32)> = meta.output[1]
        .batch_classes
        .iter()
        .flat_map(|b| b.cls.iter().map(|c| (c.idx, c.value)))
        .collect();
    // OUTPUT0 = INPUT0 + INPUT1: entry 0 peaks at 15 + 115, entry 1 at 31 + 131.
    assert_eq!(classes, [(15, 130.0), (15, 162.0)]);
}

/// TRTIS sent one `raw_output` per requested output, in order, empty when
/// it is not raw: the 1.11 client indexes it by position, so a CLASS output
/// listed first must not shift the RAW one (`Expected RAW output`).
#[tokio::test]
async fn a_class_output_listed_first_keeps_its_raw_output_place() {
    let mut s = start().await;
    let outputs = vec![
        Output {
            name: "OUTPUT0".into(),
            cls: Some(Class { count: 2 }),
            ..Default::default()
        },
        Output {
            name: "OUTPUT1".into(),
            ..Default::default()
        },
    ];
    let check = |r: pb::InferResponse| {
        assert_eq!(code(&r.request_status).0, pb::RequestStatusCode::Success);
        assert_eq!(r.raw_output.len(), 2);
        assert!(r.raw_output[0].is_empty());
        assert_eq!(r.raw_output[1].len(), 16 * 4);
        let meta = r.meta_data.expect("meta_data");
        assert_eq!(meta.output[0].batch_classes.len(), 1);
        assert!(meta.output[1].raw.is_some());
    };
    let request = simple_request(1, outputs);
    check(s.client.infer(request.clone()).await.unwrap().into_inner());
    let requests = tokio_stream::iter([request.clone(), request]);
    let mut answers = s.client.stream_infer(requests).await.unwrap().into_inner();
    let mut n = 0;
    while let Some(answer) = answers.message().await.unwrap() {
        check(answer);
        n += 1;
    }
    assert_eq!(n, 2);
}

#[tokio::test]
async fn errors_and_a_stream() {
    let mut s = start().await;
    let mut bad = simple_request(1, Vec::new());
    bad.raw_input.pop();
    let r = s.client.infer(bad.clone()).await.unwrap().into_inner();
    assert_eq!(
        code(&r.request_status),
        (
            pb::RequestStatusCode::InvalidArg,
            "unexpected size for input 'INPUT1', expecting 64 bytes for model 'simple'".into()
        )
    );
    assert_eq!(r.meta_data.map(|m| m.id), Some(3));

    let good = simple_request(
        1,
        vec![Output {
            name: "OUTPUT0".into(),
            ..Default::default()
        }],
    );
    let requests = tokio_stream::iter([good.clone(), bad, good]);
    let mut answers = s.client.stream_infer(requests).await.unwrap().into_inner();
    let mut codes = Vec::new();
    while let Some(answer) = answers.message().await.unwrap() {
        codes.push(code(&answer.request_status).0);
    }
    use pb::RequestStatusCode::{InvalidArg, Success};
    assert_eq!(codes, [Success, InvalidArg, Success]);
}

#[tokio::test]
async fn api_keys_apply_to_the_v1_grpc_service() {
    let mut setup = start_with(|c| {
        c.auth.keys = vec![tensorgate::config::ApiKey {
            key: "k".into(),
            groups: vec![],
            name: None,
        }];
    })
    .await;
    let health = || pb::HealthRequest {
        mode: "live".into(),
    };
    // Health is open by default; status needs a key.
    assert!(setup.client.health(health()).await.is_ok());
    let refused = setup.client.status(pb::StatusRequest::default()).await;
    assert_eq!(refused.unwrap_err().code(), tonic::Code::Unauthenticated);
    let mut request = tonic::Request::new(pb::StatusRequest::default());
    request
        .metadata_mut()
        .insert("authorization", "Bearer k".parse().unwrap());
    assert!(setup.client.status(request).await.is_ok());
}
