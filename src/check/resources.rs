//! What the BPF object made from a checked program holds, by name: its maps, programs and
//! sections, the settings fslat writes into it before load and the counters it reads
//! back. This is the contract between codegen (with `templates/` and `bpf-runtime/`) and
//! the runtime: codegen spells every name from here and the runtime finds every name
//! here, so renaming a map is one edit.

use super::program::{Aggregation, ArgKind, Program, ScriptArg, Session};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A session's per-CPU scratch map (`Session::scratch_map`), where what the 512-byte BPF
/// stack cannot hold goes: strings and keys of at least `SCRATCH_FROM` bytes, and small
/// strings past `STACK_STRINGS` bytes a phase. Codegen places values by these; the
/// checker refuses a session whose phase could need more than `SCRATCH_BYTES`.
pub const SCRATCH_FROM: u32 = 64;
/// Bytes of small strings (`comm`) a phase keeps on the stack.
pub const STACK_STRINGS: u32 = 128;
/// What one phase may put in the scratch map: the kernel's limit for a per-CPU value
/// (PCPU_MIN_UNIT_SIZE), less room for the stack's overflow into it.
pub const SCRATCH_BYTES: u32 = 32 * 1024 - 1024;

/// How sessions attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// One program at entry and return (Linux 7.0+).
    Fsession,
    /// An fentry and an fexit program sharing a per-thread map.
    Fentry,
    /// fsession, and a session of several functions is one program attached to all of
    /// them through one link (Linux 7.2 multi-attach).
    FsessionMulti,
    /// A session that needs nothing from the entry (`Session::needs_entry`): one fexit
    /// program per function, in any kernel mode (fslat chooses it, not the user).
    Fexit,
    /// The same for a session of several functions in fsession-multi mode: one fexit
    /// program attached to all of them through one link (`BPF_TRACE_FEXIT_MULTI`).
    FexitMulti,
    /// A user-space session as one uprobe session program at entry and return, attached
    /// to all its functions through one uprobe_multi link (Linux 6.13).
    UprobeSession,
    /// A user-space session as a uprobe and a uretprobe program, each attached to all
    /// its functions through one uprobe_multi link (6.6), sharing a per-task stack of
    /// calls in flight.
    UprobeMulti,
    /// A user-space session as a uprobe and a uretprobe program per function (any
    /// kernel), sharing a per-task stack of calls in flight.
    Uprobe,
    /// A kernel session as one kprobe session program at entry and return, attached to
    /// all its functions through one kprobe_multi link in session mode (Linux 6.10). A
    /// kprobe handler runs with preemption off, so no call is skipped for another's
    /// preempted program (docs/performance.md, issue 30).
    KprobeSession,
}

