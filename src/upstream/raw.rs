//! Raw gRPC calls: the request's message sent as pieces (`encoded`), the
//! answer handed back as the backend's HTTP/2 response — headers, DATA
//! frames, trailers — without tonic decoding it. The gRPC passthrough
//! relays large `ModelInfer` calls this way, so that neither direction
//! holds a whole message (`passthrough::streamed`); `Pool::call_raw` (in
//! `call`) makes them with the pool's deadline, ejection and retries.
//!
//! A call fails here, as a generated client's would, when the backend
//! cannot be reached or answers with a status and no message
//! ("trailers-only"); a failure in the answer's trailers, after its
//! message, is the client's to read.

use std::time::Duration;

use http::header::{CONTENT_TYPE, TE};
use http::HeaderValue;
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::{Code, Status};
use tower_service::Service;

use super::encoded::EncodedInfer;
use super::transport::Transport;

/// A backend's request transport and where it is.
pub(crate) struct RawClient {
    transport: Transport,
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
}

/// The backend's answer, as it comes.
pub(crate) type RawReply = http::Response<Body>;

impl RawClient {
    pub(super) fn new(transport: Transport, origin: &http::Uri) -> RawClient {
        RawClient {
            transport,
            scheme: origin.scheme().cloned().unwrap_or(http::uri::Scheme::HTTP),
            authority: origin
                .authority()
                .cloned()
                .unwrap_or_else(|| http::uri::Authority::from_static("localhost")),
        }
    }

    /// Calls `path` with `metadata` (sent as it is), `timeout` as
    /// `grpc-timeout`, and `message` as the body.
    pub(crate) async fn call(
        mut self,
        path: &'static str,
        metadata: MetadataMap,
        timeout: Duration,
        message: EncodedInfer,
    ) -> std::result::Result<tonic::Response<RawReply>, Status> {
        let mut request = http::Request::new(Body::empty());
        *request.method_mut() = http::Method::POST;
        *request.version_mut() = http::Version::HTTP_2;
        *request.uri_mut() = http::Uri::builder()
            .scheme(self.scheme)
            .authority(self.authority)
            .path_and_query(path)
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        *request.headers_mut() = headers(metadata, timeout);
        request.extensions_mut().insert(message);
        // tonic's `Channel` (TLS backends) takes a call only once ready.
        std::future::poll_fn(|cx| self.transport.poll_ready(cx))
            .await
            .map_err(Status::from_error)?;
        let answer = self
            .transport
            .call(request)
            .await
            .map_err(Status::from_error)?;
        refused(&answer).map_or(Ok(tonic::Response::new(answer)), Err)
    }
}

/// `metadata`, the deadline in tonic's own `grpc-timeout` wording, and
/// the headers every gRPC request carries.
fn headers(metadata: MetadataMap, timeout: Duration) -> http::HeaderMap {
    let mut timed = tonic::Request::from_parts(metadata, tonic::Extensions::default(), ());
    timed.set_timeout(timeout);
    let mut headers = timed.into_parts().0.into_headers();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(TE, HeaderValue::from_static("trailers"));
    headers
}

/// The failure an answer's head carries: a status without a message, or
/// an HTTP status other than 200 (mapped as gRPC's HTTP-to-gRPC table).
fn refused(answer: &RawReply) -> Option<Status> {
    if let Some(status) = Status::from_header_map(answer.headers()) {
        return (status.code() != Code::Ok).then_some(status);
    }
    let code = match answer.status().as_u16() {
        200 => return None,
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Some(Status::new(
        code,
        format!("the backend answered HTTP {}", answer.status()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, headers: &[(&'static str, &'static str)]) -> RawReply {
        let mut answer = http::Response::new(Body::empty());
        *answer.status_mut() = http::StatusCode::from_u16(status).unwrap();
        for (name, value) in headers {
            answer
                .headers_mut()
                .insert(*name, HeaderValue::from_static(value));
        }
        answer
    }

    #[test]
    fn a_head_with_a_failed_status_or_a_bad_http_status_is_refused() {
        assert!(refused(&answer(200, &[("content-type", "application/grpc")])).is_none());
        assert!(refused(&answer(200, &[("grpc-status", "0")])).is_none());
        let status = refused(&answer(
            200,
            &[("grpc-status", "5"), ("grpc-message", "no%20such%20model")],
        ))
        .unwrap();
        assert_eq!(
            (status.code(), status.message()),
            (Code::NotFound, "no such model")
        );
        assert_eq!(
            refused(&answer(503, &[])).unwrap().code(),
            Code::Unavailable
        );
        assert_eq!(refused(&answer(418, &[])).unwrap().code(), Code::Unknown);
    }

    #[test]
    fn the_headers_carry_the_deadline_and_the_grpc_basics() {
        let mut metadata = MetadataMap::new();
        metadata.insert("x-custom", "1".parse().unwrap());
        let headers = headers(metadata, Duration::from_millis(1500));
        assert_eq!(headers["x-custom"], "1");
        assert_eq!(headers["content-type"], "application/grpc");
        assert_eq!(headers["te"], "trailers");
        assert!(headers.contains_key("grpc-timeout"));
    }
}
