//! Expressions and statements in C, for one phase (entry or return) of one session.
//!
//! A phase collects the declarations its expressions need (helper calls, parameter
//! loads, string buffers) as lines that go before the code that uses them; each is
//! emitted once per phase.

mod aggregate;
mod reads;
mod strings;

use super::ctypes::{c_int, struct_name};
use crate::aggregate::{CValue, Start};
use crate::check::builtins::C;
use crate::check::counters::{self, Counter};
use crate::check::program::*;
use crate::check::resources::{
    self, COUNTERS_MAP, EVENTS_MAP, REGISTER_ARGS, SCRATCH_FROM, STACK_STRINGS,
};
use std::collections::{HashMap, HashSet};

pub struct Phase<'p> {
    session: &'p Session,
    /// The function this program is for.
    target: &'p Target,
    at_return: bool,
    lines: Vec<String>,
    declared: HashSet<String>,
    temps: usize,
    /// One program for all the session's functions: values come through the
    /// trampoline's helpers and per-function tables indexed by `fslat_fn`.
    multi: bool,
    /// One body loaded once per function (`Mode::shares_body`): `fslat_fn`, the
    /// parameters and `ret` are words fslat's loader writes into each copy's
    /// instructions (`FSLAT_FN_INDEX`, `FSLAT_CTX_AT`); per-function tables as in `multi`.
    shared: bool,
    /// A `pt_regs` context (kprobes, uprobes): arguments and `ret` are registers.
    regs: bool,
    /// At a USDT probe: argument N is where the probe's note says, read by libbpf's
    /// `bpf_usdt_arg` (`fslat_usdt.bpf.h`).
    usdt: bool,
    /// String buffers already filled in this phase, by the expression they hold: each
    /// string (`comm`, a field) is read once per phase, however often it is compared.
    strings: HashMap<String, String>,
    /// Bytes of string buffers on the stack so far.
    stack_strings: u32,
    scratch: Scratch,
    /// Where each of the session's entry values starts in `fslat_ev`.
    saved_at: Vec<usize>,
    /// Whether a string read here may be of user memory (`fslat_read_strn`): one that a
    /// sleepable program faults in (`FSLAT_SLEEPABLE`, set per session by codegen).
    reads_user_str: bool,
}

/// Where a phase keeps values too big for the BPF stack (512 bytes for the whole
/// program): its slot of the session's per-CPU scratch map.
pub struct Scratch {
    /// The map (`Session::scratch_map`).
    pub map: String,
    /// What to do before giving up on a call when the map cannot be read (it always can:
    /// the verifier wants the check), e.g. clear the fsession cookie at entry.
    pub reject: &'static str,
    /// Bytes handed out so far.
    pub used: u32,
}

/// The x86-64 registers of a function's integer arguments (`arg0`..`arg5`), as
/// `struct fslat_regs` (fslat.bpf.h) names them.
const ARG_REGISTERS: [&str; REGISTER_ARGS] = ["di", "si", "dx", "cx", "r8", "r9"];

/// A register of a kprobe or uprobe program's context.
pub fn register(name: &str) -> String {
    format!("((struct fslat_regs *)ctx)->{name}")
}

/// The table of session `index`'s parameter `param` slots, per function.
pub fn slot_table(index: usize, param: usize) -> String {
    format!("fslat_slots_{index}_{param}")
}

impl<'p> Phase<'p> {
    pub fn new(
        session: &'p Session,
        target: &'p Target,
        at_return: bool,
        multi: bool,
        regs: bool,
        scratch: Scratch,
    ) -> Self {
        Phase {
            session,
            target,
            multi,
            shared: false,
            regs,
            // An `on` point's program, or a span's END (START's phase says its own).
            usdt: session
                .on
                .as_ref()
                .or(session.span.as_ref().map(|p| &p.end))
                .is_some_and(|p| p.usdt.is_some()),
            at_return,
            lines: Vec::new(),
            declared: HashSet::new(),
            temps: 0,
            strings: HashMap::new(),
            stack_strings: 0,
            scratch,
            saved_at: session.entry_layout().0,
            reads_user_str: false,
        }
    }

