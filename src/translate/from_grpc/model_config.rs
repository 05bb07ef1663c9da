//! `ModelConfig` (gRPC `ModelConfigResponse.config`) → the exact JSON body of
//! Triton 2.51's `GET /v2/models/{m}[/versions/{v}]/config` (v2 §1.2).
//!
//! Triton builds that body in three steps (core `ModelConfigToJson`), each
//! reproduced here, walking the message with `prost-reflect`:
//!
//! 1. protobuf **3.21**'s `MessageToJsonString` (the old `util/internal`
//!    converter: `DefaultValueObjectWriter` over `ProtoStreamObjectSource`)
//!    with `preserve_proto_field_names` and `always_print_primitive_fields`:
//!    * fields in **declaration** order (`DescriptorProto.field`, not field
//!      numbers); every non-oneof scalar, enum, repeated and map field is
//!      printed, defaults included (`[]`, `{}`, `""`, `0`, `false`, first
//!      enum value); unset singular messages (oneof members or not) are
//!      omitted, set ones printed even when empty (`"all":{}`);
//!    * a *scalar* oneof member is printed only when set, and then **after
//!      all other fields** (the writer appends it), e.g. `InitialState` is
//!      `{"data_type",…,"dims",…,"name",…,"zero_data":true}`;
//!    * enums by name (unknown numbers as numbers); `int64`/`uint64` as
//!      quoted decimal strings; floats as `SimpleFtoa` (`%.6g`, or `%.9g`
//!      when that does not round-trip), doubles as `SimpleDtoa` (`%.15g` /
//!      `%.17g`); non-finite values as the strings `"NaN"`, `"Infinity"`,
//!      `"-Infinity"`; bytes as padded standard base64;
//!    * map entries in the iteration order of protobuf's hash map, which is
//!      seeded per map instance from the CPU clock (so it differs between
//!      loads of the same model and cannot be reproduced); here keys are
//!      sorted (numerically for integer keys, byte-wise for strings).
//! 2. Only some 64-bit fields are then rewritten as JSON numbers (`FixInt`,
//!    `FixUInt`, `FixIntArray`): those in [`NUMERIC_64BIT_FIELDS`]. All other
//!    64-bit fields stay strings, e.g. `optimization.cuda.graph_spec[].input
//!    .<k>.dim`, `instance_group[].secondary_devices[].device_id` and, by a
//!    Triton bug (it looks for `initial_state` in the wrong object),
//!    `sequence_batching.state[].initial_state[].dims`.
//! 3. The text is parsed by rapidjson (normal precision) and written again by
//!    rapidjson's `Writer`: numbers are re-printed from their parsed value, so
//!    a float printed as `1e+10` comes out as `10000000000.0`,
//!    `3.40282347e+38` as `3.4028234700000004e38`, `1` stays `1`, `-0` is
//!    `0`; strings are re-escaped rapidjson's way.
//!
//! All of this was checked byte for byte against a live Triton 2.51 (fixtures
//! in `tests/fixtures/endpoints/config_*`).

use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor,
    ReflectMessage, Value,
};

use crate::proto::inference::{ModelConfig, ModelConfigResponse};
use crate::wire::json;
use crate::wire::json_write::{
    write_array, write_f64, write_i64, write_object, write_str, write_u64,
};

/// Paths (field names from `ModelConfig`, list elements and map values
/// transparent) of the 64-bit fields Triton's core rewrites as JSON numbers
/// in `ModelConfigToJson`; every other 64-bit field stays a quoted string.
pub(crate) const NUMERIC_64BIT_FIELDS: [&str; 16] = [
    "input.dims",
    "input.reshape.shape",
    "output.dims",
    "output.reshape.shape",
    "version_policy.specific.versions",
    "dynamic_batching.max_queue_delay_microseconds",
    "dynamic_batching.priority_levels",
    "dynamic_batching.default_priority_level",
    "dynamic_batching.default_queue_policy.default_timeout_microseconds",
    "dynamic_batching.priority_queue_policy.default_timeout_microseconds",
    "sequence_batching.max_sequence_idle_microseconds",
    "sequence_batching.oldest.max_queue_delay_microseconds",
    "sequence_batching.direct.max_queue_delay_microseconds",
    "sequence_batching.state.dims",
    "ensemble_scheduling.step.model_version",
    "model_warmup.inputs.dims",
];

fn model_config_descriptor() -> Option<&'static MessageDescriptor> {
    static DESCRIPTOR: OnceLock<Option<MessageDescriptor>> = OnceLock::new();
    DESCRIPTOR
        .get_or_init(|| {
            DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET)
                .ok()?
                .get_message_by_name("inference.ModelConfig")
        })
        .as_ref()
}

