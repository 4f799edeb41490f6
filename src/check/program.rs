//! The checked program: every name resolved against the kernel's types, every expression
//! typed, the predicate split into its entry and return phases, and each session's event
//! schema fixed. Codegen and the output decoder both read this; nothing else describes an
//! event's layout.

use super::builtins::BuiltinTy;
pub use super::builtins::{Builtin, StackKind};
use crate::aggregate::Linear;
use crate::btf::TypeId;
use crate::diag::Span;
pub use crate::syntax::ast::{AggFunc, BinOp, UnOp};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub sessions: Vec<Session>,
    /// Kernel structs that field reads go through, in an order where every struct comes
    /// after the structs it embeds. Codegen declares them for CO-RE.
    pub structs: Vec<StructDecl>,
    /// Whether any expression calls `path()` (the C then includes its helper).
    pub uses_path: bool,
    /// Whether any session captures `kstack` (the C then has the kernel stack map).
    pub uses_kstack: bool,
    /// Whether any session captures `ustack` (the user stack map, and the ring buffer
    /// that announces each process whose stacks must be symbolized).
    pub uses_ustack: bool,
    /// Whether any session names `oncpu`, `runq`, `blocked`, `offcpu` or `switches`: the
    /// object then has the scheduler hooks that keep each thread's totals.
    #[serde(default)]
    pub uses_sched: bool,
    /// Whether any session names `wait_kstack` / `wait_ustack`: the scheduler hooks then
    /// take the thread's stacks each time it leaves the CPU with a call in flight.
    #[serde(default)]
    pub wait_kstack: bool,
    #[serde(default)]
    pub wait_ustack: bool,
    /// `--ustack-bytes N`: user stacks are the registers and N bytes of the stack copied
    /// at capture, unwound in user space with the files' call-frame information; 0: the
    /// kernel's frame-pointer walk.
    #[serde(default)]
    pub ustack_bytes: u32,
    /// `--ustack-walk`: user stacks unwound in the kernel where the kernel has `bpf_loop`
    /// and `bpf_find_vma` (5.17), the copy elsewhere and for processes not prepared.
    #[serde(default)]
    pub ustack_walk: bool,
    /// What the kernel the program was checked against can do: codegen picks the code
    /// for it (e.g. plain stores for min/max without BPF atomics).
    pub features: crate::btf::Features,
    /// The script arguments (`$1`.., `$#`) it takes at run time, by number; empty when
    /// they were compiled in as constants (a script run: `check::Options::runtime_args`).
    pub args: Vec<ScriptArg>,
    /// `on begin { printf(...) }`: printed once every program is attached.
    #[serde(default)]
    pub begin: Vec<UserLine>,
    /// `on end { printf(...) }`: printed once the run's events are drained, before the
    /// summaries.
    #[serde(default)]
    pub end: Vec<UserLine>,
}

/// A script argument a program takes at run time: fslat writes its value into
/// `struct fslat_args` (`check::resources::ARGS_SECTION`) before load, where the program
/// reads it as a `const volatile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptArg {
    /// `$n`; 0 is `$#`, how many arguments there are.
    pub n: usize,
    pub kind: ArgKind,
    /// Where the checker needed its value to compile the program (an `lhist` bound, a
    /// cgroup path), the word it had then and where: a run must give the same value.
    pub fixed: Option<FixedArg>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixedArg {
    pub word: String,
    /// What needed it (`lhist's bounds`).
    pub by: String,
}

/// What a run-time argument is, from the word given when the program was checked (an
/// integer without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArgKind {
    /// A 64-bit integer (`__s64`).
    Int,
    /// A duration in nanoseconds (`__u64`).
    Duration,
    /// A string of at most `cap - 1` bytes, NUL-padded (`char [cap]`).
    Str { cap: u32 },
}

impl ArgKind {
    pub fn ty(self) -> Ty {
        match self {
            ArgKind::Int => Ty::Int(Scalar {
                size: 8,
                signed: true,
            }),
            ArgKind::Duration => Ty::Duration,
            ArgKind::Str { cap } => Ty::Str { cap },
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            ArgKind::Int => "an integer",
            ArgKind::Duration => "a duration",
            ArgKind::Str { .. } => "a string",
        }
    }
}

