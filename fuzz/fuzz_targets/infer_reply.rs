//! Fuzz target for a `ModelInfer` reply as it arrives from an upstream:
//! the walker that splits the gRPC message into its small fields and its
//! raw outputs (`tensorgate::upstream::reply`), the conversion to our
//! response (`translate::from_grpc`, typed `contents` included) and the
//! HTTP answer written from it (`wire::v2_response`, JSON and binary).
//!
//! The input is `<mode byte> <bytes>`: with the mode's low bit clear the
//! bytes are the response body as sent; with it set they describe a
//! well-formed reply (see `built`), cut short where they say. The other
//! bits give the size of the DATA frames the body arrives in. Nothing may
//! panic, and:
//! * the walk in frames gives what the walk in one frame gives;
//! * a walk that succeeds agrees with prost decoding the whole message:
//!   the head is the message without its raw outputs, and the raw outputs
//!   are the message's, each as long as its declared length;
//! * an answer that encodes has a JSON header that parses, whose outputs'
//!   `binary_data_size` add up to the binary parts that follow it.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tensorgate::model::{InferRequest, OutputKind, ALL_DATATYPES};
use tensorgate::proto::inference::model_infer_response::InferOutputTensor;
use tensorgate::proto::inference::{InferTensorContents, ModelInferResponse};
use tensorgate::translate::from_grpc::model_infer_with_raw;
use tensorgate::upstream::reply::walk_frames;
use tensorgate::wire::json::{parse, Value, MAX_DEPTH};
use tensorgate::wire::v2_response::encode;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let wire = if mode & 1 == 0 {
        rest.to_vec()
    } else {
        built(rest)
    };
    let whole = walk_frames([&wire[..]]);
    let split = walk_frames(wire.chunks(usize::from(mode >> 1) + 1));
    match (&whole, &split) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "one frame: {whole:?}; frames of {}: {split:?}",
            (mode >> 1) + 1
        ),
    }
    let Ok(walked) = whole else { return };
    let Some((head, raw_follow)) = walked.head else {
        assert!(wire.is_empty() && walked.raw.is_empty() && walked.message.is_empty());
        return;
    };
    let len = u32::from_be_bytes([wire[1], wire[2], wire[3], wire[4]]) as usize;
    assert_eq!(
        wire.len(),
        5 + len,
        "a walk that took more or less than the message"
    );
    let full = ModelInferResponse::decode(&wire[5..]).expect("a walked reply decodes");
    let mut small = full.clone();
    small.raw_output_contents.clear();
    assert_eq!(head, small);
    assert_eq!(raw_follow, !full.raw_output_contents.is_empty());
    assert_eq!(
        ModelInferResponse::decode(&walked.message[5..]).as_ref(),
        Ok(&small)
    );
    let raw: Vec<Bytes> = walked
        .raw
        .into_iter()
        .map(|(len, bytes)| {
            assert_eq!(len, bytes.len() as u64);
            Bytes::from(bytes)
        })
        .collect();
    assert_eq!(raw, full.raw_output_contents);

    let response = model_infer_with_raw(head, raw, b"7");
    for kind in [OutputKind::Json, OutputKind::Binary] {
        let request = InferRequest {
            unlisted_kind: Some(kind),
            ..InferRequest::default()
        };
        let Ok(answer) = encode(&response, &request) else {
            continue;
        };
        let header = match parse(&answer.header, MAX_DEPTH) {
            Ok(header) => header,
            Err(e) => panic!(
                "header {:?}: {e:?}",
                String::from_utf8_lossy(&answer.header)
            ),
        };
        let tails: usize = answer.tails.iter().map(Bytes::len).sum();
        assert_eq!(binary_sizes(&header), tails as u64, "{header:?}");
        assert_eq!(answer.header_length().is_some(), tails > 0);
    }
});

/// The sum of the outputs' `binary_data_size` parameters in a header.
fn binary_sizes(header: &Value) -> u64 {
    let Some(outputs) = header.get("outputs").and_then(Value::as_array) else {
        return 0;
    };
    outputs
        .iter()
        .filter_map(|o| o.get("parameters")?.get("binary_data_size")?.as_u64())
        .sum()
}

/// A well-formed reply from `spec`: its first byte is where to cut the
/// framed message (255: not at all); then up to four outputs of two bytes
/// each (datatype and length of its data, high bit: typed `contents`
/// instead of raw), their data taken from the rest in turn.
fn built(spec: &[u8]) -> Vec<u8> {
    let Some((&cut, rest)) = spec.split_first() else {
        return vec![];
    };
    let mut response = ModelInferResponse {
        model_name: "m".into(),
        model_version: "1".into(),
        id: "7".into(),
        ..ModelInferResponse::default()
    };
    let (heads, mut data) = rest.split_at(rest.len().min(8));
    for (i, head) in heads.chunks_exact(2).enumerate() {
        let (kind, len) = (head[0], head[1]);
        let dtype = ALL_DATATYPES[usize::from(kind & 0x7f) % ALL_DATATYPES.len()];
        let (bytes, left) = data.split_at(usize::from(len).min(data.len()));
        data = left;
        let count = match dtype.element_size() {
            Some(size) => bytes.len() / size,
            None => bytes.len() / 4,
        };
        let mut output = InferOutputTensor {
            name: format!("OUTPUT{i}"),
            datatype: dtype.as_str().into(),
            shape: vec![count as i64],
            ..InferOutputTensor::default()
        };
        if kind & 0x80 != 0 {
            output.contents = Some(InferTensorContents {
                fp32_contents: bytes.iter().map(|b| f32::from(*b) - 128.0).collect(),
                int_contents: bytes.iter().map(|b| i32::from(*b as i8)).collect(),
                bytes_contents: bytes.chunks(4).map(Bytes::copy_from_slice).collect(),
                ..InferTensorContents::default()
            });
            response.raw_output_contents.push(Bytes::new());
        } else {
            response
                .raw_output_contents
                .push(Bytes::copy_from_slice(bytes));
        }
        response.outputs.push(output);
    }
    let body = response.encode_to_vec();
    let mut wire = vec![0];
    wire.extend((body.len() as u32).to_be_bytes());
    wire.extend(body);
    if cut != 255 {
        wire.truncate(usize::from(cut) * wire.len() / 255);
    }
    wire
}
