//! The OpenAI API (`/v1/...`), a sub-API of the HTTP front beside the v2
//! routes (docs/usage.md, "OpenAI clients"): `route` classifies its paths,
//! `models` lists the models it serves, `generation` answers completions
//! and chat completions over the door's `ModelStreamInfer`, whole or
//! (`stream`) as server-sent events. Every failure is rendered in OpenAI's
//! shape from the one table (`Error::openai_body`).

mod generation;
mod models;
pub mod route;
mod stream;

use std::sync::Arc;

use bytes::Bytes;

use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::plan::Plan;
use crate::front::http::{Answer, HttpRequest, HttpResponse};
use crate::wire::openai::Endpoint;
use route::OpenAiRoute;

/// The one answer to an OpenAI request.
pub(crate) async fn answer(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    plan: &Plan,
    route: &OpenAiRoute,
    req: &HttpRequest,
) -> Answer {
    let answered = if route.allows(&req.method) {
        match route {
            OpenAiRoute::Models => models::list(gateway, ctx).await.map(Answer::Full),
            OpenAiRoute::Model(id) => models::one(gateway, ctx, id).await.map(Answer::Full),
            OpenAiRoute::Completions => {
                generate(gateway, ctx, plan, Endpoint::Completions, req).await
            }
            OpenAiRoute::ChatCompletions => generate(gateway, ctx, plan, Endpoint::Chat, req).await,
            OpenAiRoute::Unknown => Err(Error::route_not_found()),
        }
    } else {
        Err(Error::method_not_allowed())
    };
    answered.unwrap_or_else(|error| {
        tracing::debug!(status = error.status(), message = %error.message, "OpenAI request failed");
        Answer::Full(error_response(&error))
    })
}

/// A generation, answered whole or streamed as the client asked.
async fn generate(
    gateway: &Gateway,
    ctx: &RequestContext,
    plan: &Plan,
    endpoint: Endpoint,
    req: &HttpRequest,
) -> Result<Answer> {
    let (opened, streamed) = generation::open(gateway, ctx, plan, endpoint, req).await?;
    if streamed {
        stream::answer(gateway, opened).await
    } else {
        generation::whole(gateway.metrics(), opened)
            .await
            .map(Answer::Full)
    }
}

/// A failure in OpenAI's shape, its status from the one table.
pub(crate) fn error_response(error: &Error) -> HttpResponse {
    let body = vec![Bytes::from(error.openai_body())];
    let mut response = HttpResponse::new(error.status(), "application/json", body);
    for (name, value) in error.extra_headers() {
        response.headers.push((name, (*value).to_string()));
    }
    response
}

/// Seconds since the Unix epoch (the answers' `created`).
fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
