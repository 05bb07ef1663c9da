//! `ModelInfer` calls relayed as the client encoded them. In front of the
//! generated service, a `ModelInfer` call's first bytes are read: gRPC's
//! message prefix, then the message's leading fields up to its first
//! `raw_input_contents` entry (`wire::grpc_head`). An uncompressed message
//! whose leading fields come first (every protobuf encoder writes fields
//! in number order) is routed on those fields — model, `sequence_id` —
//! and its bytes go to the backend unchanged (`app::door::relay_raw`); the
//! backend's answer goes back frame by frame, its trailers as they were:
//!
//! - a small one — whole in the body's first frame, which ends the body,
//!   and within `upstream.max_message_bytes` — as the one piece it is.
//!   Decoding and re-encoding it both ways cost the passthrough about a
//!   sixth of its user CPU on a small call (docs/performance.md);
//! - one of [`STREAM_FROM`] bytes or more as it comes (`body::BodyRest`).
//!
//! Anything else — a compressed message, a small one spread over frames
//! or followed by more of the body, leading fields that do not end within
//! [`HEAD_MAX`] — is handed to the generated service with the bytes read
//! put back in front, and decoded whole as before.
//!
//! A body that ends before its message does, or holds more than one
//! message, never completes the message upstream: the stream is reset
//! (`CANCEL`) and the client gets the status tonic gives that body.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body as _, Frame};
use prost::Message;
use tonic::body::Body;
use tonic::codegen::BoxFuture;
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::Status;
use tower_service::Service;

use super::auth::admit;
use super::metadata;
use super::service::Passthrough;
use super::unary::relay_of;
use crate::app::door::{self, Aim, RawReply, RelayedMessage};
use crate::app::guard::{bearer, Permit};
use crate::app::routing::Routed;
use crate::app::{Gateway, InflightGuard};
use crate::body::{self, BodyFeed, BodyRest, Fault, STREAM_FROM};
use crate::config::{FrontKind, Group};
use crate::context::{RequestContext, RouteFacts};
use crate::error::{failure_text, Error, Kind};
use crate::proto::inference::grpc_inference_service_server::GrpcInferenceServiceServer;
use crate::proto::inference::InferParameter;
use crate::translate::sequence::parameters_sequence_key;
use crate::wire::grpc_head::{self, Head, GRPC_STATUS, MODEL_INFER, PREFIX_LEN};

/// The leading fields a call is routed on, read from the message's
/// leading bytes by prost with `ModelInferRequest`'s own field numbers:
/// the model and the parameters (`sequence_id`). Everything else, the
/// input and output descriptions included, is skipped rather than built
/// (building them cost a relayed call ~4k instructions of ~108k,
/// docs/performance.md); their contents are the backend's to check.
#[derive(Clone, PartialEq, prost::Message)]
struct Routing {
    #[prost(string, tag = "1")]
    model_name: String,
    #[prost(string, tag = "2")]
    model_version: String,
    #[prost(map = "string, message", tag = "4")]
    parameters: HashMap<String, InferParameter>,
}

/// Leading fields read ahead at most. They describe the tensors (tens of
/// bytes per input and output), so a message whose first tensor entry lies
/// further in carries its data elsewhere (typed `contents`) and is decoded
/// whole instead.
const HEAD_MAX: usize = 1 << 20;

/// The inference service, its large `ModelInfer` calls relayed here.
#[derive(Clone)]
pub(crate) struct RelayedInfer {
    inner: GrpcInferenceServiceServer<Passthrough>,
    gateway: Arc<Gateway>,
    /// The largest message any group takes (`Config::max_message_bytes`),
    /// read once.
    limit: u64,
}

impl RelayedInfer {
    pub(super) fn new(
        inner: GrpcInferenceServiceServer<Passthrough>,
        gateway: Arc<Gateway>,
    ) -> RelayedInfer {
        let limit = gateway.config().max_message_bytes() as u64;
        RelayedInfer {
            inner,
            gateway,
            limit,
        }
    }
}

