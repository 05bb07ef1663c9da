//! `[upstream.load_report]` (and `[upstreams.NAME.load_report]`): balancing
//! that adds each backend's own queue, as its server reports it, to the
//! gateway's in-flight count. Triton reports its queue as
//! `nv_inference_pending_request_count` on its metrics endpoint (HTTP, its
//! own port, the same host as its gRPC address).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Balance;

/// Triton's `--metrics-port` default.
pub(super) const DEFAULT_METRICS_PORT: u16 = 8002;
/// Where Triton (prometheus-cpp) serves its metrics.
pub(super) const DEFAULT_METRICS_PATH: &str = "/metrics";
/// Twice a second: a queue that builds up within a second is seen while
/// it is still building, and a scrape of Triton's metrics (a few hundred
/// lines per model) costs the server next to nothing at that rate.
/// Triton's own metrics are refreshed every `--metrics-interval-ms`
/// (2 s by default): set that lower on the servers for fresher queues.
pub(super) const DEFAULT_INTERVAL_MS: u64 = 500;
/// A metrics endpoint on the LAN answers in milliseconds; one that takes
/// longer than half an interval is late, and its report is not waited for.
pub(super) const DEFAULT_TIMEOUT_MS: u64 = 250;
/// Three intervals: one lost or late scrape keeps the last report; a
/// backend whose reports stop is balanced by in-flight counts alone soon
/// after.
pub(super) const DEFAULT_STALE_AFTER_MS: u64 = 1_500;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadReport {
    /// Off by default: the picks are the in-flight counts alone.
    pub enabled: bool,
    /// The servers' metrics port (HTTP, on each backend's own address).
    pub metrics_port: u16,
    /// The path of the Prometheus text there.
    pub metrics_path: String,
    /// How often each backend's metrics are read.
    pub interval_ms: u64,
    /// The longest a read may take (connect, answer and body).
    pub timeout_ms: u64,
    /// A report older than this is not used: that backend is picked by
    /// its in-flight count alone, as without reports.
    pub stale_after_ms: u64,
}

impl Default for LoadReport {
    fn default() -> LoadReport {
        LoadReport {
            enabled: false,
            metrics_port: DEFAULT_METRICS_PORT,
            metrics_path: DEFAULT_METRICS_PATH.to_string(),
            interval_ms: DEFAULT_INTERVAL_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            stale_after_ms: DEFAULT_STALE_AFTER_MS,
        }
    }
}

impl LoadReport {
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn stale_after(&self) -> Duration {
        Duration::from_millis(self.stale_after_ms)
    }

    /// `table` names the group's table (`upstream`, `upstreams.NAME`).
    pub(super) fn validate(&self, table: &str, balance: Balance) -> Result<(), String> {
        let table = format!("{table}.load_report");
        let positive = [
            ("interval_ms", self.interval_ms),
            ("timeout_ms", self.timeout_ms),
            ("stale_after_ms", self.stale_after_ms),
            ("metrics_port", u64::from(self.metrics_port)),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{table}.{name} must be greater than 0"));
        }
        if !self.metrics_path.starts_with('/')
            || self
                .metrics_path
                .bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(format!(
                "{table}.metrics_path must be a path starting with '/', got {:?}",
                self.metrics_path
            ));
        }
        if self.stale_after_ms < self.interval_ms {
            return Err(format!(
                "{table}.stale_after_ms ({}) must be at least interval_ms ({}): every report would be stale before the next",
                self.stale_after_ms, self.interval_ms
            ));
        }
        if self.enabled && balance == Balance::RoundRobin {
            return Err(format!(
                "{table}.enabled needs balance = \"least_outstanding\" or \"power_of_two\" (round robin reads no load)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_off() {
        let report = LoadReport::default();
        assert!(!report.enabled);
        report
            .validate("upstream", Balance::RoundRobin)
            .expect("valid");
    }

    #[test]
    fn mistakes_name_the_key() {
        let cases = [
            (
                LoadReport {
                    enabled: true,
                    ..LoadReport::default()
                },
                Balance::RoundRobin,
                "upstream.load_report.enabled needs balance",
            ),
            (
                LoadReport {
                    interval_ms: 0,
                    ..LoadReport::default()
                },
                Balance::LeastOutstanding,
                "upstream.load_report.interval_ms must be greater than 0",
            ),
            (
                LoadReport {
                    stale_after_ms: 100,
                    ..LoadReport::default()
                },
                Balance::PowerOfTwo,
                "upstream.load_report.stale_after_ms (100) must be at least interval_ms (500)",
            ),
            (
                LoadReport {
                    metrics_path: "metrics".into(),
                    ..LoadReport::default()
                },
                Balance::PowerOfTwo,
                "upstream.load_report.metrics_path must be a path",
            ),
        ];
        for (report, balance, text) in cases {
            let error = report.validate("upstream", balance).expect_err(text);
            assert!(error.starts_with(text), "{error}");
        }
    }
}
