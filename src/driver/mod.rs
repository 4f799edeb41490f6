//! The pipeline driver, between the front ends (`cli`, `repl`) and the stages: script text
//! → checked program → BPF object → running session → writer. The front ends read input
//! and options; everything past that goes through here.

pub mod bundle;
mod error;
mod options;
mod script;
mod session;
mod target;
mod warm;

pub use error::{Error, Note, Warning, color_stderr, exit_status, report};
pub use options::{Emit, Format, ModeChoice, Options, parse_duration, parse_run_duration};
pub use script::{open_interruptible, read_script};
pub use session::{compile_and_run, run_object};

// The front ends (`cli`, `repl`) import nothing but the driver (`src/layers.rs` holds
// them to it): what they name of the layers below is here.
pub use crate::aggregate::{help as aggregation_help, names as aggregation_names};
pub use crate::btf::{Btf, FuncSig, KType, KernelTypes};
pub use crate::build::Compiler;
pub use crate::bundle::BundleError;
pub use crate::cgroups::{Cgroup, lookup as lookup_cgroup};
pub use crate::check::builtins::help as builtin_help;
pub use crate::check::resources::STACK_ENTRIES;
pub use crate::check::resources::{UCOPY_DEFAULT, UCOPY_MAX};
pub use crate::check::{DEFAULT_MAX_FUNCTIONS, builtin_names};
pub use crate::codegen::{AGG_ENTRIES, INFLIGHT_ENTRIES, PCT_ENTRIES};
pub use crate::metrics::{OtlpOptions, OtlpTarget, WebConfig, parse_header};
pub use crate::runtime::{DEFAULT_RING_SIZE, signals};
pub use crate::traceable::Traceable;

use crate::build::find_clang;
use crate::check::program::Program;
use crate::codegen::Mode;
use crate::diag::{Diagnostic, Source, render};
use crate::traceable::Rule;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::rc::Rc;

pub fn load_kernel_types(btf: Option<&PathBuf>) -> Result<Btf, Error> {
    match btf {
        Some(p) => Btf::from_file(p).map_err(Error::BtfFile),
        None => Btf::vmlinux().map_err(Error::Btf),
    }
}

/// How user-space sessions run when `choice` names their mode (`None`: the best the
/// kernel has, decided by the checker).
pub fn resolve_user_mode(
    choice: ModeChoice,
    kernel: &dyn KernelTypes,
) -> Result<Option<Mode>, Error> {
    let f = kernel.features();
    match choice {
        ModeChoice::UprobeSession if !f.uprobe_session => Err(Error::NoUprobeSession),
        ModeChoice::UprobeSession => Ok(Some(Mode::UprobeSession)),
        ModeChoice::Uprobe if f.uprobe_multi => Ok(Some(Mode::UprobeMulti)),
        ModeChoice::Uprobe => Ok(Some(Mode::Uprobe)),
        _ => Ok(None),
    }
}

/// What the checker takes from the options.
fn check_options(
    opts: &Options,
    traceable: Rc<Rule>,
    kernel: &dyn KernelTypes,
) -> Result<crate::check::Options, Error> {
    Ok(crate::check::Options {
        max_functions: opts.max_functions,
        traceable: Some(traceable),
        args: opts.script_args.clone(),
        runtime_args: false,
        lookup: crate::elf::Lookup {
            pid: opts.pid,
            command: opts.cmd.clone(),
        },
        user_mode: resolve_user_mode(opts.mode, kernel)?,
        cgroups: crate::cgroups::lookup,
        ustack_bytes: opts.ustack_bytes,
        ustack_walk: opts.ustack_walk,
        count_errors: opts.verbose,
    })
}

pub fn resolve_mode(choice: ModeChoice, kernel: &dyn KernelTypes) -> Result<Mode, Error> {
    match requested_mode(choice, kernel) {
        Mode::Fsession if !kernel.has_fsession() => Err(Error::NoFsession),
        Mode::FsessionMulti if !kernel.has_fsession_multi() => Err(Error::NoFsessionMulti),
        Mode::KprobeSession if !kernel.features().kprobe_session => Err(Error::NoKprobeSession),
        mode => Ok(mode),
    }
}

/// Whether auto picks kprobe sessions: on a kernel that has them and may preempt a task
/// inside a BPF program, where the trampoline modes skip calls (btf/preemption.rs).
fn prefers_kprobes(kernel: &dyn KernelTypes) -> bool {
    kernel.features().kprobe_session
        && kernel
            .preemption()
            .is_some_and(|p| p.model.preempts_programs())
}

