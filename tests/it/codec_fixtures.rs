//! Fixture-driven tests of the v2 infer codecs: `tests/fixtures/v2/requests.txt`
//! (body + header length → decoded request or error) and
//! `tests/fixtures/v2/responses.txt` (upstream outputs → Triton's answer).
//! Each file's header documents its record format.

use std::fmt::Write;

use bytes::Bytes;
use tensorgate::model::{
    InferRequest, InferResponse, InputData, OutputKind, OutputTensor, Param, RequestedOutput,
};
use tensorgate::wire::v2_request::{decode, Body, DecodeLimits};
use tensorgate::wire::v2_response::encode;

const LIMITS: DecodeLimits = DecodeLimits {
    max_input_size: 1 << 20,
    max_json_depth: 100,
};

/// Records: blank-line separated groups of `key: value` lines (`#` = comment).
fn records(name: &str) -> Vec<Vec<(String, String)>> {
    let path = format!("{}/tests/fixtures/v2/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.split("\n\n")
        .map(|block| {
            block
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .map(|l| {
                    let (k, v) = l.split_once(": ").unwrap_or((l.trim_end_matches(':'), ""));
                    (k.to_string(), v.to_string())
                })
                .collect::<Vec<_>>()
        })
        .filter(|r| !r.is_empty())
        .collect()
}

fn get<'a>(record: &'a [(String, String)], key: &str) -> Option<&'a str> {
    record
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// `\xNN` is the byte NN; everything else stands for itself.
fn unescape(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = s.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if let [b'\\', b'x', h, l, more @ ..] = rest {
            if let Ok(v) = u8::from_str_radix(std::str::from_utf8(&[*h, *l]).unwrap_or("zz"), 16) {
                out.push(v);
                rest = more;
                continue;
            }
        }
        out.push(b);
        rest = tail;
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Vec<u8> {
    if text == "-" {
        return Vec::new();
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn param_text(p: &Param) -> String {
    match p {
        Param::Bool(b) => format!("b:{b}"),
        Param::Int64(n) => format!("i:{n}"),
        Param::Uint64(n) => format!("u:{n}"),
        Param::Double(d) => format!("d:{d}"),
        Param::String(s) => format!("s:{s}"),
    }
}

fn summary(r: &InferRequest) -> String {
    let params: Vec<String> = r
        .parameters
        .iter()
        .map(|(k, v)| format!("{k}={}", param_text(v)))
        .collect();
    let inputs: Vec<String> = r
        .inputs
        .iter()
        .map(|i| {
            let data = match &i.data {
                InputData::Raw(b) => hex(b),
                InputData::SharedMemory(s) => {
                    format!("shm:{}@{}+{}", s.region, s.offset, s.byte_size)
                }
                InputData::Streamed(len) => format!("streamed:{len}"),
            };
            format!("{}:{}:{:?}:{data}", i.name, i.datatype, i.shape).replace(", ", ",")
        })
        .collect();
    let outputs: Vec<String> = r
        .outputs
        .iter()
        .map(|o| {
            let shm = o
                .shared_memory
                .as_ref()
                .map(|s| format!(":{}@{}+{}", s.region, s.offset, s.byte_size));
            format!(
                "{}:{:?}:{}{}",
                o.name,
                o.kind,
                o.classification,
                shm.unwrap_or_default()
            )
        })
        .collect();
    let unlisted = r
        .unlisted_kind
        .map_or("-".to_string(), |k| format!("{k:?}"));
    format!(
        "id={} | params={} | inputs={} | outputs={} | unlisted={unlisted}",
        String::from_utf8_lossy(&r.id),
        params.join(","),
        inputs.join(","),
        outputs.join(",")
    )
}

#[test]
fn request_fixtures() {
    let cases = records("requests.txt");
    assert!(
        cases.len() >= 40,
        "fixture file read: {} cases",
        cases.len()
    );
    for record in cases {
        let name = get(&record, "case").expect("case name");
        let body_text = get(&record, "body").unwrap_or("");
        let (body, mut ihcl) = match body_text.split_once("||") {
            Some((json, tail)) => {
                let mut body = unescape(json);
                let len = body.len().to_string();
                body.extend(unescape(tail));
                (body, Some(len))
            }
            None => (unescape(body_text), None),
        };
        if let Some(v) = get(&record, "ihcl") {
            ihcl = Some(v.to_string());
        }
        let expect = get(&record, "expect").expect("expect");
        let got = match decode(
            "m",
            "",
            Bytes::from(body),
            ihcl.as_deref().map(str::as_bytes),
            LIMITS,
        ) {
            Ok(Body::Json(r)) => format!("ok {}", summary(&r)),
            Ok(Body::Raw(b)) => format!("raw {}", b.len()),
            Err(e) => format!("error {} {}", e.status(), e.message),
        };
        assert_eq!(got, expect, "case: {name}");
    }
}

#[test]
fn response_fixtures() {
    let cases = records("responses.txt");
    assert!(
        cases.len() >= 13,
        "fixture file read: {} cases",
        cases.len()
    );
    for record in cases {
        let name = get(&record, "case").expect("case name");
        let mut request = InferRequest::default();
        let mut response = InferResponse {
            id: get(&record, "id").map(unescape).unwrap_or_default(),
            model_name: "m".into(),
            model_version: "1".into(),
            ..InferResponse::default()
        };
        for (_, line) in record.iter().filter(|(k, _)| k == "output") {
            let [name, dtype, shape, data, kind] = line.split(' ').collect::<Vec<_>>()[..] else {
                panic!("bad output line {line}")
            };
            let shape: Vec<i64> = shape
                .trim_matches(['[', ']'])
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| d.parse().expect("dim"))
                .collect();
            let kind = match kind {
                "json" => OutputKind::Json,
                "binary" => OutputKind::Binary,
                _ => OutputKind::SharedMemory,
            };
            request.outputs.push(RequestedOutput {
                name: name.into(),
                classification: 0,
                kind,
                shared_memory: None,
            });
            response.outputs.push(OutputTensor {
                name: name.into(),
                datatype: dtype.into(),
                shape,
                data: Bytes::from(unhex(data)),
            });
        }
        let expect = unescape(get(&record, "expect").expect("expect"));
        match encode(&response, &request) {
            Ok(encoded) => {
                assert_eq!(
                    String::from_utf8_lossy(&encoded.header),
                    String::from_utf8_lossy(&expect),
                    "case: {name}"
                );
                assert_eq!(encoded.header, expect, "case: {name}");
                let tail: Vec<u8> = encoded.tails.concat();
                assert_eq!(
                    hex(&tail),
                    get(&record, "tail").unwrap_or(""),
                    "case: {name}"
                );
                let want_ct = if tail.is_empty() {
                    "application/json"
                } else {
                    "application/octet-stream"
                };
                assert_eq!(encoded.content_type(), want_ct, "case: {name}");
                assert_eq!(
                    encoded.header_length().is_some(),
                    !tail.is_empty(),
                    "case: {name}"
                );
            }
            Err(e) => {
                let got = format!("error {} {}", e.status(), e.message);
                assert_eq!(got.as_bytes(), &expect[..], "case: {name}");
            }
        }
    }
}
