//! The command line: its options, their values, and dispatch to the REPL, `doctor`, or
//! the driver, which runs the pipeline; every failure ends as one message and a non-zero
//! exit status.

use crate::driver::{
    self, Emit, Error, Format, ModeChoice, Options, exit_status, open_interruptible, read_script,
    report, signals,
};
use clap::{CommandFactory, Parser, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

/// `--help`'s summary of the language, so the binary alone is enough to write a script;
/// the builtins' lines come from `check::builtins::BUILTINS`, the aggregations' from
/// `aggregate::ALL`.
fn language_summary() -> String {
    format!(
        "{LANGUAGE_BEFORE_BUILTINS}{}{LANGUAGE_AFTER_BUILTINS}{}{LANGUAGE_AFTER_AGGREGATIONS}",
        driver::builtin_help(),
        driver::aggregation_help()
    )
}

const LANGUAGE_BEFORE_BUILTINS: &str = "\
The language: a script is one or more sessions, each
  session FUNC[, FUNC, GLOB*] [where CONDITION] [{ ACTION; ACTION ... }]
FUNC is a kernel function with BTF (`fslat -l 'vfs_*'` lists them). No block means
{ emit }. Comments start with # or //. Files end in .fsl.

Names:
";

const LANGUAGE_AFTER_BUILTINS: &str = "  ret             the return value (return phase)
  count, file...  the function's parameters by name; arg0 .. argN by position
  file->f_path.dentry->d_name.name   struct fields, through pointers
  cgroup == \"/system.slice/a.service\", under(\"/kubepods.slice\")   choose cgroups
Values: 42 0x2a 1_000  500ns 250us 10ms 2s  \"text\"  true false
Operators: == != < <= > >=  and or not (&& || !)  + - * / %  & | ^ ~ << >>

Actions, each with an example:
  emit                       one event per matching call, with the default fields
      session vfs_read where latency > 10ms { emit }
  emit EXPR [as NAME], ...   one event with exactly these fields
      session vfs_read where tgid == 1234 { emit comm, count as asked, ret, latency }
";

const LANGUAGE_AFTER_AGGREGATIONS: &str =
    "  ... as NAME                names an aggregation's output and exported metric
      session vfs_read { hist(latency) as read_latency }

Every session prints a summary at the end (calls, matched, errors, dropped, events),
then its aggregations.";

#[derive(Parser, Debug)]
#[command(
    name = "fslat",
    version,
    about = "Trace kernel function latency with a small language (fsession on Linux 7.0+, fentry/fexit before)",
    after_help = "Examples:\n  fslat -e 'session vfs_read where latency > 10ms { emit }'\n  fslat -p 1234 slow_reads.fsl\n  fslat --emit c -e 'session vfs_write'\n  fslat -l 'vfs_*'\n  fslat doctor\n\nWith no program on a terminal, fslat starts its REPL.\n`fslat --help` also summarises the language.",
    after_long_help = language_summary(),
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Script file to run ("-" reads standard input; a file named like a subcommand:
    /// ./NAME). With -l, a GLOB of kernel function names
    #[arg(value_name = "SCRIPT")]
    pub script: Option<PathBuf>,

    /// The script's arguments: `$1`, `$2`, ... in it (`fslat slow.fsl 1234 10ms`, `fslat
    /// -e PROGRAM 1234`); one that starts with `-` goes after `--`
    #[arg(value_name = "ARG", requires = "script")]
    pub script_args: Vec<String>,

    /// Run this program, given inline
    #[arg(short = 'e', long = "program", value_name = "PROGRAM", value_parser = non_empty)]
    pub program: Option<String>,

    /// List the traceable kernel functions matching the GLOB argument (* and ?; all when
    /// absent), one a line; for one exact name, or with -v, their signatures
    #[arg(short = 'l', long = "list", conflicts_with_all = ["program", "emit"])]
    pub list: bool,

    /// List the cgroups whose path names a systemd unit, a container or a Kubernetes pod:
    /// path, unit, container, pod (what `cgroup ==`, `under()` and --cgroup take)
    #[arg(long = "cgroups", conflicts_with_all = ["program", "emit", "list", "script"])]
    pub cgroups: bool,

    /// Print the generated C, or write the BPF object; loads nothing, needs no root.
    /// (ast and ir show the earlier stages: the parsed script, the checked program)
    #[arg(long, value_enum, value_name = "c|obj")]
    pub emit: Option<Emit>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// What a run takes besides the program; `options` hands it to the driver.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Trace only this process (a TGID, 1 .. 4294967295); its exit ends the run
    #[arg(short, long, value_name = "TGID", value_parser = parse_pid, conflicts_with = "cmd",
        allow_hyphen_values = true)]
    pub pid: Option<u32>,

    /// Start CMD, trace it and everything it starts (its own cgroup), and stop when it
    /// exits; fslat then exits with its status
    #[arg(short, long, value_name = "CMD", value_parser = non_empty)]
    pub cmd: Option<String>,

    /// Trace only tasks in this cgroup v2 or below it (/system.slice/nginx.service), checked
    /// in the kernel before anything else
    #[arg(long = "cgroup", value_name = "PATH", value_parser = parse_cgroup)]
    pub cgroup: Option<Box<driver::Cgroup>>,

    /// Stop after DUR (30, 30s, 1.5s, 500ms, 2m; more than 0, at most 24h)
    #[arg(short, long, value_name = "DUR", value_parser = driver::parse_run_duration)]
    pub duration: Option<Duration>,

    /// Every DUR, print each aggregation's last interval (after a line with the time)
    #[arg(short, long, value_name = "DUR", value_parser = driver::parse_run_duration)]
    pub interval: Option<Duration>,

    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Write events (or with --emit, the C or object) to FILE instead of standard output
    #[arg(short, long, value_name = "FILE", value_parser = non_empty_path)]
    pub output: Option<PathBuf>,

    /// At the end of the run, draw each `count() by kstack` / `by ustack` as an interactive
    /// flame graph in FILE (several: FILE.NAME.svg, by aggregation name)
    #[arg(long, value_name = "FILE.svg", value_parser = non_empty_path)]
    pub flamegraph: Option<PathBuf>,

    /// How to attach: fsession (Linux 7.0+), fentry (fentry + fexit), fsession-multi (7.2+:
    /// one program for all the functions of a session), or auto (the best the kernel has)
    #[arg(long, value_enum, default_value_t = ModeChoice::Auto)]
    pub mode: ModeChoice,

    /// Show libbpf's diagnostics (and the verifier's log on failure), and count errors in
    /// every session (a session that reads nothing at return keeps its return); with -l,
    /// signatures
    #[arg(short, long)]
    pub verbose: bool,

    /// Read kernel types from this BTF file instead of /sys/kernel/btf/vmlinux
    #[arg(long, value_name = "FILE", value_parser = non_empty_path)]
    pub btf: Option<PathBuf>,

    /// The clang to compile with (default: $FSLAT_CLANG, else clang on PATH)
    #[arg(long, value_name = "PATH", value_parser = non_empty_path)]
    pub clang: Option<PathBuf>,

    #[arg(long, value_name = "BYTES", value_parser = parse_ring_size, help = format!(
        "Ring buffer size in bytes (a power of two, 4096 .. 1073741824; {}k default); \
         suffixes k and m are accepted",
        driver::DEFAULT_RING_SIZE / 1024
    ))]
    pub buffer_size: Option<u32>,

    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16_777_216),
          help = format!(
        "Distinct keys each aggregation may hold ({} default, {} for percentiles); \
         a key past it is counted as agg_lost. Maps take kernel memory as keys arrive",
        driver::AGG_ENTRIES, driver::PCT_ENTRIES
    ))]
    pub max_keys: Option<u32>,

    /// Compile without the object cache
    #[arg(long)]
    pub no_cache: bool,

    /// Serve the run's counters and aggregations to Prometheus at http://ADDR:PORT/metrics
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    pub listen: Option<std::net::SocketAddr>,

    /// TLS, client certificates and basic authentication for --listen, from a file in
    /// Prometheus exporter-toolkit's web-config.yml format
    #[arg(long, value_name = "FILE", requires = "listen", value_parser = parse_web_config)]
    pub web_config: Option<std::sync::Arc<driver::WebConfig>>,

    /// Push the same metrics with OTLP over HTTP (protobuf) to URL every -i DUR (10 s
    /// without -i) and at the end (http[s]://HOST:PORT[/PATH]; no path means /v1/metrics;
    /// without --otlp, OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)
    #[arg(long, value_name = "URL", value_parser = parse_otlp)]
    pub otlp: Option<Box<driver::OtlpTarget>>,

    /// A header on every OTLP push (repeatable), e.g. an API key
    #[arg(long = "otlp-header", value_name = "NAME=VALUE", value_parser = driver::parse_header)]
    pub otlp_headers: Vec<(String, String)>,

    /// Verify an https OTLP receiver against the CA certificates in FILE (PEM) instead of
    /// the system's
    #[arg(long, value_name = "FILE", value_parser = non_empty_path)]
    pub otlp_ca: Option<PathBuf>,

    /// Refuse a session whose names and globs match more than N functions
    #[arg(long, value_name = "N", default_value_t = driver::DEFAULT_MAX_FUNCTIONS,
          value_parser = parse_max_functions)]
    pub max_functions: usize,

    #[arg(long, value_name = "N", value_parser = parse_max_in_flight, help = format!(
        "How many spans each `span` keeps in flight (default {}); a START beyond that is \
         counted as evicted",
        driver::INFLIGHT_ENTRIES
    ))]
    pub max_in_flight: Option<u32>,

    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65_536),
          help = format!(
        "Distinct stacks each of kstack's and ustack's stack maps may hold ({} default; \
         BCC's --stack-storage-size); a stack past it is counted as stack_lost",
        driver::STACK_ENTRIES
    ))]
    pub max_stacks: Option<u32>,

    #[arg(long, value_name = "N", value_parser = parse_ustack_bytes, help = format!(
        "How many bytes of each user stack `ustack` copies at capture, to unwind with the \
         files' call-frame information (.eh_frame, .debug_frame): whole stacks of programs \
         built without frame pointers (8 .. {}, a multiple of 8; default {}, perf's). 0: \
         the kernel's frame-pointer walk instead",
        driver::UCOPY_MAX,
        driver::UCOPY_DEFAULT
    ))]
    pub ustack_bytes: Option<u32>,

    /// Unwind user stacks from their copies alone (--ustack-bytes), in user space; by
    /// default, where the kernel has bpf_loop and bpf_find_vma (5.17), the program walks
    /// them itself from tables fslat derives from the files' call-frame information, and
    /// copies only the stacks of a process it has not prepared yet
    #[arg(long, conflicts_with = "ustack_walk")]
    pub ustack_copy: bool,

    /// The kernel's walk of user stacks: the default since it became cheaper than the
    /// copy (kept so that scripts that ask for it keep working)
    #[arg(long, hide = true)]
    pub ustack_walk: bool,
}

fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    if s.is_empty() {
        return Err("the value is empty".into());
    }
    s.parse().map_err(|_| {
        format!("`{s}` is not ADDR:PORT (an IP address and a port: 127.0.0.1:9435, [::1]:9435, 0.0.0.0:9435)")
    })
}

fn parse_web_config(s: &str) -> Result<std::sync::Arc<driver::WebConfig>, String> {
    if s.is_empty() {
        return Err("the value is empty".into());
    }
    driver::WebConfig::load(std::path::Path::new(s)).map(std::sync::Arc::new)
}

fn parse_otlp(s: &str) -> Result<Box<driver::OtlpTarget>, String> {
    driver::OtlpTarget::parse(s).map(Box::new)
}

fn parse_max_in_flight(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if (1..=1 << 24).contains(&n) => Ok(n),
        _ if s.is_empty() => Err("the value is empty".into()),
        _ => Err(format!(
            "`{s}` is not a number of spans in flight (1 .. 16777216)"
        )),
    }
}

fn parse_ustack_bytes(s: &str) -> Result<u32, String> {
    let (max, default) = (crate::driver::UCOPY_MAX, crate::driver::UCOPY_DEFAULT);
    match s.parse::<u32>() {
        Ok(n) if n <= max && n % 8 == 0 => Ok(n),
        _ if s.is_empty() => Err("the value is empty".into()),
        _ => Err(format!(
            "`{s}` is not a number of stack bytes to copy (0, or a multiple of 8 up to {max}; the default is {default})"
        )),
    }
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
    Repl(Box<RunArgs>),
    /// Check whether this machine can run fslat, and say what to do where it cannot
    Doctor,
    /// Print a shell completion script (bash, zsh or fish)
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Print the manual page (roff)
    Man,
    /// Compile a script once into a bundle that runs with no clang, on any kernel from
    /// 5.10 with BTF (`fslat FILE` or `fslat run FILE` runs it)
    Build(Box<BuildArgs>),
    /// Run a bundle written by `fslat build` (`fslat FILE` does the same)
    Run(Box<RunBundleArgs>),
}

