//! The one door to the upstream: every call a front makes for a request
//! passes through here, and nothing outside the core reaches a pool
//! (`tests/it/layering.rs`: no front names `upstream`). The policy applied
//! to calls is applied here, once, for every front: each call is routed
//! ([`route`], `app::routing`: its group, the model's name there, a
//! mirror), its message renamed toward the upstream and its answer and
//! errors back toward the client when the route renames the model.
//!
//! The ways through, each accounted alike by the pool (call metrics,
//! passive health and ejection, the request's upstream time):
//!
//! - [`call`]: a unary RPC of the gateway's own, within the configured
//!   deadline, carrying the request's trace; an RPC a server may lack is
//!   remembered per backend (`Rpc::OPTIONAL`);
//! - [`relay`]: a client's unary RPC passed on (the gRPC front) with its
//!   deadline and custom metadata ([`Relay`]); the upstream's response
//!   metadata comes back; [`relay_model_infer`] for a decoded
//!   `ModelInfer`, [`relay_raw`] for one relayed as the client encoded it;
//! - [`infer`](infer::infer): the gateway's own `ModelInfer` of a checked
//!   request ([`InferCall`]), its answer collected or tapped as it arrives;
//! - [`open_stream`](stream::open_stream): a `ModelStreamInfer` stream, one
//!   relay for HTTP `/generate(_stream)`, the OpenAI front's generations
//!   and the gRPC front's streams;
//! - repository load/unload on every backend (`app::fanout`), and the
//!   pool's state for the fronts' answers (`app::status`).

mod infer;
mod mirror;
mod stream;
mod unary;

use std::time::Duration;

use tonic::metadata::MetadataMap;

use crate::app::admission::{Ask, Permit};
use crate::app::routing::Routed;
use crate::app::Gateway;
use crate::context::{RequestContext, RouteFacts};
use crate::error::{Error, Result};
use crate::translate::asks::Asks;
use crate::translate::rename;
use crate::upstream::Target;

/// The bound of [`call`] and [`relay`]: a request message that knows its
/// RPC (`upstream::rpc`).
pub(crate) use crate::upstream::rpc::Rpc;
pub(crate) use infer::{infer, InferCall};
pub(crate) use stream::{open_stream, StreamReplies};
pub(crate) use unary::{call, relay, relay_model_infer, relay_raw, RawReply, RelayedMessage};

/// What a call is about, as the client named it: the model (`None`: the
/// call is server-wide) and a sequence's sticky key. Where the call goes
/// is decided from it here, in one place ([`Aim::target`]).
#[derive(Clone, Copy, Default)]
pub(crate) struct Aim<'a> {
    pub(crate) model: Option<&'a str>,
    /// The version the client asked for (`None`, `""`: none).
    pub(crate) version: Option<&'a str>,
    /// A non-zero `sequence_id`, rendered as bytes
    /// (`translate::sequence`): every call of the sequence goes to one
    /// backend, and to one side of a split.
    pub(crate) sequence: Option<&'a [u8]>,
    /// Routed already (a request whose calls must all take one route).
    pub(crate) routed: Option<&'a Routed>,
    /// Its Triton parameters as a gRPC message's map (a relayed call's
    /// leading fields), for its group's admission control (read only when
    /// the group has one).
    pub(crate) parameters: Option<&'a Parameters>,
}

/// A gRPC message's Triton parameters.
pub(crate) type Parameters =
    std::collections::HashMap<String, crate::proto::inference::InferParameter>;

