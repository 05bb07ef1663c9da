//! The adaptive limit (`adaptive = true`): how many calls a group takes at
//! once, following its latency as Envoy's adaptive concurrency filter
//! does, counted in calls rather than seconds so that it is the same on a
//! slow machine and in a test.
//!
//! - **Probe**: the floor of the group's latency is measured with the
//!   limit held low ([`PROBE_LIMIT`]) for [`PROBE_SAMPLES`] calls: its
//!   average is `min_rtt`, the latency of a call that did not queue
//!   behind others in the server. A probe runs first and every
//!   [`PROBE_EVERY`] calls after, so the floor follows a backend that
//!   became slower or faster for good.
//! - **Between probes**, every [`WINDOW`] calls: the window's average
//!   latency `rtt` against the floor gives `gradient = min_rtt × (1 +
//!   BUFFER) / rtt`, held within [½, 2]; the new limit is `limit ×
//!   gradient + √limit` (the root: headroom, so the limit keeps testing
//!   for more), within [1, the starting limit × [`MAX_FACTOR`]]. Calls
//!   queueing in the server make `rtt` grow and the limit fall; a window
//!   that never filled half the limit leaves it where it is (nothing was
//!   learnt about more).
//!
//! A backend that slows down (every call twice as long): each window's
//! gradient is then ½ at the worst, so the limit falls window by window,
//! to 4 at the lowest (where `½ × limit + √limit = limit`: the headroom
//! keeps a few calls going whatever the latency), within a few windows;
//! the next probe learns the new floor, from which the limit grows again
//! to what the server takes
//! (`tests::a_backend_that_slows_down_lowers_the_limit_then_the_floor`).

use std::time::Duration;

/// Calls per window between probes: enough that one slow call does not
/// move the limit alone, few enough that a slowdown is felt within tens
/// of milliseconds at hundreds of calls a second.
pub(super) const WINDOW: u32 = 20;

/// Latency over the floor tolerated before the limit falls: a quarter,
/// the queueing a server may add while it is kept busy.
const BUFFER: f64 = 0.25;

/// The limit while the floor is measured: low enough that a server with
/// a few instances does not queue, as Envoy's `min_concurrency`.
pub(super) const PROBE_LIMIT: usize = 3;

/// Calls measured in a probe.
pub(super) const PROBE_SAMPLES: u32 = 20;

/// Calls between probes: at 400 calls a second, one every 10 s; a probe
/// costs its 20 calls at a low limit.
pub(super) const PROBE_EVERY: u32 = 4_000;

/// How far above its starting point the limit may grow.
const MAX_FACTOR: usize = 8;

/// The limit's state.
#[derive(Debug)]
pub(crate) struct Gradient {
    /// The limit between probes.
    limit: f64,
    max: f64,
    /// The latency floor (`None` until the first probe ends).
    min_rtt: Option<f64>,
    phase: Phase,
    /// The current window's (or probe's) sum of latencies, in seconds,
    /// its calls and the most in flight seen in it.
    sum: f64,
    calls: u32,
    busiest: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Probe,
    /// Calls since the last probe.
    Steady(u32),
}

impl Gradient {
    /// A limit starting at `start` (at least 2, `config::Admission`).
    pub(crate) fn new(start: usize) -> Gradient {
        Gradient {
            limit: start as f64,
            max: (start * MAX_FACTOR) as f64,
            min_rtt: None,
            phase: Phase::Probe,
            sum: 0.0,
            calls: 0,
            busiest: 0,
        }
    }

    /// The limit in force now.
    pub(crate) fn limit(&self) -> usize {
        match self.phase {
            Phase::Probe => PROBE_LIMIT.min(self.limit as usize).max(1),
            Phase::Steady(_) => (self.limit as usize).max(1),
        }
    }

