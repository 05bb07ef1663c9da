//! An HTTP/1 connection's byte stream: a write buffer, so an answer's head
//! and a small body leave in one `send` instead of two, and for plain TCP
//! the socket itself, so waiting for the next request needs no buffer.
//!
//! pingora's HTTP/1 session writes the head with one `write_all` and the
//! body with another, then flushes at the end of the answer. Its own
//! listener puts a one-segment write buffer under every accepted socket
//! for exactly this reason, but that buffer cannot be set from outside
//! pingora (`set_buffer` is crate-private), and tensorgate accepts its own
//! sockets (`server/listen.rs`). [`WriteBuffered`] is that buffer, with
//! the pingora connection traits.
//!
//! What an idle keep-alive connection holds is the edge's cost per open
//! connection, so nothing here is kept between answers: the buffer is
//! taken by an answer's first write and given back at its flush, and a
//! plain TCP connection is the tokio socket, not pingora's stream around
//! it, so [`WriteBuffered::tcp`] can wait for the next request's bytes
//! without a read buffer (`front::http::conn`). Writes at least
//! [`CAPACITY`] long go straight to the socket (what is held is sent
//! first), so a large body is not copied here.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::{SslDigest, TlsRef};
use pingora_core::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// Bytes held before a write goes out. A small inference answer (head and
/// JSON or binary body) fits; larger bodies bypass the buffer anyway.
pub(crate) const CAPACITY: usize = 4096;

/// A connection whose writes are buffered until the session flushes.
#[derive(Debug)]
pub(crate) struct WriteBuffered {
    inner: Inner,
    /// What is held for the flush; no allocation between answers.
    held: Vec<u8>,
    /// Of `held`, the bytes a flush has already written.
    sent: usize,
}

/// The connection under the buffer.
#[derive(Debug)]
enum Inner {
    /// Plain TCP, with its peer's addresses for the session.
    Tcp(TcpStream, Arc<SocketDigest>),
    /// Anything else pingora carries (TLS).
    Other(Stream),
}

impl WriteBuffered {
    /// Wraps an accepted connection (TLS, or any pingora stream).
    pub(crate) fn wrap(stream: Stream) -> Stream {
        Box::new(WriteBuffered::over(Inner::Other(stream)))
    }

    /// Wraps an accepted plain TCP connection.
    pub(crate) fn plain(tcp: TcpStream) -> Stream {
        let digest = Arc::new(SocketDigest::from_raw_fd(tcp.as_raw_fd()));
        Box::new(WriteBuffered::over(Inner::Tcp(tcp, digest)))
    }

    fn over(inner: Inner) -> WriteBuffered {
        WriteBuffered {
            inner,
            held: Vec::new(),
            sent: 0,
        }
    }

    /// The plain TCP socket under `stream`, if it is one of these over
    /// one: its readiness can be awaited without a buffer.
    pub(crate) fn tcp(stream: &Stream) -> Option<&TcpStream> {
        match &stream.as_any().downcast_ref::<WriteBuffered>()?.inner {
            Inner::Tcp(tcp, _) => Some(tcp),
            Inner::Other(_) => None,
        }
    }

    fn raw(&self) -> Option<&Stream> {
        match &self.inner {
            Inner::Tcp(..) => None,
            Inner::Other(stream) => Some(stream),
        }
    }

    /// Writes out what is held.
    fn poll_send_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            let wrote = self.inner.writer().poll_write(cx, &self.held[self.sent..]);
            match ready!(wrote) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.sent += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        self.held.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Sends what is held and gives the buffer back.
    fn poll_release(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_send_held(cx))?;
        self.held = Vec::new();
        Poll::Ready(Ok(()))
    }
}

impl Inner {
    fn writer(&mut self) -> Pin<&mut (dyn AsyncWrite + Unpin + Send)> {
        match self {
            Inner::Tcp(tcp, _) => Pin::new(tcp),
            Inner::Other(stream) => Pin::new(stream),
        }
    }
}

impl AsyncRead for WriteBuffered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Tcp(tcp, _) => Pin::new(tcp).poll_read(cx, buf),
            Inner::Other(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteBuffered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.held.len() + buf.len() > CAPACITY {
            ready!(self.poll_send_held(cx))?;
        }
        if buf.len() >= CAPACITY {
            return self.inner.writer().poll_write(cx, buf);
        }
        if self.held.capacity() == 0 {
            self.held.reserve_exact(CAPACITY);
        }
        self.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_release(cx))?;
        self.inner.writer().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_release(cx))?;
        self.inner.writer().poll_shutdown(cx)
    }
}

