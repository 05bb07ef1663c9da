//! One response of an LLM (vLLM or TensorRT-LLM convention alike) → the
//! piece of an OpenAI answer it carries: the text of `text_output` and the
//! token counts of `num_input_tokens` / `num_output_tokens` (UINT32 or
//! INT32, as Triton's frontend reads them), each when present. Every
//! length is checked before a slice is taken.

use crate::error::{Error, Result};
use crate::model::{DataType, InferResponse, OutputTensor};

/// What one response adds to the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

/// The piece `response` carries. A `text_output` that is not one BYTES
/// element of valid UTF-8 is the model's fault (500), said as such.
pub fn piece(response: &InferResponse) -> Result<Piece> {
    let output = |name: &str| response.outputs.iter().find(|o| o.name == name);
    let text = match output("text_output") {
        Some(tensor) => text(tensor)?,
        None => String::new(),
    };
    Ok(Piece {
        text,
        input_tokens: output("num_input_tokens").and_then(count),
        output_tokens: output("num_output_tokens").and_then(count),
    })
}

/// The one string of a BYTES tensor: a 4-byte length, then the bytes.
fn text(tensor: &OutputTensor) -> Result<String> {
    let bad = |what: &str| Error::internal(format!("the model's text_output {what}"));
    if tensor.datatype.known() != Some(DataType::Bytes) {
        return Err(bad("is not BYTES"));
    }
    let data = &tensor.data[..];
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        return Err(bad("has no element"));
    };
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() != len {
        return Err(bad("is not exactly one element"));
    }
    String::from_utf8(rest.to_vec()).map_err(|_| bad("is not UTF-8"))
}

/// The first element of a UINT32 / INT32 (or 64-bit) count; `None` for
/// another type or a negative count.
fn count(tensor: &OutputTensor) -> Option<u64> {
    let data = &tensor.data[..];
    match tensor.datatype.known()? {
        DataType::Uint32 => Some(u64::from(u32::from_le_bytes(*data.first_chunk()?))),
        DataType::Int32 => u64::try_from(i32::from_le_bytes(*data.first_chunk()?)).ok(),
        DataType::Uint64 => Some(u64::from_le_bytes(*data.first_chunk()?)),
        DataType::Int64 => u64::try_from(i64::from_le_bytes(*data.first_chunk()?)).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DeclaredType;
    use bytes::Bytes;

    fn tensor(name: &str, datatype: DataType, data: &[u8]) -> OutputTensor {
        OutputTensor {
            name: name.into(),
            datatype: DeclaredType::Known(datatype),
            shape: vec![1],
            data: Bytes::copy_from_slice(data),
        }
    }

    fn response(outputs: Vec<OutputTensor>) -> InferResponse {
        InferResponse {
            outputs,
            ..InferResponse::default()
        }
    }

    #[test]
    fn text_and_counts_are_read() {
        let r = response(vec![
            tensor("text_output", DataType::Bytes, b"\x03\0\0\0abc"),
            tensor("num_input_tokens", DataType::Uint32, &5u32.to_le_bytes()),
            tensor("num_output_tokens", DataType::Int32, &2i32.to_le_bytes()),
        ]);
        assert_eq!(
            piece(&r).unwrap(),
            Piece {
                text: "abc".into(),
                input_tokens: Some(5),
                output_tokens: Some(2)
            }
        );
        assert_eq!(piece(&response(vec![])).unwrap(), Piece::default());
    }

    #[test]
    fn malformed_outputs_are_the_models_fault_not_a_panic() {
        for data in [
            &b""[..],
            b"\x01\0\0",
            b"\x05\0\0\0ab",
            b"\x01\0\0\0a\x01\0\0\0b",
            b"\x01\0\0\0\xff",
        ] {
            let r = response(vec![tensor("text_output", DataType::Bytes, data)]);
            assert_eq!(piece(&r).unwrap_err().status(), 500, "{data:?}");
        }
        let r = response(vec![tensor("text_output", DataType::Fp32, b"\0\0\0\0")]);
        assert!(piece(&r).is_err());
        let short = response(vec![tensor("num_output_tokens", DataType::Uint32, b"\x01")]);
        assert_eq!(piece(&short).unwrap().output_tokens, None);
        let negative = response(vec![tensor(
            "num_output_tokens",
            DataType::Int32,
            &(-1i32).to_le_bytes(),
        )]);
        assert_eq!(piece(&negative).unwrap().output_tokens, None);
    }
}
