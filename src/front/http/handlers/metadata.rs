//! The `metadata`, `model-config` and `statistics` groups: `GET /v2` (the
//! server metadata, with the extensions the HTTP front serves itself),
//! a model's metadata and configuration, and statistics of one model or
//! of all; each the upstream's answer rendered as Triton renders it.

use super::rendered;
use crate::app::door::{self, Aim};
use crate::app::metadata::{server_metadata, Front};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::Result;
use crate::front::http::HttpResponse;
use crate::model::ModelRef;
use crate::translate::from_grpc::{endpoints as render, model_config};
use crate::translate::to_grpc::endpoints as req_pb;

pub(super) async fn server(gateway: &Gateway, ctx: &RequestContext) -> Result<HttpResponse> {
    let r = door::call(gateway, ctx, Aim::ANY, req_pb::server_metadata()).await?;
    let metadata = server_metadata(gateway, r, Front::Http);
    Ok(HttpResponse::json(render::server_metadata_json(&metadata)))
}

pub(super) async fn model(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &ModelRef,
) -> Result<HttpResponse> {
    let request = req_pb::model_metadata(&model.name, &model.version);
    let r = door::call(gateway, ctx, Aim::of(model), request).await;
    rendered(r, render::model_metadata_json)
}

pub(super) async fn config(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &ModelRef,
) -> Result<HttpResponse> {
    let request = req_pb::model_config(&model.name, &model.version);
    let r = door::call(gateway, ctx, Aim::of(model), request).await;
    rendered(r, model_config::model_config_response_json)
}

/// Statistics of `model`, or of every model (`None`: from any backend).
pub(super) async fn statistics(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &Option<ModelRef>,
) -> Result<HttpResponse> {
    let (name, version) = model
        .as_ref()
        .map_or(("", ""), |m| (&m.name[..], &m.version[..]));
    let request = req_pb::model_statistics(name, version);
    let r = door::call(gateway, ctx, Aim::versioned(name, version), request).await;
    rendered(r, render::model_statistics_json)
}
