//! HTTP request bodies of the non-infer endpoints (v2 §1 rows 1–18) to
//! `GRPCInferenceService` request messages. Pure functions, no I/O.
//!
//! Each body is read the way Triton 2.51's HTTP frontend reads it
//! (`src/http_server.cc`, `TritonJson` accessors over rapidjson), in the same
//! order, so the first failure is the one Triton reports, with its text:
//!
//! * JSON accessor failures (wrong type, missing member, malformed JSON) are
//!   [`Error::json`] (Triton answers 500; we answer 400, a documented
//!   difference), e.g. `attempt to access JSON non-boolean as boolean`;
//! * semantic checks are [`Error::invalid`] / [`Error::unsupported`] with
//!   Triton's status.
//!
//! Where the gRPC handler would validate the same thing with a different text
//! (trace `trace_count` below -1, log `log_format`), the check is done here
//! so the client sees the HTTP text. Paths (model, region, action) are the
//! router's business; callers pass the decoded path segments.
//!
//! The decoders of request bodies are `pub` for their fuzz target
//! (fuzz/fuzz_targets/endpoint_bodies.rs); the rest is `pub(crate)`.

use std::collections::HashMap;

use bytes::Bytes;

use crate::error::{Error, Kind, Result};
use crate::proto::inference::{
    log_settings_request, model_repository_parameter::ParameterChoice as RepoParam,
    trace_setting_request, CudaSharedMemoryRegisterRequest, CudaSharedMemoryStatusRequest,
    CudaSharedMemoryUnregisterRequest, LogSettingsRequest, ModelConfigRequest,
    ModelMetadataRequest, ModelReadyRequest, ModelRepositoryParameter, ModelStatisticsRequest,
    RepositoryIndexRequest, RepositoryModelLoadRequest, RepositoryModelUnloadRequest,
    ServerMetadataRequest, SystemSharedMemoryRegisterRequest, SystemSharedMemoryStatusRequest,
    SystemSharedMemoryUnregisterRequest, TraceSettingRequest,
};
use crate::wire::json::{self, Value};
use crate::wire::json_access::{
    self as access, as_array, as_bool, as_str, as_uint, lossy, member, members,
};

/// `EVBufferToJson`: the whole body as one JSON document.
fn parse_body(body: &[u8]) -> Result<Value> {
    access::parse(body, json::MAX_DEPTH)
}

