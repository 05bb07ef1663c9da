//! `GET /v1/models` and `GET /v1/models/{id}`: the models the front serves
//! (`app::openai`), by the names clients use.

use crate::app::{openai, Gateway};
use crate::context::RequestContext;
use crate::error::Result;
use crate::front::http::HttpResponse;
use crate::wire::openai::answer;

pub(super) async fn list(gateway: &Gateway, ctx: &RequestContext) -> Result<HttpResponse> {
    let names = openai::served_names(gateway, ctx).await;
    let body = answer::models(names.iter().map(String::as_str), super::now_seconds());
    Ok(HttpResponse::json(body))
}

/// One model: 404 (`model_not_found`) unless the front serves it.
pub(super) async fn one(gateway: &Gateway, ctx: &RequestContext, id: &str) -> Result<HttpResponse> {
    openai::resolve(gateway, ctx, id).await?;
    Ok(HttpResponse::json(answer::model_object(
        id,
        super::now_seconds(),
    )))
}
