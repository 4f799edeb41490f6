//! The ELF and DWARF reader against hostile files: tests/kernel/user's program, built
//! with DWARF, then mutants of it (bytes overwritten anywhere, in its headers, section
//! table, symbol tables and debug sections; truncated) through `fslat::elf::functions`
//! and the DWARF of every function it finds (`UserTypes::read_dwarf`, each signature).
//!
//! The same for SDT notes (`fslat::elf::sdt::parse`) on mutants of its `sdt` program.
//!
//! The same for call-frame information (`.eh_frame`, `.debug_frame`) through the user
//! stack unwinder (`fslat::stacks::unwind`), on mutants of nofp.c built both ways.
//!
//! The same for the in-kernel walk's tables (`FileCfi::table`, `--ustack-walk`), on
//! mutants of libc and nofp.c and on synthetic `.eh_frame` sections: each table it gives
//! must be one the walk can follow (sorted rows of known kinds, offsets in range).
//!
//! Properties: nothing panics, and no input takes more than a few seconds.
//!
//!     cargo test --release --test fuzz_elf                        # 400 mutants
//!     FSLAT_FUZZ_ELF_INPUTS=100000 cargo test --release --test fuzz_elf

use fslat::btf::{Features, KernelTypes};
use fslat::elf::{UserTypes, functions};
use fslat::stacks::unwind::{self, FileCfi, Regs, Space, TableRow};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// xorshift64: the same mutants on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// How many inputs each target runs: `FSLAT_FUZZ_ELF_INPUTS`, else 400.
fn inputs() -> usize {
    std::env::var("FSLAT_FUZZ_ELF_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

/// Reads the file the way a session does: symbols, then the DWARF of all of them.
fn read_all(path: &Path) -> usize {
    let Ok(funcs) = functions(path) else {
        return 0;
    };
    let names: Vec<String> = funcs.iter().map(|f| f.name.clone()).collect();
    let mut types = UserTypes::new(path, funcs, Features::default());
    types.read_dwarf(&names);
    let mut seen = 0;
    for n in &names {
        if let Some(sig) = types.function(n) {
            seen += 1;
            for p in &sig.params {
                let _ = types.resolve(p.ty);
                let _ = types.type_name(p.ty);
                for f in types.field_names(p.ty) {
                    let _ = types.field(p.ty, &f);
                }
            }
        }
    }
    seen
}

#[test]
fn hostile_elf_and_dwarf_files_are_errors_never_crashes_or_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let built = std::process::Command::new(format!("{MANIFEST_DIR}/tests/kernel/user/build"))
        .arg(dir.path())
        .status()
        .expect("tests/kernel/user/build runs (it needs gcc)");
    assert!(built.success(), "tests/kernel/user/build failed");
    let original = std::fs::read(dir.path().join("ufunc")).unwrap();
    assert!(
        read_all(&dir.path().join("ufunc")) > 5,
        "the unmutated program reads"
    );

    let inputs = inputs();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let path = dir.path().join("mutant");
    for i in 0..inputs {
        let mut bytes = original.clone();
        match i % 4 {
            // A few bytes anywhere past the ELF magic.
            0 => {
                for _ in 0..1 + rng.below(8) {
                    let at = 4 + rng.below(bytes.len() - 4);
                    bytes[at] = rng.next() as u8;
                }
            }
            // The ELF header's offsets and counts (e_phoff .. e_shstrndx).
            1 => {
                let at = 32 + rng.below(32);
                bytes[at] = [0, 0xff, 0x7f, 0x80][rng.below(4)];
            }
            // A run of random bytes somewhere (a section's contents, a table).
            2 => {
                let at = 64 + rng.below(bytes.len() - 64);
                let len = (1 + rng.below(256)).min(bytes.len() - at);
                for b in &mut bytes[at..at + len] {
                    *b = rng.next() as u8;
                }
            }
            // Truncated.
            _ => bytes.truncate(rng.below(bytes.len())),
        }
        std::fs::write(&path, &bytes).unwrap();
        let (tx, rx) = mpsc::channel();
        let p = path.clone();
        let worker = std::thread::spawn(move || {
            let n = read_all(&p);
            let _ = tx.send(n);
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(_) => {}
            Err(_) => {
                let keep = Path::new(MANIFEST_DIR).join("target/fuzz-elf-hang");
                let _ = std::fs::copy(&path, &keep);
                panic!("mutant {i} took over 20 s (kept as {})", keep.display());
            }
        }
        if worker.join().is_err() {
            let keep = Path::new(MANIFEST_DIR).join("target/fuzz-elf-panic");
            let _ = std::fs::copy(&path, &keep);
            panic!("mutant {i} panicked (kept as {})", keep.display());
        }
    }
}

/// SDT notes (`fslat::elf::sdt::parse`, what `usdt:` and `-l usdt:` read) against
/// mutants of tests/kernel/user's `sdt`: bytes overwritten in and around its notes (the
/// first "stapsdt" owner name, give or take 512 bytes), or anywhere, or the file cut.
#[test]
fn hostile_sdt_notes_are_errors_never_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let built = std::process::Command::new(format!("{MANIFEST_DIR}/tests/kernel/user/build"))
        .arg(dir.path())
        .status()
        .expect("tests/kernel/user/build runs (it needs gcc)");
    assert!(built.success(), "tests/kernel/user/build failed");
    let original = std::fs::read(dir.path().join("sdt")).unwrap();
    let probes = fslat::elf::sdt::parse(&original).expect("the unmutated notes read");
    assert_eq!(probes.len(), 5, "{probes:?}");
    let notes = original
        .windows(8)
        .position(|w| w == b"stapsdt\0")
        .expect("sdt has SDT notes");
    let inputs = inputs();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..inputs {
        let mut bytes = original.clone();
        match rng.below(3) {
            0 => {
                let from = notes.saturating_sub(512);
                let span = (notes + 512).min(bytes.len()) - from;
                for _ in 0..1 + rng.below(8) {
                    let at = from + rng.below(span);
                    bytes[at] = [0, 0xff, 0x7f, 0x80, rng.next() as u8][rng.below(5)];
                }
            }
            1 => {
                let at = 4 + rng.below(bytes.len() - 4);
                bytes[at] = rng.next() as u8;
            }
            _ => bytes.truncate(rng.below(bytes.len())),
        }
        let _ = fslat::elf::sdt::parse(&bytes);
    }
}

/// Where the CFI target maps its mutant (file offset 0).
const CFI_BASE: u64 = 0x5555_0000_0000;

/// The mutant mapped whole at `CFI_BASE`, as one file.
struct Whole(Rc<FileCfi>, u64);

impl Space for Whole {
    fn file_at(&self, addr: u64) -> Option<(Rc<FileCfi>, u64)> {
        let off = addr.checked_sub(CFI_BASE)?;
        (off < self.1).then(|| (self.0.clone(), off))
    }
}

/// The file range of a section.
fn section_range(bytes: &[u8], name: &str) -> Option<(usize, usize)> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(bytes).ok()?;
    let (at, len) = file.section_by_name(name)?.file_range()?;
    Some((at as usize, len as usize))
}

