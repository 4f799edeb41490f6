//! Stage 3: checked program → BPF C. Templates in `templates/` give the program its shape
//! (fsession, or the fentry/fexit fallback); this module renders expressions and fills
//! the templates' data.

mod ctypes;
mod expr;
mod templates;

use crate::aggregate::values::CStruct;
use crate::check::counters;
use crate::check::program::*;
use crate::check::resources::{self, ProgRole, Setting};
use crate::diag::{DiagKind, Diagnostic};
use ctypes::c_int;
use expr::{Phase, Scratch};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

pub use crate::check::resources::Mode;

/// Calls in flight per session that fentry mode can remember.
pub const INFLIGHT_ENTRIES: u32 = 10240;
/// Distinct keys per aggregation.
pub const AGG_ENTRIES: u32 = 10240;
/// Distinct keys per `percentiles` (each key's histogram takes 15 KiB, allocated at load).
pub const PCT_ENTRIES: u32 = 1024;

#[derive(Serialize)]
struct ProgramData {
    version: &'static str,
    mode: String,
    /// The session kfuncs take the program's context (Linux 7.0+).
    session_kfuncs_ctx: bool,
    uses_path: bool,
    /// A USDT point: libbpf's `usdt.bpf.h` (through `fslat_usdt.bpf.h`).
    uses_usdt: bool,
    uses_kstack: bool,
    uses_ustack: bool,
    /// The scheduler hooks of `oncpu` and its kin.
    uses_sched: bool,
    /// `wait_kstack`, `wait_ustack`: the hooks take the stacks where a thread leaves.
    wait_kstack: bool,
    wait_ustack: bool,
    /// The stack id of a call that never left the CPU.
    no_stack: i32,
    /// Whether the program has a ring buffer: for events, and for ustack's announcements.
    ring: bool,
    /// `ustack` on a kernel with `bpf_find_vma`: frames resolved to files at capture.
    ustack_files: Option<UstackFilesData>,
    /// `--ustack-bytes N`: registers and N bytes of stack copied at capture.
    ustack_copy: Option<UstackCopyData>,
    /// BPF atomics with fetch/cmpxchg (5.12+); without, min/max are plain stores.
    atomics: bool,
    /// fentry mode's call stacks in task storage (5.11+), else in a hash map.
    task_storage: bool,
    /// Linux 5.17+; before it, the cgroup ancestor of `under()` is read with CO-RE.
    bpf_loop: bool,
    /// The `bpf-runtime/` headers the program's aggregations need beyond fslat.bpf.h.
    agg_headers: Vec<&'static str>,
    /// The aggregation value structs the runtime reads, checked field by field.
    agg_structs: Vec<CStruct>,
    /// The most `entry()` values one session saves (0: none; FSLAT_ENTRY_VALUES).
    entry_values: usize,
    session_count: usize,
    maps: MapNames,
    settings: SettingsData,
    /// `struct fslat_args`, a bundle's script arguments; none when they are constants.
    args: Option<ArgsData>,
    /// `struct fslat_counters`, from `check::counters`.
    counters: Vec<LayoutField>,
    /// Each of those fields by its name: templates spell a counter `{{@root.counter.NAME}}`,
    /// which fails to render for a name the table does not have.
    counter: BTreeMap<&'static str, &'static str>,
    counters_size: usize,
    numbers: Vec<Number>,
    announce: AnnounceData,
    structs: Vec<StructData>,
    events: Vec<EventData>,
    aggregations: Vec<AggMapData>,
    sessions: Vec<SessionData>,
}

/// The names of the maps and sections the templates and fslat.bpf.h define.
#[derive(Serialize)]
struct MapNames {
    events: &'static str,
    counters: &'static str,
    kstacks: &'static str,
    ustacks: &'static str,
    ustacks_2: &'static str,
    ustack_second: u32,
    ustack_tgids: &'static str,
    interval: &'static str,
    path_scratch: &'static str,
    uframes: &'static str,
    ufiles: &'static str,
    ustack_scratch: &'static str,
    sched: &'static str,
    multi_section: &'static str,
}

/// The sizes of `ustack`'s resolved frames, from `check::resources`.
#[derive(Serialize)]
struct UstackFilesData {
    frames_entries: u32,
    files_entries: u32,
    depth: usize,
    frame_size: usize,
    frame_offset_at: usize,
    path_at: usize,
    path_cap: usize,
}

/// `ustack`'s copies (`Program::ustack_bytes`), from `check::resources`.
#[derive(Serialize)]
struct UstackCopyData {
    bytes: u32,
    entries: u32,
    map: &'static str,
    scratch: &'static str,
    ip_at: usize,
    sp_at: usize,
    bp_at: usize,
    len_at: usize,
    bytes_at: usize,
}

