//! Client connections, counted for every listener (HTTP, HTTPS, gRPC)
//! against one cap: admission under the cap (a slot, or a refusal within
//! a budget of file descriptors), the refusal itself (the front's answer,
//! then the lingering close), the drain's closing signal, accept
//! back-off.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::linger::close_lingering;

/// Downstream connections open now, against the cap (shared by every
/// client listener: HTTP, HTTPS, gRPC), and the connections over the cap
/// being refused, against their own budget.
pub(crate) struct OpenConnections {
    count: AtomicUsize,
    cap: usize,
    refusing: Mutex<Refusing>,
    refusal_budget: usize,
    /// Woken when a slot or a refusal ends at its limit (admission waits).
    freed: Notify,
    /// Woken when the last connection or refusal ends (the drain waits).
    none_open: Notify,
    /// Cancelled when the drain's grace period is nearly over: idle
    /// connections close then.
    closing: CancellationToken,
}

/// The refusals under way, oldest first, each with the token that ends
/// its lingering close early.
#[derive(Default)]
struct Refusing {
    under_way: VecDeque<(u64, CancellationToken)>,
    next: u64,
}

/// What an accepted connection may do: be served under the cap, or (over
/// it) be refused while holding one of the refusal budget's places.
pub(crate) enum Admission {
    Serve(Slot),
    Refuse(Refusal),
}

/// One open connection's place under the cap; freed when dropped.
pub(crate) struct Slot(Arc<OpenConnections>);

/// One refusal's place in the refusal budget; freed when dropped.
pub(crate) struct Refusal {
    open: Arc<OpenConnections>,
    id: u64,
    ended: CancellationToken,
}

/// Over-cap connections being refused at once, as a share of
/// `connections.fd_reserve`: each holds a file descriptor while its answer
/// is written and its close lingers (`app::linger`), so they are bounded
/// and come out of the reserve. A quarter (64 of the default 256) leaves
/// three quarters for upstream channels, health checks, the admin
/// listener and files.
const REFUSAL_SHARE_OF_RESERVE: usize = 4;

/// The refusal budget for a file-descriptor reserve (at least one).
pub(crate) fn refusal_budget(fd_reserve: usize) -> usize {
    (fd_reserve / REFUSAL_SHARE_OF_RESERVE).max(1)
}

impl OpenConnections {
    /// `cap` connections served at once, `refusals` refused at once.
    pub(crate) fn new(cap: usize, refusals: usize) -> Arc<OpenConnections> {
        Arc::new(OpenConnections {
            count: AtomicUsize::new(0),
            cap,
            refusing: Mutex::default(),
            refusal_budget: refusals,
            freed: Notify::new(),
            none_open: Notify::new(),
            closing: CancellationToken::new(),
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

    /// A slot; over the cap, a place to refuse the connection from. With
    /// the refusal budget spent, the oldest refusal's lingering close is
    /// ended (a client that reads its answer closes within a round trip,
    /// so the oldest is almost surely one that never will) and admission
    /// waits for its place. The caller (an accept loop) accepts nothing
    /// meanwhile.
    pub(crate) async fn admit(self: &Arc<Self>) -> Admission {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(slot) = self.try_open() {
                return Admission::Serve(slot);
            }
            {
                let mut refusing = self.refusing();
                if refusing.under_way.len() < self.refusal_budget {
                    let id = refusing.next;
                    refusing.next += 1;
                    let ended = CancellationToken::new();
                    refusing.under_way.push_back((id, ended.clone()));
                    let open = self.clone();
                    return Admission::Refuse(Refusal { open, id, ended });
                }
                if let Some((_, oldest)) = refusing.under_way.front() {
                    oldest.cancel();
                }
            }
            freed.await;
        }
    }

    fn refusing(&self) -> std::sync::MutexGuard<'_, Refusing> {
        self.refusing.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Connections open now (served or being refused).
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire) + self.refusing().under_way.len()
    }

