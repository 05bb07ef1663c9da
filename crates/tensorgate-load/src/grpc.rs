//! The load tool's gRPC mode (`--url grpc://IP:PORT`): `ModelInfer` on
//! `add_sub` over one HTTP/2 connection per `--connections`, one call in
//! flight on each. Like the HTTP mode it is deliberately cheap: the framed
//! request message is encoded once and every call sends the same `Bytes`
//! (h2 slices it as flow control allows, without copying); the answer's
//! DATA frames are counted and dropped unless the one checked call keeps
//! them to decode.
//!
//! Written on the `h2` crate directly, not a tonic client, so the client's
//! own encode and decode stay out of the measured legs (what
//! `scripts/bench`'s large-tensor cells compare).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use prost::Message;
use tensorgate_proto::inference::model_infer_request::{
    InferInputTensor, InferRequestedOutputTensor,
};
use tensorgate_proto::inference::{ModelInferRequest, ModelInferResponse};
use tokio::net::TcpStream;

use crate::response::Response;
use crate::workload::{f32s, le_bytes};

const PATH: &str = "/inference.GRPCInferenceService/ModelInfer";
/// Receive windows the client offers (the stream's and the connection's),
/// and the largest DATA frame it accepts: large, so that on loopback the
/// client never holds a sender back.
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 32 << 20;
const MAX_FRAME: u32 = 1 << 20;
/// A failed call is counted under this plus its gRPC status code, beside
/// the HTTP statuses (which are below 600).
pub(crate) const STATUS_BASE: u16 = 1000;

/// The framed (5-byte prefix) `ModelInfer` message for `add_sub` with the
/// two FP32 inputs as `raw_input_contents`, outputs left to the server.
pub(crate) fn message(a: &[f32], b: &[f32]) -> Bytes {
    let input = |name: &str, n: usize| InferInputTensor {
        name: name.to_string(),
        datatype: "FP32".to_string(),
        shape: vec![n as i64],
        ..Default::default()
    };
    let output = |name: &str| InferRequestedOutputTensor {
        name: name.to_string(),
        ..Default::default()
    };
    let request = ModelInferRequest {
        model_name: "add_sub".to_string(),
        inputs: vec![input("INPUT0", a.len()), input("INPUT1", b.len())],
        outputs: vec![output("OUTPUT0"), output("OUTPUT1")],
        raw_input_contents: vec![le_bytes(a).into(), le_bytes(b).into()],
        ..Default::default()
    };
    let len = request.encoded_len();
    let mut framed = BytesMut::with_capacity(5 + len);
    framed.put_u8(0);
    framed.put_u32(u32::try_from(len).expect("a gRPC message is below 4 GiB"));
    request
        .encode(&mut framed)
        .expect("the buffer was sized to the message");
    framed.freeze()
}

/// The FP32 outputs of a kept answer body, by name.
pub(crate) fn outputs(body: &[u8]) -> Result<BTreeMap<String, Vec<f32>>, String> {
    let message = body
        .get(5..)
        .ok_or("an answer body shorter than its prefix")?;
    let answer =
        ModelInferResponse::decode(message).map_err(|e| format!("ModelInferResponse: {e}"))?;
    if answer.raw_output_contents.len() != answer.outputs.len() {
        return Err(format!(
            "{} outputs but {} raw_output_contents",
            answer.outputs.len(),
            answer.raw_output_contents.len()
        ));
    }
    let mut seen = BTreeMap::new();
    for (out, raw) in answer.outputs.iter().zip(&answer.raw_output_contents) {
        if out.datatype != "FP32" {
            return Err(format!("{}: datatype {}", out.name, out.datatype));
        }
        seen.insert(out.name.clone(), f32s(raw));
    }
    Ok(seen)
}

fn h2_error(e: h2::Error) -> io::Error {
    io::Error::other(format!("h2: {e}"))
}

/// One HTTP/2 connection; its driver runs as its own task.
pub(crate) struct Conn {
    send: SendRequest<Bytes>,
    authority: String,
}

