//! Builds and runs the pingora server: one HTTP service (h1 + h2c) bound to
//! the configured address, with a grace period that suits Kubernetes.

use std::sync::Arc;

use pingora_core::apps::HttpServerOptions;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::Server;

use crate::front::admin::AdminApp;
use crate::front::drain::DrainService;
use crate::front::handler::Gateway;
use crate::front::session::GatewayService;
use pingora_core::apps::http_app::HttpServer;
use pingora_core::services::background::background_service;
use pingora_core::services::listening::Service;

/// Runs the gateway until the process is told to stop. Never returns.
pub fn run(gateway: Gateway) -> ! {
    let config = gateway.config().clone();
    let conf = ServerConf {
        threads: config.server.threads,
        grace_period_seconds: Some(config.server.grace_period_seconds),
        // After the grace period whatever still runs is dropped: no second wait.
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let gateway = Arc::new(gateway);
    let drain = DrainService {
        inflight: gateway.inflight().clone(),
    };
    server.add_service(background_service("drain", drain));
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
    server.add_service(http);
    tracing::info!(listen = %config.server.listen, upstream = ?config.upstream.addresses, "tensorgate listening");
    server.run_forever()
}
