//! Every v2 endpoint other than `/infer` (v2 §1 rows 1–18): call the
//! matching RPC, render Triton's answer.

use crate::app::door::{self, Aim, Relay};
use crate::app::fanout::{control_repository, Control};
use crate::app::metadata::Front;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::pipeline::Pipeline;
use crate::front::http::route::{Route, ShmAction};
use crate::front::http::shm;
use crate::front::http::{HttpRequest, HttpResponse};
use crate::translate::from_grpc::{endpoints as render, model_config};
use crate::translate::to_grpc::endpoints as req_pb;
use http::Method;

impl Pipeline {
    pub(crate) async fn endpoint(
        &self,
        ctx: &RequestContext,
        route: &Route,
        req: &HttpRequest,
    ) -> Result<HttpResponse> {
        let gateway = &*self.gateway;
        let body = &req.body[..];
        let json = |bytes: Vec<u8>| Ok(HttpResponse::json(bytes));
        // Bridge mode: the gateway keeps the shared-memory regions.
        if let Some(answer) = self
            .gateway
            .shm_bridge()
            .and_then(|b| shm::bridged(b, route, body))
        {
            return answer;
        }
        match route {
            // The gateway is live while it runs; ready while a backend is,
            // until the drain.
            Route::HealthLive => Ok(self.health("live", true)),
            Route::HealthReady => Ok(self.health("ready", self.gateway.ready().await)),
            Route::ModelReady(m) => {
                let r = door::call(
                    gateway,
                    ctx,
                    Aim::model(&m.name),
                    req_pb::model_ready(&m.name, &m.version),
                )
                .await?;
                if r.ready {
                    Ok(HttpResponse::empty(200, "text/plain"))
                } else {
                    Err(Error::invalid("Model version not ready"))
                }
            }
            Route::ServerMetadata => {
                let r = door::call(gateway, ctx, Aim::ANY, req_pb::server_metadata()).await?;
                json(render::server_metadata_json(
                    &self.gateway.server_metadata(r, Front::Http),
                ))
            }
            Route::ModelMetadata(m) => {
                let r = door::call(
                    gateway,
                    ctx,
                    Aim::model(&m.name),
                    req_pb::model_metadata(&m.name, &m.version),
                )
                .await;
                rendered(r, render::model_metadata_json)
            }
            Route::ModelConfig(m) => {
                let r = door::call(
                    gateway,
                    ctx,
                    Aim::model(&m.name),
                    req_pb::model_config(&m.name, &m.version),
                )
                .await;
                rendered(r, model_config::model_config_response_json)
            }
            Route::ModelStats(m) => {
                let (name, version) = m
                    .as_ref()
                    .map_or(("", ""), |m| (&m.name[..], &m.version[..]));
                let request = req_pb::model_statistics(name, version);
                let r = door::call(gateway, ctx, Aim::model(name), request).await;
                rendered(r, render::model_statistics_json)
            }
            Route::RepositoryIndex => {
                let r = door::call(gateway, ctx, Aim::ANY, req_pb::repository_index(body)?).await;
                rendered(r, render::repository_index_json)
            }
            Route::RepositoryLoad { model, repository } => {
                no_repository_name(repository)?;
                let request = req_pb::repository_load(model, body)?;
                self.repository_control(ctx, model, Control::Load(request))
                    .await
            }
            Route::RepositoryUnload { model, repository } => {
                no_repository_name(repository)?;
                let request = req_pb::repository_unload(model, body);
                self.repository_control(ctx, model, Control::Unload(request))
                    .await
            }
            Route::SystemShm { region, action } => {
                let region = region.as_deref().unwrap_or("");
                match action {
                    ShmAction::Status => {
                        let r =
                            door::call(gateway, ctx, Aim::ANY, req_pb::system_shm_status(region))
                                .await;
                        rendered(r, render::system_shm_status_json)
                    }
                    ShmAction::Register => {
                        let request = req_pb::system_shm_register(region, body)?;
                        done(door::call(gateway, ctx, Aim::ANY, request).await)
                    }
                    ShmAction::Unregister => {
                        let request = req_pb::system_shm_unregister(region);
                        done(door::call(gateway, ctx, Aim::ANY, request).await)
                    }
                }
            }
            Route::CudaShm { region, action } => {
                let region = region.as_deref().unwrap_or("");
                match action {
                    ShmAction::Status => {
                        let r = door::call(gateway, ctx, Aim::ANY, req_pb::cuda_shm_status(region))
                            .await;
                        rendered(r, render::cuda_shm_status_json)
                    }
                    ShmAction::Register => {
                        let request = req_pb::cuda_shm_register(region, body)?;
                        done(door::call(gateway, ctx, Aim::ANY, request).await)
                    }
                    ShmAction::Unregister => {
                        let request = req_pb::cuda_shm_unregister(region);
                        done(door::call(gateway, ctx, Aim::ANY, request).await)
                    }
                }
            }
            Route::TraceSetting(model) => {
                let model = model.as_deref().unwrap_or("");
                let request = if req.method == Method::POST {
                    req_pb::trace_setting_post(model, body)?
                } else {
                    req_pb::trace_setting_get(model)
                };
                rendered(
                    door::call(gateway, ctx, Aim::ANY, request).await,
                    render::trace_settings_json,
                )
            }
            Route::Logging => {
                let (request, error) = if req.method == Method::POST {
                    let update = req_pb::log_settings_post(body);
                    (update.request, update.error)
                } else {
                    (req_pb::log_settings_get(), None)
                };
                // Triton applies the settings before a bad one, then reports it.
                let applied = if request.settings.is_empty() && error.is_some() {
                    None
                } else {
                    Some(door::call(gateway, ctx, Aim::ANY, request).await?)
                };
                if let Some(error) = error {
                    return Err(error);
                }
                let r = applied.ok_or_else(|| Error::internal("no log settings"))?;
                json(render::log_settings_json(&r))
            }
            Route::Backends => json(crate::front::http::admin::backends_json(gateway)),
            Route::Infer(_) | Route::Generate(_) | Route::GenerateStream(_) | Route::V1(_) => Err(
                Error::internal("inference and v1 routes are answered by Gateway::dispatch"),
            ),
        }
    }
}

