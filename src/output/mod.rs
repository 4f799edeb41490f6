//! Stage 6: raw records → events → text or JSON. The decoder reads each record by its
//! session's `EventSchema` from the checked program, the same schema codegen rendered the
//! C struct from.

pub mod figures;
pub mod flame;
mod folded;
pub mod interval;
mod json;
pub mod printf;
mod stacks;
mod text;
mod value;

pub use folded::{FoldedWriter, stack_counts};
pub use json::JsonWriter;
pub use stacks::stack_text;
pub use text::TextWriter;
pub use value::UNREAD;

use crate::aggregate::{AggValue, Linear};
use crate::check::counters::{self, Counter, Shown};
use crate::check::program::{EventField, EventSchema, FieldKind, Program, Radix};
use crate::stacks::{Stack, StackTable};
use std::borrow::Cow;
use std::io;
use std::rc::Rc;
use std::sync::Arc;

/// A decoded value; strings borrow from the record they were read from.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Unsigned(u64),
    Signed(i64),
    Bool(bool),
    /// Nanoseconds.
    Duration(u64),
    Str(Cow<'a, [u8]>),
    /// A string the BPF program could not read (a user page not in memory, a bad
    /// address): text `<unread>`, JSON `null`.
    Unread,
    Ptr(u64),
    /// `hex(x)`, `oct(x)`.
    Formatted(u64, Radix),
    /// `kstack`, `ustack`: symbolized.
    Stack(Arc<Stack>),
}

impl Value<'_> {
    pub fn into_owned(self) -> Value<'static> {
        match self {
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
            Value::Unread => Value::Unread,
            Value::Unsigned(n) => Value::Unsigned(n),
            Value::Signed(n) => Value::Signed(n),
            Value::Bool(b) => Value::Bool(b),
            Value::Duration(n) => Value::Duration(n),
            Value::Ptr(p) => Value::Ptr(p),
            Value::Formatted(n, r) => Value::Formatted(n, r),
            Value::Stack(s) => Value::Stack(s),
        }
    }
}

/// Per-session figures at the end of a run: one per entry of `check::counters::ALL`,
/// `None` where the session has none (`agg_lost` without aggregations).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub label: String,
    pub mode: &'static str,
    pub figures: [Option<u64>; counters::ALL.len()],
    /// Figures the session has but could not count (`errors` of a session that ran at
    /// entry only): shown as `-` in text and `null` in JSON, never as a number, and not
    /// exported. Bit `Counter::position()`.
    pub unknown: u64,
}

impl Summary {
    pub fn get(&self, c: &Counter) -> Option<u64> {
        self.figures[c.position()]
    }

    pub fn set(&mut self, c: &Counter, value: Option<u64>) {
        self.figures[c.position()] = value;
    }

    /// Marks `c` as a figure the session has but could not count (`unknown`).
    pub fn set_unknown(&mut self, c: &Counter) {
        self.figures[c.position()] = None;
        self.unknown |= 1 << c.position();
    }

    /// The figures the text and JSON summaries show, in order; `None` for one the
    /// session could not count (`unknown`).
    pub fn shown(&self) -> impl Iterator<Item = (&'static str, Option<u64>)> + '_ {
        counters::ALL
            .iter()
            .zip(self.figures)
            .filter_map(|(c, v)| match (c.shown, v) {
                _ if self.unknown & (1 << c.position()) != 0 => Some((c.name, None)),
                (_, None) | (Shown::WhereCounted, Some(0)) => None,
                (_, v) => Some((c.name, v)),
            })
    }
}

/// One aggregation's rows at one moment, with what describes them. The runtime reads
/// them (rows of key values and kernel states, `output::figures`), the printers show
/// them (`AggResult`, a shown value a row) and the metrics exporter maps them
/// (`metrics::AggSeries`, a point a row): one struct, its rows typed by the stage.
#[derive(Debug, Clone, PartialEq)]
pub struct AggFigures<R = (Vec<Value<'static>>, crate::aggregate::State)> {
    pub session: String,
    /// The aggregation's name (`as NAME` or derived): unique in the program.
    pub name: String,
    pub title: String,
    pub func: crate::aggregate::AggFunc,
    /// Values are nanoseconds.
    pub duration: bool,
    /// `lhist`'s buckets (else a `hist`'s powers of two).
    pub linear: Option<Linear>,
    pub key_names: Vec<String>,
    pub rows: Vec<R>,
    /// An aggregation without keys and no rows yet: its value before any update (the
    /// map's zeros).
    pub unset: Option<crate::aggregate::State>,
    /// With `-i`: the interval these rows cover (else they cover the whole run).
    pub interval: Option<interval::IntervalStamp>,
    /// Calls of the session the kernel skipped over the same span (runtime/misses.rs):
    /// the rows are low by up to this many calls. 0: none (or not counted).
    pub missed: u64,
}

impl<R> AggFigures<R> {
    /// Aggregation `a` of session `session` with `rows`, nothing else known yet.
    pub fn of(session: &str, a: &crate::check::program::Aggregation, rows: Vec<R>) -> Self {
        AggFigures {
            session: session.to_string(),
            name: a.name.clone(),
            title: a.title.clone(),
            func: a.func,
            duration: a.duration,
            linear: a.linear,
            key_names: a.keys.iter().map(|k| k.name.clone()).collect(),
            rows,
            unset: None,
            interval: None,
            missed: 0,
        }
    }

