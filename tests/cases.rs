//! Data-driven compiler tests over `tests/cases/*.fsl` and `examples/*.fsl`, against the
//! fixture kernel (`fslat::btf::Fixture`, which has fsession). Each script is its own test,
//! named after its file (`cases::unknown_name`, `examples::slow_reads`,
//! `linux_5_10::cases::aggregations`): a failing case names itself, and
//! `cargo test --test cases unknown_name` runs one alone. libtest-mimic makes the tests at
//! run time from the files, with libtest's filtering, listing and output (the standard
//! harness for tests generated from data; a new file needs no code).
//!
//! - A script with a sibling `.err` file must fail; the file holds the rendered
//!   diagnostics, exactly.
//! - Any other script must compile in both modes, build with the real clang, and open with
//!   libbpf; a sibling `.expect` file holds what fslat decides about the object and schema:
//!   programs with their sections, the maps fslat declares and its settings section, event
//!   fields with offsets, the phase split. Sections clang makes on its own (constant and
//!   string pools, `.bss` for zeroed globals) are left out: they vary with the clang.
//!
//! `FSLAT_BLESS=1 cargo test --test cases` rewrites the expectation files that exist. It
//! never creates one: a script that newly fails must not become a passing `.err` case
//! unnoticed, so a new case's `.err` or `.expect` is created by hand (empty will do) and
//! then blessed.

use fslat::btf::Fixture;
use fslat::build::{Compiler, find_clang};
use fslat::check::program::{FieldKind, Program};
use fslat::codegen::Mode;
use fslat::diag::{Source, render};
use libtest_mimic::{Arguments, Failed, Trial};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let mut scripts_found = 0;
    for dir in ["tests/cases", "examples"] {
        let group = Path::new(dir)
            .file_name()
            .map_or(dir.to_string(), |n| n.to_string_lossy().into_owned());
        for path in scripts(dir) {
            scripts_found += 1;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let fails = path.with_extension("err").exists();
            let p = path.clone();
            trials.push(Trial::test(format!("{group}::{stem}"), move || {
                compiles_or_fails_as_expected(&p)
            }));
            if !fails {
                trials.push(Trial::test(
                    format!("linux_5_10::{group}::{stem}"),
                    move || builds_for_linux_5_10(&path),
                ));
            }
        }
    }
    let bpftrace_tools = scripts("examples/bpftrace");
    let tools_found = bpftrace_tools.len();
    for path in bpftrace_tools {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        trials.push(Trial::test(format!("bpftrace_tools::{stem}"), move || {
            builds_for_this_kernel(&path)
        }));
    }
    trials.push(Trial::test("bpftrace_tools::at_least_25", move || {
        if tools_found >= 25 {
            Ok(())
        } else {
            Err(format!("only {tools_found} of bpftrace's tools in examples/bpftrace").into())
        }
    }));
    trials.push(Trial::test("the_corpus_is_there", move || {
        the_corpus_is_there(scripts_found)
    }));
    trials.push(Trial::test(
        "every_example_runs_on_every_kernel",
        every_example_runs_on_every_kernel,
    ));
    trials.push(Trial::test(
        "the_check_sees_what_5_10_lacks",
        the_check_sees_what_5_10_lacks,
    ));
    libtest_mimic::run(&args, trials).exit_code()
}

fn scripts(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "fsl"))
        .collect();
    v.sort();
    v
}

/// Scripts of a corpus that could not be found would pass as no tests at all.
fn the_corpus_is_there(found: usize) -> Result<(), Failed> {
    if found <= 10 {
        return Err(format!(
            "only {found} scripts in tests/cases and examples: the corpus is missing"
        )
        .into());
    }
    let uses_path = scripts("tests/cases")
        .into_iter()
        .chain(scripts("examples"))
        .filter(|p| !p.with_extension("err").exists())
        .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("path(")));
    if !uses_path {
        return Err("no script of the corpus uses path(): the 5.10 refusal goes untested".into());
    }
    Ok(())
}

/// Users copy examples/: each has a kernel case (`tests/kernel/cases/example_NAME.case`)
/// that runs it on every kernel, with no `KERNELS` or `REQUIRES` line to skip one.
fn every_example_runs_on_every_kernel() -> Result<(), Failed> {
    let mut missing = Vec::new();
    for p in scripts("examples") {
        let name = p.file_stem().unwrap_or_default().to_string_lossy();
        let case = format!("tests/kernel/cases/example_{name}.case");
        match std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&case)) {
            Ok(text)
                if text
                    .lines()
                    .any(|l| l.starts_with("KERNELS") || l.starts_with("REQUIRES")) =>
            {
                missing.push(format!("{case} does not run on every kernel"))
            }
            Ok(text) if text.contains(&format!("examples/{name}.fsl")) => {}
            Ok(_) => missing.push(format!("{case} does not run examples/{name}.fsl")),
            Err(_) => missing.push(format!("{case} is missing")),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("\n").into())
    }
}

