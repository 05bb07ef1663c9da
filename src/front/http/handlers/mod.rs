//! The HTTP front's handlers, functions of their route group (each group
//! a file): `inference` (`/infer`), `generate`, `health`, `metadata`
//! (server and model metadata, model configuration, statistics),
//! `settings` (trace and log settings), `repository` (index, load,
//! unload), `shared_memory`. Each takes the core and what of the request
//! it needs, calls the core (`app`), and renders Triton's answer;
//! [`dispatch`] picks the handler of a route. The legacy v1 routes have
//! their own (`front::http::v1`).

pub(super) mod generate;
mod health;
mod inference;
mod metadata;
mod repository;
mod settings;
mod shared_memory;

use std::sync::Arc;

use crate::app::fanout::Control;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::plan::Plan;
use crate::front::http::route::Route;
use crate::front::http::{admin, Answer, HttpRequest, HttpResponse};
use crate::translate::to_grpc::endpoints as req_pb;

/// The answer of the handler of `plan`'s route (a v2 route: v1 routes are
/// answered by `front::http::v1`).
pub(crate) async fn dispatch(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    plan: &Plan,
    req: &mut HttpRequest,
) -> Result<Answer> {
    let full = |response: Result<HttpResponse>| response.map(Answer::Full);
    let body = &req.body[..];
    match &plan.route {
        Route::Infer(model) => inference::infer(gateway, ctx, plan, model, req).await,
        Route::Generate(model) => full(generate::once(gateway, ctx, plan, model, req).await),
        Route::GenerateStream(model) => generate::stream(gateway, ctx, plan, model, req).await,
        Route::HealthLive => full(Ok(health::live(gateway))),
        Route::HealthReady => full(Ok(health::ready(gateway).await)),
        Route::ModelReady(model) => full(health::model_ready(gateway, ctx, model).await),
        Route::ServerMetadata => full(metadata::server(gateway, ctx).await),
        Route::ModelMetadata(model) => full(metadata::model(gateway, ctx, model).await),
        Route::ModelConfig(model) => full(metadata::config(gateway, ctx, model).await),
        Route::ModelStats(model) => full(metadata::statistics(gateway, ctx, model).await),
        Route::TraceSetting(model) => {
            let model = model.as_deref().unwrap_or("");
            full(settings::trace(gateway, ctx, &req.method, model, body).await)
        }
        Route::Logging => full(settings::logging(gateway, ctx, &req.method, body).await),
        Route::RepositoryIndex => full(repository::index(gateway, ctx, body).await),
        Route::RepositoryLoad { model, repository } => {
            let load = || req_pb::repository_load(model, body).map(Control::Load);
            full(repository::control(gateway, ctx, model, repository, load).await)
        }
        Route::RepositoryUnload { model, repository } => {
            let unload = || Ok(Control::Unload(req_pb::repository_unload(model, body)));
            full(repository::control(gateway, ctx, model, repository, unload).await)
        }
        Route::SystemShm { region, action } => {
            let region = region.as_deref().unwrap_or("");
            full(shared_memory::system(gateway, ctx, region, *action, body).await)
        }
        Route::CudaShm { region, action } => {
            let region = region.as_deref().unwrap_or("");
            full(shared_memory::cuda(gateway, ctx, region, *action, body).await)
        }
        Route::Backends => full(Ok(HttpResponse::json(admin::backends_json(gateway)))),
        Route::V1(_) => Err(Error::internal("v1 routes are answered by front::http::v1")),
        Route::OpenAi(_) => Err(Error::internal(
            "OpenAI routes are answered by front::http::openai",
        )),
    }
}

/// The JSON answer `render` makes of a successful RPC's response.
fn rendered<T>(response: Result<T>, render: fn(&T) -> Vec<u8>) -> Result<HttpResponse> {
    Ok(HttpResponse::json(render(&response?)))
}

/// The empty `application/json` 200 of a successful RPC whose answer has
/// no body.
fn done<T>(response: Result<T>) -> Result<HttpResponse> {
    response?;
    Ok(HttpResponse::empty(200, "application/json"))
}