/// The file offset of `main`.
fn main_offset(bytes: &[u8]) -> Option<u64> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let file = object::File::parse(bytes).ok()?;
    let main = file.symbols().find(|s| s.name() == Ok("main"))?;
    let section = file.section_by_index(main.section_index()?).ok()?;
    let (offset, _) = section.file_range()?;
    Some(main.address() - section.address() + offset)
}

/// The offsets of the CIE and FDE length fields of a call-frame section (4-byte lengths,
/// as gcc writes them), up to a zero terminator or the end.
fn cfi_entries(bytes: &[u8], (at, len): (usize, usize)) -> Vec<usize> {
    let mut out = Vec::new();
    let mut p = at;
    while p + 4 <= at + len {
        let n = u32::from_le_bytes(bytes[p..p + 4].try_into().unwrap()) as usize;
        if n == 0 || n == 0xffff_ffff {
            break;
        }
        out.push(p);
        p += 4 + n;
    }
    out
}

/// Hostile call-frame instructions: state stacks pushed past any limit and popped when
/// empty, CFAs from other registers, from expressions, at huge offsets, rules for the
/// return address that the unwinder does not follow, advances past the FDE's end.
const HOSTILE_CFA: &[&[u8]] = &[
    &[0x0a; 64],                                 // DW_CFA_remember_state, 64 times
    &[0x0b, 0x0b, 0x0b, 0x0b],                   // DW_CFA_restore_state with nothing remembered
    &[0x0c, 0x07, 0xff, 0xff, 0xff, 0x7f],       // DW_CFA_def_cfa rsp, 2^28 - 1
    &[0x0c, 0x06, 0x80, 0x80, 0x80, 0x80, 0x10], // DW_CFA_def_cfa rbp, 2^32
    &[0x0c, 0x03, 0x08],                         // DW_CFA_def_cfa rbx, 8
    &[0x0f, 0x02, 0x77, 0x00],                   // DW_CFA_def_cfa_expression (breg7 0)
    &[0x0e, 0x00],                               // DW_CFA_def_cfa_offset 0: the CFA is rsp
    &[0x10, 0x10, 0x01, 0x30],                   // DW_CFA_expression for the return address
    &[0x08, 0x10],                               // DW_CFA_same_value for the return address
    &[0x09, 0x10, 0x07],                         // DW_CFA_register: the return address in rsp
    &[0x90, 0x7f],                               // DW_CFA_offset r16 (return address), -127 * -8
    &[0x04, 0xff, 0xff, 0xff, 0xff],             // DW_CFA_advance_loc4 past any end
    &[0x2e, 0xff, 0xff, 0xff, 0xff, 0x0f],       // DW_CFA_GNU_args_size huge
    &[0xff, 0xff, 0xff],                         // undefined opcodes
];

