//! JSON lines: one object per event, summary and aggregation, with `"type"`. Durations
//! are integer nanoseconds in fields named `*_ns`.

use super::interval::IntervalStamp;
use super::{AggResult, AggValue, Summary, Value, Writer, event_value};
use crate::aggregate::Linear;
use crate::aggregate::pct::{Pct, QUANTILES, Quantile};
use crate::check::program::{EventSchema, json_name};
use crate::stacks::StackTable;
use serde_json::{Map, Value as Json, json};
use std::io::{self, Write};
use std::rc::Rc;

pub struct JsonWriter<W: Write> {
    out: W,
    stacks: Option<Rc<StackTable>>,
}

impl<W: Write> JsonWriter<W> {
    pub fn new(out: W) -> Self {
        JsonWriter { out, stacks: None }
    }

    fn line(&mut self, v: &Json) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, v)?;
        self.out.write_all(b"\n")
    }
}

fn key(name: &str, v: &Value) -> String {
    json_name(name, matches!(v, Value::Duration(_)))
}

pub(super) fn json_value(v: &Value) -> Json {
    match v {
        Value::Unsigned(n) | Value::Duration(n) => json!(n),
        Value::Signed(n) => json!(n),
        Value::Bool(b) => json!(b),
        Value::Ptr(p) => json!(format!("0x{p:x}")),
        Value::Formatted(n, radix) => json!(radix.format(*n)),
        Value::Str(s) => json!(String::from_utf8_lossy(s)),
        Value::Unread => Json::Null,
        Value::Stack(s) => super::stacks::stack_json(s),
    }
}

impl<W: Write> Writer for JsonWriter<W> {
    fn event(&mut self, schema: &EventSchema, record: &[u8]) -> io::Result<()> {
        // Written by hand, in the order serde_json would sort nothing: no map per event.
        let out = &mut self.out;
        out.write_all(b"{\"type\":\"event\",\"session\":")?;
        serde_json::to_writer(&mut *out, &schema.session)?;
        out.write_all(b",\"fields\":{")?;
        for (i, f) in schema.fields.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let v = event_value(record, f, self.stacks.as_deref());
            serde_json::to_writer(&mut *out, &key(&f.name, &v))?;
            out.write_all(b":")?;
            match &v {
                Value::Str(s) => serde_json::to_writer(&mut *out, &String::from_utf8_lossy(s))?,
                v => serde_json::to_writer(&mut *out, &json_value(v))?,
            }
        }
        out.write_all(b"}")?;
        if schema.format.is_some() {
            let text = super::printf::render(schema, record, self.stacks.as_deref());
            out.write_all(b",\"text\":")?;
            serde_json::to_writer(&mut *out, &String::from_utf8_lossy(&text))?;
        }
        out.write_all(b"}\n")
    }

    fn user_line(&mut self, text: &[u8]) -> io::Result<()> {
        self.line(&json!({"type": "line", "text": String::from_utf8_lossy(text)}))
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        let mut v = json!({
            "type": "summary",
            "session": s.label,
            "mode": s.mode,
        });
        for (name, n) in s.shown() {
            v[name] = json!(n);
        }
        self.line(&v)
    }

    fn aggregation(&mut self, a: &AggResult) -> io::Result<()> {
        let kind = a.func.json_type();
        let rows: Vec<Json> = a
            .rows
            .iter()
            .map(|r| {
                let mut keys = Map::new();
                for (n, v) in a.key_names.iter().zip(&r.keys) {
                    keys.insert(key(n, v), json_value(v));
                }
                let value_key = json_name("value", a.duration);
                match &r.value {
                    AggValue::Number(n) => json!({"keys": keys, value_key: n}),
                    AggValue::Fields(fields) => {
                        let mut row = Map::new();
                        row.insert("keys".into(), Json::Object(keys));
                        for f in fields {
                            let name = json_name(f.name, f.in_unit && a.duration);
                            row.insert(name, json!(f.value));
                        }
                        Json::Object(row)
                    }
                    AggValue::Percentiles(p) => percentile_row(keys, p, a.duration),
                    AggValue::Hist(slots) => {
                        let buckets: Vec<Json> = slots
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| **c > 0)
                            .map(|(i, c)| {
                                let (lo, hi) = bounds(i, a.duration, a.linear);
                                let (lk, hk) =
                                    (json_name("min", a.duration), json_name("max", a.duration));
                                json!({lk: lo, hk: hi, "count": c})
                            })
                            .collect();
                        json!({"keys": keys, "buckets": buckets})
                    }
                }
            })
            .collect();
        let mut record = json!({
            "type": kind,
            "session": a.session,
            "name": a.name,
            "function": a.func.name(),
            "title": a.title,
            "rows": rows,
        });
        if a.missed > 0 {
            record["missed"] = json!(a.missed);
        }
        if let Some(stamp) = &a.interval {
            record["interval"] = json!(stamp.index);
            record["time"] = json!(stamp.time());
            record["time_ns"] = json!(stamp.unix_ns);
        }
        self.line(&record)
    }

    fn interval(&mut self, stamp: &IntervalStamp) -> io::Result<()> {
        self.line(&json!({
            "type": "interval",
            "interval": stamp.index,
            "time": stamp.time(),
            "time_ns": stamp.unix_ns,
        }))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn set_stacks(&mut self, stacks: Rc<StackTable>) {
        self.stacks = Some(stacks);
    }
}

/// `{"keys":..,"count":N,"p50_ns":..,"p90_ns":..,"p99_ns":..,"p999_ns":..,"max_ns":..,
/// "negative":N}` (no `_ns` for integers); a percentile among negative values is `null`.
/// A key has no dot (`p999`, not `p99.9`): `jq .p999_ns` works without quoting.
fn percentile_row(keys: Map<String, Json>, p: &Pct, duration: bool) -> Json {
    let mut row = Map::new();
    row.insert("keys".into(), Json::Object(keys));
    row.insert("count".into(), json!(p.count()));
    for (name, q) in QUANTILES {
        let v = match p.quantile(q) {
            Some(Quantile::Value(v)) => json!(v),
            _ => Json::Null,
        };
        row.insert(json_name(&name.replace('.', ""), duration), v);
    }
    row.insert(
        json_name("max", duration),
        p.max.map_or(Json::Null, |m| json!(m)),
    );
    row.insert("negative".into(), json!(p.negative));
    Json::Object(row)
}

/// Inclusive bounds of a histogram slot; `null` where unbounded.
fn bounds(i: usize, duration: bool, linear: Option<Linear>) -> (Json, Json) {
    let r = crate::aggregate::buckets::slot(i, duration, linear);
    (
        r.lo.map_or(Json::Null, |lo| json!(lo)),
        match (r.lo, r.hi) {
            (None, hi) => json!(hi.unwrap_or(0) as i64 - 1),
            (_, Some(hi)) => json!(hi - 1),
            (_, None) => Json::Null,
        },
    )
}
