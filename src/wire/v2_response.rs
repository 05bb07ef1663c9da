//! Encodes an [`InferResponse`] as Triton's HTTP `/infer` answer (v2 §3):
//! the compact JSON header in Triton's key order, then the binary outputs,
//! which are handed over as the upstream's `Bytes` (never copied).

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::{element_count, InferRequest, InferResponse, OutputKind, Param};
use crate::wire::json_write::{
    write_array, write_f64, write_i64, write_object, write_str, write_u64,
};
use crate::wire::tensor::write_json_data;

/// The encoded answer: `header` followed by `tails` is the body.
#[derive(Debug)]
pub struct Encoded {
    pub header: Vec<u8>,
    pub tails: Vec<Bytes>,
}

impl Encoded {
    /// Binary framing applies when at least one binary output is non-empty
    /// (v2 §3.2); then the answer carries `Inference-Header-Content-Length`.
    pub fn is_binary(&self) -> bool {
        !self.tails.is_empty()
    }

    pub fn content_type(&self) -> &'static str {
        if self.is_binary() {
            "application/octet-stream"
        } else {
            "application/json"
        }
    }

    pub fn header_length(&self) -> Option<usize> {
        self.is_binary().then_some(self.header.len())
    }

    pub fn body_len(&self) -> usize {
        self.header.len() + self.tails.iter().map(Bytes::len).sum::<usize>()
    }
}

/// Renders `response`; `request` decides each output's kind (v2 §2.4).
pub fn encode(response: &InferResponse, request: &InferRequest) -> Result<Encoded> {
    let mut tails = Vec::new();
    let header = write_answer(response, request, |_, output| {
        if !output.data.is_empty() {
            tails.push(output.data.clone());
        }
        output.data.len() as u64
    })?;
    Ok(Encoded { header, tails })
}

/// The JSON header of an answer whose binary outputs are not in hand yet:
/// output `i` has `sizes[i]` bytes, and follows in order. Every output is
/// binary (or in shared memory).
pub fn binary_header(
    response: &InferResponse,
    request: &InferRequest,
    sizes: &[u64],
) -> Result<Vec<u8>> {
    write_answer(response, request, |i, _| sizes.get(i).copied().unwrap_or(0))
}

/// Whether a binary answer of outputs of these sizes uses binary framing
/// (v2 §3.2): at least one of them is non-empty.
pub fn is_binary(sizes: &[u64]) -> bool {
    sizes.iter().any(|n| *n > 0)
}

/// The answer's JSON; `binary(i, output)` gives a binary output's size
/// (and takes its bytes, if it wants them).
fn write_answer(
    response: &InferResponse,
    request: &InferRequest,
    mut binary: impl FnMut(usize, &crate::model::OutputTensor) -> u64,
) -> Result<Vec<u8>> {
    // JSON text of a number takes up to ~6 bytes per tensor byte (an FP32
    // widened to double prints up to 24 characters): size the header once
    // instead of growing (and copying) a multi-megabyte buffer repeatedly.
    let json_bytes: usize = response
        .outputs
        .iter()
        .filter(|o| request.output_kind(&o.name) == OutputKind::Json)
        .map(|o| o.data.len().saturating_mul(6))
        .sum();
    let mut out = Vec::with_capacity(256 + json_bytes);
    out.push(b'{');
    if !response.id.is_empty() {
        out.extend_from_slice(b"\"id\":");
        write_str(&mut out, &response.id);
        out.push(b',');
    }
    out.extend_from_slice(b"\"model_name\":");
    write_str(&mut out, response.model_name.as_bytes());
    out.extend_from_slice(b",\"model_version\":");
    write_str(&mut out, response.model_version.as_bytes());
    if !response.parameters.is_empty() {
        out.extend_from_slice(b",\"parameters\":");
        write_parameters(&mut out, &response.parameters);
    }
    out.extend_from_slice(b",\"outputs\":[");
    for (i, output) in response.outputs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"name\":");
        write_str(&mut out, output.name.as_bytes());
        out.extend_from_slice(b",\"datatype\":");
        write_str(&mut out, output.datatype.as_str().as_bytes());
        out.extend_from_slice(b",\"shape\":");
        write_array(&mut out, &output.shape, |out, dim| write_i64(out, *dim));
        match request.output_kind(&output.name) {
            OutputKind::SharedMemory => {}
            OutputKind::Binary => {
                out.extend_from_slice(b",\"parameters\":{\"binary_data_size\":");
                write_u64(&mut out, binary(i, output));
                out.push(b'}');
            }
            OutputKind::Json => {
                out.extend_from_slice(b",\"data\":");
                write_output_data(&mut out, output)?;
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

fn write_output_data(out: &mut Vec<u8>, output: &crate::model::OutputTensor) -> Result<()> {
    let mismatch = || {
        Error::internal(format!(
            "output tensor shape does not match size of output for '{}'",
            output.name
        ))
    };
    let dtype = output.datatype.known().ok_or_else(mismatch)?;
    let count = element_count(&output.shape)
        .and_then(|c| usize::try_from(c).ok())
        .ok_or_else(mismatch)?;
    if write_json_data(dtype, &output.data, count, out) {
        Ok(())
    } else {
        Err(mismatch())
    }
}

/// Response parameters: bool, integer, string or double (v2 §3.6).
pub fn write_parameters(out: &mut Vec<u8>, params: &[(String, Param)]) {
    write_object(out, params, |out, (key, value)| {
        write_str(out, key.as_bytes());
        out.push(b':');
        write_param(out, value);
    });
}

/// One parameter value as JSON (a bool, a number or a string).
pub fn write_param(out: &mut Vec<u8>, value: &Param) {
    match value {
        Param::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Param::Int64(n) => write_i64(out, *n),
        Param::Uint64(n) => write_u64(out, *n),
        Param::Double(d) => write_f64(out, *d),
        Param::String(s) => write_str(out, s.as_bytes()),
    }
}
