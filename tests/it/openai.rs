//! The OpenAI front (`/v1/...`) against the demo's two language models,
//! one per backend convention (`llm_vllm`, `llm_trtllm`: the prompt's
//! words back, a token each): completions and chat, whole and streamed,
//! usage and finish reasons, the chat template, every refusal in OpenAI's
//! shape, keys, metrics; through the real binary, the first event while
//! the model is still generating and a disconnect that stops it.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use tensorgate::config::{ApiKey, Group, OpenAiModel};
use tensorgate_demo::DemoUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{GatewayProcess, Harness};

/// Generous bound for anything that should happen at once.
const PROMPTLY: Duration = Duration::from_secs(10);

fn template() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openai/tokenizer_config.json")
}

/// A gateway whose model `chat` is the demo's `llm_vllm` with the shipped
/// ChatML (Qwen2) template.
async fn harness() -> Harness {
    Harness::start_with(|config| {
        config.openai.models.insert(
            "chat".into(),
            OpenAiModel {
                chat_template: Some(template()),
                upstream_model: Some("llm_vllm".into()),
                ..OpenAiModel::default()
            },
        );
    })
    .await
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)))
}

async fn post(h: &Harness, path: &str, body: Value) -> (u16, Value) {
    let response = h.post(path, body.to_string()).await;
    (response.status, json_of(&response.body_bytes()))
}

/// The events of a streamed answer: each `data:` payload, `[DONE]` as is.
fn events(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8(body.to_vec()).expect("UTF-8");
    assert!(text.ends_with("\n\n"), "{text}");
    text.split_terminator("\n\n")
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("{e}"))
                .to_string()
        })
        .collect()
}

