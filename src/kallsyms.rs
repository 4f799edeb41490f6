//! What the running kernel's symbol table says about a function's other copies, for
//! `-l`'s warnings: a function whose calls can run through code fslat does not attach to.
//!
//! - The compiler's specialised copies (`foo.isra.0`, `foo.constprop.0`, `foo.part.0`):
//!   callers it rewrote call the copy, and a session on `foo` does not see those calls.
//! - Several functions with one name (static functions in different files): fslat
//!   attaches to one of them; calls to the others are not seen.
//!
//! Inlining into a caller leaves no symbol at all, so it cannot be told from here.
//!
//! `symbols` is the one reader of the table's lines (stacks use it for the kernel's
//! text range).

use std::collections::HashMap;

pub const KALLSYMS: &str = "/proc/kallsyms";

/// One `ADDRESS TYPE NAME [MODULE]` line of `/proc/kallsyms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// 0 when the kernel hides addresses (`kptr_restrict`) or the field is not hex.
    pub addr: u64,
    pub kind: &'a str,
    pub name: &'a str,
}

/// The symbols of `/proc/kallsyms` text, skipping lines that are not symbols.
pub fn symbols(text: &str) -> impl Iterator<Item = Symbol<'_>> {
    text.lines().filter_map(|line| {
        let mut fields = line.split_whitespace();
        let (addr, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
        Some(Symbol {
            addr: u64::from_str_radix(addr, 16).unwrap_or(0),
            kind,
            name,
        })
    })
}

/// The suffixes GCC gives the copies it makes of a function.
const COPY_KINDS: [&str; 3] = [".isra.", ".constprop.", ".part."];

#[derive(Debug, Default)]
pub struct Copies {
    /// Text symbols by name: how many times each appears.
    times: HashMap<String, u32>,
    /// Compiler-made copies by the name of the function they copy.
    clones: HashMap<String, Vec<String>>,
}

/// What a listed function's warning says.
#[derive(Debug, PartialEq, Eq)]
pub enum Note<'a> {
    Clones(&'a [String]),
    Several(u32),
}

impl Copies {
    /// The running kernel's, or `None` when /proc/kallsyms cannot be read.
    pub fn running() -> Option<Copies> {
        std::fs::read_to_string(KALLSYMS)
            .ok()
            .map(|t| Copies::parse(&t))
    }

    /// `ADDRESS TYPE NAME [MODULE]` lines; only text symbols (`t`, `T`) count.
    pub fn parse(text: &str) -> Copies {
        let mut copies = Copies::default();
        for Symbol { kind, name, .. } in symbols(text) {
            // `__pfx_NAME` is the padding before NAME, not a function.
            if !matches!(kind, "t" | "T") || name.starts_with("__pfx_") {
                continue;
            }
            match copied_from(name) {
                Some(base) => copies
                    .clones
                    .entry(base.to_string())
                    .or_default()
                    .push(name.to_string()),
                None => *copies.times.entry(name.to_string()).or_default() += 1,
            }
        }
        for names in copies.clones.values_mut() {
            names.sort();
            names.dedup();
        }
        copies
    }

    /// Why calls to `name` may be missed, if the symbol table tells.
    pub fn note(&self, name: &str) -> Option<Note<'_>> {
        if let Some(clones) = self.clones.get(name) {
            return Some(Note::Clones(clones));
        }
        self.times
            .get(name)
            .copied()
            .filter(|&n| n > 1)
            .map(Note::Several)
    }
}

impl std::fmt::Display for Note<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::Clones(names) => {
                let shown: Vec<String> = names.iter().take(3).map(|n| format!("`{n}`")).collect();
                let more = if names.len() > 3 { ", ..." } else { "" };
                write!(
                    f,
                    "partly inlined: the compiler made copies of it ({}{more}), and calls through them are not seen",
                    shown.join(", ")
                )
            }
            Note::Several(n) => write!(
                f,
                "{n} kernel functions have this name: fslat attaches to one, and calls to the others are not seen"
            ),
        }
    }
}

/// `foo` for `foo.isra.0`, `foo.constprop.0.isra.0`, `foo.part.1`; `None` otherwise.
fn copied_from(name: &str) -> Option<&str> {
    COPY_KINDS
        .iter()
        .filter_map(|k| name.find(k))
        .min()
        .map(|at| &name[..at])
        .filter(|base| !base.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
ffffffff81000000 T vfs_read
ffffffff81000100 t __pfx_shrink_slab.constprop.0
ffffffff81000110 t shrink_slab.constprop.0
ffffffff81000200 T shrink_slab
ffffffff81000300 t show
ffffffff81000400 t show
ffffffff81000500 t show\t[loop]
ffffffff81000600 t tail.part.0.isra.0
ffffffff81000700 t tail.cold
ffffffff81000800 d show
";

    #[test]
    fn names_compiler_copies_and_repeated_names() {
        let c = Copies::parse(TABLE);
        assert_eq!(c.note("vfs_read"), None);
        let shrink = ["shrink_slab.constprop.0".to_string()];
        assert_eq!(c.note("shrink_slab"), Some(Note::Clones(&shrink)));
        assert_eq!(c.note("show"), Some(Note::Several(3)));
        let tail = ["tail.part.0.isra.0".to_string()];
        assert_eq!(c.note("tail"), Some(Note::Clones(&tail)));
    }

    #[test]
    fn the_note_says_calls_are_not_seen() {
        let c = Copies::parse(TABLE);
        let text = c.note("shrink_slab").expect("a note").to_string();
        assert_eq!(
            text,
            "partly inlined: the compiler made copies of it (`shrink_slab.constprop.0`), and calls through them are not seen"
        );
    }
}
