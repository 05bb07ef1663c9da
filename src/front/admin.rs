//! `GET /v2/tensorgate/backends`: the gateway itself (name and version,
//! whatever the server metadata announces) and what it knows of its
//! upstream group, for operators: each backend's address, health,
//! in-flight count, requests served and the models it serves.

use crate::app::metadata::{GATEWAY_NAME, GATEWAY_VERSION};
use crate::upstream::{Models, Pool};
use crate::wire::json_write::{write_str, write_u64};

/// `{"gateway":{"name":"tensorgate","version":".."},"backends":[{"address":..,"usable":..,"seen_ready":..,"healthy":..,
/// "ejected":..,"draining":..,"last_error":".."|null,"inflight":..,
/// "served":..,"models":[..]|null}]}` (`healthy` is false until a check
/// has passed once; `last_error` is the latest failure of a check or a
/// request since the backend last answered; `models` is null when the
/// backend has no repository index).
pub(crate) fn backends_json(pool: &Pool) -> Vec<u8> {
    let mut out = b"{\"gateway\":{\"name\":".to_vec();
    write_str(&mut out, GATEWAY_NAME.as_bytes());
    out.extend_from_slice(b",\"version\":");
    write_str(&mut out, GATEWAY_VERSION.as_bytes());
    out.extend_from_slice(b"},\"backends\":[");
    for (i, b) in pool.backends().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"address\":");
        write_str(&mut out, b.addr.to_string().as_bytes());
        for (key, value) in [
            ("usable", b.usable()),
            ("seen_ready", b.seen_ready()),
            ("healthy", b.healthy()),
            ("ejected", b.ejected()),
            ("draining", b.draining()),
        ] {
            out.extend_from_slice(format!(",\"{key}\":{value}").as_bytes());
        }
        out.extend_from_slice(b",\"last_error\":");
        match b.last_error() {
            Some(error) => write_str(&mut out, error.as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"inflight\":");
        write_u64(&mut out, b.inflight() as u64);
        out.extend_from_slice(b",\"served\":");
        write_u64(&mut out, b.served());
        out.extend_from_slice(b",\"models\":");
        match &*b.models() {
            Models::Unknown => out.extend_from_slice(b"null"),
            Models::Ready(names) => {
                let mut names: Vec<&String> = names.iter().collect();
                names.sort();
                out.push(b'[');
                for (j, name) in names.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    write_str(&mut out, name.as_bytes());
                }
                out.push(b']');
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    out
}

/// The admin listener's app (pingora `ServeHttp`): `GET /metrics`,
/// `GET /health` (200 while the process serves) and `GET /backends`.
pub(crate) struct AdminApp {
    pub gateway: std::sync::Arc<crate::app::Gateway>,
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
            (true, "/backends") => (200, "application/json", backends_json(self.gateway.pool())),
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