impl Mode {
    /// Every mode, in one list: what builds objects for each mode walks it.
    pub const ALL: [Mode; 9] = [
        Mode::Fsession,
        Mode::Fentry,
        Mode::FsessionMulti,
        Mode::Fexit,
        Mode::FexitMulti,
        Mode::UprobeSession,
        Mode::UprobeMulti,
        Mode::Uprobe,
        Mode::KprobeSession,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Fsession => "fsession",
            Mode::Fentry => "fentry",
            Mode::FsessionMulti => "fsession-multi",
            Mode::Fexit => "fexit",
            Mode::FexitMulti => "fexit-multi",
            Mode::UprobeSession => "uprobe-session",
            // One mode to the user: the same pair of programs, attached either way.
            Mode::UprobeMulti | Mode::Uprobe => "uprobe",
            Mode::KprobeSession => "kprobe-session",
        }
    }

    /// Whether its programs take a `pt_regs` context (kprobes, uprobes): arguments and
    /// the return value are read from registers, and what the return phase needs of the
    /// arguments is saved at entry.
    pub fn reads_registers(self) -> bool {
        self.is_user() || self == Mode::KprobeSession
    }

    /// Whether this is how user-space sessions run.
    pub fn is_user(self) -> bool {
        matches!(self, Mode::UprobeSession | Mode::UprobeMulti | Mode::Uprobe)
    }

    /// Whether session `s`'s functions share one program body in this mode: fentry,
    /// fexit and fsession programs of a session of several functions. The object holds
    /// the body once; fslat's loader loads a copy per function with the function's index
    /// and argument slots written into its instructions (`FN_MARK`, `param_mark`,
    /// `RET_MARK`; runtime/shared.rs), so the object does not grow with the functions.
    pub fn shares_body(self, s: &Session) -> bool {
        s.several
            && s.span.is_none()
            && s.on.is_none()
            && s.profile.is_none()
            && s.user.is_none()
            && matches!(
                self.of_session(s),
                Mode::Fentry | Mode::Fexit | Mode::Fsession
            )
    }

    /// The modes `program`'s sessions run in, as the run's messages name them
    /// (`fsession`, or `fsession + fsession-multi` for a mix of one- and several-function
    /// sessions on 7.2).
    pub fn of_program(self, program: &Program) -> String {
        let mut names: Vec<&str> = Vec::new();
        for s in &program.sessions {
            let n = match (&s.span, &s.on) {
                (Some(_), _) => "span",
                (_, Some(_)) => "on",
                _ if s.profile.is_some() => "profile",
                _ => self.of_session(s).name(),
            };
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if names.is_empty() {
            names.push(self.name());
        }
        names.join(" + ")
    }

    /// The mode session `s` runs in: a one-function session in fsession-multi mode is
    /// an ordinary fsession program; a session that needs nothing from the entry runs at
    /// return only (fexit, or fexit-multi for several functions in fsession-multi mode).
    pub fn of_session(self, s: &Session) -> Mode {
        if let Some(user) = &s.user {
            return user.mode;
        }
        if s.span.is_some() {
            // Its two ends are entry programs (fentry or tp_btf), each attached alone.
            return Mode::Fentry;
        }
        if s.on.is_some() || s.profile.is_some() {
            // One program at the point (fentry or tp_btf), shaped as fexit mode's one
            // program: a filter, then the actions.
            return Mode::Fexit;
        }
        let multi = self == Mode::FsessionMulti && s.several;
        match self {
            // Return-only sessions stay kprobe sessions: an fexit trampoline would skip
            // calls as fsession does.
            // A kprobe reads arguments from registers: one passed on the stack needs
            // the trampoline, which has them all.
            Mode::KprobeSession if s.reads_stack_argument() => Mode::Fentry,
            Mode::KprobeSession => Mode::KprobeSession,
            _ if !s.needs_entry() && multi => Mode::FexitMulti,
            _ if !s.needs_entry() => Mode::Fexit,
            Mode::FsessionMulti if !s.several => Mode::Fsession,
            m => m,
        }
    }
}

/// Arguments passed in registers (x86-64: rdi, rsi, rdx, rcx, r8, r9); a kprobe or
/// uprobe reads no others.
pub const REGISTER_ARGS: usize = 6;

impl Session {
    /// Whether it reads a parameter that some function of it takes on the stack (after
    /// the `REGISTER_ARGS` registers).
    pub fn reads_stack_argument(&self) -> bool {
        let read = self.params_read();
        self.targets.iter().any(|t| {
            read.iter()
                .any(|&i| t.slots.get(i).is_some_and(|&slot| slot >= REGISTER_ARGS))
        })
    }
}

