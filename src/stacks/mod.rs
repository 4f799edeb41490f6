//! `kstack` and `ustack`: from the ids the BPF program stored to symbolized frames.
//!
//! The program keeps a stack id from `bpf_get_stackid` (fslat_stacks.bpf.h,
//! `fslat_kstackid`, `fslat_ustackid`); the addresses live in the program's stack maps. A `StackTable` reads them by id and
//! symbolizes them with blazesym, once per distinct stack: kernel frames from
//! `/proc/kallsyms` (modules included), user frames from the ELF symbols (and DWARF) of
//! the files mapped in the traced process, through its `/proc/PID/maps`. The mappings of
//! a process are read when the program first announces it (`announce`), so a process that
//! has exited by the time fslat prints is still symbolized. On kernels with
//! `bpf_find_vma` the program resolves each user frame to its file and the offset in it
//! when it captures the stack (`files`), and user frames are symbolized from those alone.

mod files;
mod maps;
mod modules;
/// Public for `tests/fuzz_elf.rs`, which drives it with hostile CFI.
pub mod unwind;
mod walk;

use crate::check::program::StackKind;
use crate::check::resources::{EMPTY_STACK, NO_STACK, STACK_SECOND, USTACK_WALKED};
use blazesym::symbolize::source::{Elf, Kernel, Process, Source};
use blazesym::symbolize::{CodeInfo, Input, Sym, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A place in a source file, from the DWARF line table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// As the DWARF names it: the compilation directory joined to the file.
    pub file: String,
    /// `None` where the line table gives none.
    pub line: Option<u32>,
}

/// A function inlined into a frame's function at its address, with its own line there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inlined {
    pub symbol: String,
    pub source: Option<SourceLine>,
}

/// One frame of a stack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    /// The return address (or, for the innermost user frame, the instruction pointer).
    pub addr: u64,
    /// The function, without offset; `None` when it could not be symbolized.
    pub symbol: Option<String>,
    /// `kernel`, a kernel module's name, or the path of the user ELF file.
    pub module: Option<String>,
    /// For a user frame with no symbol: its offset in `module`.
    pub file_offset: Option<u64>,
    /// With source lines (`-f json`), for a user frame whose file has DWARF: the line of
    /// the address in `symbol` (with inlined functions: the line of the outermost
    /// inlined call).
    pub source: Option<SourceLine>,
    /// With source lines: the functions inlined at the address, outermost first (the
    /// last one holds the address), as `addr2line -i` lists them innermost first.
    pub inlined: Vec<Inlined>,
}

/// A symbolized stack, root first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub kind: StackKind,
    /// Empty when the stack was lost.
    pub frames: Vec<Frame>,
    /// Not captured or not stored (counted in the summary's `stack_lost`).
    pub lost: bool,
}

/// Symbol names go into `;`-joined flame graph lines: no separators inside a name.
fn clean_symbol(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_whitespace() => '_',
            c => c,
        })
        .collect()
}

/// Frames of fslat's own BPF program and its trampoline, innermost in every kernel stack:
/// named so in kallsyms, or (where the kernel lists no trampoline symbol) JIT code that
/// the nearest symbol below would misname.
fn is_own_frame(f: &Frame) -> bool {
    f.module.as_deref() == Some(JIT)
        || f.symbol.as_deref().is_some_and(|s| {
            // The last three: the scheduler hooks' tracepoint (`wait_kstack`).
            [
                "bpf_prog_",
                "bpf_trampoline_",
                "bpf_trace_run",
                "__bpf_trace_",
                "__traceiter_",
            ]
            .iter()
            .any(|p| s.starts_with(p))
        })
}

/// The frame that ends (root first: starts) a user stack deeper than its copy.
pub const TRUNCATED: &str = "[truncated]";

/// An unwound user stack (innermost first) with the frame that says how it ends, root
/// first.
fn ended(mut frames: Vec<Frame>, end: unwind::End) -> Stack {
    let end = match end {
        unwind::End::Complete => None,
        unwind::End::Truncated => Some(TRUNCATED.to_string()),
        unwind::End::Error(why) => Some(format!("[unwind_error:_{}]", clean_symbol(why))),
    };
    if let Some(name) = end {
        frames.push(Frame {
            symbol: Some(name),
            ..Frame::default()
        });
    }
    frames.reverse();
    Stack {
        kind: StackKind::User,
        frames,
        lost: false,
    }
}

/// A process's mappings as the unwinder sees them.
struct Space<'a> {
    maps: &'a [maps::Mapping],
    cfi: &'a unwind::CfiCache,
}

impl unwind::Space for Space<'_> {
    fn file_at(&self, addr: u64) -> Option<(std::rc::Rc<unwind::FileCfi>, u64)> {
        let (path, offset) = maps::locate(self.maps, addr)?;
        Some((self.cfi.get(path)?, offset))
    }
}

