//! Bridge mode of system shared memory (`[shared_memory] mode = "bridge"`):
//! the gateway answers register, status and unregister itself, with
//! Triton's texts, for objects the upstream (the demo, on another "host")
//! cannot see, and `/infer` reads inputs from the regions and writes
//! outputs into them (mixed with JSON and binary tensors, refusals in
//! Triton's order and texts, a streamed body's answer collected); CUDA
//! shared memory is refused. Forward mode (the default) sends them
//! upstream: `v2_endpoints::shared_memory_trace_and_logging`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::raw::{connect, header, read_answer};
use crate::support::{assert_answer, text, GatewayProcess, Harness};
use tensorgate::config::SharedMemoryMode;

/// A fresh directory standing in for `/dev/shm`, removed at the end.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new() -> ShmDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("tensorgate-it-shm-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        ShmDir(path)
    }

    fn object(&self, name: &str, len: u64) -> PathBuf {
        let path = self.0.join(name);
        std::fs::File::create(&path).unwrap().set_len(len).unwrap();
        path
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn bridge(dir: &ShmDir) -> Harness {
    let dir = dir.0.clone();
    Harness::start_with(move |c| {
        c.shared_memory.mode = SharedMemoryMode::Bridge;
        c.shared_memory.dir = dir;
        c.shared_memory.max_regions = 4;
        c.shared_memory.max_total_bytes = 4096;
    })
    .await
}

const JSON: &str = "application/json";

fn register_body(key: &str, offset: u64, byte_size: u64) -> String {
    format!(r#"{{"key":"{key}","offset":{offset},"byte_size":{byte_size}}}"#)
}

async fn register(h: &Harness, name: &str, key: &str, offset: u64, size: u64) -> (u16, String) {
    let path = format!("/v2/systemsharedmemory/region/{name}/register");
    let answer = h.post(&path, register_body(key, offset, size)).await;
    (answer.status, text(&answer))
}

/// Unregisters `name` (every region when empty): status and body.
async fn unregister(h: &Harness, name: &str) -> (u16, String) {
    let path = match name {
        "" => "/v2/systemsharedmemory/unregister".to_string(),
        name => format!("/v2/systemsharedmemory/region/{name}/unregister"),
    };
    let answer = h.post(&path, "").await;
    (answer.status, text(&answer))
}

const DONE: (u16, String) = (200, String::new());

#[tokio::test]
async fn register_status_and_unregister_are_answered_by_the_gateway() {
    let dir = ShmDir::new();
    dir.object("input_simple", 128);
    dir.object("output_simple", 64);
    let h = bridge(&dir).await;
    assert_eq!(
        register(&h, "input_data", "/input_simple", 0, 128).await,
        DONE
    );
    assert_eq!(
        register(&h, "output_data", "/output_simple", 0, 64).await,
        DONE
    );
    // A second region on the same object (Triton 2.51 refuses it: compatibility.md).
    assert_eq!(register(&h, "tail", "/input_simple", 64, 64).await.0, 200);
    assert_answer(
        &h.get("/v2/systemsharedmemory/status").await,
        200,
        JSON,
        r#"[{"name":"input_data","key":"/input_simple","offset":0,"byte_size":128},{"name":"output_data","key":"/output_simple","offset":0,"byte_size":64},{"name":"tail","key":"/input_simple","offset":64,"byte_size":64}]"#,
    );
    assert_answer(
        &h.get("/v2/systemsharedmemory/region/tail/status").await,
        200,
        JSON,
        r#"[{"name":"tail","key":"/input_simple","offset":64,"byte_size":64}]"#,
    );
    assert_eq!(unregister(&h, "tail").await, DONE);
    assert_answer(
        &h.get("/v2/systemsharedmemory/region/tail/status").await,
        404,
        JSON,
        r#"{"error":"Unable to find system shared memory region: 'tail'"}"#,
    );
    // Unregistering an unknown region is no error (Triton).
    assert_eq!(unregister(&h, "tail").await, DONE);
    assert_eq!(unregister(&h, "").await, DONE);
    assert_answer(
        &h.get("/v2/systemsharedmemory/status").await,
        200,
        JSON,
        "[]",
    );
    // The demo upstream refuses every registration (it cannot open the
    // objects, forward mode shows it): these 200s are the gateway's own.
    assert_eq!(register(&h, "again", "/input_simple", 0, 8).await.0, 200);
}

#[tokio::test]
async fn every_refusal_has_tritons_text() {
    let dir = ShmDir::new();
    dir.object("obj", 64);
    std::os::unix::fs::symlink(dir.0.join("obj"), dir.0.join("link")).unwrap();
    let h = bridge(&dir).await;
    assert_eq!(register(&h, "r", "/obj", 0, 64).await.0, 200);
    let invalid_args = |name: &str| {
        format!(r#"{{"error":"failed to register shared memory region '{name}': invalid args"}}"#)
    };
    let cases: Vec<(&str, String, u16, String)> = vec![
        ("r", register_body("/obj", 0, 8), 400,
         r#"{"error":"shared memory region 'r' already in manager"}"#.into()),
        ("k", register_body("/nope", 0, 8), 400,
         r#"{"error":"Unable to open shared memory region: '/nope'"}"#.into()),
        ("k", register_body("/../etc/passwd", 0, 8), 400,
         r#"{"error":"Unable to open shared memory region: '/../etc/passwd'"}"#.into()),
        ("k", register_body("/link", 0, 8), 400,
         r#"{"error":"Unable to open shared memory region: '/link'"}"#.into()),
        ("s", register_body("/obj", 0, 65), 400, invalid_args("s")),
        ("s", register_body("/obj", 60, 8), 400, invalid_args("s")),
        ("s", register_body("/obj", 18446744073709551615, 2), 400, invalid_args("s")),
        ("z", register_body("/obj", 0, 0), 400,
         r#"{"error":"failed to register shared memory region 'z': unable to process address spaceInvalid argument"}"#.into()),
        ("b", r#"{"offset":0,"byte_size":8}"#.into(), 400,
         r#"{"error":"Shared memory register request has no 'key' field"}"#.into()),
        ("b", r#"{"key":"/obj"}"#.into(), 400,
         r#"{"error":"Shared memory register request has no 'byte_size' field"}"#.into()),
    ];
    for (name, body, status, want) in cases {
        let path = format!("/v2/systemsharedmemory/region/{name}/register");
        assert_answer(&h.post(&path, body.clone()).await, status, JSON, &want);
    }
    assert_answer(
        &h.post(
            "/v2/systemsharedmemory/register",
            register_body("/obj", 0, 8),
        )
        .await,
        400,
        JSON,
        r#"{"error":"'region name' is necessary to register system shared memory region"}"#,
    );
    assert_answer(
        &h.get("/v2/systemsharedmemory/region/nope/status").await,
        404,
        JSON,
        r#"{"error":"Unable to find system shared memory region: 'nope'"}"#,
    );
    // Only the first registration holds anything.
    assert_answer(
        &h.get("/v2/systemsharedmemory/status").await,
        200,
        JSON,
        r#"[{"name":"r","key":"/obj","offset":0,"byte_size":64}]"#,
    );
}

#[tokio::test]
async fn limits_on_regions_and_bytes() {
    let dir = ShmDir::new();
    dir.object("big", 8192);
    let h = bridge(&dir).await;
    let (status, body) = register(&h, "huge", "/big", 0, 4097).await;
    assert_eq!(status, 400);
    assert!(body.contains("shared_memory.max_total_bytes"), "{body}");
    for name in ["a", "b", "c", "d"] {
        assert_eq!(register(&h, name, "/big", 0, 16).await.0, 200);
    }
    let (status, body) = register(&h, "e", "/big", 0, 16).await;
    assert_eq!(status, 400);
    assert!(body.contains("shared_memory.max_regions"), "{body}");
    // Unregistering frees the room.
    assert_eq!(unregister(&h, "a").await, DONE);
    assert_eq!(register(&h, "e", "/big", 0, 16).await.0, 200);
}

#[tokio::test]
async fn key_prefixes_limit_what_clients_may_register() {
    let dir = ShmDir::new();
    dir.object("job-1", 16);
    dir.object("secret", 16);
    let path = dir.0.clone();
    let h = Harness::start_with(move |c| {
        c.shared_memory.mode = SharedMemoryMode::Bridge;
        c.shared_memory.dir = path;
        c.shared_memory.key_prefixes = vec!["/job-".into()];
    })
    .await;
    assert_eq!(register(&h, "ok", "/job-1", 0, 16).await.0, 200);
    assert_eq!(
        register(&h, "no", "/secret", 0, 16).await,
        (
            403,
            r#"{"error":"shared memory key '/secret' is not allowed by this gateway (shared_memory.key_prefixes)"}"#.into()
        )
    );
}

#[tokio::test]
async fn cuda_shared_memory_is_refused_in_bridge_mode() {
    let dir = ShmDir::new();
    let h = bridge(&dir).await;
    let refused = r#"{"error":"CUDA shared memory is not available through this gateway: it bridges system shared memory to a remote upstream ([shared_memory] mode = \"bridge\"); use system shared memory"}"#;
    assert_answer(
        &h.get("/v2/cudasharedmemory/status").await,
        501,
        JSON,
        refused,
    );
    assert_answer(
        &h.post(
            "/v2/cudasharedmemory/region/g/register",
            r#"{"raw_handle":{"b64":""},"device_id":0,"byte_size":8}"#,
        )
        .await,
        501,
        JSON,
        refused,
    );
    assert_answer(
        &h.post("/v2/cudasharedmemory/unregister", "").await,
        501,
        JSON,
        refused,
    );
    // Methods are still checked first.
    assert_eq!(h.get("/v2/systemsharedmemory/register").await.status, 405);
}

#[tokio::test]
async fn the_default_directory_is_dev_shm() {
    let Ok(meta) = std::fs::metadata("/dev/shm") else {
        return; // not Linux with a shared-memory mount: nothing to prove
    };
    assert!(meta.is_dir());
    let key = format!("/tensorgate-it-{}", std::process::id());
    let path = PathBuf::from(format!("/dev/shm{key}"));
    std::fs::File::create(&path).unwrap().set_len(32).unwrap();
    let h = Harness::start_with(|c| c.shared_memory.mode = SharedMemoryMode::Bridge).await;
    let registered = register(&h, "r", &key, 0, 32).await;
    let _ = std::fs::remove_file(&path);
    assert_eq!(registered, DONE);
}

const ADD_SUB: &str = "/v2/models/add_sub/infer";

fn fp32s(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

fn int32s(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(i32::to_le_bytes).collect()
}

/// `len` bytes of `path` from `at`.
fn read_at(path: &Path, at: usize, len: usize) -> Vec<u8> {
    std::fs::read(path).unwrap()[at..at + len].to_vec()
}

/// The `parameters` naming a window of `region`.
fn in_region(region: &str, offset: u64, byte_size: u64) -> String {
    format!(
        r#"{{"shared_memory_region":"{region}","shared_memory_offset":{offset},"shared_memory_byte_size":{byte_size}}}"#
    )
}

#[tokio::test]
async fn nvidia_simple_shm_flow_reads_and_writes_the_regions() {
    // simple_http_shm_client.py: both inputs in one region, both outputs
    // in another, the answer metadata only.
    let dir = ShmDir::new();
    let input = dir.object("input_simple", 128);
    let output = dir.object("output_simple", 128);
    let (a, b): (Vec<i32>, Vec<i32>) = ((0..16).collect(), vec![1; 16]);
    std::fs::write(&input, [int32s(a.clone()), int32s(b.clone())].concat()).unwrap();
    let h = bridge(&dir).await;
    for (name, key) in [
        ("input_data", "/input_simple"),
        ("output_data", "/output_simple"),
    ] {
        assert_eq!(register(&h, name, key, 0, 128).await, DONE);
    }
    let body = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{}}},{{"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{}}}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":false,"shared_memory_region":"output_data","shared_memory_byte_size":64}}}},{{"name":"OUTPUT1","parameters":{}}}]}}"#,
        in_region("input_data", 0, 64),
        in_region("input_data", 64, 64),
        in_region("output_data", 64, 64),
    );
    assert_answer(
        &h.post("/v2/models/simple/infer", body).await,
        200,
        JSON,
        r#"{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16]}]}"#,
    );
    let sums = int32s(a.iter().zip(&b).map(|(x, y)| x + y));
    let diffs = int32s(a.iter().zip(&b).map(|(x, y)| x - y));
    assert_eq!(read_at(&output, 0, 64), sums);
    assert_eq!(read_at(&output, 64, 64), diffs);
    // The upstream got the bytes, and no region names.
    let sent = h.demo.last_request().unwrap();
    assert_eq!(sent.raw_input_contents, [int32s(a), int32s(b)]);
    let named = |p: &std::collections::HashMap<String, _>| p.contains_key("shared_memory_region");
    assert!(!sent.inputs.iter().any(|i| named(&i.parameters)));
    assert!(!sent.outputs.iter().any(|o| named(&o.parameters)));
    // Nothing is held once answered.
    assert_eq!(unregister(&h, "").await, DONE);
}

#[tokio::test]
async fn json_binary_and_shared_memory_tensors_mix_and_classification_keeps_its_rules() {
    let dir = ShmDir::new();
    let object = dir.object("io", 32);
    std::fs::write(
        &object,
        [fp32s([10.0, 20.0, 30.0, 40.0]), vec![0; 16]].concat(),
    )
    .unwrap();
    let h = bridge(&dir).await;
    assert_eq!(register(&h, "in", "/io", 0, 16).await, DONE);
    assert_eq!(register(&h, "out", "/io", 16, 16).await, DONE);
    let shm_input1 = format!(
        r#"{{"name":"INPUT1","datatype":"FP32","shape":[4],"parameters":{}}}"#,
        in_region("in", 0, 16)
    );
    let shm_output1 = format!(
        r#"{{"name":"OUTPUT1","parameters":{}}}"#,
        in_region("out", 0, 16)
    );
    // JSON INPUT0; OUTPUT0 classified (JSON), OUTPUT1 in the region.
    let body = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[4],"data":[1,2,3,4]}},{shm_input1}],"outputs":[{{"name":"OUTPUT0","parameters":{{"classification":2}}}},{shm_output1}]}}"#
    );
    assert_answer(
        &h.post(ADD_SUB, body).await,
        200,
        JSON,
        r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"BYTES","shape":[2],"data":["44.000000:3:label3","33.000000:2:label2"]},{"name":"OUTPUT1","datatype":"FP32","shape":[4]}]}"#,
    );
    assert_eq!(read_at(&object, 16, 16), fp32s([-9.0, -18.0, -27.0, -36.0]));
    // Binary INPUT0 and OUTPUT0 beside the region's.
    let json = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[4],"parameters":{{"binary_data_size":16}}}},{shm_input1}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":true}}}},{shm_output1}]}}"#
    );
    let r = h
        .post_binary(ADD_SUB, &json, &fp32s([2.0, 4.0, 6.0, 8.0]))
        .await;
    let header = r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[4],"parameters":{"binary_data_size":16}},{"name":"OUTPUT1","datatype":"FP32","shape":[4]}]}"#;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Inference-Header-Content-Length"),
        Some(header.len().to_string().as_str())
    );
    let answer = r.body_bytes();
    assert_eq!(&answer[..header.len()], header.as_bytes());
    assert_eq!(
        &answer[header.len()..],
        fp32s([12.0, 24.0, 36.0, 48.0]).as_slice()
    );
    assert_eq!(read_at(&object, 16, 16), fp32s([-8.0, -16.0, -24.0, -32.0]));
}

