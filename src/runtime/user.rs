//! Attaching a user-space session's programs: a uprobe session program or a uprobe and
//! uretprobe pair on every function of the session's file through one uprobe_multi link
//! each (the link's cookie is the function's index), or one classic uprobe and uretprobe
//! per function. `-p` is the link's own pid filter as well as the program's check.

use super::errors::RuntimeError;
use crate::check::program::Session;
use crate::check::resources::{Mode, ProgRole};
use libbpf_rs::{Link, ProgramMut, UprobeMultiOpts};

/// Attaches `prog` (of `role`, for function `target`) of user-space session `s`;
/// `pid` 0 traces every process.
pub fn attach(
    prog: &ProgramMut<'_>,
    s: &Session,
    role: ProgRole,
    target: usize,
    pid: u32,
) -> Result<Link, RuntimeError> {
    let Some(user) = &s.user else {
        return Err(RuntimeError::Missing("user-space file of a uprobe session"));
    };
    let pid = if pid == 0 { -1 } else { pid as i32 };
    let offsets = |ts: &[crate::check::program::Target]| -> Vec<usize> {
        ts.iter().map(|t| t.offset.unwrap_or(0) as usize).collect()
    };
    let failed = |e: libbpf_rs::Error| {
        let (reason, hint) = explain(&e);
        RuntimeError::UserAttach {
            session: s.label.clone(),
            path: user.path.clone(),
            reason,
            hint,
        }
    };
    let exit = role == ProgRole::Exit;
    match user.mode {
        Mode::UprobeSession | Mode::UprobeMulti => {
            let opts = UprobeMultiOpts {
                offsets: offsets(&s.targets),
                cookies: (0..s.targets.len() as u64).collect(),
                retprobe: exit,
                session: user.mode == Mode::UprobeSession,
                ..Default::default()
            };
            prog.attach_uprobe_multi_with_opts(pid, &user.path, "", opts)
                .map_err(failed)
        }
        _ => {
            let t = s
                .targets
                .get(target)
                .ok_or(RuntimeError::Missing("a user-space function's program"))?;
            prog.attach_uprobe(exit, pid, &user.path, t.offset.unwrap_or(0) as usize)
                .map_err(failed)
        }
    }
}

/// The kernel's reason, and what to do about it.
fn explain(e: &libbpf_rs::Error) -> (String, &'static str) {
    let text = e.to_string();
    let hint = if text.contains("No such file") || text.contains("ENOENT") {
        "The file was removed or replaced since fslat read it: run fslat again."
    } else if text.contains("Operation not supported") || text.contains("EOPNOTSUPP") {
        "This kernel cannot attach that way: try --mode uprobe."
    } else if text.contains("Invalid argument") || text.contains("EINVAL") {
        "The kernel refused a function's address in the file (not an instruction it can probe)."
    } else {
        "Run with -v for libbpf's messages."
    };
    (text, hint)
}
