//! One unary RPC relayed through the door (`app::door::relay`): the
//! backend chosen for the call's [`Aim`], the client's deadline (capped by
//! the configured one) and custom metadata sent along, retried elsewhere
//! only when an attempt provably never reached a backend; the upstream's
//! message and response metadata returned as they came, failures as gRPC
//! statuses.

use tonic::{Extensions, Request, Response, Status};

use super::auth::call_context;
use super::metadata;
use crate::app::door::{self, Aim, Relay, Rpc};
use crate::app::guard::Permit;
use crate::app::Gateway;
use crate::config::FrontKind;
use crate::translate::rename::Renamed;

/// What a call is about, owned (the message it is read from is handed
/// on): the model and the version asked for.
pub(super) struct Target {
    pub model: Option<String>,
    pub version: String,
}

impl Target {
    /// A server-wide call: any ready backend.
    pub(super) const ANY: Target = Target {
        model: None,
        version: String::new(),
    };

    /// A call about one model at `version` (`""` for either: any): a
    /// backend serving it (no model: server-wide).
    pub(super) fn model(name: &str, version: &str) -> Target {
        Target {
            model: (!name.is_empty()).then(|| name.to_owned()),
            version: version.to_owned(),
        }
    }

    pub(super) fn aim(&self) -> Aim<'_> {
        match &self.model {
            Some(model) => Aim::versioned(model, &self.version),
            None => Aim::ANY,
        }
    }
}

/// What the client's call carries along: its deadline and custom
/// metadata (`metadata`).
pub(super) fn relay_of(client_metadata: &tonic::metadata::MetadataMap) -> Relay {
    Relay {
        deadline: metadata::deadline(client_metadata),
        metadata: metadata::forwarded(client_metadata),
    }
}

/// Relays `request` with its RPC ([`Rpc::send`]).
pub(super) async fn relay<Req: Rpc + Renamed>(
    gateway: &Gateway,
    request: Request<Req>,
    target: Target,
    permit: &Permit,
) -> Result<Response<Req::Response>, Status>
where
    Req::Response: Renamed,
{
    let _inflight = gateway.inflight().enter();
    let (client_metadata, _, message) = request.into_parts();
    let relay = relay_of(&client_metadata);
    // The client's metadata (its trace headers included) crosses as it
    // came: the call has no trace of the gateway's own to add.
    let ctx = call_context(gateway, &client_metadata, permit, FrontKind::Grpc);
    returned(door::relay(gateway, &ctx, target.aim(), &relay, message).await)
}

/// The upstream's answer to a relayed call, with its metadata minus
/// transport headers; its failure as a gRPC status.
pub(super) fn returned<R>(
    response: crate::error::Result<Response<R>>,
) -> Result<Response<R>, Status> {
    let response = response.map_err(|error| {
        tracing::debug!(code = ?error.kind.status().1, message = %error.message, "gRPC call failed");
        error.to_status()
    })?;
    let (upstream_metadata, message, _) = response.into_parts();
    Ok(Response::from_parts(
        metadata::returned(upstream_metadata),
        message,
        Extensions::default(),
    ))
}
