//! Stage 5: a BPF object → a running session. Opens the object, writes the settings,
//! loads, attaches, streams events to a writer until the deadline or a signal, then, in
//! this order: detaches every program, drains the ring buffer, reads the counters.

mod errors;
mod loaded;
mod memory;
mod misses;
mod multi;
mod privileges;
mod replay;
mod shared;
pub mod signals;
pub mod snapshot;
mod user;

pub use errors::RuntimeError;
pub use privileges::may_load;

use crate::check::counters::{self, Shown, Source};
use crate::check::program::{Aggregation, FieldKind, Program, Session};
use crate::check::resources::{self, Mode, ProgRole, Setting};
use crate::output::interval::IntervalStamp;
use crate::output::{AggResult, Decoder, Summary, Writer, figures};
use crate::stacks::StackTable;
use libbpf_rs::{MapCore, MapFlags, ObjectBuilder, RingBufferBuilder};
use loaded::Loaded;
use shared::{Body, Copy};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::fd::AsFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

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
    let replayed = settings
        .load_cache
        .as_ref()
        .filter(|_| replay::eligible(program, settings))
        .and_then(|cache| cache.get())
        .and_then(|bytes| replay::Record::decode(&bytes))
        .and_then(|record| match replay::load(&record, program, settings) {
            Ok(r) => {
                if settings.verbose {
                    crate::stderr_line!(
                        "fslat: loaded from the warm start's load record (the kernel's BTF not read)"
                    );
                }
                Some(r)
            }
            Err(why) => {
                if settings.verbose {
                    crate::stderr_line!(
                        "fslat: the warm start's load record did not load ({why}); loading with libbpf"
                    );
                }
                None
            }
        });
    let Attached {
        _obj,
        loaded,
        links,
        fd_links,
        multi_links,
        mut copies,
    } = match replayed {
        Some(r) => Attached {
            _obj: None,
            loaded: r.loaded,
            links: Vec::new(),
            fd_links: r.links,
            multi_links: Vec::new(),
            copies: r.copies,
        },
        None => load_with_libbpf(program, object, settings)?,
    };

    let stacks = if program.uses_kstack || program.uses_ustack {
        let handle = |name: &str| {
            loaded
                .handle(name)
                .map_err(RuntimeError::libbpf("opening a stack map"))
        };
        let table = Rc::new(
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
            .with_user_maps(
                handle(resources::USTACKS_MAP_2)?,
                handle(resources::UFRAMES_MAP)?,
                handle(resources::UFILES_MAP)?,
            )
            .with_copies(handle(resources::UCOPIES_MAP)?),
        );
        out.set_stacks(table.clone());
        Some(table)
    } else {
        None
    };

    let decoder = Decoder::new(program);
    let state = RefCell::new(State {
        out,
        events: vec![0; program.sessions.len()],
        bad: 0,
        io: None,
    });
    let ring = match loaded.map(resources::EVENTS_MAP) {
        Some(map) => {
            let mut b = RingBufferBuilder::new();
            b.add(map, |record: &[u8]| {
                if let (Some(t), Some(tgid)) = (&stacks, announced_tgid(record)) {
                    t.announce(tgid);
                    return 0;
                }
                let mut st = state.borrow_mut();
                match decoder.decode(record) {
                    Ok(schema) => {
                        st.events[schema.id as usize] += 1;
                        if let Err(e) = st.out.event(schema, record) {
                            st.io.get_or_insert(e);
                            return -1;
                        }
                    }
                    Err(e) => {
                        if st.bad == 0 && settings.verbose {
                            crate::stderr_line!("fslat: a record that did not match: {e}");
                        }
                        st.bad += 1;
                    }
                }
                0
            })
            .map_err(RuntimeError::libbpf("reading the ring buffer"))?;
            Some(
                b.build()
                    .map_err(RuntimeError::libbpf("reading the ring buffer"))?,
            )
        }
        None => None,
    };

    let started = std::time::SystemTime::now();
    // Every series exists from the first scrape after `Tracing`: zeros until counted (an
    // empty page would read as a successful scrape with no fslat_* series).
    if let Some(board) = &settings.metrics {
        board.publish(snapshot(
            &loaded,
            &copies,
            program,
            settings,
            &vec![0; program.sessions.len()],
            started,
            stacks.as_deref(),
        )?);
    }
    // Before `Tracing`: whoever sees it sees the run with what it keeps.
    if let Some(extra) = settings.keep_after_attach {
        privileges::keep_what_the_run_needs(&loaded, program, extra);
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
        snapshot::remember_cgroups(&loaded, program);
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
                let results = snapshots.interval(
                    &loaded,
                    &copies,
                    program,
                    stamp,
                    true,
                    stacks.as_deref(),
                )?;
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
        match &ring {
            // EINTR (a signal) comes back as an error: the loop re-checks keep_going.
            Some(r) => {
                let _ = r.poll(wait);
            }
            None => std::thread::sleep(wait),
        }
        if names_cgroups && cgroups_seen.elapsed() >= CGROUP_LOOK_EVERY {
            snapshot::remember_cgroups(&loaded, program);
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
            if let Ok(snap) = snapshot(
                &loaded,
                &copies,
                program,
                settings,
                &st.events,
                started,
                stacks.as_deref(),
            ) {
                board.publish(snap);
            }
            published = Instant::now();
        }
    }

    // Task storage cannot be listed: only the hash map of kernels without it is counted.
    let in_flight: Vec<(String, usize)> = program
        .sessions
        .iter()
        .filter_map(|s| {
            let names: HashSet<String> = (0..s.targets.len()).map(|t| s.calls_map(t)).collect();
            let maps: Vec<_> = loaded
                .maps()
                .filter(|m| {
                    names.contains(&*m.name().to_string_lossy())
                        && m.map_type() == libbpf_rs::MapType::Hash
                })
                .collect();
            (!maps.is_empty())
                .then(|| (s.label.clone(), maps.iter().map(|m| m.keys().count()).sum()))
        })
        .collect();
    if settings.verbose {
        for (label, n) in &in_flight {
            crate::stderr_line!(
                "fslat: {label}: {n} entries left in the per-thread map at the end"
            );
        }
        for map in loaded.maps() {
            crate::stderr_line!("fslat: {}", memory::describe(map));
        }
    }

    // Stop producing, deliver what was produced, then count: in this order the
    // counters and the events describe the same calls.
    drop(links);
    drop(fd_links);
    drop(multi_links);
    for c in &mut copies {
        c.link = None;
    }
    if let Some(r) = &ring {
        r.consume()
            .map_err(RuntimeError::libbpf("draining the ring buffer"))?;
    }
    drop(ring);
    let State {
        out,
        events,
        bad,
        io,
        ..
    } = state.into_inner();
    if let Some(e) = io {
        return Err(RuntimeError::Output(e));
    }

    if settings.verbose {
        misses::report_per_program(&loaded, &copies, program);
    }
    let outcome = Outcome {
        summaries: summaries(&loaded, &copies, program, settings, &events)?,
        bad_records: bad,
        in_flight,
    };
    if let Some(board) = &settings.metrics {
        board.publish(snapshot(
            &loaded,
            &copies,
            program,
            settings,
            &events,
            started,
            stacks.as_deref(),
        )?);
    }
    // bpftrace's END: after the last event, before what the run adds up.
    for l in &program.end {
        out.user_line(&crate::output::printf::render_line(l))
            .map_err(RuntimeError::Output)?;
    }
    if settings.interval.is_some() {
        // The last, partial interval; then the summary, over the whole run.
        let stamp = IntervalStamp::now(intervals + 1);
        let results =
            snapshots.interval(&loaded, &copies, program, stamp, false, stacks.as_deref())?;
        print_interval(out, stamp, &results)?;
        for s in &outcome.summaries {
            out.summary(s).map_err(RuntimeError::Output)?;
        }
    } else {
        for s in &outcome.summaries {
            out.summary(s).map_err(RuntimeError::Output)?;
        }
        for result in snapshot::whole_run(&loaded, &copies, program, stacks.as_deref())? {
            out.aggregation(&result).map_err(RuntimeError::Output)?;
        }
    }
    out.flush().map_err(RuntimeError::Output)?;
    Ok(outcome)
}

