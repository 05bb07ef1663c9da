//! The one request every connection sends, built once from the command
//! line: an HTTP/1.1 request (head and body) as a byte string, or a framed
//! gRPC `ModelInfer` message, and what its answer must hold.

use std::fmt::Write as _;
use std::net::SocketAddr;

use bytes::Bytes;

use crate::cli::Args;
use crate::grpc;
use crate::shm::Regions;
use crate::workload::{self, Expected, Workload};

const DEFAULT_INFER_PATH: &str = "/v2/models/add_sub/infer";

/// The request, and how to check its answer.
pub(crate) struct Request {
    pub(crate) addr: SocketAddr,
    /// gRPC (`bytes` is the framed message) or HTTP/1.1 (head and body).
    pub(crate) grpc: bool,
    pub(crate) bytes: Bytes,
    pub(crate) body_len: usize,
    /// What a built-in workload's answer holds (None for `--body-file`).
    pub(crate) expected: Option<Expected>,
    /// The `Host` header's value.
    pub(crate) authority: String,
    /// Workload w6's shared memory, where its answers are.
    pub(crate) shm: Option<Regions>,
}

impl Request {
    /// The body (for gRPC, the whole framed message).
    pub(crate) fn body(&self) -> &[u8] {
        &self.bytes[self.bytes.len() - self.body_len..]
    }
}

/// An HTTP/1.1 request's bytes with the header `name: value` after its
/// request line (the open loop's high-priority class).
pub(crate) fn with_header(request: &[u8], name: &str, value: &str) -> Bytes {
    let line_end = request
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(request.len(), |i| i + 2);
    let header = format!("{name}: {value}\r\n");
    [
        &request[..line_end],
        header.as_bytes(),
        &request[line_end..],
    ]
    .concat()
    .into()
}

/// The URL's parts: where to connect, the Host header, the path.
struct Url {
    addr: SocketAddr,
    authority: String,
    path: String,
    grpc: bool,
}

