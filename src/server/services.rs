//! The process's background services. Graceful drain: pingora stops
//! accepting on SIGTERM, then always sleeps the whole grace period before
//! tearing the runtimes down (dropping whatever is still running).
//! `app::Inflight` counts the requests being answered (HTTP and gRPC);
//! [`DrainService`] ends the process as soon as
//! that count reaches zero after SIGTERM, so a drained gateway exits in
//! milliseconds, and a busy one when its last request is answered or the
//! grace period ends, whichever comes first. [`ReloadService`] applies a
//! new configuration on `SIGHUP`.

use std::sync::Arc;

use crate::app::{Inflight, OpenConnections, DRAIN_IDLE};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;

/// Exits the process once SIGTERM has arrived, the last request is done,
/// and kept-alive connections had [`DRAIN_IDLE`] to send one more (which
/// is then answered) or have all closed.
pub(super) struct DrainService {
    pub inflight: Arc<Inflight>,
    pub(crate) open: Arc<OpenConnections>,
}

#[async_trait]
impl BackgroundService for DrainService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let _ = shutdown.wait_for(|stop| *stop).await;
        tracing::info!(
            inflight = self.inflight.count(),
            "SIGTERM: draining in-flight requests"
        );
        loop {
            self.inflight.idle().await;
            let closed = tokio::time::timeout(DRAIN_IDLE, self.open.none_open()).await;
            if closed.is_ok() || self.inflight.count() == 0 {
                break;
            }
        }
        tracing::info!("drained; exiting");
        std::process::exit(0);
    }
}

/// Reloads the configuration on `SIGHUP` (see `Gateway::reload`): an
/// invalid file is refused with an error in the log, and the running
/// configuration stays.
pub(super) struct ReloadService {
    pub(super) gateway: Arc<crate::Gateway>,
    /// SIGHUPs caught so far (`signals`).
    pub(super) hangups: tokio::sync::watch::Receiver<u64>,
}

#[async_trait]
impl BackgroundService for ReloadService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut hangups = self.hangups.clone();
        loop {
            tokio::select! {
                hangup = hangups.changed() => match hangup {
                    Ok(()) => self.reload(),
                    Err(_) => return,
                },
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }
}

impl ReloadService {
    fn reload(&self) {
        let Some(source) = self.gateway.reload_source() else {
            return;
        };
        match source().and_then(|config| self.gateway.reload(&config)) {
            Ok(ignored) if ignored.is_empty() => tracing::info!("configuration reloaded"),
            Ok(ignored) => tracing::warn!(
                needs_restart = ?ignored,
                "configuration reloaded; these sections changed but apply only after a restart"
            ),
            Err(error) => {
                tracing::error!(%error, "configuration reload refused; keeping the running one")
            }
        }
    }
}
