//! The house's plan as data, and the test that holds `src/` to it: every `crate::` path
//! (in `use` lines and in code) of a top-level module must name a module of a lower layer.
//! That is the stage order (parse → check → generate → build → run → write/export, the
//! front ends on top reaching everything through the driver, leaves at the bottom), and it
//! makes a circle between top-level modules impossible. Test code (`tests.rs`,
//! `*_tests.rs`, a `#[cfg(test)] mod tests { .. }` at a file's end) may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, top first: a module imports only modules of the layers below its own.
const LAYERS: &[(&str, &[&str])] = &[
    ("the command line", &["cli"]),
    ("the REPL (the command line starts it)", &["repl"]),
    ("what the front ends run", &["driver", "doctor", "manpage"]),
    ("tools the driver runs", &["bundle", "listing"]),
    ("the pipeline in a few lines (lib.rs)", &["lib"]),
    ("run: load, attach, poll, read", &["runtime"]),
    ("export: Prometheus, OTLP", &["metrics"]),
    ("write: decode, text, JSON, figures", &["output"]),
    ("stack frames", &["stacks"]),
    ("build: clang, the object cache", &["build"]),
    ("generate: the checked program to C", &["codegen"]),
    ("check: the AST to the checked program", &["check"]),
    ("parse: text to the AST", &["syntax"]),
    (
        "the host: traceable functions, cgroups, ELF files, children",
        &["traceable", "cgroups", "elf", "child"],
    ),
    ("the kernel's types and symbols", &["btf", "kallsyms"]),
    ("leaves", &["aggregate", "diag", "sys"]),
];

/// The front ends reach the rest only through these (and each other).
const FRONT_ENDS: &[&str] = &["cli", "repl"];
const THROUGH: &[&str] = &["driver", "doctor", "manpage"];

/// Items of the crate root that are the pipeline (`fslat::compile`), named as a module.
const ROOT_FUNCTIONS: &[&str] = &["compile", "compile_with"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

/// The top-level module a `crate::NAME` path names (`lib` for the root's functions), or
/// `None` for a macro of the root (`crate::stderr_line!`).
fn target(name: &str, rest: &str) -> Option<String> {
    if rest.starts_with('!') {
        return None;
    }
    Some(if ROOT_FUNCTIONS.contains(&name) {
        "lib".to_string()
    } else {
        name.to_string()
    })
}

/// A file's text without its test module.
fn non_test(text: &str) -> &str {
    [
        "#[cfg(test)]\nmod tests {",
        "#[cfg(test)]\npub(crate) mod tests {",
    ]
    .iter()
    .filter_map(|m| text.find(m))
    .min()
    .map_or(text, |i| &text[..i])
}

/// The modules each `crate::` path names, with where: `crate::a::b`, `crate::{a, b::c}`.
fn imports(text: &str) -> Vec<(String, usize)> {
    let ident = |s: &str| {
        let n = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        (s[..n].to_string(), s[n..].to_string())
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for (i, _) in code.match_indices("crate::") {
            let after = &code[i + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                for part in group.split(',') {
                    let (name, rest) = ident(part.trim());
                    if let Some(t) = target(&name, &rest).filter(|t| !t.is_empty()) {
                        out.push((t, n + 1));
                    }
                }
            } else {
                let (name, rest) = ident(after);
                if let Some(t) = target(&name, &rest).filter(|t| !t.is_empty()) {
                    out.push((t, n + 1));
                }
            }
        }
    }
    out
}

/// Every source file's top-level module and non-test text.
fn sources() -> Vec<(String, String, String)> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("src/ reads") {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name != "tests.rs"
                && !name.ends_with("_tests.rs")
                && name != "main.rs"
                && name != "layers.rs"
        })
        .map(|p| {
            let rel = p.strip_prefix(&src).expect("below src/");
            let first = rel.components().next().expect("a component");
            let first = first.as_os_str().to_str().expect("UTF-8");
            let module = first.strip_suffix(".rs").unwrap_or(first).to_string();
            let text = std::fs::read_to_string(&p).expect("a source file reads");
            (
                module,
                rel.display().to_string(),
                non_test(&text).to_string(),
            )
        })
        .collect()
}

