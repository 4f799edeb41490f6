//! User-space files: what `btf/` is for kernel functions, this is for `session FILE:FUNC`.
//! `find` turns the script's FILE (a path, a library name, or nothing for the traced
//! program) into a path; `functions` reads an ELF file's function symbols with their file
//! offsets (a uprobe's address); `UserTypes` gives the checker the functions' parameters
//! and return value as `KernelTypes`.
//!
//! Every file here is input fslat does not trust: it may be truncated, hostile or
//! replaced while read. Each problem is an `ElfError`, never a panic.

mod dwarf;
mod find;
mod ldcache;
pub mod sdt;
mod symbols;
mod types;

pub use find::{Lookup, find};
pub use symbols::{UserFunc, functions};
pub use types::{ARG_REGISTERS, UserTypes};

use std::path::PathBuf;

/// Why a user-space file cannot be traced; the text follows "cannot trace `FILE`: ".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ElfError {
    #[error("there is no such file")]
    NotFound(PathBuf),
    #[error("{}: {why}", path.display())]
    Unreadable { path: PathBuf, why: String },
    #[error("{} is not an ELF file (an executable or a shared library)", .0.display())]
    NotElf(PathBuf),
    #[error("{} is {what}; fslat traces 64-bit x86-64 programs", path.display())]
    OtherMachine { path: PathBuf, what: String },
    #[error(
        "{} has no symbol table (it is stripped): fslat finds functions by their symbols; trace an unstripped build, or a library's exported functions"
    , .0.display())]
    NoSymbols(PathBuf),
    #[error("no library `{name}` found (looked in {looked})")]
    NoLibrary { name: String, looked: String },
    #[error("process {0} does not exist")]
    NoProcess(u32),
    #[error("the command `{0}` is not a file nor on PATH")]
    NoCommand(String),
}

/// Tests: tests/kernel/user's programs (`ufunc`, `ufunc-pie`, `libufunc.so`), built with
/// DWARF by its build script (gcc) in a new directory.
#[cfg(test)]
pub(crate) fn test_programs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let built = std::process::Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/kernel/user/build"
    ))
    .arg(dir.path())
    .status()
    .expect("tests/kernel/user/build runs (it needs gcc)");
    assert!(built.success(), "tests/kernel/user/build failed");
    dir
}
