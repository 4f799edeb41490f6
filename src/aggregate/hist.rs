//! `hist`: a power-of-two histogram (`struct fslat_hist`, fslat_agg.bpf.h).

use super::buckets::HIST_SLOTS;
use super::values::{CStruct, HIST, read_slots};
use super::{AggValue, Aggregate, CValue, Help, MetricKind, PointValue, Spec, Start, State};

pub struct Hist;

impl Aggregate for Hist {
    fn name(&self) -> &'static str {
        "hist"
    }

    fn help(&self) -> Help {
        Help {
            call: "hist(EXPR) [by KEY]",
            about: "power-of-two histogram",
            example: Some("session vfs_read { hist(latency) by comm }"),
        }
    }

    fn in_bpftrace(&self) -> bool {
        true
    }

    fn c_value(&self, _: &Spec) -> CValue {
        CValue {
            ty: "struct fslat_hist".into(),
            start: Start::Global("fslat_hist_zero".into()),
        }
    }

    /// A duration counts whole microseconds, so its bounds are round.
    fn zero_start(&self) -> bool {
        true
    }

    fn c_add(&self, a: &Spec, value: &str, x: &str) -> String {
        let add = if a.duration {
            "fslat_hist_add_us"
        } else {
            "fslat_hist_add"
        };
        format!("{add}({value}, {x});")
    }

    fn c_structs(&self) -> &'static [CStruct] {
        &[HIST]
    }

    fn decode(&self, _: &Spec, value: &[u8], _: &[Vec<u8>], _: u64) -> State {
        let (slots, sum) = read_slots(value, HIST_SLOTS);
        State::Hist { slots, sum }
    }

    fn show(&self, s: &State) -> AggValue {
        super::lhist::show_slots(s)
    }

    fn json_type(&self) -> &'static str {
        "hist"
    }

    fn metric(&self) -> MetricKind {
        MetricKind::Histogram
    }

    fn point(&self, s: &State) -> PointValue {
        super::lhist::point_slots(s)
    }
}
