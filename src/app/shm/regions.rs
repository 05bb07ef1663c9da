//! The registry of one gateway process's system shared-memory regions
//! (bridge mode): register, status, unregister one or all, with Triton's
//! texts; limits on their number and total size; and [`Lease`]s, which hold
//! a region in use while a request reads or writes it. Regions close their
//! files when they are unregistered, or when the gateway (and with it this
//! registry) is dropped at exit; the objects themselves are the client's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use super::region::Region;
use crate::config::SharedMemory;
use crate::error::{Error, Kind, Result};

/// A region as its status shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegionStatus {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) offset: u64,
    pub(crate) byte_size: u64,
}

/// The registered regions, by name (sorted: status lists them as Triton
/// does, by name).
#[derive(Debug)]
pub(crate) struct Regions {
    dir: PathBuf,
    max_regions: usize,
    max_total_bytes: u64,
    key_prefixes: Vec<String>,
    map: Mutex<BTreeMap<String, Arc<Region>>>,
}

/// A region held in use by one request, with the part of its window the
/// request named. While a lease lives, the region cannot be unregistered
/// (Triton's "currently in use").
#[derive(Debug)]
pub(crate) struct Lease {
    region: Arc<Region>,
    at: u64,
    len: usize,
}

impl Regions {
    pub(crate) fn new(config: &SharedMemory) -> Regions {
        Regions {
            dir: config.dir.clone(),
            max_regions: config.max_regions,
            max_total_bytes: config.max_total_bytes,
            key_prefixes: config.key_prefixes.clone(),
            map: Mutex::default(),
        }
    }

    fn map(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Region>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `name` as `[offset, offset + byte_size)` of the object
    /// `key`. The checks in Triton's order (name taken, then the object),
    /// then the gateway's own: allowed key, number and total size.
    pub(crate) fn register(
        &self,
        name: &str,
        key: &str,
        offset: u64,
        byte_size: u64,
    ) -> Result<()> {
        if !self.key_prefixes.is_empty() && !self.key_prefixes.iter().any(|p| key.starts_with(p)) {
            return Err(Error::new(
                Kind::Forbidden,
                format!(
                    "shared memory key '{key}' is not allowed by this gateway (shared_memory.key_prefixes)"
                ),
            ));
        }
        let mut map = self.map();
        if map.contains_key(name) {
            return Err(Error::new(
                Kind::ClientOther(tonic::Code::AlreadyExists),
                format!("shared memory region '{name}' already in manager"),
            ));
        }
        if map.len() >= self.max_regions {
            return Err(Error::invalid(format!(
                "failed to register shared memory region '{name}': the gateway holds {} regions, its limit (shared_memory.max_regions)",
                map.len()
            )));
        }
        let total: u64 = map.values().map(|r| r.byte_size).sum();
        match total.checked_add(byte_size) {
            Some(sum) if sum <= self.max_total_bytes => {}
            _ => {
                return Err(Error::invalid(format!(
                    "failed to register shared memory region '{name}': {byte_size} more bytes would pass the gateway's limit of {} registered bytes (shared_memory.max_total_bytes; {total} registered)",
                    self.max_total_bytes
                )))
            }
        }
        let region = Region::open(&self.dir, name, key, offset, byte_size)?;
        map.insert(name.to_string(), Arc::new(region));
        Ok(())
    }

    /// Every region (`name` empty), or the one named.
    pub(crate) fn status(&self, name: &str) -> Result<Vec<RegionStatus>> {
        let map = self.map();
        let status = |r: &Region| RegionStatus {
            name: r.name.clone(),
            key: r.key.clone(),
            offset: r.offset,
            byte_size: r.byte_size,
        };
        if name.is_empty() {
            return Ok(map.values().map(|r| status(r)).collect());
        }
        match map.get(name) {
            Some(r) => Ok(vec![status(r)]),
            None => Err(Error::not_found(format!(
                "Unable to find system shared memory region: '{name}'"
            ))),
        }
    }

    /// Unregisters every region (`name` empty), or the one named. An
    /// unknown name is no error (Triton). A region in use stays; with
    /// `name` empty the others go and the ones in use are listed.
    pub(crate) fn unregister(&self, name: &str) -> Result<()> {
        let mut map = self.map();
        let in_use = |r: &Arc<Region>| Arc::strong_count(r) > 1;
        if !name.is_empty() {
            if map.get(name).is_some_and(in_use) {
                return Err(still_in_use(format!(
                    "Cannot unregister shared memory region '{name}', it is currently in use."
                )));
            }
            map.remove(name);
            return Ok(());
        }
        map.retain(|_, r| in_use(r));
        if map.is_empty() {
            return Ok(());
        }
        let names: String = map.keys().map(|n| format!("{n} ,")).collect();
        Err(still_in_use(format!(
            "Failed to unregister the following system shared memory regions: {names}"
        )))
    }

    /// Holds `[offset, offset + byte_size)` of region `name` for a request,
    /// checked as Triton checks a request's region (its texts: unknown
    /// region, offset, offset + size).
    pub(crate) fn lease(&self, name: &str, offset: u64, byte_size: u64) -> Result<Lease> {
        let region = self.map().get(name).cloned().ok_or_else(|| {
            Error::not_found(format!("Unable to find shared memory region: '{name}'"))
        })?;
        let (at, len) = region.span(offset, byte_size)?;
        Ok(Lease { region, at, len })
    }
}

/// Triton 2.51 answers these 500 (`INTERNAL`); a client unregistering what
/// its own request still uses is a client-side conflict: 400
/// (docs/compatibility.md).
fn still_in_use(message: String) -> Error {
    Error::new(Kind::ClientOther(tonic::Code::FailedPrecondition), message)
}

impl Lease {
    /// The bytes the lease covers.
    pub(crate) fn byte_size(&self) -> usize {
        self.len
    }

