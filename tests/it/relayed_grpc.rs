//! Small `ModelInfer` calls through the gRPC passthrough are relayed as the
//! client encoded them, and answered as the backend encoded its answer: a
//! bare HTTP/2 backend records the bytes it receives and answers fixed
//! bytes, each with a field no schema knows, which a decode and re-encode
//! would drop.

use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use tokio::net::TcpListener;
use tonic::Code;

use super::grpc_passthrough::{input, serve};
use super::streamed_grpc::{framed, RawCall};
use tensorgate::proto::inference::*;

/// Field 99, varint 7: unknown to the inference schema.
const UNKNOWN_FIELD: [u8; 3] = [0x98, 0x06, 0x07];

/// `message` framed for gRPC, the unknown field appended to it.
fn framed_with_unknown(message: &impl Message) -> Bytes {
    let mut body = BytesMut::from(&framed(message)[..]);
    body.extend_from_slice(&UNKNOWN_FIELD);
    let len = (body.len() - 5) as u32;
    body[1..5].copy_from_slice(&len.to_be_bytes());
    body.freeze()
}

/// A backend that answers `ServerReady` ready, `ModelInfer` with `answer`
/// (recording each request body), and anything else `UNIMPLEMENTED`.
async fn bare_backend(answer: Bytes) -> (String, Arc<Mutex<Vec<Bytes>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let received = Arc::new(Mutex::new(Vec::new()));
    let seen = received.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (answer, seen) = (answer.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((request, respond))) = connection.accept().await {
                    tokio::spawn(reply(request, respond, answer.clone(), seen.clone()));
                }
            });
        }
    });
    (addr, received)
}

async fn reply(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    answer: Bytes,
    seen: Arc<Mutex<Vec<Bytes>>>,
) {
    let method = request
        .uri()
        .path()
        .rsplit('/')
        .next()
        .unwrap_or("")
        .to_owned();
    let mut recv = request.into_body();
    let mut body = BytesMut::new();
    while let Some(Ok(data)) = recv.data().await {
        let _ = recv.flow_control().release_capacity(data.len());
        body.put(data);
    }
    let message = match method.as_str() {
        "ServerReady" => framed(&ServerReadyResponse { ready: true }),
        "ModelInfer" => {
            seen.lock().unwrap().push(body.freeze());
            answer
        }
        _ => {
            let head = http::Response::builder()
                .header("content-type", "application/grpc")
                .header("grpc-status", "12")
                .body(())
                .unwrap();
            let _ = respond.send_response(head, true);
            return;
        }
    };
    let head = http::Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let Ok(mut send) = respond.send_response(head, false) else {
        return;
    };
    let _ = send.send_data(message, false);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let _ = send.send_trailers(trailers);
}

#[tokio::test]
async fn a_small_model_infer_goes_both_ways_byte_for_byte() {
    let answer = framed_with_unknown(&ModelInferResponse {
        model_name: "m".into(),
        raw_output_contents: vec![Bytes::from_static(&[1, 2, 3, 4])],
        ..Default::default()
    });
    let (backend, received) = bare_backend(answer.clone()).await;
    let (_gateway, addr, _server) = serve(vec![backend], |_| {}).await;
    let request = framed_with_unknown(&ModelInferRequest {
        model_name: "m".into(),
        inputs: vec![input("INPUT0", "FP32", &[1])],
        raw_input_contents: vec![Bytes::from_static(&[0, 0, 128, 63])],
        ..Default::default()
    });
    let mut call = RawCall::open(addr).await;
    call.send_last(request.clone());
    let reply = call.answer().await;
    assert_eq!(reply.code, Code::Ok, "{}", reply.message);
    assert_eq!(reply.body, answer);
    assert_eq!(*received.lock().unwrap(), [request]);
}