/// Triton's JSON for `config`, byte for byte (see the module docs). An
/// all-default config (encoded size 0) is the empty body, as in Triton.
pub(crate) fn model_config_json(config: &ModelConfig) -> Vec<u8> {
    let encoded = config.encode_to_vec();
    if encoded.is_empty() {
        return Vec::new();
    }
    // The descriptor set is compiled in and `inference.ModelConfig` is what
    // prost generated `ModelConfig` from, so neither step can fail; the
    // fallback only keeps this function total.
    let message = model_config_descriptor()
        .and_then(|desc| DynamicMessage::decode(desc.clone(), encoded.as_slice()).ok());
    let Some(message) = message else {
        return b"{}".to_vec();
    };
    let mut out = Vec::with_capacity(encoded.len() * 3);
    write_message(&mut out, &message, "");
    out
}

/// [`model_config_json`] of `response.config`; a response without a config
/// renders like an all-default one (the empty body).
pub(crate) fn model_config_response_json(response: &ModelConfigResponse) -> Vec<u8> {
    response
        .config
        .as_ref()
        .map(model_config_json)
        .unwrap_or_default()
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn is_singular_message(field: &FieldDescriptor) -> bool {
    !field.is_list() && !field.is_map() && matches!(field.kind(), Kind::Message(_))
}

fn write_message(out: &mut Vec<u8>, message: &DynamicMessage, path: &str) {
    let desc = message.descriptor();
    out.push(b'{');
    let mut first = true;
    let mut appended = Vec::new();
    for declared in &desc.descriptor_proto().field {
        let Some(field) = u32::try_from(declared.number())
            .ok()
            .and_then(|n| desc.get_field(n))
        else {
            continue;
        };
        if is_singular_message(&field) {
            if message.has_field(&field) {
                write_field(out, &mut first, message, &field, path);
            }
        } else if field.containing_oneof().is_some() {
            if message.has_field(&field) {
                appended.push(field);
            }
        } else {
            write_field(out, &mut first, message, &field, path);
        }
    }
    // Set scalar oneof members arrive after the pre-populated defaults, in
    // wire (field number) order.
    appended.sort_by_key(FieldDescriptor::number);
    for field in &appended {
        write_field(out, &mut first, message, field, path);
    }
    out.push(b'}');
}

fn write_field(
    out: &mut Vec<u8>,
    first: &mut bool,
    message: &DynamicMessage,
    field: &FieldDescriptor,
    path: &str,
) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    write_str(out, field.name().as_bytes());
    out.push(b':');
    let path = child_path(path, field.name());
    let value = message.get_field(field);
    match value.as_ref() {
        Value::Map(entries) => {
            let value_kind = match field.kind() {
                Kind::Message(entry) => entry.map_entry_value_field().kind(),
                other => other,
            };
            let mut sorted: Vec<(&MapKey, &Value)> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            write_object(out, sorted, |out, (key, v)| {
                write_map_key(out, key);
                out.push(b':');
                write_value(out, v, &value_kind, &path);
            });
        }
        Value::List(items) => {
            let kind = field.kind();
            write_array(out, items, |out, v| write_value(out, v, &kind, &path));
        }
        v => write_value(out, v, &field.kind(), &path),
    }
}

fn write_map_key(out: &mut Vec<u8>, key: &MapKey) {
    match key {
        MapKey::Bool(b) => write_str(out, if *b { b"true" } else { b"false" }),
        MapKey::I32(n) => write_str(out, n.to_string().as_bytes()),
        MapKey::I64(n) => write_str(out, n.to_string().as_bytes()),
        MapKey::U32(n) => write_str(out, n.to_string().as_bytes()),
        MapKey::U64(n) => write_str(out, n.to_string().as_bytes()),
        MapKey::String(s) => write_str(out, s.as_bytes()),
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value, kind: &Kind, path: &str) {
    let numeric_64bit = || NUMERIC_64BIT_FIELDS.contains(&path);
    match value {
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::I32(n) => write_i64(out, i64::from(*n)),
        Value::U32(n) => write_u64(out, u64::from(*n)),
        Value::I64(n) if numeric_64bit() => write_i64(out, *n),
        Value::I64(n) => write_str(out, n.to_string().as_bytes()),
        Value::U64(n) if numeric_64bit() => write_u64(out, *n),
        Value::U64(n) => write_str(out, n.to_string().as_bytes()),
        Value::F32(v) => write_protobuf_number(out, f64::from(*v), simple_ftoa(*v)),
        Value::F64(v) => write_protobuf_number(out, *v, simple_dtoa(*v)),
        Value::String(s) => write_str(out, s.as_bytes()),
        // protobuf's `Base64Escape`: the standard alphabet, padded. (No
        // field of today's ModelConfig is `bytes`; a later one would be.)
        Value::Bytes(b) => write_str(out, STANDARD.encode(b).as_bytes()),
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => match e.get_value(*n) {
                Some(v) => write_str(out, v.name().as_bytes()),
                None => write_i64(out, i64::from(*n)),
            },
            _ => write_i64(out, i64::from(*n)),
        },
        Value::Message(m) => write_message(out, m, path),
        // Lists and maps only occur as field values, handled by the caller.
        Value::List(_) | Value::Map(_) => out.extend_from_slice(b"null"),
    }
}