    /// The leased bytes, read from the object now (it must still be the
    /// registered object, long enough).
    pub(crate) fn read(&self) -> Result<Bytes> {
        self.region.read(self.at, self.len)
    }

    /// Writes an output's bytes (`pieces`, in order) at the start of the
    /// leased window; they must fit it ([`Lease::fits`]).
    pub(crate) fn write(&self, output: &str, pieces: &[Bytes]) -> Result<()> {
        let total = pieces
            .iter()
            .try_fold(0usize, |sum, p| sum.checked_add(p.len()));
        self.fits(output, total)?;
        self.region.write(self.at, total.unwrap_or(0), pieces)
    }

    /// Whether an output of `len` bytes (`None`: more than `usize::MAX`)
    /// fits the window: Triton's text for an output region too small.
    pub(crate) fn fits(&self, output: &str, len: Option<usize>) -> Result<()> {
        match len {
            Some(len) if len <= self.len => Ok(()),
            _ => Err(Error::invalid(format!(
                "shared memory size specified with the request for output '{output}' ({} bytes) should be at least {} bytes to hold the results",
                self.len,
                len.map_or_else(|| "more than usize::MAX".to_string(), |t| t.to_string())
            ))),
        }
    }

    /// Writes `chunk`, a part of an output that [`Lease::fits`], at `from`
    /// bytes into the window.
    pub(crate) fn write_at(&self, from: usize, chunk: &Bytes) -> Result<()> {
        let end = from.checked_add(chunk.len()).filter(|end| *end <= self.len);
        let at = end.and_then(|_| self.at.checked_add(from as u64));
        let at = at.ok_or_else(|| Error::internal("an output's part outside its window"))?;
        self.region
            .write(at, chunk.len(), std::slice::from_ref(chunk))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory standing in for `/dev/shm`, removed at the end.
    pub(in crate::app::shm) struct Dir(pub(in crate::app::shm) PathBuf);

    impl Dir {
        pub(in crate::app::shm) fn new() -> Dir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("tensorgate-shm-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }

        /// An object of `len` bytes, each byte its position mod 251.
        pub(in crate::app::shm) fn object(&self, name: &str, len: usize) -> PathBuf {
            let path = self.0.join(name);
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, bytes).unwrap();
            path
        }

        fn regions(&self, max_regions: usize, max_total_bytes: u64) -> Regions {
            Regions::new(&SharedMemory {
                max_regions,
                max_total_bytes,
                dir: self.0.clone(),
                ..SharedMemory::default()
            })
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn text(result: Result<impl std::fmt::Debug>) -> (u16, String) {
        let e = result.unwrap_err();
        (e.status(), e.message)
    }

    fn pattern(range: std::ops::Range<usize>) -> Vec<u8> {
        range.map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn register_status_unregister_with_tritons_texts() {
        let dir = Dir::new();
        dir.object("in", 64);
        let regions = dir.regions(8, 1 << 20);
        regions.register("r1", "/in", 0, 64).unwrap();
        regions.register("r2", "in", 16, 32).unwrap();
        assert_eq!(
            text(regions.register("r1", "/in", 0, 64)),
            (400, "shared memory region 'r1' already in manager".into())
        );
        assert_eq!(
            text(regions.register("r3", "/missing", 0, 8)),
            (
                400,
                "Unable to open shared memory region: '/missing'".into()
            )
        );
        assert_eq!(
            text(regions.register("r3", "/../in", 0, 8)),
            (400, "Unable to open shared memory region: '/../in'".into())
        );
        for (offset, size) in [(0, 65), (60, 8), (u64::MAX, 2)] {
            assert_eq!(
                text(regions.register("r3", "/in", offset, size)),
                (
                    400,
                    "failed to register shared memory region 'r3': invalid args".into()
                )
            );
        }
        assert_eq!(
            text(regions.register("r3", "/in", 0, 0)).1,
            "failed to register shared memory region 'r3': unable to process address spaceInvalid argument"
        );
        let all = regions.status("").unwrap();
        let names: Vec<_> = all.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["r1", "r2"]);
        assert_eq!(
            regions.status("r2").unwrap(),
            [RegionStatus {
                name: "r2".into(),
                key: "in".into(),
                offset: 16,
                byte_size: 32
            }]
        );
        assert_eq!(
            text(regions.status("nope")),
            (
                404,
                "Unable to find system shared memory region: 'nope'".into()
            )
        );
        regions.unregister("nope").unwrap();
        regions.unregister("r1").unwrap();
        assert_eq!(regions.status("").unwrap().len(), 1);
        regions.unregister("").unwrap();
        assert!(regions.status("").unwrap().is_empty());
    }

    #[test]
    fn limits_and_key_prefixes() {
        let dir = Dir::new();
        dir.object("a", 100);
        let regions = dir.regions(2, 150);
        regions.register("r1", "/a", 0, 100).unwrap();
        let (status, message) = text(regions.register("r2", "/a", 0, 51));
        assert_eq!(status, 400);
        assert!(
            message.contains("shared_memory.max_total_bytes"),
            "{message}"
        );
        regions.register("r2", "/a", 0, 50).unwrap();
        let (_, message) = text(regions.register("r3", "/a", 0, 1));
        assert!(message.contains("shared_memory.max_regions"), "{message}");
        let only = Regions::new(&SharedMemory {
            key_prefixes: vec!["/job-".into()],
            dir: dir.0.clone(),
            ..SharedMemory::default()
        });
        dir.object("job-1", 8);
        only.register("ok", "/job-1", 0, 8).unwrap();
        assert_eq!(
            text(only.register("no", "/a", 0, 8)),
            (
                403,
                "shared memory key '/a' is not allowed by this gateway (shared_memory.key_prefixes)"
                    .into()
            )
        );
    }

    #[test]
    fn reads_and_writes_inside_the_window() {
        let dir = Dir::new();
        let path = dir.object("io", 64);
        let regions = dir.regions(8, 1 << 20);
        regions.register("r", "/io", 16, 32).unwrap();
        // Offsets are relative to the registered window.
        let lease = regions.lease("r", 4, 8).unwrap();
        assert_eq!(&lease.read().unwrap()[..], &pattern(20..28)[..]);
        let out = regions.lease("r", 8, 8).unwrap();
        out.write(
            "OUT",
            &[Bytes::from_static(b"abc"), Bytes::from_static(b"defgh")],
        )
        .unwrap();
        let now = std::fs::read(&path).unwrap();
        assert_eq!(&now[24..32], b"abcdefgh");
        assert_eq!(&now[..24], &pattern(0..24)[..]);
        assert_eq!(&now[32..], &pattern(32..64)[..]);
        assert_eq!(
            text(out.write("OUT", &[Bytes::from_static(b"123456789")])).1,
            "shared memory size specified with the request for output 'OUT' (8 bytes) should be at least 9 bytes to hold the results"
        );
    }

    #[test]
    fn request_windows_are_checked_with_tritons_texts() {
        let dir = Dir::new();
        dir.object("w", 64);
        let regions = dir.regions(8, 1 << 20);
        regions.register("r", "/w", 32, 32).unwrap();
        let cases = [
            (32, 1, "Invalid offset for shared memory region: 'r'"),
            (u64::MAX, 1, "Invalid offset for shared memory region: 'r'"),
            (
                24,
                16,
                "Invalid offset + byte size for shared memory region: 'r'",
            ),
            (
                1,
                u64::MAX,
                "Invalid offset + byte size for shared memory region: 'r'",
            ),
            (
                0,
                0,
                "Invalid offset + byte size for shared memory region: 'r'",
            ),
        ];
        for (offset, size, want) in cases {
            assert_eq!(
                text(regions.lease("r", offset, size)),
                (400, want.to_string()),
                "{offset} {size}"
            );
        }
        assert_eq!(
            text(regions.lease("nope", 0, 1)),
            (404, "Unable to find shared memory region: 'nope'".into())
        );
        assert_eq!(regions.lease("r", 0, 32).unwrap().read().unwrap().len(), 32);
    }

    #[test]
    fn a_region_in_use_is_not_unregistered() {
        let dir = Dir::new();
        dir.object("u", 16);
        let regions = dir.regions(8, 1 << 20);
        regions.register("b", "/u", 0, 8).unwrap();
        regions.register("a", "/u", 8, 8).unwrap();
        regions.register("c", "/u", 0, 16).unwrap();
        let held_a = regions.lease("a", 0, 8).unwrap();
        let held_b = regions.lease("b", 0, 8).unwrap();
        assert_eq!(
            text(regions.unregister("a")),
            (
                400,
                "Cannot unregister shared memory region 'a', it is currently in use.".into()
            )
        );
        assert_eq!(
            text(regions.unregister("")),
            (
                400,
                "Failed to unregister the following system shared memory regions: a ,b ,".into()
            )
        );
        // The free one went; the held ones stay, still readable.
        let left: Vec<_> = regions
            .status("")
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(left, ["a", "b"]);
        assert_eq!(held_a.read().unwrap().len(), 8);
        drop((held_a, held_b));
        regions.unregister("").unwrap();
        assert!(regions.status("").unwrap().is_empty());
    }

    #[test]
    fn truncated_removed_or_replaced_objects_give_clear_errors() {
        let dir = Dir::new();
        let path = dir.object("t", 64);
        let regions = dir.regions(8, 1 << 20);
        regions.register("r", "/t", 0, 64).unwrap();
        let lease = regions.lease("r", 32, 32).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(40)
            .unwrap();
        let (status, message) = text(lease.read());
        assert_eq!(status, 400);
        assert!(
            message.contains("is now 40 bytes") && message.contains("truncated"),
            "{message}"
        );
        assert!(lease
            .write("O", &[Bytes::from_static(b"123456789")])
            .is_err());
        // Bytes before the cut still read.
        assert_eq!(regions.lease("r", 0, 40).unwrap().read().unwrap().len(), 40);
        std::fs::remove_file(&path).unwrap();
        let (_, message) = text(lease.read());
        assert!(message.contains("was removed"), "{message}");
        dir.object("t", 64);
        let (_, message) = text(lease.read());
        assert!(message.contains("was replaced"), "{message}");
        // Unregistering and registering again follows the new object.
        drop(lease);
        regions.unregister("r").unwrap();
        regions.register("r", "/t", 0, 64).unwrap();
        assert_eq!(
            &regions.lease("r", 0, 4).unwrap().read().unwrap()[..],
            &pattern(0..4)[..]
        );
    }

    #[test]
    fn symbolic_links_and_directories_are_not_opened() {
        let dir = Dir::new();
        let target = dir.object("real", 16);
        std::os::unix::fs::symlink(&target, dir.0.join("link")).unwrap();
        std::fs::create_dir(dir.0.join("sub")).unwrap();
        let regions = dir.regions(8, 1 << 20);
        for key in ["/link", "/sub"] {
            assert_eq!(
                text(regions.register("r", key, 0, 8)).1,
                format!("Unable to open shared memory region: '{key}'")
            );
        }
        assert!(Path::new(&target).exists());
    }
}