impl NamedService for RelayedInfer {
    const NAME: &'static str = <GrpcInferenceServiceServer<Passthrough> as NamedService>::NAME;
}

impl RelayedInfer {
    /// Serves one call of the inference service: a `ModelInfer` call is
    /// opened here, any other goes to the generated service.
    pub(super) fn serve(
        &self,
        request: http::Request<Body>,
    ) -> BoxFuture<http::Response<Body>, Infallible> {
        let mut inner = self.inner.clone();
        // Bridge mode reads every `ModelInfer`: it may name shared memory.
        if request.uri().path() != MODEL_INFER || self.gateway.shm_bridge().is_some() {
            return inner.call(request);
        }
        let gateway = self.gateway.clone();
        let limit = self.limit;
        Box::pin(async move {
            match open(request, limit).await {
                Opened::Whole(request) => inner.call(request).await,
                Opened::Large(mut large) => match large.relays_as_sent(&gateway) {
                    true => Ok(relay(&gateway, large).await),
                    false => inner.call(large.replayed()).await,
                },
            }
        })
    }
}

/// A `ModelInfer` call after its first bytes. Made once per call and
/// taken apart at once: boxing a variant would cost every call an
/// allocation to save a move.
#[allow(clippy::large_enum_variant)]
enum Opened {
    /// For the generated service, the bytes read put back.
    Whole(http::Request<Body>),
    Large(Large),
}

/// A relayed message's call: its head, the bytes read so far (its prefix
/// first), and the rest of the body they came from.
struct Large {
    parts: http::request::Parts,
    seen: Vec<Bytes>,
    leading: Routing,
    /// The message's length, from its prefix.
    len: u64,
    /// `None`: the message is whole in `seen` and the body ended with it.
    body: Option<Body>,
    /// The call's route, once routed ([`Large::relays_as_sent`]). Its
    /// context is made only where it is called: a context held here
    /// would be copied with every move of this value (~1k instructions
    /// a call, docs/performance.md).
    routed: Option<Routed>,
}

/// Reads frames until the call's size and leading fields are known.
/// `limit`: `upstream.max_message_bytes`, above which a small message is
/// left to the generated service's refusal.
async fn open(request: http::Request<Body>, limit: u64) -> Opened {
    let (parts, mut body) = request.into_parts();
    let mut seen: VecDeque<Result<Frame<Bytes>, Status>> = VecDeque::new();
    // The data so far in one piece, once it came in more than one frame.
    let mut joined = BytesMut::new();
    let mut data_frames = 0;
    // Where the walk of the leading fields may resume.
    let mut walked = 0;
    loop {
        let next = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        let Some(Ok(frame)) = next else {
            seen.extend(next);
            return Opened::Whole(replayed(parts, seen, None));
        };
        let Some(data) = frame.data_ref().cloned() else {
            seen.push_back(Ok(frame));
            return Opened::Whole(replayed(parts, seen, Some(body)));
        };
        seen.push_back(Ok(frame));
        data_frames += 1;
        let bytes: &[u8] = if data_frames == 1 {
            &data
        } else {
            if data_frames == 2 {
                joined.extend(seen.iter().take(1).flat_map(data_of));
            }
            joined.extend_from_slice(&data);
            &joined
        };
        let decision = match decide(bytes, &mut walked, limit) {
            // Only a body that ended with its message is relayed as it is;
            // anything after it is left to the decoder's checks.
            Decision::Small { .. } if !body.is_end_stream() => Decision::Whole,
            decision => decision,
        };
        match decision {
            Decision::More => continue,
            Decision::Whole => return Opened::Whole(replayed(parts, seen, Some(body))),
            Decision::Small { head_len, len } | Decision::Large { head_len, len } => {
                let small = matches!(decision, Decision::Small { .. });
                let leading = &bytes[PREFIX_LEN..PREFIX_LEN + head_len];
                let Ok(leading) = Routing::decode(leading) else {
                    return Opened::Whole(replayed(parts, seen, Some(body)));
                };
                let seen = seen.into_iter().flat_map(|f| data_of(&f)).collect();
                return Opened::Large(Large {
                    parts,
                    seen,
                    leading,
                    len,
                    body: (!small).then_some(body),
                    routed: None,
                });
            }
        }
    }
}

