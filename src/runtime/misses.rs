//! Calls the kernel ran no program for. A BPF trampoline skips a tracing program that is
//! already running on the same CPU — another task's call preempted it midway, or the
//! traced function was called from inside it — and counts the skip in the program's
//! `recursion_misses` (Linux 5.12 and later). Such a call is in no figure of the session,
//! so the summary reports the skips as `missed`. The kernel counts them before any
//! filter: a skipped call of another process counts too, so `missed` is an upper bound
//! on the session's own lost calls.

use crate::check::program::Program;
use crate::check::resources::ProgRole;
use crate::sys::bpf::prog_recursion_misses;
use std::os::fd::AsFd;

/// Per session, the skips of all its programs (`None` where the kernel does not count).
pub fn per_session(obj: &libbpf_rs::Object, program: &Program) -> Vec<Option<u64>> {
    let progs = program.progs();
    let mut out = vec![None; program.sessions.len()];
    for prog in obj.progs() {
        let Some(p) = progs.get(&*prog.name().to_string_lossy()) else {
            continue;
        };
        if let (Some(slot), Ok(Some(n))) =
            (out.get_mut(p.session), prog_recursion_misses(prog.as_fd()))
        {
            *slot = Some(slot.unwrap_or(0) + n);
        }
    }
    out
}

/// With `-v`: each program's own skips, where there were some (fentry mode tells the
/// entry's from the return's).
pub fn report_per_program(obj: &libbpf_rs::Object, program: &Program) {
    let progs = program.progs();
    for prog in obj.progs() {
        let name = prog.name().to_string_lossy().into_owned();
        let Some(p) = progs.get(&*name) else {
            continue;
        };
        let Ok(Some(n)) = prog_recursion_misses(prog.as_fd()) else {
            continue;
        };
        if n == 0 {
            continue;
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
    }
}
