//! The process's background services. [`DrainService`] runs the graceful
//! drain after SIGTERM and ends the process; [`ReloadService`] applies a
//! new configuration on `SIGHUP`.

use std::sync::Arc;
use std::time::Duration;

use crate::app::Gateway;
use crate::connections::OpenConnections;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;

/// The drain after SIGTERM, within `server.grace_period_seconds`. The
/// gateway has stopped saying it is ready and the listeners have closed
/// (`listen`: new connections are refused by the kernel); then
///
/// 1. requests are served as usual, HTTP/1 answers saying
///    `Connection: close`; h2 and gRPC connections have had GOAWAY; an
///    idle HTTP/1 keep-alive connection may still send one request (a
///    client busy on it sends it soon, and closing under it would lose it);
/// 2. [`closing_phase`] before the end, idle connections close lingering
///    (`app::linger`);
/// 3. at the end, requests still in flight are cut: counted
///    (`tensorgate_drain_cut_requests_total`), logged, and the process
///    exits.
///
/// The process exits as soon as no connection is open and no request is
/// in flight, so a drain whose clients close their connections takes
/// milliseconds. pingora itself sleeps its whole grace period, which is
/// set [`BACKSTOP_SECONDS`] longer: this service ends the process first.
pub(super) struct DrainService {
    pub(super) gateway: Arc<Gateway>,
    pub(super) open: Arc<OpenConnections>,
    pub(super) grace: Duration,
}

/// How much longer than the drain pingora's own grace period is.
pub(super) const BACKSTOP_SECONDS: u64 = 2;

/// The drain's last phase: long enough for an idle connection's lingering
/// close (`connections.linger_ms`), and never more than half the grace
/// period.
fn closing_phase(grace: Duration, linger: Duration) -> Duration {
    linger.min(grace / 2)
}

#[async_trait]
impl BackgroundService for DrainService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let _ = shutdown.wait_for(|stop| *stop).await;
        self.gateway.start_draining();
        let inflight = self.gateway.inflight();
        tracing::info!(
            inflight = inflight.count(),
            connections = self.open.count(),
            grace_period_seconds = self.grace.as_secs(),
            "SIGTERM: draining"
        );
        let end = tokio::time::Instant::now() + self.grace;
        let drained = async {
            loop {
                self.open.none_open().await;
                inflight.idle().await;
                if self.open.count() == 0 {
                    return;
                }
            }
        };
        tokio::pin!(drained);
        let linger = self.gateway.config().connections.linger();
        let last_phase = tokio::time::sleep_until(end - closing_phase(self.grace, linger));
        tokio::select! {
            _ = &mut drained => exit("drained; exiting"),
            _ = last_phase => self.open.close_idle(),
        }
        tokio::select! {
            _ = &mut drained => exit("drained; exiting"),
            _ = tokio::time::sleep_until(end) => {}
        }
        let cut = inflight.count();
        let metrics = self.gateway.metrics();
        metrics.drain_cut.inc_by(cut as u64);
        tracing::warn!(
            in_flight = cut,
            cut_in_all = metrics.drain_cut.get(),
            "grace period over: requests still in flight are cut; exiting"
        );
        crate::telemetry::exit(0);
    }
}

fn exit(why: &str) -> ! {
    tracing::info!("{why}");
    crate::telemetry::exit(0)
}

/// Reloads the configuration on `SIGHUP` (see `Gateway::reload`): an
/// invalid file is refused with an error in the log, and the running
/// configuration stays.
pub(super) struct ReloadService {
    pub(super) gateway: Arc<crate::app::Gateway>,
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
