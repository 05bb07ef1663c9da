//! Which request channel a thread uses. tonic starts a channel's tasks
//! (its request buffer and its h2 connection) on the runtime that creates
//! it. The serving threads (`server/workers.rs`) each run a runtime of
//! their own; when each also has its own channel to every backend, a
//! request is read, forwarded, answered and written on one thread, with
//! no wake-up of another (that hand-off was most of the hop's CPU).
//!
//! The slot is a property of the OS thread, set once when a serving
//! thread starts, like tokio's own "current runtime": it is not request
//! context and nothing per request is stored here.

use std::cell::Cell;

/// Request channels per backend: slot 0 for every thread that is not a
/// serving thread (health checks, admin calls), the rest for serving
/// threads. More serving threads than slots share slots (still correct:
/// a channel can be used from any thread, only less cheaply).
pub(crate) const SLOTS: usize = 64;

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// Marks the calling thread as serving thread `index`.
pub(crate) fn enter_serving_thread(index: usize) {
    SLOT.set(1 + index % (SLOTS - 1));
}

/// The channel slot of the calling thread.
pub(crate) fn current() -> usize {
    SLOT.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_threads_never_take_the_shared_slot() {
        assert_eq!(std::thread::spawn(current).join().unwrap(), 0);
        for index in [0, 1, SLOTS - 2, SLOTS - 1, 1000] {
            let slot = std::thread::spawn(move || {
                enter_serving_thread(index);
                current()
            });
            let slot = slot.join().unwrap();
            assert!((1..SLOTS).contains(&slot), "{index} -> {slot}");
        }
    }
}
