//! The integration tests, one module per story, in one test binary: each
//! test binary links the whole gateway, so one binary instead of nineteen
//! saves about 1.7 GB of disk and as many links per build. `otlp.rs` stays
//! a binary of its own: it installs the process-wide tracing subscriber.
//!
//! Run one story with `cargo test --test it <module>::`, e.g.
//! `cargo test --test it faults:: -- --nocapture`.

#[path = "../support/mod.rs"]
mod support;
#[path = "../support/v1.rs"]
mod v1;

mod architecture_doc;
mod archive_doc;
mod check_config;
mod closing;
mod codec_fixtures;
mod edge;
mod faults;
mod generate_stream;
mod grpc_passthrough;
mod guard;
mod interop;
mod layering;
mod metrics;
mod pool;
mod process;
mod protocol_doc;
mod relayed_grpc;
mod reload;
mod shared_memory;
mod stream_accounting;
mod streamed_body;
mod streamed_grpc;
mod tls;
mod upstream_hardening;
mod v1_api;
mod v1_captures;
mod v1_grpc;
mod v2_endpoints;
mod v2_generate;
mod v2_infer;
