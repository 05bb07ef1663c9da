//! A model of fixed capacity (`Pacing::Capacity`): at most `slots`
//! requests execute at once, each for a fixed time; the others wait in
//! arrival order, in a queue without bound, as requests wait in Triton's
//! scheduler queue for a free model instance. The overload benchmark's
//! upstream (docs/performance.md, "Overload").
//!
//! Each slot runs its executions on a clock of its own: one that starts
//! right after the one before (within `SLACK`) starts when that one was
//! due to end, not when the timer woke it (tokio's timer wakes up to a
//! millisecond late), so a busy slot serves exactly one request per
//! execution time, and the model its full capacity (4 × 10 ms: 400 req/s,
//! not the ~360 that a millisecond's lateness each would leave).
//!
//! A request whose call is cancelled while it waits (its client gave up,
//! the gateway's deadline passed) leaves the queue; one that holds a slot
//! gives it back when its call is dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Lateness of a slot's next start that is credited back (the timer's
/// resolution and a little more); a slot idle for longer starts afresh.
const SLACK: Duration = Duration::from_millis(2);

#[derive(Debug)]
pub(crate) struct Gate {
    /// Fair: permits are handed out in the order they were asked for.
    slots: Semaphore,
    /// When each free slot's last execution was due to end.
    free: Mutex<Vec<Instant>>,
    busy: Duration,
    running: AtomicUsize,
    /// The most requests seen executing at once (tests read it).
    peak: AtomicUsize,
}

/// When an execution that may start at `now`, on a slot whose last one
/// was due to end at `last_end`, is due to end: it starts at `last_end`
/// unless the slot stood idle for longer than `SLACK` (and, after a call
/// dropped in the middle, not before the time that one would have ended).
fn next_end(now: Instant, last_end: Instant, busy: Duration) -> Instant {
    let start = if now > last_end + SLACK {
        now
    } else {
        last_end
    };
    start + busy
}

/// Gives the slot back, with the end its execution was due at.
struct Free<'a>(&'a Gate, Instant);

impl Drop for Free<'_> {
    fn drop(&mut self) {
        self.0.lock().push(self.1);
    }
}

/// Takes one off `running` when the execution ends or is dropped.
struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    pub(crate) fn new(slots: usize, busy: Duration) -> Gate {
        Gate {
            slots: Semaphore::new(slots),
            free: Mutex::new(vec![Instant::now(); slots]),
            busy,
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Waits for a slot (behind every request that came before), then
    /// holds it for the execution time.
    pub(crate) async fn execute(&self) {
        // The semaphore is never closed, so acquiring cannot fail.
        let Ok(_slot) = self.slots.acquire().await else {
            return;
        };
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        let _running = Running(&self.running);
        self.peak.fetch_max(now, Ordering::SeqCst);
        // A permit held: a slot is free (the vector is as long as the
        // semaphore has permits).
        let last_end = self.lock().pop().unwrap_or_else(Instant::now);
        let end = next_end(Instant::now(), last_end, self.busy);
        // Given back however the execution ends (a dropped call too, its
        // slot busy until its end all the same).
        let _free = Free(self, end);
        tokio::time::sleep_until(end).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Instant>> {
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(test)]
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_s_next_execution_starts_when_the_last_was_due_to_end() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Woken a millisecond late: that millisecond is credited back.
        assert_eq!(next_end(t0 + ms(11), t0 + ms(10), ms(10)), t0 + ms(20));
        // Idle for longer than the slack: it starts afresh.
        assert_eq!(next_end(t0 + ms(50), t0 + ms(10), ms(10)), t0 + ms(60));
        // After a dropped call: not before that one's end.
        assert_eq!(next_end(t0 + ms(5), t0 + ms(10), ms(10)), t0 + ms(20));
    }
}