/// The ring buffer events (and `ustack`'s announcements) go through.
pub const EVENTS_MAP: &str = "fslat_events";
/// Each session's counters: a per-CPU array of `struct fslat_counters` (`check::counters`),
/// by session index.
pub const COUNTERS_MAP: &str = "fslat_counters";
/// The stack maps the ids of `kstack` and `ustack` values name (fslat_stacks.bpf.h).
pub const KSTACKS_MAP: &str = "fslat_kstacks";
pub const USTACKS_MAP: &str = "fslat_ustacks";
/// User stacks whose hash bucket in the first map holds another stack (short-lived
/// processes each bring new addresses, so buckets fill): their id has `USTACK_SECOND`.
pub const USTACKS_MAP_2: &str = "fslat_ustacks_2";
pub const USTACK_SECOND: u32 = 1 << 30;
/// A stack id that stands for a stack without frames: what `bpf_get_stackid` returns
/// then (-EFAULT), for a profile's sample in user mode (no kernel stack) or in a kernel
/// thread (no user stack). `FSLAT_EMPTY_STACK` in fslat_stacks.bpf.h (a test checks both).
pub const EMPTY_STACK: i64 = -(libc::EFAULT as i64);
/// The processes whose user stacks were announced (only the kernel side reads it).
pub const USTACK_TGIDS_MAP: &str = "fslat_ustack_tgids";
/// `path()`'s per-CPU buffer for walking a path (only the kernel side reads it).
pub const PATH_SCRATCH_MAP: &str = "fslat_path_scratch";
/// With `bpf_find_vma` (`Features::find_vma`), `ustack`'s frames resolved at capture
/// (fslat_stacks.bpf.h, `fslat_ustack_files`): by the packed ustack key, `UFRAME_DEPTH` frames of
/// `UFRAME_SIZE` bytes, each a `u32` file number (0: none) and the `u32` offset in it.
pub const UFRAMES_MAP: &str = "fslat_uframes";
/// The files those frames name: by file identity, a `u32` number and the path (a
/// NUL-terminated string of at most `UFILE_PATH_CAP` bytes at `UFILE_PATH_AT`).
pub const UFILES_MAP: &str = "fslat_ufiles";
/// The per-CPU work area of one resolution (only the kernel side reads it).
pub const USTACK_SCRATCH_MAP: &str = "fslat_ustack_scratch";
/// `oncpu` and its kin: each thread's running totals, kept by the scheduler hooks
/// (fslat_sched.bpf.h; only the kernel side reads it).
pub const SCHED_MAP: &str = "fslat_sched_totals";
/// The stack id of `wait_kstack`/`wait_ustack` for a call that never left the CPU (in a
/// user stack's low 32 bits): not a stack, and not lost; shown as `[empty]`.
pub const NO_STACK: i32 = -2;
pub const UFRAME_DEPTH: usize = 127;
pub const UFRAME_SIZE: usize = 8;
pub const UFRAME_OFFSET_AT: usize = 4;
pub const UFILE_PATH_AT: usize = 4;
pub const UFILE_PATH_CAP: usize = 128;
/// Distinct (process, stack) pairs and files resolved; the maps take memory as they fill.
pub const UFRAMES_ENTRIES: u32 = 16384;
pub const UFILES_ENTRIES: u32 = 4096;
/// With `--ustack-bytes N` (`Program::ustack_bytes`), `ustack`'s copies (fslat_stacks.bpf.h,
/// `fslat_ustack_copy`): by the packed ustack key, `struct fslat_ustack_copy`: the user
/// `ip`, `sp`, `bp` (`u64`s at `UCOPY_IP_AT`, `UCOPY_SP_AT`, `UCOPY_BP_AT`), the `u32`
/// length copied at `UCOPY_LEN_AT`, and the stack's bytes from `sp` on at `UCOPY_BYTES_AT`.
pub const UCOPIES_MAP: &str = "fslat_ucopies";
/// The per-CPU work area of one copy (only the kernel side reads it).
pub const UCOPY_SCRATCH_MAP: &str = "fslat_ucopy_scratch";
pub const UCOPY_IP_AT: usize = 0;
pub const UCOPY_SP_AT: usize = 8;
pub const UCOPY_BP_AT: usize = 16;
pub const UCOPY_LEN_AT: usize = 24;
pub const UCOPY_BYTES_AT: usize = 32;
/// Distinct (process, stack) copies kept; the map takes memory as it fills.
pub const UCOPIES_ENTRIES: u32 = 4096;
/// The most `--ustack-bytes` (perf's `--call-graph dwarf` takes up to 65528).
pub const UCOPY_MAX: u32 = 32768;
/// `percentiles`' interval generation, which user space bumps before each `-i` read
/// (fslat_pct.bpf.h).
pub const INTERVAL_MAP: &str = "fslat_interval";
/// The schema id of a ring buffer record that is not an event: `struct fslat_announce`
/// (fslat_stacks.bpf.h), the `u32` tgid after it, a process whose user stacks must be symbolized.
pub const ANNOUNCE_ID: u32 = 0xffff_ffff;
/// Where the announced tgid sits in the record.
pub const ANNOUNCE_TGID_OFFSET: usize = 4;
/// The section of multi-attach programs, which libbpf cannot attach by itself.
/// A shared body's marks (`Mode::shares_body`): the immediate of `FSLAT_FN_INDEX()`'s
/// `r = imm` (the function's index in the session's tables) ...
pub const FN_MARK: i32 = 0x7f5a_1a70;
/// ... the offset of `FSLAT_CTX_AT(ctx, RET_MARK)`'s context load (the return value's
/// slot) ...
pub const RET_MARK: i16 = 0x7bff;
/// ... and of `FSLAT_CTX_AT(ctx, param_mark(i))` (parameter `i`'s slot).
pub fn param_mark(i: usize) -> i16 {
    PARAM_MARK + i as i16
}
const PARAM_MARK: i16 = 0x7c00;

