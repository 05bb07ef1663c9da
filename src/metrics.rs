//! Prometheus metrics, scraped from the admin listener's `GET /metrics`.
//! One [`Metrics`] per gateway (its own registry, so tests can read exact
//! counts). Per-request series are labelled by route (a fixed name per
//! `Route` variant), model (only for answers that are not 404, so unknown
//! names cannot grow the series without bound) and status; per-backend
//! series by backend address. Backend health and in-flight gauges are
//! handed in at scrape time ([`BackendGauge`]), and so are the queues the
//! backends' servers report (`load_report`). With `[[routes]]`, the
//! inference calls of each rule are counted per group they went to (a
//! split's side) and mirrors per rule, with their answers' agreement;
//! the series of a rule are made once, when it is compiled
//! (`app::routing`), so a call counts without a lookup.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// Latency buckets (seconds): 100 µs … 60 s, the range of a gateway hop
/// on a LAN up to the default request deadline.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
    15.0, 60.0,
];

pub struct Metrics {
    registry: Registry,
    pub requests: IntCounterVec,
    pub request_seconds: HistogramVec,
    pub gateway_seconds: HistogramVec,
    pub upstream_calls: IntCounterVec,
    pub upstream_seconds: HistogramVec,
    pub bytes_in: IntCounterVec,
    pub bytes_out: IntCounterVec,
    pub ejections: IntCounterVec,
    pub rejected: IntCounterVec,
    /// Requests cut by the end of the drain's grace period.
    pub drain_cut: IntCounter,
    /// Inference calls by rule (`routes[N]` or its `name`; `default`: no
    /// rule matched), group and outcome (ok, error).
    pub route_calls: IntCounterVec,
    pub route_seconds: HistogramVec,
    /// Mirror calls that were sent, by rule, group and outcome.
    pub mirror_calls: IntCounterVec,
    /// Requests a rule would have mirrored but did not, by reason.
    pub mirror_skipped: IntCounterVec,
    /// Mirrored inferences by whether their answer agreed with the
    /// primary's (agree, differ, uncompared).
    pub mirror_agreement: IntCounterVec,
    /// The OpenAI front's generations, by model (a name the upstream
    /// knows: only recorded once the model resolved).
    pub llm: LlmMetrics,
    /// Admission control, per group (`app::admission`): calls by outcome
    /// (admitted, or refused: full, displaced, backlog, timeout, deadline) and
    /// priority class (high, default, low: the level against the group's
    /// default); the waits of queued calls; waiting, in flight, the limit.
    pub admission_calls: IntCounterVec,
    pub admission_wait: HistogramVec,
    pub admission_queued: IntGaugeVec,
    pub admission_in_flight: IntGaugeVec,
    pub admission_limit: IntGaugeVec,
    inflight: IntGaugeVec,
    backend_up: IntGaugeVec,
    backend_inflight: IntGaugeVec,
    backend_reported_pending: IntGaugeVec,
    group_usable: IntGaugeVec,
    /// Each route's series of the per-request metrics labelled by route
    /// alone, looked up once per route name ([`Metrics::route_series`]).
    routes: [OnceLock<(&'static str, RouteSeries)>; ROUTE_SLOTS],
}

/// More than the route names there are (the `Route` variants and the
/// OpenAI front's); a name beyond them is looked up on every request.
const ROUTE_SLOTS: usize = 48;

/// One route's series of [`Metrics`] labelled by route alone, taken from
/// their vectors once: a labelled lookup hashes its labels under a lock,
/// ~300 instructions each, four on every request
/// (`scripts/bench-instructions`, docs/performance.md).
pub struct RouteSeries {
    pub request_seconds: Histogram,
    pub gateway_seconds: Histogram,
    pub bytes_in: IntCounter,
    pub bytes_out: IntCounter,
}

/// One backend's series of successful calls, taken once and kept by the
/// backend ([`Metrics::upstream_ok`]), for the reason [`RouteSeries`] is.
pub struct UpstreamSeries {
    ok: IntCounter,
    seconds: Histogram,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let histogram = |name: &str, help: &str, labels: &[&str]| {
            let opts = HistogramOpts::new(name, help).buckets(BUCKETS.to_vec());
            let h = HistogramVec::new(opts, labels).expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("unique metric");
            h
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let drain_cut = IntCounter::new(
            "tensorgate_drain_cut_requests_total",
            "Requests cut by the end of the drain's grace period: in flight when it ended, or arriving on an idle connection as it was closed.",
        )
        .expect("valid metric");
        registry
            .register(Box::new(drain_cut.clone()))
            .expect("unique metric");
        let llm = LlmMetrics {
            first_token_seconds: histogram("tensorgate_llm_time_to_first_token_seconds", "Time from a generation's request to its first token (its first response with text), by model.", &["model"]),
            inter_token_seconds: histogram("tensorgate_llm_inter_token_seconds", "Time between a streamed generation's consecutive responses with text, by model.", &["model"]),
            output_tokens: counter("tensorgate_llm_output_tokens_total", "Tokens generated (the models' num_output_tokens), by model.", &["model"]),
            generations: counter("tensorgate_llm_generations_total", "Generations by model and outcome (ok, error: the upstream failed it, cancelled: the client went away).", &["model", "outcome"]),
        };
        Metrics {
            drain_cut,
            llm,
            requests: counter("tensorgate_requests_total", "Requests answered, by route, model and HTTP status.", &["route", "model", "status"]),
            request_seconds: histogram("tensorgate_request_duration_seconds", "Time from the request's body read to its answer.", &["route"]),
            gateway_seconds: histogram("tensorgate_gateway_duration_seconds", "Time spent in tensorgate itself (request time minus upstream time).", &["route"]),
            upstream_calls: counter("tensorgate_upstream_requests_total", "Upstream calls by backend and outcome (ok, error, unreachable, timeout).", &["backend", "outcome"]),
            upstream_seconds: histogram("tensorgate_upstream_duration_seconds", "Time of upstream calls, by backend.", &["backend"]),
            bytes_in: counter("tensorgate_request_bytes_total", "Request body bytes received, by route.", &["route"]),
            bytes_out: counter("tensorgate_response_bytes_total", "Response body bytes sent, by route.", &["route"]),
            ejections: counter("tensorgate_backend_ejections_total", "Passive ejections after consecutive transport failures.", &["backend"]),
            rejected: counter("tensorgate_rejected_requests_total", "Requests refused before any upstream call, by reason (size, auth, rate, overload).", &["reason"]),
            inflight: gauge("tensorgate_inflight_requests", "Requests being answered.", &["listener"]),
            backend_up: gauge("tensorgate_backend_up", "1 while a backend takes traffic (seen ready, healthy, not ejected or draining).", &["backend"]),
            backend_inflight: gauge("tensorgate_backend_inflight_requests", "Upstream calls in flight, by backend.", &["backend"]),
            backend_reported_pending: gauge("tensorgate_backend_reported_pending_requests", "Requests waiting in a backend's own queues by its server's latest fresh load report (load_report on; no series while the report is missing or stale).", &["backend"]),
            group_usable: gauge("tensorgate_group_usable_backends", "Backends taking traffic now, by upstream group.", &["group"]),
            route_calls: counter("tensorgate_route_calls_total", "Inference calls by routing rule, the group they went to (a split's side) and outcome (ok, error).", &["rule", "group", "outcome"]),
            route_seconds: histogram("tensorgate_route_call_duration_seconds", "Time of unary inference calls upstream, by routing rule and group.", &["rule", "group"]),
            mirror_calls: counter("tensorgate_mirror_calls_total", "Mirror calls sent, by routing rule, mirror group and outcome (ok, error).", &["rule", "group", "outcome"]),
            mirror_skipped: counter("tensorgate_mirror_skipped_total", "Requests a rule's mirror would have copied but did not, by reason (size, inflight, streamed, shared_memory).", &["rule", "reason"]),
            mirror_agreement: counter("tensorgate_mirror_agreement_total", "Mirrored inferences by verdict: agree (outputs equal, or within the mirror's tolerance), differ, uncompared (either call failed, or the answer was over max_bytes).", &["rule", "verdict"]),
            admission_calls: counter("tensorgate_admission_total", "Inference calls through a group's admission control, by group, outcome (admitted; refused: full, displaced, backlog, timeout, deadline) and priority class (high, default, low).", &["group", "outcome", "priority"]),
            admission_wait: histogram("tensorgate_admission_wait_seconds", "Time calls waited in a group's admission queue (admitted or refused after a wait), by group.", &["group"]),
            admission_queued: gauge("tensorgate_admission_queue_length", "Calls waiting in a group's admission queue.", &["group"]),
            admission_in_flight: gauge("tensorgate_admission_in_flight", "Calls holding a slot of a group's admission control.", &["group"]),
            admission_limit: gauge("tensorgate_admission_limit", "The limit of a group's admission control now (the adaptive limit's current value).", &["group"]),
            routes: std::array::from_fn(|_| OnceLock::new()),
            registry,
        }
    }

    /// `record` with the series of route `name`: those of the slot that
    /// holds it, or of the first free slot, which then holds it. Slots are
    /// only ever filled, so a name found once stays where it was found.
    pub fn route_series(&self, name: &'static str, record: impl FnOnce(&RouteSeries)) {
        let make = || RouteSeries {
            request_seconds: self.request_seconds.with_label_values(&[name]),
            gateway_seconds: self.gateway_seconds.with_label_values(&[name]),
            bytes_in: self.bytes_in.with_label_values(&[name]),
            bytes_out: self.bytes_out.with_label_values(&[name]),
        };
        for slot in &self.routes {
            let (held, series) = slot.get_or_init(|| (name, make()));
            if *held == name {
                return record(series);
            }
        }
        record(&make());
    }

    /// One upstream call to the backend labelled `label` succeeded, its
    /// series kept in `series` (the backend's) from the first.
    pub fn upstream_ok(&self, series: &OnceLock<UpstreamSeries>, label: &str, took: Duration) {
        let series = series.get_or_init(|| UpstreamSeries {
            ok: self.upstream_calls.with_label_values(&[label, "ok"]),
            seconds: self.upstream_seconds.with_label_values(&[label]),
        });
        series.ok.inc();
        series.seconds.observe(took.as_secs_f64());
    }

    /// One upstream call finished (called by the pool).
    pub fn upstream_call(&self, label: &str, outcome: &str, took: Duration) {
        self.upstream_calls
            .with_label_values(&[label, outcome])
            .inc();
        self.upstream_seconds
            .with_label_values(&[label])
            .observe(took.as_secs_f64());
    }

    /// The Prometheus text exposition, with the gauges read now.
    pub fn render<'a>(
        &self,
        backends: impl IntoIterator<Item = BackendGauge<'a>>,
        groups: impl IntoIterator<Item = GroupGauge<'a>>,
        inflight_http: usize,
    ) -> Vec<u8> {
        self.group_usable.reset();
        for vec in [
            &self.admission_queued,
            &self.admission_in_flight,
            &self.admission_limit,
        ] {
            vec.reset();
        }
        for group in groups {
            self.group_usable
                .with_label_values(&[group.name])
                .set(group.usable as i64);
            if let Some(gate) = group.admission {
                for (vec, value) in [
                    (&self.admission_queued, gate.waiting),
                    (&self.admission_in_flight, gate.in_flight),
                    (&self.admission_limit, gate.limit),
                ] {
                    vec.with_label_values(&[group.name]).set(value as i64);
                }
            }
        }
        self.inflight
            .with_label_values(&["http"])
            .set(inflight_http as i64);
        self.backend_up.reset();
        self.backend_inflight.reset();
        self.backend_reported_pending.reset();
        for backend in backends {
            if let Some(pending) = backend.reported_pending {
                self.backend_reported_pending
                    .with_label_values(&[backend.label])
                    .set(pending.min(i64::MAX as u64) as i64);
            }
            self.backend_up
                .with_label_values(&[backend.label])
                .set(i64::from(backend.up));
            self.backend_inflight
                .with_label_values(&[backend.label])
                .set(backend.inflight as i64);
        }
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

/// The OpenAI front's series (docs/operations.md, "OpenAI").
pub struct LlmMetrics {
    pub first_token_seconds: HistogramVec,
    pub inter_token_seconds: HistogramVec,
    pub output_tokens: IntCounterVec,
    pub generations: IntCounterVec,
}

/// One group's gauges at scrape time: its usable backends, and its
/// admission control's state (`None`: off).
pub struct GroupGauge<'a> {
    pub name: &'a str,
    pub usable: usize,
    pub admission: Option<AdmissionGauge>,
}

/// A group's admission control at scrape time.
pub struct AdmissionGauge {
    pub waiting: usize,
    pub in_flight: usize,
    pub limit: usize,
}

/// One backend's gauges at scrape time (read from the pool by the core).
pub struct BackendGauge<'a> {
    /// The backend's address as its label.
    pub label: &'a str,
    /// Usable for requests now.
    pub up: bool,
    pub inflight: usize,
    /// Its server's latest load report, while fresh.
    pub reported_pending: Option<u64>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}
