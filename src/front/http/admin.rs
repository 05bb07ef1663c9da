//! `GET /v2/tensorgate/backends`: the gateway itself (name and version,
//! whatever the server metadata announces) and what it knows of its
//! upstream groups, for operators: each backend's group, address, health,
//! in-flight count, requests served and the models it serves; each
//! group's counts; the routing rules in force, with their live weights.

use serde::Serialize;

use crate::app::metadata::{GATEWAY_NAME, GATEWAY_VERSION};
use crate::app::status::{self, BackendState, GroupState, RuleState};
use crate::app::Gateway;

/// The whole answer. Written with serde_json: this endpoint is ours, so no
/// byte of it has to equal another server's (unlike the v2 bodies, which
/// `wire::json_write` writes as Triton's rapidjson does); the fields come
/// out in the order they are declared (`app::status::BackendState`'s).
#[derive(Serialize)]
struct BackendsView {
    gateway: GatewayView,
    backends: Vec<BackendState>,
    groups: Vec<GroupState>,
    routes: Vec<RuleState>,
}

#[derive(Serialize)]
struct GatewayView {
    name: &'static str,
    version: &'static str,
}

/// `{"gateway":{"name":"tensorgate","version":".."},"backends":[{"address":..,"usable":..,"seen_ready":..,"healthy":..,
/// "ejected":..,"draining":..,"last_error":".."|null,"inflight":..,
/// "served":..,"models":[..]|null,"group":..}],"groups":[{"name":..,"serving":..,
/// "backends":..,"usable":..}],"routes":[{"rule":"routes[0]",..the
/// rule's keys as configured..}]}`.
pub(crate) fn backends_json(gateway: &Gateway) -> Vec<u8> {
    let view = BackendsView {
        gateway: GatewayView {
            name: GATEWAY_NAME,
            version: GATEWAY_VERSION,
        },
        backends: status::backends(gateway),
        groups: status::groups(gateway),
        routes: status::rules(gateway),
    };
    serde_json::to_vec(&view).expect("structs of strings, numbers and bools always serialize")
}

/// The admin listener's app (pingora `ServeHttp`): `GET /metrics`,
/// `GET /health` (200 while the process serves) and `GET /backends`.
pub(crate) struct AdminApp {
    pub gateway: std::sync::Arc<Gateway>,
}

#[async_trait::async_trait]
impl pingora_core::apps::http_app::ServeHttp for AdminApp {
    async fn response(
        &self,
        session: &mut pingora_core::protocols::http::ServerSession,
    ) -> http::Response<Vec<u8>> {
        let get = session.req_header().method == http::Method::GET;
        let path = session.req_header().uri.path().to_string();
        let (status, content_type, body) = match (get, path.as_str()) {
            (true, "/metrics") => (
                200,
                "text/plain; version=0.0.4",
                self.gateway.metrics_text(),
            ),
            (true, "/health") => (200, "text/plain", Vec::new()),
            (true, "/backends") => (200, "application/json", backends_json(&self.gateway)),
            _ => (404, "text/plain", b"Not Found".to_vec()),
        };
        http::Response::builder()
            .status(status)
            .header("Content-Type", content_type)
            .header("Content-Length", body.len())
            .body(body)
            .expect("static response parts")
    }
}
