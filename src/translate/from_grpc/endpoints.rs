//! gRPC responses of the non-infer endpoints (v2 §1 rows 3–18) → the exact
//! JSON bodies Triton 2.51's HTTP front answers. Pure functions, no I/O.
//!
//! Triton builds these bodies with rapidjson (compact, no trailing newline);
//! key order follows the C++ code that adds the members (quoted per function
//! below), strings use rapidjson's escaping and numbers its integer printing
//! (`crate::wire::json_write`). Where the gRPC answer is a map (protobuf maps
//! carry no order) the HTTP order is rebuilt: Triton iterates `std::map`s
//! there, i.e. byte-wise sorted keys. The model configuration has its own
//! module, [`super::model_config`].

use std::collections::HashMap;

use crate::proto::inference::repository_index_response::ModelIndex;
use crate::proto::inference::{
    log_settings_response::{self, setting_value::ParameterChoice as LogParam},
    model_metadata_response::TensorMetadata,
    CudaSharedMemoryStatusResponse, InferBatchStatistics, InferParameter, InferResponseStatistics,
    InferStatistics, LogSettingsResponse, ModelMetadataResponse, ModelStatistics,
    ModelStatisticsResponse, RepositoryIndexResponse, ServerMetadataResponse, StatisticDuration,
    SystemSharedMemoryStatusResponse, TraceSettingResponse,
};
use crate::wire::json_write::{write_array, write_i64, write_str, write_u64};
use crate::wire::v2_response::write_parameters;

/// A compact JSON object under construction: `{"k":v,...}`.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// Writes the key (and separator) and returns the buffer for the value.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_str(self.out, key.as_bytes());
        self.out.push(b':');
        self.out
    }

    fn str(&mut self, key: &str, value: &str) {
        write_str(self.key(key), value.as_bytes());
    }

    fn u64(&mut self, key: &str, value: u64) {
        write_u64(self.key(key), value);
    }

    fn i64(&mut self, key: &str, value: i64) {
        write_i64(self.key(key), value);
    }

    fn bool(&mut self, key: &str, value: bool) {
        let text: &[u8] = if value { b"true" } else { b"false" };
        self.key(key).extend_from_slice(text);
    }

    fn end(self) {
        self.out.push(b'}');
    }
}

fn string_array(out: &mut Vec<u8>, items: &[String]) {
    write_array(out, items, |out, s| write_str(out, s.as_bytes()));
}

/// Map entries in `std::map` (byte-wise) key order.
fn sorted<V>(map: &HashMap<String, V>) -> Vec<(&String, &V)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    entries
}

// ---------------------------------------------------------------------------
// Server and model metadata (rows 3, 4)

/// `GET /v2`: `{"name":…,"version":…,"extensions":[…]}` (core
/// `TRITONSERVER_ServerMetadata`). Pass the upstream's answer, or one built
/// with the gateway's own name, version and extensions.
pub(crate) fn server_metadata_json(metadata: &ServerMetadataResponse) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + metadata.extensions.len() * 24);
    let mut obj = Obj::new(&mut out);
    obj.str("name", &metadata.name);
    obj.str("version", &metadata.version);
    string_array(obj.key("extensions"), &metadata.extensions);
    obj.end();
    out
}

fn tensor_metadata(out: &mut Vec<u8>, tensor: &TensorMetadata) {
    let mut obj = Obj::new(out);
    obj.str("name", &tensor.name);
    obj.str("datatype", &tensor.datatype);
    write_array(obj.key("shape"), &tensor.shape, |out, d| write_i64(out, *d));
    parameters(&mut obj, &tensor.parameters);
    obj.end();
}

/// An Open Inference Protocol `parameters` map, keys sorted, when the
/// upstream sent one (MLServer; Triton's answers have none, so its bodies
/// are unchanged). A protobuf map cannot tell an empty map from none.
fn parameters(obj: &mut Obj<'_>, map: &HashMap<String, InferParameter>) {
    if !map.is_empty() {
        write_parameters(obj.key("parameters"), &super::params(map));
    }
}