fn assert_openai_error(status: u16, body: &Value, want_status: u16, param: Option<&str>) {
    assert_eq!(status, want_status, "{body}");
    let error = &body["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["type"].is_string(), "{body}");
    assert_eq!(error["param"].as_str(), param, "{body}");
    assert!(error.as_object().unwrap().contains_key("code"), "{body}");
}

#[tokio::test]
async fn completions_for_both_conventions_with_usage_and_finish_reasons() {
    let h = harness().await;
    for model in ["llm_vllm", "llm_trtllm"] {
        let body = json!({"model": model, "prompt": "one two three four", "max_tokens": 10,
            "temperature": 0.0, "user": "u", "an_unknown_field": {"x": [1]}});
        let (status, answer) = post(&h, "/v1/completions", body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["object"], "text_completion");
        assert_eq!(answer["model"], model);
        assert!(answer["id"].as_str().unwrap().starts_with("cmpl-"));
        assert_eq!(answer["choices"][0]["text"], "one two three four");
        assert_eq!(answer["choices"][0]["finish_reason"], "stop");
        assert_eq!(
            answer["usage"],
            json!({"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8})
        );
        let body = json!({"model": model, "prompt": "one two three four", "max_tokens": 2});
        let (_, answer) = post(&h, "/v1/completions", body).await;
        assert_eq!(answer["choices"][0]["text"], "one two", "{model}");
        assert_eq!(answer["choices"][0]["finish_reason"], "length");
        assert_eq!(answer["usage"]["completion_tokens"], 2);
    }
    // Without max_tokens: the configured default (16).
    let prompt: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
    let body = json!({"model": "llm_vllm", "prompt": prompt.join(" ")});
    let (_, answer) = post(&h, "/v1/completions", body).await;
    assert_eq!(answer["usage"]["completion_tokens"], 16);
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    // echo: the prompt comes back first.
    let body = json!({"model": "llm_vllm", "prompt": "a b", "echo": true});
    let (_, answer) = post(&h, "/v1/completions", body).await;
    assert_eq!(answer["choices"][0]["text"], "a ba b");
}

#[tokio::test]
async fn a_streamed_completion_is_chunks_then_finish_usage_and_done() {
    let h = harness().await;
    for model in ["llm_vllm", "llm_trtllm"] {
        let body = json!({"model": model, "prompt": "a b c", "max_tokens": 3, "stream": true,
            "stream_options": {"include_usage": true}});
        let response = h.post("/v1/completions", body.to_string()).await;
        assert_eq!(response.status, 200);
        assert_eq!(
            response.header("Content-Type"),
            Some("text/event-stream; charset=utf-8")
        );
        let events = events(&response.body_bytes());
        assert_eq!(
            events.last().map(String::as_str),
            Some("[DONE]"),
            "{events:?}"
        );
        let chunks: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|e| json_of(e.as_bytes()))
            .collect();
        let texts: Vec<&str> = chunks
            .iter()
            .filter_map(|c| c["choices"].get(0)?["text"].as_str())
            .collect();
        assert_eq!(texts.concat(), "a b c", "{model}: {chunks:?}");
        let finish = &chunks[chunks.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "length");
        assert_eq!(
            finish["usage"],
            Value::Null,
            "usage asked for: null until the last"
        );
        let usage = &chunks[chunks.len() - 1];
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["total_tokens"], 6);
        assert!(chunks
            .iter()
            .all(|c| c["object"] == "text_completion" && c["id"] == chunks[0]["id"]));
    }
}

#[tokio::test]
async fn chat_is_rendered_with_the_models_template() {
    let h = harness().await;
    let messages = json!([{"role": "user", "content": "Hello there"}]);
    let body = json!({"model": "chat", "messages": messages, "max_tokens": 100});
    let (status, answer) = post(&h, "/v1/chat/completions", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["model"], "chat");
    assert_eq!(answer["choices"][0]["message"]["role"], "assistant");
    // The demo model says the prompt back word by word: the ChatML render.
    let rendered = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n";
    let words: Vec<&str> = rendered.split_whitespace().collect();
    assert_eq!(answer["choices"][0]["message"]["content"], words.join(" "));
    assert_eq!(answer["usage"]["prompt_tokens"], words.len());
    // Streamed: the role first, then the content.
    let body = json!({"model": "chat", "messages": messages, "max_tokens": 2, "stream": true});
    let response = h.post("/v1/chat/completions", body.to_string()).await;
    let events = events(&response.body_bytes());
    let first = json_of(events[0].as_bytes());
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    let content: String = events[..events.len() - 1]
        .iter()
        .filter_map(|e| {
            json_of(e.as_bytes())["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content, "<|im_start|>system You");
    let finish = json_of(events[events.len() - 2].as_bytes());
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    assert!(finish.get("usage").is_none(), "not asked for");
}

#[tokio::test]
async fn every_refusal_is_in_openais_shape() {
    let h = harness().await;
    let chat = |model: &str, extra: Value| {
        let mut body = json!({"model": model, "messages": [{"role": "user", "content": "x"}]});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let cases = [
        (
            "/v1/chat/completions",
            chat("llm_vllm", json!({})),
            400,
            Some("messages"),
        ),
        (
            "/v1/chat/completions",
            chat("chat", json!({"n": 2})),
            400,
            Some("n"),
        ),
        (
            "/v1/chat/completions",
            chat("chat", json!({"logprobs": true})),
            400,
            Some("logprobs"),
        ),
        (
            "/v1/chat/completions",
            chat(
                "chat",
                json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
            ),
            400,
            Some("tools"),
        ),
        (
            "/v1/chat/completions",
            chat("nope", json!({})),
            404,
            Some("model"),
        ),
        (
            "/v1/chat/completions",
            chat("add_sub", json!({})),
            404,
            Some("model"),
        ),
        (
            "/v1/completions",
            json!({"model": "llm_trtllm", "prompt": "x", "top_k": 3}),
            400,
            Some("top_k"),
        ),
        (
            "/v1/completions",
            json!({"model": "llm_vllm", "prompt": ["a", "b"]}),
            400,
            Some("prompt"),
        ),
        (
            "/v1/completions",
            json!({"model": "llm_vllm"}),
            400,
            Some("prompt"),
        ),
        ("/v1/completions", json!("not an object"), 400, None),
    ];
    for (path, body, status, param) in cases {
        let (got, answer) = post(&h, path, body.clone()).await;
        assert_openai_error(got, &answer, status, param);
        if status == 404 {
            assert_eq!(answer["error"]["code"], "model_not_found", "{body}");
        }
    }
    let wrong_method = h.get("/v1/completions").await;
    assert_openai_error(
        wrong_method.status,
        &json_of(&wrong_method.body_bytes()),
        405,
        None,
    );
    let unknown = h.post("/v1/embeddings", "{}").await;
    assert_openai_error(unknown.status, &json_of(&unknown.body_bytes()), 404, None);
    let broken = h.post("/v1/completions", "{\"model\":").await;
    assert_openai_error(broken.status, &json_of(&broken.body_bytes()), 400, None);
}

#[tokio::test]
async fn a_model_failing_mid_stream_is_an_error_event_and_counted() {
    let h = harness().await;
    let body = json!({"model": "llm_vllm", "prompt": "a b FAIL c", "stream": true});
    let response = h.post("/v1/completions", body.to_string()).await;
    assert_eq!(
        response.status, 200,
        "the first token came before the failure"
    );
    let events = events(&response.body_bytes());
    assert_eq!(events.len(), 4, "{events:?}");
    let error = json_of(events[2].as_bytes());
    assert_eq!(
        error["error"]["message"],
        "the demo model failed at token 2"
    );
    assert_eq!(events[3], "[DONE]");
    let metrics = String::from_utf8(h.gateway.metrics_text()).unwrap();
    assert!(
        metrics
            .contains("tensorgate_llm_generations_total{model=\"llm_vllm\",outcome=\"error\"} 1"),
        "{metrics}"
    );
    // Not streamed: the failure is the answer.
    let body = json!({"model": "llm_vllm", "prompt": "a FAIL"});
    let (status, answer) = post(&h, "/v1/completions", body).await;
    assert_openai_error(status, &answer, 400, None);
    // A failure before the first token: an ordinary error answer.
    let body = json!({"model": "llm_trtllm", "prompt": "FAIL", "stream": true});
    let (status, answer) = post(&h, "/v1/completions", body).await;
    assert_openai_error(status, &answer, 400, None);
}

#[tokio::test]
async fn the_models_listing_shows_what_the_front_serves() {
    let h = harness().await;
    let listing = h.get("/v1/models").await;
    assert_eq!(listing.status, 200);
    let listing = json_of(&listing.body_bytes());
    let ids: Vec<&str> = listing["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["chat", "llm_trtllm", "llm_vllm"],
        "configured, and recognised by their inputs"
    );
    let one = h.get("/v1/models/chat").await;
    assert_eq!(
        (one.status, json_of(&one.body_bytes())["id"].clone()),
        (200, json!("chat"))
    );
    let plain = h.get("/v1/models/add_sub").await;
    assert_openai_error(
        plain.status,
        &json_of(&plain.body_bytes()),
        404,
        Some("model"),
    );
}

#[tokio::test]
async fn bearer_keys_and_their_groups_apply() {
    let h = Harness::start_with(|config| {
        config.auth.keys = vec![
            ApiKey {
                key: "sk-infer".into(),
                groups: vec![Group::Inference],
                name: None,
            },
            ApiKey {
                key: "sk-all".into(),
                groups: Vec::new(),
                name: None,
            },
        ];
    })
    .await;
    let body = json!({"model": "llm_vllm", "prompt": "a"}).to_string();
    let none = h.post("/v1/completions", body.clone()).await;
    let answer = json_of(&none.body_bytes());
    assert_openai_error(none.status, &answer, 401, None);
    assert_eq!(answer["error"]["type"], "authentication_error");
    let bearer = |key: &'static str| [("Authorization", key)];
    let ok = h
        .send(
            http::Method::POST,
            "/v1/completions",
            &bearer("Bearer sk-infer"),
            body.clone(),
        )
        .await;
    assert_eq!(ok.status, 200);
    let h = &h;
    let listing = |key: &'static str| async move {
        let auth = [("Authorization", key)];
        h.send(http::Method::GET, "/v1/models", &auth, "").await
    };
    let refused = listing("Bearer sk-infer").await;
    assert_openai_error(refused.status, &json_of(&refused.body_bytes()), 403, None);
    let listing = listing("Bearer sk-all").await;
    assert_eq!(listing.status, 200);
}

#[tokio::test]
async fn generations_are_measured_per_model() {
    let h = harness().await;
    let body = json!({"model": "llm_trtllm", "prompt": "a b c", "stream": true});
    assert_eq!(
        h.post("/v1/completions", body.to_string()).await.status,
        200
    );
    let metrics = String::from_utf8(h.gateway.metrics_text()).unwrap();
    for line in [
        "tensorgate_llm_time_to_first_token_seconds_count{model=\"llm_trtllm\"} 1",
        "tensorgate_llm_inter_token_seconds_count{model=\"llm_trtllm\"} 2",
        "tensorgate_llm_output_tokens_total{model=\"llm_trtllm\"} 3",
        "tensorgate_llm_generations_total{model=\"llm_trtllm\",outcome=\"ok\"} 1",
        "tensorgate_requests_total{model=\"\",route=\"openai_completions\",status=\"200\"} 1",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
}

#[tokio::test]
async fn the_front_can_be_turned_off() {
    let h = Harness::start_with(|config| config.openai.enabled = false).await;
    let response = h.get("/v1/models").await;
    assert_eq!(
        (response.status, response.body_bytes()),
        (404, br#"{"error":"Not Found"}"#.to_vec())
    );
}

#[tokio::test]
async fn a_bad_template_file_refuses_the_configuration() {
    let dir = std::env::temp_dir().join(format!("tensorgate-openai-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer_config.json");
    std::fs::write(&path, r#"{"chat_template": "{% for m in messages %}"}"#).unwrap();
    let mut config = tensorgate::config::Config::default();
    config.openai.models.insert(
        "m".into(),
        OpenAiModel {
            chat_template: Some(path),
            ..OpenAiModel::default()
        },
    );
    let error = tensorgate::Gateway::new(config).err().expect("refused");
    assert!(
        error.starts_with("openai.models.m.chat_template: "),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Through the real binary: the first event is out while the model is
/// still generating, and a client that disconnects stops the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_event_comes_at_once_and_a_disconnect_stops_the_model() {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("demo");
    let upstream = demo.local_addr();
    let gateway = tokio::task::spawn_blocking(move || GatewayProcess::with_upstream(upstream))
        .await
        .expect("gateway starts");
    // 5000 tokens, 2 ms apart: ten seconds of generation.
    let prompt: Vec<String> = (0..5000).map(|i| format!("w{i}")).collect();
    let body = json!({"model": "llm_vllm", "prompt": prompt.join(" "), "max_tokens": 5000, "stream": true}).to_string();
    let mut conn = TcpStream::connect(gateway.addr).await.expect("connect");
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await.expect("send");
    let mut received = Vec::new();
    let first = async {
        while !received.windows(2).any(|w| w == b"\n\n") {
            let mut buf = [0u8; 4096];
            let got = conn.read(&mut buf).await.expect("read");
            assert!(got > 0, "closed: {}", String::from_utf8_lossy(&received));
            received.extend_from_slice(&buf[..got]);
        }
    };
    tokio::time::timeout(PROMPTLY, first)
        .await
        .expect("the first event arrives");
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("\"text\":\"w0\""), "{text}");
    assert!(
        demo.streamed_responses() < 5000,
        "the model is still generating"
    );
    drop(conn);
    assert!(
        demo.wait_for_cancelled_streams(1, PROMPTLY).await,
        "the upstream saw the cancellation"
    );
    let produced = demo.streamed_responses();
    assert!(produced < 5000, "the model stopped: {produced} tokens");
    let metrics = plain_get(gateway.addr, "/v2/health/live").await;
    assert!(
        metrics.starts_with("HTTP/1.1 200"),
        "the gateway still serves: {metrics}"
    );
}

/// `openai.listen`: a listener of the OpenAI front's own, which serves
/// nothing else, while the HTTP listener can leave the front off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_on_a_listener_of_its_own() {
    let demo = DemoUpstream::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("demo");
    let dir = std::env::temp_dir().join(format!("tensorgate-openai-listen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("tensorgate.toml");
    std::fs::write(
        &config,
        "[openai]\nenabled = false\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let args = [
        "--config".to_string(),
        config.display().to_string(),
        "--upstream".to_string(),
        demo.local_addr().to_string(),
    ];
    let gateway = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        GatewayProcess::spawn_with(&[env!("CARGO_BIN_EXE_tensorgate")], &args, None)
    })
    .await
    .expect("gateway starts");
    let own = gateway.openai.expect("the log names the OpenAI listener");
    let models = plain_get(own, "/v1/models").await;
    assert!(models.starts_with("HTTP/1.1 200"), "{models}");
    assert!(models.contains("\"llm_vllm\""), "{models}");
    let v2 = plain_get(own, "/v2/health/live").await;
    assert!(v2.starts_with("HTTP/1.1 404"), "{v2}");
    assert!(
        v2.contains("\"type\":\"invalid_request_error\""),
        "OpenAI's shape: {v2}"
    );
    let main = plain_get(gateway.addr, "/v1/models").await;
    assert!(
        main.starts_with("HTTP/1.1 404"),
        "off on the HTTP listener: {main}"
    );
    assert!(plain_get(gateway.addr, "/v2/health/live")
        .await
        .starts_with("HTTP/1.1 200"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A plain HTTP/1.1 GET on a new connection; the raw answer.
async fn plain_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(PROMPTLY, conn.read_to_end(&mut answer))
        .await
        .expect("answer")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}
