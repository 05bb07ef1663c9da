//! The context of one request: made once by the front that accepted the
//! request and passed down, explicitly, to every upstream call made for
//! it. It carries the trace context those calls propagate, and collects
//! what they spent upstream (for the access log, the request's span and
//! the gateway-time metric). A clone is the same request: its calls add
//! to the one record (a call spawned for a request that outlives the
//! front's own part of it, like a streamed answer's).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::trace::TraceContext;

/// What a request spent upstream: time summed over its calls and their
/// attempts, and the last backend that answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UpstreamUse {
    pub time: Duration,
    pub backend: Option<SocketAddr>,
}

/// One request's context (see the module documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct RequestContext {
    trace: Option<TraceContext>,
    /// Written twice per upstream attempt, read once at the answer: a lock
    /// nobody waits on (a request's calls run one after the other, or
    /// side by side in a fan-out).
    upstream: Arc<Mutex<Record>>,
}

/// One running attempt of a request (see
/// [`RequestContext::attempt_started`]).
#[derive(Debug)]
pub(crate) struct AttemptClock {
    record: Arc<Mutex<Record>>,
    backend: SocketAddr,
    started: Instant,
}

impl AttemptClock {
    /// How long the attempt has run so far.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The attempt ended: its time is the request's.
    pub(crate) fn ended(self) -> Duration {
        let took = self.started.elapsed();
        if let Ok(mut record) = self.record.lock() {
            record.ended.time += took;
            record.ended.backend = Some(self.backend);
        }
        took
    }
}

impl Drop for AttemptClock {
    fn drop(&mut self) {
        if let Ok(mut record) = self.record.lock() {
            if let Some(at) = record.running.iter().position(|s| *s == self.started) {
                record.running.swap_remove(at);
            }
        }
    }
}

/// What the attempts spent: those that ended, and the start of each one
/// still running.
#[derive(Debug, Default)]
struct Record {
    ended: UpstreamUse,
    running: Vec<Instant>,
}

impl RequestContext {
    /// A request whose upstream calls carry `trace`.
    pub(crate) fn traced(trace: TraceContext) -> RequestContext {
        RequestContext {
            trace: Some(trace),
            ..RequestContext::default()
        }
    }

    /// A request with no trace of its own to propagate (a gRPC call, whose
    /// metadata already crosses as it came; the gateway's own calls).
    pub(crate) fn untraced() -> RequestContext {
        RequestContext::default()
    }

    pub(crate) fn trace(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    /// An upstream attempt on `backend` starts now; it counts as running
    /// until [`AttemptClock::ended`] adds its time (dropped unended, as
    /// when its call is cancelled, it stops counting).
    pub(crate) fn attempt_started(&self, backend: SocketAddr) -> AttemptClock {
        let started = Instant::now();
        if let Ok(mut record) = self.upstream.lock() {
            record.ended.backend = Some(backend);
            record.running.push(started);
        }
        AttemptClock {
            record: self.upstream.clone(),
            backend,
            started,
        }
    }

    /// What the request's upstream calls spent so far, an attempt still
    /// running counted up to now (a streamed answer is logged at its
    /// head, while its call still runs).
    pub(crate) fn upstream_use(&self) -> UpstreamUse {
        let Ok(record) = self.upstream.lock() else {
            return UpstreamUse::default();
        };
        let running: Duration = record.running.iter().map(Instant::elapsed).sum();
        UpstreamUse {
            time: record.ended.time + running,
            backend: record.ended.backend,
        }
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
        let first = ctx.attempt_started(a);
        std::thread::sleep(Duration::from_millis(3));
        first.ended();
        let ended = ctx.upstream_use();
        assert!(ended.time >= Duration::from_millis(3));
        assert_eq!(ended.backend, Some(a));
        // A clone is the same request; a running attempt counts so far.
        let spawned = ctx.clone();
        let running = spawned.attempt_started(b);
        std::thread::sleep(Duration::from_millis(4));
        let used = ctx.upstream_use();
        assert!(used.time >= ended.time + Duration::from_millis(4));
        assert_eq!(used.backend, Some(b));
        // Cancelled: it no longer counts.
        drop(running);
        assert_eq!(ctx.upstream_use().time, ended.time);
        assert!(ctx.trace().is_none());
    }
}
