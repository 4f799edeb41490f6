//! User stacks of programs built without frame pointers: the x86-64 registers and a slice
//! of the user stack copied at capture (`--ustack-bytes`, fslat_stacks.bpf.h), unwound here
//! with each mapped file's call-frame information (`.eh_frame`, else `.debug_frame`), as
//! `perf --call-graph dwarf` does. A frame whose file has no CFI for its address is
//! unwound through its frame pointer, where that pointer lies in the copied slice.
//!
//! Every step is bounded and checked: the stack pointer must grow, a read outside the
//! slice ends the stack as truncated (the stack was deeper than the copy), and a rule the
//! unwinder cannot follow (a CFA expression, a register other than rsp/rbp, broken CFI)
//! ends it with an error. So a stack is always a prefix of the true one, never a wrong frame.

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianSlice, LittleEndian, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};
use object::{Object, ObjectSection, ObjectSegment};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The most frames of a stack (the kernel's default `perf_event_max_stack`).
pub const MAX_FRAMES: usize = 127;

/// Why a stack ends at an address in no mapped file.
pub const NO_FILE: &str = "address in no file";

/// The user registers at capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// How an unwound stack ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// At the outermost frame (`_start`: its return address is undefined, or zero).
    Complete,
    /// The next frame lies beyond the copied slice of the stack.
    Truncated,
    /// The unwinder could not go on (no file, broken CFI, ...): why.
    Error(&'static str),
}

/// Addresses innermost first: the instruction pointer, then return addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    pub addrs: Vec<u64>,
    pub end: End,
}

/// How to find the caller's frame from one address: the CFA from rsp or rbp plus an
/// offset, the return address and the caller's rbp at offsets from the CFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Frame {
        cfa_from_bp: bool,
        cfa_offset: i64,
        /// `None`: undefined, the outermost frame.
        ra: Option<i64>,
        /// `None`: the caller's rbp is this one's.
        bp: Option<i64>,
    },
    /// CFI the unwinder cannot follow at this address.
    Unsupported,
}

/// A loaded segment: file offsets `offset..offset+size` are at `vaddr`.
#[derive(Debug, Clone, Copy)]
struct Load {
    offset: u64,
    size: u64,
    vaddr: u64,
}

/// An FDE's address range and where it is.
#[derive(Debug, Clone, Copy)]
struct Fde {
    start: u64,
    end: u64,
    offset: usize,
    debug: bool,
}

/// The call-frame information of one file, read once (and kept, so that a process that
/// has exited is still unwound).
pub struct FileCfi {
    eh_frame: Vec<u8>,
    debug_frame: Vec<u8>,
    eh_bases: BaseAddresses,
    loads: Vec<Load>,
    /// Sorted by start.
    fdes: Vec<Fde>,
    /// Rules by address (warm caches: one hash lookup per frame).
    rules: RefCell<rustc_hash::FxHashMap<u64, Option<Rule>>>,
    ctx: RefCell<UnwindContext<usize>>,
}

/// An FDE longer than this is treated as broken (no function is 64 MiB).
const MAX_FDE_LEN: u64 = 64 << 20;

/// The most FDEs a file may have (libpython has about 20 000).
const MAX_FDES: usize = 1 << 20;

impl FileCfi {
    /// The CFI of an opened ELF file (not read from before); `None` when it cannot be
    /// read or has none.
    pub fn from_file(file: &mut std::fs::File) -> Option<FileCfi> {
        use std::io::Read;
        let mut data = Vec::new();
        file.read_to_end(&mut data).ok()?;
        Self::parse(&data)
    }

