//! `POST /v1/completions` and `POST /v1/chat/completions` bodies → a
//! [`Generation`]. Read with `serde_json` (a schema, not Triton's texts: no
//! rapidjson compatibility to keep here), unknown fields ignored. What is
//! honoured is listed in docs/compatibility.md; a field tensorgate cannot
//! honour and that would change the answer is refused with its name.

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Which endpoint a body came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    Chat,
}

/// What to generate: a prompt as given, or chat messages to render.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(String),
    /// Each message an object with `role` and a text `content` (parts of
    /// type `text` joined), the rest of its fields as sent.
    Chat(Vec<Value>),
}

/// The sampling fields a model convention passes on, each when set.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct Sampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f64>,
    /// vLLM's extensions of the API, honoured as vLLM's own server does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_k: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) min_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) repetition_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) min_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seed: Option<u64>,
    #[serde(deserialize_with = "stop_words", skip_serializing_if = "Vec::is_empty")]
    pub(crate) stop: Vec<String>,
}

/// One generation request, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub(crate) endpoint: Endpoint,
    /// The model as the client named it.
    pub model: String,
    pub prompt: Prompt,
    pub(crate) stream: bool,
    /// `stream_options.include_usage`: a last chunk with the usage.
    pub(crate) include_usage: bool,
    /// `max_completion_tokens`, else `max_tokens`; `None`: the default.
    pub(crate) max_tokens: Option<u32>,
    /// Completions' `echo`: the prompt comes back before the completion.
    pub(crate) echo: bool,
    pub(crate) sampling: Sampling,
}

/// The body as read, before the checks.
#[derive(Debug, Deserialize)]
struct Body {
    model: Option<String>,
    prompt: Option<Value>,
    messages: Option<Vec<Value>>,
    #[serde(default)]
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    echo: Option<bool>,
    #[serde(flatten)]
    sampling: Sampling,
    #[serde(flatten)]
    refused: Refused,
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

/// Fields that would change the answer and that tensorgate does not do:
/// each refused when set to anything but its neutral value.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Refused {
    n: Option<u64>,
    best_of: Option<u64>,
    logprobs: Option<Value>,
    top_logprobs: Option<u64>,
    tools: Option<Vec<Value>>,
    functions: Option<Vec<Value>>,
    tool_choice: Option<Value>,
    function_call: Option<Value>,
    response_format: Option<Value>,
    suffix: Option<String>,
    logit_bias: Option<serde_json::Map<String, Value>>,
}

/// Decodes a body sent to `endpoint`.
pub fn decode(endpoint: Endpoint, body: &[u8]) -> Result<Generation> {
    let body: Body = serde_json::from_slice(body)
        .map_err(|e| Error::invalid(format!("the request body is not valid: {e}")))?;
    body.refused.check()?;
    let model = body
        .model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| Error::invalid("the request must name a model").about("model"))?;
    let prompt = match endpoint {
        Endpoint::Completions => Prompt::Text(prompt(body.prompt)?),
        Endpoint::Chat => Prompt::Chat(messages(body.messages)?),
    };
    let stream = body.stream.unwrap_or(false);
    let include_usage = body
        .stream_options
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    if include_usage && !stream {
        return Err(
            Error::invalid("stream_options is only allowed when stream is true")
                .about("stream_options"),
        );
    }
    let max_tokens = match endpoint {
        Endpoint::Chat => body.max_completion_tokens.or(body.max_tokens),
        Endpoint::Completions => body.max_tokens,
    };
    if max_tokens == Some(0) {
        return Err(Error::invalid("max_tokens must be at least 1").about("max_tokens"));
    }
    Ok(Generation {
        endpoint,
        model,
        prompt,
        stream,
        include_usage,
        max_tokens,
        echo: endpoint == Endpoint::Completions && body.echo.unwrap_or(false),
        sampling: body.sampling,
    })
}

