//! The gateway's own `ModelInfer` of a checked request ([`InferCall`],
//! [`infer`]): its route (the group, the model's name there, a mirror),
//! its target (the model; a sequence's own backend), the
//! `ModelInferRequest` encoded once, the sizes of the inputs still to
//! come, and where the reply's raw outputs go if they are tapped. Sent
//! within the gateway's own deadline (`upstream.request_timeout_ms`). A
//! request's `timeout` parameter is Triton's queueing timeout: forwarded
//! as a parameter only, for the server to enforce, as on Triton. The
//! answer must be of the version asked ([`super::served_version`]), and
//! comes back under the client's name of the model.

use std::borrow::Cow;

use bytes::Bytes;

use super::mirror::{self, Held};
use super::{answer_named, error_named_back};
use crate::app::routing::Routed;
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::Result;
use crate::model::InferRequest;
use crate::proto::inference::ModelInferResponse;
use crate::translate::asks::Asks;
use crate::translate::sequence::request_sequence_key;
use crate::translate::to_grpc;
use crate::upstream::encoded::EncodedInfer;
use crate::upstream::reply::ReplyTap;
use crate::upstream::rpc::model_infer;
use crate::upstream::Target;

/// One `ModelInfer` call of a checked request.
pub(crate) struct InferCall<'r> {
    /// Its route: the group, and the model's name there. Borrowed, as the
    /// request is, until the call outlives it ([`InferCall::into_owned`]).
    routed: Cow<'r, Routed>,
    /// The model, by its name in the group: only backends serving it.
    model: Cow<'r, str>,
    /// The model as the client named it, and the version it asked for.
    client: Cow<'r, str>,
    asked: Cow<'r, str>,
    /// A non-zero `sequence_id`: the sequence's own backend, never another.
    sequence: Option<Vec<u8>>,
    /// The `ModelInferRequest`'s fields but its raw entries, encoded
    /// (`to_grpc::model_infer_fields`).
    fields: Vec<u8>,
    /// Its `raw_input_contents` entries.
    raw: Vec<Bytes>,
    /// Of a streamed body: the rest, and for each raw entry the size of
    /// the bytes that follow in it (`to_grpc::streamed_sizes`).
    streamed: Option<Streamed>,
    /// Where the reply's raw outputs go as they arrive (`upstream::reply`),
    /// if anywhere.
    tap: Option<ReplyTap>,
    /// What the request asks of its group's admission control (read only
    /// for a group that has one).
    asks: Asks,
}

/// The streamed part of a call: the body's rest and the sizes of its raw
/// entries.
struct Streamed {
    rest: BodyRest,
    sizes: Vec<Option<u64>>,
}

impl<'r> InferCall<'r> {
    /// The call of `request` on its route; its streamed inputs, if any,
    /// follow from `rest` as the client sends them.
    pub(crate) fn new(
        request: &'r InferRequest,
        rest: Option<BodyRest>,
        routed: &'r Routed,
    ) -> InferCall<'r> {
        let model = match &routed.upstream_model {
            Some(upstream) => Cow::Owned(upstream.to_string()),
            None => Cow::Borrowed(request.model_name.as_str()),
        };
        InferCall {
            fields: to_grpc::model_infer_fields(request, &model),
            routed: Cow::Borrowed(routed),
            model,
            client: Cow::Borrowed(&request.model_name),
            asked: Cow::Borrowed(&request.model_version),
            sequence: request_sequence_key(request),
            raw: to_grpc::raw_input_contents(request),
            streamed: rest.map(|rest| Streamed {
                rest,
                sizes: to_grpc::streamed_sizes(request),
            }),
            tap: None,
            asks: match routed.group.gate {
                Some(_) => Asks::of_request(request),
                None => Asks::default(),
            },
        }
    }

    /// The call with the reply's raw outputs into `tap` as they arrive;
    /// the reply [`infer`] returns then lacks them.
    pub(crate) fn tapped(mut self, tap: ReplyTap) -> InferCall<'r> {
        self.tap = Some(tap);
        self
    }

    /// The call on its own, for a task that outlives the request.
    pub(crate) fn into_owned(self) -> InferCall<'static> {
        InferCall {
            routed: Cow::Owned(self.routed.into_owned()),
            model: Cow::Owned(self.model.into_owned()),
            client: Cow::Owned(self.client.into_owned()),
            asked: Cow::Owned(self.asked.into_owned()),
            sequence: self.sequence,
            fields: self.fields,
            raw: self.raw,
            streamed: self.streamed,
            tap: self.tap,
            asks: self.asks,
        }
    }
}

/// Sends `call` (the one place a `ModelInfer` of the gateway's own goes
/// upstream): encoded once, its tensors not copied, retried elsewhere only
/// when an attempt never reached its backend (and took nothing of a
/// streamed body). A request with streamed inputs has their bytes sent
/// from its rest as they arrive: a body that broke off, ran short or ran
/// long fails the call (the upstream's stream is reset before the message
/// completes). A route's mirror gets its copy here (`mirror`). Its
/// group's admission control admits it first (`app::admission`).
pub(crate) async fn infer(ctx: &RequestContext, call: InferCall<'_>) -> Result<ModelInferResponse> {
    let InferCall {
        routed,
        model,
        client,
        asked,
        sequence,
        fields,
        raw,
        streamed,
        tap,
        asks,
    } = call;
    // Held until the answer is in (a refusal: never sent, nor mirrored).
    let _permit = super::admit(&routed, || asks, None, false).await?;
    let pool = &routed.group.pool;
    let limit = pool.settings().max_message_bytes;
    let held = Held {
        streamed: streamed.is_some(),
        tapped: tap.is_some(),
    };
    let encoded = match streamed {
        None => EncodedInfer::from_fields(&fields, raw, limit, &[], None),
        // Not held, so only gRPC's own 4 GiB bounds it (and the
        // upstream's maximum, with its own error).
        Some(Streamed { rest, sizes }) => {
            EncodedInfer::from_fields(&fields, raw, usize::MAX, &sizes, Some(rest))
        }
    };
    let shadow = routed
        .mirror
        .as_ref()
        .and_then(|m| mirror::start(m, &model, sequence.as_deref(), &encoded, held));
    let target = Target {
        model: Some(&model),
        sequence: sequence.as_deref(),
    };
    // Timed only for a rule's counts (no clock read without rules).
    let started = routed.counts.as_ref().map(|_| std::time::Instant::now());
    let reply = model_infer(pool, ctx, target, encoded.map(|e| e.tapped(tap))).await;
    if let (Some(counts), Some(started)) = (&routed.counts, started) {
        counts.record(reply.is_ok(), Some(started.elapsed()));
    }
    if let Some(shadow) = shadow {
        shadow.answered(reply.as_ref().ok());
    }
    let mut reply = reply.map_err(|error| match routed.upstream_model {
        Some(_) => error_named_back(error, &model, &client),
        None => error,
    })?;
    answer_named(&routed, &client, &asked, &mut reply)?;
    Ok(reply)
}
