//! Ways the demo can behave like the other v2 servers' gRPC fronts
//! (KServe's ModelServer, MLServer) instead of Triton's, so the gateway's
//! tests show what it makes of them. Off by default; set with
//! [`crate::DemoUpstream::set_quirks`].

/// What the demo does differently from Triton.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quirks {
    /// Every output is answered, whatever the request's `outputs` asks for,
    /// and an unknown requested output is not refused (KServe's gRPC
    /// server ignores `outputs`).
    pub ignore_requested_outputs: bool,
}
