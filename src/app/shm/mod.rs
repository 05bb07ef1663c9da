//! Bridge mode of Triton's system shared memory (`[shared_memory] mode =
//! "bridge"`): the gateway runs beside the client, keeps the regions the
//! client registers ([`Regions`]) and plays the upstream's part for the
//! three shared-memory RPCs ([`Bridge`]: register, status, unregister take
//! and give the same messages the forwarded calls do, so both fronts
//! render them alike). No HTTP here; the objects are read and written with
//! positioned I/O on their files (`region`), never mapped.
//!
//! # `/infer` in bridge mode
//!
//! `front::http::infer` calls two hooks, both through [`Gateway::shm_bridge`]
//! (`None` in forward mode: the parameters go to the upstream, as
//! before). The decoder keeps what they need: `wire::v2_request` turns an
//! input's `shared_memory_region` / `_offset` / `_byte_size` parameters
//! into `model::InputData::SharedMemory` and an output's into
//! `RequestedOutput::shared_memory` with `kind: OutputKind::SharedMemory`,
//! and `wire::v2_response` lists such an output with `name`, `datatype`
//! and `shape` only, as Triton answers it (v2 §2.6, v2 §1.7).
//!
//! 1. **Right after decoding**, before the model-level checks (Triton reads
//!    the regions when it parses the request, v2 §1.7):
//!    [`Bridge::take_regions`]. Every shared-memory input is read and
//!    becomes `InputData::Raw` (sent upstream as `raw_input_contents`; its
//!    size against shape × datatype is then checked by
//!    `checks::tensor_sizes`, with the core's text, as Triton); every
//!    shared-memory output's window is leased and its `shared_memory`
//!    cleared, so `to_grpc` asks the upstream for the bytes.
//! 2. **While the answer arrives** (`answer`, `Gateway::call_infer_into`):
//!    the call has a reply tap, and each leased output's raw bytes are
//!    written into its region as the upstream's frames arrive, never
//!    collected whole (an output larger than its window is refused at its
//!    first byte); one sent as typed `contents` is written from the
//!    translated answer by [`HeldOutputs::write`]. The answer lists them
//!    with empty `data`. Such a request never streams its answer to the
//!    client (`Plan::answer_streams` wants every output binary, and a
//!    shared-memory output is not). The leases live until then, so the
//!    regions cannot be unregistered meanwhile (Triton's "in use").
//!
//! Reads and writes are synchronous file I/O, a memory copy on tmpfs: from
//! [`OFF_THREAD_BYTES`] on they run on tokio's blocking pool.

mod answer;
mod region;
mod regions;

pub(crate) use regions::{Lease, RegionStatus, Regions};

use bytes::Bytes;

use crate::app::Gateway;
use crate::error::{Error, Result};
use crate::model::{InferRequest, InferResponse, InputData};
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
}

/// Region reads and writes of this many bytes or more (a request's total)
/// run on tokio's blocking pool. Each serving thread is a single-threaded
/// runtime (`server::workers`) with its own blocking pool: a copy from
/// tmpfs runs at a few GB/s, so 64 MiB would hold every other connection
/// of the thread for 10–30 ms, while 1 MiB (0.2–0.5 ms) costs about what
/// handing it to another thread and back does.
pub(crate) const OFF_THREAD_BYTES: usize = 1 << 20;

/// What a request in shared memory holds until its answer is written: a
/// lease on each shared-memory output's window, with the output's name.
#[derive(Debug, Default)]
pub(crate) struct HeldOutputs(Vec<(String, Lease)>);

impl Bridge {
    /// Hook 1 (module doc): reads every shared-memory input into
    /// `InputData::Raw`, leases every shared-memory output's window and
    /// clears its `shared_memory`. All windows are checked before any byte
    /// is read, inputs first, in request order (Triton's order).
    pub(crate) async fn take_regions(&self, request: &mut InferRequest) -> Result<HeldOutputs> {
        let mut inputs = Vec::new();
        let mut leases = Vec::new();
        for (i, input) in request.inputs.iter().enumerate() {
            if let InputData::SharedMemory(shm) = &input.data {
                inputs.push(i);
                leases.push(self.regions.lease(&shm.region, shm.offset, shm.byte_size)?);
            }
        }
        let mut held = HeldOutputs::default();
        for output in &request.outputs {
            if let Some(shm) = &output.shared_memory {
                let lease = self.regions.lease(&shm.region, shm.offset, shm.byte_size)?;
                held.0.push((output.name.clone(), lease));
            }
        }
        let bytes = leases.iter().map(Lease::byte_size).sum();
        let read: Vec<Bytes> =
            off_thread(bytes, move || leases.iter().map(Lease::read).collect()).await?;
        for (i, bytes) in inputs.into_iter().zip(read) {
            request.inputs[i].data = InputData::Raw(bytes);
        }
        for output in &mut request.outputs {
            output.shared_memory = None;
        }
        Ok(held)
    }
}

impl HeldOutputs {
    /// Hook 2 for outputs not written as they arrived (module doc): writes
    /// each held output's bytes from the answer into its region and empties
    /// its `data`. An output the answer lacks
    /// is left alone (the answer does not list it either). Nothing held
    /// (forward mode, no shared-memory output): nothing done.
    pub(crate) async fn write(self, response: &mut InferResponse) -> Result<()> {
        let mut writes = Vec::new();
        for (name, lease) in self.0 {
            if let Some(output) = response.outputs.iter_mut().find(|o| o.name == name) {
                let data = std::mem::take(&mut output.data);
                writes.push((name, lease, data));
            }
        }
        let bytes = writes.iter().map(|(_, _, data)| data.len()).sum();
        off_thread(bytes, move || {
            writes
                .iter()
                .try_for_each(|(name, lease, data)| lease.write(name, std::slice::from_ref(data)))
        })
        .await
    }
}

