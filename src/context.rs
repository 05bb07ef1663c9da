//! The context of one request: made once by the front that accepted the
//! request and passed down, explicitly, to every upstream call made for
//! it. It carries the trace context those calls propagate, and collects
//! what they spent upstream (for the access log, the request's span and
//! the gateway-time metric) and where the routes sent it (the access
//! log's group and rule). A clone is the same request: its calls add
//! to the one record (a call spawned for a request that outlives the
//! front's own part of it, like a streamed answer's).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::FrontKind;
use crate::trace::TraceContext;

/// What a request tells the routes about itself (`app::routing`), read
/// once by the front it came through.
#[derive(Debug, Clone, Default)]
pub(crate) struct RouteFacts {
    /// The front (`None`: a call of the gateway's own, for no client).
    pub(crate) front: Option<FrontKind>,
    /// The values of the headers (gRPC: metadata keys) the rules read,
    /// in the order `Routing::headers` lists them.
    pub(crate) headers: Vec<Option<Bytes>>,
    /// The name of the API key the request carries.
    pub(crate) key_name: Option<Arc<str>>,
}

impl RouteFacts {
    /// The facts of a request through `front`.
    pub(crate) fn of(front: FrontKind) -> RouteFacts {
        RouteFacts {
            front: Some(front),
            ..RouteFacts::default()
        }
    }
}

/// Where the routes sent a request's first call (`app::routing`): its
/// group, and the rule that matched (`None`: none did).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RouteNote {
    pub group: Option<Arc<str>>,
    pub rule: Option<Arc<str>>,
}

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
    /// What the routes match on (`app::routing`).
    facts: RouteFacts,
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
    route: RouteNote,
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

    /// The request with what its front read for the routes.
    pub(crate) fn with_facts(mut self, facts: RouteFacts) -> RequestContext {
        self.facts = facts;
        self
    }

    /// Another request with the same trace and facts (a request of the
    /// same stream): its own record.
    pub(crate) fn another(&self) -> RequestContext {
        RequestContext {
            trace: self.trace.clone(),
            facts: self.facts.clone(),
            upstream: Arc::default(),
        }
    }

    /// What its front read for the routes, once the request is admitted.
    pub(crate) fn set_facts(&mut self, facts: RouteFacts) {
        self.facts = facts;
    }

    /// What the routes match on.
    pub(crate) fn facts(&self) -> &RouteFacts {
        &self.facts
    }

    /// The request was routed to `group` by `rule`: kept for the first
    /// call routed (a request's later calls follow its first).
    pub(crate) fn routed(&self, group: &Arc<str>, rule: Option<&Arc<str>>) {
        if let Ok(mut record) = self.upstream.lock() {
            if record.route.group.is_none() {
                record.route = RouteNote {
                    group: Some(group.clone()),
                    rule: rule.cloned(),
                };
            }
        }
    }

    /// Where the request was routed, if it was.
    pub(crate) fn route_note(&self) -> RouteNote {
        match self.upstream.lock() {
            Ok(record) => record.route.clone(),
            Err(_) => RouteNote::default(),
        }
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
