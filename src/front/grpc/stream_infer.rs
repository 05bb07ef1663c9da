//! `ModelStreamInfer` relayed: the stream opens through the door
//! (`app::door::open_stream`, one backend for its life, chosen from the
//! client's first message — its model and sequence), then a relay task
//! carries requests up and responses down as they come, through bounded
//! channels (a slow reader slows the upstream, nothing piles up). The
//! client's `grpc-timeout`, if any, bounds the whole stream (the door
//! enforces it). When the client goes away the upstream stream is dropped,
//! which cancels it; the stream counts as in flight until its relay ends.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::unary::relay_of;
use crate::app::door::{self, Aim, StreamReplies};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::proto::inference as pb;
use crate::translate::sequence::sequence_key;

/// Messages buffered each way between the client and the upstream.
const STREAM_BUFFER: usize = 16;

pub(super) type ResponseStream = ReceiverStream<Result<pb::ModelStreamInferResponse, Status>>;
type Responses = mpsc::Sender<Result<pb::ModelStreamInferResponse, Status>>;

/// Relays one `ModelStreamInfer` stream, pinned to one backend.
pub(super) async fn stream(
    gateway: &Gateway,
    request: Request<Streaming<pb::ModelInferRequest>>,
) -> Result<Response<ResponseStream>, Status> {
    let inflight = gateway.inflight().enter();
    let (client_metadata, _, mut inbound) = request.into_parts();
    let (responses, stream) = mpsc::channel(STREAM_BUFFER);
    let Some(first) = inbound.message().await? else {
        // Closed before any request: an empty, successful stream.
        return Ok(Response::new(ReceiverStream::new(stream)));
    };
    let (requests, upstream_requests) = mpsc::channel(STREAM_BUFFER);
    let sequence = sequence_key(&first);
    let model = first.model_name.clone();
    requests
        .try_send(first)
        .map_err(|_| Status::internal("stream relay: first request not queued"))?;
    let aim = Aim::sequenced(&model, sequence.as_deref());
    let relay = relay_of(&client_metadata);
    let ctx = RequestContext::untraced();
    let upstream = ReceiverStream::new(upstream_requests);
    let replies = door::open_stream(gateway, &ctx, aim, Some(&relay), upstream)
        .await
        .map_err(|e| e.to_status())?;
    let relay = Relay {
        _inflight: inflight,
        responses,
    };
    tokio::spawn(relay.run(replies, inbound, requests));
    Ok(Response::new(ReceiverStream::new(stream)))
}

/// One stream's relay task.
struct Relay {
    /// The stream counts as in flight until its relay ends.
    _inflight: crate::app::InflightGuard,
    responses: Responses,
}

impl Relay {
    async fn run(
        self,
        replies: StreamReplies,
        inbound: Streaming<pb::ModelInferRequest>,
        requests: mpsc::Sender<pb::ModelInferRequest>,
    ) {
        let result = tokio::select! {
            result = self.downstream(replies) => result,
            status = upstream_bound(inbound, requests) => Err(status),
            // The client went away: dropping the upstream stream cancels it.
            () = self.responses.closed() => Ok(()),
        };
        if let Err(status) = result {
            let _ = self.responses.send(Err(status)).await;
        }
    }

    /// Forwards each response as it arrives; `Ok` when the upstream ends
    /// the stream (or the client is gone). A failure — the stream broken,
    /// its deadline passed — was accounted by the door; the client gets
    /// it as the stream's status.
    async fn downstream(&self, mut replies: StreamReplies) -> Result<(), Status> {
        loop {
            match replies.next().await {
                Ok(Some(response)) => {
                    if self.responses.send(Ok(response)).await.is_err() {
                        return Ok(());
                    }
                }
                Ok(None) => return Ok(()),
                Err(error) => return Err(error.to_status()),
            }
        }
    }
}

/// Forwards the client's further requests upstream. When the client
/// half-closes, the upstream's request stream ends too and this waits
/// forever (the responses decide); a broken client stream ends the relay
/// with its status.
async fn upstream_bound(
    mut inbound: Streaming<pb::ModelInferRequest>,
    requests: mpsc::Sender<pb::ModelInferRequest>,
) -> Status {
    loop {
        match inbound.message().await {
            Ok(Some(request)) => {
                if requests.send(request).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(status) => return status,
        }
    }
    drop(requests);
    std::future::pending().await
}
