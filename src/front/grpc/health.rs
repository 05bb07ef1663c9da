//! `grpc.health.v1.Health` on the passthrough's listener, for Kubernetes'
//! gRPC probes and `grpc-health-probe`: tonic-health's service (`Check` and
//! `Watch`), its statuses kept in step with the pool after every health
//! pass ([`keep_in_step`]):
//!
//! - `""` (the server as a whole) and `inference.GRPCInferenceService`:
//!   `SERVING` while at least one backend is ready (as `ServerReady`),
//!   `NOT_SERVING` otherwise, from the start until the first pass;
//! - each model a backend has reported ready, by name: `SERVING` while a
//!   ready backend has it, `NOT_SERVING` once none has (the name stays, so
//!   a `Watch` sees it go). A model never reported (or on a server without
//!   a repository index, such as KServe) is unknown: `Check` answers
//!   `NOT_FOUND`.
//!
//! From SIGTERM on, every status is `NOT_SERVING` (as `ServerReady`), so a
//! readiness probe takes the pod out of rotation while it drains.
//!
//! A status is set only when it changes, so `Watch` streams send changes,
//! not every pass. Calls pass the gateway's access rules for the `health`
//! group (open to all by default).

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;

use tonic::server::NamedService;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::{Request, Status};
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::{health_reporter, HealthReporter};
use tonic_health::ServingStatus;

use super::auth::admit_grpc;
use crate::app::status;
use crate::app::Gateway;
use crate::config::Group;
use crate::proto::inference::grpc_inference_service_server::GrpcInferenceServiceServer;

use super::service::Passthrough;

/// The service names that mean the whole server.
const SERVER_NAMES: [&str; 2] = [
    "",
    <GrpcInferenceServiceServer<Passthrough> as NamedService>::NAME,
];

/// The health service (behind the access rules), the server `NOT_SERVING`
/// until the first pass says otherwise, and the task that keeps its
/// statuses in step with the pool; the task runs as long as the listener
/// does.
pub(super) async fn service(
    gateway: Arc<Gateway>,
) -> (
    InterceptedService<HealthServer<impl Health>, impl Interceptor + Clone>,
    impl std::future::Future<Output = Infallible>,
) {
    let (reporter, server) = health_reporter();
    let mut set = BTreeMap::new();
    for name in SERVER_NAMES {
        update(&reporter, &mut set, name, false).await;
    }
    let admitting = gateway.clone();
    // The permit is not held: a `Watch` lasts as long as its client likes,
    // and must not count toward the concurrency limits all that time.
    let admit = move |request: Request<()>| -> Result<Request<()>, Status> {
        admit_grpc(&admitting, &request, Group::Health)?;
        Ok(request)
    };
    let in_step = keep_in_step(gateway, reporter, set);
    (InterceptedService::new(server, admit), in_step)
}

/// Sets the statuses after every pass of the pool's health checks.
/// `set`: the statuses set so far.
async fn keep_in_step(
    gateway: Arc<Gateway>,
    reporter: HealthReporter,
    mut set: BTreeMap<String, bool>,
) -> Infallible {
    gateway.started().await;
    while !gateway.is_draining() {
        let pass = gateway.passes();
        let serving = status::serving_models(&gateway);
        let known: BTreeSet<String> = set
            .keys()
            .filter(|name| !SERVER_NAMES.contains(&name.as_str()))
            .cloned()
            .chain(serving.iter().cloned())
            .collect();
        // The models first: once the server reads SERVING, they are set.
        for name in known {
            let up = serving.contains(&name);
            update(&reporter, &mut set, &name, up).await;
        }
        for name in SERVER_NAMES {
            update(&reporter, &mut set, name, status::any_usable(&gateway)).await;
        }
        tokio::select! {
            _ = gateway.passes_reach(pass + 1) => {}
            _ = gateway.drain_started() => {}
        }
    }
    let names: Vec<String> = set.keys().cloned().collect();
    for name in names {
        update(&reporter, &mut set, &name, false).await;
    }
    std::future::pending().await
}

/// Sets `name`'s status when it is new or changed (`set`: what is set).
async fn update(
    reporter: &HealthReporter,
    set: &mut BTreeMap<String, bool>,
    name: &str,
    serving: bool,
) {
    if set.get(name) == Some(&serving) {
        return;
    }
    set.insert(name.to_string(), serving);
    let status = if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    reporter.set_service_status(name, status).await;
}
