//! The OpenAI front's models, as the core knows them: which v2 model an
//! OpenAI model id is ([`upstream_model`], the one place a
//! `[openai.models.*]` rename is applied), the route its calls take (the
//! door's, on that v2 name, once: `app::routing`), which convention it
//! follows (configured, or recognised from its signature by
//! `translate::to_grpc::openai`), its chat template (`template`, compiled
//! when the gateway is built), and the models listing.
//!
//! Two renames may stand between a client and its model: this front's,
//! from the OpenAI id to a v2 name, then a route's `upstream_model`, from
//! that v2 name to the group's (applied by the door). Answers and errors
//! name the OpenAI id, never either of the others ([`named_back`]).

mod template;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

pub(crate) use template::ChatTemplate;

use crate::app::door::{self, Aim};
use crate::app::routing::Routed;
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
#[derive(Clone)]
pub(crate) struct Served {
    /// The model's v2 name (after the configured rename): what the routes
    /// match on.
    pub(crate) upstream: String,
    /// The route of its calls, taken once (its signature's and its
    /// stream's).
    pub(crate) routed: Routed,
    pub(crate) backend: OpenAiBackend,
    pub(crate) info: Arc<ModelInfo>,
    pub(crate) template: Option<Arc<ChatTemplate>>,
}

/// The v2 name of the model clients call `name`: the one place the
/// `[openai.models.NAME] upstream_model` rename is applied, before the
/// door's aim is made. The routes then match on that v2 name, and a
/// route's own `upstream_model` renames it further, at the door.
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
    // Routed once, on the v2 name and the request's facts (front
    // `openai`): the signature and the stream take this one route.
    let signature = async {
        let routed = door::route(gateway, ctx, &Aim::of(&model))?;
        let info = models::model_info(gateway, ctx, &model, Some(&routed)).await?;
        Ok::<_, Error>((routed, info))
    };
    let (routed, info) = match signature.await {
        Ok((routed, Some(info))) => (routed, info),
        Ok((_, None)) => return Err(not_found(" (the upstream gives no model signatures)")),
        Err(e) if e.kind == Kind::NotFound => return Err(not_found("")),
        Err(e) => return Err(named_back(e, upstream, name)),
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
        routed,
        backend,
        info,
        template: gateway.openai_templates().0.get(name).cloned(),
    })
}

/// An error about the v2 model `upstream` as the client sees it: naming
/// the OpenAI id `id` it called (the door named it back from a route's
/// upstream name already).
pub(crate) fn named_back(error: Error, upstream: &str, id: &str) -> Error {
    match upstream == id {
        true => error,
        false => door::error_named_back(error, upstream, id),
    }
}

/// The names of the models the front serves now: every configured one,
/// and every model a backend reports ready that follows a convention (its
/// signature asked once per cache period, of the group its route goes
/// to): a name is listed when a request for it would find its model, so
/// a route's upstream name shows only where a group serves it under that
/// name to this front's requests. Sorted, each once.
pub(crate) async fn served_names(gateway: &Gateway, ctx: &RequestContext) -> Vec<String> {
    let config = &gateway.config().openai;
    let mut names: BTreeSet<String> = config.models.keys().cloned().collect();
    // The backends' models are known from the pools' first pass on.
    gateway.started().await;
    for upstream in status::serving_models(gateway) {
        if names.contains(&upstream) {
            continue;
        }
        let model = ModelRef {
            name: upstream.clone(),
            version: String::new(),
        };
        // Routed without noting it: the listing is about no one model.
        let Ok(routed) = door::route_by(gateway, ctx.facts(), &Aim::of(&model)) else {
            continue;
        };
        if let Ok(Some(info)) = models::model_info(gateway, ctx, &model, Some(&routed)).await {
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
