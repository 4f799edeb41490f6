//! `fslat man`: the manual page, in roff. Every option, of fslat and of each subcommand,
//! comes from the clap definitions (clap_mangen renders them), and the language summary
//! is `--help`'s, so the page cannot drift from the binary; the sections clap knows
//! nothing of (exit status, environment, files, examples) are tables here.

use std::io::{self, Write};

/// fslat's exit statuses: the EXIT STATUS section (docs/language.md, "Limits and exit
/// status", has the same rows; tests/cli.rs checks that they agree).
pub const EXIT_STATUS: [(&str, &str); 6] = [
    (
        "0",
        "The run ended by its duration, its command's success, its -p process's exit, Ctrl-C or SIGTERM (after the summary); -l, --emit, build and the other subcommands did what was asked; doctor found that fslat can trace something here.",
    ),
    (
        "1",
        "The script is wrong (a diagnostic error[F...], a script file that cannot be read), or the machine cannot do what it asks: no BTF, clang failed, the kernel refused to load or attach, a --mode the kernel lacks; doctor found that fslat cannot trace here.",
    ),
    (
        "2",
        "The command line is wrong: an unknown option, a value that cannot be used, a file, cgroup or process an option names that is not there or cannot be read (--web-config, --otlp-ca, --cgroup, -p), the OTEL_* settings, an option this program cannot take (-f folded or --flamegraph without a stack count, --emit obj to a terminal, -o naming the script), a subcommand after options, no program.",
    ),
    (
        "N",
        "With -c, the command failed with status N (128 + S when signal S ended it); fslat says so on standard error after the summary.",
    ),
    (
        "130",
        "Ctrl-C or SIGTERM came before tracing began (while reading the script or compiling; clang is stopped too).",
    ),
    (
        "141",
        "Standard output's reader went away (fslat -l | head); nothing is printed.",
    ),
];

/// The environment fslat reads (tests/cli.rs checks that every variable the source reads
/// is here).
const ENVIRONMENT: [(&str, &str); 12] = [
    (
        "FSLAT_CLANG",
        "The clang to compile with, when --clang is not given (else clang, then clang-N, on PATH).",
    ),
    (
        "XDG_CACHE_HOME",
        "The compiled objects are cached in $XDG_CACHE_HOME/fslat (else ~/.cache/fslat), a private directory (0700) of the user's.",
    ),
    (
        "HOME",
        "Where the cache and the REPL's history go when the XDG variables are not set.",
    ),
    (
        "XDG_STATE_HOME",
        "The REPL's history is $XDG_STATE_HOME/fslat/history (else ~/.local/state/fslat/history).",
    ),
    (
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "Without --otlp, the URL metrics are pushed to, as given (OpenTelemetry's convention).",
    ),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "Without --otlp and the variable above, the base URL: metrics go to its /v1/metrics.",
    ),
    (
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        "Headers on every OTLP push (NAME=VALUE,..., values percent-encoded), besides --otlp-header.",
    ),
    (
        "OTEL_EXPORTER_OTLP_HEADERS",
        "The same, when the variable above is not set.",
    ),
    (
        "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
        "Without --otlp-ca, the CA certificates (PEM) an https OTLP receiver is verified against.",
    ),
    (
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        "The same, when the variable above is not set.",
    ),
    (
        "NO_COLOR",
        "When set and not empty, diagnostics are not coloured (they are coloured only on a terminal anyway).",
    ),
    (
        "TMPDIR",
        "Where C that clang rejected is kept for a bug report (fslat-bug-XXXXXX.bpf.c, mode 0600).",
    ),
];

const FILES: [(&str, &str); 6] = [
    (
        "/sys/kernel/btf/vmlinux",
        "The running kernel's types (BTF): the functions, tracepoints and struct fields a script may name. --btf FILE reads another kernel's.",
    ),
    (
        "~/.cache/fslat/",
        "The object cache ($XDG_CACHE_HOME/fslat): one entry per script and kernel; --no-cache compiles without it.",
    ),
    (
        "~/.local/state/fslat/history",
        "The REPL's history ($XDG_STATE_HOME/fslat/history).",
    ),
    (
        "/etc/fslat/agent.fsl",
        "The script of the fslat-agent service, which serves its metrics to Prometheus on 127.0.0.1:9435.",
    ),
    (
        "/etc/fslat/web.yml",
        "The agent's TLS and basic authentication, in Prometheus exporter-toolkit's web-config format (--web-config), when it is configured to listen beyond localhost.",
    ),
    ("/usr/share/doc/fslat/examples/", "Example scripts."),
];

