//! Conversions between protocol-neutral types (and HTTP JSON bodies) and the
//! generated gRPC messages, named by direction: `to_grpc` builds upstream
//! requests, `from_grpc` renders upstream answers; `sequence` reads the
//! sticky key of a sequence request (shared with the gRPC passthrough);
//! `checks` and `outputs` are the model-level work the HTTP front does
//! itself (`outputs`: only the outputs a request names, whatever the
//! upstream answers); `v1` carries the legacy v1 API over both;
//! `rename` carries a route's model rename both ways, `agreement` judges
//! a mirror's answer against the primary's.

pub(crate) mod agreement;
pub(crate) mod asks;
pub(crate) mod checks;
// pub: the fuzz target fuzz/fuzz_targets/infer_answer.rs turns walked
// answers into responses with `from_grpc::model_infer_with_raw`.
pub mod from_grpc;
pub(crate) mod outputs;
pub(crate) mod rename;
pub(crate) mod sequence;
// pub: the fuzz target fuzz/fuzz_targets/endpoint_bodies.rs drives the
// body decoders of `to_grpc::endpoints`.
pub mod to_grpc;
pub mod v1;