/// What is in the kernel and attached, and what keeps it so.
struct Attached {
    _obj: Option<libbpf_rs::Object>,
    loaded: Loaded,
    links: Vec<libbpf_rs::Link>,
    fd_links: Vec<std::os::fd::OwnedFd>,
    multi_links: Vec<std::os::fd::OwnedFd>,
    copies: Vec<Copy>,
}

/// The maps' sizes this run asks for (`--max-keys`, `--max-in-flight`, `-b`), by map.
struct Sizes {
    aggregation_maps: HashSet<String>,
    span_maps: HashSet<String>,
}

impl Sizes {
    fn new(program: &Program) -> Sizes {
        Sizes {
            aggregation_maps: program
                .sessions
                .iter()
                .flat_map(|s| &s.aggregations)
                // A per-CPU array has its one slot whatever --max-keys says.
                .filter(|a| !a.per_cpu_array())
                .flat_map(|a| std::iter::once(a.map()).chain(a.max_map()))
                .collect(),
            span_maps: program
                .sessions
                .iter()
                .filter(|s| s.span.is_some())
                .map(|s| s.calls_map(0))
                .collect(),
        }
    }

    /// Map `name`'s size for this run, and what asked for it; `None`: the object's.
    fn max_entries(&self, name: &str, settings: &Settings) -> Option<(u32, &'static str)> {
        if name == resources::EVENTS_MAP {
            Some((settings.ring_size, "sizing the ring buffer"))
        } else if let Some(n) = settings
            .max_keys
            .filter(|_| self.aggregation_maps.contains(name))
        {
            Some((n, "sizing an aggregation map (--max-keys)"))
        } else {
            settings
                .max_in_flight
                .filter(|_| self.span_maps.contains(name))
                .map(|n| (n, "sizing a span's map (--max-in-flight)"))
        }
    }
}

