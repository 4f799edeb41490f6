//! Why fslat stopped without doing its job, all the wording in one place, and the one way
//! it is printed.

use crate::build::BuildError;
use crate::codegen::Mode;
use crate::listing::ListError;
use crate::runtime::RuntimeError;
use std::io::IsTerminal;

/// Why fslat stopped without doing its job; rendered once by `report`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Diagnostics about the script, already rendered.
    #[error("{0}")]
    Script(String),
    #[error("cannot read the script {path}: {source}")]
    ReadScript {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "`{0}` is a subcommand and must come first, with its own options after it (`fslat {0} --help`); a script file named {0} runs as `fslat ./{0}`"
    )]
    MisplacedSubcommand(String),
    #[error("cannot list the cgroups: {0}")]
    Cgroups(String),
    #[error(
        "no program given: run `fslat -e 'session vfs_read where latency > 10ms'`, or name a script file (see --help)"
    )]
    NoProgram,
    #[error(
        "cannot read the running kernel's types: {0}\n  fslat needs a kernel built with BTF (CONFIG_DEBUG_INFO_BTF=y); to work with another kernel's types, pass its BTF with --btf FILE."
    )]
    Btf(crate::btf::BtfError),
    #[error(
        "--btf: {0}\n  --btf takes a raw BTF file, such as a copy of some kernel's /sys/kernel/btf/vmlinux."
    )]
    BtfFile(crate::btf::BtfError),
    #[error("the script {path} is larger than {limit} bytes; fslat scripts are small text files")]
    ScriptTooLarge { path: String, limit: u64 },
    /// Ctrl-C or SIGTERM before tracing began: nothing to report, exit 130.
    #[error("interrupted")]
    Interrupted,
    #[error(
        "--mode fsession: this kernel has no fsession (it arrived in Linux 7.0).\n  Use --mode fentry, or leave --mode at auto to pick it."
    )]
    NoFsession,
    #[error(
        "--mode fsession-multi: this kernel cannot attach one program to many functions (BPF_TRACE_FSESSION_MULTI arrived in Linux 7.2).\n  Use --mode fsession or fentry (one program per function), or leave --mode at auto."
    )]
    NoFsessionMulti,
    #[error(
        "--mode uprobe-session: this kernel has no uprobe session programs (BPF_TRACE_UPROBE_SESSION arrived in Linux 6.13).\n  Use --mode uprobe (a uprobe and a uretprobe per session), or leave --mode at auto."
    )]
    NoUprobeSession,
    #[error(
        "--mode kprobe-session: this kernel has no kprobe session programs (BPF_TRACE_KPROBE_SESSION arrived in Linux 6.10).\n  Use --mode fsession or fentry, or leave --mode at auto."
    )]
    NoKprobeSession,
    #[error(
        "--emit obj writes a binary object: give -o FILE (or redirect standard output away from the terminal)"
    )]
    ObjectToTerminal,
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "-o {0} is the script itself: its output would overwrite it; write the output to another file"
    )]
    OutputIsScript(String),
    #[error(
        "{0} shows `count() by kstack` and `count() by ustack` aggregations, and this program has none: count by a stack (`session vfs_read {{ count() by kstack }}`)"
    )]
    NoStackCount(&'static str),
    #[error("-p {0}: there is no process {0}")]
    NoSuchProcess(u32),
    #[error("-p {tid}: {tid} is a thread of process {tgid}; -p takes the process id: -p {tgid}")]
    ThreadNotProcess { tid: u32, tgid: u32 },
    #[error("-p {pid}: cannot watch the process for its exit: {source}")]
    WatchProcess { pid: u32, source: std::io::Error },
    /// `-c CMD` ran and failed: fslat exits with `status` (`how` says why).
    #[error("-c: the command {how}")]
    CommandFailed { status: i32, how: String },
    #[error("cannot start the command `{cmd}`: {source}")]
    Command { cmd: String, source: std::io::Error },
    #[error(transparent)]
    Build(BuildError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    List(#[from] ListError),
    #[error("the terminal failed: {0}")]
    Terminal(rustyline::error::ReadlineError),
    #[error("--listen {addr}: cannot listen there: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    OtlpSettings(String),
    #[error("{0} of the entries read from standard input failed (see above)")]
    ReplFailures(usize),
    #[error("cannot run the bundle {path}: {why}")]
    Bundle {
        path: String,
        why: crate::bundle::BundleError,
    },
    #[error(
        "a bundle cannot hold the user-space session {0}: its file and function offsets are this machine's; run the script itself where it traces"
    )]
    BundleUserSession(String),
    #[error("the bundle's arguments: {0}")]
    BundleArgs(crate::check::resources::ArgError),
    #[error(
        "the bundle {path} has no program for {mode} mode on {kernel}; rebuild it with this fslat, or choose another --mode"
    )]
    BundleNoVariant {
        path: String,
        mode: &'static str,
        kernel: String,
    },
    #[error(
        "the bundle {path} cannot run on {kernel}: the script needs what this kernel lacks:\n{why}"
    )]
    BundleCannotRun {
        path: String,
        kernel: String,
        why: String,
    },
    #[error(
        "session {session}: the {func} is not in {kernel}; a bundle attaches to the functions it was built with: build it from a script without it for this kernel"
    )]
    BundleMissingFunction {
        session: String,
        func: String,
        kernel: String,
    },
    #[error(
        "session {session}: USDT probe {probe} of {path}: {why}; a bundle attaches to the probes of the file it was built with, at that path: run the script itself on this machine (fslat SCRIPT.fsl)"
    )]
    BundleUsdtProbe {
        session: String,
        probe: String,
        path: String,
        why: String,
    },
    #[error(
        "session {session}: tracepoint {name} has {here} arguments in {kernel}, {built} where the bundle was built; its arguments are read by their place: run the script itself on this kernel (fslat SCRIPT.fsl), or build the bundle on a kernel like this one"
    )]
    BundleTracepointArgs {
        session: String,
        name: String,
        built: usize,
        here: usize,
        kernel: String,
    },
}