/// One mutant of `original` (whose call-frame section is `cfi`, its entries `entries`).
fn cfi_mutant(rng: &mut Rng, original: &[u8], cfi: (usize, usize), entries: &[usize]) -> Vec<u8> {
    let mut bytes = original.to_vec();
    let (at, len) = cfi;
    match rng.below(5) {
        // A few bytes of the section.
        0 => {
            for _ in 0..1 + rng.below(8) {
                bytes[at + rng.below(len)] = rng.next() as u8;
            }
        }
        // An entry's length: none, all ones (64-bit form with no length after it), past
        // the section, one byte off.
        1 if !entries.is_empty() => {
            let e = entries[rng.below(entries.len())];
            let old = u32::from_le_bytes(bytes[e..e + 4].try_into().unwrap());
            let new = [
                0,
                0xffff_ffff,
                0x7fff_fff0,
                old.wrapping_add(1),
                old.wrapping_sub(1),
            ][rng.below(5)];
            bytes[e..e + 4].copy_from_slice(&new.to_le_bytes());
        }
        // Hostile instructions over an entry's own (after its length and id).
        2 if !entries.is_empty() => {
            let e = entries[rng.below(entries.len())] + 8 + rng.below(16);
            let ops = HOSTILE_CFA[rng.below(HOSTILE_CFA.len())];
            let end = (e + ops.len()).min(at + len);
            if e < end {
                bytes[e..end].copy_from_slice(&ops[..end - e]);
            }
        }
        // A run of random bytes.
        3 => {
            let from = at + rng.below(len);
            let n = (1 + rng.below(64)).min(at + len - from);
            for b in &mut bytes[from..from + n] {
                *b = rng.next() as u8;
            }
        }
        // The file cut inside the section.
        _ => bytes.truncate(at + rng.below(len)),
    }
    bytes
}

