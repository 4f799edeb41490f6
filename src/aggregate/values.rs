//! The aggregation value structs the BPF side writes and the runtime reads, one Rust
//! struct each, matching the C struct of `bpf-runtime/` field by field. Codegen checks
//! each C struct against these offsets and sizes with `_Static_assert`, and the runtime
//! reads every value by field, so the two sides cannot drift apart unnoticed.

use super::buckets::{HIST_SLOTS, PCT_SLOTS};
use std::mem::{offset_of, size_of};

/// A C struct's layout as the generated C checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CStruct {
    /// `struct NAME`.
    pub name: &'static str,
    pub size: usize,
    /// (member, offset).
    pub fields: &'static [(&'static str, usize)],
}

/// `struct fslat_stat` (fslat_agg.bpf.h): count, sum, min, max and avg keep one.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stat {
    pub count: u64,
    pub sum: i64,
    pub min: i64,
    pub max: i64,
}

pub const STAT: CStruct = CStruct {
    name: "fslat_stat",
    size: size_of::<Stat>(),
    fields: &[
        ("count", offset_of!(Stat, count)),
        ("sum", offset_of!(Stat, sum)),
        ("min", offset_of!(Stat, min)),
        ("max", offset_of!(Stat, max)),
    ],
};

impl Stat {
    pub fn read(bytes: &[u8]) -> Stat {
        Stat {
            count: u64_at(bytes, offset_of!(Stat, count)),
            sum: i64_at(bytes, offset_of!(Stat, sum)),
            min: i64_at(bytes, offset_of!(Stat, min)),
            max: i64_at(bytes, offset_of!(Stat, max)),
        }
    }
}

/// `struct fslat_hist` (fslat_agg.bpf.h); an `lhist`'s own struct has the same shape with
/// its number of slots.
#[repr(C)]
pub struct Hist {
    pub slots: [u64; HIST_SLOTS],
    pub sum: i64,
}

pub const HIST: CStruct = CStruct {
    name: "fslat_hist",
    size: size_of::<Hist>(),
    fields: &[
        ("slots", offset_of!(Hist, slots)),
        ("sum", offset_of!(Hist, sum)),
    ],
};

/// `slots` counters and the sum after them: a `struct fslat_hist` or an `lhist`'s.
pub fn read_slots(bytes: &[u8], slots: usize) -> (Vec<u64>, i64) {
    let at = offset_of!(Hist, slots);
    let counts = (0..slots).map(|i| u64_at(bytes, at + 8 * i)).collect();
    (counts, i64_at(bytes, at + 8 * slots))
}

/// `struct fslat_pct` (fslat_pct.bpf.h).
#[repr(C)]
pub struct PctHist {
    pub negative: u64,
    pub slots: [u64; PCT_SLOTS],
}

pub const PCT_HIST: CStruct = CStruct {
    name: "fslat_pct",
    size: size_of::<PctHist>(),
    fields: &[
        ("negative", offset_of!(PctHist, negative)),
        ("slots", offset_of!(PctHist, slots)),
    ],
};

impl PctHist {
    /// The count of values below zero, and each slot's.
    pub fn read(bytes: &[u8]) -> (u64, Vec<u64>) {
        let at = offset_of!(PctHist, slots);
        (
            u64_at(bytes, offset_of!(PctHist, negative)),
            (0..PCT_SLOTS).map(|i| u64_at(bytes, at + 8 * i)).collect(),
        )
    }
}

/// `struct fslat_pct_max` (fslat_pct.bpf.h): one CPU's count, max and sum of a key.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PctMax {
    /// Values recorded on this CPU (0: `max` not set yet).
    pub count: u64,
    /// Over the whole run.
    pub max: i64,
    /// Generation + 1 of the interval `gen_max` belongs to; 0: none.
    pub gen_: u64,
    pub gen_max: i64,
    pub sum: i64,
}

pub const PCT_MAX: CStruct = CStruct {
    name: "fslat_pct_max",
    size: size_of::<PctMax>(),
    fields: &[
        ("count", offset_of!(PctMax, count)),
        ("max", offset_of!(PctMax, max)),
        ("gen", offset_of!(PctMax, gen_)),
        ("gen_max", offset_of!(PctMax, gen_max)),
        ("sum", offset_of!(PctMax, sum)),
    ],
};

impl PctMax {
    pub fn read(bytes: &[u8]) -> PctMax {
        PctMax {
            count: u64_at(bytes, offset_of!(PctMax, count)),
            max: i64_at(bytes, offset_of!(PctMax, max)),
            gen_: u64_at(bytes, offset_of!(PctMax, gen_)),
            gen_max: i64_at(bytes, offset_of!(PctMax, gen_max)),
            sum: i64_at(bytes, offset_of!(PctMax, sum)),
        }
    }
}

/// The `__u64` at byte `offset` (0 past the end: a short value reads as empty).
fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    bytes
        .get(offset..offset + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

fn i64_at(bytes: &[u8], offset: usize) -> i64 {
    u64_at(bytes, offset) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_is_read_by_field() {
        let words: [i64; 4] = [3, 60, 10, 30];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(
            Stat::read(&bytes),
            Stat {
                count: 3,
                sum: 60,
                min: 10,
                max: 30
            }
        );
        assert_eq!(STAT.size, 32);
    }
}
