//! Protocol-neutral requests to gRPC messages. The only place (with
//! `from_grpc`) that sees both our model types and the generated wire types.

pub mod endpoints;
mod infer_fields;
// pub: the fuzz target fuzz/fuzz_targets/openai.rs drives it.
pub mod openai;
pub(crate) mod response;

pub(crate) use infer_fields::model_infer_fields;

use std::collections::HashMap;

use bytes::Bytes;

use crate::model::{InferRequest, InputData, Param, SharedMemory};
use crate::proto::inference::{
    infer_parameter::ParameterChoice,
    model_infer_request::{InferInputTensor, InferRequestedOutputTensor},
    InferParameter, ModelInferRequest,
};

pub(crate) fn param(value: &Param) -> InferParameter {
    let choice = match value {
        Param::Bool(b) => ParameterChoice::BoolParam(*b),
        Param::Int64(n) => ParameterChoice::Int64Param(*n),
        Param::Uint64(n) => ParameterChoice::Uint64Param(*n),
        Param::Double(d) => ParameterChoice::DoubleParam(*d),
        Param::String(s) => ParameterChoice::StringParam(s.clone()),
    };
    InferParameter {
        parameter_choice: Some(choice),
    }
}

/// Shared-memory keys as gRPC wants them: offset and byte size as
/// `int64_param`, byte size always present (v2 §6.3, v2 §9 item 6).
fn shm_params(shm: &SharedMemory) -> [(&'static str, InferParameter); 3] {
    let int = |n: u64| param(&Param::Int64(i64::try_from(n).unwrap_or(i64::MAX)));
    [
        (
            "shared_memory_region",
            param(&Param::String(shm.region.clone())),
        ),
        ("shared_memory_offset", int(shm.offset)),
        ("shared_memory_byte_size", int(shm.byte_size)),
    ]
}

/// Inserts `entries` into a message's parameter map.
fn insert_all(
    into: &mut HashMap<String, InferParameter>,
    entries: impl IntoIterator<Item = (&'static str, InferParameter)>,
) {
    into.extend(entries.into_iter().map(|(k, v)| (k.to_string(), v)));
}

/// For each `raw_input_contents` entry ([`raw_input_contents`]), the size of
/// the bytes that follow in the body's rest when the input is streamed.
pub(crate) fn streamed_sizes(request: &InferRequest) -> Vec<Option<u64>> {
    request
        .inputs
        .iter()
        .filter_map(|input| match input.data {
            InputData::Raw(_) => Some(None),
            InputData::Streamed(len) => Some(Some(len)),
            InputData::SharedMemory(_) => None,
        })
        .collect()
}

/// Builds `ModelInferRequest` with `raw_input_contents` (never typed
/// contents). The tensor `Bytes` are reference-counted, not copied here;
/// prost copies them once into tonic's frame buffer when encoding.
pub(crate) fn model_infer(request: &InferRequest) -> ModelInferRequest {
    let inputs = request
        .inputs
        .iter()
        .map(|input| {
            let mut parameters = HashMap::new();
            if let InputData::SharedMemory(shm) = &input.data {
                insert_all(&mut parameters, shm_params(shm));
            }
            InferInputTensor {
                name: input.name.clone(),
                datatype: input.datatype.as_str().to_string(),
                shape: input.shape.clone(),
                parameters,
                contents: None,
            }
        })
        .collect();
    let outputs = request
        .outputs
        .iter()
        .map(|output| {
            let mut parameters = HashMap::new();
            if output.classification > 0 {
                parameters.insert(
                    "classification".into(),
                    param(&Param::Int64(i64::from(output.classification))),
                );
            }
            if let Some(shm) = &output.shared_memory {
                insert_all(&mut parameters, shm_params(shm));
            }
            InferRequestedOutputTensor {
                name: output.name.clone(),
                parameters,
            }
        })
        .collect();
    ModelInferRequest {
        model_name: request.model_name.clone(),
        model_version: request.model_version.clone(),
        id: String::from_utf8_lossy(&request.id).into_owned(),
        parameters: request
            .parameters
            .iter()
            .map(|(k, v)| (k.clone(), param(v)))
            .collect(),
        inputs,
        outputs,
        raw_input_contents: raw_input_contents(request),
    }
}

/// The `raw_input_contents` entries of `request`'s message: one per input
/// not in shared memory, its tensor `Bytes` reference-counted, not copied;
/// a streamed input's entry is a placeholder ([`streamed_sizes`] says what
/// follows).
pub(crate) fn raw_input_contents(request: &InferRequest) -> Vec<Bytes> {
    request
        .inputs
        .iter()
        .filter_map(|input| match &input.data {
            InputData::Raw(bytes) => Some(bytes.clone()),
            InputData::Streamed(_) => Some(Bytes::new()),
            InputData::SharedMemory(_) => None,
        })
        .collect()
}