/// Runs `io`, which moves `bytes` bytes of region I/O, here; or on the
/// blocking pool from [`OFF_THREAD_BYTES`] on.
async fn off_thread<R: Send + 'static>(
    bytes: usize,
    io: impl FnOnce() -> Result<R> + Send + 'static,
) -> Result<R> {
    if bytes < OFF_THREAD_BYTES {
        return io();
    }
    on_blocking_pool(io).await
}

/// Runs `io` on tokio's blocking pool.
async fn on_blocking_pool<R: Send + 'static>(
    io: impl FnOnce() -> Result<R> + Send + 'static,
) -> Result<R> {
    tokio::task::spawn_blocking(io)
        .await
        .map_err(|e| Error::internal(format!("shared-memory I/O did not finish: {e}")))?
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

    impl Bridge {
        fn read_input(&self, region: &str, offset: u64, byte_size: u64) -> Result<Bytes> {
            self.regions.lease(region, offset, byte_size)?.read()
        }

        fn write_output(
            &self,
            region: &str,
            (offset, byte_size): (u64, u64),
            output: &str,
            pieces: &[Bytes],
        ) -> Result<()> {
            let lease = self.regions.lease(region, offset, byte_size)?;
            lease.write(output, pieces)
        }
    }

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
            .write_output("out", (8, 8), "OUTPUT0", std::slice::from_ref(&bytes))
            .unwrap();
        assert_eq!(&std::fs::read(&path).unwrap()[24..32], &bytes[..]);
        // An output larger than its window; a window outside the region.
        let err = bridge
            .write_output("out", (8, 4), "OUTPUT0", &[bytes])
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
        let held: Lease = bridge.regions.lease("in", 0, 16).unwrap();
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

    #[tokio::test]
    async fn a_request_in_shared_memory_is_bridged_whole() {
        use crate::model::{
            InputTensor, OutputKind, OutputTensor, RequestedOutput, SharedMemory as Shm,
        };
        let dir = Dir::new();
        let path = dir.object("req", 64);
        let bridge = bridge(&dir);
        let register = |name: &str, offset, byte_size| {
            bridge.register(&SystemSharedMemoryRegisterRequest {
                name: name.into(),
                key: "/req".into(),
                offset,
                byte_size,
            })
        };
        register("inputs", 0, 32).unwrap();
        register("outputs", 32, 32).unwrap();
        let shm = |region: &str, offset, byte_size| Shm {
            region: region.into(),
            offset,
            byte_size,
        };
        let input = |name: &str, data| InputTensor {
            name: name.into(),
            datatype: "INT32".into(),
            shape: vec![4],
            data,
        };
        let output = |name: &str, at| RequestedOutput {
            name: name.into(),
            classification: 0,
            kind: OutputKind::SharedMemory,
            shared_memory: Some(shm("outputs", at, 16)),
        };
        let mut request = InferRequest {
            inputs: vec![
                input("INPUT0", InputData::SharedMemory(shm("inputs", 0, 16))),
                input("INPUT1", InputData::Raw(Bytes::from_static(&[9; 16]))),
            ],
            outputs: vec![output("OUTPUT0", 0), output("OUTPUT1", 16)],
            ..InferRequest::default()
        };
        let held = bridge.take_regions(&mut request).await.unwrap();
        assert_eq!(
            request.inputs[0].data,
            InputData::Raw(Bytes::from((0u8..16).collect::<Vec<_>>()))
        );
        assert!(request.outputs.iter().all(|o| o.shared_memory.is_none()));
        assert_eq!(request.output_kind("OUTPUT1"), OutputKind::SharedMemory);
        // Held until the answer is written.
        let all = SystemSharedMemoryUnregisterRequest {
            name: String::new(),
        };
        assert_eq!(bridge.unregister(&all).unwrap_err().status(), 400);
        let out = |name: &str, byte: u8| OutputTensor {
            name: name.into(),
            datatype: "INT32".into(),
            shape: vec![4],
            data: Bytes::from(vec![byte; 16]),
        };
        let mut response = InferResponse {
            outputs: vec![out("OUTPUT1", 0xbb), out("OUTPUT0", 0xaa)],
            ..InferResponse::default()
        };
        held.write(&mut response).await.unwrap();
        assert!(response.outputs.iter().all(|o| o.data.is_empty()));
        let now = std::fs::read(&path).unwrap();
        assert_eq!(&now[32..48], &[0xaa; 16]);
        assert_eq!(&now[48..64], &[0xbb; 16]);
        bridge.unregister(&all).unwrap();

        // A bad window anywhere refuses the request before any read.
        register("inputs", 0, 32).unwrap();
        let mut bad = InferRequest {
            inputs: vec![input(
                "INPUT0",
                InputData::SharedMemory(shm("inputs", 0, 16)),
            )],
            outputs: vec![RequestedOutput {
                shared_memory: Some(shm("missing", 0, 16)),
                ..output("OUTPUT0", 0)
            }],
            ..InferRequest::default()
        };
        let err = bridge.take_regions(&mut bad).await.unwrap_err();
        assert_eq!(
            (err.status(), err.message.as_str()),
            (404, "Unable to find shared memory region: 'missing'")
        );
        assert!(matches!(bad.inputs[0].data, InputData::SharedMemory(_)));
    }
}
