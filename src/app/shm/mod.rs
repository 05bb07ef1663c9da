//! Bridge mode of Triton's system shared memory (`[shared_memory] mode =
//! "bridge"`): the gateway runs beside the client, keeps the regions the
//! client registers ([`Regions`]) and plays the upstream's part for the
//! three shared-memory RPCs ([`Bridge`]: register, status, unregister take
//! and give the same messages the forwarded calls do, so both fronts
//! render them alike). No HTTP here; the objects are read and written with
//! positioned I/O on their files (`region`), never mapped.
//!
//! # Integration with `/infer` (phase 2, not yet wired)
//!
//! The `/infer` path is being restructured on another branch; once it lands
//! these are the two hooks, both through [`Gateway::shm_bridge`] (`None` in
//! forward mode: leave the parameters to the upstream, as today):
//!
//! 1. **Request decoding** (`wire::v2_request` keeps the parameters; the
//!    typed plan in `app/` acts on them): an input whose `parameters` name
//!    `shared_memory_region` (with `shared_memory_offset`,
//!    `shared_memory_byte_size`, both default 0) has no `data` and no
//!    binary part; call [`Regions::lease`]`(region, offset, byte_size)` for
//!    it and then [`Lease::read`] (or [`Bridge::read_input`] for both) and
//!    send the bytes upstream as its `raw_input_contents` entry, with the
//!    three `shared_memory_*` parameters removed. Its size against shape ×
//!    datatype is then checked by the existing raw-input checks
//!    (`translate::checks`), which give Triton's core text.
//! 2. **Answer encoding** (`front::infer_answer` / `wire::v2_response`): for
//!    an output whose `parameters` name `shared_memory_region`, take the
//!    lease at decoding time (so the region cannot be unregistered while the
//!    request runs, as Triton), request the output upstream without the
//!    `shared_memory_*` parameters, and when the answer arrives call
//!    [`Lease::write`]`(output_name, raw_output_pieces)` (or
//!    [`Bridge::write_output`]); the answer's JSON then lists the output
//!    with `name`, `datatype` and `shape` only: no `data`, no `parameters`,
//!    no binary part (docs/protocol.md §2.6).
//!
//! Reads and writes are synchronous file I/O (a memory copy on tmpfs, ~10
//! ms for 64 MiB): above a few MiB the caller should run them in
//! `tokio::task::spawn_blocking`.

mod region;
mod regions;

#[cfg_attr(
    not(test),
    expect(unused_imports, reason = "phase 2: /infer holds leases")
)]
pub(crate) use regions::Lease;
pub(crate) use regions::{RegionStatus, Regions};

use bytes::Bytes;

use crate::app::Gateway;
use crate::error::{Error, Result};
use crate::proto::inference::{
    system_shared_memory_status_response::RegionStatus as PbRegionStatus,
    SystemSharedMemoryRegisterRequest, SystemSharedMemoryStatusRequest,
    SystemSharedMemoryStatusResponse, SystemSharedMemoryUnregisterRequest,
};

/// The refusal of a CUDA shared-memory call in bridge mode: the upstream is
/// on another host and the gateway has no GPU of the client's.
pub(crate) const CUDA_REFUSED: &str =
    "CUDA shared memory is not available through this gateway: it bridges system shared memory to a remote upstream ([shared_memory] mode = \"bridge\"); use system shared memory";

/// The gateway's own answers to the system shared-memory RPCs.
#[derive(Debug)]
pub(crate) struct Bridge {
    regions: Regions,
}

impl Bridge {
    pub(crate) fn new(regions: Regions) -> Bridge {
        Bridge { regions }
    }

    #[cfg_attr(not(test), expect(dead_code, reason = "phase 2: /infer takes leases"))]
    pub(crate) fn regions(&self) -> &Regions {
        &self.regions
    }

    /// `SystemSharedMemoryRegister`, answered here.
    pub(crate) fn register(&self, request: &SystemSharedMemoryRegisterRequest) -> Result<()> {
        self.regions.register(
            &request.name,
            &request.key,
            request.offset,
            request.byte_size,
        )
    }

