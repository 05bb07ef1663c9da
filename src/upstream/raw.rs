//! Raw gRPC calls: the request's message sent as pieces (`encoded`), the
//! reply handed back as the backend's HTTP/2 response — headers, DATA
//! frames, trailers — without tonic decoding it. The gRPC passthrough
//! relays `ModelInfer` calls this way: a large one without either
//! direction holding a whole message, a small one without decoding and
//! re-encoding it (`front::grpc::relayed_infer`), through `Pool::call`
//! (in `call`) like any call: the pool's deadline, ejection and retries.
//!
//! A call fails here, as a generated client's would, when the backend
//! cannot be reached or replies with a status and no message
//! ("trailers-only"); a failure in the reply's trailers, after its
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
pub(crate) use crate::wire::grpc_head::{GRPC_STATUS, MODEL_INFER};

/// The status `headers` carry, if any: `Ok(())` for OK. An OK (every
/// call that succeeds has one) is recognised without building tonic's
/// `Status`, which copies every header into its metadata (~2k
/// instructions a call, measured). tonic reads exactly `0` as OK too.
pub(crate) fn carried_status(headers: &http::HeaderMap) -> Option<Result<(), Status>> {
    let code = headers.get(GRPC_STATUS)?;
    if code.as_bytes() == b"0" {
        return Some(Ok(()));
    }
    let status = Status::from_header_map(headers)?;
    Some(match status.code() {
        Code::Ok => Ok(()),
        _ => Err(status),
    })
}

/// A backend's request transport and its `ModelInfer` URI.
pub(crate) struct RawClient {
    transport: Transport,
    uri: http::Uri,
}

/// The backend's reply, as it comes.
pub(crate) type RawReply = http::Response<Body>;

/// `ModelInfer`'s URI at a backend's origin, made once per backend (not
/// per call: parsing it was ~1,000 instructions of every request).
pub(crate) fn model_infer_uri(origin: &http::Uri) -> http::Uri {
    http::Uri::builder()
        .scheme(origin.scheme().cloned().unwrap_or(http::uri::Scheme::HTTP))
        .authority(
            origin
                .authority()
                .cloned()
                .unwrap_or_else(|| http::uri::Authority::from_static("localhost")),
        )
        .path_and_query(MODEL_INFER)
        .build()
        .unwrap_or_else(|_| http::Uri::from_static(MODEL_INFER))
}

impl RawClient {
    pub(super) fn new(transport: Transport, uri: http::Uri) -> RawClient {
        RawClient { transport, uri }
    }

    /// Calls `ModelInfer` with `metadata` (sent as it is), `timeout` as
    /// `grpc-timeout`, and `message` as the body.
    pub(crate) async fn call(
        mut self,
        metadata: MetadataMap,
        timeout: Duration,
        message: EncodedInfer,
    ) -> std::result::Result<tonic::Response<RawReply>, Status> {
        let mut request = http::Request::new(Body::empty());
        *request.method_mut() = http::Method::POST;
        *request.version_mut() = http::Version::HTTP_2;
        *request.uri_mut() = self.uri;
        *request.headers_mut() = headers(metadata, timeout);
        // tonic's `Channel` (TLS backends) takes a call only once ready.
        std::future::poll_fn(|cx| self.transport.poll_ready(cx))
            .await
            .map_err(Status::from_error)?;
        let reply = self
            .transport
            .call_encoded(request, message)
            .await
            .map_err(Status::from_error)?;
        refused(&reply).map_or(Ok(tonic::Response::new(reply)), Err)
    }
}

/// `metadata`, the deadline as `grpc-timeout`, and the headers every gRPC
/// request carries.
fn headers(metadata: MetadataMap, timeout: Duration) -> http::HeaderMap {
    let mut headers = metadata.into_headers();
    headers.insert(GRPC_TIMEOUT, grpc_timeout(timeout));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(TE, HeaderValue::from_static("trailers"));
    headers
}

/// A name made once: one written as text is copied into a new name on
/// every insert.
const GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");

