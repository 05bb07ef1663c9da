//! Requests being answered right now, across every front (HTTP, v1, gRPC):
//! the graceful drain waits for this count to reach zero.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use tokio::sync::Notify;

/// Requests being answered right now.
#[derive(Default)]
pub struct Inflight {
    count: AtomicUsize,
    idle: Notify,
}

/// One request in flight; leaving decrements (and wakes the drain at zero).
pub struct InflightGuard(Arc<Inflight>);

impl Inflight {
    pub fn enter(self: &Arc<Self>) -> InflightGuard {
        self.count.fetch_add(1, SeqCst);
        InflightGuard(self.clone())
    }

    pub fn count(&self) -> usize {
        self.count.load(SeqCst)
    }

    /// Returns once no request is in flight.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}
