//! `percentiles(expr)`: count, p50, p90, p99, p99.9 and max from the kernel's log-linear
//! histogram (layout in `buckets`). A percentile q is the value of rank `ceil(q * count)`
//! in sorted order (the nearest-rank definition); fslat reports the midpoint of the bucket
//! holding that rank, capped at the max, so it is within `1 / (2 * PCT_SUB)` (1.6%) of
//! the true value. The max is exact.

use super::buckets::{PCT_SLOTS, pct_value};

/// The quantiles reported, with the names text and JSON give them.
pub const QUANTILES: [(&str, f64); 4] = [
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("p99.9", 0.999),
];

/// One key's percentile histogram, summed over CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pct {
    /// Counts per bucket of `buckets::pct_range`; `PCT_SLOTS` long.
    pub slots: Vec<u64>,
    /// Values below 0, which no bucket holds.
    pub negative: u64,
    /// The largest value; `None` when nothing was recorded.
    pub max: Option<i64>,
    /// The sum of the values (a histogram's `_sum` in the metrics export).
    pub sum: i64,
}

/// A reported percentile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantile {
    Value(u64),
    /// The rank falls among the negative values, which are not bucketed.
    Negative,
}

impl Pct {
    pub fn empty() -> Self {
        Pct {
            slots: vec![0; PCT_SLOTS],
            negative: 0,
            max: None,
            sum: 0,
        }
    }

    pub fn count(&self) -> u64 {
        self.negative + self.slots.iter().sum::<u64>()
    }

    /// The value of rank `ceil(q * count)`, or `None` with no values.
    pub fn quantile(&self, q: f64) -> Option<Quantile> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        if rank <= self.negative {
            return Some(Quantile::Negative);
        }
        let mut seen = self.negative;
        for (i, &n) in self.slots.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let mid = pct_value(i);
                let capped = match self.max {
                    Some(max) if max >= 0 => mid.min(max as u64),
                    _ => mid,
                };
                return Some(Quantile::Value(capped));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::buckets::pct_slot;

    fn pct_of(values: &[i64]) -> Pct {
        let mut p = Pct::empty();
        for &v in values {
            if v < 0 {
                p.negative += 1;
            } else {
                p.slots[pct_slot(v as u64)] += 1;
            }
            p.max = Some(p.max.map_or(v, |m| m.max(v)));
        }
        p
    }

    /// The nearest-rank value, from the sorted values themselves.
    fn exact(sorted: &[i64], q: f64) -> i64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    #[test]
    fn each_percentile_is_within_two_percent_of_the_value_at_its_rank() {
        // Three delays in known proportions (as the kernel case has), and a spread.
        let mut values: Vec<i64> = Vec::new();
        for (ms, n) in [(20, 50), (40, 30), (80, 20)] {
            values.extend((0..n).map(|i| ms * 1_000_000 + i * 7919));
        }
        values.extend((1..2000).map(|i| i * i * 37));
        values.sort();
        let p = pct_of(&values);
        assert_eq!(p.count(), values.len() as u64);
        assert_eq!(p.max, values.last().copied());
        for (name, q) in QUANTILES {
            let Some(Quantile::Value(got)) = p.quantile(q) else {
                panic!("{name}: no value");
            };
            let want = exact(&values, q);
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(err <= 1.0 / 64.0, "{name}: {got} vs {want} ({err})");
        }
    }

    #[test]
    fn small_values_are_exact_and_negative_ranks_say_so() {
        let p = pct_of(&[-3, -1, 0, 1, 2, 3, 4, 5, 6, 31]);
        assert_eq!(p.quantile(0.1), Some(Quantile::Negative));
        assert_eq!(p.quantile(0.5), Some(Quantile::Value(2)));
        assert_eq!(p.quantile(0.999), Some(Quantile::Value(31)));
        assert_eq!(Pct::empty().quantile(0.5), None);
    }
}
