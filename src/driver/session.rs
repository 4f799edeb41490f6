//! A running session: metrics exporters, the traced command, the writer, and the runtime
//! between them.

use super::target::{CommandCgroup, Watched};
use super::{Compiled, Error, Format, Options, Warning, interrupted};
use crate::build::Compiler;
use crate::check::counters;
use crate::check::program::Program;
use crate::child::HeldChild;
use crate::codegen::Mode;
use crate::output::flame::{self, Flames, WithFlames};
use crate::output::{FoldedWriter, JsonWriter, TextWriter, Writer};
use crate::runtime::{self, DEFAULT_RING_SIZE, Settings, signals};
use std::io::Write;
use std::time::Duration;

/// Builds the BPF object of `compiled`, loads it, and streams its events until
/// `opts.duration`, a signal, or the end of `opts.cmd`; then the summary. With
/// `run_object`, the one way both the command line and the REPL run a program.
pub fn compile_and_run(
    compiled: &Compiled,
    compiler: &Compiler,
    opts: &Options,
) -> Result<(), Error> {
    check_stack_output(&compiled.program, opts)?;
    runtime::may_load()?;
    let object = compiler.compile(&compiled.c)?;
    run_object(&compiled.program, &object, compiled.mode, opts, &[], None)
}

/// How often `--otlp` pushes without `-i` (with it, once every interval).
const OTLP_INTERVAL: Duration = Duration::from_secs(10);

