//! One backend of the pool: its address, its request channels, its health
//! channel, and what the gateway has learned about it (in-flight count,
//! readiness, passive ejection, the models it serves). Shared by the pool,
//! the health checker and every [`Lease`] on it.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use tonic::transport::{Channel, Endpoint};

use super::h2_transport::{H2Settings, H2Transport};
use super::raw::RawClient;
use super::transport::Transport;
use super::{thread_slot, Client, UpstreamSettings};
use crate::metrics::UpstreamSeries;
use crate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;

/// Flow-control window of one upstream call: what the backend may send
/// before the gateway reads it, so also what a call whose client stopped
/// reading holds in memory. 1 MiB lets a megabyte-sized answer flow with
/// one window update on the way, and keeps a stalled stream cheap.
const STREAM_WINDOW: u32 = 1 << 20;

/// Flow-control window of one upstream connection, shared by its calls:
/// room for several calls' windows at once.
const CONNECTION_WINDOW: u32 = 8 << 20;

/// The URI of a backend's calls before their path.
pub(super) fn origin(addr: SocketAddr, tls: bool) -> http::Uri {
    let scheme = if tls { "https" } else { "http" };
    http::Uri::try_from(format!("{scheme}://{addr}")).expect("socket address is a URI")
}

/// What the gateway knows of the models a backend serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Models {
    /// The backend has no repository index (not Triton): it may serve anything.
    Unknown,
    /// Names of the models the backend reported `READY`.
    Ready(HashSet<String>),
}

impl Models {
    /// `false` only when the backend is known not to serve `model`.
    pub fn may_serve(&self, model: &str) -> bool {
        match self {
            Models::Unknown => true,
            Models::Ready(names) => names.contains(model),
        }
    }

    /// `true` only when the backend is known to serve `model`.
    pub fn serves(&self, model: &str) -> bool {
        matches!(self, Models::Ready(names) if names.contains(model))
    }
}

/// RPCs a v2 server may not have (KServe has neither `ModelConfig` nor
/// `RepositoryIndex`) that the gateway calls on its own behalf. For these,
/// `UNIMPLEMENTED` can only mean the method is not there (Triton never
/// answers them so otherwise), so it is remembered per backend
/// ([`Backend::lacks`]) and the RPC is not called there again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionalRpc {
    ModelConfig,
    ModelMetadata,
    RepositoryIndex,
}

impl OptionalRpc {
    /// The method's name in `GRPCInferenceService`.
    pub fn name(self) -> &'static str {
        match self {
            OptionalRpc::ModelConfig => "ModelConfig",
            OptionalRpc::ModelMetadata => "ModelMetadata",
            OptionalRpc::RepositoryIndex => "RepositoryIndex",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

pub struct Backend {
    pub addr: SocketAddr,
    /// `addr` as text, made once (metrics labels on every call).
    pub label: String,
    /// `http://addr` (or `https://`): scheme and authority of every call.
    origin: http::Uri,
    /// `ModelInfer` at `origin`, for raw calls.
    model_infer_uri: http::Uri,
    settings: Arc<UpstreamSettings>,
    /// Request traffic, one transport per [`thread_slot`]: each connects
    /// on first use, on the runtime of the thread that uses it.
    channels: [OnceLock<Transport>; thread_slot::SLOTS],
    /// Health checks and model refreshes: their own connection, so a
    /// saturated request channel does not fail the checks.
    health_channel: OnceLock<Channel>,
    inflight: AtomicUsize,
    /// Set by the first successful readiness check; until then no traffic.
    seen_ready: AtomicBool,
    /// The latest active check's verdict (after the thresholds).
    healthy: AtomicBool,
    consecutive_failures: AtomicUsize,
    /// Milliseconds since `epoch` until which the backend is ejected.
    ejected_until_ms: AtomicU64,
    epoch: Instant,
    /// Removed from discovery: finishes its in-flight requests, gets no new ones.
    draining: AtomicBool,
    models: RwLock<Arc<Models>>,
    /// When the models were last refreshed (ms since `epoch`; MAX: never).
    models_refreshed_ms: AtomicU64,
    /// Requests this backend has answered or failed (for the admin view).
    served: AtomicU64,
    /// Its series of successful calls (`Metrics::upstream_ok`).
    ok_series: OnceLock<UpstreamSeries>,
    /// The [`OptionalRpc`]s it answered `UNIMPLEMENTED`, one bit each;
    /// forgotten when it fails a check (a restart may bring another server).
    missing: AtomicU8,
    /// The latest failure (a check's or a request's) since the backend last
    /// answered; `has_error` spares the hot path the lock.
    last_error: RwLock<Option<String>>,
    has_error: AtomicBool,
    /// Why the latest active check failed (`None`: it passed, or none ran
    /// yet): a warning is logged only when this changes.
    check_failure: std::sync::Mutex<Option<String>>,
    /// The latest load report ([`Report`]'s word; 0: none yet), read by
    /// every pick of a group with `load_report` on.
    report: AtomicU64,
    /// A report older than this (ms) is not used.
    report_stale_after_ms: u64,
    /// Why the latest read of the backend's metrics failed (`None`: it
    /// succeeded, or none ran yet): logged when this changes.
    report_failure: std::sync::Mutex<Option<String>>,
}

/// A backend's latest load report as the operators' views show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Requests waiting in the server's own queues (summed over models).
    pub pending: u64,
    /// How long ago it was read.
    pub age: Duration,
    /// Young enough to be used by the picks.
    pub fresh: bool,
}

impl Report {
    /// Bits of the word that hold the pending count (the rest: the time
    /// it was read, ms since the backend's epoch, plus one; 40 bits are
    /// 34 years). A larger count is kept as this maximum.
    const PENDING_BITS: u32 = 24;
    const PENDING_MAX: u64 = (1 << Self::PENDING_BITS) - 1;

