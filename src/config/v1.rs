//! `[v1]`: the legacy TensorRT Inference Server v1 HTTP API (`/api/...`),
//! served beside the v2 API for old clients.

use serde::{Deserialize, Serialize};

/// TRTIS's default `--id`; v1 clients print it in every error message.
pub const DEFAULT_SERVER_ID: &str = "inference:0";

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct V1 {
    /// A base path the v1 API is also served under (v1 clients keep the
    /// path of their server URL: `host:port/prefix` requests
    /// `/prefix/api/health/live`). Empty = only `/api/...`.
    pub path_prefix: String,
    /// `server_id` of every `NV-Status` and `id` of the server status.
    pub server_id: String,
}

impl Default for V1 {
    fn default() -> V1 {
        V1 {
            path_prefix: String::new(),
            server_id: DEFAULT_SERVER_ID.to_string(),
        }
    }
}

impl V1 {
    pub fn validate(&self) -> Result<(), String> {
        let prefix = &self.path_prefix;
        let valid = prefix.is_empty()
            || (prefix.starts_with('/')
                && !prefix.ends_with('/')
                && !prefix.contains(['?', '#', ' ']));
        if !valid {
            return Err(format!(
                "v1.path_prefix must be empty or start with '/' and not end with '/', got {prefix:?}"
            ));
        }
        if self.server_id.is_empty() || !self.server_id.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(format!(
                "v1.server_id must be non-empty printable ASCII, got {:?}",
                self.server_id
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let check = |p: &str| {
            V1 {
                path_prefix: p.into(),
                ..V1::default()
            }
            .validate()
            .is_ok()
        };
        assert!(check(""));
        assert!(check("/prefix"));
        assert!(check("/a/b"));
        assert!(!check("prefix"));
        assert!(!check("/prefix/"));
        assert!(!check("/p?x"));
    }
}
