//! The gRPC passthrough in-process: two embedded demo upstreams on port 0,
//! a gateway pooling them, the passthrough served on port 0, and a tonic
//! client of the generated `GRPCInferenceService`. Balancing, sequences,
//! statuses, deadlines, streaming and repository fan-out as gRPC clients
//! see them; plus the real binary serving `--grpc-listen`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_stream::StreamExt;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use tensorgate::config::Config;
use tensorgate::front::http::HttpRequest;
use tensorgate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;
use tensorgate::proto::inference::infer_parameter::ParameterChoice;
use tensorgate::proto::inference::model_infer_request::InferInputTensor;
use tensorgate::proto::inference::*;
use tensorgate::Gateway;
use tensorgate_demo::DemoUpstream;

use crate::streamed_grpc::{framed, RawCall};

pub(super) type Client = GrpcInferenceServiceClient<Channel>;

/// Two demo upstreams, a gateway over both and its gRPC passthrough.
struct Fleet {
    demos: Vec<DemoUpstream>,
    gateway: Arc<Gateway>,
    client: Client,
    /// The passthrough's address (for a raw HTTP/2 client).
    addr: SocketAddr,
    server: Server,
}

/// The running passthrough: stop it, then await it.
pub(super) struct Server {
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Fleet {
    async fn start() -> Fleet {
        let mut demos = Vec::new();
        for _ in 0..2 {
            let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
                .await
                .expect("demo upstream starts");
            demos.push(demo);
        }
        let addresses = demos.iter().map(|d| d.local_addr().to_string()).collect();
        let (gateway, addr, server) = serve(addresses, |_| {}).await;
        Fleet {
            demos,
            gateway,
            client: connect(addr).await,
            addr,
            server,
        }
    }

    fn counts(&self) -> Vec<u64> {
        self.demos.iter().map(DemoUpstream::infer_count).collect()
    }
}

/// A gateway over `addresses` with its passthrough on a port-0 listener;
/// returns once the pool's first health pass is done.
async fn passthrough(
    addresses: Vec<String>,
    tweak: impl FnOnce(&mut Config),
) -> (Arc<Gateway>, Client, Server) {
    let (gateway, addr, server) = serve(addresses, tweak).await;
    (gateway, connect(addr).await, server)
}

/// [`front::grpc`] without a client: the passthrough's address.
pub(super) async fn serve(
    addresses: Vec<String>,
    tweak: impl FnOnce(&mut Config),
) -> (Arc<Gateway>, SocketAddr, Server) {
    let mut config = Config::default();
    config.upstream.addresses = addresses;
    config.upstream.health.interval_ms = 50;
    tweak(&mut config);
    let gateway = Arc::new(Gateway::new(config).expect("valid config"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(tensorgate::front::grpc::serve(
        gateway.clone(),
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    gateway.started().await;
    (gateway, addr, Server { stop, done })
}

pub(super) async fn connect(addr: SocketAddr) -> Client {
    GrpcInferenceServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connects")
}

fn fp32(values: &[f32]) -> Bytes {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>()
        .into()
}

pub(super) fn input(name: &str, datatype: &str, shape: &[i64]) -> InferInputTensor {
    InferInputTensor {
        name: name.to_owned(),
        datatype: datatype.to_owned(),
        shape: shape.to_vec(),
        ..Default::default()
    }
}

pub(super) fn param(choice: ParameterChoice) -> InferParameter {
    InferParameter {
        parameter_choice: Some(choice),
    }
}

pub(super) fn add_sub(a: &[f32], b: &[f32]) -> ModelInferRequest {
    ModelInferRequest {
        model_name: "add_sub".to_owned(),
        inputs: vec![
            input("INPUT0", "FP32", &[a.len() as i64]),
            input("INPUT1", "FP32", &[b.len() as i64]),
        ],
        raw_input_contents: vec![fp32(a), fp32(b)],
        ..Default::default()
    }
}

fn repeat(n: i32, delay_ms: i64) -> ModelInferRequest {
    let mut request = ModelInferRequest {
        model_name: "repeat_decoupled".to_owned(),
        id: format!("repeat{n}"),
        inputs: vec![input("INPUT0", "INT32", &[1])],
        raw_input_contents: vec![Bytes::copy_from_slice(&n.to_le_bytes())],
        ..Default::default()
    };
    request.parameters.insert(
        "delay_ms".into(),
        param(ParameterChoice::Int64Param(delay_ms)),
    );
    request
}

fn floats(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[tokio::test]
async fn model_infer_is_spread_over_both_backends() {
    let mut fleet = Fleet::start().await;
    for _ in 0..10 {
        let response = fleet
            .client
            .model_infer(add_sub(&[1.0, 2.0], &[3.0, 5.0]))
            .await
            .expect("infer succeeds")
            .into_inner();
        assert_eq!(response.model_name, "add_sub");
        assert_eq!(floats(&response.raw_output_contents[0]), [4.0, 7.0]);
        assert_eq!(floats(&response.raw_output_contents[1]), [-2.0, -3.0]);
    }
    let counts = fleet.counts();
    assert_eq!(counts.iter().sum::<u64>(), 10, "{counts:?}");
    assert!(counts.iter().all(|&n| n >= 3), "round robin: {counts:?}");
}

#[tokio::test]
async fn a_sequence_stays_on_one_backend() {
    let mut fleet = Fleet::start().await;
    for (i, id) in [
        ParameterChoice::Int64Param(4242),
        ParameterChoice::StringParam("seq-a".into()),
    ]
    .into_iter()
    .enumerate()
    {
        let before = fleet.counts();
        for step in 0..6 {
            let mut request = add_sub(&[1.0], &[1.0]);
            request
                .parameters
                .insert("sequence_id".into(), param(id.clone()));
            request.parameters.insert(
                "sequence_start".into(),
                param(ParameterChoice::BoolParam(step == 0)),
            );
            fleet.client.model_infer(request).await.expect("infer");
        }
        let after = fleet.counts();
        let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        assert!(
            delta == [6, 0] || delta == [0, 6],
            "sequence {i}: one backend takes all: {delta:?}"
        );
    }
}

#[tokio::test]
async fn upstream_statuses_pass_through() {
    let mut fleet = Fleet::start().await;
    let mut request = add_sub(&[1.0], &[1.0]);
    request.model_name = "nope".into();
    let status = fleet.client.model_infer(request).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        status.message(),
        "Request for unknown model: 'nope' is not found"
    );

    let status = fleet
        .client
        .model_metadata(ModelMetadataRequest {
            name: "add_sub".into(),
            version: "9".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        status.message(),
        "Request for unknown model: 'add_sub' version 9 is not found"
    );

    let mut bad = add_sub(&[1.0], &[1.0]);
    bad.raw_input_contents[1] = fp32(&[1.0, 2.0]);
    let status = fleet.client.model_infer(bad).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("input byte size mismatch"),
        "{status:?}"
    );
}

#[tokio::test]
async fn server_wide_calls_answer_like_the_server() {
    let mut fleet = Fleet::start().await;
    let live = fleet
        .client
        .server_live(ServerLiveRequest {})
        .await
        .unwrap();
    assert!(live.into_inner().live);
    let ready = fleet
        .client
        .server_ready(ServerReadyRequest {})
        .await
        .unwrap();
    assert!(ready.into_inner().ready);
    let model_ready = fleet
        .client
        .model_ready(ModelReadyRequest {
            name: "add_sub".into(),
            version: String::new(),
        })
        .await
        .unwrap();
    assert!(model_ready.into_inner().ready);

    let through = fleet
        .client
        .server_metadata(ServerMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    let mut direct = connect(fleet.demos[0].local_addr()).await;
    let expected = direct
        .server_metadata(ServerMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(through, expected);

    let config = fleet
        .client
        .model_config(ModelConfigRequest {
            name: "add_sub".into(),
            version: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(config.config.unwrap().name, "add_sub");
    let index = fleet
        .client
        .repository_index(RepositoryIndexRequest {
            repository_name: String::new(),
            ready: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(index.models.iter().any(|m| m.name == "add_sub"));
}

/// The listener hands a call to its service by the service's name
/// (`front::grpc::serving`): a service it does not serve, or a method its
/// service lacks, is `UNIMPLEMENTED`, as gRPC servers answer both.
#[tokio::test]
async fn a_service_or_method_not_served_is_unimplemented() {
    let mut fleet = Fleet::start().await;
    for path in [
        "/no.such.Service/ServerLive",
        "/inference.GRPCInferenceService/NoSuchMethod",
        "/grpc.health.v1.Health/NoSuchMethod",
    ] {
        let mut call = RawCall::open_path(fleet.addr, path, &[]).await;
        call.send_last(framed(&ServerLiveRequest {}));
        let answer = call.answer().await;
        assert_eq!(
            answer.code,
            Code::Unimplemented,
            "{path}: {}",
            answer.message
        );
    }
    // The services it serves still answer.
    let live = fleet.client.server_live(ServerLiveRequest {}).await;
    assert!(live.unwrap().into_inner().live);
}

#[tokio::test]
async fn no_ready_backend_is_an_unavailable_status() {
    // A port nothing listens on any more.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (_gateway, mut client, _server) = passthrough(vec![addr.to_string()], |_| {}).await;
    let status = client
        .model_infer(add_sub(&[1.0], &[1.0]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().starts_with("no upstream backend is ready"),
        "{status:?}"
    );
    let live = client.server_live(ServerLiveRequest {}).await.unwrap();
    assert!(live.into_inner().live);
    let ready = client.server_ready(ServerReadyRequest {}).await.unwrap();
    assert!(!ready.into_inner().ready);
}

#[tokio::test]
async fn the_client_deadline_is_honoured() {
    let fleet = Fleet::start().await;
    let mut slow = ModelInferRequest {
        model_name: "slow_identity".into(),
        inputs: vec![input("INPUT0", "FP32", &[1])],
        raw_input_contents: vec![fp32(&[1.0])],
        ..Default::default()
    };
    slow.parameters.insert(
        "delay_ms".into(),
        param(ParameterChoice::Int64Param(10_000)),
    );
    // A raw HTTP/2 call: tonic's own client would give up by itself at
    // the deadline (`CANCELLED`), racing the gateway's answer on a busy
    // machine; this client waits for whatever the gateway says.
    let started = Instant::now();
    let mut call = RawCall::open_with(fleet.addr, &[("grpc-timeout", "1S")]).await;
    call.send(framed(&slow)).await;
    call.end().await;
    let answer = call.answer().await;
    assert_eq!(answer.code, Code::DeadlineExceeded, "{}", answer.message);
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
}

#[tokio::test]
async fn a_stream_stays_on_one_backend_and_relays_every_response() {
    let mut fleet = Fleet::start().await;
    let before = fleet.counts();
    let requests = tokio_stream::iter([repeat(3, 1), add_sub(&[2.0], &[1.0]), repeat(2, 1)]);
    let mut responses = fleet
        .client
        .model_stream_infer(requests)
        .await
        .expect("stream opens")
        .into_inner();
    let mut received = Vec::new();
    while let Some(message) = responses.next().await {
        let message = message.expect("stream stays healthy");
        assert_eq!(message.error_message, "");
        received.push(message.infer_response.expect("a response"));
    }
    let ids: Vec<&str> = received.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert_eq!(ids.iter().filter(|id| **id == "repeat3").count(), 3);
    assert_eq!(ids.iter().filter(|id| **id == "repeat2").count(), 2);
    let after = fleet.counts();
    let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert!(delta == [3, 0] || delta == [0, 3], "{delta:?}");
}

#[tokio::test]
async fn a_stream_error_reaches_the_client_in_the_stream() {
    let mut fleet = Fleet::start().await;
    let mut unknown = repeat(1, 1);
    unknown.model_name = "nope".into();
    unknown.id = "u".into();
    let requests = tokio_stream::iter([unknown]);
    let mut responses = fleet
        .client
        .model_stream_infer(requests)
        .await
        .expect("stream opens")
        .into_inner();
    let message = responses.next().await.expect("one message").expect("ok");
    assert_eq!(
        message.error_message,
        "Request for unknown model: 'nope' is not found"
    );
    assert!(responses.next().await.is_none());
}

#[tokio::test]
async fn a_dropped_stream_cancels_upstream_and_frees_the_backend() {
    let mut fleet = Fleet::start().await;
    let (requests, rx) = tokio::sync::mpsc::channel(4);
    requests.send(repeat(10_000, 5)).await.unwrap();
    let mut responses = fleet
        .client
        .model_stream_infer(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    for _ in 0..2 {
        responses.next().await.expect("a response").expect("ok");
    }
    let inflight = |g: &Gateway| g.backends().iter().map(|b| b.inflight()).sum::<usize>();
    assert_eq!(inflight(&fleet.gateway), 1, "the stream holds its backend");
    drop(responses);
    drop(requests);
    // The relay notices the client is gone and drops its lease.
    let freed = tokio::time::timeout(Duration::from_secs(5), async {
        while inflight(&fleet.gateway) != 0 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(freed.is_ok(), "the lease was released");
}

#[tokio::test]
async fn repository_control_fans_out_and_lists_the_backends() {
    let mut fleet = Fleet::start().await;
    let response = fleet
        .client
        .repository_model_unload(RepositoryModelUnloadRequest {
            model_name: "identity_int8".into(),
            ..Default::default()
        })
        .await
        .expect("unload succeeds");
    let backends = response
        .metadata()
        .get("tensorgate-backends")
        .expect("backends listed")
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(backends.matches("=ok").count(), 2, "{backends}");
    for demo in &fleet.demos {
        let ready = connect(demo.local_addr())
            .await
            .model_ready(ModelReadyRequest {
                name: "identity_int8".into(),
                version: String::new(),
            })
            .await
            .map(|r| r.into_inner().ready)
            .unwrap_or(false);
        assert!(!ready, "unloaded on {}", demo.local_addr());
    }
    fleet
        .client
        .repository_model_load(RepositoryModelLoadRequest {
            model_name: "identity_int8".into(),
            ..Default::default()
        })
        .await
        .expect("load succeeds");
    // The HTTP front shares the fan-out and still answers as before.
    let request = HttpRequest::new(
        http::Method::POST,
        "/v2/repository/models/identity_int8/load",
        Vec::new(),
        Bytes::new(),
    );
    let http = tensorgate::front::http::handle(&fleet.gateway, request).await;
    assert_eq!(http.status, 200);
    assert_eq!(http.header("Content-Type"), Some("application/json"));
    assert!(http.body_bytes().is_empty());
    let listed = http.header("Tensorgate-Backends").expect("backends listed");
    assert_eq!(listed.matches("=ok").count(), 2, "{listed}");
    let ready = fleet
        .client
        .model_ready(ModelReadyRequest {
            name: "identity_int8".into(),
            version: String::new(),
        })
        .await
        .unwrap();
    assert!(ready.into_inner().ready);
}

fn identity_fp32(elements: usize) -> ModelInferRequest {
    ModelInferRequest {
        model_name: "identity_fp32".into(),
        inputs: vec![input("INPUT0", "FP32", &[1, elements as i64])],
        raw_input_contents: vec![Bytes::from(vec![0u8; elements * 4])],
        ..Default::default()
    }
}

#[tokio::test]
async fn message_size_limits_apply_on_the_server_side() {
    // Default limit (512 MiB): a 5 MiB tensor passes both ways, where
    // tonic's own default (4 MiB) would refuse it.
    let fleet = Fleet::start().await;
    let mut client = fleet.client.clone().max_decoding_message_size(64 << 20);
    let response = client
        .model_infer(identity_fp32(5 << 18))
        .await
        .expect("a 5 MiB tensor passes")
        .into_inner();
    assert_eq!(response.raw_output_contents[0].len(), 5 << 20);

    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (_gateway, mut client, _server) = passthrough(vec![demo.local_addr().to_string()], |c| {
        c.upstream.max_message_bytes = 64 << 10;
    })
    .await;
    let status = client
        .model_infer(identity_fp32(32 << 10))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(status.message().contains("too large"), "{status:?}");
    assert_eq!(demo.infer_count(), 0, "never sent upstream");
}

#[tokio::test]
async fn compressed_messages_from_stock_clients_are_accepted() {
    // tritonclient.grpc's compression_algorithm="gzip"/"deflate".
    let fleet = Fleet::start().await;
    for encoding in [CompressionEncoding::Gzip, CompressionEncoding::Deflate] {
        let mut client = fleet
            .client
            .clone()
            .send_compressed(encoding)
            .max_decoding_message_size(64 << 20);
        let response = client
            .model_infer(add_sub(&[1.0, 2.0], &[3.0, 4.0]))
            .await
            .expect("a compressed message is accepted")
            .into_inner();
        assert_eq!(floats(&response.raw_output_contents[0]), [4.0, 6.0]);
        // Large: read whole and inflated, not relayed as it arrives.
        let response = client
            .model_infer(identity_fp32(5 << 18))
            .await
            .expect("a large compressed message is accepted")
            .into_inner();
        assert_eq!(response.raw_output_contents[0].len(), 5 << 20);
        // A stream's messages.
        let requests = tokio_stream::iter([add_sub(&[2.0], &[1.0])]);
        let mut responses = client
            .model_stream_infer(requests)
            .await
            .expect("stream opens")
            .into_inner();
        let message = responses.next().await.expect("an answer").expect("ok");
        assert_eq!(message.error_message, "", "{encoding:?}");
    }
}

/// A `grpc.health.v1` client of the passthrough at `addr`.
pub(super) async fn health_client(addr: SocketAddr) -> HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}")).unwrap();
    HealthClient::new(channel.connect().await.expect("connects"))
}

/// Reads `stream` until it says `want` (within a bound, so a wrong status
/// fails the test instead of hanging it).
pub(super) async fn watch_until(
    stream: &mut tonic::Streaming<HealthCheckResponse>,
    want: ServingStatus,
) {
    let wait = async {
        while let Some(response) = stream.next().await {
            if response.expect("watch stays open").status == want as i32 {
                return;
            }
        }
        panic!("the watch ended before {want:?}");
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("no {want:?} within 10 s"));
}

#[tokio::test]
async fn health_follows_the_backends_overall_and_per_model() {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (_gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |c| {
        c.upstream.model_refresh_ms = 50;
    })
    .await;
    let mut health = health_client(addr).await;
    let request = |service: &str| HealthCheckRequest {
        service: service.to_owned(),
    };
    let mut server = health.watch(request("")).await.unwrap().into_inner();
    watch_until(&mut server, ServingStatus::Serving).await;
    let checker = health.clone();
    let check = |service: &'static str| {
        let mut health = checker.clone();
        async move {
            let answer = health.check(request(service)).await;
            answer.map(|r| r.into_inner().status).map_err(|s| s.code())
        }
    };
    let serving = Ok(ServingStatus::Serving as i32);
    assert_eq!(check("inference.GRPCInferenceService").await, serving);
    assert_eq!(check("add_sub").await, serving);
    assert_eq!(check("nope").await, Err(Code::NotFound));
    // A model no backend has any more: NOT_SERVING, the server still SERVING.
    let mut model = health.watch(request("add_sub")).await.unwrap().into_inner();
    demo.set_loaded("add_sub", false);
    watch_until(&mut model, ServingStatus::NotServing).await;
    assert_eq!(check("").await, serving);
    demo.set_loaded("add_sub", true);
    watch_until(&mut model, ServingStatus::Serving).await;
    // No backend ready: NOT_SERVING, then SERVING again.
    demo.set_ready(false);
    watch_until(&mut server, ServingStatus::NotServing).await;
    demo.set_ready(true);
    watch_until(&mut server, ServingStatus::Serving).await;
}

#[tokio::test]
async fn health_is_not_serving_without_a_ready_backend_and_keeps_the_access_rules() {
    let (_gateway, addr, _server) = serve(vec!["127.0.0.1:1".into()], |c| {
        c.auth.open_groups = Vec::new();
        c.auth.keys = vec![tensorgate::config::ApiKey {
            key: "probe".into(),
            groups: vec![tensorgate::config::Group::Health],
            name: None,
        }];
    })
    .await;
    let mut health = health_client(addr).await;
    let check = |service: &str, key: Option<&str>| {
        let mut request = tonic::Request::new(HealthCheckRequest {
            service: service.into(),
        });
        if let Some(key) = key {
            let value = format!("Bearer {key}").parse().unwrap();
            request.metadata_mut().insert("authorization", value);
        }
        request
    };
    let refused = health.check(check("", None)).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    for service in ["", "inference.GRPCInferenceService"] {
        let answer = health.check(check(service, Some("probe"))).await;
        let status = answer.unwrap().into_inner().status;
        assert_eq!(status, ServingStatus::NotServing as i32, "{service:?}");
    }
}

#[tokio::test]
async fn shutdown_lets_open_calls_finish() {
    let mut fleet = Fleet::start().await;
    let mut responses = fleet
        .client
        .model_stream_infer(tokio_stream::iter([repeat(4, 50)]))
        .await
        .expect("stream opens")
        .into_inner();
    let first = responses.next().await.expect("a response").expect("ok");
    assert_eq!(first.infer_response.unwrap().id, "repeat4");
    let Server { stop, done } = fleet.server;
    stop.send(()).unwrap();
    let mut rest = 0;
    while let Some(message) = responses.next().await {
        message.expect("the stream finishes cleanly");
        rest += 1;
    }
    assert_eq!(rest, 3);
    done.await.unwrap().expect("the server stops cleanly");
    let refused = fleet.client.server_live(ServerLiveRequest {}).await;
    assert!(refused.is_err(), "no new calls after shutdown");
}

#[test]
fn the_binary_serves_grpc_beside_http() {
    // Port 0, read back from the log line: a port chosen here and bound
    // later could be taken by another test in between (seen once).
    let process = crate::support::GatewayProcess::demo(&["--grpc-listen", "127.0.0.1:0"]);
    let grpc = process.grpc.expect("the gRPC listener's address");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = connect(grpc).await;
        let response = client
            .model_infer(add_sub(&[1.0], &[2.0]))
            .await
            .expect("infer through the binary")
            .into_inner();
        assert_eq!(floats(&response.raw_output_contents[0]), [3.0]);
        let ready = client.server_ready(ServerReadyRequest {}).await.unwrap();
        assert!(ready.into_inner().ready);
    });
    drop(process);
}

#[tokio::test]
async fn api_keys_and_groups_apply_to_grpc_calls() {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (_gateway, mut client, _server) = passthrough(vec![demo.local_addr().to_string()], |c| {
        c.auth.keys = vec![tensorgate::config::ApiKey {
            key: "reader".into(),
            groups: vec![tensorgate::config::Group::Metadata],
            name: None,
        }];
    })
    .await;
    let with_key = |message: ModelInferRequest, key: &str| {
        let mut request = tonic::Request::new(message);
        let value = format!("Bearer {key}").parse().unwrap();
        request.metadata_mut().insert("authorization", value);
        request
    };
    // Health is open; inference needs a key; this key may only read metadata.
    assert!(client.server_ready(ServerReadyRequest {}).await.is_ok());
    let status = client
        .model_infer(add_sub(&[1.0], &[1.0]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let status = client
        .model_infer(with_key(add_sub(&[1.0], &[1.0]), "reader"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let mut metadata = tonic::Request::new(tensorgate::proto::inference::ModelMetadataRequest {
        name: "add_sub".into(),
        version: String::new(),
    });
    metadata
        .metadata_mut()
        .insert("authorization", "Bearer reader".parse().unwrap());
    assert!(client.model_metadata(metadata).await.is_ok());
    assert_eq!(
        demo.infer_count(),
        0,
        "refused calls never reach the upstream"
    );
}

#[tokio::test]
async fn server_metadata_names_the_gateway_when_configured() {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("demo upstream starts");
    let addresses = vec![demo.local_addr().to_string()];
    let (_gateway, mut client, _server) =
        passthrough(addresses, |c| c.server.announce_gateway = true).await;
    let metadata = client
        .server_metadata(ServerMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(metadata.name, "tensorgate");
    assert_eq!(metadata.version, env!("CARGO_PKG_VERSION"));
    // The extensions stay the upstream's: the passthrough relays every call.
    assert!(metadata.extensions.contains(&"trace".to_string()));
}