impl Large {
    /// Routed here, once, before it is admitted, since the way it takes
    /// depends on its route: on what the rules read of it (only with
    /// rules), the API key's name looked up without counting anything.
    /// A call whose route lets its bytes go as they came keeps the route;
    /// one that is not (a rule renames or mirrors it, a version is asked,
    /// no route takes it) goes to the generated service, which admits,
    /// routes and answers it.
    fn relays_as_sent(&mut self, gateway: &Gateway) -> bool {
        let leading = &self.leading;
        if !leading.model_version.is_empty() {
            return false;
        }
        let headers = &self.parts.headers;
        let facts = match door::has_rules(gateway) {
            true => {
                let credential = headers
                    .get(http::header::AUTHORIZATION)
                    .map(|v| v.as_bytes());
                RouteFacts {
                    headers: gateway.route_headers(|name| metadata::route_value(headers, name)),
                    key_name: gateway.guard().key_name(bearer(credential)),
                    ..RouteFacts::of(FrontKind::Grpc)
                }
            }
            false => RouteFacts::of(FrontKind::Grpc),
        };
        let sequence = parameters_sequence_key(&leading.parameters);
        let aim = Aim::sequenced(&leading.model_name, sequence.as_deref());
        match door::route_by(gateway, &facts, &aim) {
            Ok(routed) if !door::rewrites(&routed) => {
                self.routed = Some(routed);
                true
            }
            _ => false,
        }
    }

    /// The request for the generated service, the bytes read put back.
    fn replayed(self) -> http::Request<Body> {
        let seen = self.seen.into_iter().map(|b| Ok(Frame::data(b))).collect();
        replayed(self.parts, seen, self.body)
    }
}

fn data_of(frame: &Result<Frame<Bytes>, Status>) -> Option<Bytes> {
    frame.as_ref().ok().and_then(Frame::data_ref).cloned()
}

/// What the bytes so far say.
enum Decision {
    More,
    Whole,
    /// Relay it as it is: a message whole in the bytes so far, within the
    /// message limit, its leading fields its first `head_len` bytes.
    Small {
        head_len: usize,
        len: u64,
    },
    /// Relay it: the leading fields are the message's first `head_len`
    /// bytes, the message `len` bytes long.
    Large {
        head_len: usize,
        len: u64,
    },
}

/// `walked`: where the last walk of the leading fields stopped (see
/// `grpc_head::head`), updated.
fn decide(bytes: &[u8], walked: &mut usize, limit: u64) -> Decision {
    let Some(prefix) = grpc_head::prefix(bytes) else {
        return Decision::More;
    };
    let len = u64::from(prefix.len);
    let message = &bytes[PREFIX_LEN..];
    let in_hand = message.len() as u64;
    let small = len < STREAM_FROM;
    // A small message must be whole in the first frame; a body holding
    // more than its message is left to the decoder's checks.
    let relayable = if small {
        in_hand == len && len <= limit
    } else {
        in_hand < len
    };
    if prefix.compressed || !relayable {
        return Decision::Whole;
    }
    match grpc_head::head(message, *walked) {
        Head::Ends { len: head_len } if small => Decision::Small { head_len, len },
        Head::Ends { len: head_len } => Decision::Large { head_len, len },
        Head::Incomplete { walked: at } if !small && message.len() < HEAD_MAX => {
            *walked = at;
            Decision::More
        }
        Head::Incomplete { .. } | Head::Unwalkable => Decision::Whole,
    }
}

