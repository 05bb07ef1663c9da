//! The two client-facing fronts, peers on top of the core (`app`): `http`
//! (the v2 HTTP/REST protocol, JSON and the binary extension, and the
//! legacy v1 `/api` routes) and `grpc` (`GRPCInferenceService` relayed to
//! the upstream, the legacy v1 gRPC service, `grpc.health.v1`). Neither
//! imports the other; both reach the upstream through the core only.

pub mod grpc;
pub mod http;