impl<'a> Aim<'a> {
    /// A server-wide call: any ready backend.
    pub(crate) const ANY: Aim<'static> = Aim {
        model: None,
        version: None,
        sequence: None,
        routed: None,
        parameters: None,
    };

    /// A call about one model: a backend serving it (`""`: server-wide,
    /// as a statistics request without a name).
    pub(crate) fn model(name: &'a str) -> Aim<'a> {
        Aim {
            model: (!name.is_empty()).then_some(name),
            ..Aim::ANY
        }
    }

    /// A call about `model` at `version` (as the client asked it).
    pub(crate) fn versioned(name: &'a str, version: &'a str) -> Aim<'a> {
        Aim::model(name).at_version(version)
    }

    /// A call about `model` (its name and version, as the client asked).
    pub(crate) fn of(model: &'a crate::model::ModelRef) -> Aim<'a> {
        Aim::versioned(&model.name, &model.version)
    }

    /// The call, about the version the client asked for.
    pub(crate) fn at_version(self, version: &'a str) -> Aim<'a> {
        Aim {
            version: Some(version),
            ..self
        }
    }

    /// The call, taking `routed` as its route.
    pub(crate) fn on(self, routed: &'a Routed) -> Aim<'a> {
        Aim {
            routed: Some(routed),
            ..self
        }
    }

    /// The call, its Triton parameters in `parameters`.
    pub(crate) fn with_parameters(self, parameters: &'a Parameters) -> Aim<'a> {
        Aim {
            parameters: Some(parameters),
            ..self
        }
    }

    /// A call about `model` with a sequence's key, if it has one.
    pub(crate) fn sequenced(model: &'a str, sequence: Option<&'a [u8]>) -> Aim<'a> {
        Aim {
            model: Some(model),
            sequence,
            ..Aim::ANY
        }
    }
}

/// Where a call about `aim` goes ([`Aim::routed`], or the routes in force
/// for the request's facts), noted in the request's context for its
/// access line.
pub(crate) fn route(gateway: &Gateway, ctx: &RequestContext, aim: &Aim<'_>) -> Result<Routed> {
    if let Some(routed) = aim.routed {
        return Ok(routed.clone());
    }
    let routed = route_by(gateway, ctx.facts(), aim)?;
    ctx.routed(&routed.group.name, routed.rule.as_ref());
    Ok(routed)
}

/// The route of a call with `facts`, before any context is made for it
/// (a relayed `ModelInfer` is routed on its first bytes, to learn which
/// way it takes); the context that makes the call is told with
/// [`RequestContext::routed`].
pub(crate) fn route_by(gateway: &Gateway, facts: &RouteFacts, aim: &Aim<'_>) -> Result<Routed> {
    gateway
        .routing()
        .route(facts, aim.model, aim.version, aim.sequence)
}

/// A call on `routed` has its message rewritten: its rule renames the
/// model or mirrors it (a client's `ModelInfer` is then relayed decoded,
/// not as its bytes came: `relay_raw`).
pub(crate) fn rewrites(routed: &Routed) -> bool {
    routed.upstream_model.is_some() || routed.mirror.is_some()
}

/// Some routing rule is in force: a front reads what the rules match on
/// only then.
pub(crate) fn has_rules(gateway: &Gateway) -> bool {
    gateway.has_rules()
}

/// An inference answer made the client's (of `request`, routed by
/// `routed`): of the version asked ([`served_version`]), the model under
/// the client's name. The door does it for the answers it returns; a
/// front's part that reads a tapped reply's head (`upstream::reply`) does
/// it there.
pub(crate) fn client_answer(
    routed: &Routed,
    request: &crate::model::InferRequest,
    reply: &mut crate::proto::inference::ModelInferResponse,
) -> Result<()> {
    answer_named(routed, &request.model_name, &request.model_version, reply)
}

/// [`client_answer`] of an answer about `client` at `asked`.
fn answer_named(
    routed: &Routed,
    client: &str,
    asked: &str,
    reply: &mut crate::proto::inference::ModelInferResponse,
) -> Result<()> {
    served_version(client, asked, &reply.model_version)?;
    if let Some(upstream) = &routed.upstream_model {
        rename::Renamed::rename(reply, upstream, client);
    }
    Ok(())
}

/// An inference answer is of the version the client asked for (`asked`
/// empty: any): an upstream that ignores the version (KServe's gRPC
/// does) and answers with another — or with none, a model without
/// versions — is refused with Triton's own text for an unknown version,
/// never passed on. Versions compare as numbers when both are (`01` is
/// `1`, as Triton parses them).
pub(crate) fn served_version(model: &str, asked: &str, served: &str) -> Result<()> {
    if asked.is_empty() || asked == served {
        return Ok(());
    }
    if let (Ok(a), Ok(s)) = (asked.parse::<i64>(), served.parse::<i64>()) {
        if a == s {
            return Ok(());
        }
    }
    Err(Error::not_found(format!(
        "Request for unknown model: '{model}' version {asked} is not found"
    )))
}

/// A slot of the routed group's admission control (`app::admission`)
/// for an inference call that asks `asks` (read only when the group has
/// admission control), with the client's own deadline `relayed`
/// (`grpc-timeout`) if any; `None`: the group has none, the call goes on
/// at once. The shortest of the request's `timeout` parameter, `relayed`
/// and the group's `deadline_header` bounds its wait; its priority is
/// its `priority` parameter's, else the header's, else its rule's.
async fn admit(
    routed: &Routed,
    asks: impl FnOnce() -> Asks,
    relayed: Option<Duration>,
    stream: bool,
) -> Result<Option<Permit>> {
    let Some(gate) = &routed.group.gate else {
        return Ok(None);
    };
    let asks = asks();
    let deadline = [asks.timeout, relayed, routed.admission.deadline]
        .into_iter()
        .flatten()
        .min();
    let ask = Ask {
        priority: asks.priority.or(routed.admission.priority),
        deadline,
        continues_sequence: asks.continues_sequence,
        stream,
    };
    gate.admit(ask).await.map(Some)
}

/// What `parameters` ask of admission (none: nothing).
fn asks_of(parameters: Option<&Parameters>) -> Asks {
    parameters.map(Asks::of_parameters).unwrap_or_default()
}

/// Which backends of the routed group may take the call: those serving
/// the model under its name there.
fn target<'a>(aim: &Aim<'a>, routed: &'a Routed) -> Target<'a> {
    Target {
        model: aim.model.map(|client| routed.model(client)),
        sequence: aim.sequence,
    }
}

/// A routed call's message toward the upstream: the model under its name
/// there.
fn renamed<M: rename::Renamed>(mut message: M, aim: &Aim<'_>, routed: &Routed) -> M {
    if let (Some(client), Some(upstream)) = (aim.model, routed.upstream_model.as_deref()) {
        message.rename(client, upstream);
    }
    message
}

/// A routed call's answer, or its error, back toward the client: the
/// upstream's name of the model, wherever it shows, the client's.
fn named_back<T: rename::Renamed>(result: Result<T>, aim: &Aim<'_>, routed: &Routed) -> Result<T> {
    let (Some(client), Some(upstream)) = (aim.model, routed.upstream_model.as_deref()) else {
        return result;
    };
    match result {
        Ok(mut answer) => {
            answer.rename(upstream, client);
            Ok(answer)
        }
        Err(error) => Err(error_named_back(error, upstream, client)),
    }
}

/// A routed call's error back toward the client (its answer is the
/// caller's to rename).
fn named_back_error<T>(result: Result<T>, aim: &Aim<'_>, routed: &Routed) -> Result<T> {
    match (aim.model, routed.upstream_model.as_deref(), result) {
        (Some(client), Some(upstream), Err(error)) => {
            Err(error_named_back(error, upstream, client))
        }
        (_, _, result) => result,
    }
}

/// An error whose text quotes the upstream's name of a model, with the
/// client's.
pub(crate) fn error_named_back(mut error: Error, upstream: &str, client: &str) -> Error {
    error.message = rename::text(&error.message, upstream, client);
    if let Some(relayed) = &error.relayed {
        error.relayed = Some(rename::text(relayed, upstream, client));
    }
    error
}

/// What a client's call carries when the gateway passes it on (the gRPC
/// front): its deadline (`grpc-timeout`, capped by the configured one) and
/// its custom metadata, sent along as they came.
#[derive(Debug, Clone, Default)]
pub(crate) struct Relay {
    pub(crate) deadline: Option<Duration>,
    pub(crate) metadata: MetadataMap,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_asked_must_be_the_version_served() {
        assert!(served_version("m", "", "3").is_ok());
        assert!(served_version("m", "1", "1").is_ok());
        assert!(served_version("m", "01", "1").is_ok());
        for served in ["1", ""] {
            let refused = served_version("m", "9", served).unwrap_err();
            assert_eq!(refused.kind, crate::error::Kind::NotFound);
            assert_eq!(
                refused.message,
                "Request for unknown model: 'm' version 9 is not found"
            );
        }
    }
}
