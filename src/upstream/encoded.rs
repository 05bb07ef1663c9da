//! `ModelInfer` requests whose tensors are not copied again on the way
//! out. tonic's codec encodes a message into one buffer, which copies
//! every `raw_input_contents` entry once more. Here prost encodes only the
//! small fields; each large entry follows as the `Bytes` it already is
//! (a slice of the HTTP body, or of the message the passthrough received)
//! and leaves in its own HTTP/2 DATA frames.
//!
//! A streamed body's tensors are not in hand yet: their entries are
//! promised by size (`Piece::Rest`), and the transport reads them from the
//! body's rest (`body::BodyRest`) as the client sends them.
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

use super::reply::ReplyTap;
use crate::body::BodyRest;
use crate::proto::inference::ModelInferRequest;

/// `raw_input_contents`' field number in `ModelInferRequest`.
const RAW_INPUT_CONTENTS: u32 = 7;

/// gRPC's message prefix: a compression flag and a 4-byte length.
const PREFIX: usize = 5;

/// Entries shorter than one HTTP/2 frame at the default size are copied
/// beside their field header: one frame costs less than two tiny ones.
const COPY_BELOW: usize = 16 << 10;

/// A message's fields but `raw_input_contents`: their encoded length, and
/// what writes them (prost's encoding of a message in hand, or bytes
/// encoded before), so neither is encoded or copied twice.
struct Fields<W> {
    len: usize,
    write: W,
}

/// One length-prefixed gRPC `ModelInferRequest`, in pieces. Cheap to
/// clone (reference counts), so every attempt of a call sends the same.
#[derive(Clone)]
pub(crate) struct EncodedInfer {
    pieces: Vec<Piece>,
    /// Where `Piece::Rest` bytes come from.
    rest: Option<BodyRest>,
    /// Where the answer's raw outputs go as they arrive (`answer`).
    tap: Option<ReplyTap>,
}

/// A piece of the message: bytes in hand, or this many bytes still to
/// come from the request body's rest.
#[derive(Clone)]
pub(crate) enum Piece {
    Ready(Bytes),
    Rest(u64),
}

impl Piece {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Piece::Ready(bytes) => bytes.len() as u64,
            Piece::Rest(len) => *len,
        }
    }
}

/// The pieces' lengths, never tensor bytes.
impl std::fmt::Debug for EncodedInfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lengths: Vec<u64> = self.pieces.iter().map(Piece::len).collect();
        f.debug_struct("EncodedInfer")
            .field("piece_lengths", &lengths)
            .field("streamed", &self.rest.is_some())
            .finish()
    }
}

impl EncodedInfer {
    /// Encodes `message`, refused as tonic refuses a message above
    /// `limit` (the upstream's `max_message_bytes`) or above gRPC's 4 GiB.
    pub(crate) fn new(mut message: ModelInferRequest, limit: usize) -> Result<Self, Status> {
        let raw = std::mem::take(&mut message.raw_input_contents);
        let fields = Fields {
            len: message.encoded_len(),
            write: |head: &mut BytesMut| message.encode_raw(head),
        };
        Self::build(fields, raw, limit, &[], None)
    }

    /// The message whose fields other than `raw_input_contents` are
    /// `fields`, encoded (`to_grpc::model_infer_fields`), and whose
    /// `raw_input_contents` are `raw`; refused as [`EncodedInfer::new`]
    /// refuses. Where `streamed[i]` gives a size, entry `i` is that many
    /// bytes of `rest` (the entry itself a placeholder), in entry order.
    pub(crate) fn from_fields(
        fields: &[u8],
        raw: Vec<Bytes>,
        limit: usize,
        streamed: &[Option<u64>],
        rest: Option<BodyRest>,
    ) -> Result<Self, Status> {
        let fields = Fields {
            len: fields.len(),
            write: |head: &mut BytesMut| head.put_slice(fields),
        };
        Self::build(fields, raw, limit, streamed, rest)
    }