#[tokio::test]
async fn infer_refusals_have_tritons_texts_in_tritons_order() {
    let dir = ShmDir::new();
    let object = dir.object("obj", 64);
    let h = bridge(&dir).await;
    assert_eq!(register(&h, "r", "/obj", 0, 64).await, DONE);
    let input1 = |params: &str| {
        format!(r#"{{"name":"INPUT1","datatype":"FP32","shape":[4],"parameters":{params}}}"#)
    };
    let request = |input1: &str, output1: &str| {
        format!(
            r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[4],"data":[1,2,3,4]}},{input1}],"outputs":[{{"name":"OUTPUT0"}},{{"name":"OUTPUT1","parameters":{output1}}}]}}"#
        )
    };
    let good_in = input1(&in_region("r", 0, 16));
    let good_out = in_region("r", 16, 16);
    let error = |text: &str| format!(r#"{{"error":"{text}"}}"#);
    let cases: Vec<(String, u16, String)> = vec![
        (
            request(&input1(&in_region("nope", 0, 16)), &good_out),
            404,
            error("Unable to find shared memory region: 'nope'"),
        ),
        (
            request(&input1(&in_region("r", 64, 16)), &good_out),
            400,
            error("Invalid offset for shared memory region: 'r'"),
        ),
        (
            request(&input1(&in_region("r", 56, 16)), &good_out),
            400,
            error("Invalid offset + byte size for shared memory region: 'r'"),
        ),
        (
            // No byte size: 0, whose `offset + size - 1` wraps in Triton.
            request(&input1(r#"{"shared_memory_region":"r"}"#), &good_out),
            400,
            error("Invalid offset + byte size for shared memory region: 'r'"),
        ),
        (
            request(&input1(&in_region("r", 0, 12)), &good_out),
            400,
            error("[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 16, got 12"),
        ),
        (
            request(&good_in, &in_region("gone", 0, 16)),
            404,
            error("Unable to find shared memory region: 'gone'"),
        ),
        (
            request(&good_in, r#"{"shared_memory_region":"r","shared_memory_byte_size":16,"binary_data":true}"#),
            400,
            error("Output can't set both 'shared_memory_region' and 'binary_data'"),
        ),
        (
            request(&good_in, r#"{"shared_memory_region":"r","shared_memory_byte_size":16,"classification":1}"#),
            400,
            error("Output can't set both 'shared_memory_region' and 'classification'"),
        ),
        (
            // Triton: 500 (compatibility #1).
            request(&input1(r#"{"shared_memory_region":7}"#), &good_out),
            400,
            error("Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"),
        ),
        (
            // Regions are read while the request is parsed, before the
            // model-level checks (an unknown input here).
            format!(
                r#"{{"inputs":[{{"name":"INPUT9","datatype":"FP32","shape":[4],"data":[1,2,3,4]}},{}],"outputs":[{{"name":"OUTPUT7"}}]}}"#,
                input1(&in_region("nope", 0, 16))
            ),
            404,
            error("Unable to find shared memory region: 'nope'"),
        ),
    ];
    for (body, status, want) in cases {
        assert_answer(&h.post(ADD_SUB, body.clone()).await, status, JSON, &want);
    }
    assert_eq!(h.demo.infer_count(), 0, "every refusal before the call");
    // After the call: an output window smaller than the output (Triton:
    // 500 text/plain; compatibility #56).
    assert_answer(
        &h.post(ADD_SUB, request(&good_in, &in_region("r", 16, 8)))
            .await,
        400,
        JSON,
        &error("shared memory size specified with the request for output 'OUTPUT1' (8 bytes) should be at least 16 bytes to hold the results"),
    );
    // The object changed under the region: a clear 400, never a fault.
    std::fs::File::options()
        .write(true)
        .open(&object)
        .unwrap()
        .set_len(8)
        .unwrap();
    assert_answer(
        &h.post(ADD_SUB, request(&good_in, &good_out)).await,
        400,
        JSON,
        &error("shared memory region 'r': its object '/obj' is now 8 bytes, too short for bytes 0..16 (it was truncated)"),
    );
    std::fs::remove_file(&object).unwrap();
    assert_answer(
        &h.post(ADD_SUB, request(&good_in, &good_out)).await,
        400,
        JSON,
        &error("shared memory region 'r': its object '/obj' was removed after it was registered"),
    );
    // Nothing is held by a refused request.
    assert_eq!(unregister(&h, "").await, DONE);
}

#[test]
fn a_streamed_body_with_an_output_in_shared_memory_gets_a_collected_answer() {
    // 2 × 4.8 MB: the binary body streams (over 4 MiB) and the region's
    // input and output are copied off the serving thread (over 1 MiB).
    const N: usize = 1_200_000;
    let size = N * 4;
    let dir = ShmDir::new();
    let object = dir.object("big", 2 * size as u64);
    let a: Vec<f32> = (0..N).map(|i| i as f32).collect();
    std::fs::write(
        &object,
        [fp32s(a.iter().map(|x| x * 2.0)), vec![0; size]].concat(),
    )
    .unwrap();
    let config = dir.0.join("bridge.toml");
    std::fs::write(
        &config,
        format!(
            "[shared_memory]\nmode = \"bridge\"\ndir = {:?}\n",
            dir.0.display().to_string()
        ),
    )
    .unwrap();
    let gw = GatewayProcess::demo(&["--config", config.to_str().unwrap()]);
    let mut s = connect(gw.addr);
    for (name, offset) in [("in", 0), ("out", size)] {
        let body = register_body("/big", offset as u64, size as u64);
        let head = format!(
            "POST /v2/systemsharedmemory/region/{name}/register HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all([head, body].concat().as_bytes()).unwrap();
        let (head, _) = read_answer(&mut s);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let json = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[{N}],"parameters":{{"binary_data_size":{size}}}}},{{"name":"INPUT1","datatype":"FP32","shape":[{N}],"parameters":{}}}],"outputs":[{{"name":"OUTPUT0","parameters":{}}},{{"name":"OUTPUT1","parameters":{{"binary_data":true}}}}]}}"#,
        in_region("in", 0, size as u64),
        in_region("out", 0, size as u64),
    );
    let head = format!(
        "POST {ADD_SUB} HTTP/1.1\r\nHost: t\r\nInference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n",
        json.len(),
        json.len() + size
    );
    s.write_all(&[head.as_bytes(), json.as_bytes(), &fp32s(a.clone())].concat())
        .unwrap();
    let (head, body) = read_answer(&mut s);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let header_json = format!(
        r#"{{"model_name":"add_sub","model_version":"1","outputs":[{{"name":"OUTPUT0","datatype":"FP32","shape":[{N}]}},{{"name":"OUTPUT1","datatype":"FP32","shape":[{N}],"parameters":{{"binary_data_size":{size}}}}}]}}"#
    );
    let json_len: usize = header(&head, "inference-header-content-length")
        .expect("binary answer")
        .parse()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&body[..json_len]), header_json);
    // OUTPUT1 = a - 2a; OUTPUT0 = a + 2a, in the region.
    assert!(body[json_len..] == fp32s(a.iter().map(|x| x - x * 2.0)));
    assert!(read_at(&object, size, size) == fp32s(a.iter().map(|x| x + x * 2.0)));
}