/// The mode `choice` names, or for auto the best the kernel has; it may be one the kernel
/// cannot load.
fn requested_mode(choice: ModeChoice, kernel: &dyn KernelTypes) -> Mode {
    match choice {
        ModeChoice::Fsession => Mode::Fsession,
        ModeChoice::Fentry => Mode::Fentry,
        ModeChoice::FsessionMulti => Mode::FsessionMulti,
        ModeChoice::KprobeSession => Mode::KprobeSession,
        ModeChoice::Auto | ModeChoice::UprobeSession | ModeChoice::Uprobe
            if prefers_kprobes(kernel) =>
        {
            Mode::KprobeSession
        }
        ModeChoice::Auto | ModeChoice::UprobeSession | ModeChoice::Uprobe
            if kernel.has_fsession_multi() =>
        {
            Mode::FsessionMulti
        }
        ModeChoice::Auto | ModeChoice::UprobeSession | ModeChoice::Uprobe
            if kernel.has_fsession() =>
        {
            Mode::Fsession
        }
        ModeChoice::Auto | ModeChoice::UprobeSession | ModeChoice::Uprobe => Mode::Fentry,
    }
}

/// The traceability rule for the kernel types the options name: ftrace's list applies
/// only to the running kernel's own types, not to another kernel's (`--btf FILE`).
pub fn traceability(opts: &Options) -> Rule {
    match opts.btf {
        None => Rule::running_kernel(),
        Some(_) => Rule::btf_only(),
    }
}

/// The mode `--emit` writes in: the one asked for even where this kernel could not load
/// it (writing C or an object loads nothing), with a note that says so.
fn emit_mode(choice: ModeChoice, kernel: &dyn KernelTypes) -> Mode {
    let mode = requested_mode(choice, kernel);
    if resolve_mode(choice, kernel).is_err() {
        crate::stderr_line!("fslat: note: {}", Note::CannotLoadHere(mode));
    }
    mode
}

/// The functions `-l` lists and the REPL completes, by the options' traceability rule.
pub fn traceable(kernel: &dyn KernelTypes, opts: &Options) -> Traceable {
    Traceable::new(kernel, Rc::new(traceability(opts)))
}

/// A script checked and turned into C for one mode.
pub struct Compiled {
    pub program: Program,
    pub c: String,
    pub mode: Mode,
}

/// A REPL entry: script text → checked program and C for the options' mode, with the
/// traceable functions already read (`traceable`).
pub fn compile_entry(
    name: &str,
    text: &str,
    kernel: &dyn KernelTypes,
    traceable: &Traceable,
    opts: &Options,
) -> Result<Compiled, Error> {
    let mode = resolve_mode(opts.mode, kernel)?;
    let check_opts = crate::check::Options {
        args: Vec::new(),
        ..check_options(opts, traceable.rule(), kernel)?
    };
    let (program, c) = compile_script(name, text, kernel, mode, check_opts)?;
    Ok(Compiled { program, c, mode })
}

/// Script text → checked program and C, with diagnostics rendered against `name`.
pub fn compile_script(
    name: &str,
    text: &str,
    kernel: &dyn KernelTypes,
    mode: Mode,
    opts: crate::check::Options,
) -> Result<(Program, String), Error> {
    let (program, c) =
        crate::compile_with(text, kernel, mode, opts).map_err(script_error(name, text))?;
    if mode == Mode::KprobeSession {
        for s in &program.sessions {
            if s.span.is_none()
                && s.on.is_none()
                && s.profile.is_none()
                && !s.offcpu
                && s.user.is_none()
                && mode.of_session(s) == Mode::Fentry
            {
                let note = Note::StackArgument {
                    session: s.label.clone(),
                };
                crate::stderr_line!("fslat: note: {note}");
            }
        }
    }
    Ok((program, c))
}

/// With -v: the functions a session's globs matched but that cannot be traced.
fn report_skipped(program: &Program) {
    for s in &program.sessions {
        for (func, why) in &s.skipped {
            crate::stderr_line!("fslat: {}: skipping `{func}`: {why}", s.label);
        }
    }
}

