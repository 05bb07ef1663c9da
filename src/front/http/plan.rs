//! The plan of one HTTP request, made once as its head arrives
//! (`Pipeline::plan`) and taken by every later step: its route (and so
//! its model), the headers the pipeline acts on, each read here and
//! nowhere else, whether the body is
//! read whole or streamed from the end of its JSON header, and how the
//! answer is encoded and whether it may stream. The session reads the
//! body as the plan says; the handler checks access and traces with it;
//! `/infer` decodes and answers with it.

use bytes::Bytes;
use http::{HeaderValue, Method};

use crate::body::STREAM_FROM;
use crate::config::Limits;
use crate::front::http::route::Route;
use crate::model::{InferRequest, OutputKind};
use crate::wire::{compress, v2_request};

/// The header that splits a binary body (v2 §2.1).
const IHCL: &str = "Inference-Header-Content-Length";

/// What a request's head decides (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The route, classified once from the method-independent target.
    pub(crate) route: Route,
    /// `Inference-Header-Content-Length` as the client wrote it: the JSON
    /// header's length of a binary body (its errors quote it).
    pub(crate) header_length: Option<Bytes>,
    /// The body's `Content-Encoding`; `Err` for one not supported.
    pub(crate) body_encoding: Result<compress::Encoding, ()>,
    /// The answer's encoding, negotiated from `Accept-Encoding` (v2
    /// §4.1).
    pub(crate) answer_encoding: compress::Encoding,
    /// `Content-Length`, when the client declared one (not chunked).
    pub(crate) declared_length: Option<u64>,
    /// `Expect: 100-continue`: the client waits for a go-ahead before
    /// sending the body.
    pub(crate) expects_continue: bool,
    /// Read the body whole, or stream it (see [`Body`]).
    pub(crate) body: Body,
    /// `traceparent` and `tracestate` (W3C trace context).
    pub(crate) trace: (Option<Bytes>, Option<Bytes>),
    /// `Authorization` (a bearer API key).
    pub(crate) authorization: Option<Bytes>,
}

/// How the session reads a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    Whole,
    /// A binary `/infer` body: read up to the end of its JSON header
    /// (`header_len` bytes), the rest streamed upstream as it arrives.
    /// A body that ends before that is whole after all.
    Streamed {
        header_len: usize,
    },
}

