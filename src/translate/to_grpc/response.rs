//! A protocol-neutral answer to the `ModelInferResponse` the gRPC front
//! gives its client (shared-memory bridge mode), as Triton's gRPC front
//! writes it (v2 §6.3): one `outputs` entry per output, with its
//! name, datatype and shape, and one `raw_output_contents` entry each, in
//! the same order — an empty one for an output written into shared
//! memory; the request's id and the answer's parameters.

use crate::model::InferResponse;
use crate::proto::inference::model_infer_response::InferOutputTensor;
use crate::proto::inference::ModelInferResponse;

use super::param;

/// The message of `response` (its outputs' data as raw entries; those in
/// shared memory were emptied when written there).
pub(crate) fn infer_response(response: InferResponse) -> ModelInferResponse {
    let InferResponse {
        id,
        model_name,
        model_version,
        parameters,
        outputs,
    } = response;
    let mut raw = Vec::with_capacity(outputs.len());
    let outputs = outputs
        .into_iter()
        .map(|output| {
            raw.push(output.data);
            InferOutputTensor {
                name: output.name,
                datatype: output.datatype.as_str().to_string(),
                shape: output.shape,
                parameters: Default::default(),
                contents: None,
            }
        })
        .collect();
    ModelInferResponse {
        model_name,
        model_version,
        id: String::from_utf8_lossy(&id).into_owned(),
        parameters: parameters
            .iter()
            .map(|(k, v)| (k.clone(), param(v)))
            .collect(),
        outputs,
        raw_output_contents: raw,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::model::{OutputTensor, Param};

    #[test]
    fn every_output_has_a_raw_entry_empty_for_shared_memory() {
        let output = |name: &str, data: &'static [u8]| OutputTensor {
            name: name.into(),
            datatype: "INT32".into(),
            shape: vec![1, 2],
            data: Bytes::from_static(data),
        };
        let message = infer_response(InferResponse {
            id: b"7".to_vec(),
            model_name: "simple".into(),
            model_version: "1".into(),
            parameters: vec![("sequence_end".into(), Param::Bool(true))],
            outputs: vec![output("OUTPUT0", b""), output("OUTPUT1", b"12345678")],
        });
        assert_eq!(message.id, "7");
        assert_eq!(message.outputs.len(), 2);
        assert_eq!(message.outputs[0].datatype, "INT32");
        assert!(message.outputs[0].parameters.is_empty());
        let sizes: Vec<usize> = message.raw_output_contents.iter().map(Bytes::len).collect();
        assert_eq!(sizes, [0, 8]);
        assert!(message.parameters.contains_key("sequence_end"));
    }
}