#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// The script to compile
    #[arg(value_name = "SCRIPT")]
    pub script: PathBuf,

    /// Examples of the script's arguments (`$1`, `$2`, ...): each types the one a run
    /// gives (an integer without one); compiled in only where a value must be (lhist's
    /// bounds, a cgroup path)
    #[arg(value_name = "ARG")]
    pub script_args: Vec<String>,

    /// Write the bundle to FILE
    #[arg(short, long, value_name = "FILE", value_parser = non_empty_path)]
    pub output: PathBuf,

    /// Check the script against this BTF file instead of /sys/kernel/btf/vmlinux
    #[arg(long, value_name = "FILE", value_parser = non_empty_path)]
    pub btf: Option<PathBuf>,

    /// The clang to compile with (default: $FSLAT_CLANG, else clang on PATH)
    #[arg(long, value_name = "PATH", value_parser = non_empty_path)]
    pub clang: Option<PathBuf>,

    /// Refuse a session whose names and globs match more than N functions
    #[arg(long, value_name = "N", default_value_t = driver::DEFAULT_MAX_FUNCTIONS,
          value_parser = parse_max_functions)]
    pub max_functions: usize,

    /// Compile without the object cache
    #[arg(long)]
    pub no_cache: bool,

    /// Say which profiles the bundle holds
    #[arg(short, long)]
    pub verbose: bool,
}

