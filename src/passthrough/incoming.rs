//! The gRPC listener's connections before tonic sees them: each takes a
//! slot under the gateway's connection cap (over it, the socket is closed
//! at once), and must send its first bytes — the whole h2 preface for
//! h2c, the first byte of the TLS hello for TLS — within
//! `connections.handshake_timeout_ms`, or it is closed. Idle but live
//! peers are kept (gRPC channels stay open by design); dead ones are found
//! by h2 keep-alive pings (`connections.h2_ping_interval_ms`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::app::{OpenConnections, Slot, H2_PREFACE};

/// Accepted connections that passed the first-bytes deadline, as the
/// stream tonic serves. Accepting stops when tonic drops the stream.
pub(crate) fn incoming(
    listener: TcpListener,
    open: Arc<OpenConnections>,
    handshake: Duration,
    tls: bool,
) -> UnboundedReceiverStream<io::Result<EdgeIo>> {
    let (ready, stream) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = ready.closed() => return,
            };
            let Some(tcp) = crate::app::accepted_or_backoff(accepted).await else {
                continue;
            };
            // Over the cap: closed at once (a gRPC client retries elsewhere).
            let Some(slot) = open.try_open() else {
                continue;
            };
            let ready = ready.clone();
            tokio::spawn(async move {
                if let Ok(Ok(io)) =
                    tokio::time::timeout(handshake, EdgeIo::new(tcp, slot, tls)).await
                {
                    let _ = ready.send(Ok(io));
                }
            });
        }
    });
    UnboundedReceiverStream::new(stream)
}

/// A client connection with the bytes read while checking its start put
/// back in front, holding its slot under the cap until it closes.
pub(crate) struct EdgeIo {
    seen: BytesMut,
    tcp: TcpStream,
    info: TcpConnectInfo,
    _slot: Slot,
}

impl EdgeIo {
    /// Reads the first bytes: the h2 preface (or until a byte leaves it),
    /// or for TLS any byte.
    async fn new(mut tcp: TcpStream, slot: Slot, tls: bool) -> io::Result<EdgeIo> {
        // TCP_NODELAY: without it large messages stall on delayed ACKs.
        tcp.set_nodelay(true)?;
        let info = TcpConnectInfo {
            local_addr: tcp.local_addr().ok(),
            remote_addr: tcp.peer_addr().ok(),
        };
        let want = if tls { 1 } else { H2_PREFACE.len() };
        let mut seen = BytesMut::with_capacity(H2_PREFACE.len());
        while seen.len() < want {
            if tcp.read_buf(&mut seen).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let n = seen.len().min(want);
            if !tls && seen[..n] != H2_PREFACE[..n] {
                break; // not h2: tonic answers it as it would
            }
        }
        Ok(EdgeIo {
            seen,
            tcp,
            info,
            _slot: slot,
        })
    }
}

impl Connected for EdgeIo {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for EdgeIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.seen.is_empty() {
            let n = self.seen.len().min(buf.remaining());
            buf.put_slice(&self.seen[..n]);
            self.seen.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for EdgeIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}
