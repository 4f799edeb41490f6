//! How sessions attach (`Mode`): the modes a user picks, the ones fslat picks per
//! session, and what each asks of codegen and the runtime.

use super::super::program::{Program, Session};
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

    /// Whether session `s`'s functions share one program body in this mode: fentry,
    /// fexit and fsession programs of a session of several functions. The object holds
    /// the body once; fslat's loader loads a copy per function with the function's index
    /// and argument slots written into its instructions (`FN_MARK`, `param_mark`,
    /// `RET_MARK`; runtime/shared.rs), so the object does not grow with the functions.
    pub fn shares_body(self, s: &Session) -> bool {
        s.several
            && s.span.is_none()
            && s.on.is_none()
            && s.profile.is_none()
            && !s.offcpu
            && s.user.is_none()
            && matches!(
                self.of_session(s),
                Mode::Fentry | Mode::Fexit | Mode::Fsession
            )
    }

    /// The modes `program`'s sessions run in, as the run's messages name them
    /// (`fsession`, or `fsession + fsession-multi` for a mix of one- and several-function
    /// sessions on 7.2).
    pub fn of_program(self, program: &Program) -> String {
        let mut names: Vec<&str> = Vec::new();
        for s in &program.sessions {
            let n = match (&s.span, &s.on) {
                (Some(_), _) => "span",
                (_, Some(_)) => "on",
                _ if s.profile.is_some() => "profile",
                _ if s.offcpu => "offcpu",
                _ => self.of_session(s).name(),
            };
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if names.is_empty() {
            names.push(self.name());
        }
        names.join(" + ")
    }

    /// The mode session `s` runs in: a one-function session in fsession-multi mode is
    /// an ordinary fsession program; a session that needs nothing from the entry runs at
    /// return only (fexit, or fexit-multi for several functions in fsession-multi mode).
    pub fn of_session(self, s: &Session) -> Mode {
        if let Some(user) = &s.user {
            return user.mode;
        }
        if s.span.is_some() || s.offcpu {
            // Its two ends are entry programs (fentry or tp_btf), each attached alone.
            return Mode::Fentry;
        }
        if s.on.is_some() || s.profile.is_some() {
            // One program at the point (fentry or tp_btf), shaped as fexit mode's one
            // program: a filter, then the actions.
            return Mode::Fexit;
        }
        let multi = self == Mode::FsessionMulti && s.several;
        match self {
            // Return-only sessions stay kprobes (a session, or a kretprobe): an fexit
            // trampoline would skip calls as fsession does.
            // A kprobe reads arguments from registers: one passed on the stack needs
            // the trampoline, which has them all.
            Mode::KprobeSession if s.reads_stack_argument() => Mode::Fentry,
            // Nothing needs either end but the call itself: a kprobe at entry alone,
            // exact too (its handler runs with preemption off), one program run and no
            // return hook (docs/performance.md, "The default's price on 7.2").
            Mode::KprobeSession if !s.needs_entry() && !s.needs_return() => Mode::KprobeEntry,
            // Nothing needs the entry, and no parameter is read (at return a kprobe has
            // only the return register): a kretprobe alone, exact too (the fprobe's
            // return handler runs it with preemption off), one program run a call.
            Mode::KprobeSession if !s.needs_entry() && s.params_read().is_empty() => {
                Mode::KprobeReturn
            }
            Mode::KprobeSession => Mode::KprobeSession,
            _ if !s.needs_entry() && multi => Mode::FexitMulti,
            _ if !s.needs_entry() => Mode::Fexit,
            Mode::FsessionMulti if !s.several => Mode::Fsession,
            m => m,
        }
    }
}

/// Arguments passed in registers (x86-64: rdi, rsi, rdx, rcx, r8, r9); a kprobe or
/// uprobe reads no others.
pub const REGISTER_ARGS: usize = 6;

impl Session {
    /// Whether it reads a parameter that some function of it takes on the stack (after
    /// the `REGISTER_ARGS` registers).
    pub fn reads_stack_argument(&self) -> bool {
        let read = self.params_read();
        self.targets.iter().any(|t| {
            read.iter()
                .any(|&i| t.slots.get(i).is_some_and(|&slot| slot >= REGISTER_ARGS))
        })
    }
}
