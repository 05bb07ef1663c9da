//! Fuzz target for the `/generate` body codecs (`tensorgate::wire::generate`):
//! the request decoder (top-level keys, and the members of `parameters`,
//! become input tensors shaped from the model's signature, or request
//! parameters) and the answer encoder over output bytes as an upstream
//! sends them.
//!
//! The input is `<mode byte> <body>`; the mode picks whether the model
//! batches, whether it has an input named `parameters`, and the datatype
//! the body's bytes are encoded as. Nothing may panic, and:
//! * an accepted tensor is one of the model's inputs, once, with its
//!   datatype, a shape that fits its dims, and exactly the bytes that shape
//!   holds (BYTES: that many length-prefixed elements);
//! * the accepted tensors, answered back as outputs, encode to one JSON
//!   object that parses;
//! * the body taken as one output's raw bytes encodes exactly when its
//!   length (BYTES: its framing) holds the elements the shape says, and
//!   then parses as JSON.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tensorgate::model::{
    element_count, DataType, InferResponse, InputData, ModelInfo, OutputTensor, TensorInfo,
    ALL_DATATYPES,
};
use tensorgate::wire::generate::{decode, encode};
use tensorgate::wire::json::{parse, Value};
use tensorgate::wire::v2_request::DecodeLimits;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    requests(mode, body);
    raw_output(mode, body);
});

fn tensor(name: &str, datatype: Option<DataType>, dims: &[i64]) -> TensorInfo {
    TensorInfo {
        name: name.into(),
        datatype,
        dims: dims.to_vec(),
        optional: false,
    }
}

fn model(mode: u8) -> ModelInfo {
    let mut inputs = vec![
        tensor("INPUT0", Some(DataType::Int32), &[-1, 2]),
        tensor("TEXT", Some(DataType::Bytes), &[-1]),
        tensor("FLAG", Some(DataType::Bool), &[1]),
        tensor("HALF", Some(DataType::Fp16), &[2, -1]),
        tensor("BIG", Some(DataType::Uint64), &[-1, -1]),
        tensor("ODD", None, &[-1]),
    ];
    if mode & 2 != 0 {
        inputs.push(tensor("parameters", Some(DataType::Fp32), &[-1]));
    }
    ModelInfo {
        max_batch_size: if mode & 1 != 0 { 4 } else { 0 },
        decoupled: false,
        inputs,
        outputs: vec![],
    }
}

/// The elements of a BYTES tensor, or `None` when its framing is broken.
fn bytes_count(mut data: &[u8]) -> Option<u64> {
    let mut count = 0;
    while !data.is_empty() {
        let (len, rest) = data.split_first_chunk::<4>()?;
        data = rest.get(u32::from_le_bytes(*len) as usize..)?;
        count += 1;
    }
    Some(count)
}

fn requests(mode: u8, body: &[u8]) {
    let info = model(mode);
    let limits = DecodeLimits {
        max_input_size: 1 << 16,
        max_json_depth: 100,
    };
    let Ok(request) = decode("m", "", body, &info, limits) else {
        return;
    };
    let mut outputs = Vec::new();
    for (i, input) in request.inputs.iter().enumerate() {
        let signature = info.input(&input.name).expect("an input of the model");
        assert!(
            request.inputs[..i].iter().all(|o| o.name != input.name),
            "{} twice",
            input.name
        );
        let dtype = signature.datatype.expect("a known datatype");
        assert_eq!(input.datatype.as_str(), dtype.as_str());
        let batch = (info.max_batch_size > 0).then_some(-1);
        let dims: Vec<i64> = batch
            .into_iter()
            .chain(signature.dims.iter().copied())
            .collect();
        assert_eq!(
            input.shape.len(),
            dims.len(),
            "{dims:?} -> {:?}",
            input.shape
        );
        for (d, s) in dims.iter().zip(&input.shape) {
            assert!(*d == -1 || d == s, "{dims:?} -> {:?}", input.shape);
        }
        let count = element_count(&input.shape).expect("a countable shape");
        let InputData::Raw(data) = &input.data else {
            panic!("not raw: {input:?}")
        };
        match dtype.element_size() {
            Some(size) => assert_eq!(data.len() as u64, count * size as u64),
            None => assert_eq!(bytes_count(data), Some(count)),
        }
        outputs.push(OutputTensor {
            name: input.name.clone(),
            datatype: input.datatype.clone(),
            shape: input.shape.clone(),
            data: data.clone(),
        });
    }
    let response = InferResponse {
        id: request.id.clone(),
        model_name: "m".into(),
        model_version: "1".into(),
        parameters: request.parameters.clone(),
        outputs,
    };
    let answer = encode(&response).expect("accepted tensors encode");
    match parse(&answer, usize::MAX) {
        Ok(Value::Object(_)) => {}
        other => panic!("answer {answer:?} parsed as {other:?}"),
    }
}

fn raw_output(mode: u8, body: &[u8]) {
    let dtype = ALL_DATATYPES[usize::from(mode >> 2) % ALL_DATATYPES.len()];
    let (count, fits) = match dtype.element_size() {
        Some(size) => (body.len() / size, body.len() % size == 0),
        None => match bytes_count(body) {
            Some(n) => (n as usize, true),
            None => (usize::from(mode), false),
        },
    };
    let response = InferResponse {
        model_name: "m".into(),
        model_version: "1".into(),
        outputs: vec![OutputTensor {
            name: "OUTPUT0".into(),
            datatype: dtype.as_str().into(),
            shape: vec![count as i64],
            data: Bytes::copy_from_slice(body),
        }],
        ..InferResponse::default()
    };
    match encode(&response) {
        Ok(answer) => {
            assert!(fits, "{dtype:?} {body:?} encoded");
            assert!(
                parse(&answer, usize::MAX).is_ok(),
                "answer {answer:?} does not parse"
            );
        }
        Err(e) => assert!(!fits, "{dtype:?} {body:?} refused: {}", e.message),
    }
}
