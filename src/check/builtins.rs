//! The builtins, in one table: the names a script writes, each one's type and phase, and
//! the C that reads it. The checker types a name by it, codegen renders its C from it,
//! REPL completion and the unknown-name hints list its names, and a test checks the
//! table in docs/language.md ("Names") against it. `docs/architecture.md` has the recipe
//! for a new one.

use crate::cgroups::CgroupView;
use serde::{Deserialize, Serialize};

/// One builtin: everything about it is here, so adding one is one entry of `BUILTINS`.
#[derive(Debug, PartialEq, Eq)]
pub struct BuiltinDef {
    /// The names a script writes it by (`pid` and `tid` are one builtin); the first is
    /// its name in the checked program.
    pub names: &'static [&'static str],
    pub ty: BuiltinTy,
    /// The type as docs/language.md's table says it.
    pub shown_as: &'static str,
    /// What `--help` says of it.
    pub help: &'static str,
    /// Whether only the return phase has it (`latency`, the stacks); the others are read
    /// in whichever phase uses them.
    pub at_return: bool,
    pub c: C,
}

/// A builtin in the checked program: a handle to its entry of `BUILTINS`, serialised by
/// its name (as `aggregate::AggFunc` is an aggregation's).
#[derive(Clone, Copy)]
pub struct Builtin(&'static BuiltinDef);

/// A builtin's script type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinTy {
    U32,
    U64,
    Bool,
    Duration,
    /// The task's name, `COMM_CAP` bytes.
    Comm,
    /// The traced function's name.
    FuncName,
    Stack(StackKind),
    /// `wait_kstack`, `wait_ustack`: a stack the scheduler hooks took.
    WaitStack(StackKind),
    CgroupName(CgroupView),
}

/// How the BPF program reads a builtin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum C {
    /// A C expression. `{pid_tgid}`, `{uid_gid}`, `{now}` (the clock at return) and
    /// `{start}` (the entry time) stand for values the program reads once (codegen's
    /// `Phase::builtin` declares them); `{sched}` is the thread's scheduler totals, read
    /// once per phase at the entry time (at entry) or the clock (at return), so that what
    /// is read at both ends shares `latency`'s clock; `{stack_lost}` a pointer to the
    /// session's `stack_lost` counter (or NULL).
    Expr(&'static str),
    /// A string. `fill` is the statement that copies it into `{dst}`, a buffer of `{cap}`
    /// bytes; `at`, when there is one, a `const char *` to it that needs no copy (a
    /// comparison reads it in place). `{func}` stands for the traced function's name and
    /// `{func_len}` for the bytes to copy of it: codegen's `Phase::builtin` spells both
    /// for the mode (a literal for one function, the session's table of names indexed by
    /// `fslat_fn` for a multi-attach or shared program).
    Str {
        at: Option<&'static str>,
        fill: &'static str,
    },
    /// A stack id from `fslat_kstackid` or `fslat_ustackid` (bpf-runtime), counted in `stack_lost` when lost.
    Stack(StackKind),
}

impl BuiltinDef {
    /// Whether it reads the call's entry time (`ts`, `latency`): a session that uses it
    /// needs its entry (`Session::needs_entry`).
    pub fn reads_entry_time(&self) -> bool {
        matches!(self.c, C::Expr(e) if e.contains("{start}"))
    }

    /// Whether it is one of the thread's scheduler totals (`oncpu`...), which the checker
    /// turns into the call's share (the total at return minus at entry).
    pub fn reads_sched(&self) -> bool {
        matches!(self.c, C::Expr(e) if e.contains("{sched}"))
    }

    /// Its name in the checked program and `--help`'s first.
    pub fn name(&self) -> &'static str {
        self.names[0]
    }
}

impl Builtin {
    /// The builtin a name means, if any.
    pub fn named(name: &str) -> Option<Builtin> {
        BUILTINS.iter().find(|b| b.names.contains(&name)).copied()
    }
}

impl std::ops::Deref for Builtin {
    type Target = BuiltinDef;
    fn deref(&self) -> &BuiltinDef {
        self.0
    }
}

impl PartialEq for Builtin {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Builtin {}

impl std::hash::Hash for Builtin {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state)
    }
}

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Builtin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Builtin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Builtin::named(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("no builtin named {name}")))
    }
}

const fn def(
    names: &'static [&'static str],
    ty: BuiltinTy,
    shown_as: &'static str,
    help: &'static str,
    c: C,
) -> BuiltinDef {
    BuiltinDef {
        names,
        ty,
        shown_as,
        help,
        at_return: false,
        c,
    }
}

const fn at_return(d: BuiltinDef) -> BuiltinDef {
    BuiltinDef {
        at_return: true,
        ..d
    }
}

