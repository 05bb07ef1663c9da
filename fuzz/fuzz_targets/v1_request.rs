//! Fuzz target for the legacy v1 request decoder: the `NV-InferRequest`
//! parser (`tensorgate::wire::v1::text`), the v1 → v2 request translation
//! with its shape arithmetic, and the body split (`wire::v1::body`).
//!
//! The input is `<header text> NUL <body>`. Nothing may panic, and:
//! * a parsed header written back in TRTIS's one-line text form parses to
//!   the same message;
//! * an accepted request's raw inputs cover the body exactly.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tensorgate::model::{DataType, InputData, ModelInfo, TensorInfo};
use tensorgate::proto::v1::InferRequestHeader;
use tensorgate::translate::v1::request::infer_request;
use tensorgate::wire::v1::text::{parse, short};

fuzz_target!(|data: &[u8]| check(data));

fn tensor(name: &str, datatype: DataType, dims: &[i64]) -> TensorInfo {
    TensorInfo {
        name: name.into(),
        datatype: Some(datatype),
        dims: dims.to_vec(),
        optional: false,
    }
}

fn check(data: &[u8]) {
    let split = data.iter().position(|b| *b == 0).unwrap_or(data.len());
    let (text, body) = (&data[..split], data.get(split + 1..).unwrap_or_default());
    let Ok(header) = parse::<InferRequestHeader>(text) else {
        return;
    };
    let again = parse::<InferRequestHeader>(short(&header).as_bytes()).expect("own text parses");
    assert_eq!(again, header);
    let info = ModelInfo {
        max_batch_size: 8,
        decoupled: false,
        inputs: vec![
            tensor("INPUT0", DataType::Int32, &[-1, 4]),
            tensor("INPUT1", DataType::Bytes, &[-1]),
        ],
        outputs: vec![tensor("OUTPUT0", DataType::Int32, &[-1, 4])],
    };
    let body = Bytes::copy_from_slice(body);
    if let Ok((request, _)) = infer_request("m", "", &header, &info, &body) {
        let used: usize = request
            .inputs
            .iter()
            .map(|i| match &i.data {
                InputData::Raw(b) => b.len(),
                InputData::SharedMemory(_) | InputData::Streamed(_) => 0,
            })
            .sum();
        assert_eq!(used, body.len());
    }
}
