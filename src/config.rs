//! Typed configuration: a TOML file (see `config/tensorgate.toml`), then
//! command-line overrides, validated as a whole before any port is bound.
//! Every default is a named constant with the reason beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod admission;
mod auth;
mod connections;
mod generate;
mod load_report;
mod openai;
mod routes;
mod shared_memory;
pub use admission::Admission;
pub(crate) use auth::SECRET_SHOWN;
pub use auth::{ApiKey, Auth, Group, RestrictedApi};
pub use connections::Connections;
pub use generate::Generate;
pub use load_report::LoadReport;
pub use openai::{Backend as OpenAiBackend, OpenAi, OpenAiModel, DEFAULT_MAX_TOKENS};
pub use routes::{
    glob_match, FrontKind, HeaderMatch, MirrorRule, ModelPattern, RouteRule, DEFAULT_GROUP,
};
pub use shared_memory::{Mode as SharedMemoryMode, SharedMemory};
pub mod v1;

/// Triton's own default HTTP port, so clients need no change.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8000";
/// Triton's default gRPC port.
pub const DEFAULT_UPSTREAM: &str = "127.0.0.1:8001";
/// Triton's `--http-max-input-size` default (2.59+): 64 MiB.
pub const DEFAULT_MAX_INPUT_SIZE: usize = 64 << 20;
/// Whole HTTP body: room for two 64 MiB binary tensors plus their header.
pub const DEFAULT_MAX_BODY_SIZE: usize = 256 << 20;
/// A body streamed upstream (binary, 4 MiB or more, or chunked) costs the
/// gateway about 1 MiB whatever its size, so only gRPC bounds it: a
/// message's length is 4 bytes. The upstream's own maximum still applies
/// (Triton's: 2 GiB), with its own error.
pub const DEFAULT_MAX_STREAMED_BODY_SIZE: usize = u32::MAX as usize;
/// Triton 2.58+ rejects deeper JSON; deeper input is only an attack.
pub const DEFAULT_MAX_JSON_DEPTH: usize = 100;
/// Triton 2.69+ caps chunked uploads at 65536 non-empty chunks.
pub const DEFAULT_MAX_CHUNKS: usize = 65536;
/// gRPC messages both ways: a 64 MiB tensor (plus framing) must pass, with
/// room for batches; tonic's 4 MiB default would refuse them.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 512 << 20;
/// Connecting to a healthy upstream on a LAN takes milliseconds.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 3_000;
/// Inference can be slow (large models, queues); a request is cut after this.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 60_000;
/// Model signatures rarely change; load/unload through us invalidates anyway.
pub const DEFAULT_MODEL_INFO_TTL_MS: u64 = 5_000;
/// Re-resolving names this often follows a Kubernetes headless service
/// closely (pods appear within seconds) at negligible DNS cost.
pub const DEFAULT_DISCOVERY_INTERVAL_MS: u64 = 5_000;
/// Model placement changes only on load/unload (which we refresh at once)
/// or on repository polling, which Triton does at most every few seconds.
pub const DEFAULT_MODEL_REFRESH_MS: u64 = 5_000;
/// Three attempts reach a healthy backend even when two are freshly dead.
pub const DEFAULT_MAX_ATTEMPTS: usize = 3;
/// A `ServerReady` every second notices a dead backend within ~2 s.
pub const DEFAULT_HEALTH_INTERVAL_MS: u64 = 1_000;
/// A ready server answers `ServerReady` in well under a millisecond.
pub const DEFAULT_HEALTH_TIMEOUT_MS: u64 = 1_000;
/// One good check brings a backend back: recovery should be quick.
pub const DEFAULT_HEALTHY_THRESHOLD: usize = 1;
/// Two failed checks in a row mark it down: one lost packet is not enough.
pub const DEFAULT_UNHEALTHY_THRESHOLD: usize = 2;
/// Consecutive transport failures of real requests that eject a backend
/// before the active check notices.
pub const DEFAULT_EJECT_AFTER_FAILURES: usize = 3;
/// How long a passively ejected backend is skipped before it is tried again.
pub const DEFAULT_EJECT_MS: u64 = 5_000;
/// A 256 MiB body takes seconds on a slow link; a minute is generous and
/// still ends a slow-body (slowloris) attack.
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 60_000;
/// Kubernetes sends SIGKILL 30 s after SIGTERM; finish well before.
pub const DEFAULT_GRACE_PERIOD_SECONDS: u64 = 10;
/// Server metadata is the upstream's: stock clients (NVIDIA's examples,
/// Triton's own client tests) check that `name` is `triton`.
pub const DEFAULT_ANNOUNCE_GATEWAY: bool = false;
/// One worker thread per core of the small machines gateways run on.
pub const DEFAULT_THREADS: usize = 2;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: Server,
    pub connections: Connections,
    /// The group `default` (when given, or when `upstreams` is empty).
    pub upstream: Upstream,
    /// Named upstream groups besides `default`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub upstreams: BTreeMap<String, Upstream>,
    /// The rules that send each request to a group, first match wins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteRule>,
    /// `[upstream]` was not written beside `[upstreams]` (nor
    /// `--upstream` given): then there is no group `default` but one
    /// `[upstreams.default]` defines.
    #[serde(skip)]
    pub upstream_omitted: bool,
    pub limits: Limits,
    pub http: Http,
    pub grpc: Grpc,
    pub admin: Admin,
    pub log: Log,
    pub auth: Auth,
    pub tls: Tls,
    pub generate: Generate,
    pub shared_memory: SharedMemory,
    pub v1: v1::V1,
    pub openai: OpenAi,
}

