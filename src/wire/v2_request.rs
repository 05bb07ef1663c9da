//! Decodes a v2 `/infer` HTTP body (JSON header + binary tail, v2 §2)
//! into a protocol-neutral [`InferRequest`]. Pure and synchronous: no I/O,
//! no knowledge of the upstream. Every declared length is checked before
//! anything is sliced; tensor bytes of the binary tail are sliced, never
//! copied. JSON `data` arrays are written into tensor bytes while the
//! header is parsed (module `tensor_sink`). The headers binary clients
//! send most are read without a DOM first (module `direct`).

mod direct;
mod tensor_sink;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::model::{
    element_count, DataType, DeclaredType, InferRequest, InputData, InputTensor, OutputKind, Param,
    RequestedOutput, SharedMemory,
};
use crate::wire::json::Value;
use crate::wire::json_access::{
    as_array, as_bool, as_str, as_uint, lossy, member, Field, NOT_MEMBERS, NOT_UINT,
};

/// Limits applied while decoding (see `config::Limits`).
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Max JSON header size and max byte size of one JSON-data input.
    pub max_input_size: usize,
    pub max_json_depth: usize,
}

/// What the body turned out to be.
#[derive(Debug, PartialEq)]
pub enum Body {
    /// JSON header (and maybe binary tail), fully decoded.
    Json(InferRequest),
    /// `header_length == 0`: the whole body is the data of the model's only
    /// input (v2 §2.7); the caller needs the model configuration.
    Raw(Bytes),
}

/// C `atoi` as glibc implements it (`(int) strtol(s, NULL, 10)`): leading
/// whitespace, optional sign, digits up to the first non-digit, no digits
/// gives 0, saturation at the `long` range, then truncation to `int`.
pub fn atoi(text: &[u8]) -> i32 {
    let mut rest = text;
    while let [b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r', tail @ ..] = rest {
        rest = tail;
    }
    let negative = matches!(rest.first(), Some(b'-'));
    if matches!(rest.first(), Some(b'-' | b'+')) {
        rest = &rest[1..];
    }
    let mut value: i64 = 0;
    for &b in rest.iter().take_while(|b| b.is_ascii_digit()) {
        let digit = i64::from(b - b'0');
        value = if negative {
            value.saturating_mul(10).saturating_sub(digit)
        } else {
            value.saturating_mul(10).saturating_add(digit)
        };
    }
    value as i32
}

/// Splits the body at `Inference-Header-Content-Length` (v2 §2.1 steps 4–6).
/// `ihcl` is the raw header value if present.
pub fn split_header(body: &Bytes, ihcl: Option<&[u8]>) -> Result<Option<(Bytes, Bytes)>> {
    let content_length = body.len();
    let header_length = match ihcl {
        None => content_length as i64,
        Some(text) => {
            let n = i64::from(atoi(text));
            if n < 0 || n as u64 > content_length as u64 {
                return Err(Error::invalid(format!(
                    "inference header size should be in range (0, {content_length}), got: {}",
                    String::from_utf8_lossy(text)
                )));
            }
            n
        }
    };
    if header_length == 0 {
        return Ok(None);
    }
    let at = header_length as usize;
    Ok(Some((body.slice(..at), body.slice(at..))))
}

/// Decodes a whole `/infer` body.
pub fn decode(
    model: &str,
    version: &str,
    body: Bytes,
    ihcl: Option<&[u8]>,
    limits: DecodeLimits,
) -> Result<Body> {
    decode_by(Readers::Both, model, version, body, ihcl, limits)
}

/// [`decode`] by the general reader alone, never the direct one (module
/// `direct`): what the fuzz target `v2_request` holds [`decode`]'s
/// answers against.
#[doc(hidden)]
pub fn decode_general(
    model: &str,
    version: &str,
    body: Bytes,
    ihcl: Option<&[u8]>,
    limits: DecodeLimits,
) -> Result<Body> {
    decode_by(Readers::General, model, version, body, ihcl, limits)
}

/// Which readers may read a JSON header: the direct one first and the
/// general one where it declines, or the general one alone.
#[derive(Debug, Clone, Copy)]
enum Readers {
    Both,
    General,
}

