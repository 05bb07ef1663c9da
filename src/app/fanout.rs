//! Repository control across an upstream group: a load or unload goes to
//! the group the model's route names (`app::routing`; the model under its
//! name there), to every ready backend of it at once
//! (`fanout_repository` of the group), so a model is placed group-wide,
//! and the answer says which backends succeeded.
//! Each backend that answered has its model list refreshed at once, so
//! model-aware routing follows without waiting for the next refresh.
//! The core ([`control_repository`]) serves every front; each renders the
//! answer itself.

use std::time::Duration;

use tonic::metadata::MetadataMap;

use crate::app::door::{self, Aim, Relay};
use crate::app::routing::Routed;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::proto::inference as pb;
use crate::upstream::call::CallSpec;
use crate::upstream::{Client, Lease, Target};

#[derive(Clone)]
pub(crate) enum Control {
    Load(pb::RepositoryModelLoadRequest),
    Unload(pb::RepositoryModelUnloadRequest),
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

/// Load or unload `model` on every ready backend of its route's group
/// (its `fanout_repository`) or on one serving the model; shared by
/// every front (`relay`: a client's call passed on, with its deadline and
/// metadata; `Relay::default()`: the gateway's own). The model's cached
/// signature is forgotten once the control is done, whatever its outcome:
/// a request meanwhile may have cached the signature of before.
pub(crate) async fn control_repository(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &str,
    control: Control,
    relay: &Relay,
) -> Result<Placed> {
    let routed = door::route(gateway, ctx, &Aim::model(model))?;
    let upstream = routed.model(model);
    let control = control.named(upstream);
    let result = if routed.group.config.fanout_repository {
        fan_out(&routed, ctx, control, relay).await
    } else {
        one(&routed, ctx, upstream, control, relay).await
    };
    routed.group.models.invalidate(upstream);
    result.map_err(|error| match routed.upstream_model {
        Some(_) => door::error_named_back(error, upstream, model),
        None => error,
    })
}

impl Control {
    /// The control, about the model named `name` upstream.
    fn named(self, name: &str) -> Control {
        match self {
            Control::Load(mut r) => {
                name.clone_into(&mut r.model_name);
                Control::Load(r)
            }
            Control::Unload(mut r) => {
                name.clone_into(&mut r.model_name);
                Control::Unload(r)
            }
        }
    }

    /// One attempt on `client`, with the deadline and the metadata.
    async fn send(
        self,
        mut client: Client,
        timeout: Duration,
        metadata: MetadataMap,
    ) -> Result<tonic::Response<()>, tonic::Status> {
        match self {
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

fn with<T>(message: T, timeout: Duration, metadata: MetadataMap) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    *request.metadata_mut() = metadata;
    request.set_timeout(timeout);
    request
}

/// Sends to one backend (fan-out disabled).
async fn one(
    routed: &Routed,
    ctx: &RequestContext,
    model: &str,
    control: Control,
    relay: &Relay,
) -> Result<Placed> {
    let spec = CallSpec {
        target: Target {
            model: Some(model),
            sequence: None,
        },
        deadline: relay.deadline,
        optional: None,
    };
    routed
        .group
        .pool
        .call(ctx, &spec, |lease, timeout| {
            control
                .clone()
                .send(lease.client(), timeout, relay.metadata.clone())
        })
        .await?;
    Ok(Placed { backends: None })
}

/// Sends to every ready backend at once.
async fn fan_out(
    routed: &Routed,
    ctx: &RequestContext,
    control: Control,
    relay: &Relay,
) -> Result<Placed> {
    let metadata = relay.metadata.clone();
    let send = move |lease: &Lease, timeout| {
        control
            .clone()
            .send(lease.client(), timeout, metadata.clone())
    };
    let outcomes = routed
        .group
        .pool
        .call_each(ctx, relay.deadline, send)
        .await?
        .into_iter()
        .map(|(addr, result)| Outcome {
            address: addr.to_string(),
            result,
        })
        .collect();
    answer(outcomes)
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
