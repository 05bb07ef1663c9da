//! The system shared-memory endpoints in bridge mode (`[shared_memory]
//! mode = "bridge"`): answered by the gateway's own regions
//! (`app::shm::Bridge`) instead of the upstream, with the same request
//! parsing and the same rendering as the forwarded calls. CUDA shared
//! memory is refused in bridge mode.

use crate::app::shm::{cuda_refused, Bridge};
use crate::error::Result;
use crate::front::http::route::{Route, ShmAction};
use crate::front::http::HttpResponse;
use crate::translate::from_grpc::endpoints as render;
use crate::translate::to_grpc::endpoints as req_pb;

/// The bridge's answer to a shared-memory route; `None`: not one.
pub(crate) fn bridged(bridge: &Bridge, route: &Route, body: &[u8]) -> Option<Result<HttpResponse>> {
    match route {
        Route::SystemShm { region, action } => Some(system_shm(
            bridge,
            region.as_deref().unwrap_or(""),
            *action,
            body,
        )),
        Route::CudaShm { .. } => Some(Err(cuda_refused())),
        _ => None,
    }
}

/// `/v2/systemsharedmemory[/region/{r}]/{status,register,unregister}`.
fn system_shm(
    bridge: &Bridge,
    region: &str,
    action: ShmAction,
    body: &[u8],
) -> Result<HttpResponse> {
    match action {
        ShmAction::Status => {
            let status = bridge.status(&req_pb::system_shm_status(region))?;
            Ok(HttpResponse::json(render::system_shm_status_json(&status)))
        }
        ShmAction::Register => {
            bridge.register(&req_pb::system_shm_register(region, body)?)?;
            Ok(HttpResponse::empty(200, "application/json"))
        }
        ShmAction::Unregister => {
            bridge.unregister(&req_pb::system_shm_unregister(region))?;
            Ok(HttpResponse::empty(200, "application/json"))
        }
    }
}