impl ScriptArg {
    /// `$1`, or `$#`.
    pub fn name(&self) -> String {
        match self.n {
            0 => "$#".into(),
            n => format!("${n}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub index: usize,
    /// The session in the script, for what a later stage finds wrong with it (a phase
    /// that needs more scratch room than a BPF program has).
    #[serde(default)]
    pub at: Span,
    /// The function name, or `FUNC#N` when several sessions trace the same function.
    pub label: String,
    pub func: String,
    pub params: Vec<Param>,
    /// Where `ret` sits in the program's context (after the parameters' slots).
    pub ret_slot: usize,
    /// `None` for void functions.
    pub ret: Option<Scalar>,
    /// Decided at entry: nothing here uses `latency` or `ret`.
    pub entry_filter: Option<Expr>,
    /// Decided at return.
    pub return_filter: Option<Expr>,
    /// What its `emit`s and `printf`s send, in the order of the script (each under its
    /// own `if`s).
    pub events: Vec<EventSchema>,
    pub aggregations: Vec<Aggregation>,
    /// What `entry(EXPR)` saves: evaluated at entry (after the entry filter), kept with the
    /// call (the fentry stack, or fsession's per-call map) and read at return as
    /// `ExprKind::Entry(i)`. Empty when the script does not use `entry()`.
    pub entry_values: Vec<Expr>,
    /// The functions the session traces, in the order of its list (a glob's matches
    /// sorted); one for `session vfs_read`.
    pub targets: Vec<Target>,
    /// Written as a list or with a glob: `func` leads the default event and the summary
    /// counts the functions, however many matched.
    pub several: bool,
    /// Functions a glob matched that cannot be traced, with the reason (`-v` names them).
    pub skipped: Vec<(String, String)>,
    /// A session of user-space functions: their file, and how the session runs.
    pub user: Option<UserSession>,
    /// A span (`span START(KEY) -> END(KEY)`): the session's one target is END, its
    /// `entry_filter` END's `where` before the start is taken, its `entry_values` the
    /// `start.NAME` values; `params` holds END's parameters, then START's.
    pub span: Option<SpanPoints>,
    /// `on POINT`: one program at the point (a kernel function's entry or a BTF
    /// tracepoint), no latency: the session's one target is the point, every name is
    /// read there (`entry_filter` is its `where`; there is no return phase of its own).
    #[serde(default)]
    pub on: Option<SpanPoint>,
    /// `profile RATE`: one program sampling every CPU (a perf event per CPU), shaped as an
    /// `on` point's: its `where`, then the actions; no function, no latency.
    #[serde(default)]
    pub profile: Option<Rate>,
    /// `offcpu`: a thread's stretch off the CPU, from the scheduler's switch hooks. Its
    /// "entry" is the switch out, run as the thread leaving: `entry_filter` decides there
    /// whether the stretch is followed, and every name but `latency` and `runq` is read
    /// there, as an `entry_values` (check/offcpu.rs); its "return" is the switch back in.
    #[serde(default)]
    pub offcpu: bool,
    /// Count `errors` even where nothing else needs the return (`-v`): the session then
    /// keeps its return program (`Session::needs_return`).
    #[serde(default)]
    pub counts_errors: bool,
}

/// How often a profile samples each CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rate {
    /// Samples a second (`99hz`): the perf event's `sample_freq`.
    Hertz(u64),
    /// A period in nanoseconds (`10ms`): the perf event's `sample_period`.
    Period(u64),
}

impl Rate {
    /// The time between two samples of one CPU, in nanoseconds (what the kernel's CPU
    /// clock, an hrtimer, makes of a frequency too).
    pub fn period_ns(self) -> u64 {
        match self {
            Rate::Hertz(hz) => 1_000_000_000 / hz.max(1),
            Rate::Period(ns) => ns,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Hertz(hz) => write!(f, "{hz}hz"),
            Rate::Period(ns) => {
                // In the largest unit that says it exactly, as a script writes it.
                let (n, unit) = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")]
                    .into_iter()
                    .find(|(u, _)| *ns != 0 && ns % u == 0)
                    .map_or((*ns, "ns"), |(u, name)| (ns / u, name));
                write!(f, "{n}{unit}")
            }
        }
    }
}

/// Whether a value can be saved at entry (`entry()`, `start.NAME`) for later: scalars,
/// pointers and strings; not structs or stacks.
pub fn savable(ty: &Ty) -> bool {
    matches!(
        ty,
        Ty::Int(_)
            | Ty::Bool
            | Ty::Duration
            | Ty::Ptr { .. }
            | Ty::Formatted { .. }
            | Ty::Str { .. }
    )
}

/// The `__u64`s a value saved at entry (`entry()`, `start.NAME`) takes.
pub fn saved_words(ty: &Ty) -> usize {
    match ty {
        Ty::Str { cap } => (*cap as usize).div_ceil(8),
        _ => 1,
    }
}

/// What a span adds to its session: its STARTs and the key at every point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanPoints {
    /// One or more, in the order written; each its own program.
    pub starts: Vec<SpanStart>,
    pub end: SpanPoint,
    /// END's key, of the type of every START's.
    pub end_key: Expr,
}

/// One START of a span: its point, key, `where`, and what it saves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanStart {
    pub point: SpanPoint,
    /// In this START's names.
    pub key: Expr,
    pub filter: Option<Expr>,
    /// The session's `entry_values` as this START computes them (`start.NAME` in its
    /// names); the first START's are `entry_values` themselves.
    pub values: Vec<Expr>,
}

