//! Unary calls through the door: the gateway's own ([`call`]) and a
//! client's passed on ([`relay`], [`relay_model_infer`], [`relay_raw`]),
//! each routed, renamed toward the upstream and back.

use bytes::Bytes;
use tonic::{Extensions, Request, Response};

use std::time::Instant;

use super::mirror::{self, Held};
use super::{admit, asks_of, named_back, renamed, route, served_version, target, Aim, Relay, Rpc};
use crate::app::admission::held_to_its_end;
use crate::app::Gateway;
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::proto::inference::{ModelInferRequest, ModelInferResponse};
use crate::translate::asks::Asks;
use crate::translate::rename::Renamed;
use crate::upstream::call::{settled, CallSpec, Running};
use crate::upstream::encoded::EncodedInfer;
use crate::upstream::rpc::unary;
use crate::upstream::Lease;

/// The backend's reply to a relayed `ModelInfer`, as it comes: its head,
/// then its DATA frames and trailers, undecoded.
pub(crate) use crate::upstream::raw::RawReply;

/// A unary RPC of the gateway's own for `ctx` about `aim`, within the
/// configured deadline (`upstream::rpc::unary`).
pub(crate) async fn call<M>(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    message: M,
) -> Result<M::Response>
where
    M: Rpc + Renamed,
    M::Response: Renamed,
{
    let routed = route(gateway, ctx, &aim)?;
    let message = renamed(message, &aim, &routed);
    let pool = &routed.group.pool;
    let answer = unary(pool, ctx, target(&aim, &routed), message).await;
    named_back(answer, &aim, &routed)
}

/// A client's unary RPC passed on: `message` with the client's deadline
/// and metadata (`relay`), retried elsewhere only when an attempt provably
/// never reached a backend; the upstream's response with its metadata. A
/// missing RPC is the server's `UNIMPLEMENTED`, relayed as it came (the
/// client's own call: no memory of optional RPCs).
pub(crate) async fn relay<M>(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    relay: &Relay,
    message: M,
) -> Result<Response<M::Response>>
where
    M: Rpc + Renamed,
    M::Response: Renamed,
{
    let routed = route(gateway, ctx, &aim)?;
    let message = renamed(message, &aim, &routed);
    let spec = relayed(target(&aim, &routed), relay);
    let answer = routed
        .group
        .pool
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
        .await;
    let (metadata, answer) = match answer {
        Ok(response) => {
            let (metadata, message, _) = response.into_parts();
            (Some(metadata), Ok(message))
        }
        Err(error) => (None, Err(error)),
    };
    let answer = named_back(answer, &aim, &routed)?;
    Ok(Response::from_parts(
        metadata.unwrap_or_default(),
        answer,
        Extensions::default(),
    ))
}

/// A client's `ModelInfer`, decoded, passed on as [`relay`] does: encoded
/// once, its tensors not copied again (`upstream::encoded`); its route's
/// mirror gets a copy (`mirror`), and its answer must be of the version
/// asked ([`served_version`]).
pub(crate) async fn relay_model_infer(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    relay_: &Relay,
    message: ModelInferRequest,
) -> Result<Response<ModelInferResponse>> {
    let routed = route(gateway, ctx, &aim)?;
    let asks = || Asks::of_parameters(&message.parameters);
    let _permit = admit(&routed, asks, relay_.deadline, false).await?;
    let asked = message.model_version.clone();
    let message = renamed(message, &aim, &routed);
    let limit = routed.group.pool.settings().max_message_bytes;
    let encoded = EncodedInfer::new(message, limit);
    let held = Held {
        streamed: false,
        tapped: false,
    };
    let shadow = routed.mirror.as_ref().and_then(|m| {
        let model = routed.model(aim.model.unwrap_or_default());
        mirror::start(m, model, aim.sequence, &encoded, held)
    });
    let started = Instant::now();
    let answer = relay(gateway, ctx, aim.on(&routed), relay_, Encoded(encoded)).await;
    if let Some(counts) = &routed.counts {
        counts.record(answer.is_ok(), Some(started.elapsed()));
    }
    if let Some(shadow) = shadow {
        shadow.answered(answer.as_ref().ok().map(Response::get_ref));
    }
    let answer = answer?;
    served_version(
        aim.model.unwrap_or_default(),
        &asked,
        &answer.get_ref().model_version,
    )?;
    Ok(answer)
}

/// A `ModelInfer` message encoded once (or the encoding's refusal): its
/// model was renamed before it was encoded.
#[derive(Clone)]
struct Encoded(std::result::Result<EncodedInfer, tonic::Status>);

impl Renamed for Encoded {
    fn rename(&mut self, _: &str, _: &str) {}
}

impl Rpc for Encoded {
    type Response = ModelInferResponse;

    async fn send(
        client: crate::upstream::Client,
        request: Request<Self>,
    ) -> std::result::Result<Response<Self::Response>, tonic::Status> {
        <std::result::Result<EncodedInfer, tonic::Status> as Rpc>::send(
            client,
            request.map(|e| e.0),
        )
        .await
    }
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
/// Its bytes name the model as the client did: a route that renames it or
/// mirrors, or a version asked, takes the decoded way
/// ([`relay_model_infer`], `super::relays_as_sent`).
pub(crate) async fn relay_raw(
    gateway: &Gateway,
    ctx: &RequestContext,
    aim: Aim<'_>,
    relay: &Relay,
    message: RelayedMessage,
) -> Result<RawReply> {
    let routed = route(gateway, ctx, &aim)?;
    if routed.upstream_model.is_some() {
        return Err(Error::internal(
            "a renamed model's ModelInfer is relayed decoded, not as it came",
        ));
    }
    let permit = admit(&routed, || asks_of(aim.parameters), relay.deadline, false).await?;
    let message = match message {
        RelayedMessage::Whole(seen) => EncodedInfer::whole(seen),
        RelayedMessage::Streamed { seen, owed, rest } => EncodedInfer::raw(seen, owed, rest),
    };
    let spec = relayed(target(&aim, &routed), relay);
    let rpc = |lease: &Lease, timeout| {
        let message = message.clone();
        lease.raw().call(relay.metadata.clone(), timeout, message)
    };
    // The attempt ends with the reply's body: a reply that breaks off is
    // a failed call, and the backend counts it in flight until then.
    let then = |reply, running: Running<'_>, lease| settled(reply, running.settle(lease));
    let reply = routed.group.pool.call_then(ctx, &spec, rpc, then).await;
    if let Some(counts) = &routed.counts {
        // Counted at its head: its body is the client's to read.
        counts.record(reply.is_ok(), None);
    }
    // The slot is held until the reply's body ends.
    Ok(match permit {
        Some(permit) => held_to_its_end(reply?, permit),
        None => reply?,
    })
}

/// A client's call: its target, its deadline, and no memory of optional
/// RPCs (a missing one is the server's `UNIMPLEMENTED`, relayed).
fn relayed<'a>(target: crate::upstream::Target<'a>, relay: &Relay) -> CallSpec<'a> {
    CallSpec {
        target,
        deadline: relay.deadline,
        optional: None,
    }
}
