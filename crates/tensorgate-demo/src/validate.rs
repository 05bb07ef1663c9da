//! Validation of a `ModelInferRequest` against a model, in the order and
//! with the texts of Triton 2.51: first the gRPC frontend (request
//! parameters, duplicate inputs, where each input's data comes from, output
//! parameters), then the core's normalization (outputs exist, input count,
//! batch size, datatype, shape, byte size / BYTES framing).
//!
//! Sources: server `src/grpc/infer_handler.cc` (`SetInferenceRequestMetadata`,
//! `InferGRPCToInput`), `src/grpc/grpc_utils.h` (`ParseSharedMemoryParams`),
//! core `src/infer_request.cc` (`Normalize`, `ValidateRequestInputs`,
//! `ValidateBytesInputs`). Messages of the core carry the
//! `[request id: <id>] ` prefix; those of the frontend do not.
//!
//! Where Triton iterates an unordered map (the request's inputs, its
//! parameters), the demo uses request order (inputs) or key order
//! (parameters), so the first error reported is deterministic.

use std::collections::{BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use tonic::Status;

use super::models::{
    dims_string, element_count, element_size, parse_protocol_name, protocol_name, ModelSpec, Tensor,
};
use tensorgate_proto::inference::infer_parameter::ParameterChoice;
use tensorgate_proto::inference::model_infer_request::InferInputTensor;
use tensorgate_proto::inference::{
    DataType, InferParameter, InferTensorContents, ModelInferRequest,
};

/// The one `triton_*` request parameter a client may set.
pub(crate) const EMPTY_FINAL_RESPONSE: &str = "triton_enable_empty_final_response";

/// Appended to shape errors of batching models (core `Normalize`).
const BATCH_NOTE: &str = "NOTE: Setting a non-zero max_batch_size in the model config requires a \
    batch dimension to be prepended to each input shape. If you want to specify the full shape \
    including the batch dim in your input dims config, try setting max_batch_size to zero. See \
    the model configuration docs for more info on max_batch_size.";

/// A request that passed validation.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Inputs in request order; shapes include the batch dimension.
    pub inputs: Vec<Tensor>,
    /// Batch size, 0 for models that do not batch.
    pub batch_size: u32,
    /// Requested outputs (empty: all of them).
    pub requested: BTreeSet<String>,
    /// Top-K requested per output name.
    pub classification: HashMap<String, u32>,
    /// `triton_enable_empty_final_response` (streams of decoupled models).
    pub empty_final_response: bool,
}

impl Prepared {
    /// Whether the response carries output `name`.
    pub(crate) fn wants(&self, name: &str) -> bool {
        self.requested.is_empty() || self.requested.contains(name)
    }
}

/// The core's prefix: `[request id: <id>] `, `<id_unknown>` for an empty id.
pub(crate) fn request_prefix(id: &str) -> String {
    let id = if id.is_empty() { "<id_unknown>" } else { id };
    format!("[request id: {id}] ")
}

fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message)
}

/// Validates `request` for `model` (already looked up, transaction policy
/// already checked) and gathers its input data.
pub(crate) fn prepare(model: &ModelSpec, request: &ModelInferRequest) -> Result<Prepared, Status> {
    let prefix = request_prefix(&request.id);
    let empty_final_response = request_parameters(&request.parameters)?;
    let mut names = HashSet::new();
    for input in &request.inputs {
        if !names.insert(input.name.as_str()) {
            return Err(invalid(format!(
                "{prefix}input '{}' already exists in request",
                input.name
            )));
        }
    }
    let data = input_data(request)?;
    let classification = output_parameters(request)?;
    let requested = request.outputs.iter().map(|o| o.name.clone()).collect();
    let (inputs, batch_size) = normalize(model, request, data, &requested, &prefix)?;
    Ok(Prepared {
        inputs,
        batch_size,
        requested,
        classification,
        empty_final_response,
    })
}

