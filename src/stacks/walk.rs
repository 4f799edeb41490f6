//! `--ustack-walk`: the tables the program unwinds user stacks with in the kernel
//! (fslat_stacks.bpf.h, `fslat_uwalk`), as Parca's and the OpenTelemetry profiler's
//! unwinders do. Each mapped file's CFI becomes sorted rows (`unwind::TableRow`), stored
//! once in the rows map and shared by every process that maps the file; each process
//! gets the table of its executable file mappings (start, end, bias, its file's rows).
//! A process is prepared when the program announces it and again when its mappings are
//! read again; until then (and where it does not fit) its stacks are copied and unwound
//! in user space.

use super::maps::{self, Mapping};
use super::unwind::{CfiCache, TableRow};
use crate::check::resources::{
    UMAP_SIZE, UPROC_GEN_AT, UPROC_MAPS_AT, UPROCS_ENTRIES, UROW_SIZE, UROWS_ENTRIES, UWALK_ERROR,
    UWALK_MAPS,
};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a slot a process no longer uses stays unused: a walk that read the slot
/// before the process's entry moved on (microseconds) is over by then.
const SLOT_REST: Duration = Duration::from_secs(1);

/// Why a walked stack ended early, by the reason in its last word (`UWALK_ERROR | n`).
const REASONS: [&str; 8] = [
    "",
    super::unwind::NO_FILE,
    "call-frame information the unwinder does not follow",
    "no call-frame information and no frame pointer",
    "the stack pointer did not grow",
    "the stack could not be read",
    "",
    "no pending uretprobe return for the trampoline",
];
/// The reason that is a truncation (`FSLAT_STACK_DEPTH` frames).
const DEEP: u64 = 6;

/// How a walked stack ends, from its last word.
pub enum End {
    Complete,
    Truncated,
    Error(&'static str),
}

/// The addresses of a walked stack (a map value: zero-ended `u64`s), innermost first,
/// and how it ends.
pub fn frames(bytes: &[u8]) -> (Vec<u64>, End) {
    let mut addrs: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
        .take_while(|&a| a != 0)
        .collect();
    let end = match addrs.last() {
        Some(&a) if a >= UWALK_ERROR => {
            addrs.pop();
            match a - UWALK_ERROR {
                DEEP => End::Truncated,
                n => End::Error(REASONS.get(n as usize).copied().unwrap_or("unknown")),
            }
        }
        _ if addrs.len() >= super::unwind::MAX_FRAMES => End::Truncated,
        _ => End::Complete,
    };
    (addrs, end)
}

pub struct Walk {
    rows: MapHandle,
    procs: MapHandle,
    pub walks: MapHandle,
    slots: MapHandle,
    /// Each prepared process's slot in `procs` and the table written there; slots
    /// released (and since when); the next never used.
    slot_of: RefCell<HashMap<u32, (u32, Vec<u8>)>>,
    released: RefCell<Vec<(u32, Instant)>>,
    next_slot: Cell<u32>,
    /// The generation of the last table written (`struct fslat_uproc`'s `gen`: each
    /// written table's is new, so the program's cache of rows by it is never stale).
    generation: Cell<u32>,
    /// The next free row.
    next: Cell<u32>,
    /// Each file's rows (first, count) by path; count 0: no CFI (frame pointers).
    files: RefCell<HashMap<String, Option<(u32, u32)>>>,
}

impl Walk {
    pub fn new(rows: MapHandle, procs: MapHandle, walks: MapHandle, slots: MapHandle) -> Walk {
        Walk {
            rows,
            procs,
            walks,
            slots,
            slot_of: RefCell::new(HashMap::new()),
            released: RefCell::new(Vec::new()),
            next_slot: Cell::new(0),
            generation: Cell::new(0),
            next: Cell::new(0),
            files: RefCell::new(HashMap::new()),
        }
    }

    /// The rows of the file at `path`, stored now if they were not; `None` when they
    /// do not fit (or the file is past what the rows can say).
    fn file(&self, path: &str, cfi: &CfiCache) -> Option<(u32, u32)> {
        if let Some(known) = self.files.borrow().get(path) {
            return *known;
        }
        let free = UROWS_ENTRIES - self.next.get();
        let placed = match cfi.get(path) {
            None => Some((0, 0)),
            Some(file) => file.table(free as usize).and_then(|rows| self.store(&rows)),
        };
        self.files.borrow_mut().insert(path.to_string(), placed);
        placed
    }

