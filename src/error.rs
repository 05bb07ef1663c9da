//! The one table from failure to answer. Every failure in the gateway is an
//! [`Error`] with a [`Kind`]; [`Kind::status`] is the only place that picks an
//! HTTP status (and its gRPC code), and [`Error::body`] the only place that
//! renders Triton's `{"error":"..."}` body.

use crate::json_str::write_str;

/// Who failed, and how. The variants follow Triton's error codes (v2 §0.1)
/// plus what only a gateway can hit (upstream unreachable, deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client mistake detected by us or the upstream (`INVALID_ARG`).
    InvalidArg,
    /// Malformed JSON or a JSON value of the wrong type. Triton answers 500
    /// (`INTERNAL`); it is the client's mistake, so we answer 400
    /// (docs/compatibility.md).
    JsonAccess,
    /// Upstream `UNKNOWN`, `ALREADY_EXISTS`, `CANCELLED` (Triton: 400).
    ClientOther(tonic::Code),
    NotFound,
    /// No route matched (`{"error":"Not Found"}`).
    RouteNotFound,
    MethodNotAllowed,
    Unsupported,
    /// `Content-Encoding` we cannot inflate; adds `Accept-Encoding: gzip, deflate`.
    UnsupportedEncoding,
    Internal,
    /// Upstream said `UNAVAILABLE` (e.g. polling mode refuses load/unload).
    Unavailable,
    /// The upstream could not be reached at all (connect refused, reset).
    UpstreamUnreachable,
    /// The request's deadline passed before the upstream answered.
    UpstreamTimeout,
    /// A request body larger than the configured limit.
    PayloadTooLarge,
    /// No or an unknown API key for a protected endpoint group.
    Unauthorized,
    /// A known key that is not allowed this endpoint group.
    Forbidden,
    /// The client's rate or concurrency limit (adds `Retry-After`).
    TooManyRequests,
    /// The gateway's global in-flight cap, or an upstream group's
    /// admission control (`app::admission`: its queue full, its wait or
    /// the request's deadline passed); adds `Retry-After`.
    Overloaded,
    /// The client did not send its body in time (`limits.body_timeout_ms`),
    /// or its request head (`connections.header_timeout_ms`).
    RequestTimeout,
    /// A request head over the HTTP parser's size or field-count limit.
    HeaderTooLarge,
    /// The upstream does not implement an RPC the request needs (KServe's
    /// `ModelConfig`): as for a resource the server does not have, 404.
    MissingRpc,
    /// A gRPC message above a size limit, the upstream's or the gateway's
    /// own (`upstream.max_message_bytes`): the client's request is too large
    /// for the hop (Triton's 400 form), with the upstream's gRPC code.
    MessageTooLarge(tonic::Code),
}

