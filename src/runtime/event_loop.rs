//! The event loop, from `Tracing` to the end of the run: the ring buffer's records to
//! the writer, `-i`'s intervals, the exporters' figures about once a second, the names of
//! the cgroups kept fresh; until the deadline, a signal or the traced command's end.

use super::loaded::Loaded;
use super::shared::Copy;
use super::{CGROUP_LOOK_EVERY, RuntimeError, Settings, privileges, publish, snapshot};
use crate::check::program::{FieldKind, Program};
use crate::check::resources::{self, Mode};
use crate::output::interval::IntervalStamp;
use crate::output::{AggResult, Decoder, Writer, figures};
use crate::stacks::StackTable;
use libbpf_rs::{RingBuffer, RingBufferBuilder};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

/// What the records delivered so far made: the writer, and per session its events.
pub(super) struct State<'a> {
    pub out: &'a mut dyn Writer,
    pub events: Vec<u64>,
    pub bad: u64,
    pub io: Option<std::io::Error>,
}

/// A run whose loop ended: the ring buffer still to drain, and what the end reads.
pub(super) struct Traced<'a> {
    pub ring: Option<RingBuffer<'a>>,
    pub state: Rc<RefCell<State<'a>>>,
    pub stacks: Option<Rc<StackTable>>,
    pub snapshots: snapshot::Snapshots,
    pub intervals: u64,
    pub started: SystemTime,
}

/// Streams the run: `attached` is called once every program is attached and the figures
/// exist; `keep_going` is polled to end the run early.
pub(super) fn trace<'a>(
    program: &'a Program,
    settings: &'a Settings,
    loaded: &Loaded,
    copies: &[Copy],
    out: &'a mut dyn Writer,
    attached: &mut dyn FnMut(),
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<Traced<'a>, RuntimeError> {
    let stacks = stack_table(program, settings, loaded)?;
    if let Some(table) = &stacks {
        out.set_stacks(table.clone());
        if settings.target_tgid != 0 {
            table.prepare_walk(settings.target_tgid);
        }
    }
    let state = Rc::new(RefCell::new(State {
        out,
        events: vec![0; program.sessions.len()],
        bad: 0,
        io: None,
    }));
    let ring = ring(program, settings.verbose, loaded, &state, stacks.clone())?;
    let started = SystemTime::now();
    // Every series exists from the first scrape after `Tracing`: zeros until counted (an
    // empty page would read as a successful scrape with no fslat_* series).
    publish::to_exporters(
        loaded,
        copies,
        program,
        settings,
        &vec![0; program.sessions.len()],
        started,
        stacks.as_deref(),
    )?;
    // Before `Tracing`: whoever sees it sees the run with what it keeps.
    if let Some(extra) = settings.keep_after_attach {
        privileges::keep_what_the_run_needs(loaded, program, extra);
    }
    attached();
    // bpftrace's BEGIN: once every probe is attached.
    for l in &program.begin {
        let mut st = state.borrow_mut();
        st.out
            .user_line(&crate::output::printf::render_line(l))
            .map_err(RuntimeError::Output)?;
        st.out.flush().map_err(RuntimeError::Output)?;
    }
    let (snapshots, intervals) = poll(
        program,
        settings,
        loaded,
        copies,
        ring.as_ref(),
        &state,
        stacks.as_deref(),
        started,
        keep_going,
    )?;
    Ok(Traced {
        ring,
        state,
        stacks,
        snapshots,
        intervals,
        started,
    })
}

/// The stack maps, for `kstack` and `ustack`.
fn stack_table(
    program: &Program,
    settings: &Settings,
    loaded: &Loaded,
) -> Result<Option<Rc<StackTable>>, RuntimeError> {
    if !(program.uses_kstack || program.uses_ustack) {
        return Ok(None);
    }
    let handle = |name: &str| {
        loaded
            .handle(name)
            .map_err(RuntimeError::libbpf("opening a stack map"))
    };
    Ok(Some(Rc::new(
        StackTable::new(
            handle(resources::KSTACKS_MAP)?,
            handle(resources::USTACKS_MAP)?,
            program.sessions.iter().any(|s| {
                matches!(
                    settings.mode.of_session(s),
                    Mode::Fentry | Mode::Fexit | Mode::FexitMulti
                )
            }),
        )
        .with_kernel_map(handle(resources::KSTACKS_MAP_2)?)
        .with_user_maps(
            handle(resources::USTACKS_MAP_2)?,
            handle(resources::UFRAMES_MAP)?,
            handle(resources::UFILES_MAP)?,
        )
        .with_copies(handle(resources::UCOPIES_MAP)?)
        .with_walk(
            handle(resources::UROWS_MAP)?,
            handle(resources::UPROCS_MAP)?,
            handle(resources::UWALKS_MAP)?,
            handle(resources::USLOTS_MAP)?,
        )
        .with_source_lines(settings.source_lines),
    )))
}

