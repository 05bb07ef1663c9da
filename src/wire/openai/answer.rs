//! The OpenAI answers' JSON: a whole completion or chat completion, the
//! chunks of a streamed one (server-sent events, `data: [DONE]` last), the
//! models listing. Written with `serde` from borrowed structs: one pass,
//! no intermediate `Value` per event (a streamed event costs a few
//! hundred nanoseconds here, docs/performance.md).

use bytes::Bytes;
use serde::Serialize;

use super::Endpoint;
use crate::wire::generate::sse_event;

/// The last event of every stream.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// Token counts, from the model's `num_input_tokens` / `num_output_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) total_tokens: u64,
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
        }
    }
}

/// What every answer of one request repeats: the endpoint, its id, when
/// it was made (Unix seconds) and the model as the client named it.
#[derive(Debug, Clone)]
pub struct Answering {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub model: String,
    /// A chunk's JSON up to its choices (`{"id":…,"choices":`), the same
    /// for every event of the stream: written once, at its first chunk.
    /// Escaping the id and the model anew for every event was ~2k of the
    /// ~30k instructions a relayed event costs (docs/performance.md).
    head: std::sync::OnceLock<Vec<u8>>,
}

#[derive(Serialize)]
struct Whole<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [Choice<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [Choice<'a>],
    /// `null` on every chunk but the last when the usage was asked for
    /// (`stream_options.include_usage`), absent otherwise.
    #[serde(skip_serializing_if = "Absent::is_absent")]
    usage: Absent<Usage>,
}

/// A field that is left out, written `null`, or has a value.
enum Absent<T> {
    Left,
    Null,
    Value(T),
}

impl<T> Absent<T> {
    fn is_absent(&self) -> bool {
        matches!(self, Absent::Left)
    }
}

impl<T: Serialize> Serialize for Absent<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Absent::Value(value) => value.serialize(s),
            _ => s.serialize_none(),
        }
    }
}

/// One choice: completions carry `text`, chat a `message` (whole) or a
/// `delta` (chunk).
#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<Message<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<Message<'a>>,
    logprobs: Option<()>,
    finish_reason: Option<&'a str>,
}

#[derive(Serialize)]
struct Message<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
}

impl Answering {
    pub fn new(endpoint: Endpoint, id: String, created: u64, model: String) -> Answering {
        Answering {
            endpoint,
            id,
            created,
            model,
            head: std::sync::OnceLock::new(),
        }
    }

    /// The whole answer of a request that did not stream.
    pub fn whole(&self, text: &str, finish: &str, usage: Option<Usage>) -> Vec<u8> {
        let choice = match self.endpoint {
            Endpoint::Completions => self.choice(Some(text), None, Some(finish)),
            Endpoint::Chat => Choice {
                message: Some(Message {
                    role: Some("assistant"),
                    content: Some(text),
                }),
                ..self.choice(None, None, Some(finish))
            },
        };
        let whole = Whole {
            id: &self.id,
            object: self.object(false),
            created: self.created,
            model: &self.model,
            choices: [choice],
            usage,
        };
        serde_json::to_vec(&whole).unwrap_or_default()
    }

    /// One streamed chunk's event: `text` generated (the chat's first
    /// chunk also says the role), and the finish reason on the last.
    /// `usage_null`: the client asked for the usage, which only the
    /// stream's last event carries.
    pub fn chunk(&self, text: &str, first: bool, finish: Option<&str>, usage_null: bool) -> Bytes {
        let choice = match self.endpoint {
            Endpoint::Completions => self.choice(Some(text), None, finish),
            Endpoint::Chat => {
                let role = first.then_some("assistant");
                let content = (first || !text.is_empty()).then_some(text);
                self.choice(None, Some(Message { role, content }), finish)
            }
        };
        let usage = if usage_null {
            Absent::Null
        } else {
            Absent::Left
        };
        self.event(&[choice], usage)
    }

    /// The usage's own last chunk: no choice, only the counts.
    pub fn usage_chunk(&self, usage: Option<Usage>) -> Bytes {
        let usage = usage.map_or(Absent::Null, Absent::Value);
        self.event(&[], usage)
    }

    /// `data: <chunk>\n\n`, written in one buffer: the stream's cached
    /// head, then the choices and the usage as `Chunk` would write them
    /// (the same bytes: `tests::a_chunk_is_written_as_its_struct_would_be`).
    fn event(&self, choices: &[Choice<'_>], usage: Absent<Usage>) -> Bytes {
        let head = self.head.get_or_init(|| self.chunk_head());
        let mut out = Vec::with_capacity(head.len() + 128);
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(head);
        let written = serde_json::to_writer(&mut out, choices).and_then(|()| {
            if !usage.is_absent() {
                out.extend_from_slice(b",\"usage\":");
                serde_json::to_writer(&mut out, &usage)?;
            }
            Ok(())
        });
        if written.is_err() {
            // Borrowed strings and numbers only: serde_json cannot fail on
            // them; should it, the event is the whole struct's.
            return sse_event(
                &serde_json::to_vec(&self.as_chunk(choices, usage)).unwrap_or_default(),
            );
        }
        out.extend_from_slice(b"}\n\n");
        Bytes::from(out)
    }

    /// The chunk as one struct: what [`Answering::event`]'s bytes must equal.
    fn as_chunk<'a>(&'a self, choices: &'a [Choice<'a>], usage: Absent<Usage>) -> Chunk<'a> {
        Chunk {
            id: &self.id,
            object: self.object(true),
            created: self.created,
            model: &self.model,
            choices,
            usage,
        }
    }

    /// `{"id":…,"object":…,"created":…,"model":…,"choices":`: the chunk's
    /// JSON with no choices and no usage, cut before its `[]}`.
    fn chunk_head(&self) -> Vec<u8> {
        let mut head = serde_json::to_vec(&self.as_chunk(&[], Absent::Left)).unwrap_or_default();
        head.truncate(head.len().saturating_sub(b"[]}".len()));
        head
    }

    fn choice<'a>(
        &self,
        text: Option<&'a str>,
        delta: Option<Message<'a>>,
        finish: Option<&'a str>,
    ) -> Choice<'a> {
        Choice {
            index: 0,
            text,
            message: None,
            delta,
            logprobs: None,
            finish_reason: finish,
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Completions, _) => "text_completion",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
        }
    }
}