const EXAMPLES: [(&str, &str); 8] = [
    (
        "fslat -e 'session vfs_read where latency > 10ms { emit }'",
        "One event for each read that took more than 10 ms.",
    ),
    (
        "fslat -d 10s -e 'session vfs_read { hist(latency) by comm }'",
        "A latency histogram of reads for each command, after 10 seconds.",
    ),
    (
        "fslat -c 'make -j4' -e 'session vfs_write { count() by comm }'",
        "Run make and count the writes of everything it starts.",
    ),
    (
        "fslat -p 1234 slow_reads.fsl 10ms",
        "Run a script file on one process; 10ms is the script's $1.",
    ),
    (
        "fslat -l 'vfs_*'",
        "List the kernel functions that can be traced, by a glob.",
    ),
    (
        "fslat build slow_reads.fsl -o slow_reads.fslb",
        "Compile once; the bundle runs with no clang on any kernel from 5.10 with BTF (fslat slow_reads.fslb).",
    ),
    (
        "fslat --listen 127.0.0.1:9435 -o /dev/null agent.fsl",
        "Serve the run's counters and aggregations to Prometheus.",
    ),
    (
        "fslat doctor",
        "Check what this machine lets fslat trace, and what to do about the rest.",
    ),
];

/// The page for `cmd` (fslat's clap command), with `language` (`--help`'s summary of the
/// language) as THE LANGUAGE.
pub fn render(cmd: clap::Command, language: &str) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    let subcommands: Vec<&clap::Command> = cmd.get_subcommands().collect();
    for sub in &subcommands {
        writeln!(out, ".br")?;
        out.extend(section_body(&synopsis_of(sub)?, ".SH SYNOPSIS"));
    }
    man.render_description_section(&mut out)?;
    paragraph(
        &mut out,
        "Subcommands come first; everything else is a run of a script (a file, or -e PROGRAM): see COMMANDS below. The language itself is summarised under THE LANGUAGE.",
    )?;
    man.render_options_section(&mut out)?;
    writeln!(out, ".SH COMMANDS")?;
    for sub in &subcommands {
        command_section(&mut out, sub)?;
    }
    writeln!(out, ".SH \"THE LANGUAGE\"")?;
    verbatim(&mut out, language)?;
    tagged_section(&mut out, "EXIT STATUS", &EXIT_STATUS, false)?;
    tagged_section(&mut out, "ENVIRONMENT", &ENVIRONMENT, true)?;
    tagged_section(&mut out, "FILES", &FILES, true)?;
    tagged_section(&mut out, "EXAMPLES", &EXAMPLES, true)?;
    writeln!(out, ".SH \"SEE ALSO\"")?;
    writeln!(out, ".BR bpftrace (8),")?;
    writeln!(out, ".BR clang (1),")?;
    writeln!(out, ".BR systemd.exec (5)")?;
    paragraph(
        &mut out,
        "/usr/share/doc/fslat/ holds the README, the guide to bundles and the example scripts; the language reference is docs/language.md in fslat's sources.",
    )?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// What follows `header` in `text` (the header line itself left out).
fn section_body(text: &[u8], header: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let body: Vec<&str> = text.lines().filter(|l| *l != header).collect();
    let mut out = body.join("\n").into_bytes();
    if !out.is_empty() {
        out.push(b'\n');
    }
    out
}

/// `fslat NAME`'s command, named so for its synopsis and options.
fn named(sub: &clap::Command) -> clap::Command {
    sub.clone().bin_name(format!("fslat {}", sub.get_name()))
}

fn synopsis_of(sub: &clap::Command) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    // The run options repl and run share with fslat are in the synopsis as [OPTIONS].
    let shown = if shares_run_options(sub) {
        positionals_only(sub).override_usage(format!(
            "fslat {} [OPTIONS] {}",
            sub.get_name(),
            positional_words(sub)
        ))
    } else {
        named(sub)
    };
    clap_mangen::Man::new(shown).render_synopsis_section(&mut out)?;
    Ok(out)
}

