//! The upstream side: a pool of KServe v2 gRPC backends (one upstream
//! group), per-request balancing, health, model placement, sticky
//! sequences, deadlines and safe retries. Knows nothing of HTTP or JSON.
//!
//! - `backend.rs`: one backend (channels, counters, what we know of it);
//! - `discovery.rs`: addresses and DNS names to backends;
//! - `pool.rs`: membership and the choice of a backend per request;
//! - `select.rs`: least outstanding and power of two choices;
//! - `health.rs`: active `ServerReady` checks, model refresh, the loop;
//! - `load_report.rs`: the backends' own queues read from their metrics
//!   (`[upstream.load_report]`), for the picks;
//! - `call.rs`: one call with deadline, passive ejection and retries;
//! - `rpc.rs`: each unary RPC by its request message, and the gateway's
//!   own unary calls;
//! - `encoded.rs`: `ModelInfer` requests sent without copying tensors;
//! - `reply.rs`: `ModelInfer` replies whose raw outputs are handed on as
//!   they arrive;
//! - `stream.rs`: a `ModelStreamInfer` stream, accounted as one call;
//! - `raw.rs`: calls whose reply is handed back undecoded (the
//!   passthrough's `ModelInfer`);
//! - `unary_reply.rs`: a raw call's one message and status, read as
//!   tonic's client reads them (the HTTP path's `ModelInfer`);
//! - `thread_slot.rs`: which request channel the calling thread uses;
//! - `model_info.rs`: the cache of model signatures.

pub(crate) mod backend;
pub(crate) mod call;
pub(crate) mod discovery;
pub(crate) mod encoded;
mod h2_transport;
pub(crate) mod health;
pub(crate) mod load_report;
pub(crate) mod model_info;
pub(crate) mod pool;
pub(crate) mod raw;
// pub: the fuzz target fuzz/fuzz_targets/infer_reply.rs walks replies
// with `reply::walk_frames`.
pub mod reply;
pub(crate) mod rpc;
pub(crate) mod select;
pub(crate) mod stream;
pub(crate) mod thread_slot;
mod transport;
mod unary_reply;

use std::time::Duration;

use crate::config::{self, Balance};
use crate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;

pub use backend::{Backend, Lease, Models, OptionalRpc, Report};
pub use load_report::LoadReportSettings;
pub use model_info::ModelCache;
pub use pool::{Pool, Target};

pub type Client = GrpcInferenceServiceClient<transport::Transport>;

/// Settings of the upstream group (from `config::Upstream`).
#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    pub addresses: Vec<String>,
    pub balance: Balance,
    pub discovery_interval: Duration,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_message_bytes: usize,
    pub model_refresh: Duration,
    pub max_attempts: usize,
    pub health_interval: Duration,
    pub health_timeout: Duration,
    pub healthy_threshold: usize,
    pub unhealthy_threshold: usize,
    pub eject_after_failures: usize,
    pub eject: Duration,
    /// The backends' load reports (`None`: off).
    pub load_report: Option<LoadReportSettings>,
    /// TLS toward the backends (`None`: plain h2c).
    pub tls: Option<tonic::transport::ClientTlsConfig>,
}

/// The tonic TLS settings from the (validated) files.
fn client_tls(c: &config::UpstreamTls) -> Option<tonic::transport::ClientTlsConfig> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    if !c.active() {
        return None;
    }
    let read = |p: &std::path::PathBuf| {
        std::fs::read(p)
            .inspect_err(
                |e| tracing::error!(file = %p.display(), error = %e, "cannot read a TLS file"),
            )
            .unwrap_or_default()
    };
    let mut tls = ClientTlsConfig::new();
    if let Some(ca) = &c.ca_file {
        tls = tls.ca_certificate(Certificate::from_pem(read(ca)));
    }
    if let (Some(cert), Some(key)) = (&c.cert_file, &c.key_file) {
        tls = tls.identity(Identity::from_pem(read(cert), read(key)));
    }
    if let Some(domain) = &c.domain {
        tls = tls.domain_name(domain.clone());
    }
    Some(tls)
}

impl UpstreamSettings {
    pub fn from_config(c: &config::Upstream) -> UpstreamSettings {
        UpstreamSettings {
            addresses: c.addresses.clone(),
            balance: c.balance,
            discovery_interval: Duration::from_millis(c.discovery_interval_ms),
            connect_timeout: c.connect_timeout(),
            request_timeout: c.request_timeout(),
            max_message_bytes: c.max_message_bytes,
            model_refresh: Duration::from_millis(c.model_refresh_ms),
            max_attempts: c.max_attempts,
            health_interval: c.health.interval(),
            health_timeout: c.health.timeout(),
            healthy_threshold: c.health.healthy_threshold,
            unhealthy_threshold: c.health.unhealthy_threshold,
            eject_after_failures: c.health.eject_after_failures,
            eject: c.health.eject(),
            load_report: LoadReportSettings::from_config(&c.load_report),
            tls: client_tls(&c.tls),
        }
    }

    #[cfg(test)]
    pub fn for_tests() -> UpstreamSettings {
        UpstreamSettings::from_config(&config::Upstream::default())
    }

    /// With load reports on, at their default intervals.
    #[cfg(test)]
    pub fn for_tests_with_reports() -> UpstreamSettings {
        let mut settings = UpstreamSettings::for_tests();
        settings.load_report = LoadReportSettings::from_config(&config::LoadReport {
            enabled: true,
            ..config::LoadReport::default()
        });
        settings
    }
}
