//! The start of a gRPC `ModelInfer` call's body, read before the rest has
//! arrived: gRPC's 5-byte message prefix, then the message's fields up to
//! its first `raw_input_contents` entry (field 7). Those leading fields
//! (model, version, id, parameters with `sequence_id`, the input and
//! output descriptions) hold all the passthrough routes a call on; the
//! tensor bytes after them can be relayed as they come.
//!
//! Hand-written because prost decodes whole messages only. Every length is
//! checked against the bytes in hand before it is skipped; a field this
//! walk does not understand (groups, field 0, an over-long varint) ends
//! it with [`Head::Unwalkable`], and the caller decodes the message whole
//! instead, with the decoder's own error if it is malformed.

/// The path of `ModelInfer`.
pub(crate) const MODEL_INFER: &str = "/inference.GRPCInferenceService/ModelInfer";

/// A call's status header: in a reply's head when it is "trailers-only"
/// (a name parsed once, not on every lookup).
pub(crate) const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// gRPC's message prefix: a compression flag and a big-endian length.
pub const PREFIX_LEN: usize = 5;

/// `raw_input_contents`' field number in `ModelInferRequest`.
const RAW_INPUT_CONTENTS: u64 = 7;

/// The message prefix, once its 5 bytes are in hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub compressed: bool,
    pub len: u32,
}

/// Reads the prefix from the start of a body (`None`: fewer than 5 bytes).
pub fn prefix(body: &[u8]) -> Option<Prefix> {
    let bytes: [u8; PREFIX_LEN] = body.get(..PREFIX_LEN)?.try_into().ok()?;
    Some(Prefix {
        compressed: bytes[0] != 0,
        len: u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]),
    })
}

/// What the bytes of a message's start say about its leading fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// The fields before the first `raw_input_contents` entry are the
    /// message's first `len` bytes; that entry's key begins there.
    Ends { len: usize },
    /// More bytes are needed to find that entry; the fields before byte
    /// `walked` are complete, so a later walk may start there.
    Incomplete { walked: usize },
    /// Not a message this walk can read ahead in (see the module doc).
    Unwalkable,
}

/// Walks `message` (the bytes after the prefix, as many as have arrived)
/// field by field to the first `raw_input_contents` key, from `from`: 0,
/// or the `walked` of an earlier walk over fewer of the same bytes (so
/// that a message arriving in many small frames is walked once, not once
/// per frame). A `from` beyond the bytes is taken as their end.
pub fn head(message: &[u8], from: usize) -> Head {
    let mut at = from.min(message.len());
    loop {
        let Some((key, key_len)) = varint(&message[at..]) else {
            return incomplete_or_unwalkable(&message[at..], at);
        };
        let field = key >> 3;
        if field == 0 {
            return Head::Unwalkable;
        }
        if field == RAW_INPUT_CONTENTS {
            return Head::Ends { len: at };
        }
        let value = &message[at + key_len..];
        let skip = match key & 7 {
            0 => match varint(value) {
                Some((_, n)) => Some(n),
                None => return incomplete_or_unwalkable(value, at),
            },
            1 => Some(8),
            2 => match varint(value) {
                Some((len, n)) => usize::try_from(len).ok().and_then(|l| l.checked_add(n)),
                None => return incomplete_or_unwalkable(value, at),
            },
            5 => Some(4),
            _ => return Head::Unwalkable,
        };
        // A length beyond the address space cannot be in hand either.
        let Some(skip) = skip else {
            return Head::Unwalkable;
        };
        if value.len() < skip {
            return Head::Incomplete { walked: at };
        }
        at += key_len + skip;
    }
}

/// A varint that did not decode: cut off by the end of the bytes, or
/// longer than 10 bytes. The field it belongs to starts at `walked`.
fn incomplete_or_unwalkable(bytes: &[u8], walked: usize) -> Head {
    if bytes.len() >= 10 {
        Head::Unwalkable
    } else {
        Head::Incomplete { walked }
    }
}

