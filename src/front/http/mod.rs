//! The HTTP front, a peer of the gRPC front on top of the core
//! (`app`): `conn` runs one connection with its deadlines, `session` is
//! the per-request pingora glue (`request_body` reads bodies, or streams
//! them), `route` classifies, `plan` makes each request's plan once
//! (route, headers, body, answer), `pipeline` holds the core for the HTTP
//! methods of `handler` (+ `infer`, `infer_answer`, `endpoints`,
//! `generate`, `shm` the shared-memory endpoints in bridge mode), which
//! answer; `admin` serves the admin listener; `v1` serves the legacy v1
//! HTTP API.

pub(crate) mod admin;
pub(crate) mod conn;
pub(crate) mod endpoints;
pub(crate) mod generate;
pub(crate) mod handler;
pub(crate) mod infer;
pub(crate) mod infer_answer;
mod messages;
pub(crate) mod pipeline;
pub mod plan;
pub(crate) mod request_body;
pub mod route;
pub(crate) mod session;
pub(crate) mod shm;
pub(crate) mod tls;
pub(crate) mod v1;
pub(crate) mod write_buffer;

pub(crate) use messages::{too_large, via, StreamedRest};
pub use messages::{Answer, HttpRequest, HttpResponse, StreamedResponse};