impl Conn {
    pub(crate) async fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_frame_size(MAX_FRAME)
            .handshake(stream)
            .await
            .map_err(h2_error)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            send,
            authority: addr.to_string(),
        })
    }

    /// One call with `message` (already framed); the answer's body is kept
    /// whole with `keep_all`, else only counted. Status 200 is grpc-status
    /// 0; a gRPC error is `STATUS_BASE` + its code, its message the body.
    pub(crate) async fn exchange(
        &mut self,
        message: &Bytes,
        keep_all: bool,
    ) -> io::Result<Response> {
        let mut send = self.send.clone().ready().await.map_err(h2_error)?;
        let request = http::Request::post(format!("http://{}{PATH}", self.authority))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .map_err(|e| io::Error::other(e.to_string()))?;
        let (answer, mut stream) = send.send_request(request, false).map_err(h2_error)?;
        // Queued whole; h2 sends it as the peer's windows open.
        stream.send_data(message.clone(), true).map_err(h2_error)?;
        let (head, mut body) = answer.await.map_err(h2_error)?.into_parts();
        let mut kept = Vec::new();
        let mut body_len = 0u64;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(h2_error)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            body_len += chunk.len() as u64;
            if keep_all {
                kept.extend_from_slice(&chunk);
            }
        }
        let trailers = body.trailers().await.map_err(h2_error)?;
        // A trailers-only answer carries its status in the head.
        let field = |name: &str| {
            trailers
                .as_ref()
                .and_then(|t| t.get(name))
                .or_else(|| head.headers.get(name))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let status = if head.status != http::StatusCode::OK {
            head.status.as_u16()
        } else {
            match field("grpc-status").map(|s| s.parse::<u16>()) {
                Some(Ok(0)) => 200,
                Some(Ok(code)) => STATUS_BASE.saturating_add(code),
                _ => return Err(io::Error::other("an answer without a valid grpc-status")),
            }
        };
        if status != 200 {
            kept = field("grpc-message").unwrap_or_default().into_bytes();
        }
        Ok(Response {
            status,
            close: false,
            inference_header_len: None,
            retry_after: false,
            body: kept,
            body_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use tensorgate_proto::inference::model_infer_response::InferOutputTensor;

    use super::*;

    #[test]
    fn the_message_is_framed_add_sub_with_raw_inputs() {
        let framed = message(&[1.0, 2.0], &[3.0, 4.0]);
        assert_eq!(framed[0], 0);
        let len = u32::from_be_bytes([framed[1], framed[2], framed[3], framed[4]]) as usize;
        assert_eq!(len, framed.len() - 5);
        let request = ModelInferRequest::decode(&framed[5..]).unwrap();
        assert_eq!(request.model_name, "add_sub");
        assert_eq!(request.inputs[1].shape, [2]);
        assert_eq!(f32s(&request.raw_input_contents[1]), [3.0, 4.0]);
    }

    #[test]
    fn outputs_are_read_from_raw_output_contents() {
        let output = |name: &str| InferOutputTensor {
            name: name.to_string(),
            datatype: "FP32".to_string(),
            ..Default::default()
        };
        let mut answer = ModelInferResponse {
            outputs: vec![output("OUTPUT0"), output("OUTPUT1")],
            raw_output_contents: vec![le_bytes(&[4.0]).into(), le_bytes(&[-2.0]).into()],
            ..Default::default()
        };
        let framed = |m: &ModelInferResponse| [&[0u8; 5][..], &m.encode_to_vec()].concat();
        let seen = outputs(&framed(&answer)).unwrap();
        assert_eq!(
            (&seen["OUTPUT0"][..], &seen["OUTPUT1"][..]),
            (&[4.0][..], &[-2.0][..])
        );
        answer.raw_output_contents.pop();
        assert!(outputs(&framed(&answer)).is_err());
        assert!(outputs(b"\0\0").is_err());
    }
}
