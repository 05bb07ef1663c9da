//! Client connections, counted for every listener (HTTP, HTTPS, gRPC)
//! against one cap, and the facts every front's connection handling
//! shares: the h2 preface, the drain's idle window, accept back-off.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

/// The h2 connection preface (RFC 9113 §3.4): its first bytes tell h2c
/// from HTTP/1 (no HTTP/1 method starts with `PRI *`).
pub(crate) const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Downstream connections open now, against the cap (shared by every
/// client listener: HTTP, HTTPS, gRPC).
pub(crate) struct OpenConnections {
    count: AtomicUsize,
    cap: usize,
    /// Woken when the last connection closes (the drain waits on it).
    none_open: tokio::sync::Notify,
}

/// One open connection's place under the cap; freed when dropped.
pub(crate) struct Slot(Arc<OpenConnections>);

impl OpenConnections {
    pub(crate) fn new(cap: usize) -> Arc<OpenConnections> {
        Arc::new(OpenConnections {
            count: AtomicUsize::new(0),
            cap,
            none_open: tokio::sync::Notify::new(),
        })
    }

    /// A slot, or `None` when `cap` connections are open already.
    pub(crate) fn try_open(self: &Arc<Self>) -> Option<Slot> {
        let taken = self
            .count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.cap).then_some(n + 1)
            });
        taken.ok().map(|_| Slot(self.clone()))
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Returns once no connection is open.
    pub(crate) async fn none_open(&self) {
        loop {
            let notified = self.none_open.notified();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none_open.notify_waiters();
        }
    }
}

/// How long a kept-alive connection may still send its next request once
/// the gateway drains: a client busy on the connection sends it within
/// moments (it is then answered, with `Connection: close`), so closing at
/// once would reset requests already on their way.
pub(crate) const DRAIN_IDLE: Duration = Duration::from_secs(1);

/// The accepted socket, or `None` after an accept error. Out of file
/// descriptors (which the cap and the reserve should prevent), backs off
/// briefly instead of spinning on an accept that fails at once.
pub(crate) async fn accepted_or_backoff(
    accepted: std::io::Result<(TcpStream, SocketAddr)>,
) -> Option<TcpStream> {
    match accepted {
        Ok((tcp, _)) => Some(tcp),
        Err(error) => {
            let exhausted = matches!(error.raw_os_error(), Some(23 | 24));
            if exhausted {
                tracing::warn!(%error, "accept failed: out of file descriptors");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            } else {
                tracing::debug!(%error, "accept failed");
            }
            None
        }
    }
}

/// Pause after an accept that failed for want of file descriptors.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);
