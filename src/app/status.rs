//! What the pool knows of the upstream group, read through the core for
//! the fronts' answers: the operators' listing (`/v2/tensorgate/backends`,
//! the admin listener's `/backends`), the models some backend serves (the
//! gRPC front's per-model health), whether any backend takes requests.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::app::Gateway;
use crate::upstream::Models;

/// One backend as the operators' listing shows it (serialized as it is
/// declared, by `front::http::admin`).
#[derive(Debug, Serialize)]
pub(crate) struct BackendState {
    pub(crate) address: String,
    pub(crate) usable: bool,
    pub(crate) seen_ready: bool,
    /// False until a check has passed once.
    pub(crate) healthy: bool,
    pub(crate) ejected: bool,
    pub(crate) draining: bool,
    /// The latest failure of a check or a request since the backend last
    /// answered.
    pub(crate) last_error: Option<String>,
    pub(crate) inflight: usize,
    pub(crate) served: u64,
    /// Sorted; `None` when the backend has no repository index.
    pub(crate) models: Option<Vec<String>>,
}

/// Every backend of the group, in address order.
pub(crate) fn backends(gateway: &Gateway) -> Vec<BackendState> {
    gateway
        .pool()
        .backends()
        .iter()
        .map(|b| BackendState {
            address: b.addr.to_string(),
            usable: b.usable(),
            seen_ready: b.seen_ready(),
            healthy: b.healthy(),
            ejected: b.ejected(),
            draining: b.draining(),
            last_error: b.last_error(),
            inflight: b.inflight(),
            served: b.served(),
            models: match &*b.models() {
                Models::Unknown => None,
                Models::Ready(names) => {
                    let mut names: Vec<String> = names.iter().cloned().collect();
                    names.sort();
                    Some(names)
                }
            },
        })
        .collect()
}

/// The models some usable backend has reported ready.
pub(crate) fn serving_models(gateway: &Gateway) -> BTreeSet<String> {
    let mut serving = BTreeSet::new();
    for backend in gateway.pool().backends().iter().filter(|b| b.usable()) {
        if let Models::Ready(names) = &*backend.models() {
            serving.extend(names.iter().cloned());
        }
    }
    serving
}

/// At least one backend takes requests now.
pub(crate) fn any_usable(gateway: &Gateway) -> bool {
    gateway.pool().any_usable()
}
