//! Which mode each session runs in: the policy over a checked program that picks, from
//! the mode asked for (`Mode`, a leaf of its own), each session's programs.

use super::super::program::{Program, Session};
use super::mode::{Mode, REGISTER_ARGS};

impl Mode {
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
