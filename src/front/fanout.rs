//! Repository control across the upstream group: a load or unload goes to
//! every ready backend at once (`upstream.fanout_repository`), so a model
//! is placed fleet-wide, and the answer says which backends succeeded.
//! Each backend that answered has its model list refreshed at once, so
//! model-aware routing follows without waiting for the next refresh.

use std::sync::Arc;

use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::front::handler::Gateway;
use crate::front::http::HttpResponse;
use crate::proto::inference as pb;
use crate::upstream::call::{request, rpc};
use crate::upstream::{health, Lease, Pool, Target};

#[derive(Clone)]
pub enum Control {
    Load(pb::RepositoryModelLoadRequest),
    Unload(pb::RepositoryModelUnloadRequest),
}

/// One backend's outcome.
struct Outcome {
    address: String,
    result: Result<()>,
}

impl Gateway {
    pub(crate) async fn repository_control(
        &self,
        model: &str,
        control: Control,
    ) -> Result<HttpResponse> {
        self.models.invalidate(model);
        let result = if self.config.upstream.fanout_repository {
            fan_out(&self.pool, control).await
        } else {
            one(&self.pool, model, control).await
        };
        self.models.invalidate(model);
        result
    }
}

/// Sends to one backend (fan-out disabled).
async fn one(pool: &Pool, model: &str, control: Control) -> Result<HttpResponse> {
    let target = Target {
        model: Some(model),
        sequence: None,
    };
    match control {
        Control::Load(r) => rpc!(pool, target, repository_model_load, r).map(|_| ())?,
        Control::Unload(r) => rpc!(pool, target, repository_model_unload, r).map(|_| ())?,
    }
    Ok(HttpResponse::empty(200, "application/json"))
}

async fn fan_out(pool: &Arc<Pool>, control: Control) -> Result<HttpResponse> {
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
        tasks.spawn(control_one(pool.clone(), lease, control.clone()));
    }
    let mut outcomes = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        outcomes.push(joined.map_err(|e| Error::internal(format!("fan-out task failed: {e}")))?);
    }
    outcomes.sort_by(|a, b| a.address.cmp(&b.address));
    answer(outcomes)
}

async fn control_one(pool: Arc<Pool>, lease: Lease, control: Control) -> Outcome {
    let deadline = pool.deadline(None);
    let result = match control {
        Control::Load(r) => pool
            .call_on(&lease, deadline, &|mut c: crate::upstream::Client, t| {
                let r = r.clone();
                async move { c.repository_model_load(request(r, t)).await }
            })
            .await
            .map(|_| ()),
        Control::Unload(r) => pool
            .call_on(&lease, deadline, &|mut c: crate::upstream::Client, t| {
                let r = r.clone();
                async move { c.repository_model_unload(request(r, t)).await }
            })
            .await
            .map(|_| ()),
    };
    health::refresh_models(lease.backend(), pool.settings().health_timeout).await;
    Outcome {
        address: lease.addr().to_string(),
        result: result.map_err(|a| a.into_error()),
    }
}

/// All succeeded: Triton's empty 200, plus `Tensorgate-Backends` listing
/// them. All failed: the first error, verbatim (a one-backend group
/// answers exactly as its server). Some failed: that error's status with
/// a message naming who failed and who succeeded.
fn answer(outcomes: Vec<Outcome>) -> Result<HttpResponse> {
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
        let mut response = HttpResponse::empty(200, "application/json");
        response
            .headers
            .push(("Tensorgate-Backends", summary.join(", ")));
        return Ok(response);
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
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Tensorgate-Backends"), Some("a:1=ok, b:1=ok"));
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
