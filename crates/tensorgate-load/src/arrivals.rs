//! The open loop's arrivals (`--rate`): a Poisson process, its gaps drawn
//! from the exponential distribution of mean `1 / rate`, and each arrival's
//! class (high priority with probability `--priority-share`), from a seeded
//! generator, so that a run with the same `--seed` sends the same schedule.

use std::time::Duration;

/// SplitMix64 (Steele, Lea and Flood): small, fast and good enough for
/// a schedule; no crate needed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One arrival: when, from the schedule's start, and its class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Arrival {
    pub(crate) at: Duration,
    pub(crate) high: bool,
}

/// The arrivals of `rate` a second over `span`, `share` of them high
/// priority.
pub(crate) struct Arrivals {
    rng: Rng,
    rate: f64,
    share: f64,
    span: Duration,
    at: f64,
}

impl Arrivals {
    pub(crate) fn new(rate: f64, share: f64, seed: u64, span: Duration) -> Arrivals {
        Arrivals {
            rng: Rng::new(seed),
            rate,
            share,
            span,
            at: 0.0,
        }
    }
}

impl Iterator for Arrivals {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        // 1 - u is in (0, 1]: its logarithm is finite.
        self.at += -(1.0 - self.rng.unit()).ln() / self.rate;
        let at = Duration::from_secs_f64(self.at);
        let high = self.rng.unit() < self.share;
        (at < self.span).then_some(Arrival { at, high })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_schedule_and_another_seed_another() {
        let span = Duration::from_secs(1);
        let a: Vec<_> = Arrivals::new(100.0, 0.1, 7, span).collect();
        let b: Vec<_> = Arrivals::new(100.0, 0.1, 7, span).collect();
        let c: Vec<_> = Arrivals::new(100.0, 0.1, 8, span).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(a.iter().all(|x| x.at < span));
    }

    #[test]
    fn the_rate_and_the_share_are_kept_over_many_arrivals() {
        // 100,000 arrivals expected; a Poisson count's standard deviation
        // is ~316, so 2 % is over six of them.
        let arrivals: Vec<_> = Arrivals::new(1000.0, 0.1, 1, Duration::from_secs(100)).collect();
        let n = arrivals.len() as f64;
        assert!((n - 100_000.0).abs() < 2_000.0, "{n}");
        let high = arrivals.iter().filter(|a| a.high).count() as f64;
        assert!((high / n - 0.1).abs() < 0.01, "{}", high / n);
        // Exponential gaps: their standard deviation equals their mean.
        let gaps: Vec<f64> = arrivals
            .windows(2)
            .map(|w| (w[1].at - w[0].at).as_secs_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd / mean - 1.0).abs() < 0.05, "{mean} {sd}");
    }

    #[test]
    fn without_a_share_no_arrival_is_high_priority() {
        assert!(Arrivals::new(500.0, 0.0, 3, Duration::from_secs(2)).all(|a| !a.high));
    }
}
