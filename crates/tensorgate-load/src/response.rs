//! The answer to one exchange, of either mode, read whole: `http` and
//! `grpc` build it, `link` returns it, `run`, `shm` and `check` read it.
//! A module of its own so that the two connection kinds need not import
//! `link`, which holds them; it imports none of them.

/// An answer, read whole, of either mode.
pub(crate) struct Response {
    /// The HTTP status; for gRPC 200 (grpc-status 0) or
    /// `grpc::STATUS_BASE` + the gRPC code.
    pub(crate) status: u16,
    /// The server closes the connection after it.
    pub(crate) close: bool,
    pub(crate) inference_header_len: Option<usize>,
    /// The answer has a `Retry-After` header (HTTP; never for gRPC).
    pub(crate) retry_after: bool,
    /// Body bytes, kept only when asked (or a sample for non-200).
    pub(crate) body: Vec<u8>,
    pub(crate) body_len: u64,
}
