//! Typed configuration: a TOML file (see `config/tensorgate.toml`), then
//! command-line overrides, validated as a whole before any port is bound.
//! Every default is a named constant with the reason beside it.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

pub mod v1;

/// Triton's own default HTTP port, so clients need no change.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8000";
/// Triton's default gRPC port.
pub const DEFAULT_UPSTREAM: &str = "127.0.0.1:8001";
/// Triton's `--http-max-input-size` default (2.59+): 64 MiB.
pub const DEFAULT_MAX_INPUT_SIZE: usize = 64 << 20;
/// Whole HTTP body: room for two 64 MiB binary tensors plus their header.
pub const DEFAULT_MAX_BODY_SIZE: usize = 256 << 20;
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
/// Kubernetes sends SIGKILL 30 s after SIGTERM; finish well before.
pub const DEFAULT_GRACE_PERIOD_SECONDS: u64 = 10;
/// One worker thread per core of the small machines gateways run on.
pub const DEFAULT_THREADS: usize = 2;

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: Server,
    pub upstream: Upstream,
    pub limits: Limits,
    pub http: Http,
    pub v1: v1::V1,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    pub listen: String,
    pub threads: usize,
    pub grace_period_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Upstream {
    pub address: String,
    pub connect_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub max_message_bytes: usize,
    pub model_info_ttl_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub max_input_size: usize,
    pub max_body_size: usize,
    pub max_json_depth: usize,
    pub max_chunks: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
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
        }
    }
}

impl Default for Upstream {
    fn default() -> Upstream {
        Upstream {
            address: DEFAULT_UPSTREAM.to_string(),
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            model_info_ttl_ms: DEFAULT_MODEL_INFO_TTL_MS,
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_input_size: DEFAULT_MAX_INPUT_SIZE,
            max_body_size: DEFAULT_MAX_BODY_SIZE,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_chunks: DEFAULT_MAX_CHUNKS,
        }
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
}

impl Config {
    /// Reads and parses a TOML file (not yet validated).
    pub fn from_file(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        Config::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn from_toml(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Checks everything that would otherwise fail after ports are bound.
    pub fn validate(&self) -> Result<(), String> {
        self.listen_addr()?;
        let upstream = &self.upstream.address;
        match upstream.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
            _ => {
                return Err(format!(
                    "upstream.address must be HOST:PORT, got {upstream:?}"
                ))
            }
        }
        let positive = [
            ("server.threads", self.server.threads),
            ("limits.max_input_size", self.limits.max_input_size),
            ("limits.max_body_size", self.limits.max_body_size),
            ("limits.max_json_depth", self.limits.max_json_depth),
            ("limits.max_chunks", self.limits.max_chunks),
            (
                "upstream.max_message_bytes",
                self.upstream.max_message_bytes,
            ),
            (
                "upstream.request_timeout_ms",
                self.upstream.request_timeout_ms as usize,
            ),
            (
                "upstream.connect_timeout_ms",
                self.upstream.connect_timeout_ms as usize,
            ),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be greater than 0"));
        }
        if let Some(pattern) = &self.http.header_forward_pattern {
            regex::Regex::new(pattern)
                .map_err(|e| format!("http.header_forward_pattern is not a valid regex: {e}"))?;
        }
        self.v1.validate()?;
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
    }

    #[test]
    fn bad_values_are_refused_before_binding() {
        let bad = [
            "[server]\nlisten = \"nope\"",
            "[upstream]\naddress = \"no-port\"",
            "[limits]\nmax_input_size = 0",
            "[http]\nheader_forward_pattern = \"(\"",
            "[server]\nunknown = 1",
            "[v1]\npath_prefix = \"api/\"",
        ];
        for text in bad {
            let result = Config::from_toml(text).and_then(|c| c.validate());
            assert!(result.is_err(), "{text}");
        }
    }
}