/// `GET /v2/models/{m}[/versions/{v}]`:
/// `{"name","versions":[…],"platform","inputs":[{"name","datatype","shape"}],"outputs":[…]}`
/// (core `TRITONSERVER_ServerModelMetadata`: every key always present,
/// `platform` falls back to the backend name there already), then the
/// Open Inference Protocol's `parameters` (the model's, and each tensor's
/// after its shape) when the upstream sent them. `versions` is `[]` when
/// the upstream sent none (KServe's gRPC answer has none; gRPC cannot
/// carry its HTTP front's `null`).
pub(crate) fn model_metadata_json(metadata: &ModelMetadataResponse) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + 64 * (metadata.inputs.len() + metadata.outputs.len()));
    let mut obj = Obj::new(&mut out);
    obj.str("name", &metadata.name);
    string_array(obj.key("versions"), &metadata.versions);
    obj.str("platform", &metadata.platform);
    write_array(obj.key("inputs"), &metadata.inputs, tensor_metadata);
    write_array(obj.key("outputs"), &metadata.outputs, tensor_metadata);
    parameters(&mut obj, &metadata.parameters);
    obj.end();
    out
}

// ---------------------------------------------------------------------------
// Statistics (row 7, v2 §1.3)

/// `{"count":N,"ns":N}`; an absent duration is all zeros (Triton always
/// fills every one).
fn duration(out: &mut Vec<u8>, d: Option<&StatisticDuration>) {
    let d = d.copied().unwrap_or_default();
    let mut obj = Obj::new(out);
    obj.u64("count", d.count);
    obj.u64("ns", d.ns);
    obj.end();
}

fn inference_stats(out: &mut Vec<u8>, s: Option<&InferStatistics>) {
    let s = s.cloned().unwrap_or_default();
    let mut obj = Obj::new(out);
    duration(obj.key("success"), s.success.as_ref());
    duration(obj.key("fail"), s.fail.as_ref());
    duration(obj.key("queue"), s.queue.as_ref());
    duration(obj.key("compute_input"), s.compute_input.as_ref());
    duration(obj.key("compute_infer"), s.compute_infer.as_ref());
    duration(obj.key("compute_output"), s.compute_output.as_ref());
    duration(obj.key("cache_hit"), s.cache_hit.as_ref());
    duration(obj.key("cache_miss"), s.cache_miss.as_ref());
    obj.end();
}

fn response_stats(out: &mut Vec<u8>, s: &InferResponseStatistics) {
    let mut obj = Obj::new(out);
    duration(obj.key("compute_infer"), s.compute_infer.as_ref());
    duration(obj.key("compute_output"), s.compute_output.as_ref());
    duration(obj.key("success"), s.success.as_ref());
    duration(obj.key("fail"), s.fail.as_ref());
    duration(obj.key("empty_response"), s.empty_response.as_ref());
    duration(obj.key("cancel"), s.cancel.as_ref());
    obj.end();
}

fn batch_stats(out: &mut Vec<u8>, s: &InferBatchStatistics) {
    let mut obj = Obj::new(out);
    obj.u64("batch_size", s.batch_size);
    duration(obj.key("compute_input"), s.compute_input.as_ref());
    duration(obj.key("compute_infer"), s.compute_infer.as_ref());
    duration(obj.key("compute_output"), s.compute_output.as_ref());
    obj.end();
}

fn model_stats(out: &mut Vec<u8>, s: &ModelStatistics) {
    let mut obj = Obj::new(out);
    obj.str("name", &s.name);
    obj.str("version", &s.version);
    obj.u64("last_inference", s.last_inference);
    obj.u64("inference_count", s.inference_count);
    obj.u64("execution_count", s.execution_count);
    inference_stats(obj.key("inference_stats"), s.inference_stats.as_ref());
    {
        let mut responses = Obj::new(obj.key("response_stats"));
        for (key, stats) in sorted(&s.response_stats) {
            response_stats(responses.key(key), stats);
        }
        responses.end();
    }
    write_array(obj.key("batch_stats"), &s.batch_stats, batch_stats);
    write_array(obj.key("memory_usage"), &s.memory_usage, |out, m| {
        let mut usage = Obj::new(out);
        usage.str("type", &m.r#type);
        usage.i64("id", m.id);
        usage.u64("byte_size", m.byte_size);
        usage.end();
    });
    obj.end();
}

/// `GET /v2/models[/{m}[/versions/{v}]]/stats`: `{"model_stats":[…]}` in the
/// upstream's model/version order (Triton: models by name, then versions),
/// keys as in core `TRITONSERVER_ServerModelStatistics`: `name`, `version`,
/// `last_inference`, `inference_count`, `execution_count`,
/// `inference_stats{success,fail,queue,compute_input,compute_infer,
/// compute_output,cache_hit,cache_miss}`, `response_stats` (a `std::map`:
/// sorted keys; each `{compute_infer,compute_output,success,fail,
/// empty_response,cancel}`), `batch_stats[{batch_size,compute_input,
/// compute_infer,compute_output}]`, `memory_usage[{type,id,byte_size}]`;
/// every duration `{"count":N,"ns":N}`, every number a JSON number.
pub(crate) fn model_statistics_json(stats: &ModelStatisticsResponse) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 900 * stats.model_stats.len());
    let mut obj = Obj::new(&mut out);
    write_array(obj.key("model_stats"), &stats.model_stats, model_stats);
    obj.end();
    out
}