    fn word(pending: u64, at_ms: u64) -> u64 {
        ((at_ms + 1) << Self::PENDING_BITS) | pending.min(Self::PENDING_MAX)
    }

    /// (pending, read at ms) of a word that is not 0.
    fn unpack(word: u64) -> (u64, u64) {
        (
            word & Self::PENDING_MAX,
            (word >> Self::PENDING_BITS).saturating_sub(1),
        )
    }
}

impl Backend {
    /// Its series of successful calls, taken at its first.
    pub(crate) fn ok_series(&self) -> &OnceLock<UpstreamSeries> {
        &self.ok_series
    }

    pub(super) fn new(addr: SocketAddr, settings: Arc<UpstreamSettings>) -> Backend {
        let origin = origin(addr, settings.tls.is_some());
        Backend {
            addr,
            label: addr.to_string(),
            model_infer_uri: super::raw::model_infer_uri(&origin),
            origin,
            channels: std::array::from_fn(|_| OnceLock::new()),
            health_channel: OnceLock::new(),
            inflight: AtomicUsize::new(0),
            seen_ready: AtomicBool::new(false),
            healthy: AtomicBool::new(true),
            consecutive_failures: AtomicUsize::new(0),
            ejected_until_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            draining: AtomicBool::new(false),
            models: RwLock::new(Arc::new(Models::Unknown)),
            models_refreshed_ms: AtomicU64::new(u64::MAX),
            served: AtomicU64::new(0),
            ok_series: OnceLock::new(),
            missing: AtomicU8::new(0),
            last_error: RwLock::new(None),
            has_error: AtomicBool::new(false),
            check_failure: std::sync::Mutex::new(None),
            report: AtomicU64::new(0),
            report_stale_after_ms: settings
                .load_report
                .as_ref()
                .map_or(0, |r| r.stale_after.as_millis() as u64),
            report_failure: std::sync::Mutex::new(None),
            settings,
        }
    }

    /// A client on the calling thread's request channel (cheap: HTTP/2
    /// multiplexed).
    pub(super) fn client(&self) -> Client {
        self.wrap(self.transport())
    }

    /// The calling thread's request transport, for raw calls (`raw`).
    pub(super) fn raw(&self) -> RawClient {
        RawClient::new(self.transport(), self.model_infer_uri.clone())
    }

    fn transport(&self) -> Transport {
        self.channels[thread_slot::current()]
            .get_or_init(|| self.request_transport())
            .clone()
    }

    /// The direct HTTP/2 transport, or tonic's `Channel` for TLS.
    fn request_transport(&self) -> Transport {
        if self.settings.tls.is_some() {
            return Transport::tonic(self.endpoint().connect_lazy());
        }
        Transport::direct(H2Transport::new(
            self.addr,
            H2Settings {
                connect_timeout: self.settings.connect_timeout,
                stream_window: STREAM_WINDOW,
                connection_window: CONNECTION_WINDOW,
            },
        ))
    }

