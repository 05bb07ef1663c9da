//! Large `ModelInfer` calls through the gRPC passthrough, relayed while they
//! arrive: the backend gets the first tensor bytes while the client still
//! sends, a body cut short or running long never completes the message
//! upstream (the demo upstreams count model runs), routing reads the
//! message's leading fields, and messages the relay cannot read ahead in
//! are decoded whole as before. A raw HTTP/2 client paces the body.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use prost::Message;
use tonic::Code;

use super::grpc_passthrough::{connect, input, param, serve};
use super::streamed_body::{assert_peak_within, pattern, with_config, Relay};
use tensorgate::proto::inference::infer_parameter::ParameterChoice;
use tensorgate::proto::inference::model_infer_request::InferInputTensor;
use tensorgate::proto::inference::*;
use tensorgate_demo::DemoUpstream;

/// Elements of the FP32 tensor sent: 8 MiB, twice where streaming starts.
const ELEMENTS: usize = 2 << 20;

fn tensor() -> Bytes {
    (0..ELEMENTS)
        .flat_map(|i| (i as f32).to_le_bytes())
        .collect::<Vec<u8>>()
        .into()
}

fn identity(data: Bytes) -> ModelInferRequest {
    ModelInferRequest {
        model_name: "identity_fp32".into(),
        inputs: vec![input("INPUT0", "FP32", &[1, ELEMENTS as i64])],
        raw_input_contents: vec![data],
        ..Default::default()
    }
}

/// `message` behind gRPC's length prefix.
pub(super) fn framed(message: &impl Message) -> Bytes {
    let mut body = BytesMut::new();
    body.extend_from_slice(&[0]);
    body.extend_from_slice(&(message.encoded_len() as u32).to_be_bytes());
    message.encode(&mut body).unwrap();
    body.freeze()
}