/// When, after its announcement, a process's mappings are read again (`settle`): five
/// reads at most, the first while the dynamic loader maps the libraries.
const REREAD_AFTER: [Duration; 5] = [
    Duration::from_millis(10),
    Duration::from_millis(40),
    Duration::from_millis(160),
    Duration::from_millis(640),
    Duration::from_millis(2560),
];

/// The module of a frame in code the BPF JIT made.
const JIT: &str = "[bpf]";

/// The kernel's mapping for uprobes in a traced process, as `/proc/PID/maps` and perf name it.
pub const UPROBES: &str = "[uprobes]";

/// The frame of the uretprobe trampoline, in that mapping.
pub const URETPROBE: &str = "[uretprobe]";

/// How far into a function the return address of its patched entry call lies at most
/// (a 5-byte call, after a 4-byte `endbr64` with IBT).
const ENTRY_PATCH: u64 = 16;

/// A symbolized address.
#[derive(Clone)]
struct Resolved {
    name: String,
    module: Option<String>,
    /// Of the address itself into the function.
    offset: u64,
    source: Option<SourceLine>,
    inlined: Vec<Inlined>,
}

fn symbolizer(source_lines: bool) -> Symbolizer {
    Symbolizer::builder()
        .enable_code_info(source_lines)
        .enable_inlined_fns(source_lines)
        .build()
}

/// The source line and the inlined functions blazesym found at a symbolized address
/// (none unless the symbolizer reads them).
fn source_of(sym: &Sym) -> (Option<SourceLine>, Vec<Inlined>) {
    let line = |c: &CodeInfo| SourceLine {
        file: c.to_path().to_string_lossy().into_owned(),
        line: c.line,
    };
    let inlined = sym
        .inlined
        .iter()
        .map(|f| Inlined {
            symbol: clean_symbol(&f.name),
            source: f.code_info.as_ref().map(line),
        })
        .collect();
    (sym.code_info.as_deref().map(line), inlined)
}

/// A kernel stack, innermost first, without the frames that are fslat's: its program,
/// the trampoline, and (`entry_frame`: fexit trampolines have one, fsession ones do not)
/// the return into the traced function's patched entry; so it ends with the caller.
fn callers(mut frames: Vec<(Frame, u64)>, entry_frame: bool) -> Vec<Frame> {
    let own = frames.iter().take_while(|(f, _)| is_own_frame(f)).count();
    frames.drain(..own);
    if entry_frame && frames.first().is_some_and(|(_, at)| *at < ENTRY_PATCH) {
        frames.remove(0);
    }
    // A traced function deeper in the stack (`wait_kstack`: the thread slept inside one)
    // leaves its trampoline and, in fentry mode, the return into its patched entry (the
    // function's own name again, near its start): left out as well.
    let mut out: Vec<Frame> = Vec::with_capacity(frames.len());
    let mut after_own = false;
    for (f, at) in frames {
        let own = is_own_frame(&f);
        let entry = after_own
            && at < ENTRY_PATCH
            && out.last().is_some_and(|inner| inner.symbol == f.symbol);
        if !own && !entry {
            out.push(f);
        }
        after_own = own;
    }
    out
}

pub struct StackTable {
    kernel: Option<MapHandle>,
    kernel_2: Option<MapHandle>,
    user: Option<MapHandle>,
    user_2: Option<MapHandle>,
    symbolizer: Symbolizer,
    /// Read at the first kernel frame named, not at start: reading `/proc/kallsyms`
    /// whole is thousands of `read`s, which a script tracing `read` would trace while the
    /// traced work runs (docs/performance.md, "User stacks unwound with CFI by default").
    modules: std::cell::OnceCell<modules::Modules>,
    entry_frame: bool,
    /// Mappings of the processes announced, read when they were.
    mappings: RefCell<HashMap<u32, Vec<maps::Mapping>>>,
    /// Their `[uprobes]` mappings (`name_uprobes`).
    uprobes: RefCell<HashMap<u32, std::ops::Range<u64>>>,
    /// The frames the program resolved at capture (kernels with `bpf_find_vma`).
    files: Option<files::Files>,
    /// `--ustack-bytes`: the registers and stack slices the program copied, by key.
    copies: Option<MapHandle>,
    /// `--ustack-walk`: the tables of the kernel's walk, and the stacks it walked.
    walk: Option<walk::Walk>,
    /// The call-frame information of the files of announced processes: opened when they
    /// were announced, read when a stack first needs it.
    cfi: unwind::CfiCache,
    /// Processes announced lately: when, and how many of `REREAD_AFTER` were done.
    young: RefCell<HashMap<u32, (Instant, usize)>>,
    cache: RefCell<HashMap<(StackKind, u64), Arc<Stack>>>,
}

