//! The legacy v1 API's operations, shared by its HTTP routes (`front::http::v1`)
//! and its gRPC service (`front::grpc::v1`): upstream calls (`rpc`), the
//! v1 `ServerStatus` (`status`), and v1 inference over the v2 path.

mod rpc;
mod status;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use bytes::Bytes;

use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::model::ModelRef;
use crate::proto::v1 as pb;
use crate::translate::checks;
use crate::translate::v1::{request, response};

/// v1 `request_id`s: unique per process, never 0 (0 = unknown).
static REQUEST_IDS: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_request_id() -> u64 {
    REQUEST_IDS.fetch_add(1, Ordering::Relaxed)
}

/// When the v1 front first served (the status `uptime_ns` counts from it).
pub(crate) fn started() -> Instant {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}

impl Gateway {
    /// The translation itself, shared with the v1 gRPC service: the v1
    /// header and the inputs' bytes back to back in, the response header
    /// (classes included) and the raw outputs out.
    pub(crate) async fn v1_infer_core(
        &self,
        ctx: &RequestContext,
        model: &ModelRef,
        header: &pb::InferRequestHeader,
        data: &Bytes,
    ) -> Result<(pb::InferResponseHeader, Vec<Bytes>)> {
        let info = self.model_info(ctx, model).await?.ok_or_else(|| {
            Error::unsupported(
                "v1 inference needs the model configuration, which the upstream does not provide",
            )
        })?;
        if info.decoupled {
            return Err(Error::unsupported(
                "v1 inference doesn't support models with decoupled transaction policy",
            ));
        }
        let (request, wanted) =
            request::infer_request(&model.name, &model.version, header, &info, data)?;
        checks::classification(&request, Some(&info))?;
        checks::tensor_sizes(&request, Some(&info))?;
        let result = self.v1_model_infer(ctx, &request).await?;
        response::infer_response(&result, &wanted, &model.version)
    }
}
