//! `--listen`: the Prometheus text exposition format that `server.rs` serves at
//! `/metrics`. The encoding is prometheus-client's (name and label-value escaping,
//! `_total` on counters, cumulative `le` buckets).

use super::{AggSeries, PointValue, Snapshot, histograms, row_labels, scale};
use crate::aggregate::MetricKind;
use crate::check::counters;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::Arc;

pub use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The Prometheus text for a snapshot.
pub fn encode(snapshot: &Snapshot) -> String {
    #[derive(Debug)]
    struct Figures(Arc<Snapshot>);
    impl Collector for Figures {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            encode_snapshot(&self.0, &mut encoder)
        }
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Figures(Arc::new(snapshot.clone()))));
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry);
    text
}

type Labels = Vec<(String, String)>;

fn encode_snapshot(s: &Snapshot, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    for c in counters::ALL.iter().filter(|c| c.is_metric()) {
        let rows: Vec<(Labels, u64)> = s
            .sessions
            .iter()
            .filter_map(|x| Some((vec![("session".to_string(), x.label.clone())], x.get(c)?)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let name = format!("fslat_{}", c.name);
        let mut family = encoder.encode_descriptor(&name, c.about, None, MetricType::Counter)?;
        for (labels, v) in &rows {
            family
                .encode_family(labels)?
                .encode_counter::<NoLabelSet, _, u64>(v, None)?;
        }
    }
    for a in &s.aggregations {
        encode_aggregation(a, encoder)?;
    }
    Ok(())
}

fn encode_aggregation(
    a: &AggSeries,
    encoder: &mut DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    let name = format!("fslat_{}", a.name.strip_suffix("_total").unwrap_or(&a.name));
    let unit = if a.duration { " (seconds)" } else { "" };
    let help = format!("{}: {}{unit}.", a.session, a.title);
    let kind = match a.func.metric() {
        MetricKind::Counter => MetricType::Counter,
        MetricKind::Gauge => MetricType::Gauge,
        MetricKind::Histogram => MetricType::Histogram,
    };
    let mut family = encoder.encode_descriptor(&name, &help, None, kind)?;
    let histograms = histograms(a);
    for (row, histogram) in a.rows.iter().zip(&histograms) {
        let labels = row_labels(a, row);
        let mut metric = family.encode_family(&labels)?;
        let n = match (histogram, &row.value) {
            (Some(h), _) => {
                metric.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?;
                continue;
            }
            (None, PointValue::Number(n)) => *n,
            (None, _) => continue,
        };
        match kind {
            MetricType::Counter if a.duration => {
                metric.encode_counter::<NoLabelSet, _, f64>(&scale(n as f64, true), None)?
            }
            MetricType::Counter => {
                metric.encode_counter::<NoLabelSet, _, u64>(&n.max(0).cast_unsigned(), None)?
            }
            _ if a.duration => metric.encode_gauge(&scale(n as f64, true))?,
            _ => metric.encode_gauge(&n)?,
        }
    }
    Ok(())
}