// ---------------------------------------------------------------------------
// Repository index (row 8, v2 §1.4)

/// `POST /v2/repository/index`: a JSON array
/// `[{"name","version","state","reason"},…]` in the upstream's order (Triton:
/// sorted by name); `version`, `state` and `reason` are omitted when empty
/// (Triton leaves them out of the JSON, and its gRPC front only fills what
/// that JSON had).
pub(crate) fn repository_index_json(index: &RepositoryIndexResponse) -> Vec<u8> {
    let entries: Vec<(Option<&str>, &ModelIndex)> =
        index.models.iter().map(|m| (None, m)).collect();
    repository_entries_json(&entries)
}

/// The index over several upstream groups (`app::index`): each entry of
/// every group, in order, with a `group` key after its `name` naming the
/// group it is in (an entry Triton's own index never has).
pub(crate) fn repository_index_grouped_json(
    groups: &[(&str, &RepositoryIndexResponse)],
) -> Vec<u8> {
    let entries: Vec<(Option<&str>, &ModelIndex)> = groups
        .iter()
        .flat_map(|(group, index)| index.models.iter().map(move |m| (Some(*group), m)))
        .collect();
    repository_entries_json(&entries)
}

fn repository_entries_json(entries: &[(Option<&str>, &ModelIndex)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 64 * entries.len());
    write_array(&mut out, entries, |out, (group, m)| {
        let mut obj = Obj::new(out);
        obj.str("name", &m.name);
        if let Some(group) = group {
            obj.str("group", group);
        }
        for (key, value) in [
            ("version", &m.version),
            ("state", &m.state),
            ("reason", &m.reason),
        ] {
            if !value.is_empty() {
                obj.str(key, value);
            }
        }
        obj.end();
    });
    out
}

// ---------------------------------------------------------------------------
// Shared memory status (rows 11, 14)

/// `[{"name",…},…]` of shared-memory regions, sorted by region name (Triton
/// walks its `std::map` of regions): `name` is the region's own, or its map
/// key when that is empty, and `fields` writes the rest of each object.
fn shm_status_json<R>(
    regions: &HashMap<String, R>,
    bytes_per_region: usize,
    region_name: impl Fn(&R) -> &str,
    fields: impl Fn(&mut Obj<'_>, &R),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + bytes_per_region * regions.len());
    write_array(&mut out, sorted(regions), |out, (name, region)| {
        let mut obj = Obj::new(out);
        let own = region_name(region);
        obj.str("name", if own.is_empty() { name } else { own });
        fields(&mut obj, region);
        obj.end();
    });
    out
}

/// `GET /v2/systemsharedmemory[/region/{r}]/status`:
/// `[{"name","key","offset","byte_size"},…]`, sorted by region name. An
/// unknown region is the upstream's NOT_FOUND (`Unable to find system shared
/// memory region: '<r>'`).
pub(crate) fn system_shm_status_json(status: &SystemSharedMemoryStatusResponse) -> Vec<u8> {
    shm_status_json(
        &status.regions,
        80,
        |r| &r.name,
        |obj, r| {
            obj.str("key", &r.key);
            obj.u64("offset", r.offset);
            obj.u64("byte_size", r.byte_size);
        },
    )
}

/// `GET /v2/cudasharedmemory[/region/{r}]/status`:
/// `[{"name","device_id","byte_size"},…]`, sorted by region name.
pub(crate) fn cuda_shm_status_json(status: &CudaSharedMemoryStatusResponse) -> Vec<u8> {
    shm_status_json(
        &status.regions,
        64,
        |r| &r.name,
        |obj, r| {
            obj.u64("device_id", r.device_id);
            obj.u64("byte_size", r.byte_size);
        },
    )
}

// ---------------------------------------------------------------------------
// Trace and log settings (rows 17, 18)

/// Keys of the trace setting in the order Triton's `HandleTrace` adds them;
/// `log_frequency` and `trace_file` only exist in `triton` trace mode.
const TRACE_KEYS: [&str; 6] = [
    "trace_level",
    "trace_rate",
    "trace_count",
    "log_frequency",
    "trace_file",
    "trace_mode",
];

/// `GET`/`POST …/trace/setting`: `{"trace_level":[…],"trace_rate":"…",
/// "trace_count":"…","log_frequency":"…","trace_file":"…","trace_mode":"…",
/// <mode options>}`: `trace_level` an array of strings, every other value a
/// string (the first of its values; `""` if none). Known keys come in
/// Triton's order, only when present; the mode-specific options (OpenTelemetry
/// `url`, `resource`, …), which Triton appends in command-line order, follow
/// sorted by key, as gRPC does not keep their order.
pub(crate) fn trace_settings_json(settings: &TraceSettingResponse) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    let mut obj = Obj::new(&mut out);
    for key in TRACE_KEYS {
        if let Some(value) = settings.settings.get(key) {
            if key == "trace_level" {
                string_array(obj.key(key), &value.value);
            } else {
                obj.str(key, value.value.first().map_or("", String::as_str));
            }
        }
    }
    for (key, value) in sorted(&settings.settings) {
        if !TRACE_KEYS.contains(&key.as_str()) {
            obj.str(key, value.value.first().map_or("", String::as_str));
        }
    }
    obj.end();
    out
}

