//! `lhist(x, min, max, step)`: a linear histogram, in its own `struct fslat_lhist_ID`
//! (`c_decl`) of `Linear::slots()` slots and the sum; `fslat_lhist_add` (fslat_agg.bpf.h)
//! updates it.

use super::values::{CStruct, read_slots};
use super::{AggValue, Aggregate, Args, CValue, Help, MetricKind, PointValue, Spec, Start, State};

pub struct Lhist;

impl Aggregate for Lhist {
    fn name(&self) -> &'static str {
        "lhist"
    }

    fn help(&self) -> Help {
        Help {
            call: "lhist(EXPR, MIN, MAX, STEP)",
            about: "linear histogram (by KEY too)",
            example: Some("session vfs_write { lhist(count, 0, 4096, 512) }"),
        }
    }

    fn args(&self) -> Args {
        Args::ValueAndRange
    }

    fn in_bpftrace(&self) -> bool {
        true
    }

    fn c_value(&self, a: &Spec) -> CValue {
        CValue {
            ty: format!("struct fslat_lhist_{}", a.id),
            start: Start::Global(format!("fslat_lhist_zero_{}", a.id)),
        }
    }

    /// The slots: below its range, its buckets, above its range; then the sum.
    fn c_decl(&self, a: &Spec) -> Vec<String> {
        let id = a.id;
        let slots = a.linear.map_or(0, |l| l.slots());
        vec![
            "// The linear histogram's slots: below its range, its buckets, above its range."
                .into(),
            format!("struct fslat_lhist_{id} {{"),
            format!("\t__u64 slots[{slots}];"),
            "\t__s64 sum;".into(),
            "};".into(),
            format!("struct fslat_lhist_{id} fslat_lhist_zero_{id};"),
        ]
    }

    fn zero_start(&self) -> bool {
        true
    }

    fn c_add(&self, a: &Spec, value: &str, x: &str) -> String {
        let l = a.linear.expect("the check gives an lhist its range");
        format!(
            "fslat_lhist_add({value}->slots, &{value}->sum, {x}, {}ULL, {}ULL, {}ULL);",
            l.min,
            l.step,
            l.buckets()
        )
    }

    fn c_structs(&self) -> &'static [CStruct] {
        &[]
    }

    fn decode(&self, a: &Spec, value: &[u8], _: &[Vec<u8>], _: u64) -> State {
        let slots = a.linear.map_or(0, |l| l.slots());
        let (slots, sum) = read_slots(value, slots);
        State::Hist { slots, sum }
    }

    fn show(&self, s: &State) -> AggValue {
        show_slots(s)
    }

    fn json_type(&self) -> &'static str {
        "hist"
    }

    fn metric(&self) -> MetricKind {
        MetricKind::Histogram
    }

    fn point(&self, s: &State) -> PointValue {
        point_slots(s)
    }
}

/// A `hist`'s or `lhist`'s row: its slots.
pub fn show_slots(s: &State) -> AggValue {
    match s {
        State::Hist { slots, .. } => AggValue::Hist(slots.clone()),
        _ => AggValue::Hist(Vec::new()),
    }
}

/// A `hist`'s or `lhist`'s exported row: its slots and sum.
pub fn point_slots(s: &State) -> PointValue {
    match s {
        State::Hist { slots, sum } => PointValue::Hist {
            slots: slots.clone(),
            sum: *sum,
        },
        _ => PointValue::Hist {
            slots: Vec::new(),
            sum: 0,
        },
    }
}
