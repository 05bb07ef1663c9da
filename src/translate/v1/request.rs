//! A v1 infer request (header + body) to a protocol-neutral
//! [`InferRequest`]. v1 requests carry no datatypes and no batch dimension:
//! both come from the model's configuration, which is also what the dims
//! and batch size are checked against (the v1 client checks neither,
//! v1 §3.1). Texts follow TRTIS 1.x.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::{
    DataType, InferRequest, InputData, InputTensor, ModelInfo, OutputKind, Param, RequestedOutput,
    SharedMemory, TensorInfo,
};
use crate::proto::v1::{infer_request_header, InferRequestHeader, InferSharedMemory};
use crate::wire::v1::body::{self, Extent};

/// What the client wants back: what the answer needs to know about the
/// request.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub id: u64,
    pub batch_size: u32,
    /// Whether tensors carry a leading batch dimension upstream.
    pub batching: bool,
    /// Outputs in request order (the order of the answer).
    pub outputs: Vec<WantedOutput>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WantedOutput {
    pub name: String,
    /// Top-K classes; 0 = the raw tensor.
    pub classes: u32,
    pub shared_memory: bool,
}

const FLAG_START: u32 = 1;
const FLAG_END: u32 = 2;

/// Builds the request and what its answer must hold; `version` is the URL's (empty = latest).
pub fn infer_request(
    model: &str,
    version: &str,
    header: &InferRequestHeader,
    info: &ModelInfo,
    data: &Bytes,
) -> Result<(InferRequest, Wanted)> {
    let batching = info.max_batch_size > 0;
    let batch = batch_size(header.batch_size, info, model)?;
    let mut specs = Vec::with_capacity(header.input.len());
    for (i, input) in header.input.iter().enumerate() {
        if header.input[..i].iter().any(|p| p.name == input.name) {
            return Err(Error::invalid(format!(
                "input '{}' is specified more than once for model '{model}'",
                input.name
            )));
        }
        let spec = info.input(&input.name).ok_or_else(|| {
            Error::invalid(format!(
                "unexpected inference input '{}' for model '{model}'",
                input.name
            ))
        })?;
        specs.push(spec);
    }
    let required = info.inputs.iter().filter(|t| !t.optional).count();
    let missing = info
        .inputs
        .iter()
        .any(|t| !t.optional && !specs.iter().any(|s| s.name == t.name));
    if missing {
        return Err(Error::invalid(format!(
            "expected {required} inputs but got {} inputs for model '{model}'",
            header.input.len()
        )));
    }
    let mut layouts = Vec::with_capacity(specs.len());
    for (input, spec) in header.input.iter().zip(&specs) {
        layouts.push(input_layout(input, spec, batch, model)?);
    }
    let extents: Vec<(&str, Extent)> = header
        .input
        .iter()
        .zip(&layouts)
        .map(|(input, p)| (input.name.as_str(), p.2))
        .collect();
    let slices = body::split(data, model, &extents)?;
    let inputs = header
        .input
        .iter()
        .zip(layouts)
        .zip(slices)
        .map(|((input, (dtype, dims, _)), slice)| {
            let mut shape = Vec::with_capacity(dims.len() + 1);
            if batching {
                shape.push(i64::from(batch));
            }
            shape.extend(dims);
            let data = match (slice, &input.shared_memory) {
                (Some(bytes), _) => InputData::Raw(bytes),
                (None, shm) => InputData::SharedMemory(shared_memory(shm.as_ref())),
            };
            InputTensor {
                name: input.name.clone(),
                datatype: dtype.into(),
                shape,
                data,
            }
        })
        .collect();
    let (outputs, wanted_outputs) = outputs(header, info, model)?;
    let request = InferRequest {
        model_name: model.to_string(),
        model_version: version.to_string(),
        id: match header.id {
            0 => Vec::new(),
            id => id.to_string().into_bytes(),
        },
        parameters: parameters(header)?,
        inputs,
        outputs,
        unlisted_kind: None,
    };
    let wanted = Wanted {
        id: header.id,
        batch_size: batch,
        batching,
        outputs: wanted_outputs,
    };
    Ok((request, wanted))
}

