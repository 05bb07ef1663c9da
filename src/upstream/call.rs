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
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backend::{Backend, Lease, OptionalRpc};
use tonic::body::Body;
use tonic::Status;

use super::pool::{Pool, Target};
use super::raw::{carried_status, RawReply, GRPC_STATUS};
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
        let at_once = |value, running: Running<'_>, _lease| {
            running.succeeded();
            value
        };
        self.call_then(ctx, spec, rpc, at_once).await
    }

    /// [`Pool::call`], the end of a successful attempt left to `then`,
    /// given the attempt and its lease: a value that is whole ends it at
    /// once; a raw reply, whose body is still to come, when its body ends
    /// (`raw::settled`), holding the lease until then.
    pub(crate) async fn call_then<T, F, Fut, G>(
        &self,
        ctx: &RequestContext,
        spec: &CallSpec<'_>,
        rpc: F,
        then: G,
    ) -> Result<T>
    where
        F: Fn(&Lease, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
        G: Fn(T, Running<'_>, Lease) -> T,
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
            let addr = lease.addr();
            match self.call_on(ctx, lease, deadline, &rpc, &then).await {
                Err(Attempt::NeverReached(error)) if tried + 1 < attempts => {
                    tracing::debug!(backend = %addr, error = %error, "attempt never reached the backend; retrying elsewhere");
                    skipped.push(addr);
                    tried += 1;
                }
                Err(Attempt::Failed(error)) if error.kind == Kind::Unsupported => {
                    let Some(rpc) = optional else {
                        return Err(error);
                    };
                    if let Some(backend) = self.backend(&addr) {
                        backend.record_missing(rpc);
                    }
                    return Err(Error::missing_rpc(rpc.name(), addr));
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
                let (addr, backend) = (lease.addr(), lease.backend().clone());
                let at_once = |(), running: Running<'_>, _lease| running.succeeded();
                let result = pool.call_on(&ctx, lease, deadline, rpc, at_once).await;
                let timeout = pool.settings().health_timeout;
                super::health::refresh_models(&backend, timeout).await;
                (addr, result.map_err(Attempt::into_error))
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
    /// to `ctx`; a successful one ends as `then` says (`call_then`). An
    /// attempt dropped before it ends (its request's client went away) is
    /// counted as `cancelled`.
    pub(super) async fn call_on<T, F, Fut, G>(
        &self,
        ctx: &RequestContext,
        lease: Lease,
        deadline: impl Into<Deadline>,
        rpc: F,
        then: G,
    ) -> Result<T, Attempt>
    where
        F: FnOnce(&Lease, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
        G: FnOnce(T, Running<'_>, Lease) -> T,
    {
        let deadline = deadline.into();
        let backend = lease.backend().clone();
        let clock = ctx.attempt_started(backend.addr);
        let running = Running::new(self, backend, deadline, clock);
        let remaining = deadline.remaining();
        let result = tokio::time::timeout(remaining, rpc(&lease, remaining)).await;
        match result {
            Ok(Ok(response)) => Ok(then(response.into_inner(), running, lease)),
            Ok(Err(status)) => Err(running.failed(Failure::Status(status))),
            Err(_) => Err(running.failed(Failure::TimedOut)),
        }
    }

    /// Accounts for an attempt on `backend` that succeeded: the call
    /// metrics, its time into its request's context (`clock`), and the
    /// backend's passive health (it answered). Every call ends here or in
    /// [`Pool::attempt_failed`]: unary attempts and streams alike.
    pub(super) fn attempt_succeeded(&self, backend: &Backend, clock: AttemptClock) {
        let took = clock.ended();
        self.metrics()
            .upstream_ok(backend.ok_series(), &backend.label, took);
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
/// [`Running::failed`], or dropped unended (its caller went away), which
/// counts it as `cancelled` (no verdict on the backend; its time stops
/// counting). [`Running::settle`] makes it one that ends later, on its own.
pub(crate) struct Running<'p> {
    pool: &'p Pool,
    backend: Arc<Backend>,
    deadline: Deadline,
    clock: Option<AttemptClock>,
}

impl<'p> Running<'p> {
    pub(super) fn new(
        pool: &'p Pool,
        backend: Arc<Backend>,
        deadline: Deadline,
        clock: AttemptClock,
    ) -> Running<'p> {
        Running {
            pool,
            backend,
            deadline,
            clock: Some(clock),
        }
    }

    /// The attempt succeeded ([`Pool::attempt_succeeded`]).
    pub(crate) fn succeeded(mut self) {
        if let Some(clock) = self.clock.take() {
            self.pool.attempt_succeeded(&self.backend, clock);
        }
    }

    /// The attempt failed ([`Pool::attempt_failed`]).
    pub(super) fn failed(mut self, failure: Failure) -> Attempt {
        match self.clock.take() {
            Some(clock) => {
                self.pool
                    .attempt_failed(&self.backend, clock, Some(&self.deadline), failure)
            }
            // Not reached: `succeeded` and `failed` take the attempt.
            None => Attempt::Failed(Error::internal("an attempt ended twice")),
        }
    }

    /// The attempt goes on after its call returned (a raw reply's body is
    /// still to come): it ends with [`Settle`], which holds the lease
    /// until then.
    pub(crate) fn settle(mut self, lease: Lease) -> Settle {
        Settle {
            pool: self.pool.me.upgrade(),
            lease,
            deadline: self.deadline,
            clock: self.clock.take(),
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(clock) = self.clock.take() {
            cancelled(self.pool, &self.backend, clock);
        }
    }
}

/// An attempt that ends after its call returned (a raw reply ends with
/// its body): its lease held, accounted as [`Running`] is when it ends, or
/// as `cancelled` when dropped first.
pub(crate) struct Settle {
    /// `None` only while the pool itself is being dropped.
    pool: Option<Arc<Pool>>,
    lease: Lease,
    deadline: Deadline,
    clock: Option<AttemptClock>,
}

impl Settle {
    /// The attempt succeeded.
    pub(crate) fn succeeded(mut self) {
        if let (Some(pool), Some(clock)) = (&self.pool, self.clock.take()) {
            pool.attempt_succeeded(self.lease.backend(), clock);
        }
    }

    /// The attempt failed: `status` says how (a reset, or the server's
    /// own error in its trailers).
    pub(crate) fn failed(mut self, status: tonic::Status) {
        if let (Some(pool), Some(clock)) = (&self.pool, self.clock.take()) {
            let failure = Failure::Status(status);
            pool.attempt_failed(self.lease.backend(), clock, Some(&self.deadline), failure);
        }
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if let (Some(pool), Some(clock)) = (&self.pool, self.clock.take()) {
            cancelled(pool, self.lease.backend(), clock);
        }
    }
}

/// `reply` with its attempt ending when its body does (`call_then`): the
/// trailers' status says how — OK a success, another code the server's own
/// error — and a body that breaks off (a reset, a connection gone) fails
/// the attempt as a failed unary call fails, blamed on the backend; a
/// reply dropped before its end is `cancelled`. A reply that carries its
/// status in its head ends the attempt at once. The attempt's lease (the
/// backend's in-flight count) lasts until then.
pub(crate) fn settled(reply: RawReply, settle: Settle) -> RawReply {
    if reply.headers().contains_key(GRPC_STATUS) {
        settle.succeeded();
        return reply;
    }
    reply.map(|body| {
        Body::new(Settled {
            body,
            settle: Some(settle),
        })
    })
}

/// A raw reply's body, its attempt settled at its end.
struct Settled {
    body: Body,
    settle: Option<Settle>,
}

impl http_body::Body for Settled {
    type Data = bytes::Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Status>>> {
        let frame = std::task::ready!(std::pin::Pin::new(&mut self.body).poll_frame(cx));
        let ended = match &frame {
            Some(Ok(frame)) => frame.trailers_ref().map(carried_status),
            Some(Err(status)) => Some(Some(Err(status.clone()))),
            None => Some(None),
        };
        // Taken only at the end: a frame before it leaves the attempt on.
        let settle = match ended {
            Some(status) => self.settle.take().map(|settle| (settle, status)),
            None => None,
        };
        match settle {
            Some((settle, Some(Ok(())))) => settle.succeeded(),
            Some((settle, Some(Err(status)))) => settle.failed(status),
            Some((settle, None)) => {
                settle.failed(Status::unknown("the reply ended without a status"))
            }
            None => {}
        }
        std::task::Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
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
    use std::collections::VecDeque;

    use http::HeaderValue;
    use http_body::Body as _;

    use super::*;
    use crate::metrics::Metrics;
    use crate::upstream::UpstreamSettings;

    /// A body of the given frames, then its end.
    struct Frames(VecDeque<Result<http_body::Frame<bytes::Bytes>, Status>>);

    impl http_body::Body for Frames {
        type Data = bytes::Bytes;
        type Error = Status;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Status>>> {
            std::task::Poll::Ready(self.0.pop_front())
        }
    }

    /// How many calls on the pool's one backend ended with `outcome`.
    fn calls(metrics: &Metrics, label: &str, outcome: &str) -> u64 {
        metrics
            .upstream_calls
            .with_label_values(&[label, outcome])
            .get()
    }

    /// A reply with `frames` as its body, settled on a pool of one
    /// backend that one failure ejects; the body read to its end.
    async fn read_settled(
        frames: Vec<Result<http_body::Frame<bytes::Bytes>, Status>>,
    ) -> Arc<Pool> {
        let mut settings = UpstreamSettings::for_tests();
        settings.addresses = vec!["127.0.0.1:9".into()];
        settings.eject_after_failures = 1;
        let pool = Pool::new(settings, Arc::new(Metrics::new()));
        pool.discover().await.expect("a static address");
        pool.backends()[0].mark_seen_ready();
        let lease = pool.pick(&Target::default(), &[]).expect("the backend");
        let ctx = RequestContext::untraced();
        let clock = ctx.attempt_started(lease.addr());
        let deadline = Deadline::configured(Duration::from_secs(60));
        let running = Running::new(&pool, lease.backend().clone(), deadline, clock);
        let reply = http::Response::new(Body::new(Frames(frames.into())));
        let mut body = settled(reply, running.settle(lease)).into_body();
        loop {
            let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx));
            if frame.await.is_none() {
                break;
            }
        }
        assert_eq!(
            pool.backends()[0].inflight(),
            0,
            "the lease lasts as long as the body"
        );
        pool
    }

    #[tokio::test]
    async fn a_relayed_reply_ends_its_attempt_with_its_body() {
        let data = || {
            Ok(http_body::Frame::data(bytes::Bytes::from_static(
                b"\0\0\0\0\0",
            )))
        };
        let mut ok = http::HeaderMap::new();
        ok.insert(GRPC_STATUS, HeaderValue::from_static("0"));
        let pool = read_settled(vec![data(), Ok(http_body::Frame::trailers(ok))]).await;
        let label = pool.backends()[0].label.clone();
        assert_eq!(calls(pool.metrics(), &label, "ok"), 1);
        assert!(pool.backends()[0].usable());

        // A body that breaks off: a failed call, blamed on the backend.
        let reset = tonic::Status::from_error(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        let pool = read_settled(vec![data(), Err(reset)]).await;
        let backend = &pool.backends()[0];
        assert_eq!(calls(pool.metrics(), &backend.label, "unreachable"), 1);
        assert_eq!(calls(pool.metrics(), &backend.label, "ok"), 0);
        assert!(backend.ejected(), "one failure ejects in this pool");

        // The server's own error in the trailers: it answered.
        let mut failed = http::HeaderMap::new();
        failed.insert(GRPC_STATUS, HeaderValue::from_static("3"));
        let pool = read_settled(vec![data(), Ok(http_body::Frame::trailers(failed))]).await;
        let backend = &pool.backends()[0];
        assert_eq!(calls(pool.metrics(), &backend.label, "error"), 1);
        assert!(!backend.ejected());
    }

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