    pub fn parse(data: &[u8]) -> Option<FileCfi> {
        let file = object::File::parse(data).ok()?;
        let section = |name: &str| {
            file.section_by_name(name)
                .and_then(|s| Some((s.data().ok()?.to_vec(), s.address())))
        };
        let (eh_frame, eh_addr) = section(".eh_frame").unwrap_or_default();
        let (debug_frame, _) = section(".debug_frame").unwrap_or_default();
        if eh_frame.is_empty() && debug_frame.is_empty() {
            return None;
        }
        let text = file
            .section_by_name(".text")
            .map(|s| s.address())
            .unwrap_or_default();
        let loads = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                Load {
                    offset,
                    size,
                    vaddr: s.address(),
                }
            })
            .collect();
        let mut cfi = FileCfi {
            eh_frame,
            debug_frame,
            eh_bases: BaseAddresses::default()
                .set_eh_frame(eh_addr)
                .set_text(text),
            loads,
            fdes: Vec::new(),
            rules: RefCell::new(rustc_hash::FxHashMap::default()),
            ctx: RefCell::new(UnwindContext::new()),
        };
        cfi.fdes = cfi.index();
        Some(cfi)
    }

    /// All FDEs of both sections, sorted; a broken entry ends its section's list.
    fn index(&self) -> Vec<Fde> {
        let mut fdes = Vec::new();
        let eh = EhFrame::new(&self.eh_frame, LittleEndian);
        collect_fdes(&eh, &self.eh_bases, false, &mut fdes);
        let debug = DebugFrame::new(&self.debug_frame, LittleEndian);
        collect_fdes(&debug, &BaseAddresses::default(), true, &mut fdes);
        fdes.sort_by_key(|f| (f.start, !f.debug));
        fdes
    }

    /// The address in the file's own layout of a file offset.
    fn vaddr(&self, offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|l| offset >= l.offset && offset - l.offset < l.size)
            .map(|l| l.vaddr + (offset - l.offset))
    }

    /// The rule at `vaddr`; `None` when no FDE covers it.
    fn rule(&self, vaddr: u64) -> Option<Rule> {
        if let Some(r) = self.rules.borrow().get(&vaddr) {
            return *r;
        }
        let rule = self.compute(vaddr);
        let mut rules = self.rules.borrow_mut();
        if rules.len() > 1 << 20 {
            rules.clear();
        }
        rules.insert(vaddr, rule);
        rule
    }

    fn compute(&self, vaddr: u64) -> Option<Rule> {
        let at = self.fdes.partition_point(|f| f.start <= vaddr);
        // The FDEs starting at or below vaddr, nearest first (.eh_frame before
        // .debug_frame at the same start): the first one covering it.
        let fde = self.fdes[..at]
            .iter()
            .rev()
            .take(4)
            .find(|f| vaddr < f.end)?;
        let mut ctx = self.ctx.borrow_mut();
        let row = if fde.debug {
            let bases = BaseAddresses::default();
            let s = DebugFrame::new(&self.debug_frame, LittleEndian);
            let parsed = s.fde_from_offset(&bases, fde.offset.into(), DebugFrame::cie_from_offset);
            parsed.and_then(|f| {
                f.unwind_info_for_address(&s, &bases, &mut ctx, vaddr)
                    .map(|r| to_rule(r.cfa(), r.register(X86_64::RA), r.register(X86_64::RBP)))
            })
        } else {
            let s = EhFrame::new(&self.eh_frame, LittleEndian);
            let parsed =
                s.fde_from_offset(&self.eh_bases, fde.offset.into(), EhFrame::cie_from_offset);
            parsed.and_then(|f| {
                f.unwind_info_for_address(&s, &self.eh_bases, &mut ctx, vaddr)
                    .map(|r| to_rule(r.cfa(), r.register(X86_64::RA), r.register(X86_64::RBP)))
            })
        };
        Some(row.unwrap_or(Rule::Unsupported))
    }
}

/// One row of a file's unwind table for the kernel's walk (`struct fslat_urow`,
/// src/stacks/walk.rs): from `pc` (an address in the file's own layout) to the next row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableRow {
    pub pc: u32,
    /// `check::resources::UROW_*`.
    pub kind: u8,
    /// The caller's rbp is at CFA + `bp_offset` (else rbp is kept).
    pub bp_saved: bool,
    pub cfa_offset: i16,
    pub bp_offset: i16,
}

/// The most rows one FDE may give (a loop in its CFI gives no more).
const MAX_FDE_ROWS: usize = 4096;