fn batch_size(batch: u32, info: &ModelInfo, model: &str) -> Result<u32> {
    let max = info.max_batch_size;
    if batch == 0 {
        return Err(Error::invalid(format!(
            "inference request batch-size must be >= 1 for '{model}'"
        )));
    }
    if max <= 0 && batch != 1 {
        return Err(Error::invalid(format!(
            "inference request batch-size must be 1 for '{model}', which does not support batching"
        )));
    }
    if max > 0 && i64::from(batch) > max {
        return Err(Error::invalid(format!(
            "inference request batch-size must be <= {max} for '{model}'"
        )));
    }
    Ok(batch)
}

/// Datatype, dims of one batch entry, and body extent of one input.
fn input_layout(
    input: &infer_request_header::Input,
    spec: &TensorInfo,
    batch: u32,
    model: &str,
) -> Result<(DataType, Vec<i64>, Extent)> {
    let name = &input.name;
    let dtype = spec.datatype.ok_or_else(|| {
        Error::unsupported(format!(
            "input '{name}' of model '{model}' has a datatype the gateway does not know"
        ))
    })?;
    let dims = input_dims(&input.dims, spec, model)?;
    if input.shared_memory.is_some() {
        return Ok((dtype, dims, Extent::SharedMemory));
    }
    let count = dims.iter().try_fold(u64::from(batch), |n, d| {
        n.checked_mul(u64::try_from(*d).ok()?)
    });
    let overflow = || {
        Error::invalid(format!(
            "shape of input '{name}' for model '{model}' is too large"
        ))
    };
    let count = count.ok_or_else(overflow)?;
    let extent = match dtype.element_size() {
        Some(size) => {
            let bytes = count.checked_mul(size as u64).ok_or_else(overflow)?;
            if input.batch_byte_size != 0 && input.batch_byte_size != bytes {
                return Err(Error::invalid(format!(
                    "unexpected size {} for input '{name}', expecting {bytes} bytes for model '{model}'",
                    input.batch_byte_size
                )));
            }
            Extent::Bytes(bytes)
        }
        None if input.batch_byte_size != 0 => Extent::Bytes(input.batch_byte_size),
        None => Extent::Strings(count),
    };
    Ok((dtype, dims, extent))
}

/// The request's dims when given (checked against the configuration, `-1`
/// matching any size), else the configuration's when they are all fixed.
fn input_dims(dims: &[i64], spec: &TensorInfo, model: &str) -> Result<Vec<i64>> {
    let name = &spec.name;
    if dims.is_empty() {
        if spec.dims.iter().any(|d| *d < 0) {
            return Err(Error::invalid(format!(
                "model supports variable-size for input '{name}', request must specify input shape for model '{model}'"
            )));
        }
        return Ok(spec.dims.clone());
    }
    let fits = dims.len() == spec.dims.len()
        && dims
            .iter()
            .zip(&spec.dims)
            .all(|(d, c)| *d >= 0 && (*c < 0 || d == c));
    if !fits {
        return Err(Error::invalid(format!(
            "unexpected shape for input '{name}' for model '{model}'. Expected {}, got {}",
            dims_text(&spec.dims),
            dims_text(dims)
        )));
    }
    Ok(dims.to_vec())
}

fn dims_text(dims: &[i64]) -> String {
    let parts: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(","))
}

