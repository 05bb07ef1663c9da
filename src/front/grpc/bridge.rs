//! Shared-memory bridge mode on the gRPC front (`[shared_memory] mode =
//! "bridge"`): the gateway runs beside its client and keeps the client's
//! regions, the same table the HTTP front uses (`app::shm::Bridge`), so a
//! client may register over one protocol and infer over the other. The
//! system shared-memory RPCs are answered here; the CUDA ones refused. A
//! `ModelInfer` that names shared memory is answered by the inference use
//! case (`app::infer`): the message read as Triton's gRPC front reads it
//! (`translate::from_grpc::request`), its inputs read from their regions,
//! its outputs written into their windows, the upstream given plain
//! tensors, and the answer written as Triton's gRPC front writes it
//! (`translate::to_grpc::response`). The call has the gateway's own
//! deadline, not the client's. `ModelStreamInfer` requests are bridged one
//! by one (`stream_infer`, `app::shm::StreamWindows`).

use std::sync::Arc;

use tonic::{Response, Status};

use crate::app::infer::{self, Decoded, Decoder, Inferred};
use crate::app::shm::{cuda_refused, Bridge};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::model::{ModelInfo, ModelRef};
use crate::proto::inference as pb;
use crate::translate::from_grpc::request::infer_request;
use crate::translate::to_grpc::response::infer_response;

/// A client's `ModelInfer` through the inference use case.
pub(super) async fn model_infer(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    message: pb::ModelInferRequest,
) -> Result<Response<pb::ModelInferResponse>, Status> {
    let model = ModelRef {
        name: message.model_name.clone(),
        version: message.model_version.clone(),
    };
    match infer::infer(gateway, ctx, &model, GrpcMessage(message)).await {
        Ok((Inferred::Whole { response, .. }, ())) => Ok(Response::new(infer_response(response))),
        Ok((Inferred::Streaming(_), ())) => Err(Status::internal(
            "a gRPC answer is collected, never streamed",
        )),
        Err(error) => {
            tracing::debug!(code = ?error.kind.status().1, message = %error.message, "bridged gRPC call failed");
            Err(error.to_status())
        }
    }
}

/// A `ModelInferRequest`, decoded as Triton's gRPC front reads it.
struct GrpcMessage(pb::ModelInferRequest);

impl Decoder for GrpcMessage {
    type Kept = ();

    /// The upstream refuses it in its own words, as for a relayed call.
    const DECOUPLED: Option<&'static str> = None;

    async fn decode(self, _info: Option<Arc<ModelInfo>>) -> Result<Decoded<()>> {
        Ok(Decoded {
            request: infer_request(self.0)?,
            rest: None,
            streams: false,
            kept: (),
        })
    }
}

/// The system shared-memory RPCs, answered by the bridge.
pub(super) fn status(
    bridge: &Bridge,
    request: &pb::SystemSharedMemoryStatusRequest,
) -> Result<Response<pb::SystemSharedMemoryStatusResponse>, Status> {
    answered(bridge.status(request))
}

pub(super) fn register(
    bridge: &Bridge,
    request: &pb::SystemSharedMemoryRegisterRequest,
) -> Result<Response<pb::SystemSharedMemoryRegisterResponse>, Status> {
    answered(bridge.register(request).map(|()| Default::default()))
}

pub(super) fn unregister(
    bridge: &Bridge,
    request: &pb::SystemSharedMemoryUnregisterRequest,
) -> Result<Response<pb::SystemSharedMemoryUnregisterResponse>, Status> {
    answered(bridge.unregister(request).map(|()| Default::default()))
}

/// A CUDA shared-memory RPC in bridge mode.
pub(super) fn cuda<T>() -> Result<Response<T>, Status> {
    Err(cuda_refused().to_status())
}

fn answered<T>(result: Result<T, Error>) -> Result<Response<T>, Status> {
    result.map(Response::new).map_err(|e| e.to_status())
}