/// The request with the frames read put back in front of the rest of its
/// body (`None`: it ended).
fn replayed(
    parts: http::request::Parts,
    seen: VecDeque<Result<Frame<Bytes>, Status>>,
    rest: Option<Body>,
) -> http::Request<Body> {
    http::Request::from_parts(parts, Body::new(Replayed { seen, rest }))
}

struct Replayed {
    seen: VecDeque<Result<Frame<Bytes>, Status>>,
    rest: Option<Body>,
}

impl http_body::Body for Replayed {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(frame) = self.seen.pop_front() {
            return Poll::Ready(Some(frame));
        }
        match &mut self.rest {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.seen.is_empty() && self.rest.as_ref().is_none_or(|r| r.is_end_stream())
    }
}

/// Relays a large call: admitted as the generated service would admit it,
/// its size against `limits.max_streamed_body_size`, then sent through
/// the door as a raw call (`app::door::relay_raw`) while a pump feeds the rest of
/// the body in. Like every call, an attempt that never reached its backend
/// is retried elsewhere — and, for this streamed message, only when it
/// took nothing of the body (`body::Reader`).
async fn relay(gateway: &Gateway, large: Large) -> http::Response<Body> {
    let Large {
        parts,
        seen,
        leading,
        len,
        body,
        routed,
    } = large;
    let Some(routed) = routed else {
        return Status::internal("a relayed call without its route").into_http();
    };
    let ctx = RequestContext::untraced();
    ctx.routed(&routed.group.name, routed.rule.as_ref());
    let peer = peer(&parts.extensions);
    let client_metadata = MetadataMap::from_headers(parts.headers);
    let permit = match admit(gateway, &client_metadata, peer, Group::Inference) {
        Ok(permit) => permit,
        Err(status) => return status.into_http(),
    };
    let inflight = gateway.inflight().enter();
    let (message, rest) = match body {
        None => (RelayedMessage::Whole(seen), None),
        Some(body) => {
            let limit = gateway.config().limits.max_streamed_body_size as u64;
            if len > limit {
                return too_large(len, limit).to_status().into_http();
            }
            let (feed, rest) = body::channel();
            tokio::spawn(pump(body, feed));
            let in_hand: u64 = seen.iter().map(|b| b.len() as u64).sum();
            let owed = (PREFIX_LEN as u64 + len).saturating_sub(in_hand);
            let streamed = RelayedMessage::Streamed {
                seen,
                owed,
                rest: rest.clone(),
            };
            (streamed, Some(rest))
        }
    };
    let sequence = parameters_sequence_key(&leading.parameters);
    let aim = Aim::sequenced(&leading.model_name, sequence.as_deref())
        .on(&routed)
        .with_parameters(&leading.parameters);
    let relay = relay_of(&client_metadata);
    let answer = door::relay_raw(gateway, &ctx, aim, &relay, message).await;
    match answer {
        Ok(answer) => relayed(answer, (permit, inflight)),
        Err(error) => {
            let error = rest.as_ref().and_then(body_failure).unwrap_or(error);
            if let Some(rest) = &rest {
                rest.abandon();
            }
            tracing::debug!(code = ?error.kind.status().1, message = %error.message, "streamed gRPC call failed");
            error.to_status().into_http()
        }
    }
}

/// tonic's own refusal of a message above its decoding limit.
fn too_large(len: u64, limit: u64) -> Error {
    Error::new(
        Kind::PayloadTooLarge,
        format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: {limit} bytes"
        ),
    )
}

/// The client's peer address, with or without TLS.
fn peer(extensions: &http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|i| i.get_ref().remote_addr())
        })
}

/// What the client's body did wrong, if that failed the call: tonic's
/// text for a body that ended inside its message.
fn body_failure(rest: &BodyRest) -> Option<Error> {
    match rest.fault()? {
        Fault::Short { .. } => Some(Error::internal("Unexpected EOF decoding stream.")),
        Fault::Long => Some(Error::internal(
            "a unary call's body held more than one message",
        )),
        Fault::Broken => Some(Error::new(
            Kind::ClientOther(tonic::Code::Cancelled),
            "the client stopped sending its message",
        )),
        Fault::Spent => None,
    }
}

