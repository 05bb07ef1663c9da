//! [`Pipeline`], the HTTP front's side of the core: the core
//! ([`Gateway`], which knows no HTTP) held by the type whose methods
//! answer HTTP (`handler`, `infer`, `infer_answer`, `endpoints`,
//! `generate`, `v1`).

use std::sync::Arc;

use crate::app::Gateway;
use crate::front::http::plan::Plan;
use crate::front::http::route::Route;
use crate::front::http::HttpRequest;

/// The HTTP pipeline over the core: every HTTP route answered with the
/// gateway's state and upstream (`session` runs it for pingora; tests and
/// benches call it in process). Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    pub(super) gateway: Arc<Gateway>,
}

impl Pipeline {
    pub fn new(gateway: Arc<Gateway>) -> Pipeline {
        Pipeline { gateway }
    }

    /// The plan of `req` for its raw `target` (path and query: the v1
    /// API reads its format there); `None` when no route has that path
    /// (404).
    pub fn plan(&self, target: &str, req: &HttpRequest) -> Option<Plan> {
        let config = self.gateway.config();
        let route = Route::classify_target(target, &config.v1.path_prefix)?;
        Some(Plan::new(route, &req.method, &req.headers, &config.limits))
    }

    /// The core it answers with.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }
}
