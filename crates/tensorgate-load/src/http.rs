//! The HTTP/1.1 mode's connection: the pre-built request written with raw
//! non-blocking socket calls (tokio `net` only), the response read just
//! far enough to find its end (the head parsed by `httparse`, then
//! `Content-Length`, chunked or until close). Not hyper's client: this
//! loop is deliberately cheap, so the client's own work stays small beside
//! what it measures, and `--rate-mb-s` paces every socket call.

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpStream;

use crate::pace::{self, Pacer};
use crate::response::Response;

/// Read buffer per connection; large responses stream through it.
const READ_BUFFER: usize = 256 * 1024;
/// A response head larger than this is refused.
const MAX_HEAD: usize = 64 * 1024;
/// Bytes of an error response body kept for the report.
pub(crate) const ERROR_BODY_SAMPLE: usize = 300;

pub(crate) struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// `--rate-mb-s`: the request's writes, then the response's reads.
    pace: Option<(Pacer, Pacer)>,
}

/// Status line and the headers that matter.
struct Head {
    status: u16,
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    inference_header_len: Option<usize>,
    retry_after: bool,
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed by peer")
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    pub(crate) async fn connect(addr: SocketAddr, rate: Option<f64>) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: vec![0; READ_BUFFER],
            pos: 0,
            len: 0,
            pace: rate.map(|r| (Pacer::new(r), Pacer::new(r))),
        })
    }

    async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let step = if self.pace.is_some() {
                data.len().min(pace::CHUNK)
            } else {
                data.len()
            };
            match self.stream.try_write(&data[..step]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    data = &data[n..];
                    if let Some((write, _)) = &mut self.pace {
                        write.pass(n).await;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stream.writable().await?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads more bytes after `len`, compacting or growing the buffer.
    async fn fill(&mut self) -> io::Result<()> {
        if self.pos == self.len {
            self.pos = 0;
            self.len = 0;
        } else if self.len == self.buf.len() {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.len, 0);
                self.len -= self.pos;
                self.pos = 0;
            } else {
                let grown = self.buf.len() * 2;
                self.buf.resize(grown, 0);
            }
        }
        let end = if self.pace.is_some() {
            self.buf.len().min(self.len + pace::CHUNK)
        } else {
            self.buf.len()
        };
        loop {
            match self.stream.try_read(&mut self.buf[self.len..end]) {
                Ok(0) => return Err(eof()),
                Ok(n) => {
                    self.len += n;
                    if let Some((_, read)) = &mut self.pace {
                        read.pass(n).await;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stream.readable().await?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Bytes up to (excluding) `delim`, which is consumed; at most `max`.
    async fn read_until(&mut self, delim: &[u8], max: usize) -> io::Result<(usize, usize)> {
        let mut scanned = 0;
        loop {
            let window = &self.buf[self.pos + scanned..self.len];
            if let Some(i) = find(window, delim) {
                let start = self.pos;
                let end = self.pos + scanned + i;
                self.pos = end + delim.len();
                return Ok((start, end));
            }
            scanned = (self.len - self.pos).saturating_sub(delim.len() - 1);
            if self.len - self.pos > max {
                return Err(bad("response head or chunk line too long"));
            }
            // `fill` may move the unread bytes to the front; `scanned` is
            // relative to `pos`, so it stays valid.
            self.fill().await?;
        }
    }

    /// Consumes `n` body bytes, appending up to `keep` of them to `sink`.
    async fn consume(&mut self, mut n: u64, sink: &mut Vec<u8>, keep: usize) -> io::Result<()> {
        while n > 0 {
            if self.pos == self.len {
                self.fill().await?;
            }
            let take = ((self.len - self.pos) as u64).min(n) as usize;
            let room = keep.saturating_sub(sink.len()).min(take);
            sink.extend_from_slice(&self.buf[self.pos..self.pos + room]);
            self.pos += take;
            n -= take as u64;
        }
        Ok(())
    }

    async fn read_head(&mut self) -> io::Result<Head> {
        let (start, end) = self.read_until(b"\r\n\r\n", MAX_HEAD).await?;
        parse_head(&self.buf[start..end + 4])
    }

    /// Sends `request` and reads the whole response. The body is kept
    /// whole with `keep_all` (for the checked request); otherwise only a
    /// sample of a non-200 body is kept, for the report.
    pub(crate) async fn exchange(
        &mut self,
        request: &[u8],
        keep_all: bool,
    ) -> io::Result<Response> {
        self.write_all(request).await?;
        let head = self.read_head().await?;
        let keep = if keep_all {
            usize::MAX
        } else if head.status != 200 {
            ERROR_BODY_SAMPLE
        } else {
            0
        };
        let mut body = Vec::new();
        let mut body_len = 0;
        let mut close = head.close;
        if head.chunked {
            body_len = self.chunked_body(&mut body, keep).await?;
        } else if let Some(n) = head.content_length {
            self.consume(n, &mut body, keep).await?;
            body_len = n;
        } else if !(head.status == 204 || head.status == 304 || head.status < 200) {
            // No length: the body runs until the server closes.
            close = true;
            match self.consume(u64::MAX, &mut body, keep).await {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {}
                Err(e) => return Err(e),
                Ok(()) => unreachable!("u64::MAX bytes"),
            }
            body_len = body.len() as u64;
        }
        Ok(Response {
            status: head.status,
            close,
            inference_header_len: head.inference_header_len,
            retry_after: head.retry_after,
            body,
            body_len,
        })
    }

    /// A chunked body and its trailers; its length.
    async fn chunked_body(&mut self, body: &mut Vec<u8>, keep: usize) -> io::Result<u64> {
        let mut body_len = 0;
        loop {
            let (s, e) = self.read_until(b"\r\n", 1024).await?;
            let line = &self.buf[s..e + 2];
            let size = match httparse::parse_chunk_size(line) {
                Ok(httparse::Status::Complete((_, size))) => size,
                _ => {
                    let line = String::from_utf8_lossy(line);
                    return Err(bad(format!("bad chunk size line {line:?}")));
                }
            };
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    let (s, e) = self.read_until(b"\r\n", MAX_HEAD).await?;
                    if s == e {
                        return Ok(body_len);
                    }
                }
            }
            self.consume(size, body, keep).await?;
            body_len += size;
            let (s, e) = self.read_until(b"\r\n", 2).await?;
            if s != e {
                return Err(bad("chunk not followed by CRLF"));
            }
        }
    }
}

/// Headers a response head may have (more is refused).
const MAX_HEADERS: usize = 64;

/// The status and the headers that say where the body ends, from the
/// whole head (its empty line included).
fn parse_head(bytes: &[u8]) -> io::Result<Head> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(bad("response head cut short")),
        Err(e) => return Err(bad(format!("bad response head: {e}"))),
    }
    let mut head = Head {
        status: response.code.unwrap_or_default(),
        content_length: None,
        chunked: false,
        close: response.version == Some(0),
        inference_header_len: None,
        retry_after: false,
    };
    for header in response.headers.iter() {
        let (name, value) = (header.name, String::from_utf8_lossy(header.value));
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            head.content_length = Some(
                value
                    .parse()
                    .map_err(|_| bad(format!("bad Content-Length {value:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked = value.to_ascii_lowercase().contains("chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            if v.contains("close") {
                head.close = true;
            } else if v.contains("keep-alive") {
                head.close = false;
            }
        } else if name.eq_ignore_ascii_case("inference-header-content-length") {
            head.inference_header_len = value.parse().ok();
        } else if name.eq_ignore_ascii_case("retry-after") {
            head.retry_after = true;
        }
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A server on a loopback port that reads one request and writes
    /// `answer` in pieces of `piece` bytes (then closes); the client's
    /// `exchange` of that request.
    async fn exchange(answer: &'static [u8], piece: usize, keep_all: bool) -> io::Result<Response> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4];
            s.read_exact(&mut request).await.unwrap();
            for part in answer.chunks(piece) {
                s.write_all(part).await.unwrap();
                s.flush().await.unwrap();
            }
        });
        let mut conn = Conn::connect(addr, None).await?;
        let response = conn.exchange(b"GET\n", keep_all).await;
        server.await.unwrap();
        response
    }

    #[tokio::test]
    async fn a_chunked_body_with_trailers_is_read_to_its_end() {
        let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\
            Inference-Header-Content-Length: 3\r\n\r\n\
            3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for piece in [1, 7, answer.len()] {
            let r = exchange(answer, piece, true).await.unwrap();
            assert_eq!((r.status, r.close), (200, false));
            assert_eq!((&r.body[..], r.body_len), (&b"abcde"[..], 5));
            assert_eq!(r.inference_header_len, Some(3));
        }
    }

    #[tokio::test]
    async fn a_success_body_is_counted_and_an_error_body_sampled() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";
        let r = exchange(ok, 3, false).await.unwrap();
        assert_eq!((r.body.len(), r.body_len), (0, 4));
        let failed = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\
            content-length: 14\r\n\r\n{\"error\":\"no\"}";
        let r = exchange(failed, 100, false).await.unwrap();
        assert_eq!((r.status, r.close, r.retry_after), (400, true, false));
        assert_eq!(r.body, br#"{"error":"no"}"#);
        let busy = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n\
            content-length: 0\r\n\r\n";
        let r = exchange(busy, 100, false).await.unwrap();
        assert_eq!((r.status, r.retry_after), (503, true));
    }

    #[tokio::test]
    async fn without_a_length_the_body_runs_to_the_close() {
        let answer = b"HTTP/1.0 200 OK\r\n\r\nuntil the end";
        let r = exchange(answer, 5, true).await.unwrap();
        assert!(r.close);
        assert_eq!(r.body, b"until the end");
    }

    #[tokio::test]
    async fn a_cut_or_malformed_answer_is_an_error() {
        for answer in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"[..],
            b"SPDY/3 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert!(exchange(answer, 64, true).await.is_err());
        }
    }
}