/// repl and run take every run option of fslat itself (`RunArgs`).
fn shares_run_options(sub: &clap::Command) -> bool {
    sub.get_arguments().any(|a| a.get_id() == "duration")
}

fn positionals_only(sub: &clap::Command) -> clap::Command {
    clap::Command::new("fslat")
        .bin_name(format!("fslat {}", sub.get_name()))
        .args(sub.get_positionals().cloned())
        .disable_help_flag(true)
}

fn positional_words(sub: &clap::Command) -> String {
    sub.get_positionals()
        .map(|a| {
            let name = a
                .get_value_names()
                .and_then(|v| v.first())
                .map_or_else(|| a.get_id().to_string(), |n| n.to_string());
            let multiple = a.get_num_args().is_some_and(|n| n.max_values() > 1);
            match (a.is_required_set(), multiple) {
                (true, false) => name,
                (true, true) => format!("{name}..."),
                (false, false) => format!("[{name}]"),
                (false, true) => format!("[{name}]..."),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn command_section(out: &mut Vec<u8>, sub: &clap::Command) -> io::Result<()> {
    writeln!(out, ".SS \"fslat {}\"", sub.get_name())?;
    if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
        paragraph(out, &about.to_string())?;
    }
    let shown = if shares_run_options(sub) {
        let and = if sub.get_positionals().next().is_some() {
            ", and:"
        } else {
            "."
        };
        paragraph(
            out,
            &format!(
                "It takes the options of a run, as fslat itself does (OPTIONS above: -p, -c, -d, -f, --listen ...){and}"
            ),
        )?;
        positionals_only(sub)
    } else {
        named(sub)
    };
    let mut options = Vec::new();
    clap_mangen::Man::new(shown).render_options_section(&mut options)?;
    out.extend(section_body(&options, ".SH OPTIONS"));
    Ok(())
}

/// One filled paragraph of plain text.
fn paragraph(out: &mut Vec<u8>, text: &str) -> io::Result<()> {
    writeln!(out, ".PP")?;
    for line in text.lines() {
        writeln!(out, "{}", escape(line))?;
    }
    Ok(())
}

/// Text shown line for line, as `--help` shows it (no filling, no adjusting).
fn verbatim(out: &mut Vec<u8>, text: &str) -> io::Result<()> {
    writeln!(out, ".nf")?;
    for line in text.lines() {
        if line.is_empty() {
            writeln!(out, ".sp")?;
        } else {
            writeln!(out, "{}", escape(line))?;
        }
    }
    writeln!(out, ".fi")
}

/// A section of tagged paragraphs, the tags in bold (`code`: they are what a user types).
fn tagged_section(
    out: &mut Vec<u8>,
    title: &str,
    rows: &[(&str, &str)],
    code: bool,
) -> io::Result<()> {
    if title.contains(' ') {
        writeln!(out, ".SH \"{title}\"")?;
    } else {
        writeln!(out, ".SH {title}")?;
    }
    for (tag, text) in rows {
        writeln!(out, ".TP")?;
        if code {
            writeln!(out, "\\fB{}\\fR", escape(tag))?;
        } else {
            writeln!(out, "{}", escape(tag))?;
        }
        writeln!(out, "{}", escape(text))?;
    }
    Ok(())
}

/// `line` as roff text: backslashes and hyphens escaped (so `--pid` stays two ASCII
/// hyphens), and a line starting with `.` or `'` kept from reading as a request.
fn escape(line: &str) -> String {
    let mut s = String::with_capacity(line.len() + 8);
    for c in line.chars() {
        match c {
            '\\' => s.push_str("\\e"),
            '-' => s.push_str("\\-"),
            '\'' => s.push_str("\\(aq"),
            '"' => s.push_str("\\(dq"),
            _ => s.push(c),
        }
    }
    if s.starts_with('.') {
        s.insert_str(0, "\\&");
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn roff_text_keeps_hyphens_backslashes_and_leading_dots_literal() {
        assert_eq!(super::escape("--pid"), "\\-\\-pid");
        assert_eq!(super::escape(".fsl files"), "\\&.fsl files");
        assert_eq!(super::escape("a\\b"), "a\\eb");
    }
}