/// Request-level parameters (`SetInferenceRequestMetadata`): the reserved
/// keys' types, `triton_*` keys, custom keys' types. Returns the value of
/// `triton_enable_empty_final_response`.
fn request_parameters(parameters: &HashMap<String, InferParameter>) -> Result<bool, Status> {
    let mut keys: Vec<&String> = parameters.keys().collect();
    keys.sort();
    let mut empty_final_response = false;
    for key in keys {
        let choice = parameters[key].parameter_choice.as_ref();
        match key.as_str() {
            "sequence_id" => {
                if !matches!(
                    choice,
                    Some(ParameterChoice::Int64Param(_) | ParameterChoice::StringParam(_))
                ) {
                    return Err(invalid(
                        "invalid value type for 'sequence_id' parameter, expected int64_param \
                         or string_param.",
                    ));
                }
            }
            "sequence_start" | "sequence_end" => {
                if !matches!(choice, Some(ParameterChoice::BoolParam(_))) {
                    return Err(invalid(format!(
                        "invalid value type for '{key}' parameter, expected bool_param."
                    )));
                }
            }
            "priority" => match choice {
                Some(ParameterChoice::Int64Param(v)) if *v < 0 => {
                    return Err(invalid(
                        "invalid value for 'priority', expected value >= 0.",
                    ));
                }
                Some(ParameterChoice::Int64Param(_) | ParameterChoice::Uint64Param(_)) => {}
                _ => {
                    return Err(invalid(
                        "invalid value type for 'priority' parameter, expected int64_param or \
                         uint64_param.",
                    ))
                }
            },
            "timeout" => {
                if !matches!(choice, Some(ParameterChoice::Int64Param(_))) {
                    return Err(invalid(
                        "invalid value type for 'timeout' parameter, expected int64_param.",
                    ));
                }
            }
            EMPTY_FINAL_RESPONSE => match choice {
                Some(ParameterChoice::BoolParam(value)) => empty_final_response = *value,
                _ => {
                    return Err(invalid(format!(
                        "invalid value type for '{key}' parameter, expected bool_param."
                    )))
                }
            },
            reserved if reserved.starts_with("triton_") => {
                return Err(invalid(format!(
                    "parameter keys starting with 'triton_' are reserved for Triton usage. Only \
                     the following keys starting with 'triton_' are allowed: \
                     {EMPTY_FINAL_RESPONSE}"
                )));
            }
            _ => {
                if !matches!(
                    choice,
                    Some(
                        ParameterChoice::Int64Param(_)
                            | ParameterChoice::BoolParam(_)
                            | ParameterChoice::StringParam(_)
                            | ParameterChoice::DoubleParam(_)
                    )
                ) {
                    return Err(invalid(format!(
                        "invalid value type for '{key}' parameter, expected int64_param, \
                         bool_param, or string_param."
                    )));
                }
            }
        }
    }
    Ok(empty_final_response)
}

/// `ParseSharedMemoryParams`: the region name, if the tensor uses one.
fn shared_memory_region(
    tensor: &str,
    parameters: &HashMap<String, InferParameter>,
) -> Result<Option<String>, Status> {
    let region = match parameters.get("shared_memory_region") {
        None => None,
        Some(p) => match &p.parameter_choice {
            Some(ParameterChoice::StringParam(region)) => Some(region.clone()),
            _ => {
                return Err(invalid(format!(
                    "invalid value type for 'shared_memory_region' parameter for tensor \
                     '{tensor}', expected string_param."
                )))
            }
        },
    };
    for key in ["shared_memory_offset", "shared_memory_byte_size"] {
        match parameters.get(key) {
            Some(_) if region.is_none() => {
                return Err(invalid(format!(
                    "'{key}' can not be specified without 'shared_memory_region' parameter for \
                     tensor '{tensor}'"
                )));
            }
            Some(p) if !matches!(p.parameter_choice, Some(ParameterChoice::Int64Param(_))) => {
                return Err(invalid(format!(
                    "invalid value type for '{key}' parameter for tensor '{tensor}', expected \
                     int64_param."
                )));
            }
            None if key == "shared_memory_byte_size" && region.is_some() => {
                return Err(invalid(format!(
                    "'shared_memory_byte_size' must be specified along with \
                     'shared_memory_region' parameter for tensor '{tensor}'"
                )));
            }
            _ => {}
        }
    }
    Ok(region)
}

/// No region is ever registered with the demo.
fn unknown_region(region: &str) -> Status {
    Status::not_found(format!("Unable to find shared memory region: '{region}'"))
}