/// `GET`/`POST /v2/logging`: `{"log_file":"…","log_info":bool,
/// "log_warning":bool,"log_error":bool,"log_verbose_level":N,
/// "log_format":"…"}` in that order (v2 §1 row 18). Each value is taken
/// from the gRPC setting of the expected type; a missing or mistyped one
/// gets the zero value of its type.
pub(crate) fn log_settings_json(settings: &LogSettingsResponse) -> Vec<u8> {
    let get = |key: &str| {
        settings
            .settings
            .get(key)
            .and_then(|v: &log_settings_response::SettingValue| v.parameter_choice.as_ref())
    };
    let string = |key: &str| match get(key) {
        Some(LogParam::StringParam(s)) => s.as_str(),
        _ => "",
    };
    let boolean = |key: &str| matches!(get(key), Some(LogParam::BoolParam(true)));
    let mut out = Vec::with_capacity(128);
    let mut obj = Obj::new(&mut out);
    obj.str("log_file", string("log_file"));
    obj.bool("log_info", boolean("log_info"));
    obj.bool("log_warning", boolean("log_warning"));
    obj.bool("log_error", boolean("log_error"));
    let verbose = match get("log_verbose_level") {
        Some(LogParam::Uint32Param(n)) => u64::from(*n),
        _ => 0,
    };
    obj.u64("log_verbose_level", verbose);
    obj.str("log_format", string("log_format"));
    obj.end();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::{
        cuda_shared_memory_status_response, log_settings_response::SettingValue as LogValue,
        repository_index_response::ModelIndex, system_shared_memory_status_response,
        trace_setting_response::SettingValue as TraceValue, MemoryUsage,
    };
    use prost::Message;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/endpoints/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// `<name>.pb` is a live Triton 2.51's gRPC answer, `<name>.json` its HTTP
    /// body for the same request at the same moment.
    fn check<M: Message + Default>(name: &str, render: impl Fn(&M) -> Vec<u8>) {
        let message =
            M::decode(fixture(&format!("{name}.pb")).as_slice()).expect("fixture decodes");
        assert_eq!(
            String::from_utf8_lossy(&render(&message)),
            String::from_utf8_lossy(&fixture(&format!("{name}.json"))),
            "{name}"
        );
    }

    #[test]
    fn matches_live_triton() {
        check("server_metadata", server_metadata_json);
        for name in [
            "metadata_add_sub",
            "metadata_add_sub_v1",
            "metadata_rich_cfg",
            "metadata_ens",
        ] {
            check(name, model_metadata_json);
        }
        for name in ["stats_all", "stats_add_sub", "stats_rich_cfg_v1"] {
            check(name, model_statistics_json);
        }
        check("index", repository_index_json);
        check("index_ready", repository_index_json);
        check("shm_status_all", system_shm_status_json);
        check("shm_status_one", system_shm_status_json);
        check("cuda_shm_status_all", cuda_shm_status_json);
        check("trace_global", trace_settings_json);
        check("trace_model", trace_settings_json);
        check("log_settings", log_settings_json);
    }

    fn d(count: u64, ns: u64) -> Option<StatisticDuration> {
        Some(StatisticDuration { count, ns })
    }

    #[test]
    fn statistics_layout() {
        let response = |n: u64| InferResponseStatistics {
            compute_infer: d(n, 1),
            compute_output: d(n, 2),
            success: d(n, 3),
            fail: d(0, 0),
            empty_response: d(1, 4),
            cancel: None,
        };
        let stats = ModelStatisticsResponse {
            model_stats: vec![ModelStatistics {
                name: "m\"x".into(),
                version: "2".into(),
                last_inference: u64::MAX,
                inference_count: 5,
                execution_count: 4,
                inference_stats: None,
                batch_stats: vec![InferBatchStatistics {
                    batch_size: 8,
                    compute_input: d(1, 2),
                    compute_infer: d(3, 4),
                    compute_output: d(5, 6),
                }],
                memory_usage: vec![MemoryUsage {
                    r#type: "GPU".into(),
                    id: -1,
                    byte_size: 1024,
                }],
                response_stats: [
                    ("2".to_owned(), response(2)),
                    ("10".to_owned(), response(10)),
                ]
                .into(),
            }],
        };
        assert_eq!(
            String::from_utf8(model_statistics_json(&stats)).unwrap(),
            fixture_text("stats_layout.json")
        );
        assert_eq!(
            model_statistics_json(&ModelStatisticsResponse::default()),
            br#"{"model_stats":[]}"#
        );
    }

    fn fixture_text(name: &str) -> String {
        String::from_utf8(fixture(name))
            .unwrap()
            .trim_end_matches('\n')
            .to_owned()
    }

    #[test]
    fn repository_index_omits_empty_fields() {
        let index = RepositoryIndexResponse {
            models: vec![
                ModelIndex {
                    name: "a".into(),
                    version: "1".into(),
                    state: "UNAVAILABLE".into(),
                    reason: "unloaded".into(),
                },
                ModelIndex {
                    name: "b".into(),
                    ..Default::default()
                },
                ModelIndex {
                    name: "c".into(),
                    state: "UNLOADING".into(),
                    ..Default::default()
                },
            ],
        };
        assert_eq!(
            String::from_utf8(repository_index_json(&index)).unwrap(),
            r#"[{"name":"a","version":"1","state":"UNAVAILABLE","reason":"unloaded"},{"name":"b"},{"name":"c","state":"UNLOADING"}]"#
        );
        assert_eq!(
            repository_index_json(&RepositoryIndexResponse::default()),
            b"[]"
        );
    }

    #[test]
    fn shm_status_sorted_by_name() {
        let region = |name: &str, key: &str| system_shared_memory_status_response::RegionStatus {
            name: name.into(),
            key: key.into(),
            offset: 4096,
            byte_size: 10,
        };
        let status = SystemSharedMemoryStatusResponse {
            regions: [
                ("b".to_owned(), region("b", "/kb")),
                ("B".to_owned(), region("", "/kB")),
            ]
            .into(),
        };
        assert_eq!(
            String::from_utf8(system_shm_status_json(&status)).unwrap(),
            r#"[{"name":"B","key":"/kB","offset":4096,"byte_size":10},{"name":"b","key":"/kb","offset":4096,"byte_size":10}]"#
        );
        let cuda = CudaSharedMemoryStatusResponse {
            regions: [
                (
                    "g1".to_owned(),
                    cuda_shared_memory_status_response::RegionStatus {
                        name: "g1".into(),
                        device_id: 1,
                        byte_size: 64,
                    },
                ),
                (
                    "g0".to_owned(),
                    cuda_shared_memory_status_response::RegionStatus {
                        name: "g0".into(),
                        device_id: 0,
                        byte_size: 32,
                    },
                ),
            ]
            .into(),
        };
        assert_eq!(
            String::from_utf8(cuda_shm_status_json(&cuda)).unwrap(),
            r#"[{"name":"g0","device_id":0,"byte_size":32},{"name":"g1","device_id":1,"byte_size":64}]"#
        );
    }

    #[test]
    fn trace_settings_order() {
        let v = |values: &[&str]| TraceValue {
            value: values.iter().map(|s| s.to_string()).collect(),
        };
        // OpenTelemetry mode: no log_frequency / trace_file, extra options.
        let settings = TraceSettingResponse {
            settings: [
                ("url".to_owned(), v(&["localhost:4318"])),
                ("trace_mode".to_owned(), v(&["opentelemetry"])),
                ("trace_count".to_owned(), v(&["-1"])),
                ("bsp_max_queue_size".to_owned(), v(&["2048"])),
                ("trace_rate".to_owned(), v(&["1000"])),
                ("trace_level".to_owned(), v(&["TIMESTAMPS", "TENSORS"])),
                ("resource".to_owned(), v(&[])),
            ]
            .into(),
        };
        assert_eq!(
            String::from_utf8(trace_settings_json(&settings)).unwrap(),
            r#"{"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"1000","trace_count":"-1","trace_mode":"opentelemetry","bsp_max_queue_size":"2048","resource":"","url":"localhost:4318"}"#
        );
        assert_eq!(trace_settings_json(&TraceSettingResponse::default()), b"{}");
    }

    #[test]
    fn log_settings_layout() {
        let value = |p: LogParam| LogValue {
            parameter_choice: Some(p),
        };
        let settings = LogSettingsResponse {
            settings: [
                (
                    "log_format".to_owned(),
                    value(LogParam::StringParam("default".into())),
                ),
                (
                    "log_verbose_level".to_owned(),
                    value(LogParam::Uint32Param(u32::MAX)),
                ),
                ("log_error".to_owned(), value(LogParam::BoolParam(false))),
                ("log_warning".to_owned(), value(LogParam::BoolParam(true))),
                (
                    "log_info".to_owned(),
                    value(LogParam::StringParam("oops".into())),
                ),
                (
                    "log_file".to_owned(),
                    value(LogParam::StringParam("/tmp/a \"b\".log".into())),
                ),
            ]
            .into(),
        };
        assert_eq!(
            String::from_utf8(log_settings_json(&settings)).unwrap(),
            r#"{"log_file":"/tmp/a \"b\".log","log_info":false,"log_warning":true,"log_error":false,"log_verbose_level":4294967295,"log_format":"default"}"#
        );
        assert_eq!(
            String::from_utf8(log_settings_json(&LogSettingsResponse::default())).unwrap(),
            r#"{"log_file":"","log_info":false,"log_warning":false,"log_error":false,"log_verbose_level":0,"log_format":""}"#
        );
    }

    #[test]
    fn metadata_escapes_and_empty_lists() {
        let metadata = ModelMetadataResponse {
            name: "m\u{1}".into(),
            versions: vec![],
            platform: String::new(),
            inputs: vec![TensorMetadata {
                name: "I/0".into(),
                datatype: "BYTES".into(),
                shape: vec![],
                parameters: HashMap::new(),
            }],
            outputs: vec![],
            parameters: HashMap::new(),
        };
        assert_eq!(
            String::from_utf8(model_metadata_json(&metadata)).unwrap(),
            r#"{"name":"m\u0001","versions":[],"platform":"","inputs":[{"name":"I/0","datatype":"BYTES","shape":[]}],"outputs":[]}"#
        );
        // The Open Inference Protocol's maps, keys sorted, numbers and
        // booleans as JSON values.
        let choice = |c| InferParameter {
            parameter_choice: Some(c),
        };
        use crate::proto::inference::infer_parameter::ParameterChoice as P;
        let mut oip = metadata.clone();
        oip.parameters = HashMap::from([
            ("z".to_string(), choice(P::BoolParam(true))),
            ("a".to_string(), choice(P::Int64Param(-3))),
        ]);
        oip.inputs[0].parameters = HashMap::from([(
            "content_type".to_string(),
            choice(P::StringParam("np".into())),
        )]);
        assert_eq!(
            String::from_utf8(model_metadata_json(&oip)).unwrap(),
            r#"{"name":"m\u0001","versions":[],"platform":"","inputs":[{"name":"I/0","datatype":"BYTES","shape":[],"parameters":{"content_type":"np"}}],"outputs":[],"parameters":{"a":-3,"z":true}}"#
        );
        let server = ServerMetadataResponse {
            name: "tensorgate".into(),
            version: "0.1.0".into(),
            extensions: vec!["binary_tensor_data".into()],
        };
        assert_eq!(
            String::from_utf8(server_metadata_json(&server)).unwrap(),
            r#"{"name":"tensorgate","version":"0.1.0","extensions":["binary_tensor_data"]}"#
        );
    }
}
