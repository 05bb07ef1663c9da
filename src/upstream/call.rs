//! One upstream call: pick a backend, enforce the deadline on our side
//! (a hung backend cannot hold a request past it), record transport
//! failures for passive ejection, and retry on another backend only when
//! the failed attempt provably never reached the first one (connection
//! refused, stream refused). Sequence requests are never retried.
//!
//! Two entries: [`Pool::call`] (backend choice, retries, the memory of
//! missing optional RPCs) and [`Pool::call_on`] (one attempt on a backend
//! already leased); the RPC itself is a closure of the lease, so the same
//! entries serve generated clients and raw calls (`raw`).

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::backend::{Backend, Lease, OptionalRpc};
use super::pool::{Pool, Target};
use crate::context::{AttemptClock, RequestContext};
use crate::error::{causes, duration_text, failure_text, Error, Kind, Result};
use crate::trace::TraceContext;

/// The deadline of one call: its length, when it started, and whether
/// the client chose it (`grpc-timeout` on the passthrough,
/// shorter than `upstream.request_timeout_ms`). A passed client deadline
/// says nothing about the backend: it never counts toward ejection.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// The whole deadline (what the 504 text names).
    pub length: Duration,
    pub client_chosen: bool,
    start: Instant,
}

impl Deadline {
    /// The gateway's own deadline (its passing counts against a backend).
    pub fn configured(length: Duration) -> Deadline {
        Deadline {
            length,
            client_chosen: false,
            start: Instant::now(),
        }
    }

    /// A deadline the client chose, starting now.
    pub fn client(length: Duration) -> Deadline {
        Deadline {
            client_chosen: true,
            ..Deadline::configured(length)
        }
    }

    pub fn remaining(&self) -> Duration {
        self.length.saturating_sub(self.start.elapsed())
    }

    /// Whether a failed attempt says something about the backend: a refused
    /// or reset connection, or the gateway's own deadline passing. Not the
    /// client's deadline passing, nor a stream reset once it has passed
    /// (the upstream gave up on the client's deadline). An attempt that
    /// never reached the backend always counts.
    pub fn blames_backend(&self, kind: Kind, never_reached: bool) -> bool {
        match kind {
            _ if never_reached => true,
            Kind::UpstreamTimeout => !self.client_chosen,
            Kind::UpstreamUnreachable => !(self.client_chosen && self.remaining().is_zero()),
            _ => false,
        }
    }

    /// Why an attempt that blames the backend failed, for operators: the
    /// transport's cause, or the deadline passing.
    pub fn failure(&self, kind: Kind, status: Option<&tonic::Status>) -> String {
        match status {
            Some(status) if kind != Kind::UpstreamTimeout => failure_text(status),
            _ => format!("no answer within {}", duration_text(self.length)),
        }
    }
}

impl From<Duration> for Deadline {
    fn from(length: Duration) -> Deadline {
        Deadline::configured(length)
    }
}

/// What a call needs besides its RPC: where it may go, how long it may
/// take, and whether its RPC is one a server may lack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSpec<'a> {
    /// Which backends may take it.
    pub target: Target<'a>,
    /// The client's deadline (`None`: the configured request timeout,
    /// which also caps it).
    pub deadline: Option<Duration>,
    /// `Some` for an RPC a server may lack ([`OptionalRpc`]; for the
    /// gateway's own calls the request type says, `Rpc::OPTIONAL`): backends
    /// known to lack it are not called, one that answers `UNIMPLEMENTED` is
    /// remembered to lack it, and either way the call fails with
    /// [`Error::missing_rpc`].
    pub optional: Option<OptionalRpc>,
}