/// `InferGRPCToInput`: the data of every input, in `inputs` order. Shared
/// memory, else typed `contents`, else the next unused `raw_input_contents`
/// entry (extra entries are ignored).
fn input_data(request: &ModelInferRequest) -> Result<Vec<Bytes>, Status> {
    let model = &request.model_name;
    let mut raw = request.raw_input_contents.iter();
    let mut data = Vec::with_capacity(request.inputs.len());
    for input in &request.inputs {
        let name = &input.name;
        if let Some(region) = shared_memory_region(name, &input.parameters)? {
            if input.contents.is_some() {
                return Err(invalid(format!(
                    "unexpected 'content' provided when using shared memory for input tensor \
                     '{name}' for model '{model}'"
                )));
            }
            return Err(unknown_region(&region));
        }
        if input.contents.is_some() && !request.raw_input_contents.is_empty() {
            return Err(invalid(format!(
                "contents field must not be specified when using raw_input_contents for \
                 '{name}' for model '{model}'"
            )));
        } else if let Some(contents) = &input.contents {
            data.push(typed_contents(input, model, contents)?);
        } else if let Some(bytes) = raw.next() {
            data.push(bytes.clone());
        } else {
            return Err(invalid(format!(
                "unable to find data for input tensor '{name}' for model '{model}' in request."
            )));
        }
    }
    Ok(data)
}

/// Serializes typed `contents` to the raw layout. Every populated field
/// must match the input's datatype, and only one may be populated.
fn typed_contents(
    input: &InferInputTensor,
    model: &str,
    contents: &InferTensorContents,
) -> Result<Bytes, Status> {
    let dtype = parse_protocol_name(&input.datatype);
    let name = &input.name;
    let mut data: Vec<u8> = Vec::new();
    // `InferGRPCToInputHelper`, called for each populated field in turn.
    let mut accept = |field_type: DataType, bytes: Vec<u8>| -> Result<(), Status> {
        if !data.is_empty() {
            return Err(invalid(format!(
                "unexpected explicit tensor data for input tensor '{name}' for model '{model}', \
                 binary data was already supplied."
            )));
        }
        if field_type != dtype {
            return Err(invalid(format!(
                "unexpected explicit tensor data for input tensor '{name}' for model '{model}' \
                 of type '{}', expected datatype '{}'",
                protocol_name(field_type),
                protocol_name(dtype)
            )));
        }
        data = bytes;
        Ok(())
    };
    fn le<T: Copy, const N: usize>(values: &[T], to_le: fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|v| to_le(*v)).collect()
    }
    let c = contents;
    if !c.bool_contents.is_empty() {
        accept(
            DataType::TypeBool,
            c.bool_contents.iter().map(|b| u8::from(*b)).collect(),
        )?;
    }
    if !c.int_contents.is_empty() {
        match dtype {
            // Low bytes of each 32-bit value (little-endian).
            DataType::TypeInt8 => accept(dtype, le(&c.int_contents, |v| [v as u8]))?,
            DataType::TypeInt16 => {
                accept(dtype, le(&c.int_contents, |v| (v as i16).to_le_bytes()))?
            }
            _ => accept(DataType::TypeInt32, le(&c.int_contents, i32::to_le_bytes))?,
        }
    }
    if !c.int64_contents.is_empty() {
        accept(DataType::TypeInt64, le(&c.int64_contents, i64::to_le_bytes))?;
    }
    if !c.uint_contents.is_empty() {
        match dtype {
            DataType::TypeUint8 => accept(dtype, le(&c.uint_contents, |v| [v as u8]))?,
            DataType::TypeUint16 => {
                accept(dtype, le(&c.uint_contents, |v| (v as u16).to_le_bytes()))?
            }
            _ => accept(DataType::TypeUint32, le(&c.uint_contents, u32::to_le_bytes))?,
        }
    }
    if !c.uint64_contents.is_empty() {
        accept(
            DataType::TypeUint64,
            le(&c.uint64_contents, u64::to_le_bytes),
        )?;
    }
    if !c.fp32_contents.is_empty() {
        accept(DataType::TypeFp32, le(&c.fp32_contents, f32::to_le_bytes))?;
    }
    if !c.fp64_contents.is_empty() {
        accept(DataType::TypeFp64, le(&c.fp64_contents, f64::to_le_bytes))?;
    }
    if !c.bytes_contents.is_empty() {
        let mut framed = Vec::new();
        for element in &c.bytes_contents {
            framed.extend_from_slice(&(element.len() as u32).to_le_bytes());
            framed.extend_from_slice(element);
        }
        accept(DataType::TypeString, framed)?;
    }
    Ok(data.into())
}

