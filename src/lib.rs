//! tensorgate
pub mod demo;
pub mod proto;