// The builtins the checker and codegen name, besides reading their entries.
pub const TGID: Builtin = Builtin(&def(
    &["tgid"],
    BuiltinTy::U32,
    "u32",
    "the process (what user space calls the pid)",
    C::Expr("(__u32)({pid_tgid} >> 32)"),
));
pub const PID: Builtin = Builtin(&def(
    &["pid", "tid"],
    BuiltinTy::U32,
    "u32 (the kernel's thread id)",
    "the thread",
    C::Expr("(__u32){pid_tgid}"),
));
pub const COMM: Builtin = Builtin(&def(
    &["comm"],
    BuiltinTy::Comm,
    "string (15 bytes)",
    "the task's name",
    C::Str {
        at: None,
        fill: "bpf_get_current_comm({dst}, {cap});",
    },
));
pub const CGROUP: Builtin = Builtin(&def(
    &["cgroup"],
    BuiltinTy::U64,
    "u64 (the cgroup v2 id)",
    "the task's cgroup v2 id",
    C::Expr("bpf_get_current_cgroup_id()"),
));
pub const LATENCY: Builtin = Builtin(&at_return(def(
    &["latency"],
    BuiltinTy::Duration,
    "duration",
    "the time from entry to return (return phase)",
    C::Expr("({now} - {start})"),
)));
pub const FUNC: Builtin = Builtin(&def(
    &["func", "probe"],
    BuiltinTy::FuncName,
    "string, the traced function's or point's name",
    "the traced function's or point's name (`probe`: bpftrace's word for it)",
    C::Str {
        at: Some("{func}"),
        fill: "__builtin_memcpy({dst}, {func}, {func_len});",
    },
));
pub const KSTACK: Builtin = Builtin(&at_return(def(
    &["kstack"],
    BuiltinTy::Stack(StackKind::Kernel),
    "the kernel call stack (see \"Stacks\")",
    "the kernel call stack (in emit and as by keys only)",
    C::Stack(StackKind::Kernel),
)));
pub const USTACK: Builtin = Builtin(&at_return(def(
    &["ustack"],
    BuiltinTy::Stack(StackKind::User),
    "the user call stack (see \"Stacks\")",
    "the user call stack (in emit and as by keys only)",
    C::Stack(StackKind::User),
)));