impl StackTable {
    /// A table over the program's kernel and user stack maps (either may be absent).
    /// `entry_frame`: some kernel stacks come from fexit programs (fentry mode, or a
    /// session that runs at return only), whose trampolines leave the traced function's
    /// patched entry on the stack.
    pub fn new(kernel: Option<MapHandle>, user: Option<MapHandle>, entry_frame: bool) -> Self {
        StackTable {
            entry_frame,
            kernel,
            kernel_2: None,
            user,
            user_2: None,
            symbolizer: symbolizer(false),
            modules: std::cell::OnceCell::new(),
            mappings: RefCell::new(HashMap::new()),
            uprobes: RefCell::new(HashMap::new()),
            files: None,
            copies: None,
            walk: None,
            cfi: unwind::CfiCache::default(),
            young: RefCell::new(HashMap::new()),
            cache: RefCell::new(HashMap::new()),
        }
    }

    /// The second kernel stack map (ids with `STACK_SECOND`).
    pub fn with_kernel_map(mut self, second: Option<MapHandle>) -> Self {
        self.kernel_2 = second;
        self
    }

    /// The program's other user stack maps: the second stack map (ids with
    /// `STACK_SECOND`), and the resolved frames and files (both present when the kernel
    /// has `bpf_find_vma`).
    pub fn with_user_maps(
        mut self,
        second: Option<MapHandle>,
        frames: Option<MapHandle>,
        files: Option<MapHandle>,
    ) -> Self {
        self.user_2 = second;
        if let (Some(frames), Some(files)) = (frames, files) {
            self.files = Some(files::Files::new(frames, files));
        }
        self
    }

    /// User frames with their source lines and inlined functions (`-f json`): the DWARF
    /// line tables and inlining trees of the files are read, which text output skips.
    pub fn with_source_lines(mut self, on: bool) -> Self {
        self.symbolizer = symbolizer(on);
        self
    }

    /// The program's copies of user stacks (`--ustack-bytes`): user stacks are unwound
    /// from them.
    pub fn with_copies(mut self, copies: Option<MapHandle>) -> Self {
        self.copies = copies;
        self
    }

    /// `--ustack-walk`: the maps of the kernel's walk (all four, or no walk).
    pub fn with_walk(
        mut self,
        rows: Option<MapHandle>,
        procs: Option<MapHandle>,
        walks: Option<MapHandle>,
        slots: Option<MapHandle>,
    ) -> Self {
        if let (Some(rows), Some(procs), Some(walks), Some(slots)) = (rows, procs, walks, slots) {
            self.walk = Some(walk::Walk::new(rows, procs, walks, slots));
        }
        self
    }

    /// `--ustack-walk`: prepares `tgid` (`-p`) before the program runs, so that its
    /// first stacks are walked rather than copied.
    pub fn prepare_walk(&self, tgid: u32) {
        if let Some(walk) = &self.walk {
            walk.prepare(tgid, &self.cfi);
        }
    }

    /// The program saw user stacks of `tgid` for the first time: keep its mappings now,
    /// while it lives, and read them again a few times soon after (`settle`). A process
    /// that is already gone is symbolized as far as possible.
    pub fn announce(&self, tgid: u32) {
        if tgid == 0 {
            return;
        }
        self.mappings.borrow_mut().remove(&tgid);
        self.reread(tgid);
        self.young.borrow_mut().insert(tgid, (Instant::now(), 0));
    }

    /// Reads the announced processes' mappings again when `REREAD_AFTER` says, and
    /// returns when it should be called next. A process first seen in the dynamic loader
    /// (an off-CPU stretch while it opens libraries) maps libc right after, and may have
    /// exited by the time its stacks print: this keeps libc's frames named.
    pub fn settle(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut due = Vec::new();
        self.young.borrow_mut().retain(|&tgid, (at, done)| {
            let before = *done;
            while REREAD_AFTER.get(*done).is_some_and(|&d| now >= *at + d) {
                *done += 1;
            }
            if *done > before {
                due.push(tgid);
            }
            *done < REREAD_AFTER.len()
        });
        for tgid in due {
            self.reread(tgid);
        }
        self.young
            .borrow()
            .values()
            .map(|&(at, done)| at + REREAD_AFTER[done])
            .min()
    }

