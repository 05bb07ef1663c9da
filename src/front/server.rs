//! Builds and runs the pingora server: one HTTP service (h1 + h2c) bound to
//! the configured address, the gRPC passthrough (`grpc.listen`) as a
//! background service beside it, and a grace period that suits Kubernetes.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use pingora_core::apps::HttpServerOptions;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::{Server, ShutdownWatch};
use pingora_core::services::background::{background_service, BackgroundService};

use crate::front::admin::AdminApp;
use crate::front::drain::{DrainService, ReloadService};
use crate::front::handler::Gateway;
use crate::front::session::GatewayService;
use crate::front::tls::ReloadingCert;
use pingora_core::apps::http_app::HttpServer;
use pingora_core::listeners::tls::TlsSettings;
use pingora_core::services::listening::Service;

/// Runs the gateway until the process is told to stop. Returns only when
/// a listener cannot be set up.
pub fn run(gateway: Gateway) -> Result<std::convert::Infallible, String> {
    let config = gateway.config().clone();
    let gateway = Arc::new(gateway);
    // Bound before pingora starts, so a taken port is reported plainly.
    let grpc = match &config.grpc.listen {
        Some(listen) => Some(GrpcListener::bind(gateway.clone(), listen)?),
        None => None,
    };
    let conf = ServerConf {
        threads: config.server.threads,
        grace_period_seconds: Some(config.server.grace_period_seconds),
        // After the grace period whatever still runs is dropped: no second wait.
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let drain = DrainService {
        inflight: gateway.inflight().clone(),
    };
    server.add_service(background_service("drain", drain));
    let reload = ReloadService {
        gateway: gateway.clone(),
    };
    server.add_service(background_service("reload", reload));
    if let Some(listen) = &config.admin.listen {
        let app = AdminApp {
            gateway: gateway.clone(),
        };
        let mut admin = Service::new("admin".to_string(), HttpServer::new_app(app));
        admin.add_tcp(listen);
        server.add_service(admin);
    }
    let service = GatewayService { gateway };
    let mut http = pingora_proxy::http_proxy_service(&server.configuration, service);
    if let Some(app) = http.app_logic_mut() {
        let mut options = HttpServerOptions::default();
        options.h2c = true;
        app.server_options = Some(options);
    }
    http.add_tcp(&config.server.listen);
    if let (Some(listen), Some(cert), Some(key)) = (
        &config.tls.listen,
        &config.tls.cert_file,
        &config.tls.key_file,
    ) {
        let check = std::time::Duration::from_millis(config.tls.reload_check_ms);
        let resolver = ReloadingCert::new(cert, key, check)?;
        let mut settings = TlsSettings::intermediate("", "").map_err(|e| e.to_string())?;
        settings.set_cert_resolver(Arc::new(resolver));
        settings.enable_h2();
        http.add_tls_with_settings(listen, None, settings);
        tracing::info!(%listen, "HTTPS listening");
    }
    server.add_service(http);
    if let Some(grpc) = grpc {
        tracing::info!(listen = %grpc.addr, "gRPC passthrough listening");
        let mut background = background_service("grpc passthrough", grpc);
        background.threads = Some(config.server.threads);
        server.add_service(background);
    }
    tracing::info!(listen = %config.server.listen, upstream = ?config.upstream.addresses, "tensorgate listening");
    server.run_forever()
}

/// The gRPC passthrough as a pingora background service: serves on its
/// socket until pingora's shutdown flips, then lets open calls finish.
struct GrpcListener {
    gateway: Arc<Gateway>,
    addr: std::net::SocketAddr,
    /// Bound up front; taken by the service when it starts.
    listener: Mutex<Option<std::net::TcpListener>>,
}

impl GrpcListener {
    fn bind(gateway: Arc<Gateway>, listen: &str) -> Result<GrpcListener, String> {
        let listener = std::net::TcpListener::bind(listen)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("cannot listen for gRPC on {listen}: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("cannot listen for gRPC on {listen}: {e}"))?;
        Ok(GrpcListener {
            gateway,
            addr,
            listener: Mutex::new(Some(listener)),
        })
    }
}

#[async_trait]
impl BackgroundService for GrpcListener {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let taken = self.listener.lock().map(|mut l| l.take()).ok().flatten();
        let Some(listener) = taken else {
            return;
        };
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(error) => {
                tracing::error!(%error, "gRPC passthrough cannot use its socket");
                return;
            }
        };
        let stop = async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
            tracing::info!("gRPC passthrough: shutting down, letting open calls finish");
        };
        if let Err(error) = crate::passthrough::serve(self.gateway.clone(), listener, stop).await {
            tracing::error!(%error, "gRPC passthrough stopped");
        }
    }
}
