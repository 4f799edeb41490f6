//! What the BPF object made from a checked program holds, by name: its maps, programs and
//! sections, the settings fslat writes into it before load and the counters it reads
//! back. This is the contract between codegen (with `templates/` and `bpf-runtime/`) and
//! the runtime: codegen spells every name from here and the runtime finds every name
//! here, so renaming a map is one edit.

use super::program::{Aggregation, Program, Session};
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

    /// The modes `program`'s sessions run in, as the run's messages name them
    /// (`fsession`, or `fsession + fsession-multi` for a mix of one- and several-function
    /// sessions on 7.2).
    pub fn of_program(self, program: &Program) -> String {
        let mut names: Vec<&str> = Vec::new();
        for s in &program.sessions {
            let n = match s.span {
                Some(_) => "span",
                None => self.of_session(s).name(),
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
pub const UFRAME_DEPTH: usize = 127;
pub const UFRAME_SIZE: usize = 8;
pub const UFRAME_OFFSET_AT: usize = 4;
pub const UFILE_PATH_AT: usize = 4;
pub const UFILE_PATH_CAP: usize = 128;
/// Distinct (process, stack) pairs and files resolved; the maps take memory as they fill.
pub const UFRAMES_ENTRIES: u32 = 16384;
pub const UFILES_ENTRIES: u32 = 4096;
/// `percentiles`' interval generation, which user space bumps before each `-i` read
/// (fslat_pct.bpf.h).
pub const INTERVAL_MAP: &str = "fslat_interval";
/// The schema id of a ring buffer record that is not an event: `struct fslat_announce`
/// (fslat_stacks.bpf.h), the `u32` tgid after it, a process whose user stacks must be symbolized.
pub const ANNOUNCE_ID: u32 = 0xffff_ffff;
/// Where the announced tgid sits in the record.
pub const ANNOUNCE_TGID_OFFSET: usize = 4;
/// The section of multi-attach programs, which libbpf cannot attach by itself.
pub const MULTI_SECTION: &str = "fslat.multi";

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

    /// fentry mode: the map of target `t`'s calls in flight (`fslat_calls_I`, or
    /// `fslat_calls_I_T` for one of several functions).
    pub fn calls_map(&self, t: usize) -> String {
        format!("fslat_calls_{}", self.prog_suffix(t))
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
        }
        progs
    }
}

/// The section of `fslat_settings`, the settings fslat writes before load: `const
/// volatile`, so the verifier prunes what a setting of 0 ("off") disables.
pub const SETTINGS_SECTION: &str = ".rodata.fslat";

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