/// What a mark found in a shared body stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Fn,
    Ret,
    Param(usize),
}

impl Mark {
    /// The mark an instruction's offset is, if any.
    pub fn of_offset(off: i16) -> Option<Mark> {
        match off {
            RET_MARK => Some(Mark::Ret),
            o if (PARAM_MARK..PARAM_MARK + 0x100).contains(&o) => {
                Some(Mark::Param((o - PARAM_MARK) as usize))
            }
            _ => None,
        }
    }
}

pub const MULTI_SECTION: &str = "fslat.multi";
/// The section of a profile's program: the runtime attaches it to a perf event per CPU.
pub const PROFILE_SECTION: &str = "perf_event";

impl Aggregation {
    /// The hash map of its values, by key.
    pub fn map(&self) -> String {
        format!("fslat_agg_{}", self.id)
    }

    /// Whether the map is a one-slot per-CPU array: an aggregation without keys whose
    /// value may start as zeros (no insert, and the verifier inlines the lookup). The
    /// runtime adds the CPUs' values up.
    pub fn per_cpu_array(&self) -> bool {
        self.keys.is_empty() && self.func.zero_start() && !self.func.per_cpu_max()
    }

    /// `percentiles`: the per-CPU map of each key's count and max.
    pub fn max_map(&self) -> Option<String> {
        self.func
            .per_cpu_max()
            .then(|| format!("{}_max", self.map()))
    }

    /// What its aggregation's C and decoding take of it.
    pub fn spec(&self) -> crate::aggregate::Spec {
        crate::aggregate::Spec {
            id: self.id,
            duration: self.duration,
            linear: self.linear,
            max_map: self.max_map(),
            count_lost: super::counters::AGG_LOST.c_increment("fslat_c"),
        }
    }
}

/// What a BPF program of the object does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgRole {
    /// fsession: entry and return of one function.
    Session,
    /// fentry mode: the entry of one function.
    Entry,
    /// fentry mode: the return of one function.
    Exit,
    /// fsession-multi: entry and return of every function of a session.
    Multi,
}

impl ProgRole {
    const ALL: [ProgRole; 4] = [
        ProgRole::Session,
        ProgRole::Entry,
        ProgRole::Exit,
        ProgRole::Multi,
    ];
}

/// One BPF program of the object: what it does, for which session and function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prog {
    pub role: ProgRole,
    /// Index into the program's sessions.
    pub session: usize,
    /// Index into the session's targets (0 for a multi-attach program, which has them all).
    pub target: usize,
}

impl Session {
    /// The name of its program of `role` for target `t`: `fslat_session_I` for a
    /// one-function session, `fslat_session_I_T` for one of several, `fslat_multi_I`.
    pub fn prog_name(&self, role: ProgRole, t: usize) -> String {
        let kind = match role {
            ProgRole::Multi => return format!("fslat_multi_{}", self.index),
            ProgRole::Session => "session",
            ProgRole::Entry => "entry",
            ProgRole::Exit => "exit",
        };
        format!("fslat_{kind}_{}", self.prog_suffix(t))
    }

    /// A span's program of its START `k`: `fslat_entry_I` for the first, `fslat_entry_I_K`
    /// for the others (a span has one target, so no several-function name is the same).
    pub fn span_start_prog(&self, k: usize) -> String {
        match k {
            0 => self.prog_name(ProgRole::Entry, 0),
            _ => format!("fslat_entry_{}_{k}", self.index),
        }
    }