/// A float/double as protobuf printed it (`text`), then parsed and written
/// again by rapidjson. Non-finite values are strings in protobuf's JSON.
fn write_protobuf_number(out: &mut Vec<u8>, value: f64, text: String) {
    if value.is_nan() {
        write_str(out, b"NaN");
    } else if value.is_infinite() {
        write_str(
            out,
            if value > 0.0 {
                b"Infinity"
            } else {
                b"-Infinity"
            },
        );
    } else {
        match json::parse(text.as_bytes(), 1) {
            Ok(json::Value::Uint(n)) => write_u64(out, n),
            Ok(json::Value::Int(n)) => write_i64(out, n),
            Ok(json::Value::Double(d)) => write_f64(out, d),
            _ => out.extend_from_slice(text.as_bytes()),
        }
    }
}

/// C's `printf("%.{precision}g", v)` for a finite `v` (glibc: exact value,
/// correctly rounded, ties to even; Rust's `{:.*e}` rounds the same way).
fn format_g(v: f64, precision: usize) -> String {
    let precision = precision.max(1);
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let scientific = format!("{:.*e}", precision - 1, v);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let mut s = String::new();
    if v < 0.0 {
        s.push('-');
    }
    let p = i64::try_from(precision).unwrap_or(i64::MAX);
    if exponent < -4 || exponent >= p {
        let (head, tail) = digits
            .split_first()
            .map_or((b'0', &[][..]), |(h, t)| (*h, t));
        s.push(char::from(head));
        let tail = trim_zeros(tail);
        if !tail.is_empty() {
            s.push('.');
            s.push_str(&String::from_utf8_lossy(tail));
        }
        s.push_str(&format!(
            "e{}{:02}",
            if exponent < 0 { '-' } else { '+' },
            exponent.abs()
        ));
    } else if exponent >= 0 {
        let split = usize::try_from(exponent + 1).unwrap_or(0).min(digits.len());
        s.push_str(&String::from_utf8_lossy(&digits[..split]));
        let frac = trim_zeros(&digits[split..]);
        if !frac.is_empty() {
            s.push('.');
            s.push_str(&String::from_utf8_lossy(frac));
        }
    } else {
        s.push_str("0.");
        for _ in 0..(-exponent - 1) {
            s.push('0');
        }
        s.push_str(&String::from_utf8_lossy(trim_zeros(&digits)));
    }
    s
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let end = digits.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
    &digits[..end]
}

/// protobuf 3.21 `SimpleFtoa` (`FloatToBuffer`): `%.6g`, or `%.9g` when
/// `safe_strtof` of that does not give the value back (glibc's `strtof`
/// reports `ERANGE` for subnormal results, so subnormals always take `%.9g`).
fn simple_ftoa(v: f32) -> String {
    let short = format_g(f64::from(v), 6);
    let round_trips = v.is_normal() || v == 0.0;
    if round_trips && short.parse::<f32>() == Ok(v) {
        short
    } else {
        format_g(f64::from(v), 9)
    }
}

