//! Every non-infer v2 endpoint through the gateway against the embedded demo
//! upstream: a new user's tour of the server, read top to bottom.

use crate::support::{assert_answer, text, Harness};
use http::Method;

#[tokio::test]
async fn health_and_server_metadata() {
    let h = Harness::start().await;
    assert_answer(&h.get("/v2/health/live").await, 200, "text/plain", "");
    assert_answer(&h.get("/v2/health/ready").await, 200, "text/plain", "");
    // The upstream's name and version (stock clients check them), and its
    // extensions in its order (binary_tensor_data among them already).
    let version = env!("CARGO_PKG_VERSION");
    let extensions = r#"["classification","model_repository","model_configuration","system_shared_memory","cuda_shared_memory","binary_tensor_data","parameters","statistics","trace","logging"]"#;
    assert_answer(
        &h.get("/v2").await,
        200,
        "application/json",
        &format!(r#"{{"name":"demo","version":"{version}","extensions":{extensions}}}"#),
    );
    // The gateway names itself on /v2/tensorgate/... whatever /v2 says.
    let view = text(&h.get("/v2/tensorgate/backends").await);
    let gateway =
        format!(r#"{{"gateway":{{"name":"tensorgate","version":"{version}"}},"backends":["#);
    assert!(view.starts_with(&gateway), "{view}");
    // Every field of a backend's entry, in this order, with its type; the
    // one group; no rules.
    let entry = regex::Regex::new(
        r#"^\{"gateway":\{"name":"tensorgate","version":"[^"]+"\},"backends":\[\{"address":"127\.0\.0\.1:[0-9]+","usable":(true|false),"seen_ready":(true|false),"healthy":(true|false),"ejected":false,"draining":false,"last_error":(null|"[^"]*"),"inflight":[0-9]+,"served":[0-9]+,"models":(null|\[("[^"]+",)*"[^"]+"\]),"group":"default"\}\],"groups":\[\{"name":"default","serving":true,"backends":1,"usable":1\}\],"routes":\[\]\}$"#,
    )
    .unwrap();
    assert!(entry.is_match(&view), "{view}");
}

#[tokio::test]
async fn the_gateway_announces_itself_when_configured() {
    let h = Harness::start_with(|c| c.server.announce_gateway = true).await;
    let body = text(&h.get("/v2").await);
    let named = format!(
        r#"{{"name":"tensorgate","version":"{}","extensions":["#,
        env!("CARGO_PKG_VERSION")
    );
    assert!(body.starts_with(&named), "{body}");
}

#[tokio::test]
async fn health_bodies_for_kserve_clients_when_asked() {
    let h = Harness::start_with(|c| c.http.oip_health_bodies = true).await;
    assert_answer(
        &h.get("/v2/health/live").await,
        200,
        "application/json",
        r#"{"live":true}"#,
    );
    assert_answer(
        &h.get("/v2/health/ready").await,
        200,
        "application/json",
        r#"{"ready":true}"#,
    );
}

#[tokio::test]
async fn model_metadata_ready_and_config() {
    let h = Harness::start().await;
    let r = h.get("/v2/models/identity_fp32").await;
    assert_answer(
        &r,
        200,
        "application/json",
        r#"{"name":"identity_fp32","versions":["1"],"platform":"demo","inputs":[{"name":"INPUT0","datatype":"FP32","shape":[-1,-1]}],"outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[-1,-1]}]}"#,
    );
    assert_answer(
        &h.get("/v2/models/add_sub/versions/1/ready").await,
        200,
        "text/plain",
        "",
    );
    assert_answer(
        &h.get("/v2/models/nope/ready").await,
        400,
        "application/json",
        r#"{"error":"Model version not ready"}"#,
    );
    assert_answer(
        &h.get("/v2/models/add_sub/versions/2").await,
        404,
        "application/json",
        r#"{"error":"Request for unknown model: 'add_sub' version 2 is not found"}"#,
    );
    let config = text(&h.get("/v2/models/add_sub/config").await);
    assert!(
        config.starts_with(r#"{"name":"add_sub","platform":"","backend":"demo","runtime":"","version_policy":{"latest":{"num_versions":1}},"max_batch_size":0,"input":[{"name":"INPUT0","data_type":"TYPE_FP32","format":"FORMAT_NONE","dims":[-1],"#),
        "{config}"
    );
    assert!(
        config.contains(r#""label_filename":"add_sub_labels.txt""#),
        "{config}"
    );
}

#[tokio::test]
async fn statistics_count_inferences() {
    let h = Harness::start().await;
    let body = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]},{"name":"INPUT1","datatype":"FP32","shape":[1],"data":[2]}]}"#;
    assert_eq!(h.post("/v2/models/add_sub/infer", body).await.status, 200);
    let stats = text(&h.get("/v2/models/add_sub/stats").await);
    assert!(
        stats.starts_with(r#"{"model_stats":[{"name":"add_sub","version":"1","last_inference":"#),
        "{stats}"
    );
    assert!(
        stats.contains(r#""inference_count":1,"execution_count":1,"#),
        "{stats}"
    );
    assert_answer(
        &h.get("/v2/models/nope/stats").await,
        400,
        "application/json",
        r#"{"error":"requested model 'nope' is not available"}"#,
    );
}

/// A raw binary request (header length 0): needs the cached model signature.
async fn raw(h: &Harness) -> tensorgate::front::http::HttpResponse {
    h.send(
        Method::POST,
        "/v2/models/identity_fp32/infer",
        &[("Inference-Header-Content-Length", "0")],
        vec![0u8; 8],
    )
    .await
}

#[tokio::test]
async fn repository_unload_and_load_clear_the_model_cache() {
    let h = Harness::start().await;
    assert_eq!(raw(&h).await.status, 200, "raw request fills the cache");
    assert_answer(
        &h.post("/v2/repository/models/identity_fp32/unload", "")
            .await,
        200,
        "application/json",
        "",
    );
    let index = text(&h.post("/v2/repository/index", "").await);
    assert!(
        index.contains(
            r#"{"name":"identity_fp32","version":"1","state":"UNAVAILABLE","reason":"unloaded"}"#
        ),
        "{index}"
    );
    assert_answer(
        &raw(&h).await,
        404,
        "application/json",
        r#"{"error":"Request for unknown model: 'identity_fp32' has no available versions"}"#,
    );
    assert_answer(
        &h.post("/v2/repository/models/identity_fp32/load", "{}")
            .await,
        200,
        "application/json",
        "",
    );
    assert_eq!(raw(&h).await.status, 200);
    assert_answer(
        &h.post("/v2/repository/other/models/identity_fp32/load", "")
            .await,
        501,
        "application/json",
        r#"{"error":"'repository_name' specification is not supported"}"#,
    );
    assert_answer(
        &h.post("/v2/repository/index", r#"{"ready":1}"#).await,
        400,
        "application/json",
        r#"{"error":"attempt to access JSON non-boolean as boolean"}"#,
    );
}

#[tokio::test]
async fn shared_memory_trace_and_logging() {
    let h = Harness::start().await;
    assert_answer(
        &h.get("/v2/systemsharedmemory/status").await,
        200,
        "application/json",
        "[]",
    );
    assert_answer(
        &h.get("/v2/cudasharedmemory/status").await,
        200,
        "application/json",
        "[]",
    );
    assert_answer(
        &h.post(
            "/v2/systemsharedmemory/region/r/register",
            r#"{"key":"/nope","offset":0,"byte_size":8}"#,
        )
        .await,
        500,
        "application/json",
        r#"{"error":"Unable to open shared memory region: '/nope'"}"#,
    );
    assert_answer(
        &h.post("/v2/systemsharedmemory/unregister", "").await,
        200,
        "application/json",
        "",
    );
    assert_answer(
        &h.get("/v2/trace/setting").await,
        200,
        "application/json",
        r#"{"trace_level":["OFF"],"trace_rate":"1000","trace_count":"-1","log_frequency":"0","trace_file":"","trace_mode":"triton"}"#,
    );
    assert_answer(
        &h.get("/v2/logging").await,
        200,
        "application/json",
        r#"{"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,"log_format":"default"}"#,
    );
}

#[tokio::test]
async fn routing_and_methods() {
    let h = Harness::start().await;
    assert_answer(
        &h.get("/v2/models/add_sub/").await,
        404,
        "application/json",
        r#"{"error":"Not Found"}"#,
    );
    assert_answer(
        &h.get("/v2/models/add_sub/infer").await,
        405,
        "application/json",
        r#"{"error":"Method Not Allowed"}"#,
    );
    assert_answer(
        &h.post("/v2/models/add_sub/config", "").await,
        405,
        "application/json",
        r#"{"error":"Method Not Allowed"}"#,
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_clear_503() {
    let h = Harness::start_with(|c| c.upstream.addresses = vec!["127.0.0.1:1".into()]).await;
    // The gateway is live, but not ready: no backend is.
    assert_eq!(h.get("/v2/health/live").await.status, 200);
    assert_eq!(h.get("/v2/health/ready").await.status, 400);
    let r = h.post("/v2/models/add_sub/infer", r#"{"inputs":[]}"#).await;
    assert_answer(
        &r,
        503,
        "application/json",
        r#"{"error":"no upstream backend is ready: 127.0.0.1:1 (health check failed: connection refused)"}"#,
    );
}