/// HTTPS (h1 and h2 by ALPN) beside the plain listener.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tls {
    /// `IP:PORT` of the HTTPS listener; unset: no HTTPS.
    pub listen: Option<String>,
    /// PEM certificate chain and private key.
    pub cert_file: Option<std::path::PathBuf>,
    pub key_file: Option<std::path::PathBuf>,
    /// How often the files are looked at for a renewed certificate.
    pub reload_check_ms: u64,
}

impl Default for Tls {
    fn default() -> Tls {
        Tls {
            listen: None,
            cert_file: None,
            key_file: None,
            // Renewals are rare; noticing one within seconds is plenty.
            reload_check_ms: 5_000,
        }
    }
}

/// TLS (and mutual TLS) toward the upstream backends.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamTls {
    /// PEM CA certificate(s) that sign the backends' certificates.
    pub ca_file: Option<std::path::PathBuf>,
    /// PEM client certificate and key (mutual TLS).
    pub cert_file: Option<std::path::PathBuf>,
    pub key_file: Option<std::path::PathBuf>,
    /// The name checked in the backends' certificates (default: the host
    /// of each address, which is an IP after discovery).
    pub domain: Option<String>,
    /// Use TLS even without a CA file (system roots are not loaded: set
    /// `ca_file` for private CAs).
    pub enabled: bool,
}

impl UpstreamTls {
    pub fn active(&self) -> bool {
        self.enabled || self.ca_file.is_some() || self.cert_file.is_some()
    }
}

