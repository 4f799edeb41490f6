//! Why a run failed, in words that say what to do. libbpf's own log is kept so the
//! verifier's verdict can be summarised (or shown whole with -v).

use crate::check::program::Program;
use libbpf_rs::PrintLevel;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{what} failed: {source}")]
    Libbpf {
        what: &'static str,
        source: libbpf_rs::Error,
    },
    #[error(
        "the kernel refused to load the BPF program: permission denied.\n  fslat needs root (or the CAP_BPF and CAP_PERFMON capabilities): run it with sudo."
    )]
    NotPrivileged,
    #[error(
        "fslat cannot load a BPF program as this user.\n  fslat needs root (or the CAP_BPF and CAP_PERFMON capabilities): run it with sudo."
    )]
    NoCapabilities,
    #[error(
        "the kernel refused to load the BPF program although fslat runs as root (EPERM).\n  This kernel forbids function tracing (lockdown, or ftrace disabled); fentry, fexit and fsession programs cannot run here.\n  Run `fslat doctor` to check the machine, or run fslat on another kernel (e.g. in a virtual machine with a distribution kernel)."
    )]
    TracingForbidden,
    #[error(
        "this kernel has no fsession support (Linux 7.0+): {detail}\n  Use --mode fentry (or the default --mode auto)."
    )]
    NoFsession { detail: String },
    #[error(
        "the kernel's verifier rejected the program for {session}: {summary}\n  This is a bug in fslat; run with -v to see the verifier's log and report it with the script."
    )]
    Verifier { session: String, summary: String },
    #[error(
        "cannot attach to `{func}`: {source}\n  The function may be inlined, `notrace`, or on the kernel's deny list; `fslat -l '{func}'` shows whether it is traceable."
    )]
    Attach {
        func: String,
        source: libbpf_rs::Error,
    },
    #[error(
        "the kernel cannot trace `{func}`: {reason}\n  Trace a function that calls it, or one it calls, instead."
    )]
    Untraceable { func: String, reason: String },
    #[error(
        "cannot attach the session {session} to its functions through one multi-attach link: {reason}\n  Run it with --mode fsession (one program per function)."
    )]
    MultiAttach { session: String, reason: String },
    #[error(
        "cannot attach the session {session} as a kprobe session (a kprobe_multi link): {reason}\n  A function kprobes refuse can still be traced on its trampoline: run with --mode fsession (or fentry)."
    )]
    KprobeAttach { session: String, reason: String },
    #[error("cannot attach the user-space session {session} to `{path}`: {reason}\n  {hint}")]
    UserAttach {
        session: String,
        path: String,
        reason: String,
        hint: &'static str,
    },
    #[error(
        "cannot load the session {session}'s program for each of its functions: {reason}\n  This is a bug in fslat; run with -v and report it with the script."
    )]
    Copies { session: String, reason: String },
    #[error("cannot sample the CPUs for `profile`: {reason}")]
    Profile { reason: String },
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
    #[error("the BPF object has no {0}: this is a bug in fslat")]
    Missing(&'static str),
}

impl RuntimeError {
    pub fn libbpf(what: &'static str) -> impl Fn(libbpf_rs::Error) -> RuntimeError {
        move |source| RuntimeError::Libbpf { what, source }
    }
}

static VERBOSE: AtomicBool = AtomicBool::new(false);
static LOG: Mutex<String> = Mutex::new(String::new());

fn print(level: PrintLevel, msg: String) {
    if VERBOSE.load(Ordering::Relaxed) {
        crate::stderr_text!("{msg}");
    }
    // Kept with -v too: a failure is classified from it (with -v, a verifier refusal
    // that came back as EPERM was called "this kernel forbids function tracing").
    if level != PrintLevel::Debug
        && let Ok(mut log) = LOG.lock()
    {
        log.push_str(&msg);
    }
}

