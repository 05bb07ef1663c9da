//! The HTTP front (the v2 protocol, JSON and the binary extension, and
//! the legacy v1 `/api` routes), a peer of the gRPC front on top of the
//! core (`app`). A request's way through it, each step named once:
//!
//! 1. `conn` runs one client connection with its deadlines (HTTP/1; h2
//!    through pingora), and writes the over-cap refusal;
//! 2. `session::GatewayService::serve`, the per-request pingora glue:
//!    the plan made (`entry::plan`: `route` classifies the path once,
//!    `plan` reads the head once), the body read within its limits or
//!    streamed (`request_body`), the one answer written (`write_buffer`);
//! 3. `entry::answer`: access rules, metrics, the span, the access log;
//! 4. `handlers::dispatch`: the route's handler, a function of its route
//!    group (`handlers::*`), or the legacy v1 API's (`v1`), which calls
//!    the core and renders Triton's answer, or the OpenAI API's
//!    (`openai`), which renders OpenAI's.
//!
//! `entry::handle` runs steps 3–4 for a caller that has a whole request
//! in hand (tests, benches). `messages` holds the front's own request and
//! answer types, `admin` the admin listener, `tls` the HTTPS certificate.

pub(crate) mod admin;
pub(crate) mod conn;
mod entry;
mod handlers;
mod messages;
pub mod openai;
pub mod plan;
pub(crate) mod request_body;
pub mod route;
pub(crate) mod session;
pub(crate) mod tls;
pub(crate) mod v1;
pub(crate) mod write_buffer;

pub(crate) use entry::Routes;
pub use entry::{answer, handle, plan};
pub(crate) use messages::{too_large, via, StreamedRest};
pub use messages::{Answer, HttpRequest, HttpResponse, StreamedResponse};