    /// fentry mode: the map of target `t`'s calls in flight (`fslat_calls_I`, or
    /// `fslat_calls_I_T` for one of several functions).
    pub fn calls_map(&self, t: usize) -> String {
        format!("fslat_calls_{}", self.prog_suffix(t))
    }

    /// A span keyed by pid at both ends: each thread's depth of nested spans in flight
    /// (`SpanPoints::nests`), sized as the calls map.
    pub fn span_depth_map(&self) -> String {
        format!("fslat_depth_{}", self.prog_suffix(0))
    }

    /// fsession: the map of target `t`'s `entry()` values of calls in flight, for its
    /// program of `role` (`fslat_entry_I`, `fslat_entry_I_T`; one map for a multi-attach
    /// program). fentry mode keeps them in the calls map.
    pub fn entry_values_map(&self, role: ProgRole, t: usize) -> String {
        match role {
            ProgRole::Multi => format!("fslat_entry_{}", self.index),
            _ => format!("fslat_entry_{}", self.prog_suffix(t)),
        }
    }

    /// The per-CPU map of what the BPF stack cannot hold (strings, big keys) for its
    /// program of `role` for target `t` (`fslat_scratch_I`, `fslat_scratch_I_T`; in
    /// fentry mode the entry and exit programs share it).
    pub fn scratch_map(&self, role: ProgRole, t: usize) -> String {
        match role {
            ProgRole::Multi => format!("fslat_scratch_{}", self.index),
            _ => format!("fslat_scratch_{}", self.prog_suffix(t)),
        }
    }

    fn prog_suffix(&self, t: usize) -> String {
        if self.several {
            format!("{}_{t}", self.index)
        } else {
            self.index.to_string()
        }
    }
}

impl Program {
    /// Every program the object may have (in whichever mode it was generated), by name.
    pub fn progs(&self) -> HashMap<String, Prog> {
        let mut progs = HashMap::new();
        for s in &self.sessions {
            for role in ProgRole::ALL {
                let targets = if role == ProgRole::Multi {
                    1
                } else {
                    s.targets.len()
                };
                for target in 0..targets {
                    let prog = Prog {
                        role,
                        session: s.index,
                        target,
                    };
                    progs.insert(s.prog_name(role, target), prog);
                }
            }
            let starts = s.span.as_ref().map_or(0, |p| p.starts.len());
            for k in 1..starts {
                let prog = Prog {
                    role: ProgRole::Entry,
                    session: s.index,
                    target: 0,
                };
                progs.insert(s.span_start_prog(k), prog);
            }
        }
        progs
    }
}

/// The section of `fslat_settings`, the settings fslat writes before load: `const
/// volatile`, so the verifier prunes what a setting of 0 ("off") disables.
pub const SETTINGS_SECTION: &str = ".rodata.fslat";

/// The section of the constant tables a program of several functions indexes by
/// function (`fslat_funcs_N`, slots, return kinds), named explicitly: left to itself
/// clang puts a constant of 4, 8, 16 or 32 bytes in a mergeable `.rodata.cstN` section
/// while the object's BTF still describes it in `.rodata`, which libbpf then fails to
/// open ("failed to determine size from ELF": two functions of 7-letter names).
pub const TABLES_SECTION: &str = ".rodata";

/// A field of `struct fslat_settings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `-p` (and `-c` without cgroup v2): the one process traced; 0 traces every process.
    TargetTgid,
    /// `-c`: the cgroup v2 id whose tasks are traced; 0 traces every cgroup.
    TargetCgroup,
    /// `--cgroup PATH`: PATH's depth below the root (its ancestor level).
    UnderLevel,
    /// `--cgroup PATH`: PATH's cgroup id; tasks in it or below it are traced; 0: off.
    UnderCgroup,
}

impl Setting {
    pub const ALL: [Setting; 4] = [
        Setting::TargetTgid,
        Setting::TargetCgroup,
        Setting::UnderLevel,
        Setting::UnderCgroup,
    ];

