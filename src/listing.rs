//! `fslat -l [GLOB]` (and the REPL's `:list`): the kernel functions a session can name,
//! as the traceability rule (`crate::traceable`) decides.

use crate::btf::{FuncSig, KernelTypes};
use crate::traceable::{Traceable, glob_match, is_glob};
use std::io::Write;

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("no traceable kernel function matches `{0}`")]
    NoMatch(String),
    #[error("`{name}` is not a kernel function with BTF{}", suggest(.suggestions))]
    Unknown {
        name: String,
        suggestions: Vec<String>,
    },
    #[error("`{name}` has BTF but cannot be traced: {why}")]
    NotTraceable {
        name: String,
        why: crate::traceable::Reason,
    },
    #[error(
        "kernel module `{0}` is not loaded: load it with `modprobe {0}` (as root), then list again"
    )]
    ModuleNotLoaded(String),
    #[error(
        "kernel module `{0}` is loaded but this kernel has no BTF for it (built without CONFIG_DEBUG_INFO_BTF_MODULES)"
    )]
    ModuleWithoutTypes(String),
    #[error("cannot list `{spec}`: {why}")]
    UserFile {
        spec: String,
        why: crate::elf::ElfError,
    },
    #[error(
        "`:PATTERN` lists the traced program's functions: give -p PID or -c CMD, or FILE:PATTERN"
    )]
    NoMainExecutable,
    #[error("no function of `{file}` matches `{pattern}`")]
    NoUserMatch { file: String, pattern: String },
    #[error(
        "{file} has no USDT probes (no .note.stapsdt section): it was built without sys/sdt.h's probes, or they were stripped"
    )]
    NoProbes { file: String },
    #[error("no USDT probe of {file} matches `{pattern}`; its providers: {providers}")]
    NoProbeMatch {
        file: String,
        pattern: String,
        providers: String,
    },
    #[error("cannot write the list: {0}")]
    Write(#[from] std::io::Error),
}

fn suggest(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => format!("; did you mean `{one}`?"),
        many => format!("; did you mean one of {}?", many.join(", ")),
    }
}

/// A function as C declares it: `ssize_t vfs_read(struct file *file, char *buf, ...)`.
pub fn signature(kernel: &dyn KernelTypes, sig: &FuncSig) -> String {
    let params: Vec<String> = sig
        .params
        .iter()
        .map(|p| declaration(&kernel.type_name(p.ty), &p.name))
        .collect();
    let params = if params.is_empty() {
        "void".to_string()
    } else {
        params.join(", ")
    };
    // An overloaded C++ function's name carries its parameter types; the declaration
    // shows them with their names.
    let name = sig
        .name
        .split_once('(')
        .map_or(sig.name.as_str(), |(head, _)| head);
    format!(
        "{}({params})",
        declaration(&kernel.type_name(sig.ret), name)
    )
}

/// `struct file *` + `file` → `struct file *file`; `size_t` + `count` → `size_t count`.
fn declaration(ty: &str, name: &str) -> String {
    if name.is_empty() {
        ty.to_string()
    } else if ty.ends_with('*') {
        format!("{ty}{name}")
    } else {
        format!("{ty} {name}")
    }
}

/// The kernel probe kinds of bpftrace (`kprobe:vfs_read*`): all name a kernel function,
/// as fslat's `-l` lists them.
const BPFTRACE_KERNEL_PROBES: [&str; 10] = [
    "kprobe:",
    "kretprobe:",
    "fentry:",
    "fexit:",
    "kfunc:",
    "kretfunc:",
    "k:",
    "kr:",
    "f:",
    "fr:",
];

/// `kprobe:vfs_read*` → `vfs_read*`; `None` for anything else.
pub fn without_bpftrace_probe(glob: &str) -> Option<&str> {
    BPFTRACE_KERNEL_PROBES
        .iter()
        .find_map(|p| glob.strip_prefix(p))
        .map(|g| if g.is_empty() { "*" } else { g })
}

/// Where a system call's name leads (`read`: `vfs_read`, `ksys_read`): the functions
/// that implement it, first among the suggestions for a name that is not a function.
const IMPLEMENTATIONS: [&str; 5] = ["vfs_", "ksys_", "do_sys_", "__do_sys_", "do_"];