#[derive(clap::Args, Debug)]
pub struct RunBundleArgs {
    /// The bundle to run
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// The script's arguments (`$1`, `$2`, ...), of the types the bundle was built with
    #[arg(value_name = "ARG")]
    pub script_args: Vec<String>,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
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

fn parse_cgroup(s: &str) -> Result<Box<driver::Cgroup>, String> {
    driver::lookup_cgroup(s).map(Box::new).map_err(|e| {
        format!("{e} (`fslat --cgroups` lists the cgroups with a unit, container or pod name)")
    })
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

impl RunArgs {
    /// What the driver takes for a run.
    pub fn options(&self) -> Options {
        Options {
            pid: self.pid,
            cmd: self.cmd.clone(),
            cgroup: self.cgroup.as_deref().copied(),
            duration: self.duration,
            interval: self.interval,
            format: self.format,
            output: self.output.clone(),
            flamegraph: self.flamegraph.clone(),
            mode: self.mode,
            verbose: self.verbose,
            btf: self.btf.clone(),
            clang: self.clang.clone(),
            buffer_size: self.buffer_size,
            max_keys: self.max_keys,
            max_in_flight: self.max_in_flight,
            max_stacks: self.max_stacks,
            ustack_bytes: self.ustack_bytes.unwrap_or(driver::UCOPY_DEFAULT),
            ustack_walk: !self.ustack_copy,
            no_cache: self.no_cache,
            listen: self.listen,
            web_config: self.web_config.clone(),
            otlp: Box::new(driver::OtlpOptions {
                url: self.otlp.as_deref().cloned(),
                headers: self.otlp_headers.clone(),
                ca: self.otlp_ca.clone(),
            }),
            max_functions: self.max_functions,
            script_args: Vec::new(),
            one_run: false,
        }
    }
}

/// Runs fslat with the process's arguments; returns the exit status.
pub fn main() -> i32 {
    let mut args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            match usage_in_words(&e) {
                Some(words) => crate::stderr_line!("fslat: error: {words}"),
                // clap's own errors, with fslat's prefix as every other error has.
                None if e.use_stderr() => {
                    let text = e.render().to_string();
                    crate::stderr_text!("fslat: {text}");
                }
                None => {
                    let _ = e.print();
                }
            }
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    // `fslat -e PROGRAM 1234`, as bpftrace takes it: the words are the program's `$1`..
    if args.program.is_some()
        && args.command.is_none()
        && let Some(first) = args.script.take()
    {
        let first = first.to_string_lossy().into_owned();
        if first == "-" || is_script_file(&first) {
            crate::stderr_line!(
                "fslat: error: give the program either with -e or as a script file, not both"
            );
            return 2;
        }
        args.script_args.insert(0, first);
    }
    if let Some(words) = extra_words(&args) {
        crate::stderr_line!("fslat: error: {words}");
        return 2;
    }
    let result = match &args.command {
        Some(Command::Doctor) => return crate::doctor::main(),
        Some(Command::Completions { shell }) => completions(*shell),
        Some(Command::Man) => man_page(),
        Some(Command::Build(b)) => build(b),
        Some(Command::Run(r)) => run_bundle(r),
        Some(Command::Repl(run)) => crate::repl::run(&run.options()),
        None if args.list => list(args.script.as_deref(), &args.run),
        None if args.cgroups => driver::list_cgroups(args.run.options().format),
        None if args.script.is_none()
            && args.program.is_none()
            && args.emit.is_none()
            && std::io::stdin().is_terminal() =>
        {
            crate::repl::run(&args.run.options())
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

/// Words after the script (or -l's glob) that are not the script's arguments: a second
/// glob, or a second script file.
fn extra_words(args: &Args) -> Option<String> {
    let first = args.script_args.first()?;
    if args.list {
        return Some(second_glob(first));
    }
    args.script_args
        .iter()
        .find(|a| is_script_file(a))
        .map(|a| second_script(a))
}

fn is_script_file(word: &str) -> bool {
    word.ends_with(".fsl") && std::path::Path::new(word).is_file()
}

fn second_glob(second: &str) -> String {
    format!(
        "-l takes one GLOB, and `{second}` is a second one; quote a glob so the shell does not expand it into file names (`fslat -l 'vfs_*'`)"
    )
}

fn second_script(second: &str) -> String {
    format!(
        "fslat runs one script, and `{second}` is a second script file; put the sessions of both in one file, or run fslat once for each"
    )
}

/// What clap says about a second script, glob or program (`the subcommand 'b.fsl' cannot
/// be used with ...`), said in words; `None` for its other errors, which read well.
fn usage_in_words(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ArgumentConflict {
        return None;
    }
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => Some(v.join(" ")),
        _ => None,
    };
    let prior = text(ContextKind::PriorArg).unwrap_or_default();
    // A second positional argument: clap takes it for a subcommand.
    if let Some(second) = text(ContextKind::InvalidSubcommand) {
        return Some(if prior.contains("--list") {
            second_glob(&second)
        } else if is_script_file(&second) {
            second_script(&second)
        } else {
            format!(
                "fslat takes one script file; `{second}` after it is not an option (see --help)"
            )
        });
    }
    let arg = text(ContextKind::InvalidArg).unwrap_or_default();
    if arg.starts_with("--program") && prior.starts_with("--program") {
        return Some(
            "-e takes one program; put several sessions in it (`-e 'session vfs_read; session vfs_write'`)".into(),
        );
    }
    if arg.starts_with("--list") && prior.starts_with("--list") {
        return Some("give -l once, with one GLOB (`fslat -l 'vfs_*'`)".into());
    }
    None
}

fn completions(shell: Shell) -> Result<(), Error> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Args::command(), "fslat", &mut out);
    driver::write_output(None, &out)
}

fn man_page() -> Result<(), Error> {
    let out = crate::manpage::render(Args::command(), &language_summary()).map_err(|source| {
        Error::Write {
            path: "standard output".into(),
            source,
        }
    })?;
    driver::write_output(None, &out)
}

fn list(glob: Option<&std::path::Path>, opts: &RunArgs) -> Result<(), Error> {
    let glob = glob.map(|g| g.to_string_lossy());
    driver::list(glob.as_deref(), &opts.options())
}

/// Whether two paths name one existing file (through links and `..` alike).
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The script's text and the name diagnostics call it by.
fn script_source(args: &Args) -> Result<(String, String), Error> {
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
                    return Error::Interrupted;
                }
                let name = path.to_string_lossy();
                match Args::command().find_subcommand(name.as_ref()) {
                    Some(_) if source.kind() == std::io::ErrorKind::NotFound => {
                        Error::MisplacedSubcommand(name.into_owned())
                    }
                    _ => Error::ReadScript {
                        path: path.display().to_string(),
                        source,
                    },
                }
            })?;
            let name = path.display().to_string();
            let text = read_script(file, &name)?;
            Ok((name, text))
        }
        None => Err(Error::NoProgram),
    }
}