/// Routes libbpf's messages: to stderr with -v, and into a buffer for error summaries.
pub fn capture_libbpf_log(verbose: bool) {
    VERBOSE.store(verbose, Ordering::Relaxed);
    if let Ok(mut log) = LOG.lock() {
        log.clear();
    }
    libbpf_rs::set_print(Some((
        if verbose {
            PrintLevel::Debug
        } else {
            PrintLevel::Info
        },
        print,
    )));
}

fn log() -> String {
    LOG.lock().map(|l| l.clone()).unwrap_or_default()
}

fn errno(e: &libbpf_rs::Error) -> i32 {
    use libbpf_rs::ErrorKind::*;
    match e.kind() {
        PermissionDenied => libc::EPERM,
        InvalidInput => libc::EINVAL,
        NotFound => libc::ENOENT,
        _ => 0,
    }
}

pub fn load_error(e: libbpf_rs::Error, program: &Program) -> RuntimeError {
    classify_load_error(errno(&e), &log(), program, crate::sys::euid()).unwrap_or(
        RuntimeError::Libbpf {
            what: "loading the BPF program",
            source: e,
        },
    )
}

/// What a failed load means, from its errno and libbpf's log (`None`: nothing known).
fn classify_load_error(
    errno: i32,
    log: &str,
    program: &Program,
    euid: u32,
) -> Option<RuntimeError> {
    // The verifier ran (its closing line): whatever the errno, it refused the program.
    // (Linux 5.10 refuses some programs with EPERM, which is not a permission problem.)
    let verified = log
        .lines()
        .any(|l| l.trim_start().starts_with("processed ") && l.contains(" insns"));
    if !verified && (errno == libc::EPERM || log.contains("Operation not permitted")) {
        return Some(if euid != 0 {
            RuntimeError::NotPrivileged
        } else {
            RuntimeError::TracingForbidden
        });
    }
    let missing_kfunc = log.lines().any(|l| {
        (l.contains("bpf_session_cookie") || l.contains("bpf_session_is_return"))
            && (l.contains("not found") || l.contains("failed to find"))
    });
    if missing_kfunc {
        return Some(RuntimeError::NoFsession {
            detail: "the kfuncs bpf_session_cookie/bpf_session_is_return are missing".into(),
        });
    }
    if log.contains("fsession") && errno == libc::EINVAL && !log.contains("processed") {
        return Some(RuntimeError::NoFsession {
            detail: "the kernel does not know fsession programs".into(),
        });
    }
    // The kernel's own limits on what a trampoline can attach to, not a bug in the program.
    if let Some(line) = log.lines().find(|l| {
        l.contains("is unsupported")
            || l.contains("too many arguments")
            || l.contains("has more than")
    }) {
        let func = log
            .lines()
            .find_map(|l| l.split("prog '").nth(1)?.split('\'').next())
            .and_then(|p| function_of_prog(program, p))
            .unwrap_or_else(|| "this function".to_string());
        return Some(RuntimeError::Untraceable {
            func,
            reason: line.trim().to_string(),
        });
    }
    if log.contains("processed") || log.contains("verifier") || log.contains("R0") {
        let session = logged_session(log, program).unwrap_or_else(|| "a session".into());
        let summary = log
            .lines()
            .rev()
            .find(|l| {
                let l = l.trim();
                !l.is_empty()
                    && !l.starts_with("processed")
                    && !l.starts_with("libbpf:")
                    && !l.starts_with("-- END")
            })
            .unwrap_or("no reason given")
            .trim()
            .to_string();
        return Some(RuntimeError::Verifier { session, summary });
    }
    None
}

/// The label of the session whose program libbpf's log names (`prog 'fslat_session_0'`).
fn logged_session(log: &str, program: &Program) -> Option<String> {
    log.lines()
        .find_map(|l| l.split("prog '").nth(1)?.split('\'').next())
        .map(|p| session_of_prog(program, p))
}

/// The session's label for a program's name.
fn session_of_prog(program: &Program, prog: &str) -> String {
    program
        .progs()
        .get(prog)
        .and_then(|p| program.sessions.get(p.session))
        .map_or_else(|| prog.to_string(), |s| s.label.clone())
}

