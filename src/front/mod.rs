//! The HTTP front, a peer of the gRPC passthrough on top of the core
//! (`app`): `conn` runs one connection with its deadlines, `session` is
//! the per-request pingora glue, `route` classifies, `handler` (+ `infer`,
//! `endpoints`, `admin`, `generate`) answers; `v1` serves the legacy v1
//! HTTP API.

pub mod admin;
pub(crate) mod conn;
pub mod endpoints;
pub mod generate;
pub mod handler;
pub mod http;
pub mod infer;
pub mod route;
pub mod session;
pub mod tls;
pub mod v1;
pub(crate) mod write_buffer;
