//! The inference use case, one for every front that infers: HTTP `/infer`
//! (a body in hand or streamed), the legacy v1 API over HTTP and gRPC,
//! and the gRPC front in shared-memory bridge mode. [`infer`] takes the
//! model and the front's [`Decoder`] and holds the order of everything
//! between decoding and encoding (v2 §2.1, Triton's order):
//!
//! 1. the request's route (`app::routing`: its group, the model's name
//!    there); the model's signature, from that group's cache or the
//!    group (an unknown model is the upstream's 404); a decoupled model
//!    refused where the front refuses it ([`Decoder::DECOUPLED`]);
//! 2. the front's decoding of the request, which may need the signature
//!    (raw and v1 bodies do);
//! 3. bridge mode: the shared-memory regions the request names, read and
//!    leased (`app::shm`, hook 1);
//! 4. the model-level checks: requested outputs, classification, tensor
//!    sizes (`translate::outputs`, `translate::checks`);
//! 5. a request of a sequence routed again with its key, so that a split
//!    keeps the sequence on one side; the `ModelInfer` call through the
//!    door, its answer collected,
//!    written into shared-memory windows as it arrives (hook 2), or handed
//!    on as it arrives ([`Streaming`], `streamed`);
//! 6. the answer assembled: only the outputs the request names, the
//!    input tensors let go.
//!
//! The fronts keep only decoding, encoding and framing.

mod streamed;

use std::future::Future;
use std::sync::Arc;

use crate::app::door::{self, Aim, InferCall};
use crate::app::models;
use crate::app::routing::Routed;
use crate::app::shm::Held;
use crate::app::Gateway;
use crate::body::{BodyRest, Fault};
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::model::{InferRequest, InferResponse, ModelInfo, ModelRef};
use crate::translate::sequence::request_sequence_key;
use crate::translate::{checks, from_grpc, outputs};

pub(crate) use streamed::Streaming;

/// A front's side of an inference: how it decodes its request once the
/// model's signature is known, and how it words what only it knows.
pub(crate) trait Decoder {
    /// What the front keeps of its decoding for its own answer (v1: the
    /// outputs and batch its answer must hold); handed back with it.
    type Kept: Send;

    /// The front's refusal of a model with a decoupled transaction policy
    /// (`None`: the upstream refuses it in its own words).
    const DECOUPLED: Option<&'static str>;

    /// Decodes the request; `info` is the model's signature, when the
    /// upstream serves one.
    fn decode(
        self,
        info: Option<Arc<ModelInfo>>,
    ) -> impl Future<Output = Result<Decoded<Self::Kept>>> + Send;

    /// Why a call whose streamed body failed (`fault`) failed, in the
    /// front's words.
    fn body_fault(request: &InferRequest, fault: Fault) -> Error {
        let _ = request;
        Error::invalid(format!("the request body broke off ({fault:?})"))
    }
}

/// A decoded request, as the front hands it to the use case.
pub(crate) struct Decoded<K> {
    pub(crate) request: InferRequest,
    /// The rest of a streamed body: its inputs' bytes still arriving.
    pub(crate) rest: Option<BodyRest>,
    /// The front can send the answer while it arrives (every output it
    /// asks for binary, nothing to compress): it is then [`Streaming`]
    /// when the upstream's answer allows it.
    pub(crate) streams: bool,
    pub(crate) kept: K,
}

/// The assembled answer of an inference.
pub(crate) enum Inferred {
    /// Collected whole: the outputs the request names, those in shared
    /// memory written there and listed with their metadata only. The
    /// request comes back without its input tensors.
    Whole {
        request: InferRequest,
        response: InferResponse,
    },
    /// Its outputs' bytes still arriving.
    Streaming(Streaming),
}

/// Answers an inference of `model`: the steps of the module doc.
pub(crate) async fn infer<D: Decoder>(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    model: &ModelRef,
    decoder: D,
) -> Result<(Inferred, D::Kept)> {
    let aim = Aim::of(model);
    let routed = door::route(gateway, ctx, &aim)?;
    let info = models::model_info(gateway, ctx, model, Some(&routed)).await?;
    if let (Some(text), Some(true)) = (D::DECOUPLED, info.as_ref().map(|i| i.decoupled)) {
        return Err(Error::unsupported(text));
    }
    let Decoded {
        mut request,
        rest,
        streams,
        kept,
    } = decoder.decode(info.clone()).await?;
    // Bridge mode: regions read and output windows held now, as Triton
    // reads them while it parses the request (v2 §1.7).
    let held = match gateway.shm_bridge() {
        Some(bridge) => bridge.take_regions(&mut request).await?,
        None => Held::default(),
    };
    // The core's order: requested outputs before the inputs.
    outputs::check_requested(&request, info.as_deref())?;
    checks::classification(&request, info.as_deref())?;
    checks::tensor_sizes(&request, info.as_deref())?;
    let routed = match request_sequence_key(&request) {
        Some(key) => door::route(
            gateway,
            ctx,
            &Aim {
                sequence: Some(&key),
                ..aim
            },
        )?,
        None => routed,
    };
    let worded =
        |request: &InferRequest, error: Error| match rest.as_ref().and_then(BodyRest::fault) {
            Some(fault) => D::body_fault(request, fault),
            None => error,
        };
    // A shared-memory output is not binary: such a request never streams.
    if let Some(rest) = rest.as_ref().filter(|_| streams && held.no_outputs()) {
        return match streamed::call(ctx, request, rest.clone(), &routed).await {
            Ok(inferred) => Ok((inferred, kept)),
            Err((request, error)) => Err(worded(&request, error)),
        };
    }
    let response = match held.no_outputs() {
        true => collected(ctx, &request, rest.as_ref(), &routed).await,
        false => {
            let rest = rest.as_ref();
            crate::app::shm::call_into(ctx, &request, rest, &routed, held).await
        }
    };
    let response = response.map_err(|error| worded(&request, error))?;
    // Sent: the answer is made without the input tensors.
    request.inputs = Vec::new();
    Ok((Inferred::Whole { request, response }, kept))
}

/// `ModelInfer` of `request` through the door, its answer collected and
/// assembled (`from_grpc::answer`). Streamed inputs are sent from `rest`
/// as they arrive.
async fn collected(
    ctx: &RequestContext,
    request: &InferRequest,
    rest: Option<&BodyRest>,
    routed: &Routed,
) -> Result<InferResponse> {
    let call = InferCall::new(request, rest.cloned(), routed);
    let reply = door::infer(ctx, call).await?;
    from_grpc::answer(reply, None, request)
}
