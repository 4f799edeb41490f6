//! `count`: calls per key.

use super::scalar::Scalar;
use super::{Args, Help, MetricKind};

pub const COUNT: Scalar = Scalar {
    name: "count",
    help: Help {
        call: "count() [by KEY, ...]",
        about: "calls per key",
        example: Some("session vfs_read { count() by comm }"),
    },
    args: Args::None,
    metric: MetricKind::Counter,
    number: |s| s.count as i64,
    add: "fslat_stat_count",
};
