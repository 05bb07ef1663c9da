//! The upstream calls of the v1 front, one small function per RPC, through
//! the upstream pool like the v2 front's: model calls go to backends
//! serving the model, server-wide ones to any ready backend, inference
//! with the v2 front's choice (sticky sequences, deadlines), load/unload
//! with its fan-out.

use crate::app::door::Relay;
use crate::app::door::{self, Aim};
use crate::app::fanout::{control_repository, Control};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::proto::inference as pb;

/// The gateway is live while it runs (as its v2 health).
pub(crate) async fn live(_gateway: &Gateway) -> Result<bool> {
    Ok(true)
}

/// Ready while at least one backend is, until the drain.
pub(crate) async fn ready(gateway: &Gateway) -> Result<bool> {
    Ok(gateway.ready().await)
}

/// Every model and version the repository knows; `None` when the
/// upstream has no repository API.
pub(crate) async fn repository_index(
    gateway: &Gateway,
    ctx: &RequestContext,
) -> Result<Option<Vec<pb::repository_index_response::ModelIndex>>> {
    let request = pb::RepositoryIndexRequest {
        repository_name: String::new(),
        ready: false,
    };
    match door::call(gateway, ctx, Aim::ANY, request).await {
        Ok(r) => Ok(Some(r.models)),
        Err(e) if e.kind == Kind::MissingRpc => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) async fn model_config(
    gateway: &Gateway,
    ctx: &RequestContext,
    name: &str,
) -> Result<pb::ModelConfig> {
    let request = pb::ModelConfigRequest {
        name: name.to_string(),
        version: String::new(),
    };
    let r = door::call(gateway, ctx, Aim::model(name), request).await?;
    Ok(r.config.unwrap_or_default())
}

pub(crate) async fn model_versions(
    gateway: &Gateway,
    ctx: &RequestContext,
    name: &str,
) -> Result<Vec<String>> {
    let request = pb::ModelMetadataRequest {
        name: name.to_string(),
        version: String::new(),
    };
    Ok(door::call(gateway, ctx, Aim::model(name), request)
        .await?
        .versions)
}

pub(crate) async fn model_ready(
    gateway: &Gateway,
    ctx: &RequestContext,
    name: &str,
    version: &str,
) -> Result<bool> {
    let request = pb::ModelReadyRequest {
        name: name.to_string(),
        version: version.to_string(),
    };
    Ok(door::call(gateway, ctx, Aim::model(name), request)
        .await?
        .ready)
}

pub(crate) async fn model_statistics(
    gateway: &Gateway,
    ctx: &RequestContext,
    name: &str,
) -> Result<Vec<pb::ModelStatistics>> {
    let request = pb::ModelStatisticsRequest {
        name: name.to_string(),
        version: String::new(),
    };
    Ok(door::call(gateway, ctx, Aim::model(name), request)
        .await?
        .model_stats)
}

pub(crate) async fn model_load(gateway: &Gateway, ctx: &RequestContext, name: &str) -> Result<()> {
    let request = pb::RepositoryModelLoadRequest {
        repository_name: String::new(),
        model_name: name.to_string(),
        parameters: Default::default(),
    };
    control(gateway, ctx, name, Control::Load(request)).await
}

pub(crate) async fn model_unload(
    gateway: &Gateway,
    ctx: &RequestContext,
    name: &str,
) -> Result<()> {
    let request = pb::RepositoryModelUnloadRequest {
        repository_name: String::new(),
        model_name: name.to_string(),
        parameters: Default::default(),
    };
    control(gateway, ctx, name, Control::Unload(request)).await
}

/// Load/unload with the v2 front's fan-out (every ready backend).
async fn control(
    gateway: &Gateway,
    ctx: &RequestContext,
    name: &str,
    control: Control,
) -> Result<()> {
    control_repository(gateway, ctx, name, control, &Relay::default())
        .await
        .map(drop)
        .map_err(|e: Error| e)
}
