//! `[upstream.admission]` / `[upstreams.NAME.admission]`: how many inference
//! calls a group takes at once, how many may wait and for how long, and how
//! a waiting call's priority and deadline are read (`app::admission`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Waiting room beyond the limit: at 400 req/s (4 × 10 ms) a queue of 64
/// is 160 ms of work, a little over the default wait; past it a refusal at
/// once is worth more to a client than a place it would time out in.
pub(super) const DEFAULT_QUEUE_LENGTH: usize = 64;

/// The longest wait for a slot: a few service times of a typical model,
/// short beside a client's timeout, so a refusal comes while a retry
/// elsewhere can still help.
pub(super) const DEFAULT_QUEUE_TIMEOUT_MS: u64 = 100;

/// The level of a request that names none (Triton's priority 0): one level
/// above it (1) for urgent work without any configuration, levels below it
/// for background work.
pub(super) const DEFAULT_PRIORITY: u32 = 2;

/// Admission control of one upstream group. `max_concurrency = 0`: none
/// (every call goes on at once, the behaviour without the table).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Admission {
    /// Inference calls in flight toward the group; 0: no limit.
    pub max_concurrency: usize,
    /// Calls waiting for a slot; a call beyond it is refused at once (a
    /// higher-priority one takes the last waiter's place).
    pub queue_length: usize,
    /// The longest wait; a request's own shorter deadline wins.
    pub queue_timeout_ms: u64,
    /// A request header (gRPC metadata key) whose value is a Triton
    /// priority level, 1 the highest; Triton's `priority` request parameter
    /// wins over it, a route's `priority` yields to both.
    pub priority_header: Option<String>,
    /// The level of a request that names none (or names 0).
    pub default_priority: u32,
    /// A request header (gRPC metadata key) holding the request's deadline
    /// in milliseconds, beside Triton's `timeout` parameter and
    /// `grpc-timeout`; the shortest wins.
    pub deadline_header: Option<String>,
    /// `true`: `max_concurrency` is where the limit starts; it then follows
    /// the group's latency (`app::admission::adaptive`).
    pub adaptive: bool,
}

impl Default for Admission {
    fn default() -> Admission {
        Admission {
            max_concurrency: 0,
            queue_length: DEFAULT_QUEUE_LENGTH,
            queue_timeout_ms: DEFAULT_QUEUE_TIMEOUT_MS,
            priority_header: None,
            default_priority: DEFAULT_PRIORITY,
            deadline_header: None,
            adaptive: false,
        }
    }
}

impl Admission {
    /// Admission control is on.
    pub fn enabled(&self) -> bool {
        self.max_concurrency > 0
    }

    pub fn queue_timeout(&self) -> Duration {
        Duration::from_millis(self.queue_timeout_ms)
    }

    /// `table`: where the messages say the mistake is (`upstream`,
    /// `upstreams.NAME`).
    pub(super) fn validate(&self, table: &str) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        if self.default_priority == 0 {
            return Err(format!(
                "{table}.admission.default_priority must be 1 or more (1 is the highest level)"
            ));
        }
        if self.adaptive && self.max_concurrency < 2 {
            return Err(format!(
                "{table}.admission.adaptive needs max_concurrency of 2 or more to start from"
            ));
        }
        for (key, name) in [
            ("priority_header", &self.priority_header),
            ("deadline_header", &self.deadline_header),
        ] {
            if let Some(name) = name {
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
                if !valid {
                    return Err(format!(
                        "{table}.admission.{key} must be a header name, got {name:?}"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Admission {
        toml::from_str(text).expect("parses")
    }

    #[test]
    fn the_issue_s_table_is_accepted_as_written() {
        let a = parsed(
            r#"
max_concurrency = 4        # in flight toward the group; 0: no limit
queue_length = 64          # waiting beyond it: refused at once
queue_timeout_ms = 100     # longest wait; a request's own shorter deadline wins
priority_header = "x-priority"
adaptive = false
"#,
        );
        assert!(a.enabled());
        assert_eq!(a.max_concurrency, 4);
        assert_eq!(a.priority_header.as_deref(), Some("x-priority"));
        assert!(a.validate("upstream").is_ok());
    }

    #[test]
    fn off_by_default_and_mistakes_name_their_key() {
        assert!(!Admission::default().enabled());
        let bad = parsed("max_concurrency = 4\ndefault_priority = 0");
        assert!(bad
            .validate("upstreams.a")
            .unwrap_err()
            .contains("upstreams.a.admission.default_priority"));
        let bad = parsed("max_concurrency = 1\nadaptive = true");
        assert!(bad.validate("upstream").unwrap_err().contains("adaptive"));
        let bad = parsed("max_concurrency = 1\npriority_header = \"x prio\"");
        assert!(bad
            .validate("upstream")
            .unwrap_err()
            .contains("priority_header"));
        assert!(toml::from_str::<Admission>("max_concurency = 4").is_err());
    }
}
