//! Calls the kernel ran no program for. A BPF trampoline skips a tracing program that is
//! already running on the same CPU — another task's call preempted it midway, or the
//! traced function was called from inside it — and counts the skip in the program's
//! `recursion_misses` (Linux 5.12 and later). Such a call is in no figure of the session,
//! so the summary reports the skips as `missed`. The kernel counts them before any
//! filter: a skipped call of another process counts too, so `missed` is an upper bound
//! on the session's own lost calls.

use super::shared::Copy;
use crate::check::program::Program;
use crate::check::resources::{Prog, ProgRole};
use crate::sys::bpf::prog_recursion_misses;
use std::os::fd::{AsFd, BorrowedFd};

/// Calls `f` with every program of the run, the object's and the copies of shared
/// bodies: its name, what it is, its descriptor.
fn each(
    obj: &super::Loaded,
    copies: &[Copy],
    program: &Program,
    mut f: impl FnMut(&str, Prog, BorrowedFd),
) {
    let progs = program.progs();
    for (name, fd) in obj.progs() {
        if let Some(p) = progs.get(name) {
            f(name, *p, fd);
        }
    }
    for c in copies {
        f(&c.name, c.prog, c.fd.as_fd());
    }
}

/// Per session, the skips of all its programs (`None` where the kernel does not count).
pub fn per_session(obj: &super::Loaded, copies: &[Copy], program: &Program) -> Vec<Option<u64>> {
    let mut out = vec![None; program.sessions.len()];
    each(obj, copies, program, |_, p, fd| {
        if let (Some(slot), Ok(Some(n))) = (out.get_mut(p.session), prog_recursion_misses(fd)) {
            *slot = Some(slot.unwrap_or(0) + n);
        }
    });
    out
}

/// With `-v`: each program's own skips, where there were some (fentry mode tells the
/// entry's from the return's).
pub fn report_per_program(obj: &super::Loaded, copies: &[Copy], program: &Program) {
    each(obj, copies, program, |name, p, fd| {
        let Ok(Some(n)) = prog_recursion_misses(fd) else {
            return;
        };
        if n == 0 {
            return;
        }
        let role = match p.role {
            ProgRole::Session => "entry and return",
            ProgRole::Entry => "entry",
            ProgRole::Exit => "return",
            ProgRole::Multi => "entries and returns",
        };
        let label = program
            .sessions
            .get(p.session)
            .map_or("?", |s| s.label.as_str());
        crate::stderr_line!("fslat: {label}: program {name} ({role}) skipped {n} call(s)");
    });
}
