//! Inference through the gateway against the embedded demo upstream
//! (in-process, ephemeral port): JSON, binary, mixed, raw, compression,
//! classification, parameters and the error texts of docs/protocol-v2.md.

use crate::support::{assert_answer, text, Harness};

const ADD_SUB: &str = "/v2/models/add_sub/infer";

#[tokio::test]
async fn json_request_gets_triton_json_answer() {
    let h = Harness::start().await;
    let body = r#"{"id":"abc","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[[3],[4]]}]}"#;
    let r = h.post(ADD_SUB, body).await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"id":"abc","model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[2],"data":[4.0,6.0]},{"name":"OUTPUT1","datatype":"FP32","shape":[2],"data":[-2.0,-2.0]}]}"#,
    );
    assert_eq!(r.header("Inference-Header-Content-Length"), None);
    let sent = h.demo.last_request().expect("upstream saw the request");
    assert_eq!(
        sent.raw_input_contents.len(),
        2,
        "JSON data goes upstream as raw_input_contents"
    );
    assert!(sent.inputs.iter().all(|i| i.contents.is_none()));
    assert_eq!(
        &sent.raw_input_contents[0][..],
        &[0, 0, 128, 63, 0, 0, 0, 64]
    );
}

#[tokio::test]
async fn binary_outputs_follow_the_json_header() {
    let h = Harness::start().await;
    let json = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[1.5]}],"outputs":[{"name":"OUTPUT1","parameters":{"binary_data":true}},{"name":"OUTPUT0"}]}"#;
    let r = h.post_binary(ADD_SUB, json, &2.0f32.to_le_bytes()).await;
    let header = r#"{"model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1],"data":[3.5]},{"name":"OUTPUT1","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}"#;
    assert_eq!(
        r.status,
        200,
        "{}",
        String::from_utf8_lossy(&r.body_bytes())
    );
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert_eq!(
        r.header("Inference-Header-Content-Length"),
        Some(header.len().to_string().as_str())
    );
    let mut expected = header.as_bytes().to_vec();
    expected.extend_from_slice(&0.5f32.to_le_bytes());
    assert_eq!(r.body_bytes(), expected);
}

#[tokio::test]
async fn every_datatype_round_trips_through_json() {
    let h = Harness::start().await;
    let cases = [
        ("bool", "BOOL", "[true,false]", "[true,false]"),
        ("int8", "INT8", "[-128,300]", "[-128,44]"),
        ("int16", "INT16", "[70000,-1]", "[4464,-1]"),
        (
            "int32",
            "INT32",
            "[-2147483648,2147483647]",
            "[-2147483648,2147483647]",
        ),
        (
            "int64",
            "INT64",
            "[-9223372036854775808,1]",
            "[-9223372036854775808,1]",
        ),
        ("uint8", "UINT8", "[255,256]", "[255,0]"),
        ("uint16", "UINT16", "[65535,1]", "[65535,1]"),
        ("uint32", "UINT32", "[4294967296,7]", "[0,7]"),
        (
            "uint64",
            "UINT64",
            "[18446744073709551615,0]",
            "[18446744073709551615,0]",
        ),
        (
            "fp32",
            "FP32",
            "[0.1,1e39]",
            "[0.10000000149011612,Infinity]",
        ),
        ("fp64", "FP64", "[0.1,NaN]", "[0.1,NaN]"),
        ("fp16", "FP16", "[0.5,-2]", "[0.5,-2.0]"),
        ("bf16", "BF16", "[1.5,256]", "[1.5,256.0]"),
        (
            "bytes",
            "BYTES",
            r#"["ab","c\u0000d"]"#,
            r#"["ab","c\u0000d"]"#,
        ),
    ];
    for (model, dtype, data, want) in cases {
        let body = format!(
            r#"{{"inputs":[{{"name":"INPUT0","datatype":"{dtype}","shape":[1,2],"data":{data}}}]}}"#
        );
        let r = h
            .post(&format!("/v2/models/identity_{model}/infer"), body)
            .await;
        let expected = format!(
            r#"{{"model_name":"identity_{model}","model_version":"1","outputs":[{{"name":"OUTPUT0","datatype":"{dtype}","shape":[1,2],"data":{want}}}]}}"#
        );
        assert_answer(&r, 200, "application/json", &expected);
    }
}

