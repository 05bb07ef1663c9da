//! The plan of one HTTP request: the headers the pipeline acts on, each
//! read once, as the request arrives (`HttpRequest::new`), and taken from
//! here by every later step: the session (stream the body or read it
//! whole), the decoder (split the body, inflate it), the answer (stream
//! it or not, compress it). The route and its model are the request's
//! [`Route`](crate::front::route::Route); whether the body is whole or
//! streamed is `HttpRequest::rest`.

use bytes::Bytes;

use crate::wire::{compress, v2_request};

/// The header that splits a binary body (protocol §2.1).
const IHCL: &str = "Inference-Header-Content-Length";

/// What the request's headers decide (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// `Inference-Header-Content-Length` as the client wrote it: the JSON
    /// header's length of a binary body (its errors quote it).
    pub(crate) header_length: Option<Bytes>,
    /// The body's `Content-Encoding`; `Err` for one not supported.
    pub(crate) body_encoding: Result<compress::Encoding, ()>,
    /// The answer's encoding, negotiated from `Accept-Encoding` (protocol
    /// §4.1).
    pub(crate) answer_encoding: compress::Encoding,
}

impl Plan {
    /// Reads the plan from `headers` (names as the client wrote them).
    pub(crate) fn read(headers: &[(String, Bytes)]) -> Plan {
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        };
        Plan {
            header_length: header(IHCL).cloned(),
            body_encoding: compress::request_encoding(
                header("Content-Encoding").map(Bytes::as_ref),
            ),
            answer_encoding: compress::negotiate(header("Accept-Encoding").map(Bytes::as_ref)),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(headers: &[(&str, &str)]) -> Plan {
        let headers: Vec<(String, Bytes)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), Bytes::copy_from_slice(v.as_bytes())))
            .collect();
        Plan::read(&headers)
    }

    #[test]
    fn headers_are_read_whatever_their_case() {
        let p = plan(&[
            ("inference-header-content-length", " 12"),
            ("CONTENT-ENCODING", "gzip"),
            ("accept-encoding", "deflate"),
        ]);
        assert_eq!(p.binary_header_len(), Some(12));
        assert_eq!(p.header_length.as_deref(), Some(&b" 12"[..]));
        assert_eq!(p.body_encoding, Ok(compress::Encoding::Gzip));
        assert!(!p.body_identity());
        assert_eq!(p.answer_encoding, compress::Encoding::Deflate);
    }

    #[test]
    fn no_headers_is_a_json_body_and_answer_sent_as_they_are() {
        let p = plan(&[]);
        assert_eq!(p.binary_header_len(), None);
        assert!(p.body_identity());
        assert_eq!(p.answer_encoding, compress::Encoding::Identity);
        assert_eq!(plan(&[(IHCL, "0")]).binary_header_len(), None);
        assert_eq!(plan(&[(IHCL, "-3")]).binary_header_len(), None);
        assert!(plan(&[("Content-Encoding", "br")]).body_encoding.is_err());
    }
}
