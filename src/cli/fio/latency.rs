//! Latency statistics as fio reports them (min, max, mean, standard deviation,
//! percentiles), computed exactly from every simulated latency: fio estimates its
//! percentiles from histogram buckets, flashlab keeps each request's latency and ranks them.

/// fio's default percentile list (`percentile_list`).
pub(crate) const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// Latencies of one kind of request (ns), in any order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Latencies(Vec<u64>);

/// What fio prints of a set of latencies.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub(crate) n: u64,
    pub(crate) min_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) mean_ns: f64,
    /// The sample standard deviation (n - 1 in the denominator, as fio's).
    pub(crate) stddev_ns: f64,
    /// (percent, latency) for each of [`FIO_PERCENTILES`]; empty without latencies.
    pub(crate) percentiles: Vec<(f64, u64)>,
}

impl Latencies {
    pub(crate) fn push(&mut self, ns: u64) {
        self.0.push(ns);
    }

    pub(crate) fn len(&self) -> u64 {
        self.0.len() as u64
    }

    pub(crate) fn summary(&self) -> Summary {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let n = sorted.len();
        if n == 0 {
            return Summary {
                n: 0,
                min_ns: 0,
                max_ns: 0,
                mean_ns: 0.0,
                stddev_ns: 0.0,
                percentiles: Vec::new(),
            };
        }
        let sum: u128 = sorted.iter().map(|&v| v as u128).sum();
        let mean = sum as f64 / n as f64;
        let stddev = if n < 2 {
            0.0
        } else {
            let sq: f64 = sorted.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
            (sq / (n - 1) as f64).sqrt()
        };
        Summary {
            n: n as u64,
            min_ns: sorted[0],
            max_ns: sorted[n - 1],
            mean_ns: mean,
            stddev_ns: stddev,
            percentiles: FIO_PERCENTILES
                .iter()
                .map(|&p| (p, percentile(&sorted, p)))
                .collect(),
        }
    }
}

/// The nearest-rank percentile of `sorted` (not empty): the smallest value with at least
/// `p` percent of the values at or below it. Ranks are counted in hundredths of a percent,
/// in integers, so 99.99% of 10,000 values is exactly the 9,999th.
pub(crate) fn percentile(sorted: &[u64], p: f64) -> u64 {
    assert!(!sorted.is_empty(), "a percentile of no values");
    assert!((0.0..=100.0).contains(&p), "percentile {p} outside 0..=100");
    let n = sorted.len() as u128;
    let hundredths = (p * 100.0).round() as u128;
    let rank = (hundredths * n).div_ceil(10_000).clamp(1, n);
    sorted[rank as usize - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_are_exact() {
        let v: Vec<u64> = (1..=10_000).collect();
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&v, 50.0), 5_000);
        assert_eq!(percentile(&v, 99.99), 9_999);
        assert_eq!(percentile(&v, 100.0), 10_000);
        assert_eq!(percentile(&v, 0.0), 1);
        // Few values: each percentile is one of them, never an interpolation.
        let v = [10, 20, 30];
        assert_eq!(percentile(&v, 1.0), 10);
        assert_eq!(percentile(&v, 33.33), 10);
        assert_eq!(percentile(&v, 33.34), 20);
        assert_eq!(percentile(&v, 99.99), 30);
    }

    #[test]
    fn summary_matches_a_hand_computation() {
        let mut l = Latencies::default();
        for v in [4, 2, 8, 6] {
            l.push(v);
        }
        let s = l.summary();
        assert_eq!((s.n, s.min_ns, s.max_ns), (4, 2, 8));
        assert_eq!(s.mean_ns, 5.0);
        // Sample variance: (9 + 1 + 1 + 9) / 3.
        assert!((s.stddev_ns - (20.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.percentiles.len(), FIO_PERCENTILES.len());
        assert_eq!(s.percentiles[6], (50.0, 4));
        assert_eq!(s.percentiles[16], (99.99, 8));
        let mut one = Latencies::default();
        one.push(7);
        assert_eq!(one.summary().stddev_ns, 0.0);
        let none = Latencies::default().summary();
        assert_eq!((none.n, none.percentiles.len()), (0, 0));
        assert_eq!(l.len(), 4);
    }
}
