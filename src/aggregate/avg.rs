//! `avg`: the average of the values, rounded down.

use super::scalar::Scalar;
use super::{Args, Help, MetricKind};

pub const AVG: Scalar = Scalar {
    name: "avg",
    help: Help {
        call: "avg(EXPR) [by KEY]",
        about: "average, rounded down",
        example: None,
    },
    args: Args::Value,
    metric: MetricKind::Gauge,
    number: |s| s.sum.checked_div(s.count as i64).unwrap_or(0),
    add: "fslat_stat_sum",
};
