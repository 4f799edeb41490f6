//! Aggregations, one module each, as DataFusion's functions-aggregate keeps its aggregate
//! functions: a module implements `Aggregate` (its name and arguments, its value in the
//! BPF map and the helper that updates it, how the map value decodes, what a row shows in
//! text and JSON and how it is exported) and `ALL` lists them. The parser, the check,
//! codegen, the runtime, the writers, the exporters, the bpftrace hints, the REPL's
//! completion and `--help` all take aggregations from here; the grammar's list of names
//! is checked against `ALL` by a test.
//!
//! A leaf: what the trait takes (`Spec`) and returns (`State`, `AggValue`, `PointValue`,
//! the bucket layouts of `buckets`) is defined here, and nothing here imports a stage.

mod avg;
pub mod buckets;
mod count;
mod hist;
mod lhist;
mod max;
mod min;
pub mod pct;
mod percentiles;
mod scalar;
mod shapes;
mod stats;
mod sum;
pub mod values;

pub use buckets::Linear;
use pct::Pct;
pub use shapes::{AggValue, NamedNumber, PointValue};
use values::{CStruct, Stat};

/// Every aggregation, in the order `--help` and diagnostics list them.
pub static ALL: &[&dyn Aggregate] = &[
    &count::COUNT,
    &hist::Hist,
    &lhist::Lhist,
    &percentiles::Percentiles,
    &sum::SUM,
    &min::MIN,
    &max::MAX,
    &avg::AVG,
    &stats::Stats,
];

/// What an aggregation's C and decoding depend on, of one use in a script: the checker
/// makes it from its `Aggregation` (`Aggregation::spec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Unique in the program: names its map and declarations.
    pub id: usize,
    /// Whether the value is a duration (`hist` then counts whole microseconds).
    pub duration: bool,
    /// `lhist`'s buckets.
    pub linear: Option<Linear>,
    /// `percentiles`: the per-CPU map of each key's count, sum and max.
    pub max_map: Option<String>,
    /// The C statement that counts an update lost (a full map).
    pub count_lost: String,
}

/// One aggregation: everything fslat knows about it besides the shared machinery (keys,
/// names, maps, writers).
pub trait Aggregate: Sync {
    /// The name a script calls it by.
    fn name(&self) -> &'static str;
    /// How `--help` shows it.
    fn help(&self) -> Help;
    /// The arguments it takes.
    fn args(&self) -> Args {
        Args::Value
    }
    /// Whether bpftrace has it, with the same arguments: `@x = NAME(...)` then translates.
    fn in_bpftrace(&self) -> bool {
        false
    }
    /// Its value in the BPF map and how a new key's value starts.
    fn c_value(&self, a: &Spec) -> CValue;
    /// C declarations of this aggregation's own, before its map (`lhist`: a value struct
    /// sized by its range, and a zero one to start new keys from).
    fn c_decl(&self, _a: &Spec) -> Vec<String> {
        Vec::new()
    }
    /// The C statement that adds `x` (an `__s64`) to `*value`.
    fn c_add(&self, a: &Spec, value: &str, x: &str) -> String;
    /// Statements after the update (`percentiles`: its per-CPU map's), given the key's
    /// address, the value pointer (NULL when the update was lost) and the argument.
    fn c_after(&self, _a: &Spec, _key: &str, _value: &str, _x: &str) -> Vec<String> {
        Vec::new()
    }
    /// Value structs shared with the runtime, checked in the generated C.
    fn c_structs(&self) -> &'static [CStruct];
    /// The header of `bpf-runtime/` its helper is in, beyond fslat.bpf.h.
    fn header(&self) -> Option<&'static str> {
        None
    }
    /// Whether a value of all zeros is a right start: what it shows reads no field that
    /// starts elsewhere (`min` and `max` start at the bounds they compare against). Such an
    /// aggregation without keys is kept per CPU (`Aggregation::per_cpu_array`), its CPUs'
    /// states merged when read.
    fn zero_start(&self) -> bool {
        false
    }
    /// `percentiles`: a per-CPU map of each key's count, sum and max beside the shared one
    /// (`c_after` updates it).
    fn per_cpu_max(&self) -> bool {
        false
    }
    /// A key's value read from the map (`cpus`: each CPU's value of the per-CPU map, if
    /// it has one); `tag` is the generation + 1 of the interval that just ended.
    fn decode(&self, a: &Spec, value: &[u8], cpus: &[Vec<u8>], tag: u64) -> State;
    /// What a row shows, in text and JSON.
    fn show(&self, s: &State) -> AggValue;
    /// JSON's `type` of its records.
    fn json_type(&self) -> &'static str;
    /// How Prometheus and OTLP export it.
    fn metric(&self) -> MetricKind;
    /// A row as the exporters take it (cumulative).
    fn point(&self, s: &State) -> PointValue;
}

