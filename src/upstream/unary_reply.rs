//! A unary call's reply read straight from the backend's HTTP/2 response
//! (`raw`): the DATA frames up to the trailers, the one message decoded,
//! the call's status judged. The HTTP → gRPC path's `ModelInfer`
//! (`rpc::model_infer`) reads its answer here.
//!
//! Why not tonic's generated client: for a small request its generic
//! machinery (the request's metadata conversions, `Streaming`, the codec's
//! buffer, the head's metadata merged into the answer) was ~8 µs of the
//! gateway's user CPU per request (docs/performance.md, "The cost budget
//! of a small request"). Here a message that arrived in one DATA frame is
//! decoded from that frame, without a copy.
//!
//! What a client of the gateway can see is tonic's: the same status for
//! every way a reply can go wrong, with tonic's texts (the error table,
//! `error::Error::from_status`, reads some of them). One difference, on
//! purpose: the decoding limit's refusal carries no metadata, as a refusal
//! made on the gateway's side should (tonic merged the reply head into it,
//! so the gateway's own limit was named as the server's).

use std::future::poll_fn;
use std::pin::Pin;

use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;
use http_body::Body as _;
use tonic::Status;

use super::raw::{carried_status, RawReply, GRPC_STATUS};

/// gRPC's message prefix: a compression flag and a 4-byte length.
const PREFIX: usize = 5;

/// tonic's words for a reply that ended at 200 without `grpc-status`.
const NO_FINAL_STATUS: &str = "protocol error: missing grpc-status trailer, stream was terminated without a final status (possible truncation by a proxy or load balancer)";

/// The one message of `reply` (whose head `raw::RawClient::call` already
/// judged: HTTP 200, or a `grpc-status` of OK in it), decoded, or the
/// call's failure. A message longer than `limit` is refused as tonic's
/// `max_decoding_message_size` refuses it.
pub(crate) async fn message<M: prost::Message + Default>(
    reply: RawReply,
    limit: usize,
) -> Result<M, Status> {
    let (head, mut body) = reply.into_parts();
    // A status in the head ("trailers-only" of OK): no trailers are read.
    let trailed = !head.headers.contains_key(GRPC_STATUS);
    let mut frames = Frames::new(limit, head.status);
    let mut trailers = None;
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        match frame?.into_data() {
            Ok(data) => frames.push(data)?,
            Err(frame) => {
                trailers = frame.into_trailers().ok();
                break;
            }
        }
    }
    let ended_in_trailers = trailers.is_some();
    let judged = || match trailed {
        true => final_status(trailers.as_ref()),
        false => Ok(()),
    };
    match frames.message {
        Some(message) => {
            let message = M::decode(message).map_err(|e| Status::internal(e.to_string()))?;
            if frames.after && !ended_in_trailers {
                return Err(eof());
            }
            judged()?;
            Ok(message)
        }
        None if !frames.held.is_empty() && !ended_in_trailers => Err(eof()),
        None => {
            judged()?;
            Err(Status::internal("Missing response message."))
        }
    }
}

/// The body ended inside a message.
fn eof() -> Status {
    Status::internal("Unexpected EOF decoding stream.")
}

/// The call's status from its trailers (tonic's reading, for an HTTP 200
/// reply: a non-200 one never gets here).
fn final_status(trailers: Option<&HeaderMap>) -> Result<(), Status> {
    trailers
        .and_then(carried_status)
        .unwrap_or_else(|| Err(Status::unknown(NO_FINAL_STATUS)))
}

/// The first message of the DATA frames, as they come.
struct Frames {
    limit: usize,
    /// The reply's HTTP status, for tonic's text of a bad flag.
    status: http::StatusCode,
    /// The bytes of an incomplete message (its prefix first).
    held: BytesMut,
    /// The message's length, once its prefix is read.
    len: Option<usize>,
    /// The first message, once whole.
    message: Option<Bytes>,
    /// Whether bytes came after it.
    after: bool,
}