impl SpanPoints {
    /// USDT probes at every START and at END, keyed by pid at all of them: the spans of
    /// one thread nest, as calls do (a stack per thread: an END takes the latest START in
    /// flight), up to `SPAN_DEPTH` deep. Other spans keep version 3's pairing (a START
    /// for a key in flight replaces it, counted `restarted`), which LANGUAGE.md fixes.
    pub fn nests(&self) -> bool {
        let pid = |e: &Expr| matches!(e.kind, ExprKind::Builtin(b) if b == super::builtins::PID);
        self.starts
            .iter()
            .all(|s| pid(&s.key) && s.point.usdt.is_some())
            && pid(&self.end_key)
            && self.end.usdt.is_some()
    }
}

/// How deep one thread's spans nest (`SpanPoints::nests`); a START deeper is `evicted`.
pub const SPAN_DEPTH: u32 = 16;

/// A kernel function's entry or a BTF tracepoint (a span's end, an `on` point).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanPoint {
    pub name: String,
    pub tracepoint: bool,
    /// A tracepoint's arguments in the prototype it was checked against: a bundle, whose
    /// programs read them by their place, checks the running kernel's.
    #[serde(default)]
    pub args: usize,
    /// A USDT probe: its program is libbpf's `usdt` kind, attached by the runtime.
    #[serde(default)]
    pub usdt: Option<UsdtPoint>,
}

impl SpanPoint {
    /// The BPF section its program attaches by.
    pub fn section(&self) -> String {
        if self.usdt.is_some() {
            return "usdt".into();
        }
        let kind = if self.tracepoint { "tp_btf" } else { "fentry" };
        format!("{kind}/{}", self.name)
    }
}

/// A USDT probe as libbpf attaches it: the file, the provider and the name (every site of
/// the probe in the file, its semaphore set while attached).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsdtPoint {
    pub path: String,
    pub provider: String,
    pub name: String,
}

/// Where a session's user-space functions are and how they are probed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserSession {
    /// The ELF file, as fslat found it.
    pub path: String,
    /// `Mode::UprobeSession`, `Mode::UprobeMulti` or `Mode::Uprobe`.
    pub mode: super::resources::mode::Mode,
}

/// One function of a session, with where the session's parameters sit in its context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub func: String,
    /// For each of the session's `params`, its slot in this function's context.
    pub slots: Vec<usize>,
    /// Where `ret` sits (after the parameters' slots).
    pub ret_slot: usize,
    /// `None` for void functions.
    pub ret: Option<Scalar>,
    /// A user-space function: its offset in the session's file (where the uprobe goes).
    pub offset: Option<u64>,
    /// A tracepoint of an `on` of several: its arguments in the prototype it was checked
    /// against (a bundle checks the running kernel's, as `SpanPoint::args`); 0 elsewhere.
    #[serde(default)]
    pub args: usize,
}

