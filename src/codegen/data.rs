//! The data the templates render, one struct per thing they declare: the program, its
//! maps and shared layouts, each event and aggregation map, each session's programs.
//! `codegen/mod.rs` and `codegen/sessions.rs` fill them; `codegen/templates.rs` renders.

use super::shapes::ProgShape;
use crate::aggregate::values::CStruct;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
pub(super) struct ProgramData {
    pub(super) version: &'static str,
    pub(super) mode: String,
    /// The session kfuncs take the program's context (Linux 7.0+).
    pub(super) session_kfuncs_ctx: bool,
    pub(super) uses_path: bool,
    /// A USDT point: libbpf's `usdt.bpf.h` (through `fslat_usdt.bpf.h`).
    pub(super) uses_usdt: bool,
    pub(super) uses_kstack: bool,
    pub(super) uses_ustack: bool,
    /// The scheduler hooks of `oncpu` and its kin.
    pub(super) uses_sched: bool,
    /// An offcpu item: the scheduler header's task states, without its per-call hooks.
    pub(super) uses_offcpu: bool,
    /// `wait_kstack`, `wait_ustack`: the hooks take the stacks where a thread leaves.
    pub(super) wait_kstack: bool,
    pub(super) wait_ustack: bool,
    /// The stack id of a call that never left the CPU.
    pub(super) no_stack: i32,
    /// Whether the program has a ring buffer: for events, and for ustack's announcements.
    pub(super) ring: bool,
    /// `ustack` on a kernel with `bpf_find_vma`: frames resolved to files at capture.
    pub(super) ustack_files: Option<UstackFilesData>,
    /// `--ustack-bytes N`: registers and N bytes of stack copied at capture.
    pub(super) ustack_copy: Option<UstackCopyData>,
    pub(super) ustack_walk: Option<UstackWalkData>,
    /// BPF atomics with fetch/cmpxchg (5.12+); without, min/max are plain stores.
    pub(super) atomics: bool,
    /// fentry mode's call stacks in task storage (5.11+), else in a hash map.
    pub(super) task_storage: bool,
    /// Linux 5.17+; before it, the cgroup ancestor of `under()` is read with CO-RE.
    pub(super) bpf_loop: bool,
    /// The `bpf-runtime/` headers the program's aggregations need beyond fslat.bpf.h.
    pub(super) agg_headers: Vec<&'static str>,
    /// The aggregation value structs the runtime reads, checked field by field.
    pub(super) agg_structs: Vec<CStruct>,
    /// The most `entry()` values one session saves (0: none; FSLAT_ENTRY_VALUES).
    pub(super) entry_values: usize,
    pub(super) session_count: usize,
    pub(super) maps: MapNames,
    pub(super) settings: SettingsData,
    /// `struct fslat_args`, a bundle's script arguments; none when they are constants.
    pub(super) args: Option<ArgsData>,
    /// `struct fslat_counters`, from `check::counters`.
    pub(super) counters: Vec<LayoutField>,
    /// Each of those fields by its name: templates spell a counter `{{@root.counter.NAME}}`,
    /// which fails to render for a name the table does not have.
    pub(super) counter: BTreeMap<&'static str, &'static str>,
    pub(super) counters_size: usize,
    pub(super) numbers: Vec<Number>,
    pub(super) announce: AnnounceData,
    pub(super) structs: Vec<StructData>,
    pub(super) events: Vec<EventData>,
    pub(super) aggregations: Vec<AggMapData>,
    pub(super) sessions: Vec<SessionData>,
}

/// The names of the maps and sections the templates and fslat.bpf.h define.
#[derive(Serialize)]
pub(super) struct MapNames {
    pub(super) events: &'static str,
    pub(super) counters: &'static str,
    pub(super) kstacks: &'static str,
    pub(super) kstacks_2: &'static str,
    pub(super) ustacks: &'static str,
    pub(super) ustacks_2: &'static str,
    pub(super) stack_second: u32,
    pub(super) ustack_walked: u32,
    pub(super) ustack_tgids: &'static str,
    pub(super) interval: &'static str,
    pub(super) path_scratch: &'static str,
    pub(super) uframes: &'static str,
    pub(super) ufiles: &'static str,
    pub(super) ustack_scratch: &'static str,
    pub(super) sched: &'static str,
    pub(super) multi_section: &'static str,
}

/// The sizes of `ustack`'s resolved frames, from `check::resources`.
#[derive(Serialize)]
pub(super) struct UstackFilesData {
    pub(super) frames_entries: u32,
    pub(super) files_entries: u32,
    pub(super) depth: usize,
    pub(super) frame_size: usize,
    pub(super) frame_offset_at: usize,
    pub(super) path_at: usize,
    pub(super) path_cap: usize,
}

