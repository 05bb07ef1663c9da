//! `ModelInferRequest`'s fields 1–6 written straight from an
//! [`InferRequest`], without building the message first.
//!
//! Why by hand (measured): building the generated message cloned every
//! name, datatype and shape into owned strings and vectors, and prost then
//! encoded it and the message was dropped: ~7k instructions of a small
//! request's ~125k (`CELLS=http scripts/bench-instructions`). Here each
//! field is written once from the request's own strings; prost's encoding
//! helpers write the keys, varints and packed shapes.
//!
//! The bytes are what prost writes for [`super::model_infer`]'s message,
//! except for the order of map entries: prost writes a `HashMap` in its
//! iteration order, these are written in the request's order (request
//! parameters as the client listed them; shared-memory keys as region,
//! offset, byte size). Map order carries no meaning in protobuf. The
//! tests decode both encodings and compare the messages.
//!
//! `raw_input_contents` (field 7) is not written here: the call sends its
//! entries as they are (`upstream::encoded`).

use bytes::BufMut;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, int64, key_len, WireType};
use prost::Message;

use super::{param, shm_params};
use crate::model::{InferRequest, InputData, InputTensor, Param, RequestedOutput};
use crate::proto::inference::InferParameter;

/// Field numbers of `ModelInferRequest` and its tensors (grpc_service.proto).
mod field {
    pub(super) const MODEL_NAME: u32 = 1;
    pub(super) const MODEL_VERSION: u32 = 2;
    pub(super) const ID: u32 = 3;
    pub(super) const PARAMETERS: u32 = 4;
    pub(super) const INPUTS: u32 = 5;
    pub(super) const OUTPUTS: u32 = 6;
    /// `InferInputTensor`: name 1, datatype 2, shape 3, parameters 4.
    pub(super) const INPUT_PARAMETERS: u32 = 4;
    /// `InferRequestedOutputTensor`: name 1, parameters 2.
    pub(super) const OUTPUT_PARAMETERS: u32 = 2;
    /// A map entry: key 1, value 2.
    pub(super) const KEY: u32 = 1;
    pub(super) const VALUE: u32 = 2;
}

/// Fields 1–6 of the `ModelInferRequest` for `request`, encoded, the
/// model named `model` (its name upstream: a route may rename it).
pub(crate) fn model_infer_fields(request: &InferRequest, model: &str) -> Vec<u8> {
    let id = String::from_utf8_lossy(&request.id);
    let parameters: Vec<(&str, InferParameter)> = request
        .parameters
        .iter()
        .map(|(name, value)| (name.as_str(), param(value)))
        .collect();
    let inputs: Vec<Tensor> = request.inputs.iter().map(Tensor::input).collect();
    let outputs: Vec<Tensor> = request.outputs.iter().map(Tensor::output).collect();
    let len = str_len(field::MODEL_NAME, model)
        + str_len(field::MODEL_VERSION, &request.model_version)
        + str_len(field::ID, &id)
        + entries_len(field::PARAMETERS, &parameters)
        + inputs
            .iter()
            .map(|t| nested_len(field::INPUTS, t.len))
            .sum::<usize>()
        + outputs
            .iter()
            .map(|t| nested_len(field::OUTPUTS, t.len))
            .sum::<usize>();
    let mut out = Vec::with_capacity(len);
    put_str(field::MODEL_NAME, model, &mut out);
    put_str(field::MODEL_VERSION, &request.model_version, &mut out);
    put_str(field::ID, &id, &mut out);
    put_entries(field::PARAMETERS, &parameters, &mut out);
    for tensor in &inputs {
        tensor.put(field::INPUTS, &mut out);
    }
    for tensor in &outputs {
        tensor.put(field::OUTPUTS, &mut out);
    }
    debug_assert_eq!(out.len(), len);
    out
}