    /// A client on the health channel.
    pub(super) fn health_client(&self) -> Client {
        let channel = self
            .health_channel
            .get_or_init(|| {
                self.endpoint()
                    .timeout(self.settings.health_timeout)
                    .connect_lazy()
            })
            .clone();
        self.wrap(Transport::tonic(channel))
    }

    fn endpoint(&self) -> Endpoint {
        let endpoint = Endpoint::from(self.origin.clone())
            .connect_timeout(self.settings.connect_timeout)
            .tcp_nodelay(true)
            // Fixed windows, not hyper's adaptive ones: the adaptive window
            // measures the bandwidth-delay product with a PING on most
            // answers, one more write and one more read per small request.
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW);
        match &self.settings.tls {
            None => endpoint,
            Some(tls) => match endpoint.clone().tls_config(tls.clone()) {
                Ok(endpoint) => endpoint,
                Err(error) => {
                    // Without TLS the handshake fails: every call says so.
                    tracing::error!(backend = %self.addr, %error, "invalid upstream TLS settings");
                    endpoint
                }
            },
        }
    }

    fn wrap(&self, transport: Transport) -> Client {
        GrpcInferenceServiceClient::with_origin(transport, self.origin.clone())
            .max_decoding_message_size(self.settings.max_message_bytes)
            .max_encoding_message_size(self.settings.max_message_bytes)
    }

    /// May get new requests: seen ready, healthy, not ejected, not draining.
    pub fn usable(&self) -> bool {
        self.seen_ready.load(Relaxed)
            && self.healthy.load(Relaxed)
            && !self.draining.load(Relaxed)
            && !self.ejected()
    }

