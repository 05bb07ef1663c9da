//! The context of one request: made once by the front that accepted the
//! request and passed down, explicitly, to every upstream call made for
//! it. It carries the trace context those calls propagate, and collects
//! what they spent upstream (for the access log, the request's span and
//! the gateway-time metric).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use crate::trace::TraceContext;

/// What a request spent upstream: time summed over its calls and their
/// attempts, and the last backend that answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpstreamUse {
    pub time: Duration,
    pub backend: Option<SocketAddr>,
}

/// One request's context (see the module documentation).
#[derive(Debug, Default)]
pub struct RequestContext {
    trace: Option<TraceContext>,
    /// Written once per upstream attempt, read once at the answer: a lock
    /// nobody waits on (a request's calls run one after the other, or
    /// side by side in a fan-out).
    upstream: Mutex<UpstreamUse>,
}

impl RequestContext {
    /// A request whose upstream calls carry `trace`.
    pub fn traced(trace: TraceContext) -> RequestContext {
        RequestContext {
            trace: Some(trace),
            ..RequestContext::default()
        }
    }

    /// A request that carries `trace`, if any (a call spawned for a
    /// request, which outlives the request's own context).
    pub fn with_trace(trace: Option<TraceContext>) -> RequestContext {
        RequestContext {
            trace,
            ..RequestContext::default()
        }
    }

    /// A request with no trace of its own to propagate (a gRPC call, whose
    /// metadata already crosses as it came; the gateway's own calls).
    pub fn untraced() -> RequestContext {
        RequestContext::default()
    }

    pub fn trace(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// One upstream attempt on `backend` took `took`.
    pub fn upstream_attempt(&self, backend: SocketAddr, took: Duration) {
        if let Ok(mut used) = self.upstream.lock() {
            used.time += took;
            used.backend = Some(backend);
        }
    }

    /// What the request's upstream calls spent so far.
    pub fn upstream_use(&self) -> UpstreamUse {
        self.upstream.lock().map(|used| *used).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_add_up_and_the_last_backend_is_kept() {
        let ctx = RequestContext::untraced();
        assert_eq!(ctx.upstream_use(), UpstreamUse::default());
        let (a, b) = (
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        ctx.upstream_attempt(a, Duration::from_millis(3));
        ctx.upstream_attempt(b, Duration::from_millis(4));
        let used = ctx.upstream_use();
        assert_eq!(used.time, Duration::from_millis(7));
        assert_eq!(used.backend, Some(b));
        assert!(ctx.trace().is_none());
    }
}