/// The ring buffer record `ustack` announces a process with.
/// A number `bpf-runtime/` defines that the Rust side computes with too.
#[derive(Serialize)]
struct Number {
    /// Its C macro.
    name: &'static str,
    value: String,
    /// Its Rust constant.
    from: &'static str,
}

/// Every number both sides use; the generated C checks each (`templates/layouts`).
fn numbers() -> Vec<Number> {
    use crate::aggregate::buckets;
    let n = |name, value: u64, from| Number {
        name,
        value: value.to_string(),
        from,
    };
    vec![
        n(
            "FSLAT_NS_PER_US",
            buckets::NS_PER_US,
            "aggregate::buckets::NS_PER_US",
        ),
        n(
            "FSLAT_HIST_SLOTS",
            buckets::HIST_SLOTS as u64,
            "aggregate::buckets::HIST_SLOTS",
        ),
        n(
            "FSLAT_PCT_SHIFT",
            u64::from(buckets::PCT_SHIFT),
            "aggregate::buckets::PCT_SHIFT",
        ),
        n(
            "FSLAT_PCT_SLOTS",
            buckets::PCT_SLOTS as u64,
            "aggregate::buckets::PCT_SLOTS",
        ),
        n(
            "FSLAT_PATH_CAP",
            u64::from(crate::check::PATH_CAP),
            "check::PATH_CAP",
        ),
        n(
            "FSLAT_FN_MARK",
            resources::FN_MARK as u64,
            "check::resources::FN_MARK",
        ),
    ]
}

#[derive(Serialize)]
struct AnnounceData {
    id: u32,
    tgid_offset: usize,
}

#[derive(Serialize)]
struct SettingsData {
    section: &'static str,
    fields: Vec<LayoutField>,
    size: usize,
}

#[derive(Serialize)]
struct ArgsData {
    section: &'static str,
    fields: Vec<ArgFieldData>,
    size: usize,
}

#[derive(Serialize)]
struct ArgFieldData {
    name: String,
    decl: String,
    offset: usize,
    about: String,
}

/// A field of a struct both sides read, with where fslat expects it.
#[derive(Serialize)]
struct LayoutField {
    name: &'static str,
    decl: String,
    offset: usize,
    about: &'static str,
}

#[derive(Serialize)]
struct StructData {
    c_name: String,
    members: Vec<String>,
}

#[derive(Serialize)]
struct EventData {
    id: u32,
    label: String,
    size: u32,
    fields: Vec<FieldData>,
}

#[derive(Serialize)]
struct FieldData {
    name: String,
    member: String,
    decl: String,
    offset: u32,
}

#[derive(Serialize)]
struct AggMapData {
    id: usize,
    map: String,
    title: String,
    key_fields: Vec<String>,
    key_size: u32,
    value_type: String,
    per_cpu_array: bool,
    /// percentiles: the per-CPU map of counts and maxima.
    max_map: Option<String>,
    /// The aggregation's own C declarations (`lhist`: its value struct).
    value_decl: Vec<String>,
    entries: u32,
    /// A profile's: its program runs in an interrupt, where Linux before 6.1 takes only
    /// preallocated hash maps ("perf_event programs can only use preallocated hash map").
    prealloc: bool,
}