impl Frames {
    fn new(limit: usize, status: http::StatusCode) -> Frames {
        Frames {
            limit,
            status,
            held: BytesMut::new(),
            len: None,
            message: None,
            after: false,
        }
    }

    fn push(&mut self, data: Bytes) -> Result<(), Status> {
        if self.message.is_some() {
            self.after |= !data.is_empty();
            return Ok(());
        }
        // The usual case: the whole message in this one frame.
        if self.held.is_empty() && data.len() >= PREFIX {
            let len = self.prefix(&data[..PREFIX])?;
            if data.len() >= PREFIX + len {
                self.after = data.len() > PREFIX + len;
                self.message = Some(data.slice(PREFIX..PREFIX + len));
                return Ok(());
            }
        }
        self.held.extend_from_slice(&data);
        if self.len.is_none() && self.held.len() >= PREFIX {
            let len = self.prefix(&self.held[..PREFIX])?;
            self.len = Some(len);
            self.held
                .reserve(PREFIX + len - self.held.len().min(PREFIX + len));
        }
        if let Some(len) = self.len.filter(|len| self.held.len() >= PREFIX + *len) {
            let mut whole = std::mem::take(&mut self.held);
            self.after = whole.len() > PREFIX + len;
            whole.advance(PREFIX);
            whole.truncate(len);
            self.message = Some(whole.freeze());
        }
        Ok(())
    }

