//! The body codecs of `/generate` and `/generate_stream` (v2 §1.6): a
//! flat JSON object whose top-level keys become input tensors (shapes
//! derived from the model signature) or request parameters, and Triton's
//! answer object with byte-wise sorted keys and bare scalars for
//! single-element tensors. Pure: no I/O, no gRPC.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::{InferRequest, InferResponse, InputData, InputTensor, ModelInfo};
use crate::model::{OutputTensor, TensorInfo};
use crate::wire::json::Value;
use crate::wire::json_access::{self as access, as_str, members, Field, NOT_OBJECT};
use crate::wire::json_write::write_str;
use crate::wire::tensor;
use crate::wire::v2_request::{custom_param, DecodeLimits};
use crate::wire::v2_response::write_param;

/// The one top-level key whose members are mapped like top-level keys.
const NESTED: &[u8] = b"parameters";

/// Decodes a generate body for `model` (name and version from the path)
/// whose signature is `info`. Parameters keep document order.
pub fn decode(
    name: &str,
    version: &str,
    body: &[u8],
    info: &ModelInfo,
    limits: DecodeLimits,
) -> Result<InferRequest> {
    if body.len() > limits.max_input_size {
        return Err(Error::invalid(format!(
            "request JSON size of {} bytes exceeds the maximum allowed input size of {} bytes. Use --http-max-input-size to increase the limit.",
            body.len(),
            limits.max_input_size
        )));
    }
    let root = access::parse(body, limits.max_json_depth)?;
    let mut request = InferRequest {
        model_name: name.to_string(),
        model_version: version.to_string(),
        ..InferRequest::default()
    };
    if let Some(id) = root.get("id") {
        request.id = as_str(id).field("id")?.to_vec();
    }
    let mut mapper = Mapper {
        info,
        limits,
        request,
    };
    for (key, value) in members(&root)? {
        if key.as_slice() != NESTED {
            mapper.member(key, value)?;
            continue;
        }
        if info.input("parameters").is_some() {
            return Err(Error::invalid(
                "Keyword 'parameters' for nested schema also given as input tensor name",
            ));
        }
        let nested = value.as_object().ok_or_else(|| {
            Error::json(format!(
                "Expected JSON object for keyword: 'parameters': {NOT_OBJECT}"
            ))
        })?;
        for (key, value) in nested {
            mapper.member(key, value).map_err(|mut e| {
                e.message = format!("Converting keyword: 'parameters': {}", e.message);
                e
            })?;
        }
    }
    Ok(mapper.request)
}

struct Mapper<'a> {
    info: &'a ModelInfo,
    limits: DecodeLimits,
    request: InferRequest,
}

impl Mapper<'_> {
    /// One key: an input tensor if the model has an input of that name,
    /// otherwise a request parameter.
    fn member(&mut self, key: &[u8], value: &Value) -> Result<()> {
        let name = String::from_utf8_lossy(key).into_owned();
        let Some(input) = self.info.input(&name) else {
            let param = custom_param(&name, value)?;
            self.request.parameters.push((name, param));
            return Ok(());
        };
        if self.request.inputs.iter().any(|i| i.name == name) {
            let id = match self.request.id.is_empty() {
                true => "<id_unknown>".to_string(),
                false => String::from_utf8_lossy(&self.request.id).into_owned(),
            };
            return Err(Error::invalid(format!(
                "[request id: {id}] input '{name}' already exists in request"
            )));
        }
        let tensor = self.tensor(input, value)?;
        self.request.inputs.push(tensor);
        Ok(())
    }

    fn tensor(&self, input: &TensorInfo, value: &Value) -> Result<InputTensor> {
        let name = &input.name;
        let elements = match value {
            Value::Array(items) => items.len(),
            _ => 1, // a scalar
        };
        let dtype = input
            .datatype
            .ok_or_else(|| Error::invalid(format!("invalid datatype for input {name}")))?;
        let dims = self.metadata_shape(input);
        let shape = derive_shape(&dims, elements as u64).ok_or_else(|| {
            Error::invalid(format!(
                "The schema can not convert input '{name}' to tensor with proper shape"
            ))
        })?;
        let too_big = |n: usize| {
            Error::invalid(format!(
                "JSON input '{name}' has a byte_size ({n} bytes) that exceeds the maximum allowed value of {} bytes. Use --http-max-input-size to increase the limit.",
                self.limits.max_input_size
            ))
        };
        if let Some(size) = dtype.element_size() {
            let bytes = elements.saturating_mul(size);
            if bytes > self.limits.max_input_size {
                return Err(too_big(bytes));
            }
        }
        let data = tensor::encode_json_data(dtype, value, elements)?;
        if data.len() > self.limits.max_input_size {
            return Err(too_big(data.len()));
        }
        Ok(InputTensor {
            name: name.clone(),
            datatype: dtype.into(),
            shape,
            data: InputData::Raw(data),
        })
    }

    /// The input's shape as `ModelMetadata` reports it: with the batch
    /// dimension (`-1`) first when the model batches.
    fn metadata_shape(&self, input: &TensorInfo) -> Vec<i64> {
        let batch = (self.info.max_batch_size > 0).then_some(-1);
        batch
            .into_iter()
            .chain(input.dims.iter().copied())
            .collect()
    }
}