impl TableRow {
    fn of(pc: u32, rule: Option<Rule>) -> TableRow {
        use crate::check::resources::{UROW_BAD, UROW_BP, UROW_END, UROW_GAP, UROW_SP};
        let plain = |kind| TableRow {
            pc,
            kind,
            bp_saved: false,
            cfa_offset: 0,
            bp_offset: 0,
        };
        let Some(Rule::Frame {
            cfa_from_bp,
            cfa_offset,
            ra,
            bp,
        }) = rule
        else {
            return plain(if rule.is_none() { UROW_GAP } else { UROW_BAD });
        };
        let (Ok(cfa_offset), Ok(bp_offset)) =
            (i16::try_from(cfa_offset), i16::try_from(bp.unwrap_or(0)))
        else {
            return plain(UROW_BAD);
        };
        match ra {
            None => plain(UROW_END),
            // The return address (CFA - 8) below the register the CFA is from, or the
            // saved rbp in or above its slot: no compiler writes that, and the walk would
            // read a word that is not the frame's.
            Some(-8) if cfa_offset < 8 || (bp.is_some() && bp_offset > -16) => plain(UROW_BAD),
            // The walk reads the return address just below the CFA, as x86-64 has it.
            Some(-8) => TableRow {
                pc,
                kind: if cfa_from_bp { UROW_BP } else { UROW_SP },
                bp_saved: bp.is_some(),
                cfa_offset,
                bp_offset,
            },
            Some(_) => plain(UROW_BAD),
        }
    }

    pub fn same_rule(&self, other: &TableRow) -> bool {
        (self.kind, self.bp_saved, self.cfa_offset, self.bp_offset)
            == (
                other.kind,
                other.bp_saved,
                other.cfa_offset,
                other.bp_offset,
            )
    }
}

/// The rows of one FDE's CFI program into `rows`; `None` when it cannot be read. Rows
/// its program advances to past the FDE's end are left out (the next FDE's rules hold
/// there), and one that wraps below its start makes it unreadable: the rows stay sorted.
fn fde_rows<'a, S>(
    section: &S,
    bases: &BaseAddresses,
    ctx: &mut UnwindContext<usize>,
    fde: &Fde,
    rows: &mut Vec<TableRow>,
) -> Option<()>
where
    S: UnwindSection<EndianSlice<'a, LittleEndian>>,
{
    let parsed = section
        .fde_from_offset(bases, fde.offset.into(), S::cie_from_offset)
        .ok()?;
    let mut table = gimli::UnwindTable::new(section, bases, ctx, &parsed).ok()?;
    let mut n = 0;
    while let Some(row) = table.next_row().ok()? {
        n += 1;
        if n > MAX_FDE_ROWS || row.start_address() < fde.start {
            return None;
        }
        if row.start_address() >= fde.end {
            break;
        }
        let pc = u32::try_from(row.start_address()).ok()?;
        let rule = to_rule(
            row.cfa(),
            row.register(X86_64::RA),
            row.register(X86_64::RBP),
        );
        rows.push(TableRow::of(pc, Some(rule)));
    }
    Some(())
}

impl FileCfi {
    /// The file's rules as rows sorted by address, for the kernel's walk: each FDE's
    /// rows, a gap row (frame pointers) where no FDE covers an address, a row the walk
    /// does not follow for an FDE that cannot be read. `None` when the file has an
    /// address past 4 GiB or more than `max` rows.
    pub fn table(&self, max: usize) -> Option<Vec<TableRow>> {
        let mut rows: Vec<TableRow> = Vec::new();
        let mut end = 0u64;
        let mut ctx = self.ctx.borrow_mut();
        for fde in &self.fdes {
            // FDEs overlapping one taken (.debug_frame's copy of an .eh_frame FDE).
            if fde.start < end || fde.end > u64::from(u32::MAX) {
                if fde.start >= end {
                    return None;
                }
                continue;
            }
            if fde.start > end && !rows.is_empty() {
                rows.push(TableRow::of(end as u32, None));
            }
            let before = rows.len();
            let read = if fde.debug {
                let s = DebugFrame::new(&self.debug_frame, LittleEndian);
                fde_rows(&s, &BaseAddresses::default(), &mut ctx, fde, &mut rows)
            } else {
                let s = EhFrame::new(&self.eh_frame, LittleEndian);
                fde_rows(&s, &self.eh_bases, &mut ctx, fde, &mut rows)
            };
            if read.is_none() {
                rows.truncate(before);
                rows.push(TableRow::of(fde.start as u32, Some(Rule::Unsupported)));
            }
            end = fde.end;
            if rows.len() > max {
                return None;
            }
        }
        if !rows.is_empty() {
            rows.push(TableRow::of(end as u32, None));
        }
        // Rows at one address: the last one holds; then a row that repeats the rule
        // before it is left out.
        rows.reverse();
        rows.dedup_by_key(|r| r.pc);
        rows.reverse();
        rows.dedup_by(|next, kept| next.same_rule(kept));
        // The gap after the last FDE came after the check in the loop.
        (rows.len() <= max).then_some(rows)
    }