fn decode_by(
    readers: Readers,
    model: &str,
    version: &str,
    body: Bytes,
    ihcl: Option<&[u8]>,
    limits: DecodeLimits,
) -> Result<Body> {
    let Some((header, tail)) = split_header(&body, ihcl)? else {
        if body.len() > limits.max_input_size {
            return Err(Error::invalid(format!(
                "Raw input has a byte_size ({} bytes) that exceeds the maximum allowed value of {} bytes. Use --http-max-input-size to increase the limit.",
                body.len(),
                limits.max_input_size
            )));
        }
        return Ok(Body::Raw(body));
    };
    if header.len() > limits.max_input_size {
        return Err(header_too_large(header.len(), limits));
    }
    let tail = Tail::Whole(tail);
    decode_header(readers, model, version, &header, tail, limits).map(Body::Json)
}

/// Decodes the JSON header of a body whose binary tail is still arriving:
/// each `binary_data_size` input becomes [`InputData::Streamed`], in
/// order. `tail_len` is the tail's length when the body declared it
/// (`Content-Length`): the sizes are then checked against it here, with
/// the texts of [`decode`]; otherwise [`short_tail`] and [`long_tail`]
/// word what the stream finds.
pub fn decode_streamed(
    model: &str,
    version: &str,
    header: &[u8],
    tail_len: Option<u64>,
    limits: DecodeLimits,
) -> Result<InferRequest> {
    if header.len() > limits.max_input_size {
        return Err(header_too_large(header.len(), limits));
    }
    let tail = Tail::Coming(tail_len);
    decode_header(Readers::Both, model, version, header, tail, limits)
}

fn header_too_large(len: usize, limits: DecodeLimits) -> Error {
    Error::invalid(format!(
        "request JSON size of {len} bytes exceeds the maximum allowed input size of {} bytes. Use --http-max-input-size to increase the limit.",
        limits.max_input_size
    ))
}

fn decode_header(
    readers: Readers,
    model: &str,
    version: &str,
    header: &[u8],
    tail: Tail,
    limits: DecodeLimits,
) -> Result<InferRequest> {
    let mut decoder = Decoder::new(model, version, tail, limits);
    // A body without a binary tail is a JSON one: its inputs carry `data`,
    // which the direct reader declines.
    let binary = !matches!(&decoder.tail, Tail::Whole(tail) if tail.is_empty());
    if matches!(readers, Readers::Both) && binary {
        if direct::read(header, &mut decoder).is_some() {
            return Ok(decoder.request);
        }
        decoder.restart();
    }
    let root = tensor_sink::parse(header, limits.max_json_depth)?;
    decoder.decode_root(&root)?;
    Ok(decoder.request)
}

/// Triton's text for a binary tail that ended after `read` bytes: the
/// input it ended in, and how many bytes that input still lacked.
pub fn short_tail(request: &InferRequest, read: u64) -> Error {
    let mut end = 0u64;
    for input in &request.inputs {
        if let InputData::Streamed(size) = input.data {
            end = end.saturating_add(size);
            if end > read {
                return missing_bytes(&input.name, end - read, &request.model_name);
            }
        }
    }
    long_tail(&request.model_name)
}

/// Triton's text for a binary tail longer than the inputs declare.
pub fn long_tail(model: &str) -> Error {
    Error::invalid(format!(
        "unexpected additional input data for model '{model}'"
    ))
}

fn missing_bytes(name: &str, missing: u64, model: &str) -> Error {
    Error::invalid(format!(
        "unexpected size for input '{name}', expecting {missing} additional bytes for model '{model}'"
    ))
}

/// The binary tail: in hand, or still arriving (its length if declared).
enum Tail {
    Whole(Bytes),
    Coming(Option<u64>),
}

impl Tail {
    fn len(&self) -> Option<u64> {
        match self {
            Tail::Whole(bytes) => Some(bytes.len() as u64),
            Tail::Coming(len) => *len,
        }
    }
}

struct Decoder<'a> {
    model: &'a str,
    tail: Tail,
    consumed: u64,
    limits: DecodeLimits,
    request: InferRequest,
}

/// A string member as text: `Unable to parse '<key>': ...` when missing or
/// not a string.
fn string_member(obj: &Value, key: &str) -> Result<String> {
    member(obj, key).and_then(as_str).map(lossy).field(key)
}

impl<'a> Decoder<'a> {
    fn new(model: &'a str, version: &str, tail: Tail, limits: DecodeLimits) -> Self {
        Decoder {
            model,
            tail,
            consumed: 0,
            limits,
            request: InferRequest {
                model_name: model.to_string(),
                model_version: version.to_string(),
                ..InferRequest::default()
            },
        }
    }

    /// Back to the start, after the direct reader declined half-way.
    fn restart(&mut self) {
        self.consumed = 0;
        self.request = InferRequest {
            model_name: std::mem::take(&mut self.request.model_name),
            model_version: std::mem::take(&mut self.request.model_version),
            ..InferRequest::default()
        };
    }

