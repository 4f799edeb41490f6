//! The command line: parses options, runs the pipeline, prints diagnostics and errors
//! once, and turns every failure into a message and a non-zero exit status.

use crate::btf::{Btf, KernelTypes};
use crate::build::{BuildError, Compiler, find_clang};
use crate::check::program::Program;
use crate::child::HeldChild;
use crate::codegen::Mode;
use crate::diag::{Diagnostic, Source, render};
use crate::listing::{ListError, Traceable};
use crate::output::{JsonWriter, TextWriter, Writer};
use crate::runtime::{self, DEFAULT_RING_SIZE, RuntimeError, Settings, signals};
use clap::{CommandFactory, Parser, ValueEnum};
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "fslat",
    version,
    about = "Trace kernel function latency with a small language (fsession on Linux 7.0+, fentry/fexit before)",
    after_help = "Examples:\n  fslat -e 'session vfs_read where latency > 10ms { emit }'\n  fslat -p 1234 examples/slow_reads.fsl\n  fslat --emit c -e 'session vfs_write'\n  fslat -l 'vfs_*'\n  fslat doctor\n\nWith no program on a terminal, fslat starts its REPL.\nThe language: docs/language.md",
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Script file to run ("-" reads standard input; a file named like a subcommand:
    /// ./NAME). With -l, a GLOB of kernel function names
    #[arg(value_name = "SCRIPT", conflicts_with = "program")]
    pub script: Option<PathBuf>,

    /// Run this program, given inline
    #[arg(short = 'e', long = "program", value_name = "PROGRAM", value_parser = non_empty)]
    pub program: Option<String>,

    /// List the traceable kernel functions matching the GLOB argument (* and ?; all when
    /// absent), one a line; for one exact name, or with -v, their signatures
    #[arg(short = 'l', long = "list", conflicts_with_all = ["program", "emit"])]
    pub list: bool,

    /// Print the generated C, or write the BPF object; loads nothing, needs no root.
    /// (ast and ir show the earlier stages: the parsed script, the checked program)
    #[arg(long, value_enum, value_name = "c|obj")]
    pub emit: Option<Emit>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// What a run takes besides the program: shared by the command line and the REPL.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Trace only this process (a TGID, 1 .. 4294967295)
    #[arg(short, long, value_name = "TGID", value_parser = parse_pid, conflicts_with = "cmd",
        allow_hyphen_values = true)]
    pub pid: Option<u32>,

    /// Start CMD, trace only it, and stop when it exits
    #[arg(short, long, value_name = "CMD", value_parser = non_empty)]
    pub cmd: Option<String>,

    /// Stop after DUR (30, 30s, 500ms, 2m; more than 0, at most 24h)
    #[arg(short, long, value_name = "DUR", value_parser = parse_run_duration)]
    pub duration: Option<Duration>,

    /// Every DUR, print each aggregation's last interval (after a line with the time)
    #[arg(short, long, value_name = "DUR", value_parser = parse_run_duration)]
    pub interval: Option<Duration>,

    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Write events (or with --emit, the C or object) to FILE instead of standard output
    #[arg(short, long, value_name = "FILE", value_parser = non_empty_path)]
    pub output: Option<PathBuf>,

    /// How to attach: fsession (Linux 7.0+), fentry (fentry + fexit), fsession-multi (7.2+:
    /// one program for all the functions of a session), or auto (the best the kernel has)
    #[arg(long, value_enum, default_value_t = ModeArg::Auto)]
    pub mode: ModeArg,

    /// Show libbpf's diagnostics (and the verifier's log on failure); with -l, signatures
    #[arg(short, long)]
    pub verbose: bool,

    /// Read kernel types from this BTF file instead of /sys/kernel/btf/vmlinux
    #[arg(long, value_name = "FILE", value_parser = non_empty_path)]
    pub btf: Option<PathBuf>,

    /// The clang to compile with (default: $FSLAT_CLANG, else clang on PATH)
    #[arg(long, value_name = "PATH", value_parser = non_empty_path)]
    pub clang: Option<PathBuf>,

    /// Ring buffer size in bytes (a power of two, 4096 .. 1073741824; 256k default);
    /// suffixes k and m are accepted
    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size)]
    pub buffer_size: Option<u32>,

    /// Compile without the object cache
    #[arg(long)]
    pub no_cache: bool,

    /// Serve the run's counters and aggregations to Prometheus at http://ADDR:PORT/metrics
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    pub listen: Option<std::net::SocketAddr>,

    /// Push the same metrics with OTLP over HTTP (protobuf) to URL every -i DUR (10 s
    /// without -i) and at the end (http://HOST:PORT[/PATH]; no path means /v1/metrics)
    #[arg(long, value_name = "URL", value_parser = parse_otlp)]
    pub otlp: Option<Box<crate::metrics::OtlpTarget>>,

    /// Refuse a session whose names and globs match more than N functions
    #[arg(long, value_name = "N", default_value_t = crate::check::DEFAULT_MAX_FUNCTIONS,
          value_parser = parse_max_functions)]
    pub max_functions: usize,
}

fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    if s.is_empty() {
        return Err("the value is empty".into());
    }
    s.parse().map_err(|_| {
        format!("`{s}` is not ADDR:PORT (an IP address and a port: 127.0.0.1:9435, [::1]:9435, 0.0.0.0:9435)")
    })
}

fn parse_otlp(s: &str) -> Result<Box<crate::metrics::OtlpTarget>, String> {
    crate::metrics::OtlpTarget::parse(s).map(Box::new)
}

fn parse_max_functions(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ if s.is_empty() => Err("the value is empty".into()),
        _ => Err(format!("`{s}` is not a number of functions (1 or more)")),
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Write sessions interactively, see their C, run them (the default on a terminal)
    Repl(RunArgs),
    /// Check whether this machine can run fslat, and say what to do where it cannot
    Doctor,
    /// Print a shell completion script (bash, zsh or fish)
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Print the manual page (roff)
    Man,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Emit {
    C,
    Obj,
    Ast,
    Ir,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ModeArg {
    Auto,
    Fsession,
    Fentry,
    /// fsession, with one multi-attach program per several-function session (Linux 7.2)
    FsessionMulti,
}

fn non_empty(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("the value is empty".into())
    } else {
        Ok(s.to_string())
    }
}

fn non_empty_path(s: &str) -> Result<PathBuf, String> {
    non_empty(s).map(PathBuf::from)
}

fn parse_pid(s: &str) -> Result<u32, String> {
    if s.is_empty() {
        return Err("the value is empty".into());
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{s}` is not a process id (digits only)"));
    }
    match s.parse::<u64>() {
        Ok(n) if (1..=u64::from(u32::MAX)).contains(&n) => Ok(n as u32),
        _ => Err(format!("`{s}` is out of range: a TGID is 1 .. 4294967295")),
    }
}

/// `30` (seconds), `30s`, `500ms`, `250us`, `2m`, `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Err("the value is empty".into());
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(format!("`{s}` does not start with a number"));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}`: the number is too large"))?;
    let ns_per: u64 = match unit {
        "" | "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" => 1_000,
        "ns" => 1,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => {
            return Err(format!(
                "`{s}`: unknown unit `{unit}` (use ns, us, ms, s, m or h)"
            ));
        }
    };
    n.checked_mul(ns_per)
        .map(Duration::from_nanos)
        .ok_or_else(|| format!("`{s}` is too long"))
}

pub fn parse_run_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err("the duration must be more than 0".into());
    }
    if d > Duration::from_secs(24 * 3600) {
        return Err(format!("`{s}` is more than 24h"));
    }
    Ok(d)
}

fn parse_ring_size(s: &str) -> Result<u32, String> {
    if s.is_empty() {
        return Err("the value is empty".into());
    }
    let (num, scale) = match s.as_bytes()[s.len() - 1] {
        b'k' | b'K' => (&s[..s.len() - 1], 1024u64),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .ok()
        .filter(|_| num.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("`{s}` is not a size in bytes"))?;
    let bytes = n.saturating_mul(scale);
    if !(4096..=1 << 30).contains(&bytes) || !bytes.is_power_of_two() {
        return Err(format!(
            "`{s}` must be a power of two from 4096 (4k) to 1073741824 (1024m)"
        ));
    }
    Ok(bytes as u32)
}

/// Why fslat stopped without doing its job; rendered once by `main`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
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
        "--emit obj writes a binary object: give -o FILE (or redirect standard output away from the terminal)"
    )]
    ObjectToTerminal,
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
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
    #[error("--otlp: cannot start the push thread: {0}")]
    Otlp(std::io::Error),
    #[error("{0} of the entries read from standard input failed (see above)")]
    ReplFailures(usize),
}

impl From<BuildError> for CliError {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Interrupted => CliError::Interrupted,
            e => CliError::Build(e),
        }
    }
}

/// Runs fslat with the process's arguments; returns the exit status.
pub fn main() -> i32 {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let result = match &args.command {
        Some(Command::Doctor) => return crate::doctor::main(),
        Some(Command::Completions { shell }) => completions(*shell),
        Some(Command::Man) => man_page(),
        Some(Command::Repl(run)) => crate::repl::run(run),
        None if args.list => list(args.script.as_deref(), &args.run),
        None if args.script.is_none()
            && args.program.is_none()
            && args.emit.is_none()
            && std::io::stdin().is_terminal() =>
        {
            crate::repl::run(&args.run)
        }
        None => run(&args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            report(&e);
            exit_status(&e)
        }
    }
}

/// 130 for an interrupted start-up and 141 for a reader that went away (what a shell
/// reports for a program ended by SIGINT or SIGPIPE); 1 for every other failure.
fn exit_status(e: &CliError) -> i32 {
    match e {
        CliError::Interrupted => 130,
        e if broken_pipe(e) => 141,
        _ => 1,
    }
}

/// Whether `e` is only that standard output's reader closed it (`fslat -l | head`).
fn broken_pipe(e: &CliError) -> bool {
    let io = match e {
        CliError::Write { source, .. } => source,
        CliError::List(ListError::Write(source)) => source,
        CliError::Runtime(RuntimeError::Output(source)) => source,
        _ => return false,
    };
    io.kind() == std::io::ErrorKind::BrokenPipe
}

/// Prints an error the one way fslat prints errors.
pub fn report(e: &CliError) {
    match e {
        CliError::Interrupted => {}
        e if broken_pipe(e) => {}
        CliError::Script(text) => eprint!("{text}"),
        e => eprintln!("fslat: error: {e}"),
    }
}

pub fn color_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn completions(shell: Shell) -> Result<(), CliError> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Args::command(), "fslat", &mut out);
    write_output(None, &out)
}

fn man_page() -> Result<(), CliError> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Args::command())
        .render(&mut out)
        .map_err(|source| CliError::Write {
            path: "standard output".into(),
            source,
        })?;
    write_output(None, &out)
}

fn list(glob: Option<&std::path::Path>, opts: &RunArgs) -> Result<(), CliError> {
    let glob = glob.map(|g| g.to_string_lossy());
    let kernel = load_kernel_types(opts.btf.as_ref())?;
    let traceable = Traceable::new(&kernel);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    crate::listing::list(&kernel, &traceable, glob.as_deref(), opts.verbose, &mut out)?;
    Ok(())
}

/// Scripts are small: the bound keeps `fslat /dev/zero` from filling memory.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// Opens a file for reading like `File::open`, except that a signal ends the wait:
/// opening a FIFO blocks until a writer comes, and std retries an interrupted open.
fn open_interruptible(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    loop {
        // A signal that came before the open began would not interrupt it (a second
        // one does).
        if signals::stop_requested() {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        // SAFETY: a valid NUL-terminated path; the descriptor is owned by the File.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd >= 0 {
            return Ok(unsafe { std::fs::File::from_raw_fd(fd) });
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted || signals::stop_requested() {
            return Err(e);
        }
    }
}

/// Reads a whole script of at most MAX_SCRIPT_BYTES of UTF-8 text.
fn read_script(r: impl Read, name: &str) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    let read_error = |source| CliError::ReadScript {
        path: name.to_string(),
        source,
    };
    let mut r = r.take(MAX_SCRIPT_BYTES + 1);
    let mut chunk = [0u8; 8192];
    loop {
        // A FIFO or a terminal can block: Ctrl-C interrupts the read (no SA_RESTART).
        match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => interrupted()?,
            Err(e) => return Err(read_error(e)),
        }
    }
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(CliError::ScriptTooLarge {
            path: name.to_string(),
            limit: MAX_SCRIPT_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not UTF-8 text",
        ))
    })
}

/// The script's text and the name diagnostics call it by.
fn script_source(args: &Args) -> Result<(String, String), CliError> {
    if let Some(p) = &args.program {
        return Ok(("<-e>".into(), p.clone()));
    }
    match &args.script {
        Some(path) if path.as_os_str() == "-" => {
            let text = read_script(std::io::stdin().lock(), "<stdin>")?;
            Ok(("<stdin>".into(), text))
        }
        Some(path) => {
            let file = open_interruptible(path).map_err(|source| {
                if signals::stop_requested() {
                    return CliError::Interrupted;
                }
                let name = path.to_string_lossy();
                match Args::command().find_subcommand(name.as_ref()) {
                    Some(_) if source.kind() == std::io::ErrorKind::NotFound => {
                        CliError::MisplacedSubcommand(name.into_owned())
                    }
                    _ => CliError::ReadScript {
                        path: path.display().to_string(),
                        source,
                    },
                }
            })?;
            let name = path.display().to_string();
            let text = read_script(file, &name)?;
            Ok((name, text))
        }
        None => Err(CliError::NoProgram),
    }
}

pub fn load_kernel_types(btf: Option<&PathBuf>) -> Result<Btf, CliError> {
    match btf {
        Some(p) => Btf::from_file(p).map_err(CliError::BtfFile),
        None => Btf::vmlinux().map_err(CliError::Btf),
    }
}

pub fn resolve_mode(arg: ModeArg, kernel: &dyn KernelTypes) -> Result<Mode, CliError> {
    match arg {
        ModeArg::Fsession if !kernel.has_fsession() => Err(CliError::NoFsession),
        ModeArg::Fsession => Ok(Mode::Fsession),
        ModeArg::Fentry => Ok(Mode::Fentry),
        ModeArg::FsessionMulti if !kernel.has_fsession_multi() => Err(CliError::NoFsessionMulti),
        ModeArg::FsessionMulti => Ok(Mode::FsessionMulti),
        ModeArg::Auto if kernel.has_fsession_multi() => Ok(Mode::FsessionMulti),
        ModeArg::Auto if kernel.has_fsession() => Ok(Mode::Fsession),
        ModeArg::Auto => Ok(Mode::Fentry),
    }
}

/// Script text → checked program and C, with diagnostics rendered against `name`.
pub fn compile_script(
    name: &str,
    text: &str,
    kernel: &dyn KernelTypes,
    mode: Mode,
    opts: crate::check::Options,
) -> Result<(Program, String), CliError> {
    let (program, c) =
        crate::compile_with(text, kernel, mode, opts).map_err(script_error(name, text))?;
    Ok((program, c))
}

/// With -v: the functions a session's globs matched but that cannot be traced.
fn report_skipped(program: &Program) {
    for s in &program.sessions {
        for (func, why) in &s.skipped {
            eprintln!("fslat: {}: skipping `{func}`: {why}", s.label);
        }
    }
}

/// Turns a stage's diagnostics into the error that prints them, rendered against `name`.
fn script_error<'a>(name: &'a str, text: &'a str) -> impl Fn(Vec<Diagnostic>) -> CliError + 'a {
    move |diags| CliError::Script(render(&Source { name, text }, &diags, color_stderr()))
}

/// The BPF compiler the options ask for; Ctrl-C or SIGTERM stops it.
pub fn compiler(opts: &RunArgs) -> Result<Compiler, CliError> {
    let clang = find_clang(opts.clang.as_deref())?;
    Ok(Compiler::new(clang, !opts.no_cache)?.cancel_when(signals::stop_requested))
}

/// Ctrl-C or SIGTERM before tracing began ends fslat at once, with status 130.
fn interrupted() -> Result<(), CliError> {
    if signals::stop_requested() {
        Err(CliError::Interrupted)
    } else {
        Ok(())
    }
}

fn run(args: &Args) -> Result<(), CliError> {
    signals::install();
    let (name, text) = script_source(args)?;
    interrupted()?;
    // A script run before on this kernel by this fslat starts from its cached checked
    // program and object: no BTF to parse, nothing to check or compile.
    let warm = (args.emit.is_none() && !args.run.no_cache)
        .then(|| warm_start(&text, &args.run))
        .flatten();
    if let Some((cache, key)) = &warm
        && let Some((mode, program, object)) = warm_lookup(cache, key)
    {
        return run_object(&program, &object, mode, &args.run);
    }
    // The parse needs no kernel.
    if args.emit == Some(Emit::Ast) {
        let ast = crate::syntax::parse(&text).map_err(script_error(&name, &text))?;
        // Pretty-printing grows with the square of the nesting: a deep tree (a generated
        // filter of thousands of terms) is printed on one line instead.
        let flat = format!("{ast:?}\n");
        let text = if flat.len() < 100_000 {
            format!("{ast:#?}\n")
        } else {
            flat
        };
        return write_output(args.run.output.as_ref(), text.as_bytes());
    }
    let kernel = load_kernel_types(args.run.btf.as_ref())?;
    let mode = resolve_mode(args.run.mode, &kernel)?;
    let opts = crate::check::Options {
        max_functions: args.run.max_functions,
        traceable: None,
    };
    let (program, c) = compile_script(&name, &text, &kernel, mode, opts)?;
    if args.run.verbose {
        report_skipped(&program);
    }
    interrupted()?;

    match args.emit {
        Some(Emit::Ir) => {
            let ir = serde_json::to_string_pretty(&program).unwrap_or_default();
            write_output(args.run.output.as_ref(), format!("{ir}\n").as_bytes())
        }
        Some(Emit::C) => write_output(args.run.output.as_ref(), c.as_bytes()),
        Some(Emit::Ast) => Ok(()), // written above, before the kernel's types were read
        Some(Emit::Obj) => {
            let object = compiler(&args.run)?.compile(&c)?;
            if args.run.output.is_none() && std::io::stdout().is_terminal() {
                return Err(CliError::ObjectToTerminal);
            }
            write_output(args.run.output.as_ref(), &object)
        }
        None => {
            let compiler = compiler(&args.run)?;
            let object = compiler.compile(&c)?;
            if let Some((cache, key)) = &warm {
                warm_store(cache, key, mode, &program, &object);
            }
            run_object(&program, &object, mode, &args.run)
        }
    }
}

/// The warm-start cache and this run's key in it: the script, the options that shape the
/// program, this fslat binary and this kernel (release, build, BTF size).
fn warm_start(text: &str, opts: &RunArgs) -> Option<(crate::build::cache::Cache, String)> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt;
    let cache = crate::build::cache::Cache::open()?;
    let exe = std::fs::metadata("/proc/self/exe").ok()?;
    let btf_path = opts
        .btf
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::btf::VMLINUX_PATH));
    let btf = std::fs::metadata(&btf_path).ok()?;
    // SAFETY: uname fills the struct it is given.
    let uts = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        (libc::uname(&mut u) == 0).then_some(u)?
    };
    let field = |f: &[libc::c_char]| {
        f.iter()
            .map(|&c| c as u8)
            .take_while(|&c| c != 0)
            .collect::<Vec<u8>>()
    };
    let mut h = Sha256::new();
    for part in [
        env!("CARGO_PKG_VERSION").as_bytes(),
        format!("{} {}.{}", exe.size(), exe.mtime(), exe.mtime_nsec()).as_bytes(),
        format!("{:?}", opts.mode).as_bytes(),
        // The function limit decides whether a script checks at all.
        format!("{}", opts.max_functions).as_bytes(),
        btf_path.as_os_str().as_encoded_bytes(),
        format!("{} {}", btf.size(), btf.mtime()).as_bytes(),
        &field(&uts.release),
        &field(&uts.version),
        text.as_bytes(),
    ] {
        h.update(part);
        h.update([0]);
    }
    let key = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Some((cache, key))
}

fn warm_lookup(cache: &crate::build::cache::Cache, key: &str) -> Option<(Mode, Program, Vec<u8>)> {
    #[derive(serde::Deserialize)]
    struct Entry {
        mode: Mode,
        program: Program,
    }
    let entry: Entry = serde_json::from_slice(&cache.get(&format!("{key}.run.json"))?).ok()?;
    let object = cache.get(&format!("{key}.run.o"))?;
    Some((entry.mode, entry.program, object))
}

fn warm_store(
    cache: &crate::build::cache::Cache,
    key: &str,
    mode: Mode,
    program: &Program,
    object: &[u8],
) {
    let entry = serde_json::json!({ "mode": mode, "program": program });
    // The object first: an entry is only found once its JSON exists.
    cache.put(&format!("{key}.run.o"), object);
    cache.put(&format!("{key}.run.json"), entry.to_string().as_bytes());
}

/// Builds the BPF object for `program` (its C is `c`), loads it, and streams its events
/// until `opts.duration`, a signal, or the end of `opts.cmd`; then the summary. The one
/// way both the command line and the REPL run a program.
pub fn compile_and_run(
    program: &Program,
    c: &str,
    mode: Mode,
    compiler: &Compiler,
    opts: &RunArgs,
) -> Result<(), CliError> {
    let object = compiler.compile(c)?;
    run_object(program, &object, mode, opts)
}

/// How often `--otlp` pushes without `-i` (with it, once every interval).
const OTLP_INTERVAL: Duration = Duration::from_secs(10);

/// Loads `object` (built from `program`) and runs it; see `compile_and_run`.
pub fn run_object(
    program: &Program,
    object: &[u8],
    mode: Mode,
    opts: &RunArgs,
) -> Result<(), CliError> {
    interrupted()?;

    // Exporters are up before anything is loaded: a port in use ends the run here.
    let board = (opts.listen.is_some() || opts.otlp.is_some()).then(crate::metrics::Board::new);
    let _server = match (opts.listen, &board) {
        (Some(addr), Some(board)) => Some(
            crate::metrics::Server::start(addr, std::sync::Arc::clone(board))
                .map_err(|source| CliError::Listen { addr, source })?,
        ),
        _ => None,
    };
    let pusher = match (&opts.otlp, &board) {
        (Some(target), Some(board)) => Some(
            crate::metrics::Pusher::start(
                (**target).clone(),
                opts.interval.unwrap_or(OTLP_INTERVAL),
                std::sync::Arc::clone(board),
            )
            .map_err(CliError::Otlp)?,
        ),
        _ => None,
    };

    // The command exists (and has a pid to filter on) before load; it runs once attached.
    let child = match &opts.cmd {
        Some(cmd) => Some(HeldChild::spawn(cmd).map_err(|source| CliError::Command {
            cmd: cmd.clone(),
            source,
        })?),
        None => None,
    };
    let settings = Settings {
        mode,
        target_tgid: child.as_ref().map_or(opts.pid.unwrap_or(0), HeldChild::pid),
        duration: opts.duration,
        interval: opts.interval,
        ring_size: opts.buffer_size.unwrap_or(DEFAULT_RING_SIZE),
        verbose: opts.verbose,
        metrics: board,
    };
    let sink: Box<dyn Write> = match &opts.output {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|source| CliError::Write {
            path: p.display().to_string(),
            source,
        })?),
        None => Box::new(std::io::stdout().lock()),
    };
    let sink = std::io::BufWriter::with_capacity(1 << 16, sink);
    let mut writer: Box<dyn Writer> = match opts.format {
        Format::Text => Box::new(TextWriter::new(sink)),
        Format::Json => Box::new(JsonWriter::new(sink)),
    };
    let child = std::cell::RefCell::new(child);
    let labels: Vec<&str> = program.sessions.iter().map(|s| s.label.as_str()).collect();
    let mut attached = || {
        eprintln!(
            "Tracing {} session{} ({}, {}). Ctrl-C to end.",
            labels.len(),
            if labels.len() == 1 { "" } else { "s" },
            labels.join(", "),
            mode.of_program(program)
        );
        if let Some(c) = child.borrow_mut().as_mut()
            && let Err(e) = c.release()
        {
            eprintln!("fslat: error: the command could not start: {e}");
        }
    };
    let outcome = runtime::run(
        program,
        object,
        &settings,
        writer.as_mut(),
        &mut attached,
        &mut || {
            !signals::stop_requested()
                && child
                    .borrow_mut()
                    .as_mut()
                    .is_none_or(|c| c.exited().is_none())
        },
    );
    // The last push carries the final figures, published as the run ended.
    if let Some(p) = pusher {
        p.finish();
    }
    let outcome = outcome?;
    if outcome.bad_records > 0 {
        eprintln!(
            "fslat: warning: {} record(s) did not match their event layout and were not printed (a bug in fslat; please report it)",
            outcome.bad_records
        );
    }
    Ok(())
}

fn write_output(path: Option<&PathBuf>, bytes: &[u8]) -> Result<(), CliError> {
    let result = match path {
        Some(p) => std::fs::write(p, bytes),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
    };
    result.map_err(|source| CliError::Write {
        path: path.map_or("standard output".into(), |p| p.display().to_string()),
        source,
    })
}
