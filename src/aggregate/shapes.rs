//! What an aggregation's row is, in the few shapes the writers (`AggValue`) and the
//! exporters (`PointValue`) render: an aggregation that fits a shape needs nothing of its
//! own outside its module.

use super::pct::Pct;

/// A row's value as the text and JSON writers show it.
#[derive(Debug, Clone, PartialEq)]
pub enum AggValue {
    /// count, sum, min, max, avg: the one number asked for (avg rounded down).
    Number(i64),
    /// Several named numbers of one key, printed `name=value` (JSON `name`, `name_ns` for
    /// a duration): an aggregation that shows more than one figure.
    Fields(Vec<NamedNumber>),
    /// hist: slots as in fslat_agg.bpf.h (0: negative, 1: zero, k+1: [2^(k-1), 2^k)); lhist:
    /// slots as `Linear` says.
    Hist(Vec<u64>),
    Percentiles(Pct),
}

/// One of a row's named numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedNumber {
    pub name: &'static str,
    pub value: i64,
    /// In the argument's unit (a duration when it is one), not a count.
    pub in_unit: bool,
}

impl AggValue {
    /// What rows are sorted by, smallest first: the number, the first named number, or
    /// how many values a histogram holds.
    pub fn rank(&self) -> i128 {
        match self {
            AggValue::Number(n) => i128::from(*n),
            AggValue::Fields(f) => f.first().map_or(0, |n| i128::from(n.value)),
            AggValue::Hist(s) => i128::from(s.iter().sum::<u64>()),
            AggValue::Percentiles(p) => i128::from(p.count()),
        }
    }
}

/// A row's value as Prometheus and OTLP export it (cumulative).
#[derive(Debug, Clone, PartialEq)]
pub enum PointValue {
    /// count, sum, min, max, avg: the one number asked for.
    Number(i64),
    /// hist: slots as in fslat_agg.bpf.h (0: negative, 1: zero, k+1: [2^(k-1), 2^k)), and
    /// the sum of the values.
    Hist { slots: Vec<u64>, sum: i64 },
    /// percentiles: counts per bucket of `buckets::pct_range`, the values below
    /// zero (in no bucket), and the sum of the values.
    Pct {
        slots: Vec<u64>,
        negative: u64,
        sum: i64,
    },
    /// A count and a sum, exported as a histogram without bounds.
    Summary { count: u64, sum: i64 },
}