/// `http://HOST:PORT/path` or `grpc://HOST:PORT`.
fn parse_url(url: &str) -> Result<Url, String> {
    let (rest, grpc) = match (url.strip_prefix("http://"), url.strip_prefix("grpc://")) {
        (Some(rest), _) => (rest, false),
        (None, Some(rest)) => (rest, true),
        _ => {
            return Err(format!(
                "only http:// and grpc:// URLs are supported, got {url:?}"
            ))
        }
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let addr = authority
        .parse::<SocketAddr>()
        .map_err(|e| format!("{url:?}: the host must be IP:PORT ({e})"))?;
    Ok(Url {
        addr,
        authority: authority.to_string(),
        path: path.to_string(),
        grpc,
    })
}

/// The request the command line asks for.
pub(crate) fn build(args: &Args) -> Result<Request, String> {
    let url = parse_url(&args.url)?;
    if url.grpc {
        build_grpc(args, url.addr)
    } else {
        build_http(args, url)
    }
}

/// The gRPC request of a binary workload.
fn build_grpc(args: &Args, addr: SocketAddr) -> Result<Request, String> {
    let w = match args.workload {
        Some(w) if w.binary() && args.headers.is_empty() && args.rate_mb_s.is_none() => w,
        _ => {
            return Err(
                "grpc:// takes a binary workload (w1, w3), no --header, no --rate-mb-s".into(),
            )
        }
    };
    let n = args.elements.unwrap_or_else(|| w.default_elements());
    let (a, b, expected) = workload::inputs(w, n);
    let bytes = grpc::message(&a, &b);
    Ok(Request {
        addr,
        grpc: true,
        body_len: bytes.len(),
        bytes,
        expected: Some(expected),
        authority: addr.to_string(),
        shm: None,
    })
}

/// A POST of the workload's or the file's body, or a GET without either.
fn build_http(args: &Args, url: Url) -> Result<Request, String> {
    let mut path = url.path;
    let mut headers = Vec::new();
    let mut shm = None;
    let (body, expected) = match (args.workload, &args.body_file) {
        (Some(w), _) => {
            let n = args.elements.unwrap_or_else(|| w.default_elements());
            let (a, b, expected) = workload::inputs(w, n);
            let (body, extra) = if w == Workload::SharedMemory {
                let regions = Regions::create(&args.shm_dir, &a, &b)?;
                let body = regions.body();
                shm = Some(regions);
                body
            } else {
                workload::body(w, &a, &b)
            };
            headers.extend(extra);
            if path.is_empty() || path == "/" {
                path = DEFAULT_INFER_PATH.to_string();
            }
            (Some(body), Some(expected))
        }
        (None, Some(file)) => {
            let body =
                std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            (Some(body), None)
        }
        (None, None) => (None, None),
    };
    if path.is_empty() {
        path = "/".to_string();
    }
    for h in &args.headers {
        match h.split_once(':') {
            Some((name, _)) if !name.trim().is_empty() => headers.push(h.trim().to_string()),
            _ => return Err(format!("--header must be 'Name: value', got {h:?}")),
        }
    }
    let method = if body.is_some() { "POST" } else { "GET" };
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", url.authority);
    for h in &headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    let body = body.unwrap_or_default();
    if method == "POST" {
        let _ = write!(head, "Content-Length: {}\r\n", body.len());
    }
    head.push_str("\r\n");
    let mut bytes = Vec::with_capacity(head.len() + body.len());
    bytes.extend_from_slice(head.as_bytes());
    bytes.extend_from_slice(&body);
    Ok(Request {
        addr: url.addr,
        grpc: false,
        bytes: Bytes::from(bytes),
        body_len: body.len(),
        expected,
        authority: url.authority,
        shm,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn request(argv: &[&str]) -> Result<Request, String> {
        build(&Args::try_parse_from([&["load"], argv].concat()).unwrap())
    }

    #[test]
    fn a_workload_is_posted_to_add_sub_with_its_length() {
        let r = request(&["--url", "http://127.0.0.1:8000", "--workload", "w2"]).unwrap();
        let text = String::from_utf8(r.bytes.to_vec()).unwrap();
        let head = format!(
            "POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{{",
            r.body_len
        );
        assert!(text.starts_with(&head), "{text}");
        assert_eq!(r.body()[0], b'{');
        assert!(!r.grpc && r.expected.is_some());
    }

    #[test]
    fn without_a_body_it_is_a_get_of_the_path_with_the_headers() {
        let r = request(&[
            "--url",
            "http://[::1]:9/v2/health/ready",
            "--header",
            "X-A: 1",
        ])
        .unwrap();
        assert_eq!(
            &r.bytes[..],
            b"GET /v2/health/ready HTTP/1.1\r\nHost: [::1]:9\r\nX-A: 1\r\n\r\n"
        );
        assert_eq!(r.body_len, 0);
    }

    #[test]
    fn a_header_goes_after_the_request_line() {
        let r = request(&["--url", "http://127.0.0.1:9/x", "--header", "X-A: 1"]).unwrap();
        assert_eq!(
            &with_header(&r.bytes, "x-priority", "1")[..],
            b"GET /x HTTP/1.1\r\nx-priority: 1\r\nHost: 127.0.0.1:9\r\nX-A: 1\r\n\r\n"
        );
    }

    #[test]
    fn grpc_takes_a_binary_workload_only() {
        let r = request(&["--url", "grpc://127.0.0.1:8001", "--workload", "w1"]).unwrap();
        assert!(r.grpc);
        assert_eq!(r.body(), &r.bytes[..]);
        for argv in [
            &["--url", "grpc://127.0.0.1:8001", "--workload", "w2"][..],
            &["--url", "grpc://127.0.0.1:8001"],
            &[
                "--url",
                "grpc://127.0.0.1:8001",
                "--workload",
                "w1",
                "--rate-mb-s",
                "1",
            ],
        ] {
            assert!(request(argv).is_err(), "{argv:?}");
        }
    }

    #[test]
    fn bad_urls_and_headers_are_refused() {
        for argv in [
            &["--url", "https://127.0.0.1:1"][..],
            &["--url", "http://localhost:1"],
            &["--url", "http://127.0.0.1:1", "--header", "no colon"],
        ] {
            assert!(request(argv).is_err(), "{argv:?}");
        }
    }
}