#[derive(Serialize)]
struct SessionData {
    index: usize,
    /// The fsession (or multi-attach) program's name.
    prog: String,
    /// fentry mode: the two programs and the map of calls in flight between them.
    entry_prog: String,
    exit_prog: String,
    calls_map: String,
    /// fsession: the map of `entry()` values between entry and return.
    entry_values_map: String,
    /// A kprobe session keeps its `entry()` values on the task's stack of calls in flight
    /// (`calls_map`, fentry mode's), under the address of the call's session cookie: a
    /// task storage lookup where a hash map keyed by that address cost an update at
    /// entry and a lookup and a delete at return (docs/performance.md, issue 42).
    calls_stack: bool,
    label: String,
    func: String,
    inflight: u32,
    entry_time_early: bool,
    /// Nothing reads the entry time (`Session::reads_entry_time`): a session program's entry
    /// marks the call accepted with 1 in its cookie, without reading the clock.
    untimed: bool,
    entry_lines: Vec<String>,
    entry_filter: Option<String>,
    /// `entry()`: what entry saves for return, after the filter.
    entry_values: Option<EntryValuesData>,
    return_lines: Vec<String>,
    error_check: Option<String>,
    return_filter: Option<String>,
    action_lines: Vec<String>,
    /// Each `emit`'s or `printf`'s event, in the script's order.
    events: Vec<EventCode>,
    aggregation_lines: Vec<String>,
    /// Set when the session is one multi-attach program for all its functions.
    multi: Option<MultiData>,
    /// One program at return only (`Mode::Fexit`, `Mode::FexitMulti`): the entry filter
    /// runs there, before the return phase.
    exit_only: bool,
    /// The per-CPU scratch map of this session's program (or fentry/fexit pair), and
    /// its bytes per slot (0: it has none).
    scratch_map: String,
    scratch: u32,
    /// The first of this session's programs' phases that needs more of the scratch map
    /// than a per-CPU value holds, and its bytes: `generate` refuses the script.
    #[serde(skip)]
    scratch_over: Option<(&'static str, u32)>,
    #[serde(flatten)]
    shape: ProgShape,
    /// A span's START program and END's key (its session's `entry_*` are END's filter).
    span: Option<SpanData>,
    /// An `on` point's one program (its section is `shape.section`).
    on: bool,
    /// A profile's one program (an `on` program at a perf event): it counts every sample.
    profile: bool,
    /// The return phase reads the clock (a span's END reads it in the template).
    reads_now: bool,
    /// It reads the scheduler's totals: a call in flight makes the hooks follow its thread.
    sched: bool,
}

/// One event a session's return sends: the stores of its fields into `fslat_e`, under
/// its `if`s.
#[derive(Serialize)]
struct EventCode {
    id: u32,
    stores: Vec<String>,
    guard: Option<String>,
}

#[derive(Serialize)]
struct SpanData {
    starts: Vec<StartData>,
    end_section: String,
    values: usize,
    end_lines: Vec<String>,
    end_key: String,
    /// Keyed by pid at both ends: the map of each thread's depth (`SpanPoints::nests`).
    depth_map: Option<String>,
    depth: u32,
}

/// One START's program.
#[derive(Serialize)]
struct StartData {
    prog: String,
    section: String,
    lines: Vec<String>,
    filter: Option<String>,
    key: String,
    /// What it saves for `start.NAME`, in order.
    values: Vec<String>,
    /// The start time is read before the lines (for what they save on its clock).
    time_early: bool,
}

/// How a session's programs are declared and attached, by mode.
#[derive(Serialize)]
struct ProgShape {
    /// The one program's section (fsession, multi-attach, uprobe session).
    section: String,
    ctx_decl: &'static str,
    /// What entry does to a call it gives up on before returning.
    session_reject: &'static str,
    /// The entry/return pair (fentry mode, uprobes): `None` for one program.
    pair: Option<PairData>,
    /// How a call in flight is found again at return (fsession's `entry()` map).
    call_key: CallKey,
}

#[derive(Serialize)]
struct PairData {
    entry: &'static str,
    exit: &'static str,
    entry_section: String,
    exit_section: String,
    /// What identifies the call on its task's stack of calls in flight.
    key: &'static str,
    call_at_entry: &'static str,
    call_at_return: &'static str,
}

#[derive(Serialize)]
struct CallKey {
    ty: &'static str,
    about: &'static str,
    at_entry: &'static str,
    at_return: &'static str,
}

const KERNEL_CTX: &str = "unsigned long long *ctx";
const USER_CTX: &str = "struct fslat_regs *ctx";
const PROFILE_CTX: &str = "void *ctx";

/// The trampoline's argument area: one address at entry and return of one call.
const KERNEL_CALL: CallKey = CallKey {
    ty: "__u64",
    about: "the call's context pointer (the trampoline's argument area: the same address at entry and return of one call)",
    at_entry: "(__u64)ctx",
    at_return: "(__u64)ctx",
};

/// A kprobe session's call: the address of its session cookie, which the kernel keeps
/// per call (on the task's function-graph return stack) from entry to return. The
/// context pointer would not do: kprobe_multi programs get a per-CPU copy of the
/// registers.
const KPROBE_CALL: CallKey = CallKey {
    ty: "__u64",
    about: "the address of the call's session cookie (the same at entry and return of one call, distinct between calls in flight)",
    at_entry: "(__u64)fslat_cookie",
    at_return: "(__u64)fslat_cookie",
};

/// A user call: its thread and stack pointer (8 bytes higher at return, once `ret`
/// popped the return address).
const USER_CALL: CallKey = CallKey {
    ty: "struct fslat_ucall",
    about: "the call's thread and stack pointer at entry (struct fslat_ucall)",
    at_entry: "{ bpf_get_current_pid_tgid(), ctx->sp }",
    at_return: "{ bpf_get_current_pid_tgid(), ctx->sp - 8 }",
};

impl ProgShape {
    fn of(mode: Mode, func: &str) -> ProgShape {
        let kernel_pair = || PairData {
            entry: "fentry",
            exit: "fexit",
            entry_section: format!("fentry/{func}"),
            exit_section: format!("fexit/{func}"),
            key: "the call's context pointer",
            call_at_entry: "ctx",
            call_at_return: "ctx",
        };
        let user_pair = |multi: bool| PairData {
            entry: "the uprobe",
            exit: "the uretprobe",
            entry_section: if multi { "uprobe.multi" } else { "uprobe" }.into(),
            exit_section: if multi {
                "uretprobe.multi"
            } else {
                "uretprobe"
            }
            .into(),
            key: "its stack pointer (8 bytes higher at return, once `ret` popped the return address)",
            call_at_entry: "(const void *)ctx->sp",
            call_at_return: "(const void *)(ctx->sp - 8)",
        };
        let user = mode.is_user();
        let regs = mode.reads_registers();
        ProgShape {
            section: match mode {
                Mode::Fsession => format!("fsession/{func}"),
                Mode::Fexit => format!("fexit/{func}"),
                Mode::FsessionMulti | Mode::FexitMulti => resources::MULTI_SECTION.into(),
                // libbpf would attach it by a pattern; the runtime attaches it by names.
                Mode::KprobeSession => "kprobe.session".into(),
                _ => "uprobe.session".into(),
            },
            ctx_decl: if regs { USER_CTX } else { KERNEL_CTX },
            // A kprobe or uprobe session's entry returning 1 skips the return.
            session_reject: if regs {
                "return 1;"
            } else {
                "*fslat_cookie = 0;"
            },
            pair: match mode {
                Mode::Fentry => Some(kernel_pair()),
                Mode::UprobeMulti => Some(user_pair(true)),
                Mode::Uprobe => Some(user_pair(false)),
                _ => None,
            },
            call_key: match mode {
                Mode::KprobeSession => KPROBE_CALL,
                _ if user => USER_CALL,
                _ => KERNEL_CALL,
            },
        }
    }
}

#[derive(Serialize)]
struct EntryValuesData {
    /// The statements that fill `__u64 fslat_ev[FSLAT_ENTRY_VALUES]`, with what they need.
    saves: Vec<String>,
}

#[derive(Serialize)]
struct MultiData {
    count: usize,
    /// One function: its index is 0, no need to ask the link's cookie.
    single: bool,
    /// One body loaded once per function: its index is `FSLAT_FN_INDEX()`, which the
    /// loader writes into each copy.
    shared: bool,
    /// What attaches the program to all the functions.
    link: &'static str,
    /// C declarations of the tables the program indexes by function.
    tables: Vec<String>,
    funcs: Vec<String>,
}

/// The BPF C for `program` in `mode`. Codegen places strings and wide keys (the scratch
/// plan, `Phase::scratch`); a session whose phase needs more room than a BPF program has
/// is refused here, with its span, before clang.
pub fn generate(program: &Program, mode: Mode) -> Result<String, Vec<Diagnostic>> {
    let registers;
    let program = if mode == Mode::KprobeSession {
        registers = with_params_saved(program, mode);
        &registers
    } else {
        program
    };
    let aggregations = || program.sessions.iter().flat_map(|s| &s.aggregations);
    let data = ProgramData {
        version: env!("CARGO_PKG_VERSION"),
        mode: mode.of_program(program),
        session_kfuncs_ctx: program.features.fsession,
        uses_path: program.uses_path,
        uses_usdt: program.sessions.iter().any(Session::at_usdt),
        uses_kstack: program.uses_kstack,
        uses_ustack: program.uses_ustack,
        uses_sched: program.uses_sched,
        wait_kstack: program.wait_kstack,
        wait_ustack: program.wait_ustack,
        no_stack: resources::NO_STACK,
        ring: program.uses_ustack || program.sessions.iter().any(|s| !s.events.is_empty()),
        ustack_files: (program.uses_ustack && program.features.find_vma).then_some(
            UstackFilesData {
                frames_entries: resources::UFRAMES_ENTRIES,
                files_entries: resources::UFILES_ENTRIES,
                depth: resources::UFRAME_DEPTH,
                frame_size: resources::UFRAME_SIZE,
                frame_offset_at: resources::UFRAME_OFFSET_AT,
                path_at: resources::UFILE_PATH_AT,
                path_cap: resources::UFILE_PATH_CAP,
            },
        ),
        ustack_copy: (program.uses_ustack && program.ustack_bytes > 0).then_some(UstackCopyData {
            bytes: program.ustack_bytes,
            entries: resources::UCOPIES_ENTRIES,
            map: resources::UCOPIES_MAP,
            scratch: resources::UCOPY_SCRATCH_MAP,
            ip_at: resources::UCOPY_IP_AT,
            sp_at: resources::UCOPY_SP_AT,
            bp_at: resources::UCOPY_BP_AT,
            len_at: resources::UCOPY_LEN_AT,
            bytes_at: resources::UCOPY_BYTES_AT,
        }),
        atomics: program.features.atomics,
        task_storage: program.features.task_storage,
        bpf_loop: program.features.bpf_loop,
        agg_headers: unique(aggregations().filter_map(|a| a.func.header())),
        agg_structs: unique(aggregations().flat_map(|a| a.func.c_structs().iter().copied())),
        entry_values: program
            .sessions
            .iter()
            .map(|s| s.entry_layout().1)
            .max()
            .unwrap_or(0),
        session_count: program.sessions.len().max(1),
        maps: MapNames {
            events: resources::EVENTS_MAP,
            counters: resources::COUNTERS_MAP,
            kstacks: resources::KSTACKS_MAP,
            ustacks: resources::USTACKS_MAP,
            ustacks_2: resources::USTACKS_MAP_2,
            ustack_second: resources::USTACK_SECOND,
            ustack_tgids: resources::USTACK_TGIDS_MAP,
            interval: resources::INTERVAL_MAP,
            path_scratch: resources::PATH_SCRATCH_MAP,
            uframes: resources::UFRAMES_MAP,
            ufiles: resources::UFILES_MAP,
            ustack_scratch: resources::USTACK_SCRATCH_MAP,
            sched: resources::SCHED_MAP,
            multi_section: resources::MULTI_SECTION,
        },
        settings: SettingsData {
            section: resources::SETTINGS_SECTION,
            fields: Setting::ALL
                .iter()
                .map(|s| LayoutField {
                    name: s.field(),
                    decl: format!("{} {}", c_int(s.size() as u32, false), s.field()),
                    offset: s.offset(),
                    about: s.about(),
                })
                .collect(),
            size: Setting::struct_size(),
        },
        args: (!program.args.is_empty()).then(|| ArgsData {
            section: resources::ARGS_SECTION,
            fields: program
                .arg_fields()
                .iter()
                .map(|f| ArgFieldData {
                    name: resources::arg_field(f.arg.n),
                    decl: f.decl(),
                    offset: f.offset,
                    about: f.arg.name(),
                })
                .collect(),
            size: program.args_size(),
        }),
        counters: counters::in_bpf()
            .map(|c| LayoutField {
                name: c.name,
                decl: format!("__u64 {}", c.name),
                offset: c.offset().unwrap_or(0),
                about: c.about,
            })
            .collect(),
        counter: counters::in_bpf().map(|c| (c.name, c.name)).collect(),
        counters_size: counters::struct_size(),
        numbers: numbers(),
        announce: AnnounceData {
            id: resources::ANNOUNCE_ID,
            tgid_offset: resources::ANNOUNCE_TGID_OFFSET,
        },
        structs: program
            .structs
            .iter()
            .map(|s| StructData {
                c_name: ctypes::struct_name(&s.name),
                members: s.members.iter().map(ctypes::member_decl).collect(),
            })
            .collect(),
        events: program
            .sessions
            .iter()
            .flat_map(|s| &s.events)
            .map(event_data)
            .collect(),
        aggregations: program
            .sessions
            .iter()
            .flat_map(|s| {
                let prealloc = s.profile.is_some();
                s.aggregations
                    .iter()
                    .map(move |a| agg_map_data(a, prealloc))
            })
            .collect(),
        sessions: program
            .sessions
            .iter()
            .flat_map(|s| match mode.of_session(s) {
                _ if s.span.is_some() => vec![span_data(s)],
                _ if s.on.is_some() || s.profile.is_some() => vec![on_data(s)],
                m if mode.shares_body(s) => vec![multi_session_data(s, m, true)],
                m @ (Mode::FsessionMulti
                | Mode::FexitMulti
                | Mode::UprobeSession
                | Mode::UprobeMulti
                | Mode::KprobeSession) => {
                    vec![multi_session_data(s, m, false)]
                }
                m => s
                    .targets
                    .iter()
                    .enumerate()
                    .map(|t| session_data(s, t, m))
                    .collect(),
            })
            .collect(),
    };
    let mut refused = HashSet::new();
    let too_big: Vec<Diagnostic> = data
        .sessions
        .iter()
        .filter_map(|d| {
            let (phase, bytes) = d.scratch_over?;
            let s = program.sessions.iter().find(|s| s.index == d.index)?;
            if !refused.insert(s.index) {
                return None;
            }
            let limit = resources::SCRATCH_BYTES;
            let kind = DiagKind::TooManyStrings {
                phase,
                bytes,
                limit,
            };
            Some(Diagnostic::new(s.at.clone(), kind))
        })
        .collect();
    if !too_big.is_empty() {
        return Err(too_big);
    }
    Ok(templates::render(&data))
}

/// `program` with what each kprobe session's return phase reads of the arguments saved
/// at entry: at return the argument registers hold whatever the function left there.
fn with_params_saved(program: &Program, mode: Mode) -> Program {
    let mut p = program.clone();
    for s in &mut p.sessions {
        if s.user.is_none() && mode.of_session(s) == Mode::KprobeSession {
            crate::check::carry_params_to_return(s);
        }
    }
    p
}

pub fn field_member(i: usize) -> String {
    format!("f{i}")
}

fn field_decl(kind: FieldKind, member: &str) -> String {
    match kind {
        FieldKind::Int(s) | FieldKind::Formatted(s, _) => {
            format!("{} {member}", c_int(u32::from(s.size), s.signed))
        }
        FieldKind::Bool => format!("__u8 {member}"),
        FieldKind::Duration | FieldKind::Ptr => format!("__u64 {member}"),
        FieldKind::Stack(_) | FieldKind::CgroupName(_) => format!("__u64 {member}"),
        FieldKind::Str { cap } => format!("char {member}[{cap}]"),
    }
}

fn event_data(e: &EventSchema) -> EventData {
    EventData {
        id: e.id,
        label: e.session.clone(),
        size: e.size,
        fields: e
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| FieldData {
                name: f.name.clone(),
                member: field_member(i),
                decl: field_decl(f.kind, &field_member(i)),
                offset: f.offset,
            })
            .collect(),
    }
}

