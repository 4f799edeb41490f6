//! `min`: the smallest value.

use super::scalar::Scalar;
use super::{Args, Help, MetricKind};

pub const MIN: Scalar = Scalar {
    name: "min",
    help: Help {
        call: "min(EXPR) [by KEY]",
        about: "smallest value",
        example: None,
    },
    args: Args::Value,
    metric: MetricKind::Gauge,
    number: |s| s.min,
    add: "fslat_stat_add",
};
