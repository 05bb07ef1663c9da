//! `ModelStreamInfer` through the door: one stream relay for HTTP
//! `/generate(_stream)` and the OpenAI front's generations (the gateway's
//! own stream of one request) and the gRPC front's `ModelStreamInfer` (a
//! client's stream passed on). The
//! stream is routed once, on its first request's model and sequence; its
//! backend is chosen from it and kept for the stream's life; the stream
//! is one call of the pool (`upstream::stream`): its end, a failure in the
//! middle or its deadline passing are counted and blamed as a unary
//! call's are. A route that renames the model renames every request of
//! the stream toward the upstream and every reply back. A reply of a
//! version other than the one the stream's first request asked for is
//! never passed on: it becomes an error reply ([`super::served_version`]).
//! A stream is never mirrored (counted as skipped, `streamed`). Its
//! group's admission control admits it as it opens; it holds its slot
//! until it closes.

use std::sync::Arc;
use std::time::Duration;

use tokio_stream::{Stream, StreamExt};
use tonic::{Extensions, Request};

use super::{route, served_version, target, Aim, Relay};
use crate::app::admission::Permit;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::Result;
use crate::proto::inference::{ModelInferRequest, ModelStreamInferResponse};
use crate::translate::rename::Renamed;
use crate::upstream::call::Deadline;
use crate::upstream::stream::StreamCall;

/// An open stream's replies, read one by one ([`StreamReplies::next`]);
/// dropping it cancels the stream upstream.
pub(crate) struct StreamReplies {
    call: StreamCall<ModelStreamInferResponse>,
    /// The model's names upstream and to the client, when renamed.
    renamed: Option<(Arc<str>, String)>,
    /// The model as the client named it and the version it asked for,
    /// when it asked for one.
    asked: Option<(String, String)>,
    /// Its slot of the group's admission control, held for the stream's
    /// life.
    _permit: Option<Permit>,
}

impl StreamReplies {
    /// The next reply; `Ok(None)` at the end of the stream (and after it
    /// failed). A broken stream, or its deadline passing, fails it.
    pub(crate) async fn next(&mut self) -> Result<Option<ModelStreamInferResponse>> {
        let mut reply = self.call.next().await?;
        if let (Some(reply), Some((upstream, client))) = (&mut reply, &self.renamed) {
            reply.rename(upstream, client);
        }
        if let (Some(reply), Some((model, asked))) = (&mut reply, &self.asked) {
            let served = reply
                .infer_response
                .as_ref()
                .map(|r| r.model_version.as_str());
            if let Err(error) = served_version(model, asked, served.unwrap_or_default()) {
                *reply = ModelStreamInferResponse {
                    error_message: error.message,
                    infer_response: None,
                };
            }
        }
        Ok(reply)
    }
}

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
    let routed = route(gateway, ctx, &aim)?;
    let relayed = relay.and_then(|relay| relay.deadline);
    let permit = super::admit(&routed, || super::asks_of(aim.parameters), relayed, true).await?;
    if let Some(mirror) = &routed.mirror {
        super::mirror::stream_skipped(mirror);
    }
    let renamed = match (aim.model, &routed.upstream_model) {
        (Some(client), Some(upstream)) => Some((upstream.clone(), client.to_string())),
        _ => None,
    };
    let names = renamed.clone();
    let requests = requests.map(move |mut request| {
        if let Some((upstream, client)) = &names {
            request.rename(client, upstream);
        }
        request
    });
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
    let call = routed
        .group
        .pool
        .open_stream(ctx, &target(&aim, &routed), deadline, open)
        .await;
    if let Some(counts) = &routed.counts {
        // Counted as it opens: its replies are the client's to read.
        counts.record(call.is_ok(), None);
    }
    let call = super::named_back_error(call, &aim, &routed)?;
    let asked = match (aim.model, aim.version) {
        (Some(model), Some(version)) if !version.is_empty() => {
            Some((model.to_string(), version.to_string()))
        }
        _ => None,
    };
    Ok(StreamReplies {
        call,
        renamed,
        asked,
        _permit: permit,
    })
}
