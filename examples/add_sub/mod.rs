//! The `ModelInfer` call both floor examples make (`floor_hop`,
//! `h2_unary`): add_sub with two FP32 inputs in `raw_input_contents`, as
//! one gRPC message (the 5-byte prefix, then the message), encoded once at
//! start. A directory, not `examples/add_sub.rs`, so cargo does not take
//! it for an example of its own.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use tensorgate_proto::inference::model_infer_request::{
    InferInputTensor, InferRequestedOutputTensor,
};
use tensorgate_proto::inference::ModelInferRequest;

/// add_sub's call of INPUT0 = `a` and INPUT1 = `b` (equal lengths),
/// asking for `outputs` by name (none: every output).
pub(crate) fn call(a: &[f32], b: &[f32], outputs: &[&str]) -> Bytes {
    let input = |name: &str| InferInputTensor {
        name: name.into(),
        datatype: "FP32".into(),
        shape: vec![a.len() as i64],
        ..Default::default()
    };
    let raw = |values: &[f32]| -> Bytes { values.iter().flat_map(|v| v.to_le_bytes()).collect() };
    let request = ModelInferRequest {
        model_name: "add_sub".into(),
        inputs: vec![input("INPUT0"), input("INPUT1")],
        outputs: outputs
            .iter()
            .map(|name| InferRequestedOutputTensor {
                name: (*name).into(),
                ..Default::default()
            })
            .collect(),
        raw_input_contents: vec![raw(a), raw(b)],
        ..Default::default()
    };
    let mut message = BytesMut::new();
    message.put_u8(0);
    message.put_u32(request.encoded_len() as u32);
    request.encode(&mut message).expect("a BytesMut grows");
    message.freeze()
}
