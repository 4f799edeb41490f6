//! Data-driven compiler tests over `tests/cases/*.fsl` and `examples/*.fsl`, against the
//! fixture kernel (`fslat::btf::Fixture`, which has fsession).
//!
//! - A script with a sibling `.err` file must fail; the file holds the rendered
//!   diagnostics, exactly.
//! - Any other script must compile in both modes, build with the real clang, and open with
//!   libbpf; a sibling `.expect` file holds what the object and schema must be (programs
//!   with their sections, maps, event fields with offsets, the phase split).
//!
//! `FSLAT_BLESS=1 cargo test --test cases` rewrites the expectation files.

use fslat::btf::Fixture;
use fslat::build::{Compiler, find_clang};
use fslat::check::program::{FieldKind, Program};
use fslat::codegen::Mode;
use fslat::diag::{Source, render};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn scripts(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "fsl"))
        .collect();
    v.sort();
    v
}

fn check_expectation(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if std::env::var_os("FSLAT_BLESS").is_some() {
        std::fs::write(path, actual).expect("write expectation");
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(want) if want == actual => {}
        Ok(want) => failures.push(format!(
            "{}: differs\n--- expected\n{want}--- actual\n{actual}",
            path.display()
        )),
        Err(_) => failures.push(format!(
            "{}: missing (FSLAT_BLESS=1 writes it)\n--- actual\n{actual}",
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
    }
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
    // fslat's own maps, not the string-literal pools some clangs make (`.rodata.str1.1`).
    let mut maps: Vec<String> = obj
        .maps()
        .map(|m| m.name().to_string_lossy().into_owned())
        .filter(|m| !m.starts_with(".rodata.str"))
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
        if let Some(e) = &s.event {
            let fields: Vec<String> = e
                .fields
                .iter()
                .map(|f| format!("{}:{}@{}", f.name, kind_name(f.kind), f.offset))
                .collect();
            let _ = writeln!(out, "  event ({} bytes): {}", e.size, fields.join(" "));
        }
        for a in &s.aggregations {
            let _ = writeln!(out, "  aggregation {} {}: {}", a.id, a.name, a.title);
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
/// generated C must build with each, without a warning.
fn compilers() -> Vec<(&'static str, Compiler)> {
    ["clang-14", "clang-19"]
        .into_iter()
        .map(|name| {
            let path = find_clang(Some(Path::new(name)))
                .unwrap_or_else(|e| panic!("{name}: {e} (run tests/vm/setup-host)"));
            (name, Compiler::new(path, false).expect("clang runs"))
        })
        .collect()
}

#[test]
fn scripts_compile_or_fail_as_expected() {
    let kernel = Fixture::new();
    let compilers = compilers();
    let mut failures = Vec::new();
    let mut count = 0;
    for path in scripts("tests/cases")
        .into_iter()
        .chain(scripts("examples"))
    {
        count += 1;
        let text = std::fs::read_to_string(&path).expect("read script");
        let err_path = path.with_extension("err");
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let result = fslat::compile(&text, &kernel, Mode::Fsession);
        if err_path.exists() || result.is_err() && std::env::var_os("FSLAT_BLESS").is_some() {
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
            continue;
        }
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
                    for (clang, compiler) in &compilers {
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
                            Err(e) => {
                                failures.push(format!("{name} ({}, {clang}): {e}", mode.name()))
                            }
                        }
                    }
                    actual.push_str(&described.unwrap_or_default());
                }
            }
        }
        check_expectation(&path.with_extension("expect"), &actual, &mut failures);
    }
    assert!(count > 10, "the corpus is missing");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
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

#[test]
fn corpus_builds_for_linux_5_10() {
    let kernel = Fixture::with_features(fslat::btf::Features::default());
    let compilers = compilers();
    let mut failures = Vec::new();
    let mut built = 0;
    let mut refused = 0;
    for path in scripts("tests/cases")
        .into_iter()
        .chain(scripts("examples"))
        .filter(|p| !p.with_extension("err").exists())
    {
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("read script");
        // Only what compiles for a kernel with every feature is in question here.
        if fslat::compile(&text, &Fixture::new(), Mode::Fentry).is_err() {
            continue;
        }
        match fslat::compile(&text, &kernel, Mode::Fentry) {
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
                if path_refused && text.contains("path(") {
                    refused += 1;
                } else {
                    failures.push(format!("{name}: refused: {diags:?}"));
                }
            }
            Ok((_, c)) => {
                for (clang, compiler) in &compilers {
                    match compiler.compile_with_warnings(&c) {
                        Ok((obj, warnings)) => {
                            if !warnings.is_empty() {
                                failures
                                    .push(format!("{name} ({clang}): clang warned:\n{warnings}"));
                            }
                            for why in refused_by_510(&obj) {
                                failures.push(format!("{name} ({clang}): {why}"));
                            }
                        }
                        Err(e) => failures.push(format!("{name} ({clang}): {e}")),
                    }
                }
                built += 1;
            }
        }
    }
    assert!(built > 10, "the corpus is missing");
    assert!(refused > 0, "no script of the corpus uses path()");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same scripts for a kernel with every feature do use compare-and-swap for min/max
/// and task storage for fentry mode: the check above would see them.
#[test]
fn the_check_sees_what_5_10_lacks() {
    let clang = find_clang(None).expect("clang is installed (tests/vm/setup-host)");
    let compiler = Compiler::new(clang, false).expect("clang runs");
    let text = "session vfs_read { min(count); max(count) }";
    let (_, c) = fslat::compile(text, &Fixture::new(), Mode::Fentry).expect("compiles");
    let why = refused_by_510(&compiler.compile(&c).expect("builds"));
    assert!(why.iter().any(|w| w.contains("atomic op 0xf1")), "{why:?}");
    assert!(why.iter().any(|w| w.contains("task storage")), "{why:?}");
}