impl Target {
    /// The kernel function `func`, the session's parameters at `slots` of its context;
    /// no return value, no tracepoint arguments.
    pub fn new(func: String, slots: Vec<usize>) -> Self {
        Target {
            func,
            slots,
            ret_slot: 0,
            ret: None,
            offset: None,
            args: 0,
        }
    }
}

impl Session {
    /// Session `index`, written at `at`, of `func` at `targets`, with what every kind of
    /// session starts from: no parameters, return value, filter, event, aggregation or
    /// `entry()` value; its functions written one by one, none skipped; in the kernel,
    /// and neither a span, an `on` point, a profile nor offcpu; `errors` counted only
    /// where the return is needed anyway. Each kind's checker sets what it has
    /// (`Session { .., ..Session::new(..) }`).
    pub fn new(index: usize, at: Span, label: String, func: String, targets: Vec<Target>) -> Self {
        Session {
            index,
            at,
            label,
            func,
            params: Vec::new(),
            ret_slot: 0,
            ret: None,
            entry_filter: None,
            return_filter: None,
            events: Vec::new(),
            aggregations: Vec::new(),
            entry_values: Vec::new(),
            targets,
            several: false,
            skipped: Vec::new(),
            user: None,
            span: None,
            on: None,
            profile: None,
            offcpu: false,
            counts_errors: false,
        }
    }

    /// Whether a point of this `on` or span is a USDT probe.
    pub fn at_usdt(&self) -> bool {
        self.usdt_points().next().is_some()
    }

    /// The USDT probes among this `on`'s or span's points.
    pub fn usdt_points(&self) -> impl Iterator<Item = &UsdtPoint> {
        let span = self
            .span
            .iter()
            .flat_map(|p| p.starts.iter().map(|s| &s.point).chain([&p.end]));
        self.on.iter().chain(span).filter_map(|p| p.usdt.as_ref())
    }

    /// Every expression evaluated at return: the return filter, the event's fields, the
    /// aggregations' arguments and keys.
    fn return_exprs(&self) -> impl Iterator<Item = &Expr> {
        let event = self
            .events
            .iter()
            .flat_map(|e| e.fields.iter().map(|f| &f.expr).chain(&e.guard));
        let aggs = self.aggregations.iter().flat_map(|a| {
            a.arg
                .iter()
                .chain(a.keys.iter().map(|k| &k.expr))
                .chain(&a.guard)
        });
        self.return_filter.iter().chain(event).chain(aggs)
    }

    /// Every expression of the session: at entry, at return, and a span's STARTs and END.
    pub fn exprs(&self) -> impl Iterator<Item = &Expr> {
        let span = self.span.iter().flat_map(|p| {
            p.starts
                .iter()
                .flat_map(|s| std::iter::once(&s.key).chain(&s.filter).chain(&s.values))
                .chain(std::iter::once(&p.end_key))
        });
        self.entry_filter
            .iter()
            .chain(&self.entry_values)
            .chain(self.return_exprs())
            .chain(span)
    }

    /// The indices into `params` of the parameters its expressions read (at entry or
    /// return, `entry()` values included).
    pub fn params_read(&self) -> Vec<usize> {
        let mut read = Vec::new();
        let all = self
            .entry_filter
            .iter()
            .chain(&self.entry_values)
            .chain(self.return_exprs());
        for e in all {
            e.visit(&mut |x| {
                if let ExprKind::Param(i) = x.kind
                    && !read.contains(&i)
                {
                    read.push(i);
                }
            });
        }
        read
    }

    /// Whether anything needs the call's entry beyond what its return can see (the
    /// parameters, which a return program reads from the same saved registers): the
    /// entry time (`latency`, `ts`, also `ts` in the entry filter, which is the time of
    /// the entry) or values saved with `entry()`. A session that needs neither runs at
    /// return only (`Mode::Fexit`), its entry filter with it.
    pub fn needs_entry(&self) -> bool {
        let mut timed =
            !self.entry_values.is_empty() || self.reads_entry_time() || self.uses_sched();
        for e in self.entry_filter.iter().chain(self.return_exprs()) {
            e.visit(&mut |x| timed |= matches!(x.kind, ExprKind::Entry(_)));
        }
        timed
    }

