//! After attach, the thread that runs the session keeps only the capabilities the rest
//! of the run needs (docs/metrics.md, "Privileges"): loading and attaching needed CAP_BPF
//! and CAP_PERFMON; reading the maps, the counters and the ring buffer needs nothing on
//! the kernels tried here from 6.1 on, and CAP_BPF on 5.10 with unprivileged BPF off (tried
//! for real, `fd_use_without_capabilities`).
//! Symbolizing stacks reads other processes' memory maps and files and the kernel's
//! symbols: a program with `kstack` or `ustack` keeps what that takes. The threads the
//! network exporters run hold none at all (metrics/). The REPL, which loads the next
//! program, keeps everything.

use crate::check::program::Program;
use crate::sys::cap;

/// What stack symbolization reads: other users' `/proc/PID/maps`, `map_files` and
/// binaries, and `/proc/kallsyms`' addresses.
const STACKS: u64 = cap::set(&[
    cap::DAC_READ_SEARCH,
    cap::SYS_PTRACE,
    cap::SYS_ADMIN,
    cap::SYSLOG,
    cap::CHECKPOINT_RESTORE,
]);

/// Whether this thread may load a tracing program: CAP_BPF and CAP_PERFMON, or
/// CAP_SYS_ADMIN (what kernels before 5.8 ask, and what root holds). Asked before the
/// program is built, so that a user without them hears that first, not about clang.
pub fn may_load() -> Result<(), super::RuntimeError> {
    let Ok((effective, _)) = crate::sys::thread_capabilities() else {
        // The kernel will say at load time.
        return Ok(());
    };
    let both = cap::set(&[cap::BPF, cap::PERFMON]);
    if effective & both == both || effective & cap::set(&[cap::SYS_ADMIN]) != 0 {
        Ok(())
    } else {
        Err(super::RuntimeError::NoCapabilities)
    }
}

/// Drops every capability of the calling thread but `extra` and what `program`'s run
/// needs from now on (see the module). A failure is a warning: the run goes on with
/// what it had.
pub fn keep_what_the_run_needs(obj: &super::Loaded, program: &Program, extra: u64) {
    let Ok((effective, _)) = crate::sys::thread_capabilities() else {
        return;
    };
    let mut keep = extra;
    let fd_use_is_free = obj
        .progs()
        .next()
        .is_some_and(|(_, fd)| crate::sys::bpf::fd_use_without_capabilities(fd));
    if !fd_use_is_free {
        // CAP_SYS_ADMIN stands in for CAP_BPF where that is what the thread holds.
        keep |= match effective & cap::set(&[cap::BPF]) {
            0 => cap::set(&[cap::SYS_ADMIN]),
            bpf => bpf,
        };
    }
    if program.uses_kstack || program.uses_ustack {
        keep |= STACKS;
    }
    if let Err(e) = crate::sys::keep_thread_capabilities(keep) {
        crate::stderr_line!(
            "fslat: warning: cannot drop the capabilities the run no longer needs ({e}); tracing with them"
        );
    }
}
