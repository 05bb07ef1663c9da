//! Model-level work the HTTP front must do itself before a request goes
//! upstream: building raw binary requests from the model signature
//! (protocol §2.7), refusing classification the upstream would crash on
//! (§3.5), and validating tensor byte sizes and BYTES framing (§2.8) so no
//! malformed tensor ever reaches the upstream. Texts are Triton core's.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::model::{
    element_count, DataType, InferRequest, InputData, InputTensor, ModelInfo, OutputKind,
};
use crate::wire::tensor::{bytes_elements, Framing};

const RAW_NAME: &str = "raw_input";

fn prefix(id: &[u8]) -> String {
    if id.is_empty() {
        "[request id: <id_unknown>] ".to_string()
    } else {
        format!("[request id: {}] ", String::from_utf8_lossy(id))
    }
}

/// Builds the request of a raw binary body (header length 0): the body is
/// the data of the model's only input; every output comes back binary.
pub fn raw_request(
    model: &str,
    version: &str,
    info: &ModelInfo,
    body: Bytes,
) -> Result<InferRequest> {
    let unknown = prefix(b"");
    let [input] = info.inputs.as_slice() else {
        return Err(Error::invalid(format!(
            "{unknown}Raw request must only have 1 input (found 1) to be deduced but got {} inputs in '{model}' model configuration",
            info.inputs.len()
        )));
    };
    let dtype = input.datatype.ok_or_else(|| {
        Error::invalid(format!(
            "{unknown}input '{}' of model '{model}' has an unsupported datatype",
            input.name
        ))
    })?;
    let mut shape: Vec<i64> = Vec::with_capacity(input.dims.len() + 1);
    if info.max_batch_size > 0 {
        shape.push(1);
    }
    let data = if dtype == DataType::Bytes {
        if input.dims != [1] {
            return Err(Error::invalid(format!(
                "{unknown}For BYTE datatype raw input '{}', the model must have input shape [1]",
                input.name
            )));
        }
        shape.push(1);
        let len = u32::try_from(body.len())
            .map_err(|_| Error::invalid("raw BYTES input longer than 4 GiB"))?;
        let mut framed = BytesMut::with_capacity(body.len() + 4);
        framed.put_u32_le(len);
        framed.put_slice(&body);
        framed.freeze()
    } else {
        shape.extend(deduce_dims(&input.dims, body.len(), dtype, &input.name)?);
        let expected = element_count(&shape)
            .and_then(|n| n.checked_mul(dtype.element_size().unwrap_or(1) as u64))
            .unwrap_or(u64::MAX);
        if expected != body.len() as u64 {
            return Err(Error::invalid(format!(
                "{unknown}input byte size mismatch for input '{RAW_NAME}' for model '{model}'. Expected {expected}, got {}",
                body.len()
            )));
        }
        body
    };
    Ok(InferRequest {
        model_name: model.to_string(),
        model_version: version.to_string(),
        inputs: vec![InputTensor {
            name: input.name.clone(),
            datatype: dtype.as_str().to_string(),
            shape,
            data: InputData::Raw(data),
        }],
        unlisted_kind: Some(OutputKind::Binary),
        ..InferRequest::default()
    })
}

/// Replaces the one variable dim by `bytes / product(fixed) / size`.
fn deduce_dims(dims: &[i64], bytes: usize, dtype: DataType, name: &str) -> Result<Vec<i64>> {
    let variable = dims.iter().filter(|d| **d < 0).count();
    if variable > 1 {
        return Err(Error::invalid(format!(
            "{}The shape of the raw input '{name}' can not be deduced because there are more than one variable-sized dimension",
            prefix(b"")
        )));
    }
    if variable == 0 {
        return Ok(dims.to_vec());
    }
    let fixed: u64 = dims
        .iter()
        .filter(|d| **d >= 0)
        .try_fold(1u64, |acc, d| acc.checked_mul(*d as u64))
        .unwrap_or(0);
    let size = dtype.element_size().unwrap_or(1) as u64;
    let deduced = (bytes as u64).checked_div(fixed).unwrap_or(0) / size;
    Ok(dims
        .iter()
        .map(|d| if *d < 0 { deduced as i64 } else { *d })
        .collect())
}

