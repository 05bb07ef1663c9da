//! The gateway's access rules (API keys per endpoint group, per-client and
//! global limits: `app::guard`) applied to a gRPC call, and the context
//! of a call admitted ([`call_context`]: what the routes read of it).

use tonic::metadata::MetadataMap;

use crate::app::guard::{bearer, Permit};
use crate::config::{FrontKind, Group};
use crate::context::{RequestContext, RouteFacts};

/// The same rules for a gRPC call: the key from its `authorization`
/// metadata, the client from its peer address; refusals as statuses
/// (`UNAUTHENTICATED`, `PERMISSION_DENIED`, `RESOURCE_EXHAUSTED`,
/// `UNAVAILABLE`). The permit lasts as long as the caller keeps it.
pub(super) fn admit_grpc<T>(
    gateway: &crate::app::Gateway,
    request: &tonic::Request<T>,
    group: Group,
) -> std::result::Result<Permit, tonic::Status> {
    admit(gateway, request.metadata(), request.remote_addr(), group)
}

/// [`admit_grpc`] for a call read as HTTP (`streamed`): its metadata and
/// peer address.
pub(super) fn admit(
    gateway: &crate::app::Gateway,
    metadata: &tonic::metadata::MetadataMap,
    peer: Option<std::net::SocketAddr>,
    group: Group,
) -> std::result::Result<Permit, tonic::Status> {
    let credential = metadata.get("authorization").map(|v| v.as_bytes());
    gateway
        .guard()
        .admit(
            group,
            bearer(credential),
            peer.map(|a| a.ip()),
            gateway.metrics(),
        )
        .map_err(|e| e.to_status())
}

/// The context of a call through `front` admitted with `permit`: what the
/// routes read of it (`context::RouteFacts`: the metadata keys the rules
/// name, each read once; the API key's name). The client's metadata,
/// its trace headers included, crosses as it came: no trace of the
/// gateway's own.
pub(super) fn call_context(
    gateway: &crate::app::Gateway,
    metadata: &MetadataMap,
    permit: &Permit,
    front: FrontKind,
) -> RequestContext {
    let headers =
        gateway.route_headers(|name| super::metadata::route_value(metadata.as_ref(), name));
    RequestContext::untraced().with_facts(RouteFacts {
        headers,
        key_name: permit.key_name().cloned(),
        ..RouteFacts::of(front)
    })
}