/// A `pid` compared with the id of a running process that has several threads: `pid`
/// is the thread, so the comparison sees the main thread only (bpftrace's `pid` is the
/// process, and the mistake is easy to make).
fn report_pid_of_threaded_process(program: &Program) {
    use crate::check::{builtins, program::ExprKind};
    for s in &program.sessions {
        let mut pids = std::collections::BTreeSet::new();
        for filter in [&s.entry_filter, &s.return_filter].into_iter().flatten() {
            filter.visit(&mut |e| {
                if let ExprKind::Binary { op, lhs, rhs, .. } = &e.kind
                    && op.is_comparison()
                {
                    for (a, b) in [(lhs, rhs), (rhs, lhs)] {
                        if let (ExprKind::Builtin(builtin), ExprKind::Int(n)) = (&a.kind, &b.kind)
                            && *builtin == builtins::PID
                            && let Ok(pid) = u32::try_from(*n)
                        {
                            pids.insert(pid);
                        }
                    }
                }
            });
        }
        for pid in pids {
            if let Some(threads) = target::threads_of_process(pid).filter(|&t| t > 1) {
                let warning = Warning::PidOfThreadedProcess {
                    session: s.label.clone(),
                    pid,
                    threads,
                };
                crate::stderr_line!("fslat: warning: {warning}");
            }
        }
    }
}

/// Turns a stage's diagnostics into the error that prints them, rendered against `name`.
fn script_error<'a>(name: &'a str, text: &'a str) -> impl Fn(Vec<Diagnostic>) -> Error + 'a {
    move |diags| Error::Script(render(&Source { name, text }, &diags, color_stderr()))
}

/// The BPF compiler the options ask for; Ctrl-C or SIGTERM stops it.
pub fn compiler(opts: &Options) -> Result<Compiler, Error> {
    let clang = find_clang(opts.clang.as_deref())?;
    Ok(Compiler::new(clang, !opts.no_cache)?.cancel_when(signals::stop_requested))
}

