//! Client connections before a front serves them, for every listener
//! (HTTP, HTTPS, gRPC): admission under the one connection cap and the
//! budget of refusals over it (`admission`), what the first bytes say
//! (`preface`: the h2 preface tells h2c from HTTP/1), the refusal of a
//! connection over the cap (the front's own answer written, then closed)
//! and the lingering close every close the gateway decides ends with
//! (`linger`). Below both fronts and outside the core: it knows sockets,
//! not HTTP or gRPC (each front writes its own refusal's bytes).

mod admission;
pub(crate) mod linger;
mod preface;

pub(crate) use admission::{
    accepted_or_backoff, refusal_budget, refuse, Admission, OpenConnections, Refusal, Slot,
};
pub(crate) use preface::{sniff, Protocol, H2_PREFACE};
