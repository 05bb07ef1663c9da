//! The gRPC passthrough: `inference.GRPCInferenceService` served to gRPC
//! clients (h2c) and relayed, call by call, to the same upstream pool the
//! HTTP front uses — same balancing, health and model awareness, with the
//! client's deadline and custom metadata carried along. Messages pass
//! through unchanged; errors reach the client as gRPC statuses (the
//! upstream's own code and text, or ours from `error.rs`).
//!
//! - `service.rs`: the 20 RPCs and which backend each goes to;
//! - `unary.rs`: one unary call relayed through the core's door
//!   (`app::door::relay`);
//! - `stream_infer.rs`: `ModelStreamInfer`, one backend per stream;
//! - `relayed_infer.rs`: `ModelInfer` calls relayed as encoded (a small
//!   one whole, a large one while it arrives);
//! - `metadata.rs`: `grpc-timeout` and which metadata crosses the gateway;
//! - `bridge.rs`: shared-memory bridge mode: the shared-memory RPCs and
//!   `ModelInfer` naming regions answered through the core;
//! - `health.rs`: `grpc.health.v1.Health` on the same listener;
//! - `incoming.rs`: the listener's connections, capped, before they are
//!   served; `serving.rs`: HTTP/2 on each, calls handed to the services.
//!
//! Clients may compress their messages (gzip, deflate): the gateway
//! inflates them and relays plain messages ([`ACCEPTED_COMPRESSION`]).

mod auth;
mod bridge;
mod health;
mod incoming;
mod metadata;
mod relayed_infer;
mod service;
mod serving;
mod stream_infer;
mod unary;
mod v1;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tonic::codec::CompressionEncoding;

use crate::app::Gateway;
use crate::connections::OpenConnections;
use crate::proto::inference::grpc_inference_service_server::GrpcInferenceServiceServer;

pub use service::Passthrough;
pub use v1::V1GrpcService;

/// Compressions a client's messages may use (`grpc-encoding`), as
/// Triton's own gRPC front accepts them: tonic inflates them (within the
/// decoding limit, which bounds the inflated size), so the gateway reads
/// and relays the plain message, which every server takes. Answers go back
/// uncompressed, as Triton sends them by default.
pub(crate) const ACCEPTED_COMPRESSION: [CompressionEncoding; 2] =
    [CompressionEncoding::Gzip, CompressionEncoding::Deflate];

/// The tonic service, with the upstream message size limit both ways and
/// compressed messages accepted.
pub fn service(gateway: Arc<Gateway>) -> GrpcInferenceServiceServer<Passthrough> {
    let limit = gateway.config().max_message_bytes();
    ACCEPTED_COMPRESSION.into_iter().fold(
        GrpcInferenceServiceServer::new(Passthrough::new(gateway))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit),
        GrpcInferenceServiceServer::accept_compressed,
    )
}

/// Serves gRPC clients on `listener` until `shutdown` resolves, then
/// stops accepting and lets open calls finish. Connections count against
/// a cap of their own (`connections.max_connections`).
pub async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let limits = &gateway.config().connections;
    let refusals = crate::connections::refusal_budget(limits.fd_reserve);
    let open = OpenConnections::new(limits.max_connections, refusals);
    serve_capped(gateway, listener, open, shutdown).await
}

/// [`serve`] with connections counted against the gateway's shared cap.
/// Fails before accepting anything when `grpc.tls`'s files do not load.
pub(crate) async fn serve_capped(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    open: Arc<OpenConnections>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let config = gateway.config();
    let limits = &config.connections;
    let tls = serving::tls_acceptor(config)?;
    let stop_accepting = tokio_util::sync::CancellationToken::new();
    let edge = incoming::Limits {
        handshake: limits.handshake_timeout(),
        linger: limits.linger(),
        tls: tls.is_some(),
    };
    let incoming = incoming::incoming(listener, open, edge, stop_accepting.clone());
    let shutdown = async move {
        shutdown.await;
        stop_accepting.cancel();
    };
    let (health, in_step) = health::service(gateway.clone()).await;
    let serving = serving::Serving {
        services: serving::Services {
            infer: relayed_infer::RelayedInfer::new(service(gateway.clone()), gateway.clone()),
            // The legacy v1 gRPC service shares the listener (its own
            // package name).
            v1: v1::V1GrpcService::new(gateway.clone()).server(),
            health,
        },
        tls,
        http2: serving::http2(limits.h2_ping_interval()),
        handshake: limits.handshake_timeout(),
    };
    let serving = serving::serve(serving, incoming, shutdown);
    // The health statuses follow the pool as long as the listener serves.
    tokio::select! {
        () = serving => Ok(()),
        never = in_step => match never {},
    }
}
