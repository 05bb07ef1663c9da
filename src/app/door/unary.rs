//! Unary calls through the door: the gateway's own ([`call`]) and a
//! client's passed on ([`relay`], [`relay_model_infer`], [`relay_raw`]).

use bytes::Bytes;
use tonic::{Extensions, Request, Response};

use super::{pool, Aim, Relay, Rpc};
use crate::app::Gateway;
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::Result;
use crate::proto::inference::{ModelInferRequest, ModelInferResponse};
use crate::upstream::call::{settled, CallSpec, Running};
use crate::upstream::encoded::EncodedInfer;

use crate::upstream::rpc::unary;
use crate::upstream::Lease;

/// The backend's reply to a relayed `ModelInfer`, as it comes: its head,
/// then its DATA frames and trailers, undecoded.
pub(crate) use crate::upstream::raw::RawReply;

/// A unary RPC of the gateway's own for `ctx` about `aim`, within the
/// configured deadline (`upstream::rpc::unary`).
pub(crate) async fn call<M: Rpc>(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    message: M,
) -> Result<M::Response> {
    unary(pool(gateway, &aim), ctx, aim.target(), message).await
}

/// A client's unary RPC passed on: `message` with the client's deadline
/// and metadata (`relay`), retried elsewhere only when an attempt provably
/// never reached a backend; the upstream's response with its metadata. A
/// missing RPC is the server's `UNIMPLEMENTED`, relayed as it came (the
/// client's own call: no memory of optional RPCs).
pub(crate) async fn relay<M: Rpc>(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    relay: &Relay,
    message: M,
) -> Result<Response<M::Response>> {
    let spec = relayed(&aim, relay);
    pool(gateway, &aim)
        .call(ctx, &spec, |lease, timeout| {
            let mut upstream = Request::from_parts(
                relay.metadata.clone(),
                Extensions::default(),
                message.clone(),
            );
            upstream.set_timeout(timeout);
            let call = M::send(lease.client(), upstream);
            // Wrapped once more so that the pool's `into_inner` leaves the
            // upstream's response with its metadata.
            async move { call.await.map(Response::new) }
        })
        .await
}

/// A client's `ModelInfer`, decoded, passed on as [`relay`] does: encoded
/// once, its tensors not copied again (`upstream::encoded`).
pub(crate) async fn relay_model_infer(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    relay_: &Relay,
    message: ModelInferRequest,
) -> Result<Response<ModelInferResponse>> {
    let limit = pool(gateway, &aim).settings().max_message_bytes;
    let encoded = EncodedInfer::new(message, limit);
    relay(gateway, ctx, aim, relay_, encoded).await
}

/// A client's `ModelInfer` message as the client encoded it (the gRPC
/// front's relayed calls): its bytes, the gRPC prefix first.
pub(crate) enum RelayedMessage {
    /// Whole in hand.
    Whole(Vec<Bytes>),
    /// The bytes in hand, then `owed` more from `rest` as they arrive.
    Streamed {
        seen: Vec<Bytes>,
        owed: u64,
        rest: BodyRest,
    },
}

/// A client's `ModelInfer` relayed as it came ([`RelayedMessage`]) with
/// its deadline and metadata, the backend's reply handed back undecoded
/// (`upstream::raw`). Retried elsewhere only when an attempt never reached
/// its backend — and, for a streamed message, took nothing of its rest.
pub(crate) async fn relay_raw(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    relay: &Relay,
    message: RelayedMessage,
) -> Result<RawReply> {
    let message = match message {
        RelayedMessage::Whole(seen) => EncodedInfer::whole(seen),
        RelayedMessage::Streamed { seen, owed, rest } => EncodedInfer::raw(seen, owed, rest),
    };
    let spec = relayed(&aim, relay);
    let rpc = |lease: &Lease, timeout| {
        let message = message.clone();
        lease.raw().call(relay.metadata.clone(), timeout, message)
    };
    // The attempt ends with the reply's body: a reply that breaks off is
    // a failed call, and the backend counts it in flight until then.
    let then = |reply, running: Running<'_>, lease| settled(reply, running.settle(lease));
    pool(gateway, &aim).call_then(ctx, &spec, rpc, then).await
}

/// A client's call: its target, its deadline, and no memory of optional
/// RPCs (a missing one is the server's `UNIMPLEMENTED`, relayed).
fn relayed<'a>(aim: &Aim<'a>, relay: &Relay) -> CallSpec<'a> {
    CallSpec {
        target: aim.target(),
        deadline: relay.deadline,
        optional: None,
    }
}
