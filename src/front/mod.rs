//! The HTTP front: `route` classifies, `handler` (+ `infer`, `endpoints`)
//! answers, `session` is the pingora glue, `server` wires the service.

pub mod endpoints;
pub mod handler;
pub mod http;
pub mod infer;
pub mod route;
pub mod server;
pub mod session;
