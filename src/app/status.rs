//! What the pools know of the upstream groups, read through the core for
//! the fronts' answers: the operators' listing (`/v2/tensorgate/backends`,
//! the admin listener's `/backends`: every group's backends, the groups,
//! the rules in force with their weights), the models some backend
//! serves (the gRPC front's per-model health), whether the gateway takes
//! requests.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::app::admission::GateView;
use crate::app::Gateway;
use crate::config::RouteRule;
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
    /// The upstream group it is a member of.
    pub(crate) group: String,
    /// Its server's latest load report, in a group with `load_report` on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) load_report: Option<ReportState>,
}

/// A backend's latest load report: the requests its server reported
/// waiting, how old that is, whether the picks use it (`fresh`), and why
/// the latest read failed.
#[derive(Debug, Serialize)]
pub(crate) struct ReportState {
    /// `None`: no report was read yet.
    pub(crate) pending: Option<u64>,
    pub(crate) age_ms: Option<u64>,
    pub(crate) fresh: bool,
    pub(crate) error: Option<String>,
}

impl ReportState {
    fn of(backend: &crate::upstream::Backend) -> ReportState {
        let report = backend.report();
        ReportState {
            pending: report.map(|r| r.pending),
            age_ms: report.map(|r| r.age.as_millis() as u64),
            fresh: report.is_some_and(|r| r.fresh),
            error: backend.report_error(),
        }
    }
}

/// One upstream group as the listing shows it.
#[derive(Debug, Serialize)]
pub(crate) struct GroupState {
    pub(crate) name: String,
    /// Clients' calls reach it (the default group, or a rule sends to it);
    /// otherwise it is only mirrored to.
    pub(crate) serving: bool,
    pub(crate) backends: usize,
    pub(crate) usable: usize,
    /// Its admission control now (absent: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) admission: Option<GateView>,
}

/// One rule in force, as configured (its weights are the live ones: a
/// reload replaces them), with its label in metrics and logs.
#[derive(Debug, Serialize)]
pub(crate) struct RuleState {
    pub(crate) rule: String,
    #[serde(flatten)]
    pub(crate) config: RouteRule,
}

/// Every backend of every group, group by group in name order, each in
/// address order.
pub(crate) fn backends(gateway: &Gateway) -> Vec<BackendState> {
    let routing = gateway.routing();
    routing
        .groups()
        .flat_map(|group| group.pool.backends().into_iter().map(move |b| (group, b)))
        .map(|(group, b)| BackendState {
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
            group: group.name.to_string(),
            load_report: group
                .pool
                .settings()
                .load_report
                .is_some()
                .then(|| ReportState::of(&b)),
        })
        .collect()
}

/// Every group, by name.
pub(crate) fn groups(gateway: &Gateway) -> Vec<GroupState> {
    let routing = gateway.routing();
    routing
        .groups()
        .map(|group| {
            let backends = group.pool.backends();
            GroupState {
                name: group.name.to_string(),
                serving: routing.serves(group),
                backends: backends.len(),
                usable: backends.iter().filter(|b| b.usable()).count(),
                admission: group.gate.as_ref().map(|gate| gate.view()),
            }
        })
        .collect()
}

/// The rules in force, in order.
pub(crate) fn rules(gateway: &Gateway) -> Vec<RuleState> {
    gateway
        .routing()
        .rules()
        .map(|(label, config)| RuleState {
            rule: label.to_string(),
            config: config.clone(),
        })
        .collect()
}

/// The models some usable backend of a group has reported ready, and the
/// names clients use for those a rule renames (where the rule gives names
/// rather than patterns).
pub(crate) fn serving_models(gateway: &Gateway) -> BTreeSet<String> {
    let routing = gateway.routing();
    let mut serving = BTreeSet::new();
    for group in routing.groups() {
        for backend in group.pool.backends().iter().filter(|b| b.usable()) {
            if let Models::Ready(names) = &*backend.models() {
                serving.extend(names.iter().map(|name| name.to_string()));
            }
        }
    }
    for (client, upstream, _) in routing.renames() {
        if serving.contains(upstream) {
            serving.insert(client.to_string());
        }
    }
    serving
}

/// The gateway takes requests now: a group clients' calls go to has a
/// usable backend (`Gateway::ready`, without the drain).
pub(crate) fn any_usable(gateway: &Gateway) -> bool {
    gateway.routing().serving_usable()
}
