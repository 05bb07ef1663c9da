//! The legacy v1 API on top of v2: `request` turns a v1 `InferRequestHeader`
//! and body into a protocol-neutral `InferRequest` (datatypes, dims and
//! batch size from the model's configuration, sequence and scheduling fields
//! as v2 parameters); `response` turns the v2 answer into the v1
//! `InferResponseHeader` and raw outputs (classification included);
//! `status` builds a v1 `ServerStatus` from v2 configuration, readiness and
//! statistics; `answer` renders the v1 answer (`NV-Status`,
//! `NV-InferResponse`, trailer, repository index) and `messages` gives the
//! text codec each v1 message's descriptor. The only code that sees both v1
//! and v2 messages.

pub(crate) mod answer;
mod messages;
pub mod request;
pub(crate) mod response;
pub(crate) mod status;
