//! The uses pass: what the checked sessions need of the whole object (the `path()`
//! scratch, the stack maps, the scheduler hooks), found in their expressions once they
//! are checked, as bpftrace's resource analysis runs after its semantic analyser.

use super::builtins::BuiltinTy;
use super::program::{ExprKind, Session, StackKind};

/// What the program's sessions use that the object provides once for all of them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Uses {
    pub path: bool,
    pub kstack: bool,
    pub ustack: bool,
    /// The scheduler hooks: `oncpu` and its kin, `wait_kstack`, `wait_ustack`.
    pub sched: bool,
    pub wait_kstack: bool,
    pub wait_ustack: bool,
}

/// What `sessions` use.
pub(super) fn of(sessions: &[Session]) -> Uses {
    let mut u = Uses::default();
    for s in sessions {
        // An offcpu item's `runq` is its stretch's, which its own hooks measure.
        let calls = !s.offcpu;
        for e in s.exprs() {
            e.visit(&mut |x| match x.kind {
                ExprKind::Path(_) => u.path = true,
                ExprKind::Builtin(b) => match b.ty {
                    BuiltinTy::Stack(StackKind::Kernel) => u.kstack = true,
                    BuiltinTy::Stack(StackKind::User) => u.ustack = true,
                    BuiltinTy::WaitStack(StackKind::Kernel) => {
                        u.sched = true;
                        u.kstack = true;
                        u.wait_kstack = true;
                    }
                    BuiltinTy::WaitStack(StackKind::User) => {
                        u.sched = true;
                        u.ustack = true;
                        u.wait_ustack = true;
                    }
                    _ => u.sched |= calls && b.reads_sched(),
                },
                _ => {}
            });
        }
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(script: &str) -> Uses {
        let ast = crate::syntax::parse(script).expect("parses");
        let p = crate::check::check(&ast, script, &crate::btf::Fixture::new()).expect("checks");
        of(&p.sessions)
    }

    #[test]
    fn what_the_checked_expressions_name_is_what_the_object_provides() {
        assert_eq!(uses("session vfs_read { count() }"), Uses::default());
        assert_eq!(
            uses("session vfs_read { emit path(file) as p, kstack }"),
            Uses {
                path: true,
                kstack: true,
                ..Uses::default()
            }
        );
        assert_eq!(
            uses("session vfs_read where oncpu > 1ms { count() by ustack }"),
            Uses {
                ustack: true,
                sched: true,
                ..Uses::default()
            }
        );
        assert_eq!(
            uses("session vfs_read { emit wait_kstack, wait_ustack }"),
            Uses {
                kstack: true,
                ustack: true,
                sched: true,
                wait_kstack: true,
                wait_ustack: true,
                ..Uses::default()
            }
        );
    }

    #[test]
    fn a_let_nothing_reads_uses_nothing() {
        assert_eq!(
            uses("session vfs_read { let s = kstack; let p = path(file); count() }"),
            Uses::default()
        );
    }
}
