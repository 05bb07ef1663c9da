//! What the connections count: latencies of the successes in the measured
//! window, failures by kind, the warmup's counts; merged across
//! connections, and the percentiles the report gives.

use std::collections::BTreeMap;

#[derive(Default)]
pub(crate) struct Stats {
    /// Latencies (µs) of the 200 responses completed in the window.
    pub(crate) latencies_us: Vec<u32>,
    /// Failed answers in the window by status (gRPC codes as
    /// `grpc::STATUS_BASE` + code).
    pub(crate) statuses: BTreeMap<u16, u64>,
    pub(crate) io_errors: u64,
    pub(crate) timeouts: u64,
    pub(crate) warmup_ok: u64,
    pub(crate) warmup_errors: u64,
    pub(crate) response_bytes: u64,
    pub(crate) first_error: Option<String>,
}

impl Stats {
    pub(crate) fn merge(&mut self, other: Stats) {
        self.latencies_us.extend(other.latencies_us);
        for (k, v) in other.statuses {
            *self.statuses.entry(k).or_default() += v;
        }
        self.io_errors += other.io_errors;
        self.timeouts += other.timeouts;
        self.warmup_ok += other.warmup_ok;
        self.warmup_errors += other.warmup_errors;
        self.response_bytes += other.response_bytes;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// Failures in the measured window, of every kind.
    pub(crate) fn errors(&self) -> u64 {
        self.statuses.values().sum::<u64>() + self.io_errors + self.timeouts
    }

    /// Keeps the text of the first failure seen.
    pub(crate) fn note(&mut self, error: impl FnOnce() -> String) {
        if self.first_error.is_none() {
            self.first_error = Some(error());
        }
    }
}

/// The nearest-rank percentile `p` (0..=1) of `sorted`; 0 when empty.
pub(crate) fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 0.50), 50);
        assert_eq!(percentile(&sorted, 0.99), 99);
        assert_eq!(percentile(&sorted, 0.0), 1);
        assert_eq!(percentile(&[7], 0.9), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn merging_adds_counts_and_keeps_the_first_error() {
        let mut a = Stats {
            latencies_us: vec![1],
            io_errors: 1,
            ..Stats::default()
        };
        a.statuses.insert(500, 2);
        let mut b = Stats {
            latencies_us: vec![2, 3],
            timeouts: 1,
            ..Stats::default()
        };
        b.statuses.insert(500, 1);
        b.note(|| "second".into());
        a.merge(b);
        assert_eq!(a.latencies_us, [1, 2, 3]);
        assert_eq!(a.errors(), 5);
        assert_eq!(a.first_error.as_deref(), Some("second"));
        a.note(|| "third".into());
        assert_eq!(a.first_error.as_deref(), Some("second"));
    }
}