fn check_expectation(path: &Path, actual: &str, failures: &mut Vec<String>) {
    match std::fs::read_to_string(path) {
        Ok(want) if want == actual => {}
        Ok(_) if std::env::var_os("FSLAT_BLESS").is_some() => {
            std::fs::write(path, actual).expect("write expectation");
        }
        Ok(want) => failures.push(format!(
            "{}: differs\n--- expected\n{want}--- actual\n{actual}",
            path.display()
        )),
        Err(_) => failures.push(format!(
            "{}: missing: create it (FSLAT_BLESS=1 then fills it)\n--- actual\n{actual}",
            path.display()
        )),
    }
}

fn kind_name(kind: FieldKind) -> String {
    match kind {
        FieldKind::Int(s) => format!("{}{}", if s.signed { "s" } else { "u" }, s.size * 8),
        FieldKind::Bool => "bool".into(),
        FieldKind::Duration => "duration".into(),
        FieldKind::Str { cap } => format!("str{cap}"),
        FieldKind::Ptr => "ptr".into(),
        FieldKind::Stack(k) => k.name().into(),
        FieldKind::Formatted(s, radix) => format!("{}{}", radix.name(), s.size * 8),
        FieldKind::CgroupName(v) => format!("{}:u64", v.name()),
    }
}

/// Whether a map of the object is one fslat declares: a map in `.maps` (a C name) or the
/// settings section fslat writes before load; not a section clang made on its own
/// (`.rodata.cst32`, `.rodata.str1.1`, `fslat.bss` for zeroed globals).
fn fslat_declares(map: &str) -> bool {
    map == fslat::check::resources::SETTINGS_SECTION
        || map.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn describe(program: &Program, mode: Mode, object: &[u8]) -> String {
    let mut out = String::new();
    let obj = libbpf_rs::ObjectBuilder::default()
        .name("fslat")
        .expect("a valid object name")
        .open_memory(object)
        .expect("libbpf opens the object");
    let _ = writeln!(out, "mode {}", mode.name());
    for p in obj.progs() {
        let _ = writeln!(
            out,
            "  program {} {}",
            p.name().to_string_lossy(),
            p.section().to_string_lossy()
        );
    }
    let mut maps: Vec<String> = obj
        .maps()
        .map(|m| m.name().to_string_lossy().into_owned())
        .filter(|m| fslat_declares(m))
        .collect();
    maps.sort();
    let _ = writeln!(out, "  maps {}", maps.join(" "));
    if mode != Mode::Fsession {
        return out;
    }
    for s in &program.sessions {
        let _ = writeln!(out, "session {}", s.label);
        let _ = writeln!(
            out,
            "  entry: {}",
            if s.entry_filter.is_some() {
                "filter"
            } else {
                "-"
            }
        );
        let _ = writeln!(
            out,
            "  return: {}",
            if s.return_filter.is_some() {
                "filter"
            } else {
                "-"
            }
        );
        if !s.entry_values.is_empty() {
            let _ = writeln!(out, "  entry() values: {}", s.entry_values.len());
        }
        for e in &s.events {
            let fields: Vec<String> = e
                .fields
                .iter()
                .map(|f| format!("{}:{}@{}", f.name, kind_name(f.kind), f.offset))
                .collect();
            let under = if e.guard.is_some() { " (under if)" } else { "" };
            let _ = writeln!(
                out,
                "  event ({} bytes){under}: {}",
                e.size,
                fields.join(" ")
            );
            if let Some(f) = &e.format {
                let _ = writeln!(out, "  printf: {} pieces", f.pieces.len());
            }
        }
        for a in &s.aggregations {
            let under = if a.guard.is_some() { " (under if)" } else { "" };
            let _ = writeln!(out, "  aggregation {} {}: {}{under}", a.id, a.name, a.title);
            if let Some(l) = a.linear {
                let _ = writeln!(
                    out,
                    "    linear: min {} max {} step {}: {} slots",
                    l.min,
                    l.max,
                    l.step,
                    l.slots()
                );
            }
            if !a.keys.is_empty() {
                let keys: Vec<String> = a
                    .keys
                    .iter()
                    .map(|k| format!("{}:{}@{}", k.name, kind_name(k.kind), k.offset))
                    .collect();
                let _ = writeln!(out, "    keys: {}", keys.join(" "));
            }
        }
    }
    out
}

/// The oldest and the newest clang Debian offers here (tests/vm/setup-host installs both):
/// generated C must build with each, without a warning. Found once for all the tests.
fn compilers() -> Result<&'static [(&'static str, Compiler)], Failed> {
    static COMPILERS: OnceLock<Result<Vec<(&'static str, Compiler)>, String>> = OnceLock::new();
    let found = COMPILERS.get_or_init(|| {
        ["clang-14", "clang-19"]
            .into_iter()
            .map(|name| {
                let path = find_clang(Some(Path::new(name)))
                    .map_err(|e| format!("{name}: {e} (run tests/vm/setup-host)"))?;
                let compiler = Compiler::new(path, false).map_err(|e| format!("{name}: {e}"))?;
                Ok((name, compiler))
            })
            .collect()
    });
    found.as_deref().map_err(|e| e.clone().into())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read(path: &Path) -> Result<String, Failed> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()).into())
}