    /// The message's length from its prefix, refused as tonic refuses a
    /// compressed message (none is negotiated) or one above the limit.
    fn prefix(&self, prefix: &[u8]) -> Result<usize, Status> {
        match prefix[0] {
            0 => {}
            1 => {
                return Err(Status::internal(
                    "protocol error: received message with compressed-flag but no grpc-encoding was specified",
                ))
            }
            flag => {
                return Err(Status::internal(format!(
                    "protocol error: received message with invalid compression flag: {flag} (valid flags are 0 and 1) while receiving response with status: {}",
                    self.status
                )))
            }
        }
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        if len > self.limit {
            return Err(Status::out_of_range(format!(
                "Error, decoded message length too large: found {len} bytes, the limit is: {} bytes",
                self.limit
            )));
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::ModelInferResponse;
    use prost::Message;
    use tonic::body::Body;
    use tonic::Code;

    /// A reply of these DATA frames, then `trailers` (if any).
    fn reply(frames: Vec<Vec<u8>>, trailers: Option<&[(&'static str, &'static str)]>) -> RawReply {
        let mut items: Vec<Result<http_body::Frame<Bytes>, Status>> = frames
            .into_iter()
            .map(|f| Ok(http_body::Frame::data(Bytes::from(f))))
            .collect();
        if let Some(trailers) = trailers {
            let mut map = HeaderMap::new();
            for (name, value) in trailers {
                map.insert(*name, value.parse().unwrap());
            }
            items.push(Ok(http_body::Frame::trailers(map)));
        }
        http::Response::new(Body::new(Listed(items.into())))
    }

    /// A body of listed frames.
    struct Listed(std::collections::VecDeque<Result<http_body::Frame<Bytes>, Status>>);

    impl http_body::Body for Listed {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
            std::task::Poll::Ready(self.0.pop_front())
        }
    }

    fn framed(message: &ModelInferResponse) -> Vec<u8> {
        let body = message.encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn answer() -> ModelInferResponse {
        ModelInferResponse {
            model_name: "add_sub".into(),
            id: "7".into(),
            raw_output_contents: vec![Bytes::from(vec![1u8; 64]), Bytes::from(vec![2u8; 64])],
            ..Default::default()
        }
    }

    const OK: &[(&str, &str)] = &[("grpc-status", "0")];

    async fn read(reply: RawReply) -> Result<ModelInferResponse, Status> {
        message(reply, 1 << 20).await
    }

    #[tokio::test]
    async fn a_message_in_one_frame_or_split_anywhere_reads_the_same() {
        let wire = framed(&answer());
        assert_eq!(
            read(reply(vec![wire.clone()], Some(OK))).await.unwrap(),
            answer()
        );
        for cut in [1, 4, 5, 6, wire.len() - 1] {
            let parts = vec![wire[..cut].to_vec(), wire[cut..].to_vec()];
            assert_eq!(
                read(reply(parts, Some(OK))).await.unwrap(),
                answer(),
                "{cut}"
            );
        }
        let bytes: Vec<Vec<u8>> = wire.iter().map(|b| vec![*b]).collect();
        assert_eq!(read(reply(bytes, Some(OK))).await.unwrap(), answer());
    }

    #[tokio::test]
    async fn a_failed_status_in_the_trailers_fails_the_call_even_after_a_message() {
        let failed: &[(&str, &str)] = &[("grpc-status", "3"), ("grpc-message", "bad%20input")];
        let status = read(reply(vec![framed(&answer())], Some(failed)))
            .await
            .unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (Code::InvalidArgument, "bad input")
        );
        let status = read(reply(vec![], Some(failed))).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
    }

    #[tokio::test]
    async fn tonic_texts_for_each_broken_reply() {
        let wire = framed(&answer());
        let cases: Vec<(RawReply, Code, &str)> = vec![
            (
                reply(vec![], Some(OK)),
                Code::Internal,
                "Missing response message.",
            ),
            (
                reply(vec![wire[..9].to_vec()], None),
                Code::Internal,
                "Unexpected EOF decoding stream.",
            ),
            (
                reply(vec![wire[..9].to_vec()], Some(OK)),
                Code::Internal,
                "Missing response message.",
            ),
            (
                reply(vec![wire.clone()], None),
                Code::Unknown,
                NO_FINAL_STATUS,
            ),
            (reply(vec![], None), Code::Unknown, NO_FINAL_STATUS),
        ];
        for (reply, code, text) in cases {
            let status = read(reply).await.unwrap_err();
            assert_eq!((status.code(), status.message()), (code, text));
        }
        let mut compressed = wire.clone();
        compressed[0] = 1;
        let status = read(reply(vec![compressed], Some(OK))).await.unwrap_err();
        assert_eq!(
            status.message(),
            "protocol error: received message with compressed-flag but no grpc-encoding was specified"
        );
        let mut flagged = wire.clone();
        flagged[0] = 7;
        let status = read(reply(vec![flagged], Some(OK))).await.unwrap_err();
        assert_eq!(status.message(), "protocol error: received message with invalid compression flag: 7 (valid flags are 0 and 1) while receiving response with status: 200 OK");
        let mut garbage = vec![0, 0, 0, 0, 3];
        garbage.extend_from_slice(&[0xff, 0xff, 0xff]);
        let status = read(reply(vec![garbage], Some(OK))).await.unwrap_err();
        assert_eq!(status.code(), Code::Internal);
    }

    #[tokio::test]
    async fn a_message_over_the_limit_is_refused_from_its_prefix_without_metadata() {
        let wire = framed(&answer());
        let limit = wire.len() - PREFIX - 1;
        let status =
            message::<ModelInferResponse>(reply(vec![wire[..PREFIX].to_vec()], Some(OK)), limit)
                .await
                .unwrap_err();
        assert_eq!(status.code(), Code::OutOfRange);
        assert_eq!(
            status.message(),
            format!(
                "Error, decoded message length too large: found {} bytes, the limit is: {limit} bytes",
                limit + 1
            )
        );
        assert!(status.metadata().is_empty());
    }

    #[tokio::test]
    async fn a_status_of_ok_in_the_head_needs_no_trailers() {
        let mut reply = reply(vec![framed(&answer())], None);
        reply
            .headers_mut()
            .insert("grpc-status", "0".parse().unwrap());
        assert_eq!(read(reply).await.unwrap(), answer());
    }
}