impl Refused {
    fn check(&self) -> Result<()> {
        let refuse = |param: &'static str, what: &str| {
            Err(Error::invalid(format!("{what} is not supported by tensorgate")).about(param))
        };
        let set = |v: &Option<Value>| v.as_ref().is_some_and(|v| !v.is_null());
        if self.n.is_some_and(|n| n != 1) {
            return refuse("n", "n other than 1 (one choice per request)");
        }
        if self.best_of.is_some_and(|n| n > 1) {
            return refuse("best_of", "best_of above 1");
        }
        // Completions' `logprobs` is a number (0: none), chat's a boolean.
        let logprobs = match &self.logprobs {
            Some(Value::Bool(on)) => *on,
            Some(Value::Number(n)) => n.as_u64() != Some(0),
            Some(Value::Null) | None => false,
            Some(_) => true,
        };
        if logprobs || self.top_logprobs.is_some_and(|n| n > 0) {
            return refuse("logprobs", "logprobs");
        }
        if self.tools.as_ref().is_some_and(|t| !t.is_empty())
            || self.functions.as_ref().is_some_and(|f| !f.is_empty())
        {
            return refuse("tools", "tool calling");
        }
        let neutral = |v: &Value| matches!(v.as_str(), Some("none" | "auto"));
        if self
            .tool_choice
            .as_ref()
            .is_some_and(|v| !v.is_null() && !neutral(v))
        {
            return refuse("tool_choice", "tool_choice");
        }
        if set(&self.function_call) && !self.function_call.as_ref().is_some_and(neutral) {
            return refuse("function_call", "function_call");
        }
        let text_format = |v: &Value| v.get("type").and_then(Value::as_str) == Some("text");
        if set(&self.response_format) && !self.response_format.as_ref().is_some_and(text_format) {
            return refuse("response_format", "a response_format other than text");
        }
        if self.suffix.as_ref().is_some_and(|s| !s.is_empty()) {
            return refuse("suffix", "suffix");
        }
        if self.logit_bias.as_ref().is_some_and(|b| !b.is_empty()) {
            return refuse("logit_bias", "logit_bias");
        }
        Ok(())
    }
}

/// One text prompt: a string, or a list of exactly one string.
fn prompt(prompt: Option<Value>) -> Result<String> {
    let refuse = |what: &str| Err(Error::invalid(what.to_string()).about("prompt"));
    match prompt {
        Some(Value::String(text)) => Ok(text),
        Some(Value::Array(mut items)) if items.len() == 1 && items[0].is_string() => {
            match items.pop() {
                Some(Value::String(text)) => Ok(text),
                _ => refuse("the prompt must be a string"),
            }
        }
        Some(Value::Array(items)) if items.len() > 1 && items.iter().all(Value::is_string) => {
            refuse("one prompt per request is supported by tensorgate (a list of several is not)")
        }
        None | Some(Value::Null) => refuse("the request must have a prompt"),
        Some(_) => {
            refuse("the prompt must be a string (token ids are not supported by tensorgate)")
        }
    }
}

/// The chat messages, each with a role and its content as text.
fn messages(messages: Option<Vec<Value>>) -> Result<Vec<Value>> {
    let refuse = |what: String| Err(Error::invalid(what).about("messages"));
    let Some(mut messages) = messages.filter(|m| !m.is_empty()) else {
        return refuse("the request must have at least one message".into());
    };
    for (i, message) in messages.iter_mut().enumerate() {
        let Some(object) = message.as_object_mut() else {
            return refuse(format!("messages[{i}] must be an object"));
        };
        if !object.get("role").is_some_and(Value::is_string) {
            return refuse(format!("messages[{i}] must have a role"));
        }
        if object.get("tool_calls").is_some_and(|c| !c.is_null()) {
            return refuse(format!(
                "messages[{i}]: tool calls are not supported by tensorgate"
            ));
        }
        let text = match object.get("content") {
            Some(Value::String(text)) => text.clone(),
            None | Some(Value::Null) => String::new(),
            Some(Value::Array(parts)) => match text_parts(parts) {
                Some(text) => text,
                None => {
                    return refuse(format!(
                        "messages[{i}]: only text content parts are supported by tensorgate"
                    ))
                }
            },
            Some(_) => return refuse(format!("messages[{i}].content must be a string")),
        };
        object.insert("content".into(), Value::String(text));
    }
    Ok(messages)
}

/// Content parts of type `text`, joined; `None` if another kind is there.
fn text_parts(parts: &[Value]) -> Option<String> {
    parts
        .iter()
        .map(|part| match part.get("type").and_then(Value::as_str) {
            Some("text") => part.get("text").and_then(Value::as_str),
            _ => None,
        })
        .collect()
}

impl Sampling {
    /// The vLLM backend's `sampling_parameters`: the fields that are set,
    /// with `max_tokens`, as one JSON object.
    pub(crate) fn vllm_json(&self, max_tokens: u32) -> String {
        #[derive(serde::Serialize)]
        struct Vllm<'a> {
            #[serde(flatten)]
            sampling: &'a Sampling,
            max_tokens: u32,
        }
        serde_json::to_string(&Vllm {
            sampling: self,
            max_tokens,
        })
        .unwrap_or_default()
    }
}

