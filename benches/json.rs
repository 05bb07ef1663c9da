//! Micro-benchmark of the JSON work of one `/infer` request, without
//! sockets: decoding a request of 2 × 262,144 FP32 numbers as JSON (the
//! load tool's `w5` integral and `w4` random bodies) and encoding the JSON
//! answer of the same size; and the same for the load tool's `w2` body
//! (2 × 16 elements, timed over batches of [`SMALL_BATCH`] requests).
//! And the JSON header of a binary request (2 × 16 FP32 in the binary
//! tail) as perf_analyzer and tritonclient write it (`header pa`,
//! `header tc`; decode only, timed over batches of [`SMALL_BATCH`]).
//! Prints the fastest of 15 runs (the least disturbed by other work on the
//! machine) in ms per request and in ns per element. Run:
//! `cargo bench --bench json` (add `-- decode` or `-- encode` for one half,
//! `integral`, `random`, `small` or `header` for one body, e.g. under `perf record`;
//! `reference` adds the same work done by `serde_json`; `--runs N` times N
//! runs instead of 15, e.g. `--runs 1` under `valgrind --tool=callgrind`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use tensorgate::model::{InferRequest, InferResponse, OutputTensor};
use tensorgate::wire::v2_request::{self, Body, DecodeLimits};
use tensorgate::wire::v2_response;

const ELEMENTS: usize = 262_144;
/// Elements per input of the `w2` body.
const SMALL: usize = 16;
/// `w2` requests decoded (or answers encoded) per timed run: one takes
/// microseconds, below what a single reading of the clock resolves well.
const SMALL_BATCH: usize = 1_000;
const RUNS: usize = 15;

/// One request body of the benchmark and the values it carries.
struct Workload {
    name: &'static str,
    values: Vec<f32>,
    body: Bytes,
    /// `Inference-Header-Content-Length` of a binary request.
    header_length: Option<Vec<u8>>,
    /// Requests per timed run.
    batch: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs = args
        .windows(2)
        .find(|w| w[0] == "--runs")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(RUNS);
    // `cargo bench` adds `--bench`; numbers are `--runs`'s.
    let words: Vec<String> = args
        .into_iter()
        .filter(|a| !a.starts_with('-') && a.parse::<usize>().is_err())
        .collect();
    let wanted = |what: &str| picked(&words, &["decode", "encode"], what);
    println!("| work (2 inputs, FP32) | ms, fastest of {runs} | ns per element |");
    println!("|---|---|---|");
    for workload in workloads() {
        let kind = workload.name.split(' ').next().unwrap_or_default();
        if !picked(&words, &["integral", "random", "small", "header"], kind) {
            continue;
        }
        let Workload {
            name,
            values,
            body,
            header_length,
            batch,
        } = &workload;
        let per_request = |time: Duration| time / *batch as u32;
        if wanted("decode") {
            let decode = fastest(runs, || {
                for _ in 0..*batch {
                    let decoded = v2_request::decode(
                        "add_sub",
                        "",
                        body.clone(),
                        header_length.as_deref(),
                        DecodeLimits {
                            max_input_size: 64 << 20,
                            max_json_depth: 100,
                        },
                    );
                    assert!(matches!(decoded, Ok(Body::Json(_))));
                }
            });
            row(
                &format!("decode request, {name}"),
                per_request(decode),
                values.len(),
            );
        }
        if wanted("encode") && header_length.is_none() {
            let response = response(values);
            let request = InferRequest::default();
            let encode = fastest(runs, || {
                for _ in 0..*batch {
                    let encoded = v2_response::encode(&response, &request).expect("encodes");
                    assert!(encoded.body_len() > values.len());
                }
            });
            row(
                &format!("encode answer, {name}"),
                per_request(encode),
                values.len(),
            );
        }
        if words.iter().any(|w| w == "reference") && *batch == 1 {
            reference(name, runs, body, values);
        }
    }
}

