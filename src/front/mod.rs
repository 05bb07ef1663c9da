//! The HTTP front: `route` classifies, `handler` (+ `infer`, `endpoints`,
//! `fanout`, `admin`, `generate`) answers, `session` is the pingora glue,
//! `server` wires the service; `v1` serves the legacy v1 API.

pub mod admin;
pub mod drain;
pub mod endpoints;
pub mod fanout;
pub mod generate;
pub mod guard;
pub mod handler;
pub mod http;
pub mod infer;
pub mod route;
pub mod server;
pub mod session;
pub mod tls;
pub mod v1;