/// The line or two `--help` gives an aggregation.
#[derive(Debug, Clone, Copy)]
pub struct Help {
    /// The call as written (`hist(EXPR) [by KEY]`).
    pub call: &'static str,
    pub about: &'static str,
    /// A whole script using it.
    pub example: Option<&'static str>,
}

/// What an aggregation takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Args {
    /// Nothing (`count()`).
    None,
    /// An integer or a duration.
    Value,
    /// A value, then constant `min, max, step` (`lhist`).
    ValueAndRange,
}

impl Args {
    /// How many arguments follow the value.
    pub fn more(self) -> usize {
        match self {
            Args::ValueAndRange => 3,
            Args::None | Args::Value => 0,
        }
    }
}

/// An aggregation's value in the BPF map.
pub struct CValue {
    /// The C type (`struct fslat_stat`).
    pub ty: String,
    pub start: Start,
}

/// How a new key's value starts.
pub enum Start {
    /// From a zero global: values too big for the BPF stack.
    Global(String),
    /// From an initialiser.
    Literal(&'static str),
}

/// How an aggregation is exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    /// Buckets (maybe none), a count and a sum.
    Histogram,
}

/// A key's value as read from the kernel, summed over CPUs where the map is per-CPU.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// `struct fslat_stat`.
    Stat(Stat),
    Hist {
        slots: Vec<u64>,
        sum: i64,
    },
    Pct {
        /// `max` is over the run (or, in an interval view, over the interval).
        pct: Pct,
        /// The max of the interval the snapshot was read at the end of.
        interval_max: Option<i64>,
    },
}

impl State {
    /// Whether nothing was recorded (such keys are not printed for an interval).
    pub fn is_empty(&self) -> bool {
        match self {
            State::Stat(s) => s.count == 0,
            State::Hist { slots, .. } => slots.iter().all(|&n| n == 0),
            State::Pct { pct, .. } => pct.count() == 0,
        }
    }

    /// Adds `other`'s values to these: two keys that show as one (two cgroups with one
    /// unit, or none) make one row.
    pub fn merge(&mut self, other: &State) {
        let max = |a: Option<i64>, b: Option<i64>| a.max(b).or(a).or(b);
        match (self, other) {
            (State::Stat(s), State::Stat(o)) => {
                if s.count == 0 {
                    *s = *o;
                } else if o.count > 0 {
                    s.count += o.count;
                    s.sum = s.sum.wrapping_add(o.sum);
                    s.min = s.min.min(o.min);
                    s.max = s.max.max(o.max);
                }
            }
            (State::Hist { slots, sum }, State::Hist { slots: o, sum: os }) => {
                slots.iter_mut().zip(o).for_each(|(a, b)| *a += b);
                *sum = sum.wrapping_add(*os);
            }
            (
                State::Pct { pct, interval_max },
                State::Pct {
                    pct: o,
                    interval_max: om,
                },
            ) => {
                pct.slots
                    .iter_mut()
                    .zip(&o.slots)
                    .for_each(|(a, b)| *a += b);
                pct.negative += o.negative;
                pct.sum = pct.sum.wrapping_add(o.sum);
                pct.max = max(pct.max, o.max);
                *interval_max = max(*interval_max, *om);
            }
            _ => {}
        }
    }

