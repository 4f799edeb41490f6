//! `stats(x)`: the count, average (rounded down) and total of the values, as bpftrace's
//! `stats()`. It keeps a `struct fslat_stat` as count, sum, min, max and avg do, updated
//! by `fslat_stat_add` (fslat_agg.bpf.h); exported as a count and a sum.

use super::scalar::{self, stat};
use super::values::CStruct;
use super::{AggValue, Aggregate, CValue, Help, MetricKind, NamedNumber, PointValue, Spec, State};

pub struct Stats;

impl Aggregate for Stats {
    fn name(&self) -> &'static str {
        "stats"
    }

    fn help(&self) -> Help {
        Help {
            call: "stats(EXPR) [by KEY]",
            about: "count, average and total",
            example: Some("session vfs_write { stats(count) by comm }"),
        }
    }

    fn in_bpftrace(&self) -> bool {
        true
    }

    fn c_value(&self, _: &Spec) -> CValue {
        scalar::c_value()
    }

    fn c_add(&self, _: &Spec, value: &str, x: &str) -> String {
        format!("fslat_stat_sum({value}, {x});")
    }

    fn zero_start(&self) -> bool {
        true
    }

    fn c_structs(&self) -> &'static [CStruct] {
        scalar::C_STRUCTS
    }

    fn decode(&self, _: &Spec, value: &[u8], _: &[Vec<u8>], _: u64) -> State {
        scalar::decode(value)
    }

    /// `count=3 average=20 total=60` (bpftrace: `count 3, average 20, total 60`).
    fn show(&self, s: &State) -> AggValue {
        let s = stat(s);
        let named = |name, value, in_unit| NamedNumber {
            name,
            value,
            in_unit,
        };
        AggValue::Fields(vec![
            named("count", s.count as i64, false),
            named(
                "average",
                s.sum.checked_div(s.count as i64).unwrap_or(0),
                true,
            ),
            named("total", s.sum, true),
        ])
    }

    fn json_type(&self) -> &'static str {
        "stats"
    }

    fn metric(&self) -> MetricKind {
        MetricKind::Histogram
    }

    fn point(&self, s: &State) -> PointValue {
        let s = stat(s);
        PointValue::Summary {
            count: s.count,
            sum: s.sum,
        }
    }
}
