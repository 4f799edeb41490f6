//! Calls the kernel ran no program for. A BPF trampoline skips a tracing program that is
//! already running on the same CPU — another task's call preempted it midway, or the
//! traced function was called from inside it — and counts the skip in the program's
//! `recursion_misses` (Linux 5.12 and later). Such a call is in no figure of the session,
//! so the summary reports the skips as `missed`. The kernel counts them before any
//! filter: a skipped call of another process counts too, so `missed` is an upper bound
//! on the session's own lost calls.

use crate::check::program::Program;
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