    fn id_for_messages(&self) -> String {
        if self.request.id.is_empty() {
            "<id_unknown>".to_string()
        } else {
            lossy(&self.request.id)
        }
    }

    fn decode_root(&mut self, root: &Value) -> Result<()> {
        if let Some(id) = root.get("id") {
            self.request.id = as_str(id).field("id")?.to_vec();
        }
        if let Some(params) = root.get("parameters") {
            self.decode_parameters(params)?;
        }
        let inputs = member(root, "inputs").and_then(as_array).field("inputs")?;
        for input in inputs {
            self.decode_input(&input)?;
        }
        if self.tail.len().is_some_and(|len| self.consumed < len) {
            return Err(long_tail(self.model));
        }
        if let Some(outputs) = root.get("outputs") {
            for output in as_array(outputs).field("outputs")? {
                self.decode_output(&output)?;
            }
        }
        Ok(())
    }

    /// Request-level parameters, v2 §5.1, in document order.
    fn decode_parameters(&mut self, params: &Value) -> Result<()> {
        let members = params
            .as_object()
            .ok_or_else(|| Error::json(format!("failed to get request params.: {NOT_MEMBERS}")))?;
        for (key, value) in members {
            let key_text = lossy(key);
            let param = match key.as_slice() {
                b"sequence_id" => match value {
                    Value::Uint(n) => Param::Int64(*n as i64),
                    v => Param::String(lossy(as_str(v).field("sequence_id")?)),
                },
                b"sequence_start" | b"sequence_end" => {
                    Param::Bool(as_bool(value).field(&key_text)?)
                }
                b"priority" => Param::Uint64(as_uint(value).field("priority")?),
                b"timeout" => Param::Int64(as_uint(value).field("timeout")? as i64),
                b"binary_data_output" => {
                    let binary = as_bool(value).field("binary_data_output")?;
                    self.request.unlisted_kind = Some(if binary {
                        OutputKind::Binary
                    } else {
                        OutputKind::Json
                    });
                    continue;
                }
                k if k.starts_with(b"triton_") => {
                    return Err(Error::invalid(
                        "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.",
                    ))
                }
                _ => custom_param(&key_text, value)?,
            };
            self.request.parameters.push((key_text, param));
        }
        Ok(())
    }

    fn decode_input(&mut self, input: &Value) -> Result<()> {
        let params = input.get("parameters").filter(|p| p.as_object().is_some());
        let param = |key: &str| params.and_then(|p| p.get(key));
        let sources = [
            ("data", input.get("data").is_some()),
            ("binary_data_size", param("binary_data_size").is_some()),
            (
                "shared_memory_region",
                param("shared_memory_region").is_some(),
            ),
        ];
        let set: Vec<&str> = sources.iter().filter(|s| s.1).map(|s| s.0).collect();
        if set.len() != 1 {
            let listed = if set.is_empty() {
                "no field is set".to_string()
            } else {
                let fields: String = set.iter().map(|f| format!(" '{f}'")).collect();
                format!("set{fields}")
            };
            return Err(Error::invalid(format!(
                "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But {listed}"
            )));
        }
        let name = string_member(input, "name")?;
        let datatype = DeclaredType::from(string_member(input, "datatype")?);
        let shape = decode_shape(input, &name)?;
        if self.request.inputs.iter().any(|i| i.name == name) {
            return Err(Error::invalid(format!(
                "[request id: {}] input '{name}' already exists in request",
                self.id_for_messages()
            )));
        }
        let data = if let Some(size) = param("binary_data_size") {
            let size = as_uint(size).field("binary_data_size")?;
            self.take_binary(&name, size)?
        } else if let Some(region) = param("shared_memory_region") {
            InputData::SharedMemory(decode_shm(region, params)?)
        } else {
            InputData::Raw(self.json_data(input, &name, datatype.known(), &shape)?)
        };
        self.request.inputs.push(InputTensor {
            name,
            datatype,
            shape,
            data,
        });
        Ok(())
    }

    /// Takes the next `size` bytes of the binary tail (v2 §2.3 item
    /// 6): a slice of it, or the promise that they follow.
    fn take_binary(&mut self, name: &str, size: u64) -> Result<InputData> {
        let available = self.tail.len().map(|len| len - self.consumed);
        if let Some(available) = available.filter(|a| size > *a) {
            return Err(missing_bytes(name, size - available, self.model));
        }
        let start = self.consumed;
        self.consumed = start.saturating_add(size);
        Ok(match &self.tail {
            // Within the tail's length, checked above.
            Tail::Whole(bytes) => {
                InputData::Raw(bytes.slice(start as usize..self.consumed as usize))
            }
            Tail::Coming(_) => InputData::Streamed(size),
        })
    }

