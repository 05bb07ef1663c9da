//! The `model-repository` group: the repository index (every upstream
//! group's, `app::index`: with several groups each entry names its own),
//! and load and unload through the core's fan-out (`app::fanout`):
//! Triton's empty 200, plus `Tensorgate-Backends` after a fan-out.

use crate::app::door::Relay;
use crate::app::fanout::{control_repository, Control};
use crate::app::index;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::HttpResponse;
use crate::translate::from_grpc::endpoints as render;
use crate::translate::to_grpc::endpoints as req_pb;

pub(super) async fn index(
    gateway: &Gateway,
    ctx: &RequestContext,
    body: &[u8],
) -> Result<HttpResponse> {
    let request = req_pb::repository_index(body)?;
    let listed = index::repository_index(gateway, ctx, &request, None).await?;
    let body = match listed.as_slice() {
        [one] => render::repository_index_json(&one.index),
        several => {
            let groups: Vec<(&str, &_)> = several.iter().map(|l| (&*l.group, &l.index)).collect();
            render::repository_index_grouped_json(&groups)
        }
    };
    Ok(HttpResponse::json(body))
}

/// Load or unload (`control`, made from the body once the route is
/// known to name no repository), through the core's fan-out.
pub(super) async fn control(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &str,
    repository: &Option<String>,
    control: impl FnOnce() -> Result<Control>,
) -> Result<HttpResponse> {
    no_repository_name(repository)?;
    let placed = control_repository(gateway, ctx, model, control()?, &Relay::default()).await?;
    let mut response = HttpResponse::empty(200, "application/json");
    if let Some(backends) = placed.backends {
        response.headers.push(("Tensorgate-Backends", backends));
    }
    Ok(response)
}

/// Triton refuses an explicit repository on load/unload (v2 §0.3
/// rule 8).
fn no_repository_name(repository: &Option<String>) -> Result<()> {
    match repository {
        Some(_) => Err(Error::unsupported(
            "'repository_name' specification is not supported",
        )),
        None => Ok(()),
    }
}
