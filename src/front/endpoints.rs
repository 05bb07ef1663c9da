//! Every v2 endpoint other than `/infer` (facts §1 rows 1–18): call the
//! matching RPC, render Triton's answer.

use crate::error::{Error, Result};
use crate::front::handler::Gateway;
use crate::front::http::{HttpRequest, HttpResponse};
use crate::front::route::{Route, ShmAction};
use crate::proto::inference as pb;
use crate::translate::from_grpc::{endpoints as render, model_config};
use crate::translate::to_grpc::endpoints as req_pb;
use http::Method;

/// Extensions the gateway itself implements on the HTTP side; the answer
/// lists those the upstream also reports, plus the HTTP-only ones.
const GATEWAY_EXTENSIONS: [&str; 9] = [
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    "statistics",
];
/// Extensions that exist only on the HTTP side, provided by the gateway.
const HTTP_ONLY_EXTENSIONS: [&str; 1] = ["binary_tensor_data"];

fn status(s: tonic::Status) -> Error {
    Error::from_status(&s)
}

impl Gateway {
    pub(crate) async fn endpoint(&self, route: &Route, req: &HttpRequest) -> Result<HttpResponse> {
        let mut client = self.upstream.client().map_err(status)?;
        let up = &self.upstream;
        let body = &req.body[..];
        let json = |bytes: Vec<u8>| Ok(HttpResponse::json(bytes));
        match route {
            Route::HealthLive => {
                let r = client
                    .server_live(up.request(pb::ServerLiveRequest {}))
                    .await
                    .map_err(status)?;
                Ok(self.health("live", r.into_inner().live))
            }
            Route::HealthReady => {
                let r = client
                    .server_ready(up.request(pb::ServerReadyRequest {}))
                    .await
                    .map_err(status)?;
                Ok(self.health("ready", r.into_inner().ready))
            }
            Route::ModelReady(m) => {
                let r = client
                    .model_ready(up.request(req_pb::model_ready(&m.name, &m.version)))
                    .await
                    .map_err(|s| status(s).plain())?;
                if r.into_inner().ready {
                    Ok(HttpResponse::empty(200, "text/plain"))
                } else {
                    Err(Error::invalid("Model version not ready").plain())
                }
            }
            Route::ServerMetadata => {
                let r = client
                    .server_metadata(up.request(pb::ServerMetadataRequest {}))
                    .await
                    .map_err(status)?
                    .into_inner();
                json(render::server_metadata_json(&gateway_metadata(
                    &r.extensions,
                )))
            }
            Route::ModelMetadata(m) => {
                let r = client
                    .model_metadata(up.request(req_pb::model_metadata(&m.name, &m.version)))
                    .await;
                rendered(r, render::model_metadata_json)
            }
            Route::ModelConfig(m) => {
                let r = client
                    .model_config(up.request(req_pb::model_config(&m.name, &m.version)))
                    .await;
                rendered(r, model_config::model_config_response_json)
            }
            Route::ModelStats(m) => {
                let (name, version) = m
                    .as_ref()
                    .map_or(("", ""), |m| (&m.name[..], &m.version[..]));
                let r = client
                    .model_statistics(up.request(req_pb::model_statistics(name, version)))
                    .await;
                rendered(r, render::model_statistics_json)
            }
            Route::RepositoryIndex => {
                let request = req_pb::repository_index(body)?;
                let r = client.repository_index(up.request(request)).await;
                rendered(r, render::repository_index_json)
            }
            Route::RepositoryLoad { model, repository } => {
                no_repository_name(repository)?;
                let request = req_pb::repository_load(model, body)?;
                self.models.invalidate(model);
                client
                    .repository_model_load(up.request(request))
                    .await
                    .map_err(status)?;
                self.models.invalidate(model);
                Ok(HttpResponse::empty(200, "application/json"))
            }
            Route::RepositoryUnload { model, repository } => {
                no_repository_name(repository)?;
                let request = req_pb::repository_unload(model, body);
                self.models.invalidate(model);
                client
                    .repository_model_unload(up.request(request))
                    .await
                    .map_err(status)?;
                self.models.invalidate(model);
                Ok(HttpResponse::empty(200, "application/json"))
            }
            Route::SystemShm { region, action } => {
                let region = region.as_deref().unwrap_or("");
                match action {
                    ShmAction::Status => {
                        let request = req_pb::system_shm_status(region);
                        let r = client
                            .system_shared_memory_status(up.request(request))
                            .await;
                        rendered(r, render::system_shm_status_json)
                    }
                    ShmAction::Register => {
                        let request = req_pb::system_shm_register(region, body)?;
                        let r = client
                            .system_shared_memory_register(up.request(request))
                            .await;
                        done(r)
                    }
                    ShmAction::Unregister => {
                        let request = req_pb::system_shm_unregister(region);
                        let r = client
                            .system_shared_memory_unregister(up.request(request))
                            .await;
                        done(r)
                    }
                }
            }
            Route::CudaShm { region, action } => {
                let region = region.as_deref().unwrap_or("");
                match action {
                    ShmAction::Status => {
                        let request = req_pb::cuda_shm_status(region);
                        let r = client.cuda_shared_memory_status(up.request(request)).await;
                        rendered(r, render::cuda_shm_status_json)
                    }
                    ShmAction::Register => {
                        let request = req_pb::cuda_shm_register(region, body)?;
                        let r = client
                            .cuda_shared_memory_register(up.request(request))
                            .await;
                        done(r)
                    }
                    ShmAction::Unregister => {
                        let request = req_pb::cuda_shm_unregister(region);
                        let r = client
                            .cuda_shared_memory_unregister(up.request(request))
                            .await;
                        done(r)
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
                let r = client.trace_setting(up.request(request)).await;
                rendered(r, render::trace_settings_json)
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
                    Some(
                        client
                            .log_settings(up.request(request))
                            .await
                            .map_err(status)?,
                    )
                };
                if let Some(error) = error {
                    return Err(error);
                }
                let r = applied.ok_or_else(|| Error::internal("no log settings"))?;
                json(render::log_settings_json(&r.into_inner()))
            }
            Route::Generate(_) | Route::GenerateStream(_) => Err(Error::unsupported(
                "generate and generate_stream are not supported by tensorgate yet",
            )),
            Route::Infer(m) => self.infer(m, req).await,
            Route::V1(_) => Err(Error::internal("v1 routes are answered by front::v1")),
        }
    }
}

/// The JSON answer `render` makes of a successful RPC's response.
fn rendered<T>(
    response: std::result::Result<tonic::Response<T>, tonic::Status>,
    render: fn(&T) -> Vec<u8>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::json(render(
        &response.map_err(status)?.into_inner(),
    )))
}

