//! The upstream side: one lazily created tonic channel to a KServe v2 gRPC
//! server, and a cache of model information. Knows nothing of HTTP or JSON.

pub mod model_info;

use std::sync::OnceLock;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::proto::inference::grpc_inference_service_client::GrpcInferenceServiceClient;

pub use model_info::ModelCache;

pub type Client = GrpcInferenceServiceClient<Channel>;

/// Settings of the upstream connection (from `config::Upstream`).
#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    pub address: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_message_bytes: usize,
}

/// One upstream server. The channel is created on first use, inside the
/// runtime that serves requests (a tonic channel lives on the runtime that
/// created it, and `connect_lazy` outside a runtime panics).
pub struct Upstream {
    settings: UpstreamSettings,
    channel: OnceLock<Channel>,
}

impl Upstream {
    pub fn new(settings: UpstreamSettings) -> Upstream {
        Upstream {
            settings,
            channel: OnceLock::new(),
        }
    }

    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// A client sharing the one channel (cheap to clone; HTTP/2 multiplexed).
    pub fn client(&self) -> Result<Client, tonic::Status> {
        let channel = match self.channel.get() {
            Some(channel) => channel.clone(),
            None => {
                let uri = format!("http://{}", self.settings.address);
                let endpoint = Endpoint::from_shared(uri)
                    .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?
                    .connect_timeout(self.settings.connect_timeout)
                    .tcp_nodelay(true)
                    .http2_adaptive_window(true);
                self.channel.get_or_init(|| endpoint.connect_lazy()).clone()
            }
        };
        Ok(GrpcInferenceServiceClient::new(channel)
            .max_decoding_message_size(self.settings.max_message_bytes)
            .max_encoding_message_size(self.settings.max_message_bytes))
    }

    /// Wraps a message with the request deadline.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.settings.request_timeout);
        request
    }
}