    /// Whether anything needs the call's return: `ret`, a builtin only the return has
    /// (`latency`, the stacks), memory read through a pointer after the entry filter
    /// (a field, a string: the call may change it), or `errors` asked for
    /// (`counts_errors`). A session that needs neither its entry (`needs_entry`) nor its
    /// return runs at entry only where the trampolines would skip calls
    /// (`Mode::KprobeEntry`), and its summary cannot say `errors`.
    pub fn needs_return(&self) -> bool {
        let mut reads = self.counts_errors;
        for e in self.return_exprs() {
            e.visit(&mut |x| {
                reads |= match &x.kind {
                    ExprKind::Ret
                    | ExprKind::Read { .. }
                    | ExprKind::Deref(_)
                    | ExprKind::Path(_)
                    | ExprKind::ReadStr { .. } => true,
                    ExprKind::Builtin(b) => b.at_return,
                    _ => false,
                }
            });
        }
        reads
    }

    /// Whether anything reads the entry time (`latency`, `ts`): a session program that
    /// runs for another reason (a kprobe session, values saved for the return) marks an
    /// accepted call without reading the clock otherwise.
    pub fn reads_entry_time(&self) -> bool {
        let mut timed = false;
        for e in self.entry_filter.iter().chain(self.return_exprs()) {
            e.visit(&mut |x| {
                if let ExprKind::Builtin(b) = x.kind {
                    timed |= b.reads_entry_time();
                }
            });
        }
        timed
    }

    /// Where each of `entry_values` starts among the `__u64`s a call saves, and how many
    /// it saves in all: a scalar takes one, a string as many as its bytes fill.
    pub fn entry_layout(&self) -> (Vec<usize>, usize) {
        let mut at = Vec::with_capacity(self.entry_values.len());
        let mut total = 0;
        for v in &self.entry_values {
            at.push(total);
            total += saved_words(&v.ty);
        }
        (at, total)
    }

    /// Whether it reads the scheduler's per-thread totals (`oncpu`...): they are saved at
    /// entry, so its entry values hold them.
    pub fn uses_sched(&self) -> bool {
        let mut waits = false;
        for e in self.return_exprs() {
            e.visit(&mut |x| {
                waits |= matches!(x.kind, ExprKind::Builtin(b) if matches!(b.ty, BuiltinTy::WaitStack(_)))
            });
        }
        waits
            || self
                .entry_values
                .iter()
                .any(|v| matches!(v.kind, ExprKind::Builtin(b) if b.reads_sched()))
    }

    /// Whether its event or one of its aggregation keys is a stack.
    pub fn uses_stacks(&self) -> bool {
        let stack = |k: &FieldKind| matches!(k, FieldKind::Stack(_));
        self.events
            .iter()
            .any(|e| e.fields.iter().any(|f| stack(&f.kind)))
            || self
                .aggregations
                .iter()
                .any(|a| a.keys.iter().any(|k| stack(&k.kind)))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    /// Index into the program's context array (a big struct takes two slots).
    pub slot: usize,
    /// As BTF spells it, for listings (`struct file *`).
    pub type_name: String,
    pub ty: Ty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scalar {
    pub size: u8,
    pub signed: bool,
}

/// The type of a value in a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ty {
    Int(Scalar),
    Bool,
    Duration,
    /// A string of at most `cap - 1` bytes plus NUL.
    Str {
        cap: u32,
    },
    /// A pointer fslat does not read as a string; `pointee` for `->`.
    Ptr {
        pointee: TypeId,
        type_name: String,
    },
    /// A struct or union held by value (only as the base of `.`).
    Record {
        ty: TypeId,
        type_name: String,
    },
    /// A call stack: only emitted or used as a key.
    Stack(StackKind),
    /// A cgroup id shown as a name (`cgroup_path`, `unit`, ...); only emitted or used as a
    /// key.
    CgroupName(crate::cgroups::CgroupView),
    /// `hex(x)`, `oct(x)`: an integer shown in that base; only emitted or used as a key.
    Formatted {
        scalar: Scalar,
        radix: Radix,
    },
}

/// How `hex()` and `oct()` show an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Radix {
    Hex,
    Oct,
}

