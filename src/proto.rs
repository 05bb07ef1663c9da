//! The generated gRPC types: the crate `tensorgate-proto`, compiled from the
//! repository's top-level `proto/`, under the name the gateway's code and its
//! tests use (`crate::proto::inference`, `tensorgate::proto::v1`, ...).
//!
//! A module of its own rather than a re-export in `lib.rs`, so that the
//! crate root only declares modules and nothing imports it: the modules that
//! speak gRPC (`upstream`, `translate`, `front::grpc`, `app`) depend on this
//! leaf, as on any other.

pub use tensorgate_proto::{health, inference, v1, FILE_DESCRIPTOR_SET};