/// `failures` as the test's result.
fn verdict(failures: Vec<String>) -> Result<(), Failed> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n\n").into())
    }
}

/// bpftrace's tools in fslat (examples/bpftrace/, docs/from-bpftrace.md) name real kernel
/// functions, tracepoints and struct fields the fixture kernel does not have: each is
/// checked against the running kernel's BTF, as `fslat SCRIPT` would check it (fentry
/// mode: every kernel from 5.10 has it), and its C builds with both clangs without a
/// warning. The kernel case `bpftrace_tools` checks them on the guests' kernels too.
fn builds_for_this_kernel(path: &Path) -> Result<(), Failed> {
    static KERNEL: OnceLock<Result<fslat::btf::Btf, String>> = OnceLock::new();
    let kernel = KERNEL
        .get_or_init(|| {
            fslat::btf::Btf::vmlinux()
                .map_err(|e| format!("{}: {e} (the host kernel's BTF)", fslat::btf::VMLINUX_PATH))
        })
        .as_ref()
        .map_err(|e| Failed::from(e.clone()))?;
    let name = file_name(path);
    let text = read(path)?;
    let c = match fslat::compile(&text, kernel, Mode::Fentry) {
        Ok((_, c)) => c,
        Err(diags) => {
            let source = Source {
                name: &name,
                text: &text,
            };
            return Err(render(&source, &diags, false).into());
        }
    };
    let mut failures = Vec::new();
    for (clang, compiler) in compilers()? {
        match compiler.compile_with_warnings(&c) {
            Ok((_, warnings)) if warnings.is_empty() => {}
            Ok((_, warnings)) => {
                failures.push(format!("{name} ({clang}): clang warned:\n{warnings}"))
            }
            Err(e) => failures.push(format!("{name} ({clang}): {e}")),
        }
    }
    verdict(failures)
}

/// A script with an `.err` fails with exactly those diagnostics; any other builds in both
/// modes with both clangs, without a warning, to what its `.expect` describes.
fn compiles_or_fails_as_expected(path: &Path) -> Result<(), Failed> {
    let kernel = Fixture::new();
    let mut failures = Vec::new();
    let text = read(path)?;
    let err_path = path.with_extension("err");
    let name = file_name(path);
    let result = fslat::compile(&text, &kernel, Mode::Fsession);
    if err_path.exists() {
        match result {
            Ok(_) => failures.push(format!("{name}: compiled, but a diagnostic was expected")),
            Err(diags) => {
                let rendered = render(
                    &Source {
                        name: &name,
                        text: &text,
                    },
                    &diags,
                    false,
                );
                check_expectation(&err_path, &rendered, &mut failures);
            }
        }
        return verdict(failures);
    }
    let compilers = compilers()?;
    let mut actual = String::new();
    for mode in [Mode::Fsession, Mode::Fentry] {
        match fslat::compile(&text, &kernel, mode) {
            Err(diags) => {
                failures.push(format!(
                    "{name}: {}",
                    render(
                        &Source {
                            name: &name,
                            text: &text
                        },
                        &diags,
                        false
                    )
                ));
            }
            Ok((program, c)) => {
                let mut described = None;
                for (clang, compiler) in compilers {
                    match compiler.compile_with_warnings(&c) {
                        Ok((obj, warnings)) => {
                            if !warnings.is_empty() {
                                failures.push(format!(
                                    "{name} ({}, {clang}): clang warned:\n{warnings}",
                                    mode.name()
                                ));
                            }
                            described.get_or_insert_with(|| describe(&program, mode, &obj));
                        }
                        Err(e) => failures.push(format!("{name} ({}, {clang}): {e}", mode.name())),
                    }
                }
                actual.push_str(&described.unwrap_or_default());
            }
        }
    }
    check_expectation(&path.with_extension("expect"), &actual, &mut failures);
    verdict(failures)
}

