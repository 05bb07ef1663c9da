//! One unary RPC relayed through [`Pool::call`]: the backend chosen for
//! the call's [`Aim`], the client's deadline (capped by the configured
//! one) and custom metadata sent along, retried elsewhere only when an
//! attempt provably never reached a backend; the upstream's message and
//! response metadata returned as they came, failures as gRPC statuses.

use tonic::{Extensions, Request, Response, Status};

use super::metadata;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::upstream::call::CallSpec;
use crate::upstream::rpc::Rpc;
use crate::upstream::{Pool, Target};

/// Which backends may take a call (the owned form of a [`Target`]).
pub(super) struct Aim {
    pub model: Option<String>,
    pub sequence: Option<Vec<u8>>,
}

impl Aim {
    /// A server-wide call: any ready backend.
    pub(super) const ANY: Aim = Aim {
        model: None,
        sequence: None,
    };

    /// A call about one model: a backend serving it (`""`: server-wide).
    pub(super) fn model(name: &str) -> Aim {
        Aim {
            model: (!name.is_empty()).then(|| name.to_owned()),
            sequence: None,
        }
    }

    pub(super) fn target(&self) -> Target<'_> {
        Target {
            model: self.model.as_deref(),
            sequence: self.sequence.as_deref(),
        }
    }
}

/// Relays `request` with its RPC ([`Rpc::send`]).
pub(super) async fn relay<Req: Rpc>(
    gateway: &Gateway,
    request: Request<Req>,
    aim: Aim,
) -> Result<Response<Req::Response>, Status> {
    let _inflight = gateway.inflight().enter();
    let (client_metadata, _, message) = request.into_parts();
    let deadline = metadata::deadline(&client_metadata);
    let forwarded = metadata::forwarded(&client_metadata);
    let pool: &Pool = gateway.pool();
    // The client's metadata (its trace headers included) crosses as it
    // came: the call has no trace of the gateway's own to add.
    let ctx = RequestContext::untraced();
    // The client's own call: a missing RPC is the server's
    // `UNIMPLEMENTED`, relayed as it came (no `optional`).
    let spec = CallSpec {
        target: aim.target(),
        deadline,
        optional: None,
    };
    let response = pool
            .call(&ctx, &spec, |lease, timeout| {
                let mut upstream =
                    Request::from_parts(forwarded.clone(), Extensions::default(), message.clone());
                upstream.set_timeout(timeout);
                let call = Req::send(lease.client(), upstream);
                // Wrapped once more so that the pool's `into_inner` leaves
                // us the upstream's response with its metadata.
                async move { call.await.map(Response::new) }
            })
            .await
            .map_err(|error| {
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
