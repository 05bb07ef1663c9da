//! Fuzzes the v2 `/infer` body decoder: the binary-extension splitter
//! (`Inference-Header-Content-Length`, `binary_data_size` slicing) and the
//! JSON request decoder. The first byte picks the header length mode; the
//! decoder must never panic and every slice it returns must lie inside the
//! body. The same header is also decoded as a streamed body's (the tail
//! still to come, its length declared or not): the promised sizes must
//! never exceed a declared tail. Differential: the body decodes exactly as
//! by the general reader alone (`decode_general`), so the direct reader
//! of common headers (`v2_request::direct`) only ever takes a header to
//! build what the general reader builds.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tensorgate::model::InputData;
use tensorgate::wire::v2_request::{
    decode, decode_general, decode_streamed, short_tail, Body, DecodeLimits,
};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let body = Bytes::copy_from_slice(rest);
    let ihcl = match mode % 3 {
        0 => None,
        1 => Some(format!("{}", u16::from(mode) * 3 % (rest.len() as u16 + 2))),
        _ => Some(String::from_utf8_lossy(&rest[..rest.len().min(4)]).into_owned()),
    };
    let limits = DecodeLimits { max_input_size: 1 << 20, max_json_depth: 100 };
    let header_len = rest.len() / 2;
    for tail_len in [None, Some((rest.len() - header_len) as u64)] {
        if let Ok(request) = decode_streamed("m", "", &rest[..header_len], tail_len, limits) {
            let promised: u64 = request
                .inputs
                .iter()
                .map(|i| match i.data {
                    InputData::Streamed(n) => n,
                    _ => 0,
                })
                .fold(0, u64::saturating_add);
            assert!(tail_len.is_none_or(|len| promised == len));
            let _ = short_tail(&request, promised / 2);
        }
    }
    let ihcl = ihcl.as_deref().map(str::as_bytes);
    let decoded = decode("m", "", body.clone(), ihcl, limits);
    let general = decode_general("m", "", body.clone(), ihcl, limits);
    assert_eq!(decoded, general);
    if let Ok(Body::Json(request)) = decoded {
        for input in &request.inputs {
            if let InputData::Raw(bytes) = &input.data {
                assert!(bytes.len() <= body.len() || bytes.len() <= 1 << 21);
            }
        }
    }
});
