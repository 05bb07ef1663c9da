//! `--rate-mb-s`: one direction of an HTTP connection held to a byte rate,
//! as a link slower than loopback would hold it.

use std::time::Duration;

use tokio::time::Instant;

/// Bytes a paced connection moves per socket call (so the pace is smooth).
pub(crate) const CHUNK: usize = 64 * 1024;
/// Lateness of a paced connection's timer that is credited back.
const SLACK: Duration = Duration::from_millis(5);

/// Each socket call's bytes take `n / rate` on the link, starting when the
/// previous ones are through or when they came, whichever is later. Time
/// the link stood idle is not made up for later, except up to `SLACK`:
/// the timer wakes up to a millisecond late, and that lateness is credited
/// back.
pub(crate) struct Pacer {
    bytes_per_s: f64,
    /// When the link is free again.
    free: Instant,
}

impl Pacer {
    pub(crate) fn new(bytes_per_s: f64) -> Pacer {
        Pacer {
            bytes_per_s,
            free: Instant::now(),
        }
    }

    /// Waits until `n` bytes that came now are through the link.
    pub(crate) async fn pass(&mut self, n: usize) {
        tokio::time::sleep_until(self.through(Instant::now(), n)).await;
    }

    /// When `n` bytes that came at `now` are through; the link is busy
    /// until then.
    fn through(&mut self, now: Instant, n: usize) -> Instant {
        let start = if now > self.free + SLACK {
            now
        } else {
            self.free
        };
        self.free = start + Duration::from_secs_f64(n as f64 / self.bytes_per_s);
        self.free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_queue_behind_each_other_and_idle_time_is_not_made_up() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut p = Pacer {
            bytes_per_s: 1000.0,
            free: t0,
        };
        // 100 bytes take 100 ms; the next 100, arriving at once, queue.
        assert_eq!(p.through(t0, 100), t0 + ms(100));
        assert_eq!(p.through(t0, 100), t0 + ms(200));
        // A timer 3 ms late: the lateness is credited back.
        assert_eq!(p.through(t0 + ms(203), 100), t0 + ms(300));
        // A link idle for 200 ms: that time is lost, not banked.
        assert_eq!(p.through(t0 + ms(500), 50), t0 + ms(550));
    }
}