    /// The bias of a mapping of this file at `start` from file offset `offset`: an
    /// address there less the bias is the address in the file's own layout.
    pub fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let vaddr = self.vaddr(offset)?;
        Some(start.wrapping_sub(vaddr))
    }
}

fn to_rule(
    cfa: &CfaRule<usize>,
    ra: Option<RegisterRule<usize>>,
    bp: Option<RegisterRule<usize>>,
) -> Rule {
    let (cfa_from_bp, cfa_offset) = match *cfa {
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RSP => {
            (false, offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RBP => {
            (true, offset)
        }
        _ => return Rule::Unsupported,
    };
    let ra = match ra {
        Some(RegisterRule::Offset(n)) => Some(n),
        None | Some(RegisterRule::Undefined) => None,
        _ => return Rule::Unsupported,
    };
    let bp = match bp {
        Some(RegisterRule::Offset(n)) => Some(n),
        None | Some(RegisterRule::SameValue) | Some(RegisterRule::Undefined) => None,
        Some(RegisterRule::Register(X86_64::RBP)) => None,
        _ => return Rule::Unsupported,
    };
    Rule::Frame {
        cfa_from_bp,
        cfa_offset,
        ra,
        bp,
    }
}

/// The file mapped at an address of the process, and the address's offset in it.
pub trait Space {
    fn file_at(&self, addr: u64) -> Option<(Rc<FileCfi>, u64)>;
}

/// The word at `addr` in the slice copied from `sp` on.
fn read(stack: &[u8], sp: u64, addr: u64) -> Option<u64> {
    let at = usize::try_from(addr.checked_sub(sp)?).ok()?;
    let bytes = stack.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// Unwinds the stack `regs` and `stack` (the bytes from `regs.sp` on) describe.
pub fn unwind(space: &dyn Space, regs: Regs, stack: &[u8]) -> Unwound {
    let base = regs.sp;
    let (mut ip, mut sp, mut bp) = (regs.ip, regs.sp, regs.bp);
    let mut addrs = vec![ip];
    let end = loop {
        if addrs.len() >= MAX_FRAMES {
            break End::Truncated;
        }
        // A return address is looked up one byte back, inside its call instruction.
        let lookup = if addrs.len() == 1 {
            ip
        } else {
            ip.wrapping_sub(1)
        };
        let rule = match space.file_at(lookup) {
            Some((cfi, offset)) => match cfi.vaddr(offset) {
                Some(v) => cfi.rule(v),
                None => break End::Error("address outside the file's segments"),
            },
            None => None,
        };
        let rule = match rule {
            Some(r) => r,
            // No CFI here: the frame pointer, if it points into the copied slice.
            None if bp > sp && bp.wrapping_sub(base) < stack.len() as u64 => Rule::Frame {
                cfa_from_bp: true,
                cfa_offset: 16,
                ra: Some(-8),
                bp: Some(-16),
            },
            None if space.file_at(lookup).is_none() => break End::Error(NO_FILE),
            None => break End::Error("no call-frame information and no frame pointer"),
        };
        let Rule::Frame {
            cfa_from_bp,
            cfa_offset,
            ra,
            bp: bp_at,
        } = rule
        else {
            break End::Error("call-frame information the unwinder does not follow");
        };
        let cfa = (if cfa_from_bp { bp } else { sp }).wrapping_add_signed(cfa_offset);
        let Some(ra_at) = ra else {
            break End::Complete;
        };
        if cfa <= sp {
            break End::Error("the stack pointer did not grow");
        }
        let Some(ret) = read(stack, base, cfa.wrapping_add_signed(ra_at)) else {
            break End::Truncated;
        };
        if let Some(at) = bp_at {
            match read(stack, base, cfa.wrapping_add_signed(at)) {
                Some(v) => bp = v,
                None => break End::Truncated,
            }
        }
        if ret == 0 {
            break End::Complete;
        }
        sp = cfa;
        ip = ret;
        addrs.push(ip);
    };
    Unwound { addrs, end }
}

/// Files' CFI by path, read once each, when a stack first needs it. A file named at an
/// announcement is only opened then (`keep`): reading and indexing a large file's CFI
/// there (fslat's own 13 MB, libLLVM's) would take the CPU from the traced threads while
/// they run; the open file still reads as it was if the path is replaced or deleted
/// before the stacks print.
#[derive(Default)]
pub struct CfiCache {
    files: RefCell<HashMap<String, Slot>>,
    /// How many `Slot::Open` there are.
    open: std::cell::Cell<usize>,
}

enum Slot {
    /// Opened by `keep`, not read yet.
    Open(std::fs::File),
    /// Read (`None`: unreadable, or no CFI).
    Read(Option<Rc<FileCfi>>),
}

/// The most files kept open unread; past it `keep` reads a file at once (as `get` does),
/// so fslat stays well below its descriptor limit.
const MAX_OPEN: usize = 256;

impl CfiCache {
    pub fn get(&self, path: &str) -> Option<Rc<FileCfi>> {
        let mut files = self.files.borrow_mut();
        let cfi = match files.get_mut(path) {
            Some(Slot::Read(f)) => return f.clone(),
            Some(Slot::Open(file)) => {
                self.open.set(self.open.get() - 1);
                FileCfi::from_file(file)
            }
            None => std::fs::File::open(path)
                .ok()
                .and_then(|mut file| FileCfi::from_file(&mut file)),
        }
        .map(Rc::new);
        files.insert(path.to_string(), Slot::Read(cfi.clone()));
        cfi
    }

    /// Holds the file at `path` for a later `get`: opened now, read when first needed.
    pub fn keep(&self, path: &str) {
        if self.files.borrow().contains_key(path) {
            return;
        }
        if self.open.get() >= MAX_OPEN {
            self.get(path);
            return;
        }
        let slot = match std::fs::File::open(path) {
            Ok(file) => {
                self.open.set(self.open.get() + 1);
                Slot::Open(file)
            }
            Err(_) => Slot::Read(None),
        };
        self.files.borrow_mut().insert(path.to_string(), slot);
    }
}

/// The FDEs of one call-frame section, up to `MAX_FDES` in all, into `fdes`.
fn collect_fdes<'a, S>(section: &S, bases: &BaseAddresses, debug: bool, fdes: &mut Vec<Fde>)
where
    S: UnwindSection<EndianSlice<'a, LittleEndian>>,
{
    let mut entries = section.entries(bases);
    while let Ok(Some(entry)) = entries.next() {
        if fdes.len() >= MAX_FDES {
            break;
        }
        if let gimli::CieOrFde::Fde(partial) = entry
            && let Ok(fde) = partial.parse(S::cie_from_offset)
            && fde.len() > 0
            && fde.len() <= MAX_FDE_LEN
        {
            fdes.push(Fde {
                start: fde.initial_address(),
                end: fde.initial_address().saturating_add(fde.len()),
                offset: fde.offset(),
                debug,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::maps;

    struct Own {
        maps: Vec<maps::Mapping>,
        cache: CfiCache,
    }

    impl Space for Own {
        fn file_at(&self, addr: u64) -> Option<(Rc<FileCfi>, u64)> {
            let (path, off) = maps::locate(&self.maps, addr)?;
            Some((self.cache.get(path)?, off))
        }
    }

    /// The end of the mapping holding `addr` (this thread's stack).
    fn mapping_end(addr: u64) -> u64 {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|l| {
                let (s, e) = l.split_whitespace().next()?.split_once('-')?;
                Some((
                    u64::from_str_radix(s, 16).ok()?,
                    u64::from_str_radix(e, 16).ok()?,
                ))
            })
            .find(|&(s, e)| (s..e).contains(&addr))
            .map_or(addr, |(_, e)| e)
    }

    /// This thread's registers and its stack from here (at most `len` bytes), as the BPF
    /// program copies them.
    #[inline(never)]
    #[allow(unsafe_code)]
    fn capture(len: usize) -> (Regs, Vec<u8>) {
        let (ip, sp, bp): (u64, u64, u64);
        unsafe {
            std::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp,
            );
        }
        let len = len.min((mapping_end(sp) - sp) as usize);
        // SAFETY: from this thread's stack pointer to at most the end of its mapping.
        let stack = unsafe { std::slice::from_raw_parts(sp as *const u8, len) }.to_vec();
        (Regs { ip, sp, bp }, stack)
    }

    #[inline(never)]
    fn inner_c(len: usize) -> (Regs, Vec<u8>) {
        std::hint::black_box(capture(len))
    }
    #[inline(never)]
    fn middle_b(len: usize) -> (Regs, Vec<u8>) {
        std::hint::black_box(inner_c(len))
    }
    #[inline(never)]
    fn outer_a(len: usize) -> (Regs, Vec<u8>) {
        std::hint::black_box(middle_b(len))
    }

    fn own() -> Own {
        Own {
            maps: maps::read(std::process::id()),
            cache: CfiCache::default(),
        }
    }

    fn names(addrs: &[u64]) -> Vec<String> {
        let table = crate::stacks::StackTable::new(None, None, true);
        table.announce(std::process::id());
        table
            .user_frames(std::process::id(), addrs)
            .into_iter()
            .map(|f| f.symbol.unwrap_or_default())
            .collect()
    }

    #[test]
    fn a_kept_file_is_read_after_its_path_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CfiCache::default();
        let [kept, lost] = ["kept", "lost"].map(|n| {
            let p = dir.path().join(n);
            std::fs::copy("/proc/self/exe", &p).unwrap();
            p.to_str().unwrap().to_string()
        });
        cache.keep(&kept);
        for p in [&kept, &lost] {
            std::fs::remove_file(p).unwrap();
        }
        let cfi = cache.get(&kept).expect("the kept file's CFI");
        assert!(!cfi.fdes.is_empty());
        assert!(cache.get(&lost).is_none());
    }

    #[test]
    fn a_copied_stack_unwinds_through_its_callers_in_order() {
        let (regs, stack) = outer_a(16 << 10);
        let space = own();
        let u = unwind(&space, regs, &stack);
        let names = names(&u.addrs);
        let short: Vec<&str> = names
            .iter()
            .map(|n| n.rsplit("::").next().unwrap_or(n))
            .collect();
        let at = short
            .iter()
            .position(|n| *n == "capture")
            .expect("the capturing function");
        assert_eq!(
            short[at..at + 4],
            ["capture", "inner_c", "middle_b", "outer_a"],
            "{names:?}"
        );
        assert!(
            short.contains(&"a_copied_stack_unwinds_through_its_callers_in_order"),
            "{names:?}"
        );
        // Up through libc's thread start and clone (built without frame pointers) to the
        // outermost frame.
        assert_eq!(u.end, End::Complete, "{names:?}");
        assert!(
            short.contains(&"clone3") || short.contains(&"clone"),
            "{names:?}"
        );
    }

    #[test]
    fn a_short_copy_ends_truncated_never_with_a_wrong_frame() {
        let (regs, stack) = outer_a(16 << 10);
        let space = own();
        let whole = unwind(&space, regs, &stack);
        assert_eq!(whole.end, End::Complete, "{whole:?}");
        // Each copy shorter than the whole stack's ends truncated, with a prefix of it.
        let mut cut = 0;
        for len in (0..stack.len()).step_by(8) {
            let part = unwind(&space, regs, &stack[..len]);
            assert!(whole.addrs.starts_with(&part.addrs), "{len} bytes");
            if part.end == End::Complete {
                assert_eq!(part, whole, "{len} bytes");
                break;
            }
            assert_eq!(part.end, End::Truncated, "{len} bytes");
            cut += 1;
        }
        assert!(cut > 10);
    }

    #[test]
    fn garbage_stacks_and_registers_end_with_an_error_or_truncation() {
        let space = own();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let (regs, stack) = outer_a(4096);
        for _ in 0..2000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut s = stack.clone();
            let at = (rng as usize) % (s.len() / 8) * 8;
            s[at..at + 8].copy_from_slice(&rng.to_le_bytes());
            let r = Regs {
                bp: if rng & 1 == 0 { rng } else { regs.bp },
                ..regs
            };
            let u = unwind(&space, r, &s);
            assert!(u.addrs.len() <= MAX_FRAMES);
        }
    }

    #[test]
    fn hostile_cfi_is_an_error_frame_never_a_crash_or_hang() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let file = object::File::parse(&*exe).unwrap();
        let eh = file.section_by_name(".eh_frame").unwrap();
        let (start, size) = eh.file_range().unwrap();
        let (start, size) = (start as usize, size as usize);
        let (regs, stack) = outer_a(4096);
        let maps = maps::read(std::process::id());
        let exe_path = std::fs::read_link("/proc/self/exe").unwrap();
        let mut rng = 0x1234_5678_9abc_def1u64;
        for i in 0..60 {
            let mut bytes = exe.clone();
            for _ in 0..(1 + i % 50) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let at = start + (rng as usize) % size;
                bytes[at] = (rng >> 32) as u8;
            }
            let Some(cfi) = FileCfi::parse(&bytes) else {
                continue;
            };
            struct One<'a>(Rc<FileCfi>, &'a [maps::Mapping], String);
            impl Space for One<'_> {
                fn file_at(&self, addr: u64) -> Option<(Rc<FileCfi>, u64)> {
                    let (path, off) = maps::locate(self.1, addr)?;
                    (path == self.2).then(|| (self.0.clone(), off))
                }
            }
            let space = One(Rc::new(cfi), &maps, exe_path.to_string_lossy().into());
            let u = unwind(&space, regs, &stack);
            assert!(u.addrs.len() <= MAX_FRAMES);
        }
    }

    /// This thread's CPU time (the first field of `/proc/thread-self/schedstat`, ns): the
    /// rate on one core, however loaded the machine is.
    fn cpu_ns() -> u64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    /// The unwinder's rate on warm caches, stacks per second of this thread's CPU time
    /// (`cargo test --release --lib unwinder_rate -- --ignored --nocapture`): the issue's
    /// target is 100 000 20-frame stacks/s.
    #[test]
    #[ignore]
    fn unwinder_rate() {
        #[inline(never)]
        fn deep(n: u32, len: usize) -> (Regs, Vec<u8>) {
            if n == 0 {
                capture(len)
            } else {
                std::hint::black_box(deep(std::hint::black_box(n - 1), len))
            }
        }
        let space = own();
        // Recursion depth for 20 frames under the test harness's own frames.
        let base = unwind(&space, deep(0, 16 << 10).0, &deep(0, 16 << 10).1)
            .addrs
            .len();
        let (regs, stack) = deep(20u32.saturating_sub(base as u32), 16 << 10);
        let u = unwind(&space, regs, &stack);
        assert_eq!(u.end, End::Complete);
        let frames = u.addrs.len();
        let n = 200_000;
        let (t, cpu) = (std::time::Instant::now(), cpu_ns());
        for _ in 0..n {
            std::hint::black_box(unwind(&space, regs, &stack));
        }
        let cpu = (cpu_ns() - cpu) as f64 / 1e9;
        let wall = t.elapsed().as_secs_f64();
        println!(
            "{frames}-frame stacks: {:.0} stacks/s of CPU time ({:.0}/s wall)",
            f64::from(n) / cpu,
            f64::from(n) / wall
        );
    }

    /// The CFI the unwinder keeps for 50 mapped files (`cargo test --release --lib
    /// unwinder_memory -- --ignored --nocapture`): the growth of the resident set while
    /// 50 shared libraries of this system are read, and after one stack's rules of each.
    #[test]
    #[ignore]
    fn unwinder_memory_50_files() {
        let rss = || -> u64 {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
            let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
            pages * 4096
        };
        let mut libs: Vec<_> = std::fs::read_dir("/usr/lib/x86_64-linux-gnu")
            .unwrap()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| p.to_string_lossy().contains(".so"))
            .filter(|p| !p.is_symlink())
            .collect();
        libs.sort();
        let cache = CfiCache::default();
        let before = rss();
        let mut files = Vec::new();
        let mut fdes = 0;
        for p in &libs {
            if files.len() == 50 {
                break;
            }
            if let Some(cfi) = cache.get(&p.to_string_lossy()) {
                fdes += cfi.fdes.len();
                files.push(cfi);
            }
        }
        let read = rss() - before;
        for cfi in &files {
            for f in cfi.fdes.iter().step_by(16) {
                cfi.rule(f.start);
            }
        }
        let ruled = rss() - before;
        let sections: usize = files
            .iter()
            .map(|f| f.eh_frame.len() + f.debug_frame.len())
            .sum();
        println!(
            "{} files, {fdes} FDEs, {} KiB of CFI sections: {} KiB resident after reading, {} KiB with rules for 1 FDE in 16",
            files.len(),
            sections >> 10,
            read >> 10,
            ruled >> 10
        );
    }
}
