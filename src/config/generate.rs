//! The `[generate]` section: settings of `/generate` and `/generate_stream`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// An LLM may generate for minutes; `upstream.request_timeout_ms` (sized for
/// one inference) would cut long generations. Ten minutes bounds a stuck one.
pub(super) const DEFAULT_STREAM_TIMEOUT_MS: u64 = 600_000;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Generate {
    /// Deadline of a whole generation (the `ModelStreamInfer` call).
    pub stream_timeout_ms: u64,
}

impl Default for Generate {
    fn default() -> Generate {
        Generate {
            stream_timeout_ms: DEFAULT_STREAM_TIMEOUT_MS,
        }
    }
}

impl Generate {
    pub fn stream_timeout(&self) -> Duration {
        Duration::from_millis(self.stream_timeout_ms)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.stream_timeout_ms == 0 {
            return Err("generate.stream_timeout_ms must be greater than 0".to_string());
        }
        Ok(())
    }
}
