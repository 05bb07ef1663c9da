//! Model-level work the HTTP front must do itself before a request goes
//! upstream: building raw binary requests from the model signature
//! (v2 §2.7), refusing classification the upstream would crash on
//! (v2 §3.5), and validating tensor byte sizes and BYTES framing (v2 §2.8) so no
//! malformed tensor ever reaches the upstream. Texts, and the order in
//! which inputs are checked, are Triton core's.

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
pub(crate) fn raw_request(
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
            datatype: dtype.into(),
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
/// (BYTES crashes Triton 2.51; v2 §3.5).
pub(crate) fn classification(request: &InferRequest, info: Option<&ModelInfo>) -> Result<()> {
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
            )));
        }
    }
    Ok(())
}

/// Validates every raw input's byte size against shape × element size, and
/// BYTES framing, the way Triton's core does: the inputs in the reverse of
/// request order (so the *last* wrong input in the request is the one
/// named, as Triton 2.51 answers), each one's datatype and shape before its
/// size; BYTES elements counted as the core counts them (an element whose
/// length runs past the data still counts, and ends the walk). A request
/// the upstream refuses before it gets to sizes (unknown or missing inputs,
/// batch sizes), or an input whose datatype or shape is wrong, is left to
/// the upstream, so its error text wins as it would on Triton. Only when
/// the core finds nothing: our own check, which the core lacks, that the
/// last BYTES element is complete (first such input in request order).
pub(crate) fn tensor_sizes(request: &InferRequest, info: Option<&ModelInfo>) -> Result<()> {
    if info.is_some_and(|info| refused_before_sizes(info, request)) {
        return Ok(());
    }
    let id = prefix(&request.id);
    let model = &request.model_name;
    let mut incomplete = None;
    for input in request.inputs.iter().rev() {
        if info.is_some_and(|info| !signature_matches(info, input)) {
            return Ok(());
        }
        // A streamed input's bytes are not here yet: only its size is
        // (streamed inputs are never BYTES, whose framing needs the bytes).
        let (len, data) = match &input.data {
            InputData::Raw(data) => (data.len() as u64, Some(data)),
            InputData::Streamed(len) => (*len, None),
            InputData::SharedMemory(_) => continue,
        };
        let (Some(dtype), Some(count)) = (input.datatype.known(), element_count(&input.shape))
        else {
            continue;
        };
        let name = &input.name;
        match dtype.element_size() {
            Some(size) => {
                let expected = count.checked_mul(size as u64);
                if expected != Some(len) {
                    let expected =
                        expected.map_or_else(|| "overflow".to_string(), |e| e.to_string());
                    return Err(Error::invalid(format!(
                        "{id}input byte size mismatch for input '{name}' for model '{model}'. Expected {expected}, got {len}"
                    )));
                }
            }
            None => {
                let Some(data) = data else { continue };
                if let Some(short) = check_framing(data, count, &id, name, model)? {
                    incomplete = Some(short);
                }
            }
        }
    }
    incomplete.map_or(Ok(()), Err)
}

/// Triton core's BYTES walk: `Err` for what the core refuses, `Ok(Some)`
/// for a last element shorter than its length prefix (the count being
/// right, the core lets it through; the Python backend's text, as JSON).
fn check_framing(
    data: &[u8],
    expected: u64,
    id: &str,
    name: &str,
    model: &str,
) -> Result<Option<Error>> {
    let mut seen = 0u64;
    let mut short = None;
    for element in bytes_elements(data) {
        if let Err(Framing::ShortLength { available }) = element {
            return Err(Error::invalid(format!(
                "{id}incomplete string length indicator for inference input '{name}' for model '{model}', expecting 4 bytes but only {available} bytes available. Please make sure the string length indicator is in one buffer."
            )));
        }
        seen += 1;
        if seen > expected {
            return Err(Error::invalid(format!(
                "{id}unexpected number of string elements {seen} for inference input '{name}' for model '{model}', expecting {expected}"
            )));
        }
        if let Err(Framing::ShortData { len, available }) = element {
            short = Some(Error::invalid(format!(
                "incomplete string data for inference input '{name}', expecting string of length {len} but only {available} bytes available"
            )));
        }
    }
    if seen != expected {
        return Err(Error::invalid(format!(
            "{id}expected {expected} string elements for inference input '{name}' for model '{model}', got {seen}"
        )));
    }
    Ok(short)
}

/// True when Triton refuses the request before any size check: an input
/// the model does not have, too many inputs or a required one missing,
/// or batch sizes that are missing, differ or exceed `max_batch_size`.
fn refused_before_sizes(info: &ModelInfo, request: &InferRequest) -> bool {
    let inputs = &request.inputs;
    if inputs.iter().any(|i| info.input(&i.name).is_none())
        || inputs.len() > info.inputs.len()
        || info
            .inputs
            .iter()
            .any(|spec| !spec.optional && !inputs.iter().any(|i| i.name == spec.name))
    {
        return true;
    }
    if info.max_batch_size == 0 {
        return false;
    }
    let mut batches = inputs.iter().map(|i| i.shape.first().copied());
    let first = batches.next().flatten();
    !batches.all(|b| b == first)
        || first.is_none_or(|batch| batch < 1 || batch > info.max_batch_size)
}

