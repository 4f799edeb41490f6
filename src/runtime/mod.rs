//! Stage 5: a BPF object → a running session. Opens the object, writes the settings,
//! loads, attaches, streams events to a writer until the deadline or a signal, then, in
//! this order: detaches every program, drains the ring buffer, reads the counters.

mod attach;
mod configure;
mod errors;
mod event_loop;
mod load;
mod loaded;
mod memory;
mod misses;
mod multi;
mod privileges;
mod profile;
mod publish;
mod replay;
mod shared;
pub mod signals;
pub mod snapshot;
mod teardown;
mod user;

pub use errors::RuntimeError;
pub use privileges::may_load;

use crate::check::program::{Program, Session};
use crate::check::resources::Mode;
use crate::output::{Summary, Writer, figures};
use loaded::Loaded;
use shared::Copy;
use std::time::Duration;

/// What the command line can change without recompiling.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    /// The initial value of `struct fslat_args` (`Program::args_image`); empty when the
    /// program takes no arguments at run time.
    pub args: Vec<u8>,
    /// 0: every process.
    pub target_tgid: u32,
    /// A cgroup v2 id: trace only its tasks (`-c`); 0: any cgroup.
    pub target_cgroup: u64,
    /// `--cgroup PATH`: trace only tasks in PATH or below it.
    pub under_cgroup: Option<crate::cgroups::Cgroup>,
    pub duration: Option<Duration>,
    /// `-i`: print every aggregation's last interval this often.
    pub interval: Option<Duration>,
    /// Ring buffer size in bytes (a power of two, at least a page).
    pub ring_size: u32,
    /// `--max-keys`: the distinct keys each aggregation map holds at most (its default:
    /// the map's `max_entries` in the object).
    pub max_keys: Option<u32>,
    /// `--max-in-flight`: how many spans each span's map holds (default: its size in the
    /// object, `codegen::INFLIGHT_ENTRIES`).
    pub max_in_flight: Option<u32>,
    /// `--max-stacks`: how many stacks each stack map holds (default: the object's,
    /// `check::resources::STACK_ENTRIES`).
    pub max_stacks: Option<u32>,
    pub verbose: bool,
    /// Where to publish the run's figures for `--listen` and `--otlp`, about once a second
    /// and once at the end.
    pub metrics: Option<std::sync::Arc<dyn figures::Publish>>,
    /// `Some`: once attached, keep only these capabilities (bit n: capability n) and
    /// what the rest of the run needs (runtime/privileges.rs); `None`: keep them all (the
    /// REPL loads the next program).
    pub keep_after_attach: Option<u64>,
    /// Functions of the program this kernel lacks, as (session index, target index): a
    /// bundle's glob or list matched on the machine that built it. Their programs are not
    /// loaded, multi-attach links leave them out (the others keep their cookies), and
    /// the summary's `functions` counts the rest.
    pub absent: Vec<(usize, usize)>,
    /// The warm start's record of how this object loads on this kernel (`replay`):
    /// replayed when there is one, written after a load by libbpf.
    pub load_cache: Option<std::sync::Arc<dyn LoadCache>>,
    /// `-f json`: user frames carry their source file, line and inlined functions.
    pub source_lines: bool,
}

/// Where the warm start keeps its load record (`replay::Record`, encoded).
pub trait LoadCache: Send + Sync + std::fmt::Debug {
    fn get(&self) -> Option<Vec<u8>>;
    fn put(&self, record: &[u8]);
}

pub const DEFAULT_RING_SIZE: u32 = 256 * 1024;

/// How often the cgroups of `by unit` (and the other cgroup-name keys) are looked up
/// while tracing, so that one removed before the print is still named.
const CGROUP_LOOK_EVERY: Duration = Duration::from_millis(200);

/// What a finished run found, for callers that check it (tests, the REPL).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub summaries: Vec<Summary>,
    /// Records that did not match their schema (never printed).
    pub bad_records: u64,
    /// fentry mode: per session, entries left in the per-thread map when the run ended
    /// (read before detaching), i.e. calls in flight then. Empty in fsession mode.
    pub in_flight: Vec<(String, usize)>,
}

/// Loads `object` (compiled from `program`), runs it, and writes events, summaries and
/// aggregations to `out`. `attached` is called once every program is attached;
/// `keep_going` is polled to end the run early (signals, a child that exited).
pub fn run(
    program: &Program,
    object: &[u8],
    settings: &Settings,
    out: &mut dyn Writer,
    attached: &mut dyn FnMut(),
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<Outcome, RuntimeError> {
    errors::capture_libbpf_log(settings.verbose);
    let load::Attached {
        _obj,
        loaded,
        links,
        mut copies,
    } = load::load(program, object, settings)?;
    let traced = event_loop::trace(
        program, settings, &loaded, &copies, out, attached, keep_going,
    )?;
    teardown::finish(program, settings, &loaded, links, &mut copies, traced)
}

/// The functions of session `s` this kernel has (all but `Settings::absent`), each with
/// its cookie: its index among the session's functions, which the program's tables use.
fn present(s: &Session, settings: &Settings) -> (Vec<String>, Vec<u64>) {
    present_targets(s, settings)
        .into_iter()
        .map(|t| (s.targets[t].func.clone(), t as u64))
        .unzip()
}

/// The indices of session `s`'s functions this kernel has (all but `Settings::absent`).
fn present_targets(s: &Session, settings: &Settings) -> Vec<usize> {
    (0..s.targets.len())
        .filter(|t| !settings.absent.contains(&(s.index, *t)))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(super) fn settings(mode: Mode) -> Settings {
        Settings {
            mode,
            args: Vec::new(),
            target_tgid: 0,
            target_cgroup: 0,
            under_cgroup: None,
            duration: None,
            interval: None,
            ring_size: DEFAULT_RING_SIZE,
            max_keys: None,
            max_in_flight: None,
            max_stacks: None,
            verbose: false,
            metrics: None,
            keep_after_attach: None,
            absent: Vec::new(),
            load_cache: None,
            source_lines: false,
        }
    }
}
