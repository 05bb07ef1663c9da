//! The gateway's own small HTTP request/response types, so the pipeline is
//! independent of pingora (and testable without a socket). `session.rs`
//! converts to and from pingora's types.

use bytes::Bytes;
use http::{HeaderValue, Method};

use crate::body::BodyRest;
use crate::error::Error;

/// The `Via` value of every answer (RFC 9110 §7.6.3): the protocol the
/// request came in with (h2 or HTTP/1.1; known even when its head was
/// refused) and the gateway's name, so a client can tell it is talking
/// through tensorgate while the server metadata is the upstream's.
pub(crate) fn via(http2: bool) -> &'static str {
    if http2 {
        "2 tensorgate"
    } else {
        "1.1 tensorgate"
    }
}

/// The 413 of a body above `limit`, naming the setting that raises it.
pub(crate) fn too_large(size: u64, limit: usize, setting: &str) -> Error {
    Error::new(
        crate::error::Kind::PayloadTooLarge,
        format!("request body of {size} bytes exceeds the maximum allowed size of {limit} bytes. Use {setting} to increase the limit."),
    )
}

#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: Method,
    /// Raw path without the query string.
    pub path: String,
    /// Header names as the client wrote them (case preserved, v2 §4.3),
    /// and the values as they came: pingora's, which share the buffer the
    /// head was read into, so taking one copies nothing.
    pub headers: Vec<(String, HeaderValue)>,
    /// The body; of a streamed `/infer` body, only what came with its
    /// JSON header (at least the header).
    pub body: Bytes,
    /// The client's IP (rate and concurrency limits), when known.
    pub peer: Option<std::net::IpAddr>,
    /// The rest of a streamed body, still arriving (the plan said to
    /// stream it, and it did not end with its JSON header).
    pub(crate) rest: Option<StreamedRest>,
}

/// The part of a streamed body that follows `HttpRequest::body`.
#[derive(Debug, Clone)]
pub(crate) struct StreamedRest {
    pub(crate) rest: BodyRest,
    /// Its length, when the client declared the body's (`Content-Length`).
    pub(crate) len: Option<u64>,
}

impl HttpRequest {
    /// A request whose whole body is in hand, its header values given as
    /// bytes (the in-process front and tests). A value HTTP does not allow
    /// (a control character) is left out, as no HTTP/1 head read off a
    /// socket could carry it.
    pub fn new(
        method: Method,
        path: impl Into<String>,
        headers: Vec<(String, Bytes)>,
        body: Bytes,
    ) -> HttpRequest {
        let headers = headers
            .into_iter()
            .filter_map(|(name, value)| Some((name, HeaderValue::from_maybe_shared(value).ok()?)))
            .collect();
        HttpRequest::with_values(method, path, headers, body)
    }

    /// A request whose whole body is in hand, its headers as read.
    pub(crate) fn with_values(
        method: Method,
        path: impl Into<String>,
        headers: Vec<(String, HeaderValue)>,
        body: Bytes,
    ) -> HttpRequest {
        HttpRequest {
            method,
            path: path.into(),
            headers,
            body,
            peer: None,
            rest: None,
        }
    }

    /// The body's length: what is in hand and, when declared, the rest.
    pub fn body_len(&self) -> u64 {
        let rest = self.rest.as_ref().and_then(|r| r.len).unwrap_or(0);
        self.body.len() as u64 + rest
    }

    /// First header with this name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    /// Body chunks, written in order (binary outputs stay separate `Bytes`).
    pub body: Vec<Bytes>,
}

impl HttpResponse {
    pub fn new(status: u16, content_type: &str, body: Vec<Bytes>) -> HttpResponse {
        HttpResponse {
            status,
            headers: vec![("Content-Type", content_type.to_string())],
            body,
        }
    }

    /// 200 with a JSON body.
    pub fn json(body: Vec<u8>) -> HttpResponse {
        HttpResponse::new(200, "application/json", vec![Bytes::from(body)])
    }

    /// An empty body with the given status and content type.
    pub fn empty(status: u16, content_type: &str) -> HttpResponse {
        HttpResponse::new(status, content_type, Vec::new())
    }

    pub fn error(error: &Error) -> HttpResponse {
        let mut response = HttpResponse::new(
            error.status(),
            "application/json",
            vec![Bytes::from(error.body())],
        );
        for (name, value) in error.extra_headers() {
            response.headers.push((name, (*value).to_string()));
        }
        response
    }

    pub fn body_len(&self) -> usize {
        self.body.iter().map(Bytes::len).sum()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The whole body in one buffer (tests and small answers).
    pub fn body_bytes(&self) -> Vec<u8> {
        self.body.concat()
    }
}

/// An answer whose body is produced while it is sent (Server-Sent Events
/// of `/generate_stream`). Status and headers are known up front; the body
/// is every chunk received from `body` until it closes. Dropping the
/// receiver tells the producer the client is gone, and the producer then
/// cancels its upstream call. The channel is bounded: a slow reader stops
/// the producer, which stops reading the upstream (backpressure).
#[derive(Debug)]
pub struct StreamedResponse {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    /// The body's first chunk, known with the head (a streamed `/infer`
    /// answer's JSON header, `/generate_stream`'s first event).
    pub first: Option<Bytes>,
    pub body: tokio::sync::mpsc::Receiver<Bytes>,
    /// The body's length, when known before its first byte (a binary
    /// `/infer` answer): sent as `Content-Length`, and a body that ends
    /// short of it was cut off. `None`: chunked (`/generate_stream`).
    pub length: Option<u64>,
}

impl StreamedResponse {
    /// Waits for the whole body (for callers that cannot stream: the
    /// in-process `front::http::handle` and tests).
    pub async fn collect(mut self) -> HttpResponse {
        let mut body: Vec<Bytes> = self.first.take().into_iter().collect();
        while let Some(chunk) = self.body.recv().await {
            body.push(chunk);
        }
        HttpResponse {
            status: self.status,
            headers: self.headers,
            body,
        }
    }
}

/// What the pipeline answers: a complete response, or a streamed one.
#[derive(Debug)]
pub enum Answer {
    Full(HttpResponse),
    Streamed(StreamedResponse),
}
