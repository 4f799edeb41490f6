//! An ELF file's functions: name, file offset (where a uprobe goes) and size, from its
//! `.symtab` and `.dynsym` (blazesym's inspector).

use super::ElfError;
use blazesym::SymType;
use blazesym::inspect::Inspector;
use blazesym::inspect::source::{Elf, Source};
use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;

/// One function of a user-space file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserFunc {
    /// The name scripts, `-l` and `func` use: the symbol, or a C++ symbol demangled
    /// (`shop::Cart::add`, with its parameter list when it is overloaded).
    pub name: String,
    /// The ELF symbol (mangled, for C++): what DWARF's linkage name says.
    pub symbol: String,
    /// Offset of its first instruction in the file: what the kernel's uprobe takes.
    pub offset: u64,
    /// Its virtual address as the file states it (for DWARF and `-l -v`).
    pub addr: u64,
    pub size: u64,
}

/// ELF header: `e_ident[EI_CLASS]`, `e_ident[EI_DATA]`, and `e_machine` at byte 18.
const ELFCLASS64: u8 = 2;
const ELFDATA2LSB: u8 = 1;
const EM_X86_64: u16 = 62;

/// The functions of the ELF file at `path`, sorted by name, each name once (the first
/// defined symbol of a name; `.symtab` before `.dynsym`).
pub fn functions(path: &Path) -> Result<Vec<UserFunc>, ElfError> {
    check_header(path)?;
    let inspector = Inspector::new();
    let src = Source::Elf(Elf {
        debug_syms: false,
        ..Elf::new(path)
    });
    let mut found: BTreeMap<String, UserFunc> = BTreeMap::new();
    inspector
        .for_each(&src, |sym| {
            let offset = sym.file_offset.filter(|o| *o != 0);
            if let Some(offset) =
                offset.filter(|_| sym.sym_type == SymType::Function && sym.addr != 0)
            {
                found.entry(sym.name.to_string()).or_insert(UserFunc {
                    name: sym.name.to_string(),
                    symbol: sym.name.to_string(),
                    offset,
                    addr: sym.addr,
                    size: sym.size.unwrap_or(0) as u64,
                });
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| ElfError::Unreadable {
            path: path.to_path_buf(),
            why: format!("its ELF structure is not readable ({e})"),
        })?;
    if found.is_empty() {
        return Err(ElfError::NoSymbols(path.to_path_buf()));
    }
    Ok(demangled(found.into_values().collect()))
}

/// `funcs` with each C++ symbol named as its source does: demangled, without its
/// parameters (`shop::Cart::add`) unless another function has that name (overloads:
/// `shop::Cart::add(long)`, `shop::Cart::add(int)`); sorted by name, each once.
fn demangled(mut funcs: Vec<UserFunc>) -> Vec<UserFunc> {
    let demangle = |symbol: &str| -> Option<(String, String)> {
        if !symbol.starts_with("_Z") {
            return None;
        }
        let sym = cpp_demangle::Symbol::new(symbol).ok()?;
        let full = sym.demangle().ok()?;
        let opts = cpp_demangle::DemangleOptions::new().no_params();
        let short = sym.demangle_with_options(&opts).ok()?;
        Some((short, full))
    };
    let names: Vec<Option<(String, String)>> = funcs.iter().map(|f| demangle(&f.symbol)).collect();
    let mut uses: BTreeMap<&str, usize> = BTreeMap::new();
    for (f, d) in funcs.iter().zip(&names) {
        let short = d.as_ref().map_or(f.symbol.as_str(), |(s, _)| s.as_str());
        *uses.entry(short).or_default() += 1;
    }
    let chosen: Vec<Option<String>> = names
        .iter()
        .map(|d| {
            d.as_ref().map(|(short, full)| {
                if uses[short.as_str()] == 1 {
                    short
                } else {
                    full
                }
                .clone()
            })
        })
        .collect();
    for (f, name) in funcs.iter_mut().zip(chosen) {
        if let Some(name) = name {
            f.name = name;
        }
    }
    funcs.sort_by(|a, b| a.name.cmp(&b.name));
    funcs.dedup_by(|a, b| a.name == b.name);
    funcs
}

/// A 64-bit little-endian x86-64 ELF file, or why not.
fn check_header(path: &Path) -> Result<(), ElfError> {
    let unreadable = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => ElfError::NotFound(path.to_path_buf()),
        _ => ElfError::Unreadable {
            path: path.to_path_buf(),
            why: e.to_string(),
        },
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(ElfError::NotElf(path.to_path_buf()));
    }
    let mut head = [0u8; 20];
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(unreadable(e)),
        }
    }
    if got < head.len() || &head[..4] != b"\x7fELF" {
        return Err(ElfError::NotElf(path.to_path_buf()));
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    let what = if head[4] != ELFCLASS64 {
        Some("a 32-bit ELF file".to_string())
    } else if head[5] != ELFDATA2LSB {
        Some("a big-endian ELF file".to_string())
    } else if machine != EM_X86_64 {
        Some(format!(
            "an ELF file for another machine (e_machine {machine})"
        ))
    } else {
        None
    };
    match what {
        Some(what) => Err(ElfError::OtherMachine {
            path: path.to_path_buf(),
            what,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary itself is an unstripped x86-64 ELF file with `main`.
    #[test]
    fn the_test_binary_has_main_at_a_file_offset() {
        let exe = std::env::current_exe().expect("test binary");
        let funcs = functions(&exe).expect("readable");
        let main = funcs.iter().find(|f| f.name == "main").expect("main");
        assert!(main.offset > 0 && main.offset < std::fs::metadata(&exe).unwrap().len());
    }

    #[test]
    fn a_text_file_is_not_elf() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("script.sh");
        std::fs::write(&p, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(functions(&p), Err(ElfError::NotElf(p.clone())));
        let short = dir.path().join("short");
        std::fs::write(&short, b"\x7fELF").unwrap();
        assert_eq!(functions(&short), Err(ElfError::NotElf(short.clone())));
    }

    #[test]
    fn a_missing_file_says_so() {
        let p = Path::new("/nonexistent/fslat-test");
        assert_eq!(functions(p), Err(ElfError::NotFound(p.to_path_buf())));
    }

    /// A truncated copy of a real ELF file at many lengths, and copies with bytes
    /// overwritten, are errors or symbol lists: never a panic.
    #[test]
    fn damaged_elf_files_never_panic() {
        let exe = std::env::current_exe().expect("test binary");
        let bytes = std::fs::read(&exe).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("damaged");
        let header_end = 20;
        for len in [20, 63, 64, 100, 1000, 4096, bytes.len() / 2] {
            std::fs::write(&p, &bytes[..len.min(bytes.len())]).unwrap();
            let _ = functions(&p);
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..40 {
            let mut b = bytes[..bytes.len().min(200_000)].to_vec();
            for _ in 0..16 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let at = header_end + (seed as usize) % (b.len() - header_end);
                b[at] = (seed >> 32) as u8;
            }
            std::fs::write(&p, &b).unwrap();
            let _ = functions(&p);
        }
    }
}
