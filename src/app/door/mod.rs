//! The one door to the upstream: every call a front makes for a request
//! passes through here, and nothing outside the core reaches the pool
//! (`tests/it/layering.rs`: no front names `upstream`). A policy applied
//! to calls — where a model's calls go, and, with the next issues, routes,
//! renames and admission — is applied here, once, for every front.
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
//!   relay for HTTP `/generate(_stream)` and the gRPC front's streams;
//! - repository load/unload on every backend (`app::fanout`), and the
//!   pool's state for the fronts' answers (`app::status`).

mod infer;
mod stream;
mod unary;

use std::time::Duration;

use tonic::metadata::MetadataMap;

use crate::app::Gateway;
use crate::upstream::{Pool, Target};

/// The bound of [`call`] and [`relay`]: a request message that knows its
/// RPC (`upstream::rpc`).
pub(crate) use crate::upstream::rpc::Rpc;
pub(crate) use infer::{infer, InferCall};
pub(crate) use stream::{open_stream, StreamReplies};
pub(crate) use unary::{call, relay, relay_model_infer, relay_raw, RawReply, RelayedMessage};

/// What a call is about, as the client named it: the model (`None`: the
/// call is server-wide) and a sequence's sticky key. Where the call goes
/// is decided from it here, in one place ([`Aim::target`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Aim<'a> {
    pub(crate) model: Option<&'a str>,
    /// A non-zero `sequence_id`, rendered as bytes
    /// (`translate::sequence`): every call of the sequence goes to one
    /// backend.
    pub(crate) sequence: Option<&'a [u8]>,
}

impl<'a> Aim<'a> {
    /// A server-wide call: any ready backend.
    pub(crate) const ANY: Aim<'static> = Aim {
        model: None,
        sequence: None,
    };

    /// A call about one model: a backend serving it (`""`: server-wide,
    /// as a statistics request without a name).
    pub(crate) fn model(name: &'a str) -> Aim<'a> {
        Aim {
            model: (!name.is_empty()).then_some(name),
            sequence: None,
        }
    }

    /// A call about `model` with a sequence's key, if it has one.
    pub(crate) fn sequenced(model: &'a str, sequence: Option<&'a [u8]>) -> Aim<'a> {
        Aim {
            model: Some(model),
            sequence,
        }
    }

    /// Which backends may take the call.
    fn target(&self) -> Target<'a> {
        Target {
            model: self.model,
            sequence: self.sequence,
        }
    }
}

/// What a client's call carries when the gateway passes it on (the gRPC
/// front): its deadline (`grpc-timeout`, capped by the configured one) and
/// its custom metadata, sent along as they came.
#[derive(Debug, Clone, Default)]
pub(crate) struct Relay {
    pub(crate) deadline: Option<Duration>,
    pub(crate) metadata: MetadataMap,
}

/// The pool a call for `aim` goes to (one upstream group today).
fn pool<'g>(gateway: &'g Gateway, _aim: &Aim<'_>) -> &'g std::sync::Arc<Pool> {
    gateway.pool()
}
