//! The gRPC listener's connections before they are served (`serving.rs`):
//! each takes a
//! slot under the gateway's connection cap, and must send its first bytes
//! — the whole h2 preface for h2c, the first byte of the TLS hello for
//! TLS — within `connections.handshake_timeout_ms`, or it is closed. Idle
//! but live peers are kept (gRPC channels stay open by design); dead ones
//! are found by h2 keep-alive pings (`connections.h2_ping_interval_ms`).
//!
//! A connection refused (over the cap, or accepted from the queue as the
//! drain closes the listener) gets an h2 GOAWAY naming stream 0 — no
//! stream was processed, so a gRPC client retries it elsewhere — then a
//! lingering close (a TLS connection only the close).

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
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpConnectInfo;

use crate::connections::{self, Admission, OpenConnections, Slot, H2_PREFACE};

/// Accepted connections that passed the first-bytes deadline, as the
/// stream `serving` serves. Accepting stops when it drops the stream, or
/// at `stop` (the drain), when the connections already queued on the
/// listener are refused with GOAWAY and the listener closes.
pub(crate) fn incoming(
    listener: TcpListener,
    open: Arc<OpenConnections>,
    limits: Limits,
    stop: CancellationToken,
) -> UnboundedReceiverStream<io::Result<EdgeIo>> {
    let (ready, stream) = mpsc::unbounded_channel();
    let Limits {
        handshake,
        linger,
        tls,
    } = limits;
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = ready.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let Some(tcp) = connections::accepted_or_backoff(accepted).await else {
                continue;
            };
            let slot = match open.admit().await {
                Admission::Serve(slot) => slot,
                Admission::Refuse(refusal) => {
                    tokio::spawn(async move {
                        tokio::select! {
                            _ = refuse(tcp, tls, Reason::RefusedStream, linger) => {}
                            _ = refusal.preempted() => {}
                        }
                    });
                    continue;
                }
            };
            let ready = ready.clone();
            tokio::spawn(async move {
                if let Ok(Ok(io)) =
                    tokio::time::timeout(handshake, EdgeIo::new(tcp, slot, tls)).await
                {
                    // The server stopped taking connections: the drain began.
                    if let Err(mpsc::error::SendError(Ok(io))) = ready.send(Ok(io)) {
                        refuse(io.tcp, tls, Reason::NoError, linger).await;
                    }
                }
            });
        }
        // A zero timeout polls the accept once: queued connections only.
        let queued = || tokio::time::timeout(Duration::ZERO, listener.accept());
        while let Ok(Ok((tcp, _))) = queued().await {
            let held = open.admit().await;
            tokio::spawn(async move {
                refuse(tcp, tls, Reason::NoError, linger).await;
                drop(held);
            });
        }
    });
    UnboundedReceiverStream::new(stream)
}

/// What the connections of one gRPC listener are held to.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    /// `connections.handshake_timeout_ms`.
    pub(crate) handshake: Duration,
    /// `connections.linger_ms`.
    pub(crate) linger: Duration,
    /// Connections speak TLS (`grpc.tls`).
    pub(crate) tls: bool,
}

/// A GOAWAY's error code (RFC 9113 §7).
#[derive(Clone, Copy)]
enum Reason {
    /// The drain: a graceful close.
    NoError = 0x0,
    /// Over the cap: refused before any processing.
    RefusedStream = 0x7,
}

/// The server's connection preface (an empty SETTINGS frame), then GOAWAY
/// with last stream id 0 and `reason` (none on TLS: the handshake has not
/// happened); then the lingering close.
async fn refuse(tcp: TcpStream, tls: bool, reason: Reason, linger: Duration) {
    let mut frames = Vec::with_capacity(9 + 17);
    if !tls {
        // SETTINGS: length 0, type 0x4, no flags, stream 0.
        frames.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
        // GOAWAY: length 8, type 0x7, no flags, stream 0; last stream id
        // 0, the error code.
        frames.extend_from_slice(&[0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        frames.extend_from_slice(&(reason as u32).to_be_bytes());
    }
    connections::refuse(tcp, &frames, linger).await;
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
                break; // not h2: the HTTP/2 server refuses it as it would
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

impl EdgeIo {
    /// The connection's addresses, for each call's extensions.
    pub(crate) fn info(&self) -> TcpConnectInfo {
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
