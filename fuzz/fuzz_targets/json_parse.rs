//! Fuzz target for the rapidjson-compatible JSON parser (`tensorgate::wire::json`).
//!
//! Any input must parse or fail without panicking (libFuzzer reports panics as crashes),
//! and the result must satisfy a few cheap invariants:
//! * a syntax error's offset lies within the input;
//! * the depth limit only ever turns a result into `TooDeep`: when parsing with the
//!   default limit succeeds or fails with a syntax error, parsing without a limit gives
//!   the same result;
//! * every string and member name in the DOM survives `write_str` followed by `parse`.
#![no_main]

use std::borrow::Cow;

use libfuzzer_sys::fuzz_target;
use tensorgate::wire::json::{parse, ParseError, Value, MAX_DEPTH};
use tensorgate::wire::json_write::write_str;

fuzz_target!(|data: &[u8]| check(data));

fn check(data: &[u8]) {
    let limited = parse(data, MAX_DEPTH);
    match &limited {
        Err(ParseError::Syntax { offset, .. }) => {
            assert!(*offset <= data.len(), "offset {offset} > {}", data.len());
            assert_eq!(parse(data, usize::MAX), limited);
        }
        Err(ParseError::TooDeep { limit }) => assert_eq!(*limit, MAX_DEPTH),
        Ok(v) => {
            // Debug text compares NaN equal to NaN, unlike PartialEq.
            let unlimited = parse(data, usize::MAX).expect("unlimited parse failed");
            assert_eq!(format!("{v:?}"), format!("{unlimited:?}"));
            check_strings(v);
        }
    }
    // A tight limit must not change anything but the depth verdict either.
    let _ = parse(data, 1);
}

/// Walks the DOM without recursion and round-trips every string through the writer.
fn check_strings(root: &Value) {
    let mut stack = vec![root];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => round_trip(s),
            Value::Array(items) => {
                // Numbers of a compact array are made on the fly; only stored
                // values can hold strings.
                for item in items.iter() {
                    if let Cow::Borrowed(v) = item {
                        stack.push(v);
                    }
                }
            }
            Value::Object(members) => {
                for (k, v) in members {
                    round_trip(k);
                    stack.push(v);
                }
            }
            _ => {}
        }
    }
}

fn round_trip(s: &[u8]) {
    let mut text = Vec::new();
    write_str(&mut text, s);
    match parse(&text, MAX_DEPTH) {
        Ok(Value::String(back)) => assert_eq!(back, s),
        other => panic!("write_str output {text:?} parsed as {other:?}"),
    }
}