/// `InferAllocatorPayload`: per requested output, shared memory and
/// `classification` (an `int64_param` > 0, kept as `uint32`).
fn output_parameters(request: &ModelInferRequest) -> Result<HashMap<String, u32>, Status> {
    let mut classification = HashMap::new();
    for output in &request.outputs {
        let region = shared_memory_region(&output.name, &output.parameters)?;
        let top_k =
            match output.parameters.get("classification") {
                None => None,
                Some(p) => match p.parameter_choice {
                    Some(ParameterChoice::Int64Param(k)) if k <= 0 => {
                        return Err(invalid(
                            "invalid value for 'classification' parameter, expected >= 0",
                        ))
                    }
                    // Triton stores the count as uint32 (truncating).
                    Some(ParameterChoice::Int64Param(k)) => Some(k as u32),
                    _ => return Err(invalid(
                        "invalid value type for 'classification' parameter, expected int64_param",
                    )),
                },
            };
        match (region, top_k) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "output can't set both 'shared_memory_region' and 'classification'",
                ))
            }
            (Some(region), None) => return Err(unknown_region(&region)),
            (None, Some(k)) => {
                classification.entry(output.name.clone()).or_insert(k);
            }
            (None, None) => {}
        }
    }
    Ok(classification)
}

/// The core's `Normalize`: returns the input tensors (shapes with batch
/// dimension) and the batch size.
fn normalize(
    model: &ModelSpec,
    request: &ModelInferRequest,
    data: Vec<Bytes>,
    requested: &BTreeSet<String>,
    prefix: &str,
) -> Result<(Vec<Tensor>, u32), Status> {
    let m = model.name;
    // Requested outputs, in name order (a std::set in Triton).
    if let Some(name) = requested.iter().find(|name| model.output(name).is_none()) {
        return Err(invalid(format!(
            "unexpected inference output '{name}' for model '{m}'"
        )));
    }
    check_input_count(model, request, prefix)?;

    // A uint32 in Triton: the first dimension is truncated.
    let mut batch_size: u32 = 0;
    for input in &request.inputs {
        let name = &input.name;
        if model.input(name).is_none() {
            return Err(invalid(format!(
                "unexpected inference input '{name}' for model '{m}'"
            )));
        }
        if model.batching() {
            let Some(&first) = input.shape.first() else {
                return Err(invalid(format!(
                    "{prefix}input '{name}' has no shape but model requires batch dimension for \
                     '{m}'"
                )));
            };
            if batch_size == 0 {
                batch_size = first as u32;
            } else if first != i64::from(batch_size) {
                return Err(invalid(format!(
                    "{prefix}input '{name}' batch size does not match other inputs for '{m}'"
                )));
            }
        }
    }
    // Triton compares `(int)batch_size_`.
    if batch_size as i32 > model.max_batch_size {
        return Err(invalid(format!(
            "{prefix}inference request batch-size must be <= {} for '{m}'",
            model.max_batch_size
        )));
    }

    let mut tensors = Vec::with_capacity(request.inputs.len());
    for (input, data) in request.inputs.iter().zip(data) {
        let name = &input.name;
        let spec = model.input(name).expect("checked above");
        let dtype = parse_protocol_name(&input.datatype);
        if dtype != spec.dtype {
            return Err(invalid(format!(
                "{prefix}inference input '{name}' data-type is '{}', but model '{m}' expects '{}'",
                protocol_name(dtype),
                protocol_name(spec.dtype)
            )));
        }
        let shape = if model.batching() {
            &input.shape[1..]
        } else {
            &input.shape[..]
        };
        check_shape(model, input, &spec.dims, shape, prefix)?;
        // Triton's "shape with batch dim": no batch dim when the batch is 0.
        let full_shape: Vec<i64> = (batch_size != 0)
            .then_some(i64::from(batch_size))
            .into_iter()
            .chain(shape.iter().copied())
            .collect();
        if dtype == DataType::TypeString {
            check_bytes(&data, element_count(&full_shape), name, m, prefix)?;
        } else {
            let expected = match element_count(&full_shape) {
                -1 => -1,
                n => n.wrapping_mul(element_size(dtype) as i64),
            };
            if data.len() as i64 != expected {
                return Err(invalid(format!(
                    "{prefix}input byte size mismatch for input '{name}' for model '{m}'. \
                     Expected {expected}, got {}",
                    data.len()
                )));
            }
        }
        tensors.push(Tensor {
            name: name.clone(),
            dtype,
            shape: full_shape,
            data,
        });
    }
    Ok((tensors, batch_size))
}

