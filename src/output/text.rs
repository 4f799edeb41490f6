//! The text format (docs/language.md, "Output"): one line per event and per summary,
//! `KEY=VALUE` pairs, strings quoted only when they need it, durations in microseconds.

use super::interval::IntervalStamp;
use super::value::{format_value, write_value};
use super::{AggResult, AggRow, AggValue, Summary, Value, Writer, event_value};
use crate::aggregate::Linear;
use crate::aggregate::pct::{Pct, QUANTILES, Quantile};
use crate::check::program::EventSchema;
use crate::stacks::StackTable;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::rc::Rc;

pub struct TextWriter<W: Write> {
    out: W,
    stacks: Option<Rc<StackTable>>,
}

impl<W: Write> TextWriter<W> {
    pub fn new(out: W) -> Self {
        TextWriter { out, stacks: None }
    }
}

/// A duration for a bucket bound: the largest unit that divides it exactly (`0`,
/// `512ns`, `16us`, `1024us`, `4ms`, `2s`), so a label never rounds.
pub fn exact_duration(ns: u64) -> String {
    if ns == 0 {
        return "0".into();
    }
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// A duration for a reported value (a percentile, a max): three significant digits in the
/// largest unit that leaves at least 1 (`850ns`, `1.2ms`, `35.4us`, `2.50s`).
pub fn human_duration(ns: u64) -> String {
    for (unit, scale) in [("s", 1e9), ("ms", 1e6), ("us", 1e3)] {
        let v = ns as f64 / scale;
        if v >= 1.0 {
            let digits = if v >= 100.0 {
                0
            } else if v >= 10.0 {
                1
            } else {
                2
            };
            let text = format!("{v:.digits$}");
            // `9.999ms` at two decimals is `10.00ms`: still three digits.
            let text = if text.contains('.') {
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                text
            };
            return format!("{text}{unit}");
        }
    }
    format!("{ns}ns")
}

/// An integer bucket bound with binary suffixes where exact: `512`, `1K`, `3M`.
fn human_count(n: u64) -> String {
    for (unit, scale) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if n >= scale && n.is_multiple_of(scale) {
            return format!("{}{unit}", n / scale);
        }
    }
    n.to_string()
}

/// The bounds of histogram slot `i`, as `[lo, hi)` text: `[16us, 32us)`, `[512, 1K)`,
/// `[0, 1us)`, `[0]` (integer zero), `(..., 0)`; an `lhist`'s (`linear`) likewise,
/// `(..., MIN)` below its range and `[END, ...)` above.
pub fn slot_bounds(i: usize, duration: bool, linear: Option<Linear>) -> String {
    let fmt = |v: u64| {
        if duration {
            exact_duration(v)
        } else {
            human_count(v)
        }
    };
    let r = crate::aggregate::buckets::slot(i, duration, linear);
    match (r.lo, r.hi) {
        (None, hi) => format!("(..., {})", fmt(hi.unwrap_or(0))),
        (Some(0), Some(1)) => "[0]".into(),
        (Some(lo), hi) => format!("[{}, {})", fmt(lo), hi.map_or_else(|| "...".into(), fmt)),
    }
}

impl<W: Write> Writer for TextWriter<W> {
    fn event(&mut self, schema: &EventSchema, record: &[u8]) -> io::Result<()> {
        let out = &mut self.out;
        if schema.format.is_some() {
            // A printf's text is the event, exactly as formatted (bpftrace's printf).
            return out.write_all(&super::printf::render(
                schema,
                record,
                self.stacks.as_deref(),
            ));
        }
        out.write_all(b"EVENT ")?;
        out.write_all(schema.session.as_bytes())?;
        for f in &schema.fields {
            out.write_all(b" ")?;
            out.write_all(f.name.as_bytes())?;
            out.write_all(b"=")?;
            write_value(out, &event_value(record, f, self.stacks.as_deref()))?;
        }
        out.write_all(b"\n")
    }

    fn user_line(&mut self, text: &[u8]) -> io::Result<()> {
        self.out.write_all(text)
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        let mut line = format!("SUMMARY {} mode={}", s.label, s.mode);
        for (name, v) in s.shown() {
            match v {
                Some(v) => _ = write!(line, " {name}={v}"),
                None => _ = write!(line, " {name}=-"),
            }
        }
        line.push('\n');
        self.out.write_all(line.as_bytes())
    }