/// Every builtin, in the order docs/language.md, `--help` and the unknown-name hint list
/// them.
pub const BUILTINS: &[Builtin] = &[
    TGID,
    PID,
    COMM,
    Builtin(&def(
        &["uid"],
        BuiltinTy::U32,
        "u32",
        "the task's user id",
        C::Expr("(__u32){uid_gid}"),
    )),
    Builtin(&def(
        &["gid"],
        BuiltinTy::U32,
        "u32",
        "the task's group id",
        C::Expr("(__u32)({uid_gid} >> 32)"),
    )),
    Builtin(&def(
        &["cpu"],
        BuiltinTy::U32,
        "u32",
        "the CPU the program runs on",
        C::Expr("bpf_get_smp_processor_id()"),
    )),
    Builtin(&def(
        &["numa_node"],
        BuiltinTy::U32,
        "u32",
        "the NUMA node of that CPU (bpftrace's numaid)",
        C::Expr("bpf_get_numa_node_id()"),
    )),
    CGROUP,
    Builtin(&def(
        &["ts"],
        BuiltinTy::U64,
        "u64, ns, monotonic time of entry",
        "the call's entry time, ns of the monotonic clock",
        C::Expr("{start}"),
    )),
    LATENCY,
    FUNC,
    KSTACK,
    USTACK,
    Builtin(&def(
        &["cgroup_path"],
        BuiltinTy::CgroupName(CgroupView::Path),
        "the task's cgroup path (see \"Services and containers\")",
        "the task's cgroup v2 path (in emit and as by keys only)",
        C::Expr("bpf_get_current_cgroup_id()"),
    )),
    Builtin(&def(
        &["unit"],
        BuiltinTy::CgroupName(CgroupView::Unit),
        "the task's systemd unit (see \"Services and containers\")",
        "the task's systemd unit (in emit and as by keys only)",
        C::Expr("bpf_get_current_cgroup_id()"),
    )),
    Builtin(&def(
        &["container"],
        BuiltinTy::CgroupName(CgroupView::Container),
        "the task's container id (see \"Services and containers\")",
        "the task's container id (in emit and as by keys only)",
        C::Expr("bpf_get_current_cgroup_id()"),
    )),
    Builtin(&def(
        &["pod"],
        BuiltinTy::CgroupName(CgroupView::Pod),
        "the task's Kubernetes pod (see \"Services and containers\")",
        "the task's pod UID (in emit and as by keys only)",
        C::Expr("bpf_get_current_cgroup_id()"),
    )),
    Builtin(&at_return(def(
        &["oncpu"],
        BuiltinTy::Duration,
        "duration, the call's time on a CPU (see \"Where a call's time went\")",
        "the call's time on a CPU (return phase)",
        C::Expr("{sched}.v[FSLAT_SCHED_ONCPU]"),
    ))),
    Builtin(&at_return(def(
        &["runq"],
        BuiltinTy::Duration,
        "duration, the call's time runnable, waiting for a CPU",
        "the call's time runnable, waiting for a CPU (return phase)",
        C::Expr("{sched}.v[FSLAT_SCHED_RUNQ]"),
    ))),
    Builtin(&at_return(def(
        &["blocked"],
        BuiltinTy::Duration,
        "duration, the call's time asleep",
        "the call's time asleep (return phase)",
        C::Expr("{sched}.v[FSLAT_SCHED_BLOCKED_NS]"),
    ))),
    Builtin(&at_return(def(
        &["offcpu"],
        BuiltinTy::Duration,
        "duration, `runq + blocked`",
        "runq + blocked (return phase)",
        C::Expr("{sched}.v[FSLAT_SCHED_OFFCPU]"),
    ))),
    Builtin(&at_return(def(
        &["switches"],
        BuiltinTy::U64,
        "u64, times the call's thread left the CPU",
        "times the call's thread left the CPU (return phase)",
        C::Expr("{sched}.v[FSLAT_SCHED_SWITCHES]"),
    ))),
    Builtin(&at_return(def(
        &["wait_kstack"],
        BuiltinTy::WaitStack(StackKind::Kernel),
        "the kernel stack where the call's thread left the CPU for its longest stretch",
        "where in the kernel the call's thread left the CPU for its longest stretch (return phase)",
        C::Expr("fslat_sched_wait_kstack({stack_lost})"),
    ))),
    Builtin(&at_return(def(
        &["wait_ustack"],
        BuiltinTy::WaitStack(StackKind::User),
        "the user stack where the call's thread left the CPU for its longest stretch",
        "where in user space the call's thread left the CPU for its longest stretch (return phase)",
        C::Expr("fslat_sched_wait_ustack({stack_lost})"),
    ))),
    Builtin(&def(
        &["idle"],
        BuiltinTy::Bool,
        "bool, whether the task is the CPU's idle task (pid 0; see \"Profiles\")",
        "whether the task is the CPU's idle task (pid 0: a profile's idle CPU)",
        C::Expr("((__u32){pid_tgid} == 0)"),
    )),
];

/// Names a user may write besides parameters, for hints and completion.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTINS
        .iter()
        .flat_map(|d| d.names.iter().copied())
        .chain(["ret"])
}

/// docs/language.md's row for a builtin.
pub fn docs_row(d: &BuiltinDef) -> String {
    let names: Vec<String> = d.names.iter().map(|n| format!("`{n}`")).collect();
    let phase = if d.at_return { "return" } else { "both" };
    format!("| {} | {} | {phase} |", names.join(", "), d.shown_as)
}

/// `--help`'s lines for the builtins, one each.
pub fn help() -> String {
    BUILTINS
        .iter()
        .map(|d| format!("  {:<16}{}\n", d.names.join(", "), d.help))
        .collect()
}

/// Which call stack: the kernel's or the user program's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StackKind {
    Kernel,
    User,
}

impl StackKind {
    pub fn name(self) -> &'static str {
        match self {
            StackKind::Kernel => "kstack",
            StackKind::User => "ustack",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_the_builtins_as_the_table_has_them() {
        let docs = include_str!("../../docs/language.md");
        let names = docs
            .split("\n## Names\n")
            .nth(1)
            .expect("docs/language.md has a Names section");
        let rows: Vec<&str> = names
            .lines()
            .skip_while(|l| !l.starts_with("|---"))
            .skip(1)
            .take(BUILTINS.len())
            .collect();
        let expected: Vec<String> = BUILTINS.iter().map(|b| docs_row(b)).collect();
        assert_eq!(rows, expected);
    }

    #[test]
    fn every_builtin_has_one_entry_and_distinct_names() {
        let mut seen = std::collections::HashSet::new();
        for d in BUILTINS {
            for n in d.names {
                assert!(seen.insert(*n), "{n} twice");
                assert_eq!(Builtin::named(n), Some(*d));
            }
            let json = serde_json::to_string(d).expect("serialises");
            let back: Builtin = serde_json::from_str(&json).expect("deserialises");
            assert_eq!(back.c, d.c);
        }
    }
}
