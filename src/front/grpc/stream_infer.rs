//! `ModelStreamInfer` relayed: the stream opens through the door
//! (`app::door::open_stream`, one backend for its life, chosen from the
//! client's first message — its model and sequence), then a relay task
//! carries requests up and responses down as they come, through bounded
//! channels (a slow reader slows the upstream, nothing piles up). The
//! client's `grpc-timeout`, if any, bounds the whole stream (the door
//! enforces it). When the client goes away the upstream stream is dropped,
//! which cancels it; the stream counts as in flight until its relay ends.
//! In shared-memory bridge mode each request is bridged on its way up and
//! each response on its way down (`app::shm::StreamWindows`); a request
//! the bridge refuses gets its error as a message of the stream, as the
//! upstream answers a request it refuses.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::auth::call_context;
use super::unary::relay_of;
use crate::app::door::{self, Aim, StreamReplies};
use crate::app::guard::Permit;
use crate::app::shm::StreamWindows;
use crate::app::Gateway;
use crate::config::FrontKind;
use crate::error::Error;
use crate::proto::inference as pb;
use crate::translate::sequence::sequence_key;

/// Messages buffered each way between the client and the upstream.
const STREAM_BUFFER: usize = 16;

pub(super) type ResponseStream = ReceiverStream<Result<pb::ModelStreamInferResponse, Status>>;
type Responses = mpsc::Sender<Result<pb::ModelStreamInferResponse, Status>>;

/// Relays one `ModelStreamInfer` stream, pinned to one backend.
pub(super) async fn stream(
    gateway: &Arc<Gateway>,
    request: Request<Streaming<pb::ModelInferRequest>>,
    permit: &Permit,
) -> Result<Response<ResponseStream>, Status> {
    let inflight = gateway.inflight().enter();
    let (client_metadata, _, mut inbound) = request.into_parts();
    let (responses, stream) = mpsc::channel(STREAM_BUFFER);
    let Some(first) = inbound.message().await? else {
        // Closed before any request: an empty, successful stream.
        return Ok(Response::new(ReceiverStream::new(stream)));
    };
    let bridged = gateway
        .shm_bridge()
        .is_some()
        .then(|| Bridged::new(gateway.clone()));
    let (requests, upstream_requests) = mpsc::channel(STREAM_BUFFER);
    let sequence = sequence_key(&first);
    let (model, version) = (first.model_name.clone(), first.model_version.clone());
    let first = match &bridged {
        Some(bridged) => bridged.request(first).await,
        None => Ok(first),
    };
    match first {
        Ok(first) => requests.try_send(first).map_err(|_| queue_failed())?,
        Err(refused) => responses
            .try_send(Ok(refused))
            .map_err(|_| queue_failed())?,
    }
    let aim = Aim::sequenced(&model, sequence.as_deref()).at_version(&version);
    let relay = relay_of(&client_metadata);
    let ctx = call_context(gateway, &client_metadata, permit, FrontKind::Grpc);
    let upstream = ReceiverStream::new(upstream_requests);
    let replies = door::open_stream(gateway, &ctx, aim, Some(&relay), upstream)
        .await
        .map_err(|e| e.to_status())?;
    let relay = Relay {
        _inflight: inflight,
        responses,
        bridged,
    };
    tokio::spawn(relay.run(replies, inbound, requests));
    Ok(Response::new(ReceiverStream::new(stream)))
}

fn queue_failed() -> Status {
    Status::internal("stream relay: first message not queued")
}

/// One stream's relay task.
struct Relay {
    /// The stream counts as in flight until its relay ends.
    _inflight: crate::app::InflightGuard,
    responses: Responses,
    /// Bridge mode: the stream's requests' windows.
    bridged: Option<Bridged>,
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
            status = self.upstream_bound(inbound, requests) => Err(status),
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
            let mut response = match replies.next().await {
                Ok(Some(response)) => response,
                Ok(None) => return Ok(()),
                Err(error) => return Err(error.to_status()),
            };
            if let Some(bridged) = &self.bridged {
                bridged.response(&mut response).await;
            }
            if self.responses.send(Ok(response)).await.is_err() {
                return Ok(());
            }
        }
    }

    /// Forwards the client's further requests upstream. When the client
    /// half-closes, the upstream's request stream ends too and this waits
    /// forever (the responses decide); a broken client stream ends the
    /// relay with its status.
    async fn upstream_bound(
        &self,
        mut inbound: Streaming<pb::ModelInferRequest>,
        requests: mpsc::Sender<pb::ModelInferRequest>,
    ) -> Status {
        loop {
            let request = match inbound.message().await {
                Ok(Some(request)) => request,
                Ok(None) => break,
                Err(status) => return status,
            };
            let request = match &self.bridged {
                Some(bridged) => bridged.request(request).await,
                None => Ok(request),
            };
            let sent = match request {
                Ok(request) => requests.send(request).await.is_ok(),
                Err(refused) => self.responses.send(Ok(refused)).await.is_ok(),
            };
            if !sent {
                break;
            }
        }
        drop(requests);
        std::future::pending().await
    }
}

/// A stream in bridge mode: the core's bridge and the windows of the
/// stream's requests.
struct Bridged {
    gateway: Arc<Gateway>,
    windows: StreamWindows,
}

impl Bridged {
    fn new(gateway: Arc<Gateway>) -> Bridged {
        Bridged {
            gateway,
            windows: StreamWindows::default(),
        }
    }

    /// A request bridged on its way up, or the stream's message refusing
    /// it (Triton's form: the error with the request's id).
    async fn request(
        &self,
        request: pb::ModelInferRequest,
    ) -> Result<pb::ModelInferRequest, pb::ModelStreamInferResponse> {
        let Some(bridge) = self.gateway.shm_bridge() else {
            return Ok(request);
        };
        let id = request.id.clone();
        self.windows
            .request(bridge, request)
            .await
            .map_err(|error| refusal(id, &error))
    }

    /// A response's outputs written into its request's windows; a failure
    /// to write them is the response's error.
    async fn response(&self, response: &mut pb::ModelStreamInferResponse) {
        if let Err(error) = self.windows.response(response).await {
            let id = response
                .infer_response
                .as_ref()
                .map(|r| r.id.clone())
                .unwrap_or_default();
            *response = refusal(id, &error);
        }
    }
}

/// The stream message of a request refused: its error and its id.
fn refusal(id: String, error: &Error) -> pb::ModelStreamInferResponse {
    pb::ModelStreamInferResponse {
        error_message: error.message.clone(),
        infer_response: Some(pb::ModelInferResponse {
            id,
            ..Default::default()
        }),
    }
}