#[tokio::test]
async fn raw_binary_request_uses_the_model_signature() {
    let h = Harness::start().await;
    let path = "/v2/models/identity_fp16/infer";
    let r = h
        .send(
            http::Method::POST,
            path,
            &[("Inference-Header-Content-Length", "0")],
            vec![1u8; 8],
        )
        .await;
    let header = r#"{"model_name":"identity_fp16","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP16","shape":[1,4],"parameters":{"binary_data_size":8}}]}"#;
    assert_eq!(r.header("Inference-Header-Content-Length"), Some("149"));
    assert_eq!(r.body_bytes()[..header.len()], *header.as_bytes());
    let r = h
        .send(
            http::Method::POST,
            path,
            &[("Inference-Header-Content-Length", "0")],
            vec![1u8; 7],
        )
        .await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"[request id: <id_unknown>] input byte size mismatch for input 'raw_input' for model 'identity_fp16'. Expected 6, got 7"}"#,
    );
    let r = h.post(ADD_SUB, "").await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'add_sub' model configuration"}"#,
    );
    let r = h
        .send(
            http::Method::POST,
            "/v2/models/string_single/infer",
            &[("Inference-Header-Content-Length", "0")],
            "hello",
        )
        .await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert!(r.body_bytes().ends_with(b"\x05\x00\x00\x00hello"));
}

#[tokio::test]
async fn sizes_are_checked_before_anything_goes_upstream() {
    let h = Harness::start().await;
    let json = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},{"name":"INPUT1","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":12}}]}"#;
    let r = h.post_binary(ADD_SUB, json, &[0u8; 16]).await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"unexpected size for input 'INPUT1', expecting 4 additional bytes for model 'add_sub'"}"#,
    );
    let r = h.post_binary(ADD_SUB, json, &[0u8; 21]).await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"unexpected additional input data for model 'add_sub'"}"#,
    );
    // INPUT1 wrong, or both wrong: Triton names the last one in request order.
    let both = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":4}},{"name":"INPUT1","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":12}}]}"#;
    for (json, tail) in [(json, 20), (both, 16)] {
        let r = h.post_binary(ADD_SUB, json, &vec![0u8; tail]).await;
        assert_answer(
            &r,
            400,
            "application/json",
            r#"{"error":"[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 8, got 12"}"#,
        );
    }
    // A first element running past the data counts as one, as in Triton's core.
    let overrun = r#"{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":11}}]}"#;
    let r = h
        .post_binary(
            "/v2/models/identity_bytes/infer",
            overrun,
            b"\x64\x00\x00\x00abcdefg",
        )
        .await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"[request id: <id_unknown>] expected 2 string elements for inference input 'INPUT0' for model 'identity_bytes', got 1"}"#,
    );
    let bytes_json = r#"{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"parameters":{"binary_data_size":7}}]}"#;
    let r = h
        .post_binary(
            "/v2/models/identity_bytes/infer",
            bytes_json,
            b"\x0a\x00\x00\x00abc",
        )
        .await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"incomplete string data for inference input 'INPUT0', expecting string of length 10 but only 3 bytes available"}"#,
    );
    let huge = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[18446744073709551615],"data":[1]}]}"#;
    let r = h.post(ADD_SUB, huge).await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"invalid shape for input 'INPUT0': shape [18446744073709551615] contains one or more invalid dimensions"}"#,
    );
    let r = h
        .send(
            http::Method::POST,
            ADD_SUB,
            &[("Inference-Header-Content-Length", "99")],
            "{}",
        )
        .await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"inference header size should be in range (0, 2), got: 99"}"#,
    );
    assert_eq!(
        h.demo.infer_count(),
        0,
        "none of these reached the upstream"
    );
}