/// tests/kernel/user's nofp.c built into `dir` with `.eh_frame` (nofp-g) and with
/// `.debug_frame` alone (nofp-df, gcc's `-fno-asynchronous-unwind-tables`): their bytes.
fn nofp_builds(dir: &Path) -> Vec<Vec<u8>> {
    let src = format!("{MANIFEST_DIR}/tests/kernel/user/nofp.c");
    let mut built = Vec::new();
    for (name, extra) in [
        ("nofp-g", None),
        ("nofp-df", Some("-fno-asynchronous-unwind-tables")),
    ] {
        let out = dir.join(name);
        let status = std::process::Command::new("gcc")
            .args(["-O2", "-g", "-fomit-frame-pointer"])
            .args(extra)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .expect("gcc runs");
        assert!(status.success(), "gcc {name} failed");
        built.push(std::fs::read(&out).unwrap());
    }
    built
}

/// Unwinds made-up stacks through the mutant: instruction pointers in its text, stacks
/// of words that are often return addresses into it, with registers anywhere. Returns
/// how many stacks it unwound.
fn unwind_through(bytes: &[u8], text: (usize, usize), rng: &mut Rng) -> usize {
    let Some(cfi) = FileCfi::parse(bytes) else {
        return 0;
    };
    let space = Whole(Rc::new(cfi), bytes.len() as u64);
    let code = |rng: &mut Rng| CFI_BASE + (text.0 + rng.below(text.1)) as u64;
    for _ in 0..32 {
        let stack: Vec<u8> = (0..1 + rng.below(512))
            .flat_map(|_| {
                let w = match rng.below(4) {
                    0 | 1 => code(rng),
                    2 => rng.next() >> rng.below(64),
                    _ => 0,
                };
                w.to_le_bytes()
            })
            .collect();
        let sp = 0x7ffd_0000_0000 + (rng.below(1 << 20) as u64 & !7);
        let regs = Regs {
            ip: code(rng),
            sp,
            bp: [sp + (rng.below(stack.len()) as u64 & !7), rng.next(), 0][rng.below(3)],
        };
        let u = unwind::unwind(&space, regs, &stack);
        assert!(
            u.addrs.len() <= unwind::MAX_FRAMES,
            "{} frames",
            u.addrs.len()
        );
    }
    32
}

