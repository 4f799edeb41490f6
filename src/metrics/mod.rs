//! Metrics for a fleet: the run's counters and aggregations, cumulative, served to
//! Prometheus (`--listen`) and pushed with OTLP (`--otlp`).
//!
//! The tracing loop never waits for either: about once a second it publishes a
//! `Snapshot` on a `Board` (an `Arc` swapped under a mutex held only for the swap), and
//! the server and pusher threads encode whatever snapshot is there when they need one.

mod otlp;
mod prometheus;
mod server;
mod web_config;

pub use otlp::{
    OtlpOptions, OtlpTarget, Pusher, Settings as OtlpSettings, parse_header,
    settings as otlp_settings,
};
pub use prometheus::encode;
pub use server::{Head, Server, read_head};
pub use web_config::WebConfig;

use crate::aggregate::Linear;
use crate::aggregate::buckets::{PCT_SHIFT, PCT_SUB};
use crate::aggregate::{MetricKind, PointValue};
use crate::output::Value;
use crate::output::figures::{AggFigures, Figures, Publish};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Everything exported, at one moment; values cumulative since `start`.
pub type Snapshot = Figures<AggSeries>;

/// The mark on aggregations whose session lost calls: (name without `_total`, help).
pub const AGGREGATION_MISSED: (&str, &str) = (
    "fslat_aggregation_missed",
    "Calls the kernel skipped in the aggregation's session: its values are low by up to this many (runs that count them: Linux 5.12+).",
);

impl Snapshot {
    /// Per aggregation (its metric name, as `aggregation`) the calls its session's
    /// programs skipped, where the kernel counts them.
    pub fn aggregation_misses(&self) -> Vec<(Vec<(String, String)>, u64)> {
        self.aggregations
            .iter()
            .filter_map(|a| {
                let session = self.sessions.iter().find(|s| s.label == a.session)?;
                let labels = vec![
                    ("session".to_string(), a.session.clone()),
                    ("aggregation".to_string(), a.metric_name()),
                ];
                Some((labels, session.get(&crate::check::counters::MISSED)?))
            })
            .collect()
    }
}

impl AggSeries {
    /// `fslat_NAME`, as exported (a counter's `_total` is the encoder's).
    pub fn metric_name(&self) -> String {
        format!(
            "fslat_{}",
            self.name.strip_suffix("_total").unwrap_or(&self.name)
        )
    }
}

/// One aggregation's series: a point a row.
pub type AggSeries = AggFigures<AggPoint>;

#[derive(Debug, Clone)]
pub struct AggPoint {
    pub keys: Vec<Value<'static>>,
    pub value: PointValue,
}

