//! Classifies an OpenAI path (`/v1/...`) once into an [`OpenAiRoute`].
//! Asked only for a path that is no v2 route (`Route::classify_target`),
//! so a v2 request never pays for it; every path under `/v1/` is the
//! OpenAI front's, an unknown one its 404.

use http::Method;

use crate::config::Group;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenAiRoute {
    /// `GET /v1/models`.
    Models,
    /// `GET /v1/models/{id}` (the id as written, `/` allowed: HF names).
    Model(String),
    /// `POST /v1/completions`.
    Completions,
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// Under `/v1/` but no endpoint of ours.
    Unknown,
}

impl OpenAiRoute {
    /// `None` when `path` (query stripped) is not under `/v1/`.
    pub fn classify(path: &str) -> Option<OpenAiRoute> {
        let rest = path.strip_prefix("/v1/")?;
        Some(match rest {
            "models" => OpenAiRoute::Models,
            "completions" => OpenAiRoute::Completions,
            "chat/completions" => OpenAiRoute::ChatCompletions,
            _ => match rest.strip_prefix("models/") {
                Some(id) if !id.is_empty() => OpenAiRoute::Model(id.to_string()),
                _ => OpenAiRoute::Unknown,
            },
        })
    }

    /// A raw target (path and query) on the OpenAI front's own listener,
    /// where every path is its: one not under `/v1/` is [`Unknown`](OpenAiRoute::Unknown).
    pub fn classify_target(target: &str) -> OpenAiRoute {
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        OpenAiRoute::classify(path).unwrap_or(OpenAiRoute::Unknown)
    }

    /// Methods each route accepts (others get 405).
    pub fn allows(&self, method: &Method) -> bool {
        match self {
            OpenAiRoute::Models | OpenAiRoute::Model(_) => method == Method::GET,
            OpenAiRoute::Completions | OpenAiRoute::ChatCompletions => method == Method::POST,
            OpenAiRoute::Unknown => true,
        }
    }

    /// The endpoint group: generating is `inference`, listing models
    /// `metadata`, as for the v2 routes, so a key's rights do not depend on
    /// the protocol its client speaks (docs/operations.md, "OpenAI").
    pub fn group(&self) -> Group {
        match self {
            OpenAiRoute::Completions | OpenAiRoute::ChatCompletions => Group::Inference,
            OpenAiRoute::Models | OpenAiRoute::Model(_) | OpenAiRoute::Unknown => Group::Metadata,
        }
    }

    /// The route's name in metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            OpenAiRoute::Models => "openai_models",
            OpenAiRoute::Model(_) => "openai_model",
            OpenAiRoute::Completions => "openai_completions",
            OpenAiRoute::ChatCompletions => "openai_chat_completions",
            OpenAiRoute::Unknown => "openai_unknown",
        }
    }

    /// A generation: long-running, maybe streamed.
    pub fn generates(&self) -> bool {
        matches!(
            self,
            OpenAiRoute::Completions | OpenAiRoute::ChatCompletions
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_openai_paths() {
        let cases = [
            ("/v1/models", Some(OpenAiRoute::Models)),
            ("/v1/models/llama", Some(OpenAiRoute::Model("llama".into()))),
            (
                "/v1/models/meta-llama/Llama-3",
                Some(OpenAiRoute::Model("meta-llama/Llama-3".into())),
            ),
            ("/v1/completions", Some(OpenAiRoute::Completions)),
            ("/v1/chat/completions", Some(OpenAiRoute::ChatCompletions)),
            ("/v1/models/", Some(OpenAiRoute::Unknown)),
            ("/v1/embeddings", Some(OpenAiRoute::Unknown)),
            ("/v2/models", None),
            ("/v1", None),
        ];
        for (path, want) in cases {
            assert_eq!(OpenAiRoute::classify(path), want, "{path}");
        }
        assert_eq!(
            OpenAiRoute::classify_target("/v1/models?x=1"),
            OpenAiRoute::Models
        );
        assert_eq!(
            OpenAiRoute::classify_target("/v2/models"),
            OpenAiRoute::Unknown
        );
        assert!(OpenAiRoute::Completions.generates());
        assert_eq!(OpenAiRoute::Models.group(), Group::Metadata);
        assert!(!OpenAiRoute::Models.allows(&Method::POST));
    }
}
