//! tensorgate
pub mod proto;