impl Snapshot {
    /// The series of what the run counted.
    pub fn of(figures: Figures) -> Snapshot {
        Snapshot {
            start: figures.start,
            time: figures.time,
            sessions: figures.sessions,
            aggregations: figures.aggregations.into_iter().map(series).collect(),
        }
    }

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

/// One aggregation's series: each row's point. An aggregation without keys is one series
/// at zero until counted, as a Prometheus client's unlabelled metric is, so it is there
/// from the first scrape; a gauge (min, max, avg) has no value before its first one: it
/// stays absent.
fn series(mut a: AggFigures) -> AggSeries {
    let func = a.func;
    let point = |(keys, state): (Vec<Value<'static>>, crate::aggregate::State)| AggPoint {
        keys,
        value: func.point(&state),
    };
    let read = std::mem::take(&mut a.rows);
    let unset = a.unset.take();
    let rows: Vec<AggPoint> = match read.is_empty() && func.metric() != MetricKind::Gauge {
        true => unset.map(|s| point((Vec::new(), s))).into_iter().collect(),
        false => read.into_iter().map(point).collect(),
    };
    a.with_rows(rows)
}

impl Publish for Board {
    fn publish(&self, figures: Figures) {
        self.put(Snapshot::of(figures));
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

    /// Makes `snapshot` the latest.
    pub fn put(&self, snapshot: Snapshot) {
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

/// One histogram row as Prometheus and OTLP take it, in the exported unit (seconds for
/// durations): (inclusive upper bound, values in this bucket) per bucket, not cumulative,
/// then the count and the sum.
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum: f64,
}

/// The buckets of every row of a `hist` or `percentiles` series (`None` for rows that
/// hold a number), all with the same bounds: up to the highest bucket used by any row.
///
/// `hist` exports its slots: the first bucket holds the negative values and slot 1
/// (`le=0` for integers, `le` just under 1us for durations, which the kernel counts in
/// whole microseconds), then each slot, bounds from `aggregate::buckets::hist_slot`.
/// `percentiles` exports its log-linear buckets four to a power of two (`pct_export`):
/// 32 sub-buckets a power of two would be hundreds of series a row. An `lhist` exports
/// its buckets, the one below `min` first (merged into the first bucket when `min` is 0,
/// as `hist` does with negative values); its values above the range are only in the
/// count (`+Inf`).
pub fn histograms(a: &AggSeries) -> Vec<Option<Buckets>> {
    let native: Vec<Option<NativeBuckets>> = a
        .rows
        .iter()
        .map(|r| native_buckets(&r.value, a.duration, a.linear))
        .collect();
    let top = native
        .iter()
        .flatten()
        .filter_map(|(b, _, _)| b.iter().rposition(|&(_, n)| n > 0))
        .max()
        .unwrap_or(0);
    native
        .into_iter()
        .map(|row| {
            let (buckets, count, sum) = row?;
            let bound =
                |hi: Option<u64>| scale(hi.map_or(u64::MAX as f64, |h| h as f64), a.duration);
            Some(Buckets {
                buckets: buckets
                    .iter()
                    .take(top + 1)
                    .map(|&(hi, n)| (bound(hi), n))
                    .collect(),
                count,
                sum: scale(sum as f64, a.duration),
            })
        })
        .collect()
}

/// A row's buckets in its own unit: (inclusive upper bound, `None` for none; count), every
/// bucket of the layout; then how many values the row holds, and their sum.
type NativeBuckets = (Vec<(Option<u64>, u64)>, u64, i64);

fn native_buckets(v: &PointValue, duration: bool, linear: Option<Linear>) -> Option<NativeBuckets> {
    let with_count = |(buckets, sum): (Vec<(Option<u64>, u64)>, i64)| {
        let count = buckets.iter().map(|b| b.1).sum();
        (buckets, count, sum)
    };
    match v {
        PointValue::Number(_) => None,
        PointValue::Summary { count, sum } => Some((Vec::new(), *count, *sum)),
        PointValue::Hist { slots, sum } if let Some(l) = linear => {
            let at = |i: usize| slots.get(i).copied().unwrap_or(0);
            let n = l.buckets() as usize;
            let first = if l.min == 0 { 1 } else { 0 };
            let buckets = (first..=n)
                .map(|slot| {
                    let hi = crate::aggregate::buckets::lhist_slot(slot, l).hi;
                    let below = if slot == 1 && first == 1 { at(0) } else { 0 };
                    (hi.map(|h| h - 1), at(slot) + below)
                })
                .collect();
            Some((buckets, slots.iter().sum(), *sum))
        }
        PointValue::Hist { slots, sum } => {
            let at = |i: usize| slots.get(i).copied().unwrap_or(0);
            let buckets = (1..crate::aggregate::buckets::HIST_SLOTS)
                .map(|slot| {
                    let hi = crate::aggregate::buckets::hist_slot(slot, duration).hi;
                    let n = at(slot) + if slot == 1 { at(0) } else { 0 };
                    (hi.map(|h| h - 1), n)
                })
                .collect();
            Some(with_count((buckets, *sum)))
        }
        PointValue::Pct {
            slots,
            negative,
            sum,
        } => {
            let mut buckets: Vec<(Option<u64>, u64)> = (0..PCT_EXPORT_BUCKETS)
                .map(|c| (pct_export_bound(c), 0))
                .collect();
            buckets[0].1 = *negative;
            for (i, &n) in slots.iter().enumerate() {
                if let Some(b) = buckets.get_mut(pct_export(i)) {
                    b.1 += n;
                }
            }
            Some(with_count((buckets, *sum)))
        }
    }
}

/// Exported `percentiles` buckets per power of two: coarser than the kernel's `PCT_SUB`,
/// so that an exported histogram stays a few hundred buckets.
const PCT_EXPORT_SUB: usize = 4;

/// Exported `percentiles` buckets: 0 is `[0, PCT_SUB)` (the kernel's exact buckets), then
/// `PCT_EXPORT_SUB` a power of two from `[PCT_SUB, ..)` on.
const PCT_EXPORT_BUCKETS: usize = 1 + PCT_EXPORT_SUB * (64 - PCT_SHIFT as usize);

/// The exported bucket of the kernel's percentile bucket `i` (`aggregate::buckets`).
fn pct_export(i: usize) -> usize {
    let sub = PCT_SUB as usize;
    if i < sub {
        0
    } else {
        1 + PCT_EXPORT_SUB * (i / sub - 1) + (i % sub) / (sub / PCT_EXPORT_SUB)
    }
}

/// The inclusive upper bound of exported percentile bucket `c` (`None`: none).
fn pct_export_bound(c: usize) -> Option<u64> {
    if c == 0 {
        return Some(PCT_SUB - 1);
    }
    let k = (c - 1) / PCT_EXPORT_SUB + PCT_SHIFT as usize;
    let q = ((c - 1) % PCT_EXPORT_SUB) as u64 + 1;
    let width_shift = k - PCT_EXPORT_SUB.trailing_zeros() as usize;
    (1u64 << k).checked_add(q << width_shift).map(|h| h - 1)
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
        Value::Formatted(n, radix) => radix.format(*n),
        Value::Str(s) => String::from_utf8_lossy(s).into_owned(),
        Value::Unread => crate::output::UNREAD.into(),
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
mod otlp_tests;
#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;

/// The one TLS crypto provider of the exporter's server and the OTLP client: rustls over
/// *ring* (no C toolchain or cmake at build time, unlike aws-lc-rs). rustls 0.23.48
/// deprecates it for lacking post-quantum key exchange; the exporter's peers (Prometheus,
/// OTLP collectors) negotiate X25519 and the NIST curves, which it has.
#[allow(deprecated)]
pub(crate) fn crypto_provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
