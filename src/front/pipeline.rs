//! [`Pipeline`], the HTTP front's side of the core: the core
//! ([`Gateway`], which knows no HTTP) held by the type whose methods
//! answer HTTP (`handler`, `infer`, `infer_answer`, `endpoints`,
//! `generate`, `v1`).

use std::sync::Arc;

use crate::app::Gateway;

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

    /// The core it answers with.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }
}
