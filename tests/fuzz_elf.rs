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
//! Properties: nothing panics, and no input takes more than a few seconds.
//!
//!     cargo test --release --test fuzz_elf                        # 400 mutants
//!     FSLAT_FUZZ_ELF_INPUTS=100000 cargo test --release --test fuzz_elf

use fslat::btf::{Features, KernelTypes};
use fslat::elf::{UserTypes, functions};
use fslat::stacks::unwind::{self, FileCfi, Regs, Space};
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

    let inputs: usize = std::env::var("FSLAT_FUZZ_ELF_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
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
    let inputs: usize = std::env::var("FSLAT_FUZZ_ELF_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
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
    let src = format!("{MANIFEST_DIR}/tests/kernel/user/nofp.c");
    let mut originals = Vec::new();
    for (name, flags) in [
        ("nofp-g", &["-O2", "-g", "-fomit-frame-pointer"][..]),
        (
            "nofp-df",
            &[
                "-O2",
                "-g",
                "-fomit-frame-pointer",
                "-fno-asynchronous-unwind-tables",
            ][..],
        ),
    ] {
        let out = dir.path().join(name);
        let built = std::process::Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .expect("gcc runs");
        assert!(built.success(), "gcc {name} failed");
        originals.push(std::fs::read(&out).unwrap());
    }
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

    let inputs: usize = std::env::var("FSLAT_FUZZ_ELF_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
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
