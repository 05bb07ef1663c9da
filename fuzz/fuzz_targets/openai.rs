//! Fuzz target for the OpenAI front's codecs: the request decoder
//! (`tensorgate::wire::openai::decode`, completions and chat), the model
//! inputs made of an accepted request for both conventions
//! (`tensorgate::translate::to_grpc::openai::model_inputs`), the answer
//! writers over the prompt as generated text, and the reader of an LLM's
//! response (`tensorgate::translate::from_grpc::openai::piece`) over raw
//! output bytes.
//!
//! The input is `<mode byte> <body>`; the mode's low bit picks the
//! endpoint. Nothing may panic, and:
//! * an accepted request names a model;
//! * every input made is one the model declares, with its datatype and
//!   exactly the bytes its shape holds (BYTES: that many length-prefixed
//!   elements); the vLLM `sampling_parameters` parse as a JSON object;
//! * every answer written (whole, chunk, usage chunk) parses as JSON;
//! * the body as `text_output`'s bytes is read exactly when it is one
//!   length-prefixed element of UTF-8, and then to that text.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tensorgate::config::OpenAiBackend;
use tensorgate::model::{
    element_count, DataType, DeclaredType, InferResponse, InputData, ModelInfo, OutputTensor,
    TensorInfo,
};
use tensorgate::translate::from_grpc::openai::piece;
use tensorgate::translate::to_grpc::openai::model_inputs;
use tensorgate::wire::json::{parse, Value};
use tensorgate::wire::openai::{decode, Answering, Endpoint, Prompt, Usage};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let endpoint = if mode & 1 == 0 {
        Endpoint::Completions
    } else {
        Endpoint::Chat
    };
    requests(endpoint, body);
    response(body);
});

fn tensor(name: &str, datatype: DataType, dims: &[i64]) -> TensorInfo {
    TensorInfo {
        name: name.into(),
        datatype: Some(datatype),
        dims: dims.to_vec(),
        optional: true,
    }
}

fn models() -> [(OpenAiBackend, ModelInfo); 2] {
    use DataType::*;
    let flags = [
        "stream",
        "exclude_input_in_output",
        "return_num_input_tokens",
    ];
    let mut vllm = vec![
        tensor("text_input", Bytes, &[1]),
        tensor("sampling_parameters", Bytes, &[1]),
    ];
    vllm.extend(flags.iter().map(|f| tensor(f, Bool, &[1])));
    let mut trtllm = vec![
        tensor("text_input", Bytes, &[1]),
        tensor("max_tokens", Int32, &[1]),
        tensor("temperature", Fp32, &[1]),
        tensor("top_k", Int32, &[1]),
        tensor("seed", Uint64, &[1]),
        tensor("stop_words", Bytes, &[-1]),
    ];
    trtllm.extend(flags.iter().map(|f| tensor(f, Bool, &[1])));
    let info = |max_batch_size, inputs| ModelInfo {
        max_batch_size,
        decoupled: true,
        inputs,
        outputs: vec![],
    };
    [
        (OpenAiBackend::Vllm, info(0, vllm)),
        (OpenAiBackend::Tensorrtllm, info(8, trtllm)),
    ]
}

/// The elements of a BYTES tensor, or `None` when its framing is broken.
fn bytes_elements(mut data: &[u8]) -> Option<Vec<&[u8]>> {
    let mut elements = Vec::new();
    while !data.is_empty() {
        let (len, rest) = data.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        elements.push(rest.get(..len)?);
        data = &rest[len..];
    }
    Some(elements)
}

fn json_parses(bytes: &[u8]) -> bool {
    matches!(parse(bytes, usize::MAX), Ok(Value::Object(_)))
}

fn requests(endpoint: Endpoint, body: &[u8]) {
    let Ok(generation) = decode(endpoint, body) else {
        return;
    };
    assert!(!generation.model.is_empty());
    let prompt = match &generation.prompt {
        Prompt::Text(text) => text.clone(),
        Prompt::Chat(messages) => format!("{} messages", messages.len()),
    };
    for (backend, info) in models() {
        let Ok(request) = model_inputs(backend, "m", &info, &generation, prompt.clone(), 16) else {
            continue;
        };
        for input in &request.inputs {
            let signature = info.input(&input.name).expect("an input of the model");
            let dtype = signature.datatype.expect("a known datatype");
            assert_eq!(input.datatype.as_str(), dtype.as_str());
            let count = element_count(&input.shape).expect("a countable shape");
            let InputData::Raw(data) = &input.data else {
                panic!("not raw: {input:?}")
            };
            match dtype.element_size() {
                Some(size) => assert_eq!(data.len() as u64, count * size as u64),
                None => {
                    let elements = bytes_elements(data).expect("framed");
                    assert_eq!(elements.len() as u64, count);
                    if input.name == "sampling_parameters" {
                        assert!(json_parses(elements[0]), "{:?}", elements[0]);
                    }
                }
            }
        }
    }
    let answering = Answering::new(endpoint, "cmpl-0".into(), 0, generation.model.clone());
    let usage = Some(Usage::new(1, 2));
    assert!(json_parses(&answering.whole(&prompt, "stop", usage)));
    for event in [
        answering.chunk(&prompt, true, None, true),
        answering.chunk("", false, Some("length"), false),
        answering.usage_chunk(usage),
    ] {
        let json = event
            .strip_prefix(b"data: ")
            .and_then(|e| e.strip_suffix(b"\n\n"))
            .expect("an SSE event");
        assert!(json_parses(json), "{event:?}");
    }
}

fn response(body: &[u8]) {
    let response = InferResponse {
        outputs: vec![OutputTensor {
            name: "text_output".into(),
            datatype: DeclaredType::Known(DataType::Bytes),
            shape: vec![1],
            data: Bytes::copy_from_slice(body),
        }],
        ..InferResponse::default()
    };
    let one = bytes_elements(body)
        .filter(|e| e.len() == 1)
        .and_then(|e| std::str::from_utf8(e[0]).ok().map(str::to_string));
    match (piece(&response), one) {
        (Ok(piece), Some(text)) => assert_eq!(piece.text, text),
        (Err(_), None) => {}
        (got, want) => panic!("{body:?}: {got:?}, want {want:?}"),
    }
}