#[async_trait]
impl Shutdown for WriteBuffered {
    /// Sends what is still buffered, then closes the way the connection's
    /// own type does (a TLS close_notify, a TCP FIN).
    async fn shutdown(&mut self) {
        let _ = self.flush().await;
        match &mut self.inner {
            Inner::Tcp(tcp, _) => {
                let _ = tcp.shutdown().await;
            }
            Inner::Other(stream) => Shutdown::shutdown(&mut **stream).await,
        }
    }
}

impl UniqueID for WriteBuffered {
    fn id(&self) -> UniqueIDType {
        match &self.inner {
            Inner::Tcp(tcp, _) => tcp.as_raw_fd(),
            Inner::Other(stream) => stream.id(),
        }
    }
}

impl Ssl for WriteBuffered {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.raw()?.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.raw()?.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.raw()?.selected_alpn_proto()
    }
}

impl GetTimingDigest for WriteBuffered {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.raw()
            .map(|s| s.get_timing_digest())
            .unwrap_or_default()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.raw()
            .map(|s| s.get_read_pending_time())
            .unwrap_or_default()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.raw()
            .map(|s| s.get_write_pending_time())
            .unwrap_or_default()
    }
}

impl GetProxyDigest for WriteBuffered {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.raw()?.get_proxy_digest()
    }
}

impl GetSocketDigest for WriteBuffered {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        match &self.inner {
            Inner::Tcp(_, digest) => Some(digest.clone()),
            Inner::Other(stream) => stream.get_socket_digest(),
        }
    }
}

#[async_trait]
impl Peek for WriteBuffered {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        match &mut self.inner {
            Inner::Tcp(..) => Ok(false),
            Inner::Other(stream) => stream.try_peek(buf).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A head and a small body written separately reach the peer only at
    /// the flush, and together; a large write is not held back.
    #[tokio::test]
    async fn small_writes_wait_for_the_flush() {
        let (ours, mut peer) = tokio::io::duplex(1 << 20);
        let mut stream = WriteBuffered::wrap(Box::new(ours));
        stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        stream.write_all(b"{}").await.unwrap();
        let mut byte = [0u8; 1];
        let early = tokio::time::timeout(Duration::ZERO, peer.read(&mut byte)).await;
        assert!(early.is_err(), "nothing leaves before the flush");
        stream.flush().await.unwrap();
        let mut got = vec![0u8; 21];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"HTTP/1.1 200 OK\r\n\r\n{}");

        let big = vec![7u8; CAPACITY];
        stream.write_all(&big).await.unwrap();
        let mut got = vec![0u8; CAPACITY];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(got, big);
    }

    /// Between answers nothing is held: the buffer an answer's first
    /// write took is given back at its flush.
    #[tokio::test]
    async fn the_buffer_is_given_back_at_the_flush() {
        let (ours, mut peer) = tokio::io::duplex(1 << 20);
        let mut stream = WriteBuffered::over(Inner::Other(Box::new(ours)));
        assert_eq!(stream.held.capacity(), 0);
        stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        assert!(stream.held.capacity() >= CAPACITY);
        stream.flush().await.unwrap();
        assert_eq!(stream.held.capacity(), 0);
        let mut got = vec![0u8; 19];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"HTTP/1.1 200 OK\r\n\r\n");
    }

    /// A plain TCP connection is the socket itself (its readiness can be
    /// awaited, its addresses are the session's); anything else is not.
    #[tokio::test]
    async fn a_plain_connection_is_its_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let plain = WriteBuffered::plain(accepted);
        assert!(WriteBuffered::tcp(&plain).is_some());
        let peer = plain
            .get_socket_digest()
            .and_then(|d| d.peer_addr().cloned());
        assert_eq!(
            peer.and_then(|a| a.as_inet().copied()),
            Some(client.local_addr().unwrap())
        );
        let (ours, _peer) = tokio::io::duplex(64);
        assert!(WriteBuffered::tcp(&WriteBuffered::wrap(Box::new(ours))).is_none());
    }
}