    /// What happened between `earlier` and `self` (both cumulative, same key).
    pub fn since(&self, earlier: Option<&State>) -> State {
        match (self, earlier) {
            (State::Stat(now), Some(State::Stat(then))) => State::Stat(Stat {
                count: now.count.saturating_sub(then.count),
                sum: now.sum.wrapping_sub(then.sum),
                ..*now
            }),
            (
                State::Hist { slots, sum },
                Some(State::Hist {
                    slots: then,
                    sum: s0,
                }),
            ) => State::Hist {
                slots: slots
                    .iter()
                    .zip(then)
                    .map(|(a, b)| a.saturating_sub(*b))
                    .collect(),
                sum: sum.wrapping_sub(*s0),
            },
            (State::Pct { pct, interval_max }, Some(State::Pct { pct: then, .. })) => {
                let slots: Vec<u64> = pct
                    .slots
                    .iter()
                    .zip(&then.slots)
                    .map(|(a, b)| a.saturating_sub(*b))
                    .collect();
                State::Pct {
                    pct: Pct {
                        max: max_of_counted(&slots, *interval_max),
                        slots,
                        negative: pct.negative.saturating_sub(then.negative),
                        sum: pct.sum.wrapping_sub(then.sum),
                    },
                    interval_max: *interval_max,
                }
            }
            (State::Pct { pct, interval_max }, None) => State::Pct {
                pct: Pct {
                    max: max_of_counted(&pct.slots, *interval_max),
                    ..pct.clone()
                },
                interval_max: *interval_max,
            },
            (now, _) => now.clone(),
        }
    }
}

/// An interval's `percentiles` max, made to agree with the values the interval counted.
/// The counts are differences of the shared histogram, the max is each CPU's max tagged
/// with the interval: an update the kernel makes while user space starts the next interval
/// can land its count in one interval and its max in the other (7.2 runs programs
/// preemptibly, so the gap can be long). The biggest value counted lies in the highest
/// bucket with a count: the tagged max when it lies in that bucket, else (its value went
/// to the neighbouring interval) the bucket's midpoint, as the percentiles are shown. Only
/// an interval of negative values alone keeps the tagged max (none: `max=-`).
fn max_of_counted(slots: &[u64], tagged: Option<i64>) -> Option<i64> {
    let Some(top) = slots.iter().rposition(|&n| n > 0) else {
        return tagged.filter(|&m| m < 0);
    };
    let range = buckets::pct_range(top);
    let within = |m: i64| {
        m >= 0
            && range.lo.is_none_or(|lo| m as u64 >= lo)
            && range.hi.is_none_or(|hi| (m as u64) < hi)
    };
    match tagged {
        Some(m) if within(m) => Some(m),
        _ => Some(buckets::pct_value(top).min(i64::MAX as u64) as i64),
    }
}

/// An aggregation by name: what a script's call, the AST and the checked program hold.
/// Compared, hashed and serialised by its name; one pointer (to its entry of `ALL`).
#[derive(Clone, Copy)]
pub struct AggFunc(&'static &'static dyn Aggregate);

impl AggFunc {
    /// The aggregation `ALL` lists under `name`.
    pub fn named(name: &str) -> Option<AggFunc> {
        ALL.iter().find(|a| a.name() == name).map(AggFunc)
    }

    pub fn name(self) -> &'static str {
        self.0.name()
    }
}

impl std::ops::Deref for AggFunc {
    type Target = dyn Aggregate;
    fn deref(&self) -> &Self::Target {
        *self.0
    }
}

impl PartialEq for AggFunc {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for AggFunc {}

impl std::hash::Hash for AggFunc {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl std::fmt::Debug for AggFunc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for AggFunc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for AggFunc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        AggFunc::named(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("no aggregation `{name}`")))
    }
}

