//! What the BPF object made from a checked program holds, by name: its maps, programs and
//! sections, the settings fslat writes into it before load and the counters it reads
//! back. This is the contract between codegen (with `templates/` and `bpf-runtime/`) and
//! the runtime: codegen spells every name from here and the runtime finds every name
//! here, so renaming a map is one edit. The modes (`mode.rs`), the settings struct
//! (`settings.rs`) and the script arguments' struct (`args.rs`) are files of their own.

mod args;
pub mod mode;
mod policy;
mod settings;

pub use args::{ARGS_SECTION, ArgError, ArgField, arg_field};
pub use mode::{Mode, REGISTER_ARGS};
pub use settings::{SETTINGS_SECTION, Setting};

use super::program::{Aggregation, Program, Session};
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

/// The ring buffer events (and `ustack`'s announcements) go through.
pub const EVENTS_MAP: &str = "fslat_events";
/// Each session's counters: a per-CPU array of `struct fslat_counters` (`check::counters`),
/// by session index.
pub const COUNTERS_MAP: &str = "fslat_counters";
/// The stack maps the ids of `kstack` and `ustack` values name (fslat_stacks.bpf.h).
pub const KSTACKS_MAP: &str = "fslat_kstacks";
pub const USTACKS_MAP: &str = "fslat_ustacks";
/// Stacks whose hash bucket in the first map holds another stack: a stack map's bucket is
/// the stack's hash modulo its size and is never freed, so without a second chance such a
/// stack is lost for the whole run (short-lived processes each bring new user addresses,
/// and a kernel's addresses change with each boot). Their id has `STACK_SECOND`.
pub const KSTACKS_MAP_2: &str = "fslat_kstacks_2";
/// The stacks each of the four stack maps holds unless `--max-stacks` says otherwise
/// (`FSLAT_STACK_ENTRIES` in fslat_stacks.bpf.h; a test checks both).
pub const STACK_ENTRIES: u32 = 4096;
pub const USTACKS_MAP_2: &str = "fslat_ustacks_2";
pub const STACK_SECOND: u32 = 1 << 30;
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
/// length copied at `UCOPY_LEN_AT`, the `u32` number of mappings resolved at capture at
/// `UCOPY_NVMAS_AT` (kernels with `bpf_find_vma`) and `UCOPY_VMAS` of them at `UCOPY_VMAS_AT`
/// (each `UCOPY_VMA_SIZE` bytes: `u64` start, end and file offset of start, `u32` file
/// number in `UFILES_MAP`, 0 for none), and the stack's bytes from `sp` on at `UCOPY_BYTES_AT`.
pub const UCOPIES_MAP: &str = "fslat_ucopies";
/// The per-CPU work area of one copy (only the kernel side reads it).
pub const UCOPY_SCRATCH_MAP: &str = "fslat_ucopy_scratch";
pub const UCOPY_IP_AT: usize = 0;
pub const UCOPY_SP_AT: usize = 8;
pub const UCOPY_BP_AT: usize = 16;
pub const UCOPY_LEN_AT: usize = 24;
pub const UCOPY_NVMAS_AT: usize = 28;
pub const UCOPY_VMAS_AT: usize = 32;
pub const UCOPY_VMA_SIZE: usize = 32;
pub const UCOPY_VMA_FILE_AT: usize = 24;
pub const UCOPY_VMAS: usize = 24;
pub const UCOPY_BYTES_AT: usize = UCOPY_VMAS_AT + UCOPY_VMAS * UCOPY_VMA_SIZE;
/// Distinct (process, stack) copies kept; the map takes memory as it fills.
pub const UCOPIES_ENTRIES: u32 = 4096;
/// The same in a script with a profile, whose map is preallocated (9 MiB at 8192 bytes).
pub const UCOPIES_PREALLOC_ENTRIES: u32 = 1024;
/// `--ustack-bytes` when not given: perf's `--call-graph dwarf` default, enough for the
/// C programs and Debian's libc and postgres stacks measured (docs/performance.md).
pub const UCOPY_DEFAULT: u32 = 8192;
/// The most `--ustack-bytes` (perf's `--call-graph dwarf` takes up to 65528).
pub const UCOPY_MAX: u32 = 32768;
/// With `--ustack-walk` (`Program::ustack_walk`), user stacks unwound in the kernel
/// (fslat_stacks.bpf.h, `fslat_uwalk`; src/stacks/walk.rs): the rows every prepared file's
/// CFI became (`UROW_SIZE` bytes each: `u32` address in the file, `u8` kind
/// (`UROW_*`), `u8` "rbp saved", `i16` CFA offset, `i16` rbp offset), by index.
pub const UROWS_MAP: &str = "fslat_urows";
/// The slot of each prepared process (tgid -> `u32`) in `UPROCS_MAP`.
pub const USLOTS_MAP: &str = "fslat_uslots";
/// The walk's per-CPU state (only the kernel side reads it).
pub const UWALK_SCRATCH_MAP: &str = "fslat_uwalk_scratch";
/// Turns of the walk's loop at most: one a frame (its two binary searches whole in it).
pub const UWALK_TURNS: u32 = UFRAME_DEPTH as u32;
/// An array by slot: `u64` start of stack, `u32` count, `u32` generation (at
/// `UPROC_GEN_AT`: new for each table written, the key of the walk's cache of rows),
/// `u64` start and end of code (with the start of stack, what tells an exec since),
/// then `UWALK_MAPS` mappings
/// of `UMAP_SIZE` bytes at `UPROC_MAPS_AT` (`u64` start, end and bias, `u32` first row,
/// `u32` rows).
pub const UPROCS_MAP: &str = "fslat_uprocs";
/// The walked stacks: by the packed ustack key, `UFRAME_DEPTH` `u64` addresses, zero
/// ended; the last may be `UWALK_ERROR | reason`.
pub const UWALKS_MAP: &str = "fslat_uwalks";
/// The id bit of a walked stack's key (the copies' hashes stay below it).
pub const USTACK_WALKED: u32 = 1 << 29;
pub const UROWS_ENTRIES: u32 = 1 << 18;
/// Turns of the rows' binary search: enough for `UROWS_ENTRIES` rows in one file.
pub const UROW_STEPS: u32 = 19;
pub const UROW_SIZE: usize = 12;
pub const UROW_GAP: u8 = 0;
pub const UROW_SP: u8 = 1;
pub const UROW_BP: u8 = 2;
pub const UROW_END: u8 = 3;
pub const UROW_BAD: u8 = 4;
pub const UPROCS_ENTRIES: u32 = 1024;
/// The executable file mappings of a process the walk knows (a power of two); a process
/// with more is copied.
pub const UWALK_MAPS: usize = 64;
pub const UWALK_MAP_STEPS: u32 = 7;
pub const UMAP_SIZE: usize = 32;
pub const UPROC_MAPS_AT: usize = 32;
pub const UPROC_GEN_AT: usize = 12;
pub const UWALK_ERROR: u64 = 0xffff_ffff_ffff_ff00;
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

/// The section of the constant tables a program of several functions indexes by
/// function (`fslat_funcs_N`, slots, return kinds), named explicitly: left to itself
/// clang puts a constant of 4, 8, 16 or 32 bytes in a mergeable `.rodata.cstN` section
/// while the object's BTF still describes it in `.rodata`, which libbpf then fails to
/// open ("failed to determine size from ELF": two functions of 7-letter names).
pub const TABLES_SECTION: &str = ".rodata";

#[cfg(test)]
mod tests;
