//! What the run has counted, at one moment, for whoever exports it: the tracing loop reads
//! the summaries and aggregations and hands them to a `Publish` (the metrics board maps
//! them to series). The runtime knows nothing of metrics.

use crate::aggregate::{AggFunc, State};
use crate::check::program::Linear;
use crate::output::{Summary, Value};
use std::time::{Duration, SystemTime};

/// How often the tracing loop publishes fresh figures.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Everything counted, cumulative since `start`; the metrics exporter's `Snapshot` is the
/// same with its series.
#[derive(Debug, Clone)]
pub struct Figures<A = AggFigures> {
    pub start: SystemTime,
    pub time: SystemTime,
    pub sessions: Vec<Summary>,
    pub aggregations: Vec<A>,
}

/// One aggregation's rows: here by the values of their keys (rows that show the same
/// merged) with their states; the metrics exporter's series (`metrics::AggSeries`) are
/// the same with a point a row.
#[derive(Debug, Clone)]
pub struct AggFigures<R = (Vec<Value<'static>>, State)> {
    pub name: String,
    pub session: String,
    pub title: String,
    pub func: AggFunc,
    /// Values are nanoseconds.
    pub duration: bool,
    /// `lhist`'s buckets.
    pub linear: Option<Linear>,
    pub key_names: Vec<String>,
    pub rows: Vec<R>,
    /// An aggregation without keys and no rows yet: its value before any update (the
    /// map's zeros).
    pub unset: Option<State>,
}

/// Takes the figures the tracing loop publishes (at `Tracing`, every `PUBLISH_EVERY`,
/// and at the end).
pub trait Publish: Send + Sync + std::fmt::Debug {
    fn publish(&self, figures: Figures);
}
