//! fslat: a tracing language for kernel function latency.
//!
//! The pipeline, one stage per module, data flowing one way:
//!
//! ```text
//! script text ─syntax::parse→ AST ─check::check→ checked program ─codegen::generate→ C
//!   ─build::Compiler::compile→ BPF object ─runtime::run→ events ─output→ text / JSON
//! ```
//!
//! Every `unsafe` system call is in `sys`; the rest of the crate may not use `unsafe`.

#![deny(unsafe_code)]
#![deny(clippy::print_stderr)]

/// `eprintln!` that never panics. When standard error is closed (`fslat -v ... 2>&1 |
/// head`) the line is lost, where `eprintln!` would panic, and a panic inside libbpf's
/// print callback, called from C, aborts the process.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics (see `stderr_line!`).
#[macro_export]
macro_rules! stderr_text {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

pub mod aggregate;
pub mod btf;
pub mod build;
pub mod bundle;
pub mod cgroups;
pub mod check;
mod child;
pub mod cli;
pub mod codegen;
pub mod diag;
pub mod doctor;
pub mod driver;
pub mod elf;
mod kallsyms;
pub mod listing;
pub mod manpage;
pub mod metrics;
pub mod output;
pub mod repl;
pub mod runtime;
pub mod stacks;
pub mod syntax;
#[allow(unsafe_code)]
pub mod sys;
pub mod traceable;

#[cfg(test)]
mod layers;

use btf::KernelTypes;
use check::program::Program;
use codegen::Mode;
use diag::Diagnostic;

/// Script text to checked program and C: everything about a script that needs no kernel
/// beyond its types.
pub fn compile(
    source: &str,
    kernel: &dyn KernelTypes,
    mode: Mode,
) -> Result<(Program, String), Vec<Diagnostic>> {
    compile_with(source, kernel, mode, check::Options::default())
}

/// `compile` with the checker's options (the function limit, the traceable functions).
pub fn compile_with(
    source: &str,
    kernel: &dyn KernelTypes,
    mode: Mode,
    opts: check::Options,
) -> Result<(Program, String), Vec<Diagnostic>> {
    let ast = syntax::parse(source)?;
    let program = check::check_with(&ast, source, kernel, opts)?;
    let c = codegen::generate(&program, mode)?;
    Ok((program, c))
}
