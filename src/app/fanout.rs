//! Repository control across the upstream group: a load or unload goes to
//! every ready backend at once (`upstream.fanout_repository`), so a model
//! is placed fleet-wide, and the answer says which backends succeeded.
//! Each backend that answered has its model list refreshed at once, so
//! model-aware routing follows without waiting for the next refresh.
//! The core ([`control_repository`]) serves every front; each renders the
//! answer itself.

use std::time::Duration;

use tonic::metadata::MetadataMap;

use crate::app::door::Relay;
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

/// Load or unload `model` on every ready backend
/// (`upstream.fanout_repository`) or on one serving the model; shared by
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
    let result = if gateway.config().upstream.fanout_repository {
        fan_out(gateway, ctx, control, relay).await
    } else {
        one(gateway, ctx, model, control, relay).await
    };
    gateway.models().invalidate(model);
    result
}

impl Control {
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
    gateway: &Gateway,
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
    gateway
        .pool()
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
    gateway: &Gateway,
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
    let outcomes = gateway
        .pool()
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
