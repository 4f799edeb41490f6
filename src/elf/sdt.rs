//! Statically defined probes (SystemTap SDT, `sys/sdt.h`'s `DTRACE_PROBE`/`STAP_PROBE`):
//! the notes of `.note.stapsdt`, each a probe's address, the link-time address of
//! `.stapsdt.base`, its semaphore's address, provider, name and argument specs
//! (`-4@%eax`, `8@16(%rbp)`, `8@$42`, `4@-8(%rbp,%rax,4)`).
//!
//! The file is input fslat does not trust: every read is checked, a note that does not
//! parse is an error naming it, never a panic.

use super::ElfError;
use object::{Object, ObjectSection, ObjectSegment};
use std::path::Path;

/// The owner and type of a SystemTap SDT note.
const OWNER: &[u8] = b"stapsdt";
const NT_STAPSDT: u32 = 3;

/// One probe of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub provider: String,
    pub name: String,
    /// The probe's address as the file is linked (prelinking undone by `.stapsdt.base`).
    pub addr: u64,
    /// Its offset in the file: where the uprobe goes.
    pub offset: u64,
    /// The semaphore's offset in the file (the uprobe's `ref_ctr_offset`), if it has one.
    pub semaphore: Option<u64>,
    pub args: Vec<Arg>,
}

/// One argument: its size and sign, and where the probe site keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// 1, 2, 4 or 8 bytes.
    pub size: u8,
    pub signed: bool,
    pub at: Location,
    /// As the note spells it (`-4@%eax`).
    pub spec: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `%eax`, `%rdi`, `%r12d`: a register, by its 64-bit name.
    Register(String),
    /// `DISP(%BASE)`, `DISP(%BASE,%INDEX,SCALE)`: memory.
    Memory {
        base: String,
        disp: i64,
        index: Option<(String, u8)>,
    },
    /// `$42`: a constant.
    Constant(i64),
    /// A form fslat (and libbpf) cannot read, such as a symbol's address
    /// (`NBuffers(%rip)`): the probe is listed, but cannot be attached.
    Other,
}

impl std::fmt::Display for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.signed { "s" } else { "u" };
        write!(f, "{sign}{}", u32::from(self.size) * 8)
    }
}

impl Probe {
    /// `provider:name(s32 arg0, u64 arg1)`: how `-l` shows it.
    pub fn describe(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{a} arg{i}"))
            .collect();
        format!("{}:{}({})", self.provider, self.name, args.join(", "))
    }
}

/// The providers of `probes`, each once, sorted.
pub fn providers(probes: &[Probe]) -> Vec<String> {
    let mut names: Vec<String> = probes.iter().map(|p| p.provider.clone()).collect();
    names.sort();
    names.dedup();
    names
}

/// The SDT probes of the ELF file at `path`, in the order of its notes (empty when it
/// has none).
pub fn probes(path: &Path) -> Result<Vec<Probe>, ElfError> {
    let data = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ElfError::NotFound(path.to_path_buf()),
        _ => ElfError::Unreadable {
            path: path.to_path_buf(),
            why: e.to_string(),
        },
    })?;
    parse(&data).map_err(|why| ElfError::Unreadable {
        path: path.to_path_buf(),
        why,
    })
}

