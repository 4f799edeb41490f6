//! Expressions and statements in C, for one phase (entry or return) of one session.
//!
//! A phase collects the declarations its expressions need (helper calls, parameter
//! loads, string buffers) as lines that go before the code that uses them; each is
//! emitted once per phase.

use super::ctypes::{c_int, struct_name};
use crate::aggregate::{CValue, Start};
use crate::check::builtins::C;
use crate::check::counters::{self, Counter};
use crate::check::program::*;
use crate::check::resources::{
    self, COUNTERS_MAP, EVENTS_MAP, KSTACKS_MAP, REGISTER_ARGS, SCRATCH_FROM, STACK_STRINGS,
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

    pub fn ret_value(&mut self) -> String {
        let ty = match self.target.ret {
            Some(s) => c_int(u32::from(s.size), s.signed),
            None => "__u64",
        };
        if self.regs {
            let rax = register("ax");
            return self.declare("fslat_ret", || format!("{ty} fslat_ret = ({ty}){rax};"));
        }
        if self.multi || self.shared {
            let raw = self.ret_raw();
            return self.declare("fslat_ret", || format!("{ty} fslat_ret = ({ty}){raw};"));
        }
        let slot = self.target.ret_slot;
        self.declare("fslat_ret", || {
            format!("{ty} fslat_ret = ({ty})ctx[{slot}];")
        })
    }

    /// Multi-attach: the return register as a `__u64`, whatever the function returns.
    pub fn ret_raw(&mut self) -> String {
        if self.regs {
            let rax = register("ax");
            return self.declare("fslat_ret_raw", || format!("__u64 fslat_ret_raw = {rax};"));
        }
        if self.shared {
            let mark = resources::RET_MARK;
            return self.declare("fslat_ret_raw", || {
                format!("__u64 fslat_ret_raw = FSLAT_CTX_AT(ctx, {mark});")
            });
        }
        self.declare("fslat_ret_raw", || {
            "__u64 fslat_ret_raw = 0; bpf_get_func_ret(ctx, &fslat_ret_raw);".into()
        })
    }

    fn param(&mut self, i: usize) -> String {
        let p = &self.session.params[i];
        let ty = match p.ty {
            Ty::Int(s) => c_int(u32::from(s.size), s.signed),
            Ty::Bool => "__u8",
            _ => "__u64",
        };
        let slot = self.target.slots[i];
        let name = format!("fslat_arg{i}");
        if self.usdt {
            // Cast to the note's size and sign by libbpf; 0 if it cannot be read.
            return self.declare(&name, || {
                format!(
                    "long {name}_raw = 0; bpf_usdt_arg((void *)ctx, {slot}, &{name}_raw); {ty} {name} = ({ty}){name}_raw;"
                )
            });
        }
        if self.regs {
            let reg = register(ARG_REGISTERS[slot.min(ARG_REGISTERS.len() - 1)]);
            return self.declare(&name, || format!("{ty} {name} = ({ty}){reg};"));
        }
        if self.shared {
            let mark = resources::param_mark(i);
            return self.declare(&name, || {
                format!("{ty} {name} = ({ty})FSLAT_CTX_AT(ctx, {mark});")
            });
        }
        if self.multi {
            let same = self.session.targets.iter().all(|t| t.slots[i] == slot);
            let n = if same {
                slot.to_string()
            } else {
                format!("{}[fslat_fn]", slot_table(self.session.index, i))
            };
            return self.declare(&name, || {
                format!(
                    "__u64 {name}_raw = 0; bpf_get_func_arg(ctx, {n}, &{name}_raw); {ty} {name} = ({ty}){name}_raw;"
                )
            });
        }
        self.declare(&name, || format!("{ty} {name} = ({ty})ctx[{slot}];"))
    }

    /// A builtin's C, from `check::builtins`.
    fn builtin(&mut self, b: Builtin) -> String {
        match b.c {
            C::Expr(c) => self.spell(c, None),
            C::Stack(StackKind::Kernel) => {
                let c = self.counter(&counters::STACK_LOST);
                self.declare("fslat_kstack", || {
                    format!("__s64 fslat_kstack = fslat_stackid(ctx, &{KSTACKS_MAP}, 0, {c});")
                })
            }
            C::Stack(StackKind::User) => {
                let c = self.counter(&counters::STACK_LOST);
                // At a switch out interrupts are off: the frames are placed in their files
                // in user space, as the scheduler hooks' are (bpf-runtime/fslat_sched.bpf.h).
                let files = !self.session.offcpu;
                self.declare("fslat_ustack", || {
                    format!(
                        "__u64 fslat_ustack = fslat_ustackid_as(ctx, &{EVENTS_MAP}, {c}, {files});"
                    )
                })
            }
            C::Str { .. } => {
                unreachable!("comm and func are strings: strings go through string_ref or store")
            }
        }
    }

    /// A builtin's C with the values it names (see `check::builtins::C`) spelled for this
    /// phase and mode, in one pass (a function's name may hold braces); `buffer`, for a
    /// string's fill, the buffer it writes and its size.
    fn spell(&mut self, c: &str, buffer: Option<(&str, u32)>) -> String {
        let mut out = String::new();
        let mut rest = c;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}').map(|n| open + n) else {
                break;
            };
            let name = &rest[open + 1..close];
            out.push_str(&self.value(name, buffer));
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// One value a builtin's C names by `{NAME}`.
    fn value(&mut self, name: &str, buffer: Option<(&str, u32)>) -> String {
        let (dst, cap) = buffer.unwrap_or(("", 0));
        let per_function = self.multi || self.shared;
        match name {
            "pid_tgid" => self.pid_tgid(),
            "uid_gid" => self.uid_gid(),
            "start" => self.start(),
            "now" => self.now(),
            "sched" => self.sched(),
            "stack_lost" => self.counter(&counters::STACK_LOST),
            "func" if per_function => format!("fslat_funcs_{}[fslat_fn]", self.session.index),
            "func" => c_string(self.target.func.as_bytes()),
            "func_len" if per_function => cap.to_string(),
            "func_len" => (self.target.func.len() as u32 + 1).min(cap).to_string(),
            "dst" if buffer.is_some() => dst.to_string(),
            "cap" if buffer.is_some() => cap.to_string(),
            _ => unreachable!("check::builtins names no value `{name}`"),
        }
    }

    /// A pointer to one of the session's counters: the return phase has them
    /// (`fslat_c`); entry looks them up when it needs them (a user session's `ustack`,
    /// taken at entry), and the pointer may be NULL.
    fn counter(&mut self, c: &Counter) -> String {
        let name = c.name;
        if self.at_return {
            return format!("&fslat_c->{name}");
        }
        let index = self.session.index;
        let ec = self.declare("fslat_ec", || {
            format!(
                "__u32 fslat_ek = {index}; struct fslat_counters *fslat_ec = bpf_map_lookup_elem(&{COUNTERS_MAP}, &fslat_ek);"
            )
        });
        format!("({ec} ? &{ec}->{name} : NULL)")
    }

    fn pid_tgid(&mut self) -> String {
        self.declare("fslat_pid_tgid", || {
            "__u64 fslat_pid_tgid = bpf_get_current_pid_tgid();".into()
        })
    }

    fn uid_gid(&mut self) -> String {
        self.declare("fslat_uid_gid", || {
            "__u64 fslat_uid_gid = bpf_get_current_uid_gid();".into()
        })
    }

    /// The clock now (in the return phase: the call's end). A span's END reads it in its
    /// template, as soon as it found the start, so `latency` leaves out its own work.
    fn now(&mut self) -> String {
        if self.at_return && (self.session.span.is_some() || self.session.offcpu) {
            self.declared.insert("fslat_now".into());
            return "fslat_now".into();
        }
        self.declare("fslat_now", || {
            "__u64 fslat_now = bpf_ktime_get_ns();".into()
        })
    }

    /// Reads the entry time now (at entry), for what later lines save on its clock.
    pub fn entry_time(&mut self) {
        self.start();
    }

    /// The entry time: at return it is already known; at entry the clock is read here.
    fn start(&mut self) -> String {
        if self.at_return {
            "fslat_start".into()
        } else {
            self.declare("fslat_start", || {
                "__u64 fslat_start = bpf_ktime_get_ns();".into()
            })
        }
    }

    /// The thread's scheduler totals (`oncpu`...), read together once, at the entry
    /// time at entry and at the clock at return: what is read at both ends on this clock
    /// adds up to `latency`.
    fn sched(&mut self) -> String {
        if self.session.offcpu {
            // An offcpu stretch's `runq`, which its template computes at the switch in.
            return self.declare("fslat_sched_snap", || {
                "struct fslat_sched_snap fslat_sched_snap = { .v = { [FSLAT_SCHED_RUNQ] = fslat_runq } };".into()
            });
        }
        let clock = if self.at_return {
            self.now()
        } else {
            self.start()
        };
        self.declare("fslat_sched_snap", || {
            format!(
                "struct fslat_sched_snap fslat_sched_snap; fslat_sched_read(&fslat_sched_snap, {clock});"
            )
        })
    }

    /// Where `entry_values[i]` starts in `fslat_ev`.
    fn saved_at(&self, i: usize) -> usize {
        self.saved_at[i]
    }

    /// A statement that saves `entry_values[i]` of the session into the `__u64`s of
    /// `words` (an lvalue array, `fslat_ev` or a map value's), at entry.
    pub fn save(&mut self, i: usize, words: &str) -> String {
        let session = self.session;
        self.save_value(i, &session.entry_values[i], words)
    }

    /// `save` of `v`, the value of `entry_values[i]` as a span's START computes it.
    pub fn save_value(&mut self, i: usize, v: &Expr, words: &str) -> String {
        let at = self.saved_at(i);
        match v.ty {
            Ty::Str { cap } => {
                let dst = format!("(*(char (*)[{cap}])&{words}[{at}])");
                self.fill_string(v, &dst, cap)
            }
            _ => {
                let x = self.expr(v);
                format!("{words}[{at}] = (__u64)({x});")
            }
        }
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

    /// A `const char *` to the string `e`: a literal, or a buffer filled here.
    fn string_ref(&mut self, e: &Expr) -> String {
        if let ExprKind::Str(bytes) = &e.kind {
            return c_string(bytes);
        }
        if let ExprKind::Builtin(b) = e.kind
            && let C::Str { at: Some(at), .. } = b.c
        {
            return self.spell(at, None);
        }
        let Ty::Str { cap } = e.ty else {
            unreachable!("string_ref takes strings")
        };
        if let ExprKind::Entry(i) = e.kind {
            return format!("((const char *)&fslat_ev[{}])", self.saved_at(i));
        }
        if let ExprKind::Arg(n) = e.kind {
            return format!("fslat_arg_str(fslat_args.{})", resources::arg_field(n));
        }
        let what = format!("{:?}", e.kind);
        if let Some(buf) = self.strings.get(&what) {
            return buf.clone();
        }
        let buf = self.temp();
        let on_stack = cap < SCRATCH_FROM && self.stack_strings + cap <= STACK_STRINGS;
        let name = if !on_stack {
            let at = self.scratch(cap);
            self.lines
                .push(format!("char (*{buf})[{cap}] = (void *){at};"));
            format!("(*{buf})")
        } else {
            self.stack_strings += cap;
            self.lines.push(format!("char {buf}[{cap}];"));
            buf
        };
        let fill = self.fill_string(e, &name, cap);
        self.lines.push(fill);
        self.strings.insert(what, name.clone());
        name
    }

    /// A statement that writes string `e` into `dst` (`cap` bytes).
    fn fill_string(&mut self, e: &Expr, dst: &str, cap: u32) -> String {
        let fill = self.fill_string_unordered(e, dst, cap);
        match fill.starts_with("__builtin_memcpy(") {
            // clang 14 drops the stores before a memcpy from a constant table at a
            // constant index (a one-function session's `fslat_funcs_N[fslat_fn]`, with
            // `fslat_fn` 0): an event's id and the fields before the copy went out
            // unwritten. The barrier costs no instruction; clang 19 needs none.
            true => format!("asm volatile(\"\" ::: \"memory\"); {fill}"),
            false => fill,
        }
    }

    /// `read`, a string read that returns 1 when it failed, as a statement that counts
    /// the failure in the session's `str_unread`.
    fn counted(&self, read: String) -> String {
        let count = counters::STR_UNREAD.c_increment("fslat_u");
        format!(
            "if ({read}) {{ __u32 fslat_uk = {}; struct fslat_counters *fslat_u = bpf_map_lookup_elem(&{}, &fslat_uk); if (fslat_u) {count} }}",
            self.session.index,
            resources::COUNTERS_MAP
        )
    }

    fn fill_string_unordered(&mut self, e: &Expr, dst: &str, cap: u32) -> String {
        match &e.kind {
            ExprKind::Builtin(b) => match b.c {
                C::Str { fill, .. } => self.spell(fill, Some((dst, cap))),
                _ => unreachable!("fill_string takes strings"),
            },
            ExprKind::Entry(i) => {
                format!(
                    "__builtin_memcpy({dst}, &fslat_ev[{}], {cap});",
                    self.saved_at(*i)
                )
            }
            ExprKind::Arg(n) => {
                let len = match e.ty {
                    Ty::Str { cap: have } => have.min(cap),
                    _ => cap,
                };
                format!(
                    "__builtin_memcpy({dst}, fslat_arg_str(fslat_args.{}), {len});",
                    resources::arg_field(*n)
                )
            }
            ExprKind::Str(bytes) => {
                let n = (bytes.len() + 1).min(cap as usize);
                format!("__builtin_memcpy({dst}, {}, {n});", c_string(bytes))
            }
            ExprKind::Deref(ptr) => {
                let p = self.expr(ptr);
                self.reads_user_str = true;
                self.counted(format!(
                    "fslat_read_str({dst}, {cap}, (const void *){p}, FSLAT_SLEEPABLE)"
                ))
            }
            ExprKind::Path(file) => {
                let f = self.expr(file);
                format!("fslat_path({dst}, (const void *){f});")
            }
            ExprKind::ReadStr { ptr, len, user } => {
                let p = self.expr(ptr);
                let n = match len {
                    Some(l) => format!("(__u64)({})", self.expr(l)),
                    None => cap.to_string(),
                };
                self.reads_user_str = true;
                self.counted(format!(
                    "fslat_read_strn({dst}, {cap}, (const void *){p}, {n}, {user}, FSLAT_SLEEPABLE)"
                ))
            }
            ExprKind::Read {
                base,
                hops: Some(hops),
                string,
                ..
            } => {
                let addr = self.user_address(base, hops);
                self.reads_user_str = true;
                match string {
                    Some(StringSource::Array) => self.counted(format!(
                        "fslat_read_strn({dst}, {cap}, (const void *){addr}, {cap}, true, FSLAT_SLEEPABLE)"
                    )),
                    _ => self.counted(format!(
                        "fslat_read_strn({dst}, {cap}, (const void *)fslat_user_ptr({addr}), {cap}, true, FSLAT_SLEEPABLE)"
                    )),
                }
            }
            ExprKind::Read {
                base,
                root,
                path,
                string,
                hops: None,
            } => {
                let base = self.pointer(base, root);
                match string {
                    // `&dst` so the macro's sizeof sees the whole array.
                    Some(StringSource::Array) => {
                        format!("BPF_CORE_READ_STR_INTO(&{dst}, {base}, {});", groups(path))
                    }
                    _ => {
                        self.reads_user_str = true;
                        self.counted(format!(
                            "fslat_read_str({dst}, {cap}, (const void *)BPF_CORE_READ({base}, {}), FSLAT_SLEEPABLE)",
                            groups(path)
                        ))
                    }
                }
            }
            _ => unreachable!("only these expressions have string type"),
        }
    }

    /// The user address a user-space session's read ends at: `base + hops[0]`, then
    /// through each pointer read there (`fslat_user_ptr`) plus the next hop.
    fn user_address(&mut self, base: &Expr, hops: &[u32]) -> String {
        let mut addr = format!("(__u64)({})", self.expr(base));
        for (i, h) in hops.iter().enumerate() {
            addr = if i == 0 {
                format!("({addr} + {h})")
            } else {
                format!("(fslat_user_ptr({addr}) + {h})")
            };
        }
        addr
    }

    /// `base` as a typed pointer for CO-RE reads.
    fn pointer(&mut self, base: &Expr, root: &StructName) -> String {
        let p = self.expr(base);
        format!("(({} *){p})", struct_name(root))
    }

    /// A statement that stores `e` into the lvalue `dst` of kind `kind`.
    pub fn store(&mut self, e: &Expr, dst: &str, kind: FieldKind) -> String {
        match kind {
            FieldKind::Str { cap } => self.fill_string(e, dst, cap),
            FieldKind::Bool => format!("{dst} = !!({});", self.expr(e)),
            _ => format!("{dst} = {};", self.expr(e)),
        }
    }

    /// Statements that update aggregation `a` for this call.
    pub fn aggregate(&mut self, a: &Aggregation) -> Vec<String> {
        let name = self.temp();
        let value = self.temp();
        if a.per_cpu_array() {
            return self.aggregate_per_cpu(a, &name, &value);
        }
        // `key` is the key's address.
        let (key, mut out) = if a.key_size >= SCRATCH_FROM {
            let at = self.scratch(a.key_size);
            (
                name.clone(),
                vec![format!(
                    "struct fslat_agg_key_{} *{name} = (void *){at};",
                    a.id
                )],
            )
        } else {
            (
                format!("&{name}"),
                vec![format!("struct fslat_agg_key_{} {name};", a.id)],
            )
        };
        out.push(format!("__builtin_memset({key}, 0, sizeof(*{key}));"));
        // Declarations the keys and argument need land in `self.lines`, before the block.
        for (i, k) in a.keys.iter().enumerate() {
            let dst = format!("({key})->{}", super::field_member(i));
            out.push(self.store(&k.expr, &dst, k.kind));
        }
        let spec = a.spec();
        let CValue { ty: vtype, start } = a.func.c_value(&spec);
        let x = match &a.arg {
            // Two maps take it (`c_after` too): evaluate it once.
            Some(arg) if a.func.per_cpu_max() => {
                let v = self.temp();
                out.push(format!("__s64 {v} = (__s64)({});", self.expr(arg)));
                v
            }
            Some(arg) => format!("(__s64)({})", self.expr(arg)),
            None => "0".into(),
        };
        let map = a.map();
        out.push(format!(
            "{vtype} *{value} = bpf_map_lookup_elem(&{map}, {key});"
        ));
        out.push(format!("if (!{value}) {{"));
        let init = match start {
            Start::Literal(init) => {
                out.push(format!("\t{vtype} fslat_init = {init};"));
                "&fslat_init".to_string()
            }
            Start::Global(zero) => format!("&{zero}"),
        };
        out.push(format!(
            "\tbpf_map_update_elem(&{map}, {key}, {init}, BPF_NOEXIST);"
        ));
        out.push(format!("\t{value} = bpf_map_lookup_elem(&{map}, {key});"));
        out.push("}".into());
        out.push(format!("if ({value})"));
        out.push(format!("\t{}", a.func.c_add(&spec, &value, &x)));
        out.push("else".into());
        out.push(format!("\t{}", counters::AGG_LOST.c_increment("fslat_c")));
        out.extend(a.func.c_after(&spec, &key, &value, &x));
        scope(out)
    }

    /// An aggregation without keys in a one-slot per-CPU array: the slot always exists.
    fn aggregate_per_cpu(&mut self, a: &Aggregation, key: &str, value: &str) -> Vec<String> {
        let spec = a.spec();
        let vtype = a.func.c_value(&spec).ty;
        let x = match &a.arg {
            Some(arg) => format!("(__s64)({})", self.expr(arg)),
            None => "0".into(),
        };
        let map = a.map();
        scope(vec![
            format!("__u32 {key} = 0;"),
            format!("{vtype} *{value} = bpf_map_lookup_elem(&{map}, &{key});"),
            format!("if ({value})"),
            format!("\t{}", a.func.c_add(&spec, value, &x)),
            "else".into(),
            format!("\t{}", counters::AGG_LOST.c_increment("fslat_c")),
        ])
    }
}

/// `lines` in a block of their own: an aggregation's key and value names are per block.
fn scope(lines: Vec<String>) -> Vec<String> {
    let mut block = vec!["{".to_string()];
    block.extend(lines.into_iter().map(|l| format!("\t{l}")));
    block.push("}".into());
    block
}

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
