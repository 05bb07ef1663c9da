//! Fuzzes the v2 `/infer` body decoder: the binary-extension splitter
//! (`Inference-Header-Content-Length`, `binary_data_size` slicing) and the
//! JSON request decoder. The first byte picks the header length mode; the
//! decoder must never panic and every slice it returns must lie inside the
//! body.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tensorgate::model::InputData;
use tensorgate::wire::v2_request::{decode, Body, DecodeLimits};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let body = Bytes::copy_from_slice(rest);
    let ihcl = match mode % 3 {
        0 => None,
        1 => Some(format!("{}", u16::from(mode) * 3 % (rest.len() as u16 + 2))),
        _ => Some(String::from_utf8_lossy(&rest[..rest.len().min(4)]).into_owned()),
    };
    let limits = DecodeLimits { max_input_size: 1 << 20, max_json_depth: 100 };
    if let Ok(Body::Json(request)) = decode("m", "", body.clone(), ihcl.as_deref().map(str::as_bytes), limits) {
        for input in &request.inputs {
            if let InputData::Raw(bytes) = &input.data {
                assert!(bytes.len() <= body.len() || bytes.len() <= 1 << 21);
            }
        }
    }
});
