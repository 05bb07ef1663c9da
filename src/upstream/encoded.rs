//! `ModelInfer` requests whose tensors are not copied again on the way
//! out. tonic's codec encodes a message into one buffer, which copies
//! every `raw_input_contents` entry once more. Here prost encodes only the
//! small fields; each large entry follows as the `Bytes` it already is
//! (a slice of the HTTP body, or of the message the passthrough received)
//! and leaves in its own HTTP/2 DATA frames.
//!
//! The bytes on the wire are exactly prost's encoding of the whole message
//! (`raw_input_contents` is field 7, the message's last, and prost writes
//! fields in number order), behind gRPC's 5-byte length prefix. The
//! generated client still makes the call (deadline, metadata, answer,
//! status): it is handed a placeholder message, and the transport
//! (`transport.rs`) sends these pieces as the body instead of what tonic
//! encoded.

use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use prost::Message;
use tonic::{Request, Status};

use crate::proto::inference::ModelInferRequest;

/// `raw_input_contents`' field number in `ModelInferRequest`.
const RAW_INPUT_CONTENTS: u32 = 7;

/// gRPC's message prefix: a compression flag and a 4-byte length.
const PREFIX: usize = 5;

/// Entries shorter than one HTTP/2 frame at the default size are copied
/// beside their field header: one frame costs less than two tiny ones.
const COPY_BELOW: usize = 16 << 10;

/// One length-prefixed gRPC `ModelInferRequest`, in pieces. Cheap to
/// clone (reference counts), so every attempt of a call sends the same.
#[derive(Clone)]
pub(crate) struct EncodedInfer {
    pieces: Vec<Bytes>,
}

/// The pieces' lengths, never tensor bytes.
impl std::fmt::Debug for EncodedInfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lengths: Vec<usize> = self.pieces.iter().map(Bytes::len).collect();
        f.debug_struct("EncodedInfer")
            .field("piece_lengths", &lengths)
            .finish()
    }
}

impl EncodedInfer {
    /// Encodes `message`, refused as tonic refuses a message above
    /// `limit` (the upstream's `max_message_bytes`) or above gRPC's 4 GiB.
    pub(crate) fn new(mut message: ModelInferRequest, limit: usize) -> Result<Self, Status> {
        let raw = std::mem::take(&mut message.raw_input_contents);
        let entries: usize = raw
            .iter()
            .map(|r| key_len(RAW_INPUT_CONTENTS) + encoded_len_varint(r.len() as u64) + r.len())
            .sum();
        let len = message.encoded_len() + entries;
        if len > limit {
            return Err(Status::out_of_range(format!(
                "Error, encoded message length too large: found {len} bytes, the limit is: {limit} bytes"
            )));
        }
        let Ok(prefix_len) = u32::try_from(len) else {
            return Err(Status::resource_exhausted(format!(
                "Cannot return body with more than 4GB of data but got {len} bytes"
            )));
        };
        let copied: usize = raw
            .iter()
            .filter(|r| r.len() < COPY_BELOW)
            .map(Bytes::len)
            .sum();
        let mut head = BytesMut::with_capacity(PREFIX + len - entries + copied + 16 * raw.len());
        head.put_u8(0);
        head.put_u32(prefix_len);
        message.encode_raw(&mut head);
        let mut pieces = Vec::new();
        for entry in raw {
            encode_key(RAW_INPUT_CONTENTS, WireType::LengthDelimited, &mut head);
            encode_varint(entry.len() as u64, &mut head);
            if entry.len() < COPY_BELOW {
                head.put_slice(&entry);
            } else {
                pieces.push(head.split().freeze());
                pieces.push(entry);
            }
        }
        if !head.is_empty() {
            pieces.push(head.freeze());
        }
        Ok(EncodedInfer { pieces })
    }

    /// The request for the generated client's `model_infer`: `request`'s
    /// metadata and extensions, a placeholder message, and these pieces
    /// for the transport to send in its place; the encoding's refusal as
    /// the call's.
    pub(crate) fn request(
        request: Request<Result<EncodedInfer, Status>>,
    ) -> Result<Request<ModelInferRequest>, Status> {
        let (metadata, mut extensions, encoded) = request.into_parts();
        extensions.insert(encoded?);
        Ok(Request::from_parts(
            metadata,
            extensions,
            ModelInferRequest::default(),
        ))
    }

    /// The pieces, in order.
    pub(crate) fn into_pieces(self) -> Vec<Bytes> {
        self.pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::model_infer_request::InferInputTensor;

    fn message(raw: &[usize]) -> ModelInferRequest {
        ModelInferRequest {
            model_name: "add_sub".into(),
            id: "7".into(),
            inputs: raw
                .iter()
                .enumerate()
                .map(|(i, n)| InferInputTensor {
                    name: format!("INPUT{i}"),
                    datatype: "UINT8".into(),
                    shape: vec![*n as i64],
                    ..Default::default()
                })
                .collect(),
            raw_input_contents: raw
                .iter()
                .enumerate()
                .map(|(i, n)| Bytes::from(vec![i as u8 + 1; *n]))
                .collect(),
            ..Default::default()
        }
    }

    fn joined(encoded: EncodedInfer) -> Vec<u8> {
        encoded.into_pieces().concat()
    }

    #[test]
    fn the_pieces_are_prosts_encoding_behind_the_grpc_prefix() {
        for raw in [
            &[][..],
            &[0],
            &[16],
            &[COPY_BELOW - 1, COPY_BELOW],
            &[1 << 20, 3, 1 << 20],
            &[200_000, 0, 127, 128],
        ] {
            let m = message(raw);
            let body = m.encode_to_vec();
            let mut expected = vec![0];
            expected.extend((body.len() as u32).to_be_bytes());
            expected.extend(&body);
            let encoded = EncodedInfer::new(m, usize::MAX).unwrap();
            assert_eq!(joined(encoded), expected, "{raw:?}");
        }
    }

    #[test]
    fn large_entries_are_the_callers_bytes_not_copies() {
        let m = message(&[1 << 20, 8]);
        let big = m.raw_input_contents[0].clone();
        let pieces = EncodedInfer::new(m, usize::MAX).unwrap().into_pieces();
        assert_eq!(
            pieces.len(),
            3,
            "head, the large entry, the small one's tail"
        );
        assert_eq!(pieces[1].as_ptr(), big.as_ptr());
    }

    #[test]
    fn a_message_above_the_limit_is_refused_as_tonic_refuses_it() {
        let m = message(&[100]);
        let len = m.encoded_len();
        assert!(EncodedInfer::new(m.clone(), len).is_ok());
        let status = EncodedInfer::new(m, len - 1).unwrap_err();
        assert_eq!(status.code(), tonic::Code::OutOfRange);
        assert_eq!(
            status.message(),
            format!(
                "Error, encoded message length too large: found {len} bytes, the limit is: {} bytes",
                len - 1
            )
        );
    }
}
