//! The server metadata both fronts answer (`GET /v2`, gRPC
//! `ServerMetadata`). Transparent by default: the upstream's `name` and
//! `version` (clients such as NVIDIA's examples check `name == "triton"`)
//! and every extension it lists, in its order (KServe's
//! `model_repository_extension` included), plus, on HTTP, the extensions
//! the gateway serves itself whatever the upstream: `binary_tensor_data`.
//! Triton lists it already, so its answer passes byte for byte.
//! `server.announce_gateway` names the gateway itself instead; the gateway
//! always identifies itself in the `Via` header and on `/v2/tensorgate/...`.

use super::Gateway;
use crate::proto::inference::ServerMetadataResponse;

/// The gateway's own name (the announced one, `Via`, `/v2/tensorgate/...`).
pub(crate) const GATEWAY_NAME: &str = "tensorgate";
/// The gateway's own version.
pub(crate) const GATEWAY_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Extensions the HTTP front provides itself, whatever the upstream lists:
/// the binary tensor data extension is HTTP-only and done by the gateway.
/// (Classification, sequences, shared memory and the rest are the
/// upstream's: listed only when it lists them.)
const GATEWAY_EXTENSIONS: [&str; 1] = ["binary_tensor_data"];

/// Which front asks: the extensions each one serves differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Front {
    /// `GET /v2`: the upstream's extensions and the gateway's own.
    Http,
    /// The gRPC passthrough relays every call: the upstream's extensions.
    Grpc,
}

/// The metadata `front` answers, from the upstream's own.
pub(crate) fn server_metadata(
    gateway: &Gateway,
    upstream: ServerMetadataResponse,
    front: Front,
) -> ServerMetadataResponse {
    let ServerMetadataResponse {
        name,
        version,
        mut extensions,
    } = upstream;
    if front == Front::Http {
        for own in GATEWAY_EXTENSIONS {
            if !extensions.iter().any(|e| e == own) {
                extensions.push(own.to_string());
            }
        }
    }
    let (name, version) = if gateway.config().server.announce_gateway {
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
