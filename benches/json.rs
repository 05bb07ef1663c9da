//! Micro-benchmark of the big-JSON work of one `/infer` request, without
//! sockets: decoding a request of 2 × 262,144 FP32 numbers as JSON (the
//! load tool's `w5` integral and `w4` random bodies) and encoding the JSON
//! answer of the same size. Prints the fastest of 15 runs (the least disturbed by other work on the machine) in ms and in ns
//! per element. Run: `cargo bench --bench json` (add `-- decode` or
//! `-- encode` for one half, `integral` or `random` for one body, e.g.
//! under `perf record`; `reference` adds the same work done by
//! `serde_json`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use tensorgate::model::{InferRequest, InferResponse, OutputTensor};
use tensorgate::wire::v2_request::{self, Body, DecodeLimits};
use tensorgate::wire::v2_response;

const ELEMENTS: usize = 262_144;
const RUNS: usize = 15;

fn main() {
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |what: &str| picked(&words, &["decode", "encode"], what);
    println!("| work (2 x {ELEMENTS} FP32) | ms, fastest of {RUNS} | ns per element |");
    println!("|---|---|---|");
    let integral: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<f32> = (0..ELEMENTS)
        .map(|_| (next(&mut seed) >> 40) as f32 / (1u64 << 23) as f32)
        .collect();
    for (name, values) in [("integral (w5)", &integral), ("random (w4)", &random)] {
        let kind = name.split(' ').next().unwrap_or_default();
        if !picked(&words, &["integral", "random"], kind) {
            continue;
        }
        let body = request_body(values);
        if wanted("decode") {
            let decode = fastest(|| {
                let decoded = v2_request::decode(
                    "add_sub",
                    "",
                    body.clone(),
                    None,
                    DecodeLimits {
                        max_input_size: 64 << 20,
                        max_json_depth: 100,
                    },
                );
                assert!(matches!(decoded, Ok(Body::Json(_))));
            });
            row(&format!("decode request, {name}"), decode);
        }
        if wanted("encode") {
            let response = response(values);
            let request = InferRequest::default();
            let encode = fastest(|| {
                let encoded = v2_response::encode(&response, &request).expect("encodes");
                assert!(encoded.body_len() > ELEMENTS);
            });
            row(&format!("encode answer, {name}"), encode);
        }
        if words.iter().any(|w| w == "reference") {
            reference(name, &body, values);
        }
    }
}

/// With `reference`: the same work done by `serde_json` into and from
/// typed structs (`Vec<f32>` data; it prints f32 digits, not Triton's
/// widened doubles), as a yardstick for what a well-tuned general JSON
/// library costs per number.
fn reference(name: &str, body: &Bytes, values: &[f32]) {
    #[derive(serde::Deserialize, serde::Serialize)]
    struct Tensor {
        name: String,
        shape: Vec<u64>,
        datatype: String,
        data: Vec<f32>,
    }
    #[derive(serde::Deserialize)]
    struct Request {
        inputs: Vec<Tensor>,
    }
    #[derive(serde::Serialize)]
    struct Answer<'a> {
        model_name: &'a str,
        outputs: [&'a Tensor; 2],
    }
    let parse = fastest(|| {
        let request: Request = serde_json::from_slice(body).expect("parses");
        assert_eq!(request.inputs[1].data.len(), ELEMENTS);
    });
    row(&format!("serde_json parse, {name}"), parse);
    let output = |name: &str| Tensor {
        name: name.to_string(),
        shape: vec![ELEMENTS as u64],
        datatype: "FP32".to_string(),
        data: values.to_vec(),
    };
    let (first, second) = (output("OUTPUT0"), output("OUTPUT1"));
    let write = fastest(|| {
        let answer = Answer {
            model_name: "add_sub",
            outputs: [&first, &second],
        };
        let text = serde_json::to_vec(&answer).expect("writes");
        assert!(text.len() > ELEMENTS);
    });
    row(&format!("serde_json write, {name}"), write);
}

/// Whether `what` runs: when none of `choices` is on the command line, all
/// of them do; otherwise the ones named.
fn picked(words: &[String], choices: &[&str], what: &str) -> bool {
    !words.iter().any(|w| choices.contains(&w.as_str())) || words.iter().any(|w| w == what)
}

fn row(what: &str, time: Duration) {
    let ns = time.as_nanos() as f64 / (2 * ELEMENTS) as f64;
    println!("| {what} | {:.2} | {ns:.1} |", time.as_secs_f64() * 1e3);
}

fn fastest(mut work: impl FnMut()) -> Duration {
    work();
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            work();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[0]
}

/// The request a Triton client sends: FP32 values widened to double and
/// printed shortest (`{:?}` of an f64 round-trips, as Python's `repr` does).
fn request_body(values: &[f32]) -> Bytes {
    let data: Vec<String> = values
        .iter()
        .map(|&v| format!("{:?}", f64::from(v)))
        .collect();
    let data = data.join(",");
    let input = |name: &str| {
        format!(r#"{{"name":"{name}","shape":[{ELEMENTS}],"datatype":"FP32","data":[{data}]}}"#)
    };
    Bytes::from(format!(
        r#"{{"inputs":[{},{}]}}"#,
        input("INPUT0"),
        input("INPUT1")
    ))
}

fn response(values: &[f32]) -> InferResponse {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let output = |name: &str| OutputTensor {
        name: name.to_string(),
        datatype: "FP32".into(),
        shape: vec![ELEMENTS as i64],
        data: Bytes::from(raw.clone()),
    };
    InferResponse {
        model_name: "add_sub".to_string(),
        outputs: vec![output("OUTPUT0"), output("OUTPUT1")],
        ..InferResponse::default()
    }
}

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
