//! A gRPC stream call (`ModelStreamInfer`): one backend for the stream's
//! life, chosen as for any call ([`Pool::pick`]), its lease held — the
//! backend counts it in flight — until the stream is dropped. The stream
//! is accounted as one call of the pool ([`Pool::attempt_succeeded`],
//! [`Pool::attempt_failed`]): its clean end as a success; a failure when it
//! opens or in the middle (a reset, its deadline passing) in the call
//! metrics and, when it blames the backend, toward the backend's passive
//! ejection, exactly as a unary call's; dropped by its caller before its
//! end (the client went away), it counts as `cancelled`.
//!
//! A stream is opened once, never retried: its requests are the caller's
//! and may already be on their way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tonic::{Status, Streaming};

use super::backend::Lease;
use super::call::{cancelled, Deadline, Failure};
use super::pool::{Pool, Target};
use crate::context::{AttemptClock, RequestContext};
use crate::error::Result;

/// One open stream: its replies, read with [`StreamCall::next`].
pub(crate) struct StreamCall<T> {
    pool: Arc<Pool>,
    lease: Lease,
    /// `None` once the stream ended (and was accounted).
    clock: Option<AttemptClock>,
    /// Bounds the whole stream (`None`: unbounded).
    deadline: Option<Deadline>,
    replies: Streaming<T>,
}

impl Pool {
    /// Opens a stream with `open(lease, remaining deadline)` on a backend
    /// chosen for `target`, within `deadline`, which then bounds the whole
    /// stream.
    pub(crate) async fn open_stream<T, F, Fut>(
        self: &Arc<Self>,
        ctx: &RequestContext,
        target: &Target<'_>,
        deadline: Option<Deadline>,
        open: F,
    ) -> Result<StreamCall<T>>
    where
        F: FnOnce(&Lease, Option<Duration>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Streaming<T>>, Status>>,
    {
        self.started().await;
        let lease = self.pick(target, &[])?;
        let backend = lease.backend().clone();
        let clock = ctx.attempt_started(backend.addr);
        let remaining = deadline.map(|d| d.remaining());
        let opened = match remaining {
            Some(remaining) => tokio::time::timeout(remaining, open(&lease, Some(remaining)))
                .await
                .map_err(|_| Failure::TimedOut)
                .and_then(|opened| opened.map_err(Failure::Status)),
            None => open(&lease, None).await.map_err(Failure::Status),
        };
        match opened {
            Ok(response) => Ok(StreamCall {
                pool: self.clone(),
                lease,
                clock: Some(clock),
                deadline,
                replies: response.into_inner(),
            }),
            Err(failure) => Err(self
                .attempt_failed(&backend, clock, deadline.as_ref(), failure)
                .into_error()),
        }
    }
}

impl<T> StreamCall<T> {
    /// The next reply; `Ok(None)` at the end of the stream (and after it
    /// failed). A broken stream, or its deadline passing, fails it.
    pub(crate) async fn next(&mut self) -> Result<Option<T>> {
        if self.clock.is_none() {
            return Ok(None);
        }
        let next = match self.deadline {
            Some(deadline) => {
                tokio::time::timeout(deadline.remaining(), self.replies.message()).await
            }
            None => Ok(self.replies.message().await),
        };
        let failure = match next {
            Ok(Ok(Some(reply))) => return Ok(Some(reply)),
            Ok(Ok(None)) => {
                if let Some(clock) = self.clock.take() {
                    self.pool.attempt_succeeded(self.lease.backend(), clock);
                }
                return Ok(None);
            }
            Ok(Err(status)) => Failure::Status(status),
            Err(_) => Failure::TimedOut,
        };
        let Some(clock) = self.clock.take() else {
            return Ok(None);
        };
        let attempt =
            self.pool
                .attempt_failed(self.lease.backend(), clock, self.deadline.as_ref(), failure);
        Err(attempt.into_error())
    }
}

impl<T> Drop for StreamCall<T> {
    fn drop(&mut self) {
        if let Some(clock) = self.clock.take() {
            cancelled(&self.pool, self.lease.backend(), clock);
        }
    }
}