/// `timeout` in whole milliseconds (seconds from ~28 hours, where the
/// milliseconds would pass gRPC's 8 digits), rounded down. Not tonic's
/// wording, which picks the finest unit that fits (microseconds for the
/// default 30 s): a value that changes with every call is a new HPACK
/// literal every time, and its table entry pushes out the ones that
/// repeat (`content-type`, `te`, `:authority`). In milliseconds the first
/// attempt's remaining time is nearly always the same value, sent as a
/// one-byte index.
fn grpc_timeout(timeout: Duration) -> HeaderValue {
    const MAX: u64 = 99_999_999;
    let (value, unit) = match u64::try_from(timeout.as_millis()) {
        Ok(ms @ 0..=MAX) => (ms, b'm'),
        _ => (timeout.as_secs().min(MAX), b'S'),
    };
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(value).as_bytes();
    let mut text = [0u8; 9];
    text[..digits.len()].copy_from_slice(digits);
    text[digits.len()] = unit;
    HeaderValue::from_bytes(&text[..=digits.len()])
        .unwrap_or_else(|_| HeaderValue::from_static("99999999S"))
}

/// The failure a reply's head carries: a status without a message, or
/// an HTTP status other than 200.
///
/// The HTTP statuses map as gRPC's "HTTP to gRPC Status Code Mapping"
/// (grpc/grpc, `doc/http-grpc-status-mapping.md`) says a client maps a
/// reply without `grpc-status` (one from a proxy in between, say): a
/// `grpc-status` present is used as it is; 400 and 431 are INTERNAL, 401
/// UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED, 429, 502,
/// 503 and 504 UNAVAILABLE, every other status UNKNOWN. The document's
/// 200 (UNKNOWN: a real success carries `grpc-status`) is judged at the
/// reply's end, not here: a 200 head without it is the normal start of a
/// message whose status comes in the trailers, which the caller relays.
/// Written out because tonic's copy of this table (`infer_grpc_status`)
/// is private to tonic.
fn refused(reply: &RawReply) -> Option<Status> {
    if let Some(status) = carried_status(reply.headers()) {
        return status.err();
    }
    let code = match reply.status().as_u16() {
        200 => return None,
        400 | 431 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Some(Status::new(
        code,
        format!("the backend replied HTTP {}", reply.status()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, headers: &[(&'static str, &'static str)]) -> RawReply {
        let mut reply = http::Response::new(Body::empty());
        *reply.status_mut() = http::StatusCode::from_u16(status).unwrap();
        for (name, value) in headers {
            reply
                .headers_mut()
                .insert(*name, HeaderValue::from_static(value));
        }
        reply
    }

    #[test]
    fn the_deadline_goes_in_whole_milliseconds_within_grpcs_eight_digits() {
        let text = |d: Duration| grpc_timeout(d).to_str().unwrap().to_string();
        assert_eq!(text(Duration::from_micros(29_999_972)), "29999m");
        assert_eq!(text(Duration::from_micros(999)), "0m");
        assert_eq!(text(Duration::from_millis(99_999_999)), "99999999m");
        assert_eq!(text(Duration::from_millis(100_000_000)), "100000S");
        assert_eq!(text(Duration::MAX), "99999999S");
    }

    #[test]
    fn a_head_with_a_failed_status_or_a_bad_http_status_is_refused() {
        assert!(refused(&reply(200, &[("content-type", "application/grpc")])).is_none());
        assert!(refused(&reply(200, &[("grpc-status", "0")])).is_none());
        // Only an exact `0` is OK, as tonic reads it.
        let odd = refused(&reply(200, &[("grpc-status", "00")])).unwrap();
        assert_eq!(odd.code(), Code::Unknown);
        let status = refused(&reply(
            200,
            &[("grpc-status", "5"), ("grpc-message", "no%20such%20model")],
        ))
        .unwrap();
        assert_eq!(
            (status.code(), status.message()),
            (Code::NotFound, "no such model")
        );
        // A grpc-status in the head wins over the HTTP status.
        assert_eq!(
            refused(&reply(503, &[("grpc-status", "8")]))
                .unwrap()
                .code(),
            Code::ResourceExhausted
        );
    }

    #[test]
    fn an_http_status_without_grpc_status_maps_as_grpcs_document_says() {
        for (http, code) in [
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::Unavailable),
            (431, Code::Internal),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (418, Code::Unknown),
            (500, Code::Unknown),
        ] {
            let status = refused(&reply(http, &[])).unwrap();
            assert_eq!(status.code(), code, "{http}");
            assert!(status.message().contains(&http.to_string()), "{status:?}");
        }
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