fn outputs(
    header: &InferRequestHeader,
    info: &ModelInfo,
    model: &str,
) -> Result<(Vec<RequestedOutput>, Vec<WantedOutput>)> {
    let mut requested = Vec::with_capacity(header.output.len());
    let mut wanted = Vec::with_capacity(header.output.len());
    for (i, output) in header.output.iter().enumerate() {
        let name = &output.name;
        if info.output(name).is_none() {
            return Err(Error::invalid(format!(
                "unexpected inference output '{name}' for model '{model}'"
            )));
        }
        if header.output[..i].iter().any(|p| &p.name == name) {
            return Err(Error::invalid(format!(
                "output '{name}' is requested more than once for model '{model}'"
            )));
        }
        let classes = match &output.cls {
            Some(cls) if cls.count == 0 => {
                return Err(Error::invalid(format!(
                    "classification count must be at least 1 for output '{name}' of model '{model}'"
                )))
            }
            Some(cls) => cls.count,
            None => 0,
        };
        let shared_memory = output
            .shared_memory
            .as_ref()
            .map(|s| shared_memory(Some(s)));
        wanted.push(WantedOutput {
            name: name.clone(),
            classes,
            shared_memory: shared_memory.is_some(),
        });
        requested.push(RequestedOutput {
            name: name.clone(),
            classification: classes,
            kind: OutputKind::Binary,
            shared_memory,
        });
    }
    Ok((requested, wanted))
}

fn shared_memory(shm: Option<&InferSharedMemory>) -> SharedMemory {
    let shm = shm.cloned().unwrap_or_default();
    SharedMemory {
        region: shm.name,
        offset: shm.offset,
        byte_size: shm.byte_size,
    }
}

