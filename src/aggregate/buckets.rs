//! Where histogram and percentile buckets begin and end, in the units of the value: one
//! definition for the text and JSON writers and the metrics exporter, matching the slots
//! `fslat_agg.bpf.h` and `fslat_pct.bpf.h` fill.

use serde::{Deserialize, Serialize};

/// A bucket's range: values `v` with `lo <= v < hi` (`hi` `None`: no upper bound).
/// Bucket 0 of a histogram holds the negative values: `lo` is `None` there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub lo: Option<u64>,
    pub hi: Option<u64>,
}

/// Nanoseconds in the microsecond a duration `hist` counts (`FSLAT_NS_PER_US` of
/// fslat_agg.bpf.h, checked in the generated C).
pub const NS_PER_US: u64 = 1000;

/// Slots of a `struct fslat_hist` (fslat_agg.bpf.h); its sum follows them.
pub const HIST_SLOTS: usize = 66;

/// `hist` slot `i`: 0 negative values, 1 zero, `k + 1` `[2^(k-1), 2^k)`. For durations the
/// kernel counts whole microseconds, so slot 1 is `[0, 1us)` and `k + 1` is
/// `[2^(k-1) us, 2^k us)`; the range here is in nanoseconds either way.
pub fn hist_slot(i: usize, duration: bool) -> Range {
    let scale: u64 = if duration { NS_PER_US } else { 1 };
    match i {
        0 => Range {
            lo: None,
            hi: Some(0),
        },
        1 => Range {
            lo: Some(0),
            hi: Some(scale),
        },
        i => {
            let lo = 1u64.checked_shl(i as u32 - 2).unwrap_or(u64::MAX);
            Range {
                lo: lo.checked_mul(scale),
                hi: lo.checked_mul(2).and_then(|h| h.checked_mul(scale)),
            }
        }
    }
}

/// Slot `i` of a histogram: an `lhist`'s when `linear` is given, else a `hist`'s.
pub fn slot(i: usize, duration: bool, linear: Option<Linear>) -> Range {
    match linear {
        Some(l) => lhist_slot(i, l),
        None => hist_slot(i, duration),
    }
}

/// `lhist` slot `i`: 0 below `min`, then the buckets, then the values from the last
/// bucket's end up (see `Linear`).
pub fn lhist_slot(i: usize, l: Linear) -> Range {
    let n = l.buckets();
    match i as u64 {
        0 => Range {
            lo: None,
            hi: Some(l.min),
        },
        i if i > n => Range {
            lo: Some(l.min + n * l.step),
            hi: None,
        },
        i => Range {
            lo: Some(l.min + (i - 1) * l.step),
            hi: Some(l.min + i * l.step),
        },
    }
}

/// `percentiles` layout (`FSLAT_PCT_*` in fslat_pct.bpf.h): values below `PCT_SUB` have a
/// bucket each; above, every power of two `[2^k, 2^(k+1))` is cut into `PCT_SUB` equal
/// parts. A bucket is then at most `1/PCT_SUB` of its lower bound wide.
pub const PCT_SUB: u64 = 32;
pub const PCT_SHIFT: u32 = 5;
pub const PCT_SLOTS: usize = (PCT_SUB as usize) * (64 - PCT_SHIFT as usize + 1);

/// The percentile bucket a value falls in, as the kernel computes it.
pub fn pct_slot(v: u64) -> usize {
    if v < PCT_SUB {
        return v as usize;
    }
    let k = 63 - v.leading_zeros();
    let sub = (v >> (k - PCT_SHIFT)) - PCT_SUB;
    (PCT_SUB as usize) * (k - PCT_SHIFT + 1) as usize + sub as usize
}

/// The values of percentile bucket `i`.
pub fn pct_range(i: usize) -> Range {
    let sub = PCT_SUB as usize;
    if i < sub {
        return Range {
            lo: Some(i as u64),
            hi: Some(i as u64 + 1),
        };
    }
    let k = (i / sub) as u32 + PCT_SHIFT - 1;
    let width = 1u64 << (k - PCT_SHIFT);
    let lo = (1u64 << k) + (i % sub) as u64 * width;
    Range {
        lo: Some(lo),
        hi: lo.checked_add(width),
    }
}

/// What a percentile bucket reports: its midpoint, so the error is at most half its width
/// (at most `1 / (2 * PCT_SUB)` of the true value); exact below `PCT_SUB`.
pub fn pct_value(i: usize) -> u64 {
    let r = pct_range(i);
    let lo = r.lo.unwrap_or(0);
    let width = r.hi.map_or(u64::MAX - lo, |h| h - lo);
    lo + width / 2
}

/// `lhist(x, min, max, step)`: slot 0 counts values below `min`, slot `i` in `1..=buckets()`
/// `[min + (i-1)*step, min + i*step)`, and the last slot values from `min +
/// buckets()*step` up (as bpftrace's `lhist`). Nanoseconds for a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Linear {
    pub min: u64,
    pub max: u64,
    pub step: u64,
}

impl Linear {
    /// Buckets between `min` and `max`.
    pub fn buckets(self) -> u64 {
        (self.max - self.min) / self.step
    }

    /// Slots the kernel keeps: the buckets, one below and one above.
    pub fn slots(self) -> usize {
        self.buckets() as usize + 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_the_percentile_bucket_that_contains_it() {
        let mut samples: Vec<u64> = (0..5000).collect();
        for k in 5..64 {
            let p = 1u64 << k;
            samples.extend([
                p - 1,
                p,
                p + 1,
                p + p / 3,
                p.wrapping_mul(2).wrapping_sub(1),
            ]);
        }
        samples.push(u64::MAX);
        for v in samples {
            let i = pct_slot(v);
            assert!(i < PCT_SLOTS, "{v}: slot {i}");
            let r = pct_range(i);
            assert!(
                r.lo.unwrap() <= v && r.hi.is_none_or(|h| v < h),
                "{v}: {r:?}"
            );
            let mid = pct_value(i) as f64;
            let err = (mid - v as f64).abs() / (v.max(1) as f64);
            assert!(
                err <= 1.0 / 64.0 + 1e-12,
                "{v}: reported {mid}, error {err}"
            );
        }
    }

    #[test]
    fn lhist_slots_are_below_min_the_steps_and_from_the_last_step_up() {
        let l = Linear {
            min: 10,
            max: 40,
            step: 10,
        };
        assert_eq!(l.slots(), 5);
        let r = |lo, hi| Range { lo, hi };
        assert_eq!(lhist_slot(0, l), r(None, Some(10)));
        assert_eq!(lhist_slot(1, l), r(Some(10), Some(20)));
        assert_eq!(lhist_slot(3, l), r(Some(30), Some(40)));
        assert_eq!(lhist_slot(4, l), r(Some(40), None));
        // A range that is not a whole number of steps ends at the last whole step.
        let odd = Linear {
            min: 0,
            max: 10,
            step: 3,
        };
        assert_eq!(lhist_slot(3, odd), r(Some(6), Some(9)));
        assert_eq!(lhist_slot(4, odd), r(Some(9), None));
    }

    #[test]
    fn duration_hist_slots_are_whole_microseconds() {
        assert_eq!(
            hist_slot(1, true),
            Range {
                lo: Some(0),
                hi: Some(1000)
            }
        );
        assert_eq!(
            hist_slot(6, true),
            Range {
                lo: Some(16_000),
                hi: Some(32_000)
            }
        );
        assert_eq!(
            hist_slot(11, false),
            Range {
                lo: Some(512),
                hi: Some(1024)
            }
        );
        assert_eq!(hist_slot(65, false).hi, None);
    }
}