impl From<BuildError> for Error {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Interrupted => Error::Interrupted,
            e => Error::Build(e),
        }
    }
}

/// What fslat tells besides errors, printed as `fslat: note: ...`.
#[derive(Debug)]
pub enum Note {
    /// `--emit` in a mode this kernel cannot load.
    CannotLoadHere(Mode),
    /// In kprobe-session mode, a session that reads an argument passed on the stack
    /// runs on its trampolines.
    StackArgument { session: String },
    /// `--flamegraph` with `-i`: one graph of the whole run.
    FlamesOfTheRun,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::CannotLoadHere(mode) => {
                let since = match mode {
                    Mode::FsessionMulti => "BPF_TRACE_FSESSION_MULTI arrived in Linux 7.2",
                    Mode::KprobeSession => "BPF_TRACE_KPROBE_SESSION arrived in Linux 6.10",
                    _ => "fsession arrived in Linux 7.0",
                };
                write!(
                    f,
                    "--mode {}: this kernel could not load it ({since}); what --emit writes is for a kernel that can",
                    mode.name()
                )
            }
            Note::StackArgument { session } => write!(
                f,
                "session {session} reads a parameter passed on the stack, which a kprobe cannot see: it runs as an fentry/fexit pair (mode=fentry), where the kernel may skip calls"
            ),
            Note::FlamesOfTheRun => write!(
                f,
                "--flamegraph with -i draws one graph of the whole run (the intervals add up to it), not one per interval: -f folded -i prints each interval's lines"
            ),
        }
    }
}

/// What fslat warns about a script that will run, printed as `fslat: warning: ...`.
#[derive(Debug)]
pub enum Warning {
    /// `pid == N` where N is a running process with several threads.
    PidOfThreadedProcess {
        session: String,
        pid: u32,
        threads: u32,
    },
    /// The kernel skipped calls of a session's programs (`missed=N` in its summary).
    SkippedCalls { session: String, missed: u64 },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::PidOfThreadedProcess {
                session,
                pid,
                threads,
            } => write!(
                f,
                "{session}: `pid` is a thread id, and {pid} is a process with {threads} threads: `pid` compared with {pid} sees only its main thread; `tgid` is the process id (`tgid == {pid}`)"
            ),
            Warning::SkippedCalls { session, missed } => write!(
                f,
                "the kernel skipped {missed} call(s) of {session}: its program was already running on that CPU (another task's call preempted it, or a traced function was called inside it); the counts and aggregations of {session} are low by up to {missed} (an upper bound: other processes' skipped calls count too)"
            ),
        }
    }
}

/// 130 for an interrupted start-up and 141 for a reader that went away (what a shell
/// reports for a program ended by SIGINT or SIGPIPE); `-c`'s command's own status when it
/// failed; 1 for every other failure.
pub fn exit_status(e: &Error) -> i32 {
    match e {
        Error::Interrupted => 130,
        Error::CommandFailed { status, .. } => *status,
        // The command line is wrong, as clap's errors say: an option's value, or a file,
        // cgroup or process an option names, that cannot be used as given (`--otlp-ca` as
        // `--web-config`); an option this program cannot take; a subcommand out of place;
        // no program. 1 is for the rest: the script, and what the machine cannot do (the
        // EXIT STATUS table of the man page, docs/language.md).
        Error::OtlpSettings(_)
        | Error::MisplacedSubcommand(_)
        | Error::NoProgram
        | Error::OutputIsScript(_)
        | Error::ObjectToTerminal
        | Error::NoStackCount(_)
        | Error::NoSuchProcess(_)
        | Error::ThreadNotProcess { .. } => 2,
        e if broken_pipe(e) => 141,
        _ => 1,
    }
}

/// Whether `e` is only that standard output's reader closed it (`fslat -l | head`).
fn broken_pipe(e: &Error) -> bool {
    let io = match e {
        Error::Write { source, .. } => source,
        Error::List(ListError::Write(source)) => source,
        Error::Runtime(RuntimeError::Output(source)) => source,
        _ => return false,
    };
    io.kind() == std::io::ErrorKind::BrokenPipe
}

/// Prints an error the one way fslat prints errors.
pub fn report(e: &Error) {
    match e {
        Error::Interrupted => {}
        // Not fslat's failure: the run itself went well.
        e @ Error::CommandFailed { .. } => crate::stderr_line!("fslat: {e}"),
        e if broken_pipe(e) => {}
        Error::Script(text) => crate::stderr_text!("{text}"),
        e => crate::stderr_line!("fslat: error: {e}"),
    }
}

pub fn color_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