    /// The message whose fields but `raw_input_contents` `fields` writes
    /// (into the buffer that follows the gRPC prefix), then `raw`.
    fn build(
        fields: Fields<impl FnOnce(&mut BytesMut)>,
        raw: Vec<Bytes>,
        limit: usize,
        streamed: &[Option<u64>],
        rest: Option<BodyRest>,
    ) -> Result<Self, Status> {
        // Each entry's size, and whether it is promised rather than in hand.
        let sizes: Vec<(u64, bool)> = raw
            .iter()
            .enumerate()
            .map(|(i, r)| match streamed.get(i).copied().flatten() {
                Some(promised) => (promised, true),
                None => (r.len() as u64, false),
            })
            .collect();
        let entries = sizes.iter().fold(0u64, |sum, (n, _)| {
            sum.saturating_add(key_len(RAW_INPUT_CONTENTS) as u64 + encoded_len_varint(*n) as u64)
                .saturating_add(*n)
        });
        let len = (fields.len as u64).saturating_add(entries);
        if len > limit as u64 {
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
        let mut head = BytesMut::with_capacity(PREFIX + fields.len + copied + 16 * raw.len());
        head.put_u8(0);
        head.put_u32(prefix_len);
        (fields.write)(&mut head);
        let mut pieces = Vec::new();
        for (entry, (size, promised)) in raw.into_iter().zip(sizes) {
            encode_key(RAW_INPUT_CONTENTS, WireType::LengthDelimited, &mut head);
            encode_varint(size, &mut head);
            if promised {
                pieces.push(Piece::Ready(head.split().freeze()));
                pieces.push(Piece::Rest(size));
            } else if entry.len() < COPY_BELOW {
                head.put_slice(&entry);
            } else {
                pieces.push(Piece::Ready(head.split().freeze()));
                pieces.push(Piece::Ready(entry));
            }
        }
        if !head.is_empty() {
            pieces.push(Piece::Ready(head.freeze()));
        }
        Ok(EncodedInfer {
            pieces,
            rest,
            tap: None,
        })
    }

    /// A message already encoded by the client, relayed as it is: the
    /// bytes in hand (its gRPC prefix first), then `rest_len` more from
    /// `rest` (the passthrough's large `ModelInfer`).
    pub(crate) fn raw(seen: Vec<Bytes>, rest_len: u64, rest: BodyRest) -> Self {
        let mut pieces: Vec<Piece> = seen.into_iter().map(Piece::Ready).collect();
        pieces.push(Piece::Rest(rest_len));
        EncodedInfer {
            pieces,
            rest: Some(rest),
            tap: None,
        }
    }

    /// A message already encoded by the client and whole in hand (its
    /// gRPC prefix first), relayed as it is (the passthrough's small
    /// `ModelInfer`).
    pub(crate) fn whole(seen: Vec<Bytes>) -> Self {
        EncodedInfer {
            pieces: seen.into_iter().map(Piece::Ready).collect(),
            rest: None,
            tap: None,
        }
    }

    /// The message's length in bytes, its gRPC prefix and the bytes still
    /// to come included.
    pub(crate) fn len(&self) -> u64 {
        self.pieces.iter().map(Piece::len).sum()
    }

    /// The answer is to be walked into `tap` (see `answer`).
    pub(crate) fn tapped(mut self, tap: Option<ReplyTap>) -> Self {
        self.tap = tap;
        self
    }

    /// Where the answer's raw outputs go, if anywhere.
    pub(crate) fn tap(&self) -> Option<&ReplyTap> {
        self.tap.as_ref()
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

    /// The pieces, in order, and where their `Rest` bytes come from.
    pub(crate) fn into_parts(self) -> (Vec<Piece>, Option<BodyRest>) {
        (self.pieces, self.rest)
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

    fn ready(pieces: Vec<Piece>) -> Vec<Bytes> {
        pieces
            .into_iter()
            .map(|p| match p {
                Piece::Ready(bytes) => bytes,
                Piece::Rest(_) => panic!("a streamed piece in a message in hand"),
            })
            .collect()
    }

    fn joined(encoded: EncodedInfer) -> Vec<u8> {
        ready(encoded.into_parts().0).concat()
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
        let pieces = ready(EncodedInfer::new(m, usize::MAX).unwrap().into_parts().0);
        assert_eq!(
            pieces.len(),
            3,
            "head, the large entry, the small one's tail"
        );
        assert_eq!(pieces[1].as_ptr(), big.as_ptr());
    }

    #[test]
    fn streamed_entries_are_promised_by_size_between_the_same_bytes() {
        let m = message(&[20, 1 << 20, 5, 300]);
        let whole = joined(EncodedInfer::new(m.clone(), usize::MAX).unwrap());
        let mut fields = m.clone();
        let mut placeholders = std::mem::take(&mut fields.raw_input_contents);
        placeholders[1] = Bytes::new();
        placeholders[3] = Bytes::new();
        let (_, rest) = crate::body::channel();
        let streamed = [None, Some(1 << 20), None, Some(300)];
        let fields = fields.encode_to_vec();
        let encoded =
            EncodedInfer::from_fields(&fields, placeholders, usize::MAX, &streamed, Some(rest))
                .unwrap();
        // Filling each promise with its entry's bytes gives the message.
        let mut filled = Vec::new();
        let mut promised = vec![&m.raw_input_contents[1], &m.raw_input_contents[3]].into_iter();
        for piece in encoded.into_parts().0 {
            match piece {
                Piece::Ready(bytes) => filled.extend_from_slice(&bytes),
                Piece::Rest(n) => {
                    let entry = promised.next().unwrap();
                    assert_eq!(n, entry.len() as u64);
                    filled.extend_from_slice(entry);
                }
            }
        }
        assert_eq!(filled, whole);
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