impl Radix {
    pub fn name(self) -> &'static str {
        match self {
            Radix::Hex => "hex",
            Radix::Oct => "oct",
        }
    }

    /// `0x88042`, `0644` (C's `%#x` and `%#o`: zero is `0x0` and `0`).
    pub fn format(self, n: u64) -> String {
        match self {
            Radix::Hex => format!("0x{n:x}"),
            Radix::Oct if n == 0 => "0".into(),
            Radix::Oct => format!("0{n:o}"),
        }
    }
}

impl Ty {
    pub fn describe(&self) -> String {
        match self {
            Ty::Int(s) => format!(
                "an integer ({}{})",
                if s.signed { "s" } else { "u" },
                s.size * 8
            ),
            Ty::Bool => "a boolean".into(),
            Ty::Duration => "a duration".into(),
            Ty::Str { .. } => "a string".into(),
            Ty::Ptr { type_name, .. } => format!("a pointer (`{type_name}`)"),
            Ty::Record { type_name, .. } => format!("a struct (`{type_name}`)"),
            Ty::Stack(StackKind::Kernel) => "a kernel stack (`kstack`)".into(),
            Ty::Stack(StackKind::User) => "a user stack (`ustack`)".into(),
            Ty::Formatted { radix, .. } => format!("a formatted integer (`{}()`)", radix.name()),
            Ty::CgroupName(v) => format!("a cgroup name (`{}`)", v.name()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expr {
    pub ty: Ty,
    pub kind: ExprKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    /// A constant, already folded to its value.
    Int(i128),
    Bool(bool),
    Str(Vec<u8>),
    Builtin(Builtin),
    /// `under("PATH")`: the task's cgroup is the one of this id, at this depth, or below.
    UnderCgroup {
        id: u64,
        level: u32,
    },
    /// The parameter at this position.
    Param(usize),
    /// A script argument read at run time (`$n`, 0 for `$#`): `Program::args` has it.
    Arg(usize),
    Ret,
    /// A CO-RE read: from a pointer `base`, follow `path` (groups separated by `->`,
    /// members within a group by `.`). The last member's type is `ty`.
    Read {
        base: Box<Expr>,
        /// The struct `base` points to (`struct file`).
        root: StructName,
        path: Vec<Vec<String>>,
        /// How the last member is read when `ty` is a string.
        string: Option<StringSource>,
        /// A user-space session's read, by DWARF offsets instead of CO-RE: one offset per
        /// group of `path`; the address is `base + hops[0]`, then for each next hop the
        /// pointer read there plus the hop; the value is read at the last address.
        hops: Option<Vec<u32>>,
    },
    /// A `char *` value (parameter or field) read as a string.
    Deref(Box<Expr>),
    /// `path(file)`: the file's path, walked up through dentries and mounts.
    Path(Box<Expr>),
    /// `str(ptr, len)`: at most `len` bytes (and at most the string's cap) from the
    /// address `ptr`, up to a NUL; `len` `None` for `str(ptr)`.
    ReadStr {
        ptr: Box<Expr>,
        len: Option<Box<Expr>>,
        /// BTF marks the pointer `__user`: read user memory only.
        user: bool,
    },
    /// `ntohs(x)` (16 bits), `ntohl(x)` (32 bits): the value in host byte order.
    Swap {
        bits: u8,
        expr: Box<Expr>,
    },
    /// `entry(EXPR)`: the session's `entry_values[i]`, as it was at entry.
    Entry(usize),
    Unary {
        op: UnOp,
        expr: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        /// For comparisons and arithmetic: whether C does it signed.
        signed: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StringSource {
    /// The member is a char array: read its bytes.
    Array,
    /// The member is a `char *`: read the string it points to.
    Pointer,
}

impl Expr {
    /// The expressions this one is made of, for passes that rewrite them.
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match &mut self.kind {
            ExprKind::Read { base, .. }
            | ExprKind::Deref(base)
            | ExprKind::Path(base)
            | ExprKind::Swap { expr: base, .. }
            | ExprKind::Unary { expr: base, .. } => vec![&mut **base],
            ExprKind::ReadStr { ptr, len, .. } => std::iter::once(&mut **ptr)
                .chain(len.as_deref_mut())
                .collect(),
            ExprKind::Binary { lhs, rhs, .. } => vec![&mut **lhs, &mut **rhs],
            _ => Vec::new(),
        }
    }

    /// `lhs op rhs` for a logical `op` (`and`, `or`): a boolean of two booleans.
    pub fn logic(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
        Expr {
            ty: Ty::Bool,
            kind: ExprKind::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                signed: false,
            },
        }
    }

    /// Whether evaluating this needs the return phase.
    pub fn at_return(&self) -> bool {
        match &self.kind {
            ExprKind::Ret | ExprKind::Entry(_) => true,
            ExprKind::Builtin(b) => b.at_return,
            ExprKind::Read { base, .. }
            | ExprKind::Deref(base)
            | ExprKind::Path(base)
            | ExprKind::Swap { expr: base, .. } => base.at_return(),
            ExprKind::ReadStr { ptr, len, .. } => {
                ptr.at_return() || len.as_ref().is_some_and(|l| l.at_return())
            }
            ExprKind::Unary { expr, .. } => expr.at_return(),
            ExprKind::Binary { lhs, rhs, .. } => lhs.at_return() || rhs.at_return(),
            _ => false,
        }
    }

    /// Calls `f` on this expression and every sub-expression.
    pub fn visit(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        match &self.kind {
            ExprKind::Read { base, .. }
            | ExprKind::Deref(base)
            | ExprKind::Path(base)
            | ExprKind::Swap { expr: base, .. } => base.visit(f),
            ExprKind::ReadStr { ptr, len, .. } => {
                ptr.visit(f);
                if let Some(l) = len {
                    l.visit(f);
                }
            }
            ExprKind::Unary { expr, .. } => expr.visit(f),
            ExprKind::Binary { lhs, rhs, .. } => {
                lhs.visit(f);
                rhs.visit(f);
            }
            _ => {}
        }
    }
}

/// What an event field holds, as the decoder prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldKind {
    Int(Scalar),
    Bool,
    Duration,
    Str {
        cap: u32,
    },
    Ptr,
    /// A `u64` naming a stack in the program's stack map of that kind (fslat_stacks.bpf.h,
    /// `fslat_kstackid`, `fslat_ustackid`); read by `stacks::StackTable`.
    Stack(StackKind),
    /// `hex(x)`, `oct(x)`: an integer of this size, shown in that base.
    Formatted(Scalar, Radix),
    /// A `u64` cgroup id, shown as `cgroups::name` says.
    CgroupName(crate::cgroups::CgroupView),
}

impl FieldKind {
    pub fn size(self) -> u32 {
        match self {
            FieldKind::Int(s) | FieldKind::Formatted(s, _) => u32::from(s.size),
            FieldKind::Bool => 1,
            FieldKind::Duration
            | FieldKind::Ptr
            | FieldKind::Stack(_)
            | FieldKind::CgroupName(_) => 8,
            FieldKind::Str { cap } => cap,
        }
    }

    pub fn align(self) -> u32 {
        match self {
            FieldKind::Str { .. } => 1,
            k => k.size(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventField {
    pub name: String,
    pub kind: FieldKind,
    pub offset: u32,
    pub expr: Expr,
}

/// One `emit`'s or `printf`'s event record: a `u32` schema id at offset 0, then the
/// fields at their offsets, C alignment rules, total size rounded up to 8. A session's
/// first event has the session's index as its id; further ones take ids after the last
/// session's (`check` numbers them), so a script of one event per session keeps its ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventSchema {
    pub id: u32,
    /// The index of the session that sends it.
    #[serde(default)]
    pub item: u32,
    pub session: String,
    pub fields: Vec<EventField>,
    pub size: u32,
    /// `printf(FORMAT, ...)`: the fields are its arguments, in order, and the event's
    /// text is this format applied to them (`output::printf` renders it).
    #[serde(default)]
    pub format: Option<Format>,
    /// The `if` conditions around the `emit` or `printf`, as one condition: the event is
    /// sent only when it holds (the program's nested `if`s are flattened into it).
    #[serde(default)]
    pub guard: Option<Expr>,
}

/// A line `on begin` or `on end` prints, in user space: a format and its constant values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserLine {
    pub pieces: Vec<Piece>,
    /// Constants (`ExprKind::Int`, `Str`, `Bool`), typed.
    pub values: Vec<Expr>,
}

/// A checked `printf` format: literal text and conversions, each conversion taking the
/// next event field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Format {
    pub pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Piece {
    /// Bytes printed as they are (`%%` already made `%`).
    Text(Vec<u8>),
    /// A conversion of the field at `field`.
    Conv { spec: ConvSpec, field: usize },
}

/// One C conversion: `%-16s`, `%08x`, `%.10s`, `%llu`. Length modifiers (`l`, `ll`, `h`,
/// `z`, `j`) are accepted and change nothing: every value is printed at its own width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvSpec {
    /// `-`: pad on the right.
    pub left: bool,
    /// `0`: pad numbers with zeros.
    pub zero: bool,
    /// `+`: a sign on non-negative numbers too.
    pub plus: bool,
    /// ` `: a space before non-negative numbers.
    pub space: bool,
    /// `#`: `0x` before `%x`, `0` before `%o`.
    pub alt: bool,
    pub width: Option<u32>,
    pub precision: Option<u32>,
    /// `d i u x X o s c p`.
    pub conv: u8,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregation {
    /// Unique in the program: names the map.
    pub id: usize,
    pub func: AggFunc,
    pub arg: Option<Expr>,
    /// Whether the value is a duration (printed with units).
    pub duration: bool,
    /// `lhist`'s buckets.
    pub linear: Option<Linear>,
    pub keys: Vec<AggKey>,
    /// Size of the key struct (one zero `u32`, padded to 8, when there are no keys).
    pub key_size: u32,
    /// Text shown as the aggregation's title, from the script (`hist(latency) by comm`),
    /// without `as NAME`.
    pub title: String,
    /// Unique in the program: given with `as NAME` or derived (see `check::names`). It
    /// titles the text output, is the JSON `name` and the metric's name.
    pub name: String,
    /// The `if` conditions around it, as one condition (see `EventSchema::guard`).
    #[serde(default)]
    pub guard: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggKey {
    pub name: String,
    pub kind: FieldKind,
    pub offset: u32,
    pub expr: Expr,
}

/// A kernel struct as fslat declares it for CO-RE: only the members a script reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StructDecl {
    pub ty: TypeId,
    pub name: StructName,
    pub members: Vec<MemberDecl>,
}

/// A kernel struct or union by the name codegen declares it under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum StructName {
    /// `struct file`, `union foo`.
    Named { union: bool, name: String },
    /// A struct or union without a name (or a type that is neither, named in an error
    /// path): named after its BTF type id.
    Anonymous { union: bool, ty: TypeId },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberDecl {
    pub name: String,
    pub ty: MemberType,
}

/// What a declared member holds, as far as CO-RE needs to know to relocate a read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MemberType {
    /// An integer, of its BTF size.
    Int {
        size: u32,
        signed: bool,
    },
    /// An enum, of its BTF size: declared as an enum, since CO-RE takes an integer for an
    /// enum member as a different kind and refuses the relocation.
    Enum {
        size: u32,
        signed: bool,
    },
    Ptr(Pointee),
    /// A struct or union embedded by value.
    Struct(StructName),
    /// An array of characters (a string) or of anything else (opaque bytes).
    Array {
        chars: bool,
        len: u32,
    },
    /// Any other type: declared as an opaque 8 bytes.
    Other,
}

/// What a member pointer points to: a struct fslat reads through, a string, or anything
/// else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Pointee {
    Struct(StructName),
    Char,
    Void,
}

/// Lays out fields after a leading `u32`, C style. Returns (offsets, total size).
pub fn layout(kinds: &[FieldKind], header: u32) -> (Vec<u32>, u32) {
    let mut offset = header;
    let mut offsets = Vec::with_capacity(kinds.len());
    for k in kinds {
        let a = k.align();
        offset = offset.div_ceil(a) * a;
        offsets.push(offset);
        offset += k.size();
    }
    (offsets, offset.div_ceil(8) * 8)
}

/// The name a value has in JSON output: a duration's ends in `_ns` (`latency_ns`,
/// `value_ns`, `p99_ns`). The checker refuses two event fields this makes one; the JSON
/// writer names every field, key and aggregation figure by it.
pub fn json_name(name: &str, duration: bool) -> String {
    if duration {
        format!("{name}_ns")
    } else {
        name.to_string()
    }
}
