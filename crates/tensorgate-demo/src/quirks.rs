//! Ways the demo can behave like the other v2 servers' gRPC fronts
//! (KServe's ModelServer, MLServer) instead of Triton's, so the gateway's
//! tests show what it makes of them. Off by default; set with
//! [`crate::DemoUpstream::set_quirks`].

use std::collections::HashMap;

use tensorgate_proto::inference::infer_parameter::ParameterChoice;
use tensorgate_proto::inference::{InferParameter, ModelMetadataResponse};

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
    /// Metadata as the Open Inference Protocol's servers send it:
    /// `ServerMetadata` extensions as KServe lists them; model metadata
    /// without versions (as KServe) and with `parameters` maps, the
    /// model's and each tensor's `content_type` (as MLServer fills them).
    pub oip_metadata: bool,
    /// A model's version is not looked at: a call for any version is
    /// answered by the one version served, as KServe's gRPC server does.
    pub ignore_versions: bool,
    /// Every raw output's first byte is flipped: a model that answers
    /// otherwise than the demo's own (a shadow that disagrees).
    pub skew_outputs: bool,
}

/// KServe's `ServerMetadata` extensions.
const OIP_EXTENSIONS: [&str; 1] = ["model_repository_extension"];

impl Quirks {
    /// The `ServerMetadata` extensions: Triton-like `own` ones, or KServe's.
    pub(crate) fn extensions(&self, own: &[&str]) -> Vec<String> {
        let listed = if self.oip_metadata {
            &OIP_EXTENSIONS[..]
        } else {
            own
        };
        listed.iter().map(|e| e.to_string()).collect()
    }

    /// Model metadata as an Open Inference Protocol server sends it.
    pub(crate) fn model_metadata(
        &self,
        mut metadata: ModelMetadataResponse,
    ) -> ModelMetadataResponse {
        if !self.oip_metadata {
            return metadata;
        }
        let content_type = |value: &str| {
            let value = InferParameter {
                parameter_choice: Some(ParameterChoice::StringParam(value.to_owned())),
            };
            HashMap::from([("content_type".to_owned(), value)])
        };
        metadata.versions.clear();
        metadata.parameters = content_type("np");
        let tensors = metadata.inputs.iter_mut().chain(&mut metadata.outputs);
        tensors.for_each(|tensor| tensor.parameters = content_type("np"));
        metadata
    }

    /// grpc core's answer to a call of `method`, if the server lacks it.
    pub(crate) fn refuse_method(&self, method: &str) -> Option<tonic::Status> {
        self.missing_rpcs
            .contains(&method)
            .then(|| tonic::Status::unimplemented("Method not found!"))
    }

    /// An output's bytes as this server answers them.
    pub(crate) fn output(&self, data: bytes::Bytes) -> bytes::Bytes {
        if !self.skew_outputs || data.is_empty() {
            return data;
        }
        let mut skewed = data.to_vec();
        skewed[0] ^= 0xff;
        skewed.into()
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