    pub fn field(self) -> &'static str {
        match self {
            Setting::TargetTgid => "target_tgid",
            Setting::TargetCgroup => "target_cgroup",
            Setting::UnderLevel => "under_level",
            Setting::UnderCgroup => "under_cgroup",
        }
    }

    /// What it is, for the comment in the C.
    pub fn about(self) -> &'static str {
        match self {
            Setting::TargetTgid => "-p: the one process traced; 0 traces every process",
            Setting::TargetCgroup => "-c: the cgroup v2 id traced; 0 traces every cgroup",
            Setting::UnderLevel => "--cgroup: the depth of its cgroup below the root",
            Setting::UnderCgroup => "--cgroup: the cgroup id traced, with all below it; 0: off",
        }
    }

    /// Every setting is an unsigned integer of this many bytes.
    pub fn size(self) -> usize {
        match self {
            Setting::TargetTgid | Setting::UnderLevel => 4,
            Setting::TargetCgroup | Setting::UnderCgroup => 8,
        }
    }

    /// Where it sits in the struct (each is aligned to its size, in the order of `ALL`).
    pub fn offset(self) -> usize {
        let mut at: usize = 0;
        for s in Setting::ALL {
            at = at.div_ceil(s.size()) * s.size();
            if s == self {
                break;
            }
            at += s.size();
        }
        at
    }

    /// The size of the whole struct.
    pub fn struct_size() -> usize {
        let end = Setting::ALL
            .iter()
            .map(|s| s.offset() + s.size())
            .max()
            .unwrap_or(0);
        let align = Setting::ALL.iter().map(|s| s.size()).max().unwrap_or(1);
        end.div_ceil(align) * align
    }
}

/// The section of `struct fslat_args`, a bundle's script arguments (`Program::args`),
/// which fslat writes before load (`Program::args_image`): `const volatile`, so the
/// verifier knows each value. Short enough for the kernel's 15-byte map names.
pub const ARGS_SECTION: &str = ".rodata.args";

/// The field of `struct fslat_args` that holds `$n` (`$#` for 0).
pub fn arg_field(n: usize) -> String {
    match n {
        0 => "count".into(),
        n => format!("a{n}"),
    }
}

/// A field of `struct fslat_args`: the integers and durations first (8 bytes each), then
/// the strings (char arrays of a multiple of 8 bytes), each group by number.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgField {
    pub arg: ScriptArg,
    pub offset: usize,
    pub size: usize,
}

impl ArgField {
    /// Its C declaration.
    pub fn decl(&self) -> String {
        let name = arg_field(self.arg.n);
        match self.arg.kind {
            ArgKind::Int => format!("__s64 {name}"),
            ArgKind::Duration => format!("__u64 {name}"),
            ArgKind::Str { cap } => format!("char {name}[{cap}]"),
        }
    }
}

/// Why a run's arguments do not fit the program (a bundle's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error(
        "`${n}` is not given: the program reads it, and this run has {given} argument{}; give it after the bundle: `fslat FILE ARG1 ...`",
        if *given == 1 { "" } else { "s" }
    )]
    Missing { n: usize, given: usize },
    #[error(
        "`{name}` is {kind} in this bundle, and `{word}` is not one: give {kind}, or build the bundle with an example of what `{name}` takes (`fslat build SCRIPT ... {word} ... -o FILE`)"
    )]
    Kind {
        name: String,
        kind: &'static str,
        word: String,
    },
    #[error(
        "`{name}` holds at most {max} bytes in this bundle, and `{word}` has {len}; build it with an example that long: `fslat build SCRIPT ... {word} ... -o FILE`"
    )]
    TooLong {
        name: String,
        max: u32,
        word: String,
        len: usize,
    },
    #[error(
        "`{name}` is fixed at `{built}` in this bundle ({by} compiled in when it was built), and this run gives `{word}`: run it with `{built}`, or build it again with `fslat build SCRIPT ... {word} ... -o FILE`"
    )]
    Fixed {
        name: String,
        built: String,
        by: String,
        word: String,
    },
}

