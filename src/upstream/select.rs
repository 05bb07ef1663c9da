//! Choosing among the backends a request may go to: round robin, least
//! outstanding requests and the power of two choices. (The sticky ring
//! comes from pingora-load-balancing, in `pool.rs`.) Each is one pass over
//! the membership without allocation: the cost per request does not grow
//! beyond reading one counter per backend.
//!
//! Round robin is the turn counter the others keep anyway, not
//! pingora-load-balancing's `RoundRobin`: with every weight 1 (discovery
//! gives no others) its selection is the same rotation, but reached
//! through its own backend set and a lookup of each candidate's address in
//! the membership, ~2,300 instructions of every request against ~100 here
//! (`scripts/bench-instructions`, docs/performance.md).
//!
//! A backend's load is its in-flight count; with load reports on
//! (`load_report.rs`), plus the requests its server reported waiting in its
//! own queue, while that report is fresh (one more atomic read per backend
//! and one clock read per pick). Without a fresh report a backend's load
//! is its in-flight count alone: with every report stale or missing the
//! picks are those without reports.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use super::backend::Backend;
use crate::config::Balance;

/// The backends a request may go to: the membership and a filter.
pub(crate) struct Candidates<'a> {
    all: &'a [Arc<Backend>],
    accept: &'a dyn Fn(&Backend) -> bool,
}

impl<'a> Candidates<'a> {
    pub(crate) fn new(all: &'a [Arc<Backend>], accept: &'a dyn Fn(&Backend) -> bool) -> Self {
        Candidates { all, accept }
    }

    fn iter(&self) -> impl Iterator<Item = &'a Arc<Backend>> + '_ {
        self.all.iter().filter(|b| (self.accept)(b))
    }
}

pub(crate) struct Picker {
    balance: Balance,
    /// The backends' load reports are added to their in-flight counts.
    reports: bool,
    /// Rotates the starting point, so ties do not always favour the first
    /// backend, and seeds the random draws.
    counter: AtomicU64,
}

impl Picker {
    pub(crate) fn new(balance: Balance, reports: bool) -> Picker {
        Picker {
            balance,
            reports,
            counter: AtomicU64::new(0),
        }
    }

    pub(crate) fn pick(&self, candidates: Candidates) -> Option<Arc<Backend>> {
        if self.reports {
            let now = Instant::now();
            self.pick_by(&candidates, |b: &Backend| {
                b.inflight() + b.reported_pending(now)
            })
        } else {
            self.pick_by(&candidates, Backend::inflight)
        }
    }

    fn pick_by(
        &self,
        candidates: &Candidates,
        load: impl Fn(&Backend) -> usize + Copy,
    ) -> Option<Arc<Backend>> {
        let turn = self.counter.fetch_add(1, Relaxed);
        match self.balance {
            Balance::RoundRobin => round_robin(candidates, turn),
            Balance::PowerOfTwo => power_of_two(candidates, mix(turn), load),
            Balance::LeastOutstanding => least_outstanding(candidates, turn, load),
        }
    }
}

/// The first acceptable backend from the turn's place on: each backend in
/// turn, a refused one's turn passing to the next.
fn round_robin(candidates: &Candidates, turn: u64) -> Option<Arc<Backend>> {
    let all = candidates.all;
    let start = (turn % all.len().max(1) as u64) as usize;
    let (after, before) = all.split_at(start.min(all.len()));
    before
        .iter()
        .chain(after)
        .find(|b| (candidates.accept)(b))
        .cloned()
}

/// The least loaded; among equals, the first after a rotating start.
fn least_outstanding(
    candidates: &Candidates,
    turn: u64,
    load: impl Fn(&Backend) -> usize,
) -> Option<Arc<Backend>> {
    let n = candidates.all.len().max(1);
    let start = (turn % n as u64) as usize;
    candidates
        .iter()
        .enumerate()
        .min_by_key(|(i, b)| (load(b), (i + n - start) % n))
        .map(|(_, b)| b.clone())
}

/// Two backends drawn at random; the acceptable one less loaded wins.
/// Constant time while most backends are acceptable; when a draw hits an
/// unacceptable backend, least outstanding decides instead.
fn power_of_two(
    candidates: &Candidates,
    random: u64,
    load: impl Fn(&Backend) -> usize + Copy,
) -> Option<Arc<Backend>> {
    let all = candidates.all;
    if all.is_empty() {
        return None;
    }
    let n = all.len() as u64;
    let a = &all[(random % n) as usize];
    let b = &all[((random >> 32) % n) as usize];
    match ((candidates.accept)(a), (candidates.accept)(b)) {
        (true, true) => Some(if load(b) < load(a) { b } else { a }.clone()),
        _ => least_outstanding(candidates, random, load),
    }
}