fn suggestions(traceable: &Traceable, name: &str) -> Vec<String> {
    let mut found: Vec<String> = IMPLEMENTATIONS
        .iter()
        .map(|p| format!("{p}{name}"))
        .filter(|n| traceable.contains(n))
        .collect();
    for near in crate::diag::closest(name, traceable.names().iter().map(String::as_str)) {
        if found.len() >= 3 {
            break;
        }
        if !found.iter().any(|f| f == near) {
            found.push(near.to_string());
        }
    }
    found
}

/// Writes the traceable functions matching `glob` (all when `None`), one a line, sorted;
/// as signatures when `signatures` is set or `glob` is one exact name. With `json`, one
/// JSON object a line: `{"function":NAME}`, with `"signature"` when it is given.
pub fn list(
    kernel: &dyn KernelTypes,
    traceable: &Traceable,
    glob: Option<&str>,
    signatures: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), ListError> {
    // `MODULE:GLOB`: the functions of one loaded kernel module (or `vmlinux`).
    let (module, glob) = match glob.and_then(|g| g.split_once(':')) {
        Some((m, g)) => (Some(m), Some(g)),
        None => (None, glob),
    };
    let in_module = |name: &str| match module {
        None => true,
        Some("vmlinux") => kernel.module_of(name).is_none(),
        Some(m) => kernel.module_of(name).as_deref() == Some(m),
    };
    let line = |out: &mut dyn Write, name: &str, sig: Option<String>| match (json, sig) {
        (false, Some(sig)) => writeln!(out, "{sig}{}", warning(traceable, name)),
        (false, None) => writeln!(out, "{name}"),
        (true, sig) => {
            let mut o = serde_json::Map::new();
            o.insert("function".into(), name.into());
            if let Some(sig) = sig {
                o.insert("signature".into(), sig.into());
            }
            if let Some(note) = traceable.copies_note(name) {
                o.insert("warning".into(), note.to_string().into());
            }
            writeln!(out, "{}", serde_json::Value::Object(o))
        }
    };
    if let Some(name) = glob.filter(|g| !is_glob(g)) {
        if !traceable.contains(name) || !in_module(name) {
            let why = kernel
                .function(name)
                .and_then(|f| traceable.rule().why_not(kernel, &f));
            return Err(match why {
                Some(why) => ListError::NotTraceable {
                    name: name.to_string(),
                    why,
                },
                None => ListError::Unknown {
                    name: name.to_string(),
                    suggestions: suggestions(traceable, name),
                },
            });
        }
        if let Some(sig) = kernel.function(name) {
            line(out, name, Some(signature(kernel, &sig)))?;
        }
        return Ok(());
    }
    let (mut found, mut noted) = (0usize, 0usize);
    for name in traceable
        .names()
        .iter()
        .filter(|n| glob.is_none_or(|g| glob_match(g, n)) && in_module(n))
    {
        found += 1;
        match kernel.function(name).filter(|_| signatures) {
            Some(sig) => line(out, name, Some(signature(kernel, &sig)))?,
            None => {
                noted += usize::from(traceable.copies_note(name).is_some());
                line(out, name, None)?
            }
        }
    }
    let glob = match module {
        Some(m) => format!("{m}:{}", glob.unwrap_or("*")),
        None => glob.unwrap_or("*").to_string(),
    };
    if found == 0 {
        return Err(ListError::NoMatch(glob));
    }
    out.flush()?;
    // On standard error, so the list itself stays one name a line.
    let (noun, verb) = if found == 1 {
        ("function", "matches")
    } else {
        ("functions", "match")
    };
    crate::stderr_line!("{found} {noun} {verb} `{glob}`");
    if noted > 0 {
        crate::stderr_line!(
            "fslat: warning: {noted} of them {} copies that calls can run through unseen (partly inlined, or sharing the name); `-lv` marks which",
            if noted == 1 { "has" } else { "have" }
        );
    }
    Ok(())
}

