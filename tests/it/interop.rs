//! Upstreams that are not Triton: the demo with the quirks of KServe's and
//! MLServer's gRPC fronts (`tensorgate_demo::Quirks`), and what the gateway
//! makes of them. Each test fails without the gateway's own handling of
//! that quirk.

use std::io::Write;

use tensorgate_demo::{DemoUpstream, Quirks};

use crate::streamed_body::{add_sub, assert_added, declared, N};
use crate::support::raw::read_answer;
use crate::support::{assert_answer, text, GatewayProcess, Harness};

const ADD_SUB: &str = "/v2/models/add_sub/infer";

/// `add_sub` with `[1,2]` and `[3,4]`, asking for `outputs` (JSON text).
fn add_sub_json(outputs: &str) -> String {
    format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]}},{{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[3,4]}}],"outputs":[{outputs}]}}"#
    )
}

/// KServe's gRPC server answers every output, whatever `outputs` asks.
fn ignoring_outputs() -> Quirks {
    Quirks {
        ignore_requested_outputs: true,
    }
}

#[tokio::test]
async fn only_the_requested_outputs_come_back_from_an_upstream_that_ignores_them() {
    let h = Harness::start().await;
    h.demo.set_quirks(ignoring_outputs());
    let r = h.post(ADD_SUB, add_sub_json(r#"{"name":"OUTPUT1"}"#)).await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT1","datatype":"FP32","shape":[2],"data":[-2.0,-2.0]}]}"#,
    );
    // Binary: only OUTPUT1's bytes follow the header.
    let binary = add_sub_json(r#"{"name":"OUTPUT1","parameters":{"binary_data":true}}"#);
    let r = h.post(ADD_SUB, binary).await;
    let header = r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT1","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]}"#;
    let body = r.body_bytes();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(&body[..header.len()], header.as_bytes());
    assert_eq!(
        &body[header.len()..],
        [-2f32, -2f32].map(f32::to_le_bytes).concat()
    );
}

#[tokio::test]
async fn an_unknown_requested_output_is_refused_before_the_call() {
    let h = Harness::start().await;
    h.demo.set_quirks(ignoring_outputs());
    let outputs = r#"{"name":"OUTPUT9"},{"name":"OUTPUT1"},{"name":"OUTPUT8"}"#;
    let r = h.post(ADD_SUB, add_sub_json(outputs)).await;
    // Triton's text; the first unknown name in byte order, as its core.
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"unexpected inference output 'OUTPUT8' for model 'add_sub'"}"#,
    );
    assert_eq!(h.demo.infer_count(), 0, "{}", text(&r));
}

#[test]
fn a_streamed_answer_skips_the_outputs_not_requested() {
    let demo = DemoUpstream::start_in_background("127.0.0.1:0".parse().unwrap()).unwrap();
    demo.set_quirks(ignoring_outputs());
    let gw = GatewayProcess::with_upstream(demo.local_addr());
    // A 4.8 MB binary body asking for OUTPUT0 only, binary: its answer is
    // streamed; the upstream also sends OUTPUT1, which must not follow.
    let (json, tail) = add_sub(N);
    let mut s = crate::support::raw::connect(gw.addr);
    s.write_all(&declared(&json, &tail)).unwrap();
    let (h, b) = read_answer(&mut s);
    assert_added(&h, &b, N);
    let header = String::from_utf8_lossy(&b[..b.len() - N * 4]);
    assert_eq!(
        header,
        r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[600000],"parameters":{"binary_data_size":2400000}}]}"#
    );
    assert_eq!(demo.infer_count(), 1);
}