/// splitmix64: a well-spread pseudo-random number from a counter. Not a
/// `rand`/`fastrand` generator: the draw comes from the turn counter the
/// picker keeps anyway (one atomic add, no per-thread state), and the
/// draws are the same every run, so the spread test below cannot fail by
/// chance.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::UpstreamSettings;

    fn backends(n: u16) -> Vec<Arc<Backend>> {
        // Reports (when a test records them) stale after the default 1.5 s.
        let settings = Arc::new(UpstreamSettings::for_tests_with_reports());
        (0..n)
            .map(|i| {
                let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 1000 + i));
                Arc::new(Backend::new(addr, settings.clone()))
            })
            .collect()
    }

    #[test]
    fn least_outstanding_prefers_the_idle_backend() {
        let all = backends(3);
        let _busy = [
            crate::upstream::Lease::new(all[0].clone()),
            crate::upstream::Lease::new(all[1].clone()),
        ];
        let accept = |_: &Backend| true;
        let picker = Picker::new(Balance::LeastOutstanding, false);
        for _ in 0..5 {
            let chosen = picker.pick(Candidates::new(&all, &accept)).unwrap();
            assert_eq!(chosen.addr, all[2].addr);
        }
    }

    #[test]
    fn round_robin_takes_each_backend_in_turn_and_passes_a_refused_ones_turn_on() {
        let all = backends(3);
        let picker = Picker::new(Balance::RoundRobin, false);
        let pick = |accept: &dyn Fn(&Backend) -> bool| {
            let chosen = picker.pick(Candidates::new(&all, accept)).unwrap();
            chosen.addr.port() - 1000
        };
        let any = |_: &Backend| true;
        let turns: Vec<u16> = (0..6).map(|_| pick(&any)).collect();
        assert_eq!(turns, [0, 1, 2, 0, 1, 2]);
        // Backend 1 refused: its turns go to backend 2.
        let not_1 = |b: &Backend| b.addr.port() != 1001;
        let turns: Vec<u16> = (0..6).map(|_| pick(&not_1)).collect();
        assert_eq!(turns, [0, 2, 2, 0, 2, 2]);
    }

    #[test]
    fn least_outstanding_rotates_among_equals() {
        let all = backends(4);
        let accept = |_: &Backend| true;
        let picker = Picker::new(Balance::LeastOutstanding, false);
        let mut seen: Vec<_> = (0..4)
            .map(|_| picker.pick(Candidates::new(&all, &accept)).unwrap().addr)
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 4);
    }

    #[test]
    fn power_of_two_respects_the_filter_and_spreads() {
        let all = backends(4);
        let accept = |b: &Backend| b.addr.port() != 1000;
        let picker = Picker::new(Balance::PowerOfTwo, false);
        let mut counts = [0usize; 4];
        for _ in 0..4000 {
            let chosen = picker.pick(Candidates::new(&all, &accept)).unwrap();
            counts[(chosen.addr.port() - 1000) as usize] += 1;
        }
        assert_eq!(counts[0], 0);
        for c in &counts[1..] {
            assert!(*c > 800, "uneven spread {counts:?}");
        }
    }

    #[test]
    fn nobody_acceptable_is_none() {
        let all = backends(2);
        let accept = |_: &Backend| false;
        for balance in [
            Balance::RoundRobin,
            Balance::LeastOutstanding,
            Balance::PowerOfTwo,
        ] {
            assert!(Picker::new(balance, false)
                .pick(Candidates::new(&all, &accept))
                .is_none());
        }
    }

    #[test]
    fn a_fresh_report_steers_the_picks_and_none_changes_nothing() {
        let all = backends(3);
        let accept = |_: &Backend| true;
        all[0].record_report(5);
        all[1].record_report(0);
        let _busy = crate::upstream::Lease::new(all[1].clone());
        let spread = |picker: &Picker| {
            let mut counts = [0usize; 3];
            for _ in 0..300 {
                let chosen = picker.pick(Candidates::new(&all, &accept)).unwrap();
                counts[(chosen.addr.port() - 1000) as usize] += 1;
            }
            counts
        };
        // Reports on: backend 0's queue of 5 outweighs the one call in
        // flight on backend 1. (Power of two draws the same backend twice
        // now and then: a ninth of the picks have no choice.)
        let on = spread(&Picker::new(Balance::LeastOutstanding, true));
        assert_eq!(on, [0, 0, 300]);
        let on = spread(&Picker::new(Balance::PowerOfTwo, true));
        assert!(on[0] < 50 && on[0] < on[1] && on[1] < on[2], "{on:?}");
        // Reports off: the same backends, by their in-flight counts alone.
        let off = spread(&Picker::new(Balance::LeastOutstanding, false));
        assert!(off[1] == 0 && off[0] > 0 && off[2] > 0, "{off:?}");
        let off = spread(&Picker::new(Balance::PowerOfTwo, false));
        assert!(off[1] < 50 && off[1] < off[0] && off[1] < off[2], "{off:?}");
    }
}
