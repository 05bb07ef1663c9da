//! The OpenAI front's models, as the core knows them: which model a name
//! is upstream ([`upstream_model`], the one place a `[openai.models.*]`
//! rename is applied), which convention it follows (configured, or
//! recognised from its signature by `translate::to_grpc::openai`), its chat
//! template (`template`, compiled when the gateway is built), and the
//! models listing.

mod template;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

pub(crate) use template::ChatTemplate;

use crate::app::{models, status, Gateway};
use crate::config::{OpenAi, OpenAiBackend};
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::model::{ModelInfo, ModelRef};
use crate::translate::to_grpc::openai::recognise;

/// The compiled chat templates, by the name clients use.
#[derive(Debug, Default)]
pub(crate) struct Templates(HashMap<String, Arc<ChatTemplate>>);

impl Templates {
    /// Compiles every configured template; the first that fails refuses
    /// the configuration, naming its model and file.
    pub(crate) fn new(config: &OpenAi) -> Result<Templates, String> {
        let mut templates = HashMap::new();
        for (name, model) in &config.models {
            if let Some(path) = &model.chat_template {
                let template = ChatTemplate::load(path)
                    .map_err(|e| format!("openai.models.{name}.chat_template: {e}"))?;
                templates.insert(name.clone(), Arc::new(template));
            }
        }
        Ok(Templates(templates))
    }
}

/// A model the OpenAI front serves, resolved for one request.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    /// The model's name upstream (after the configured rename).
    pub(crate) upstream: String,
    pub(crate) backend: OpenAiBackend,
    pub(crate) info: Arc<ModelInfo>,
    pub(crate) template: Option<Arc<ChatTemplate>>,
}

/// The name upstream of the model clients call `name`: the one place the
/// `[openai.models.NAME] upstream_model` rename is applied, before the
/// door's aim is made (and so before any route of the door's own).
pub(crate) fn upstream_model<'a>(config: &'a OpenAi, name: &'a str) -> &'a str {
    config
        .model(name)
        .and_then(|m| m.upstream_model.as_deref())
        .unwrap_or(name)
}

/// The model clients call `name`, if the front serves it: its signature
/// from the upstream (cached), and its convention. An unknown model, or
/// one that follows neither convention and has none configured, is a 404
/// in OpenAI's words (`model_not_found`).
pub(crate) async fn resolve(gateway: &Gateway, ctx: &RequestContext, name: &str) -> Result<Served> {
    let config = &gateway.config().openai;
    let upstream = upstream_model(config, name);
    let model = ModelRef {
        name: upstream.to_string(),
        version: String::new(),
    };
    let not_found = |why: &str| {
        Error::not_found(format!("The model '{name}' does not exist{why}")).about("model")
    };
    let info = match models::model_info(gateway, ctx, &model, None).await {
        Ok(Some(info)) => info,
        Ok(None) => return Err(not_found(" (the upstream gives no model signatures)")),
        Err(e) if e.kind == Kind::NotFound => return Err(not_found("")),
        Err(e) => return Err(e),
    };
    let configured = config.model(name).and_then(|m| m.backend);
    let Some(backend) = configured.or_else(|| recognise(&info)) else {
        return Err(not_found(
            " as a language model: its inputs follow neither the vLLM nor the TensorRT-LLM \
             convention (set openai.models.NAME.backend)",
        ));
    };
    Ok(Served {
        upstream: upstream.to_string(),
        backend,
        info,
        template: gateway.openai_templates().0.get(name).cloned(),
    })
}

/// The names of the models the front serves now: every configured one,
/// and every model a backend reports ready that follows a convention (its
/// signature asked once per cache period). Sorted, each once.
pub(crate) async fn served_names(gateway: &Gateway, ctx: &RequestContext) -> Vec<String> {
    let config = &gateway.config().openai;
    let mut names: BTreeSet<String> = config.models.keys().cloned().collect();
    // The backends' models are known from the pool's first pass on.
    gateway.started().await;
    for upstream in status::serving_models(gateway) {
        if names.contains(&upstream) {
            continue;
        }
        let model = ModelRef {
            name: upstream.clone(),
            version: String::new(),
        };
        if let Ok(Some(info)) = models::model_info(gateway, ctx, &model, None).await {
            if recognise(&info).is_some() {
                names.insert(upstream);
            }
        }
    }
    names.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rename_is_applied_only_where_configured() {
        let config: OpenAi = toml::from_str(
            "[models.llama]\nupstream_model = \"llama_vllm\"\n[models.plain]\nbackend = \"vllm\"\n",
        )
        .unwrap();
        assert_eq!(upstream_model(&config, "llama"), "llama_vllm");
        assert_eq!(upstream_model(&config, "plain"), "plain");
        assert_eq!(upstream_model(&config, "other"), "other");
    }
}