/// The unwinder (`fslat::stacks::unwind`) against hostile call-frame information: tests/
/// kernel/user's nofp.c built with `.eh_frame` (nofp-g) and with `.debug_frame` (gcc's
/// `-fno-asynchronous-unwind-tables`), then mutants of either section (bytes, entry
/// lengths, hostile CFA programs, runs of noise, the file cut), each driven by made-up
/// stacks whose CFAs point anywhere. Properties: the unmutated CFI unwinds a frame at a
/// function's entry; nothing panics; no mutant takes more than a few seconds; no stack
/// has more than `MAX_FRAMES` frames.
#[test]
fn hostile_cfi_is_an_error_frame_never_a_crash_or_hang() {
    let dir = tempfile::tempdir().unwrap();
    let originals = nofp_builds(dir.path());
    let mut targets = Vec::new();
    for bytes in &originals {
        let text = section_range(bytes, ".text").expect("a .text section");
        for name in [".eh_frame", ".debug_frame"] {
            if let Some(range) = section_range(bytes, name).filter(|r| r.1 > 0) {
                targets.push((bytes, text, range, cfi_entries(bytes, range)));
            }
        }
    }
    assert_eq!(
        targets.len(),
        3,
        "nofp-g's .eh_frame, nofp-df's two sections"
    );
    // The unmutated CFI is read: at main's entry the CFA is rsp + 8 and the return
    // address is at rsp; a return address back into main, then a zero one, make a
    // complete stack of two frames, which the frame-pointer fallback could not give
    // (rbp is 0).
    for bytes in &originals {
        let main = CFI_BASE + main_offset(bytes).expect("main in the symbol table");
        let cfi = FileCfi::parse(bytes).expect("the unmutated CFI reads");
        let space = Whole(Rc::new(cfi), bytes.len() as u64);
        let regs = Regs {
            ip: main,
            sp: 0x7ffd_0000_0000,
            bp: 0,
        };
        let stack: Vec<u8> = [main + 1, 0].iter().flat_map(|w| w.to_le_bytes()).collect();
        let u = unwind::unwind(&space, regs, &stack);
        assert_eq!(u.addrs, [main, main + 1]);
        assert_eq!(u.end, unwind::End::Complete);
    }

    let inputs = inputs();
    let mut rng = Rng(0x51_7cc1_b727_220a);
    let path = dir.path().join("mutant");
    let mut driven = 0;
    for i in 0..inputs {
        let (original, text, cfi, entries) = &targets[i % targets.len()];
        let bytes = cfi_mutant(&mut rng, original, *cfi, entries);
        let text = *text;
        let seed = rng.next();
        let (tx, rx) = mpsc::channel();
        let mutant = bytes.clone();
        let worker = std::thread::spawn(move || {
            let n = unwind_through(&mutant, text, &mut Rng(seed | 1));
            let _ = tx.send(n);
        });
        let keep = |what: &str| {
            let keep = Path::new(MANIFEST_DIR).join(format!("target/fuzz-cfi-{what}"));
            let _ = std::fs::write(&path, &bytes);
            let _ = std::fs::copy(&path, &keep);
            keep
        };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(n) => driven += usize::from(n > 0),
            Err(_) => panic!(
                "mutant {i} took over 20 s (kept as {})",
                keep("hang").display()
            ),
        }
        if worker.join().is_err() {
            panic!("mutant {i} panicked (kept as {})", keep("panic").display());
        }
    }
    // Most mutants still parse and are unwound through (the rest are refused whole).
    assert!(driven * 2 > inputs, "{driven} of {inputs} mutants unwound");
    eprintln!("{driven} of {inputs} mutants unwound");
}

/// Live and peak heap bytes of each thread (a worker's, per input): the table target's
/// memory bound.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call goes to the system allocator unchanged; the counts are thread-local
// cells, which allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Why `rows` (from `FileCfi::table(max)`) are not what the kernel's walk may be given:
/// more than `max`, not strictly sorted by address, a kind the walk does not know, a rule
/// that repeats the row before it, offsets on a row that has none, a return address below
/// the register the CFA is from, a saved rbp in or above the return address's slot, or a
/// last row other than the gap after the last function. (A saved rbp below rsp is real:
/// gcc leaves the rule after an epilogue's `pop`s, and the word is still there.)
fn insane(rows: &[TableRow], max: usize) -> Option<String> {
    use fslat::check::resources::{UROW_BAD, UROW_BP, UROW_END, UROW_GAP, UROW_SP};
    if rows.len() > max {
        return Some(format!("{} rows, at most {max} asked", rows.len()));
    }
    if let Some(last) = rows.last().filter(|r| r.kind != UROW_GAP) {
        return Some(format!("the last row is not a gap: {last:?}"));
    }
    if let Some(w) = rows.windows(2).find(|w| w[0].pc >= w[1].pc) {
        return Some(format!("not sorted: {:?} then {:?}", w[0], w[1]));
    }
    if let Some(w) = rows.windows(2).find(|w| w[0].same_rule(&w[1])) {
        return Some(format!("a repeated rule: {:?} then {:?}", w[0], w[1]));
    }
    rows.iter().find_map(|r| {
        let wrong = match r.kind {
            UROW_GAP | UROW_END | UROW_BAD => r.bp_saved || r.cfa_offset != 0 || r.bp_offset != 0,
            UROW_SP | UROW_BP => {
                r.cfa_offset < 8
                    || (r.bp_saved && r.bp_offset > -16)
                    || (!r.bp_saved && r.bp_offset != 0)
            }
            _ => true,
        };
        wrong.then(|| format!("an insane row: {r:?}"))
    })
}

