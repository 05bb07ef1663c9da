//! What a plain connection's first bytes say it speaks: the h2 preface
//! (h2c) or anything else (HTTP/1). TLS connections say it in ALPN.

use bytes::BytesMut;
use tokio::io::AsyncReadExt;

/// The h2 connection preface (RFC 9113 §3.4): its first bytes tell h2c
/// from HTTP/1 (no HTTP/1 method starts with `PRI *`).
pub(crate) const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the first bytes of a plain connection say it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http1,
    H2c,
}

/// Reads until the bytes tell the protocol: a byte that leaves the h2
/// preface decides HTTP/1, the whole preface decides h2c. Returns what was
/// read (to be put back) or `None` if the client closed first.
pub(crate) async fn sniff<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
) -> std::io::Result<Option<(Protocol, BytesMut)>> {
    let mut seen = BytesMut::with_capacity(1024);
    loop {
        if stream.read_buf(&mut seen).await? == 0 {
            return Ok(None);
        }
        let n = seen.len().min(H2_PREFACE.len());
        if seen[..n] != H2_PREFACE[..n] {
            return Ok(Some((Protocol::Http1, seen)));
        }
        if n == H2_PREFACE.len() {
            return Ok(Some((Protocol::H2c, seen)));
        }
    }
}