/// Loads `object` (built from `program`) and runs it; see `compile_and_run`.
pub fn run_object(
    program: &Program,
    object: &[u8],
    mode: Mode,
    opts: &Options,
    absent: &[(usize, usize)],
    load_cache: Option<std::sync::Arc<dyn runtime::LoadCache>>,
) -> Result<(), Error> {
    interrupted()?;
    check_stack_output(program, opts)?;
    // A bundle's `$1`..; a script's are constants in the program (none here).
    let args = program
        .args_image(&opts.script_args)
        .map_err(Error::BundleArgs)?;
    let started = (
        crate::output::interval::IntervalStamp::now(0),
        std::time::Instant::now(),
    );

    // Exporters are up before anything is loaded: a port in use ends the run here.
    let otlp = crate::metrics::otlp_settings(&opts.otlp, |name| std::env::var(name).ok())
        .map_err(Error::OtlpSettings)?;
    let board = (opts.listen.is_some() || otlp.is_some()).then(crate::metrics::Board::new);
    let _server = match (opts.listen, &board) {
        (Some(addr), Some(board)) => Some(
            crate::metrics::Server::start(
                addr,
                std::sync::Arc::clone(board),
                opts.web_config.clone(),
            )
            .map_err(|source| Error::Listen { addr, source })?,
        ),
        _ => None,
    };
    // The push thread starts once the run traces: a run that never does pushes nothing.
    let otlp = otlp.zip(board.clone());
    if let Some((settings, _)) = &otlp
        && settings.source != "--otlp"
    {
        // Never a silent push: the environment chose to send the figures.
        crate::stderr_line!(
            "fslat: pushing metrics with OTLP to {} ({})",
            settings.target.url,
            settings.source
        );
    }
    let mut otlp = otlp;
    let mut pusher = None;

    // -p's process must exist, and its exit ends the run.
    let mut watched = opts.pid.map(Watched::open).transpose()?;
    // The command exists (and has a pid to filter on) before load; it runs once attached.
    let child = match &opts.cmd {
        Some(cmd) => Some(HeldChild::spawn(cmd).map_err(|source| Error::Command {
            cmd: cmd.clone(),
            source,
        })?),
        None => None,
    };
    // Everything the command starts runs in its cgroup; without cgroup v2, only the
    // command's own process can be told apart.
    let cgroup = match &child {
        Some(c) => match CommandCgroup::for_child(c.pid()) {
            Ok(cg) => Some(cg),
            Err(why) => {
                crate::stderr_line!(
                    "fslat: warning: -c: {why}; tracing only the command's own process, not the processes it starts"
                );
                None
            }
        },
        None => None,
    };
    let target_tgid = match (&child, &cgroup) {
        (Some(_), Some(_)) => 0,
        (Some(c), None) => c.pid(),
        (None, _) => opts.pid.unwrap_or(0),
    };
    let settings = Settings {
        mode,
        args,
        target_tgid,
        target_cgroup: cgroup.as_ref().map_or(0, CommandCgroup::id),
        under_cgroup: opts.cgroup,
        duration: opts.duration,
        interval: opts.interval,
        ring_size: opts.buffer_size.unwrap_or(DEFAULT_RING_SIZE),
        max_keys: opts.max_keys,
        max_in_flight: opts.max_in_flight,
        max_stacks: opts.max_stacks,
        verbose: opts.verbose,
        metrics: board.map(|b| b as std::sync::Arc<dyn crate::output::figures::Publish>),
        // --flamegraph writes its files at the end, maybe into another user's directory;
        // -c's cgroup is removed at the end, from a parent directory root may not write
        // to without it (the hierarchy's root is mode 555 on many systems).
        keep_after_attach: opts.one_run.then(|| {
            if opts.flamegraph.is_some() || cgroup.is_some() {
                crate::sys::cap::set(&[crate::sys::cap::DAC_OVERRIDE])
            } else {
                0
            }
        }),
        absent: absent.to_vec(),
        load_cache,
        source_lines: opts.format == Format::Json,
    };
    let mut writer = writer(opts, program)?;
    let child = std::cell::RefCell::new(child);
    let labels: Vec<&str> = program.sessions.iter().map(|s| s.label.as_str()).collect();
    let mut attached = || {
        if let Some((settings, board)) = otlp.take() {
            match crate::metrics::Pusher::start(
                settings,
                opts.interval.unwrap_or(OTLP_INTERVAL),
                board,
            ) {
                Ok(p) => pusher = Some(p),
                Err(e) => crate::stderr_line!(
                    "fslat: warning: --otlp: cannot start the push thread ({e}); not pushing"
                ),
            }
        }
        crate::stderr_line!(
            "Tracing {} session{} ({}, {}). Ctrl-C to end.",
            labels.len(),
            if labels.len() == 1 { "" } else { "s" },
            labels.join(", "),
            mode.of_program(program)
        );
        if let Some(c) = child.borrow_mut().as_mut()
            && let Err(e) = c.release()
        {
            crate::stderr_line!("fslat: error: the command could not start: {e}");
        }
    };
    let mut flames = Flames::new(program);
    let mut with_flames = WithFlames {
        inner: writer.as_mut(),
        flames: &mut flames,
    };
    let outcome = runtime::run(
        program,
        object,
        &settings,
        &mut with_flames,
        &mut attached,
        &mut || {
            !signals::stop_requested()
                && child
                    .borrow_mut()
                    .as_mut()
                    .is_none_or(|c| c.exited().is_none())
                && watched.as_mut().is_none_or(|w| !w.exited())
        },
    );
    // The last push carries the final figures, published as the run ended; a run that
    // failed has none, and its error comes at once.
    if let Some(p) = pusher {
        match &outcome {
            Ok(_) => p.finish(),
            Err(_) => p.abandon(),
        }
    }
    let outcome = outcome?;
    if let Some(path) = &opts.flamegraph {
        if opts.interval.is_some() {
            crate::stderr_line!("fslat: note: {}", super::error::Note::FlamesOfTheRun);
        }
        let target = match (&opts.cmd, opts.pid) {
            (Some(cmd), _) => format!("-c {cmd}"),
            (None, Some(pid)) => format!("-p {pid}"),
            (None, None) => "all processes".to_string(),
        };
        let run = format!(
            "fslat run of {}, {:.1} s, {target}",
            started.0.time(),
            started.1.elapsed().as_secs_f64()
        );
        draw_flames(&flames, path, &run)?;
    }
    if outcome.bad_records > 0 {
        crate::stderr_line!(
            "fslat: warning: {} record(s) did not match their event layout and were not printed (a bug in fslat; please report it)",
            outcome.bad_records
        );
    }
    for s in &outcome.summaries {
        if let Some(missed) = s.get(&counters::MISSED).filter(|&n| n > 0) {
            let warning = Warning::SkippedCalls {
                session: s.label.clone(),
                missed,
            };
            crate::stderr_line!("fslat: warning: {warning}");
        }
    }
    // The command's status is fslat's when its end ended the run; a run that Ctrl-C,
    // SIGTERM or -d ended exits 0, and still waits for the command, as before.
    let ended_by_command = !signals::stop_requested()
        && child
            .borrow_mut()
            .as_mut()
            .is_some_and(|c| c.exited().is_some());
    let status = child.borrow_mut().as_mut().map(HeldChild::wait);
    drop(cgroup);
    match status {
        Some(status) if ended_by_command => command_status(status),
        _ => Ok(()),
    }
}