/// Triton's two passes (v2 §1.6): fixed dims must divide the element
/// count, the innermost `-1` takes what is left, other `-1` dims are 1.
/// `None` when the count does not fit.
pub(crate) fn derive_shape(dims: &[i64], count: u64) -> Option<Vec<i64>> {
    let mut left = count;
    for &d in dims.iter().rev().filter(|&&d| d != -1) {
        let d = u64::try_from(d).ok().filter(|d| *d > 0)?;
        if !left.is_multiple_of(d) {
            return None;
        }
        left /= d;
    }
    let mut shape = dims.to_vec();
    for d in shape.iter_mut().rev().filter(|d| **d == -1) {
        *d = i64::try_from(left).ok()?;
        left = 1;
    }
    (left == 1).then_some(shape)
}

/// Renders one response as Triton's generate object: `id` (if any),
/// `model_name`, `model_version`, every parameter and every output, keys
/// sorted byte-wise; on a key clash the first of that order wins.
pub fn encode(response: &InferResponse) -> Result<Vec<u8>> {
    let mut members: Vec<(&[u8], Vec<u8>)> = Vec::new();
    let mut add = |key: &'static str, value: &[u8]| {
        let mut out = Vec::with_capacity(value.len() + 2);
        write_str(&mut out, value);
        members.push((key.as_bytes(), out));
    };
    if !response.id.is_empty() {
        add("id", &response.id);
    }
    add("model_name", response.model_name.as_bytes());
    add("model_version", response.model_version.as_bytes());
    for (key, value) in &response.parameters {
        let mut out = Vec::new();
        write_param(&mut out, value);
        members.push((key.as_bytes(), out));
    }
    for output in &response.outputs {
        members.push((output.name.as_bytes(), output_json(output)?));
    }
    let mut seen = std::collections::HashSet::new();
    members.retain(|(key, _)| seen.insert(*key));
    members.sort_by(|a, b| a.0.cmp(b.0));
    let size: usize = members.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
    let mut out = Vec::with_capacity(size + 2);
    out.push(b'{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(&mut out, key);
        out.push(b':');
        out.extend_from_slice(value);
    }
    out.push(b'}');
    Ok(out)
}

/// A flat JSON array, or the bare element when the tensor has exactly one.
fn output_json(output: &OutputTensor) -> Result<Vec<u8>> {
    let mismatch = || {
        Error::internal(format!(
            "output tensor shape does not match size of output for '{}'",
            output.name
        ))
    };
    let dtype = output.datatype.known().ok_or_else(mismatch)?;
    let count = output
        .shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
        .and_then(|c| usize::try_from(c).ok())
        .ok_or_else(mismatch)?;
    let mut out = Vec::with_capacity(output.data.len().saturating_mul(6) + 2);
    if !tensor::write_json_data(dtype, &output.data, count, &mut out) {
        return Err(mismatch());
    }
    if count == 1 {
        // `[x]` → `x`
        out.pop();
        out.remove(0);
    }
    Ok(out)
}

/// One Server-Sent Event carrying `json`: `data: <json>\n\n`.
pub(crate) fn sse_event(json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_two_passes() {
        type Case<'a> = (&'a [i64], u64, Option<&'a [i64]>);
        let cases: [Case; 8] = [
            (&[-1], 3, Some(&[3])),
            (&[-1, -1], 3, Some(&[1, 3])),
            (&[1], 1, Some(&[1])),
            (&[1], 2, None),
            (&[-1, 2], 6, Some(&[3, 2])),
            (&[2, -1, 3], 12, Some(&[2, 2, 3])),
            (&[-1], 0, Some(&[0])),
            (&[0], 0, None),
        ];
        for (dims, count, want) in cases {
            assert_eq!(
                derive_shape(dims, count).as_deref(),
                want,
                "{dims:?} {count}"
            );
        }
    }
}