    /// Reads the mappings of `tgid` again, if it lives and maps what it mapped when they
    /// were read before where it did (`maps::merge`: not a program it exec'd since, whose
    /// mappings would name the old one's frames wrongly); whether they were.
    fn reread(&self, tgid: u32) -> bool {
        if let Some(walk) = &self.walk {
            walk.prepare(tgid, &self.cfi);
        }
        let (now, uprobes) = maps::read_with_uprobes(tgid);
        let merged = match self.mappings.borrow().get(&tgid) {
            _ if now.is_empty() => None,
            Some(old) => maps::merge(old, now),
            None => Some(now),
        };
        let Some(now) = merged else {
            self.mappings.borrow_mut().entry(tgid).or_default();
            return false;
        };
        let mut cache = blazesym::symbolize::cache::Process::new(Pid::from(tgid));
        cache.cache_perf_map = false;
        let _ = self
            .symbolizer
            .cache(&blazesym::symbolize::cache::Cache::Process(cache));
        if self.copies.is_some() {
            // The files now (opened; read when a stack needs them): they may be replaced
            // or deleted before the stacks print.
            for m in &now {
                self.cfi.keep(&m.path);
            }
        }
        self.mappings.borrow_mut().insert(tgid, now);
        if let Some(range) = uprobes {
            self.uprobes.borrow_mut().insert(tgid, range);
        }
        true
    }

    /// Names the frames in the `[uprobes]` mapping of `tgid` (`maps::read_with_uprobes`),
    /// as perf names that mapping: the return trampoline `[uretprobe]`, in place of the
    /// caller of a call with a pending uretprobe where the kernel left it (frame-pointer
    /// stacks before 6.11; docs/language.md, "Calls with a pending uretprobe"), and the
    /// kernel's out-of-line copies of probed instructions `[uprobes]`.
    fn name_uprobes(&self, tgid: u32, frames: &mut [Frame]) {
        let uprobes = self.uprobes.borrow();
        let Some(range) = uprobes.get(&tgid) else {
            return;
        };
        for f in frames.iter_mut() {
            if f.symbol.is_none() && range.contains(&f.addr) {
                f.module = Some(UPROBES.to_string());
                f.file_offset = None;
                let name = if f.addr == range.start {
                    URETPROBE
                } else {
                    UPROBES
                };
                f.symbol = Some(name.to_string());
            }
        }
    }

    /// The stack a `kstack`/`ustack` field or key holds (`raw` as the program stored it:
    /// the id for kernel stacks; tgid in the high and id in the low 32 bits for user
    /// stacks).
    pub fn stack(&self, kind: StackKind, raw: u64) -> Arc<Stack> {
        if let Some(s) = self.cache.borrow().get(&(kind, raw)) {
            return s.clone();
        }
        let mut stack = self.resolve(kind, raw);
        if kind == StackKind::User {
            self.name_uprobes((raw >> 32) as u32, &mut stack.frames);
        }
        let stack = Arc::new(stack);
        self.cache.borrow_mut().insert((kind, raw), stack.clone());
        stack
    }

    fn resolve(&self, kind: StackKind, raw: u64) -> Stack {
        let (id, tgid) = match kind {
            StackKind::Kernel => (raw as i64, 0),
            StackKind::User => (i64::from(raw as u32 as i32), (raw >> 32) as u32),
        };
        let second = id >= 0 && (id as u32) & STACK_SECOND != 0;
        let id = if second {
            id & !i64::from(STACK_SECOND)
        } else {
            id
        };
        let map = match (kind, second) {
            (StackKind::Kernel, false) => self.kernel.as_ref(),
            (StackKind::Kernel, true) => self.kernel_2.as_ref(),
            (StackKind::User, false) => self.user.as_ref(),
            (StackKind::User, true) => self.user_2.as_ref(),
        };
        if id == EMPTY_STACK {
            return Stack {
                kind,
                frames: Vec::new(),
                lost: false,
            };
        }
        let lost = Stack {
            kind,
            frames: Vec::new(),
            lost: true,
        };
        if id == i64::from(NO_STACK) {
            // `wait_kstack` of a call that never left the CPU.
            return Stack {
                lost: false,
                ..lost
            };
        }
        if kind == StackKind::User
            && id >= 0
            && (id as u32) & USTACK_WALKED != 0
            && let Some(walk) = &self.walk
        {
            return match walk.walks.lookup(&raw.to_ne_bytes(), MapFlags::ANY) {
                Ok(Some(bytes)) => self.walked(tgid, raw, &bytes),
                _ => lost,
            };
        }
        if kind == StackKind::User
            && let Some(copies) = &self.copies
        {
            return match copies.lookup(&raw.to_ne_bytes(), MapFlags::ANY) {
                Ok(Some(bytes)) if id >= 0 => self.unwound(tgid, &bytes).unwrap_or(lost),
                _ => lost,
            };
        }
        let (Some(map), Ok(id)) = (map, u32::try_from(id)) else {
            return lost;
        };
        let Ok(Some(bytes)) = map.lookup(&id.to_ne_bytes(), MapFlags::ANY) else {
            return lost;
        };
        let addrs: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
            .take_while(|&a| a != 0)
            .collect();
        let mut frames = match kind {
            StackKind::Kernel => callers(self.kernel_frames(&addrs), self.entry_frame),
            StackKind::User => self.user_addr_frames(tgid, raw, &addrs),
        };
        frames.reverse();
        Stack {
            kind,
            frames,
            lost: false,
        }
    }

