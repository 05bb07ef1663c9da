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
    /// The largest `ModelInfer` message the server takes: a larger one is
    /// refused as grpc core refuses it, `RESOURCE_EXHAUSTED` `Received
    /// message larger than max (<size> vs. <limit>)` (MLServer: 4 MiB,
    /// KServe: 8 MiB by default).
    pub max_receive_message: Option<usize>,
    /// RPCs the server does not have, by method name (`"ModelConfig"`,
    /// `"ModelMetadata"`, `"RepositoryIndex"`): answered `UNIMPLEMENTED`
    /// `Method not found!`, as grpc core answers a method no service
    /// registered (KServe has neither `ModelConfig` nor `RepositoryIndex`).
    pub missing_rpcs: Vec<&'static str>,
}

impl Quirks {
    /// grpc core's answer to a call of `method`, if the server lacks it.
    pub(crate) fn refuse_method(&self, method: &str) -> Option<tonic::Status> {
        self.missing_rpcs
            .contains(&method)
            .then(|| tonic::Status::unimplemented("Method not found!"))
    }

    /// grpc core's refusal of a received message of `size` bytes, if it
    /// is above the limit.
    pub(crate) fn refuse_size(&self, size: usize) -> Option<tonic::Status> {
        let limit = self.max_receive_message.filter(|limit| size > *limit)?;
        Some(tonic::Status::resource_exhausted(format!(
            "Received message larger than max ({size} vs. {limit})"
        )))
    }
}
