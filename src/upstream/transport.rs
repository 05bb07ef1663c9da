//! What a [`Client`](super::Client) sends its requests through: the direct
//! HTTP/2 transport for plain-TCP backends' request traffic, tonic's
//! `Channel` for TLS backends and for health checks (which use its
//! per-call timeout).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::transport::Channel;
use tower_service::Service;

use super::h2_transport::{BoxError, H2Transport};

#[derive(Clone)]
pub struct Transport(Inner);

#[derive(Clone)]
enum Inner {
    Direct(H2Transport),
    Tonic(Channel),
}

impl Transport {
    pub(crate) fn direct(transport: H2Transport) -> Transport {
        Transport(Inner::Direct(transport))
    }

    pub(crate) fn tonic(channel: Channel) -> Transport {
        Transport(Inner::Tonic(channel))
    }
}

impl Service<http::Request<Body>> for Transport {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match &mut self.0 {
            Inner::Direct(direct) => direct.poll_ready(cx),
            Inner::Tonic(channel) => channel.poll_ready(cx).map_err(Into::into),
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        match &mut self.0 {
            Inner::Direct(direct) => direct.call(request),
            Inner::Tonic(channel) => {
                let call = channel.call(request);
                Box::pin(async move { call.await.map_err(Into::into) })
            }
        }
    }
}