/// `-c`: fslat's exit status is the command's, as a shell reports it: its exit code, or
/// 128 + N when signal N ended it.
fn command_status(wait_status: i32) -> Result<(), Error> {
    if libc::WIFSIGNALED(wait_status) {
        let sig = libc::WTERMSIG(wait_status);
        return Err(Error::CommandFailed {
            status: 128 + sig,
            how: format!("was ended by signal {sig}"),
        });
    }
    match libc::WEXITSTATUS(wait_status) {
        0 => Ok(()),
        code => Err(Error::CommandFailed {
            status: code,
            how: format!("exited with status {code}"),
        }),
    }
}

/// `-f folded` and `--flamegraph` show only stack counts: a program with none is refused
/// before it is built.
fn check_stack_output(program: &Program, opts: &Options) -> Result<(), Error> {
    if opts.format == Format::Folded && crate::output::stack_counts(program).is_empty() {
        return Err(Error::NoStackCount("-f folded"));
    }
    if opts.flamegraph.is_some() && crate::output::stack_counts(program).is_empty() {
        return Err(Error::NoStackCount("--flamegraph"));
    }
    Ok(())
}

/// `--flamegraph`: one SVG per stack count (`Flames::files`), titled with its session and
/// aggregation over `run`. A stack count with no rows draws nothing, and says so.
fn draw_flames(flames: &Flames, path: &std::path::Path, run: &str) -> Result<(), Error> {
    for (g, file) in flames.graphs.iter().zip(flames.files(path)) {
        if g.counts.is_empty() {
            crate::stderr_line!(
                "fslat: warning: --flamegraph: {} of session {} counted no stacks; {} was not written",
                g.name,
                g.session,
                file.display()
            );
            continue;
        }
        let title = format!("{}: {} ({})", g.session, g.title, g.name);
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&file)?);
            flame::svg(g, &title, run, &mut out)?;
            out.flush()
        };
        write().map_err(|source| Error::Write {
            path: file.display().to_string(),
            source,
        })?;
        crate::stderr_line!(
            "fslat: flame graph of {} written to {}",
            g.name,
            file.display()
        );
    }
    Ok(())
}

/// The writer the options ask for, over the output file or standard output.
fn writer(opts: &Options, program: &Program) -> Result<Box<dyn Writer>, Error> {
    let sink: Box<dyn Write> = match &opts.output {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|source| Error::Write {
            path: p.display().to_string(),
            source,
        })?),
        None => Box::new(std::io::stdout().lock()),
    };
    let sink = std::io::BufWriter::with_capacity(1 << 16, sink);
    Ok(match opts.format {
        Format::Text => Box::new(TextWriter::new(sink)),
        Format::Json => Box::new(JsonWriter::new(sink)),
        Format::Folded => Box::new(FoldedWriter::new(sink, program)),
    })
}
