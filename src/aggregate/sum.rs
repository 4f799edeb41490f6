//! `sum`: the total of the values.

use super::scalar::Scalar;
use super::{Args, Help, MetricKind};

pub const SUM: Scalar = Scalar {
    name: "sum",
    help: Help {
        call: "sum(EXPR) [by KEY]",
        about: "total of the values",
        example: Some("session vfs_write { sum(count) by comm }"),
    },
    args: Args::Value,
    metric: MetricKind::Counter,
    number: |s| s.sum,
    add: "fslat_stat_sum",
};