/// A failure: its kind (the table below picks the status) and its text.
/// Its body is always JSON and goes out as `application/json`, also where
/// Triton sends the same JSON body as `text/plain` (errors raised before a
/// handler read the body, v2 §0.2): clients such as KServe's read the
/// message only from a JSON content type (docs/compatibility.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
    /// The upstream's own status text where `message` explains it for HTTP
    /// clients (a message-size refusal): gRPC clients of the passthrough get
    /// the server's words as they came ([`Error::to_status`]).
    pub relayed: Option<String>,
    /// The request field a refusal is about (the OpenAI front's `param`).
    pub param: Option<&'static str>,
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Kind {
    /// HTTP status and the gRPC code a gRPC client would see.
    pub fn status(self) -> (u16, tonic::Code) {
        use tonic::Code as C;
        match self {
            Kind::InvalidArg | Kind::JsonAccess => (400, C::InvalidArgument),
            Kind::ClientOther(code) => (400, code),
            Kind::NotFound | Kind::RouteNotFound => (404, C::NotFound),
            Kind::MethodNotAllowed => (405, C::Unimplemented),
            Kind::PayloadTooLarge => (413, C::ResourceExhausted),
            Kind::Unsupported | Kind::UnsupportedEncoding => (501, C::Unimplemented),
            Kind::Internal => (500, C::Internal),
            Kind::Unavailable | Kind::UpstreamUnreachable => (503, C::Unavailable),
            Kind::UpstreamTimeout => (504, C::DeadlineExceeded),
            Kind::Unauthorized => (401, C::Unauthenticated),
            Kind::Forbidden => (403, C::PermissionDenied),
            Kind::TooManyRequests => (429, C::ResourceExhausted),
            Kind::Overloaded => (503, C::Unavailable),
            Kind::RequestTimeout => (408, C::DeadlineExceeded),
            Kind::HeaderTooLarge => (431, C::ResourceExhausted),
            Kind::MessageTooLarge(code) => (400, code),
            Kind::MissingRpc => (404, C::Unimplemented),
        }
    }

    /// The legacy v1 API's answer (v1 §7.1): HTTP 400 for every failure
    /// (405 for a wrong method; v1 servers know no other error status) and
    /// the failure's class as the `NV-Status` code. 200 is success only.
    pub fn v1_status(self) -> (u16, crate::proto::v1::RequestStatusCode) {
        use crate::proto::v1::RequestStatusCode as V1;
        let code = match self {
            Kind::InvalidArg
            | Kind::JsonAccess
            | Kind::PayloadTooLarge
            | Kind::MessageTooLarge(_) => V1::InvalidArg,
            Kind::ClientOther(tonic::Code::AlreadyExists) => V1::AlreadyExists,
            Kind::ClientOther(_) => V1::Unknown,
            Kind::NotFound | Kind::RouteNotFound => V1::NotFound,
            Kind::MethodNotAllowed
            | Kind::Unsupported
            | Kind::UnsupportedEncoding
            | Kind::MissingRpc => V1::Unsupported,
            Kind::Internal => V1::Internal,
            Kind::Unavailable | Kind::UpstreamUnreachable | Kind::UpstreamTimeout => {
                V1::Unavailable
            }
            // The gateway's own refusals keep their HTTP status: a v1
            // client sees a non-200 with a non-success NV-Status either way.
            Kind::Unauthorized | Kind::Forbidden => V1::InvalidArg,
            Kind::TooManyRequests | Kind::Overloaded => V1::Unavailable,
            Kind::RequestTimeout | Kind::HeaderTooLarge => V1::InvalidArg,
        };
        let status = match self {
            Kind::MethodNotAllowed => 405,
            Kind::Unauthorized | Kind::Forbidden | Kind::TooManyRequests | Kind::Overloaded => {
                self.status().0
            }
            _ => 400,
        };
        (status, code)
    }

    /// The OpenAI API's words for the failure (the front under `/v1/`):
    /// its error `type` and `code`, the status staying [`Kind::status`]'s,
    /// which are the codes OpenAI's clients map to their exceptions (400
    /// `BadRequestError`, 401, 403, 404, 429 `RateLimitError`, 5xx).
    pub fn openai_type(self) -> (&'static str, Option<&'static str>) {
        match self {
            Kind::InvalidArg
            | Kind::JsonAccess
            | Kind::ClientOther(_)
            | Kind::PayloadTooLarge
            | Kind::MessageTooLarge(_)
            | Kind::HeaderTooLarge
            | Kind::RequestTimeout
            | Kind::MethodNotAllowed
            | Kind::UnsupportedEncoding => ("invalid_request_error", None),
            Kind::NotFound => ("invalid_request_error", Some("model_not_found")),
            Kind::RouteNotFound | Kind::MissingRpc => ("invalid_request_error", None),
            Kind::Unsupported => ("invalid_request_error", Some("unsupported")),
            Kind::Unauthorized => ("authentication_error", Some("invalid_api_key")),
            Kind::Forbidden => ("permission_error", None),
            Kind::TooManyRequests => ("rate_limit_error", Some("rate_limit_exceeded")),
            Kind::Overloaded | Kind::Unavailable | Kind::UpstreamUnreachable => {
                ("server_error", Some("service_unavailable"))
            }
            Kind::UpstreamTimeout => ("server_error", Some("timeout")),
            Kind::Internal => ("server_error", None),
        }
    }

    /// The inverse of v2 §0.1: an upstream gRPC code to our kind.
    pub fn from_grpc(code: tonic::Code) -> Kind {
        use tonic::Code as C;
        match code {
            C::InvalidArgument => Kind::InvalidArg,
            C::NotFound => Kind::NotFound,
            C::Internal => Kind::Internal,
            C::Unavailable => Kind::Unavailable,
            C::Unimplemented => Kind::Unsupported,
            C::DeadlineExceeded => Kind::UpstreamTimeout,
            other => Kind::ClientOther(other),
        }
    }
}

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            relayed: None,
            param: None,
        }
    }

    /// The same failure, about the request field `param`.
    pub fn about(mut self, param: &'static str) -> Error {
        self.param = Some(param);
        self
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(Kind::InvalidArg, message)
    }

    pub fn json(message: impl Into<String>) -> Error {
        Error::new(Kind::JsonAccess, message)
    }

    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(Kind::NotFound, message)
    }

    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(Kind::Internal, message)
    }

    pub fn unsupported(message: impl Into<String>) -> Error {
        Error::new(Kind::Unsupported, message)
    }

    pub fn route_not_found() -> Error {
        Error::new(Kind::RouteNotFound, "Not Found")
    }

    pub fn method_not_allowed() -> Error {
        Error::new(Kind::MethodNotAllowed, "Method Not Allowed")
    }

    /// `backend` does not implement the RPC named `rpc` (it answered
    /// `UNIMPLEMENTED`, now or before).
    pub fn missing_rpc(rpc: &str, backend: std::net::SocketAddr) -> Error {
        Error::new(
            Kind::MissingRpc,
            format!("backend {backend} does not implement the {rpc} RPC"),
        )
    }

    /// The one text of a passed deadline: the backend, and the deadline in
    /// a unit that does not round it away (`5 µs`, `250 ms`, `60 s`).
    pub fn deadline_passed(backend: std::net::SocketAddr, deadline: std::time::Duration) -> Error {
        Error::new(
            Kind::UpstreamTimeout,
            format!(
                "upstream {backend} did not answer within the request's deadline of {}",
                duration_text(deadline)
            ),
        )
    }

    /// A failed call on `backend` under `deadline`: a passed deadline
    /// (the upstream's `DEADLINE_EXCEEDED`, tonic's own timer) gets the one
    /// deadline text, a transport failure names the backend, and anything
    /// the upstream server said keeps its text.
    pub fn from_upstream(
        status: &tonic::Status,
        backend: std::net::SocketAddr,
        deadline: std::time::Duration,
    ) -> Error {
        let mut error = Error::from_status(status);
        match error.kind {
            Kind::UpstreamTimeout => Error::deadline_passed(backend, deadline),
            Kind::UpstreamUnreachable => {
                error.message = format!("{} (backend {backend})", error.message);
                error
            }
            Kind::MessageTooLarge(_) if error.relayed.is_some() => {
                error.message = format!("backend {backend}: {}", error.message);
                error
            }
            _ => error,
        }
    }

    /// An upstream gRPC status, its message passed through verbatim.
    pub fn from_status(status: &tonic::Status) -> Error {
        if status.code() == tonic::Code::Cancelled && status.message().contains("Timeout expired") {
            return Error::new(Kind::UpstreamTimeout, "upstream deadline exceeded");
        }
        if is_transport_failure(status) {
            return Error::new(
                Kind::UpstreamUnreachable,
                format!("upstream unavailable: {}", status.message()),
            );
        }
        if let Some(refusal) = size_refusal(status) {
            return refusal;
        }
        Error::new(Kind::from_grpc(status.code()), status.message())
    }

    pub fn status(&self) -> u16 {
        self.kind.status().0
    }

    /// The gRPC status a gRPC client gets (the passthrough): the table's
    /// code, the message verbatim (the upstream's own, where relayed).
    pub fn to_status(&self) -> tonic::Status {
        let message = self.relayed.as_ref().unwrap_or(&self.message);
        tonic::Status::new(self.kind.status().1, message.clone())
    }

    /// `{"error":"<message>"}`, escaped the way rapidjson writes strings;
    /// always sent as `application/json`.
    pub fn body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.message.len() + 12);
        out.extend_from_slice(b"{\"error\":");
        write_str(&mut out, self.message.as_bytes());
        out.push(b'}');
        out
    }

    /// `{"error":{"message","type","param","code"}}`, the OpenAI API's
    /// error body (the front under `/v1/`), from [`Kind::openai_type`].
    pub fn openai_body(&self) -> Vec<u8> {
        let (kind, code) = self.kind.openai_type();
        let mut out = Vec::with_capacity(self.message.len() + 80);
        out.extend_from_slice(b"{\"error\":{\"message\":");
        write_str(&mut out, self.message.as_bytes());
        out.extend_from_slice(b",\"type\":");
        write_str(&mut out, kind.as_bytes());
        for (key, value) in [(&b",\"param\":"[..], self.param), (b",\"code\":", code)] {
            out.extend_from_slice(key);
            match value {
                Some(value) => write_str(&mut out, value.as_bytes()),
                None => out.extend_from_slice(b"null"),
            }
        }
        out.extend_from_slice(b"}}");
        out
    }

    /// Extra response headers some errors carry.
    pub fn extra_headers(&self) -> &'static [(&'static str, &'static str)] {
        match self.kind {
            Kind::UnsupportedEncoding => &[("Accept-Encoding", "gzip, deflate")],
            Kind::Unauthorized => &[("WWW-Authenticate", "Bearer")],
            Kind::TooManyRequests | Kind::Overloaded => &[("Retry-After", "1")],
            _ => &[],
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:?})", self.message, self.kind)
    }
}

