//! The aggregations that keep a `struct fslat_stat` (fslat_agg.bpf.h) and show one number of
//! it: count, sum, min, max, avg. Each is a `Scalar` in its own module.

use super::values::{CStruct, STAT, Stat};
use super::{AggValue, Aggregate, Args, CValue, Help, MetricKind, PointValue, Spec, Start, State};

pub struct Scalar {
    pub name: &'static str,
    pub help: Help,
    pub args: Args,
    pub metric: MetricKind,
    /// The number a row shows.
    pub number: fn(&Stat) -> i64,
    /// The fslat_agg.bpf.h helper that adds a value: `fslat_stat_add` keeps all four
    /// fields; `count` and `sum`/`avg` need fewer (`fslat_stat_count`, `fslat_stat_sum`).
    pub add: &'static str,
}

/// The helper that keeps min and max, which start at the bounds, not at zero.
const KEEPS_BOUNDS: &str = "fslat_stat_add";

/// A `struct fslat_stat`, starting with the bounds min and max compare against.
pub fn c_value() -> CValue {
    CValue {
        ty: "struct fslat_stat".into(),
        start: Start::Literal("{ .min = 0x7fffffffffffffffLL, .max = -0x7fffffffffffffffLL - 1 }"),
    }
}

pub const C_STRUCTS: &[CStruct] = &[STAT];

pub fn decode(value: &[u8]) -> State {
    State::Stat(Stat::read(value))
}

/// The `struct fslat_stat` of `s` (an empty one for another state).
pub fn stat(s: &State) -> Stat {
    match s {
        State::Stat(s) => *s,
        _ => Stat::default(),
    }
}

impl Aggregate for Scalar {
    fn name(&self) -> &'static str {
        self.name
    }

    fn help(&self) -> Help {
        self.help
    }

    fn args(&self) -> Args {
        self.args
    }

    fn in_bpftrace(&self) -> bool {
        true
    }

    fn c_value(&self, _: &Spec) -> CValue {
        c_value()
    }

    fn c_add(&self, _: &Spec, value: &str, x: &str) -> String {
        format!("{}({value}, {x});", self.add)
    }

    fn zero_start(&self) -> bool {
        self.add != KEEPS_BOUNDS
    }

    fn c_structs(&self) -> &'static [CStruct] {
        C_STRUCTS
    }

    fn decode(&self, _: &Spec, value: &[u8], _: &[Vec<u8>], _: u64) -> State {
        decode(value)
    }

    fn show(&self, s: &State) -> AggValue {
        AggValue::Number((self.number)(&stat(s)))
    }

    fn json_type(&self) -> &'static str {
        "count"
    }

    fn metric(&self) -> MetricKind {
        self.metric
    }

    fn point(&self, s: &State) -> PointValue {
        PointValue::Number((self.number)(&stat(s)))
    }
}