// ---------------------------------------------------------------------------------------
// Programs for a kernel without the newer BPF features (Linux 5.10: no BPF atomics with
// fetch or compare-and-swap, no task storage, no bpf_loop): every script of the corpus
// that compiles for the fixture kernel must compile for the same kernel without them, in
// fentry mode, to an object whose instructions and maps 5.10 accepts; one that uses
// `path()` must be refused by the check instead, naming bpf_loop. The kernel cases load
// them on a real 5.10.

/// BPF_STX | BPF_ATOMIC, 32- and 64-bit: the only atomic 5.10 knows is the plain add
/// (imm 0, BPF_ADD without BPF_FETCH); or, and, xor, xchg, cmpxchg and the fetching forms
/// came in 5.12.
const ATOMIC_W: u8 = 0xc3;
const ATOMIC_DW: u8 = 0xdb;

/// What in the object 5.10 would refuse, if anything.
fn refused_by_510(object: &[u8]) -> Vec<String> {
    let mut why = Vec::new();
    let obj = libbpf_rs::ObjectBuilder::default()
        .name("fslat")
        .expect("a valid object name")
        .open_memory(object)
        .expect("libbpf opens the object");
    for p in obj.progs() {
        for (i, insn) in p.insns().iter().enumerate() {
            if matches!(insn.code, ATOMIC_W | ATOMIC_DW) && insn.imm != 0 {
                why.push(format!(
                    "{} insn {i}: atomic op {:#x} (5.12+)",
                    p.name().to_string_lossy(),
                    insn.imm
                ));
            }
        }
    }
    for m in obj.maps() {
        if m.map_type() == libbpf_rs::MapType::TaskStorage {
            why.push(format!(
                "map {}: task storage (5.11+)",
                m.name().to_string_lossy()
            ));
        }
    }
    why
}

/// A script that compiles for the fixture kernel compiles for it without the newer
/// features too, to an object 5.10 accepts; one that uses `path()` is refused, naming
/// bpf_loop.
fn builds_for_linux_5_10(path: &Path) -> Result<(), Failed> {
    let kernel = Fixture::with_features(fslat::btf::Features::default());
    let name = file_name(path);
    let text = read(path)?;
    if let Err(diags) = fslat::compile(&text, &Fixture::new(), Mode::Fentry) {
        return Err(
            format!("{name} does not compile for the fixture kernel either: {diags:?}").into(),
        );
    }
    let c = match fslat::compile(&text, &kernel, Mode::Fentry) {
        Err(diags) => {
            let path_refused = diags.iter().all(|d| {
                matches!(
                    &d.kind,
                    fslat::diag::DiagKind::NeedsFeature {
                        feature: "bpf_loop",
                        ..
                    }
                )
            });
            return if path_refused && text.contains("path(") {
                Ok(())
            } else {
                Err(format!("{name}: refused: {diags:?}").into())
            };
        }
        Ok((_, c)) => c,
    };
    let mut failures = Vec::new();
    for (clang, compiler) in compilers()? {
        match compiler.compile_with_warnings(&c) {
            Ok((obj, warnings)) => {
                if !warnings.is_empty() {
                    failures.push(format!("{name} ({clang}): clang warned:\n{warnings}"));
                }
                for why in refused_by_510(&obj) {
                    failures.push(format!("{name} ({clang}): {why}"));
                }
            }
            Err(e) => failures.push(format!("{name} ({clang}): {e}")),
        }
    }
    verdict(failures)
}

/// The same scripts for a kernel with every feature do use compare-and-swap for min/max
/// and task storage for fentry mode: the check above would see them.
fn the_check_sees_what_5_10_lacks() -> Result<(), Failed> {
    let clang = find_clang(None).map_err(|e| format!("{e} (tests/vm/setup-host)"))?;
    let compiler = Compiler::new(clang, false)?;
    let text = "session vfs_read { min(count); max(latency) }";
    let (_, c) = fslat::compile(text, &Fixture::new(), Mode::Fentry)
        .map_err(|d| format!("does not compile: {d:?}"))?;
    let why = refused_by_510(&compiler.compile(&c)?);
    if !why.iter().any(|w| w.contains("atomic op 0xf1"))
        || !why.iter().any(|w| w.contains("task storage"))
    {
        return Err(format!("the check missed compare-and-swap or task storage: {why:?}").into());
    }
    Ok(())
}
