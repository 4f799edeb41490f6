//! Stage 2: AST → checked program. Resolves names against the kernel's types, types every
//! expression, splits `where` into entry and return phases, and fixes each event schema.
//!
//! `session` below runs the passes over one session, each in its own file:
//! `functions` (which kernel functions it traces), `names` (builtins, parameters, `ret`),
//! `expr`, `members` and `operators` (typing expressions), `phases` (the entry/return
//! split), `actions` (events and aggregations, laid out), `agg_names` (naming them); then
//! over the checked sessions, `uses::of` (what the object provides for all of them).

mod actions;
mod agg_names;
pub mod builtins;
mod calls;
mod cgroups;
pub mod counters;
mod expr;
mod functions;
mod lhist;
mod members;
mod names;
mod offcpu;
mod on;
mod operators;
mod phases;
mod positional;
mod printf;
mod profile;
pub mod program;
pub mod resources;
mod session;
mod spans;
mod tracepoints;
mod usdt;
mod user;
mod uses;

pub use user::carry_params_to_return;

pub use builtins::builtin_names;
pub use calls::CALLS;
pub use functions::{DEFAULT_MAX_FUNCTIONS, Options};
pub use operators::duration_literal;
pub use printf::printf_format;

use crate::btf::KernelTypes;
use crate::diag::{DiagKind, Diagnostic};
use crate::syntax::ast::{self, Span};
use program::*;
use std::collections::BTreeMap;

/// Longest string fslat reads from kernel memory, NUL included.
pub const STRING_CAP: u32 = 64;
/// Longest `path()`, NUL included (FSLAT_PATH_CAP in fslat_path.bpf.h).
pub const PATH_CAP: u32 = 128;
const COMM_CAP: u32 = 16;
const MAX_KEYS: usize = 4;

pub fn check(
    script: &ast::Script,
    source: &str,
    kernel: &dyn KernelTypes,
) -> Result<Program, Vec<Diagnostic>> {
    check_with(script, source, kernel, Options::default())
}

/// The checker's driver: the passes, in order, each with its input and its output.
///
/// 1. `session::labels`: each session's label (its list, `#N` when two share one).
/// 2. `session::check`, per session: functions and parameters, then typing its `where`
///    and its actions (names, members, operators, calls), then `phases::split` of the
///    condition into entry and return filters, then `actions` (events and aggregations).
///    It reads `Input`, adds to `Whole`, and keeps its own `SessionState`.
/// 3. `session::user_lines`: the `on begin` and `on end` lines.
/// 4. Over the checked sessions: `agg_names::Names::settle` (derived names),
///    `number_events`, `members::ordered_structs`, `uses::of`.
pub fn check_with(
    script: &ast::Script,
    source: &str,
    kernel: &dyn KernelTypes,
    opts: Options,
) -> Result<Program, Vec<Diagnostic>> {
    let input = Input {
        kernel,
        source,
        opts,
    };
    let mut whole = Whole::default();
    let labels = session::labels(&script.sessions);
    let mut sessions = Vec::new();
    for (index, (s, label)) in script.sessions.iter().zip(labels).enumerate() {
        sessions.extend(session::check(&input, &mut whole, index, label, s));
    }
    let begin = session::user_lines(&input, &mut whole, &script.begin);
    let end = session::user_lines(&input, &mut whole, &script.end);
    let Whole {
        diags,
        structs,
        struct_order,
        agg_names,
        args,
        next_agg: _,
    } = whole;
    if !diags.is_empty() {
        return Err(diags);
    }
    agg_names.settle(&mut sessions);
    number_events(&mut sessions);
    let structs = members::ordered_structs(&structs, &struct_order);
    let uses = uses::of(&sessions);
    Ok(Program {
        sessions,
        structs,
        uses_path: uses.path,
        uses_kstack: uses.kstack,
        uses_ustack: uses.ustack,
        uses_sched: uses.sched,
        wait_kstack: uses.wait_kstack,
        wait_ustack: uses.wait_ustack,
        ustack_bytes: if uses.ustack {
            input.opts.ustack_bytes
        } else {
            0
        },
        ustack_walk: uses.ustack && input.opts.ustack_bytes > 0 && input.opts.ustack_walk,
        features: kernel.features(),
        args: args.into_values().collect(),
        begin,
        end,
    })
}

/// Gives each session's second and later events an id after the last session's (its
/// first keeps the session's index).
fn number_events(sessions: &mut [Session]) {
    let mut next = sessions.len() as u32;
    for s in sessions {
        for e in s.events.iter_mut().skip(1) {
            e.id = next;
            next += 1;
        }
    }
}

