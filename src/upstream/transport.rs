//! What a [`Client`](super::Client) sends its requests through: the direct
//! HTTP/2 transport for plain-TCP backends' request traffic, tonic's
//! `Channel` for TLS backends and for health checks (which use its
//! per-call timeout). Either sends a request that carries an
//! [`EncodedInfer`] with its pieces as the body, in place of the
//! placeholder tonic encoded.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use tonic::body::Body;
use tonic::transport::Channel;
use tower_service::Service;

use super::encoded::EncodedInfer;
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

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        if let Some(encoded) = request.extensions_mut().remove::<EncodedInfer>() {
            *request.body_mut() = Body::new(Pieces(encoded.into_pieces().into_iter()));
        }
        match &mut self.0 {
            Inner::Direct(direct) => direct.call(request),
            Inner::Tonic(channel) => {
                let call = channel.call(request);
                Box::pin(async move { call.await.map_err(Into::into) })
            }
        }
    }
}

/// A body of ready pieces; it ends with the last one, so that piece's
/// DATA frame carries END_STREAM.
struct Pieces(std::vec::IntoIter<Bytes>);

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.next().map(|piece| Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.len() == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.as_slice().iter().map(|p| p.len() as u64).sum())
    }
}
