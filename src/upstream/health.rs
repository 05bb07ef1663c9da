//! Active health: a gRPC `ServerReady` per backend on its own channel,
//! through pingora-load-balancing's health registry (thresholds, flips),
//! plus the model placement refresh (`RepositoryIndex`, ready models).
//! The background loop that drives discovery and checks is `Pool::run` (pool.rs).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::lb::health_check::HealthCheck;
use pingora::lb::Backend as LbBackend;
use pingora_core::{Error as PingoraError, ErrorType, Result as PingoraResult};

use super::backend::{Backend, Models, OptionalRpc};
use super::UpstreamSettings;
use crate::error::duration_text;
use crate::error::failure_text;
use crate::proto::inference as pb;

/// Finds our backend for a pingora backend (set once the pool exists).
pub(crate) type Lookup = Box<dyn Fn(&SocketAddr) -> Option<Arc<Backend>> + Send + Sync>;

pub(crate) struct ReadyCheck {
    lookup: std::sync::OnceLock<Lookup>,
    settings: Arc<UpstreamSettings>,
}

impl ReadyCheck {
    pub(crate) fn new(settings: &Arc<UpstreamSettings>) -> Arc<ReadyCheck> {
        Arc::new(ReadyCheck {
            lookup: std::sync::OnceLock::new(),
            settings: settings.clone(),
        })
    }

    /// How the check finds our backend for pingora's (set by the pool).
    pub(crate) fn bind(&self, lookup: Lookup) {
        let _ = self.lookup.set(lookup);
    }
}

/// pingora wants a `Box<dyn HealthCheck>`; the pool keeps the `Arc`.
pub(crate) struct Shared(pub Arc<ReadyCheck>);

#[async_trait]
impl HealthCheck for Shared {
    async fn check(&self, target: &LbBackend) -> PingoraResult<()> {
        let fail = |why: String| Err(PingoraError::explain(ErrorType::ConnectError, why));
        let pingora::protocols::l4::socket::SocketAddr::Inet(addr) = target.addr else {
            return fail("not an inet backend".into());
        };
        let Some(backend) = self.0.lookup.get().and_then(|l| l(&addr)) else {
            return fail(format!("{addr} is not a member"));
        };
        let verdict = self.0.verdict(&backend).await;
        backend.record_check(&verdict);
        verdict.or_else(fail)?;
        backend.mark_seen_ready();
        Ok(())
    }

    async fn health_status_change(&self, target: &LbBackend, healthy: bool) {
        if let pingora::protocols::l4::socket::SocketAddr::Inet(addr) = target.addr {
            if let Some(backend) = self.0.lookup.get().and_then(|l| l(&addr)) {
                // The check's failure itself was logged (as a warning) when
                // it began; this is the thresholds' verdict on it.
                tracing::info!(backend = %addr, healthy, "backend health changed");
                backend.set_healthy(healthy);
            }
        }
    }

    fn health_threshold(&self, success: bool) -> usize {
        if success {
            self.0.settings.healthy_threshold
        } else {
            self.0.settings.unhealthy_threshold
        }
    }
}

impl ReadyCheck {
    /// One backend's check: `Err` says why it fails (for the logs, the
    /// backends view and the "no backend" answer).
    async fn verdict(&self, backend: &Backend) -> Result<(), String> {
        let timeout = self.settings.health_timeout;
        match server_ready(backend, timeout).await? {
            true => {
                if backend.models_due(self.settings.model_refresh) {
                    refresh_models(backend, timeout).await;
                }
                Ok(())
            }
            // Triton's strict readiness: "not ready" while any model is not
            // ready. Model-aware routing covers that; only a server whose
            // models are all ready and still says "not ready" is unhealthy.
            false => match fetch_index(backend, timeout).await {
                Ok(index) if index.iter().any(|m| !is_ready(&m.state)) => {
                    backend.set_models(ready_models(index));
                    Ok(())
                }
                _ => Err("not ready (ServerReady answered false)".to_string()),
            },
        }
    }
}

async fn server_ready(backend: &Backend, timeout: Duration) -> Result<bool, String> {
    let mut client = backend.health_client();
    let call = client.server_ready(pb::ServerReadyRequest {});
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(r)) => Ok(r.into_inner().ready),
        Ok(Err(status)) => Err(format!("health check failed: {}", failure_text(&status))),
        Err(_) => Err(format!(
            "health check got no answer within {}",
            duration_text(timeout)
        )),
    }
}

/// The backend's repository index (every model, any state). A backend
/// without the RPC is asked once (`UNIMPLEMENTED` is remembered).
async fn fetch_index(
    backend: &Backend,
    timeout: Duration,
) -> Result<Vec<pb::repository_index_response::ModelIndex>, tonic::Status> {
    let index = OptionalRpc::RepositoryIndex;
    if backend.lacks(index) {
        return Err(tonic::Status::unimplemented(index.name()));
    }
    let mut client = backend.health_client();
    let request = pb::RepositoryIndexRequest {
        repository_name: String::new(),
        ready: false,
    };
    match tokio::time::timeout(timeout, client.repository_index(request)).await {
        Ok(result) => result.map(|r| r.into_inner().models),
        Err(_) => Err(tonic::Status::deadline_exceeded(
            "repository index timed out",
        )),
    }
}

/// A repository index state that means ready: the protocol's `READY`, and
/// `State.READY`, which MLServer 1.7.1 writes (its Python enum's name;
/// docs/interop.md I21).
fn is_ready(state: &str) -> bool {
    state.strip_prefix("State.").unwrap_or(state) == "READY"
}

fn ready_models(index: Vec<pb::repository_index_response::ModelIndex>) -> Models {
    let names: HashSet<String> = index
        .into_iter()
        .filter(|m| is_ready(&m.state))
        .map(|m| m.name)
        .collect();
    Models::Ready(names)
}

/// Asks the backend which models are ready. A server without a repository
/// index (KServe) is `Unknown`: it may get any model (and is not asked
/// again). On other failures the previous knowledge stays.
pub(crate) async fn refresh_models(backend: &Backend, timeout: Duration) {
    match fetch_index(backend, timeout).await {
        Ok(index) => backend.set_models(ready_models(index)),
        Err(s) if s.code() == tonic::Code::Unimplemented => {
            backend.record_missing(OptionalRpc::RepositoryIndex);
            backend.set_models(Models::Unknown)
        }
        Err(s) => {
            tracing::debug!(backend = %backend.addr, error = %s.message(), "model refresh failed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_ready;

    #[test]
    fn ready_is_the_protocols_word_or_mlservers_enum_name() {
        assert!(is_ready("READY"));
        assert!(is_ready("State.READY"));
        for state in [
            "UNAVAILABLE",
            "State.UNAVAILABLE",
            "",
            "ready",
            "LOADING",
            "X.READY",
        ] {
            assert!(!is_ready(state), "{state}");
        }
    }
}
