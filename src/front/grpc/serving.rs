//! The gRPC listener's connections served by hyper's HTTP/2 server, each
//! call handed on its path to one of the listener's three services: the
//! inference service (its `ModelInfer` calls relayed as encoded), the
//! legacy v1 service, and `grpc.health.v1.Health`; any other path gets
//! `UNIMPLEMENTED`, as tonic's router answers it.
//!
//! Why not tonic's `Server`: it wraps every call in five tower layers
//! (connection info, error recovery, a server-side `grpc-timeout`, axum's
//! router, a oneshot), ~6k instructions of a relayed `ModelInfer`'s ~104k
//! (docs/performance.md), and the gateway needs none of them: its services
//! never fail, every relayed call keeps the client's deadline itself
//! (`metadata::deadline`, answered a twentieth early), and three services
//! need a name match, not a router. What is kept from it: its HTTP/2
//! settings ([`http2`]), TLS with ALPN `h2`, keep-alive pings, the
//! client's address in each call's extensions, and the drain — stop
//! accepting, GOAWAY on every connection, wait for the calls in flight.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use pingora_rustls::{ServerConfig, TlsAcceptor};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tonic::body::Body;
use tonic::codegen::BoxFuture;
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;
use tonic::Status;
use tonic_health::pb::health_server;
use tower_service::Service;

use super::incoming::EdgeIo;
use super::relayed_infer::RelayedInfer;
use super::v1::V1GrpcService;
use crate::proto::v1::grpc_service_server::GrpcServiceServer;

/// The listener's three services.
#[derive(Clone)]
pub(super) struct Services<H> {
    pub(super) infer: RelayedInfer,
    pub(super) v1: GrpcServiceServer<V1GrpcService>,
    pub(super) health: H,
}

/// The HTTP/2 settings (made once, used for every connection), as tonic's
/// `Server` set them with the gateway's options: keep-alive pings every `ping` (a peer that does not answer
/// one within `ping` is closed), no limit on concurrent streams per
/// connection (gRPC servers set none; the connection cap bounds the
/// load). hyper's own protection against streams reset at once stays on
/// (tonic turned it off).
pub(super) fn http2(ping: Duration) -> hyper::server::conn::http2::Builder<TokioExecutor> {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(ping)
        .keep_alive_timeout(ping)
        .max_concurrent_streams(None);
    builder
}

/// `grpc.tls`: the certificate and key files of the HTTPS listener, read
/// at start (a renewed certificate needs a restart here), ALPN `h2`.
pub(super) fn tls_acceptor(config: &crate::config::Config) -> io::Result<Option<TlsAcceptor>> {
    if !config.grpc.tls {
        return Ok(None);
    }
    let (Some(cert), Some(key)) = (&config.tls.cert_file, &config.tls.key_file) else {
        return Ok(None);
    };
    pingora_rustls::install_default_crypto_provider();
    let loaded =
        pingora_rustls::load_certs_and_key_files(&cert.to_string_lossy(), &key.to_string_lossy())
            .map_err(|e| io::Error::other(format!("grpc.tls: {e}")))?;
    let (certs, key) = loaded.ok_or_else(|| {
        io::Error::other("grpc.tls: no certificate or no private key in the files")
    })?;
    let mut server = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| io::Error::other(format!("grpc.tls: {e}")))?;
    server.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(server))))
}

/// The health service's calls as the listener serves them: tonic-health's
/// service behind the access rules, its answer's body (the interceptor's
/// own type) made a [`Body`].
pub(super) trait HealthCalls: Clone + Send + Sync + 'static {
    fn serve(&self, request: http::Request<Body>) -> BoxFuture<http::Response<Body>, Infallible>;
}

impl<S, B> HealthCalls for S
where
    S: Service<http::Request<Body>, Response = http::Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    fn serve(&self, request: http::Request<Body>) -> BoxFuture<http::Response<Body>, Infallible> {
        let call = self.clone().call(request);
        Box::pin(async move { call.await.map(|answer| answer.map(Body::new)) })
    }
}

/// How the connections are served: the services, TLS, the HTTP/2
/// settings ([`http2`]) and the TLS handshake's deadline.
pub(super) struct Serving<H> {
    pub(super) services: Services<H>,
    pub(super) tls: Option<TlsAcceptor>,
    pub(super) http2: hyper::server::conn::http2::Builder<TokioExecutor>,
    pub(super) handshake: Duration,
}