/// protobuf 3.21 `SimpleDtoa` (`DoubleToBuffer`): `%.15g`, or `%.17g` when
/// that does not parse back to the value.
fn simple_dtoa(v: f64) -> String {
    let short = format_g(v, 15);
    if short.parse::<f64>() == Ok(v) {
        short
    } else {
        format_g(v, 17)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::{
        model_input, model_instance_group, model_optimization_policy::PinnedMemoryBuffer,
        model_version_policy, DataType, ModelInput, ModelInstanceGroup, ModelOptimizationPolicy,
        ModelOutput, ModelParameter, ModelVersionPolicy,
    };
    use json::Value as J;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/endpoints/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// A JSON document written back the way rapidjson writes its DOM.
    fn write_json(out: &mut Vec<u8>, v: &J) {
        match v {
            J::Null => out.extend_from_slice(b"null"),
            J::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            J::Uint(n) => write_u64(out, *n),
            J::Int(n) => write_i64(out, *n),
            J::Double(d) => write_f64(out, *d),
            J::String(s) => write_str(out, s),
            J::Array(items) => write_array(out, items, |out, item| write_json(out, &item)),
            J::Object(members) => write_object(out, members, |out, (k, item)| {
                write_str(out, k);
                out.push(b':');
                write_json(out, item);
            }),
        }
    }

    /// Names of the map fields of `ModelConfig` and its sub-messages.
    const MAP_FIELDS: [&str; 7] = [
        "parameters",
        "metric_tags",
        "cc_model_filenames",
        "priority_queue_policy",
        "input_map",
        "output_map",
        "inputs",
    ];

    /// Sort the entries of map-valued objects (Triton's order is a random
    /// hash order; ours is sorted), numerically when all keys are numbers.
    fn sort_maps(v: &mut J, key: &[u8]) {
        match v {
            J::Array(items) => items
                .values_mut()
                .into_iter()
                .flatten()
                .for_each(|i| sort_maps(i, b"")),
            J::Object(members) => {
                let is_map = MAP_FIELDS.iter().any(|m| m.as_bytes() == key)
                    || (key == b"input" && members.iter().all(|(_, v)| matches!(v, J::Object(_))));
                for (k, item) in members.iter_mut() {
                    let k = k.clone();
                    sort_maps(item, if is_map { b"" } else { &k });
                }
                if is_map {
                    members.sort_by(|a, b| {
                        let num = |k: &[u8]| std::str::from_utf8(k).ok()?.parse::<u64>().ok();
                        match (num(&a.0), num(&b.0)) {
                            (Some(x), Some(y)) => x.cmp(&y),
                            _ => a.0.cmp(&b.0),
                        }
                    });
                }
            }
            _ => {}
        }
    }

    /// Triton's body with its map entries sorted, after checking that
    /// re-writing the parsed body reproduces it byte for byte.
    fn triton_with_sorted_maps(body: &[u8]) -> Vec<u8> {
        let mut doc = json::parse(body, 64).expect("Triton's body parses");
        let mut rewritten = Vec::new();
        write_json(&mut rewritten, &doc);
        assert_eq!(
            String::from_utf8_lossy(&rewritten),
            String::from_utf8_lossy(body)
        );
        sort_maps(&mut doc, b"");
        let mut out = Vec::new();
        write_json(&mut out, &doc);
        out
    }

    const LIVE_MODELS: [&str; 8] = [
        "add_sub",
        "rich_cfg",
        "seq_cfg",
        "seq_oldest",
        "ens",
        "floats_a",
        "floats_b",
        "floats_c",
    ];

    /// gRPC `ModelConfig` answers of a live Triton 2.51, rendered, against
    /// its HTTP `/config` bodies for the same models.
    #[test]
    fn matches_live_triton() {
        for model in LIVE_MODELS {
            let response =
                ModelConfigResponse::decode(fixture(&format!("config_{model}.pb")).as_slice())
                    .expect("fixture decodes");
            let config = response.config.expect("config present");
            let expected = triton_with_sorted_maps(&fixture(&format!("config_{model}.json")));
            assert_eq!(
                String::from_utf8_lossy(&model_config_json(&config)),
                String::from_utf8_lossy(&expected),
                "{model}"
            );
        }
    }

    fn add_sub_config() -> ModelConfig {
        let input = |name: &str| ModelInput {
            name: name.into(),
            data_type: DataType::TypeFp32 as i32,
            format: model_input::Format::None as i32,
            dims: vec![-1],
            ..Default::default()
        };
        let output = |name: &str| ModelOutput {
            name: name.into(),
            data_type: DataType::TypeFp32 as i32,
            dims: vec![-1],
            ..Default::default()
        };
        ModelConfig {
            name: "add_sub".into(),
            backend: "python".into(),
            version_policy: Some(ModelVersionPolicy {
                policy_choice: Some(model_version_policy::PolicyChoice::Latest(
                    model_version_policy::Latest { num_versions: 1 },
                )),
            }),
            input: vec![input("INPUT0"), input("INPUT1")],
            output: vec![output("OUTPUT0"), output("OUTPUT1")],
            optimization: Some(ModelOptimizationPolicy {
                input_pinned_memory: Some(PinnedMemoryBuffer { enable: true }),
                output_pinned_memory: Some(PinnedMemoryBuffer { enable: true }),
                ..Default::default()
            }),
            instance_group: vec![ModelInstanceGroup {
                name: "add_sub_0".into(),
                kind: model_instance_group::Kind::Cpu as i32,
                count: 1,
                ..Default::default()
            }],
            default_model_filename: "model.py".into(),
            parameters: [(
                "kind".to_owned(),
                ModelParameter {
                    string_value: "add_sub".into(),
                },
            )]
            .into(),
            ..Default::default()
        }
    }

    /// A config built here renders as Triton rendered the same config
    /// (`E11`), byte for byte.
    #[test]
    fn add_sub_built_in_code() {
        assert_eq!(
            String::from_utf8_lossy(&model_config_json(&add_sub_config())),
            String::from_utf8_lossy(&fixture("config_add_sub.json"))
        );
    }

    #[test]
    fn empty_config_is_empty_body() {
        assert!(model_config_json(&ModelConfig::default()).is_empty());
        assert!(model_config_response_json(&ModelConfigResponse::default()).is_empty());
        assert_eq!(
            model_config_response_json(&ModelConfigResponse {
                config: Some(add_sub_config())
            }),
            fixture("config_add_sub.json")
        );
    }

    #[test]
    fn printf_g() {
        let cases: [(f64, usize, &str); 14] = [
            (0.1, 6, "0.1"),
            (1e-7, 6, "1e-07"),
            (123456792.0, 6, "1.23457e+08"),
            (123456792.0, 9, "123456792"),
            (1e10, 6, "1e+10"),
            (-2.5, 6, "-2.5"),
            (100000.0, 6, "100000"),
            (1000000.0, 6, "1e+06"),
            (0.0001, 6, "0.0001"),
            (0.00001, 6, "1e-05"),
            (1e100, 6, "1e+100"),
            (0.0001220703125, 9, "0.000122070312"),
            (-0.0, 6, "-0"),
            (1.5, 1, "2"),
        ];
        for (v, p, s) in cases {
            assert_eq!(format_g(v, p), s, "{v} %.{p}g");
        }
        assert_eq!(simple_ftoa(0.1), "0.1");
        assert_eq!(simple_ftoa(0.333_333_3), "0.333333313");
        assert_eq!(simple_ftoa(f32::from_bits(1)), "1.40129846e-45");
        assert_eq!(simple_dtoa(0.1), "0.1");
        assert_eq!(simple_dtoa(0.1 + 0.2), "0.30000000000000004");
    }

    #[test]
    fn numbers_go_through_rapidjson() {
        let text = |v: f32| {
            let mut out = Vec::new();
            write_protobuf_number(&mut out, f64::from(v), simple_ftoa(v));
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(1e10), "10000000000.0");
        assert_eq!(text(3.402_823_5e38), "3.4028234700000004e38");
        assert_eq!(text(-0.0), "0");
        assert_eq!(text(1.0), "1");
        assert_eq!(text(f32::NAN), "\"NaN\"");
        assert_eq!(text(f32::NEG_INFINITY), "\"-Infinity\"");
    }

    /// Whatever decodes as a `ModelConfig` renders without panicking and
    /// as JSON that parses.
    #[test]
    fn no_panic_on_arbitrary_configs() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let seed = add_sub_config().encode_to_vec();
        let mut rendered = 0;
        for _ in 0..3000 {
            let mut bytes = seed.clone();
            for _ in 0..(next() % 4 + 1) {
                let pos = (next() as usize) % bytes.len();
                bytes[pos] = next() as u8;
            }
            if let Ok(config) = ModelConfig::decode(bytes.as_slice()) {
                let body = model_config_json(&config);
                if !body.is_empty() {
                    json::parse(&body, 64).expect("renders valid JSON");
                }
                rendered += 1;
            }
        }
        assert!(rendered > 100, "{rendered}");
    }

    #[test]
    fn bytes_are_padded_standard_base64() {
        let mut out = Vec::new();
        let bytes = Value::Bytes(bytes::Bytes::from_static(&[0xFB, 0xFF, 0xBF, b'h']));
        write_value(&mut out, &bytes, &Kind::Bytes, "");
        assert_eq!(out, br#""+/+/aA==""#);
    }

    #[test]
    fn unknown_enum_numbers_are_numbers() {
        let mut config = add_sub_config();
        config.input[0].data_type = 99;
        let json = String::from_utf8(model_config_json(&config)).unwrap();
        assert!(
            json.contains(r#""name":"INPUT0","data_type":99,"format":"FORMAT_NONE""#),
            "{json}"
        );
    }
}
