//! What a run takes besides the program, as both front ends give it, and the values they
//! parse the same way (modes, formats, durations).

use clap::ValueEnum;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a run takes besides the program; the command line builds it from its
/// options, the REPL keeps one and changes its mode and duration.
#[derive(Debug, Clone)]
pub struct Options {
    /// Trace only this process (a TGID).
    pub pid: Option<u32>,
    /// Start this command, trace it and what it starts, and stop when it exits.
    pub cmd: Option<String>,
    pub duration: Option<Duration>,
    pub interval: Option<Duration>,
    pub format: Format,
    /// Events, or the emitted C or object, go here instead of standard output.
    pub output: Option<PathBuf>,
    pub mode: ModeChoice,
    pub verbose: bool,
    /// Kernel types from this BTF file instead of the running kernel's.
    pub btf: Option<PathBuf>,
    pub clang: Option<PathBuf>,
    pub buffer_size: Option<u32>,
    pub no_cache: bool,
    pub listen: Option<std::net::SocketAddr>,
    pub otlp: Option<Box<crate::metrics::OtlpTarget>>,
    pub max_functions: usize,
    /// The script's arguments, `$1` first.
    pub script_args: Vec<String>,
}

/// The ValueEnum derives give both front ends one list of the names they accept.
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

/// How sessions attach, as asked for; `driver::resolve_mode` turns it into the mode the
/// kernel runs.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ModeChoice {
    Auto,
    Fsession,
    Fentry,
    /// fsession, with one multi-attach program per several-function session (Linux 7.2)
    FsessionMulti,
}

impl ModeChoice {
    /// The word the user types for it.
    pub fn word(self) -> &'static str {
        match self {
            ModeChoice::Auto => "auto",
            ModeChoice::Fsession => "fsession",
            ModeChoice::Fentry => "fentry",
            ModeChoice::FsessionMulti => "fsession-multi",
        }
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

/// A run's duration or interval: more than 0, at most a day.
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