    /// `SystemSharedMemoryStatus`, answered here.
    pub(crate) fn status(
        &self,
        request: &SystemSharedMemoryStatusRequest,
    ) -> Result<SystemSharedMemoryStatusResponse> {
        let regions = self.regions.status(&request.name)?;
        Ok(SystemSharedMemoryStatusResponse {
            regions: regions
                .into_iter()
                .map(|r: RegionStatus| {
                    let status = PbRegionStatus {
                        name: r.name.clone(),
                        key: r.key,
                        offset: r.offset,
                        byte_size: r.byte_size,
                    };
                    (r.name, status)
                })
                .collect(),
        })
    }

    /// `SystemSharedMemoryUnregister`, answered here.
    pub(crate) fn unregister(&self, request: &SystemSharedMemoryUnregisterRequest) -> Result<()> {
        self.regions.unregister(&request.name)
    }

    /// Phase-2 hook 1: an input's bytes from `region` (see the module doc).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "phase 2: called by /infer (module doc)")
    )]
    pub(crate) fn read_input(&self, region: &str, offset: u64, byte_size: u64) -> Result<Bytes> {
        self.regions.lease(region, offset, byte_size)?.read()
    }

    /// Phase-2 hook 2: an output's bytes into `region` (see the module
    /// doc); they must fit `byte_size`.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "phase 2: called by /infer (module doc)")
    )]
    pub(crate) fn write_output(
        &self,
        region: &str,
        offset: u64,
        byte_size: u64,
        output: &str,
        pieces: &[Bytes],
    ) -> Result<()> {
        self.regions
            .lease(region, offset, byte_size)?
            .write(output, pieces)
    }
}

impl Gateway {
    /// The shared-memory bridge, in bridge mode.
    pub(crate) fn shm_bridge(&self) -> Option<&Bridge> {
        self.shm_bridge.as_ref()
    }
}

/// The bridge refuses CUDA shared memory (see [`CUDA_REFUSED`]).
pub(crate) fn cuda_refused() -> Error {
    Error::unsupported(CUDA_REFUSED)
}

#[cfg(test)]
mod tests {
    use super::regions::tests::Dir;
    use super::*;
    use crate::config::SharedMemory;

    fn bridge(dir: &Dir) -> Bridge {
        Bridge::new(Regions::new(&SharedMemory {
            dir: dir.0.clone(),
            ..SharedMemory::default()
        }))
    }

    #[test]
    fn inputs_read_and_outputs_written_by_region_name() {
        let dir = Dir::new();
        let path = dir.object("io", 32);
        let bridge = bridge(&dir);
        bridge
            .register(&SystemSharedMemoryRegisterRequest {
                name: "in".into(),
                key: "/io".into(),
                offset: 0,
                byte_size: 16,
            })
            .unwrap();
        bridge
            .register(&SystemSharedMemoryRegisterRequest {
                name: "out".into(),
                key: "/io".into(),
                offset: 16,
                byte_size: 16,
            })
            .unwrap();
        let bytes = bridge.read_input("in", 4, 8).unwrap();
        assert_eq!(&bytes[..], &[4, 5, 6, 7, 8, 9, 10, 11]);
        bridge
            .write_output("out", 8, 8, "OUTPUT0", std::slice::from_ref(&bytes))
            .unwrap();
        assert_eq!(&std::fs::read(&path).unwrap()[24..32], &bytes[..]);
        // An output larger than its window; a window outside the region.
        let err = bridge
            .write_output("out", 8, 4, "OUTPUT0", &[bytes])
            .unwrap_err();
        assert_eq!(
            err.message,
            "shared memory size specified with the request for output 'OUTPUT0' (4 bytes) should be at least 8 bytes to hold the results"
        );
        assert_eq!(
            bridge.read_input("in", 12, 8).unwrap_err().message,
            "Invalid offset + byte size for shared memory region: 'in'"
        );
        assert_eq!(bridge.read_input("gone", 0, 1).unwrap_err().status(), 404);
        // A lease held by a request keeps the region registered.
        let held: Lease = bridge.regions().lease("in", 0, 16).unwrap();
        let unregister = SystemSharedMemoryUnregisterRequest { name: "in".into() };
        assert_eq!(bridge.unregister(&unregister).unwrap_err().status(), 400);
        drop(held);
        bridge.unregister(&unregister).unwrap();
        let status = bridge
            .status(&SystemSharedMemoryStatusRequest {
                name: String::new(),
            })
            .unwrap();
        assert_eq!(status.regions.len(), 1);
        assert_eq!(status.regions["out"].offset, 16);
    }
}