/// The ring buffer, its records decoded and written (or announcing a process to the
/// stack table) as they are polled.
fn ring<'a>(
    program: &'a Program,
    verbose: bool,
    loaded: &Loaded,
    state: &Rc<RefCell<State<'a>>>,
    stacks: Option<Rc<StackTable>>,
) -> Result<Option<RingBuffer<'a>>, RuntimeError> {
    let Some(map) = loaded.map(resources::EVENTS_MAP) else {
        return Ok(None);
    };
    let decoder = Decoder::new(program);
    let state = state.clone();
    let mut b = RingBufferBuilder::new();
    b.add(map, move |record: &[u8]| {
        if let (Some(t), Some(tgid)) = (&stacks, announced_tgid(record)) {
            t.announce(tgid);
            return 0;
        }
        let mut st = state.borrow_mut();
        match decoder.decode(record) {
            Ok(schema) => {
                st.events[schema.item as usize] += 1;
                if let Err(e) = st.out.event(schema, record) {
                    st.io.get_or_insert(e);
                    return -1;
                }
            }
            Err(e) => {
                if st.bad == 0 && verbose {
                    crate::stderr_line!("fslat: a record that did not match: {e}");
                }
                st.bad += 1;
            }
        }
        0
    })
    .map_err(RuntimeError::libbpf("reading the ring buffer"))?;
    b.build()
        .map(Some)
        .map_err(RuntimeError::libbpf("reading the ring buffer"))
}

/// Polls until the deadline or `keep_going` says no; returns the interval snapshots and
/// how many intervals were printed.
#[allow(clippy::too_many_arguments)]
fn poll(
    program: &Program,
    settings: &Settings,
    loaded: &Loaded,
    copies: &[Copy],
    ring: Option<&RingBuffer>,
    state: &RefCell<State>,
    stacks: Option<&StackTable>,
    started: SystemTime,
    keep_going: &mut dyn FnMut() -> bool,
) -> Result<(snapshot::Snapshots, u64), RuntimeError> {
    let mut published = Instant::now();
    let start = Instant::now();
    let deadline = settings.duration.map(|d| start + d);
    let mut snapshots = snapshot::Snapshots::default();
    let mut intervals = 0;
    let mut next_print = settings.interval.map(|i| start + i);
    let names_cgroups = snapshot::aggregations(program).any(|(_, a)| {
        a.keys
            .iter()
            .any(|k| matches!(k.kind, FieldKind::CgroupName(_)))
    });
    if names_cgroups {
        // The cgroups there at the start are named whatever becomes of them.
        snapshot::remember_cgroups(loaded, program);
    }
    let mut cgroups_seen = Instant::now();
    while keep_going() {
        let mut wait = Duration::from_millis(100);
        if let Some(end) = deadline {
            let now = Instant::now();
            if now >= end {
                break;
            }
            wait = wait.min(end - now);
        }
        if let (Some(at), Some(every)) = (next_print, settings.interval) {
            let now = Instant::now();
            if now >= at {
                intervals += 1;
                let stamp = IntervalStamp::now(intervals);
                let results = snapshots.interval(loaded, copies, program, stamp, true, stacks)?;
                let mut st = state.borrow_mut();
                print_interval(&mut *st.out, stamp, &results)?;
                // The next print is on the grid from the start, however long this took.
                let mut next = at + every;
                while next <= now {
                    next += every;
                }
                next_print = Some(next);
            }
            wait = wait.min(next_print.map_or(wait, |n| n.saturating_duration_since(now)));
        }
        if let Some(due) = stacks.and_then(StackTable::settle) {
            wait = wait.min(due.saturating_duration_since(Instant::now()));
        }
        match &ring {
            // EINTR (a signal) comes back as an error: the loop re-checks keep_going.
            Some(r) => {
                let _ = r.poll(wait);
            }
            None => std::thread::sleep(wait),
        }
        if names_cgroups && cgroups_seen.elapsed() >= CGROUP_LOOK_EVERY {
            snapshot::remember_cgroups(loaded, program);
            cgroups_seen = Instant::now();
        }
        // Output is block-buffered; flushing once per poll keeps it live.
        let mut st = state.borrow_mut();
        if let Some(e) = st.io.take() {
            return Err(RuntimeError::Output(e));
        }
        st.out.flush().map_err(RuntimeError::Output)?;
        if let Some(board) = &settings.metrics
            && published.elapsed() >= figures::PUBLISH_EVERY
        {
            // A failed read skips one publish; the exporters keep the previous figures.
            if let Ok(snap) = publish::figures(
                loaded, copies, program, settings, &st.events, started, stacks,
            ) {
                board.publish(snap);
            }
            published = Instant::now();
        }
    }

    Ok((snapshots, intervals))
}

/// The process a ring buffer record announces (`resources::ANNOUNCE_ID`), if it is such
/// a record.
fn announced_tgid(record: &[u8]) -> Option<u32> {
    let u32_at = |at: usize| {
        record
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
    };
    (u32_at(0)? == resources::ANNOUNCE_ID)
        .then(|| u32_at(resources::ANNOUNCE_TGID_OFFSET))
        .flatten()
}

pub(super) fn print_interval(
    out: &mut dyn Writer,
    stamp: IntervalStamp,
    results: &[AggResult],
) -> Result<(), RuntimeError> {
    out.interval(&stamp).map_err(RuntimeError::Output)?;
    for r in results {
        out.aggregation(r).map_err(RuntimeError::Output)?;
    }
    out.flush().map_err(RuntimeError::Output)
}
