//! Shadow traffic: a route's `mirror` copies a share of its inferences to
//! another group. The copy is sent from a task of its own once the primary
//! call has ended, with its own deadline (`mirror.timeout_ms`): none of
//! its work is on the primary answer's way (measured: `scripts/bench
//! --mirror-only`), and it never changes or fails that answer. What it holds is bounded:
//! only messages whose tensors are all in hand (not still arriving, not
//! answered into shared memory) of at most `mirror.max_bytes` are copied,
//! at most `mirror.max_inflight` at once — the rest are counted as
//! skipped, with the reason. The encoded message is shared with the
//! primary call (reference counts), not copied.
//!
//! When both answers are in, the mirror's is judged against the primary's
//! (`translate::agreement`) and counted (`Metrics::mirror_agreement`), so a
//! candidate can be judged on live traffic before it takes any.

use std::sync::Arc;

use tokio::sync::oneshot;
use tonic::Status;

use crate::app::routing::{Mirror, Skip, Verdict};
use crate::context::RequestContext;
use crate::proto::inference::ModelInferResponse;
use crate::translate::{agreement, from_grpc};
use crate::upstream::encoded::EncodedInfer;
use crate::upstream::rpc::model_infer;
use crate::upstream::Target;

/// A mirror call waiting for the primary's answer ([`Shadow::answered`]),
/// which it then judges its own against.
pub(super) struct Shadow {
    primary: oneshot::Sender<Option<ModelInferResponse>>,
    max_bytes: usize,
}

/// What the primary call holds that decides whether it can be copied.
pub(super) struct Held {
    /// Its tensors are still arriving (a streamed body).
    pub(super) streamed: bool,
    /// Its answer goes into shared memory (a tapped reply).
    pub(super) tapped: bool,
}

/// Starts the mirror of one inference if the rule's share picks it and
/// its bounds allow: `message` (the primary's, about `model` by its
/// upstream name) to the mirror's group.
pub(super) fn start(
    mirror: &Arc<Mirror>,
    model: &str,
    sequence: Option<&[u8]>,
    message: &Result<EncodedInfer, Status>,
    held: Held,
) -> Option<Shadow> {
    if !mirror.picks() {
        return None;
    }
    let counts = &mirror.counts;
    let skip = |why| {
        counts.skipped(why);
        None
    };
    if held.streamed {
        return skip(Skip::Streamed);
    }
    if held.tapped {
        return skip(Skip::SharedMemory);
    }
    let message = message.as_ref().ok()?;
    if message.len() > mirror.rule.max_bytes as u64 {
        return skip(Skip::Size);
    }
    let Ok(permit) = mirror.inflight.clone().try_acquire_owned() else {
        return skip(Skip::Inflight);
    };
    let (primary, answer) = oneshot::channel();
    let max_bytes = mirror.rule.max_bytes;
    let (mirror, message) = (mirror.clone(), message.clone());
    let (model, sequence) = (model.to_string(), sequence.map(<[u8]>::to_vec));
    tokio::spawn(async move {
        let _permit = permit;
        // The primary's answer first (`None`: it failed, or its answer is
        // too large to hold), so that the copy's work follows the answer
        // rather than competing with it on this thread.
        let primary = answer.await.ok().flatten();
        // A call of the gateway's own: not the client's request, whose
        // access line and upstream time it must not touch.
        let ctx = RequestContext::untraced();
        let target = Target {
            model: Some(&model),
            sequence: sequence.as_deref(),
        };
        let call = model_infer(&mirror.group.pool, &ctx, target, Ok(message));
        let shadow = match tokio::time::timeout(mirror.timeout(), call).await {
            Ok(answer) => answer.ok(),
            Err(_) => None,
        };
        mirror.counts.call(shadow.is_some());
        let verdict = match (primary, shadow) {
            (Some(primary), Some(shadow)) => {
                let primary = from_grpc::model_infer(primary, b"");
                let shadow = from_grpc::model_infer(shadow, b"");
                match agreement::agree(&primary, &shadow, mirror.rule.tolerance) {
                    true => Verdict::Agree,
                    false => Verdict::Differ,
                }
            }
            _ => Verdict::Uncompared,
        };
        mirror.counts.verdict(verdict);
    });
    Some(Shadow { primary, max_bytes })
}

/// A `ModelStreamInfer` stream on a mirrored route (`/generate`, the
/// gRPC front's streams, the OpenAI front): never copied — its requests
/// come as the client sends them and its replies are the client's as
/// they arrive — and counted, when the share picks it, as skipped
/// `streamed`, as a streamed body is.
pub(super) fn stream_skipped(mirror: &Mirror) {
    if mirror.picks() {
        mirror.counts.skipped(Skip::Streamed);
    }
}

impl Shadow {
    /// The primary call ended with `answer` (`None`: it failed). An answer
    /// above `max_bytes` is not held for the comparison.
    pub(super) fn answered(self, answer: Option<&ModelInferResponse>) {
        let size =
            |a: &ModelInferResponse| a.raw_output_contents.iter().map(|r| r.len()).sum::<usize>();
        let kept = answer.filter(|a| size(a) <= self.max_bytes).cloned();
        // The task may be gone already (its own call timed out and the
        // runtime stopped): nothing to tell.
        let _ = self.primary.send(kept);
    }
}