/// The empty `application/json` 200 of a successful RPC whose answer has no body.
fn done<T>(response: std::result::Result<T, tonic::Status>) -> Result<HttpResponse> {
    response.map_err(status)?;
    Ok(HttpResponse::empty(200, "application/json"))
}

impl Gateway {
    /// Health answers: 200 or 400, empty, `text/plain` (facts §1 rows 1–2);
    /// with `http.oip_health_bodies`, `{"<key>":bool}` as JSON (OIP).
    fn health(&self, key: &str, ok: bool) -> HttpResponse {
        let status = if ok { 200 } else { 400 };
        if !self.config.http.oip_health_bodies {
            return HttpResponse::empty(status, "text/plain");
        }
        let body = format!("{{\"{key}\":{ok}}}");
        HttpResponse::new(status, "application/json", vec![body.into()])
    }
}

/// Our own server metadata: the extensions the upstream reports that the
/// gateway also implements, plus the HTTP-only ones.
fn gateway_metadata(upstream_extensions: &[String]) -> pb::ServerMetadataResponse {
    let mut extensions: Vec<String> = GATEWAY_EXTENSIONS
        .iter()
        .filter(|e| upstream_extensions.iter().any(|u| u == *e))
        .map(|e| (*e).to_string())
        .collect();
    extensions.extend(HTTP_ONLY_EXTENSIONS.iter().map(|e| (*e).to_string()));
    pb::ServerMetadataResponse {
        name: "tensorgate".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        extensions,
    }
}

/// Triton refuses an explicit repository on load/unload (facts §0.3 rule 8).
fn no_repository_name(repository: &Option<String>) -> Result<()> {
    match repository {
        Some(_) => Err(Error::unsupported(
            "'repository_name' specification is not supported",
        )),
        None => Ok(()),
    }
}