    /// This phase as part of a body shared by the session's functions (`Phase::shared`).
    pub fn sharing(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    /// This phase at a USDT probe or not (a span's START).
    pub fn at_usdt(mut self, usdt: bool) -> Self {
        self.usdt = usdt;
        self
    }

    /// Whether this phase reads a string that may be in user memory.
    pub fn reads_user_str(&self) -> bool {
        self.reads_user_str
    }

    /// Bytes of the scratch map this phase uses (0: none).
    pub fn scratch_used(&self) -> u32 {
        self.scratch.used
    }

    /// `size` bytes (8-aligned) of this phase's scratch slot: a C expression of their
    /// address, as a `char *`.
    fn scratch(&mut self, size: u32) -> String {
        let slot = u32::from(self.at_return);
        let map = self.scratch.map.clone();
        let reject = self.scratch.reject;
        let base = self.declare("fslat_sp", || {
            format!(
                "__u32 fslat_sk = {slot}; char *fslat_sp = bpf_map_lookup_elem(&{map}, &fslat_sk); if (!fslat_sp) {{ {reject}return 0; }}"
            )
        });
        let at = self.scratch.used;
        self.scratch.used += size.div_ceil(8) * 8;
        format!("({base} + {at})")
    }

    /// Lines produced since the last call; declarations stay known, so later code that
    /// needs the same value reuses them.
    pub fn take_lines(&mut self) -> Vec<String> {
        std::mem::take(&mut self.lines)
    }

    /// Whether the phase reads the clock now (`latency`, or `ts` at return).
    pub fn reads_now(&self) -> bool {
        self.declared.contains("fslat_now")
    }

    /// Whether entry read the clock before its filter (the script uses `ts` there).
    pub fn uses_start(&self) -> bool {
        self.declared.contains("fslat_start")
    }

    fn declare(&mut self, name: &str, line: impl FnOnce() -> String) -> String {
        if self.declared.insert(name.to_string()) {
            let l = line();
            self.lines.push(l);
        }
        name.to_string()
    }

    fn temp(&mut self) -> String {
        self.temps += 1;
        format!(
            "fslat_t{}{}",
            if self.at_return { "r" } else { "e" },
            self.temps
        )
    }

    /// A C expression for a non-string value.
    pub fn expr(&mut self, e: &Expr) -> String {
        match &e.kind {
            ExprKind::Int(v) => int_literal(*v),
            ExprKind::Bool(b) => u8::from(*b).to_string(),
            ExprKind::Str(_)
            | ExprKind::Deref(_)
            | ExprKind::Path(_)
            | ExprKind::ReadStr { .. } => {
                unreachable!("strings are compared through string_ref")
            }
            ExprKind::Swap { bits, expr } => {
                let x = self.expr(expr);
                format!("__builtin_bswap{bits}((__u{bits})({x}))")
            }
            // Saved as a __u64 at entry (see `entry_values`): cast back to its type.
            ExprKind::Entry(i) => {
                let ty = match e.ty {
                    Ty::Int(s) | Ty::Formatted { scalar: s, .. } => {
                        c_int(u32::from(s.size), s.signed)
                    }
                    Ty::Bool => "__u8",
                    _ => "__u64",
                };
                format!("(({ty})fslat_ev[{}])", self.saved_at(*i))
            }
            ExprKind::Builtin(b) => self.builtin(*b),
            // The ancestor at the path's depth is the path's cgroup: the task is in it or
            // below it (0 when the task sits higher).
            ExprKind::UnderCgroup { id, level } => {
                format!("(fslat_ancestor_cgroup_id({level}) == {id}ULL)")
            }
            ExprKind::Param(i) => self.param(*i),
            // A bundle's script argument, written before load.
            ExprKind::Arg(n) => format!("fslat_args.{}", resources::arg_field(*n)),
            ExprKind::Ret => self.ret_value(),
            ExprKind::Read {
                base,
                hops: Some(hops),
                ..
            } => {
                let addr = self.user_address(base, hops);
                let (ty, size) = match e.ty {
                    Ty::Int(s) => (c_int(u32::from(s.size), s.signed), u32::from(s.size)),
                    Ty::Bool => ("__u8", 1),
                    _ => ("__u64", 8),
                };
                format!("(({ty})fslat_user_read({addr}, {size}))")
            }
            ExprKind::Read {
                base, root, path, ..
            } => {
                let base = self.pointer(base, root);
                let read = format!("BPF_CORE_READ({base}, {})", groups(path));
                // A pointer read is a pointer in C; fslat holds every pointer as __u64
                // (clang 15+ makes the implicit conversion an error).
                if matches!(e.ty, Ty::Ptr { .. }) {
                    format!("((__u64){read})")
                } else {
                    read
                }
            }
            ExprKind::Unary { op, expr } => {
                let x = self.expr(expr);
                match op {
                    UnOp::Neg => format!("(-(__s64)({x}))"),
                    UnOp::Not => format!("(!({x}))"),
                    UnOp::BitNot => format!("(~({x}))"),
                }
            }
            ExprKind::Binary {
                op,
                lhs,
                rhs,
                signed,
            } => self.binary(*op, lhs, rhs, *signed),
        }
    }

    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, signed: bool) -> String {
        if matches!(lhs.ty, Ty::Str { .. }) {
            return self.string_compare(op, lhs, rhs);
        }
        let l = self.expr(lhs);
        let r = self.expr(rhs);
        let cast = if signed { "__s64" } else { "__u64" };
        // A number or pointer as a condition is compared with 0: clang warns about a
        // constant operand of `&&` or `||` (`latency < 1us or 1`).
        let truth = |e: &Expr, c: String| match e.ty {
            Ty::Bool => format!("({c})"),
            _ => format!("(({c}) != 0)"),
        };
        match op {
            BinOp::And => format!("({} && {})", truth(lhs, l), truth(rhs, r)),
            BinOp::Or => format!("({} || {})", truth(lhs, l), truth(rhs, r)),
            BinOp::Eq | BinOp::Ne if lhs.ty == Ty::Bool => {
                format!("(!!({l}) {} !!({r}))", op.symbol())
            }
            BinOp::Div if signed => format!("fslat_sdiv({l}, {r})"),
            BinOp::Rem if signed => format!("fslat_smod({l}, {r})"),
            BinOp::Shl | BinOp::Shr => {
                format!("(({cast})({l}) {} ({r}))", op.symbol())
            }
            _ => format!("(({cast})({l}) {} ({cast})({r}))", op.symbol()),
        }
    }

    fn string_compare(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr) -> String {
        let cap = |e: &Expr| match e.ty {
            Ty::Str { cap } => cap,
            _ => 1,
        };
        let n = cap(lhs).min(cap(rhs));
        let l = self.string_ref(lhs);
        let r = self.string_ref(rhs);
        let neg = if op == BinOp::Ne { "!" } else { "" };
        format!("{neg}fslat_streq({l}, {r}, {n})")
    }
}

/// A member path (`a.b, c`) for `BPF_CORE_READ`: its groups, comma-separated.
fn groups(path: &[Vec<String>]) -> String {
    path.iter()
        .map(|g| g.join("."))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn int_literal(v: i128) -> String {
    if v == i128::from(i64::MIN) {
        "(-0x7fffffffffffffffLL - 1)".into()
    } else if v < 0 {
        format!("({v}LL)")
    } else {
        format!("{v}ULL")
    }
}

/// A C string literal for arbitrary bytes: printable ASCII as is, the rest as octal
/// escapes (which, unlike `\x`, cannot swallow the characters after them).
pub fn c_string(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'?' => s.push_str("\\?"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s.push('"');
    s
}
