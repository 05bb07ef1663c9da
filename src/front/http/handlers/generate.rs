//! `/generate` and `/generate_stream` (v2 §1.6) over `ModelStreamInfer`
//! (v2 §6.4): one upstream stream per HTTP request, carrying the one
//! request and half-closed at once, so the upstream ends the stream when
//! the request is complete (Triton does). The first upstream message fixes
//! the HTTP status, as on Triton; `/generate` then waits for the end and
//! answers its one response, `/generate_stream` forwards every response as
//! an SSE event the moment it arrives (see [`pump`]).

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::app::door::{self, Aim, StreamReplies};
use crate::app::{models, Gateway};
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::plan::Plan;
use crate::front::http::route::ModelRef;
use crate::front::http::{Answer, HttpRequest, HttpResponse, StreamedResponse};
use crate::translate::from_grpc::stream::{self, stream_item, StreamItem};
use crate::translate::sequence::request_sequence_key;
use crate::translate::to_grpc;
use crate::wire::generate;

/// Events buffered between the upstream reader and the HTTP writer. Small:
/// beyond it the reader waits for the client (backpressure), and tonic's
/// HTTP/2 flow control then holds the upstream back.
const EVENT_BUFFER: usize = 16;

/// How long the end of an upstream stream is awaited after its final
/// response, before the stream is dropped (which cancels it).
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

const SSE_CONTENT_TYPE: &str = "text/event-stream; charset=utf-8";

const NOT_ONE_RESPONSE: &str = "generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses";

/// The upstream side of one generation: its stream (through the door,
/// which enforces the whole generation's deadline and accounts for its
/// end) and our own copy of the request's id.
pub(in crate::front::http) struct Generating {
    replies: StreamReplies,
    request_id: Vec<u8>,
}

impl Generating {
    /// The replies of a stream opened for a request of this id.
    pub(in crate::front::http) fn new(replies: StreamReplies, request_id: Vec<u8>) -> Generating {
        Generating {
            replies,
            request_id,
        }
    }

    /// The next message; `None` at the end of the stream. A broken stream
    /// or the deadline passing becomes a failed last response.
    pub(in crate::front::http) async fn next(&mut self) -> Option<StreamItem> {
        match self.replies.next().await {
            Ok(Some(message)) => Some(stream_item(message, &self.request_id)),
            Ok(None) => None,
            Err(error) => Some(StreamItem::Failed {
                message: error.message,
                last: true,
            }),
        }
    }

    /// Lets the upstream end a finished stream itself (a drop before its
    /// end would be seen as a cancellation), for a short while at most.
    pub(in crate::front::http) async fn drain(mut self) {
        let rest = async { while let Ok(Some(_)) = self.replies.next().await {} };
        let _ = tokio::time::timeout(DRAIN_TIME, rest).await;
    }
}

/// `/generate`: exactly one response expected; any other count is
/// Triton's error text with the status of the first message.
pub(super) async fn once(
    gateway: &Gateway,
    ctx: &RequestContext,
    plan: &Plan,
    model: &ModelRef,
    req: &HttpRequest,
) -> Result<HttpResponse> {
    let mut upstream = open(gateway, ctx, plan, model, req).await?;
    let first = upstream.next().await;
    let status = first_status(first.as_ref())?;
    let mut body = None;
    let mut count = 0usize;
    let mut item = first;
    while let Some(current) = item.take() {
        let (json, last) = render(current);
        count += 1;
        body.get_or_insert(json);
        if last {
            upstream.drain().await;
            break;
        }
        item = upstream.next().await;
    }
    let body = match (count, body) {
        (1, Some(json)) => json,
        _ => Error::internal(NOT_ONE_RESPONSE).body(),
    };
    Ok(HttpResponse::new(
        status,
        "application/json",
        vec![Bytes::from(body)],
    ))
}

