//! Repository control across the upstream group: a load or unload goes to
//! every ready backend at once (`upstream.fanout_repository`), so a model
//! is placed fleet-wide, and the answer says which backends succeeded.
//! Each backend that answered has its model list refreshed at once, so
//! model-aware routing follows without waiting for the next refresh.
//! The core ([`Gateway::control_repository`]) serves both fronts; each
//! renders the answer itself.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tonic::metadata::MetadataMap;

use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::proto::inference as pb;
use crate::upstream::call::CallSpec;
use crate::upstream::{health, Client, Lease, Pool, Target};

#[derive(Clone)]
pub(crate) enum Control {
    Load(pb::RepositoryModelLoadRequest),
    Unload(pb::RepositoryModelUnloadRequest),
}

/// How the upstream calls are made: the HTTP front uses the defaults, the
/// gRPC passthrough the client's deadline and metadata.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallOptions {
    pub deadline: Option<Duration>,
    pub metadata: MetadataMap,
}

/// What a successful repository control did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// With fan-out: `ADDRESS=ok` per backend, in address order.
    pub backends: Option<String>,
}

/// One backend's outcome.
struct Outcome {
    address: String,
    result: Result<()>,
}

impl Gateway {
    /// Load or unload on every ready backend (`upstream.fanout_repository`)
    /// or on one serving the model; shared by both fronts.
    pub(crate) async fn control_repository(
        &self,
        ctx: &RequestContext,
        model: &str,
        control: Control,
        options: &CallOptions,
    ) -> Result<Placed> {
        self.models().invalidate(model);
        let result = if self.config().upstream.fanout_repository {
            fan_out(ctx, self.pool(), control, options).await
        } else {
            one(ctx, self.pool(), model, &control, options).await
        };
        self.models().invalidate(model);
        result
    }
}

impl Control {
    /// One attempt on `client`, with the deadline and the metadata.
    fn send(
        &self,
        mut client: Client,
        timeout: Duration,
        metadata: &MetadataMap,
    ) -> impl Future<Output = Result<tonic::Response<()>, tonic::Status>> + 'static {
        let control = self.clone();
        let metadata = metadata.clone();
        async move {
            match control {
                Control::Load(r) => client
                    .repository_model_load(with(r, timeout, metadata))
                    .await
                    .map(|r| r.map(drop)),
                Control::Unload(r) => client
                    .repository_model_unload(with(r, timeout, metadata))
                    .await
                    .map(|r| r.map(drop)),
            }
        }
    }
}

fn with<T>(message: T, timeout: Duration, metadata: MetadataMap) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    *request.metadata_mut() = metadata;
    request.set_timeout(timeout);
    request
}

/// Sends to one backend (fan-out disabled).
async fn one(
    ctx: &RequestContext,
    pool: &Pool,
    model: &str,
    control: &Control,
    options: &CallOptions,
) -> Result<Placed> {
    let spec = CallSpec {
        target: Target {
            model: Some(model),
            sequence: None,
        },
        deadline: options.deadline,
        optional: None,
    };
    pool.call(ctx, &spec, |lease, timeout| {
        control.send(lease.client(), timeout, &options.metadata)
    })
    .await?;
    Ok(Placed { backends: None })
}

async fn fan_out(
    ctx: &RequestContext,
    pool: &Arc<Pool>,
    control: Control,
    options: &CallOptions,
) -> Result<Placed> {
    pool.started().await;
    let leases = pool.leases_all();
    if leases.is_empty() {
        return Err(pool
            .pick(&Target::default(), &[])
            .err()
            .unwrap_or_else(|| Error::internal("no backend for repository control")));
    }
    let mut tasks = JoinSet::new();
    for lease in leases {
        tasks.spawn(control_one(
            ctx.clone(),
            pool.clone(),
            lease,
            control.clone(),
            options.clone(),
        ));
    }
    let mut outcomes = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.map_err(|e| Error::internal(format!("fan-out task failed: {e}")))?;
        outcomes.push(outcome);
    }
    outcomes.sort_by(|a, b| a.address.cmp(&b.address));
    answer(outcomes)
}

/// One backend's load or unload, in a task of its own; its time goes to
/// the request's context (a clone is the same record).
async fn control_one(
    ctx: RequestContext,
    pool: Arc<Pool>,
    lease: Lease,
    control: Control,
    options: CallOptions,
) -> Outcome {
    let deadline = pool.deadline(options.deadline);
    let result = pool
        .call_on(&ctx, &lease, deadline, |lease, timeout| {
            control.send(lease.client(), timeout, &options.metadata)
        })
        .await
        .map(drop);
    health::refresh_models(lease.backend(), pool.settings().health_timeout).await;
    Outcome {
        address: lease.addr().to_string(),
        result: result.map_err(|a| a.into_error()),
    }
}

/// All succeeded: the backends listed (the HTTP front's
/// `Tensorgate-Backends`). All failed: the first error, verbatim (a one-backend group
/// answers exactly as its server). Some failed: that error's status with
/// a message naming who failed and who succeeded.
fn answer(outcomes: Vec<Outcome>) -> Result<Placed> {
    let summary: Vec<String> = outcomes
        .iter()
        .map(|o| {
            format!(
                "{}={}",
                o.address,
                if o.result.is_ok() { "ok" } else { "failed" }
            )
        })
        .collect();
    let ok: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.result.is_ok())
        .map(|o| o.address.as_str())
        .collect();
    let failed: Vec<(&str, &Error)> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|e| (o.address.as_str(), e)))
        .collect();
    let Some((_, first)) = failed.first() else {
        return Ok(Placed {
            backends: Some(summary.join(", ")),
        });
    };
    if ok.is_empty() {
        return Err((*first).clone());
    }
    let reasons: Vec<String> = failed
        .iter()
        .map(|(address, e)| format!("{address}: {}", e.message))
        .collect();
    Err(Error::new(
        first.kind,
        format!(
            "failed on {} of {} backends ({}); succeeded on {}",
            failed.len(),
            outcomes.len(),
            reasons.join("; "),
            ok.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    fn outcome(address: &str, result: Result<()>) -> Outcome {
        Outcome {
            address: address.to_string(),
            result,
        }
    }

    #[test]
    fn all_ok_lists_every_backend() {
        let r = answer(vec![outcome("a:1", Ok(())), outcome("b:1", Ok(()))]).unwrap();
        assert_eq!(r.backends.as_deref(), Some("a:1=ok, b:1=ok"));
    }

    #[test]
    fn all_failed_is_the_servers_error_verbatim() {
        let e = Error::new(Kind::Internal, "failed to load 'x'");
        let r = answer(vec![
            outcome("a:1", Err(e.clone())),
            outcome("b:1", Err(e.clone())),
        ]);
        assert_eq!(r.unwrap_err(), e);
    }

    #[test]
    fn a_partial_failure_names_who_failed_and_who_succeeded() {
        let e = Error::new(Kind::Unavailable, "polling mode");
        let r = answer(vec![outcome("a:1", Ok(())), outcome("b:1", Err(e))]).unwrap_err();
        assert_eq!(r.kind, Kind::Unavailable);
        assert_eq!(
            r.message,
            "failed on 1 of 2 backends (b:1: polling mode); succeeded on a:1"
        );
    }
}
