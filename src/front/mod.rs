//! The HTTP front: `route` classifies, `handler` (+ `infer`, `endpoints`,
//! `fanout`, `admin`, `generate`) answers; `listen` binds and accepts,
//! `conn` runs one connection with its deadlines, `session` is the
//! per-request pingora glue, `server` wires the process; `v1` serves the
//! legacy v1 API.

pub mod admin;
pub(crate) mod conn;
pub mod drain;
pub mod endpoints;
pub mod fanout;
pub mod generate;
pub mod guard;
pub mod handler;
pub mod http;
pub mod infer;
pub(crate) mod listen;
pub mod route;
pub mod server;
pub mod session;
pub mod tls;
pub mod v1;