/// What one input's table did: its rows (or `None`), and the worker's peak heap bytes.
struct Tabled {
    rows: Option<Vec<TableRow>>,
    peak: usize,
    /// `table(n)` for an `n` below the rows' count: must be `None`.
    smaller: Option<(usize, bool)>,
}

/// The table of `bytes` as `--ustack-walk` builds it (`FileCfi::parse`, then `table`), and
/// again with a `max` below what it gave.
fn table_of(bytes: &[u8], cut: u64) -> Tabled {
    let rows = FileCfi::parse(bytes).and_then(|cfi| cfi.table(MAX_TABLE));
    let peak = PEAK.with(Cell::get).max(0) as usize;
    let smaller = rows.as_ref().filter(|r| r.len() > 1).map(|r| {
        let n = (cut % r.len() as u64) as usize;
        let again = FileCfi::parse(bytes).and_then(|cfi| cfi.table(n));
        (n, again.is_none())
    });
    Tabled {
        rows,
        peak,
        smaller,
    }
}

/// The `max` the target asks for: the walk's map holds `UROWS_ENTRIES` rows in all.
const MAX_TABLE: usize = 1 << 22;

/// ULEB128 and SLEB128.
fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        out.push(if v == 0 { b } else { b | 0x80 });
        if v == 0 {
            return;
        }
    }
}

fn sleb(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && b & 0x40 == 0) || (v == -1 && b & 0x40 != 0);
        out.push(if done { b } else { b | 0x80 });
        if done {
            return;
        }
    }
}

/// One call-frame instruction, from the ones compilers write and the ones they never do:
/// advances (small, huge, backwards with DW_CFA_set_loc), CFAs from rsp, rbp and other
/// registers at any offset, rbp and the return address saved anywhere (above the CFA,
/// in another register, in each other), state pushed and popped past its stack,
/// expressions, and noise.
fn cfa_op(rng: &mut Rng, out: &mut Vec<u8>) {
    let reg = |rng: &mut Rng| [6u64, 7, 16, 3, 0xffff][rng.below(5)];
    let off = |rng: &mut Rng| [8u64, 16, 24, 56, 0, 1, 0x7fff, 1 << 40][rng.below(8)];
    match rng.below(20) {
        0..=4 => out.push(0x40 | (1 + rng.below(63)) as u8),
        5 => out.extend([0x02, rng.next() as u8]),
        6 => {
            out.push(0x04);
            out.extend((rng.next() as u32 >> rng.below(32)).to_le_bytes());
        }
        7 => {
            out.push(0x01);
            out.extend((rng.next() >> rng.below(64)).to_le_bytes());
        }
        8 => {
            out.push(0x0e);
            uleb(out, off(rng));
        }
        9 => {
            out.push(0x0c);
            uleb(out, reg(rng));
            uleb(out, off(rng));
        }
        10 => {
            out.push(0x0d);
            uleb(out, reg(rng));
        }
        // rbp saved at CFA - 8n, the return address at CFA - 8n.
        11 => {
            out.push(0x86);
            uleb(out, [2, 1, 0, 3, 100][rng.below(5)]);
        }
        12 => {
            out.push(0x90);
            uleb(out, [1, 2, 0][rng.below(3)]);
        }
        // DW_CFA_offset_extended_sf: saved above the CFA.
        13 => {
            out.push(0x11);
            uleb(out, reg(rng));
            sleb(out, [-1, 1, 4, -4096][rng.below(4)]);
        }
        14 => out.push([0x0a, 0x0b][rng.below(2)]),
        15 => out.push([0xc6, 0xd0][rng.below(2)]),
        // DW_CFA_register: rbp and the return address in each other, or in themselves.
        16 => {
            out.extend([[0x09, 6, 16], [0x09, 16, 6], [0x09, 6, 6], [0x09, 16, 16]][rng.below(4)])
        }
        17 => out.extend([[0x07, 16], [0x08, 16], [0x07, 6], [0x08, 6]][rng.below(4)]),
        18 => out.extend([&[0x0f, 0x02, 0x77, 0x08][..], &[0x10, 0x06, 0x01, 0x30]][rng.below(2)]),
        _ => out.push(rng.next() as u8),
    }
}