/// Text up to the first NUL: what Triton keeps where it passes a JSON string
/// on as a C string. Invalid UTF-8 is replaced (gRPC strings are UTF-8).
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Base64 decoding exactly as libb64's `base64_decode_block` (used by Triton
/// for load-API files and CUDA handles): every byte outside
/// `A-Z a-z 0-9 + /` (including `=` padding, whitespace, NUL) is skipped, and
/// a trailing incomplete group yields only its complete bytes (1 leftover
/// sextet: nothing; 2: one byte; 3: two bytes). Never fails.
///
/// Hand-written, not the `base64` crate (which the encoder in
/// `from_grpc::model_config` uses): that crate's decoders refuse what
/// libb64 skips (stray bytes, padding in the middle, a lone trailing
/// sextet), so a body Triton accepts would be refused here, or decode to
/// other bytes. The load API's files and the CUDA handles must come out
/// byte for byte as Triton decodes them (`base64_is_libb64_lenient` pins
/// the cases).
pub fn base64_decode_lenient(input: &[u8]) -> Vec<u8> {
    fn sextet(b: u8) -> Option<u32> {
        match b {
            b'A'..=b'Z' => Some(u32::from(b - b'A')),
            b'a'..=b'z' => Some(u32::from(b - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(b - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(input.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut n = 0;
    for v in input.iter().filter_map(|&b| sextet(b)) {
        acc = (acc << 6) | v;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            n = 0;
        }
    }
    match n {
        2 => out.push((acc >> 4) as u8),
        3 => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => {}
    }
    out
}

// ---------------------------------------------------------------------------
// Health, metadata, config, statistics: no body, only path segments.

/// `GET /v2`.
pub(crate) fn server_metadata() -> ServerMetadataRequest {
    ServerMetadataRequest {}
}

/// `GET /v2/models/{m}[/versions/{v}]/ready`. `version` is the path segment
/// verbatim (`""` when absent; Triton parses `01` like `1` on both fronts).
pub(crate) fn model_ready(name: &str, version: &str) -> ModelReadyRequest {
    ModelReadyRequest {
        name: name.to_owned(),
        version: version.to_owned(),
    }
}

/// `GET /v2/models/{m}[/versions/{v}]` (see [`model_ready`] for `version`).
pub(crate) fn model_metadata(name: &str, version: &str) -> ModelMetadataRequest {
    ModelMetadataRequest {
        name: name.to_owned(),
        version: version.to_owned(),
    }
}

/// `GET /v2/models/{m}[/versions/{v}]/config` (see [`model_ready`]).
pub(crate) fn model_config(name: &str, version: &str) -> ModelConfigRequest {
    ModelConfigRequest {
        name: name.to_owned(),
        version: version.to_owned(),
    }
}

/// `GET /v2/models[/{m}[/versions/{v}]]/stats`: `name` `""` = all models,
/// `version` `""` = all ready versions.
pub(crate) fn model_statistics(name: &str, version: &str) -> ModelStatisticsRequest {
    ModelStatisticsRequest {
        name: name.to_owned(),
        version: version.to_owned(),
    }
}

// ---------------------------------------------------------------------------
// Model repository (rows 8–10)

/// `POST /v2/repository[/{r}]/index`. An empty body means defaults; otherwise
/// the body must parse, and a `"ready"` member (of an object body) must be a
/// bool (`attempt to access JSON non-boolean as boolean`, `K45`; `null`
/// included). A non-object body is ignored. The repository segment is
/// ignored by Triton, so `repository_name` stays empty.
pub fn repository_index(body: &[u8]) -> Result<RepositoryIndexRequest> {
    let mut ready = false;
    if !body.is_empty() {
        let doc = parse_body(body)?;
        if let Some(v) = doc.get("ready") {
            ready = as_bool(v)?;
        }
    }
    Ok(RepositoryIndexRequest {
        repository_name: String::new(),
        ready,
    })
}

/// `POST /v2/repository/models/{m}/load` body
/// `{"parameters":{"config":"<json>","file:<path>":"<base64>"}}`.
///
/// As Triton 2.51: an empty body or a body without `parameters` loads with
/// no parameters; `parameters` must be an object (`attempt to get members
/// for non-object`); every member (in document order) must be a string
/// (`attempt to access JSON non-string as string`); `config` becomes a
/// `string_param` (cut at the first NUL, as Triton passes a C string),
/// `file:…` a `bytes_param` decoded with libb64's lenient rules
/// ([`base64_decode_lenient`]); any other key is rejected with Triton's text
/// `unexpected error on creating Triton parameter` (Triton: 500; here 400).
/// A 501 for an explicit repository segment is the router's (checked before
/// the body).
pub fn repository_load(model_name: &str, body: &[u8]) -> Result<RepositoryModelLoadRequest> {
    let mut parameters = HashMap::new();
    if !body.is_empty() {
        let doc = parse_body(body)?;
        if let Some(params) = doc.get("parameters") {
            for (raw_key, _) in members(params)? {
                // `Members()` hands out C strings, looked up again by name.
                let key = &raw_key[..raw_key
                    .iter()
                    .position(|&b| b == 0)
                    .unwrap_or(raw_key.len())];
                let value = as_str(member(params, key)?)?;
                let choice = if key == b"config" {
                    RepoParam::StringParam(c_string(value))
                } else if key.starts_with(b"file:") {
                    RepoParam::BytesParam(Bytes::from(base64_decode_lenient(value)))
                } else {
                    return Err(Error::invalid(
                        "unexpected error on creating Triton parameter",
                    ));
                };
                parameters.insert(
                    lossy(key),
                    ModelRepositoryParameter {
                        parameter_choice: Some(choice),
                    },
                );
            }
        }
    }
    Ok(RepositoryModelLoadRequest {
        repository_name: String::new(),
        model_name: model_name.to_owned(),
        parameters,
    })
}

/// `POST /v2/repository/models/{m}/unload`, body
/// `{"parameters":{"unload_dependents":bool}}`. Never fails: Triton 2.51
/// overwrites any body error (malformed JSON, non-bool value) with the
/// unload result, so the model is unloaded without dependents (`X15`).
pub fn repository_unload(model_name: &str, body: &[u8]) -> RepositoryModelUnloadRequest {
    let mut parameters = HashMap::new();
    if !body.is_empty() {
        let flag = parse_body(body).ok().and_then(|doc| {
            doc.get("parameters")
                .and_then(|p| p.get("unload_dependents"))
                .and_then(Value::as_bool)
        });
        if let Some(flag) = flag {
            parameters.insert(
                "unload_dependents".to_owned(),
                ModelRepositoryParameter {
                    parameter_choice: Some(RepoParam::BoolParam(flag)),
                },
            );
        }
    }
    RepositoryModelUnloadRequest {
        repository_name: String::new(),
        model_name: model_name.to_owned(),
        parameters,
    }
}

// ---------------------------------------------------------------------------
// Shared memory (rows 11–16)

/// `GET /v2/systemsharedmemory[/region/{r}]/status` (`""` = all regions).
pub(crate) fn system_shm_status(region: &str) -> SystemSharedMemoryStatusRequest {
    SystemSharedMemoryStatusRequest {
        name: region.to_owned(),
    }
}

/// `POST /v2/systemsharedmemory[/region/{r}]/unregister` (`""` = all).
pub(crate) fn system_shm_unregister(region: &str) -> SystemSharedMemoryUnregisterRequest {
    SystemSharedMemoryUnregisterRequest {
        name: region.to_owned(),
    }
}

/// `POST /v2/systemsharedmemory[/region/{r}]/register`, body
/// `{"key":"…","offset":N,"byte_size":N}`, checked in Triton's order: region
/// present (`'region name' is necessary …`, before the body is read), body
/// parses (empty → `… The document is empty. at 0`), `key` present
/// (`Shared memory register request has no 'key' field`) and a string,
/// optional `offset` an unsigned integer, `byte_size` present
/// (`… has no 'byte_size' field`) and an unsigned integer. The key is cut at
/// the first NUL (Triton keeps a C string).
pub fn system_shm_register(region: &str, body: &[u8]) -> Result<SystemSharedMemoryRegisterRequest> {
    if region.is_empty() {
        return Err(Error::invalid(
            "'region name' is necessary to register system shared memory region",
        ));
    }
    let doc = parse_body(body)?;
    let key = doc
        .get("key")
        .ok_or_else(|| Error::invalid("Shared memory register request has no 'key' field"))?;
    let key = c_string(as_str(key)?);
    let offset = match doc.get("offset") {
        Some(v) => as_uint(v)?,
        None => 0,
    };
    let byte_size = doc
        .get("byte_size")
        .ok_or_else(|| Error::invalid("Shared memory register request has no 'byte_size' field"))?;
    let byte_size = as_uint(byte_size)?;
    Ok(SystemSharedMemoryRegisterRequest {
        name: region.to_owned(),
        key,
        offset,
        byte_size,
    })
}

/// `GET /v2/cudasharedmemory[/region/{r}]/status` (`""` = all regions).
pub(crate) fn cuda_shm_status(region: &str) -> CudaSharedMemoryStatusRequest {
    CudaSharedMemoryStatusRequest {
        name: region.to_owned(),
    }
}

/// `POST /v2/cudasharedmemory[/region/{r}]/unregister` (`""` = all).
pub(crate) fn cuda_shm_unregister(region: &str) -> CudaSharedMemoryUnregisterRequest {
    CudaSharedMemoryUnregisterRequest {
        name: region.to_owned(),
    }
}

/// Size of `cudaIpcMemHandle_t`.
const CUDA_IPC_HANDLE_SIZE: usize = 64;

/// `POST /v2/cudasharedmemory/region/{r}/register`, body
/// `{"raw_handle":{"b64":"…"},"device_id":N,"byte_size":N}`, checked as a
/// GPU build of Triton does: region present, body parses, `raw_handle`
/// present (`Shared memory register request has no 'raw_handle' field`),
/// `raw_handle.b64` a string, `byte_size` then `device_id` unsigned integers
/// (missing → `attempt to access non-existing object member '<m>'`), and the
/// libb64-decoded handle exactly 64 bytes (`'raw_handle' must be a valid
/// base64 encoded cudaIpcMemHandle_t`). (A Triton built without GPU support
/// ignores the body and answers `failed to register CUDA shared memory
/// region: '<r>', GPUs not supported`; its gRPC front gives the same answer
/// for any request that passes these checks.)
pub fn cuda_shm_register(region: &str, body: &[u8]) -> Result<CudaSharedMemoryRegisterRequest> {
    if region.is_empty() {
        return Err(Error::invalid(
            "'region name' is necessary to register cuda shared memory region",
        ));
    }
    let doc = parse_body(body)?;
    let raw_handle = doc.get("raw_handle").ok_or_else(|| {
        Error::invalid("Shared memory register request has no 'raw_handle' field")
    })?;
    let b64 = as_str(member(raw_handle, "b64")?)?;
    let byte_size = as_uint(member(&doc, "byte_size")?)?;
    let device_id = as_uint(member(&doc, "device_id")?)?;
    let handle = base64_decode_lenient(b64);
    if handle.len() != CUDA_IPC_HANDLE_SIZE {
        return Err(Error::invalid(
            "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t",
        ));
    }
    Ok(CudaSharedMemoryRegisterRequest {
        name: region.to_owned(),
        raw_handle: Bytes::from(handle),
        // Triton passes the uint64 on as the int64 proto field / an int.
        device_id: device_id as i64,
        byte_size,
    })
}

// ---------------------------------------------------------------------------
// Trace settings (row 17)

/// `std::stoi` failure kinds (`std::invalid_argument`, `std::out_of_range`).
#[derive(Debug, PartialEq, Eq)]
enum StoiError {
    Invalid,
    OutOfRange,
}

/// `std::stoi(s)`: `strtol(s, &end, 10)` (leading C-locale white space,
/// optional sign, decimal digits, trailing garbage ignored), then the `int`
/// range check.
fn stoi(s: &[u8]) -> std::result::Result<i32, StoiError> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r') {
        i += 1;
    }
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits_start = i;
    // Magnitude saturates once it is certainly out of `long` range.
    let mut magnitude: u128 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        magnitude = (magnitude * 10 + u128::from(s[i] - b'0')).min(u128::from(u64::MAX));
        i += 1;
    }
    if i == digits_start {
        return Err(StoiError::Invalid);
    }
    let value = if negative {
        -(magnitude as i128)
    } else {
        magnitude as i128
    };
    i32::try_from(value).map_err(|_| StoiError::OutOfRange)
}

/// The smallest `trace_count` Triton accepts (`TraceManager::MIN_TRACE_COUNT_VALUE`).
const MIN_TRACE_COUNT: i32 = -1;

fn trace_values(values: Vec<String>) -> trace_setting_request::SettingValue {
    trace_setting_request::SettingValue { value: values }
}

/// A `trace_rate` / `log_frequency` string parsed as Triton's HTTP front
/// does (`stoi`, stored as `uint32`), forwarded as the canonical decimal of
/// the parsed `int` (the gRPC front parses it back to the same value).
fn trace_uint_setting(name: &str, s: &[u8]) -> Result<String> {
    match stoi(s) {
        Ok(v) => Ok(v.to_string()),
        Err(StoiError::Invalid) => Err(Error::invalid(format!(
            "Unable to parse '{name}', got: {}",
            String::from_utf8_lossy(s)
        ))),
        Err(StoiError::OutOfRange) => Err(Error::invalid(format!(
            "Unable to parse '{name}', value is out of range [ 0, 4294967295 ], got: {}",
            String::from_utf8_lossy(s)
        ))),
    }
}

/// `GET /v2/trace/setting`, `GET /v2/models/{m}/trace/setting` (`model_name`
/// `""` = global): no settings, i.e. "read the current setting".
pub(crate) fn trace_setting_get(model_name: &str) -> TraceSettingRequest {
    TraceSettingRequest {
        settings: HashMap::new(),
        model_name: model_name.to_owned(),
    }
}

/// `POST …/trace/setting`: the body is read as Triton 2.51's HTTP front does,
/// all checks before any update (so a failure changes nothing):
///
/// * the body must parse (an empty body is a parse error in 2.51); members of
///   a non-object body, and unknown members, are ignored;
/// * `trace_file` present (any value) → 501 `trace file location can not be
///   updated through network protocol`;
/// * `trace_level`: `null` clears the model override (empty value list);
///   otherwise an array of strings (`attempt to access JSON non-array as
///   array` / `… non-string as string`); `"OFF"` must be alone (`Expect only
///   one trace level 'OFF' is specified`); unknown strings are ignored;
/// * `trace_rate`, `trace_count`, `log_frequency`: `null` clears, otherwise a
///   string parsed with `std::stoi` (`Unable to parse 'trace_rate', got: abc`,
///   `… value is out of range [ 0, 4294967295 ], got: …`; `trace_count` must
///   be >= -1: `Unable to parse 'trace_count'. Expecting value >= -1, got:-5`,
///   exactly so, without a space, unlike the gRPC front's text).
///
/// Values are forwarded in canonical form. The HTTP front always runs an
/// update on POST, while the gRPC front skips it when no setting is given;
/// so a POST that sets nothing carries `trace_level: [""]`, a value Triton
/// ignores, to keep that (observable only through per-model trace counts)
/// behaviour.
pub fn trace_setting_post(model_name: &str, body: &[u8]) -> Result<TraceSettingRequest> {
    let doc = parse_body(body)?;
    let mut settings = HashMap::new();

    if doc.get("trace_file").is_some() {
        return Err(Error::unsupported(
            "trace file location can not be updated through network protocol",
        ));
    }

    if let Some(level) = doc.get("trace_level") {
        if matches!(level, Value::Null) {
            settings.insert("trace_level".to_owned(), trace_values(Vec::new()));
        } else {
            let items = as_array(level)?;
            let (mut off, mut timestamps, mut tensors) = (false, false, false);
            for item in items {
                match as_str(&item)? {
                    b"OFF" if items.len() == 1 => off = true,
                    b"OFF" => {
                        return Err(Error::invalid(
                            "Expect only one trace level 'OFF' is specified",
                        ))
                    }
                    b"TIMESTAMPS" => timestamps = true,
                    b"TENSORS" => tensors = true,
                    _ => {}
                }
            }
            let mut values = Vec::new();
            if off {
                values.push("OFF".to_owned());
            }
            if timestamps {
                values.push("TIMESTAMPS".to_owned());
            }
            if tensors {
                values.push("TENSORS".to_owned());
            }
            if !values.is_empty() {
                settings.insert("trace_level".to_owned(), trace_values(values));
            }
        }
    }

    if let Some(rate) = doc.get("trace_rate") {
        let values = match rate {
            Value::Null => Vec::new(),
            v => vec![trace_uint_setting("trace_rate", as_str(v)?)?],
        };
        settings.insert("trace_rate".to_owned(), trace_values(values));
    }

    if let Some(count) = doc.get("trace_count") {
        let values = match count {
            Value::Null => Vec::new(),
            v => {
                let s = as_str(v)?;
                let parsed = match stoi(s) {
                    Ok(n) if n < MIN_TRACE_COUNT => {
                        return Err(Error::invalid(format!(
                            "Unable to parse 'trace_count'. Expecting value >= {MIN_TRACE_COUNT}, got:{}",
                            String::from_utf8_lossy(s)
                        )))
                    }
                    Ok(n) => n,
                    Err(StoiError::Invalid) => {
                        return Err(Error::invalid(format!(
                            "Unable to parse 'trace_count', got: {}",
                            String::from_utf8_lossy(s)
                        )))
                    }
                    Err(StoiError::OutOfRange) => {
                        return Err(Error::invalid(format!(
                            "Unable to parse 'trace_count', value is out of range [ {MIN_TRACE_COUNT}, {} ], got: {}",
                            i32::MAX,
                            String::from_utf8_lossy(s)
                        )))
                    }
                };
                vec![parsed.to_string()]
            }
        };
        settings.insert("trace_count".to_owned(), trace_values(values));
    }

    if let Some(freq) = doc.get("log_frequency") {
        let values = match freq {
            Value::Null => Vec::new(),
            v => vec![trace_uint_setting("log_frequency", as_str(v)?)?],
        };
        settings.insert("log_frequency".to_owned(), trace_values(values));
    }

    if settings.is_empty() {
        settings.insert("trace_level".to_owned(), trace_values(vec![String::new()]));
    }
    Ok(TraceSettingRequest {
        settings,
        model_name: model_name.to_owned(),
    })
}

// ---------------------------------------------------------------------------
// Log settings (row 18)

/// `GET /v2/logging`: no settings, i.e. "read the current settings".
pub(crate) fn log_settings_get() -> LogSettingsRequest {
    LogSettingsRequest {
        settings: HashMap::new(),
    }
}

/// What a `POST /v2/logging` body asks for. Triton applies the settings one
/// by one (`log_file`, `log_info`, `log_warning`, `log_error`,
/// `log_verbose_level`, `log_format`) and stops at the first bad one, keeping
/// those before it. So: if `request.settings` is non-empty, send `request`;
/// then, if `error` is set, answer it (whatever the upstream said), else
/// render the upstream's response.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSettingsUpdate {
    /// The settings Triton would have applied (possibly none).
    pub request: LogSettingsRequest,
    /// The error Triton would answer after applying `request`.
    pub error: Option<Error>,
}

/// `POST /v2/logging` body → [`LogSettingsUpdate`]. Each key may be `null`
/// (ignored). `log_file` non-null → 501 `log file location can not be
/// updated through network protocol`; `log_info`/`log_warning`/`log_error`
/// bools; `log_verbose_level` an unsigned integer (Triton keeps its low 32
/// bits); `log_format` a string, `"default"` or `"ISO8601"`, else
/// `invalid argument for --log_format, got: <v>` (Triton: 503; here 400, as
/// it is the client's mistake). Body parse errors apply nothing.
pub fn log_settings_post(body: &[u8]) -> LogSettingsUpdate {
    use log_settings_request::setting_value::ParameterChoice as P;
    let mut settings = HashMap::new();
    let error = (|| -> Result<()> {
        let doc = parse_body(body)?;
        let present = |key: &str| doc.get(key).filter(|v| !matches!(v, Value::Null));
        let mut set = |key: &str, choice: P| {
            settings.insert(
                key.to_owned(),
                log_settings_request::SettingValue {
                    parameter_choice: Some(choice),
                },
            );
        };
        if present("log_file").is_some() {
            return Err(Error::unsupported(
                "log file location can not be updated through network protocol",
            ));
        }
        for key in ["log_info", "log_warning", "log_error"] {
            if let Some(v) = present(key) {
                set(key, P::BoolParam(as_bool(v)?));
            }
        }
        if let Some(v) = present("log_verbose_level") {
            // Triton casts the uint64 to int32: only the low 32 bits count.
            set("log_verbose_level", P::Uint32Param(as_uint(v)? as u32));
        }
        if let Some(v) = present("log_format") {
            let format = as_str(v)?;
            if format != b"default" && format != b"ISO8601" {
                return Err(Error::new(
                    Kind::InvalidArg,
                    format!(
                        "invalid argument for --log_format, got: {}",
                        String::from_utf8_lossy(format)
                    ),
                ));
            }
            set("log_format", P::StringParam(lossy(format)));
        }
        Ok(())
    })()
    .err();
    LogSettingsUpdate {
        request: LogSettingsRequest { settings },
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::json_access::{NOT_ARRAY, NOT_BOOL, NOT_MEMBERS, NOT_STRING, NOT_UINT};

    fn err(r: Result<impl std::fmt::Debug>) -> (u16, String) {
        let e = r.expect_err("expected an error");
        (e.status(), e.message)
    }

    const EMPTY_DOC: &str = "failed to parse the request JSON buffer: The document is empty. at 0";

    #[test]
    fn base64_is_libb64_lenient() {
        assert_eq!(base64_decode_lenient(b"aGVsbG8="), b"hello");
        assert_eq!(base64_decode_lenient(b"aGVs\nbG8"), b"hello");
        assert_eq!(base64_decode_lenient(b"=a=G=V=s="), b"hel");
        assert_eq!(base64_decode_lenient(b"QQ"), b"A");
        assert_eq!(base64_decode_lenient(b"QUI"), b"AB");
        assert_eq!(base64_decode_lenient(b"Q"), b"");
        assert_eq!(base64_decode_lenient(b"\xff\x00-_*"), b"");
        assert_eq!(base64_decode_lenient(b"+/+/"), [0xFB, 0xFF, 0xBF]);
    }

    #[test]
    fn stoi_matches_cpp() {
        assert_eq!(stoi(b"12"), Ok(12));
        assert_eq!(stoi(b" \t\n\x0b\x0c\r+12abc"), Ok(12));
        assert_eq!(stoi(b"-5"), Ok(-5));
        assert_eq!(stoi(b"-0"), Ok(0));
        assert_eq!(stoi(b"2147483647"), Ok(i32::MAX));
        assert_eq!(stoi(b"-2147483648"), Ok(i32::MIN));
        assert_eq!(stoi(b"2147483648"), Err(StoiError::OutOfRange));
        assert_eq!(
            stoi(b"99999999999999999999999999999999999999999"),
            Err(StoiError::OutOfRange)
        );
        assert_eq!(stoi(b"abc"), Err(StoiError::Invalid));
        assert_eq!(stoi(b""), Err(StoiError::Invalid));
        assert_eq!(stoi(b"- 1"), Err(StoiError::Invalid));
        assert_eq!(stoi(b"0x10"), Ok(0));
    }

    #[test]
    fn index_body() {
        assert!(!repository_index(b"").unwrap().ready);
        assert!(repository_index(br#"{"ready":true}"#).unwrap().ready);
        assert!(!repository_index(br#"{"ready":false,"x":1}"#).unwrap().ready);
        assert!(!repository_index(b"[]").unwrap().ready);
        for bad in [
            &br#"{"ready":null}"#[..],
            br#"{"ready":1}"#,
            br#"{"ready":"true"}"#,
        ] {
            assert_eq!(
                err(repository_index(bad)),
                (400, "attempt to access JSON non-boolean as boolean".into())
            );
        }
        assert_eq!(
            err(repository_index(b" ")),
            (
                400,
                "failed to parse the request JSON buffer: The document is empty. at 1".into()
            )
        );
        assert_eq!(repository_index(b"").unwrap().repository_name, "");
    }

    #[test]
    fn load_body() {
        let r = repository_load("m", b"").unwrap();
        assert_eq!(r.model_name, "m");
        assert!(r.parameters.is_empty());
        assert!(repository_load("m", b"[1]").unwrap().parameters.is_empty());
        assert!(repository_load("m", br#"{"parameters":{}}"#)
            .unwrap()
            .parameters
            .is_empty());

        let r = repository_load(
            "m",
            br#"{"parameters":{"config":"{\"backend\":\"python\"}\u0000tail","file:1/model.py":"aGVs\nbG8="}}"#,
        )
        .unwrap();
        assert_eq!(r.parameters.len(), 2);
        assert_eq!(
            r.parameters["config"].parameter_choice,
            Some(RepoParam::StringParam(r#"{"backend":"python"}"#.into()))
        );
        assert_eq!(
            r.parameters["file:1/model.py"].parameter_choice,
            Some(RepoParam::BytesParam(Bytes::from_static(b"hello")))
        );

        // Texts probed on Triton 2.51.
        assert_eq!(
            err(repository_load("m", br#"{"parameters":{"foo":"x"}}"#)),
            (400, "unexpected error on creating Triton parameter".into())
        );
        assert_eq!(
            err(repository_load("m", br#"{"parameters":{"foo":1}}"#)),
            (400, NOT_STRING.into())
        );
        assert_eq!(
            err(repository_load("m", br#"{"parameters":{"config":null}}"#)),
            (400, NOT_STRING.into())
        );
        assert_eq!(
            err(repository_load("m", br#"{"parameters":[]}"#)),
            (400, NOT_MEMBERS.into())
        );
        assert_eq!(err(repository_load("m", b"{")).0, 400);
        // Duplicate keys: Triton reads the first value each time.
        let r = repository_load("m", br#"{"parameters":{"config":"a","config":2}}"#).unwrap();
        assert_eq!(
            r.parameters["config"].parameter_choice,
            Some(RepoParam::StringParam("a".into()))
        );
    }

    #[test]
    fn unload_body_never_fails() {
        let flag = |body: &[u8]| {
            repository_unload("m", body)
                .parameters
                .get("unload_dependents")
                .and_then(|p| p.parameter_choice.clone())
        };
        assert_eq!(flag(b""), None);
        assert_eq!(flag(b"{"), None);
        assert_eq!(flag(br#"{"parameters":{"unload_dependents":"yes"}}"#), None);
        assert_eq!(
            flag(br#"{"parameters":{"unload_dependents":true}}"#),
            Some(RepoParam::BoolParam(true))
        );
        assert_eq!(
            flag(br#"{"parameters":{"unload_dependents":false}}"#),
            Some(RepoParam::BoolParam(false))
        );
        assert_eq!(repository_unload("m", b"").model_name, "m");
    }

    #[test]
    fn system_shm_register_body() {
        let r = system_shm_register("r", br#"{"key":"/k","offset":8,"byte_size":64}"#).unwrap();
        assert_eq!(
            (r.name.as_str(), r.key.as_str(), r.offset, r.byte_size),
            ("r", "/k", 8, 64)
        );
        let r = system_shm_register("r", br#"{"byte_size":64,"key":"/k\u0000x"}"#).unwrap();
        assert_eq!((r.key.as_str(), r.offset), ("/k", 0));

        let cases: [(&str, &[u8], u16, &str); 9] = [
            (
                "",
                b"{}",
                400,
                "'region name' is necessary to register system shared memory region",
            ),
            ("r", b"", 400, EMPTY_DOC),
            (
                "r",
                b"{}",
                400,
                "Shared memory register request has no 'key' field",
            ),
            (
                "r",
                b"[]",
                400,
                "Shared memory register request has no 'key' field",
            ),
            ("r", br#"{"key":1,"byte_size":1}"#, 400, NOT_STRING),
            (
                "r",
                br#"{"key":"k","offset":-1,"byte_size":1}"#,
                400,
                NOT_UINT,
            ),
            (
                "r",
                br#"{"key":"k","offset":1.0,"byte_size":1}"#,
                400,
                NOT_UINT,
            ),
            (
                "r",
                br#"{"key":"k"}"#,
                400,
                "Shared memory register request has no 'byte_size' field",
            ),
            ("r", br#"{"key":"k","byte_size":"1"}"#, 400, NOT_UINT),
        ];
        for (region, body, status, text) in cases {
            assert_eq!(
                err(system_shm_register(region, body)),
                (status, text.into()),
                "{body:?}"
            );
        }
        assert_eq!(system_shm_status("").name, "");
        assert_eq!(system_shm_unregister("x").name, "x");
    }

    #[test]
    fn cuda_shm_register_body() {
        let handle = "QUJD".repeat(21) + "QQ=="; // 63 + 1 bytes
        let body = format!(r#"{{"raw_handle":{{"b64":"{handle}"}},"device_id":1,"byte_size":10}}"#);
        let r = cuda_shm_register("g", body.as_bytes()).unwrap();
        assert_eq!(r.raw_handle.len(), 64);
        assert_eq!((r.device_id, r.byte_size), (1, 10));

        let cases: [(&str, &[u8], &str); 7] = [
            (
                "",
                b"",
                "'region name' is necessary to register cuda shared memory region",
            ),
            ("g", b"", EMPTY_DOC),
            (
                "g",
                b"{}",
                "Shared memory register request has no 'raw_handle' field",
            ),
            (
                "g",
                br#"{"raw_handle":"x"}"#,
                "attempt to access non-existing object member 'b64'",
            ),
            ("g", br#"{"raw_handle":{"b64":1}}"#, NOT_STRING),
            (
                "g",
                br#"{"raw_handle":{"b64":""},"device_id":0}"#,
                "attempt to access non-existing object member 'byte_size'",
            ),
            (
                "g",
                br#"{"raw_handle":{"b64":""},"device_id":0,"byte_size":1}"#,
                "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t",
            ),
        ];
        for (region, body, text) in cases {
            assert_eq!(err(cuda_shm_register(region, body)).1, text, "{body:?}");
        }
        assert_eq!(
            err(cuda_shm_register(
                "g",
                br#"{"raw_handle":{"b64":""},"byte_size":1}"#
            ))
            .1,
            "attempt to access non-existing object member 'device_id'"
        );
        assert_eq!(cuda_shm_status("g").name, "g");
        assert_eq!(cuda_shm_unregister("").name, "");
    }

    fn trace(body: &[u8]) -> Result<Vec<(String, Vec<String>)>> {
        let r = trace_setting_post("m", body)?;
        assert_eq!(r.model_name, "m");
        let mut v: Vec<_> = r.settings.into_iter().map(|(k, v)| (k, v.value)).collect();
        v.sort();
        Ok(v)
    }

    fn kv(k: &str, v: &[&str]) -> (String, Vec<String>) {
        (k.into(), v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn trace_post_body() {
        assert!(trace_setting_get("").settings.is_empty());
        assert_eq!(trace(b"{}").unwrap(), [kv("trace_level", &[""])]);
        assert_eq!(trace(b"[1]").unwrap(), [kv("trace_level", &[""])]);
        assert_eq!(
            trace(br#"{"trace_level":[]}"#).unwrap(),
            [kv("trace_level", &[""])]
        );
        assert_eq!(
            trace(br#"{"trace_level":["FOO"]}"#).unwrap(),
            [kv("trace_level", &[""])]
        );
        assert_eq!(
            trace(br#"{"trace_level":null}"#).unwrap(),
            [kv("trace_level", &[])]
        );
        assert_eq!(
            trace(br#"{"trace_level":["OFF"]}"#).unwrap(),
            [kv("trace_level", &["OFF"])]
        );
        assert_eq!(
            trace(br#"{"trace_level":["TENSORS","x","TIMESTAMPS","TENSORS"]}"#).unwrap(),
            [kv("trace_level", &["TIMESTAMPS", "TENSORS"])]
        );
        assert_eq!(
            trace(br#"{"trace_rate":" 12abc","trace_count":"-1","log_frequency":null,"other":5}"#)
                .unwrap(),
            [
                kv("log_frequency", &[]),
                kv("trace_count", &["-1"]),
                kv("trace_rate", &["12"])
            ]
        );
        assert_eq!(
            trace(br#"{"trace_rate":"-5"}"#).unwrap(),
            [kv("trace_rate", &["-5"])]
        );

        // Texts probed on Triton 2.51 (K50, K51).
        let cases: [(&[u8], u16, &str); 13] = [
            (b"", 400, EMPTY_DOC),
            (br#"{"trace_file":null}"#, 501, "trace file location can not be updated through network protocol"),
            (br#"{"trace_level":["bad"],"trace_file":"x"}"#, 501, "trace file location can not be updated through network protocol"),
            (br#"{"trace_level":"TIMESTAMPS"}"#, 400, NOT_ARRAY),
            (br#"{"trace_level":[1]}"#, 400, NOT_STRING),
            (br#"{"trace_level":["OFF",1]}"#, 400, "Expect only one trace level 'OFF' is specified"),
            (br#"{"trace_level":["TENSORS","OFF"]}"#, 400, "Expect only one trace level 'OFF' is specified"),
            (br#"{"trace_rate":1000}"#, 400, NOT_STRING),
            (br#"{"trace_rate":"abc"}"#, 400, "Unable to parse 'trace_rate', got: abc"),
            (br#"{"trace_rate":"99999999999"}"#, 400, "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 99999999999"),
            (br#"{"trace_count":"-5"}"#, 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-5"),
            (br#"{"trace_count":"9999999999"}"#, 400, "Unable to parse 'trace_count', value is out of range [ -1, 2147483647 ], got: 9999999999"),
            (br#"{"log_frequency":"x","trace_rate":"y"}"#, 400, "Unable to parse 'trace_rate', got: y"),
        ];
        for (body, status, text) in cases {
            assert_eq!(
                err(trace(body)),
                (status, text.into()),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(
            err(trace(br#"{"trace_count":"z"}"#)).1,
            "Unable to parse 'trace_count', got: z"
        );
        assert_eq!(
            err(trace(br#"{"log_frequency":"z"}"#)).1,
            "Unable to parse 'log_frequency', got: z"
        );
    }

    /// Settings sent (key, debug value) and the error answered.
    type LogOutcome = (Vec<(String, String)>, Option<(u16, String)>);

    fn log(body: &[u8]) -> LogOutcome {
        let u = log_settings_post(body);
        let mut v: Vec<_> = u
            .request
            .settings
            .into_iter()
            .map(|(k, v)| (k, format!("{:?}", v.parameter_choice.unwrap())))
            .collect();
        v.sort();
        (v, u.error.map(|e| (e.status(), e.message)))
    }

    #[test]
    fn log_post_body() {
        assert!(log_settings_get().settings.is_empty());
        assert_eq!(log(b"{}"), (vec![], None));
        assert_eq!(log(b"[]"), (vec![], None));
        assert_eq!(
            log(br#"{"log_file":null,"log_info":null,"log_warning":false,"log_verbose_level":4294967297,"log_format":"ISO8601"}"#),
            (
                vec![
                    ("log_format".into(), "StringParam(\"ISO8601\")".into()),
                    ("log_verbose_level".into(), "Uint32Param(1)".into()),
                    ("log_warning".into(), "BoolParam(false)".into()),
                ],
                None
            )
        );
        // Triton keeps what it applied before the failing key.
        assert_eq!(
            log(br#"{"log_format":"xx","log_error":true,"log_info":false}"#),
            (
                vec![
                    ("log_error".into(), "BoolParam(true)".into()),
                    ("log_info".into(), "BoolParam(false)".into()),
                ],
                Some((400, "invalid argument for --log_format, got: xx".into()))
            )
        );
        assert_eq!(
            log(br#"{"log_info":true,"log_verbose_level":-1}"#),
            (
                vec![("log_info".into(), "BoolParam(true)".into())],
                Some((400, NOT_UINT.into()))
            )
        );
        assert_eq!(
            log(br#"{"log_info":true,"log_file":""}"#),
            (
                vec![],
                Some((
                    501,
                    "log file location can not be updated through network protocol".into()
                ))
            )
        );
        assert_eq!(
            log(br#"{"log_error":1}"#),
            (vec![], Some((400, NOT_BOOL.into())))
        );
        assert_eq!(
            log(br#"{"log_format":1}"#),
            (vec![], Some((400, NOT_STRING.into())))
        );
        assert_eq!(log(b""), (vec![], Some((400, EMPTY_DOC.into()))));
    }

    /// xorshift64: deterministic pseudo-random bytes for the no-panic test.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn no_panic_on_mutated_bodies() {
        let seeds: [&[u8]; 6] = [
            br#"{"parameters":{"config":"{}","file:1/m":"aGk=","unload_dependents":true}}"#,
            br#"{"key":"/k","offset":0,"byte_size":8,"raw_handle":{"b64":"QUJD"},"device_id":0}"#,
            br#"{"trace_level":["OFF"],"trace_rate":"1","trace_count":"-1","log_frequency":"0"}"#,
            br#"{"log_info":true,"log_verbose_level":1,"log_format":"default","ready":true}"#,
            b"[[[[[[[[[[",
            b"",
        ];
        let alphabet = b"{}[]\\\",:0123456789-+.eE truefalsnul\\u0000\x00\xff";
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for round in 0..4000 {
            let mut body = seeds[round % seeds.len()].to_vec();
            for _ in 0..(next(&mut state) % 6) {
                let pos = (next(&mut state) as usize) % (body.len() + 1);
                let byte = alphabet[(next(&mut state) as usize) % alphabet.len()];
                match next(&mut state) % 3 {
                    0 if pos < body.len() => body[pos] = byte,
                    1 if pos < body.len() => {
                        body.remove(pos);
                    }
                    _ => body.insert(pos, byte),
                }
            }
            let _ = repository_index(&body);
            let _ = repository_load("m", &body);
            let _ = repository_unload("m", &body);
            let _ = system_shm_register("r", &body);
            let _ = cuda_shm_register("r", &body);
            let _ = trace_setting_post("", &body);
            let _ = log_settings_post(&body);
            let _ = base64_decode_lenient(&body);
            let _ = stoi(&body);
        }
    }

    #[test]
    fn model_requests() {
        assert_eq!(model_ready("m", "01").version, "01");
        assert_eq!(model_metadata("m", "").name, "m");
        assert_eq!(model_config("m", "2").version, "2");
        assert_eq!(model_statistics("", "").name, "");
    }
}