    fn json_data(
        &self,
        input: &Value,
        name: &str,
        datatype: Option<DataType>,
        shape: &[i64],
    ) -> Result<Bytes> {
        // decode_shape already refused negative dims and overflowing counts.
        let count = element_count(shape)
            .ok_or_else(|| Error::internal(format!("unchecked shape for input '{name}'")))?;
        if count == 0 {
            return Ok(Bytes::new());
        }
        let data = input.get("data").unwrap_or(&Value::Null);
        as_array(data).field("data")?;
        let dtype =
            datatype.ok_or_else(|| Error::invalid(format!("invalid datatype for input {name}")))?;
        if let Some(size) = dtype.element_size() {
            // Newer Triton's texts: the product must fit an int64, then the
            // input-size limit.
            if count > i64::MAX as u64 / size as u64 {
                return Err(Error::invalid(format!(
                    "byte size overflow for input '{name}': element count ({count}) * data type size ({size}) exceeds maximum allowed size ({})",
                    i64::MAX
                )));
            }
            let bytes = count * size as u64;
            if bytes > self.limits.max_input_size as u64 {
                return Err(Error::invalid(format!(
                    "JSON input '{name}' has a byte_size ({bytes} bytes) that exceeds the maximum allowed value of {} bytes. Use --http-max-input-size to increase the limit.",
                    self.limits.max_input_size
                )));
            }
        }
        let encoded = tensor_sink::encode_data(dtype, data, count as usize)?;
        if encoded.len() > self.limits.max_input_size {
            return Err(Error::invalid(format!(
                "JSON input '{name}' has a byte_size ({} bytes) that exceeds the maximum allowed value of {} bytes. Use --http-max-input-size to increase the limit.",
                encoded.len(),
                self.limits.max_input_size
            )));
        }
        Ok(encoded)
    }

    fn decode_output(&mut self, output: &Value) -> Result<()> {
        let params = output.get("parameters").filter(|p| p.as_object().is_some());
        let param = |key: &str| params.and_then(|p| p.get(key));
        let shm = param("shared_memory_region");
        if shm.is_some() && param("classification").is_some() {
            return Err(Error::invalid(
                "Output can't set both 'shared_memory_region' and 'classification'",
            ));
        }
        if shm.is_some() && param("binary_data").and_then(Value::as_bool) == Some(true) {
            return Err(Error::invalid(
                "Output can't set both 'shared_memory_region' and 'binary_data'",
            ));
        }
        let name = string_member(output, "name")?;
        // Triton 2.51 merges a repeated output; newer Triton refuses it.
        if self.request.outputs.iter().any(|o| o.name == name) {
            return Err(Error::invalid(format!(
                "[request id: {}] output '{name}' already exists in request",
                self.id_for_messages()
            )));
        }
        let mut requested = RequestedOutput {
            name,
            classification: 0,
            kind: OutputKind::Json,
            shared_memory: None,
        };
        if let Some(region) = shm {
            requested.shared_memory = Some(decode_shm(region, params)?);
            requested.kind = OutputKind::SharedMemory;
        } else {
            if let Some(k) = param("classification") {
                let k = k.as_u64().ok_or_else(|| {
                    Error::json(format!("Unable to set 'classification': {NOT_UINT}"))
                })?;
                requested.classification = k as u32;
            }
            if let Some(binary) = param("binary_data") {
                if as_bool(binary).field("binary_data")? {
                    requested.kind = OutputKind::Binary;
                }
            }
        }
        self.request.outputs.push(requested);
        Ok(())
    }
}

/// Custom request parameter (v2 §5.1 last row).
pub(crate) fn custom_param(key: &str, value: &Value) -> Result<Param> {
    Ok(match value {
        Value::String(s) => Param::String(lossy(s)),
        Value::Bool(b) => Param::Bool(*b),
        Value::Uint(n) if *n <= i64::MAX as u64 => Param::Int64(*n as i64),
        Value::Int(n) => Param::Int64(*n),
        Value::Uint(n) => Param::Double(*n as f64),
        Value::Double(d) => Param::Double(*d),
        _ => {
            return Err(Error::invalid(format!(
            "parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'."
        )))
        }
    })
}

