//! The legacy TensorRT Inference Server v1 HTTP API (v1 §7;
//! protocol-v1.md): health, status, infer, model control and the
//! repository index, each translated to v2 RPCs. Every answer carries
//! `NV-Status`; success is exactly HTTP 200 with code `SUCCESS`, every
//! failure 400 (405 for a wrong method) with the code and message from
//! the error table (`Kind::v1_status`), never a JSON body. `grpc` is the
//! v1 gRPC service, translated the same way.

mod infer;
pub(crate) mod route;

use bytes::Bytes;

use std::sync::Arc;

use crate::app::v1::{self, next_request_id, started};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Kind, Result};
use crate::front::http::{HttpRequest, HttpResponse};
use crate::translate::v1::answer;
use crate::wire::v1::Format;
use route::V1Route;

/// A successful v1 answer before the status header is added.
struct Answer {
    content_type: Option<&'static str>,
    infer_response: Option<String>,
    body: Vec<Bytes>,
}

impl Answer {
    fn empty() -> Answer {
        Answer {
            content_type: None,
            infer_response: None,
            body: Vec::new(),
        }
    }

    fn message<M: crate::wire::v1::text::V1Message>(message: &M, format: Format) -> Answer {
        let (content_type, body) = answer::encode(message, format);
        Answer {
            content_type: Some(content_type),
            infer_response: None,
            body: vec![Bytes::from(body)],
        }
    }
}

/// Answers one v1 request.
pub(crate) async fn answer(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    route: &V1Route,
    req: &HttpRequest,
) -> HttpResponse {
    started();
    let request_id = next_request_id();
    let result = if route.allows(&req.method) {
        dispatch(gateway, ctx, route, req).await
    } else {
        Err(Error::method_not_allowed())
    };
    let server_id = &gateway.config().v1.server_id;
    match result {
        Ok(ok) => {
            let status = answer::success(server_id, request_id);
            let mut headers = Vec::with_capacity(3);
            if let Some(value) = ok.infer_response {
                headers.push(("NV-InferResponse", value));
            }
            headers.push(("NV-Status", status));
            if let Some(content_type) = ok.content_type {
                headers.push(("Content-Type", content_type.to_string()));
            }
            HttpResponse {
                status: 200,
                headers,
                body: ok.body,
            }
        }
        Err(error) => {
            tracing::debug!(message = %error.message, "v1 request failed");
            error_response(&error, server_id, request_id)
        }
    }
}

/// The handler of each v1 route.
async fn dispatch(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    route: &V1Route,
    req: &HttpRequest,
) -> Result<Answer> {
    match route {
        V1Route::HealthLive => health(v1::live(gateway).await?, "live"),
        V1Route::HealthReady => health(v1::ready(gateway).await?, "ready"),
        V1Route::Status { model, format } => {
            let format = json_if_accepted(*format, req);
            let status = v1::server_status(gateway, ctx, model.as_deref()).await?;
            Ok(Answer::message(&status, format))
        }
        V1Route::Infer { model, format } => infer::infer(gateway, ctx, model, *format, req).await,
        V1Route::ModelLoad(model) => {
            v1::model_load(gateway, ctx, model).await?;
            Ok(Answer::empty())
        }
        V1Route::ModelUnload(model) => {
            v1::model_unload(gateway, ctx, model).await?;
            Ok(Answer::empty())
        }
        V1Route::RepositoryIndex(format) => {
            let index = v1::repository_index(gateway, ctx)
                .await?
                .ok_or_else(|| Error::unsupported("the upstream has no model repository API"))?;
            Ok(Answer::message(&answer::repository_index(index), *format))
        }
        V1Route::SharedMemoryControl => Err(Error::unsupported(
            "shared-memory control is not available through the v1 API of tensorgate; register regions with the v2 API",
        )),
        V1Route::Invalid(message) => Err(Error::invalid(message.clone())),
    }
}

/// TRTIS also answered status as JSON for `Accept: application/json` (exact).
fn json_if_accepted(format: Format, req: &HttpRequest) -> Format {
    match req.header("Accept") {
        Some(b"application/json") if format == Format::Text => Format::Json,
        _ => format,
    }
}

/// 200 when the upstream says so; otherwise 400 with code UNAVAILABLE.
fn health(ok: bool, what: &str) -> Result<Answer> {
    if ok {
        Ok(Answer::empty())
    } else {
        Err(Error::new(
            Kind::Unavailable,
            format!("the server is not {what}"),
        ))
    }
}

/// A failure as v1 answers it: status and code from the one table, the
/// message in `NV-Status`, the error's own headers (`Retry-After` of a
/// refusal under load), an empty body.
fn error_response(error: &Error, server_id: &str, request_id: u64) -> HttpResponse {
    let (status, code) = error.kind.v1_status();
    let mut headers = vec![(
        "NV-Status",
        answer::status(code, &error.message, server_id, request_id),
    )];
    for (name, value) in error.extra_headers() {
        headers.push((name, (*value).to_string()));
    }
    HttpResponse {
        status,
        headers,
        body: Vec::new(),
    }
}

/// A v1 request refused before it was answered (access rules, size
/// limits), in v1 style.
pub(crate) fn refusal(gateway: &Gateway, error: &Error) -> HttpResponse {
    error_response(error, &gateway.config().v1.server_id, next_request_id())
}