/// Refuses classification on outputs whose type Triton cannot classify
/// (BYTES crashes Triton 2.51; protocol §3.5).
pub fn classification(request: &InferRequest, info: Option<&ModelInfo>) -> Result<()> {
    for output in request.outputs.iter().filter(|o| o.classification > 0) {
        let dtype = info
            .and_then(|i| i.output(&output.name))
            .and_then(|t| t.datatype);
        if let Some(d @ (DataType::Bytes | DataType::Fp16 | DataType::Bf16 | DataType::Bool)) =
            dtype
        {
            return Err(Error::invalid(format!(
                "class result not available for output due to unsupported type '{}'",
                d.as_str()
            ))
            // Triton raises it after execution, hence text/plain.
            .plain());
        }
    }
    Ok(())
}

/// Validates every raw input's byte size against shape × element size, and
/// BYTES framing element by element (including the last element's length,
/// which Triton's core does not check). Inputs the upstream will reject
/// earlier for another reason (unknown name, wrong datatype, wrong shape)
/// are left to it, so its error text wins as it would on Triton.
pub fn tensor_sizes(request: &InferRequest, info: Option<&ModelInfo>) -> Result<()> {
    let id = prefix(&request.id);
    for input in &request.inputs {
        let InputData::Raw(data) = &input.data else {
            continue;
        };
        let Some(dtype) = DataType::parse(input.datatype.as_bytes()) else {
            continue;
        };
        if let Some(info) = info {
            if !signature_matches(info, input, dtype) {
                continue;
            }
        }
        let Some(count) = element_count(&input.shape) else {
            continue;
        };
        let model = &request.model_name;
        let name = &input.name;
        match dtype.element_size() {
            Some(size) => {
                let expected = count.checked_mul(size as u64);
                if expected != Some(data.len() as u64) {
                    let expected =
                        expected.map_or_else(|| "overflow".to_string(), |e| e.to_string());
                    return Err(Error::invalid(format!(
                        "{id}input byte size mismatch for input '{name}' for model '{model}'. Expected {expected}, got {}",
                        data.len()
                    )));
                }
            }
            None => check_framing(data, count, &id, name, model)?,
        }
    }
    Ok(())
}

fn check_framing(data: &[u8], expected: u64, id: &str, name: &str, model: &str) -> Result<()> {
    let mut seen = 0u64;
    for element in bytes_elements(data) {
        if seen >= expected {
            return Err(Error::invalid(format!(
                "{id}unexpected number of string elements {} for inference input '{name}' for model '{model}', expecting {expected}",
                seen + 1
            )));
        }
        seen += 1;
        match element {
            Ok(_) => {}
            Err(Framing::ShortLength { available }) => {
                return Err(Error::invalid(format!(
                    "{id}incomplete string length indicator for inference input '{name}' for model '{model}', expecting 4 bytes but only {available} bytes available. Please make sure the string length indicator is in one buffer."
                )))
            }
            Err(Framing::ShortData { len, available }) => {
                return Err(Error::invalid(format!(
                    "incomplete string data for inference input '{name}', expecting string of length {len} but only {available} bytes available"
                ))
                // The backend's check after execution on Triton: text/plain.
                .plain())
            }
        }
    }
    if seen != expected {
        return Err(Error::invalid(format!(
            "{id}expected {expected} string elements for inference input '{name}' for model '{model}', got {seen}"
        )));
    }
    Ok(())
}

/// True when the input's name, datatype and shape agree with the model, i.e.
/// Triton's core would get as far as the byte-size check.
fn signature_matches(info: &ModelInfo, input: &InputTensor, dtype: DataType) -> bool {
    let Some(spec) = info.input(&input.name) else {
        return false;
    };
    if spec.datatype != Some(dtype) {
        return false;
    }
    let shape = if info.max_batch_size > 0 {
        match input.shape.split_first() {
            Some((batch, rest)) if *batch >= 1 && *batch <= info.max_batch_size => rest,
            _ => return false,
        }
    } else {
        &input.shape[..]
    };
    shape.len() == spec.dims.len() && shape.iter().zip(&spec.dims).all(|(s, d)| *d < 0 || s == d)
}
