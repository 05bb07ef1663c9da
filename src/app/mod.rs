//! The application core both fronts share (the HTTP front with its v1
//! routes, the gRPC front with the v1 gRPC service): the gateway's
//! state ([`Gateway`]: configuration, upstream groups and routes, access
//! rules, metrics, in-flight count, reload), the access guard, the
//! upstream calls of an inference request (`infer`) and repository
//! fan-out. It knows no HTTP or gRPC server types (no type of its own has
//! methods outside `app`: `tests/it/layering.rs`); the fronts translate to
//! and from it.

pub(crate) mod admission;
pub(crate) mod door;
pub(crate) mod fanout;
pub(crate) mod guard;
pub(crate) mod index;
pub(crate) mod infer;
mod inflight;
pub(crate) mod metadata;
pub(crate) mod models;
pub(crate) mod openai;
pub(crate) mod routing;
pub(crate) mod shm;
pub(crate) mod status;
pub(crate) mod v1;

pub(crate) use inflight::{Inflight, InflightGuard};

use std::sync::atomic::Ordering;
use std::sync::Arc;

use regex::Regex;

use crate::config::Config;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::upstream::Backend;
use crate::wire::v2_request::DecodeLimits;
use guard::Guard;
use routing::Routing;

/// Reads the configuration again (the file, then the command line).
pub(crate) type ReloadSource = Box<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// Everything a request needs, shared by all requests.
pub struct Gateway {
    config: Config,
    /// The groups and routes in force (replaced whole by a reload; a call
    /// keeps the group it was routed to).
    routing: std::sync::RwLock<Arc<Routing>>,
    /// Some rule of [`Gateway::routing`]'s is in force, or some group's
    /// admission reads a header (`Routing::reads_requests`, kept with
    /// it): the fronts ask this of every request, and without either
    /// nothing more (~150 instructions a request saved,
    /// docs/performance.md).
    has_rules: std::sync::atomic::AtomicBool,
    inflight: Arc<Inflight>,
    metrics: Arc<Metrics>,
    guard: std::sync::RwLock<Arc<Guard>>,
    /// Where a reload (SIGHUP) reads the configuration from.
    reload_source: std::sync::OnceLock<ReloadSource>,
    forward_pattern: Option<Regex>,
    /// Set at SIGTERM: the gateway no longer says it is ready (a watch, so
    /// the gRPC health service can wait for it).
    draining: tokio::sync::watch::Sender<bool>,
    /// The shared-memory regions, in bridge mode (`[shared_memory]`).
    shm_bridge: Option<shm::Bridge>,
    /// The OpenAI front's chat templates (`[openai.models.*]`), compiled.
    openai_templates: openai::Templates,
}

