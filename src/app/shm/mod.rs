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
//! two calls connect it, both through [`Gateway::shm_bridge`] (`None` in
//! forward mode: leave the parameters to the upstream, as today). The
//! decoder already keeps what they need: `wire::v2_request` turns an
//! input's `shared_memory_region` / `_offset` / `_byte_size` parameters
//! into `model::InputData::SharedMemory` and an output's into
//! `RequestedOutput::shared_memory` with `kind: OutputKind::SharedMemory`,
//! and `wire::v2_response` already lists such an output with `name`,
//! `datatype` and `shape` only, as Triton answers it (protocol §2.6, §1.7).
//!
//! 1. **Right after decoding** (today: `Gateway::infer` in
//!    `front/infer.rs`, after `decode_whole` / `decode_streamed` and before
//!    `outputs::check_requested` and `checks::tensor_sizes`; after the
//!    restructuring: where the typed plan in `app/` is built from the
//!    decoded request): `let held = bridge.take_regions(&mut request)?;`
//!    ([`Bridge::take_regions`]). Every shared-memory input is read and
//!    becomes `InputData::Raw` (sent upstream as `raw_input_contents`; its
//!    size against shape × datatype is then checked by
//!    `checks::tensor_sizes`, with the core's text, as Triton); every
//!    shared-memory output's window is leased and its `shared_memory`
//!    cleared, so `to_grpc` asks the upstream for the bytes. Errors in
//!    Triton's order and texts (protocol §1.7).
//! 2. **Before the answer is encoded** (today: after
//!    `outputs::keep_requested` and before `v2_response::encode`, in
//!    `Gateway::infer` and in `front/infer_answer.rs`'s collected path):
//!    `bridge.write_outputs(held, &mut response)?`
//!    ([`Bridge::write_outputs`]) writes each leased output's bytes into
//!    its region and empties its `data`. A request holding a shared-memory
//!    output must take the collected path, not the streamed binary answer
//!    (`answer_streams` / `entry_plan` must say no). The leases (`held`)
//!    live until then, so the regions cannot be unregistered meanwhile
//!    (Triton's "in use").
//!
//! The primitives under them, for a plan that wants its own order:
//! [`Bridge::read_input`] and [`Bridge::write_output`] (by region name),
//! or [`Regions::lease`] with [`Lease::read`] / [`Lease::write`].
//!
//! Reads and writes are synchronous file I/O (a memory copy on tmpfs, ~10
//! ms for 64 MiB): above a few MiB the caller should run them in
//! `tokio::task::spawn_blocking`.

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

/// What a request in shared memory holds until its answer is written: a
/// lease on each shared-memory output's window, with the output's name.
#[derive(Debug, Default)]
pub(crate) struct HeldOutputs(Vec<(String, Lease)>);

impl Bridge {
    /// Phase-2 hook 1 (module doc): reads every shared-memory input into
    /// `InputData::Raw`, leases every shared-memory output's window and
    /// clears its `shared_memory`. All windows are checked before any byte
    /// is read, inputs first, in request order (Triton's order).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "phase 2: called by /infer (module doc)")
    )]
    pub(crate) fn take_regions(&self, request: &mut InferRequest) -> Result<HeldOutputs> {
        let mut inputs = Vec::new();
        for (i, input) in request.inputs.iter().enumerate() {
            if let InputData::SharedMemory(shm) = &input.data {
                inputs.push((
                    i,
                    self.regions.lease(&shm.region, shm.offset, shm.byte_size)?,
                ));
            }
        }
        let mut held = HeldOutputs::default();
        for output in &request.outputs {
            if let Some(shm) = &output.shared_memory {
                let lease = self.regions.lease(&shm.region, shm.offset, shm.byte_size)?;
                held.0.push((output.name.clone(), lease));
            }
        }
        for (i, lease) in inputs {
            request.inputs[i].data = InputData::Raw(lease.read()?);
        }
        for output in &mut request.outputs {
            output.shared_memory = None;
        }
        Ok(held)
    }

    /// Phase-2 hook 2 (module doc): writes each held output's bytes from
    /// the answer into its region and empties its `data`. An output the
    /// answer lacks is left alone (the answer does not list it either).
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "phase 2: called by /infer (module doc)")
    )]
    pub(crate) fn write_outputs(
        &self,
        held: HeldOutputs,
        response: &mut InferResponse,
    ) -> Result<()> {
        for (name, lease) in held.0 {
            if let Some(output) = response.outputs.iter_mut().find(|o| o.name == name) {
                lease.write(&name, std::slice::from_ref(&output.data))?;
                output.data = Bytes::new();
            }
        }
        Ok(())
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

    #[test]
    fn a_request_in_shared_memory_is_bridged_whole() {
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
        let held = bridge.take_regions(&mut request).unwrap();
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
        bridge.write_outputs(held, &mut response).unwrap();
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
        let err = bridge.take_regions(&mut bad).unwrap_err();
        assert_eq!(
            (err.status(), err.message.as_str()),
            (404, "Unable to find shared memory region: 'missing'")
        );
        assert!(matches!(bad.inputs[0].data, InputData::SharedMemory(_)));
    }
}
