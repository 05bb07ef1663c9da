//! Every v2 endpoint other than `/infer` (facts §1 rows 1–18): call the
//! matching RPC, render Triton's answer.

use crate::error::{Error, Result};
use crate::front::handler::Gateway;
use crate::front::http::{HttpRequest, HttpResponse};
use crate::front::route::{ModelRef, Route};
use crate::proto::inference as pb;
use crate::wire::json_write::write_str;

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
        match route {
            Route::HealthLive => {
                let r = client
                    .server_live(up.request(pb::ServerLiveRequest {}))
                    .await
                    .map_err(status)?;
                Ok(health(r.into_inner().live))
            }
            Route::HealthReady => {
                let r = client
                    .server_ready(up.request(pb::ServerReadyRequest {}))
                    .await
                    .map_err(status)?;
                Ok(health(r.into_inner().ready))
            }
            Route::ModelReady(m) => {
                let r = client
                    .model_ready(up.request(pb::ModelReadyRequest {
                        name: m.name.clone(),
                        version: m.version.clone(),
                    }))
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
                Ok(HttpResponse::json(self.server_metadata(&r.extensions)))
            }
            _ => self.other_endpoint(route, req, &mut client).await,
        }
    }

    /// `{"name":"tensorgate","version":..,"extensions":[..]}`.
    fn server_metadata(&self, upstream_extensions: &[String]) -> Vec<u8> {
        let mut extensions: Vec<&str> = GATEWAY_EXTENSIONS
            .iter()
            .copied()
            .filter(|e| upstream_extensions.iter().any(|u| u == e))
            .collect();
        extensions.extend(HTTP_ONLY_EXTENSIONS);
        let mut out = b"{\"name\":\"tensorgate\",\"version\":".to_vec();
        write_str(&mut out, env!("CARGO_PKG_VERSION").as_bytes());
        out.extend_from_slice(b",\"extensions\":[");
        for (i, e) in extensions.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(&mut out, e.as_bytes());
        }
        out.extend_from_slice(b"]}");
        out
    }

    async fn other_endpoint(
        &self,
        route: &Route,
        _req: &HttpRequest,
        _client: &mut crate::upstream::Client,
    ) -> Result<HttpResponse> {
        Err(Error::unsupported(format!(
            "{route:?} is not implemented yet"
        )))
    }
}

/// Health answers: 200 or 400, empty, `text/plain` (facts §1 rows 1–2).
fn health(ok: bool) -> HttpResponse {
    HttpResponse::empty(if ok { 200 } else { 400 }, "text/plain")
}

#[allow(dead_code)]
fn model_request(m: &ModelRef) -> (String, String) {
    (m.name.clone(), m.version.clone())
}
