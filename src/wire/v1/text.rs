//! Protobuf text format as TRTIS wrote it (C++ `ShortDebugString` for
//! headers, `DebugString` for text bodies): fields in field-number order,
//! repeated fields repeated, map entries sorted by key, strings C-escaped
//! with octal escapes for every byte outside printable ASCII (so a header
//! value is always plain ASCII). prost-reflect's own writer uses the list
//! and comma syntax, which differs from the captures byte for byte; its
//! parser is used for `NV-InferRequest`.

use prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};

/// A v1 message the codec can render and parse: a prost message with its
/// descriptor (for reflection). The v1 messages implement it where the
/// generated types are known (`translate::v1::messages`), so this codec
/// stays generic.
pub trait V1Message: Message + Default {
    /// The message's descriptor; `None` only if the compiled-in set lacks it.
    fn descriptor() -> Option<MessageDescriptor>;
}

fn dynamic<M: V1Message>(message: &M) -> Option<DynamicMessage> {
    DynamicMessage::decode(M::descriptor()?, message.encode_to_vec().as_slice()).ok()
}

/// One line, as C++ `ShortDebugString` (header values).
pub fn short<M: V1Message>(message: &M) -> String {
    render(message, true)
}

/// Several lines, as C++ `DebugString` (text bodies and trailers).
pub fn debug<M: V1Message>(message: &M) -> String {
    render(message, false)
}

fn render<M: V1Message>(message: &M, single_line: bool) -> String {
    let mut writer = Writer {
        out: String::new(),
        single_line,
        indent: 0,
    };
    if let Some(message) = dynamic(message) {
        writer.message(&message);
    }
    if single_line && writer.out.ends_with(' ') {
        writer.out.pop();
    }
    writer.out
}

/// Protobuf JSON (proto3 mapping: lowerCamelCase names, 64-bit integers as
/// strings, enums by name), as `?format=json` answers.
pub fn json<M: V1Message>(message: &M) -> Vec<u8> {
    dynamic(message)
        .and_then(|m| serde_json::to_vec(&m).ok())
        .unwrap_or_else(|| b"{}".to_vec())
}

/// Parses protobuf text such as the `NV-InferRequest` header (any
/// spacing; unknown fields refused).
pub fn parse<M: V1Message>(value: &[u8]) -> Result<M, String> {
    let text = std::str::from_utf8(value).map_err(|_| "header is not valid UTF-8".to_string())?;
    let desc = M::descriptor().ok_or_else(|| "message descriptor missing".to_string())?;
    let message = DynamicMessage::parse_text_format(desc, text).map_err(|e| e.to_string())?;
    message.transcode_to().map_err(|e| e.to_string())
}

struct Writer {
    out: String,
    single_line: bool,
    indent: usize,
}

impl Writer {
    fn message(&mut self, message: &DynamicMessage) {
        for (field, value) in message.fields() {
            self.field(&field, value);
        }
    }

    fn field(&mut self, field: &FieldDescriptor, value: &Value) {
        match value {
            Value::List(items) => {
                for item in items {
                    self.value(field.name(), item, &field.kind());
                }
            }
            Value::Map(map) => {
                let Some(entry) = field.kind().as_message().cloned() else {
                    return;
                };
                let value_kind = entry.map_entry_value_field().kind();
                let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (key, value) in entries {
                    self.open(field.name());
                    self.line(&format!("key: {}", map_key(key)));
                    self.value("value", value, &value_kind);
                    self.close();
                }
            }
            other => self.value(field.name(), other, &field.kind()),
        }
    }

    fn value(&mut self, name: &str, value: &Value, kind: &Kind) {
        if let Value::Message(message) = value {
            self.open(name);
            self.message(message);
            self.close();
            return;
        }
        self.line(&format!("{name}: {}", scalar(value, kind)));
    }

    fn open(&mut self, name: &str) {
        self.line(&format!("{name} {{"));
        self.indent += 2;
    }

    fn close(&mut self) {
        self.indent = self.indent.saturating_sub(2);
        self.line("}");
    }

    fn line(&mut self, text: &str) {
        if self.single_line {
            self.out.push_str(text);
            self.out.push(' ');
        } else {
            self.out.extend(std::iter::repeat_n(' ', self.indent));
            self.out.push_str(text);
            self.out.push('\n');
        }
    }
}

