//! `POST /api/infer/<model>[/<version>]` (protocol §7.3): `NV-InferRequest`
//! parsed, the model's configuration fetched (datatypes, dims, batching),
//! the body split per input and checked, `ModelInfer` upstream, then
//! `NV-InferResponse` and the raw outputs followed by the trailer.

use bytes::Bytes;

use super::Answer;
use crate::error::{Error, Result};
use crate::front::handler::Gateway;
use crate::front::http::HttpRequest;
use crate::front::route::ModelRef;
use crate::proto::v1 as pb;
use crate::translate::checks;
use crate::translate::v1::{request, response};
use crate::wire::v1::{answer, text, Format};

impl Gateway {
    pub(super) async fn v1_infer(
        &self,
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
        let header = text::parse_request_header(value)
            .map_err(|e| Error::invalid(format!("failed to parse NV-InferRequest header: {e}")))?;
        let (header, raw) = self.v1_infer_core(model, &header, &req.body).await?;
        let (value, body) = answer::infer(&header, raw, format);
        Ok(Answer {
            content_type: Some("application/octet-stream"),
            infer_response: Some(value),
            body,
        })
    }

    /// The translation itself, shared with the v1 gRPC service: the v1
    /// header and the inputs' bytes back to back in, the response header
    /// (classes included) and the raw outputs out.
    pub(super) async fn v1_infer_core(
        &self,
        model: &ModelRef,
        header: &pb::InferRequestHeader,
        data: &Bytes,
    ) -> Result<(pb::InferResponseHeader, Vec<Bytes>)> {
        let info = self.model_info(model).await?.ok_or_else(|| {
            Error::unsupported(
                "v1 inference needs the model configuration, which the upstream does not provide",
            )
        })?;
        if info.decoupled {
            return Err(Error::unsupported(
                "v1 inference doesn't support models with decoupled transaction policy",
            ));
        }
        let (request, plan) =
            request::infer_request(&model.name, &model.version, header, &info, data)?;
        checks::classification(&request, Some(&info))?;
        checks::tensor_sizes(&request, Some(&info))?;
        let result = self.v1_model_infer(&request).await?;
        response::infer_response(&result, &plan, &model.version)
    }
}
