//! The legacy v1 gRPC service `nvidia.inferenceserver.GRPCService` (Health,
//! Status, Infer, StreamInfer), translated to v2 exactly like the HTTP
//! front (same status assembly, same infer core). As in TRTIS, outcomes
//! travel in each answer's `request_status` (code and message from the
//! error table); the gRPC status itself is OK. Class results are in the
//! infer answer's `meta_data` (gRPC has no trailer); `raw_output` has one
//! entry per requested output, empty when it is not raw. Served on the
//! gRPC passthrough listener (`--grpc-listen`), which mounts
//! [`V1GrpcService::server`] beside the v2 service.

use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::auth::{admit_grpc, call_context};
use crate::app::v1;
use crate::app::Gateway;
use crate::config::{FrontKind, Group};
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::model::ModelRef;
use crate::proto::v1 as pb;
use pb::grpc_service_server::{GrpcService, GrpcServiceServer};

/// Requests of one `StreamInfer` call answered ahead of the client reading.
const STREAM_BUFFER: usize = 16;

/// The v1 gRPC service over a shared gateway.
#[derive(Clone)]
pub struct V1GrpcService {
    gateway: Arc<Gateway>,
}

impl V1GrpcService {
    pub fn new(gateway: Arc<Gateway>) -> V1GrpcService {
        V1GrpcService { gateway }
    }

    /// The tonic service, with the gateway's message-size limit both ways.
    pub fn server(self) -> GrpcServiceServer<V1GrpcService> {
        let limit = self.gateway.config().max_message_bytes();
        super::ACCEPTED_COMPRESSION.into_iter().fold(
            GrpcServiceServer::new(self)
                .max_decoding_message_size(limit)
                .max_encoding_message_size(limit),
            GrpcServiceServer::accept_compressed,
        )
    }
}

/// `request_status` of an outcome.
fn request_status(gateway: &Gateway, outcome: Option<&Error>) -> pb::RequestStatus {
    let (code, msg) = match outcome {
        None => (pb::RequestStatusCode::Success, String::new()),
        Some(error) => (error.kind.v1_status().1, error.message.clone()),
    };
    pb::RequestStatus {
        code: code as i32,
        msg,
        server_id: gateway.config().v1.server_id.clone(),
        request_id: v1::next_request_id(),
    }
}

/// One `Infer` call: inputs back to back as the HTTP body would hold them.
async fn infer(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    request: pb::InferRequest,
) -> pb::InferResponse {
    let header = request.meta_data.unwrap_or_default();
    let id = header.id;
    let model = ModelRef {
        name: request.model_name,
        // TRTIS: a negative version means the latest.
        version: match request.model_version {
            v if v < 0 => String::new(),
            v => v.to_string(),
        },
    };
    let data = match request.raw_input.as_slice() {
        [one] => one.clone(),
        many => many
            .iter()
            .fold(BytesMut::new(), |mut all, b| {
                all.extend_from_slice(b);
                all
            })
            .freeze(),
    };
    match v1::infer(gateway, ctx, &model, &header, &data).await {
        Ok((meta_data, raw_output)) => pb::InferResponse {
            request_status: Some(request_status(gateway, None)),
            meta_data: Some(meta_data),
            raw_output,
        },
        Err(error) => pb::InferResponse {
            request_status: Some(request_status(gateway, Some(&error))),
            meta_data: Some(pb::InferResponseHeader {
                id,
                ..Default::default()
            }),
            raw_output: Vec::<Bytes>::new(),
        },
    }
}

type InferStream = Pin<Box<dyn Stream<Item = Result<pb::InferResponse, Status>> + Send>>;

#[tonic::async_trait]
impl GrpcService for V1GrpcService {
    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let permit = admit_grpc(&self.gateway, &request, Group::Metadata)?;
        let ctx = &call_context(&self.gateway, request.metadata(), &permit, FrontKind::V1);
        let name = request.into_inner().model_name;
        let model = (!name.is_empty()).then_some(name.as_str());
        let result = v1::server_status(&self.gateway, ctx, model).await;
        Ok(Response::new(pb::StatusResponse {
            request_status: Some(request_status(&self.gateway, result.as_ref().err())),
            server_status: result.ok(),
        }))
    }

    async fn health(
        &self,
        request: Request<pb::HealthRequest>,
    ) -> Result<Response<pb::HealthResponse>, Status> {
        let _permit = admit_grpc(&self.gateway, &request, Group::Health)?;
        let result = match request.into_inner().mode.as_str() {
            "live" => v1::live(&self.gateway).await,
            "ready" => v1::ready(&self.gateway).await,
            other => Err(Error::new(
                Kind::InvalidArg,
                format!("unknown health mode '{other}'"),
            )),
        };
        Ok(Response::new(pb::HealthResponse {
            request_status: Some(request_status(&self.gateway, result.as_ref().err())),
            health: result.unwrap_or(false),
        }))
    }

    async fn infer(
        &self,
        request: Request<pb::InferRequest>,
    ) -> Result<Response<pb::InferResponse>, Status> {
        let permit = admit_grpc(&self.gateway, &request, Group::Inference)?;
        let ctx = call_context(&self.gateway, request.metadata(), &permit, FrontKind::V1);
        Ok(Response::new(
            infer(&self.gateway, &ctx, request.into_inner()).await,
        ))
    }

    type StreamInferStream = InferStream;

    /// Answers the stream's requests in order, one at a time (v1 streams
    /// serve correlated requests, whose order matters).
    async fn stream_infer(
        &self,
        request: Request<Streaming<pb::InferRequest>>,
    ) -> Result<Response<InferStream>, Status> {
        let permit = admit_grpc(&self.gateway, &request, Group::Inference)?;
        let stream_ctx = call_context(&self.gateway, request.metadata(), &permit, FrontKind::V1);
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_BUFFER);
        let gateway = self.gateway.clone();
        tokio::spawn(async move {
            while let Some(next) = inbound.next().await {
                // Each request of the stream is a request of its own,
                // routed on its own.
                let ctx = stream_ctx.another();
                let answer = match next {
                    Ok(request) => Ok(infer(&gateway, &ctx, request).await),
                    Err(status) => Err(status),
                };
                let stop = answer.is_err();
                if tx.send(answer).await.is_err() || stop {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