/// One input or requested output, its encoded length known before it is
/// written (a nested message is written behind its length).
struct Tensor<'r> {
    name: &'r str,
    /// Inputs only; an output has none.
    datatype: &'r str,
    shape: &'r [i64],
    parameters: Vec<(&'static str, InferParameter)>,
    /// The parameters' field number in this tensor's message.
    parameters_field: u32,
    len: usize,
}

impl<'r> Tensor<'r> {
    fn input(input: &'r InputTensor) -> Tensor<'r> {
        let mut parameters = Vec::new();
        if let InputData::SharedMemory(shm) = &input.data {
            parameters.extend(shm_params(shm));
        }
        Tensor::new(
            &input.name,
            input.datatype.as_str(),
            &input.shape,
            parameters,
            field::INPUT_PARAMETERS,
        )
    }

    fn output(output: &'r RequestedOutput) -> Tensor<'r> {
        let mut parameters = Vec::new();
        if output.classification > 0 {
            let top = Param::Int64(i64::from(output.classification));
            parameters.push(("classification", param(&top)));
        }
        if let Some(shm) = &output.shared_memory {
            parameters.extend(shm_params(shm));
        }
        Tensor::new(&output.name, "", &[], parameters, field::OUTPUT_PARAMETERS)
    }

    fn new(
        name: &'r str,
        datatype: &'r str,
        shape: &'r [i64],
        parameters: Vec<(&'static str, InferParameter)>,
        parameters_field: u32,
    ) -> Tensor<'r> {
        let len = str_len(1, name)
            + str_len(2, datatype)
            + int64::encoded_len_packed(3, shape)
            + entries_len(parameters_field, &parameters);
        Tensor {
            name,
            datatype,
            shape,
            parameters,
            parameters_field,
            len,
        }
    }

    fn put(&self, tag: u32, out: &mut impl BufMut) {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(self.len as u64, out);
        put_str(1, self.name, out);
        put_str(2, self.datatype, out);
        int64::encode_packed(3, self.shape, out);
        put_entries(self.parameters_field, &self.parameters, out);
    }
}

/// A length-delimited field of `len` bytes, with its key and length.
fn nested_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// A string field; proto3 leaves an empty one out.
fn str_len(tag: u32, value: &str) -> usize {
    if value.is_empty() {
        0
    } else {
        nested_len(tag, value.len())
    }
}

fn put_str(tag: u32, value: &str, out: &mut impl BufMut) {
    if value.is_empty() {
        return;
    }
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(value.len() as u64, out);
    out.put_slice(value.as_bytes());
}

/// A map entry's message: the key (left out when empty, as prost does)
/// and the value (always set: every parameter has its choice).
fn entry_len(key: &str, value: &InferParameter) -> usize {
    str_len(field::KEY, key) + nested_len(field::VALUE, value.encoded_len())
}

fn entries_len<K: AsRef<str>>(tag: u32, entries: &[(K, InferParameter)]) -> usize {
    entries
        .iter()
        .map(|(key, value)| nested_len(tag, entry_len(key.as_ref(), value)))
        .sum()
}

fn put_entries<K: AsRef<str>>(tag: u32, entries: &[(K, InferParameter)], out: &mut impl BufMut) {
    for (key, value) in entries {
        let key = key.as_ref();
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(entry_len(key, value) as u64, out);
        put_str(field::KEY, key, out);
        encode_key(field::VALUE, WireType::LengthDelimited, out);
        encode_varint(value.encoded_len() as u64, out);
        value.encode_raw(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeclaredType, OutputKind, SharedMemory};
    use crate::proto::inference::ModelInferRequest;
    use bytes::Bytes;

    /// What prost makes of the generated message (`super::model_infer`),
    /// without its raw entries.
    fn by_prost(request: &InferRequest) -> ModelInferRequest {
        let mut message = super::super::model_infer(request);
        message.raw_input_contents.clear();
        message
    }

    fn decoded(fields: &[u8]) -> ModelInferRequest {
        ModelInferRequest::decode(fields).expect("the fields decode")
    }

    fn xorshift(st: &mut u64) -> u64 {
        *st ^= *st << 13;
        *st ^= *st >> 7;
        *st ^= *st << 17;
        *st
    }

    fn pick<'a>(st: &mut u64, options: &[&'a str]) -> &'a str {
        options[(xorshift(st) % options.len() as u64) as usize]
    }