/// A synthetic `.eh_frame`: a CIE (code alignment 1, data alignment -8, return address
/// r16, absolute 8-byte addresses), then FDEs from 1 to a few thousand, laid out one
/// after the other, overlapping, out of order or past 4 GiB, some pointing to themselves
/// or to another FDE as their CIE, each with a program of `cfa_op`s (a few, or thousands:
/// more rows than one FDE may give); with or without the zero terminator.
fn synthetic_eh_frame(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let entry = |out: &mut Vec<u8>, body: &[u8]| {
        out.extend((body.len() as u32).to_le_bytes());
        out.extend(body);
    };
    let mut cie = vec![0, 0, 0, 0, 1, b'z', b'R', 0];
    uleb(&mut cie, [1, 1, 1, 0, 4][rng.below(5)]);
    sleb(&mut cie, [-8, -8, -8, 1, 0][rng.below(5)]);
    uleb(&mut cie, [16, 16, 16, 6][rng.below(4)]);
    cie.extend([1, 0x04]);
    cie.extend([0x0c, 0x07, 0x08, 0x90, 0x01]);
    if rng.below(8) == 0 {
        cfa_op(rng, &mut cie);
    }
    entry(&mut out, &cie);
    let fdes = [1, 8, 64, 2000][rng.below(4)];
    let ops = [4, 16, 64, 5000][rng.below(4)];
    let mut pc = 0x1000u64;
    let mut last_fde = 0;
    for _ in 0..fdes {
        let at = out.len();
        let field = at as u32 + 4;
        let cie_pointer = match rng.below(32) {
            0 => field - last_fde as u32,
            1 => field + 4,
            2 => u32::MAX,
            _ => field,
        };
        let mut body = cie_pointer.to_le_bytes().to_vec();
        let len = [1u64, 16, 64, 4096, 0, 1 << 30][rng.below(6)];
        let start = match rng.below(16) {
            0 => pc.saturating_sub(32),
            1 => rng.next() >> rng.below(64),
            2 => u64::from(u32::MAX) - 8,
            _ => pc,
        };
        pc = start.saturating_add(len);
        body.extend(start.to_le_bytes());
        body.extend(len.to_le_bytes());
        body.push(0);
        for _ in 0..1 + rng.below(ops) {
            cfa_op(rng, &mut body);
        }
        entry(&mut out, &body);
        last_fde = at;
    }
    if rng.below(4) != 0 {
        out.extend([0, 0, 0, 0]);
    }
    out
}

