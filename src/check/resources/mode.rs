//! How sessions attach (`Mode`): the modes a user picks and fslat picks per session,
//! and what each asks of codegen and the runtime. A leaf: which mode a session runs in
//! is `policy.rs`.

use serde::{Deserialize, Serialize};

/// How sessions attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// One program at entry and return (Linux 7.0+).
    Fsession,
    /// An fentry and an fexit program sharing a per-thread map.
    Fentry,
    /// fsession, and a session of several functions is one program attached to all of
    /// them through one link (Linux 7.2 multi-attach).
    FsessionMulti,
    /// A session that needs nothing from the entry (`Session::needs_entry`): one fexit
    /// program per function, in any kernel mode (fslat chooses it, not the user).
    Fexit,
    /// The same for a session of several functions in fsession-multi mode: one fexit
    /// program attached to all of them through one link (`BPF_TRACE_FEXIT_MULTI`).
    FexitMulti,
    /// A user-space session as one uprobe session program at entry and return, attached
    /// to all its functions through one uprobe_multi link (Linux 6.13).
    UprobeSession,
    /// A user-space session as a uprobe and a uretprobe program, each attached to all
    /// its functions through one uprobe_multi link (6.6), sharing a per-task stack of
    /// calls in flight.
    UprobeMulti,
    /// A user-space session as a uprobe and a uretprobe program per function (any
    /// kernel), sharing a per-task stack of calls in flight.
    Uprobe,
    /// A kernel session as one kprobe session program at entry and return, attached to
    /// all its functions through one kprobe_multi link in session mode (Linux 6.10). A
    /// kprobe handler runs with preemption off, so no call is skipped for another's
    /// preempted program (docs/performance.md, issue 30).
    KprobeSession,
    /// A kernel session that needs nothing from its return nor its entry (`count()`,
    /// `count() by comm`: `Session::needs_return`, `Session::needs_entry`) in
    /// kprobe-session mode: one kprobe_multi program at entry, for all its functions
    /// (Linux 5.18). Exact as the session is (preemption is off in the handler), at a
    /// fraction of its price; `errors` is not known (docs/language.md, "Counters and the
    /// summary").
    KprobeEntry,
    /// A kernel session that needs its return but nothing of its entry (no parameter, no
    /// entry time, no `entry()`: `where ret < 0 { count() }`) in kprobe-session mode: one
    /// kretprobe_multi program at return, for all its functions (Linux 5.18). Exact as the
    /// session is (the fprobe's return handler runs it with preemption off), without the
    /// session's program run at entry.
    KprobeReturn,
}

impl Mode {
    /// Every mode, in one list: what builds objects for each mode walks it.
    pub const ALL: [Mode; 11] = [
        Mode::Fsession,
        Mode::Fentry,
        Mode::FsessionMulti,
        Mode::Fexit,
        Mode::FexitMulti,
        Mode::UprobeSession,
        Mode::UprobeMulti,
        Mode::Uprobe,
        Mode::KprobeSession,
        Mode::KprobeEntry,
        Mode::KprobeReturn,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Fsession => "fsession",
            Mode::Fentry => "fentry",
            Mode::FsessionMulti => "fsession-multi",
            Mode::Fexit => "fexit",
            Mode::FexitMulti => "fexit-multi",
            Mode::UprobeSession => "uprobe-session",
            // One mode to the user: the same pair of programs, attached either way.
            Mode::UprobeMulti | Mode::Uprobe => "uprobe",
            Mode::KprobeSession => "kprobe-session",
            Mode::KprobeEntry => "kprobe",
            Mode::KprobeReturn => "kretprobe",
        }
    }

    /// Whether its programs take a `pt_regs` context (kprobes, uprobes): arguments and
    /// the return value are read from registers, and what the return phase needs of the
    /// arguments is saved at entry.
    pub fn reads_registers(self) -> bool {
        self.is_user() || self.is_kprobe()
    }

    /// Whether its program is a kprobe_multi one (a session, at entry or at return),
    /// attached to all its session's functions through one kprobe_multi link.
    pub fn is_kprobe(self) -> bool {
        matches!(
            self,
            Mode::KprobeSession | Mode::KprobeEntry | Mode::KprobeReturn
        )
    }

    /// Whether its programs run at the functions' entry only, where the return value is
    /// not known (`errors` cannot be counted).
    pub fn entry_only(self) -> bool {
        self == Mode::KprobeEntry
    }

    /// Whether its one program runs at the functions' return only (fexit, fexit-multi,
    /// a kretprobe): the entry filter runs there.
    pub fn return_only(self) -> bool {
        matches!(self, Mode::Fexit | Mode::FexitMulti | Mode::KprobeReturn)
    }

    /// Whether this is how user-space sessions run.
    pub fn is_user(self) -> bool {
        matches!(self, Mode::UprobeSession | Mode::UprobeMulti | Mode::Uprobe)
    }
}

/// Arguments passed in registers (x86-64: rdi, rsi, rdx, rcx, r8, r9); a kprobe or
/// uprobe reads no others.
pub const REGISTER_ARGS: usize = 6;