    /// The same aggregation with other rows.
    pub fn with_rows<T>(self, rows: Vec<T>) -> AggFigures<T> {
        AggFigures {
            session: self.session,
            name: self.name,
            title: self.title,
            func: self.func,
            duration: self.duration,
            linear: self.linear,
            key_names: self.key_names,
            rows,
            unset: self.unset,
            interval: self.interval,
            missed: self.missed,
        }
    }
}

/// One aggregation's result as printed: rows of (key values, shown value).
pub type AggResult = AggFigures<AggRow>;

#[derive(Debug, Clone, PartialEq)]
pub struct AggRow {
    pub keys: Vec<Value<'static>>,
    pub value: AggValue,
}

/// Where decoded output goes: text lines or JSON lines.
pub trait Writer {
    /// One event: `record` is a whole record that `schema` describes (as checked by
    /// `Decoder::decode`).
    fn event(&mut self, schema: &EventSchema, record: &[u8]) -> io::Result<()>;
    /// A line of `on begin` / `on end`, formatted.
    fn user_line(&mut self, text: &[u8]) -> io::Result<()>;
    fn summary(&mut self, s: &Summary) -> io::Result<()>;
    fn aggregation(&mut self, a: &AggResult) -> io::Result<()>;
    /// With `-i`: the line that starts one interval's aggregations.
    fn interval(&mut self, stamp: &interval::IntervalStamp) -> io::Result<()>;
    fn flush(&mut self) -> io::Result<()>;
    /// Where events' `kstack`/`ustack` fields are looked up (the runtime sets it once the
    /// program is loaded); without it they print as lost.
    fn set_stacks(&mut self, stacks: Rc<StackTable>);
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("record of {0} bytes is too short to hold a session id")]
    Short(usize),
    #[error("record names session {0}, which does not emit")]
    UnknownSession(u32),
    #[error("record for session {session} has {got} bytes, expected {want}")]
    Size {
        session: String,
        got: usize,
        want: u32,
    },
}

/// Decodes ring buffer records of one program.
pub struct Decoder<'p> {
    schemas: Vec<Option<&'p EventSchema>>,
}

impl<'p> Decoder<'p> {
    pub fn new(program: &'p Program) -> Self {
        Decoder {
            schemas: {
                let events = program.sessions.iter().flat_map(|s| &s.events);
                let n = events.clone().map(|e| e.id as usize + 1).max().unwrap_or(0);
                let mut by_id = vec![None; n];
                for e in events {
                    by_id[e.id as usize] = Some(e);
                }
                by_id
            },
        }
    }

    /// The schema a record follows, once its id and size are checked against it.
    pub fn decode(&self, record: &[u8]) -> Result<&'p EventSchema, DecodeError> {
        let id = u32::from_ne_bytes(
            record
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .ok_or(DecodeError::Short(record.len()))?,
        );
        let schema = self
            .schemas
            .get(id as usize)
            .copied()
            .flatten()
            .ok_or(DecodeError::UnknownSession(id))?;
        if record.len() != schema.size as usize {
            return Err(DecodeError::Size {
                session: schema.session.clone(),
                got: record.len(),
                want: schema.size,
            });
        }
        Ok(schema)
    }
}

/// The value of `field` in a record that `Decoder::decode` accepted.
pub fn field_value<'r>(record: &'r [u8], field: &EventField) -> Value<'r> {
    let at = field.offset as usize;
    read_value(&record[at..at + field.kind.size() as usize], field.kind)
}

/// The value of `field` in an event, with its stack symbolized if it is one.
pub fn event_value<'r>(
    record: &'r [u8],
    field: &EventField,
    stacks: Option<&StackTable>,
) -> Value<'r> {
    let v = field_value(record, field);
    match (field.kind, v) {
        (FieldKind::Stack(kind), Value::Unsigned(raw)) => Value::Stack(match stacks {
            Some(t) => t.stack(kind, raw),
            None => Arc::new(Stack {
                kind,
                frames: Vec::new(),
                lost: true,
            }),
        }),
        (_, v) => v,
    }
}

/// A value of `kind` from exactly its bytes (native endian, as the kernel wrote it).
pub fn read_value(bytes: &[u8], kind: FieldKind) -> Value<'_> {
    let unsigned = || {
        let mut b = [0u8; 8];
        b[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
        u64::from_ne_bytes(b)
    };
    match kind {
        FieldKind::Int(s) if s.signed => {
            let v = unsigned();
            let shift = 64 - u32::from(s.size) * 8;
            Value::Signed(((v << shift) as i64) >> shift)
        }
        FieldKind::Int(_) => Value::Unsigned(unsigned()),
        FieldKind::Bool => Value::Bool(bytes[0] != 0),
        FieldKind::Duration => Value::Duration(unsigned()),
        FieldKind::Ptr => Value::Ptr(unsigned()),
        FieldKind::Formatted(_, radix) => Value::Formatted(unsigned(), radix),
        // The raw id: `event_value` or `StackTable::stack` turn it into the stack.
        FieldKind::Stack(_) => Value::Unsigned(unsigned()),
        // Named here, at first sight: the cgroup may be gone by the print.
        FieldKind::CgroupName(view) => Value::Str(Cow::Owned(
            crate::cgroups::name(view, unsigned()).into_bytes(),
        )),
        // bpf-runtime/fslat_str.bpf.h's mark of a failed read: "" then 0xff.
        FieldKind::Str { .. } if bytes.starts_with(&[0, 0xff]) => Value::Unread,
        FieldKind::Str { .. } => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            Value::Str(Cow::Borrowed(&bytes[..end]))
        }
    }
}

#[cfg(test)]
mod tests;
