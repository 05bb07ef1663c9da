//! The composition root of the serving process: raise the file limit and
//! size the connection cap from it, catch the process's signals
//! (`signals`), bind every listener (a failure ends the process at once,
//! before anything reports "listening"), then run pingora's `Server` —
//! process lifecycle, runtimes — with the background services: the edge
//! (every listener and connection, the pool), the drain and the reload.

use std::sync::Arc;

use pingora_core::server::configuration::ServerConf;
use pingora_core::server::{RunArgs, Server};
use pingora_core::services::background::background_service;

use crate::app::Gateway;
use crate::connections::OpenConnections;
use listen::{Bound, Edge};
use services::{DrainService, ReloadService};
use signals::Signals;

mod listen;
mod services;
mod signals;
mod workers;

/// Runs the gateway until the process is told to stop. Returns only when
/// a listener cannot be set up.
pub fn run(gateway: Gateway) -> Result<std::convert::Infallible, String> {
    let config = gateway.config().clone();
    let gateway = Arc::new(gateway);
    let cap = connection_cap(&config.connections);
    let signals = Signals::catch().map_err(|e| format!("cannot catch signals: {e}"))?;
    let bound = Bound::bind(&gateway)?;
    let grace = config.server.grace_period_seconds;
    let conf = ServerConf {
        threads: config.server.threads,
        // The drain service ends the process at the grace period; pingora's
        // own timer (it always sleeps its whole grace period) is a backstop.
        grace_period_seconds: Some(grace + services::BACKSTOP_SECONDS),
        // After the grace period whatever still runs is dropped: no second wait.
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let refusals = crate::connections::refusal_budget(config.connections.fd_reserve);
    let open = OpenConnections::new(cap, refusals);
    let drain = DrainService {
        gateway: gateway.clone(),
        open: open.clone(),
        grace: std::time::Duration::from_secs(grace),
    };
    server.add_service(background_service("drain", drain));
    let reload = ReloadService {
        gateway: gateway.clone(),
        hangups: signals.hangups,
    };
    server.add_service(background_service("reload", reload));
    let groups: Vec<String> = config
        .groups()
        .iter()
        .map(|(name, group)| format!("{name}={:?}", group.addresses))
        .collect();
    tracing::info!(
        listeners = %bound.describe(),
        groups = %groups.join(" "),
        max_connections = cap,
        "tensorgate listening"
    );
    let edge = Edge::new(gateway, bound, open);
    let mut edge = background_service("edge", edge);
    // Clients are served on the serving threads (workers.rs); this
    // runtime keeps only the admin listener and the pool's first pass.
    edge.threads = Some(1);
    server.add_service(edge);
    server.run(RunArgs {
        shutdown_signal: Box::new(signals.stops),
    });
    crate::telemetry::exit(0)
}

/// `connections.max_connections`, lowered so that the cap plus the reserve
/// fit in the process's file limit (raised first to its hard maximum, as
/// nginx's `worker_rlimit_nofile` does).
fn connection_cap(limits: &crate::config::Connections) -> usize {
    use rlimit::Resource;
    let (soft, hard) = Resource::NOFILE.get().unwrap_or((u64::MAX, u64::MAX));
    let files = match rlimit::increase_nofile_limit(hard) {
        Ok(raised) => raised,
        Err(_) => soft,
    };
    let files = usize::try_from(files).unwrap_or(usize::MAX);
    let fit = files.saturating_sub(limits.fd_reserve).max(1);
    if fit < limits.max_connections {
        tracing::warn!(
            file_limit = files,
            fd_reserve = limits.fd_reserve,
            max_connections = fit,
            configured = limits.max_connections,
            "connections.max_connections lowered to fit the file limit"
        );
    }
    limits.max_connections.min(fit)
}