/// Writes this run's part of map `name`'s initial data (the settings, the arguments).
fn initial_data(name: &str, data: &mut [u8], settings: &Settings) -> Result<(), RuntimeError> {
    if name == resources::SETTINGS_SECTION {
        let data = data
            .get_mut(..Setting::struct_size())
            .ok_or(RuntimeError::Missing(
                "struct fslat_settings in its section",
            ))?;
        write_settings(data, settings);
    } else if name == resources::ARGS_SECTION {
        data.get_mut(..settings.args.len())
            .ok_or(RuntimeError::Missing("struct fslat_args in its section"))?
            .copy_from_slice(&settings.args);
    }
    Ok(())
}

/// Opens, loads and attaches `object` with libbpf (the record of the load kept for the
/// next warm start, where it can serve).
fn load_with_libbpf(
    program: &Program,
    object: &[u8],
    settings: &Settings,
) -> Result<Attached, RuntimeError> {
    let sizes = Sizes::new(program);
    // The maps this run sizes, with their sizes in the object (for the load record).
    let mut sized = HashMap::new();
    let mut open = ObjectBuilder::default()
        .name("fslat")
        .map_err(RuntimeError::libbpf("naming the object"))?
        .open_memory(object)
        .map_err(RuntimeError::libbpf("opening the BPF object"))?;
    for mut map in open.maps_mut() {
        let name = map.name().to_string_lossy().into_owned();
        if let Some(data) = map.initial_value_mut() {
            initial_data(&name, data, settings)?;
        } else if name == resources::SETTINGS_SECTION || name == resources::ARGS_SECTION {
            return Err(RuntimeError::Missing("the settings' or arguments' section"));
        }
        if let Some((n, what)) = sizes.max_entries(&name, settings) {
            sized.insert(name, map.max_entries());
            map.set_max_entries(n).map_err(RuntimeError::libbpf(what))?;
        }
    }
    let progs = program.progs();
    // Multi-attach sessions: their attach types and function ids, from one read of the
    // kernel's BTF, by session index.
    let mut vmlinux = None;
    let mut plans = HashMap::new();
    let absent = |p: &resources::Prog| settings.absent.contains(&(p.session, p.target));
    // Shared bodies: each program's session and the functions it is loaded for, the first
    // by libbpf (its attach target set here), the others as copies after the load.
    let mut bodies: HashMap<String, Body> = HashMap::new();
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let found = progs.get(&name);
        if let Some((role, s)) = found
            .filter(|p| p.role != ProgRole::Multi)
            .and_then(|p| Some((p.role, program.sessions.get(p.session)?)))
            .filter(|(_, s)| settings.mode.shares_body(s))
        {
            let ts = present_targets(s, settings);
            let Some(&first) = ts.first() else {
                prog.set_autoload(false);
                continue;
            };
            prog.set_attach_target(0, Some(s.targets[first].func.clone()))
                .map_err(|e| errors::attach_error(e, program, &name))?;
            bodies.insert(
                name,
                Body {
                    session: s.index,
                    role,
                    targets: ts,
                    marks: Vec::new(),
                    marked: Vec::new(),
                },
            );
            continue;
        }
        if found.is_some_and(|p| p.role != ProgRole::Multi && absent(p)) {
            prog.set_autoload(false);
            continue;
        }
        let user = found
            .and_then(|p| program.sessions.get(p.session))
            .is_some_and(|s| s.user.is_some());
        if let Some(s) = found
            .filter(|p| p.role == ProgRole::Multi && !user)
            .and_then(|p| program.sessions.get(p.session))
            .filter(|s| settings.mode.of_session(s) != Mode::KprobeSession)
        {
            let failed = |reason: String| RuntimeError::MultiAttach {
                session: s.label.clone(),
                reason,
            };
            let btf = match &mut vmlinux {
                Some(btf) => btf,
                None => vmlinux.insert(crate::sys::bpf::VmlinuxBtf::load().map_err(failed)?),
            };
            let (funcs, cookies) = present(s, settings);
            let plan =
                multi::plan(btf, settings.mode.of_session(s), &funcs, cookies).map_err(failed)?;
            multi::prepare(&mut prog, &plan).map_err(|e| failed(e.to_string()))?;
            plans.insert(s.index, plan);
        }
    }
    drop(vmlinux);
    if !bodies.is_empty() {
        shared::prepare(&mut open, program, &mut bodies)?;
    }
    let obj = open.load().map_err(|e| errors::load_error(e, program))?;
    // The load record for the next warm start: made now, while every map holds its
    // initial data; the shared bodies' copies are added as they load.
    let mut record = match settings
        .load_cache
        .as_ref()
        .filter(|_| replay::eligible(program, settings))
    {
        Some(_) => match replay::record(&obj, &sized) {
            Ok(record) => Some(record),
            Err(why) => {
                if settings.verbose {
                    crate::stderr_line!("fslat: no load record for the warm start: {why}");
                }
                None
            }
        },
        None => None,
    };
    let copy_ids = shared::btf_ids(program, &bodies)?;

    // fentry mode: every fexit program before any fentry program, so that each entry
    // pushed has its return attached (a call returning in between would leave its entry
    // behind). A call already in flight at attach pushed nothing: its return finds its
    // task's stack empty.
    let mut links = Vec::new();
    let mut multi_links = Vec::new();
    let mut copies: Vec<Copy> = Vec::new();
    for exits in [true, false] {
        for prog in obj.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let found = progs.get(&name);
            if found.is_some_and(|p| p.role == ProgRole::Exit) != exits
                || found.is_some_and(|p| p.role != ProgRole::Multi && absent(p))
            {
                continue;
            }
            if let Some((p, s)) = found.and_then(|p| {
                program
                    .sessions
                    .get(p.session)
                    .filter(|s| s.user.is_some())
                    .map(|s| (p, s))
            }) {
                links.push(user::attach(
                    &prog,
                    s,
                    p.role,
                    p.target,
                    settings.target_tgid,
                )?);
                continue;
            }
            if let Some(s) = found
                .filter(|p| p.role == ProgRole::Multi)
                .and_then(|p| program.sessions.get(p.session))
                .filter(|s| settings.mode.of_session(s) == Mode::KprobeSession)
            {
                let (funcs, cookies) = present(s, settings);
                let link = crate::sys::bpf::attach_kprobe_session(&prog, &funcs, &cookies)
                    .map_err(|e| RuntimeError::KprobeAttach {
                        session: s.label.clone(),
                        reason: e.to_string(),
                    })?;
                links.push(link);
                continue;
            }
            if let Some(s) = found
                .filter(|p| p.role == ProgRole::Multi)
                .and_then(|p| program.sessions.get(p.session))
            {
                let link = plans
                    .get(&s.index)
                    .ok_or(RuntimeError::Missing("a multi-attach session's plan"))
                    .and_then(|plan| {
                        multi::attach(prog.as_fd(), plan).map_err(|e| RuntimeError::MultiAttach {
                            session: s.label.clone(),
                            reason: e.to_string(),
                        })
                    })?;
                multi_links.push(link);
                continue;
            }
            let link = prog
                .attach()
                .map_err(|e| errors::attach_error(e, program, &name))?;
            links.push(link);
            if let Some(body) = bodies.get(&name) {
                copies.extend(shared::load_copies(
                    &prog,
                    &name,
                    body,
                    program,
                    &copy_ids,
                    record.as_mut(),
                )?);
            }
        }
    }
    if let (Some(cache), Some(record)) = (&settings.load_cache, &record) {
        cache.put(&record.encode());
    }
    let loaded = Loaded::from_object(&obj).map_err(|e| {
        RuntimeError::libbpf("reading the loaded object")(libbpf_rs::Error::from(e))
    })?;
    Ok(Attached {
        _obj: Some(obj),
        loaded,
        links,
        fd_links: Vec::new(),
        multi_links,
        copies,
    })
}

