//! The `trace` and `logging` groups: the upstream's trace and log
//! settings, read (`GET`) or changed (`POST`), as Triton answers them.

use http::Method;

use super::rendered;
use crate::app::door::{self, Aim};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::HttpResponse;
use crate::translate::from_grpc::endpoints as render;
use crate::translate::to_grpc::endpoints as req_pb;

/// `/v2/trace/setting` (`model` empty) and `/v2/models/{m}/trace/setting`.
pub(super) async fn trace(
    gateway: &Gateway,
    ctx: &RequestContext,
    method: &Method,
    model: &str,
    body: &[u8],
) -> Result<HttpResponse> {
    let request = if method == Method::POST {
        req_pb::trace_setting_post(model, body)?
    } else {
        req_pb::trace_setting_get(model)
    };
    rendered(
        door::call(gateway, ctx, Aim::ANY, request).await,
        render::trace_settings_json,
    )
}

/// `/v2/logging`. Triton applies the settings before a bad one, then
/// reports it.
pub(super) async fn logging(
    gateway: &Gateway,
    ctx: &RequestContext,
    method: &Method,
    body: &[u8],
) -> Result<HttpResponse> {
    let (request, error) = if method == Method::POST {
        let update = req_pb::log_settings_post(body);
        (update.request, update.error)
    } else {
        (req_pb::log_settings_get(), None)
    };
    let applied = if request.settings.is_empty() && error.is_some() {
        None
    } else {
        Some(door::call(gateway, ctx, Aim::ANY, request).await?)
    };
    if let Some(error) = error {
        return Err(error);
    }
    let r = applied.ok_or_else(|| Error::internal("no log settings"))?;
    Ok(HttpResponse::json(render::log_settings_json(&r)))
}
