//! `POST /api/infer/<model>[/<version>]` (v1 §7.3): `NV-InferRequest`
//! parsed, the model's configuration fetched (datatypes, dims, batching),
//! the body split per input and checked, `ModelInfer` upstream, then
//! `NV-InferResponse` and the raw outputs followed by the trailer.

use super::Answer;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::front::http::pipeline::Pipeline;
use crate::front::http::route::ModelRef;
use crate::front::http::HttpRequest;
use crate::translate::v1::answer;
use crate::wire::v1::{text, Format};

impl Pipeline {
    pub(super) async fn v1_infer(
        &self,
        ctx: &RequestContext,
        model: &ModelRef,
        format: Format,
        req: &HttpRequest,
    ) -> Result<Answer> {
        if format == Format::Json {
            return Err(Error::invalid("infer answers are text or binary, not json"));
        }
        let value = req
            .header("NV-InferRequest")
            .ok_or_else(|| Error::invalid("missing NV-InferRequest header"))?;
        let header = text::parse(value)
            .map_err(|e| Error::invalid(format!("failed to parse NV-InferRequest header: {e}")))?;
        let (header, raw) = self
            .gateway
            .v1_infer_core(ctx, model, &header, &req.body)
            .await?;
        let (value, body) = answer::infer(&header, raw, format);
        Ok(Answer {
            content_type: Some("application/octet-stream"),
            infer_response: Some(value),
            body,
        })
    }
}
