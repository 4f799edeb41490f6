//! `fslat -l [GLOB]` (and the REPL's `:list` and completion): the kernel functions a
//! session can name. A function is traceable when it has BTF (a `FUNC`), the BPF verifier
//! does not refuse it, and — when ftrace's list can be read — ftrace can hook it.

use crate::btf::{FuncSig, KernelTypes};
use crate::kallsyms::Copies;
use std::cell::OnceCell;
use std::collections::HashSet;
use std::io::Write;

/// Where ftrace lists the functions it can hook (tracefs, then its old debugfs place).
const FTRACE_LISTS: [&str; 2] = [
    "/sys/kernel/tracing/available_filter_functions",
    "/sys/kernel/debug/tracing/available_filter_functions",
];

/// Functions the verifier refuses as tracing targets whatever the kernel's configuration
/// (`btf_id_deny` in kernel/bpf/verifier.c).
const DENIED: &[&str] = &[
    "migrate_disable",
    "migrate_enable",
    "rcu_read_unlock_strict",
    "preempt_count_add",
    "preempt_count_sub",
    "__rcu_read_lock",
    "__rcu_read_unlock",
];

/// Functions that never return (`noreturn_deny` in kernel/bpf/verifier.c): fexit and
/// fsession cannot attach, and a session has no return to time.
const NORETURN: &[&str] = &[
    "__ia32_sys_exit",
    "__ia32_sys_exit_group",
    "__kunit_abort",
    "kunit_try_catch_throw",
    "__module_put_and_kthread_exit",
    "__x64_sys_exit",
    "__x64_sys_exit_group",
    "do_exit",
    "do_group_exit",
    "kthread_complete_and_exit",
    "kthread_exit",
    "make_task_dead",
];

/// The traceable functions of one kernel, sorted.
pub struct Traceable {
    names: Vec<String>,
    /// ftrace's list, when it could be read; `None` means every BTF function is assumed
    /// hookable.
    ftrace: Option<HashSet<String>>,
    /// The running kernel's symbol table, read the first time a listing needs it; `None`
    /// inside when it is not to be read or cannot be.
    copies: OnceCell<Option<Copies>>,
    read_kallsyms: bool,
}

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
    NotTraceable { name: String, why: &'static str },
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

impl Traceable {
    /// Reads ftrace's list if it can; a kernel whose tracefs is not mounted or not
    /// readable (not root) gets every BTF function.
    pub fn new(kernel: &dyn KernelTypes) -> Traceable {
        let ftrace = FTRACE_LISTS
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|text| parse_ftrace_list(&text));
        Traceable {
            read_kallsyms: true,
            ..Traceable::with_ftrace(kernel, ftrace)
        }
    }

    /// With ftrace's list given (`None`: every BTF function is assumed hookable).
    pub(crate) fn with_ftrace(
        kernel: &dyn KernelTypes,
        ftrace: Option<HashSet<String>>,
    ) -> Traceable {
        let names = kernel
            .function_names()
            .into_iter()
            .filter(|n| why_not(n, ftrace.as_ref()).is_none())
            .collect();
        Traceable {
            names,
            ftrace,
            copies: OnceCell::new(),
            read_kallsyms: false,
        }
    }

    /// With the symbol table given, for `-l`'s warnings about copies.
    #[cfg(test)]
    fn with_copies(self, copies: Copies) -> Traceable {
        Traceable {
            copies: OnceCell::from(Some(copies)),
            ..self
        }
    }

    /// What the symbol table says about `name`'s other copies, if anything.
    fn copies_note(&self, name: &str) -> Option<crate::kallsyms::Note<'_>> {
        self.copies
            .get_or_init(|| self.read_kallsyms.then(Copies::running).flatten())
            .as_ref()?
            .note(name)
    }

    /// Every traceable name, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The names that start with `prefix`, sorted (for completion).
    pub fn starting_with(&self, prefix: &str) -> &[String] {
        let from = self.names.partition_point(|n| n.as_str() < prefix);
        let len = self.names[from..]
            .iter()
            .take_while(|n| n.starts_with(prefix))
            .count();
        &self.names[from..from + len]
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
    }

    /// Why `name` cannot be traced, or `None` when nothing rules it out.
    pub fn why_not(&self, name: &str) -> Option<&'static str> {
        why_not(name, self.ftrace.as_ref())
    }

    /// Whether ftrace's own list was consulted.
    pub fn ftrace_checked(&self) -> bool {
        self.ftrace.is_some()
    }
}

