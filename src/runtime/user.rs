//! Attaching a user-space session's programs: a uprobe session program or a uprobe and
//! uretprobe pair on every function of the session's file through one uprobe_multi link
//! each (the link's cookie is the function's index), or one classic uprobe and uretprobe
//! per function. `-p` is the link's own pid filter as well as the program's check.

use super::errors::RuntimeError;
use crate::check::program::{Session, UsdtPoint};
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
    // An `on` point's one program has fexit's role; it goes at the function's entry.
    let exit = role == ProgRole::Exit && s.on.is_none();
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

/// The USDT probe program `name` (of `role`) of session `s` is at, if it is one: an `on`
/// point's program, one of a span's STARTs (`Entry`, told apart by name) or its END (`Exit`).
pub fn usdt_point<'a>(s: &'a Session, role: ProgRole, name: &str) -> Option<&'a UsdtPoint> {
    let point = match (&s.on, &s.span) {
        (Some(on), _) => on,
        (None, Some(span)) if role == ProgRole::Entry => {
            let mut starts = span.starts.iter().enumerate();
            &starts.find(|(k, _)| s.span_start_prog(*k) == name)?.1.point
        }
        (None, Some(span)) => &span.end,
        _ => return None,
    };
    point.usdt.as_ref()
}

/// Attaches `prog` to every site of USDT probe `point` through libbpf, which sets the
/// probe's semaphore while the link lives (the uprobe's `ref_ctr_offset`: the kernel
/// clears it when the link goes, also when fslat is killed); `pid` 0 traces every process.
/// `attached` is the probes this run attached so far.
///
/// Without BPF cookies (before Linux 5.15) libbpf's programs find a site's argument specs
/// by the address the probe fired at, in one map of the object, one entry per address:
/// a second program on a probe already attached (an `on` and a span on it, a span from a
/// probe to itself) fails there with EEXIST. The specs at an address are the same
/// whichever program reads them, so that program goes on the sites as plain uprobes, with
/// the probe's semaphore, and finds the first attachment's entries.
pub fn attach_usdt(
    prog: &ProgramMut<'_>,
    s: &Session,
    point: &UsdtPoint,
    pid: u32,
    attached: &mut Vec<UsdtPoint>,
) -> Result<Vec<Link>, RuntimeError> {
    let pid = if pid == 0 { -1 } else { pid as i32 };
    let failed = |e: libbpf_rs::Error| {
        let (reason, mut hint) = explain(&e);
        if hint.starts_with("Run with -v") {
            hint = USDT_WITHOUT_COOKIES;
        }
        RuntimeError::UserAttach {
            session: s.label.clone(),
            path: point.path.clone(),
            reason: format!("USDT probe {}:{}: {reason}", point.provider, point.name),
            hint,
        }
    };
    match prog.attach_usdt(pid, &point.path, &point.provider, &point.name) {
        Ok(link) => {
            attached.push(point.clone());
            Ok(vec![link])
        }
        Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists && attached.contains(point) => {
            usdt_sites(prog, point, pid).map_err(failed)
        }
        Err(e) => Err(failed(e)),
    }
}

/// Plain uprobes on every site of `point`, each with its semaphore.
fn usdt_sites(
    prog: &ProgramMut<'_>,
    point: &UsdtPoint,
    pid: i32,
) -> Result<Vec<Link>, libbpf_rs::Error> {
    let probes = crate::elf::sdt::probes(std::path::Path::new(&point.path))
        .map_err(|e| libbpf_rs::Error::from(std::io::Error::other(e.to_string())))?;
    probes
        .iter()
        .filter(|p| p.provider == point.provider && p.name == point.name)
        .map(|p| {
            let opts = libbpf_rs::UprobeOpts {
                ref_ctr_offset: p.semaphore.unwrap_or(0) as usize,
                ..Default::default()
            };
            prog.attach_uprobe_with_opts(pid, &point.path, p.offset as usize, opts)
        })
        .collect()
}

/// What libbpf cannot do on a kernel without BPF cookies (before 5.15, such as 5.10): there
/// it finds a USDT site's argument specs by the address the probe fired at, so it attaches
/// a probe of a PIE or a shared library only in one process (`attach_usdt` handles its
/// other limit, one program per site).
const USDT_WITHOUT_COOKIES: &str = "Run with -v for libbpf's messages. Before Linux 5.15 (no BPF cookies) libbpf attaches a USDT probe of a PIE or a library only in one process that runs it already: -p PID, or -c CMD.";

/// The kernel's reason, and what to do about it.
fn explain(e: &libbpf_rs::Error) -> (String, &'static str) {
    // With its causes: libbpf-rs's own text ("failed to attach uprobe") says no errno.
    // 524 is the kernel's own ENOTSUPP, which libc has no name for.
    let text = format!("{e:#}").replace("Unknown error 524 (os error 524)", "ENOTSUPP (524)");
    let hint = if text.contains("No such file") || text.contains("ENOENT") {
        "The file was removed or replaced since fslat read it: run fslat again."
    } else if text.contains("Operation not supported") || text.contains("EOPNOTSUPP") {
        "This kernel cannot attach that way: try --mode uprobe."
    } else if ["Invalid argument", "EINVAL", "ENOTSUPP"]
        .iter()
        .any(|t| text.contains(t))
    {
        // ENOTSUPP: uprobes cannot step over the instruction there.
        "The kernel refused a function's address in the file (not an instruction it can probe)."
    } else {
        "Run with -v for libbpf's messages."
    };
    (text, hint)
}