/// `shape`: array of unsigned integers ([`shape_of`]).
fn decode_shape(input: &Value, name: &str) -> Result<Vec<i64>> {
    let dims = member(input, "shape").and_then(as_array).field("shape")?;
    let dims: Vec<u64> = dims
        .iter()
        .map(|d| as_uint(&d).field("shape"))
        .collect::<Result<_>>()?;
    shape_of(&dims, name)
}

/// The shape of input `name` whose `shape` holds `dims`: dims >= 2^63 and
/// element-count overflow are refused here (they crash Triton 2.51; texts
/// of 2.58+).
fn shape_of(dims: &[u64], name: &str) -> Result<Vec<i64>> {
    let text = || {
        let parts: Vec<String> = dims.iter().map(u64::to_string).collect();
        format!("[{}]", parts.join(","))
    };
    if dims.iter().any(|&d| d > i64::MAX as u64) {
        return Err(Error::invalid(format!(
            "invalid shape for input '{name}': shape {} contains one or more invalid dimensions",
            text()
        )));
    }
    let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let fits = shape
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .is_some();
    if !fits {
        return Err(Error::invalid(format!(
            "invalid shape for input '{name}': shape {} causes total element count to exceed maximum size of {}",
            text(),
            i64::MAX
        )));
    }
    Ok(shape)
}

/// Shared-memory parameters (v2 §2.6); offset and size default to 0.
fn decode_shm(region: &Value, params: Option<&Value>) -> Result<SharedMemory> {
    let region = as_str(region).field("shared_memory_region")?;
    let number = |key: &str| -> Result<u64> {
        match params.and_then(|p| p.get(key)) {
            None => Ok(0),
            Some(v) => as_uint(v).field(key),
        }
    };
    Ok(SharedMemory {
        region: lossy(region),
        offset: number("shared_memory_offset")?,
        byte_size: number("shared_memory_byte_size")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: DecodeLimits = DecodeLimits {
        max_input_size: 1 << 20,
        max_json_depth: 100,
    };

    const HEADER: &str = r#"{"inputs":[{"name":"A","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},{"name":"J","datatype":"INT32","shape":[1],"data":[7]},{"name":"B","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}}]}"#;

    fn message(result: Result<InferRequest>) -> String {
        result.map(|_| ()).unwrap_err().message
    }

    #[test]
    fn binary_inputs_of_a_streamed_body_are_promised_in_order() {
        for tail_len in [None, Some(11)] {
            let request = decode_streamed("m", "", HEADER.as_bytes(), tail_len, LIMITS).unwrap();
            let data: Vec<InputData> = request.inputs.into_iter().map(|i| i.data).collect();
            let seven = Bytes::copy_from_slice(&7i32.to_le_bytes());
            assert_eq!(
                data,
                [
                    InputData::Streamed(8),
                    InputData::Raw(seven),
                    InputData::Streamed(3),
                ]
            );
        }
    }

    #[test]
    fn a_declared_tail_is_checked_with_the_texts_of_a_whole_body() {
        for len in [10, 12] {
            let whole = [HEADER.as_bytes(), &vec![0; len]].concat();
            let streamed = decode_streamed("m", "", HEADER.as_bytes(), Some(len as u64), LIMITS);
            let whole = decode(
                "m",
                "",
                Bytes::from(whole),
                Some(HEADER.len().to_string().as_bytes()),
                LIMITS,
            )
            .map(|_| ())
            .unwrap_err()
            .message;
            assert_eq!(message(streamed), whole, "{len}");
        }
    }

    #[test]
    fn what_a_stream_finds_is_worded_as_triton_words_it() {
        let request = decode_streamed("m", "", HEADER.as_bytes(), None, LIMITS).unwrap();
        let short = |read| short_tail(&request, read).message;
        assert_eq!(
            short(0),
            "unexpected size for input 'A', expecting 8 additional bytes for model 'm'"
        );
        assert_eq!(
            short(9),
            "unexpected size for input 'B', expecting 2 additional bytes for model 'm'"
        );
        assert_eq!(
            long_tail("m").message,
            "unexpected additional input data for model 'm'"
        );
    }

    #[test]
    fn a_header_above_the_input_limit_is_refused() {
        let limits = DecodeLimits {
            max_input_size: 10,
            ..LIMITS
        };
        assert!(
            message(decode_streamed("m", "", HEADER.as_bytes(), None, limits)).starts_with(
                &format!("request JSON size of {} bytes exceeds", HEADER.len())
            )
        );
    }
}