    /// Symbolizes return addresses: each is looked up one byte back, inside the call
    /// instruction, so a call that ends its function names the caller. With `exact_first`
    /// the first (innermost) address is an instruction pointer, looked up as it is: a
    /// user function's first instruction, where a uprobe took its stack, would otherwise
    /// be named after the function before it.
    fn symbolize(&self, src: &Source, addrs: &[u64], exact_first: bool) -> Vec<Option<Resolved>> {
        let back: Vec<u64> = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if i == 0 && exact_first {
                    *a
                } else {
                    a.saturating_sub(1)
                }
            })
            .collect();
        match self.symbolizer.symbolize(src, Input::AbsAddr(&back)) {
            Ok(syms) => syms
                .into_iter()
                .enumerate()
                .map(|(i, s)| match s {
                    Symbolized::Sym(sym) => {
                        let (source, inlined) = source_of(&sym);
                        Some(Resolved {
                            name: clean_symbol(&sym.name),
                            module: sym.module.map(|m| m.to_string_lossy().into_owned()),
                            offset: sym.offset as u64 + u64::from(!(exact_first && i == 0)),
                            source,
                            inlined,
                        })
                    }
                    Symbolized::Unknown(_) => None,
                })
                .collect(),
            Err(_) => vec![None; addrs.len()],
        }
    }

    /// Frames with each one's offset into its function (`u64::MAX` when unknown).
    fn kernel_frames(&self, addrs: &[u64]) -> Vec<(Frame, u64)> {
        let kernel = Kernel {
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        };
        let syms = self.symbolize(&Source::Kernel(kernel), addrs, false);
        addrs
            .iter()
            .zip(syms)
            .map(|(&addr, sym)| {
                let offset = sym.as_ref().map_or(u64::MAX, |r| r.offset);
                let modules = self.modules.get_or_init(modules::Modules::read);
                let frame = Frame {
                    addr,
                    module: Some(if modules.is_jit(addr) {
                        JIT.to_string()
                    } else {
                        modules.module_of(addr).to_string()
                    }),
                    symbol: sym.map(|r| r.name),
                    ..Frame::default()
                };
                (frame, offset)
            })
            .collect()
    }

    /// User frames from the places the program resolved (innermost first, as `addrs`):
    /// each symbolized in its file by its file offset (a return address one byte back, as
    /// `symbolize` does; the innermost as it is); a frame in no file is its address.
    fn file_frames(
        &self,
        path_of: &dyn Fn(u32) -> Option<String>,
        addrs: &[u64],
        places: &[Option<files::Place>],
    ) -> Vec<Frame> {
        let mut frames: Vec<Frame> = addrs
            .iter()
            .enumerate()
            .map(|(i, &addr)| {
                let place = places.get(i).copied().flatten();
                let path = place.and_then(|p| path_of(p.file));
                Frame {
                    addr,
                    file_offset: place.filter(|_| path.is_some()).map(|p| p.offset),
                    module: path,
                    ..Frame::default()
                }
            })
            .collect();
        self.name_by_file(&mut frames);
        frames
    }

    /// Frames the kernel could not place in a file (a profile's sample runs in an
    /// interrupt, where `bpf_find_vma` places one frame at a time): placed with the
    /// mappings of process `tgid` kept when it was announced, then named.
    fn place_from_mappings(&self, tgid: u32, frames: &mut [Frame]) {
        let mappings = self.mappings.borrow();
        let Some(m) = mappings.get(&tgid) else {
            return;
        };
        for (i, f) in frames.iter_mut().enumerate() {
            if f.module.is_some() || f.symbol.is_some() {
                continue;
            }
            // A return address is looked up one byte back (a call may end a mapping),
            // and its offset kept as its own, as `file_frames` has it.
            let back = u64::from(i > 0);
            if let Some((path, off)) = maps::locate(m, f.addr.saturating_sub(back)) {
                f.module = Some(path.to_string());
                f.file_offset = Some(off + back);
            }
        }
        drop(mappings);
        self.name_by_file(frames);
    }

    /// Names the frames placed in a file (`module` and `file_offset`) from the file's
    /// symbols; a named frame drops its offset.
    fn name_by_file(&self, frames: &mut [Frame]) {
        let mut by_file: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, f) in frames.iter().enumerate() {
            if let (Some(path), Some(_)) = (&f.module, f.file_offset) {
                by_file.entry(path.clone()).or_default().push(i);
            }
        }
        for (path, at) in by_file {
            let offsets: Vec<u64> = at
                .iter()
                .map(|&i| {
                    let off = frames[i].file_offset.unwrap_or_default();
                    if i == 0 { off } else { off.saturating_sub(1) }
                })
                .collect();
            let src = Source::Elf(Elf::new(&path));
            let Ok(syms) = self.symbolizer.symbolize(&src, Input::FileOffset(&offsets)) else {
                continue;
            };
            for (&i, sym) in at.iter().zip(syms) {
                if let Symbolized::Sym(sym) = sym {
                    let f = &mut frames[i];
                    (f.source, f.inlined) = source_of(&sym);
                    f.symbol = Some(clean_symbol(&sym.name));
                    f.file_offset = None;
                }
            }
        }
    }

    /// A user stack from the program's copy (`struct fslat_ustack_copy`): unwound with the
    /// CFI of the files mapped in the process when it was announced, then symbolized
    /// from those files, so a process that has exited is shown whole. A stack that
    /// could not be unwound to its end ends (root first: starts) with a frame saying so.
    fn unwound(&self, tgid: u32, copy: &[u8]) -> Option<Stack> {
        use crate::check::resources::{
            UCOPY_BP_AT, UCOPY_BYTES_AT, UCOPY_IP_AT, UCOPY_LEN_AT, UCOPY_SP_AT,
        };
        let u64_at = |at: usize| Some(u64::from_ne_bytes(copy.get(at..at + 8)?.try_into().ok()?));
        let regs = unwind::Regs {
            ip: u64_at(UCOPY_IP_AT)?,
            sp: u64_at(UCOPY_SP_AT)?,
            bp: u64_at(UCOPY_BP_AT)?,
        };
        let len = u32::from_ne_bytes(copy.get(UCOPY_LEN_AT..UCOPY_LEN_AT + 4)?.try_into().ok()?);
        let stack = copy.get(UCOPY_BYTES_AT..)?;
        let stack = &stack[..(len as usize).min(stack.len())];
        // The mappings the program resolved at capture (kernels with `bpf_find_vma`),
        // then those read when the process was announced, for the addresses it did not.
        let resolved = self.copy_mappings(copy);
        if resolved.is_empty() && !self.mappings.borrow().contains_key(&tgid) {
            self.announce(tgid);
        }
        let all = || {
            let mut maps = resolved.clone();
            if let Some(kept) = self.mappings.borrow().get(&tgid) {
                maps.extend(kept.iter().cloned());
            }
            maps
        };
        let mut maps = all();
        let mut unwound = unwind::unwind(
            &Space {
                maps: &maps,
                cfi: &self.cfi,
            },
            regs,
            stack,
        );
        if unwound.end == unwind::End::Error(unwind::NO_FILE) {
            // The process mapped more since its mappings were read (a profile's first
            // samples run in the dynamic loader, before libc is mapped): read them again
            // while it lives.
            if self.reread(tgid) {
                maps = all();
                unwound = unwind::unwind(
                    &Space {
                        maps: &maps,
                        cfi: &self.cfi,
                    },
                    regs,
                    stack,
                );
            }
        }
        let maps = maps.as_slice();
        // Each frame's file (by its index in the mappings, plus one) and offset; a return
        // address is located one byte back (a call that ends a mapping), as symbolized.
        let places: Vec<Option<files::Place>> = unwound
            .addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let back = u64::from(i > 0);
                let at = maps
                    .iter()
                    .position(|m| (m.start..m.end).contains(&(a - back)))?;
                let m = &maps[at];
                Some(files::Place {
                    file: at as u32 + 1,
                    offset: a - m.start + m.offset,
                })
            })
            .collect();
        let path_of = |n: u32| Some(maps.get(n.checked_sub(1)? as usize)?.path.clone());
        let frames = self.file_frames(&path_of, &unwound.addrs, &places);
        Some(ended(frames, unwound.end))
    }

    /// A stack the program walked (`--ustack-walk`): its frames named as a frame-pointer
    /// stack's (from the places the program resolved, else the process's mappings).
    fn walked(&self, tgid: u32, raw: u64, bytes: &[u8]) -> Stack {
        let (addrs, end) = walk::frames(bytes);
        let frames = self.user_addr_frames(tgid, raw, &addrs);
        let end = match end {
            walk::End::Complete => unwind::End::Complete,
            walk::End::Truncated => unwind::End::Truncated,
            walk::End::Error(why) => unwind::End::Error(why),
        };
        ended(frames, end)
    }

    /// The mappings with a file the program resolved when it copied the stack (`struct
    /// fslat_ustack_copy`'s `vmas`; none on kernels without `bpf_find_vma`).
    fn copy_mappings(&self, copy: &[u8]) -> Vec<maps::Mapping> {
        use crate::check::resources::{
            UCOPY_NVMAS_AT, UCOPY_VMA_FILE_AT, UCOPY_VMA_SIZE, UCOPY_VMAS, UCOPY_VMAS_AT,
        };
        let Some(files) = &self.files else {
            return Vec::new();
        };
        let u64_at = |at: usize| Some(u64::from_ne_bytes(copy.get(at..at + 8)?.try_into().ok()?));
        let u32_at = |at: usize| Some(u32::from_ne_bytes(copy.get(at..at + 4)?.try_into().ok()?));
        let n = u32_at(UCOPY_NVMAS_AT).unwrap_or(0) as usize;
        (0..n.min(UCOPY_VMAS))
            .filter_map(|k| {
                let at = UCOPY_VMAS_AT + k * UCOPY_VMA_SIZE;
                let file = u32_at(at + UCOPY_VMA_FILE_AT)?;
                let (start, end) = (u64_at(at)?, u64_at(at + 8)?);
                (file != 0 && start < end).then_some(())?;
                Some(maps::Mapping {
                    start,
                    end,
                    offset: u64_at(at + 16)?,
                    path: files.path(file)?,
                })
            })
            .collect()
    }

    /// A user stack's frames: from the places the program resolved at capture where it
    /// did (stack `raw`), else from the process's mappings.
    fn user_addr_frames(&self, tgid: u32, raw: u64, addrs: &[u64]) -> Vec<Frame> {
        match self
            .files
            .as_ref()
            .and_then(|f| Some((f, f.places(raw, addrs.len())?)))
        {
            Some((files, places)) => {
                let mut frames = self.file_frames(&|n| files.path(n), addrs, &places);
                self.place_from_mappings(tgid, &mut frames);
                frames
            }
            None => self.user_frames(tgid, addrs),
        }
    }

    fn user_frames(&self, tgid: u32, addrs: &[u64]) -> Vec<Frame> {
        let syms = if tgid == 0 {
            vec![None; addrs.len()]
        } else {
            let mut process = Process::new(Pid::from(tgid));
            // The paths in the mappings, not /proc/PID/map_files: those vanish with the
            // process, and its mappings may have been kept by `announce`.
            process.map_files = false;
            process.perf_map = false;
            self.symbolize(&Source::Process(process), addrs, true)
        };
        addrs
            .iter()
            .zip(syms)
            .map(|(&addr, sym)| match sym {
                Some(r) => Frame {
                    addr,
                    symbol: Some(r.name),
                    module: r.module,
                    source: r.source,
                    inlined: r.inlined,
                    ..Frame::default()
                },
                None => {
                    let mappings = self.mappings.borrow();
                    let at = mappings
                        .get(&tgid)
                        .and_then(|m| maps::locate(m, addr.saturating_sub(1)));
                    Frame {
                        addr,
                        module: at.map(|(path, _)| path.to_string()),
                        // The return address's own offset, as printed addresses are.
                        file_offset: at.map(|(_, off)| off + 1),
                        ..Frame::default()
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_names_never_split_a_flame_graph_line() {
        assert_eq!(
            clean_symbol("operator new(unsigned long)"),
            "operator_new(unsigned_long)"
        );
        assert_eq!(clean_symbol("a;b"), "a:b");
    }

    #[test]
    fn own_frames_are_the_program_and_its_trampoline() {
        let f = |s: &str| Frame {
            addr: 1,
            symbol: Some(s.into()),
            ..Frame::default()
        };
        assert!(is_own_frame(&f("bpf_prog_6deef7357e7b4530_fslat_exit_0")));
        assert!(is_own_frame(&f("bpf_trampoline_6442508954")));
        assert!(!is_own_frame(&f("vfs_read")));
    }

    #[test]
    fn a_kernel_stack_ends_with_the_caller_of_the_traced_function() {
        let f = |s: &str| Frame {
            addr: 1,
            symbol: Some(s.into()),
            module: Some("kernel".into()),
            ..Frame::default()
        };
        let names = |v: Vec<Frame>| v.into_iter().filter_map(|f| f.symbol).collect::<Vec<_>>();
        let fexit = vec![
            (f("bpf_prog_1_fslat_exit_0"), 40),
            (f("bpf_trampoline_6442508954"), 90),
            (f("vfs_read"), 5),
            (f("ksys_read"), 107),
            (f("do_syscall_64"), 61),
        ];
        assert_eq!(names(callers(fexit, true)), ["ksys_read", "do_syscall_64"]);
        let fsession = vec![
            (f("bpf_prog_1_fslat_session_0"), 40),
            (f("bpf_trampoline_6442508954"), 90),
            (f("__x64_sys_pread64"), 14),
        ];
        assert_eq!(names(callers(fsession, false)), ["__x64_sys_pread64"]);
        // wait_kstack: the thread slept inside a function fslat traces in fentry mode.
        let inside = vec![
            (f("__schedule"), 700),
            (f("pipe_read"), 400),
            (f("vfs_read"), 150),
            (f("bpf_trampoline_30077_1"), 90),
            (f("vfs_read"), 9),
            (f("ksys_read"), 107),
        ];
        assert_eq!(
            names(callers(inside, false)),
            ["__schedule", "pipe_read", "vfs_read", "ksys_read"]
        );
    }

    #[test]
    fn frames_in_the_uprobes_mapping_are_the_uretprobe_trampoline_or_a_probed_instruction() {
        let table = StackTable::new(None, None, true);
        table
            .uprobes
            .borrow_mut()
            .insert(7, 0x7fff_ffff_e000..0x7fff_ffff_f000);
        let f = |addr, symbol: Option<&str>| Frame {
            addr,
            symbol: symbol.map(String::from),
            ..Frame::default()
        };
        let mut frames = vec![
            f(0x7fff_ffff_e000, None),
            f(0x7fff_ffff_e080, None),
            f(0x40_1000, None),
            f(0x7fff_ffff_f000, None),
        ];
        table.name_uprobes(7, &mut frames);
        let named: Vec<_> = frames
            .iter()
            .map(|f| (f.symbol.as_deref(), f.module.as_deref()))
            .collect();
        assert_eq!(
            named,
            [
                (Some(URETPROBE), Some(UPROBES)),
                (Some(UPROBES), Some(UPROBES)),
                (None, None),
                (None, None),
            ]
        );
        // Another process's frames at the same address are not its.
        let mut other = vec![f(0x7fff_ffff_e000, None)];
        table.name_uprobes(8, &mut other);
        assert_eq!(other[0].symbol, None);
    }

    /// A user frame of `pid` at `addr`, symbolized as a traced process's would be.
    fn user_symbol(pid: u32, addr: u64) -> Option<String> {
        let table = StackTable::new(None, None, true);
        table.announce(pid);
        table.user_frames(pid, &[addr]).remove(0).symbol
    }

    #[inline(never)]
    fn a_rust_function_in_this_test() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn user_frames_are_named_from_their_file_and_offset_alone() {
        let addr = a_rust_function_in_this_test as *const () as u64;
        let maps = maps::read(std::process::id());
        let (path, offset) = maps::locate(&maps, addr).expect("the test binary is mapped");
        let path = path.to_string();
        let table = StackTable::new(None, None, true);
        // Innermost: the function's first instruction; then a return address into it
        // (one byte past a call, looked up one byte back); then a frame in no file.
        let places = [
            Some(files::Place { file: 1, offset }),
            Some(files::Place {
                file: 1,
                offset: offset + 1,
            }),
            None,
            Some(files::Place {
                file: 2,
                offset: 0x10,
            }),
        ];
        let frames = table.file_frames(
            &|n| (n == 1).then(|| path.clone()),
            &[addr, addr + 1, 0x1234, 0x5678],
            &places,
        );
        let name = "fslat::stacks::tests::a_rust_function_in_this_test";
        assert_eq!(frames[0].symbol.as_deref(), Some(name));
        assert_eq!(frames[1].symbol.as_deref(), Some(name));
        assert_eq!(frames[0].module.as_deref(), Some(path.as_str()));
        assert_eq!(
            (frames[2].symbol.as_ref(), frames[2].module.as_ref()),
            (None, None)
        );
        // A file whose path is unknown: its address only.
        assert_eq!(
            (frames[3].symbol.as_ref(), frames[3].file_offset),
            (None, None)
        );
    }

    #[test]
    fn rust_user_frames_are_demangled() {
        let addr = a_rust_function_in_this_test as *const () as u64;
        assert_eq!(a_rust_function_in_this_test(), 7);
        assert_eq!(
            user_symbol(std::process::id(), addr).as_deref(),
            Some("fslat::stacks::tests::a_rust_function_in_this_test")
        );
    }

    #[test]
    fn cpp_user_frames_are_demangled_with_spaces_cleaned() {
        use std::io::{BufRead, Write};
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("app.cpp");
        std::fs::write(
            &src,
            r#"#include <cstdio>
namespace shop { struct Till { static int ring(int n, const char *why); }; }
int shop::Till::ring(int n, const char *why) { return n + why[0]; }
int main() {
    std::printf("%p\n", (void *)&shop::Till::ring);
    std::fflush(stdout);
    return std::getchar() + shop::Till::ring(1, "x") > 0 ? 0 : 1;
}
"#,
        )
        .unwrap();
        let bin = dir.path().join("app");
        let built = std::process::Command::new("g++")
            .args(["-O0", "-g0", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .expect("g++ runs (Debian: apt-get install g++)");
        assert!(built.success());
        let mut app = std::process::Command::new(&bin)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(app.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = u64::from_str_radix(line.trim().trim_start_matches("0x"), 16).unwrap();
        let symbol = user_symbol(app.id(), addr);
        app.stdin.take().unwrap().write_all(b"\n").unwrap();
        app.wait().unwrap();
        assert_eq!(
            symbol.as_deref(),
            Some("shop::Till::ring(int,_char_const*)")
        );
    }
}
