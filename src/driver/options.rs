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
    /// `--cgroup PATH`: trace only tasks in this cgroup or below it.
    pub cgroup: Option<crate::cgroups::Cgroup>,
    pub duration: Option<Duration>,
    pub interval: Option<Duration>,
    pub format: Format,
    /// Events, or the emitted C or object, go here instead of standard output.
    pub output: Option<PathBuf>,
    /// `--flamegraph FILE.svg`: draw the stack counts there at the end of the run.
    pub flamegraph: Option<PathBuf>,
    pub mode: ModeChoice,
    pub verbose: bool,
    /// Kernel types from this BTF file instead of the running kernel's.
    pub btf: Option<PathBuf>,
    pub clang: Option<PathBuf>,
    pub buffer_size: Option<u32>,
    pub max_keys: Option<u32>,
    /// `--max-in-flight`: each span's map size.
    pub max_in_flight: Option<u32>,
    /// `--max-stacks`: each stack map's size.
    pub max_stacks: Option<u32>,
    /// `--ustack-bytes`: `Program::ustack_bytes`.
    pub ustack_bytes: u32,
    /// `Program::ustack_walk`: the command line's default, unless `--ustack-copy`.
    pub ustack_walk: bool,
    pub no_cache: bool,
    pub listen: Option<std::net::SocketAddr>,
    pub web_config: Option<std::sync::Arc<crate::metrics::WebConfig>>,
    /// `--otlp` and its options; the environment can name an endpoint too.
    pub otlp: Box<crate::metrics::OtlpOptions>,
    pub max_functions: usize,
    /// The script's arguments, `$1` first.
    pub script_args: Vec<String>,
    /// The process runs this one program and ends (the command line): once attached,
    /// it drops the capabilities the rest of the run does not need. The REPL, which
    /// loads the next program, keeps them.
    pub one_run: bool,
}

/// The ValueEnum derives give both front ends one list of the names they accept.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// The folded lines of the `count() by kstack` / `by ustack` aggregations, only.
    Folded,
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
    /// user-space sessions as one uprobe session program each (Linux 6.13)
    UprobeSession,
    /// user-space sessions as a uprobe and a uretprobe program each
    Uprobe,
    /// kernel sessions as one kprobe session program each (Linux 6.10; exact counts
    /// on a preemptible kernel)
    KprobeSession,
}

impl ModeChoice {
    /// The word the user types for it.
    pub fn word(self) -> &'static str {
        match self {
            ModeChoice::Auto => "auto",
            ModeChoice::Fsession => "fsession",
            ModeChoice::Fentry => "fentry",
            ModeChoice::FsessionMulti => "fsession-multi",
            ModeChoice::UprobeSession => "uprobe-session",
            ModeChoice::Uprobe => "uprobe",
            ModeChoice::KprobeSession => "kprobe-session",
        }
    }
}

/// `30` (seconds), `30s`, `1.5s`, `500ms`, `250us`, `2m`, `1h`. A decimal is exact
/// (`1.5s` is 1500 ms, `0.1ms` 100 us); one finer than a nanosecond is refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Err("the value is empty".into());
    }
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() {
        return Err(format!("`{s}` does not start with a number"));
    }
    if number.ends_with('.') || fraction.contains('.') {
        return Err(format!(
            "`{s}` is not a number: write digits after one `.` (1.5s)"
        ));
    }
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
    let too_long = || format!("`{s}` is too long");
    let whole: u64 = whole.parse().map_err(|_| too_long())?;
    let ns = whole.checked_mul(ns_per).ok_or_else(too_long)?;
    // Past 20 digits (trailing zeros aside) no unit's nanoseconds divide evenly.
    let fraction = fraction.trim_end_matches('0');
    let finer = || format!("`{s}` is finer than a nanosecond");
    if fraction.len() > 20 {
        return Err(finer());
    }
    let scale = 10u128.pow(fraction.len() as u32);
    let part = fraction.parse::<u128>().unwrap_or(0) * u128::from(ns_per);
    if part % scale != 0 {
        return Err(finer());
    }
    u64::try_from(part / scale)
        .ok()
        .and_then(|p| ns.checked_add(p))
        .map(Duration::from_nanos)
        .ok_or_else(too_long)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_exact_decimals() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("30", Ok(Duration::from_secs(30))),
            ("1.5s", Ok(ms(1500))),
            ("1.5", Ok(ms(1500))),
            ("0.25ms", Ok(Duration::from_micros(250))),
            ("1.50000s", Ok(ms(1500))),
            ("0.5m", Ok(Duration::from_secs(30))),
            ("1.5ns", Err("`1.5ns` is finer than a nanosecond")),
            (
                "0.0000000001s",
                Err("`0.0000000001s` is finer than a nanosecond"),
            ),
            (".5s", Err("`.5s` does not start with a number")),
            (
                "1.s",
                Err("`1.s` is not a number: write digits after one `.` (1.5s)"),
            ),
            (
                "1.2.3s",
                Err("`1.2.3s` is not a number: write digits after one `.` (1.5s)"),
            ),
            (
                "1.5x",
                Err("`1.5x`: unknown unit `x` (use ns, us, ms, s, m or h)"),
            ),
            (
                "18446744073709551615.9s",
                Err("`18446744073709551615.9s` is too long"),
            ),
        ] {
            assert_eq!(parse_duration(text), want.map_err(str::to_string), "{text}");
        }
    }
}