/// The probes of an ELF image, or why its notes cannot be read.
pub fn parse(data: &[u8]) -> Result<Vec<Probe>, String> {
    let file = object::File::parse(data).map_err(|_| "it is not an ELF file".to_string())?;
    let Some(notes) = file.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let notes = notes
        .data()
        .map_err(|e| format!("its .note.stapsdt is not readable ({e})"))?;
    let base = file.section_by_name(".stapsdt.base").map(|s| s.address());
    let segments: Vec<(u64, u64, u64)> = file
        .segments()
        .filter_map(|s| {
            let (offset, size) = s.file_range();
            (size > 0).then(|| (s.address(), offset, size))
        })
        .collect();
    // A link-time address's offset in the file, through the segment that loads it.
    let offset_of = |addr: u64| {
        segments
            .iter()
            .find(|(at, _, size)| addr >= *at && addr - *at < *size)
            .map(|(at, offset, _)| addr - at + offset)
    };
    let mut probes = Vec::new();
    let mut rest = notes;
    while !rest.is_empty() {
        let (note, after) = next_note(rest)?;
        rest = after;
        let Some(desc) = note else { continue };
        let mut probe = probe(desc)?;
        // Prelinked (or otherwise moved) after the note was written: the note's base is
        // where `.stapsdt.base` was; the probe moved as much as the section did.
        if let (Some(now), Some(then)) = (base, probe.base) {
            probe.addr = probe.addr.wrapping_add(now).wrapping_sub(then);
        }
        let offset = offset_of(probe.addr).ok_or(format!(
            "probe {}:{} is at 0x{:x}, outside every loaded segment",
            probe.provider, probe.name, probe.addr
        ))?;
        let semaphore = match probe.semaphore {
            0 => None,
            at => Some(offset_of(at).ok_or(format!(
                "the semaphore of probe {}:{} is at 0x{at:x}, outside every loaded segment",
                probe.provider, probe.name
            ))?),
        };
        probes.push(Probe {
            provider: probe.provider,
            name: probe.name,
            addr: probe.addr,
            offset,
            semaphore,
            args: probe.args,
        });
    }
    Ok(probes)
}

/// A note as written: addresses before relocation.
struct RawProbe {
    provider: String,
    name: String,
    addr: u64,
    base: Option<u64>,
    semaphore: u64,
    args: Vec<Arg>,
}

/// The next note of `data`: its description if it is an SDT note, and what follows it.
fn next_note(data: &[u8]) -> Result<(Option<&[u8]>, &[u8]), String> {
    let word = |at: usize| -> Result<u32, String> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| "a note of .note.stapsdt is cut short".to_string())
    };
    let (namesz, descsz, kind) = (word(0)? as usize, word(4)? as usize, word(8)?);
    let name_end = 12usize
        .checked_add(namesz)
        .ok_or("a note's name is too long")?;
    let desc_at = align4(name_end).ok_or("a note's name is too long")?;
    let desc_end = desc_at
        .checked_add(descsz)
        .ok_or("a note's description is too long")?;
    let next = align4(desc_end).ok_or("a note's description is too long")?;
    let (Some(name), Some(desc)) = (data.get(12..name_end), data.get(desc_at..desc_end)) else {
        return Err("a note of .note.stapsdt is cut short".into());
    };
    let rest = data.get(next..).unwrap_or(&[]);
    let name = name.strip_suffix(b"\0").unwrap_or(name);
    Ok(((name == OWNER && kind == NT_STAPSDT).then_some(desc), rest))
}

fn align4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|n| n & !3)
}