/// Each session's counters, summed over CPUs, with its count of decoded `events`.
fn summaries(
    obj: &Loaded,
    copies: &[Copy],
    program: &Program,
    settings: &Settings,
    events: &[u64],
) -> Result<Vec<Summary>, RuntimeError> {
    let counters = obj
        .map(resources::COUNTERS_MAP)
        .ok_or(RuntimeError::Missing(resources::COUNTERS_MAP))?;
    let missed = misses::per_session(obj, copies, program);
    let mut out = Vec::new();
    for s in &program.sessions {
        let key = (s.index as u32).to_ne_bytes();
        let per_cpu = counters
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(RuntimeError::libbpf("reading the counters"))?
            .unwrap_or_default();
        let mut summary = Summary {
            label: s.label.clone(),
            mode: match (&s.span, &s.on) {
                (Some(_), _) => "span",
                (_, Some(p)) if p.tracepoint => "tp_btf",
                (_, Some(_)) => "fentry",
                _ => settings.mode.of_session(s).name(),
            },
            ..Summary::default()
        };
        for c in &counters::ALL {
            let has = match c.shown {
                Shown::Always | Shown::WhereCounted => true,
                Shown::Sessions => s.span.is_none() && s.on.is_none(),
                Shown::Spans => s.span.is_some(),
                Shown::WithAggregations => !s.aggregations.is_empty(),
                Shown::WithStacks => s.uses_stacks(),
                Shown::WithSched => s.uses_sched(),
                Shown::Several => s.several,
            };
            let value = match c.source {
                Source::Bpf { .. } => c
                    .offset()
                    .map(|at| per_cpu.iter().map(|cpu| u64_at(cpu, at / 8)).sum()),
                Source::Events => Some(events[s.index]),
                Source::Functions => Some(present(s, settings).0.len() as u64),
                Source::Missed => missed.get(s.index).copied().flatten(),
                Source::InFlight => obj.map(&s.calls_map(0)).map(|m| m.keys().count() as u64),
            };
            summary.set(c, value.filter(|_| has));
        }
        out.push(summary);
    }
    Ok(out)
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

/// The figures `--listen` and `--otlp` export, as they stand now.
#[allow(clippy::too_many_arguments)]
fn snapshot(
    obj: &Loaded,
    copies: &[Copy],
    program: &Program,
    settings: &Settings,
    events: &[u64],
    start: std::time::SystemTime,
    stacks: Option<&StackTable>,
) -> Result<figures::Figures, RuntimeError> {
    // Tag 0: the interval maxima of `percentiles` are not exported, only the run's.
    let all = snapshot::read_all(obj, program, 0)?;
    let aggregations = snapshot::aggregations(program)
        .zip(&all)
        .map(|((s, a), snap)| {
            let rows = snap.named_rows(a, stacks);
            // Read only while nothing is counted: what the exporters show until then.
            let unset = match a.keys.is_empty() && rows.is_empty() {
                true => unset(obj, a),
                false => None,
            };
            figures::AggFigures {
                unset,
                ..figures::AggFigures::of(&s.label, a, rows)
            }
        })
        .collect();
    Ok(figures::Figures {
        start,
        time: std::time::SystemTime::now(),
        sessions: summaries(obj, copies, program, settings, events)?,
        aggregations,
    })
}

/// The state of `a`'s value before any update: its map value, all zeros.
fn unset(obj: &Loaded, a: &Aggregation) -> Option<crate::aggregate::State> {
    let map = obj.map(&a.map())?;
    let zeros = vec![0u8; map.value_size() as usize];
    Some(a.func.decode(&a.spec(), &zeros, &[], 0))
}

/// Writes this run's settings into `fslat_settings` (the initial value of its section).
fn write_settings(data: &mut [u8], settings: &Settings) {
    for s in Setting::ALL {
        let value = match s {
            Setting::TargetTgid => settings.target_tgid.to_ne_bytes().to_vec(),
            Setting::TargetCgroup => settings.target_cgroup.to_ne_bytes().to_vec(),
            Setting::UnderLevel => (settings.under_cgroup.map_or(0, |c| c.level))
                .to_ne_bytes()
                .to_vec(),
            Setting::UnderCgroup => (settings.under_cgroup.map_or(0, |c| c.id))
                .to_ne_bytes()
                .to_vec(),
        };
        let at = s.offset();
        if let Some(field) = data.get_mut(at..at + value.len()) {
            field.copy_from_slice(&value);
        }
    }
}

struct State<'w> {
    out: &'w mut dyn Writer,
    events: Vec<u64>,
    bad: u64,
    io: Option<std::io::Error>,
}