    fn store(&self, rows: &[TableRow]) -> Option<(u32, u32)> {
        let first = self.next.get();
        let n = u32::try_from(rows.len()).ok()?;
        if n == 0 {
            return Some((0, 0));
        }
        let keys: Vec<u8> = (first..first + n).flat_map(u32::to_ne_bytes).collect();
        let mut values = Vec::with_capacity(rows.len() * UROW_SIZE);
        for r in rows {
            values.extend(r.pc.to_ne_bytes());
            values.push(r.kind);
            values.push(u8::from(r.bp_saved));
            values.extend(r.cfa_offset.to_ne_bytes());
            values.extend(r.bp_offset.to_ne_bytes());
            values.extend([0, 0]);
        }
        self.rows
            .update_batch(&keys, &values, n, MapFlags::ANY, MapFlags::ANY)
            .ok()?;
        self.next.set(first + n);
        Some((first, n))
    }

    /// Prepares `tgid` from its executable mappings now: its stacks are walked in the
    /// kernel from then on. A process whose table does not fit is left to the copy.
    ///
    /// A slot is never rewritten while the process's entry points to it: a changed
    /// table goes to another slot, and the entry moves there after it is written (a
    /// walk reads one table or the other, never a half-written one). The old slot rests
    /// `SLOT_REST` before another table takes it. The rows are only ever appended.
    pub fn prepare(&self, tgid: u32, cfi: &CfiCache) {
        // fslat itself (or a child of it not exec'd yet): its own large binary's rows
        // would take the room of the traced programs'; its stacks stay copies.
        if tgid == std::process::id() || same_program(tgid) {
            return;
        }
        let Some(layout) = layout(tgid) else {
            return;
        };
        let maps = maps::executable(tgid);
        let key = tgid.to_ne_bytes();
        let old = self
            .slot_of
            .borrow()
            .get(&tgid)
            .map(|(slot, t)| (*slot, t.clone()));
        let Some(table) = self.table(layout, &maps, cfi) else {
            let _ = self.slots.delete(&key);
            if let Some((slot, _)) = old {
                self.slot_of.borrow_mut().remove(&tgid);
                self.released.borrow_mut().push((slot, Instant::now()));
            }
            return;
        };
        if old.as_ref().is_some_and(|(_, t)| *t == table) {
            return;
        }
        // No slot left: the process's stacks stay copies (or walk the table it had).
        let Some(slot) = self.free_slot() else {
            return;
        };
        let generation = self.generation.get().wrapping_add(1).max(1);
        self.generation.set(generation);
        let mut written = table.clone();
        written[UPROC_GEN_AT..UPROC_GEN_AT + 4].copy_from_slice(&generation.to_ne_bytes());
        if self
            .procs
            .update(&slot.to_ne_bytes(), &written, MapFlags::ANY)
            .is_err()
            || self
                .slots
                .update(&key, &slot.to_ne_bytes(), MapFlags::ANY)
                .is_err()
        {
            self.released.borrow_mut().push((slot, Instant::now()));
            return;
        }
        self.slot_of.borrow_mut().insert(tgid, (slot, table));
        if let Some((was, _)) = old {
            self.released.borrow_mut().push((was, Instant::now()));
        }
    }

    /// A slot no process uses: one released `SLOT_REST` ago, or one never used.
    fn free_slot(&self) -> Option<u32> {
        let mut released = self.released.borrow_mut();
        if let Some(i) = released
            .iter()
            .position(|(_, at)| at.elapsed() >= SLOT_REST)
        {
            return Some(released.swap_remove(i).0);
        }
        let slot = self.next_slot.get();
        (slot < UPROCS_ENTRIES).then(|| {
            self.next_slot.set(slot + 1);
            slot
        })
    }

