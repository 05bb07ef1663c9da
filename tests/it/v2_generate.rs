//! `/generate` and `/generate_stream` through the gateway against the
//! embedded demo upstream (in-process; the streamed body is collected):
//! request mapping, Triton's answer objects, SSE framing, the
//! exactly-one-response rule, and the error answers of v2 §1.6.

use crate::support::{assert_answer, text, Harness};

const SSE: &str = "text/event-stream; charset=utf-8";

#[tokio::test]
async fn generate_maps_keys_to_tensors_and_answers_sorted() {
    let h = Harness::start().await;
    let body =
        r#"{"id":"g1","INPUT0":[1,2],"INPUT1":[3,4],"parameters":{"temperature":0.5,"n":3}}"#;
    let r = h.post("/v2/models/add_sub/generate", body).await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"OUTPUT0":[4.0,6.0],"OUTPUT1":[-2.0,-2.0],"id":"g1","model_name":"add_sub","model_version":"1"}"#,
    );
    let sent = h.demo.last_request().expect("upstream saw the request");
    assert_eq!(sent.id, "g1");
    assert_eq!(sent.inputs.len(), 2);
    assert_eq!(sent.inputs[0].shape, vec![2]);
    let mut keys: Vec<&String> = sent.parameters.keys().collect();
    keys.sort();
    assert_eq!(keys, ["id", "n", "temperature"], "id is also a parameter");
}

#[tokio::test]
async fn single_elements_are_scalars_and_batch_dims_are_one() {
    let h = Harness::start().await;
    let r = h
        .post(
            "/v2/models/identity_bytes/generate",
            r#"{"INPUT0":"hello"}"#,
        )
        .await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"OUTPUT0":"hello","model_name":"identity_bytes","model_version":"1"}"#,
    );
    let sent = h.demo.last_request().expect("request");
    assert_eq!(sent.inputs[0].shape, vec![1, 1], "batch dim -1 becomes 1");
    let r = h
        .post("/v2/models/identity_int32/generate", r#"{"INPUT0":[]}"#)
        .await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"OUTPUT0":[],"model_name":"identity_int32","model_version":"1"}"#,
    );
}

