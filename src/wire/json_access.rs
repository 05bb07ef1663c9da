//! Triton's JSON accessors (`TritonJson`, `triton/common/triton_json.h`,
//! r24.10) over a parsed [`Value`], with their failure texts, and the
//! mapping of parse errors; shared by every body decoder (`v2_request`,
//! `generate`, `translate::to_grpc::endpoints`). A failed accessor or a
//! syntax error is [`Error::json`] (Triton answers 500, we 400:
//! compatibility #1); nesting too deep is [`Error::invalid`].

use crate::error::{Error, Result};
use crate::wire::json::{self, Value};

pub(crate) const NOT_STRING: &str = "attempt to access JSON non-string as string";
pub(crate) const NOT_BOOL: &str = "attempt to access JSON non-boolean as boolean";
pub(crate) const NOT_UINT: &str = "attempt to access JSON non-unsigned-integer as unsigned-integer";
pub(crate) const NOT_ARRAY: &str = "attempt to access JSON non-array as array";
pub(crate) const NOT_OBJECT: &str = "attempt to access JSON non-object as object";
pub(crate) const NOT_MEMBERS: &str = "attempt to get members for non-object";

/// One whole JSON document (an empty body is
/// `failed to parse the request JSON buffer: The document is empty. at 0`).
pub(crate) fn parse(body: &[u8], max_depth: usize) -> Result<Value> {
    json::parse(body, max_depth).map_err(parse_error)
}

/// [`parse`] with a sink (`json::parse_with`; the v2 request's is
/// `v2_request::tensor_sink`).
pub(crate) fn parse_with<S: json::Sink>(
    body: &[u8],
    max_depth: usize,
    sink: &mut S,
) -> Result<Value> {
    json::parse_with(body, max_depth, sink).map_err(parse_error)
}

fn parse_error(e: json::ParseError) -> Error {
    match e {
        json::ParseError::TooDeep { .. } => Error::invalid(e.to_string()),
        json::ParseError::Syntax { .. } => Error::json(e.to_string()),
    }
}

pub(crate) fn as_str(v: &Value) -> Result<&[u8]> {
    v.as_bytes().ok_or_else(|| Error::json(NOT_STRING))
}

pub(crate) fn as_bool(v: &Value) -> Result<bool> {
    v.as_bool().ok_or_else(|| Error::json(NOT_BOOL))
}

pub(crate) fn as_uint(v: &Value) -> Result<u64> {
    v.as_u64().ok_or_else(|| Error::json(NOT_UINT))
}

pub(crate) fn as_array(v: &Value) -> Result<&json::Array> {
    v.as_array().ok_or_else(|| Error::json(NOT_ARRAY))
}

/// `Members()`: an object's members in document order.
pub(crate) fn members(v: &Value) -> Result<&[(Vec<u8>, Value)]> {
    v.as_object().ok_or_else(|| Error::json(NOT_MEMBERS))
}

/// `MemberAs*`'s lookup: the first member named `name` (of an object),
/// else `attempt to access non-existing object member '<name>'`.
pub(crate) fn member(v: &Value, name: impl AsRef<[u8]>) -> Result<&Value> {
    let name = name.as_ref();
    v.as_object()
        .and_then(|members| members.iter().find(|(k, _)| k.as_slice() == name))
        .map(|(_, v)| v)
        .ok_or_else(|| {
            Error::json(format!(
                "attempt to access non-existing object member '{}'",
                lossy(name)
            ))
        })
}

/// A JSON string as text, invalid UTF-8 replaced.
pub(crate) fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// How the infer and generate decoders report an accessor failure on a
/// named field: `Unable to parse '<field>': <accessor text>`.
pub(crate) trait Field<T> {
    fn field(self, name: &str) -> Result<T>;
}

impl<T> Field<T> for Result<T> {
    fn field(self, name: &str) -> Result<T> {
        self.map_err(|mut e| {
            e.message = format!("Unable to parse '{name}': {}", e.message);
            e
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    fn doc(text: &str) -> Value {
        parse(text.as_bytes(), json::MAX_DEPTH).unwrap()
    }

    #[test]
    fn accessor_texts_are_tritons() {
        let v = doc(r#"{"s":"x","b":true,"u":7,"a":[1],"s":"second"}"#);
        assert_eq!(as_str(member(&v, "s").unwrap()).unwrap(), b"x");
        assert!(as_bool(member(&v, "b").unwrap()).unwrap());
        assert_eq!(as_uint(member(&v, "u").unwrap()).unwrap(), 7);
        assert_eq!(as_array(member(&v, "a").unwrap()).unwrap().len(), 1);
        assert_eq!(members(&v).unwrap().len(), 5);
        let u = member(&v, "u").unwrap();
        for (result, text) in [
            (as_str(u).map(drop), NOT_STRING),
            (as_bool(u).map(drop), NOT_BOOL),
            (as_array(u).map(drop), NOT_ARRAY),
            (members(u).map(drop), NOT_MEMBERS),
            (as_uint(member(&v, "s").unwrap()).map(drop), NOT_UINT),
            (
                member(&v, "zz").map(drop),
                "attempt to access non-existing object member 'zz'",
            ),
            (
                member(u, "u").map(drop),
                "attempt to access non-existing object member 'u'",
            ),
        ] {
            let e = result.unwrap_err();
            assert_eq!((e.kind, e.message.as_str()), (Kind::JsonAccess, text));
        }
        let e = as_str(u).field("id").unwrap_err();
        assert_eq!(e.message, format!("Unable to parse 'id': {NOT_STRING}"));
    }

    #[test]
    fn parse_errors_map_like_triton() {
        let e = parse(b"", json::MAX_DEPTH).unwrap_err();
        assert_eq!(e.kind, Kind::JsonAccess);
        assert_eq!(
            e.message,
            "failed to parse the request JSON buffer: The document is empty. at 0"
        );
        let e = parse(b"[[[1]]]", 2).unwrap_err();
        assert_eq!(e.kind, Kind::InvalidArg);
    }
}
