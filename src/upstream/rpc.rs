//! The unary RPCs of `GRPCInferenceService` by their request message: each
//! request type knows its generated client method, its response type and
//! whether a server may lack it ([`Rpc`]), so a call states only its
//! target and its message. [`unary`] makes such a call for the gateway's
//! own needs through [`Pool::call`]; the gRPC passthrough relays its
//! clients' calls with [`Rpc::send`] too. [`model_infer`] is the one
//! `ModelInfer` of the gateway's own: a raw call (`raw`, `unary_reply`).

use std::future::Future;

use tonic::{Request, Response, Status};

use super::backend::OptionalRpc;
use super::call::{request, CallSpec};
use super::encoded::EncodedInfer;
use super::pool::{Pool, Target};
use super::{unary_reply, Client};
use crate::context::RequestContext;
use crate::error::Result;
use crate::proto::inference as pb;

/// A request message and the unary RPC it is sent with. Cheap to clone:
/// every attempt of a call sends a clone (tensor bytes are `Bytes`, a
/// clone is a reference count).
pub(crate) trait Rpc: Clone {
    /// The RPC's response message.
    type Response;
    /// `Some` for an RPC a server may lack (see [`OptionalRpc`]).
    const OPTIONAL: Option<OptionalRpc> = None;

    /// Sends `request` with `client`'s generated method for this RPC.
    fn send(
        client: Client,
        request: Request<Self>,
    ) -> impl Future<Output = Result<Response<Self::Response>, Status>> + Send;
}

/// `Request => Response: method [optional Kind];`: [`Rpc`] for each
/// generated request type (written as a table: the method names differ).
macro_rules! rpcs {
    ($($request:ident => $response:ident: $method:ident $(optional $kind:ident)?;)*) => {$(
        impl Rpc for pb::$request {
            type Response = pb::$response;
            $(const OPTIONAL: Option<OptionalRpc> = Some(OptionalRpc::$kind);)?

            async fn send(
                mut client: Client,
                request: Request<Self>,
            ) -> Result<Response<Self::Response>, Status> {
                client.$method(request).await
            }
        }
    )*};
}

rpcs! {
    ServerMetadataRequest => ServerMetadataResponse: server_metadata;
    ModelReadyRequest => ModelReadyResponse: model_ready;
    ModelMetadataRequest => ModelMetadataResponse: model_metadata optional ModelMetadata;
    ModelConfigRequest => ModelConfigResponse: model_config optional ModelConfig;
    ModelStatisticsRequest => ModelStatisticsResponse: model_statistics;
    RepositoryIndexRequest => RepositoryIndexResponse: repository_index optional RepositoryIndex;
    SystemSharedMemoryStatusRequest => SystemSharedMemoryStatusResponse: system_shared_memory_status;
    SystemSharedMemoryRegisterRequest => SystemSharedMemoryRegisterResponse: system_shared_memory_register;
    SystemSharedMemoryUnregisterRequest => SystemSharedMemoryUnregisterResponse: system_shared_memory_unregister;
    CudaSharedMemoryStatusRequest => CudaSharedMemoryStatusResponse: cuda_shared_memory_status;
    CudaSharedMemoryRegisterRequest => CudaSharedMemoryRegisterResponse: cuda_shared_memory_register;
    CudaSharedMemoryUnregisterRequest => CudaSharedMemoryUnregisterResponse: cuda_shared_memory_unregister;
    TraceSettingRequest => TraceSettingResponse: trace_setting;
    LogSettingsRequest => LogSettingsResponse: log_settings;
}

/// `ModelInfer` of a message encoded once (`encoded`), or the encoding's
/// refusal, which fails the call as the attempt's status (the
/// passthrough's decoded `ModelInfer`; the gateway's own is
/// [`model_infer`]).
impl Rpc for std::result::Result<EncodedInfer, Status> {
    type Response = pb::ModelInferResponse;

    async fn send(
        mut client: Client,
        request: Request<Self>,
    ) -> Result<Response<Self::Response>, Status> {
        client.model_infer(EncodedInfer::request(request)?).await
    }
}

/// One unary RPC for `ctx`, with `message`, on a backend chosen for
/// `target`, within the configured deadline ([`Pool::call`]); an optional
/// RPC's absence is remembered per backend ([`Rpc::OPTIONAL`]).
pub(crate) async fn unary<M: Rpc>(
    pool: &Pool,
    ctx: &RequestContext,
    target: Target<'_>,
    message: M,
) -> Result<M::Response> {
    let spec = CallSpec {
        target,
        deadline: None,
        optional: M::OPTIONAL,
    };
    pool.call(ctx, &spec, |lease, timeout| {
        M::send(
            lease.client(),
            request(message.clone(), timeout, ctx.trace()),
        )
    })
    .await
}

/// `ModelInfer` of a message encoded once (`encoded`; its refusal fails
/// the call as the attempt's status), on a backend serving `target`,
/// within the configured deadline: a raw call whose answer is read by
/// `unary_reply`, not by the generated client (the reason is there).
pub(crate) async fn model_infer(
    pool: &Pool,
    ctx: &RequestContext,
    target: Target<'_>,
    message: std::result::Result<EncodedInfer, Status>,
) -> Result<pb::ModelInferResponse> {
    let spec = CallSpec {
        target,
        deadline: None,
        optional: None,
    };
    let limit = pool.settings().max_message_bytes;
    pool.call(ctx, &spec, |lease, timeout| {
        let message = message.clone();
        let raw = lease.raw();
        let mut metadata = tonic::metadata::MetadataMap::new();
        if let Some(trace) = ctx.trace() {
            trace.inject(&mut metadata);
        }
        async move {
            let reply = raw.call(metadata, timeout, message?).await?;
            let answer = unary_reply::message(reply.into_inner(), limit).await?;
            Ok(Response::new(answer))
        }
    })
    .await
}