/// `available_filter_functions` lines are `name` or `name [module]`; a name may repeat.
fn parse_ftrace_list(text: &str) -> HashSet<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Why a BTF function cannot be traced, or `None` when it can.
fn why_not(name: &str, ftrace: Option<&HashSet<String>>) -> Option<&'static str> {
    if DENIED.contains(&name) {
        Some("the BPF verifier refuses to trace it (its deny list)")
    } else if NORETURN.contains(&name) {
        Some("it never returns (`__noreturn`), so there is no return to time")
    } else if ftrace.is_some_and(|f| !f.contains(name)) {
        Some(
            "ftrace cannot hook it (not in available_filter_functions: inlined, `notrace`, or excluded)",
        )
    } else {
        None
    }
}

/// `*` matches any run of characters, `?` any one character; everything else itself.
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    let (mut gi, mut ni) = (0, 0);
    // Where the last `*` was, and how much of `name` it has swallowed so far.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some('*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    gi = sg + 1;
                    ni = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}

pub fn is_glob(s: &str) -> bool {
    s.contains(['*', '?'])
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
    format!(
        "{}({params})",
        declaration(&kernel.type_name(sig.ret), &sig.name)
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

/// Writes the traceable functions matching `glob` (all when `None`), one a line, sorted;
/// as signatures when `signatures` is set or `glob` is one exact name.
pub fn list(
    kernel: &dyn KernelTypes,
    traceable: &Traceable,
    glob: Option<&str>,
    signatures: bool,
    out: &mut dyn Write,
) -> Result<(), ListError> {
    if let Some(name) = glob.filter(|g| !is_glob(g)) {
        if !traceable.contains(name) {
            return Err(match kernel.function(name) {
                Some(_) => ListError::NotTraceable {
                    name: name.to_string(),
                    why: why_not(name, traceable.ftrace.as_ref())
                        .unwrap_or("it is not in the list of traceable functions"),
                },
                None => ListError::Unknown {
                    name: name.to_string(),
                    suggestions: crate::diag::closest(
                        name,
                        traceable.names().iter().map(String::as_str),
                    )
                    .into_iter()
                    .take(3)
                    .map(str::to_string)
                    .collect(),
                },
            });
        }
        if let Some(sig) = kernel.function(name) {
            writeln!(
                out,
                "{}{}",
                signature(kernel, &sig),
                warning(traceable, name)
            )?;
        }
        return Ok(());
    }
    let (mut found, mut noted) = (0usize, 0usize);
    for name in traceable
        .names()
        .iter()
        .filter(|n| glob.is_none_or(|g| glob_match(g, n)))
    {
        found += 1;
        match kernel.function(name).filter(|_| signatures) {
            Some(sig) => writeln!(
                out,
                "{}{}",
                signature(kernel, &sig),
                warning(traceable, name)
            )?,
            None => {
                noted += usize::from(traceable.copies_note(name).is_some());
                writeln!(out, "{name}")?
            }
        }
    }
    if found == 0 {
        return Err(ListError::NoMatch(glob.unwrap_or("*").to_string()));
    }
    out.flush()?;
    // On standard error, so the list itself stays one name a line.
    let (noun, verb) = if found == 1 {
        ("function", "matches")
    } else {
        ("functions", "match")
    };
    eprintln!("{found} {noun} {verb} `{}`", glob.unwrap_or("*"));
    if noted > 0 {
        eprintln!(
            "fslat: warning: {noted} of them {} copies that calls can run through unseen (partly inlined, or sharing the name); `-lv` marks which",
            if noted == 1 { "has" } else { "have" }
        );
    }
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

    #[test]
    fn glob_matches_star_and_question_mark() {
        let cases = [
            ("vfs_rea*", "vfs_read", true),
            ("vfs_rea*", "vfs_readv", true),
            ("vfs_rea*", "vfs_write", false),
            ("*read", "vfs_read", true),
            ("*read", "vfs_readv", false),
            ("vfs_?ead", "vfs_read", true),
            ("vfs_?ead", "vfs_rread", false),
            ("*_*_*", "do_sys_openat2", true),
            ("*", "", true),
            ("", "x", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("vfs_read", "vfs_read", true),
        ];
        for (glob, name, want) in cases {
            assert_eq!(glob_match(glob, name), want, "{glob} vs {name}");
        }
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
    fn ftrace_list_drops_functions_it_does_not_name() {
        let k = Fixture::new();
        let only: HashSet<String> = parse_ftrace_list("vfs_read\nvfs_write [ext4]\n");
        let t = Traceable::with_ftrace(&k, Some(only));
        assert_eq!(t.names(), ["vfs_read", "vfs_write"]);
        let mut out = Vec::new();
        let err = list(&k, &t, Some("do_sys_openat2"), false, &mut out);
        assert!(
            matches!(err, Err(ListError::NotTraceable { .. })),
            "{err:?}"
        );
    }

    #[test]
    fn exact_name_prints_the_signature_and_a_glob_prints_names() {
        let k = Fixture::new();
        let t = Traceable::with_ftrace(&k, None);
        let mut out = Vec::new();
        list(&k, &t, Some("vfs_read"), false, &mut out).expect("vfs_read is listed");
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("ssize_t vfs_read("), "{text}");
        out.clear();
        list(&k, &t, Some("vfs_*"), false, &mut out).expect("vfs_* matches");
        let text = String::from_utf8_lossy(&out);
        assert!(text.lines().any(|l| l == "vfs_read"), "{text}");
        assert!(text.lines().all(|l| l.starts_with("vfs_")), "{text}");
    }

    #[test]
    fn unknown_names_and_empty_globs_are_errors() {
        let k = Fixture::new();
        let t = Traceable::with_ftrace(&k, None);
        let mut out = Vec::new();
        let e = list(&k, &t, Some("vfs_raed"), false, &mut out);
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
            list(&k, &t, Some("zz*"), false, &mut out),
            Err(ListError::NoMatch(_))
        ));
    }

    #[test]
    fn a_function_with_copies_is_marked_on_its_signature_line() {
        let k = Fixture::new();
        let table = "ffffffff81000000 T vfs_read\nffffffff81000100 t vfs_write.isra.0\n";
        let t = Traceable::with_ftrace(&k, None).with_copies(Copies::parse(table));
        let mut out = Vec::new();
        list(&k, &t, Some("vfs_write"), false, &mut out).expect("vfs_write is listed");
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.trim_end().ends_with(
                "  // warning: partly inlined: the compiler made copies of it (`vfs_write.isra.0`), and calls through them are not seen"
            ),
            "{text}"
        );
        out.clear();
        list(&k, &t, Some("vfs_read"), false, &mut out).expect("vfs_read is listed");
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains("warning"), "{text}");
    }

    #[test]
    fn completion_prefix_is_a_sorted_slice() {
        let k = Fixture::new();
        let t = Traceable::with_ftrace(&k, None);
        let got = t.starting_with("vfs_");
        assert!(!got.is_empty());
        assert!(got.iter().all(|n| n.starts_with("vfs_")));
        assert!(t.starting_with("zzzz").is_empty());
    }
}
