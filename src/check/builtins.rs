//! The builtins, in one table: the names a script writes, each one's type and phase, and
//! the C that reads it. The checker types a name by it, codegen renders its C from it,
//! REPL completion and the unknown-name hints list its names, and a test checks the
//! table in docs/language.md ("Names") against it. `docs/architecture.md` has the recipe
//! for a new one.

use super::program::{Builtin, SchedFig, StackKind};
use crate::cgroups::CgroupView;

/// One builtin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinDef {
    /// The names a script writes it by (`pid` and `tid` are one builtin).
    pub names: &'static [&'static str],
    pub builtin: Builtin,
    pub ty: BuiltinTy,
    /// The type as docs/language.md's table says it.
    pub shown_as: &'static str,
    /// Whether only the return phase has it (`latency`, the stacks); the others are read
    /// in whichever phase uses them.
    pub at_return: bool,
    pub c: C,
}

/// A builtin's script type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinTy {
    U32,
    U64,
    Duration,
    /// The task's name, `COMM_CAP` bytes.
    Comm,
    /// The traced function's name.
    FuncName,
    Stack(StackKind),
    CgroupName(CgroupView),
}

/// How the BPF program reads a builtin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum C {
    /// A C expression. `{pid_tgid}`, `{uid_gid}`, `{now}` (the clock at return) and
    /// `{start}` (the entry time) stand for values the program reads once (codegen's
    /// `Phase::builtin` declares them); `{sched}` is the thread's scheduler totals, read
    /// once per phase at the entry time (at entry) or the clock (at return), so that what
    /// is read at both ends shares `latency`'s clock.
    Expr(&'static str),
    /// A string: codegen's string code copies it (`bpf_get_current_comm`, the function
    /// name table).
    String,
    /// A stack id from `fslat_stackid` (bpf-runtime), counted in `stack_lost` when lost.
    Stack(StackKind),
}

impl BuiltinDef {
    /// Whether it reads the call's entry time (`ts`, `latency`): a session that uses it
    /// needs its entry (`Session::needs_entry`).
    pub fn reads_entry_time(&self) -> bool {
        matches!(self.c, C::Expr(e) if e.contains("{start}"))
    }
}