/// `stop`: a string, a list of strings, or null.
fn stop_words<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stop {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<Stop>::deserialize(d)? {
        None => Vec::new(),
        Some(Stop::One(word)) => vec![word],
        Some(Stop::Many(words)) => words,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(endpoint: Endpoint, body: &str) -> (String, Option<&'static str>) {
        let error = decode(endpoint, body.as_bytes()).expect_err(body);
        assert_eq!(error.status(), 400, "{body}");
        (error.message, error.param)
    }

    #[test]
    fn a_completion_with_unknown_fields_decodes() {
        let body = br#"{"model":"m","prompt":"Hi","max_tokens":5,"stream":true,
            "stream_options":{"include_usage":true},"temperature":0.5,"stop":"\n",
            "user":"u","frobnicate":{"x":[1]},"n":1,"logprobs":null,"echo":true}"#;
        let g = decode(Endpoint::Completions, body).unwrap();
        assert_eq!(g.model, "m");
        assert_eq!(g.prompt, Prompt::Text("Hi".into()));
        assert!(g.stream && g.include_usage && g.echo);
        assert_eq!(g.max_tokens, Some(5));
        assert_eq!(g.sampling.temperature, Some(0.5));
        assert_eq!(g.sampling.stop, ["\n"]);
        let listed = decode(Endpoint::Completions, br#"{"model":"m","prompt":["a"]}"#).unwrap();
        assert_eq!(listed.prompt, Prompt::Text("a".into()));
        assert!(!listed.stream);
    }

    #[test]
    fn chat_messages_keep_their_fields_and_join_text_parts() {
        let body = br#"{"model":"m","messages":[{"role":"system","content":"S"},
            {"role":"user","name":"ann","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
            "max_tokens":3,"max_completion_tokens":7,"echo":true}"#;
        let g = decode(Endpoint::Chat, body).unwrap();
        let Prompt::Chat(messages) = &g.prompt else {
            panic!("{:?}", g.prompt)
        };
        assert_eq!(messages[1]["content"], "ab");
        assert_eq!(messages[1]["name"], "ann");
        assert_eq!(g.max_tokens, Some(7), "max_completion_tokens wins");
        assert!(!g.echo, "echo is a completions field");
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_name() {
        use Endpoint::*;
        let cases = [
            (Completions, r#"{"model":"m","prompt":"x","n":2}"#, "n"),
            (
                Completions,
                r#"{"model":"m","prompt":"x","best_of":3}"#,
                "best_of",
            ),
            (
                Completions,
                r#"{"model":"m","prompt":"x","logprobs":2}"#,
                "logprobs",
            ),
            (
                Chat,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true}"#,
                "logprobs",
            ),
            (
                Chat,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}"#,
                "tools",
            ),
            (
                Chat,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required"}"#,
                "tool_choice",
            ),
            (
                Chat,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
                "response_format",
            ),
            (
                Completions,
                r#"{"model":"m","prompt":"x","suffix":"y"}"#,
                "suffix",
            ),
            (
                Completions,
                r#"{"model":"m","prompt":"x","logit_bias":{"5":1}}"#,
                "logit_bias",
            ),
            (Completions, r#"{"model":"m","prompt":["a","b"]}"#, "prompt"),
            (Completions, r#"{"model":"m","prompt":[1,2,3]}"#, "prompt"),
            (Completions, r#"{"model":"m"}"#, "prompt"),
            (Completions, r#"{"prompt":"x"}"#, "model"),
            (Chat, r#"{"model":"m","messages":[]}"#, "messages"),
            (
                Chat,
                r#"{"model":"m","messages":[{"content":"x"}]}"#,
                "messages",
            ),
            (
                Chat,
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}"#,
                "messages",
            ),
            (
                Completions,
                r#"{"model":"m","prompt":"x","stream_options":{"include_usage":true}}"#,
                "stream_options",
            ),
            (
                Completions,
                r#"{"model":"m","prompt":"x","max_tokens":0}"#,
                "max_tokens",
            ),
        ];
        for (endpoint, body, param) in cases {
            assert_eq!(refusal(endpoint, body).1, Some(param), "{body}");
        }
        let neutral = r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[],"tool_choice":"none","response_format":{"type":"text"},"logprobs":false,"top_logprobs":0,"n":1}"#;
        decode(Chat, neutral.as_bytes()).expect("neutral values are accepted");
    }

    #[test]
    fn vllm_sampling_parameters_carry_what_is_set() {
        let g = decode(
            Endpoint::Completions,
            br#"{"model":"m","prompt":"x","temperature":0,"stop":["a","b"],"seed":3,"top_k":2}"#,
        )
        .unwrap();
        let json: Value = serde_json::from_str(&g.sampling.vllm_json(9)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"temperature":0.0,"top_k":2,"seed":3,"stop":["a","b"],"max_tokens":9})
        );
    }

    #[test]
    fn malformed_bodies_are_clear_400s() {
        for body in [
            "",
            "[",
            "{\"model\":5}",
            "{\"model\":\"m\",\"max_tokens\":-1}",
            "null",
        ] {
            let (message, _) = refusal(Endpoint::Completions, body);
            assert!(
                message.starts_with("the request body is not valid"),
                "{message}"
            );
        }
    }
}
