//! A write buffer under an HTTP/1 connection, so an answer's head and a
//! small body leave in one `send` instead of two.
//!
//! pingora's HTTP/1 session writes the head with one `write_all` and the
//! body with another, then flushes at the end of the answer. Its own
//! listener puts a one-segment write buffer under every accepted socket
//! for exactly this reason, but that buffer cannot be set from outside
//! pingora (`set_buffer` is crate-private), and tensorgate accepts its own
//! sockets (`server/listen.rs`). [`WriteBuffered`] is that buffer: tokio's
//! [`BufWriter`] plus the pingora connection traits, passed through.
//!
//! Writes at least [`CAPACITY`] long go straight to the socket (the buffer
//! is flushed first), so a large body is not copied here.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::{SslDigest, TlsRef};
use pingora_core::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter, ReadBuf};

/// Bytes held before a write goes out. A small inference answer (head and
/// JSON or binary body) fits; larger bodies bypass the buffer anyway. It is
/// allocated per connection, so it stays small: 10 000 connections hold
/// 40 MiB.
pub(crate) const CAPACITY: usize = 4096;

/// A connection whose writes are buffered until the session flushes.
#[derive(Debug)]
pub(crate) struct WriteBuffered {
    inner: BufWriter<Stream>,
}

impl WriteBuffered {
    /// Wraps an accepted connection (plain TCP or TLS).
    pub(crate) fn wrap(stream: Stream) -> Stream {
        Box::new(WriteBuffered {
            inner: BufWriter::with_capacity(CAPACITY, stream),
        })
    }

    fn raw(&self) -> &Stream {
        self.inner.get_ref()
    }
}

impl AsyncRead for WriteBuffered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteBuffered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[async_trait]
impl Shutdown for WriteBuffered {
    /// Sends what is still buffered, then closes the way the connection's
    /// own type does (a TLS close_notify, a TCP FIN).
    async fn shutdown(&mut self) {
        let _ = self.inner.flush().await;
        Shutdown::shutdown(&mut **self.inner.get_mut()).await;
    }
}

impl UniqueID for WriteBuffered {
    fn id(&self) -> UniqueIDType {
        self.raw().id()
    }
}

impl Ssl for WriteBuffered {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.raw().get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.raw().get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.raw().selected_alpn_proto()
    }
}

impl GetTimingDigest for WriteBuffered {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.raw().get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.raw().get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.raw().get_write_pending_time()
    }
}

impl GetProxyDigest for WriteBuffered {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.raw().get_proxy_digest()
    }
}

impl GetSocketDigest for WriteBuffered {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.raw().get_socket_digest()
    }
}

#[async_trait]
impl Peek for WriteBuffered {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.get_mut().try_peek(buf).await
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
}
