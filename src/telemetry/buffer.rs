//! The log's buffer, for a log that is not a terminal: each formatted line
//! is appended to one buffer in memory and written out in batches — by a
//! flusher thread every [`FLUSH_EVERY`], by the thread that appends once
//! [`FLUSH_AT`] bytes wait, and by [`flush`] before the process ends (the
//! binary's exits, the drain's exit, a panic). A serving thread therefore
//! makes no `write` per request for its access-log line: appending is a
//! lock nobody else holds for long and a copy.
//!
//! Hand-written rather than `tracing-appender`'s non-blocking writer
//! (reason): that one sends every line through a channel to its writer
//! thread, which sleeps whenever the channel is empty, so below its write
//! rate every line (every request) wakes a thread on another core — the
//! scheduler work a small request's profile is already dominated by
//! (docs/performance.md). Here the flusher wakes on a clock, not per line.
//!
//! Order: lines are written in the order they were appended, across
//! threads; batches go out under [`OUT`], taken before the buffer is
//! swapped, so two writers cannot reorder them.

use std::io::Write;
use std::sync::{Mutex, MutexGuard, Once};
use std::time::Duration;

/// A batch this large is written by the thread that filled it: memory
/// stays bounded under a burst, and one `write` carries ~200 access lines.
pub(crate) const FLUSH_AT: usize = 64 * 1024;

/// How late a line may appear when traffic is light: short enough for a
/// person tailing the log, long enough that the flusher's wake-ups cost
/// nothing next to the requests'.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Lines waiting to be written.
static BUFFER: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Held while a batch is swapped out and written; holds the spare buffer
/// the batch is swapped into (so steady state allocates nothing).
static OUT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

static FLUSHER: Once = Once::new();

/// A lock that a panic elsewhere cannot make unusable: the log must still
/// be written after one.
fn lock(mutex: &'static Mutex<Vec<u8>>) -> MutexGuard<'static, Vec<u8>> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes every line appended so far to stderr, in order.
pub(crate) fn flush() {
    let mut spare = lock(&OUT);
    std::mem::swap(&mut *lock(&BUFFER), &mut *spare);
    if !spare.is_empty() {
        // Nowhere to report a failed log write: the line is dropped, as
        // an unbuffered writer would drop it.
        let _ = std::io::stderr().lock().write_all(&spare);
        spare.clear();
    }
}

/// Starts the flusher thread (once per process) and makes the panic hook
/// flush first, so a panic's message follows the lines before it.
pub(crate) fn start() {
    FLUSHER.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("log-flush".into())
            .spawn(|| loop {
                std::thread::sleep(FLUSH_EVERY);
                flush();
            });
        if let Err(e) = spawned {
            eprintln!("tensorgate: no log flusher thread ({e}): lines are written at {FLUSH_AT} bytes and at exit");
        }
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            flush();
            hook(info);
        }));
    });
}

/// The `tracing` writer that appends to the buffer.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Buffered;

impl Write for Buffered {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let full = {
            let mut buffer = lock(&BUFFER);
            buffer.extend_from_slice(bytes);
            buffer.len() >= FLUSH_AT
        };
        if full {
            flush();
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffered {
    type Writer = Buffered;

    fn make_writer(&'a self) -> Buffered {
        Buffered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wait_in_the_buffer_until_a_batch_is_full() {
        // One test owns the process-wide buffer here (no other unit test
        // writes through it): a line waits, a full batch goes out.
        flush();
        Buffered.write_all(b"one line\n").unwrap();
        assert_eq!(lock(&BUFFER).as_slice(), b"one line\n");
        let big = vec![b'x'; FLUSH_AT];
        Buffered.write_all(&big).unwrap();
        assert!(lock(&BUFFER).is_empty(), "a full batch is written at once");
        Buffered.write_all(b"after\n").unwrap();
        flush();
        assert!(lock(&BUFFER).is_empty());
        assert!(lock(&OUT).is_empty(), "the spare is cleared after a write");
    }
}