fn run(args: &Args) -> Result<(), Error> {
    signals::install();
    if let (Some(script), Some(output)) = (&args.script, &args.run.output)
        && same_file(script, output)
    {
        return Err(Error::OutputIsScript(output.display().to_string()));
    }
    if let Some(path) = args.script.as_ref().filter(|p| p.as_os_str() != "-")
        && args.emit.is_none()
    {
        match driver::bundle::open(path) {
            Ok(Some(bundle)) => {
                let opts = driver::Options {
                    script_args: args.script_args.clone(),
                    one_run: true,
                    ..args.run.options()
                };
                return driver::bundle::run(path, &bundle, &opts);
            }
            // Not a bundle, or not readable: said below, as a script's.
            Ok(None) | Err(Error::ReadScript { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let (name, text) = script_source(args)?;
    let opts = driver::Options {
        script_args: args.script_args.clone(),
        one_run: true,
        ..args.run.options()
    };
    driver::run_script(&name, &text, args.emit, &opts)
}

/// `fslat build SCRIPT -o FILE`.
fn build(b: &BuildArgs) -> Result<(), Error> {
    signals::install();
    if same_file(&b.script, &b.output) {
        return Err(Error::OutputIsScript(b.output.display().to_string()));
    }
    let file = open_interruptible(&b.script).map_err(|source| Error::ReadScript {
        path: b.script.display().to_string(),
        source,
    })?;
    let name = b.script.display().to_string();
    let text = read_script(file, &name)?;
    let opts = driver::Options {
        btf: b.btf.clone(),
        clang: b.clang.clone(),
        max_functions: b.max_functions,
        no_cache: b.no_cache,
        verbose: b.verbose,
        script_args: b.script_args.clone(),
        ..Args::parse_from(["fslat"]).run.options()
    };
    driver::bundle::build(&name, &text, &b.output, &opts)
}

/// `fslat run FILE`.
fn run_bundle(r: &RunBundleArgs) -> Result<(), Error> {
    signals::install();
    let opts = driver::Options {
        script_args: r.script_args.clone(),
        one_run: true,
        ..r.run.options()
    };
    match driver::bundle::open(&r.file)? {
        Some(bundle) => driver::bundle::run(&r.file, &bundle, &opts),
        None => Err(Error::Bundle {
            path: r.file.display().to_string(),
            why: driver::BundleError::NotABundle,
        }),
    }
}
