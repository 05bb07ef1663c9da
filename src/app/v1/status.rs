//! `GET /api/status[/<model>]`: a v1 `ServerStatus` assembled from the
//! upstream's readiness, repository index, model configurations and
//! statistics. Without a model, every model the repository lists whose
//! configuration the upstream serves (unloaded models have none).

use super::rpc;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::proto::v1 as pb;
use crate::translate::v1::status::{self, ModelFacts};

/// The v1 `ServerStatus` of one model, or of every model the repository
/// lists (module doc).
pub(crate) async fn server_status(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: Option<&str>,
) -> Result<pb::ServerStatus> {
    let ready = rpc::ready(gateway).await?;
    let index = rpc::repository_index(gateway, ctx).await?;
    let mut models = Vec::new();
    match model {
        Some(name) => {
            let facts = model_facts(gateway, ctx, name, index.as_deref()).await;
            models.push(facts.map_err(|e| match e.kind {
                Kind::NotFound | Kind::InvalidArg => Error::new(
                    e.kind,
                    format!("no status available for unknown model '{name}'"),
                ),
                _ => e,
            })?);
        }
        None => {
            let mut names: Vec<&str> = Vec::new();
            for entry in index.iter().flatten() {
                if !names.contains(&entry.name.as_str()) {
                    names.push(&entry.name);
                }
            }
            for name in names {
                match model_facts(gateway, ctx, name, index.as_deref()).await {
                    Ok(facts) => models.push(facts),
                    Err(e) if matches!(e.kind, Kind::NotFound | Kind::InvalidArg) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    let uptime = crate::app::v1::started().elapsed().as_nanos();
    let uptime = u64::try_from(uptime).unwrap_or(u64::MAX);
    Ok(status::server_status(
        &gateway.config().v1.server_id,
        ready,
        uptime,
        models,
    ))
}

async fn model_facts(
    gateway: &Gateway,
    ctx: &RequestContext,
    name: &str,
    index: Option<&[crate::proto::inference::repository_index_response::ModelIndex]>,
) -> Result<ModelFacts> {
    let config = rpc::model_config(gateway, ctx, name).await?;
    let mut versions: Vec<(i64, String, String)> = index
        .unwrap_or_default()
        .iter()
        .filter(|m| m.name == name)
        .filter_map(|m| Some((m.version.parse().ok()?, m.state.clone(), m.reason.clone())))
        .collect();
    if versions.is_empty() {
        // No repository API (or no versions listed): ask per version.
        for version in rpc::model_versions(gateway, ctx, name).await? {
            let ready = rpc::model_ready(gateway, ctx, name, &version).await?;
            if let Ok(number) = version.parse() {
                let state = if ready { "READY" } else { "UNAVAILABLE" };
                versions.push((number, state.to_string(), String::new()));
            }
        }
    }
    // Statistics are optional: servers without the API still get a status.
    let stats = rpc::model_statistics(gateway, ctx, name)
        .await
        .unwrap_or_default();
    Ok(ModelFacts {
        config,
        versions,
        stats,
    })
}
