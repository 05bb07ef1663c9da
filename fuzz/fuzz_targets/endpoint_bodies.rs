//! Fuzz target for the request bodies of the non-infer endpoints
//! (`tensorgate::translate::to_grpc::endpoints`): repository index, load
//! (its `config` and base64 `file:` parameters) and unload, system and
//! CUDA shared-memory registration, trace and log settings, and libb64's
//! lenient base64 decoder they use.
//!
//! Every decoder reads the whole input as its body. Nothing may panic, and:
//! * base64: the output holds 3 bytes per 4 alphabet characters (the
//!   others skipped) plus 0, 1 or 2 for a trailing 1, 2 or 3, and its
//!   complete groups encode back to those characters;
//! * an accepted load carries only `config` (a string without NUL) and
//!   `file:` parameters; an accepted CUDA registration a 64-byte handle;
//!   an accepted system registration a key without NUL; an accepted trace
//!   setting at least one setting.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorgate::proto::inference::model_repository_parameter::ParameterChoice;
use tensorgate::translate::to_grpc::endpoints::{
    base64_decode_lenient, cuda_shm_register, log_settings_post, repository_index, repository_load,
    repository_unload, system_shm_register, trace_setting_post,
};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fuzz_target!(|data: &[u8]| {
    base64(data);
    if let Ok(load) = repository_load("m", data) {
        for (key, value) in &load.parameters {
            match &value.parameter_choice {
                Some(ParameterChoice::StringParam(s)) if key == "config" => {
                    assert!(!s.contains('\0'))
                }
                Some(ParameterChoice::BytesParam(_)) if key.starts_with("file:") => {}
                other => panic!("load parameter {key:?}: {other:?}"),
            }
        }
    }
    let _ = repository_index(data);
    let _ = repository_unload("m", data);
    if let Ok(register) = system_shm_register("r", data) {
        assert!(!register.key.contains('\0'));
    }
    if let Ok(register) = cuda_shm_register("r", data) {
        assert_eq!(register.raw_handle.len(), 64);
    }
    if let Ok(trace) = trace_setting_post("", data) {
        assert!(!trace.settings.is_empty());
    }
    let _ = log_settings_post(data);
});

fn base64(data: &[u8]) {
    let decoded = base64_decode_lenient(data);
    let sextets: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| ALPHABET.contains(b))
        .collect();
    let whole = sextets.len() / 4 * 3;
    let tail = [0, 0, 1, 2][sextets.len() % 4];
    assert_eq!(decoded.len(), whole + tail, "{data:?}");
    let mut encoded = Vec::with_capacity(sextets.len());
    for group in decoded[..whole].chunks_exact(3) {
        let n = u32::from_be_bytes([0, group[0], group[1], group[2]]);
        encoded.extend([18, 12, 6, 0].map(|shift| ALPHABET[(n >> shift) as usize & 63]));
    }
    assert_eq!(encoded, sextets[..whole / 3 * 4], "{data:?}");
}