#[tokio::test]
async fn json_mistakes_are_400_with_tritons_text() {
    let h = Harness::start().await;
    let cases = [
        ("{", r#"failed to parse the request JSON buffer: Missing a name for object member. at 1"#),
        (r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2,3]},{"name":"INPUT1","datatype":"FP32","shape":[2],"data":[1,2]}]}"#, "Unable to parse 'data': Shape does not match true shape of 'data' field"),
        (r#"{"id":5,"inputs":[]}"#, "Unable to parse 'id': attempt to access JSON non-string as string"),
        (r#"{"inputs":[{"name":"INPUT0","datatype":"BOOL","shape":[1],"data":[1]}]}"#, "Unable to parse 'data': attempt to access JSON non-boolean as boolean"),
        (r#"{"parameters":{"triton_x":1},"inputs":[]}"#, "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."),
        (r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1]}]}"#, "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But no field is set"),
    ];
    for (body, message) in cases {
        let r = h.post(ADD_SUB, body).await;
        let expected = format!(r#"{{"error":"{}"}}"#, message.replace('"', "\\\""));
        assert_answer(&r, 400, "application/json", &expected);
    }
}

#[tokio::test]
async fn upstream_errors_pass_through_with_mapped_status() {
    let h = Harness::start().await;
    let r = h.post("/v2/models/nope/infer", "{}").await;
    assert_answer(
        &r,
        404,
        "application/json",
        r#"{"error":"Request for unknown model: 'nope' is not found"}"#,
    );
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]}]}"#;
    let r = h.post(ADD_SUB, body).await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."}"#,
    );
    // The model refuses inputs of different shapes: the client's mistake.
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[3]}]}"#;
    let r = h.post(ADD_SUB, body).await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"INPUT0 and INPUT1 must have the same shape, got [2] and [1]"}"#,
    );
    let r = h.post("/v2/models/repeat_decoupled/infer", "{}").await;
    assert_answer(
        &r,
        501,
        "application/json",
        r#"{"error":"HTTP end point doesn't support models with decoupled transaction policy"}"#,
    );
}

#[tokio::test]
async fn classification_is_forwarded_or_refused() {
    let h = Harness::start().await;
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[3],"data":[1,5,3]},{"name":"INPUT1","datatype":"FP32","shape":[3],"data":[1,1,1]}],"outputs":[{"name":"OUTPUT0","parameters":{"classification":2}}]}"#;
    let r = h.post(ADD_SUB, body).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert!(
        text(&r).contains(r#""datatype":"BYTES","shape":[2],"data":["6.000000:1"#),
        "{}",
        text(&r)
    );
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"BYTES","shape":[1,1],"data":["a"]}],"outputs":[{"name":"OUTPUT0","parameters":{"classification":1}}]}"#;
    let r = h.post("/v2/models/identity_bytes/infer", body).await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"class result not available for output due to unsupported type 'BYTES'"}"#,
    );
}

