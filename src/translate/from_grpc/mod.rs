//! gRPC messages to protocol-neutral responses. Output tensor bytes are the
//! `Bytes` prost decoded (zero-copy, `.bytes(".")` in
//! crates/tensorgate-proto/build.rs).

pub(crate) mod endpoints;
pub(crate) mod model_config;
// pub: the fuzz target fuzz/fuzz_targets/openai.rs drives it.
pub mod openai;
pub(crate) mod request;
pub(crate) mod stream;

use bytes::Bytes;

use crate::model::{
    DataType, DeclaredType, InferRequest, InferResponse, ModelInfo, OutputTensor, Param, TensorInfo,
};
use crate::proto::inference::{
    infer_parameter::ParameterChoice, model_metadata_response::TensorMetadata,
    DataType as ConfigDataType, InferParameter, InferTensorContents, ModelConfig,
    ModelInferResponse, ModelMetadataResponse,
};

pub(crate) fn param(value: &InferParameter) -> Option<Param> {
    Some(match value.parameter_choice.as_ref()? {
        ParameterChoice::BoolParam(b) => Param::Bool(*b),
        ParameterChoice::Int64Param(n) => Param::Int64(*n),
        ParameterChoice::Uint64Param(n) => Param::Uint64(*n),
        ParameterChoice::DoubleParam(d) => Param::Double(*d),
        ParameterChoice::StringParam(s) => Param::String(s.clone()),
    })
}

/// Parameters sorted by key: gRPC maps carry no order, and a stable order
/// keeps answers reproducible.
pub(crate) fn params(
    map: &std::collections::HashMap<String, InferParameter>,
) -> Vec<(String, Param)> {
    let mut out: Vec<(String, Param)> = map
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), param(v)?)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `id` is taken from our own request (the client's raw bytes), because a
/// gRPC string cannot carry the invalid UTF-8 a JSON id may hold.
pub(crate) fn model_infer(response: ModelInferResponse, request_id: &[u8]) -> InferResponse {
    let mut raw = response.raw_output_contents.into_iter();
    let outputs = response
        .outputs
        .into_iter()
        .map(|output| {
            let data = raw.next().unwrap_or_default();
            let datatype = DeclaredType::from(output.datatype);
            let data = match (&output.contents, data.is_empty()) {
                (Some(contents), true) => typed_to_raw(contents, datatype.known()),
                _ => data,
            };
            OutputTensor {
                name: output.name,
                datatype,
                shape: output.shape,
                data,
            }
        })
        .collect();
    InferResponse {
        id: request_id.to_vec(),
        model_name: response.model_name,
        model_version: response.model_version,
        parameters: params(&response.parameters),
        outputs,
    }
}

/// [`model_infer`] of an answer whose raw outputs came apart from it
/// (`upstream::reply`).
pub fn model_infer_with_raw(
    mut response: ModelInferResponse,
    raw: Vec<Bytes>,
    request_id: &[u8],
) -> InferResponse {
    response.raw_output_contents = raw;
    model_infer(response, request_id)
}

/// The client's answer to `request` from the upstream's reply, the one
/// place an inference's answer is assembled: translated ([`model_infer`],
/// the raw outputs in `raw` when they came apart from the reply), with
/// the client's own id, keeping only the outputs the request names (a
/// named output the reply lacks is refused as Triton refuses it).
pub(crate) fn answer(
    reply: ModelInferResponse,
    raw: Option<Vec<Bytes>>,
    request: &InferRequest,
) -> crate::error::Result<InferResponse> {
    let mut answer = match raw {
        Some(raw) => model_infer_with_raw(reply, raw, &request.id),
        None => model_infer(reply, &request.id),
    };
    super::outputs::keep_requested(&mut answer, request)?;
    Ok(answer)
}

/// Servers other than Triton may answer with typed `contents` (v2 §9
/// item 7): serialize them to the raw little-endian layout.
fn typed_to_raw(c: &InferTensorContents, datatype: Option<DataType>) -> Bytes {
    // INT8/INT16 (and UINT8/UINT16) travel widened to 32 bits: keep the low bytes.
    let narrow = datatype
        .and_then(DataType::element_size)
        .filter(|n| *n < 4)
        .unwrap_or(4);
    let mut out = Vec::new();
    out.extend(c.bool_contents.iter().map(|b| u8::from(*b)));
    for v in &c.int_contents {
        out.extend_from_slice(&v.to_le_bytes()[..narrow]);
    }
    for v in &c.int64_contents {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in &c.uint_contents {
        out.extend_from_slice(&v.to_le_bytes()[..narrow]);
    }
    for v in &c.uint64_contents {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in &c.fp32_contents {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in &c.fp64_contents {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in &c.bytes_contents {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    Bytes::from(out)
}

/// The model signature the front needs, from a `ModelConfig`.
pub(crate) fn model_info_from_config(config: ModelConfig) -> ModelInfo {
    let tensor = |name: String, data_type: i32, dims: Vec<i64>, optional: bool| TensorInfo {
        name,
        datatype: ConfigDataType::try_from(data_type)
            .ok()
            .and_then(|d| DataType::from_config_name(d.as_str_name())),
        dims,
        optional,
    };
    ModelInfo {
        max_batch_size: i64::from(config.max_batch_size),
        decoupled: config.model_transaction_policy.is_some_and(|p| p.decoupled),
        inputs: config
            .input
            .into_iter()
            .map(|i| tensor(i.name, i.data_type, i.dims, i.optional))
            .collect(),
        outputs: config
            .output
            .into_iter()
            .map(|o| tensor(o.name, o.data_type, o.dims, false))
            .collect(),
    }
}

/// The signature from `ModelMetadata` (servers without `ModelConfig`):
/// shapes there include any batch dimension, so no batching is assumed.
pub(crate) fn model_info_from_metadata(metadata: ModelMetadataResponse) -> ModelInfo {
    let tensor = |t: TensorMetadata| TensorInfo {
        datatype: DataType::parse(t.datatype.as_bytes()),
        name: t.name,
        dims: t.shape,
        optional: false,
    };
    ModelInfo {
        max_batch_size: 0,
        decoupled: false,
        inputs: metadata.inputs.into_iter().map(tensor).collect(),
        outputs: metadata.outputs.into_iter().map(tensor).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_contents_become_raw_little_endian() {
        let c = InferTensorContents {
            int_contents: vec![-1, 300],
            ..Default::default()
        };
        assert_eq!(
            &typed_to_raw(&c, Some(DataType::Int16))[..],
            &[0xff, 0xff, 0x2c, 0x01]
        );
        assert_eq!(&typed_to_raw(&c, Some(DataType::Int8))[..], &[0xff, 0x2c]);
        let b = InferTensorContents {
            bytes_contents: vec![Bytes::from_static(b"ab")],
            ..Default::default()
        };
        assert_eq!(
            &typed_to_raw(&b, Some(DataType::Bytes))[..],
            b"\x02\x00\x00\x00ab"
        );
    }
}
