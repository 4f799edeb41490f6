//! Calls the kernel ran no program for. A BPF trampoline skips a tracing program that is
//! already running on the same CPU — another task's call preempted it midway, or the
//! traced function was called from inside it — and counts the skip in the program's
//! `recursion_misses` (Linux 5.12 and later). Such a call is in no figure of the session,
//! so the summary reports the skips as `missed`. The kernel counts them before any
//! filter: a skipped call of another process counts too, so `missed` is an upper bound
//! on the session's own lost calls.

use crate::sys::bpf::prog_recursion_misses;
use std::os::fd::AsFd;

/// The session a program is for: `fslat_{session,entry,exit,multi}_N[_T]` → N.
fn session_of(prog: &str) -> Option<usize> {
    let rest = [
        "fslat_session_",
        "fslat_entry_",
        "fslat_exit_",
        "fslat_multi_",
    ]
    .iter()
    .find_map(|p| prog.strip_prefix(p))?;
    rest.split('_').next()?.parse().ok()
}

/// Per session, the skips of all its programs (`None` where the kernel does not count).
pub fn per_session(obj: &libbpf_rs::Object, sessions: usize) -> Vec<Option<u64>> {
    let mut out = vec![None; sessions];
    for prog in obj.progs() {
        let Some(i) = session_of(&prog.name().to_string_lossy()) else {
            continue;
        };
        if let (Some(slot), Ok(Some(n))) = (out.get_mut(i), prog_recursion_misses(prog.as_fd())) {
            *slot = Some(slot.unwrap_or(0) + n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn programs_are_matched_to_their_sessions() {
        for (prog, session) in [
            ("fslat_session_0", Some(0)),
            ("fslat_session_12_3", Some(12)),
            ("fslat_entry_2", Some(2)),
            ("fslat_exit_2_1", Some(2)),
            ("fslat_multi_4", Some(4)),
            ("fslat_announce", None),
            ("fslat_session_x", None),
        ] {
            assert_eq!(super::session_of(prog), session, "{prog}");
        }
    }
}
