//! A fixed log-bucket histogram: constant memory, mergeable, ≤ 12.5 % relative error.
//!
//! A value `v ≥ 8` falls in the bucket of its highest set bit and the three bits below it, so
//! a bucket spans 1/8 of a power of two; values below 8 have a bucket each. Quantiles report a
//! bucket's midpoint, clamped to the exact minimum and maximum seen. Latencies are recorded in
//! microseconds; snapshots report Flink's quantiles (.5, .75, .95, .98, .99, .999).

use serde::{Deserialize, Serialize};

const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Buckets: 8 exact small values, then 8 per power of two from 2^3 to 2^63.
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

/// A histogram of `u64` values.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let high = 63 - v.leading_zeros(); // ≥ 3
    let sub = ((v >> (high - SUB_BITS)) as usize) & (SUB - 1);
    SUB + (high - SUB_BITS) as usize * SUB + sub
}

/// The smallest and largest value of bucket `b`.
fn bounds_of(b: usize) -> (u64, u64) {
    if b < SUB {
        return (b as u64, b as u64);
    }
    let high = (b - SUB) / SUB + SUB_BITS as usize;
    let sub = ((b - SUB) % SUB) as u64;
    let width = 1u64 << (high - SUB_BITS as usize);
    let low = (1u64 << high) + sub * width;
    (low, low + (width - 1))
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one value.
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// How many values were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value at quantile `q` (0 ≤ q ≤ 1), or `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        // The rank of the value, 1-based: the smallest value with at least q·n values ≤ it.
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, high) = bounds_of(b);
                let mid = low + (high - low) / 2;
                return Some(mid.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Count, min, max, mean and Flink's quantiles.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let q = |p| self.quantile(p).unwrap_or(0) as f64;
        HistogramSnapshot {
            count: self.count,
            min: if self.count == 0 {
                0.0
            } else {
                self.min as f64
            },
            max: self.max as f64,
            mean: if self.count == 0 {
                0.0
            } else {
                self.sum as f64 / self.count as f64
            },
            p50: q(0.5),
            p75: q(0.75),
            p95: q(0.95),
            p98: q(0.98),
            p99: q(0.99),
            p999: q(0.999),
        }
    }
}

/// What a histogram held when it was read: its count, extremes, mean and Flink's quantiles
/// (all zero when empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HistogramSnapshot {
    /// Values recorded.
    pub count: u64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// The mean value.
    pub mean: f64,
    /// The median.
    pub p50: f64,
    /// The 75th percentile.
    pub p75: f64,
    /// The 95th percentile.
    pub p95: f64,
    /// The 98th percentile.
    pub p98: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The 99.9th percentile.
    pub p999: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for b in 0..BUCKETS {
            let (low, high) = bounds_of(b);
            assert!(low <= high);
            if b > 0 {
                assert_eq!(low, last + 1, "bucket {b} starts where {} ended", b - 1);
            }
            assert_eq!(bucket_of(low), b);
            assert_eq!(bucket_of(high), b);
            last = high;
        }
        assert_eq!(last, u64::MAX);
    }

    #[test]
    fn quantiles_are_within_an_eighth_of_the_exact_ones() {
        // A skewed sample: the oracle is the sorted sample itself.
        let mut values: Vec<u64> = (1..=20_000u64)
            .map(|i| (i * i * 7919) % 1_000_003 + 1)
            .collect();
        let mut h = Histogram::new();
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        for q in [0.0, 0.1, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0] {
            let rank = ((q * values.len() as f64).ceil() as usize).max(1);
            let exact = values[rank - 1] as f64;
            let got = h.quantile(q).unwrap() as f64;
            assert!(
                (got - exact).abs() <= exact / 8.0,
                "q {q}: got {got}, exact {exact}"
            );
        }
        assert_eq!(h.quantile(1.0), Some(*values.last().unwrap()));
        assert_eq!(h.quantile(0.0), Some(values[0]));
    }

    #[test]
    fn merging_equals_recording_into_one() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in 0..1000u64 {
            let x = v * 37 % 5000;
            if v % 3 == 0 {
                a.record(x)
            } else {
                b.record(x)
            }
            all.record(x);
        }
        a.merge(&b);
        assert_eq!(a.snapshot(), all.snapshot());
        assert_eq!(Histogram::new().snapshot(), HistogramSnapshot::default());
    }
}