/// Ctrl-C or SIGTERM before tracing began ends fslat at once, with status 130.
pub fn interrupted() -> Result<(), Error> {
    if signals::stop_requested() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// Runs a script, or with `emit` writes one of its stages: the command line's whole job
/// once it has the script's text (`name` is what diagnostics call it).
pub fn run_script(name: &str, text: &str, emit: Option<Emit>, opts: &Options) -> Result<(), Error> {
    interrupted()?;
    // A -p that names no process is said before anything is compiled.
    if let (None, Some(pid)) = (emit, opts.pid) {
        target::check_process(pid)?;
    }
    // A user who cannot load hears that first, not about clang or a kernel's types.
    if emit.is_none() {
        crate::runtime::may_load()?;
    }
    // A script run before on this kernel by this fslat starts from its cached checked
    // program and object: no BTF to parse, nothing to check or compile.
    let warm = (emit.is_none() && !opts.no_cache)
        .then(|| warm::open(text, opts))
        .flatten();
    if let Some((cache, key)) = &warm
        && let Some((mode, program, object)) = warm::lookup(cache, key)
    {
        report_pid_of_threaded_process(&program);
        return match run_object(&program, &object, mode, opts, &[], warm::loads(cache, key)) {
            Err(e) if let Some(copy) = without_walk(&e, &program, opts) => {
                run_script(name, text, emit, &copy)
            }
            r => r.map_err(|e| check_again(e, name, text, None, opts)),
        };
    }
    // The parse needs no kernel.
    if emit == Some(Emit::Ast) {
        let ast = crate::syntax::parse(text).map_err(script_error(name, text))?;
        // Pretty-printing grows with the square of the nesting: a deep tree (a generated
        // filter of thousands of terms) is printed on one line instead.
        let flat = format!("{ast:?}\n");
        let text = if flat.len() < 100_000 {
            format!("{ast:#?}\n")
        } else {
            flat
        };
        return write_output(opts.output.as_ref(), text.as_bytes());
    }
    let kernel = load_kernel_types(opts.btf.as_ref())?;
    let mode = match emit {
        None => resolve_mode(opts.mode, &kernel)?,
        Some(_) => emit_mode(opts.mode, &kernel),
    };
    // A run asks ftrace's list only about patterns; the kernel answers for the names.
    let rule = match emit {
        None if opts.btf.is_none() => Rule::running_kernel_deferred(),
        _ => traceability(opts),
    };
    let check_opts = check_options(opts, Rc::new(rule), &kernel)?;
    let (program, c) = compile_script(name, text, &kernel, mode, check_opts)?;
    if opts.verbose {
        report_skipped(&program);
    }
    report_pid_of_threaded_process(&program);
    interrupted()?;

    match emit {
        Some(Emit::Ir) => {
            let ir = serde_json::to_string_pretty(&program).unwrap_or_default();
            write_output(opts.output.as_ref(), format!("{ir}\n").as_bytes())
        }
        Some(Emit::C) => write_output(opts.output.as_ref(), c.as_bytes()),
        Some(Emit::Ast) => Ok(()), // written above, before the kernel's types were read
        Some(Emit::Obj) => {
            let object = compiler(opts)?.compile(&c)?;
            if opts.output.is_none() && std::io::stdout().is_terminal() {
                return Err(Error::ObjectToTerminal);
            }
            write_output(opts.output.as_ref(), &object)
        }
        None => {
            let compiler = compiler(opts)?;
            let object = compiler.compile(&c)?;
            if let Some((cache, key)) = &warm {
                warm::store(cache, key, mode, &program, &object);
            }
            let loads = warm
                .as_ref()
                .and_then(|(cache, key)| warm::loads(cache, key));
            match run_object(&program, &object, mode, opts, &[], loads) {
                Err(e) if let Some(copy) = without_walk(&e, &program, opts) => {
                    run_script(name, text, emit, &copy)
                }
                r => r.map_err(|e| check_again(e, name, text, Some(&kernel), opts)),
            }
        }
    }
}

/// A program with the kernel's walk of user stacks that the verifier refused: the
/// options to run the script again with copies instead, said on standard error. The
/// walk's loops are the part of a program whose verification varies most with the
/// kernel and the compiler (6.1's verifier gave up on an `offcpu` program built with
/// clang 19); the copy is the unwinder every kernel takes. Nothing ran yet: a command of
/// `-c` had not started, and is started again.
fn without_walk(err: &Error, program: &Program, opts: &Options) -> Option<Options> {
    let Error::Runtime(crate::runtime::RuntimeError::Verifier { session, summary }) = err else {
        return None;
    };
    if !program.ustack_walk {
        return None;
    }
    crate::stderr_line!(
        "fslat: warning: the kernel's verifier refused the program for {session} with the in-kernel walk of user stacks ({summary}); running with copies of the stacks instead (--ustack-copy)"
    );
    Some(Options {
        ustack_walk: false,
        ..opts.clone()
    })
}

/// A run that failed to load or attach: the script checked again with ftrace's list
/// (`Rule::running_kernel_deferred` left it out for the functions it names), whose
/// diagnostic (a function ftrace cannot hook, at its place in the script) says more than
/// the kernel's refusal; `err` when the list has nothing against the script.
fn check_again(
    err: Error,
    name: &str,
    text: &str,
    kernel: Option<&dyn KernelTypes>,
    opts: &Options,
) -> Error {
    if !matches!(err, Error::Runtime(_)) || opts.btf.is_some() {
        return err;
    }
    let loaded;
    let kernel = match kernel {
        Some(k) => k,
        None => match load_kernel_types(None) {
            Ok(k) => {
                loaded = k;
                &loaded
            }
            Err(_) => return err,
        },
    };
    let Ok(mode) = resolve_mode(opts.mode, kernel) else {
        return err;
    };
    let Ok(check_opts) = check_options(opts, Rc::new(Rule::running_kernel()), kernel) else {
        return err;
    };
    match crate::compile_with(text, kernel, mode, check_opts) {
        Err(diagnostics) => script_error(name, text)(diagnostics),
        Ok(_) => err,
    }
}

/// `fslat -l [GLOB]`: the traceable functions matching GLOB, or one function's signature.
pub fn list(glob: Option<&str>, opts: &Options) -> Result<(), Error> {
    if let Some(spec) = glob.and_then(|g| g.strip_prefix("usdt:")) {
        let lookup = crate::elf::Lookup {
            pid: opts.pid,
            command: opts.cmd.clone(),
        };
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let json = opts.format == Format::Json;
        crate::listing::list_usdt(spec, &lookup, opts.verbose, json, &mut out)?;
        return Ok(());
    }
    let glob = glob.map(|g| crate::listing::without_bpftrace_probe(g).unwrap_or(g));
    // A user-space file's listing needs no kernel BTF.
    let kernel = load_kernel_types(opts.btf.as_ref());
    let module = glob
        .and_then(|g| g.split_once(':'))
        .filter(|(m, _)| !m.is_empty() && !m.contains(['/', '.']))
        .and_then(|(m, _)| Some((m, kernel.as_ref().ok()?.module(m))));
    match module {
        Some((m, crate::btf::Module::Unloaded)) => {
            return Err(crate::listing::ListError::ModuleNotLoaded(m.to_string()).into());
        }
        Some((m, crate::btf::Module::NoTypes)) => {
            return Err(crate::listing::ListError::ModuleWithoutTypes(m.to_string()).into());
        }
        _ => {}
    }
    let kernel_module = matches!(module, Some((_, crate::btf::Module::Types)));
    if let Some(spec) = glob.filter(|g| g.contains(':') && !kernel_module) {
        let lookup = crate::elf::Lookup {
            pid: opts.pid,
            command: opts.cmd.clone(),
        };
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        crate::listing::list_user(spec, &lookup, opts.verbose, &mut out)?;
        return Ok(());
    }
    let kernel = kernel?;
    let functions = traceable(&kernel, opts);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let json = opts.format == Format::Json;
    crate::listing::list(&kernel, &functions, glob, opts.verbose, json, &mut out)?;
    Ok(())
}

/// `fslat --cgroups` and the REPL's `:cgroups`: path, unit, container and pod, tab-separated (`-` for none).
pub fn list_cgroups(format: Format) -> Result<(), Error> {
    let rows = crate::cgroups::named().map_err(|e| Error::Cgroups(e.to_string()))?;
    if rows.is_empty() {
        // Never an empty answer: say what was looked at.
        crate::stderr_line!(
            "fslat: no cgroup under {} has a systemd unit, container or pod in its path; --cgroup PATH and cgroup_path take any cgroup's path",
            crate::cgroups::mount().map_or("the cgroup v2 hierarchy".into(), |m| m
                .display()
                .to_string())
        );
    }
    if format == Format::Json {
        let mut out = String::new();
        for (path, [unit, container, pod]) in rows {
            let or_null = |s: String| if s.is_empty() { None } else { Some(s) };
            let row = serde_json::json!({
                "path": path,
                "unit": or_null(unit),
                "container": or_null(container),
                "pod": or_null(pod),
            });
            out.push_str(&row.to_string());
            out.push('\n');
        }
        return write_output(None, out.as_bytes());
    }
    let mut out = String::new();
    for (path, names) in rows {
        out.push_str(&path);
        for n in names {
            out.push('\t');
            out.push_str(if n.is_empty() { "-" } else { &n });
        }
        out.push('\n');
    }
    write_output(None, out.as_bytes())
}

/// `-l` and the REPL's `:list` over kernel types already read.
pub fn list_functions(
    kernel: &dyn KernelTypes,
    functions: &Traceable,
    glob: Option<&str>,
    signatures: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    crate::listing::list(kernel, functions, glob, signatures, false, out)?;
    Ok(())
}

/// Writes `bytes` to the output file, or to standard output.
pub fn write_output(path: Option<&PathBuf>, bytes: &[u8]) -> Result<(), Error> {
    let result = match path {
        Some(p) => std::fs::write(p, bytes),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes).and_then(|()| out.flush())
        }
    };
    result.map_err(|source| Error::Write {
        path: path.map_or("standard output".into(), |p| p.display().to_string()),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::preemption::Model;
    use crate::btf::{Features, Fixture};

    /// auto takes kprobe sessions exactly where the kernel has them and may preempt a
    /// program; an explicit mode is kept, and refused where the kernel lacks it.
    #[test]
    fn auto_takes_kprobe_sessions_on_a_preemptible_kernel() {
        let auto = |k: &Fixture| resolve_mode(ModeChoice::Auto, k).ok();
        assert_eq!(
            auto(&Fixture::new().preempting(Model::Lazy)),
            Some(Mode::KprobeSession)
        );
        assert_eq!(
            auto(&Fixture::new().preempting(Model::Full)),
            Some(Mode::KprobeSession)
        );
        assert_eq!(
            auto(&Fixture::new().preempting(Model::Voluntary)),
            Some(Mode::Fsession)
        );
        // Another kernel's BTF: its scheduler is not known.
        assert_eq!(auto(&Fixture::new()), Some(Mode::Fsession));
        let no_kprobe_session = Features {
            kprobe_session: false,
            fsession: false,
            ..Features::all()
        };
        let old = Fixture::with_features(no_kprobe_session).preempting(Model::Full);
        assert_eq!(auto(&old), Some(Mode::Fentry));
        assert!(matches!(
            resolve_mode(ModeChoice::KprobeSession, &old),
            Err(Error::NoKprobeSession)
        ));
        let lazy = Fixture::new().preempting(Model::Lazy);
        assert_eq!(
            resolve_mode(ModeChoice::Fsession, &lazy).ok(),
            Some(Mode::Fsession)
        );
        assert_eq!(
            resolve_mode(ModeChoice::KprobeSession, &Fixture::new()).ok(),
            Some(Mode::KprobeSession)
        );
    }
}
