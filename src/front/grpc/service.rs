//! The `GRPCInferenceService` implementation: where each RPC goes.
//! Model-scoped calls (`ModelReady`, `ModelMetadata`, `ModelConfig`,
//! `ModelStatistics` with a name, `ModelInfer`) go to a backend serving
//! the model — a sequence's own backend for `ModelInfer` with a
//! `sequence_id`; server-wide calls to any ready backend; repository
//! load/unload through the same fan-out as the HTTP front. `ServerLive` and
//! `ServerReady` are answered by the gateway itself, like its HTTP health.

use std::sync::Arc;

use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::auth::{admit_grpc, call_context};
use super::bridge;
use super::stream_infer::ResponseStream;
use super::unary::{relay, relay_of, returned, Target};
use crate::app::door;
use crate::app::fanout::{control_repository, Control, Placed};
use crate::app::guard::Permit;
use crate::app::index;
use crate::app::metadata::{server_metadata, Front};
use crate::app::Gateway;
use crate::config::{FrontKind, Group};
use crate::proto::inference as pb;
use crate::proto::inference::grpc_inference_service_server::GrpcInferenceService;
use crate::translate::from_grpc::request::names_shared_memory;
use crate::translate::sequence::sequence_key;

type Answer<T> = Result<Response<T>, Status>;

pub struct Passthrough {
    gateway: Arc<Gateway>,
}

impl Passthrough {
    pub fn new(gateway: Arc<Gateway>) -> Passthrough {
        Passthrough { gateway }
    }

    fn admit<T>(&self, request: &Request<T>, group: Group) -> Result<Permit, Status> {
        admit_grpc(&self.gateway, request, group)
    }

    /// Repository load/unload: the HTTP front's core (fan-out or one
    /// backend); after a fan-out the backends are listed in the
    /// `tensorgate-backends` response metadata.
    async fn control<Req, Resp: Default>(
        &self,
        request: Request<Req>,
        permit: &Permit,
        model: impl Fn(&Req) -> &str,
        control: impl Fn(Req) -> Control,
    ) -> Answer<Resp> {
        let relay = relay_of(request.metadata());
        let ctx = &call_context(&self.gateway, request.metadata(), permit, FrontKind::Grpc);
        let message = request.into_inner();
        let name = model(&message).to_owned();
        let placed = control_repository(&self.gateway, ctx, &name, control(message), &relay)
            .await
            .map_err(|e| e.to_status())?;
        let mut response = Response::new(Resp::default());
        if let Placed {
            backends: Some(backends),
        } = placed
        {
            if let Ok(value) = MetadataValue::try_from(backends) {
                response.metadata_mut().insert("tensorgate-backends", value);
            }
        }
        Ok(response)
    }
}

#[tonic::async_trait]
impl GrpcInferenceService for Passthrough {
    /// The gateway is live while it runs.
    async fn server_live(
        &self,
        request: Request<pb::ServerLiveRequest>,
    ) -> Answer<pb::ServerLiveResponse> {
        let _permit = self.admit(&request, Group::Health)?;
        Ok(Response::new(pb::ServerLiveResponse { live: true }))
    }

    /// Ready while at least one backend is, until the drain.
    async fn server_ready(
        &self,
        request: Request<pb::ServerReadyRequest>,
    ) -> Answer<pb::ServerReadyResponse> {
        let _permit = self.admit(&request, Group::Health)?;
        Ok(Response::new(pb::ServerReadyResponse {
            ready: self.gateway.ready().await,
        }))
    }

    async fn model_ready(
        &self,
        request: Request<pb::ModelReadyRequest>,
    ) -> Answer<pb::ModelReadyResponse> {
        let permit = self.admit(&request, Group::Health)?;
        let target = Target::model(&request.get_ref().name, &request.get_ref().version);
        relay(&self.gateway, request, target, &permit).await
    }

    /// The upstream's own answer: the client talks to the server (unless
    /// `server.announce_gateway` names the gateway).
    async fn server_metadata(
        &self,
        request: Request<pb::ServerMetadataRequest>,
    ) -> Answer<pb::ServerMetadataResponse> {
        let permit = self.admit(&request, Group::Metadata)?;
        let mut response = relay(&self.gateway, request, Target::ANY, &permit).await?;
        let upstream = std::mem::take(response.get_mut());
        *response.get_mut() = server_metadata(&self.gateway, upstream, Front::Grpc);
        Ok(response)
    }

    async fn model_metadata(
        &self,
        request: Request<pb::ModelMetadataRequest>,
    ) -> Answer<pb::ModelMetadataResponse> {
        let permit = self.admit(&request, Group::Metadata)?;
        let target = Target::model(&request.get_ref().name, &request.get_ref().version);
        relay(&self.gateway, request, target, &permit).await
    }

    async fn model_infer(
        &self,
        request: Request<pb::ModelInferRequest>,
    ) -> Answer<pb::ModelInferResponse> {
        let permit = self.admit(&request, Group::Inference)?;
        let sequence = sequence_key(request.get_ref());
        let _inflight = self.gateway.inflight().enter();
        let (client_metadata, _, message) = request.into_parts();
        let ctx = call_context(&self.gateway, &client_metadata, &permit, FrontKind::Grpc);
        if self.gateway.shm_bridge().is_some() && names_shared_memory(&message) {
            return bridge::model_infer(&self.gateway, &ctx, message).await;
        }
        let relay = relay_of(&client_metadata);
        // Owned: the message goes on, its tensors not copied again.
        let (model, version) = (message.model_name.clone(), message.model_version.clone());
        let aim = door::Aim::sequenced(&model, sequence.as_deref()).at_version(&version);
        returned(door::relay_model_infer(&self.gateway, &ctx, aim, &relay, message).await)
    }