/// `ustack`'s copies (`Program::ustack_bytes`), from `check::resources`.
#[derive(Serialize)]
pub(super) struct UstackCopyData {
    pub(super) bytes: u32,
    /// A profile's program runs in an interrupt, where Linux before 6.1 takes only
    /// preallocated hash maps: the copies' map is then preallocated, and smaller.
    pub(super) prealloc: bool,
    pub(super) entries: u32,
    pub(super) map: &'static str,
    pub(super) scratch: &'static str,
    pub(super) ip_at: usize,
    pub(super) sp_at: usize,
    pub(super) bp_at: usize,
    pub(super) len_at: usize,
    pub(super) nvmas_at: usize,
    pub(super) vmas_at: usize,
    pub(super) vma_size: usize,
    pub(super) vma_file_at: usize,
    pub(super) vmas: usize,
    pub(super) bytes_at: usize,
}

/// `ustack` walked in the kernel (`Program::ustack_walk`), from `check::resources`.
#[derive(Serialize)]
pub(super) struct UstackWalkData {
    pub(super) rows_map: &'static str,
    pub(super) procs_map: &'static str,
    pub(super) walks_map: &'static str,
    pub(super) slots_map: &'static str,
    pub(super) scratch_map: &'static str,
    pub(super) turns: u32,
    pub(super) rows_entries: u32,
    pub(super) row_steps: u32,
    pub(super) row_size: usize,
    pub(super) procs_entries: u32,
    pub(super) maps: usize,
    pub(super) map_steps: u32,
    pub(super) map_size: usize,
    pub(super) maps_at: usize,
    pub(super) gen_at: usize,
    pub(super) error: String,
    pub(super) kinds: [u8; 5],
}

/// A number `bpf-runtime/` defines that the Rust side computes with too.
#[derive(Serialize)]
pub(super) struct Number {
    /// Its C macro.
    pub(super) name: &'static str,
    pub(super) value: String,
    /// Its Rust constant.
    pub(super) from: &'static str,
}

/// The ring buffer record `ustack` announces a process with.
#[derive(Serialize)]
pub(super) struct AnnounceData {
    pub(super) id: u32,
    pub(super) tgid_offset: usize,
}

#[derive(Serialize)]
pub(super) struct SettingsData {
    pub(super) section: &'static str,
    pub(super) fields: Vec<LayoutField>,
    pub(super) size: usize,
}

#[derive(Serialize)]
pub(super) struct ArgsData {
    pub(super) section: &'static str,
    pub(super) fields: Vec<ArgFieldData>,
    pub(super) size: usize,
}

#[derive(Serialize)]
pub(super) struct ArgFieldData {
    pub(super) name: String,
    pub(super) decl: String,
    pub(super) offset: usize,
    pub(super) about: String,
}

/// A field of a struct both sides read, with where fslat expects it.
#[derive(Serialize)]
pub(super) struct LayoutField {
    pub(super) name: &'static str,
    pub(super) decl: String,
    pub(super) offset: usize,
    pub(super) about: &'static str,
}