/// What every pass reads and none changes: the kernel's types, the script's text, the
/// options.
struct Input<'k> {
    kernel: &'k dyn KernelTypes,
    source: &'k str,
    opts: Options,
}

/// What the passes build for the whole program, session after session: diagnostics,
/// struct declarations, aggregation names, run-time arguments. The driver takes it apart
/// at the end.
#[derive(Default)]
struct Whole {
    diags: Vec<Diagnostic>,
    /// Struct declarations by name, with the structs they embed.
    structs: BTreeMap<StructName, (StructDecl, Vec<StructName>)>,
    struct_order: Vec<StructName>,
    next_agg: usize,
    agg_names: agg_names::Names,
    /// The run-time arguments used so far (`Options::runtime_args`), by number.
    args: BTreeMap<usize, ScriptArg>,
}

/// The walk of one session (or of the BEGIN/END lines) by `session::check`: what it reads
/// (`input`), what it adds to (`whole`), and its own state (`now`), made fresh by the
/// pass and dropped with it, so nothing of one session reaches the next.
struct Checker<'k> {
    input: &'k Input<'k>,
    whole: &'k mut Whole,
    now: SessionState,
}

/// What checking one session keeps while it runs: the values it saves at entry, its
/// parameters, and which kind of item is being checked. Each `session::check` and
/// `session::user_lines` starts from `SessionState::default()`.
#[derive(Default)]
struct SessionState {
    /// A several-function session's parameters so far, with their slot in each function.
    shared: Vec<(Param, Vec<usize>)>,
    /// Checking a span whose ends are both keyed by `pid`: one thread's stretch.
    span_by_thread: bool,
    /// The session's `entry()` values so far.
    entry_values: Vec<Expr>,
    /// For each of `entry_values`, the same value at a span's other STARTs (see
    /// `SpanStart::values`); empty lists elsewhere.
    entry_at_others: Vec<Vec<Expr>>,
    /// The session's user-space file, when it traces user-space functions.
    user: Option<std::rc::Rc<crate::elf::UserTypes>>,
    /// `MODULE:FUNC`: the kernel module (or `vmlinux`) the session's functions are in.
    module: Option<String>,
    /// While a span's END is checked: its STARTs, for `start.NAME`.
    span_start: Option<Vec<spans::Start>>,
    /// While a span is checked: its points are entries, without `ret`.
    in_span: bool,
    /// While an `on` item is checked: names of a call's return are refused.
    at_point: bool,
    /// While an `offcpu` item is checked: `latency` and `runq` are the stretch's.
    in_offcpu: bool,
    /// While an `offcpu` item's actions are checked: its other names are read at the
    /// switch out and saved (`offcpu::saved_name`).
    offcpu_saving: bool,
    /// While an expression whose value is compiled in is checked: what needs it (its
    /// run-time arguments take the words given now, and are fixed).
    fixing: Option<String>,
    /// The `let` names of the action block being checked, with their values.
    lets: Vec<(String, Expr)>,
}

/// The one function of an item without parameters has none.
static NO_PARAMS: [Vec<Param>; 1] = [Vec::new()];

impl<'a> Scope<'a> {
    /// The names of an item whose "function" has no parameters (a profile, offcpu):
    /// the builtins only.
    fn bare(func: &'a crate::btf::FuncSig) -> Self {
        Scope {
            func,
            params: &[],
            funcs: std::slice::from_ref(func),
            per_func: &NO_PARAMS,
            several: false,
            func_cap: func.name.len() as u32 + 1,
        }
    }
}

/// What names mean inside one session.
struct Scope<'a> {
    func: &'a crate::btf::FuncSig,
    params: &'a [Param],
    /// Every function of the session (`func` is the first).
    funcs: &'a [crate::btf::FuncSig],
    /// Each function's own parameters.
    per_func: &'a [Vec<Param>],
    /// Written as a list or a glob: names resolve against every function.
    several: bool,
    /// Room for `func`'s value: the longest name and its NUL.
    func_cap: u32,
}

/// Marks a failed check whose diagnostic is already recorded.
struct Reported;

type Checked<T> = Result<T, Reported>;

impl<'k> Checker<'k> {
    fn error(&mut self, span: Span, kind: DiagKind) -> Reported {
        self.whole.diags.push(Diagnostic::new(span, kind));
        Reported
    }

    fn error_with(&mut self, d: Diagnostic) -> Reported {
        self.whole.diags.push(d);
        Reported
    }
}

fn quote_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