/// A protobuf varint at the start of `bytes`, and its length.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use prost::Message;

    use super::*;
    use crate::proto::inference::model_infer_request::InferInputTensor;
    use crate::proto::inference::{
        infer_parameter::ParameterChoice, InferParameter, ModelInferRequest,
    };

    fn message() -> ModelInferRequest {
        let mut parameters = std::collections::HashMap::new();
        parameters.insert(
            "sequence_id".to_owned(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::Int64Param(42)),
            },
        );
        ModelInferRequest {
            model_name: "add_sub".into(),
            model_version: "1".into(),
            id: "x".into(),
            parameters,
            inputs: vec![InferInputTensor {
                name: "INPUT0".into(),
                datatype: "FP32".into(),
                shape: vec![1, 300],
                ..Default::default()
            }],
            raw_input_contents: vec![Bytes::from(vec![7u8; 1200]), Bytes::from(vec![1u8; 3])],
            ..Default::default()
        }
    }

    #[test]
    fn the_head_is_the_fields_before_the_first_tensor() {
        let whole = message();
        let bytes = whole.encode_to_vec();
        let Head::Ends { len } = head(&bytes, 0) else {
            panic!("no head in {bytes:?}")
        };
        let leading = ModelInferRequest::decode(&bytes[..len]).unwrap();
        let mut expected = whole.clone();
        expected.raw_input_contents.clear();
        assert_eq!(leading, expected);
        assert_eq!(bytes[len], (7 << 3) | 2, "the first tensor's key");
    }

    #[test]
    fn every_cut_before_the_first_tensor_asks_for_more() {
        let bytes = message().encode_to_vec();
        let Head::Ends { len } = head(&bytes, 0) else {
            panic!()
        };
        for cut in 0..len {
            assert!(
                matches!(head(&bytes[..cut], 0), Head::Incomplete { walked } if walked <= cut),
                "cut at {cut}"
            );
        }
        assert_eq!(head(&bytes[..=len], 0), Head::Ends { len });
    }

    #[test]
    fn a_walk_resumed_byte_by_byte_finds_the_same_head() {
        let bytes = message().encode_to_vec();
        let whole = head(&bytes, 0);
        let mut from = 0;
        for end in 0..=bytes.len() {
            match head(&bytes[..end], from) {
                Head::Incomplete { walked } => {
                    assert!(walked >= from, "the walk never goes back");
                    from = walked;
                }
                found => {
                    assert_eq!(found, whole, "found with {end} bytes");
                    return;
                }
            }
        }
        panic!("never found");
    }

    #[test]
    fn a_message_without_tensors_never_ends_its_head() {
        let mut m = message();
        m.raw_input_contents.clear();
        assert!(matches!(
            head(&m.encode_to_vec(), 0),
            Head::Incomplete { .. }
        ));
    }

    #[test]
    fn what_the_walk_cannot_read_is_unwalkable() {
        assert_eq!(head(&[0x00], 0), Head::Unwalkable, "field 0");
        assert_eq!(head(&[(1 << 3) | 3], 0), Head::Unwalkable, "a group");
        assert_eq!(head(&[0xff; 10], 0), Head::Unwalkable, "an 11-byte varint");
        let mut beyond = vec![(1 << 3) | 2];
        beyond.extend([0xff; 9]);
        beyond.push(0x01);
        assert_eq!(head(&beyond, 0), Head::Unwalkable, "a length beyond memory");
        let mut far = vec![(1 << 3) | 2];
        far.extend([0xff; 8]);
        far.push(0x7f);
        assert_eq!(
            head(&far, 0),
            Head::Incomplete { walked: 0 },
            "a length not in hand yet"
        );
    }

    #[test]
    fn the_prefix_is_a_flag_and_a_big_endian_length() {
        assert_eq!(prefix(&[0, 0, 0, 1]), None);
        assert_eq!(
            prefix(&[1, 0, 0x40, 0, 0, 9]),
            Some(Prefix {
                compressed: true,
                len: 4 << 20
            })
        );
    }
}