/// Serves the connections of `incoming` until `shutdown` resolves; then
/// stops taking connections (dropping `incoming` closes the listener),
/// asks every open connection to end (GOAWAY: no new streams), and
/// returns once the calls in flight have ended and every connection is
/// closed.
pub(super) async fn serve<H>(
    serving: Serving<H>,
    incoming: impl tokio_stream::Stream<Item = io::Result<EdgeIo>>,
    shutdown: impl Future<Output = ()>,
) where
    H: HealthCalls,
{
    let serving = Arc::new(serving);
    let (drain, draining) = watch::channel(());
    {
        let mut incoming = std::pin::pin!(incoming);
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let io = tokio::select! {
                () = &mut shutdown => break,
                io = incoming.next() => io,
            };
            match io {
                Some(Ok(io)) => {
                    tokio::spawn(connection(serving.clone(), io, draining.clone()));
                }
                Some(Err(_)) => continue,
                None => break,
            }
        }
    }
    let _ = drain.send(());
    drop(draining);
    drain.closed().await;
}

/// One connection: its TLS handshake (within the handshake deadline),
/// then HTTP/2 until it closes; a drain ends it gracefully.
async fn connection<H>(serving: Arc<Serving<H>>, io: EdgeIo, mut draining: watch::Receiver<()>)
where
    H: HealthCalls,
{
    let peer = io.info();
    match &serving.tls {
        None => http2_until_closed(&serving, io, peer, &mut draining).await,
        Some(acceptor) => {
            let handshake = tokio::time::timeout(serving.handshake, acceptor.accept(io));
            let tls = tokio::select! {
                tls = handshake => tls,
                _ = draining.changed() => return,
            };
            if let Ok(Ok(tls)) = tls {
                http2_until_closed(&serving, tls, peer, &mut draining).await;
            }
        }
    }
}

async fn http2_until_closed<H, IO>(
    serving: &Serving<H>,
    io: IO,
    peer: TcpConnectInfo,
    draining: &mut watch::Receiver<()>,
) where
    H: HealthCalls,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let calls = Calls {
        services: serving.services.clone(),
        peer,
    };
    let conn = serving.http2.serve_connection(TokioIo::new(io), calls);
    let mut conn = std::pin::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        _ = draining.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(error) = ended {
        tracing::debug!(%error, "gRPC connection ended");
    }
}

/// One connection's calls.
#[derive(Clone)]
struct Calls<H> {
    services: Services<H>,
    peer: TcpConnectInfo,
}

impl<H> hyper::service::Service<http::Request<Incoming>> for Calls<H>
where
    H: HealthCalls,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<http::Response<Body>, Infallible>;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        let mut request = request.map(Body::new);
        // Read by `tonic::Request::remote_addr` (the access rules).
        request.extensions_mut().insert(self.peer.clone());
        let services = &self.services;
        match service_name(request.uri().path()) {
            Some(RelayedInfer::NAME) => services.infer.serve(request),
            Some(<GrpcServiceServer<V1GrpcService> as NamedService>::NAME) => {
                services.v1.clone().call(request)
            }
            Some(health_server::SERVICE_NAME) => services.health.serve(request),
            _ => Box::pin(async {
                let (parts, ()) = Status::unimplemented("").into_http::<()>().into_parts();
                Ok(http::Response::from_parts(parts, Body::empty()))
            }),
        }
    }
}

/// The service of a gRPC path, `/{service}/{method}` (an unknown method
/// is the service's to answer `UNIMPLEMENTED`).
fn service_name(path: &str) -> Option<&str> {
    Some(path.strip_prefix('/')?.split_once('/')?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_served_on_the_service_its_path_names() {
        assert_eq!(
            service_name("/inference.GRPCInferenceService/ModelInfer"),
            Some("inference.GRPCInferenceService")
        );
        assert_eq!(
            service_name("/grpc.health.v1.Health/Check"),
            Some(health_server::SERVICE_NAME)
        );
        for stray in ["", "/", "/inference.GRPCInferenceService", "a/b"] {
            assert_eq!(service_name(stray), None, "{stray}");
        }
    }
}
