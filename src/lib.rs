//! tensorgate: a KServe v2 HTTP gateway (JSON and Triton's binary tensor
//! extension) in front of gRPC inference servers, byte-compatible with
//! Triton's own HTTP endpoint.
//!
//! Modules in the order data flows through them:
//! `front` (pingora glue, routes, pipeline) → `wire` (pure codecs) →
//! `model` (protocol-neutral tensors) → `translate` (to/from gRPC) →
//! `upstream` (tonic client, model cache) → back. `error` is the one table
//! from failure to status; `config` the typed, validated configuration.
//! The generated gRPC types are the crate `tensorgate-proto` (re-exported
//! as [`proto`]); the embedded demo upstream used by `tensorgate demo` and
//! the tests is the crate `tensorgate-demo`.

pub(crate) mod app;
pub(crate) mod body;
pub mod config;
pub(crate) mod context;
pub(crate) mod error;
pub mod front;
pub(crate) mod json_str;
pub(crate) mod metrics;
pub mod model;
pub mod passthrough;
pub mod server;
pub mod telemetry;
pub(crate) mod trace;
pub mod translate;
pub mod upstream;
pub mod wire;

pub use app::Gateway;
pub use front::pipeline::Pipeline;
/// The generated gRPC types (crate `tensorgate-proto`), under the name the
/// gateway's code and its tests use.
pub use tensorgate_proto as proto;
