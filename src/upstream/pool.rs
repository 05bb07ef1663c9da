//! The pool: owns every backend of the upstream group, keeps the membership
//! in step with discovery, and picks a backend for each request. Balancing
//! is per request; `select.rs` holds the algorithms.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use pingora::lb::selection::{BackendIter, BackendSelection, Consistent, RoundRobin};
use pingora::lb::{Backend as LbBackend, Backends, LoadBalancer};

use super::backend::{Backend, Lease};
use super::discovery::{Addresses, Discovery};
use super::health::{self, ReadyCheck};
use super::load_report::{self, LoadReportSettings};
use super::select::{self, Candidates};
use super::UpstreamSettings;
use crate::error::{Error, Kind, Result};
use crate::metrics::Metrics;

/// What a request needs from a backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// The model the request is about (`None`: server-wide).
    pub model: Option<&'a str>,
    /// A non-zero `sequence_id`, rendered as bytes: the sticky key.
    pub sequence: Option<&'a [u8]>,
}

/// The current membership: backends by address, and the Ketama ring over
/// all of them (every gateway replica with the same addresses builds the
/// same ring, so they agree on each sequence's backend without talking).
struct Members {
    by_addr: HashMap<SocketAddr, Arc<Backend>>,
    /// In address order, for the admin view and fan-out.
    ordered: Vec<Arc<Backend>>,
    ring: Arc<Consistent>,
}

pub struct Pool {
    settings: Arc<UpstreamSettings>,
    metrics: Arc<Metrics>,
    lb: LoadBalancer<RoundRobin>,
    members: RwLock<Arc<Members>>,
    picker: select::Picker,
    /// Completed discovery + health passes (waited on by the first requests
    /// and by tests).
    passes: tokio::sync::watch::Sender<u64>,
    /// The background loop is started by the first call, on the runtime
    /// that serves requests.
    started: std::sync::Once,
    pub(super) me: std::sync::Weak<Pool>,
    /// What discovery resolves (replaced by a configuration reload).
    addresses: Addresses,
    /// Set by a reload: the next pass runs discovery at once.
    rediscover: std::sync::atomic::AtomicBool,
    /// Why the latest discovery failed (`None`: it succeeded).
    discovery_error: RwLock<Option<String>>,
}

/// Backends named in one "no backend" answer; the rest are counted (a
/// large group must not make an unreadable error).
const LISTED_BACKENDS_MAX: usize = 5;

impl Pool {
    /// A pool with no members yet: [`Pool::run`] (or [`Pool::discover`]
    /// plus checks) fills it. Backends get traffic once seen ready.
    pub fn new(settings: UpstreamSettings, metrics: Arc<Metrics>) -> Arc<Pool> {
        let settings = Arc::new(settings);
        let addresses = Addresses::new(settings.addresses.clone().into());
        let discovery = Discovery::new(addresses.clone());
        let mut backends = Backends::new(Box::new(discovery));
        let check = ReadyCheck::new(&settings);
        backends.set_health_check(Box::new(health::Shared(check.clone())));
        let lb = LoadBalancer::from_backends(backends);
        let pool = Arc::new_cyclic(|me| Pool {
            picker: select::Picker::new(settings.balance, settings.load_report.is_some()),
            settings,
            metrics,
            lb,
            members: RwLock::new(Arc::new(Members::build(&BTreeSet::new(), None))),
            passes: tokio::sync::watch::Sender::new(0),
            addresses,
            rediscover: std::sync::atomic::AtomicBool::new(false),
            started: std::sync::Once::new(),
            me: me.clone(),
            discovery_error: RwLock::new(None),
        });
        let weak = Arc::downgrade(&pool);
        check.bind(Box::new(move |addr| weak.upgrade()?.backend(addr)));
        pool
    }

    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(super) fn lb(&self) -> &LoadBalancer<RoundRobin> {
        &self.lb
    }