impl Pool {
    /// The one call: `rpc(lease, remaining deadline)` on a backend chosen
    /// for `spec.target` (`rpc` picks the lease's generated client or its
    /// raw transport), within `spec.deadline`, retried on another backend
    /// only when an attempt never reached its own (never for a sequence).
    pub(crate) async fn call<T, F, Fut>(
        &self,
        ctx: &RequestContext,
        spec: &CallSpec<'_>,
        rpc: F,
    ) -> Result<T>
    where
        F: Fn(&Lease, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.started().await;
        let CallSpec {
            target,
            deadline,
            optional,
        } = *spec;
        let deadline = self.deadline(deadline);
        let attempts = if target.sequence.is_some() {
            1
        } else {
            self.settings().max_attempts
        };
        // Not picked: backends known to lack the RPC, then those tried.
        let lacking = optional.map_or_else(Vec::new, |rpc| self.lacking(rpc));
        let mut skipped = lacking.clone();
        let mut tried = 0;
        loop {
            let lease = match self.pick(&target, &skipped) {
                Ok(lease) => lease,
                Err(error) => {
                    return Err(match (optional, lacking.first()) {
                        (Some(rpc), Some(addr)) => Error::missing_rpc(rpc.name(), *addr),
                        _ => error,
                    })
                }
            };
            match self.call_on(ctx, &lease, deadline, &rpc).await {
                Err(Attempt::NeverReached(error)) if tried + 1 < attempts => {
                    tracing::debug!(backend = %lease.addr(), error = %error, "attempt never reached the backend; retrying elsewhere");
                    skipped.push(lease.addr());
                    tried += 1;
                }
                Err(Attempt::Failed(error)) if error.kind == Kind::Unsupported => {
                    let Some(rpc) = optional else {
                        return Err(error);
                    };
                    lease.backend().record_missing(rpc);
                    return Err(Error::missing_rpc(rpc.name(), lease.addr()));
                }
                Err(attempt) => return Err(attempt.into_error()),
                Ok(value) => return Ok(value),
            }
        }
    }

