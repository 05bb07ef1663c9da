//! One registered region: the shared-memory object's open file and the
//! window (`offset`, `byte_size`) the client registered. Reads and writes
//! are positioned I/O on the file (`pread`/`pwrite`), never a mapping: a
//! client that truncates, unlinks or replaces its object while we read it
//! gets an error, where a mapping would fault the whole gateway (SIGBUS).

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::error::{Error, Result};

/// A registered region (Triton's `SharedMemoryInfo`).
#[derive(Debug)]
pub(crate) struct Region {
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) offset: u64,
    pub(crate) byte_size: u64,
    path: PathBuf,
    file: File,
    /// The object's identity when it was registered: a different inode
    /// under the same path later means the client replaced it.
    inode: (u64, u64),
}

/// Where `key` lives in `dir`, as glibc's `shm_open` finds it: leading
/// slashes dropped, then a plain file name (no `/`, not `.` or `..`).
/// `None`: not a key `shm_open` would accept.
pub(crate) fn object_path(dir: &Path, key: &str) -> Option<PathBuf> {
    let name = key.trim_start_matches('/');
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return None;
    }
    Some(dir.join(name))
}

impl Region {
    /// Opens `key` read-write and checks the window against the object's
    /// size, with Triton's texts.
    pub(crate) fn open(
        dir: &Path,
        name: &str,
        key: &str,
        offset: u64,
        byte_size: u64,
    ) -> Result<Region> {
        let cannot_open =
            || Error::invalid(format!("Unable to open shared memory region: '{key}'"));
        let path = object_path(dir, key).ok_or_else(cannot_open)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            // Fail on a symbolic link instead of following it (glibc's
            // `shm_open` does too): a link in the directory must not point
            // the gateway at another file.
            .open(&path)
            .map_err(|_| cannot_open())?;
        let meta = file.metadata().map_err(|_| cannot_open())?;
        if !meta.is_file() {
            return Err(cannot_open());
        }
        let invalid = || {
            Error::invalid(format!(
                "failed to register shared memory region '{name}': invalid args"
            ))
        };
        match offset.checked_add(byte_size) {
            Some(end) if end <= meta.len() => {}
            _ => return Err(invalid()),
        }
        if byte_size == 0 {
            // Triton maps the window: a zero-length mmap fails with EINVAL.
            return Err(Error::invalid(format!(
                "failed to register shared memory region '{name}': unable to process address spaceInvalid argument"
            )));
        }
        Ok(Region {
            name: name.to_string(),
            key: key.to_string(),
            offset,
            byte_size,
            path,
            inode: (meta.dev(), meta.ino()),
            file,
        })
    }

    /// The file position of `[offset, offset + byte_size)` of the window,
    /// checked against the window with Triton's texts (its `GetMemoryInfo`).
    pub(crate) fn span(&self, offset: u64, byte_size: u64) -> Result<(u64, usize)> {
        if offset >= self.byte_size {
            return Err(Error::invalid(format!(
                "Invalid offset for shared memory region: '{}'",
                self.name
            )));
        }
        let too_far = || {
            Error::invalid(format!(
                "Invalid offset + byte size for shared memory region: '{}'",
                self.name
            ))
        };
        // A size of 0 is refused too: Triton's `offset + byte_size - 1`
        // wraps below zero.
        match offset.checked_add(byte_size) {
            Some(end) if end <= self.byte_size && byte_size > 0 => {}
            _ => return Err(too_far()),
        }
        let len = usize::try_from(byte_size).map_err(|_| too_far())?;
        // offset < byte_size and the window ends inside a file: no overflow.
        let at = self.offset.checked_add(offset).ok_or_else(too_far)?;
        Ok((at, len))
    }

    /// The object as it is now: still the registered one, and long enough
    /// for `[at, at + len)`. Checked at every read and write.
    fn still_there(&self, at: u64, len: usize) -> Result<()> {
        let gone = |what: &str| {
            Error::invalid(format!(
                "shared memory region '{}': its object '{}' {what}",
                self.name, self.key
            ))
        };
        match std::fs::symlink_metadata(&self.path) {
            Ok(now) if (now.dev(), now.ino()) == self.inode => {}
            Ok(_) => return Err(gone("was replaced after it was registered")),
            Err(_) => return Err(gone("was removed after it was registered")),
        }
        let size = self
            .file
            .metadata()
            .map_err(|e| gone(&e.to_string()))?
            .len();
        let end = at.saturating_add(len as u64);
        if end > size {
            return Err(gone(&format!(
                "is now {size} bytes, too short for bytes {at}..{end} (it was truncated)"
            )));
        }
        Ok(())
    }

    /// Reads `len` bytes at file position `at` (from [`Region::span`]).
    pub(crate) fn read(&self, at: u64, len: usize) -> Result<Bytes> {
        self.still_there(at, len)?;
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, at).map_err(|e| {
            Error::invalid(format!(
                "shared memory region '{}': reading its object '{}' failed: {e}",
                self.name, self.key
            ))
        })?;
        Ok(Bytes::from(buf))
    }

    /// Writes `pieces` one after another at file position `at`; their total
    /// length was checked against the span by the caller.
    pub(crate) fn write(&self, at: u64, len: usize, pieces: &[Bytes]) -> Result<()> {
        self.still_there(at, len)?;
        let mut position = at;
        for piece in pieces {
            self.file.write_all_at(piece, position).map_err(|e| {
                Error::invalid(format!(
                    "shared memory region '{}': writing its object '{}' failed: {e}",
                    self.name, self.key
                ))
            })?;
            position += piece.len() as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_plain_names_only() {
        let dir = Path::new("/dev/shm");
        assert_eq!(object_path(dir, "/in0"), Some(dir.join("in0")));
        assert_eq!(object_path(dir, "in0"), Some(dir.join("in0")));
        assert_eq!(object_path(dir, "//in0"), Some(dir.join("in0")));
        for bad in [
            "",
            "/",
            "/..",
            "..",
            "/.",
            "/a/b",
            "/../etc/passwd",
            "/a\0b",
        ] {
            assert_eq!(object_path(dir, bad), None, "{bad:?}");
        }
    }
}