impl std::error::Error for Error {}

/// What went wrong, for operators (the backends view, the 503 text, the
/// logs): the socket error beneath a transport failure (`connection
/// refused`), else the deepest cause, else the status's own message.
pub(crate) fn failure_text(status: &tonic::Status) -> String {
    if let Some(io) = causes(status).find_map(|e| e.downcast_ref::<std::io::Error>()) {
        // "Connection refused (os error 111)" → "connection refused".
        let text = io.to_string();
        let text = text.split(" (os error").next().unwrap_or_default();
        let mut chars = text.chars();
        return chars
            .next()
            .map_or_else(String::new, |c| c.to_lowercase().chain(chars).collect());
    }
    match causes(status).last() {
        Some(deepest) => deepest.to_string(),
        None if status.message().is_empty() => format!("{:?}", status.code()),
        None => status.message().to_string(),
    }
}

/// `d` in the largest unit that keeps it at least 1 (ns, µs, ms; seconds
/// from 10 s), with at most two decimals: `5 µs`, `47.5 ms`, `9950 ms`, `60 s`.
pub(crate) fn duration_text(d: std::time::Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (value, unit) = match d.as_nanos() {
        0..1_000 => (ns, "ns"),
        1_000..1_000_000 => (ns / 1e3, "µs"),
        1_000_000..10_000_000_000 => (ns / 1e6, "ms"),
        _ => (ns / 1e9, "s"),
    };
    let number = format!("{value:.2}");
    let number = number.trim_end_matches('0').trim_end_matches('.');
    format!("{number} {unit}")
}