#[tokio::test]
async fn compression_both_ways() {
    use std::io::Write;
    let h = Harness::start().await;
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(body.as_bytes()).unwrap();
    let r = h
        .send(
            http::Method::POST,
            ADD_SUB,
            &[("Content-Encoding", "gzip"), ("Accept-Encoding", "deflate")],
            gz.finish().unwrap(),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Encoding"), Some("deflate"));
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(&r.body_bytes()[..]).read_to_end_into(&mut inflated);
    assert!(String::from_utf8(inflated)
        .unwrap()
        .contains(r#""data":[3.0]"#));
    let r = h
        .send(
            http::Method::POST,
            ADD_SUB,
            &[("Content-Encoding", "br")],
            body,
        )
        .await;
    assert_answer(
        &r,
        501,
        "application/json",
        r#"{"error":"Unsupported compression type"}"#,
    );
    assert_eq!(r.header("Accept-Encoding"), Some("gzip, deflate"));
}

trait ReadAll {
    fn read_to_end_into(self, out: &mut Vec<u8>);
}

impl<R: std::io::Read> ReadAll for R {
    fn read_to_end_into(mut self, out: &mut Vec<u8>) {
        self.read_to_end(out).expect("valid stream");
    }
}

#[tokio::test]
async fn parameters_are_typed_and_headers_forwarded() {
    let h = Harness::start_with(|c| c.http.header_forward_pattern = Some("^x-fwd".into())).await;
    let body = r#"{"parameters":{"sequence_id":7,"sequence_start":true,"priority":1,"timeout":5000000,"binary_data_output":true,"custom":"v","n":-3,"d":1.5},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;
    let r = h
        .send(http::Method::POST, ADD_SUB, &[("X-Fwd-Trace", "t1")], body)
        .await;
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        r.header("Content-Type"),
        Some("application/octet-stream"),
        "binary_data_output applies to unlisted outputs"
    );
    let sent = h.demo.last_request().unwrap();
    use tensorgate::proto::inference::infer_parameter::ParameterChoice as P;
    let p = |k: &str| {
        sent.parameters
            .get(k)
            .and_then(|p| p.parameter_choice.clone())
    };
    assert_eq!(p("sequence_id"), Some(P::Int64Param(7)));
    assert_eq!(p("sequence_start"), Some(P::BoolParam(true)));
    assert_eq!(p("priority"), Some(P::Uint64Param(1)));
    assert_eq!(p("timeout"), Some(P::Int64Param(5000000)));
    assert_eq!(p("custom"), Some(P::StringParam("v".into())));
    assert_eq!(p("n"), Some(P::Int64Param(-3)));
    assert_eq!(p("d"), Some(P::DoubleParam(1.5)));
    assert_eq!(p("X-Fwd-Trace"), Some(P::StringParam("t1".into())));
    assert_eq!(p("binary_data_output"), None, "never forwarded");
}

#[tokio::test]
async fn a_64_mib_tensor_passes_both_ways() {
    let h = Harness::start().await;
    let n = 64 << 20;
    let json = format!(
        r#"{{"inputs":[{{"name":"INPUT0","datatype":"UINT8","shape":[1,{n}],"parameters":{{"binary_data_size":{n}}}}}],"outputs":[{{"name":"OUTPUT0","parameters":{{"binary_data":true}}}}]}}"#
    );
    let tensor: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let r = h
        .post_binary("/v2/models/identity_uint8/infer", &json, &tensor)
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body[0]));
    let header_len: usize = r
        .header("Inference-Header-Content-Length")
        .unwrap()
        .parse()
        .unwrap();
    let body = r.body_bytes();
    assert_eq!(body.len(), header_len + n);
    assert!(
        body[header_len..] == tensor[..],
        "tensor bytes came back unchanged"
    );
}

#[tokio::test]
async fn the_clients_trace_reaches_the_upstream() {
    let h = Harness::start().await;
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let r = h
        .send(
            http::Method::POST,
            ADD_SUB,
            &[("traceparent", parent)],
            body,
        )
        .await;
    assert_eq!(r.status, 200);
    let sent = h
        .demo
        .last_traceparent()
        .expect("traceparent sent upstream");
    assert!(
        sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{sent}"
    );
    assert!(
        !sent.contains("00f067aa0ba902b7"),
        "the gateway's own span: {sent}"
    );
    // Without one, the upstream still gets a (new) trace.
    let r = h.send(http::Method::POST, ADD_SUB, &[], body).await;
    assert_eq!(r.status, 200);
    let fresh = h.demo.last_traceparent().expect("a new trace");
    assert_eq!(fresh.len(), 55);
    assert!(!fresh.contains("4bf92f3577b34da6a3ce929d0e0e4736"));
}
