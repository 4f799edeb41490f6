//! Folded stacks, the input of flame graphs (docs/language.md, "Flame graphs"): one line
//! `frame;frame;frame N` per row of a `count() by kstack` / `by ustack`, root first.
//! `-f folded` prints them; `--flamegraph` draws them with inferno.

use super::interval::IntervalStamp;
use super::{AggResult, AggValue, Summary, Value, Writer};
use crate::check::program::{Aggregation, EventSchema, FieldKind, Program, Session, StackKind};
use crate::stacks::StackTable;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::rc::Rc;

/// What ends a kernel frame's name in a line that has user frames too.
pub const KERNEL_MARK: &str = "_[k]";

/// Whether `a` makes a flame graph: a `count()` with a `kstack` or `ustack` key.
fn is_stack_count(a: &Aggregation) -> bool {
    weighed(a.func.name(), a.duration)
        && a.keys.iter().any(|k| matches!(k.kind, FieldKind::Stack(_)))
}

/// Whether an aggregation weighs its stacks: `count()` by calls or samples, `sum()` of a
/// duration by time (an offcpu item's `sum(latency)`).
fn weighed(func: &str, duration: bool) -> bool {
    func == "count" || (func == "sum" && duration)
}

/// What one of a stack line's units is: `calls` (a session's count), `samples` (a
/// profile's) or `us` (a sum of durations, in microseconds, as BCC's `offcputime -f`
/// folds them).
pub fn unit(s: &Session, a: &Aggregation) -> &'static str {
    match a.func.name() {
        "sum" => "us",
        _ if s.profile.is_some() => "samples",
        _ => "calls",
    }
}

/// The stack counts of `program` with their sessions, in program order.
pub fn stack_count_aggregations(
    program: &Program,
) -> impl Iterator<Item = (&Session, &Aggregation)> {
    program.sessions.iter().flat_map(|s| {
        s.aggregations
            .iter()
            .filter(|a| is_stack_count(a))
            .map(move |a| (s, a))
    })
}

/// The stack counts of `program`: (session label, aggregation name), in program order.
pub fn stack_counts(program: &Program) -> Vec<(String, String)> {
    stack_count_aggregations(program)
        .map(|(s, a)| (s.label.clone(), a.name.clone()))
        .collect()
}

/// One frame from a value: `;` and whitespace would split the line where they are not
/// meant to (stack symbols are cleaned already, `stacks::clean_symbol`).
fn frame(v: &Value) -> String {
    super::value::format_value(v)
        .chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_whitespace() => '_',
            c => c,
        })
        .collect()
}

/// The folded lines of a stack count's rows with their counts: the keys in order, a stack
/// as its frames root first, any other key as one frame (`count() by comm, ustack` puts
/// the command under the root). Rows whose lines are the same are summed. Nothing for an
/// aggregation that is not a stack count.
pub fn lines(a: &AggResult) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    if !weighed(a.func.name(), a.duration) {
        return out;
    }
    // A sum of durations is drawn in microseconds: a count's unit is one call.
    let per_unit = if a.func.name() == "sum" { 1000 } else { 1 };
    for row in &a.rows {
        if !row.keys.iter().any(|k| matches!(k, Value::Stack(_))) {
            continue;
        }
        let AggValue::Number(n) = row.value else {
            continue;
        };
        // Kernel and user frames in one line (`by ustack, kstack`): the kernel's are
        // marked `_[k]`, as perf's folded stacks mark them, which flame graphs colour.
        let kinds = |kind| {
            row.keys
                .iter()
                .any(|k| matches!(k, Value::Stack(s) if s.kind == kind))
        };
        let mixed = kinds(StackKind::Kernel) && kinds(StackKind::User);
        // The user frames call the kernel's: in a line of both, the user stack comes
        // first (nearer the root) whatever the keys' order.
        let mut keys: Vec<&Value> = row.keys.iter().collect();
        if mixed {
            keys.sort_by_key(|k| matches!(k, Value::Stack(s) if s.kind == StackKind::Kernel));
        }
        let line = keys
            .into_iter()
            .map(|k| match k {
                Value::Stack(s) if mixed && s.kind == StackKind::Kernel && !s.lost => {
                    super::stack_text(s)
                        .split(';')
                        .map(|f| format!("{f}{KERNEL_MARK}"))
                        .collect::<Vec<_>>()
                        .join(";")
                }
                // No frames (a profile's kernel stack of a sample in user mode): none
                // drawn.
                Value::Stack(s) if s.frames.is_empty() && !s.lost => String::new(),
                Value::Stack(s) => super::stack_text(s),
                v => frame(v),
            })
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(";");
        let n = n.max(0) as u64 / per_unit;
        if n > 0 {
            *out.entry(line).or_insert(0) += n;
        }
    }
    out
}

/// `-f folded`: only the folded lines of the stack counts (no events, no summaries).
/// With several stack counts in the program, each line starts with the aggregation's
/// name, so one flame graph shows each under its own root. With `-i`, each interval's
/// lines as it ends: summed, they are the run's.
pub struct FoldedWriter<W: Write> {
    out: W,
    several: bool,
}

impl<W: Write> FoldedWriter<W> {
    pub fn new(out: W, program: &Program) -> Self {
        FoldedWriter {
            out,
            several: stack_counts(program).len() > 1,
        }
    }
}

impl<W: Write> Writer for FoldedWriter<W> {
    fn event(&mut self, _: &EventSchema, _: &[u8]) -> io::Result<()> {
        Ok(())
    }

    // Folded output is stack lines only, as events are left out.
    fn user_line(&mut self, _: &[u8]) -> io::Result<()> {
        Ok(())
    }

    fn summary(&mut self, _: &Summary) -> io::Result<()> {
        Ok(())
    }

    fn aggregation(&mut self, a: &AggResult) -> io::Result<()> {
        for (line, n) in lines(a) {
            match self.several {
                true => writeln!(self.out, "{};{line} {n}", a.name)?,
                false => writeln!(self.out, "{line} {n}")?,
            }
        }
        Ok(())
    }

    fn interval(&mut self, _: &IntervalStamp) -> io::Result<()> {
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn set_stacks(&mut self, _: Rc<StackTable>) {}
}