    /// The latency floor, once measured.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(Duration::from_secs_f64)
    }

    /// One call took `rtt` with `in_flight` calls in flight (its own
    /// included) when it ended.
    pub(crate) fn sample(&mut self, rtt: Duration, in_flight: usize) {
        self.sum += rtt.as_secs_f64();
        self.calls += 1;
        self.busiest = self.busiest.max(in_flight);
        match self.phase {
            Phase::Probe if self.calls >= PROBE_SAMPLES => {
                self.min_rtt = Some(self.sum / f64::from(self.calls));
                self.phase = Phase::Steady(0);
                self.restart();
            }
            Phase::Steady(since) if self.calls >= WINDOW => {
                self.adjust(self.sum / f64::from(self.calls));
                let since = since + self.calls;
                self.phase = match since >= PROBE_EVERY {
                    true => Phase::Probe,
                    false => Phase::Steady(since),
                };
                self.restart();
            }
            _ => {}
        }
    }

    fn adjust(&mut self, rtt: f64) {
        let Some(floor) = self.min_rtt else { return };
        if rtt <= 0.0 || (self.busiest as f64) < self.limit / 2.0 {
            return;
        }
        let gradient = (floor * (1.0 + BUFFER) / rtt).clamp(0.5, 2.0);
        let limit = self.limit * gradient + self.limit.sqrt();
        self.limit = limit.clamp(1.0, self.max);
    }

    fn restart(&mut self) {
        self.sum = 0.0;
        self.calls = 0;
        self.busiest = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `calls` calls of a server with `slots` instances of `service`: a
    /// call at `in_flight` beyond the slots waits in the server's queue.
    fn run(g: &mut Gradient, calls: u32, slots: usize, service: Duration) {
        for _ in 0..calls {
            let in_flight = g.limit();
            let queued = in_flight.div_ceil(slots) as u32;
            g.sample(service * queued.max(1), in_flight);
        }
    }

    const MS10: Duration = Duration::from_millis(10);

    #[test]
    fn a_probe_comes_first_and_measures_the_floor() {
        let mut g = Gradient::new(4);
        assert_eq!(g.limit(), PROBE_LIMIT);
        run(&mut g, PROBE_SAMPLES, 4, MS10);
        assert_eq!(g.min_rtt(), Some(MS10));
        assert_eq!(g.limit(), 4);
    }

    #[test]
    fn the_limit_settles_near_the_servers_capacity() {
        let mut g = Gradient::new(2);
        run(&mut g, PROBE_EVERY - WINDOW, 4, MS10);
        let limit = g.limit();
        // Four slots, a quarter of buffer and the root's headroom: the
        // server queues at most about one call more per slot.
        assert!((4..=9).contains(&limit), "{limit}");
    }

    #[test]
    fn a_backend_that_slows_down_lowers_the_limit_then_the_floor() {
        let mut g = Gradient::new(4);
        run(&mut g, 1_000, 4, MS10);
        let before = g.limit();
        // Every call now takes twice as long at the same concurrency.
        run(&mut g, 5 * WINDOW, 4, MS10 * 2);
        let after = g.limit();
        assert!(before > 5 && after <= 5, "{before} → {after}");
        // The next probe learns the new floor; the limit grows back to
        // what the server's four slots take.
        run(&mut g, PROBE_EVERY, 4, MS10 * 2);
        assert_eq!(g.min_rtt(), Some(MS10 * 2));
        run(&mut g, 1_000, 4, MS10 * 2);
        assert!((4..=9).contains(&g.limit()), "{}", g.limit());
    }

    #[test]
    fn an_idle_group_does_not_grow_its_limit() {
        let mut g = Gradient::new(8);
        run(&mut g, PROBE_SAMPLES, 8, MS10);
        for _ in 0..10 * WINDOW {
            g.sample(MS10, 1);
        }
        assert_eq!(g.limit(), 8);
    }

    #[test]
    fn the_limit_stays_within_its_bounds() {
        let mut g = Gradient::new(2);
        run(&mut g, PROBE_SAMPLES, 1_000, MS10);
        for _ in 0..50 * WINDOW {
            g.sample(MS10, 1_000);
        }
        assert_eq!(g.limit(), 2 * MAX_FACTOR);
        for _ in 0..50 * WINDOW {
            g.sample(Duration::from_secs(5), 1_000);
        }
        // The headroom's floor (see the module's documentation).
        assert_eq!(g.limit(), 4);
    }
}
