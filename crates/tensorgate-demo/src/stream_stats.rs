//! Counters of the demo's `ModelStreamInfer` traffic that tests read: the
//! responses it sent, and the requests whose client cancelled (dropped the
//! response stream) before their final response. Cancellations can also be
//! awaited, so tests need no sleeps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

#[derive(Debug)]
pub(crate) struct StreamCounters {
    sent: AtomicU64,
    cancelled: watch::Sender<u64>,
}

impl Default for StreamCounters {
    fn default() -> StreamCounters {
        StreamCounters {
            sent: AtomicU64::new(0),
            cancelled: watch::channel(0).0,
        }
    }
}

impl StreamCounters {
    pub(crate) fn record_sent(&self) {
        self.sent.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn record_cancelled(&self) {
        self.cancelled.send_modify(|n| *n += 1);
    }

    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    pub(crate) fn cancelled(&self) -> u64 {
        *self.cancelled.borrow()
    }

    /// Waits until at least `n` cancellations were seen; `false` on timeout.
    pub(crate) async fn wait_cancelled(&self, n: u64, timeout: Duration) -> bool {
        let mut rx = self.cancelled.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// Sleeps `ms` milliseconds unless the receiver of `tx` goes away first
/// (the client cancelled the stream). `false` when it did.
pub(crate) async fn pause<T>(ms: f64, tx: &mpsc::Sender<T>) -> bool {
    if ms <= 0.0 {
        return !tx.is_closed();
    }
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)) => true,
        () = tx.closed() => false,
    }
}