/// The kernel function a program's name is for.
fn function_of_prog(program: &Program, prog: &str) -> Option<String> {
    let p = *program.progs().get(prog)?;
    let s = program.sessions.get(p.session)?;
    Some(
        s.targets
            .get(p.target)
            .map_or_else(|| s.func.clone(), |t| t.func.clone()),
    )
}

/// A copy of a shared body the kernel refused (runtime/shared.rs): its verifier log
/// joins libbpf's, in libbpf's words, and is classified as libbpf's refusals are.
pub fn copy_load_error(
    errno: i32,
    prog: &str,
    func: &str,
    verifier: &str,
    program: &Program,
) -> RuntimeError {
    let text = format!(
        "libbpf: prog '{prog}': BPF program load failed: {}\nlibbpf: -- BEGIN PROG LOAD LOG --\n{verifier}-- END PROG LOAD LOG --\n",
        std::io::Error::from_raw_os_error(errno)
    );
    print(PrintLevel::Warn, text);
    match classify_load_error(errno, &log(), program, crate::sys::euid()) {
        // The copy's function: the log names only the program, which all copies share.
        Some(RuntimeError::Verifier { session, summary }) => RuntimeError::Verifier {
            session,
            summary: format!("(its copy for `{func}`) {summary}"),
        },
        Some(RuntimeError::Untraceable { reason, .. }) => RuntimeError::Untraceable {
            func: func.to_string(),
            reason,
        },
        Some(e) => e,
        None => RuntimeError::Libbpf {
            what: "loading the BPF program",
            source: libbpf_rs::Error::from_raw_os_error(errno),
        },
    }
}

/// Attaching a copy of a shared body to `func` failed.
pub fn copy_attach_error(e: std::io::Error, func: &str) -> RuntimeError {
    if e.raw_os_error() == Some(libc::EPERM) {
        return RuntimeError::TracingForbidden;
    }
    RuntimeError::Attach {
        func: func.to_string(),
        source: libbpf_rs::Error::from(e),
    }
}

pub fn attach_error(e: libbpf_rs::Error, program: &Program, prog: &str) -> RuntimeError {
    if errno(&e) == libc::EPERM {
        return RuntimeError::TracingForbidden;
    }
    let func = function_of_prog(program, prog).unwrap_or_else(|| session_of_prog(program, prog));
    RuntimeError::Attach { func, source: e }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program() -> Program {
        crate::compile(
            "session vfs_read { emit }",
            &crate::btf::Fixture::new(),
            crate::check::resources::Mode::Fsession,
        )
        .unwrap()
        .0
    }

    #[test]
    fn eperm_without_a_verifier_log_is_about_privileges() {
        let log =
            "libbpf: prog 'fslat_session_0': BPF program load failed: Operation not permitted\n";
        assert!(matches!(
            classify_load_error(libc::EPERM, log, &program(), 1000),
            Some(RuntimeError::NotPrivileged)
        ));
        assert!(matches!(
            classify_load_error(libc::EPERM, log, &program(), 0),
            Some(RuntimeError::TracingForbidden)
        ));
    }

    #[test]
    fn eperm_after_the_verifier_ran_is_the_verifier_refusing() {
        // Linux 5.10 answers some verifier refusals with EPERM.
        let log = "libbpf: prog 'fslat_session_0': BPF program load failed: Operation not permitted\n\
                   libbpf: -- BEGIN PROG LOAD LOG --\n\
                   R2 min value is negative, either use unsigned or 'var &= const'\n\
                   processed 57 insns (limit 1000000) max_states_per_insn 0 total_states 4\n\
                   -- END PROG LOAD LOG --\n";
        match classify_load_error(libc::EPERM, log, &program(), 0) {
            Some(RuntimeError::Verifier { session, summary }) => {
                assert_eq!(session, "vfs_read");
                assert!(summary.contains("R2 min value is negative"), "{summary}");
            }
            other => panic!("{other:?}"),
        }
    }
}
