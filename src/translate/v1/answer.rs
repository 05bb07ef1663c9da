//! The pieces of a v1 answer (v1 §7.1, v1 §7.3; v1 §3):
//! the `NV-Status` and `NV-InferResponse` header values, and the infer body
//! — the raw outputs in the header's output order, then the whole
//! `InferResponseHeader` as the trailer, binary or text.

use bytes::Bytes;

use crate::proto::inference::repository_index_response::ModelIndex;
use crate::proto::v1 as pb;
use crate::wire::v1::text::{self, V1Message};
use crate::wire::v1::Format;

/// The `NV-Status` value of a success.
pub(crate) fn success(server_id: &str, request_id: u64) -> String {
    status(pb::RequestStatusCode::Success, "", server_id, request_id)
}

/// The `NV-Status` value.
pub(crate) fn status(
    code: pb::RequestStatusCode,
    msg: &str,
    server_id: &str,
    request_id: u64,
) -> String {
    text::short(&pb::RequestStatus {
        code: code as i32,
        msg: msg.to_string(),
        server_id: server_id.to_string(),
        request_id,
    })
}

/// A successful infer answer: the `NV-InferResponse` value and the body.
/// The header copy leaves `batch_classes` out (as TRTIS did): the v1 client
/// reads classes only from the trailer, which carries everything.
pub(crate) fn infer(
    header: &pb::InferResponseHeader,
    raw: Vec<Bytes>,
    format: Format,
) -> (String, Vec<Bytes>) {
    let mut copy = header.clone();
    for output in &mut copy.output {
        output.batch_classes.clear();
    }
    // Over HTTP the raw outputs are back to back: the empty entries of
    // outputs that are not raw take no place.
    let mut body: Vec<Bytes> = raw.into_iter().filter(|b| !b.is_empty()).collect();
    body.push(Bytes::from(encode(header, format).1));
    (text::short(&copy), body)
}

/// A message as a body in the requested format, with its content type.
pub(crate) fn encode<M: V1Message>(message: &M, format: Format) -> (&'static str, Vec<u8>) {
    match format {
        Format::Text => ("text/plain", text::debug(message).into_bytes()),
        Format::Binary => ("application/octet-stream", message.encode_to_vec()),
        Format::Json => ("application/json", text::json(message)),
    }
}

/// The v1 repository index: each model name once, in the upstream's order
/// (v2 lists a model once per version).
pub(crate) fn repository_index(index: Vec<ModelIndex>) -> pb::ModelRepositoryIndex {
    let mut models: Vec<pb::model_repository_index::ModelEntry> = Vec::new();
    for entry in index {
        if !models.iter().any(|m| m.name == entry.name) {
            models.push(pb::model_repository_index::ModelEntry { name: entry.name });
        }
    }
    pb::ModelRepositoryIndex { models }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::infer_response_header::{output, Output};
    use prost::Message;

    #[test]
    fn classes_stay_in_the_trailer_only() {
        let header = pb::InferResponseHeader {
            model_name: "m".into(),
            model_version: 1,
            batch_size: 1,
            output: vec![
                Output {
                    name: "R".into(),
                    raw: Some(output::Raw {
                        dims: vec![1],
                        batch_byte_size: 4,
                    }),
                    ..Default::default()
                },
                Output {
                    name: "C".into(),
                    batch_classes: vec![output::Classes {
                        cls: vec![output::Class {
                            idx: 0,
                            value: 2.5,
                            label: "x".into(),
                        }],
                    }],
                    ..Default::default()
                },
            ],
            id: 0,
        };
        let (value, body) = infer(&header, vec![Bytes::from_static(b"abcd")], Format::Binary);
        assert_eq!(
            value,
            r#"model_name: "m" model_version: 1 batch_size: 1 output { name: "R" raw { dims: 1 batch_byte_size: 4 } } output { name: "C" }"#
        );
        assert_eq!(&body[0][..], b"abcd");
        assert_eq!(
            pb::InferResponseHeader::decode(body[1].clone()).expect("binary trailer"),
            header
        );
        let (_, body) = infer(&header, Vec::new(), Format::Text);
        let trailer = String::from_utf8(body[0].to_vec()).expect("text");
        assert!(trailer.contains("label: \"x\""), "{trailer}");
    }

    #[test]
    fn status_header_value() {
        assert_eq!(
            status(pb::RequestStatusCode::Success, "", "inference:0", 3),
            r#"code: SUCCESS server_id: "inference:0" request_id: 3"#
        );
    }
}
