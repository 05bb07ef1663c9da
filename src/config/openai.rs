//! `[openai]`: the OpenAI-compatible front (`/v1/models`,
//! `/v1/completions`, `/v1/chat/completions`) on the HTTP listener, and
//! per model (`[openai.models.NAME]`) its backend convention, chat
//! template and upstream name.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// On by default: its paths are all under `/v1/`, which no v2 or legacy
/// v1 route uses, so it changes nothing for a v2 client.
pub(super) const DEFAULT_ENABLED: bool = true;

/// OpenAI's own default for `/v1/completions` (and Triton's OpenAI
/// frontend's for both endpoints): a request without `max_tokens` must
/// still end.
pub const DEFAULT_MAX_TOKENS: u32 = 16;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAi {
    /// Serve the `/v1/...` OpenAI routes on the HTTP listener.
    pub enabled: bool,
    /// `IP:PORT` of a listener of its own (plain HTTP/1.1 and h2c) that
    /// serves only the OpenAI routes; unset: none.
    pub listen: Option<String>,
    /// `max_tokens` of a request that names none.
    pub default_max_tokens: u32,
    /// Per model, by the name clients send as `model`.
    pub models: BTreeMap<String, OpenAiModel>,
}

/// One model as the OpenAI front serves it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAiModel {
    /// The model's input convention; unset: recognised from its inputs.
    pub backend: Option<Backend>,
    /// A Hugging Face `tokenizer_config.json` whose `chat_template` renders
    /// chat messages into the prompt; unset: chat is refused (400).
    pub chat_template: Option<PathBuf>,
    /// The model's name upstream; unset: the same name.
    pub upstream_model: Option<String>,
}

/// How a model takes a generation request: the inputs of Triton's vLLM
/// backend or of its TensorRT-LLM backend (docs/operations.md, "OpenAI").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// `text_input`, `stream`, `sampling_parameters` (JSON),
    /// `exclude_input_in_output`, `return_num_*_tokens`.
    Vllm,
    /// `text_input`, `max_tokens`, `temperature`, `top_p`, `stop_words`, ...
    /// each an input of its own.
    Tensorrtllm,
}

impl Backend {
    /// The name the configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Vllm => "vllm",
            Backend::Tensorrtllm => "tensorrtllm",
        }
    }
}

impl Default for OpenAi {
    fn default() -> OpenAi {
        OpenAi {
            enabled: DEFAULT_ENABLED,
            listen: None,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            models: BTreeMap::new(),
        }
    }
}

impl OpenAi {
    /// The configuration of the model clients call `name`, if any.
    pub fn model(&self, name: &str) -> Option<&OpenAiModel> {
        self.models.get(name)
    }

    /// `listen` is `IP:PORT`, names are non-empty, `default_max_tokens`
    /// above 0, and every chat
    /// template file readable (that it parses as a template is checked
    /// when the gateway is built, still before any port is bound).
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.default_max_tokens == 0 {
            return Err("openai.default_max_tokens must be greater than 0".into());
        }
        if let Some(listen) = &self.listen {
            listen
                .parse::<std::net::SocketAddr>()
                .map_err(|_| format!("openai.listen must be IP:PORT, got {listen:?}"))?;
        }
        for (name, model) in &self.models {
            if name.is_empty() || model.upstream_model.as_deref() == Some("") {
                return Err("openai.models: a model name must not be empty".into());
            }
            if let Some(path) = &model.chat_template {
                std::fs::metadata(path).map_err(|e| {
                    format!("openai.models.{name}.chat_template {}: {e}", path.display())
                })?;
            }
        }
        Ok(())
    }
}