async fn demo() -> DemoUpstream {
    DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Polls `condition` every 10 ms for up to 10 s.
async fn until(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..1000 {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// One `ModelInfer` call on its own HTTP/2 connection, its body sent by
/// the test as it likes.
pub(super) struct RawCall {
    send: h2::SendStream<Bytes>,
    response: h2::client::ResponseFuture,
}

/// Sends `data` as the peer's flow control lets it.
async fn send_all(send: &mut h2::SendStream<Bytes>, mut data: Bytes) {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let room = poll_fn(|cx| send.poll_capacity(cx)).await.unwrap().unwrap();
        send.send_data(data.split_to(room), false).unwrap();
    }
}

/// What came back: the status, and the message if there was one.
pub(super) struct Answer {
    pub(super) code: Code,
    pub(super) message: String,
    pub(super) body: Bytes,
}

impl RawCall {
    pub(super) async fn open(addr: SocketAddr) -> RawCall {
        RawCall::open_with(addr, &[]).await
    }

    /// [`RawCall::open`] with more request headers (`grpc-timeout`).
    pub(super) async fn open_with(addr: SocketAddr, headers: &[(&str, &str)]) -> RawCall {
        RawCall::open_path(addr, "/inference.GRPCInferenceService/ModelInfer", headers).await
    }

    /// A call of the method `path` (`/{service}/{method}`).
    pub(super) async fn open_path(
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
    ) -> RawCall {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        // As stock gRPC clients do. Without it, Nagle's algorithm held this
        // client's small frames until the gateway's delayed ACK came: the
        // 1 GiB test took 180 s of wall for 30 s of CPU.
        tcp.set_nodelay(true).unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(connection);
        let mut client = client.ready().await.unwrap();
        let request = http::Request::post(format!("http://{addr}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        let request = headers
            .iter()
            .fold(request, |request, (name, value)| {
                request.header(*name, *value)
            })
            .body(())
            .unwrap();
        let (response, send) = client.send_request(request, false).unwrap();
        RawCall { send, response }
    }

    pub(super) async fn send(&mut self, data: Bytes) {
        send_all(&mut self.send, data).await;
    }

    /// Sends `data` with the end of the stream in the same frame, as
    /// gRPC clients send a small message.
    pub(super) fn send_last(&mut self, data: Bytes) {
        self.send.send_data(data, true).unwrap();
    }

    pub(super) async fn end(&mut self) {
        self.send.send_data(Bytes::new(), true).unwrap();
    }

    pub(super) async fn answer(self) -> Answer {
        let response = self.response.await.unwrap();
        let status = |headers: &http::HeaderMap| {
            let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
            let message = headers
                .get("grpc-message")
                .map(|m| percent(m.to_str().unwrap()))
                .unwrap_or_default();
            Some((Code::from_i32(code), message))
        };
        let head = status(response.headers());
        let mut recv = response.into_body();
        let mut body = BytesMut::new();
        while let Some(data) = recv.data().await {
            let data = data.unwrap();
            let _ = recv.flow_control().release_capacity(data.len());
            body.extend_from_slice(&data);
        }
        let trailers = recv.trailers().await.unwrap();
        let (code, message) = head
            .or_else(|| status(trailers.as_ref()?))
            .expect("a status");
        Answer {
            code,
            message,
            body: body.freeze(),
        }
    }
}

/// gRPC's percent-encoding of `grpc-message`, undone.
fn percent(text: &str) -> String {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex: String = bytes.by_ref().take(2).map(char::from).collect();
            out.push(u8::from_str_radix(&hex, 16).unwrap());
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).unwrap()
}

/// Ends `call` and checks that the identity model ran once and sent `data`
/// back.
async fn assert_echoed(mut call: RawCall, data: Bytes, demo: &DemoUpstream) {
    call.end().await;
    let answer = call.answer().await;
    assert_eq!(answer.code, Code::Ok, "{}", answer.message);
    assert_eq!(decoded(answer.body).raw_output_contents, [data]);
    assert_eq!(demo.infer_count(), 1);
}

fn decoded(mut body: Bytes) -> ModelInferResponse {
    assert_eq!(body.get_u8(), 0, "uncompressed");
    let len = body.get_u32() as usize;
    assert_eq!(body.len(), len, "one message");
    ModelInferResponse::decode(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_gets_the_first_tensor_bytes_while_the_client_still_sends() {
    let demo = demo().await;
    let relay = Relay::start(demo.local_addr());
    let (_gateway, addr, _server) = serve(vec![relay.addr.to_string()], |_| {}).await;
    let data = tensor();
    let request = framed(&identity(data.clone()));
    let half = request.len() / 2;
    let mut call = RawCall::open(addr).await;
    let before = relay.sent();
    call.send(request.slice(..half)).await;
    // All but what the queues in between hold (the gateway's body queue,
    // the HTTP/2 windows) reaches the backend before the rest is sent.
    assert!(
        until(|| relay.sent() > before + (2 << 20)).await,
        "only {} bytes reached the backend",
        relay.sent() - before
    );
    assert_eq!(demo.infer_count(), 0);
    call.send(request.slice(half..)).await;
    assert_echoed(call, data, &demo).await;
}

#[tokio::test]
async fn a_message_whose_start_comes_byte_by_byte_is_relayed() {
    let demo = demo().await;
    let (_gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |_| {}).await;
    let data = tensor();
    let request = framed(&identity(data.clone()));
    let mut call = RawCall::open(addr).await;
    // One DATA frame per byte until well past the leading fields.
    for at in 0..2000 {
        call.send(request.slice(at..at + 1)).await;
    }
    call.send(request.slice(2000..)).await;
    assert_echoed(call, data, &demo).await;
}

#[tokio::test]
async fn a_message_cut_short_never_reaches_the_model() {
    let demo = demo().await;
    let (gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |_| {}).await;
    let request = framed(&identity(tensor()));
    let mut call = RawCall::open(addr).await;
    call.send(request.slice(..request.len() - 1)).await;
    call.end().await;
    let answer = call.answer().await;
    assert_eq!(
        (answer.code, answer.message.as_str()),
        (Code::Internal, "Unexpected EOF decoding stream.")
    );
    assert!(until(|| gateway.inflight().count() == 0).await);
    assert_eq!(demo.infer_count(), 0);
}

#[tokio::test]
async fn a_body_holding_more_than_its_message_never_reaches_the_model() {
    let demo = demo().await;
    let (gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |_| {}).await;
    let mut call = RawCall::open(addr).await;
    call.send(framed(&identity(tensor()))).await;
    call.send(framed(&identity(Bytes::new()))).await;
    call.end().await;
    let answer = call.answer().await;
    assert_eq!(answer.code, Code::Internal, "{}", answer.message);
    assert!(answer.message.contains("more than one message"));
    assert!(until(|| gateway.inflight().count() == 0).await);
    assert_eq!(demo.infer_count(), 0);
}

#[tokio::test]
async fn a_client_that_resets_mid_message_never_reaches_the_model() {
    let demo = demo().await;
    let (gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |_| {}).await;
    let request = framed(&identity(tensor()));
    let mut call = RawCall::open(addr).await;
    call.send(request.slice(..request.len() / 2)).await;
    assert!(until(|| gateway.inflight().count() == 1).await);
    call.send.send_reset(h2::Reason::CANCEL);
    assert!(until(|| gateway.inflight().count() == 0).await);
    assert_eq!(demo.infer_count(), 0);
    // The gateway and the backend still serve.
    let mut client = connect(addr).await.max_decoding_message_size(64 << 20);
    client
        .model_infer(identity(tensor()))
        .await
        .expect("served");
    assert_eq!(demo.infer_count(), 1);
}

#[tokio::test]
async fn a_large_sequence_stays_on_its_backend() {
    let demos = [demo().await, demo().await];
    let addresses = demos.iter().map(|d| d.local_addr().to_string()).collect();
    let (_gateway, addr, _server) = serve(addresses, |_| {}).await;
    let mut client = connect(addr).await.max_decoding_message_size(64 << 20);
    for step in 0..4 {
        let mut request = identity(tensor());
        request
            .parameters
            .insert("sequence_id".into(), param(ParameterChoice::Int64Param(77)));
        request.parameters.insert(
            "sequence_start".into(),
            param(ParameterChoice::BoolParam(step == 0)),
        );
        client.model_infer(request).await.expect("infer");
    }
    let mut counts: Vec<u64> = demos.iter().map(DemoUpstream::infer_count).collect();
    counts.sort();
    assert_eq!(counts, [0, 4], "balanced round robin would split them");
}

#[tokio::test]
async fn a_large_message_without_raw_tensors_is_decoded_whole() {
    // Typed `contents` (field 5) hold the data: no raw entry ends the
    // leading fields within the read-ahead, so the generated service
    // decodes it as before.
    let demo = demo().await;
    let (_gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |_| {}).await;
    let values: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
    let request = ModelInferRequest {
        model_name: "identity_fp32".into(),
        inputs: vec![InferInputTensor {
            contents: Some(InferTensorContents {
                fp32_contents: values,
                ..Default::default()
            }),
            ..input("INPUT0", "FP32", &[1, ELEMENTS as i64])
        }],
        ..Default::default()
    };
    let mut client = connect(addr).await.max_decoding_message_size(64 << 20);
    let response = client
        .model_infer(request)
        .await
        .expect("infer")
        .into_inner();
    assert_eq!(response.raw_output_contents, [tensor()]);
}

#[tokio::test]
async fn a_large_message_above_the_streamed_limit_is_refused_unsent() {
    let demo = demo().await;
    let (_gateway, addr, _server) = serve(vec![demo.local_addr().to_string()], |c| {
        c.limits.max_streamed_body_size = 5 << 20;
    })
    .await;
    let mut client = connect(addr).await;
    let status = client.model_infer(identity(tensor())).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("Error, decoded message length too large: found"),
        "{status:?}"
    );
    assert_eq!(demo.infer_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_gib_message_passes_both_ways_in_bounded_memory() {
    const SIZE: usize = 1 << 30;
    const BLOCK: usize = 1 << 20;
    let demo = demo().await;
    // Debug builds move 2 GiB slowly on a busy machine: a deadline far
    // beyond what the transfer takes.
    let (gw, config) = with_config(
        &demo,
        "[upstream]\nrequest_timeout_ms = 600000\n",
        &["--grpc-listen", "127.0.0.1:0"],
    );
    // The message's leading fields, then its one tensor's key and length,
    // then the tensor, sent block by block: never whole in this process.
    let leading = ModelInferRequest {
        model_name: "identity_uint8".into(),
        inputs: vec![input("INPUT0", "UINT8", &[1, SIZE as i64])],
        ..Default::default()
    };
    let mut head = BytesMut::from(&[0u8; 5][..]);
    leading.encode(&mut head).unwrap();
    prost::encoding::encode_key(7, prost::encoding::WireType::LengthDelimited, &mut head);
    prost::encoding::encode_varint(SIZE as u64, &mut head);
    let len = (head.len() - 5 + SIZE) as u32;
    head[1..5].copy_from_slice(&len.to_be_bytes());
    let mut call = RawCall::open(gw.grpc.unwrap()).await;
    call.send(head.freeze()).await;
    let RawCall { mut send, response } = call;
    let sending = tokio::spawn(async move {
        for at in (0..SIZE).step_by(BLOCK) {
            send_all(&mut send, pattern(at, BLOCK).into()).await;
        }
        send.send_data(Bytes::new(), true).unwrap();
    });
    // The answer, read as it comes: the identity's output is the last
    // `SIZE` bytes of the answer's message (`raw_output_contents`, its
    // last field).
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let mut recv = response.into_body();
    let mut at = 0usize;
    let mut output_at = None;
    let mut prefix = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.unwrap();
        let _ = recv.flow_control().release_capacity(data.len());
        if output_at.is_none() {
            prefix.extend_from_slice(&data[..data.len().min(5)]);
            let len = u32::from_be_bytes(prefix[1..5].try_into().unwrap()) as usize;
            output_at = Some(5 + len - SIZE);
        }
        let start = output_at.unwrap();
        let end = at + data.len();
        if end > start {
            let skip = start.saturating_sub(at);
            assert!(
                data[skip..] == pattern(at + skip - start, data.len() - skip)[..],
                "the output differs at {}",
                at + skip - start
            );
        }
        at = end;
    }
    let trailers = recv.trailers().await.unwrap().expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
    assert_eq!(at, output_at.unwrap() + SIZE, "the whole output");
    sending.await.unwrap();
    let _ = std::fs::remove_file(&config);
    assert_peak_within(gw.child.id(), 128 << 20);
    assert_eq!(demo.infer_count(), 1);
}
