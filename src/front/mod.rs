//! The HTTP front: `route` classifies, `handler` (+ `infer`, `endpoints`,
//! `generate`) answers, `session` is the pingora glue, `server` wires the service.

pub mod endpoints;
pub mod generate;
pub mod handler;
pub mod http;
pub mod infer;
pub mod route;
pub mod server;
pub mod session;
