//! Metrics for a fleet: the run's counters and aggregations, cumulative, served to
//! Prometheus (`--listen`) and pushed with OTLP (`--otlp`).
//!
//! The tracing loop never waits for either: about once a second it publishes a
//! `Snapshot` on a `Board` (an `Arc` swapped under a mutex held only for the swap), and
//! the server and pusher threads encode whatever snapshot is there when they need one.

mod otlp;
mod prometheus;

pub use otlp::{OtlpTarget, Pusher};
pub use prometheus::{Server, encode};

use crate::output::{Summary, Value};
use crate::syntax::ast::AggFunc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How often the tracing loop publishes a fresh snapshot.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Everything exported, at one moment; values cumulative since `start`.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub start: SystemTime,
    pub time: SystemTime,
    pub sessions: Vec<Summary>,
    pub aggregations: Vec<AggSeries>,
}

/// One aggregation's rows.
#[derive(Debug, Clone)]
pub struct AggSeries {
    /// The metric is `fslat_NAME`.
    pub name: String,
    pub session: String,
    pub title: String,
    pub func: AggFunc,
    /// Values are nanoseconds, exported as seconds.
    pub duration: bool,
    pub key_names: Vec<String>,
    pub rows: Vec<AggPoint>,
}

#[derive(Debug, Clone)]
pub struct AggPoint {
    pub keys: Vec<Value<'static>>,
    pub value: PointValue,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PointValue {
    /// count, sum, min, max, avg: the one number asked for.
    Number(i64),
    /// hist: slots as in fslat.bpf.h (0: negative, 1: zero, k+1: [2^(k-1), 2^k)), and
    /// the sum of the values.
    Hist { slots: Vec<u64>, sum: i64 },
}

impl Snapshot {
    pub fn empty() -> Self {
        let now = SystemTime::now();
        Snapshot {
            start: now,
            time: now,
            sessions: Vec::new(),
            aggregations: Vec::new(),
        }
    }
}

/// Where the tracing loop leaves the latest snapshot for the exporters.
#[derive(Debug)]
pub struct Board {
    latest: Mutex<Arc<Snapshot>>,
}

impl Board {
    pub fn new() -> Arc<Self> {
        Arc::new(Board {
            latest: Mutex::new(Arc::new(Snapshot::empty())),
        })
    }

    pub fn publish(&self, snapshot: Snapshot) {
        let fresh = Arc::new(snapshot);
        // The lock is held for the swap only; the old snapshot is dropped after it.
        let old = match self.latest.lock() {
            Ok(mut latest) => std::mem::replace(&mut *latest, fresh),
            Err(poisoned) => std::mem::replace(&mut *poisoned.into_inner(), fresh),
        };
        drop(old);
    }

    pub fn latest(&self) -> Arc<Snapshot> {
        match self.latest.lock() {
            Ok(latest) => Arc::clone(&latest),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

/// A histogram's buckets as Prometheus and OTLP want them: (inclusive upper bound in the
/// exported unit, values in this bucket), for slots up to the highest one used by any
/// row (`top`). The first bucket holds the negative values and slot 1 (`le=0` for
/// integers, `le` just under 1us for durations, which the kernel counts in whole
/// microseconds); then each slot's values, bounds from `output::buckets::hist_slot`.
pub fn hist_buckets(slots: &[u64], top: usize, duration: bool) -> Vec<(f64, u64)> {
    let at = |i: usize| slots.get(i).copied().unwrap_or(0);
    (1..=top.max(1))
        .map(|slot| {
            let hi = crate::output::buckets::hist_slot(slot, duration).hi;
            let bound = hi.map_or(u64::MAX as f64, |h| (h - 1) as f64);
            let n = at(slot) + if slot == 1 { at(0) } else { 0 };
            (scale(bound, duration), n)
        })
        .collect()
}

/// The highest slot with a value in any row of `a` (at least 1: the zero bucket).
pub fn top_slot(a: &AggSeries) -> usize {
    a.rows
        .iter()
        .filter_map(|r| match &r.value {
            PointValue::Hist { slots, .. } => slots.iter().rposition(|&n| n > 0),
            PointValue::Number(_) => None,
        })
        .max()
        .unwrap_or(1)
        .max(1)
}

/// A value in the exported unit: seconds for durations.
pub fn scale(v: f64, duration: bool) -> f64 {
    if duration { v / 1e9 } else { v }
}

/// A label name Prometheus accepts: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`
/// (reserved), not `le` (histograms use it).
pub fn label_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    while out.starts_with("__") {
        out.remove(0);
    }
    if out == "le" || out == "session" {
        out.insert_str(0, "key_");
    }
    out
}

/// A key value as label text.
pub fn label_value(v: &Value) -> String {
    match v {
        Value::Unsigned(n) | Value::Duration(n) => n.to_string(),
        Value::Signed(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Ptr(p) => format!("0x{p:x}"),
        Value::Str(s) => String::from_utf8_lossy(s).into_owned(),
        Value::Stack(s) => crate::output::stack_text(s),
    }
}

/// The labels of one row: its keys by name.
pub fn row_labels(a: &AggSeries, row: &AggPoint) -> Vec<(String, String)> {
    a.key_names
        .iter()
        .zip(&row.keys)
        .map(|(n, v)| (label_name(n), label_value(v)))
        .collect()
}

#[cfg(test)]
mod tests;
