//! What the run has counted, at one moment, for whoever exports it: the runtime's tracing
//! loop reads the summaries and aggregations and hands them to a `Publish` (the metrics
//! board maps them to series). Here, below both, so that the runtime knows nothing of
//! metrics and the metrics nothing of the runtime.

use super::Summary;
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
/// merged) with their states.
pub use super::AggFigures;

/// Takes the figures the tracing loop publishes (at `Tracing`, every `PUBLISH_EVERY`,
/// and at the end).
pub trait Publish: Send + Sync + std::fmt::Debug {
    fn publish(&self, figures: Figures);
}
