//! tensorgate: a KServe v2 HTTP gateway (JSON and Triton's binary tensor
//! extension) in front of gRPC inference servers, byte-compatible with
//! Triton's own HTTP endpoint, and a relay for gRPC clients.
//!
//! The modules, top layer first (ARCHITECTURE.md has the layer table,
//! which `tests/it/layering.rs` enforces, and a line for every file):
//!
//! * `server`: the composition root (listeners, serving threads, drain,
//!   reload);
//! * `front`: the two fronts, peers: `front::http` (HTTP: v2 and the
//!   legacy v1 `/api` routes) and `front::grpc` (gRPC: the v2 relay and the
//!   v1 gRPC service);
//! * `connections`: client connections before a front serves them
//!   (admission under the cap, the h2 preface, the lingering close);
//! * `app`: the core both fronts share ([`Gateway`]);
//! * `translate`: our types ↔ the generated gRPC types;
//! * `upstream`: the pool of gRPC backends;
//! * `wire`: the pure codecs (JSON, the binary extension, compression, v1
//!   text);
//! * foundations: `model` (protocol-neutral tensors), `error` (the one
//!   table from failure to status), `config`, `context`, `body`, `trace`,
//!   `telemetry`, `metrics`, `json_str`, and `proto` (the generated types
//!   of the crate `tensorgate-proto`, built from the top-level `proto/`).
//!
//! The embedded demo upstream used by `tensorgate demo` and the tests is
//! the crate `tensorgate-demo`.

pub(crate) mod app;
pub(crate) mod body;
pub mod config;
pub(crate) mod connections;
pub(crate) mod context;
pub(crate) mod error;
pub mod front;
pub(crate) mod json_str;
pub(crate) mod metrics;
pub mod model;
pub mod proto;
pub mod server;
pub mod telemetry;
pub(crate) mod trace;
pub mod translate;
pub mod upstream;
pub mod wire;

pub use app::Gateway;