    /// Returns once no connection is open and none is being refused.
    pub(crate) async fn none_open(&self) {
        loop {
            let notified = self.none_open.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// The drain's last phase has begun: idle connections close now.
    pub(crate) fn close_idle(&self) {
        self.closing.cancel();
    }

    /// Resolves once the drain's last phase has begun.
    pub(crate) async fn closing(&self) {
        self.closing.cancelled().await
    }

    fn freed(&self, was_at_limit: bool) {
        if was_at_limit {
            self.freed.notify_waiters();
        }
        if self.count() == 0 {
            self.none_open.notify_waiters();
        }
    }
}

impl Refusal {
    /// Resolves when a newer refusal needs this one's place: the lingering
    /// close ends then.
    pub(crate) async fn preempted(&self) {
        self.ended.cancelled().await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let was_full = self.0.count.fetch_sub(1, Ordering::AcqRel) == self.0.cap;
        self.0.freed(was_full);
    }
}

impl Drop for Refusal {
    fn drop(&mut self) {
        let was_full = {
            let mut refusing = self.open.refusing();
            let was_full = refusing.under_way.len() == self.open.refusal_budget;
            refusing.under_way.retain(|(id, _)| *id != self.id);
            was_full
        };
        self.open.freed(was_full);
    }
}

/// Refuses an accepted connection: `answer` (the front's own refusal, in
/// its protocol; empty: none) written within [`REFUSAL_WRITE_TIME`], then
/// the lingering close (`linger`: `connections.linger_ms`). A caller
/// holding a [`Refusal`] ends it early when the refusal is preempted.
pub(crate) async fn refuse(mut tcp: TcpStream, answer: &[u8], linger: std::time::Duration) {
    if !answer.is_empty() {
        let write = tokio::time::timeout(REFUSAL_WRITE_TIME, tcp.write_all(answer));
        if write.await.is_err() {
            return;
        }
    }
    close_lingering(tcp, linger).await;
}

/// A refusal is at most a few hundred bytes: a client that cannot take
/// them this quickly is not waited for.
const REFUSAL_WRITE_TIME: std::time::Duration = std::time::Duration::from_millis(500);

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll};

    fn now<F: Future>(future: F) -> Poll<F::Output> {
        let mut future = std::pin::pin!(future);
        let waker = std::task::Waker::noop();
        future.as_mut().poll(&mut Context::from_waker(waker))
    }

    /// Over the cap a connection is refused within the budget; with the
    /// budget spent, admission ends the oldest refusal and takes its place
    /// once it is gone; a freed slot serves again.
    #[tokio::test]
    async fn admission_serves_refuses_then_ends_the_oldest_refusal() {
        let open = OpenConnections::new(1, 2);
        let Poll::Ready(Admission::Serve(slot)) = now(open.admit()) else {
            panic!("the first connection is served");
        };
        let Poll::Ready(Admission::Refuse(oldest)) = now(open.admit()) else {
            panic!("over the cap: refused");
        };
        let Poll::Ready(Admission::Refuse(newer)) = now(open.admit()) else {
            panic!("the budget has room for two");
        };
        assert_eq!(open.count(), 3);
        let mut waiting = Box::pin(open.admit());
        assert!(now(waiting.as_mut()).is_pending(), "the budget is spent");
        assert!(now(oldest.preempted()).is_ready(), "the oldest is ended");
        assert!(now(newer.preempted()).is_pending(), "the newer one is not");
        drop(oldest);
        assert!(matches!(
            now(waiting.as_mut()),
            Poll::Ready(Admission::Refuse(_))
        ));
        drop(newer);
        drop(slot);
        assert!(matches!(
            now(open.admit()),
            Poll::Ready(Admission::Serve(_))
        ));
    }

    #[tokio::test]
    async fn none_open_waits_for_refusals_too() {
        let open = OpenConnections::new(0, 1);
        assert!(now(open.none_open()).is_ready());
        let Poll::Ready(refusal) = now(open.admit()) else {
            panic!("refused at once");
        };
        let mut none = Box::pin(open.none_open());
        assert!(now(none.as_mut()).is_pending());
        drop(refusal);
        assert!(now(none.as_mut()).is_ready());
    }
}