#[tokio::test]
async fn generate_wants_exactly_one_response() {
    let h = Harness::start().await;
    let path = "/v2/models/repeat_decoupled/generate";
    let r = h.post(path, r#"{"INPUT0":1}"#).await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"OUTPUT0":0,"model_name":"repeat_decoupled","model_version":"1"}"#,
    );
    let not_one = r#"{"error":"generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"}"#;
    for n in [0, 3] {
        let body = format!(r#"{{"INPUT0":{n},"delay_ms":0}}"#);
        let r = h.post(path, body).await;
        assert_answer(&r, 200, "application/json", not_one);
    }
}

#[tokio::test]
async fn generate_stream_sends_one_event_per_response() {
    let h = Harness::start().await;
    let path = "/v2/models/repeat_decoupled/generate_stream";
    let r = h.post(path, r#"{"id":"s","INPUT0":3,"delay_ms":1}"#).await;
    let event = |i| {
        format!(
            r#"data: {{"OUTPUT0":{i},"id":"s","model_name":"repeat_decoupled","model_version":"1"}}"#
        ) + "\n\n"
    };
    assert_answer(
        &r,
        200,
        SSE,
        &format!("{}{}{}", event(0), event(1), event(2)),
    );
    assert_eq!(r.body.len(), 3, "one chunk per event");
    let r = h.post(path, r#"{"INPUT0":0}"#).await;
    assert_answer(&r, 200, SSE, "");
    let r = h
        .post(
            "/v2/models/add_sub/generate_stream",
            r#"{"INPUT0":[1],"INPUT1":[2]}"#,
        )
        .await;
    assert_answer(
        &r,
        200,
        SSE,
        "data: {\"OUTPUT0\":3.0,\"OUTPUT1\":-1.0,\"model_name\":\"add_sub\",\"model_version\":\"1\"}\n\n",
    );
}

#[tokio::test]
async fn model_failures_are_error_events() {
    let h = Harness::start().await;
    // Different shapes: add_sub fails after scheduling (a backend error).
    let body = r#"{"INPUT0":[1,2],"INPUT1":[3]}"#;
    let message = r#"{"error":"INPUT0 and INPUT1 must have the same shape, got [2] and [1]"}"#;
    let r = h.post("/v2/models/add_sub/generate_stream", body).await;
    // The code is not on the stream: 400, as Triton's Python backend errors.
    assert_answer(&r, 400, SSE, &format!("data: {message}\n\n"));
    let r = h.post("/v2/models/add_sub/generate", body).await;
    assert_answer(&r, 400, "application/json", message);
}

#[tokio::test]
async fn errors_before_inference_are_plain_json_errors() {
    let h = Harness::start().await;
    let cases: [(&str, &str, u16, &str); 9] = [
        ("nope", "{}", 404, "Request for unknown model: 'nope' is not found"),
        ("add_sub", "", 400, "failed to parse the request JSON buffer: The document is empty. at 0"),
        ("add_sub", "[1]", 400, "attempt to get members for non-object"),
        ("add_sub", r#"{"id":1}"#, 400, "Unable to parse 'id': attempt to access JSON non-string as string"),
        ("add_sub", r#"{"x":[1]}"#, 400, "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."),
        ("add_sub", r#"{"parameters":[]}"#, 400, "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object"),
        ("add_sub", r#"{"parameters":{"x":null}}"#, 400, "Converting keyword: 'parameters': parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."),
        ("string_single", r#"{"INPUT0":["a","b"]}"#, 400, "The schema can not convert input 'INPUT0' to tensor with proper shape"),
        ("add_sub", r#"{"INPUT0":[1]}"#, 400, "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."),
    ];
    for (model, body, status, message) in cases {
        for route in ["generate", "generate_stream"] {
            let r = h.post(&format!("/v2/models/{model}/{route}"), body).await;
            let expected = format!(r#"{{"error":"{}"}}"#, message.replace('"', "\\\""));
            assert_answer(&r, status, "application/json", &expected);
        }
    }
}

#[tokio::test]
async fn compressed_bodies_and_other_methods_are_refused() {
    let h = Harness::start().await;
    let r = h
        .send(
            http::Method::POST,
            "/v2/models/add_sub/generate",
            &[("Content-Encoding", "gzip")],
            "{}",
        )
        .await;
    assert_answer(
        &r,
        400,
        "application/json",
        r#"{"error":"Unsupported content-encoding, only 'identity' is supported."}"#,
    );
    let r = h.get("/v2/models/add_sub/generate_stream").await;
    assert_answer(
        &r,
        405,
        "application/json",
        r#"{"error":"Method Not Allowed"}"#,
    );
}

#[tokio::test]
async fn reserved_parameters_are_not_forwarded() {
    let h = Harness::start().await;
    let body = r#"{"INPUT0":1,"triton_enable_empty_final_response":true,"parameters":{"triton_x":1,"temperature":1}}"#;
    let r = h.post("/v2/models/repeat_decoupled/generate", body).await;
    assert_eq!(r.status, 200, "{}", text(&r));
    let sent = h.demo.last_request().expect("request");
    let keys: Vec<&String> = sent.parameters.keys().collect();
    assert_eq!(keys, ["temperature"]);
}

#[tokio::test]
async fn a_generation_past_its_deadline_ends_with_an_error_event() {
    let h = Harness::start_with(|c| c.generate.stream_timeout_ms = 300).await;
    let path = "/v2/models/repeat_decoupled/generate_stream";
    let r = h.post(path, r#"{"INPUT0":2,"delay_ms":60000}"#).await;
    let body = text(&r);
    let first =
        "data: {\"OUTPUT0\":0,\"model_name\":\"repeat_decoupled\",\"model_version\":\"1\"}\n\n";
    assert!(body.starts_with(first), "{body}");
    let rest = &body[first.len()..];
    assert!(
        rest.starts_with("data: {\"error\":\"") && rest.ends_with("\"}\n\n"),
        "{body}"
    );
    assert_eq!(r.status, 200);
}
