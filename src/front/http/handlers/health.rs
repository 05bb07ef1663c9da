//! The `health` group: `/v2/health/live`, `/v2/health/ready` (the
//! gateway's own: live while it runs, ready while a backend is, until the
//! drain) and `/v2/models/{m}/ready` (the upstream's).

use crate::app::door::{self, Aim};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::HttpResponse;
use crate::model::ModelRef;
use crate::translate::to_grpc::endpoints as req_pb;

/// The gateway is live while it runs.
pub(super) fn live(gateway: &Gateway) -> HttpResponse {
    health(gateway, "live", true)
}

/// Ready while a backend is, until the drain.
pub(super) async fn ready(gateway: &Gateway) -> HttpResponse {
    health(gateway, "ready", gateway.ready().await)
}

/// A model version's readiness, as the upstream says: an empty 200, or
/// Triton's 400.
pub(super) async fn model_ready(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &ModelRef,
) -> Result<HttpResponse> {
    let request = req_pb::model_ready(&model.name, &model.version);
    let r = door::call(gateway, ctx, Aim::of(model), request).await?;
    if r.ready {
        Ok(HttpResponse::empty(200, "text/plain"))
    } else {
        Err(Error::invalid("Model version not ready"))
    }
}

/// Health answers: 200 or 400, empty, `text/plain` (v2 §1 rows 1–2);
/// with `http.oip_health_bodies`, `{"<key>":bool}` as JSON (OIP).
fn health(gateway: &Gateway, key: &str, ok: bool) -> HttpResponse {
    let status = if ok { 200 } else { 400 };
    if !gateway.config().http.oip_health_bodies {
        return HttpResponse::empty(status, "text/plain");
    }
    let body = format!("{{\"{key}\":{ok}}}");
    HttpResponse::new(status, "application/json", vec![body.into()])
}
