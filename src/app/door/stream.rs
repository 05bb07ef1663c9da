//! `ModelStreamInfer` through the door: one stream relay for HTTP
//! `/generate(_stream)` (the gateway's own stream of one request) and the
//! gRPC front's `ModelStreamInfer` (a client's stream passed on). The
//! backend is chosen from the first request's model and sequence and kept
//! for the stream's life; the stream is one call of the pool
//! (`upstream::stream`): its end, a failure in the middle or its deadline
//! passing are counted and blamed as a unary call's are.

use std::time::Duration;

use tokio_stream::Stream;
use tonic::{Extensions, Request};

use super::{pool, Aim, Relay};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::Result;
use crate::proto::inference::{ModelInferRequest, ModelStreamInferResponse};
use crate::upstream::call::Deadline;
use crate::upstream::stream::StreamCall;

/// An open stream's replies, read one by one (`next`; `Ok(None)` at its
/// end); dropping it cancels the stream upstream.
pub(crate) type StreamReplies = StreamCall<ModelStreamInferResponse>;

/// Opens a `ModelStreamInfer` stream about `aim` carrying `requests` as
/// they come. `relay`: a client's stream passed on, with its deadline (for
/// the whole stream; none: unbounded) and metadata; `None`: the gateway's
/// own, within `generate.stream_timeout_ms`, carrying the request's trace.
pub(crate) async fn open_stream<S>(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    relay: Option<&Relay>,
    requests: S,
) -> Result<StreamReplies>
where
    S: Stream<Item = ModelInferRequest> + Send + 'static,
{
    let deadline = match relay {
        Some(relay) => relay.deadline.map(Deadline::client),
        None => Some(Deadline::configured(
            gateway.config().generate.stream_timeout(),
        )),
    };
    let open = |lease: &crate::upstream::Lease, timeout: Option<Duration>| {
        let mut client = lease.client();
        let mut request = match relay {
            Some(relay) => {
                Request::from_parts(relay.metadata.clone(), Extensions::default(), requests)
            }
            None => Request::new(requests),
        };
        if let Some(timeout) = timeout {
            request.set_timeout(timeout);
        }
        if let Some(trace) = ctx.trace() {
            trace.inject(request.metadata_mut());
        }
        async move { client.model_stream_infer(request).await }
    };
    pool(gateway, &aim)
        .open_stream(ctx, &aim.target(), deadline, open)
        .await
}
