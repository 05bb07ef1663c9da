//! The `shared-memory` group: `/v2/systemsharedmemory[/region/{r}]/...`
//! and `/v2/cudasharedmemory[/region/{r}]/...` (status, register,
//! unregister). Forwarded to the upstream (`forward` mode); in bridge mode
//! (`[shared_memory] mode = "bridge"`) system shared memory is answered by
//! the gateway's own regions (`app::shm::Bridge`), with the same request
//! parsing and rendering, and CUDA shared memory is refused.

use super::{done, rendered};
use crate::app::door::{self, Aim};
use crate::app::shm::cuda_refused;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::Result;
use crate::front::http::route::ShmAction;
use crate::front::http::HttpResponse;
use crate::translate::from_grpc::endpoints as render;
use crate::translate::to_grpc::endpoints as req_pb;

/// System shared memory: the bridge's regions, or the upstream's.
pub(super) async fn system(
    gateway: &Gateway,
    ctx: &RequestContext,
    region: &str,
    action: ShmAction,
    body: &[u8],
) -> Result<HttpResponse> {
    let bridge = gateway.shm_bridge();
    match action {
        ShmAction::Status => {
            let request = req_pb::system_shm_status(region);
            let status = match bridge {
                Some(bridge) => bridge.status(&request),
                None => door::call(gateway, ctx, Aim::ANY, request).await,
            };
            rendered(status, render::system_shm_status_json)
        }
        ShmAction::Register => {
            let request = req_pb::system_shm_register(region, body)?;
            match bridge {
                Some(bridge) => done(bridge.register(&request)),
                None => done(door::call(gateway, ctx, Aim::ANY, request).await),
            }
        }
        ShmAction::Unregister => {
            let request = req_pb::system_shm_unregister(region);
            match bridge {
                Some(bridge) => done(bridge.unregister(&request)),
                None => done(door::call(gateway, ctx, Aim::ANY, request).await),
            }
        }
    }
}

/// CUDA shared memory: the upstream's; refused in bridge mode.
pub(super) async fn cuda(
    gateway: &Gateway,
    ctx: &RequestContext,
    region: &str,
    action: ShmAction,
    body: &[u8],
) -> Result<HttpResponse> {
    if gateway.shm_bridge().is_some() {
        return Err(cuda_refused());
    }
    match action {
        ShmAction::Status => {
            let request = req_pb::cuda_shm_status(region);
            let r = door::call(gateway, ctx, Aim::ANY, request).await;
            rendered(r, render::cuda_shm_status_json)
        }
        ShmAction::Register => {
            let request = req_pb::cuda_shm_register(region, body)?;
            done(door::call(gateway, ctx, Aim::ANY, request).await)
        }
        ShmAction::Unregister => {
            let request = req_pb::cuda_shm_unregister(region);
            done(door::call(gateway, ctx, Aim::ANY, request).await)
        }
    }
}