/// Moves the body's data into `feed` until it ends (or breaks: the feed is
/// dropped), or until nobody reads it any more.
async fn pump(mut body: Body, feed: BodyFeed) {
    loop {
        let next = tokio::select! {
            next = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)) => next,
            () = feed.closed() => return,
        };
        match next {
            None => {
                let _ = feed.end().await;
                return;
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if !data.is_empty() && feed.send(data).await.is_err() {
                        return;
                    }
                }
            }
            Some(Err(_)) => return,
        }
    }
}

/// The backend's answer for the client: its metadata as the generated
/// service would return it, then its frames and trailers as they come.
/// `guards` (the admission permit, the in-flight count) last until the
/// answer ends.
fn relayed(answer: RawReply, guards: (Permit, InflightGuard)) -> http::Response<Body> {
    let (parts, body) = answer.into_parts();
    // A status in the head ("trailers-only"): the body carries nothing more.
    let state = if parts.headers.contains_key(GRPC_STATUS) {
        State::Through
    } else {
        State::Data
    };
    let headers = metadata::relayed_head(&parts.headers);
    let mut response = http::Response::new(Body::new(Relayed {
        body,
        state,
        _guards: guards,
    }));
    *response.headers_mut() = headers;
    response
}

struct Relayed {
    body: Body,
    state: State,
    _guards: (Permit, InflightGuard),
}

#[derive(PartialEq)]
enum State {
    /// The message's frames, then the trailers with the status.
    Data,
    /// Whatever comes, as it comes (the status was in the head).
    Through,
    /// The status went.
    Ended,
}

impl http_body::Body for Relayed {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match self.state {
            State::Ended => return Poll::Ready(None),
            State::Through => return Pin::new(&mut self.body).poll_frame(cx),
            State::Data => {}
        }
        let frame = ready!(Pin::new(&mut self.body).poll_frame(cx));
        let frame = match frame {
            Some(Ok(frame)) if !frame.is_trailers() => return Poll::Ready(Some(Ok(frame))),
            Some(Ok(trailers)) => trailers,
            // The backend's answer broke off, or ended without a status:
            // the client gets one, as trailers.
            Some(Err(status)) => broke_off(&failure_text(&status)),
            None => broke_off("it ended without a status"),
        };
        self.state = State::Ended;
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        match self.state {
            State::Ended => true,
            State::Through => self.body.is_end_stream(),
            State::Data => false,
        }
    }
}

/// Trailers with the status of an answer that broke off.
fn broke_off(why: &str) -> Frame<Bytes> {
    let error = Error::new(
        Kind::UpstreamUnreachable,
        format!("the backend's answer broke off: {why}"),
    );
    let mut trailers = http::HeaderMap::new();
    let _ = error.to_status().add_header(&mut trailers);
    Frame::trailers(trailers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::infer_parameter::ParameterChoice;
    use crate::proto::inference::model_infer_request::InferInputTensor;
    use crate::proto::inference::ModelInferRequest;

    #[test]
    fn the_routing_fields_are_the_messages_own() {
        let parameters = HashMap::from([(
            "sequence_id".to_owned(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::Int64Param(42)),
            },
        )]);
        let whole = ModelInferRequest {
            model_name: "add_sub".into(),
            model_version: "1".into(),
            parameters: parameters.clone(),
            inputs: vec![InferInputTensor {
                name: "INPUT0".into(),
                datatype: "FP32".into(),
                shape: vec![1, 4],
                ..Default::default()
            }],
            ..Default::default()
        };
        let routing = Routing::decode(&whole.encode_to_vec()[..]).unwrap();
        assert_eq!(routing.model_name, "add_sub");
        assert_eq!(routing.parameters, parameters);
        let bare = ModelInferRequest::default().encode_to_vec();
        assert_eq!(Routing::decode(&bare[..]).unwrap(), Routing::default());
    }
}
