//! One upstream call: pick a backend, enforce the deadline on our side
//! (a hung backend cannot hold a request past it), record transport
//! failures for passive ejection, and retry on another backend only when
//! the failed attempt provably never reached the first one (connection
//! refused, stream refused). Sequence requests are never retried.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::backend::Lease;
use super::pool::{Pool, Target};
use super::Client;
use crate::error::{Error, Kind, Result};

impl Pool {
    /// Calls `rpc(client, remaining deadline)` on a backend chosen for
    /// `target`. `deadline` defaults to (and is capped by) the configured
    /// request timeout.
    pub async fn call<T, F, Fut>(
        &self,
        target: &Target<'_>,
        deadline: Option<Duration>,
        rpc: F,
    ) -> Result<T>
    where
        F: Fn(Client, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.started().await;
        let deadline = self.deadline(deadline);
        let start = Instant::now();
        let attempts = if target.sequence.is_some() {
            1
        } else {
            self.settings().max_attempts
        };
        let mut tried: Vec<SocketAddr> = Vec::new();
        loop {
            let lease = self.pick(target, &tried)?;
            let remaining = deadline.saturating_sub(start.elapsed());
            match self.call_on(&lease, remaining, &rpc).await {
                Err(Attempt::NeverReached(error)) if tried.len() + 1 < attempts => {
                    tracing::debug!(backend = %lease.addr(), error = %error, "attempt never reached the backend; retrying elsewhere");
                    tried.push(lease.addr());
                }
                Err(attempt) => return Err(attempt.into_error()),
                Ok(value) => return Ok(value),
            }
        }
    }

    /// One attempt on a chosen backend, with passive health accounting.
    pub async fn call_on<T, F, Fut>(
        &self,
        lease: &Lease,
        remaining: Duration,
        rpc: &F,
    ) -> Result<T, Attempt>
    where
        F: Fn(Client, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let backend = lease.backend();
        let started = Instant::now();
        let result = tokio::time::timeout(remaining, rpc(lease.client(), remaining)).await;
        let (outcome, answer) = match result {
            Err(_) => {
                let error = Error::new(
                    Kind::UpstreamTimeout,
                    format!(
                        "upstream {} did not answer within {} ms",
                        backend.addr,
                        remaining.as_millis()
                    ),
                );
                ("timeout", Err(Attempt::Failed(error)))
            }
            Ok(Ok(response)) => ("ok", Ok(response.into_inner())),
            Ok(Err(status)) => {
                let mut error = Error::from_status(&status);
                let outcome = match error.kind {
                    Kind::UpstreamUnreachable => "unreachable",
                    Kind::UpstreamTimeout => "timeout",
                    _ => "error",
                };
                if outcome != "error" {
                    error.message = format!("{} (backend {})", error.message, backend.addr);
                }
                if never_reached(&status) {
                    (outcome, Err(Attempt::NeverReached(error)))
                } else {
                    (outcome, Err(Attempt::Failed(error)))
                }
            }
        };
        self.metrics()
            .upstream_call(backend, outcome, started.elapsed());
        if matches!(outcome, "timeout" | "unreachable") {
            let settings = self.settings();
            if backend.record_failure(settings.eject_after_failures, settings.eject) {
                self.metrics()
                    .ejections
                    .with_label_values(&[&backend.label])
                    .inc();
            }
        } else {
            backend.record_success();
        }
        answer
    }

    /// The request's own deadline, capped by the configured one.
    pub fn deadline(&self, requested: Option<Duration>) -> Duration {
        let cap = self.settings().request_timeout;
        requested.map_or(cap, |d| d.min(cap))
    }
}

/// A tonic request carrying the deadline (sent as `grpc-timeout`, so the
/// backend can give up too).
pub fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    crate::trace::TraceContext::inject(&mut request);
    request
}

/// `rpc!(pool, target, method, message)`: one unary RPC through
/// [`Pool::call`], the message cloned per attempt (tensor bytes are
/// `Bytes`: a clone is a reference count).
macro_rules! rpc {
    ($pool:expr, $target:expr, $method:ident, $message:expr) => {
        rpc!($pool, $target, None, $method, $message)
    };
    ($pool:expr, $target:expr, $deadline:expr, $method:ident, $message:expr) => {{
        let message = $message;
        $pool
            .call(&$target, $deadline, |mut client, timeout| {
                let message = message.clone();
                async move {
                    client
                        .$method($crate::upstream::call::request(message, timeout))
                        .await
                }
            })
            .await
    }};
}
pub(crate) use rpc;

/// How one attempt failed.
#[derive(Debug)]
pub enum Attempt {
    /// The request provably did not reach the backend: safe to retry.
    NeverReached(Error),
    Failed(Error),
}

impl Attempt {
    pub fn into_error(self) -> Error {
        match self {
            Attempt::NeverReached(e) | Attempt::Failed(e) => e,
        }
    }
}

/// Connection refused (nothing listens) or the stream refused by HTTP/2
/// (`REFUSED_STREAM`: the server guarantees it did no work).
pub fn never_reached(status: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            if h2.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return true;
            }
        }
        source = err.source();
    }
    false
}