/// Logging: `tracing` to stderr.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// `tracing` filter (`info`, `tensorgate=debug`, ...); the environment
    /// variable `TENSORGATE_LOG` wins over it.
    pub level: String,
    pub format: LogFormat,
    /// One `tensorgate::access` line per request (never tensor bytes).
    pub access_log: bool,
    /// An OpenTelemetry collector (OTLP/gRPC, e.g. `http://127.0.0.1:4317`)
    /// that receives one span per request; unset: no export.
    pub otlp_endpoint: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl Default for Log {
    fn default() -> Log {
        Log {
            level: "info".to_string(),
            format: LogFormat::Text,
            access_log: true,
            otlp_endpoint: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    pub listen: String,
    pub threads: usize,
    pub grace_period_seconds: u64,
    /// Server metadata (`GET /v2`, gRPC `ServerMetadata`) names the gateway
    /// (`tensorgate` and its version) instead of the upstream server.
    pub announce_gateway: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Upstream {
    /// The group's backends, `HOST:PORT` each. Names are re-resolved every
    /// `discovery_interval_ms`; every address a name resolves to is a
    /// backend (a Kubernetes headless service gives one per pod).
    pub addresses: Vec<String>,
    pub discovery_interval_ms: u64,
    pub balance: Balance,
    pub connect_timeout_ms: u64,
    /// The longest deadline of an upstream call; a request's own `timeout`
    /// parameter (microseconds) can only shorten it.
    pub request_timeout_ms: u64,
    pub max_message_bytes: usize,
    pub model_info_ttl_ms: u64,
    pub model_refresh_ms: u64,
    /// Repository load/unload (and other server-wide changes) go to every
    /// backend; `false` sends them to one.
    pub fanout_repository: bool,
    /// Attempts of a request whose earlier attempts provably never reached
    /// a backend (connection refused). Sequence requests are never retried.
    pub max_attempts: usize,
    pub health: Health,
    /// The backends' own queues, read from their metrics, added to the
    /// in-flight counts the picks compare (off by default).
    pub load_report: LoadReport,
    pub tls: UpstreamTls,
    /// How many inference calls the group takes at once, the queue
    /// beyond, priorities and deadlines (`[upstream.admission]`).
    pub admission: Admission,
}

/// How a backend is chosen for a request without a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    #[default]
    RoundRobin,
    /// The backend with the fewest requests in flight.
    LeastOutstanding,
    /// The less loaded of two backends drawn at random.
    PowerOfTwo,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Health {
    pub interval_ms: u64,
    pub timeout_ms: u64,
    pub healthy_threshold: usize,
    pub unhealthy_threshold: usize,
    pub eject_after_failures: usize,
    pub eject_ms: u64,
}

/// The admin listener: `GET /metrics` (Prometheus), `GET /health`,
/// `GET /backends`. Kept off the client port so it can stay private.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Admin {
    /// `IP:PORT`; unset: no admin listener.
    pub listen: Option<String>,
}

/// The gRPC passthrough listener (`inference.GRPCInferenceService`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Grpc {
    /// `IP:PORT` to accept gRPC clients on (h2c); unset: no gRPC listener.
    pub listen: Option<String>,
    /// h2 over TLS instead of h2c, with `tls.cert_file` / `tls.key_file`.
    pub tls: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub max_input_size: usize,
    pub max_body_size: usize,
    /// The same for a body streamed upstream as it arrives, and for a
    /// gRPC passthrough `ModelInfer` message relayed as it arrives.
    pub max_streamed_body_size: usize,
    pub max_json_depth: usize,
    pub max_chunks: usize,
    /// Requests per second per client (API key, else IP); 0: no limit.
    pub rate_per_client: u64,
    /// Requests in flight per client; 0: no limit.
    pub concurrency_per_client: u64,
    /// Requests in flight in the whole gateway (503 above); 0: no limit.
    pub max_inflight: u64,
    /// The whole request body must arrive within this (408 after it), so
    /// a client trickling bytes cannot hold a connection and a buffer.
    pub body_timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Http {
    /// Like Triton's `--http-header-forward-pattern`: matching request
    /// headers become string parameters of the inference request.
    pub header_forward_pattern: Option<String>,
    /// Health answers with the Open Inference Protocol's JSON bodies
    /// (`{"live":true}`, `{"ready":true}`) instead of Triton's empty ones:
    /// KServe's `InferenceRESTClient.is_server_live` needs them.
    pub oip_health_bodies: bool,
}

impl Default for Server {
    fn default() -> Server {
        Server {
            listen: DEFAULT_LISTEN.to_string(),
            threads: DEFAULT_THREADS,
            grace_period_seconds: DEFAULT_GRACE_PERIOD_SECONDS,
            announce_gateway: DEFAULT_ANNOUNCE_GATEWAY,
        }
    }
}

impl Default for Upstream {
    fn default() -> Upstream {
        Upstream {
            addresses: vec![DEFAULT_UPSTREAM.to_string()],
            discovery_interval_ms: DEFAULT_DISCOVERY_INTERVAL_MS,
            balance: Balance::default(),
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            model_info_ttl_ms: DEFAULT_MODEL_INFO_TTL_MS,
            model_refresh_ms: DEFAULT_MODEL_REFRESH_MS,
            fanout_repository: true,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            health: Health::default(),
            load_report: LoadReport::default(),
            tls: UpstreamTls::default(),
            admission: Admission::default(),
        }
    }
}

impl Default for Health {
    fn default() -> Health {
        Health {
            interval_ms: DEFAULT_HEALTH_INTERVAL_MS,
            timeout_ms: DEFAULT_HEALTH_TIMEOUT_MS,
            healthy_threshold: DEFAULT_HEALTHY_THRESHOLD,
            unhealthy_threshold: DEFAULT_UNHEALTHY_THRESHOLD,
            eject_after_failures: DEFAULT_EJECT_AFTER_FAILURES,
            eject_ms: DEFAULT_EJECT_MS,
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_input_size: DEFAULT_MAX_INPUT_SIZE,
            max_body_size: DEFAULT_MAX_BODY_SIZE,
            max_streamed_body_size: DEFAULT_MAX_STREAMED_BODY_SIZE,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_chunks: DEFAULT_MAX_CHUNKS,
            rate_per_client: 0,
            concurrency_per_client: 0,
            max_inflight: 0,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
        }
    }
}

impl Limits {
    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }
}

impl Upstream {
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub fn model_info_ttl(&self) -> Duration {
        Duration::from_millis(self.model_info_ttl_ms)
    }

    /// Checks every address is `HOST:PORT` (names resolve later, often)
    /// and every count and time is above 0; `table` names the table in
    /// the messages (`upstream`, `upstreams.NAME`).
    fn validate(&self, table: &str) -> Result<(), String> {
        if self.addresses.is_empty() {
            return Err(format!(
                "{table}.addresses must list at least one HOST:PORT"
            ));
        }
        for address in &self.addresses {
            match address.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
                _ => {
                    return Err(format!(
                        "{table}.addresses: each must be HOST:PORT, got {address:?}"
                    ))
                }
            }
        }
        let h = &self.health;
        let positive = [
            ("max_attempts", self.max_attempts as u64),
            ("discovery_interval_ms", self.discovery_interval_ms),
            ("model_refresh_ms", self.model_refresh_ms),
            ("max_message_bytes", self.max_message_bytes as u64),
            ("request_timeout_ms", self.request_timeout_ms),
            ("connect_timeout_ms", self.connect_timeout_ms),
            ("health.interval_ms", h.interval_ms),
            ("health.timeout_ms", h.timeout_ms),
            ("health.healthy_threshold", h.healthy_threshold as u64),
            ("health.unhealthy_threshold", h.unhealthy_threshold as u64),
            ("health.eject_after_failures", h.eject_after_failures as u64),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{table}.{name} must be greater than 0"));
        }
        self.admission.validate(table)?;
        self.load_report.validate(table, self.balance)
    }
}