    /// One attempt of `rpc(lease, remaining deadline)` on every usable
    /// backend at once (repository control's fan-out), each in a task of
    /// its own within `deadline` (`None`: the configured one), each
    /// backend then asked at once for its models, so model-aware routing
    /// follows without waiting for the next refresh. The outcomes by
    /// backend address, in address order; the "no backend" answer when
    /// none is usable.
    pub(crate) async fn call_each<F, Fut>(
        self: &std::sync::Arc<Self>,
        ctx: &RequestContext,
        deadline: Option<Duration>,
        rpc: F,
    ) -> Result<Vec<(SocketAddr, Result<()>)>>
    where
        F: Fn(&Lease, Duration) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<tonic::Response<()>, tonic::Status>> + Send,
    {
        self.started().await;
        let leases = self.leases_all();
        if leases.is_empty() {
            return Err(self
                .pick(&Target::default(), &[])
                .err()
                .unwrap_or_else(|| Error::internal("no backend for the call")));
        }
        let mut tasks = tokio::task::JoinSet::new();
        for lease in leases {
            let (pool, ctx, rpc) = (self.clone(), ctx.clone(), rpc.clone());
            tasks.spawn(async move {
                let deadline = pool.deadline(deadline);
                let result = pool.call_on(&ctx, &lease, deadline, rpc).await;
                let timeout = pool.settings().health_timeout;
                super::health::refresh_models(lease.backend(), timeout).await;
                (lease.addr(), result.map(drop).map_err(Attempt::into_error))
            });
        }
        let mut outcomes = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            outcomes
                .push(joined.map_err(|e| Error::internal(format!("fan-out task failed: {e}")))?);
        }
        outcomes.sort_by_key(|(addr, _)| *addr);
        Ok(outcomes)
    }

    /// The backends known to lack `rpc`.
    fn lacking(&self, rpc: OptionalRpc) -> Vec<SocketAddr> {
        self.backends()
            .iter()
            .filter(|b| b.lacks(rpc))
            .map(|b| b.addr)
            .collect()
    }

    /// One attempt of `rpc(lease, remaining deadline)` on an already
    /// leased backend, within what is left of `deadline` (a bare
    /// `Duration` is the gateway's own), with passive health accounting
    /// and the call's metrics ([`Pool::attempt_succeeded`],
    /// [`Pool::attempt_failed`]); its time is added
    /// to `ctx`. An attempt dropped before it ends (its request's client
    /// went away) is counted as `cancelled`.
    pub(super) async fn call_on<T, F, Fut>(
        &self,
        ctx: &RequestContext,
        lease: &Lease,
        deadline: impl Into<Deadline>,
        rpc: F,
    ) -> Result<T, Attempt>
    where
        F: FnOnce(&Lease, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let deadline = deadline.into();
        let backend = lease.backend();
        let running = Running::new(self, backend, ctx.attempt_started(backend.addr));
        let remaining = deadline.remaining();
        let result = tokio::time::timeout(remaining, rpc(lease, remaining)).await;
        match result {
            Ok(Ok(response)) => {
                running.succeeded();
                Ok(response.into_inner())
            }
            Ok(Err(status)) => Err(running.failed(Some(&deadline), Failure::Status(status))),
            Err(_) => Err(running.failed(Some(&deadline), Failure::TimedOut)),
        }
    }

    /// Accounts for an attempt on `backend` that succeeded: the call
    /// metrics, its time into its request's context (`clock`), and the
    /// backend's passive health (it answered). Every call ends here or in
    /// [`Pool::attempt_failed`]: unary attempts and streams alike.
    pub(super) fn attempt_succeeded(&self, backend: &Backend, clock: AttemptClock) {
        let took = clock.ended();
        self.metrics().upstream_call(&backend.label, "ok", took);
        backend.record_success();
    }

    /// Accounts for an attempt on `backend` that failed: the call metrics
    /// by outcome, its time, and the backend's passive health — a failure
    /// that blames the backend (under `deadline`, see
    /// [`Deadline::blames_backend`]; without one, a transport failure or
    /// a timeout) counts toward its ejection and is its `last_error`; an
    /// error the server answered shows it is there.
    pub(super) fn attempt_failed(
        &self,
        backend: &Backend,
        clock: AttemptClock,
        deadline: Option<&Deadline>,
        failure: Failure,
    ) -> Attempt {
        let finished = |outcome: &str| {
            let took = clock.ended();
            self.metrics().upstream_call(&backend.label, outcome, took);
        };
        let (error, unreached, cause) = match failure {
            Failure::TimedOut => {
                let length = deadline.map_or(Duration::ZERO, |d| d.length);
                (Error::deadline_passed(backend.addr, length), false, None)
            }
            Failure::Status(status) => {
                let error = match deadline {
                    Some(deadline) => Error::from_upstream(&status, backend.addr, deadline.length),
                    None => Error::from_status(&status),
                };
                (error, never_reached(&status), Some(status))
            }
        };
        let outcome = match error.kind {
            Kind::UpstreamUnreachable => "unreachable",
            Kind::UpstreamTimeout => "timeout",
            _ => "error",
        };
        finished(outcome);
        let blamed = match deadline {
            Some(deadline) => deadline.blames_backend(error.kind, unreached),
            // No deadline of ours: a timeout is the upstream's own.
            None => {
                unreached
                    || matches!(
                        error.kind,
                        Kind::UpstreamUnreachable | Kind::UpstreamTimeout
                    )
            }
        };
        if blamed {
            let why = match (deadline, &cause) {
                (Some(deadline), cause) => deadline.failure(error.kind, cause.as_ref()),
                (None, Some(status)) => failure_text(status),
                (None, None) => "no answer".to_string(),
            };
            let settings = self.settings();
            if backend.record_failure(settings.eject_after_failures, settings.eject, why) {
                self.metrics()
                    .ejections
                    .with_label_values(&[&backend.label])
                    .inc();
            }
        } else if outcome == "error" {
            // The server answered (an error of its own): it is there.
            backend.record_success();
        }
        if unreached {
            Attempt::NeverReached(error)
        } else {
            Attempt::Failed(error)
        }
    }

    /// The request's own deadline, capped by the configured one; the
    /// client's when it is the shorter.
    pub fn deadline(&self, requested: Option<Duration>) -> Deadline {
        let cap = self.settings().request_timeout;
        match requested {
            Some(d) if d < cap => Deadline::client(d),
            _ => Deadline::configured(cap),
        }
    }
}

/// How an attempt failed, for [`Pool::attempt_failed`].
#[derive(Debug)]
pub(super) enum Failure {
    /// Its deadline passed before it ended.
    TimedOut,
    /// The transport or the backend failed it.
    Status(tonic::Status),
}

/// An attempt under way: ended through [`Running::succeeded`] or
/// [`Running::failed`], or dropped
/// unended (its caller went away), which counts it as `cancelled` (no
/// verdict on the backend; its time stops counting).
pub(super) struct Running<'p> {
    pool: &'p Pool,
    backend: &'p Backend,
    clock: Option<AttemptClock>,
}