#[derive(Serialize)]
pub(super) struct StructData {
    pub(super) c_name: String,
    pub(super) members: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct EventData {
    pub(super) id: u32,
    pub(super) label: String,
    pub(super) size: u32,
    pub(super) fields: Vec<FieldData>,
}

#[derive(Serialize)]
pub(super) struct FieldData {
    pub(super) name: String,
    pub(super) member: String,
    pub(super) decl: String,
    pub(super) offset: u32,
}

#[derive(Serialize)]
pub(super) struct AggMapData {
    pub(super) id: usize,
    pub(super) map: String,
    pub(super) title: String,
    pub(super) key_fields: Vec<String>,
    pub(super) key_size: u32,
    pub(super) value_type: String,
    pub(super) per_cpu_array: bool,
    /// percentiles: the per-CPU map of counts and maxima.
    pub(super) max_map: Option<String>,
    /// The aggregation's own C declarations (`lhist`: its value struct).
    pub(super) value_decl: Vec<String>,
    pub(super) entries: u32,
    /// A profile's: its program runs in an interrupt, where Linux before 6.1 takes only
    /// preallocated hash maps ("perf_event programs can only use preallocated hash map").
    pub(super) prealloc: bool,
}

#[derive(Serialize)]
pub(super) struct SessionData {
    pub(super) index: usize,
    /// The fsession (or multi-attach) program's name.
    pub(super) prog: String,
    /// fentry mode: the two programs and the map of calls in flight between them.
    pub(super) entry_prog: String,
    pub(super) exit_prog: String,
    pub(super) calls_map: String,
    /// fsession: the map of `entry()` values between entry and return.
    pub(super) entry_values_map: String,
    /// A kprobe session keeps its `entry()` values on the task's stack of calls in flight
    /// (`calls_map`, fentry mode's), under the address of the call's session cookie: a
    /// task storage lookup where a hash map keyed by that address cost an update at
    /// entry and a lookup and a delete at return (docs/performance.md, issue 42).
    pub(super) calls_stack: bool,
    pub(super) label: String,
    pub(super) func: String,
    pub(super) inflight: u32,
    pub(super) entry_time_early: bool,
    /// Nothing reads the entry time (`Session::reads_entry_time`): a session program's entry
    /// marks the call accepted with 1 in its cookie, without reading the clock.
    pub(super) untimed: bool,
    pub(super) entry_lines: Vec<String>,
    pub(super) entry_filter: Option<String>,
    /// `entry()`: what entry saves for return, after the filter.
    pub(super) entry_values: Option<EntryValuesData>,
    pub(super) return_lines: Vec<String>,
    pub(super) error_check: Option<String>,
    pub(super) return_filter: Option<String>,
    pub(super) action_lines: Vec<String>,
    /// Each `emit`'s or `printf`'s event, in the script's order.
    pub(super) events: Vec<EventCode>,
    pub(super) aggregation_lines: Vec<String>,
    /// Set when the session is one multi-attach program for all its functions.
    pub(super) multi: Option<MultiData>,
    /// One program at return only (`Mode::Fexit`, `Mode::FexitMulti`): the entry filter
    /// runs there, before the return phase.
    pub(super) exit_only: bool,
    /// That one program runs at entry (`Mode::KprobeEntry`).
    pub(super) entry_only: bool,
    /// That one program is a kretprobe at return (`Mode::KprobeReturn`): no parameter
    /// is read there.
    pub(super) return_probe: bool,
    /// The per-CPU scratch map of this session's program (or fentry/fexit pair), and
    /// its bytes per slot (0: it has none).
    pub(super) scratch_map: String,
    pub(super) scratch: u32,
    /// The first of this session's programs' phases that needs more of the scratch map
    /// than a per-CPU value holds, and its bytes: `generate` refuses the script.
    #[serde(skip)]
    pub(super) scratch_over: Option<(&'static str, u32)>,
    #[serde(flatten)]
    pub(super) shape: ProgShape,
    /// A span's START program and END's key (its session's `entry_*` are END's filter).
    pub(super) span: Option<SpanData>,
    /// An `on` point's one program (its section is `shape.section`).
    pub(super) on: bool,
    /// A profile's one program (an `on` program at a perf event): it counts every sample.
    pub(super) profile: bool,
    /// An offcpu item's programs at the scheduler's switch and wakeup.
    pub(super) offcpu: bool,
    /// The return phase reads the clock (a span's END reads it in the template).
    pub(super) reads_now: bool,
    /// It reads the scheduler's totals: a call in flight makes the hooks follow its thread.
    pub(super) sched: bool,
    /// A phase reads a string that may be in user memory (`Phase::reads_user_str`).
    #[serde(skip)]
    pub(super) reads_user_str: bool,
}

/// One event a session's return sends: the stores of its fields into `fslat_e`, under
/// its `if`s.
#[derive(Serialize)]
pub(super) struct EventCode {
    pub(super) id: u32,
    pub(super) stores: Vec<String>,
    pub(super) guard: Option<String>,
}

#[derive(Serialize)]
pub(super) struct SpanData {
    pub(super) starts: Vec<StartData>,
    pub(super) end_section: String,
    pub(super) values: usize,
    pub(super) end_lines: Vec<String>,
    pub(super) end_key: String,
    /// Keyed by pid at both ends: the map of each thread's depth (`SpanPoints::nests`).
    pub(super) depth_map: Option<String>,
    pub(super) depth: u32,
    /// END's program runs its body with preemption off (a USDT point's, `ProgShape::preempt_off`).
    pub(super) end_preempt_off: bool,
}

/// One START's program.
#[derive(Serialize)]
pub(super) struct StartData {
    pub(super) prog: String,
    pub(super) section: String,
    pub(super) lines: Vec<String>,
    pub(super) filter: Option<String>,
    pub(super) key: String,
    /// What it saves for `start.NAME`, in order.
    pub(super) values: Vec<String>,
    /// The start time is read before the lines (for what they save on its clock).
    pub(super) time_early: bool,
    /// Its program runs its body with preemption off (a USDT point's, `ProgShape::preempt_off`).
    pub(super) preempt_off: bool,
}

#[derive(Serialize)]
pub(super) struct EntryValuesData {
    /// The statements that fill `__u64 fslat_ev[FSLAT_ENTRY_VALUES]`, with what they need.
    pub(super) saves: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct MultiData {
    pub(super) count: usize,
    /// One function: its index is 0, no need to ask the link's cookie.
    pub(super) single: bool,
    /// One body loaded once per function: its index is `FSLAT_FN_INDEX()`, which the
    /// loader writes into each copy.
    pub(super) shared: bool,
    /// What attaches the program to all the functions.
    pub(super) link: &'static str,
    /// C declarations of the tables the program indexes by function.
    pub(super) tables: Vec<String>,
    pub(super) funcs: Vec<String>,
}