/// `ValidateRequestInputs`: every required input given (optional ones,
/// the LLM models', may be left out).
fn check_input_count(
    model: &ModelSpec,
    request: &ModelInferRequest,
    prefix: &str,
) -> Result<(), Status> {
    let (expected, got) = (model.inputs.len(), request.inputs.len());
    let required = model.inputs.iter().filter(|s| !s.optional);
    let has = |name: &str| request.inputs.iter().any(|i| i.name == name);
    if expected == got || (got < expected && required.clone().all(|s| has(s.name))) {
        return Ok(());
    }
    let quoted =
        |names: Vec<&str>| -> Vec<String> { names.iter().map(|n| format!("'{n}'")).collect() };
    let given = quoted(request.inputs.iter().map(|i| i.name.as_str()).collect());
    let missing = quoted(
        model
            .inputs
            .iter()
            .filter(|spec| !spec.optional)
            .map(|spec| spec.name)
            .filter(|name| !has(name))
            .collect(),
    );
    // Triton builds "[" + "'a'," ... then drops the last character, so an
    // empty missing list comes out as "]".
    let missing = if missing.is_empty() {
        "]".to_owned()
    } else {
        format!("[{}]", missing.join(","))
    };
    Err(invalid(format!(
        "{prefix}expected {expected} inputs but got {got} inputs for model '{}'. Got input(s) \
         [{}], but missing required input(s) {missing}. Please provide all required input(s).",
        model.name,
        given.join(",")
    )))
}

/// The shape check of `Normalize` (`shape` is without the batch dimension).
fn check_shape(
    model: &ModelSpec,
    input: &InferInputTensor,
    dims: &[i64],
    shape: &[i64],
    prefix: &str,
) -> Result<(), Status> {
    let (name, m) = (&input.name, model.name);
    let mut matches = dims.len() == shape.len();
    if matches {
        for (&want, &got) in dims.iter().zip(shape) {
            if got == -1 {
                return Err(invalid(format!(
                    "{prefix}All input dimensions should be specified for input '{name}' for \
                     model '{m}', got {}",
                    dims_string(&input.shape)
                )));
            }
            if want != -1 && want != got {
                matches = false;
                break;
            }
        }
    }
    if matches {
        return Ok(());
    }
    let (batch_dim, note) = if model.batching() {
        (Some(-1), BATCH_NOTE)
    } else {
        (None, "")
    };
    let full_dims: Vec<i64> = batch_dim.into_iter().chain(dims.iter().copied()).collect();
    Err(invalid(format!(
        "{prefix}unexpected shape for input '{name}' for model '{m}'. Expected {}, got {}. {note}",
        dims_string(&full_dims),
        dims_string(&input.shape)
    )))
}

/// `ValidateBytesInputs` over one contiguous buffer: every element is a
/// 4-byte little-endian length and that many bytes. Like Triton, a last
/// element whose length runs past the end is not detected here.
fn check_bytes(
    data: &[u8],
    expected: i64,
    name: &str,
    model: &str,
    prefix: &str,
) -> Result<(), Status> {
    let mut pos = 0usize;
    let mut count: i64 = 0;
    while pos < data.len() {
        let remaining = data.len() - pos;
        if remaining < 4 {
            return Err(invalid(format!(
                "{prefix}incomplete string length indicator for inference input '{name}' for \
                 model '{model}', expecting 4 bytes but only {remaining} bytes available. Please \
                 make sure the string length indicator is in one buffer."
            )));
        }
        let len = u32::from_le_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]);
        count += 1;
        if count > expected {
            return Err(invalid(format!(
                "{prefix}unexpected number of string elements {count} for inference input \
                 '{name}' for model '{model}', expecting {expected}"
            )));
        }
        pos = (pos + 4).saturating_add(len as usize).min(data.len());
    }
    if count != expected {
        return Err(invalid(format!(
            "{prefix}expected {expected} string elements for inference input '{name}' for model \
             '{model}', got {count}"
        )));
    }
    Ok(())
}
