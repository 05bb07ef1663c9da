//! The legacy v1 API's operations, shared by its HTTP routes (`front::http::v1`)
//! and its gRPC service (`front::grpc::v1`): upstream calls (`rpc`), the
//! v1 `ServerStatus` (`status`), and v1 inference over the v2 path.

mod rpc;
mod status;

pub(crate) use rpc::{live, model_load, model_unload, ready, repository_index};
pub(crate) use status::server_status;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;

use crate::app::infer::{self, Decoded, Decoder, Inferred};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::model::{ModelInfo, ModelRef};
use crate::proto::v1 as pb;
use crate::translate::v1::request::{self, Wanted};
use crate::translate::v1::response;

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

/// v1 inference, shared with the v1 gRPC service: the v1 header and the
/// inputs' bytes back to back in, the response header (classes included)
/// and the raw outputs out, through the inference use case
/// (`app::infer`).
pub(crate) async fn infer(
    gateway: &Arc<Gateway>,
    ctx: &RequestContext,
    model: &ModelRef,
    header: &pb::InferRequestHeader,
    data: &Bytes,
) -> Result<(pb::InferResponseHeader, Vec<Bytes>)> {
    let body = V1Body {
        model,
        header,
        data,
    };
    match infer::infer(gateway, ctx, model, body).await? {
        (Inferred::Whole { response, .. }, wanted) => {
            response::infer_response(&response, &wanted, &model.version)
        }
        (Inferred::Streaming(_), _) => {
            Err(Error::internal("a v1 answer is collected, never streamed"))
        }
    }
}

/// A v1 request's header and inputs, decoded against the model's
/// configuration (datatypes, dims, batching), which v1 needs.
struct V1Body<'a> {
    model: &'a ModelRef,
    header: &'a pb::InferRequestHeader,
    data: &'a Bytes,
}

impl Decoder for V1Body<'_> {
    /// The outputs and batch the v1 answer must hold.
    type Kept = Wanted;

    const DECOUPLED: Option<&'static str> =
        Some("v1 inference doesn't support models with decoupled transaction policy");

    fn decode(
        self,
        info: Option<Arc<ModelInfo>>,
    ) -> impl Future<Output = Result<Decoded<Wanted>>> + Send {
        let decoded = info
            .ok_or_else(|| {
                Error::unsupported(
                    "v1 inference needs the model configuration, which the upstream does not provide",
                )
            })
            .and_then(|info| {
                request::infer_request(
                    &self.model.name,
                    &self.model.version,
                    self.header,
                    &info,
                    self.data,
                )
            })
            .map(|(request, wanted)| Decoded {
                request,
                rest: None,
                streams: false,
                kept: wanted,
            });
        std::future::ready(decoded)
    }
}