/// Sequence and scheduling fields as the v2 parameters of v2 §5.1.
fn parameters(header: &InferRequestHeader) -> Result<Vec<(String, Param)>> {
    let mut params = Vec::new();
    let int = |name: &str, value: u64| {
        i64::try_from(value).map_err(|_| {
            Error::invalid(format!(
                "{name} {value} is larger than the upstream accepts ({})",
                i64::MAX
            ))
        })
    };
    if header.correlation_id != 0 {
        let id = int("correlation_id", header.correlation_id)?;
        params.push(("sequence_id".to_string(), Param::Int64(id)));
    }
    if header.flags & !(FLAG_START | FLAG_END) != 0 {
        return Err(Error::invalid(format!(
            "unknown inference request flags {}",
            header.flags
        )));
    }
    if header.flags & FLAG_START != 0 {
        params.push(("sequence_start".to_string(), Param::Bool(true)));
    }
    if header.flags & FLAG_END != 0 {
        params.push(("sequence_end".to_string(), Param::Bool(true)));
    }
    if header.priority != 0 {
        params.push((
            "priority".to_string(),
            Param::Int64(i64::from(header.priority)),
        ));
    }
    if header.timeout_microseconds != 0 {
        let timeout = int("timeout_microseconds", header.timeout_microseconds)?;
        params.push(("timeout".to_string(), Param::Int64(timeout)));
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::v1::text::parse;

    fn tensor(name: &str, datatype: DataType, dims: &[i64]) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            datatype: Some(datatype),
            dims: dims.to_vec(),
            optional: false,
        }
    }

    /// The capture's `simple` model: INT32 [16] ×2 → ×2, max batch 8.
    fn simple() -> ModelInfo {
        ModelInfo {
            max_batch_size: 8,
            decoupled: false,
            inputs: vec![
                tensor("INPUT0", DataType::Int32, &[16]),
                tensor("INPUT1", DataType::Int32, &[16]),
            ],
            outputs: vec![
                tensor("OUTPUT0", DataType::Int32, &[16]),
                tensor("OUTPUT1", DataType::Int32, &[16]),
            ],
        }
    }

    fn build(header: &str, body: Vec<u8>) -> Result<(InferRequest, Wanted)> {
        let header = parse::<InferRequestHeader>(header.as_bytes()).expect("header parses");
        infer_request("simple", "", &header, &simple(), &Bytes::from(body))
    }

    const TWO_IN: &str = r#"input { name: "INPUT0" dims: 16 } input { name: "INPUT1" dims: 16 }"#;

    #[test]
    fn batch_two_is_input_major_with_a_batch_dimension() {
        let body: Vec<u8> = (0..=255u8).collect();
        let header = format!(
            r#"batch_size: 2 {TWO_IN} output {{ name: "OUTPUT1" }} output {{ name: "OUTPUT0" cls {{ count: 3 }} }} correlation_id: 42 flags: 3 id: 9"#
        );
        let (request, wanted) = build(&header, body.clone()).expect("valid");
        assert_eq!(request.inputs[0].shape, [2, 16]);
        assert_eq!(request.inputs[0].datatype, DataType::Int32);
        assert_eq!(
            request.inputs[1].data,
            InputData::Raw(Bytes::from(body[128..].to_vec()))
        );
        assert_eq!(request.id, b"9");
        assert_eq!(
            request.parameters,
            [
                ("sequence_id".to_string(), Param::Int64(42)),
                ("sequence_start".to_string(), Param::Bool(true)),
                ("sequence_end".to_string(), Param::Bool(true)),
            ]
        );
        assert_eq!(request.outputs[1].classification, 3);
        assert_eq!(wanted.outputs[0].name, "OUTPUT1");
        assert_eq!(
            (wanted.batch_size, wanted.batching, wanted.id),
            (2, true, 9)
        );
    }

    #[test]
    fn model_level_errors() {
        let cases = [
            (format!("batch_size: 9 {TWO_IN}"), 128 * 9, "inference request batch-size must be <= 8 for 'simple'"),
            (TWO_IN.to_string(), 0, "inference request batch-size must be >= 1 for 'simple'"),
            (r#"batch_size: 1 input { name: "INPUT0" dims: 16 }"#.to_string(), 64, "expected 2 inputs but got 1 inputs for model 'simple'"),
            (format!(r#"batch_size: 1 {TWO_IN} input {{ name: "X" }}"#), 128, "unexpected inference input 'X' for model 'simple'"),
            (r#"batch_size: 1 input { name: "INPUT0" dims: 15 } input { name: "INPUT1" dims: 16 }"#.to_string(), 124, "unexpected shape for input 'INPUT0' for model 'simple'. Expected [16], got [15]"),
            (format!("batch_size: 1 {TWO_IN}"), 124, "unexpected size for input 'INPUT1', expecting 64 bytes for model 'simple'"),
            (format!("batch_size: 1 {TWO_IN}"), 129, "unexpected additional input data for model 'simple'"),
            (format!(r#"batch_size: 1 {TWO_IN} output {{ name: "OUTPUTX" }}"#), 128, "unexpected inference output 'OUTPUTX' for model 'simple'"),
            (format!(r#"batch_size: 1 {TWO_IN} output {{ name: "OUTPUT0" cls {{ }} }}"#), 128, "classification count must be at least 1 for output 'OUTPUT0' of model 'simple'"),
            (format!("batch_size: 1 {TWO_IN} flags: 4"), 128, "unknown inference request flags 4"),
            (format!("batch_size: 1 {TWO_IN} correlation_id: 18446744073709551615"), 128, "correlation_id 18446744073709551615 is larger than the upstream accepts (9223372036854775807)"),
        ];
        for (header, len, want) in cases {
            let error = build(&header, vec![0; len]).expect_err(&header);
            assert_eq!(error.message, want, "{header}");
            assert_eq!(error.status(), 400);
        }
    }

    #[test]
    fn dims_default_to_fixed_config_dims_and_strings_are_walked() {
        let mut info = simple();
        info.inputs[1] = tensor("INPUT1", DataType::Bytes, &[2]);
        let header = parse::<InferRequestHeader>(
            br#"batch_size: 1 input { name: "INPUT0" } input { name: "INPUT1" } priority: 5 timeout_microseconds: 100"#,
        )
        .expect("parses");
        let mut body = vec![0u8; 64];
        body.extend_from_slice(b"\x01\x00\x00\x00a\x00\x00\x00\x00");
        let (request, _) =
            infer_request("simple", "3", &header, &info, &Bytes::from(body)).expect("valid");
        assert_eq!(request.inputs[0].shape, [1, 16]);
        assert_eq!(request.inputs[1].shape, [1, 2]);
        assert_eq!(request.model_version, "3");
        assert_eq!(
            request.parameters,
            [
                ("priority".to_string(), Param::Int64(5)),
                ("timeout".to_string(), Param::Int64(100)),
            ]
        );
    }
}