    fn shm(st: &mut u64) -> SharedMemory {
        SharedMemory {
            region: pick(st, &["", "r", "region-7"]).to_string(),
            offset: xorshift(st) % 3 * (u64::MAX / 2),
            byte_size: xorshift(st) % 1000,
        }
    }

    fn request(st: &mut u64) -> InferRequest {
        let params = [
            Param::Bool(false),
            Param::Bool(true),
            Param::Int64(-5),
            Param::Uint64(u64::MAX),
            Param::Double(0.0),
            Param::Double(-1.5),
            Param::String(String::new()),
            Param::String("x".repeat(200)),
        ];
        let inputs = (0..xorshift(st) % 4)
            .map(|i| InputTensor {
                name: pick(st, &["", "INPUT0", "ü"]).to_string() + &i.to_string(),
                datatype: if xorshift(st).is_multiple_of(4) {
                    DeclaredType::Unknown(pick(st, &["", "FP8"]).into())
                } else {
                    DeclaredType::Known(crate::model::DataType::Fp32)
                },
                shape: (0..xorshift(st) % 4)
                    .map(|_| {
                        *[-1i64, 0, 16, i64::MAX, 300]
                            .get((xorshift(st) % 5) as usize)
                            .unwrap()
                    })
                    .collect(),
                data: match xorshift(st) % 3 {
                    0 => InputData::Raw(Bytes::from_static(b"abcd")),
                    1 => InputData::Streamed(64),
                    _ => InputData::SharedMemory(shm(st)),
                },
            })
            .collect();
        let outputs = (0..xorshift(st) % 4)
            .map(|i| RequestedOutput {
                name: format!("OUTPUT{i}"),
                classification: [0, 3][(xorshift(st) % 2) as usize],
                kind: OutputKind::Binary,
                shared_memory: xorshift(st).is_multiple_of(3).then(|| shm(st)),
            })
            .collect();
        // One parameter at most per key: the message's map keeps the last.
        let parameters = (0..xorshift(st) % 3)
            .map(|i| {
                let key = pick(st, &["", "priority", "k"]).to_string() + &i.to_string();
                (
                    key,
                    params[(xorshift(st) % params.len() as u64) as usize].clone(),
                )
            })
            .collect();
        InferRequest {
            model_name: pick(st, &["", "add_sub", "a/b"]).to_string(),
            model_version: pick(st, &["", "1"]).to_string(),
            id: [&b""[..], b"7", b"\xff\xfe"][(xorshift(st) % 3) as usize].to_vec(),
            parameters,
            inputs,
            outputs,
            unlisted_kind: None,
        }
    }

    #[test]
    fn the_fields_decode_to_the_message_the_generated_code_builds() {
        let mut st = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let request = request(&mut st);
            let fields = model_infer_fields(&request, &request.model_name);
            assert_eq!(decoded(&fields), by_prost(&request), "{request:?}");
        }
    }

    #[test]
    fn with_one_entry_per_map_the_bytes_are_prosts() {
        let request = InferRequest {
            model_name: "add_sub".into(),
            id: b"42".to_vec(),
            parameters: vec![("priority".into(), Param::Int64(2))],
            inputs: vec![InputTensor {
                name: "INPUT0".into(),
                datatype: DeclaredType::Known(crate::model::DataType::Fp32),
                shape: vec![1, 16],
                data: InputData::Raw(Bytes::from_static(&[0; 64])),
            }],
            outputs: vec![RequestedOutput {
                name: "OUTPUT0".into(),
                classification: 2,
                kind: OutputKind::Json,
                shared_memory: None,
            }],
            ..Default::default()
        };
        assert_eq!(
            model_infer_fields(&request, &request.model_name),
            by_prost(&request).encode_to_vec()
        );
    }
}