/// `/generate_stream`: the status from the first message, then every
/// response as `data: <json>\n\n` as it arrives.
pub(super) async fn stream(
    gateway: &Gateway,
    ctx: &RequestContext,
    plan: &Plan,
    model: &ModelRef,
    req: &HttpRequest,
) -> Result<Answer> {
    let mut upstream = open(gateway, ctx, plan, model, req).await?;
    let first = upstream.next().await;
    let status = first_status(first.as_ref())?;
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let first = first.map(|first| {
        let (json, last) = render(first);
        if last {
            drop(tx);
            tokio::spawn(upstream.drain());
        } else {
            tokio::spawn(pump(upstream, tx));
        }
        generate::sse_event(&json)
    });
    Ok(Answer::Streamed(StreamedResponse {
        status,
        headers: vec![("Content-Type", SSE_CONTENT_TYPE.to_string())],
        first,
        body: rx,
        length: None,
    }))
}

/// v2 §1.6 order: model signature (unknown model → 404), request
/// `Content-Encoding`, body → request; then the upstream stream opens.
async fn open(
    gateway: &Gateway,
    ctx: &RequestContext,
    plan: &Plan,
    model: &ModelRef,
    req: &HttpRequest,
) -> Result<Generating> {
    // Routed once: the signature and the stream take one route (a
    // sequence's own, once its key is read).
    let routed = door::route(gateway, ctx, &Aim::of(model))?;
    let info = models::model_info(gateway, ctx, model, Some(&routed)).await?.ok_or_else(|| {
        Error::unsupported(
            "generate needs the model's inputs, which the upstream does not provide (no ModelConfig or ModelMetadata)",
        )
    })?;
    if !plan.body_identity() {
        return Err(Error::invalid(
            "Unsupported content-encoding, only 'identity' is supported.",
        ));
    }
    let mut request = generate::decode(
        &model.name,
        &model.version,
        &req.body,
        &info,
        gateway.decode_limits(),
    )?;
    // gRPC reserves `triton_*` keys (and `triton_enable_empty_final_response`
    // would change the stream itself): never forwarded.
    request
        .parameters
        .retain(|(k, _)| !k.starts_with("triton_"));
    let sequence = request_sequence_key(&request);
    let aim =
        Aim::sequenced(&request.model_name, sequence.as_deref()).at_version(&request.model_version);
    let routed = match sequence {
        Some(_) => door::route(gateway, ctx, &aim)?,
        None => routed,
    };
    let aim = aim.on(&routed);
    let message = to_grpc::model_infer(&request);
    let requests = tokio_stream::once(message);
    let replies = door::open_stream(gateway, ctx, aim, None, requests).await?;
    Ok(Generating::new(replies, request.id))
}

/// The HTTP status Triton sends, fixed by the first message (v2 §1.6):
/// 200 for a response or none at all; for a failed response, the status
/// of its error code, which gRPC streams do not carry: taken as `UNKNOWN`,
/// the code of the Python backend's errors (400). A request refused before
/// scheduling is answered as an ordinary error.
fn first_status(first: Option<&StreamItem>) -> Result<u16> {
    match first {
        None | Some(StreamItem::Response { .. }) => Ok(200),
        Some(StreamItem::Failed { message, .. }) => Ok(stream::failure(message).status()),
        Some(StreamItem::Refused { message }) => Err(stream::refusal(message)),
    }
}

/// The JSON of one message (a response, or `{"error":...}`), and whether
/// it is the last of the request.
fn render(item: StreamItem) -> (Vec<u8>, bool) {
    match item {
        StreamItem::Response { response, last } => match generate::encode(&response) {
            Ok(json) => (json, last),
            Err(error) => (error.body(), last),
        },
        StreamItem::Failed { message, last } => (Error::internal(message).body(), last),
        StreamItem::Refused { message } => (Error::internal(message).body(), true),
    }
}

/// Forwards the rest of the stream as SSE events. Returns — dropping the
/// upstream stream, which cancels the call (HTTP/2 `RST_STREAM`) — as soon
/// as the HTTP side is gone, even while the model is between responses.
async fn pump(mut upstream: Generating, tx: mpsc::Sender<Bytes>) {
    loop {
        let item = tokio::select! {
            () = tx.closed() => {
                tracing::debug!("client gone: cancelling the upstream stream");
                return;
            }
            item = upstream.next() => item,
        };
        let Some(item) = item else { return };
        let (json, last) = render(item);
        // Waits while the channel is full: the client sets the pace.
        if tx.send(generate::sse_event(&json)).await.is_err() {
            tracing::debug!("client gone: cancelling the upstream stream");
            return;
        }
        if last {
            drop(tx);
            upstream.drain().await;
            return;
        }
    }
}
