//! How a session's programs are declared and attached in each mode: the section, the
//! context, how entry gives up on a call, the entry/return pair, and how a call in
//! flight is found again at return.

use crate::btf::Features;
use crate::check::resources::{self, Mode};
use serde::Serialize;

/// How a session's programs are declared and attached, by mode.
#[derive(Serialize)]
pub(super) struct ProgShape {
    /// The one program's section (fsession, multi-attach, uprobe session).
    pub(super) section: String,
    pub(super) ctx_decl: &'static str,
    /// What entry does to a call it gives up on before returning.
    pub(super) session_reject: &'static str,
    /// The entry/return pair (fentry mode, uprobes): `None` for one program.
    pub(super) pair: Option<PairData>,
    /// How a call in flight is found again at return (fsession's `entry()` map).
    pub(super) call_key: CallKey,
    /// Its programs are sleepable (`ProgShape::sleepable`): a user string not in memory
    /// is faulted in (`FSLAT_SLEEPABLE`; `sessions::sleepable` decides).
    pub(super) sleepable: bool,
    /// Its programs run their body between `bpf_preempt_disable()` and
    /// `bpf_preempt_enable()` (`templates/program_head`): set by `guard_preemption`, the
    /// one place that decides it.
    pub(super) preempt_off: bool,
}

/// Whether a uprobe's program (a user function's, at entry or return, or a USDT point's)
/// must run its body with preemption off on a kernel with `features`; `sleepable`: the
/// program may fault, and cannot.
///
/// A uprobe runs its program preemptible (migration off, not preemption) and without the
/// per-program recursion check of a trampoline or a raw tracepoint, and from Linux 6.13
/// the x86-64 JIT gives a kprobe-type program (uprobe programs are of that type) with 64
/// bytes of stack or more a per-CPU stack: two threads of one CPU then share it, and one
/// preempted mid-run finds the other's values when it resumes (docs/language.md,
/// "Uprobe programs and preemption"). The uprobe session came in the same release
/// (`Feature::UprobeSession`), so a kernel that has it has the per-CPU stacks, and the
/// preemption kfuncs (6.10); an older kernel runs the program on the task's own stack and
/// may lack the kfuncs, so it gets no guard. Kernel-side programs need none: kprobes and
/// perf events run with preemption off, trampolines and raw tracepoints skip a run that
/// finds the program active on its CPU.
pub(super) fn guard_preemption(features: &Features, sleepable: bool) -> bool {
    features.uprobe_session && !sleepable
}

#[derive(Serialize)]
pub(super) struct PairData {
    entry: &'static str,
    exit: &'static str,
    entry_section: String,
    exit_section: String,
    /// What identifies the call on its task's stack of calls in flight.
    key: &'static str,
    call_at_entry: &'static str,
    call_at_return: &'static str,
}

#[derive(Serialize)]
pub(super) struct CallKey {
    ty: &'static str,
    about: &'static str,
    at_entry: &'static str,
    at_return: &'static str,
}

const KERNEL_CTX: &str = "unsigned long long *ctx";
pub(super) const USER_CTX: &str = "struct fslat_regs *ctx";
pub(super) const PROFILE_CTX: &str = "void *ctx";

/// The trampoline's argument area: one address at entry and return of one call.
const KERNEL_CALL: CallKey = CallKey {
    ty: "__u64",
    about: "the call's context pointer (the trampoline's argument area: the same address at entry and return of one call)",
    at_entry: "(__u64)ctx",
    at_return: "(__u64)ctx",
};

/// A kprobe session's call: the address of its session cookie, which the kernel keeps
/// per call (on the task's function-graph return stack) from entry to return. The
/// context pointer would not do: kprobe_multi programs get a per-CPU copy of the
/// registers.
const KPROBE_CALL: CallKey = CallKey {
    ty: "__u64",
    about: "the address of the call's session cookie (the same at entry and return of one call, distinct between calls in flight)",
    at_entry: "(__u64)fslat_cookie",
    at_return: "(__u64)fslat_cookie",
};

/// A user call: its thread and stack pointer (8 bytes higher at return, once `ret`
/// popped the return address).
const USER_CALL: CallKey = CallKey {
    ty: "struct fslat_ucall",
    about: "the call's thread and stack pointer at entry (struct fslat_ucall)",
    at_entry: "{ bpf_get_current_pid_tgid(), ctx->sp }",
    at_return: "{ bpf_get_current_pid_tgid(), ctx->sp - 8 }",
};

impl ProgShape {
    /// Its programs as sleepable ones: libbpf's `.s` sections (`uprobe.s`,
    /// `uretprobe.multi.s`, `uprobe.session.s`, `usdt.s`) load them with
    /// `BPF_F_SLEEPABLE`.
    pub(super) fn sleepable(&mut self) {
        self.sleepable = true;
        self.section.push_str(".s");
        if let Some(pair) = &mut self.pair {
            pair.entry_section.push_str(".s");
            pair.exit_section.push_str(".s");
        }
    }

    pub(super) fn of(mode: Mode, func: &str) -> ProgShape {
        let kernel_pair = || PairData {
            entry: "fentry",
            exit: "fexit",
            entry_section: format!("fentry/{func}"),
            exit_section: format!("fexit/{func}"),
            key: "the call's context pointer",
            call_at_entry: "ctx",
            call_at_return: "ctx",
        };
        let user_pair = |multi: bool| PairData {
            entry: "the uprobe",
            exit: "the uretprobe",
            entry_section: if multi { "uprobe.multi" } else { "uprobe" }.into(),
            exit_section: if multi {
                "uretprobe.multi"
            } else {
                "uretprobe"
            }
            .into(),
            key: "its stack pointer (8 bytes higher at return, once `ret` popped the return address)",
            call_at_entry: "(const void *)ctx->sp",
            call_at_return: "(const void *)(ctx->sp - 8)",
        };
        let user = mode.is_user();
        let regs = mode.reads_registers();
        ProgShape {
            section: match mode {
                Mode::Fsession => format!("fsession/{func}"),
                Mode::Fexit => format!("fexit/{func}"),
                Mode::FsessionMulti | Mode::FexitMulti => resources::MULTI_SECTION.into(),
                // libbpf would attach it by a pattern; the runtime attaches it by names.
                Mode::KprobeSession => "kprobe.session".into(),
                Mode::KprobeEntry => "kprobe.multi".into(),
                Mode::KprobeReturn => "kretprobe.multi".into(),
                _ => "uprobe.session".into(),
            },
            ctx_decl: if regs { USER_CTX } else { KERNEL_CTX },
            // A kprobe or uprobe session's entry returning 1 skips the return.
            session_reject: if regs {
                "return 1;"
            } else {
                "*fslat_cookie = 0;"
            },
            pair: match mode {
                Mode::Fentry => Some(kernel_pair()),
                Mode::UprobeMulti => Some(user_pair(true)),
                Mode::Uprobe => Some(user_pair(false)),
                _ => None,
            },
            call_key: match mode {
                Mode::KprobeSession | Mode::KprobeEntry => KPROBE_CALL,
                _ if user => USER_CALL,
                _ => KERNEL_CALL,
            },
            sleepable: false,
            preempt_off: false,
        }
    }
}