/// The `i`th native-endian u64 of a map value (0 past its end).
fn u64_at(bytes: &[u8], i: usize) -> u64 {
    bytes
        .get(i * 8..i * 8 + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
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

fn print_interval(
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
            verbose: false,
            metrics: None,
            keep_after_attach: None,
            absent: Vec::new(),
            load_cache: None,
        }
    }

    #[test]
    fn settings_land_where_the_generated_struct_has_them() {
        let settings = Settings {
            target_tgid: 0x1122_3344,
            target_cgroup: 0x5566_7788_99aa_bbcc,
            under_cgroup: Some(crate::cgroups::Cgroup {
                id: 0x0102_0304_0506_0708,
                level: 3,
            }),
            ..settings(Mode::Fsession)
        };
        // `struct fslat_settings { __u32 target_tgid; __u64 target_cgroup; __u32
        // under_level; __u64 under_cgroup; }`: each u64 is 8-aligned, after 4 bytes of
        // padding.
        assert_eq!(Setting::struct_size(), 32);
        let mut data = vec![0xffu8; 32];
        write_settings(&mut data, &settings);
        let mut expected = Vec::new();
        expected.extend(0x1122_3344u32.to_ne_bytes());
        expected.extend([0xff; 4]);
        expected.extend(0x5566_7788_99aa_bbccu64.to_ne_bytes());
        expected.extend(3u32.to_ne_bytes());
        expected.extend([0xff; 4]);
        expected.extend(0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(data, expected);
    }
}