impl Gateway {
    /// Builds the gateway from a validated config.
    pub fn new(config: Config) -> Result<Gateway, String> {
        config.validate()?;
        let forward_pattern = match &config.http.header_forward_pattern {
            // Triton prefixes the pattern with (?i) and matches partially.
            Some(p) => Some(Regex::new(&format!("(?i){p}")).map_err(|e| e.to_string())?),
            None => None,
        };
        let openai_templates = openai::Templates::new(&config.openai)?;
        let metrics = Arc::new(Metrics::new());
        let routing = Routing::new(&config, None, &metrics);
        Ok(Gateway {
            has_rules: routing.reads_requests().into(),
            routing: std::sync::RwLock::new(Arc::new(routing)),
            guard: std::sync::RwLock::new(Arc::new(Guard::new(&config.auth, &config.limits))),
            reload_source: std::sync::OnceLock::new(),
            metrics,
            inflight: Arc::default(),
            forward_pattern,
            draining: tokio::sync::watch::Sender::new(false),
            shm_bridge: config
                .shared_memory
                .bridged()
                .then(|| shm::Bridge::new(shm::Regions::new(&config.shared_memory))),
            openai_templates,
            config,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Requests being answered (the graceful drain waits for zero).
    pub fn inflight(&self) -> &Arc<Inflight> {
        &self.inflight
    }

    /// Ready to take requests: not draining, and a backend is ready in a
    /// group that takes clients' traffic (the default group or one a route
    /// sends to; a group only mirrored to does not count), after the
    /// groups' first health passes. One group down of several leaves the
    /// gateway ready: its models answer their own errors, and the rest
    /// are served. Both fronts' readiness (HTTP v2 and v1, gRPC
    /// `ServerReady`) say this.
    pub(crate) async fn ready(&self) -> bool {
        self.started().await;
        !self.is_draining() && self.routing().serving_usable()
    }

    /// The drain has begun (SIGTERM): readiness turns false, so a load
    /// balancer probing on a kept-alive connection moves on.
    pub(crate) fn start_draining(&self) {
        self.draining.send_replace(true);
    }

    /// Whether the drain has begun.
    pub(crate) fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }

    /// Resolves once the drain has begun (at once if it has).
    pub(crate) async fn drain_started(&self) {
        let mut draining = self.draining.subscribe();
        // The sender lives as long as `self`: `wait_for` cannot fail here.
        let _ = draining.wait_for(|draining| *draining).await;
    }

    /// Starts the pool's background loop on this runtime (once) and waits
    /// for its first discovery and health pass (at most a connect and a
    /// health timeout): the server calls it at boot, every call waits for
    /// it.
    pub async fn started(&self) {
        let routing = self.routing();
        for group in routing.groups() {
            group.pool.started().await;
        }
    }

    /// Discovery and health passes completed by every group (the fewest
    /// of any group).
    pub fn passes(&self) -> u64 {
        let routing = self.routing();
        routing.groups().map(|g| g.pool.passes()).min().unwrap_or(0)
    }

    /// Waits until every group has completed `n` passes in all.
    pub async fn passes_reach(&self, n: u64) {
        let routing = self.routing();
        for group in routing.groups() {
            group.pool.passes_reach(n).await;
        }
    }

    /// The backends of every group, group by group in name order, each in
    /// address order (tests read their state; the fronts read
    /// `app::status`).
    pub fn backends(&self) -> Vec<Arc<Backend>> {
        let routing = self.routing();
        routing.groups().flat_map(|g| g.pool.backends()).collect()
    }

    /// The backend at `addr`, if it is a member of a group (the first
    /// group by name that has it).
    pub fn backend(&self, addr: &std::net::SocketAddr) -> Option<Arc<Backend>> {
        let routing = self.routing();
        let found = routing.groups().find_map(|g| g.pool.backend(addr));
        found
    }

    /// The groups and routes in force: for the door (`app::door`) and the
    /// core's own fan-out and views; no front reaches a pool.
    pub(in crate::app) fn routing(&self) -> Arc<Routing> {
        self.routing
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The routes read requests: some rule is in force, or some group's
    /// admission reads a header.
    pub(in crate::app) fn has_rules(&self) -> bool {
        self.has_rules.load(Ordering::Relaxed)
    }

    /// The values of the headers (gRPC: metadata keys) the routes read
    /// (`context::RouteFacts::headers`), each looked up once by `header`
    /// (given a lower-case name). Nothing is looked up, and nothing
    /// allocated, when no rule reads a header.
    pub(crate) fn route_headers(
        &self,
        header: impl Fn(&str) -> Option<bytes::Bytes>,
    ) -> Vec<Option<bytes::Bytes>> {
        if !self.has_rules() {
            return Vec::new();
        }
        let routing = self.routing();
        routing.headers().iter().map(|name| header(name)).collect()
    }

    /// The shared-memory bridge, in bridge mode.
    pub(crate) fn shm_bridge(&self) -> Option<&shm::Bridge> {
        self.shm_bridge.as_ref()
    }

    /// The OpenAI front's compiled chat templates.
    pub(crate) fn openai_templates(&self) -> &openai::Templates {
        &self.openai_templates
    }

    /// `--header-forward-pattern`, compiled as Triton does.
    pub(crate) fn forward_pattern(&self) -> Option<&Regex> {
        self.forward_pattern.as_ref()
    }

    pub(crate) fn decode_limits(&self) -> DecodeLimits {
        DecodeLimits {
            max_input_size: self.config.limits.max_input_size,
            max_json_depth: self.config.limits.max_json_depth,
        }
    }

    /// The current access rules (replaced by a reload).
    pub(crate) fn guard(&self) -> Arc<Guard> {
        self.guard.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies a new configuration without dropping connections: the
    /// upstream groups, routes and weights, API keys and the per-client
    /// and in-flight limits. A group whose table changed but for its
    /// addresses is made anew (its old pool serves the calls already on
    /// it, then goes); one that changed only its addresses keeps its
    /// backends. An invalid configuration is refused whole and the current
    /// one kept. Other changes (listen addresses, threads, the HTTP and
    /// gRPC sections) need a restart: they are listed in the answer.
    pub fn reload(&self, new: &Config) -> Result<Vec<&'static str>, String> {
        new.validate()?;
        let old = &self.config;
        let routing = Arc::new(Routing::new(new, Some(&self.routing()), &self.metrics));
        // The new groups' background loops start now, not at their first
        // call, so their health shows before traffic reaches them.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let started = routing.clone();
            runtime.spawn(async move {
                for group in started.groups() {
                    group.pool.started().await;
                }
            });
        }
        let mut in_force = self.routing.write().unwrap_or_else(|e| e.into_inner());
        self.has_rules
            .store(routing.reads_requests(), Ordering::Relaxed);
        *in_force = routing;
        drop(in_force);
        let guard = Guard::new(&new.auth, &new.limits);
        *self.guard.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(guard);
        let mut ignored = Vec::new();
        let mut limits = new.limits.clone();
        (
            limits.rate_per_client,
            limits.concurrency_per_client,
            limits.max_inflight,
        ) = (
            old.limits.rate_per_client,
            old.limits.concurrency_per_client,
            old.limits.max_inflight,
        );
        for (name, changed) in [
            ("server", new.server != old.server),
            ("connections", new.connections != old.connections),
            ("limits (sizes)", limits != old.limits),
            ("http", new.http != old.http),
            ("grpc", new.grpc != old.grpc),
            ("admin", new.admin != old.admin),
            ("log", new.log != old.log),
            ("generate", new.generate != old.generate),
            ("shared_memory", new.shared_memory != old.shared_memory),
            ("v1", new.v1 != old.v1),
            ("openai", new.openai != old.openai),
        ] {
            if changed {
                ignored.push(name);
            }
        }
        Ok(ignored)
    }

    /// Where `SIGHUP` re-reads the configuration (set by the binary).
    pub fn set_reload_source(&self, source: ReloadSource) {
        let _ = self.reload_source.set(source);
    }

    pub(crate) fn reload_source(&self) -> Option<&ReloadSource> {
        self.reload_source.get()
    }

    /// The Prometheus text of this gateway's metrics.
    pub fn metrics_text(&self) -> Vec<u8> {
        let routing = self.routing();
        let backends = self.backends();
        let gauges = backends.iter().map(|b| crate::metrics::BackendGauge {
            label: &b.label,
            up: b.usable(),
            inflight: b.inflight(),
            reported_pending: b.report().filter(|r| r.fresh).map(|r| r.pending),
        });
        let usable: Vec<crate::metrics::GroupGauge<'_>> = routing
            .groups()
            .map(|g| crate::metrics::GroupGauge {
                name: &g.name,
                usable: g.pool.backends().iter().filter(|b| b.usable()).count(),
                admission: g.gate.as_ref().map(|gate| {
                    let view = gate.view();
                    crate::metrics::AdmissionGauge {
                        waiting: view.waiting,
                        in_flight: view.in_flight,
                        limit: view.limit,
                    }
                }),
            })
            .collect();
        self.metrics.render(gauges, usable, self.inflight.count())
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The metrics, for a task that outlives its request (a stream's pump).
    pub(crate) fn metrics_arc(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }
}