    fn aggregation(&mut self, a: &AggResult) -> io::Result<()> {
        let mut text = String::new();
        let _ = write!(text, "{}: {} {}", a.name, a.session, a.title);
        if a.missed > 0 {
            // The rows lack the calls the kernel skipped: said on the rows' own header.
            let _ = write!(text, " (missed={}: low by up to {})", a.missed, a.missed);
        }
        text.push('\n');
        if a.rows.is_empty() {
            text.push_str("  (no calls)\n");
        }
        let value = |n: i64| {
            if a.duration {
                format_value(&Value::Duration(n.max(0) as u64))
            } else {
                n.to_string()
            }
        };
        let cols = HistColumns::of(&a.rows, a.duration, a.linear);
        for row in &a.rows {
            let keys: Vec<String> = a
                .key_names
                .iter()
                .zip(&row.keys)
                .map(|(k, v)| format!("{k}={}", format_value(v)))
                .collect();
            let line = |text: &mut String, shown: String| {
                let gap = if keys.is_empty() { "" } else { " " };
                let _ = writeln!(text, "  {}{gap}{shown}", keys.join(" "));
            };
            match &row.value {
                AggValue::Number(n) => line(&mut text, value(*n)),
                AggValue::Fields(fields) => {
                    let shown: Vec<String> = fields
                        .iter()
                        .map(|f| {
                            let v = if f.in_unit {
                                value(f.value)
                            } else {
                                f.value.to_string()
                            };
                            format!("{}={v}", f.name)
                        })
                        .collect();
                    line(&mut text, shown.join(" "));
                }
                AggValue::Percentiles(p) => line(&mut text, percentile_fields(p, a.duration)),
                AggValue::Hist(slots) => {
                    if !keys.is_empty() {
                        let _ = writeln!(text, "  {}", keys.join(" "));
                    }
                    text.push_str(&hist_lines(slots, a.duration, a.linear, &cols));
                }
            }
        }
        self.out.write_all(text.as_bytes())
    }

    fn interval(&mut self, stamp: &IntervalStamp) -> io::Result<()> {
        writeln!(self.out, "INTERVAL {} time={}", stamp.index, stamp.time())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn set_stacks(&mut self, stacks: Rc<StackTable>) {
        self.stacks = Some(stacks);
    }
}

/// `count=120 p50=1.2ms p90=3.4ms p99=8.1ms p99.9=9.9ms max=10.2ms`; a percentile
/// whose rank falls among negative values is `<0`.
fn percentile_fields(p: &Pct, duration: bool) -> String {
    let show = |v: i64| {
        if duration && v >= 0 {
            human_duration(v as u64)
        } else {
            v.to_string()
        }
    };
    let mut out = format!("count={}", p.count());
    for (name, q) in QUANTILES {
        let v = match p.quantile(q) {
            Some(Quantile::Value(v)) => show(v as i64),
            Some(Quantile::Negative) => "<0".into(),
            None => "-".into(),
        };
        let _ = write!(out, " {name}={v}");
    }
    let _ = write!(out, " max={}", p.max.map_or_else(|| "-".into(), show));
    out
}

/// The first and last non-empty slot of a histogram.
fn used_slots(slots: &[u64]) -> Option<std::ops::RangeInclusive<usize>> {
    let first = slots.iter().position(|&c| c > 0)?;
    let last = slots.iter().rposition(|&c| c > 0).unwrap_or(first);
    Some(first..=last)
}

/// Column widths shared by every key of one histogram, so the counts line up.
struct HistColumns {
    label: usize,
    count: usize,
}

impl HistColumns {
    fn of(rows: &[AggRow], duration: bool, linear: Option<Linear>) -> Self {
        let mut cols = HistColumns { label: 0, count: 8 };
        for row in rows {
            if let AggValue::Hist(slots) = &row.value
                && let Some(used) = used_slots(slots)
            {
                for i in used {
                    cols.label = cols.label.max(slot_bounds(i, duration, linear).len());
                    cols.count = cols.count.max(slots[i].to_string().len());
                }
            }
        }
        cols
    }
}

/// bpftrace-style bars between the first and last non-empty slot.
fn hist_lines(slots: &[u64], duration: bool, linear: Option<Linear>, cols: &HistColumns) -> String {
    let mut out = String::new();
    let Some(used) = used_slots(slots) else {
        return "    (empty)\n".into();
    };
    let max = slots.iter().copied().max().unwrap_or(1).max(1);
    for i in used {
        let n = slots[i];
        let bar = (n * 52).div_ceil(max) as usize;
        let _ = writeln!(
            out,
            "    {:<lw$} {n:>cw$} |{:<52}|",
            slot_bounds(i, duration, linear),
            "@".repeat(if n == 0 { 0 } else { bar.max(1) }),
            lw = cols.label,
            cw = cols.count,
        );
    }
    out
}