impl Program {
    /// The fields of `struct fslat_args`, in their order; empty when `$1`.. are
    /// constants.
    pub fn arg_fields(&self) -> Vec<ArgField> {
        let (ints, strings): (Vec<&ScriptArg>, Vec<&ScriptArg>) = self
            .args
            .iter()
            .partition(|a| !matches!(a.kind, ArgKind::Str { .. }));
        let mut at = 0;
        let mut fields = Vec::new();
        for arg in ints.into_iter().chain(strings) {
            let size = match arg.kind {
                ArgKind::Str { cap } => cap as usize,
                _ => 8,
            };
            fields.push(ArgField {
                arg: arg.clone(),
                offset: at,
                size,
            });
            at += size;
        }
        fields
    }

    /// The size of `struct fslat_args` (every field's size is a multiple of 8).
    pub fn args_size(&self) -> usize {
        self.arg_fields().last().map_or(0, |f| f.offset + f.size)
    }

    /// The initial value of `struct fslat_args` for a run with `words` as `$1`..: each
    /// argument the program takes must be given, of its kind, and where it is fixed, the
    /// value it was built with.
    pub fn args_image(&self, words: &[String]) -> Result<Vec<u8>, ArgError> {
        use super::positional::argument_value;
        use super::program::{ExprKind, Ty};
        let mut fields = self.arg_fields();
        let mut image = vec![0u8; self.args_size()];
        // The first argument at fault is the one named.
        fields.sort_by_key(|f| f.arg.n);
        for f in &fields {
            let arg = &f.arg;
            let count = words.len().to_string();
            let word = match arg.n {
                0 => &count,
                n => words.get(n - 1).ok_or(ArgError::Missing {
                    n,
                    given: words.len(),
                })?,
            };
            let value = argument_value(word);
            if let Some(fixed) = &arg.fixed
                && value != argument_value(&fixed.word)
            {
                return Err(ArgError::Fixed {
                    name: arg.name(),
                    built: fixed.word.clone(),
                    by: fixed.by.clone(),
                    word: word.clone(),
                });
            }
            let kind_error = || ArgError::Kind {
                name: arg.name(),
                kind: arg.kind.describe(),
                word: word.clone(),
            };
            let bytes = match (arg.kind, &value.ty, &value.kind) {
                (ArgKind::Int, Ty::Int(_), ExprKind::Int(v)) => (*v as i64).to_ne_bytes().to_vec(),
                (ArgKind::Duration, Ty::Duration, ExprKind::Int(v)) => {
                    (*v as u64).to_ne_bytes().to_vec()
                }
                (ArgKind::Str { cap }, _, _) => {
                    if word.len() >= cap as usize {
                        return Err(ArgError::TooLong {
                            name: arg.name(),
                            max: cap - 1,
                            word: word.clone(),
                            len: word.len(),
                        });
                    }
                    word.as_bytes().to_vec()
                }
                _ => return Err(kind_error()),
            };
            image[f.offset..f.offset + bytes.len()].copy_from_slice(&bytes);
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_stack_id_is_the_one_the_bpf_side_gives() {
        let header = include_str!("../../bpf-runtime/fslat_stacks.bpf.h");
        assert!(header.contains(&format!("#define FSLAT_EMPTY_STACK {EMPTY_STACK}\n")));
    }

    #[test]
    fn programs_are_found_by_the_names_codegen_gives_them() {
        let script = "session vfs_read\nsession vfs_read, vfs_write";
        let ast = crate::syntax::parse(script).expect("parses");
        let p = super::super::check(&ast, script, &crate::btf::Fixture::new()).expect("checks");
        let (one, several) = (&p.sessions[0], &p.sessions[1]);
        let cases = [
            (
                one.prog_name(ProgRole::Session, 0),
                "fslat_session_0",
                ProgRole::Session,
                0,
                0,
            ),
            (
                one.prog_name(ProgRole::Exit, 0),
                "fslat_exit_0",
                ProgRole::Exit,
                0,
                0,
            ),
            (
                several.prog_name(ProgRole::Entry, 1),
                "fslat_entry_1_1",
                ProgRole::Entry,
                1,
                1,
            ),
            (
                several.prog_name(ProgRole::Multi, 0),
                "fslat_multi_1",
                ProgRole::Multi,
                1,
                0,
            ),
        ];
        let progs = p.progs();
        for (name, expected, role, session, target) in cases {
            assert_eq!(name, expected);
            let prog = Prog {
                role,
                session,
                target,
            };
            assert_eq!(progs.get(&name), Some(&prog), "{name}");
        }
        assert_eq!(progs.get("fslat_session_2"), None);
        assert_eq!(progs.get("fslat_session_1"), None, "one of several has _T");
        assert_eq!(several.calls_map(1), "fslat_calls_1_1");
    }

    /// A bundle's program for `script` checked with `build` as the words `fslat build`
    /// was given.
    fn bundle_program(script: &str, build: &[&str]) -> Program {
        let ast = crate::syntax::parse(script).expect("parses");
        let opts = super::super::Options {
            args: build.iter().map(|w| w.to_string()).collect(),
            runtime_args: true,
            ..Default::default()
        };
        super::super::check_with(&ast, script, &crate::btf::Fixture::new(), opts).expect("checks")
    }

    #[test]
    fn a_bundles_arguments_lie_integers_first_then_strings_each_written_as_given() {
        let p = bundle_program(
            "session vfs_read where comm == $3 and count == $1 and latency > $2 and $# > 2",
            &["7", "1ms", "bash"],
        );
        let layout: Vec<(String, usize, usize)> = p
            .arg_fields()
            .iter()
            .map(|f| (f.decl(), f.offset, f.size))
            .collect();
        assert_eq!(
            layout,
            [
                ("__s64 count".to_string(), 0, 8),
                ("__s64 a1".to_string(), 8, 8),
                ("__u64 a2".to_string(), 16, 8),
                ("char a3[64]".to_string(), 24, 64),
            ]
        );
        assert_eq!(p.args_size(), 88);
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let image = p
            .args_image(&words(&["-5", "250us", "python3", "extra"]))
            .expect("fits");
        let mut want = Vec::new();
        want.extend(4i64.to_ne_bytes());
        want.extend((-5i64).to_ne_bytes());
        want.extend(250_000u64.to_ne_bytes());
        want.extend(b"python3");
        want.resize(88, 0);
        assert_eq!(image, want);
        // Another kind than the build's word, a string too long, one missing.
        assert!(matches!(
            p.args_image(&words(&["x", "1ms", "bash"])),
            Err(ArgError::Kind { ref name, .. }) if name == "$1"
        ));
        assert!(matches!(
            p.args_image(&words(&["1", "5", "bash"])),
            Err(ArgError::Kind { ref name, .. }) if name == "$2"
        ));
        let long = "x".repeat(64);
        assert!(matches!(
            p.args_image(&words(&["1", "1ms", &long])),
            Err(ArgError::TooLong {
                max: 63,
                len: 64,
                ..
            })
        ));
        assert_eq!(
            p.args_image(&words(&["1"])),
            Err(ArgError::Missing { n: 2, given: 1 })
        );
    }

    #[test]
    fn a_bundles_argument_compiled_in_is_fixed_at_the_build_value() {
        let p = bundle_program(
            "session vfs_read where count == $1 { lhist(count, 0, $1 * 10, 1) }",
            &["0x10"],
        );
        let words = |w: &str| vec![w.to_string()];
        assert!(p.args_image(&words("16")).is_ok(), "the same value");
        assert!(p.args_image(&words("0x10")).is_ok());
        assert_eq!(
            p.args_image(&words("17")),
            Err(ArgError::Fixed {
                name: "$1".into(),
                built: "0x10".into(),
                by: "lhist's bounds".into(),
                word: "17".into(),
            })
        );
        // A script's arguments are constants: the program takes none at run time.
        let ast = crate::syntax::parse("session vfs_read where count == $1").expect("parses");
        let opts = super::super::Options {
            args: vec!["3".into()],
            ..Default::default()
        };
        let script = super::super::check_with(
            &ast,
            "session vfs_read where count == $1",
            &crate::btf::Fixture::new(),
            opts,
        )
        .expect("checks");
        assert!(script.args.is_empty());
        assert_eq!(script.args_image(&[]), Ok(Vec::new()));
    }
}