/// The bodies: `w5` and `w4` as Python clients print FP32 values (widened
/// to double, shortest round trip: `262143.0`, `0.37487652897834778`), and
/// the load tool's own `w2` (its values and format, `outputs` listed).
fn workloads() -> Vec<Workload> {
    let integral: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<f32> = (0..ELEMENTS)
        .map(|_| (next(&mut seed) >> 40) as f32 / (1u64 << 23) as f32)
        .collect();
    let widened = |v: &f32| format!("{:?}", f64::from(*v));
    let big = |name, values: Vec<f32>| Workload {
        name,
        body: request_body([&values, &values], widened, ""),
        header_length: None,
        values,
        batch: 1,
    };
    // benches/load.rs `values(16, 1)` and `values(16, 2)`, printed `{v}`.
    let small: Vec<f32> = [1u64, 2]
        .iter()
        .flat_map(|&input| {
            let mut state = input.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            (0..SMALL).map(move |_| (next(&mut state) >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect();
    let outputs = r#","outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false}},{"name":"OUTPUT1","parameters":{"binary_data":false}}]"#;
    vec![
        big("integral (w5)", integral),
        big("random (w4)", random),
        Workload {
            name: "small (w2)",
            body: request_body(
                [&small[..SMALL], &small[SMALL..]],
                |v| v.to_string(),
                outputs,
            ),
            header_length: None,
            values: small[..SMALL].to_vec(),
            batch: SMALL_BATCH,
        },
        binary("header pa (perf_analyzer)", PERF_ANALYZER_HEADER),
        binary("header tc (tritonclient)", TRITONCLIENT_HEADER),
    ]
}

/// perf_analyzer 2.41's header for add_sub 2×16 FP32 (`--shape
/// INPUT0:16 --shape INPUT1:16`), as it sent it to Triton: an empty `id`,
/// both outputs requested binary.
const PERF_ANALYZER_HEADER: &str = concat!(
    r#"{"id":"","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[16],"parameters":{"binary_data_size":64}},"#,
    r#"{"name":"INPUT1","datatype":"FP32","shape":[16],"parameters":{"binary_data_size":64}}],"#,
    r#""outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}},{"name":"OUTPUT1","parameters":{"binary_data":true}}]}"#
);

/// tritonclient.http's `_get_inference_request` (2.51) for the same
/// inputs of shape `[1,16]`, no outputs listed (`binary_data_output`
/// instead).
const TRITONCLIENT_HEADER: &str = concat!(
    r#"{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"FP32","parameters":{"binary_data_size":64}},"#,
    r#"{"name":"INPUT1","shape":[1,16],"datatype":"FP32","parameters":{"binary_data_size":64}}],"#,
    r#""parameters":{"binary_data_output":true}}"#
);

/// A binary request: `header`, then 2 × 16 FP32 in the tail.
fn binary(name: &'static str, header: &str) -> Workload {
    let mut body = header.as_bytes().to_vec();
    body.resize(header.len() + 2 * SMALL * 4, 0);
    Workload {
        name,
        values: vec![0.0; SMALL],
        body: Bytes::from(body),
        header_length: Some(header.len().to_string().into_bytes()),
        batch: SMALL_BATCH,
    }
}

/// With `reference`: the same work done by `serde_json` into and from
/// typed structs (`Vec<f32>` data; it prints f32 digits, not Triton's
/// widened doubles), as a yardstick for what a well-tuned general JSON
/// library costs per number.
fn reference(name: &str, runs: usize, body: &Bytes, values: &[f32]) {
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
    let parse = fastest(runs, || {
        let request: Request = serde_json::from_slice(body).expect("parses");
        assert_eq!(request.inputs[1].data.len(), values.len());
    });
    row(&format!("serde_json parse, {name}"), parse, values.len());
    let output = |name: &str| Tensor {
        name: name.to_string(),
        shape: vec![values.len() as u64],
        datatype: "FP32".to_string(),
        data: values.to_vec(),
    };
    let (first, second) = (output("OUTPUT0"), output("OUTPUT1"));
    let write = fastest(runs, || {
        let answer = Answer {
            model_name: "add_sub",
            outputs: [&first, &second],
        };
        let text = serde_json::to_vec(&answer).expect("writes");
        assert!(text.len() > values.len());
    });
    row(&format!("serde_json write, {name}"), write, values.len());
}

/// Whether `what` runs: when none of `choices` is on the command line, all
/// of them do; otherwise the ones named.
fn picked(words: &[String], choices: &[&str], what: &str) -> bool {
    !words.iter().any(|w| choices.contains(&w.as_str())) || words.iter().any(|w| w == what)
}

/// One request's time, and per element of its two inputs of `elements`.
fn row(what: &str, time: Duration, elements: usize) {
    let ns = time.as_nanos() as f64 / (2 * elements) as f64;
    let ms = time.as_secs_f64() * 1e3;
    let digits = if ms < 0.1 {
        6
    } else if ms < 1.0 {
        4
    } else {
        2
    };
    println!("| {what} | {ms:.digits$} | {ns:.1} |");
}

fn fastest(runs: usize, mut work: impl FnMut()) -> Duration {
    work();
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            work();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[0]
}

/// The request a client sends: two inputs (`INPUT0`, `INPUT1`) of the
/// values in `inputs`, each printed by `print`, then `rest` (members after
/// `inputs`, with their leading comma).
fn request_body(inputs: [&[f32]; 2], print: impl Fn(&f32) -> String, rest: &str) -> Bytes {
    let input = |i: usize| {
        let data: Vec<String> = inputs[i].iter().map(&print).collect();
        format!(
            r#"{{"name":"INPUT{i}","shape":[{}],"datatype":"FP32","data":[{}]}}"#,
            inputs[i].len(),
            data.join(",")
        )
    };
    Bytes::from(format!(r#"{{"inputs":[{},{}]{rest}}}"#, input(0), input(1)))
}

fn response(values: &[f32]) -> InferResponse {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let output = |name: &str| OutputTensor {
        name: name.to_string(),
        datatype: "FP32".into(),
        shape: vec![values.len() as i64],
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
