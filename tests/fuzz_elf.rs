//! The ELF and DWARF reader against hostile files: tests/kernel/user's program, built
//! with DWARF, then mutants of it (bytes overwritten anywhere, in its headers, section
//! table, symbol tables and debug sections; truncated) through `fslat::elf::functions`
//! and the DWARF of every function it finds (`UserTypes::read_dwarf`, each signature).
//!
//! The same for SDT notes (`fslat::elf::sdt::parse`) on mutants of its `sdt` program.
//!
//! Properties: nothing panics, and no input takes more than a few seconds.
//!
//!     cargo test --release --test fuzz_elf                        # 400 mutants
//!     FSLAT_FUZZ_ELF_INPUTS=100000 cargo test --release --test fuzz_elf

use fslat::btf::{Features, KernelTypes};
use fslat::elf::{UserTypes, functions};
use std::path::Path;
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