impl Health {
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn eject(&self) -> Duration {
        Duration::from_millis(self.eject_ms)
    }
}

impl Config {
    /// Reads and parses a TOML file (not yet validated).
    pub fn from_file(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        Config::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses a TOML text (not yet validated): each rule of `[[routes]]`
    /// keeps its line, for the messages of its mistakes.
    pub fn from_toml(text: &str) -> Result<Config, String> {
        let mut config: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        /// The document's tables as written, for what the typed form
        /// cannot say: which tables were given, and where.
        #[derive(Deserialize)]
        struct Written {
            upstream: Option<toml::Value>,
            #[serde(default)]
            routes: Vec<toml::Spanned<toml::Value>>,
        }
        let written: Written = toml::from_str(text).map_err(|e| e.to_string())?;
        // Without `[upstreams]`, `[upstream]` is the group, written or not.
        config.upstream_omitted = written.upstream.is_none() && !config.upstreams.is_empty();
        for (rule, spanned) in config.routes.iter_mut().zip(&written.routes) {
            let start = spanned.span().start.min(text.len());
            rule.line = routes::Line(Some(text[..start].matches('\n').count() + 1));
        }
        Ok(config)
    }

    /// Every upstream group by name: `[upstreams.NAME]`, and `default`
    /// (`[upstream]`) when it was given or no other group is.
    pub fn groups(&self) -> BTreeMap<&str, &Upstream> {
        let mut groups: BTreeMap<&str, &Upstream> = self
            .upstreams
            .iter()
            .map(|(name, group)| (name.as_str(), group))
            .collect();
        if !self.upstream_omitted {
            groups.insert(DEFAULT_GROUP, &self.upstream);
        }
        groups
    }

    /// The largest message any group takes: what the gRPC front accepts
    /// before it knows where a message goes (each group's own limit holds
    /// for its calls).
    pub fn max_message_bytes(&self) -> usize {
        self.groups()
            .values()
            .map(|group| group.max_message_bytes)
            .max()
            .unwrap_or(self.upstream.max_message_bytes)
    }

    /// The groups and the rules: `default` defined once, each group
    /// valid, the rules naming groups that exist.
    fn validate_groups(&self) -> Result<(), String> {
        if !self.upstream_omitted && self.upstreams.contains_key(DEFAULT_GROUP) {
            return Err(format!(
                "[upstream] is the group {DEFAULT_GROUP:?}: [upstreams.{DEFAULT_GROUP}] defines it a second time"
            ));
        }
        for (name, group) in self.groups() {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "upstreams.{name}: a group's name is letters, digits, '_' and '-'"
                ));
            }
            let table = match name {
                DEFAULT_GROUP if !self.upstreams.contains_key(name) => "upstream".to_string(),
                _ => format!("upstreams.{name}"),
            };
            group.validate(&table)?;
        }
        let names: BTreeSet<&str> = self.groups().into_keys().collect();
        routes::validate(&self.routes, &names)
    }

    /// The configuration as TOML that [`Config::from_toml`] reads back to
    /// the same value: every section and every key with its value, defaults
    /// included, except optional keys that are unset (TOML has no null).
    /// `tensorgate check-config` prints it. `[upstream]` is left out when
    /// it is not a group (named groups only), so that it stays none.
    pub fn to_toml(&self) -> Result<String, String> {
        let mut value = toml::Table::try_from(self).map_err(|e| e.to_string())?;
        if self.upstream_omitted {
            value.remove("upstream");
        }
        toml::to_string(&value).map_err(|e| e.to_string())
    }

    /// The same configuration with its secrets (API keys, the values of
    /// restricted-API headers) replaced by `***`, to be shown or logged.
    pub fn without_secrets(&self) -> Config {
        let mut shown = self.clone();
        for key in &mut shown.auth.keys {
            key.key = SECRET_SHOWN.to_string();
        }
        for restricted in &mut shown.auth.restricted_api {
            restricted.value = SECRET_SHOWN.to_string();
        }
        shown
    }

    /// Checks everything that would otherwise fail after ports are bound.
    pub fn validate(&self) -> Result<(), String> {
        self.listen_addr()?;
        self.validate_groups()?;
        self.auth.validate()?;
        self.validate_tls()?;
        tracing_subscriber::EnvFilter::try_new(&self.log.level)
            .map_err(|e| format!("log.level is not a valid filter: {e}"))?;
        if let Some(listen) = &self.admin.listen {
            listen
                .parse::<SocketAddr>()
                .map_err(|_| format!("admin.listen must be IP:PORT, got {listen:?}"))?;
        }
        if let Some(listen) = &self.grpc.listen {
            listen
                .parse::<SocketAddr>()
                .map_err(|_| format!("grpc.listen must be IP:PORT, got {listen:?}"))?;
        }
        let positive = [
            ("server.threads", self.server.threads),
            ("limits.max_input_size", self.limits.max_input_size),
            ("limits.max_body_size", self.limits.max_body_size),
            (
                "limits.max_streamed_body_size",
                self.limits.max_streamed_body_size,
            ),
            ("limits.max_json_depth", self.limits.max_json_depth),
            ("limits.max_chunks", self.limits.max_chunks),
            (
                "limits.body_timeout_ms",
                self.limits.body_timeout_ms as usize,
            ),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be greater than 0"));
        }
        self.generate.validate()?;
        self.connections.validate()?;
        self.shared_memory.validate()?;
        if let Some(pattern) = &self.http.header_forward_pattern {
            regex::Regex::new(pattern)
                .map_err(|e| format!("http.header_forward_pattern is not a valid regex: {e}"))?;
        }
        self.v1.validate()?;
        self.openai.validate()?;
        Ok(())
    }

    /// Both TLS sides: the files are set and readable (that they parse
    /// and pair up is checked when the listeners are set up, before any
    /// port is bound: `server::run`).
    fn validate_tls(&self) -> Result<(), String> {
        let readable = |what: &str, path: &std::path::Path| {
            std::fs::read(path)
                .map(|_| ())
                .map_err(|e| format!("{what}: {}: {e}", path.display()))
        };
        if let Some(listen) = &self.tls.listen {
            listen
                .parse::<SocketAddr>()
                .map_err(|_| format!("tls.listen must be IP:PORT, got {listen:?}"))?;
            match (&self.tls.cert_file, &self.tls.key_file) {
                (Some(cert), Some(key)) => {
                    readable("tls", cert)?;
                    readable("tls", key)?;
                }
                _ => return Err("tls.listen needs tls.cert_file and tls.key_file".into()),
            }
        }
        if self.grpc.tls {
            match (&self.tls.cert_file, &self.tls.key_file) {
                (Some(cert), Some(key)) => {
                    readable("grpc.tls", cert)?;
                    readable("grpc.tls", key)?;
                }
                _ => return Err("grpc.tls needs tls.cert_file and tls.key_file".into()),
            }
        }
        let up = &self.upstream.tls;
        if up.cert_file.is_some() != up.key_file.is_some() {
            return Err("upstream.tls: cert_file and key_file go together".into());
        }
        for path in [&up.ca_file, &up.cert_file, &up.key_file]
            .into_iter()
            .flatten()
        {
            readable("upstream.tls", path)?;
        }
        Ok(())
    }

    pub fn listen_addr(&self) -> Result<SocketAddr, String> {
        self.server.listen.parse().map_err(|_| {
            format!(
                "server.listen must be IP:PORT, got {:?}",
                self.server.listen
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_parses_and_validates() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tensorgate.toml");
        let config = Config::from_file(&path).expect("example config parses");
        config.validate().expect("example config is valid");
        assert_eq!(config.limits.max_input_size, DEFAULT_MAX_INPUT_SIZE);
        assert_eq!(config.v1, v1::V1::default());
        // The commented values are the defaults.
        assert_eq!(config.connections, Connections::default());
        assert_eq!(config.server, Server::default());
        assert_eq!(config.auth, Auth::default());
        assert_eq!(config.shared_memory, SharedMemory::default());
        assert_eq!(config.openai.enabled, OpenAi::default().enabled);
        let triton = Config::from_toml(
            "[auth]\nrestricted_api = [\"model-repository,logging:admin-key=a=b\"]",
        )
        .expect("Triton's form");
        assert_eq!(
            triton.auth.restricted_api,
            [RestrictedApi {
                groups: vec![Group::ModelRepository, Group::Logging],
                header: "admin-key".into(),
                value: "a=b".into(),
            }]
        );
    }

    /// The example's commented groups and routes, uncommented, are a valid
    /// configuration, and so is the shape a new user copies from the docs.
    #[test]
    fn the_commented_routing_example_parses_and_validates() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tensorgate.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let start = text.find("# [upstreams.stable]").expect("the example");
        let block: String = text[start..]
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or("")))
            .collect();
        let config = Config::from_toml(&block).expect("the example parses");
        config.validate().expect("the example is valid");
        assert_eq!(config.routes.len(), 1);
        let mirror = config.routes[0].mirror.as_ref().expect("a mirror");
        assert_eq!((mirror.group.as_str(), mirror.percent), ("shadow", 100.0));
        assert_eq!(config.routes[0].line.0, Some(8));
        // No [upstream] beside [upstreams]: no group "default".
        assert!(!config.groups().contains_key(DEFAULT_GROUP));
        let written = r#"
[upstreams.stable]
addresses = ["triton-a:8001"]
[upstreams.canary]
addresses = ["triton-b:8001"]
[upstreams.shadow]
addresses = ["triton-c:8001"]

[[routes]]                      # first match wins
models = ["add_sub", "resnet*"] # globs; absent: any model
split = { stable = 90, canary = 10 }
sticky_header = "x-session-id"  # the split's key (a sequence_id always sticks)
mirror = { group = "shadow", percent = 100 }

[[routes]]
models = ["classifier"]
header = { name = "x-tenant", value = "blue" }
group = "canary"
upstream_model = "classifier_v2"
"#;
        let config = Config::from_toml(written).expect("parses as written");
        config.validate().expect("valid as written");
        assert_eq!(config.routes[1].line.0, Some(15));
    }

    /// The benchmark's ten rules (scripts/bench-instructions) are valid.
    #[test]
    fn the_benchmarks_routes_are_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/routes-10.toml");
        let text = std::fs::read_to_string(path)
            .unwrap()
            .replace("@UPSTREAM@", "127.0.0.1:1");
        let mut config = Config::from_toml(&text).expect("parses");
        // The benchmark's --upstream is the group `default`.
        config.upstream_omitted = false;
        config.validate().expect("valid");
        assert_eq!(config.routes.len(), 10);
        assert!(config.groups().contains_key(DEFAULT_GROUP));
    }

    #[test]
    fn the_printed_config_reads_back_the_same_without_its_secrets() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tensorgate.toml");
        let example = Config::from_file(&path).expect("example config parses");
        let printed = example.to_toml().expect("prints");
        assert_eq!(Config::from_toml(&printed), Ok(example));
        let text = "[auth]\nrestricted_api = [\"logging:admin-key=secret\"]\n\
                    [[auth.keys]]\nkey = \"k3y\"\ngroups = [\"inference\"]\n\
                    [admin]\nlisten = \"127.0.0.1:9000\"\n";
        let config = Config::from_toml(text).expect("parses");
        let printed = config.to_toml().expect("prints");
        assert_eq!(Config::from_toml(&printed).as_ref(), Ok(&config));
        let shown = config.without_secrets().to_toml().expect("prints");
        assert!(
            !shown.contains("secret") && !shown.contains("k3y"),
            "{shown}"
        );
        assert!(shown.contains("logging:admin-key=***"), "{shown}");
    }

    #[test]
    fn bad_values_are_refused_before_binding() {
        let bad = [
            "[server]\nlisten = \"nope\"",
            "[upstream]\naddresses = [\"no-port\"]",
            "[upstream]\naddresses = []",
            "[upstream]\nbalance = \"random\"",
            "[upstream.health]\nunhealthy_threshold = 0",
            "[upstream.load_report]\nenabled = true",
            "[upstream.load_report]\nintervl_ms = 500",
            "[upstream]\nbalance = \"least_outstanding\"\n[upstream.load_report]\nenabled = true\nstale_after_ms = 10",
            "[upstreams.a]\naddresses = [\"a:1\"]\n[upstreams.a.load_report]\nenabled = true",
            "[grpc]\nlisten = \"nope\"",
            "[log]\nformat = \"xml\"",
            "[tls]\nlisten = \"127.0.0.1:8443\"",
            "[grpc]\ntls = true",
            "[upstream.tls]\ncert_file = \"/nonexistent.pem\"",
            "[auth]\nopen_groups = [\"everything\"]",
            "[auth]\nkeys_file = \"/nonexistent/keys\"",
            "[auth]\nrestricted_api = [\"logging\"]",
            "[auth]\nrestricted_api = [\"logging:admin-key\"]",
            "[auth]\nrestricted_api = [\"logging:=x\"]",
            "[auth]\nrestricted_api = [\"everything:k=v\"]",
            "[auth]\nrestricted_api = [\"logging:k=v\", \"trace,logging:k=w\"]",
            "[log]\nlevel = \"=[\"",
            "[limits]\nmax_input_size = 0",
            "[http]\nheader_forward_pattern = \"(\"",
            "[server]\nunknown = 1",
            "[generate]\nstream_timeout_ms = 0",
            "[shared_memory]\nmode = \"map\"",
            "[shared_memory]\nmax_total_bytes = 0",
            "[v1]\npath_prefix = \"api/\"",
            "[openai]\ndefault_max_tokens = 0",
            "[openai]\nlisten = \"8080\"",
            "[openai.models.m]\nbackend = \"tgi\"",
            "[openai.models.m]\nchat_template = \"/nonexistent/tokenizer_config.json\"",
            "[openai.models.m]\nupstream_model = \"\"",
        ];
        for text in bad {
            let result = Config::from_toml(text).and_then(|c| c.validate());
            assert!(result.is_err(), "{text}");
        }
    }
}
