//! `[shared_memory]`: what the gateway does with Triton's system shared
//! memory (`/v2/systemsharedmemory/...`). `forward` sends the calls to the
//! upstream (it must then share the client's host); `bridge` answers them
//! itself, for a gateway beside the client (docs/shared-memory.md).

use serde::{Deserialize, Serialize};

/// A client registers one region per input and output it keeps in shared
/// memory (NVIDIA's examples: 2–4); 64 leaves room for several clients of
/// one sidecar and still bounds the open files a client can make us hold.
pub(super) const DEFAULT_MAX_REGIONS: usize = 64;
/// Registered bytes cost the gateway nothing until read (no mapping: each
/// read copies the window it needs), but a request may read a whole region:
/// 1 GiB is room for the 2 × 64 MiB inputs of several clients in flight.
pub(super) const DEFAULT_MAX_TOTAL_BYTES: u64 = 1 << 30;
/// Where POSIX shared-memory objects live on Linux (glibc's `shm_open`
/// opens `/dev/shm/<key without its leading '/'>`).
pub(super) const DEFAULT_DIR: &str = "/dev/shm";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Today's behaviour: the shared-memory calls go to the upstream.
    #[default]
    Forward,
    /// The gateway keeps the regions and reads and writes them itself.
    Bridge,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SharedMemory {
    pub mode: Mode,
    /// Regions registered at once (bridge mode).
    pub max_regions: usize,
    /// Sum of the registered regions' `byte_size` (bridge mode).
    pub max_total_bytes: u64,
    /// Keys a client may register, by prefix (`"/tensorgate-"`); empty:
    /// any key the gateway's user can open (bridge mode).
    pub key_prefixes: Vec<String>,
    /// The directory of the shared-memory objects (bridge mode).
    pub dir: std::path::PathBuf,
}

impl Default for SharedMemory {
    fn default() -> SharedMemory {
        SharedMemory {
            mode: Mode::Forward,
            max_regions: DEFAULT_MAX_REGIONS,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            key_prefixes: Vec::new(),
            dir: DEFAULT_DIR.into(),
        }
    }
}

impl SharedMemory {
    pub fn bridged(&self) -> bool {
        self.mode == Mode::Bridge
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.max_regions == 0 {
            return Err("shared_memory.max_regions must be greater than 0".into());
        }
        if self.max_total_bytes == 0 {
            return Err("shared_memory.max_total_bytes must be greater than 0".into());
        }
        if let Some(bad) = self
            .key_prefixes
            .iter()
            .find(|p| !p.starts_with('/') || p.len() < 2 || p[1..].contains('/'))
        {
            return Err(format!(
                "shared_memory.key_prefixes: each must be '/' and a name without '/', got {bad:?}"
            ));
        }
        if self.bridged() && !self.dir.is_dir() {
            return Err(format!(
                "shared_memory.dir {} is not a directory (bridge mode needs it)",
                self.dir.display()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_prefixes() {
        let check = |s: SharedMemory| s.validate().is_ok();
        assert!(check(SharedMemory::default()));
        let prefixes = |p: &[&str]| SharedMemory {
            key_prefixes: p.iter().map(|s| s.to_string()).collect(),
            ..SharedMemory::default()
        };
        assert!(check(prefixes(&["/tensorgate-", "/job"])));
        for bad in ["tensorgate", "/", "/a/b", ""] {
            assert!(!check(prefixes(&[bad])), "{bad:?}");
        }
        assert!(!check(SharedMemory {
            max_regions: 0,
            ..SharedMemory::default()
        }));
        assert!(!check(SharedMemory {
            mode: Mode::Bridge,
            dir: "/nonexistent/shm".into(),
            ..SharedMemory::default()
        }));
    }
}