    pub fn ejected(&self) -> bool {
        // 0: never ejected (no clock read on the hot path).
        let until = self.ejected_until_ms.load(Relaxed);
        until != 0 && self.now_ms() < until
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn inflight(&self) -> usize {
        self.inflight.load(Relaxed)
    }

    /// The requests waiting in the server's own queues by its latest
    /// report, when that is fresh at `now`; 0 without one (the pick's
    /// read: one load, no clock, no lock).
    pub(super) fn reported_pending(&self, now: Instant) -> usize {
        let word = self.report.load(Relaxed);
        if word == 0 {
            return 0;
        }
        let (pending, at_ms) = Report::unpack(word);
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        if now_ms.saturating_sub(at_ms) > self.report_stale_after_ms {
            return 0;
        }
        pending as usize
    }

    /// The latest load report (`None`: none was ever read).
    pub fn report(&self) -> Option<Report> {
        let word = self.report.load(Relaxed);
        if word == 0 {
            return None;
        }
        let (pending, at_ms) = Report::unpack(word);
        let age_ms = self.now_ms().saturating_sub(at_ms);
        Some(Report {
            pending,
            age: Duration::from_millis(age_ms),
            fresh: age_ms <= self.report_stale_after_ms,
        })
    }

    /// A read of the backend's metrics gave its pending requests.
    pub(super) fn record_report(&self, pending: u64) {
        self.report
            .store(Report::word(pending, self.now_ms()), Relaxed);
        let mut failing = self
            .report_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = failing.take() {
            tracing::info!(backend = %self.addr, previous = %previous, "backend's load reports are read again");
        }
    }

    /// A read of the backend's metrics failed: the last report stays until
    /// it is stale. A warning when the reads start failing (or fail for
    /// another reason), not on every read.
    pub(super) fn report_failed(&self, why: String) {
        let mut failing = self
            .report_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if failing.as_deref() != Some(why.as_str()) {
            tracing::warn!(backend = %self.addr, error = %why, "backend's load report cannot be read; it is balanced by in-flight requests alone once its last report is stale");
            *failing = Some(why);
        }
    }

    /// Why the latest read of the backend's metrics failed.
    pub fn report_error(&self) -> Option<String> {
        self.report_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn served(&self) -> u64 {
        self.served.load(Relaxed)
    }

    pub fn seen_ready(&self) -> bool {
        self.seen_ready.load(Relaxed)
    }

    /// The active checks' verdict after their thresholds; `false` until a
    /// check has passed once (pingora starts every backend healthy).
    pub fn healthy(&self) -> bool {
        self.seen_ready() && self.healthy.load(Relaxed)
    }

    /// The latest failure since the backend last answered (`None`: it
    /// answers, or nothing was tried yet).
    pub fn last_error(&self) -> Option<String> {
        if !self.has_error.load(Relaxed) {
            return None;
        }
        self.last_error
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_last_error(&self, error: Option<String>) {
        self.has_error.store(error.is_some(), Relaxed);
        *self.last_error.write().unwrap_or_else(|e| e.into_inner()) = error;
    }

    /// Why the backend takes no new requests (`None`: it does), for the
    /// "no backend" answer.
    pub fn unusable_reason(&self) -> Option<String> {
        let error = self.last_error();
        let reason = if self.draining() {
            "draining: it left discovery".to_string()
        } else if self.ejected() {
            format!(
                "ejected after failed requests: {}",
                error.as_deref().unwrap_or("transport failures")
            )
        } else if self.usable() {
            return None;
        } else if let Some(error) = error {
            error
        } else if !self.seen_ready() {
            "not checked yet".to_string()
        } else {
            "unhealthy".to_string()
        };
        Some(reason)
    }

    /// One active check's outcome. A warning is logged when the backend
    /// starts failing its checks (or fails them for another reason), an
    /// info line when it passes again; nothing on every pass.
    pub(super) fn record_check(&self, verdict: &Result<(), String>) {
        let mut failing = self.check_failure.lock().unwrap_or_else(|e| e.into_inner());
        match verdict {
            Ok(()) => {
                if let Some(previous) = failing.take() {
                    tracing::info!(backend = %self.addr, previous = %previous, "backend passes its checks again");
                }
                if !self.ejected() {
                    self.set_last_error(None);
                }
            }
            Err(why) => {
                self.missing.store(0, Relaxed);
                if failing.as_deref() != Some(why.as_str()) {
                    tracing::warn!(backend = %self.addr, error = %why, "backend check failed; no traffic until it passes");
                    *failing = Some(why.clone());
                }
                self.set_last_error(Some(why.clone()));
            }
        }
    }

    /// The backend answered `rpc` with `UNIMPLEMENTED` (since its last
    /// failed check).
    pub fn lacks(&self, rpc: OptionalRpc) -> bool {
        self.missing.load(Relaxed) & rpc.bit() != 0
    }

    /// The backend answered `rpc` with `UNIMPLEMENTED`: it is not called
    /// there again (until the backend fails a check).
    pub(super) fn record_missing(&self, rpc: OptionalRpc) {
        if self.missing.fetch_or(rpc.bit(), Relaxed) & rpc.bit() == 0 {
            tracing::info!(backend = %self.addr, rpc = rpc.name(), "backend does not implement the RPC; not calling it there again");
        }
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Relaxed)
    }

    pub(super) fn set_draining(&self) {
        self.draining.store(true, Relaxed);
    }

    /// The active check's verdict after its thresholds (pingora starts
    /// every backend healthy, so this mirrors it from `true`).
    pub(super) fn set_healthy(&self, healthy: bool) {
        self.healthy.store(healthy, Relaxed);
    }

    /// A readiness check passed: the backend may get traffic from now on
    /// (public for `benches/pick.rs`, whose backends are never checked).
    pub fn mark_seen_ready(&self) {
        if !self.seen_ready.swap(true, Relaxed) {
            tracing::info!(backend = %self.addr, "backend seen ready");
        }
    }

    /// Not known to lack `model` (checked in place: no clone on the hot path).
    pub fn may_serve(&self, model: &str) -> bool {
        self.models
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .may_serve(model)
    }

    pub fn models(&self) -> Arc<Models> {
        self.models
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn set_models(&self, models: Models) {
        *self.models.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(models);
        self.models_refreshed_ms.store(self.now_ms(), Relaxed);
    }

    /// The models were never fetched, or not for `every`.
    pub fn models_due(&self, every: Duration) -> bool {
        match self.models_refreshed_ms.load(Relaxed) {
            u64::MAX => true,
            at => self.now_ms().saturating_sub(at) >= every.as_millis() as u64,
        }
    }

    /// A real request failed in a way that blames the backend (refused,
    /// reset, the gateway's own deadline passed; `why` says which): after
    /// `threshold` in a row the backend is ejected for `eject`. Returns
    /// whether this failure ejected the backend.
    pub(super) fn record_failure(&self, threshold: usize, eject: Duration, why: String) -> bool {
        let failures = self.consecutive_failures.fetch_add(1, Relaxed) + 1;
        let ejected = failures >= threshold;
        if ejected {
            let until = (self.now_ms() + eject.as_millis() as u64).max(1);
            self.ejected_until_ms.store(until, Relaxed);
            self.consecutive_failures.store(0, Relaxed);
            tracing::warn!(backend = %self.addr, failures, error = %why, "backend ejected after failed requests");
        }
        self.set_last_error(Some(why));
        ejected
    }

    /// A request reached the backend and got an answer (even an error one).
    pub(super) fn record_success(&self) {
        if self.has_error.load(Relaxed) {
            self.set_last_error(None);
        }
        if self.consecutive_failures.load(Relaxed) != 0 {
            self.consecutive_failures.store(0, Relaxed);
        }
        if self.ejected_until_ms.load(Relaxed) != 0 && !self.ejected() {
            self.ejected_until_ms.store(0, Relaxed);
        }
    }
}

/// A backend chosen for one request: counts as in flight until dropped.
pub struct Lease {
    backend: Arc<Backend>,
}

impl Lease {
    pub(super) fn new(backend: Arc<Backend>) -> Lease {
        backend.inflight.fetch_add(1, Relaxed);
        Lease { backend }
    }

    pub fn backend(&self) -> &Arc<Backend> {
        &self.backend
    }

    pub fn addr(&self) -> SocketAddr {
        self.backend.addr
    }

    pub(crate) fn client(&self) -> Client {
        self.backend.client()
    }

    pub(crate) fn raw(&self) -> RawClient {
        self.backend.raw()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.backend.inflight.fetch_sub(1, Relaxed);
        self.backend.served.fetch_add(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> Backend {
        let settings = Arc::new(UpstreamSettings::for_tests());
        Backend::new("127.0.0.1:9".parse().unwrap(), settings)
    }

    #[test]
    fn a_backend_never_seen_ready_is_not_healthy_and_says_why() {
        let b = backend();
        assert!(!b.healthy());
        assert_eq!(b.unusable_reason().as_deref(), Some("not checked yet"));
        b.record_check(&Err("health check failed: connection refused".into()));
        assert!(!b.healthy());
        assert_eq!(
            b.last_error().as_deref(),
            Some("health check failed: connection refused")
        );
        assert_eq!(
            b.unusable_reason().as_deref(),
            Some("health check failed: connection refused")
        );
        b.record_check(&Ok(()));
        b.mark_seen_ready();
        assert!(b.healthy() && b.usable());
        assert_eq!((b.last_error(), b.unusable_reason()), (None, None));
    }

    #[test]
    fn a_missing_rpc_is_remembered_until_a_check_fails() {
        let b = backend();
        b.record_missing(OptionalRpc::ModelConfig);
        assert!(b.lacks(OptionalRpc::ModelConfig));
        assert!(!b.lacks(OptionalRpc::ModelMetadata));
        b.record_check(&Ok(()));
        assert!(b.lacks(OptionalRpc::ModelConfig));
        b.record_check(&Err("health check failed: connection refused".into()));
        assert!(!b.lacks(OptionalRpc::ModelConfig));
    }

    #[test]
    fn a_report_counts_while_fresh_and_not_after() {
        // Stale after the default 1.5 s.
        let settings = UpstreamSettings::for_tests_with_reports();
        let b = Backend::new("127.0.0.1:9".parse().unwrap(), Arc::new(settings));
        let now = Instant::now();
        assert_eq!((b.reported_pending(now), b.report()), (0, None));
        b.record_report(7);
        assert_eq!(b.reported_pending(Instant::now()), 7);
        let report = b.report().expect("a report");
        assert_eq!((report.pending, report.fresh), (7, true));
        let later = Instant::now() + Duration::from_millis(1600);
        assert_eq!(b.reported_pending(later), 0);
        // A failed read keeps the last report (until it is stale).
        b.report_failed("metrics at 127.0.0.1:8002: cannot connect".into());
        assert_eq!(b.reported_pending(Instant::now()), 7);
        assert!(b.report_error().is_some());
        b.record_report(u64::MAX);
        assert_eq!(b.reported_pending(Instant::now()), (1 << 24) - 1);
        assert_eq!(b.report_error(), None);
    }

    #[test]
    fn ejection_names_the_failure_until_the_backend_answers() {
        let b = backend();
        b.mark_seen_ready();
        let eject = Duration::from_secs(60);
        assert!(!b.record_failure(2, eject, "connection reset".into()));
        assert!(b.record_failure(2, eject, "connection refused".into()));
        assert_eq!(
            b.unusable_reason().as_deref(),
            Some("ejected after failed requests: connection refused")
        );
        // A passing check does not end an ejection, nor hide its cause.
        b.record_check(&Ok(()));
        assert_eq!(b.last_error().as_deref(), Some("connection refused"));
        b.record_success();
        assert_eq!(b.last_error(), None);
    }
}
