//! The `ModelInfer` call of an inference request whose answer is
//! collected whole ([`Gateway::call_infer`]), through the door
//! (`door::infer`).

use crate::app::door::{self, InferCall};
use crate::app::Gateway;
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::Result;
use crate::model::{InferRequest, InferResponse};
use crate::translate::from_grpc;

impl Gateway {
    /// `ModelInfer` of `request` on a backend serving the model, its
    /// answer translated (with the client's own id). A request with
    /// streamed inputs has their bytes sent from `rest` as they arrive: a
    /// body that broke off, ran short or ran long fails the call (the
    /// upstream's stream is reset before the message completes).
    pub(crate) async fn call_infer(
        &self,
        ctx: &RequestContext,
        request: &InferRequest,
        rest: Option<&BodyRest>,
    ) -> Result<InferResponse> {
        let response = door::infer(self, ctx, InferCall::new(request, rest.cloned())).await?;
        Ok(from_grpc::model_infer(response, &request.id))
    }
}