/// `fslat -l 'FILE:PATTERN'`: the functions of a user-space file matching PATTERN, one a
/// line, sorted; with `verbose` each with its file offset and size.
pub fn list_user(
    spec: &str,
    lookup: &crate::elf::Lookup,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<(), ListError> {
    let (file, pattern) = spec.split_once(':').unwrap_or((spec, "*"));
    let pattern = if pattern.is_empty() { "*" } else { pattern };
    let failed = |why| ListError::UserFile {
        spec: spec.to_string(),
        why,
    };
    let path = crate::elf::find(file, lookup)
        .map_err(failed)?
        .ok_or(ListError::NoMainExecutable)?;
    let funcs = crate::elf::functions(&path).map_err(failed)?;
    let matched: Vec<crate::elf::UserFunc> = funcs
        .iter()
        .filter(|f| glob_match(pattern, &f.name))
        .cloned()
        .collect();
    let found = matched.len();
    // With -v: each signature as DWARF declares it (the ABI's registers without DWARF).
    let mut types = crate::elf::UserTypes::new(&path, funcs, crate::btf::Features::default());
    if verbose {
        let names: Vec<String> = matched.iter().map(|f| f.name.clone()).collect();
        types.read_dwarf(&names);
    }
    for f in &matched {
        match types.function(&f.name).filter(|_| verbose) {
            Some(sig) => writeln!(
                out,
                "{}  // offset 0x{:x}, {} bytes{}",
                signature(&types, &sig),
                f.offset,
                f.size,
                if types.has_dwarf(&f.name) {
                    ""
                } else {
                    ", no DWARF"
                }
            )?,
            None => writeln!(out, "{}", f.name)?,
        }
    }
    if found == 0 {
        return Err(ListError::NoUserMatch {
            file: path.display().to_string(),
            pattern: pattern.to_string(),
        });
    }
    out.flush()?;
    crate::stderr_line!(
        "{found} function{} of {} match `{pattern}`",
        if found == 1 { "" } else { "s" },
        path.display()
    );
    Ok(())
}

/// `fslat -l 'usdt:FILE[:PATTERN]'`: the USDT probes of a file whose `provider:name` or
/// `name` matches PATTERN, in the order of its notes, each with its arguments' types
/// (`usdt:PATH:provider:name(s32 arg0, u64 arg1)`); with `verbose`, the note's argument
/// specs, the probe's file offset and its semaphore's. With `json`, one object a line.
pub fn list_usdt(
    spec: &str,
    lookup: &crate::elf::Lookup,
    verbose: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), ListError> {
    let (file, pattern) = spec.split_once(':').unwrap_or((spec, "*"));
    let pattern = if pattern.is_empty() { "*" } else { pattern };
    let failed = |why| ListError::UserFile {
        spec: format!("usdt:{spec}"),
        why,
    };
    let path = crate::elf::find(file, lookup)
        .map_err(failed)?
        .ok_or(ListError::NoMainExecutable)?;
    let shown = path.display().to_string();
    let probes = crate::elf::sdt::probes(&path).map_err(failed)?;
    if probes.is_empty() {
        return Err(ListError::NoProbes { file: shown });
    }
    let matched: Vec<&crate::elf::sdt::Probe> = probes
        .iter()
        .filter(|p| {
            glob_match(pattern, &p.name)
                || glob_match(pattern, &format!("{}:{}", p.provider, p.name))
        })
        .collect();
    if matched.is_empty() {
        return Err(ListError::NoProbeMatch {
            file: shown,
            pattern: pattern.to_string(),
            providers: crate::elf::sdt::providers(&probes).join(", "),
        });
    }
    // One line per probe, not per site: a probe the compiler placed at several sites
    // (inlined, or written twice) says how many.
    let mut lines: Vec<(String, usize)> = Vec::new();
    for p in &matched {
        if json {
            let args: Vec<serde_json::Value> = p
                .args
                .iter()
                .map(|a| serde_json::json!({ "type": a.to_string(), "spec": a.spec }))
                .collect();
            let line = serde_json::json!({
                "type": "usdt",
                "file": shown,
                "provider": p.provider,
                "name": p.name,
                "args": args,
                "offset": p.offset,
                "semaphore": p.semaphore,
            });
            writeln!(out, "{line}")?;
        } else if verbose {
            let specs: Vec<&str> = p.args.iter().map(|a| a.spec.as_str()).collect();
            let semaphore = match p.semaphore {
                Some(at) => format!(", semaphore at 0x{at:x}"),
                None => String::new(),
            };
            writeln!(
                out,
                "usdt:{shown}:{}  // offset 0x{:x}{semaphore}, args `{}`",
                p.describe(),
                p.offset,
                specs.join(" ")
            )?;
        } else {
            let line = format!("usdt:{shown}:{}", p.describe());
            match lines.iter_mut().find(|(l, _)| *l == line) {
                Some((_, sites)) => *sites += 1,
                None => lines.push((line, 1)),
            }
        }
    }
    for (line, sites) in lines {
        match sites {
            1 => writeln!(out, "{line}")?,
            n => writeln!(out, "{line}  // {n} sites")?,
        }
    }
    out.flush()?;
    let found = matched.len();
    crate::stderr_line!(
        "{found} USDT probe{} of {shown} match `{pattern}`",
        if found == 1 { "" } else { "s" }
    );
    Ok(())
}

/// The signature line's warning, as a C comment: ` // warning: ...`, or nothing.
fn warning(traceable: &Traceable, name: &str) -> String {
    traceable
        .copies_note(name)
        .map(|note| format!("  // warning: {note}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Fixture;
    use crate::kallsyms::Copies;
    use crate::traceable::{Reason, Rule};

    fn traceable(k: &Fixture) -> Traceable {
        Traceable::new(k, std::rc::Rc::new(Rule::btf_only()))
    }

    #[test]
    fn signature_spells_pointers_without_a_space_before_the_name() {
        let k = Fixture::new();
        let sig = k.function("vfs_read").expect("the fixture has vfs_read");
        let s = signature(&k, &sig);
        assert!(s.starts_with("ssize_t vfs_read(struct file *file, "), "{s}");
        assert!(s.ends_with(')'), "{s}");
    }

    #[test]
    fn an_untraceable_name_is_refused_with_the_rule_s_reason() {
        let k = Fixture::new();
        let t = traceable(&k);
        let cases = [
            ("do_exit", Reason::NoReturn),
            ("migrate_disable", Reason::Denied),
        ];
        for (name, reason) in cases {
            let mut out = Vec::new();
            match list(&k, &t, Some(name), false, false, &mut out) {
                Err(ListError::NotTraceable { why, .. }) => assert_eq!(why, reason, "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn exact_name_prints_the_signature_and_a_glob_prints_names() {
        let k = Fixture::new();
        let t = traceable(&k);
        let mut out = Vec::new();
        list(&k, &t, Some("vfs_read"), false, false, &mut out).expect("vfs_read is listed");
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("ssize_t vfs_read("), "{text}");
        out.clear();
        list(&k, &t, Some("vfs_*"), false, false, &mut out).expect("vfs_* matches");
        let text = String::from_utf8_lossy(&out);
        assert!(text.lines().any(|l| l == "vfs_read"), "{text}");
        assert!(text.lines().all(|l| l.starts_with("vfs_")), "{text}");
    }

    #[test]
    fn unknown_names_and_empty_globs_are_errors() {
        let k = Fixture::new();
        let t = traceable(&k);
        let mut out = Vec::new();
        let e = list(&k, &t, Some("vfs_raed"), false, false, &mut out);
        match e {
            Err(ListError::Unknown { suggestions, .. }) => {
                assert!(
                    suggestions.contains(&"vfs_read".to_string()),
                    "{suggestions:?}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            list(&k, &t, Some("zz*"), false, false, &mut out),
            Err(ListError::NoMatch(_))
        ));
    }

    #[test]
    fn a_function_with_copies_is_marked_on_its_signature_line() {
        let k = Fixture::new();
        let table = "ffffffff81000000 T vfs_read\nffffffff81000100 t vfs_write.isra.0\n";
        let t = traceable(&k).with_copies(Copies::parse(table));
        let mut out = Vec::new();
        list(&k, &t, Some("vfs_write"), false, false, &mut out).expect("vfs_write is listed");
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.trim_end().ends_with(
                "  // warning: partly inlined: the compiler made copies of it (`vfs_write.isra.0`), and calls through them are not seen"
            ),
            "{text}"
        );
        out.clear();
        list(&k, &t, Some("vfs_read"), false, false, &mut out).expect("vfs_read is listed");
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains("warning"), "{text}");
    }
}