#[derive(Serialize)]
struct Model<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'static str,
}

#[derive(Serialize)]
struct Models<'a> {
    object: &'static str,
    data: Vec<Model<'a>>,
}

fn model(id: &str, created: u64) -> Model<'_> {
    Model {
        id,
        object: "model",
        created,
        owned_by: "tensorgate",
    }
}

/// `GET /v1/models`: the models, by the names clients use.
pub(crate) fn models<'a>(names: impl IntoIterator<Item = &'a str>, created: u64) -> Vec<u8> {
    let data = names.into_iter().map(|id| model(id, created)).collect();
    serde_json::to_vec(&Models {
        object: "list",
        data,
    })
    .unwrap_or_default()
}

/// `GET /v1/models/{id}`.
pub(crate) fn model_object(id: &str, created: u64) -> Vec<u8> {
    serde_json::to_vec(&model(id, created)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn answering(endpoint: Endpoint) -> Answering {
        Answering::new(endpoint, "cmpl-1".into(), 7, "m".into())
    }

    #[test]
    fn a_chunk_is_written_as_its_struct_would_be() {
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let a = Answering::new(endpoint, "id \"1\"\u{1}".into(), 42, "m/\\é".into());
            for text in ["", "a", "\"quoted\"\n\u{7f}é"] {
                for (first, finish) in [(true, None), (false, None), (false, Some("length"))] {
                    for usage_null in [false, true] {
                        let got = a.chunk(text, first, finish, usage_null);
                        let usage = if usage_null {
                            Absent::Null
                        } else {
                            Absent::Left
                        };
                        let choice = match endpoint {
                            Endpoint::Completions => a.choice(Some(text), None, finish),
                            Endpoint::Chat => a.choice(
                                None,
                                Some(Message {
                                    role: first.then_some("assistant"),
                                    content: (first || !text.is_empty()).then_some(text),
                                }),
                                finish,
                            ),
                        };
                        let want = serde_json::to_vec(&a.as_chunk(&[choice], usage)).unwrap();
                        assert_eq!(got, sse_event(&want), "{endpoint:?} {text:?} {first}");
                    }
                }
            }
            let got = a.usage_chunk(Some(Usage::new(1, 2)));
            let want =
                serde_json::to_vec(&a.as_chunk(&[], Absent::Value(Usage::new(1, 2)))).unwrap();
            assert_eq!(got, sse_event(&want));
        }
    }

    fn event(bytes: &[u8]) -> Value {
        let text = std::str::from_utf8(bytes).unwrap();
        let json = text
            .strip_prefix("data: ")
            .unwrap()
            .strip_suffix("\n\n")
            .unwrap();
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn whole_answers_have_the_openai_shape() {
        let usage = Some(Usage::new(3, 4));
        let chat: Value =
            serde_json::from_slice(&answering(Endpoint::Chat).whole("hi", "stop", usage)).unwrap();
        assert_eq!(
            chat,
            json!({"id":"cmpl-1","object":"chat.completion","created":7,"model":"m",
                "choices":[{"index":0,"message":{"role":"assistant","content":"hi"},
                "logprobs":null,"finish_reason":"stop"}],
                "usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})
        );
        let text: Value =
            serde_json::from_slice(&answering(Endpoint::Completions).whole("hi", "length", None))
                .unwrap();
        assert_eq!(text["choices"][0]["text"], "hi");
        assert_eq!(text["object"], "text_completion");
        assert!(text.get("usage").is_none());
    }

    #[test]
    fn chunks_say_the_role_first_and_the_usage_last() {
        let chat = answering(Endpoint::Chat);
        let first = event(&chat.chunk("", true, None, true));
        assert_eq!(
            first["choices"][0]["delta"],
            json!({"role":"assistant","content":""})
        );
        assert_eq!(first["usage"], Value::Null);
        assert!(first.as_object().unwrap().contains_key("usage"));
        let last = event(&chat.chunk("", false, Some("length"), false));
        assert_eq!(last["choices"][0]["delta"], json!({}));
        assert_eq!(last["choices"][0]["finish_reason"], "length");
        assert!(!last.as_object().unwrap().contains_key("usage"));
        let usage = event(&chat.usage_chunk(Some(Usage::new(1, 2))));
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["total_tokens"], 3);
        let text = event(&answering(Endpoint::Completions).chunk("a", true, None, false));
        assert_eq!(text["choices"][0]["text"], "a");
        assert_eq!(text["choices"][0]["finish_reason"], Value::Null);
    }

    #[test]
    fn the_models_listing() {
        let list: Value = serde_json::from_slice(&models(["a", "b"], 1)).unwrap();
        assert_eq!(list["object"], "list");
        assert_eq!(list["data"][1]["id"], "b");
        let one: Value = serde_json::from_slice(&model_object("a", 1)).unwrap();
        assert_eq!(one["object"], "model");
    }
}