impl<'p> Running<'p> {
    pub(super) fn new(pool: &'p Pool, backend: &'p Backend, clock: AttemptClock) -> Running<'p> {
        Running {
            pool,
            backend,
            clock: Some(clock),
        }
    }

    /// The attempt succeeded ([`Pool::attempt_succeeded`]).
    pub(super) fn succeeded(mut self) {
        if let Some(clock) = self.clock.take() {
            self.pool.attempt_succeeded(self.backend, clock);
        }
    }

    /// The attempt failed ([`Pool::attempt_failed`]).
    pub(super) fn failed(mut self, deadline: Option<&Deadline>, failure: Failure) -> Attempt {
        match self.clock.take() {
            Some(clock) => self
                .pool
                .attempt_failed(self.backend, clock, deadline, failure),
            // Not reached: `succeeded` and `failed` take the attempt.
            None => Attempt::Failed(Error::internal("an attempt ended twice")),
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(clock) = self.clock.take() {
            cancelled(self.pool, self.backend, clock);
        }
    }
}

/// An attempt whose caller dropped it before it ended.
pub(super) fn cancelled(pool: &Pool, backend: &Backend, clock: AttemptClock) {
    let took = clock.elapsed();
    pool.metrics()
        .upstream_call(&backend.label, "cancelled", took);
}

/// A tonic request carrying the deadline (sent as `grpc-timeout`, so the
/// backend can give up too) and the request's trace context, if any.
pub(crate) fn request<T>(
    message: T,
    timeout: Duration,
    trace: Option<&TraceContext>,
) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    if let Some(trace) = trace {
        trace.inject(request.metadata_mut());
    }
    request
}

/// How one attempt failed.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// The request provably did not reach the backend: safe to retry.
    NeverReached(Error),
    Failed(Error),
}

impl Attempt {
    /// The failure, whichever way it went.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Attempt::NeverReached(e) | Attempt::Failed(e) => e,
        }
    }
}

/// Connection refused (nothing listens) or the stream refused by HTTP/2
/// (`REFUSED_STREAM`: the server guarantees it did no work).
pub(crate) fn never_reached(status: &tonic::Status) -> bool {
    causes(status).any(|err| {
        err.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
            || err
                .downcast_ref::<h2::Error>()
                .is_some_and(|h2| h2.reason() == Some(h2::Reason::REFUSED_STREAM))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::Metrics;
    use crate::upstream::UpstreamSettings;

    #[test]
    fn only_the_gateways_deadline_is_blamed_on_the_backend() {
        let long = Duration::from_secs(60);
        let ours = Deadline::configured(long);
        assert!(ours.blames_backend(Kind::UpstreamTimeout, false));
        assert!(ours.blames_backend(Kind::UpstreamUnreachable, false));
        assert!(!ours.blames_backend(Kind::NotFound, false));
        let client = Deadline::client(long);
        assert!(!client.blames_backend(Kind::UpstreamTimeout, false));
        assert!(client.blames_backend(Kind::UpstreamUnreachable, false));
        // Once the client's deadline passed, a reset is the upstream
        // giving up on it; a refused connection still counts.
        let passed = Deadline::client(Duration::ZERO);
        assert!(!passed.blames_backend(Kind::UpstreamUnreachable, false));
        assert!(passed.blames_backend(Kind::UpstreamUnreachable, true));
    }

    #[tokio::test]
    async fn a_shorter_deadline_is_the_clients() {
        let pool = Pool::new(UpstreamSettings::for_tests(), Arc::new(Metrics::new()));
        let cap = pool.settings().request_timeout;
        let chosen = |d| pool.deadline(d).client_chosen;
        assert!(chosen(Some(Duration::from_micros(5))));
        assert!(!chosen(Some(cap)));
        assert!(!chosen(Some(cap * 2)));
        assert!(!chosen(None));
        assert_eq!(pool.deadline(Some(cap * 2)).length, cap);
    }

    #[test]
    fn failures_are_described_by_their_cause() {
        // As the OS words it.
        let refused = tonic::Status::from_error(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        )));
        assert_eq!(failure_text(&refused), "connection refused");
        let reset = tonic::Status::from_error(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert_eq!(failure_text(&reset), "connection reset");
        assert_eq!(
            failure_text(&tonic::Status::internal("as the server said")),
            "as the server said"
        );
        let timeout = Deadline::configured(Duration::from_millis(250));
        assert_eq!(
            timeout.failure(Kind::UpstreamTimeout, Some(&refused)),
            "no answer within 250 ms"
        );
    }
}