/// `base` with its `.eh_frame` replaced by `eh_frame`, appended to the file: the section
/// header's offset and size point there.
fn with_eh_frame(base: &[u8], eh_frame: &[u8]) -> Vec<u8> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(base).expect("the base ELF parses");
    let index = file
        .section_by_name(".eh_frame")
        .expect("an .eh_frame")
        .index()
        .0;
    let shoff = u64::from_le_bytes(base[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(base[0x3a..0x3c].try_into().unwrap()) as usize;
    let header = shoff + index * shentsize;
    let mut bytes = base.to_vec();
    let at = bytes.len() as u64;
    bytes.extend(eh_frame);
    bytes[header + 0x18..header + 0x20].copy_from_slice(&at.to_le_bytes());
    bytes[header + 0x20..header + 0x28].copy_from_slice(&(eh_frame.len() as u64).to_le_bytes());
    bytes
}

/// The in-kernel walk's table builder (`FileCfi::table`, what `--ustack-walk` loads into
/// its map) against hostile call-frame information: Debian's libc and tests/kernel/user's
/// nofp.c (`.eh_frame`; `.debug_frame` alone) mutated as above, and nofp-g with a
/// synthetic `.eh_frame` in place of its own (`synthetic_eh_frame`). Properties: nothing
/// panics; no input takes more than a few seconds or allocates more than 64 MiB at once;
/// every table it gives is sane (`insane`), and a smaller `max` than its rows gives none;
/// the unmutated files give sane tables of more than 20 rows.
#[test]
fn hostile_cfi_gives_sane_walk_tables_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let mut originals = vec![std::fs::read("/lib/x86_64-linux-gnu/libc.so.6").expect("libc")];
    originals.extend(nofp_builds(dir.path()));
    for bytes in &originals {
        let t = table_of(bytes, 1);
        let rows = t.rows.expect("the unmutated CFI gives a table");
        assert!(rows.len() > 20, "{} rows", rows.len());
        assert_eq!(insane(&rows, MAX_TABLE), None);
        assert_eq!(
            t.smaller.map(|s| s.1),
            Some(true),
            "a table of 1 row is none"
        );
    }
    let mut targets = Vec::new();
    for bytes in &originals {
        for name in [".eh_frame", ".debug_frame"] {
            if let Some(range) = section_range(bytes, name).filter(|r| r.1 > 0) {
                targets.push((bytes, range, cfi_entries(bytes, range)));
            }
        }
    }
    assert_eq!(
        targets.len(),
        4,
        "libc's and nofp-g's .eh_frame, nofp-df's two"
    );

    let inputs = inputs();
    let mut rng = Rng(0x7ab1_e5ee_d00d_f00d);
    let (mut tables, mut slowest, mut fattest) = (0, Duration::ZERO, 0);
    for i in 0..inputs {
        // Every other input synthetic; libc, the slowest to read, one in eight.
        let bytes = if i % 2 == 0 {
            with_eh_frame(&originals[1], &synthetic_eh_frame(&mut rng))
        } else {
            let (original, cfi, entries) = &targets[[0, 1, 2, 3, 1, 2, 3, 1][(i / 2) % 8]];
            cfi_mutant(&mut rng, original, *cfi, entries)
        };
        let cut = rng.next();
        let (tx, rx) = mpsc::channel();
        let input = bytes.clone();
        let t0 = std::time::Instant::now();
        let worker = std::thread::spawn(move || {
            let _ = tx.send(table_of(&input, cut));
        });
        let keep = |what: &str| {
            let keep = Path::new(MANIFEST_DIR).join(format!("target/fuzz-cfi-table-{what}"));
            let _ = std::fs::write(&keep, &bytes);
            keep
        };
        let t = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(t) => t,
            Err(_) => panic!(
                "input {i} took over 20 s (kept as {})",
                keep("hang").display()
            ),
        };
        slowest = slowest.max(t0.elapsed());
        if worker.join().is_err() {
            panic!("input {i} panicked (kept as {})", keep("panic").display());
        }
        fattest = fattest.max(t.peak);
        assert!(
            t.peak <= 64 << 20,
            "input {i} allocated {} MiB at once (kept as {})",
            t.peak >> 20,
            keep("memory").display()
        );
        if let Some(rows) = &t.rows {
            tables += 1;
            if let Some(why) = insane(rows, MAX_TABLE) {
                panic!("input {i}: {why} (kept as {})", keep("rows").display());
            }
        }
        if let Some((n, none)) = t.smaller {
            assert!(
                none,
                "input {i}: table({n}) gave rows (kept as {})",
                keep("max").display()
            );
        }
    }
    // Most inputs still give a table (the rest are refused whole).
    assert!(
        tables * 2 > inputs,
        "{tables} of {inputs} inputs gave a table"
    );
    eprintln!(
        "{tables} of {inputs} inputs gave a table; the slowest took {} ms, the most memory {} KiB",
        slowest.as_millis(),
        fattest >> 10
    );
}