/// Every aggregation's name, in `ALL`'s order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|a| a.name())
}

/// `--help`'s lines for the aggregations.
pub fn help() -> String {
    let mut out = String::new();
    for a in ALL {
        let h = a.help();
        out.push_str(&format!("  {:<26} {}\n", h.call, h.about));
        if let Some(example) = h.example {
            out.push_str(&format!("      {example}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct_state(values: &[i64], interval_max: Option<i64>) -> State {
        let mut pct = Pct::empty();
        for &v in values {
            pct.slots[buckets::pct_slot(v as u64)] += 1;
        }
        pct.max = values.iter().copied().max();
        State::Pct { pct, interval_max }
    }

    fn interval_max(now: &State, then: Option<&State>) -> Option<i64> {
        match now.since(then) {
            State::Pct { pct, .. } => pct.max,
            _ => panic!("percentiles"),
        }
    }

    #[test]
    fn an_interval_that_counted_values_always_has_a_max_of_what_it_counted() {
        let then = pct_state(&[5_000, 7_000], Some(7_000));
        // The tagged max is one of the interval's values: exact.
        let now = pct_state(&[5_000, 7_000, 9_000, 12_000], Some(12_000));
        assert_eq!(interval_max(&now, Some(&then)), Some(12_000));
        // 12000 counted here, but its max update went to the next interval (untagged):
        // the max is the midpoint of the bucket that holds 12000, never `-`.
        let lost = pct_state(&[5_000, 7_000, 9_000, 12_000], None);
        let shown = interval_max(&lost, Some(&then)).expect("a max");
        let range = buckets::pct_range(buckets::pct_slot(12_000));
        assert!((range.lo.unwrap()..range.hi.unwrap()).contains(&(shown as u64)));
        // A max tagged here whose count went to the next interval is not what was counted.
        let ahead = pct_state(&[5_000, 7_000, 9_000], Some(40_000));
        let shown = interval_max(&ahead, Some(&then)).expect("a max");
        let range = buckets::pct_range(buckets::pct_slot(9_000));
        assert!((range.lo.unwrap()..range.hi.unwrap()).contains(&(shown as u64)));
        // The first interval (nothing earlier) follows the same rule.
        assert_eq!(
            interval_max(&pct_state(&[3, 20], None), None),
            Some(20),
            "below 32 a bucket is one value"
        );
        // Nothing counted: no max.
        assert_eq!(interval_max(&then, Some(&then)), None);
    }

    /// The grammar names the aggregations it parses; they must be exactly `ALL`'s.
    #[test]
    fn the_grammar_parses_exactly_the_registered_aggregations() {
        let grammar = include_str!("../../grammar/fslat.pest");
        let rule = grammar
            .lines()
            .find(|l| l.starts_with("agg_func"))
            .expect("the grammar has agg_func");
        let mut in_grammar: Vec<&str> = rule.split('"').skip(1).step_by(2).collect();
        let mut registered: Vec<&str> = names().collect();
        in_grammar.sort_unstable();
        registered.sort_unstable();
        assert_eq!(in_grammar, registered);
    }

    #[test]
    fn names_are_unique_and_round_trip_through_serde() {
        for a in ALL {
            let f = AggFunc::named(a.name()).expect("found by name");
            let json = serde_json::to_string(&f).expect("serialises");
            assert_eq!(json, format!("\"{}\"", a.name()));
            let back: AggFunc = serde_json::from_str(&json).expect("deserialises");
            assert_eq!(back, f);
            assert_eq!(names().filter(|n| *n == a.name()).count(), 1);
        }
    }

    #[test]
    fn every_help_example_parses_and_uses_its_aggregation() {
        for a in ALL {
            if let Some(example) = a.help().example {
                assert!(example.contains(&format!("{}(", a.name())), "{example}");
                crate::syntax::parse(example).unwrap_or_else(|e| panic!("{example}: {e:?}"));
            }
        }
    }
}