    fn members(&self) -> Arc<Members> {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts the background loop (once, on the current runtime) and waits
    /// for its first pass (at most a connect and a health timeout), so the
    /// first requests see the backends' health instead of an empty pool.
    /// Called at boot by the server (the backends view, the metrics and a
    /// warning per unreachable backend are there before any request), and
    /// by every call (a no-op wait once the first pass is done).
    pub async fn started(&self) {
        self.started.call_once(|| {
            tokio::spawn(Pool::run(self.me.clone()));
            if let Some(reports) = &self.settings.load_report {
                tokio::spawn(Pool::read_reports(self.me.clone(), reports.clone()));
            }
        });
        // Every request asks: after the first pass, no timer and no watch.
        if self.passes() >= 1 {
            return;
        }
        let wait = self.settings.connect_timeout + self.settings.health_timeout;
        let _ = tokio::time::timeout(wait, self.passes_reach(1)).await;
    }

    /// Waits until `n` passes have completed in total.
    pub async fn passes_reach(&self, n: u64) {
        let mut passes = self.passes.subscribe();
        let _ = passes.wait_for(|done| *done >= n).await;
    }

    /// Passes completed so far.
    pub fn passes(&self) -> u64 {
        *self.passes.borrow()
    }

    pub(super) fn pass_done(&self) {
        self.passes.send_modify(|n| *n += 1);
    }

    /// New addresses for the group (a configuration reload): the next pass
    /// resolves them; backends no longer listed drain.
    pub fn set_addresses(&self, addresses: Vec<String>) {
        *self.addresses.write().unwrap_or_else(|e| e.into_inner()) = addresses;
        self.rediscover
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a reload asked for discovery now (clears the request).
    pub(super) fn take_rediscover(&self) -> bool {
        self.rediscover
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// Every backend of the current membership, in address order.
    pub fn backends(&self) -> Vec<Arc<Backend>> {
        self.members().ordered.clone()
    }

    pub fn backend(&self, addr: &SocketAddr) -> Option<Arc<Backend>> {
        self.members().by_addr.get(addr).cloned()
    }

    /// Runs discovery once and records its outcome: a warning when it
    /// starts failing (or fails otherwise), not on every pass.
    pub(super) async fn discover_logged(&self) {
        let outcome = self.discover().await.err();
        let mut last = self
            .discovery_error
            .write()
            .unwrap_or_else(|e| e.into_inner());
        match &outcome {
            Some(e) if last.as_ref() != Some(e) => {
                tracing::warn!(error = %e, "discovery failed; keeping the previous backends")
            }
            None if last.is_some() => tracing::info!("discovery succeeds again"),
            _ => {}
        }
        *last = outcome;
    }

    /// Runs discovery once; new addresses become backends (closed until seen
    /// ready), vanished ones drain. `Err` keeps the previous membership.
    pub async fn discover(&self) -> Result<(), String> {
        self.lb.update().await.map_err(|e| match &e.context {
            // Our discovery's own text (pingora's Display prefixes its type).
            Some(context) => context.to_string(),
            None => e.to_string(),
        })?;
        let current = self.lb.backends().get_backend();
        let old = self.members();
        let same = current.len() == old.by_addr.len()
            && current.iter().all(|b| old.by_addr.contains_key(&inet(b)));
        if same {
            return Ok(());
        }
        let next = Members::build(&current, Some((&old, &self.settings)));
        for (addr, backend) in &old.by_addr {
            if !next.by_addr.contains_key(addr) {
                tracing::info!(backend = %addr, "backend left discovery; draining");
                backend.set_draining();
            }
        }
        *self.members.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        Ok(())
    }

    /// Picks the backend for one request, skipping `tried` (earlier
    /// attempts). Only the pool's own calls pick (`call`, `stream`): a
    /// lease outside them would be a call the pool does not account for.
    pub(super) fn pick(&self, target: &Target, tried: &[SocketAddr]) -> Result<Lease> {
        let members = self.members();
        if let Some(key) = target.sequence {
            return self.pick_sticky(&members, target.model, key);
        }
        let accept = |b: &Backend| b.usable() && !tried.contains(&b.addr);
        let serving = |b: &Backend| accept(b) && target.model.is_none_or(|m| b.may_serve(m));
        let chosen = self
            .choose(&members, &serving)
            // Nobody is known to serve the model: any backend answers with
            // the server's own "unknown model" text.
            .or_else(|| self.choose(&members, &accept));
        match chosen {
            Some(backend) => Ok(Lease::new(backend)),
            None => Err(self.no_backend(&members, tried)),
        }
    }

    fn choose(&self, members: &Members, accept: &dyn Fn(&Backend) -> bool) -> Option<Arc<Backend>> {
        self.picker.pick(Candidates::new(&members.ordered, accept))
    }

    /// The sequence's backend: the first on the ring (from the key's hash)
    /// that may serve the model. Health is deliberately not consulted:
    /// moving a live sequence would lose its state silently.
    fn pick_sticky(&self, members: &Members, model: Option<&str>, key: &[u8]) -> Result<Lease> {
        let mut ring = members.ring.iter(key);
        for _ in 0..members.ordered.len() * 4 + 1 {
            let Some(chosen) = ring.next() else { break };
            let Some(backend) = members.by_addr.get(&inet(chosen)) else {
                continue;
            };
            if !model.is_none_or(|m| backend.may_serve(m)) {
                continue;
            }
            if backend.usable() {
                return Ok(Lease::new(backend.clone()));
            }
            return Err(Error::new(
                Kind::UpstreamUnreachable,
                format!(
                    "the backend of sequence {} ({}) is unavailable; the sequence's state is lost there, start the sequence again",
                    String::from_utf8_lossy(key),
                    backend.addr
                ),
            ));
        }
        Err(self.no_backend(members, &[]))
    }

    /// Where a request for `target` would go now, the lease taken and
    /// given back at once as a call's is (for `benches/pick.rs`, which
    /// measures the choice per request).
    pub fn pick_addr(&self, target: &Target) -> Result<SocketAddr> {
        self.pick(target, &[]).map(|lease| lease.addr())
    }

    /// Every usable backend (repository control fan-out).
    pub(super) fn leases_all(&self) -> Vec<Lease> {
        self.members()
            .ordered
            .iter()
            .filter(|b| b.usable())
            .map(|b| Lease::new(b.clone()))
            .collect()
    }

    /// At least one backend can take requests (the gateway's readiness).
    pub fn any_usable(&self) -> bool {
        self.members().ordered.iter().any(|b| b.usable())
    }

    /// The "no backend" answer: every backend that cannot take the request
    /// (or was tried) with the reason, the first few by address.
    fn no_backend(&self, members: &Members, tried: &[SocketAddr]) -> Error {
        if members.ordered.is_empty() {
            let discovery = self
                .discovery_error
                .read()
                .unwrap_or_else(|e| e.into_inner());
            let message = match &*discovery {
                Some(error) => format!("no upstream backend: discovery failed: {error}"),
                None => "no upstream backend: discovery found none".to_string(),
            };
            return Error::new(Kind::UpstreamUnreachable, message);
        }
        let troubled: Vec<(SocketAddr, String)> = members
            .ordered
            .iter()
            .filter_map(|b| {
                let reason = b.unusable_reason().or_else(|| {
                    tried
                        .contains(&b.addr)
                        .then(|| b.last_error().unwrap_or_else(|| "failed".into()))
                })?;
                Some((b.addr, reason))
            })
            .collect();
        let mut listed: Vec<String> = troubled
            .iter()
            .take(LISTED_BACKENDS_MAX)
            .map(|(addr, reason)| format!("{addr} ({reason})"))
            .collect();
        if troubled.len() > LISTED_BACKENDS_MAX {
            listed.push(format!("and {} more", troubled.len() - LISTED_BACKENDS_MAX));
        }
        let message = if listed.is_empty() {
            // Every backend is usable, none may serve the model (a sequence).
            format!(
                "no upstream backend serves the model ({} known)",
                members.ordered.len()
            )
        } else if tried.is_empty() {
            format!("no upstream backend is ready: {}", listed.join(", "))
        } else {
            format!(
                "no upstream backend could be reached ({} tried): {}",
                tried.len(),
                listed.join(", ")
            )
        };
        Error::new(Kind::UpstreamUnreachable, message)
    }
}

impl Members {
    /// The membership for `set`, reusing existing backends (their channels
    /// and counters) from `old`.
    fn build(
        set: &BTreeSet<LbBackend>,
        old: Option<(&Members, &Arc<UpstreamSettings>)>,
    ) -> Members {
        let mut by_addr = HashMap::new();
        let mut ordered = Vec::new();
        for lb_backend in set {
            let addr = inet(lb_backend);
            let backend = match old {
                Some((old, settings)) => old
                    .by_addr
                    .get(&addr)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(Backend::new(addr, settings.clone()))),
                None => continue,
            };
            ordered.push(backend.clone());
            by_addr.insert(addr, backend);
        }
        ordered.sort_by_key(|b| b.addr);
        Members {
            by_addr,
            ordered,
            ring: Arc::new(Consistent::build(set)),
        }
    }
}

/// The socket address of a pingora backend (discovery only makes `Inet`).
fn inet(backend: &LbBackend) -> SocketAddr {
    match backend.addr {
        pingora::protocols::l4::socket::SocketAddr::Inet(addr) => addr,
        _ => SocketAddr::from(([0, 0, 0, 0], 0)),
    }
}

impl Pool {
    /// The background loop: discovery every `discovery_interval`, health
    /// checks (and due model refreshes) every health interval. The first
    /// pass runs at once. Ends when the pool is dropped.
    pub async fn run(pool: std::sync::Weak<Pool>) {
        let mut last_discovery: Option<std::time::Instant> = None;
        loop {
            let Some(pool) = pool.upgrade() else { return };
            let settings = pool.settings().clone();
            let due = last_discovery.is_none_or(|t| t.elapsed() >= settings.discovery_interval);
            if pool.take_rediscover() || due {
                pool.discover_logged().await;
                last_discovery = Some(std::time::Instant::now());
            }
            pool.lb().backends().run_health_check(true).await;
            pool.pass_done();
            drop(pool);
            tokio::time::sleep(settings.health_interval).await;
        }
    }

    /// The group's load reports (`load_report.rs`): every member but those
    /// draining each interval, concurrently, the next round when the
    /// slowest has answered or timed out. Ends when the pool is dropped.
    async fn read_reports(pool: std::sync::Weak<Pool>, settings: LoadReportSettings) {
        let settings = Arc::new(settings);
        let mut every = tokio::time::interval(settings.interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(pool) = pool.upgrade() else { return };
            let mut reads = tokio::task::JoinSet::new();
            for backend in pool.backends() {
                if !backend.draining() {
                    reads.spawn(load_report::report(backend, settings.clone()));
                }
            }
            drop(pool);
            while reads.join_next().await.is_some() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_discovery_is_the_no_backend_answer() {
        let mut settings = UpstreamSettings::for_tests();
        // Fails to parse, without a DNS lookup.
        settings.addresses = vec!["no-port".into()];
        let pool = Pool::new(settings, Arc::new(Metrics::new()));
        pool.discover_logged().await;
        let error = pool
            .pick(&Target::default(), &[])
            .err()
            .expect("no backend");
        assert!(
            error.message.starts_with(
                "no upstream backend: discovery failed: cannot resolve upstream no-port"
            ),
            "{}",
            error.message
        );
    }
}