/// A note's description: three addresses, then provider, name and arguments, each
/// NUL-terminated.
fn probe(desc: &[u8]) -> Result<RawProbe, String> {
    let addr = |i: usize| -> Result<u64, String> {
        desc.get(i * 8..i * 8 + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| "an SDT note is cut short".to_string())
    };
    let (pc, base, semaphore) = (addr(0)?, addr(1)?, addr(2)?);
    let mut strings = desc.get(24..).unwrap_or(&[]).split(|&b| b == 0);
    let mut text = |what: &str| -> Result<String, String> {
        let s = strings
            .next()
            .ok_or_else(|| format!("an SDT note has no {what}"))?;
        String::from_utf8(s.to_vec()).map_err(|_| format!("an SDT note's {what} is not text"))
    };
    let provider = text("provider")?;
    let name = text("name")?;
    let specs = text("arguments").unwrap_or_default();
    let args = specs
        .split_whitespace()
        .map(|spec| {
            arg(spec)
                .ok_or_else(|| format!("probe {provider}:{name} has a malformed argument `{spec}`"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RawProbe {
        provider,
        name,
        addr: pc,
        base: (base != 0).then_some(base),
        semaphore,
        args,
    })
}

/// One argument spec: `[-]SIZE@LOCATION`.
pub fn arg(spec: &str) -> Option<Arg> {
    let (size, at) = spec.split_once('@')?;
    let (signed, size) = match size.strip_prefix('-') {
        Some(s) => (true, s),
        None => (false, size),
    };
    let size: u8 = size.parse().ok()?;
    if ![1, 2, 4, 8].contains(&size) {
        return None;
    }
    Some(Arg {
        size,
        signed,
        at: location(at).unwrap_or(Location::Other),
        spec: spec.to_string(),
    })
}

fn location(at: &str) -> Option<Location> {
    if let Some(c) = at.strip_prefix('$') {
        return Some(Location::Constant(number(c)?));
    }
    if let Some(r) = at.strip_prefix('%') {
        return Some(Location::Register(register(r)?.to_string()));
    }
    let (disp, inside) = at.strip_suffix(')')?.split_once('(')?;
    let disp = if disp.is_empty() { 0 } else { number(disp)? };
    let mut parts = inside.split(',');
    let base = register(parts.next()?.strip_prefix('%')?)?.to_string();
    let index = match parts.next() {
        None => None,
        Some(i) => {
            let i = register(i.strip_prefix('%')?)?.to_string();
            let scale: u8 = match parts.next() {
                Some(s) => s.parse().ok()?,
                None => 1,
            };
            Some((i, scale))
        }
    };
    if parts.next().is_some() {
        return None;
    }
    Some(Location::Memory { base, disp, index })
}

fn number(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => digits.parse::<u64>().ok()? as i64,
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// A register's 64-bit name (`eax`, `ax`, `al` → `rax`; `r12d` → `r12`), the names
/// `struct pt_regs` has.
fn register(r: &str) -> Option<&'static str> {
    const FAMILIES: [(&str, [&str; 4]); 8] = [
        ("rax", ["rax", "eax", "ax", "al"]),
        ("rbx", ["rbx", "ebx", "bx", "bl"]),
        ("rcx", ["rcx", "ecx", "cx", "cl"]),
        ("rdx", ["rdx", "edx", "dx", "dl"]),
        ("rsi", ["rsi", "esi", "si", "sil"]),
        ("rdi", ["rdi", "edi", "di", "dil"]),
        ("rbp", ["rbp", "ebp", "bp", "bpl"]),
        ("rsp", ["rsp", "esp", "sp", "spl"]),
    ];
    for (full, names) in FAMILIES {
        if names.contains(&r) {
            return Some(full);
        }
    }
    if r == "rip" {
        return Some("rip");
    }
    const NUMBERED: [&str; 8] = ["r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"];
    let n = r.trim_end_matches(['d', 'w', 'b']);
    NUMBERED.iter().find(|&&x| x == n).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_form_gcc_and_clang_write_reads() {
        let cases = [
            ("-4@%eax", 4, true, Location::Register("rax".into())),
            ("8@%rdx", 8, false, Location::Register("rdx".into())),
            ("-8@%rdx", 8, true, Location::Register("rdx".into())),
            ("1@%sil", 1, false, Location::Register("rsi".into())),
            ("-2@%r12w", 2, true, Location::Register("r12".into())),
            ("4@%r9d", 4, false, Location::Register("r9".into())),
            ("8@$42", 8, false, Location::Constant(42)),
            ("-4@$-7", 4, true, Location::Constant(-7)),
            (
                "8@16(%rbp)",
                8,
                false,
                Location::Memory {
                    base: "rbp".into(),
                    disp: 16,
                    index: None,
                },
            ),
            (
                "-4@-20(%rbp)",
                4,
                true,
                Location::Memory {
                    base: "rbp".into(),
                    disp: -20,
                    index: None,
                },
            ),
            (
                "8@(%rax)",
                8,
                false,
                Location::Memory {
                    base: "rax".into(),
                    disp: 0,
                    index: None,
                },
            ),
            (
                "4@-8(%rbp,%rax,4)",
                4,
                false,
                Location::Memory {
                    base: "rbp".into(),
                    disp: -8,
                    index: Some(("rax".into(), 4)),
                },
            ),
        ];
        for (spec, size, signed, at) in cases {
            let got = arg(spec).unwrap_or_else(|| panic!("{spec} parses"));
            assert_eq!((got.size, got.signed, got.at), (size, signed, at), "{spec}");
        }
    }

    #[test]
    fn malformed_specs_are_refused() {
        for spec in ["", "4", "3@%eax", "x@%eax"] {
            assert_eq!(arg(spec), None, "{spec}");
        }
        // A symbol's displacement (`NBuffers(%rip)`) is not a number: not guessed.
        for spec in ["4@%xyz", "4@8(%rbp", "4@(%rbp,%rax,4,1)", "8@buf+8(%rip)"] {
            let a = arg(spec).unwrap_or_else(|| panic!("{spec}: its size reads"));
            assert_eq!(a.at, Location::Other, "{spec}");
        }
    }

    #[test]
    fn a_note_cut_short_is_an_error_not_a_panic() {
        let mut note = Vec::new();
        note.extend(8u32.to_le_bytes());
        note.extend(40u32.to_le_bytes());
        note.extend(3u32.to_le_bytes());
        note.extend(b"stapsdt\0");
        note.extend([0u8; 10]);
        assert!(next_note(&note).is_err());
        assert!(next_note(&note[..5]).is_err());
    }

    /// tests/kernel/user/sdt.c, built by gcc (PIE) and clang (non-PIE): its five probes,
    /// each at a `nop` (what sys/sdt.h puts at a probe site), one with a semaphore.
    #[test]
    fn the_test_program_s_probes_are_at_their_nops() {
        let dir = crate::elf::test_programs();
        for file in ["sdt", "sdt-clang"] {
            let path = dir.path().join(file);
            let data = std::fs::read(&path).expect("the test program was built");
            let probes = probes(&path).expect("its notes read");
            let names: Vec<&str> = probes.iter().map(|p| p.name.as_str()).collect();
            for name in ["args", "enter", "leave", "name", "guarded"] {
                assert!(names.contains(&name), "{file}: {names:?}");
            }
            for p in &probes {
                assert_eq!(p.provider, "fslat");
                assert_eq!(
                    data[p.offset as usize], 0x90,
                    "{file}: {} is not at a nop",
                    p.name
                );
                let guarded = p.name == "guarded";
                assert_eq!(p.semaphore.is_some(), guarded, "{file}: {}", p.name);
            }
            let args = probes.iter().find(|p| p.name == "args").expect("args");
            let types: Vec<String> = args.args.iter().map(|a| a.to_string()).collect();
            assert_eq!(
                types,
                ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"],
                "{file}"
            );
            assert!(args.args.iter().all(|a| a.at != Location::Other), "{file}");
        }
    }

    #[test]
    fn a_note_s_probe_reads_with_its_arguments() {
        let mut desc = Vec::new();
        desc.extend(0x1139u64.to_le_bytes());
        desc.extend(0x2004u64.to_le_bytes());
        desc.extend(0x4010u64.to_le_bytes());
        desc.extend(b"fslat\0hit\0-4@%edi 8@-16(%rbp)\0");
        let p = probe(&desc).expect("the note reads");
        assert_eq!((p.provider.as_str(), p.name.as_str()), ("fslat", "hit"));
        assert_eq!(
            (p.addr, p.base, p.semaphore),
            (0x1139, Some(0x2004), 0x4010)
        );
        assert_eq!(p.args.len(), 2);
        assert_eq!(p.args[0].to_string(), "s32");
        assert_eq!(p.args[1].to_string(), "u64");
    }
}