/// Where to raise each server's gRPC message limit, for the refusal's text
/// (docs/operations.md, "Message sizes"). MLServer's default is grpc's
/// 4 MiB, KServe's 8 MiB; Triton's is fixed at 2 GiB − 1 (`INT32_MAX`).
const SERVER_LIMITS: &str = "MLServer: grpc_max_message_length; KServe: \
     --grpc_max_receive_message_length (and --grpc_max_send_message_length for answers); \
     Triton's is fixed at 2147483647";

/// A message-size refusal, as an [`Error`] that names the size, the limit
/// and the setting to raise. Recognised by code and origin: grpc core's
/// (and grpc-go's) `RESOURCE_EXHAUSTED` from the server (`Received message
/// larger than max (N vs. M)`), tonic's `OUT_OF_RANGE` (`... found N bytes,
/// the limit is: M bytes`) sent by a tonic server, or made on our side by
/// tonic's codec or `upstream::encoded` (then it carries no metadata: it
/// never crossed the wire, and the limit is `upstream.max_message_bytes`).
/// The text is read only for its two numbers, the size and the limit.
fn size_refusal(status: &tonic::Status) -> Option<Error> {
    let ours = match status.code() {
        tonic::Code::ResourceExhausted => false,
        tonic::Code::OutOfRange => status.metadata().is_empty(),
        _ => return None,
    };
    let [size, limit] = numbers(status.message())?;
    if size <= limit {
        return None;
    }
    let kind = Kind::MessageTooLarge(status.code());
    if ours {
        return Some(Error::new(
            kind,
            format!(
                "a gRPC message of {size} bytes is over the gateway's limit of {limit} bytes: \
                 raise upstream.max_message_bytes (and the server's own limit to match)"
            ),
        ));
    }
    let mut error = Error::new(
        kind,
        format!(
            "a gRPC message of {size} bytes is over the upstream's limit of {limit} bytes \
             (the server said: {}); raise the server's limit ({SERVER_LIMITS}) \
             and upstream.max_message_bytes to match, or send less per request",
            status.message()
        ),
    );
    error.relayed = Some(status.message().to_string());
    Some(error)
}