/// The JSON answer `render` makes of a successful RPC's response.
fn rendered<T>(response: Result<T>, render: fn(&T) -> Vec<u8>) -> Result<HttpResponse> {
    Ok(HttpResponse::json(render(&response?)))
}

/// The empty `application/json` 200 of a successful RPC whose answer has no body.
fn done<T>(response: Result<T>) -> Result<HttpResponse> {
    response?;
    Ok(HttpResponse::empty(200, "application/json"))
}

impl Pipeline {
    /// Health answers: 200 or 400, empty, `text/plain` (v2 §1 rows 1–2);
    /// with `http.oip_health_bodies`, `{"<key>":bool}` as JSON (OIP).
    fn health(&self, key: &str, ok: bool) -> HttpResponse {
        let status = if ok { 200 } else { 400 };
        if !self.gateway.config().http.oip_health_bodies {
            return HttpResponse::empty(status, "text/plain");
        }
        let body = format!("{{\"{key}\":{ok}}}");
        HttpResponse::new(status, "application/json", vec![body.into()])
    }
}

/// Triton refuses an explicit repository on load/unload (v2 §0.3 rule 8).
fn no_repository_name(repository: &Option<String>) -> Result<()> {
    match repository {
        Some(_) => Err(Error::unsupported(
            "'repository_name' specification is not supported",
        )),
        None => Ok(()),
    }
}

impl Pipeline {
    /// Load or unload for the HTTP front: Triton's empty 200, plus
    /// `Tensorgate-Backends` after a fan-out.
    pub(crate) async fn repository_control(
        &self,
        ctx: &RequestContext,
        model: &str,
        control: Control,
    ) -> Result<HttpResponse> {
        let placed =
            control_repository(&self.gateway, ctx, model, control, &Relay::default()).await?;
        let mut response = HttpResponse::empty(200, "application/json");
        if let Some(backends) = placed.backends {
            response.headers.push(("Tensorgate-Backends", backends));
        }
        Ok(response)
    }
}