/// `items` in their first order, each once.
fn unique<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn agg_map_data(a: &Aggregation, prealloc: bool) -> AggMapData {
    AggMapData {
        id: a.id,
        map: a.map(),
        title: a.title.replace("*/", "* /"),
        key_fields: if a.keys.is_empty() {
            vec!["__u32 none".into()]
        } else {
            a.keys
                .iter()
                .enumerate()
                .map(|(i, k)| field_decl(k.kind, &field_member(i)))
                .collect()
        },
        key_size: a.key_size,
        value_type: a.func.c_value(&a.spec()).ty,
        per_cpu_array: a.per_cpu_array(),
        max_map: a.max_map(),
        value_decl: a.func.c_decl(&a.spec()),
        entries: if a.func.per_cpu_max() {
            PCT_ENTRIES
        } else {
            AGG_ENTRIES
        },
        prealloc,
    }
}

fn session_data(s: &Session, (t, target): (usize, &Target), mode: Mode) -> SessionData {
    let error_check = |ret: &mut Phase| match target.ret {
        Some(Scalar { signed: true, .. }) => Some(format!("{} < 0", ret.ret_value())),
        _ => None,
    };
    phases_data(s, target, t, mode, error_check, None)
}

/// A session of several functions as one program: parameters and `ret` through the
/// trampoline's helpers, `func` and what differs between functions from tables indexed by
/// the link's per-function cookie. `shared`: one body that fslat's loader loads once per
/// function (`Mode::shares_body`), the index and slots written into each copy.
fn multi_session_data(s: &Session, mode: Mode, shared: bool) -> SessionData {
    let count = s.targets.len();
    let func_cap = s
        .targets
        .iter()
        .map(|t| t.func.len() + 1)
        .max()
        .unwrap_or(1);
    let mut tables = vec![format!(
        "static const char fslat_funcs_{}[{count}][{func_cap}] {} = {{ {} }};",
        s.index,
        table_section(),
        s.targets
            .iter()
            .map(|t| expr::c_string(t.func.as_bytes()))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    for i in (0..s.params.len()).filter(|_| !shared) {
        if let Some(values) = differing(s.targets.iter().map(|t| t.slots[i])) {
            tables.push(format!(
                "static const __u8 {}[{count}] {} = {{ {values} }};",
                expr::slot_table(s.index, i),
                table_section()
            ));
        }
    }
    // Whether a call failed depends on each function's return type when they differ.
    let uniform_ret = s.targets.iter().all(|t| t.ret == s.targets[0].ret);
    let kinds = s.targets.iter().map(|t| match t.ret {
        Some(Scalar { signed: true, size }) => size,
        _ => 0,
    });
    let kinds: Vec<String> = kinds.map(|k| k.to_string()).collect();
    if !uniform_ret {
        tables.push(format!(
            "static const __u8 fslat_retkind_{}[{count}] {} = {{ {} }};",
            s.index,
            table_section(),
            kinds.join(", ")
        ));
    }
    let index = s.index;
    let first = &s.targets[0];
    let error_check = move |ret: &mut Phase| {
        if uniform_ret {
            return match first.ret {
                Some(Scalar { signed: true, .. }) => Some(format!("{} < 0", ret.ret_value())),
                _ => None,
            };
        }
        let raw = ret.ret_raw();
        let kind = format!("fslat_retkind_{index}[fslat_fn]");
        Some(format!(
            "({kind} == 1 && (__s8){raw} < 0) || ({kind} == 2 && (__s16){raw} < 0) || ({kind} == 4 && (__s32){raw} < 0) || ({kind} == 8 && (__s64){raw} < 0)"
        ))
    };
    let multi = MultiData {
        count,
        single: count == 1,
        shared,
        link: match mode {
            _ if shared => "fslat's loader, a copy for each function",
            Mode::FsessionMulti => "fsession multi-attach",
            Mode::FexitMulti => "fexit multi-attach",
            Mode::UprobeSession => "a uprobe_multi link in session mode",
            Mode::KprobeSession => "a kprobe_multi link in session mode",
            _ => "a uprobe_multi link for each program",
        },
        tables,
        funcs: s.targets.iter().map(|t| t.func.clone()).collect(),
    };
    phases_data(s, first, 0, mode, error_check, Some(multi))
}

/// The attribute that keeps a function table in `resources::TABLES_SECTION`.
fn table_section() -> String {
    format!(
        "__attribute__((section(\"{}\")))",
        resources::TABLES_SECTION
    )
}

/// `Some("a, b, ...")` when the values are not all the same.
fn differing(values: impl Iterator<Item = usize>) -> Option<String> {
    let v: Vec<usize> = values.collect();
    v.iter().any(|x| *x != v[0]).then(|| {
        v.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

fn phases_data(
    s: &Session,
    target: &Target,
    t: usize,
    mode: Mode,
    error_check: impl FnOnce(&mut Phase) -> Option<String>,
    multi_data: Option<MultiData>,
) -> SessionData {
    let shared = multi_data.as_ref().is_some_and(|m| m.shared);
    let multi = multi_data.is_some() && !shared;
    let shape = ProgShape::of(mode, &target.func);
    let exit_only = matches!(mode, Mode::Fexit | Mode::FexitMulti);
    let fsession = shape.pair.is_none() && !exit_only;
    let role = if multi {
        ProgRole::Multi
    } else if exit_only {
        ProgRole::Exit
    } else {
        ProgRole::Session
    };
    let scratch_map = s.scratch_map(role, t);
    let scratch = |reject| Scratch {
        map: scratch_map.clone(),
        reject,
        used: 0,
    };
    // A call given up at a session program's entry must leave the cookie saying so.
    let reject = if fsession { "*fslat_cookie = 0; " } else { "" };
    // A user function's `on` point is one uprobe shaped as fexit's program.
    let regs = mode.reads_registers() || s.user.is_some();
    let mut entry = Phase::new(s, target, false, multi, regs, scratch(reject)).sharing(shared);
    let mut ret = Phase::new(s, target, true, multi, regs, scratch("")).sharing(shared);
    // At return only, the entry filter is the return phase's first lines: what it reads
    // (`pid_tgid`, a parameter) is then read once for the whole program.
    let filter_phase = if exit_only { &mut ret } else { &mut entry };
    let entry_filter = s.entry_filter.as_ref().map(|f| filter_phase.expr(f));
    let entry_lines = filter_phase.take_lines();
    let entry_values = (s.span.is_none() && !s.entry_values.is_empty()).then(|| EntryValuesData {
        saves: saves(&mut entry, s, "fslat_ev"),
    });
    let entry_time_early = entry.uses_start();

    let error_check = error_check(&mut ret);
    let return_filter = s.return_filter.as_ref().map(|f| ret.expr(f));
    let return_lines = ret.take_lines();

    // What only matching calls need is computed after the filter.
    // An `if` around an event or an aggregation is one condition (the checker flattened
    // nested `if`s into it): one level of branching in the C, however deep the script
    // nests, which keeps the verifier's paths few.
    let events = s
        .events
        .iter()
        .map(|e| EventCode {
            id: e.id,
            stores: e
                .fields
                .iter()
                .enumerate()
                .map(|(i, f)| ret.store(&f.expr, &format!("fslat_e->{}", field_member(i)), f.kind))
                .collect(),
            guard: e.guard.as_ref().map(|g| ret.expr(g)),
        })
        .collect();
    let mut aggregation_lines = Vec::new();
    for a in &s.aggregations {
        let lines = ret.aggregate(a);
        match &a.guard {
            Some(g) => {
                let cond = ret.expr(g);
                aggregation_lines.push(format!("if ({cond}) {{"));
                aggregation_lines.extend(lines.into_iter().map(|l| format!("\t{l}")));
                aggregation_lines.push("}".into());
            }
            None => aggregation_lines.extend(lines),
        }
    }
    let action_lines = ret.take_lines();
    let scratch = entry.scratch_used().max(ret.scratch_used());
    let scratch_over = over_scratch([("at entry", &entry), ("at return", &ret)]);

    SessionData {
        index: s.index,
        prog: s.prog_name(role, t),
        entry_prog: s.prog_name(ProgRole::Entry, t),
        exit_prog: s.prog_name(ProgRole::Exit, t),
        calls_map: s.calls_map(t),
        entry_values_map: s.entry_values_map(role, t),
        calls_stack: mode == Mode::KprobeSession,
        label: s.label.clone(),
        func: target.func.clone(),
        inflight: INFLIGHT_ENTRIES,
        entry_time_early,
        untimed: !s.reads_entry_time(),
        entry_lines,
        entry_filter,
        entry_values,
        return_lines,
        error_check,
        return_filter,
        action_lines,
        events,
        aggregation_lines,
        multi: multi_data,
        exit_only,
        scratch_map,
        scratch,
        scratch_over,
        shape,
        span: None,
        on: false,
        profile: false,
        reads_now: ret.reads_now(),
        sched: s.uses_sched(),
    }
}

/// The first of `phases` that needs more of the scratch map than `SCRATCH_BYTES`.
fn over_scratch<const N: usize>(
    phases: [(&'static str, &Phase); N],
) -> Option<(&'static str, u32)> {
    phases
        .into_iter()
        .map(|(name, p)| (name, p.scratch_used()))
        .find(|(_, bytes)| *bytes > resources::SCRATCH_BYTES)
}

/// The statements that save the session's entry values into `words` in `phase`, each
/// after the lines it needs.
fn saves(phase: &mut Phase, s: &Session, words: &str) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..s.entry_values.len() {
        let save = phase.save(i, words);
        out.extend(phase.take_lines());
        out.push(save);
    }
    out
}

/// A span: END's program is fentry mode's exit with END's filter first; each START's
/// program is built here, in its own phase (its names are that START's).
fn span_data(s: &Session) -> SessionData {
    let points = s.span.as_ref().expect("span_data is called for spans");
    let target = &s.targets[0];
    let mut data = phases_data(s, target, 0, Mode::Fentry, |_| None, None);
    let scratch = |reject| Scratch {
        map: data.scratch_map.clone(),
        reject,
        used: 0,
    };
    let mut starts = Vec::new();
    let mut scratch_used = 0;
    let mut scratch_over = None;
    for (k, point) in points.starts.iter().enumerate() {
        let mut start = Phase::new(s, target, false, false, false, scratch(""))
            .at_usdt(point.point.usdt.is_some());
        let filter = point.filter.as_ref().map(|f| start.expr(f));
        let key = start.expr(&point.key);
        if s.uses_sched() {
            // The scheduler's totals saved below are read at the start time: read it first.
            start.entry_time();
        }
        let lines = start.take_lines();
        let mut values = Vec::new();
        for (i, v) in point.values.iter().enumerate() {
            let save = start.save_value(i, v, "fslat_v.ev");
            values.extend(start.take_lines());
            values.push(save);
        }
        scratch_used = scratch_used.max(start.scratch_used());
        scratch_over = scratch_over.or(over_scratch([("at START", &start)]));
        starts.push(StartData {
            prog: s.span_start_prog(k),
            section: point.point.section(),
            lines,
            filter,
            key,
            values,
            time_early: start.uses_start(),
        });
    }
    let mut end = Phase::new(s, target, false, false, false, scratch(""));
    let end_key = end.expr(&points.end_key);
    data.scratch = data.scratch.max(scratch_used).max(end.scratch_used());
    data.scratch_over = data
        .scratch_over
        .or(scratch_over)
        .or(over_scratch([("at END", &end)]));
    data.span = Some(SpanData {
        starts,
        end_section: points.end.section(),
        values: s.entry_layout().1,
        end_lines: end.take_lines(),
        end_key,
        depth_map: points.nests().then(|| s.span_depth_map()),
        depth: SPAN_DEPTH,
    });
    data
}

/// An `on` point: fexit mode's one program (the filter, then the actions), attached at
/// the point instead of a return; `ts` is the point's time.
fn on_data(s: &Session) -> SessionData {
    let mut data = phases_data(s, &s.targets[0], 0, Mode::Fexit, |_| None, None);
    match &s.on {
        Some(_) if s.user.is_some() => {
            // A user function's entry: a classic uprobe, attached by the runtime.
            data.shape.section = "uprobe".into();
            data.shape.ctx_decl = USER_CTX;
        }
        Some(point) => data.shape.section = point.section(),
        None => {
            // A profile: libbpf does not attach a perf event program, the runtime opens
            // the perf events. The program reads nothing of its context itself.
            data.shape.section = resources::PROFILE_SECTION.into();
            data.shape.ctx_decl = PROFILE_CTX;
            data.profile = true;
        }
    }
    data.entry_time_early = s.needs_entry();
    data.on = true;
    data
}

#[cfg(test)]
mod tests;
