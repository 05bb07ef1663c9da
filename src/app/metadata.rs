//! The server metadata both fronts answer (`GET /v2`, gRPC
//! `ServerMetadata`). Transparent by default: the upstream's `name` and
//! `version` (clients such as NVIDIA's examples check `name == "triton"`),
//! and of its `extensions` those the gateway serves, in the upstream's
//! order, plus `binary_tensor_data` on HTTP (the gateway provides it).
//! `server.announce_gateway` names the gateway itself instead; the gateway
//! always identifies itself in the `Via` header and on `/v2/tensorgate/...`.

use super::Gateway;
use crate::proto::inference::ServerMetadataResponse;

/// The gateway's own name (the announced one, `Via`, `/v2/tensorgate/...`).
pub(crate) const GATEWAY_NAME: &str = "tensorgate";
/// The gateway's own version.
pub(crate) const GATEWAY_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Extensions the gateway serves over HTTP when the upstream does: every
/// v2 extension of Triton's list.
const SERVED_EXTENSIONS: [&str; 13] = [
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    BINARY_TENSOR_DATA,
    "parameters",
    "statistics",
    "trace",
    "logging",
];
/// HTTP-only, provided by the gateway whatever the upstream reports.
const BINARY_TENSOR_DATA: &str = "binary_tensor_data";

/// Which front asks: the extensions each one serves differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Front {
    /// `GET /v2`: the served extensions, `binary_tensor_data` always.
    Http,
    /// The gRPC passthrough relays every call: the upstream's extensions.
    Grpc,
}

impl Gateway {
    /// The metadata `front` answers, from the upstream's own.
    pub(crate) fn server_metadata(
        &self,
        upstream: ServerMetadataResponse,
        front: Front,
    ) -> ServerMetadataResponse {
        let ServerMetadataResponse {
            name,
            version,
            mut extensions,
        } = upstream;
        if front == Front::Http {
            extensions.retain(|e| SERVED_EXTENSIONS.contains(&e.as_str()));
            if !extensions.iter().any(|e| e == BINARY_TENSOR_DATA) {
                extensions.push(BINARY_TENSOR_DATA.to_string());
            }
        }
        let (name, version) = if self.config().server.announce_gateway {
            (GATEWAY_NAME.to_string(), GATEWAY_VERSION.to_string())
        } else {
            (name, version)
        };
        ServerMetadataResponse {
            name,
            version,
            extensions,
        }
    }
}