    type ModelStreamInferStream = ResponseStream;

    async fn model_stream_infer(
        &self,
        request: Request<Streaming<pb::ModelInferRequest>>,
    ) -> Answer<ResponseStream> {
        let permit = self.admit(&request, Group::Inference)?;
        super::stream_infer::stream(&self.gateway, request, &permit).await
    }

    async fn model_config(
        &self,
        request: Request<pb::ModelConfigRequest>,
    ) -> Answer<pb::ModelConfigResponse> {
        let permit = self.admit(&request, Group::ModelConfig)?;
        let target = Target::model(&request.get_ref().name, &request.get_ref().version);
        relay(&self.gateway, request, target, &permit).await
    }

    async fn model_statistics(
        &self,
        request: Request<pb::ModelStatisticsRequest>,
    ) -> Answer<pb::ModelStatisticsResponse> {
        let permit = self.admit(&request, Group::Statistics)?;
        let target = Target::model(&request.get_ref().name, &request.get_ref().version);
        relay(&self.gateway, request, target, &permit).await
    }

    async fn repository_index(
        &self,
        request: Request<pb::RepositoryIndexRequest>,
    ) -> Answer<pb::RepositoryIndexResponse> {
        let permit = self.admit(&request, Group::ModelRepository)?;
        let relay_ = relay_of(request.metadata());
        let ctx = call_context(&self.gateway, request.metadata(), &permit, FrontKind::Grpc);
        let listed = index::repository_index(&self.gateway, &ctx, request.get_ref(), Some(&relay_))
            .await
            .map_err(|e| e.to_status())?;
        // The groups' entries one after another: the message has no field
        // to name a group in.
        let models = listed.into_iter().flat_map(|l| l.index.models).collect();
        Ok(Response::new(pb::RepositoryIndexResponse { models }))
    }

    async fn repository_model_load(
        &self,
        request: Request<pb::RepositoryModelLoadRequest>,
    ) -> Answer<pb::RepositoryModelLoadResponse> {
        let permit = self.admit(&request, Group::ModelRepository)?;
        self.control(request, &permit, |r| &r.model_name, Control::Load)
            .await
    }

    async fn repository_model_unload(
        &self,
        request: Request<pb::RepositoryModelUnloadRequest>,
    ) -> Answer<pb::RepositoryModelUnloadResponse> {
        let permit = self.admit(&request, Group::ModelRepository)?;
        self.control(request, &permit, |r| &r.model_name, Control::Unload)
            .await
    }

    async fn system_shared_memory_status(
        &self,
        request: Request<pb::SystemSharedMemoryStatusRequest>,
    ) -> Answer<pb::SystemSharedMemoryStatusResponse> {
        let permit = self.admit(&request, Group::SharedMemory)?;
        if let Some(bridge) = self.gateway.shm_bridge() {
            return bridge::status(bridge, request.get_ref());
        }
        relay(&self.gateway, request, Target::ANY, &permit).await
    }

    async fn system_shared_memory_register(
        &self,
        request: Request<pb::SystemSharedMemoryRegisterRequest>,
    ) -> Answer<pb::SystemSharedMemoryRegisterResponse> {
        let permit = self.admit(&request, Group::SharedMemory)?;
        if let Some(bridge) = self.gateway.shm_bridge() {
            return bridge::register(bridge, request.get_ref());
        }
        relay(&self.gateway, request, Target::ANY, &permit).await
    }

    async fn system_shared_memory_unregister(
        &self,
        request: Request<pb::SystemSharedMemoryUnregisterRequest>,
    ) -> Answer<pb::SystemSharedMemoryUnregisterResponse> {
        let permit = self.admit(&request, Group::SharedMemory)?;
        if let Some(bridge) = self.gateway.shm_bridge() {
            return bridge::unregister(bridge, request.get_ref());
        }
        relay(&self.gateway, request, Target::ANY, &permit).await
    }

    async fn cuda_shared_memory_status(
        &self,
        request: Request<pb::CudaSharedMemoryStatusRequest>,
    ) -> Answer<pb::CudaSharedMemoryStatusResponse> {
        let permit = self.admit(&request, Group::SharedMemory)?;
        if self.gateway.shm_bridge().is_some() {
            return bridge::cuda();
        }
        relay(&self.gateway, request, Target::ANY, &permit).await
    }

    async fn cuda_shared_memory_register(
        &self,
        request: Request<pb::CudaSharedMemoryRegisterRequest>,
    ) -> Answer<pb::CudaSharedMemoryRegisterResponse> {
        let permit = self.admit(&request, Group::SharedMemory)?;
        if self.gateway.shm_bridge().is_some() {
            return bridge::cuda();
        }
        relay(&self.gateway, request, Target::ANY, &permit).await
    }

    async fn cuda_shared_memory_unregister(
        &self,
        request: Request<pb::CudaSharedMemoryUnregisterRequest>,
    ) -> Answer<pb::CudaSharedMemoryUnregisterResponse> {
        let permit = self.admit(&request, Group::SharedMemory)?;
        if self.gateway.shm_bridge().is_some() {
            return bridge::cuda();
        }
        relay(&self.gateway, request, Target::ANY, &permit).await
    }

    async fn trace_setting(
        &self,
        request: Request<pb::TraceSettingRequest>,
    ) -> Answer<pb::TraceSettingResponse> {
        let permit = self.admit(&request, Group::Trace)?;
        relay(&self.gateway, request, Target::ANY, &permit).await
    }

    async fn log_settings(
        &self,
        request: Request<pb::LogSettingsRequest>,
    ) -> Answer<pb::LogSettingsResponse> {
        let permit = self.admit(&request, Group::Logging)?;
        relay(&self.gateway, request, Target::ANY, &permit).await
    }
}