/// The decimal numbers in `text`, when there are exactly two.
fn numbers(text: &str) -> Option<[u64; 2]> {
    let mut found = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|run| !run.is_empty())
        .map(str::parse::<u64>);
    let pair = [found.next()?.ok()?, found.next()?.ok()?];
    found.next().is_none().then_some(pair)
}

/// The errors beneath a status, outermost first (tonic keeps the transport
/// error that made it up as its source).
pub(crate) fn causes(
    status: &tonic::Status,
) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(status), |err| err.source())
}

/// A status tonic made up because the connection failed, as opposed to an
/// `UNAVAILABLE` the upstream server itself returned.
fn is_transport_failure(status: &tonic::Status) -> bool {
    // h2: the connection or stream broke under us (a peer that died
    // mid-call resets its streams), not an answer of the server.
    let broke = causes(status).any(|err| {
        err.is::<tonic::transport::Error>() || err.is::<std::io::Error>() || err.is::<h2::Error>()
    });
    broke
        || status.code() == tonic::Code::Unavailable
            && status.metadata().is_empty()
            && status.message().contains("connect")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_map_to_triton_statuses() {
        use tonic::Code as C;
        let cases = [
            (C::InvalidArgument, 400),
            (C::Unknown, 400),
            (C::AlreadyExists, 400),
            (C::Cancelled, 400),
            (C::Internal, 500),
            (C::NotFound, 404),
            (C::Unavailable, 503),
            (C::Unimplemented, 501),
            (C::DeadlineExceeded, 504),
        ];
        for (code, http) in cases {
            assert_eq!(Kind::from_grpc(code).status().0, http, "{code:?}");
        }
    }

    #[test]
    fn upstream_statuses_round_trip_to_grpc() {
        use tonic::Code as C;
        let codes = [
            C::InvalidArgument,
            C::NotFound,
            C::Internal,
            C::Unavailable,
            C::Unimplemented,
            C::Unknown,
            C::AlreadyExists,
            C::FailedPrecondition,
            C::ResourceExhausted,
            C::PermissionDenied,
        ];
        for code in codes {
            let upstream = tonic::Status::new(code, "as the server said");
            let status = Error::from_status(&upstream).to_status();
            assert_eq!(status.code(), code);
            assert_eq!(status.message(), "as the server said");
        }
        let ours = Error::new(Kind::UpstreamTimeout, "late").to_status();
        assert_eq!(ours.code(), C::DeadlineExceeded);
    }

    #[test]
    fn v1_answers_are_400_with_a_status_code() {
        use crate::proto::v1::RequestStatusCode as V1;
        let cases = [
            (Kind::InvalidArg, 400, V1::InvalidArg),
            (Kind::NotFound, 400, V1::NotFound),
            (Kind::Internal, 400, V1::Internal),
            (Kind::UpstreamUnreachable, 400, V1::Unavailable),
            (
                Kind::ClientOther(tonic::Code::AlreadyExists),
                400,
                V1::AlreadyExists,
            ),
            (Kind::ClientOther(tonic::Code::Cancelled), 400, V1::Unknown),
            (Kind::MethodNotAllowed, 405, V1::Unsupported),
            (Kind::MissingRpc, 400, V1::Unsupported),
            (
                Kind::MessageTooLarge(tonic::Code::ResourceExhausted),
                400,
                V1::InvalidArg,
            ),
        ];
        for (kind, http, code) in cases {
            assert_eq!(kind.v1_status(), (http, code), "{kind:?}");
        }
    }

    #[test]
    fn durations_keep_a_unit_that_does_not_round_them_away() {
        use std::time::Duration as D;
        let cases = [
            (D::ZERO, "0 ns"),
            (D::from_nanos(7), "7 ns"),
            (D::from_micros(5), "5 µs"),
            (D::from_nanos(4_750), "4.75 µs"),
            (D::from_micros(47_500), "47.5 ms"),
            (D::from_millis(100), "100 ms"),
            (D::from_millis(9_950), "9950 ms"),
            (D::from_secs(60), "60 s"),
        ];
        for (d, text) in cases {
            assert_eq!(duration_text(d), text, "{d:?}");
        }
    }

    #[test]
    fn every_passed_deadline_has_one_text() {
        let addr: std::net::SocketAddr = "127.0.0.1:8001".parse().unwrap();
        let deadline = std::time::Duration::from_micros(5);
        let expected =
            "upstream 127.0.0.1:8001 did not answer within the request's deadline of 5 µs";
        assert_eq!(Error::deadline_passed(addr, deadline).message, expected);
        // grpc core's status, tonic's own timer.
        for status in [
            tonic::Status::deadline_exceeded("Deadline Exceeded"),
            tonic::Status::cancelled("Timeout expired"),
        ] {
            let error = Error::from_upstream(&status, addr, deadline);
            assert_eq!((error.status(), error.message.as_str()), (504, expected));
        }
        // What the server itself says keeps its text.
        let queued = tonic::Status::unavailable("Request timeout expired");
        let error = Error::from_upstream(&queued, addr, deadline);
        assert_eq!(
            (error.status(), error.message.as_str()),
            (503, "Request timeout expired")
        );
    }

    #[test]
    fn message_size_refusals_name_whose_limit_by_code_and_origin() {
        use tonic::Code as C;
        let core = tonic::Status::resource_exhausted(
            "Received message larger than max (9437232 vs. 8388608)",
        );
        let error = Error::from_status(&core);
        assert_eq!(error.kind, Kind::MessageTooLarge(C::ResourceExhausted));
        assert_eq!(error.status(), 400);
        assert!(error.message.starts_with(
            "a gRPC message of 9437232 bytes is over the upstream's limit of 8388608 bytes"
        ));
        // gRPC clients get the server's words.
        assert_eq!(error.to_status().message(), core.message());
        assert_eq!(error.to_status().code(), C::ResourceExhausted);
        // tonic's codec on our side: no metadata, the gateway's setting.
        let tonic =
            "Error, decoded message length too large: found 600 bytes, the limit is: 500 bytes";
        let ours = Error::from_status(&tonic::Status::out_of_range(tonic));
        assert_eq!(ours.kind, Kind::MessageTooLarge(C::OutOfRange));
        assert!(ours
            .message
            .contains("the gateway's limit of 500 bytes: raise upstream.max_message_bytes"));
        assert_eq!(ours.relayed, None);
        // The same sent by a tonic server (a trailers-only answer's headers).
        let mut headers = http::HeaderMap::new();
        headers.insert("content-type", "application/grpc".parse().unwrap());
        let theirs = tonic::Status::with_metadata(
            C::OutOfRange,
            tonic,
            tonic::metadata::MetadataMap::from_headers(headers),
        );
        let error = Error::from_status(&theirs);
        assert!(error.message.contains("the upstream's limit of 500 bytes"));
        // Anything else keeps its text: other codes, one number, a size within.
        for other in [
            tonic::Status::invalid_argument("Received message larger than max (9 vs. 8)"),
            tonic::Status::resource_exhausted(
                "Cannot return body with more than 4GB of data but got 5000000000 bytes",
            ),
            tonic::Status::resource_exhausted("quota 5 vs. 8"),
        ] {
            assert_eq!(Error::from_status(&other).message, other.message());
        }
    }

    #[test]
    fn openai_bodies_carry_type_param_and_code() {
        let refused = Error::invalid("n must be 1").about("n");
        assert_eq!(
            String::from_utf8(refused.openai_body()).unwrap(),
            r#"{"error":{"message":"n must be 1","type":"invalid_request_error","param":"n","code":null}}"#
        );
        let value: serde_json::Value =
            serde_json::from_slice(&Error::not_found("no \"m\"").openai_body()).unwrap();
        assert_eq!(value["error"]["code"], "model_not_found");
        assert_eq!(value["error"]["message"], "no \"m\"");
        assert_eq!(value["error"]["param"], serde_json::Value::Null);
        for (kind, status) in [
            (Kind::Unauthorized, 401),
            (Kind::TooManyRequests, 429),
            (Kind::UpstreamUnreachable, 503),
        ] {
            let error = Error::new(kind, "x");
            assert_eq!(error.status(), status);
            let body: serde_json::Value = serde_json::from_slice(&error.openai_body()).unwrap();
            assert_eq!(body["error"]["type"], kind.openai_type().0);
        }
    }

    #[test]
    fn body_escapes_like_rapidjson() {
        let e = Error::invalid("a\"b\n\u{1}");
        assert_eq!(e.body(), b"{\"error\":\"a\\\"b\\n\\u0001\"}".to_vec());
    }
}