fn scalar(value: &Value, kind: &Kind) -> String {
    match value {
        Value::Bool(b) => b.to_string(),
        Value::I32(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F32(f) => float(f64::from(*f)),
        Value::F64(f) => float(*f),
        Value::String(s) => quoted(s.as_bytes()),
        Value::Bytes(b) => quoted(b),
        Value::EnumNumber(n) => match kind.as_enum().and_then(|e| e.get_value(*n)) {
            Some(v) => v.name().to_string(),
            None => n.to_string(),
        },
        Value::Message(_) | Value::List(_) | Value::Map(_) => String::new(),
    }
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => quoted(s.as_bytes()),
    }
}

/// C++ `SimpleDtoa`-like: shortest round-trip digits, `inf`/`nan` words.
fn float(f: f64) -> String {
    if f.is_nan() {
        "nan".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{f}")
    }
}

/// C `CEscape` in double quotes.
fn quoted(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::v1 as pb;
    use pb::infer_response_header::{output, Output};

    #[test]
    fn request_status_is_one_line_in_field_order() {
        let status = pb::RequestStatus {
            code: pb::RequestStatusCode::InvalidArg as i32,
            msg: "bad \"x\"\n\u{e9}".into(),
            server_id: "inference:0".into(),
            request_id: 7,
        };
        assert_eq!(
            short(&status),
            r#"code: INVALID_ARG msg: "bad \"x\"\n\303\251" server_id: "inference:0" request_id: 7"#
        );
    }

    #[test]
    fn response_header_matches_the_capture() {
        let raw = |name: &str| Output {
            name: name.into(),
            raw: Some(output::Raw {
                dims: vec![16],
                batch_byte_size: 64,
            }),
            ..Default::default()
        };
        let header = pb::InferResponseHeader {
            model_name: "simple".into(),
            model_version: 1,
            batch_size: 1,
            output: vec![raw("OUTPUT0"), raw("OUTPUT1")],
            id: 0,
        };
        assert_eq!(
            short(&header),
            r#"model_name: "simple" model_version: 1 batch_size: 1 output { name: "OUTPUT0" raw { dims: 16 batch_byte_size: 64 } } output { name: "OUTPUT1" raw { dims: 16 batch_byte_size: 64 } }"#
        );
        assert_eq!(
            debug(&header).lines().take(6).collect::<Vec<_>>(),
            [
                "model_name: \"simple\"",
                "model_version: 1",
                "batch_size: 1",
                "output {",
                "  name: \"OUTPUT0\"",
                "  raw {",
            ]
        );
    }

    #[test]
    fn classes_and_empty_messages() {
        let header = pb::InferResponseHeader {
            output: vec![Output {
                name: "O".into(),
                batch_classes: vec![output::Classes {
                    cls: vec![output::Class {
                        idx: 15,
                        value: 16.0,
                        label: String::new(),
                    }],
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            short(&header),
            r#"output { name: "O" batch_classes { cls { idx: 15 value: 16 } } }"#
        );
        let status = pb::RequestStatus::default();
        assert_eq!(short(&status), "");
    }

    #[test]
    fn parses_the_captured_request_headers() {
        let header = parse::<pb::InferRequestHeader>(
            br#"batch_size: 1 input { name: "INPUT0" dims: 16 } input { name: "INPUT1" dims: 16 } output { name: "OUTPUT0" cls { count: 3 } } correlation_id: 42 flags: 1"#,
        )
        .expect("parses");
        assert_eq!(header.batch_size, 1);
        assert_eq!(header.input.len(), 2);
        assert_eq!(header.input[1].dims, [16]);
        assert_eq!(header.output[0].cls.as_ref().map(|c| c.count), Some(3));
        assert_eq!((header.correlation_id, header.flags), (42, 1));
        for bad in [
            &b"batch_size: 1 colour: 2"[..],
            b"batch_size: -1",
            b"input { name: ",
            b"\xff",
        ] {
            assert!(parse::<pb::InferRequestHeader>(bad).is_err(), "{bad:?}");
        }
    }
}