#[test]
fn every_module_has_a_layer_and_imports_only_below_it() {
    let mut wrong = Vec::new();
    for (module, file, text) in sources() {
        let Some(own) = layer_of(&module) else {
            wrong.push(format!(
                "{file}: module `{module}` has no layer in src/layers.rs"
            ));
            continue;
        };
        for (to, line) in imports(&text) {
            if to == module {
                continue;
            }
            let below = layer_of(&to).is_some_and(|l| l > own);
            let front = !FRONT_ENDS.contains(&module.as_str())
                || FRONT_ENDS.contains(&to.as_str())
                || THROUGH.contains(&to.as_str());
            if !below || !front {
                wrong.push(format!(
                    "{file}:{line}: `{module}` ({}) imports `{to}` ({})",
                    LAYERS[own].0,
                    layer_of(&to).map_or("no layer", |l| LAYERS[l].0)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

/// Layers only point down, so there is no circle; this says so of the graph itself, should
/// the table ever allow more.
#[test]
fn the_import_graph_of_top_level_modules_has_no_circle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, _, text) in sources() {
        let to = graph.entry(module.clone()).or_default();
        to.extend(imports(&text).into_iter().map(|(t, _)| t));
        to.remove(&module);
    }
    // Take away modules nothing left imports, and modules that import nothing left,
    // until none changes: what remains lies on a circle.
    let mut left = graph;
    loop {
        let imported: BTreeSet<String> = left.values().flatten().cloned().collect();
        let before = left.len();
        left.retain(|m, to| imported.contains(m) && !to.is_empty());
        let names: BTreeSet<String> = left.keys().cloned().collect();
        left.values_mut()
            .for_each(|to| to.retain(|t| names.contains(t)));
        if left.len() == before {
            break;
        }
    }
    assert!(
        left.is_empty(),
        "a circle among: {:?}",
        left.keys().collect::<Vec<_>>()
    );
}

/// The folders whose every function (tests aside) fits in `LONGEST` lines as rustfmt
/// lays it out: a longer one is several steps that want names of their own.
const SHORT_FUNCTIONS: &[&str] = &["runtime/", "check/", "codegen/", "btf/reader/"];
const LONGEST: usize = 120;

/// Each function of rustfmt-formatted `text`: its name, first line and length in lines
/// (from `fn` to the closing brace at its indentation).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let Some(at) = body.find("fn ") else { continue };
        let before = &body[..at];
        let qualifiers = before
            .split_whitespace()
            .all(|w| w.starts_with("pub") || matches!(w, "const" | "unsafe" | "async"));
        if !qualifiers || body.ends_with(';') || body.ends_with('}') {
            continue;
        }
        let name: String = body[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| *l == close) {
            out.push((name, i + 1, end + 1));
        }
    }
    out
}

#[test]
fn functions_of_the_runtime_checker_codegen_and_btf_reader_fit_in_120_lines() {
    let long: Vec<String> = sources()
        .into_iter()
        .filter(|(_, file, _)| SHORT_FUNCTIONS.iter().any(|d| file.starts_with(d)))
        .flat_map(|(_, file, text)| {
            functions(&text)
                .into_iter()
                .filter(|(_, _, n)| *n > LONGEST)
                .map(move |(name, line, n)| format!("{file}:{line}: {name}, {n} lines"))
        })
        .collect();
    assert!(
        long.is_empty(),
        "longer than {LONGEST} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn functions_are_measured_from_fn_to_their_closing_brace() {
    let text = "fn a() {\n    x;\n}\n\nimpl T {\n    pub(super) fn b(\n        y: u8,\n    ) {\n        z;\n    }\n    fn c();\n}\n";
    let got = functions(text);
    assert_eq!(got, [("a".to_string(), 1, 3), ("b".to_string(), 6, 5)]);
}

#[test]
fn paths_are_read_from_use_lines_groups_and_code() {
    let text = "use crate::a::b;\nuse crate::{c, d::e};\nlet x = crate::f::g(); crate::m!();\n// crate::h\n";
    let got: Vec<(String, usize)> = imports(text);
    let want = [("a", 1), ("c", 2), ("d", 2), ("f", 3)];
    assert_eq!(
        got,
        want.iter()
            .map(|(m, l)| (m.to_string(), *l))
            .collect::<Vec<_>>()
    );
}