const fn def(
    names: &'static [&'static str],
    builtin: Builtin,
    ty: BuiltinTy,
    shown_as: &'static str,
    c: C,
) -> BuiltinDef {
    BuiltinDef {
        names,
        builtin,
        ty,
        shown_as,
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

/// Every builtin, in the order docs/language.md and the unknown-name hint list them.
pub const BUILTINS: &[BuiltinDef] = &[
    def(
        &["tgid"],
        Builtin::Tgid,
        BuiltinTy::U32,
        "u32",
        C::Expr("(__u32)({pid_tgid} >> 32)"),
    ),
    def(
        &["pid", "tid"],
        Builtin::Pid,
        BuiltinTy::U32,
        "u32 (the kernel's thread id)",
        C::Expr("(__u32){pid_tgid}"),
    ),
    def(
        &["comm"],
        Builtin::Comm,
        BuiltinTy::Comm,
        "string (15 bytes)",
        C::String,
    ),
    def(
        &["uid"],
        Builtin::Uid,
        BuiltinTy::U32,
        "u32",
        C::Expr("(__u32){uid_gid}"),
    ),
    def(
        &["gid"],
        Builtin::Gid,
        BuiltinTy::U32,
        "u32",
        C::Expr("(__u32)({uid_gid} >> 32)"),
    ),
    def(
        &["cpu"],
        Builtin::Cpu,
        BuiltinTy::U32,
        "u32",
        C::Expr("bpf_get_smp_processor_id()"),
    ),
    def(
        &["cgroup"],
        Builtin::Cgroup,
        BuiltinTy::U64,
        "u64 (the cgroup v2 id)",
        C::Expr("bpf_get_current_cgroup_id()"),
    ),
    def(
        &["ts"],
        Builtin::Ts,
        BuiltinTy::U64,
        "u64, ns, monotonic time of entry",
        C::Expr("{start}"),
    ),
    at_return(def(
        &["latency"],
        Builtin::Latency,
        BuiltinTy::Duration,
        "duration",
        C::Expr("({now} - {start})"),
    )),
    def(
        &["func"],
        Builtin::Func,
        BuiltinTy::FuncName,
        "string, the traced function's name",
        C::String,
    ),
    at_return(def(
        &["kstack"],
        Builtin::Kstack,
        BuiltinTy::Stack(StackKind::Kernel),
        "the kernel call stack (see \"Stacks\")",
        C::Stack(StackKind::Kernel),
    )),
    at_return(def(
        &["ustack"],
        Builtin::Ustack,
        BuiltinTy::Stack(StackKind::User),
        "the user call stack (see \"Stacks\")",
        C::Stack(StackKind::User),
    )),
    def(
        &["cgroup_path"],
        Builtin::CgroupName(CgroupView::Path),
        BuiltinTy::CgroupName(CgroupView::Path),
        "the task's cgroup path (see \"Services and containers\")",
        C::Expr("bpf_get_current_cgroup_id()"),
    ),
    def(
        &["unit"],
        Builtin::CgroupName(CgroupView::Unit),
        BuiltinTy::CgroupName(CgroupView::Unit),
        "the task's systemd unit (see \"Services and containers\")",
        C::Expr("bpf_get_current_cgroup_id()"),
    ),
    def(
        &["container"],
        Builtin::CgroupName(CgroupView::Container),
        BuiltinTy::CgroupName(CgroupView::Container),
        "the task's container id (see \"Services and containers\")",
        C::Expr("bpf_get_current_cgroup_id()"),
    ),
    def(
        &["pod"],
        Builtin::CgroupName(CgroupView::Pod),
        BuiltinTy::CgroupName(CgroupView::Pod),
        "the task's Kubernetes pod (see \"Services and containers\")",
        C::Expr("bpf_get_current_cgroup_id()"),
    ),
    at_return(def(
        &["oncpu"],
        Builtin::Sched(SchedFig::Oncpu),
        BuiltinTy::Duration,
        "duration, the call's time on a CPU (see \"Where a call's time went\")",
        C::Expr("{sched}.v[FSLAT_SCHED_ONCPU]"),
    )),
    at_return(def(
        &["runq"],
        Builtin::Sched(SchedFig::Runq),
        BuiltinTy::Duration,
        "duration, the call's time runnable, waiting for a CPU",
        C::Expr("{sched}.v[FSLAT_SCHED_RUNQ]"),
    )),
    at_return(def(
        &["blocked"],
        Builtin::Sched(SchedFig::Blocked),
        BuiltinTy::Duration,
        "duration, the call's time asleep",
        C::Expr("{sched}.v[FSLAT_SCHED_BLOCKED_NS]"),
    )),
    at_return(def(
        &["offcpu"],
        Builtin::Sched(SchedFig::Offcpu),
        BuiltinTy::Duration,
        "duration, `runq + blocked`",
        C::Expr("{sched}.v[FSLAT_SCHED_OFFCPU]"),
    )),
    at_return(def(
        &["switches"],
        Builtin::Sched(SchedFig::Switches),
        BuiltinTy::U64,
        "u64, times the call's thread left the CPU",
        C::Expr("{sched}.v[FSLAT_SCHED_SWITCHES]"),
    )),
];

/// The builtin a name means, if any.
pub fn by_name(name: &str) -> Option<&'static BuiltinDef> {
    BUILTINS.iter().find(|d| d.names.contains(&name))
}

/// A builtin's entry in the table.
pub fn def_of(b: Builtin) -> &'static BuiltinDef {
    BUILTINS
        .iter()
        .find(|d| d.builtin == b)
        .expect("every builtin is in BUILTINS")
}

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
        let expected: Vec<String> = BUILTINS.iter().map(docs_row).collect();
        assert_eq!(rows, expected);
    }

    #[test]
    fn every_builtin_has_one_entry_and_distinct_names() {
        let mut seen = std::collections::HashSet::new();
        for d in BUILTINS {
            assert_eq!(def_of(d.builtin), d);
            for n in d.names {
                assert!(seen.insert(*n), "{n} twice");
                assert_eq!(by_name(n), Some(d));
            }
        }
    }
}