    /// `struct fslat_uproc` for these mappings (sorted by start), its `gen` 0.
    fn table(&self, layout: [u64; 3], maps: &[Mapping], cfi: &CfiCache) -> Option<Vec<u8>> {
        if maps.is_empty() || maps.len() > UWALK_MAPS {
            return None;
        }
        let mut out = vec![0u8; UPROC_MAPS_AT + UWALK_MAPS * UMAP_SIZE];
        let [start_code, end_code, start_stack] = layout;
        out[..8].copy_from_slice(&start_stack.to_ne_bytes());
        out[8..12].copy_from_slice(&(maps.len() as u32).to_ne_bytes());
        out[16..24].copy_from_slice(&start_code.to_ne_bytes());
        out[24..32].copy_from_slice(&end_code.to_ne_bytes());
        for (k, m) in maps.iter().enumerate() {
            let (first, rows) = self.file(&m.path, cfi)?;
            let bias = match rows {
                0 => 0,
                _ => cfi.get(&m.path)?.bias(m.start, m.offset)?,
            };
            let at = UPROC_MAPS_AT + k * UMAP_SIZE;
            out[at..at + 8].copy_from_slice(&m.start.to_ne_bytes());
            out[at + 8..at + 16].copy_from_slice(&m.end.to_ne_bytes());
            out[at + 16..at + 24].copy_from_slice(&bias.to_ne_bytes());
            out[at + 24..at + 28].copy_from_slice(&first.to_ne_bytes());
            out[at + 28..at + 32].copy_from_slice(&rows.to_ne_bytes());
        }
        Some(out)
    }
}

/// Whether `tgid` runs fslat's own binary (a child of fslat's before its exec, as `-c`
/// starts it).
fn same_program(tgid: u32) -> bool {
    let exe = |p: &str| std::fs::read_link(format!("/proc/{p}/exe")).ok();
    exe(&tgid.to_string()).is_some_and(|e| Some(e) == exe("self"))
}

/// The process's `startcode`, `endcode` and `startstack` (`/proc/PID/stat`'s fields 26
/// to 28), which the program compares with the running process's to tell an exec since
/// it was prepared (the start of the stack alone can be the same, without ASLR).
fn layout(tgid: u32) -> Option<[u64; 3]> {
    let stat = std::fs::read_to_string(format!("/proc/{tgid}/stat")).ok()?;
    // After the command's closing parenthesis, fields 3 on.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(23).map(|v| v.parse().ok());
    let layout = [f.next()??, f.next()??, f.next()??];
    (layout[2] != 0).then_some(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::resources::{UROW_BP, UROW_END, UROW_GAP, UROW_SP};
    use crate::stacks::unwind::FileCfi;

    #[test]
    fn a_walked_stack_ends_as_its_last_word_says() {
        let words = |w: &[u64]| w.iter().flat_map(|a| a.to_ne_bytes()).collect::<Vec<u8>>();
        let (addrs, end) = frames(&words(&[0x10, 0x20, 0, 0x30]));
        assert_eq!(addrs, [0x10, 0x20]);
        assert!(matches!(end, End::Complete));
        let (addrs, end) = frames(&words(&[0x10, UWALK_ERROR | 1, 0]));
        assert_eq!(addrs, [0x10]);
        assert!(matches!(end, End::Error(super::super::unwind::NO_FILE)));
        let (_, end) = frames(&words(&[0x10, UWALK_ERROR | DEEP]));
        assert!(matches!(end, End::Truncated));
        // fslat_stacks.bpf.h's FSLAT_UWALK_URETPROBE.
        let (_, end) = frames(&words(&[0x10, UWALK_ERROR | 7]));
        assert!(matches!(end, End::Error(w) if w.contains("uretprobe")));
    }

    #[test]
    fn own_layout_is_read() {
        let [start_code, end_code, start_stack] = layout(std::process::id()).expect("layout");
        assert!(0 < start_code && start_code < end_code && end_code < start_stack);
    }

    /// The test binary's own CFI as rows: sorted, no row repeating the one before, and
    /// the rules of ordinary functions among them.
    #[test]
    fn own_cfi_becomes_sorted_rows() {
        let exe = std::fs::read("/proc/self/exe").expect("own binary");
        let cfi = FileCfi::parse(&exe).expect("own CFI");
        let rows = cfi.table(1 << 22).expect("rows");
        assert!(rows.len() > 1000, "{} rows", rows.len());
        assert!(rows.windows(2).all(|w| w[0].pc < w[1].pc));
        assert!(rows.windows(2).all(|w| !w[0].same_rule(&w[1])));
        let kinds = |k| rows.iter().filter(|r| r.kind == k).count();
        // A function's first instruction: CFA = rsp + 8, rbp kept.
        assert!(
            rows.iter()
                .any(|r| r.kind == UROW_SP && r.cfa_offset == 8 && !r.bp_saved)
        );
        assert!(kinds(UROW_SP) > kinds(UROW_BP));
        assert!(kinds(UROW_GAP) >= 1);
        // `_start`'s return address is undefined.
        assert!(kinds(UROW_END) >= 1);
    }
}
