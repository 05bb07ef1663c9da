//! A client's `ModelInferRequest` (the gRPC front in shared-memory bridge
//! mode) to the protocol-neutral [`InferRequest`] the inference use case
//! takes, read as Triton's gRPC front reads it (v2 §6.3): an input
//! names its data in shared memory (`shared_memory_region`, `_offset`,
//! `_byte_size` parameters), in typed `contents`, or in the next
//! `raw_input_contents` entry — entries go to the inputs that have neither,
//! in order; an output may ask for classification or name a window of
//! shared memory. Triton's refusals of a mix (contents beside raw entries,
//! contents with shared memory, an input without data) have its texts.
//! Other per-tensor parameters are not carried (no server reads them).

use std::collections::HashMap;

use super::{param, params, typed_to_raw};
use crate::error::{Error, Result};
use crate::model::{
    DeclaredType, InferRequest, InputData, InputTensor, OutputKind, Param, RequestedOutput,
    SharedMemory,
};
use crate::proto::inference::infer_parameter::ParameterChoice;
use crate::proto::inference::{InferParameter, ModelInferRequest};

/// The neutral request of `message` (see the module documentation).
pub(crate) fn infer_request(message: ModelInferRequest) -> Result<InferRequest> {
    let ModelInferRequest {
        model_name,
        model_version,
        id,
        parameters,
        inputs,
        outputs,
        raw_input_contents,
    } = message;
    let raw_present = !raw_input_contents.is_empty();
    let mut raw = raw_input_contents.into_iter();
    let mut neutral = Vec::with_capacity(inputs.len());
    for input in inputs {
        let shm = shared_memory(&input.name, &input.parameters)?;
        let data = match (shm, &input.contents) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(format!(
                    "unexpected 'content' provided when using shared memory for input tensor '{}' for model '{model_name}'",
                    input.name
                )))
            }
            (Some(shm), None) => InputData::SharedMemory(shm),
            (None, Some(_)) if raw_present => {
                return Err(Error::invalid(format!(
                    "contents field must not be specified when using raw_input_contents for '{}' for model '{model_name}'",
                    input.name
                )))
            }
            (None, Some(contents)) => {
                let datatype = DeclaredType::read(&input.datatype).known();
                InputData::Raw(typed_to_raw(contents, datatype))
            }
            (None, None) => match raw.next() {
                Some(bytes) => InputData::Raw(bytes),
                None => {
                    return Err(Error::invalid(format!(
                        "unable to find data for input tensor '{}' for model '{model_name}' in request.",
                        input.name
                    )))
                }
            },
        };
        neutral.push(InputTensor {
            name: input.name,
            datatype: DeclaredType::from(input.datatype),
            shape: input.shape,
            data,
        });
    }
    let outputs = outputs
        .into_iter()
        .map(|output| {
            let shared_memory = shared_memory(&output.name, &output.parameters)?;
            let classification = match output.parameters.get("classification").and_then(param) {
                Some(Param::Int64(k)) => u32::try_from(k).unwrap_or(0),
                Some(Param::Uint64(k)) => u32::try_from(k).unwrap_or(0),
                _ => 0,
            };
            if shared_memory.is_some() && classification > 0 {
                return Err(Error::invalid(
                    "output can't set both 'shared_memory_region' and 'classification'",
                ));
            }
            let kind = match shared_memory {
                Some(_) => OutputKind::SharedMemory,
                None => OutputKind::Binary,
            };
            Ok(RequestedOutput {
                name: output.name,
                classification,
                kind,
                shared_memory,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(InferRequest {
        model_name,
        model_version,
        id: id.into_bytes(),
        parameters: params(&parameters),
        inputs: neutral,
        outputs,
        // Every output a gRPC answer carries is raw.
        unlisted_kind: Some(OutputKind::Binary),
    })
}

/// Whether `message` names shared memory for any input or output.
pub(crate) fn names_shared_memory(message: &ModelInferRequest) -> bool {
    let named = |p: &HashMap<String, InferParameter>| p.contains_key(REGION);
    message.inputs.iter().any(|i| named(&i.parameters))
        || message.outputs.iter().any(|o| named(&o.parameters))
}

const REGION: &str = "shared_memory_region";

/// A tensor's window in shared memory, if its parameters name one, read
/// as Triton's gRPC front reads them, with its texts: the region a string,
/// the offset (0 when absent) and byte size (required) `int64_param`s,
/// neither without the region. A negative offset is one no region has
/// (the region check refuses it); a negative size one no window holds.
fn shared_memory(
    tensor: &str,
    parameters: &HashMap<String, InferParameter>,
) -> Result<Option<SharedMemory>> {
    let region = match parameters.get(REGION).map(|p| p.parameter_choice.as_ref()) {
        None => None,
        Some(Some(ParameterChoice::StringParam(region))) => Some(region.clone()),
        Some(_) => {
            return Err(Error::invalid(format!(
                "invalid value type for 'shared_memory_region' parameter for tensor '{tensor}', expected string_param."
            )))
        }
    };
    let number = |key: &str| -> Result<Option<i64>> {
        let Some(value) = parameters.get(key) else {
            return Ok(None);
        };
        if region.is_none() {
            return Err(Error::invalid(format!(
                "'{key}' can not be specified without 'shared_memory_region' parameter for tensor '{tensor}'"
            )));
        }
        match value.parameter_choice {
            Some(ParameterChoice::Int64Param(n)) => Ok(Some(n)),
            _ => Err(Error::invalid(format!(
                "invalid value type for '{key}' parameter for tensor '{tensor}', expected int64_param."
            ))),
        }
    };
    let offset = number("shared_memory_offset")?;
    let byte_size = number("shared_memory_byte_size")?;
    let Some(region) = region else {
        return Ok(None);
    };
    let byte_size = byte_size.ok_or_else(|| {
        Error::invalid(format!(
            "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor '{tensor}'"
        ))
    })?;
    Ok(Some(SharedMemory {
        region,
        offset: u64::try_from(offset.unwrap_or(0)).unwrap_or(u64::MAX),
        byte_size: u64::try_from(byte_size).unwrap_or(u64::MAX),
    }))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::proto::inference::model_infer_request::{
        InferInputTensor, InferRequestedOutputTensor,
    };
    use crate::proto::inference::InferTensorContents;

    fn int(n: i64) -> InferParameter {
        InferParameter {
            parameter_choice: Some(ParameterChoice::Int64Param(n)),
        }
    }

    fn text(s: &str) -> InferParameter {
        InferParameter {
            parameter_choice: Some(ParameterChoice::StringParam(s.into())),
        }
    }

    fn window(region: &str, offset: i64, size: i64) -> HashMap<String, InferParameter> {
        HashMap::from([
            (REGION.to_string(), text(region)),
            ("shared_memory_offset".to_string(), int(offset)),
            ("shared_memory_byte_size".to_string(), int(size)),
        ])
    }

    fn input(name: &str, parameters: HashMap<String, InferParameter>) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: "INT32".into(),
            shape: vec![1, 2],
            parameters,
            contents: None,
        }
    }

    #[test]
    fn raw_entries_go_to_the_inputs_not_in_shared_memory_in_order() {
        let message = ModelInferRequest {
            model_name: "simple".into(),
            id: "7".into(),
            inputs: vec![
                input("A", HashMap::new()),
                input("B", window("in", 8, 8)),
                input("C", HashMap::new()),
            ],
            outputs: vec![
                InferRequestedOutputTensor {
                    name: "O0".into(),
                    parameters: window("out", 0, 8),
                },
                InferRequestedOutputTensor {
                    name: "O1".into(),
                    parameters: HashMap::from([("classification".to_string(), int(2))]),
                },
            ],
            raw_input_contents: vec![
                Bytes::from_static(b"aaaaaaaa"),
                Bytes::from_static(b"cccccccc"),
            ],
            ..Default::default()
        };
        assert!(names_shared_memory(&message));
        let request = infer_request(message).unwrap();
        assert_eq!(request.id, b"7");
        let data: Vec<&InputData> = request.inputs.iter().map(|i| &i.data).collect();
        assert_eq!(data[0], &InputData::Raw(Bytes::from_static(b"aaaaaaaa")));
        assert_eq!(
            data[1],
            &InputData::SharedMemory(SharedMemory {
                region: "in".into(),
                offset: 8,
                byte_size: 8,
            })
        );
        assert_eq!(data[2], &InputData::Raw(Bytes::from_static(b"cccccccc")));
        assert_eq!(request.outputs[0].kind, OutputKind::SharedMemory);
        assert_eq!(request.outputs[1].classification, 2);
        assert_eq!(request.output_kind("O1"), OutputKind::Binary);
    }

    #[test]
    fn tritons_refusals_of_a_mix_keep_its_texts() {
        let contents = Some(InferTensorContents {
            int_contents: vec![1, 2],
            ..Default::default()
        });
        let mut with_contents = input("A", window("in", 0, 8));
        with_contents.contents = contents.clone();
        let refused = |inputs: Vec<InferInputTensor>, raw: Vec<Bytes>| {
            let message = ModelInferRequest {
                model_name: "m".into(),
                inputs,
                raw_input_contents: raw,
                ..Default::default()
            };
            infer_request(message).unwrap_err().message
        };
        assert_eq!(
            refused(vec![with_contents], vec![]),
            "unexpected 'content' provided when using shared memory for input tensor 'A' for model 'm'"
        );
        let mut typed = input("B", HashMap::new());
        typed.contents = contents;
        assert_eq!(
            refused(vec![typed.clone()], vec![Bytes::from_static(b"x")]),
            "contents field must not be specified when using raw_input_contents for 'B' for model 'm'"
        );
        assert_eq!(
            refused(vec![input("C", HashMap::new())], vec![]),
            "unable to find data for input tensor 'C' for model 'm' in request."
        );
        // Typed contents alone become raw bytes.
        let message = ModelInferRequest {
            model_name: "m".into(),
            inputs: vec![typed],
            ..Default::default()
        };
        let request = infer_request(message).unwrap();
        assert_eq!(
            request.inputs[0].data,
            InputData::Raw(Bytes::from_static(&[1, 0, 0, 0, 2, 0, 0, 0]))
        );
    }
}
