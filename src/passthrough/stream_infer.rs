//! `ModelStreamInfer`: one backend for the stream's life. The backend is
//! chosen from the client's first message (its model and sequence), then a
//! relay task carries requests up and responses down as they come, through
//! bounded channels (a slow reader slows the upstream, nothing piles up).
//! The client's `grpc-timeout`, if any, bounds the whole stream. When the
//! client goes away the upstream call is dropped, which cancels it; the
//! [`Lease`] lives as long as the relay, so the backend counts the stream
//! as in flight.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Extensions, Request, Response, Status, Streaming};

use super::metadata;
use crate::app::Gateway;
use crate::error::{Error, Kind};
use crate::proto::inference as pb;
use crate::translate::sequence::sequence_key;
use crate::upstream::call::{failure_text, never_reached, Deadline};
use crate::upstream::{Lease, Target};

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
    let pool = gateway.pool();
    pool.started().await;
    let sequence = sequence_key(&first);
    let target = Target {
        model: Some(&first.model_name),
        sequence: sequence.as_deref(),
    };
    let lease = pool.pick(&target, &[]).map_err(|e| e.to_status())?;
    let (requests, upstream_requests) = mpsc::channel(STREAM_BUFFER);
    requests
        .try_send(first)
        .map_err(|_| Status::internal("stream relay: first request not queued"))?;
    let deadline = metadata::deadline(&client_metadata);
    let mut upstream = Request::from_parts(
        metadata::forwarded(&client_metadata),
        Extensions::default(),
        ReceiverStream::new(upstream_requests),
    );
    if let Some(deadline) = deadline {
        upstream.set_timeout(deadline);
    }
    let relay = Relay {
        _inflight: inflight,
        lease,
        eject_after_failures: pool.settings().eject_after_failures,
        eject: pool.settings().eject,
        deadline: deadline.map(Deadline::client),
        responses,
    };
    tokio::spawn(relay.run(upstream, inbound, requests, deadline));
    Ok(Response::new(ReceiverStream::new(stream)))
}

type UpstreamRequest = Request<ReceiverStream<pb::ModelInferRequest>>;

/// One stream's relay task.
struct Relay {
    /// The stream counts as in flight until its relay ends.
    _inflight: crate::app::InflightGuard,
    lease: Lease,
    eject_after_failures: usize,
    eject: Duration,
    /// The client's deadline for the whole stream, if it set one.
    deadline: Option<Deadline>,
    responses: Responses,
}

impl Relay {
    async fn run(
        self,
        upstream: UpstreamRequest,
        inbound: Streaming<pb::ModelInferRequest>,
        requests: mpsc::Sender<pb::ModelInferRequest>,
        deadline: Option<Duration>,
    ) {
        let relay = async {
            tokio::select! {
                result = self.downstream(upstream) => result,
                status = upstream_bound(inbound, requests) => Err(status),
                // The client went away: dropping the upstream call cancels it.
                () = self.responses.closed() => Ok(()),
            }
        };
        let result = match deadline {
            None => relay.await,
            Some(deadline) => tokio::time::timeout(deadline, relay)
                .await
                .unwrap_or_else(|_| {
                    Err(Error::deadline_passed(self.lease.addr(), deadline).to_status())
                }),
        };
        if let Err(status) = result {
            let _ = self.responses.send(Err(status)).await;
        }
    }

    /// Opens the upstream call and forwards each response as it arrives;
    /// `Ok` when the upstream ends the stream (or the client is gone).
    async fn downstream(&self, request: UpstreamRequest) -> Result<(), Status> {
        let mut upstream = self
            .lease
            .client()
            .model_stream_infer(request)
            .await
            .map_err(|status| self.failed(&status))?
            .into_inner();
        self.lease.backend().record_success();
        loop {
            match upstream.message().await {
                Ok(Some(response)) => {
                    if self.responses.send(Ok(response)).await.is_err() {
                        return Ok(());
                    }
                }
                Ok(None) => return Ok(()),
                Err(status) => return Err(self.failed(&status)),
            }
        }
    }

    /// An upstream failure as the client sees it; failures that blame the
    /// backend (not the client's deadline passing) count towards its
    /// passive ejection.
    fn failed(&self, status: &Status) -> Status {
        let addr = self.lease.addr();
        let (error, why) = match self.deadline {
            Some(deadline) => {
                let error = Error::from_upstream(status, addr, deadline.length);
                let blamed = deadline.blames_backend(error.kind, never_reached(status));
                let why = blamed.then(|| deadline.failure(error.kind, Some(status)));
                (error, why)
            }
            // No deadline of the client's: a timeout is the upstream's own.
            None => {
                let error = Error::from_status(status);
                let blamed = matches!(
                    error.kind,
                    Kind::UpstreamUnreachable | Kind::UpstreamTimeout
                );
                (error, blamed.then(|| failure_text(status)))
            }
        };
        if let Some(why) = why {
            self.lease
                .backend()
                .record_failure(self.eject_after_failures, self.eject, why);
        }
        error.to_status()
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