/// True when the input's datatype and shape (batch dimension removed)
/// agree with the model, i.e. Triton's core would get as far as its byte
/// size.
fn signature_matches(info: &ModelInfo, input: &InputTensor) -> bool {
    let Some(spec) = info.input(&input.name) else {
        return false;
    };
    if spec.datatype.is_none() || spec.datatype != input.datatype.known() {
        return false;
    }
    let batch = usize::from(info.max_batch_size > 0);
    let shape = input.shape.get(batch..).unwrap_or_default();
    shape.len() == spec.dims.len() && shape.iter().zip(&spec.dims).all(|(s, d)| *d < 0 || s == d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TensorInfo;

    fn spec(name: &str, datatype: DataType, dims: &[i64]) -> TensorInfo {
        TensorInfo {
            name: name.to_string(),
            datatype: Some(datatype),
            dims: dims.to_vec(),
            optional: false,
        }
    }

    /// A model with a BYTES input `T` [-1] and an INT32 input `N` [1].
    fn model() -> ModelInfo {
        ModelInfo {
            max_batch_size: 0,
            inputs: vec![
                spec("T", DataType::Bytes, &[-1]),
                spec("N", DataType::Int32, &[1]),
            ],
            ..ModelInfo::default()
        }
    }

    fn input(name: &str, datatype: DataType, shape: &[i64], data: &[u8]) -> InputTensor {
        InputTensor {
            name: name.to_string(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
            data: InputData::Raw(Bytes::copy_from_slice(data)),
        }
    }

    fn request(inputs: Vec<InputTensor>) -> InferRequest {
        InferRequest {
            model_name: "m".to_string(),
            inputs,
            ..InferRequest::default()
        }
    }

    fn refusal(inputs: Vec<InputTensor>) -> Error {
        tensor_sizes(&request(inputs), Some(&model())).expect_err("refused")
    }

    const TWO_STRINGS: &[u8] = b"\x01\x00\x00\x00a\x01\x00\x00\x00b";
    const UNK: &str = "[request id: <id_unknown>] ";

    #[test]
    fn the_last_wrong_input_in_request_order_is_named() {
        let strings = input("T", DataType::Bytes, &[1], TWO_STRINGS);
        let number = input("N", DataType::Int32, &[1], &[0; 8]);
        let size =
            format!("{UNK}input byte size mismatch for input 'N' for model 'm'. Expected 4, got 8");
        let count = format!("{UNK}unexpected number of string elements 2 for inference input 'T' for model 'm', expecting 1");
        assert_eq!(refusal(vec![strings.clone(), number.clone()]).message, size);
        assert_eq!(refusal(vec![number, strings]).message, count);
    }

    #[test]
    fn a_wrong_signature_is_left_to_the_upstream() {
        let strings = input("T", DataType::Bytes, &[1], TWO_STRINGS);
        // Checked first (last in the request), `N`'s shape is wrong: the
        // upstream names it, as Triton would.
        let wrong_shape = input("N", DataType::Int32, &[2], &[0; 4]);
        let r = request(vec![strings.clone(), wrong_shape]);
        assert!(tensor_sizes(&r, Some(&model())).is_ok());
        // An unknown input is refused before any size check.
        let unknown = input("X", DataType::Int32, &[1], &[0; 4]);
        let r = request(vec![strings, unknown]);
        assert!(tensor_sizes(&r, Some(&model())).is_ok());
    }

    #[test]
    fn bytes_elements_are_counted_as_tritons_core_counts_them() {
        let number = || input("N", DataType::Int32, &[1], &[0; 4]);
        // The first length prefix (100) runs past the data: one element.
        let overrun = input("T", DataType::Bytes, &[2], b"\x64\x00\x00\x00abcdefg");
        let e = refusal(vec![overrun, number()]);
        assert_eq!(
            e.message,
            format!("{UNK}expected 2 string elements for inference input 'T' for model 'm', got 1")
        );
        // The count is right, the last element short: our own check.
        let short = || {
            input(
                "T",
                DataType::Bytes,
                &[2],
                b"\x01\x00\x00\x00a\x0a\x00\x00\x00abc",
            )
        };
        let e = refusal(vec![short(), number()]);
        assert_eq!(
            e.message,
            "incomplete string data for inference input 'T', expecting string of length 10 but only 3 bytes available"
        );
        // A core error in another input wins over our own check.
        let wrong = input("N", DataType::Int32, &[1], &[0; 3]);
        let e = refusal(vec![wrong, short()]);
        assert!(
            e.message.contains("input byte size mismatch for input 'N'"),
            "{}",
            e.message
        );
        // A short length indicator is refused before the element counts.
        let indicator = input("T", DataType::Bytes, &[1], b"\x01\x00\x00\x00a\x01\x00");
        let e = refusal(vec![indicator, number()]);
        assert!(
            e.message.contains("incomplete string length indicator"),
            "{}",
            e.message
        );
    }
}