impl Plan {
    /// The plan of a request for `route` with these `headers` (names as
    /// the client wrote them).
    pub(crate) fn new(
        route: Route,
        method: &Method,
        headers: &[(String, HeaderValue)],
        limits: &Limits,
    ) -> Plan {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_bytes())
        };
        // Kept beyond the plan: copied (the rest are only read here).
        let kept = |name: &str| header(name).map(Bytes::copy_from_slice);
        let mut plan = Plan {
            route,
            header_length: kept(IHCL),
            body_encoding: compress::request_encoding(header("Content-Encoding")),
            answer_encoding: compress::negotiate(header("Accept-Encoding")),
            declared_length: header("Content-Length")
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(|v| v.trim().parse().ok()),
            expects_continue: header("Expect")
                .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"100-continue")),
            body: Body::Whole,
            trace: (kept("traceparent"), kept("tracestate")),
            authorization: kept("Authorization"),
        };
        plan.body = plan.body_plan(method, limits);
        plan
    }

    /// Streamed are `/infer` bodies with a binary tail
    /// (`Inference-Header-Content-Length` above 0, within the JSON size
    /// limit), not compressed, of `body::STREAM_FROM` bytes or more, or of a
    /// length not declared (chunked). Other bodies are read whole.
    fn body_plan(&self, method: &Method, limits: &Limits) -> Body {
        if !matches!(self.route, Route::Infer(_)) || method != Method::POST || !self.body_identity()
        {
            return Body::Whole;
        }
        let Some(header_len) = self.binary_header_len() else {
            return Body::Whole;
        };
        if header_len > limits.max_input_size {
            return Body::Whole;
        }
        match self.declared_length {
            Some(n) if n < STREAM_FROM || n < header_len as u64 => Body::Whole,
            _ => Body::Streamed { header_len },
        }
    }

    /// The JSON header's length of a binary body as Triton reads the
    /// header (`atoi`): `None` without one, or when it is not above 0.
    pub(crate) fn binary_header_len(&self) -> Option<usize> {
        let n = v2_request::atoi(self.header_length.as_deref()?);
        usize::try_from(n).ok().filter(|n| *n > 0)
    }

    /// The body is sent as it is (no `Content-Encoding`, or `identity`).
    pub(crate) fn body_identity(&self) -> bool {
        self.body_encoding == Ok(compress::Encoding::Identity)
    }

    /// Whether the answer to `request` (of a body that streamed) streams
    /// too: every output it asks for is binary (none in JSON, classified
    /// or in shared memory), and the client accepts it uncompressed.
    pub(crate) fn answer_streams(&self, request: &InferRequest) -> bool {
        let listed_binary = request
            .outputs
            .iter()
            .all(|o| o.kind == OutputKind::Binary && o.classification == 0);
        let unlisted_binary = request.unlisted_kind == Some(OutputKind::Binary);
        matches!(self.body, Body::Streamed { .. })
            && listed_binary
            && (unlisted_binary || !request.outputs.is_empty())
            && self.answer_encoding == compress::Encoding::Identity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelRef;

    fn infer() -> Route {
        Route::Infer(ModelRef {
            name: "m".into(),
            version: String::new(),
        })
    }

    fn plan_of(route: Route, method: Method, headers: &[(&str, &str)]) -> Plan {
        let headers: Vec<(String, HeaderValue)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), HeaderValue::from_str(v).unwrap()))
            .collect();
        Plan::new(route, &method, &headers, &Limits::default())
    }

    fn plan(headers: &[(&str, &str)]) -> Plan {
        plan_of(infer(), Method::POST, headers)
    }

    #[test]
    fn headers_are_read_whatever_their_case() {
        let p = plan(&[
            ("inference-header-content-length", " 12"),
            ("CONTENT-ENCODING", "gzip"),
            ("accept-encoding", "deflate"),
            ("content-length", " 40 "),
            ("TraceParent", "00-x"),
            ("authorization", "Bearer k"),
        ]);
        assert_eq!(p.binary_header_len(), Some(12));
        assert_eq!(p.header_length.as_deref(), Some(&b" 12"[..]));
        assert_eq!(p.body_encoding, Ok(compress::Encoding::Gzip));
        assert!(!p.body_identity());
        assert_eq!(p.answer_encoding, compress::Encoding::Deflate);
        assert_eq!(p.declared_length, Some(40));
        assert_eq!(p.trace.0.as_deref(), Some(&b"00-x"[..]));
        assert_eq!(p.trace.1, None);
        assert_eq!(p.authorization.as_deref(), Some(&b"Bearer k"[..]));
    }

    #[test]
    fn no_headers_is_a_json_body_and_answer_sent_as_they_are() {
        let p = plan(&[]);
        assert_eq!(p.binary_header_len(), None);
        assert!(p.body_identity());
        assert_eq!(p.answer_encoding, compress::Encoding::Identity);
        assert_eq!(p.body, Body::Whole);
        assert_eq!(plan(&[(IHCL, "0")]).binary_header_len(), None);
        assert_eq!(plan(&[(IHCL, "-3")]).binary_header_len(), None);
        assert!(plan(&[("Content-Encoding", "br")]).body_encoding.is_err());
    }

    #[test]
    fn only_large_or_chunked_uncompressed_binary_infer_bodies_stream() {
        let big = (STREAM_FROM).to_string();
        let small = (STREAM_FROM - 1).to_string();
        let streamed = Body::Streamed { header_len: 10 };
        assert_eq!(
            plan(&[(IHCL, "10"), ("Content-Length", &big)]).body,
            streamed
        );
        assert_eq!(plan(&[(IHCL, "10")]).body, streamed, "chunked");
        assert_eq!(
            plan(&[(IHCL, "10"), ("Content-Length", &small)]).body,
            Body::Whole
        );
        assert_eq!(plan(&[("Content-Length", &big)]).body, Body::Whole, "JSON");
        let gzip = [(IHCL, "10"), ("Content-Encoding", "gzip")];
        assert_eq!(plan(&gzip).body, Body::Whole);
        let huge_header = (Limits::default().max_input_size + 1).to_string();
        assert_eq!(plan(&[(IHCL, &huge_header)]).body, Body::Whole);
        assert_eq!(
            plan_of(infer(), Method::GET, &[(IHCL, "10")]).body,
            Body::Whole
        );
        let generate = Route::Generate(ModelRef {
            name: "m".into(),
            version: String::new(),
        });
        assert_eq!(
            plan_of(generate, Method::POST, &[(IHCL, "10")]).body,
            Body::Whole
        );
    }

    #[test]
    fn only_all_binary_answers_stream_never_one_in_shared_memory() {
        use crate::model::{RequestedOutput, SharedMemory};
        let streamed = plan(&[(IHCL, "10")]);
        let output = |name: &str, kind| RequestedOutput {
            name: name.into(),
            classification: 0,
            kind,
            shared_memory: None,
        };
        let asking = |outputs: Vec<RequestedOutput>| InferRequest {
            outputs,
            ..InferRequest::default()
        };
        let binary = output("OUTPUT0", OutputKind::Binary);
        assert!(streamed.answer_streams(&asking(vec![binary.clone()])));
        // The bridge clears `shared_memory` once it holds the window
        // (app::shm); the kind stays, and decides.
        for shm in [
            None,
            Some(SharedMemory {
                region: "out".into(),
                offset: 0,
                byte_size: 64,
            }),
        ] {
            let in_shm = RequestedOutput {
                shared_memory: shm,
                ..output("OUTPUT1", OutputKind::SharedMemory)
            };
            assert!(!streamed.answer_streams(&asking(vec![binary.clone(), in_shm])));
        }
        let classified = RequestedOutput {
            classification: 2,
            ..binary.clone()
        };
        assert!(!streamed.answer_streams(&asking(vec![classified])));
        assert!(
            !plan(&[(IHCL, "10"), ("Content-Length", "100")]).answer_streams(&asking(vec![binary]))
        );
    }
}
