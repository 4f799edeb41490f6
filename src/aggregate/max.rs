//! `max`: the largest value.

use super::scalar::Scalar;
use super::{Args, Help, MetricKind};

pub const MAX: Scalar = Scalar {
    name: "max",
    help: Help {
        call: "max(EXPR) [by KEY]",
        about: "largest value",
        example: None,
    },
    args: Args::Value,
    metric: MetricKind::Gauge,
    number: |s| s.max,
    add: "fslat_stat_add",
};
