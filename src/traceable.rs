//! Which kernel functions a session can trace: the one rule that `fslat -l`, the checker
//! and the REPL's completion all apply. A function with BTF is traceable unless the BPF
//! verifier refuses it (its deny list), it never returns, ftrace cannot hook it (when
//! ftrace's list is known), or the trampolines cannot carry its arguments or its return
//! value (a struct by value, too many argument registers). Its functions are named by
//! name or by a pattern (`glob_match`).

use crate::btf::{FuncSig, KType, KernelTypes};
use crate::kallsyms::Copies;
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;

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

/// The argument registers a BPF trampoline passes to the program.
const MAX_ARG_REGISTERS: usize = 12;

/// The largest struct a trampoline passes by value (in two registers).
const MAX_STRUCT_ARG: u32 = 16;

/// Why a function with BTF cannot be traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Denied,
    NoReturn,
    NotHookable,
    ReturnsByValue { union: bool },
    StructArgument { param: String, size: u32 },
    TooManyRegisters(usize),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Denied => write!(f, "the BPF verifier refuses to trace it (its deny list)"),
            Reason::NoReturn => write!(
                f,
                "it never returns (`__noreturn`), so there is no return to time"
            ),
            Reason::NotHookable => write!(
                f,
                "ftrace cannot hook it (not in available_filter_functions: inlined, `notrace`, or excluded)"
            ),
            Reason::ReturnsByValue { union } => write!(
                f,
                "it returns {} by value",
                if *union { "a union" } else { "a struct" }
            ),
            Reason::StructArgument { param, size } => write!(
                f,
                "its parameter `{param}` is a struct of {size} bytes passed by value"
            ),
            Reason::TooManyRegisters(n) => write!(
                f,
                "it takes {n} argument registers (at most {MAX_ARG_REGISTERS})"
            ),
        }
    }
}

/// The rule, with or without ftrace's list of the functions it can hook.
#[derive(Debug)]
pub struct Rule {
    /// Opened at the first question that needs it; `None` inside: every function with BTF
    /// is taken to be hookable.
    ftrace: OnceCell<Option<FtraceList>>,
    /// The types are the running kernel's: its ftrace list (and symbol table) apply.
    read_ftrace: bool,
    /// A function named exactly is not looked up in ftrace's list (`why_not_named`): a
    /// run that loads and attaches has the kernel's own answer, and only a refusal costs
    /// the list (the driver checks again with it, for the message).
    defer_named: bool,
}

impl Rule {
    /// For the running kernel: with ftrace's list when it can be read (tracefs mounted and
    /// readable, which needs root); without it otherwise.
    pub fn running_kernel() -> Rule {
        Rule {
            ftrace: OnceCell::new(),
            read_ftrace: true,
            defer_named: false,
        }
    }

    /// For a run on the running kernel: as `running_kernel`, but a function named exactly
    /// is not looked up in ftrace's list. Reading the list up to a name costs the kernel
    /// time that grows with the square of the name's place in it (70 guest-ms of a cold
    /// start for `vfs_read`, docs/performance.md); the kernel refuses to attach to a
    /// function ftrace cannot hook, and the driver then checks again with the list.
    pub fn running_kernel_deferred() -> Rule {
        Rule {
            defer_named: true,
            ..Rule::running_kernel()
        }
    }

    /// From BTF and the verifier's fixed lists alone: for types that are not the running
    /// kernel's (`--btf FILE`, the test fixture), whose ftrace list is not this machine's.
    pub fn btf_only() -> Rule {
        Rule {
            ftrace: OnceCell::from(None),
            read_ftrace: false,
            defer_named: false,
        }
    }

    /// With ftrace's list given.
    #[cfg(test)]
    fn with_ftrace(list: impl std::io::Read + 'static) -> Rule {
        Rule {
            ftrace: OnceCell::from(Some(FtraceList::new(Box::new(list)))),
            read_ftrace: false,
            defer_named: false,
        }
    }

    fn ftrace(&self) -> Option<&FtraceList> {
        self.ftrace
            .get_or_init(|| {
                self.read_ftrace
                    .then(|| {
                        FTRACE_LISTS
                            .iter()
                            .find_map(|p| std::fs::File::open(p).ok())
                    })
                    .flatten()
                    .map(|f| FtraceList::new(Box::new(f)))
            })
            .as_ref()
    }

    /// Whether this rule leaves ftrace's list out for functions named exactly.
    pub fn defers_named(&self) -> bool {
        self.defer_named
    }

    /// Why `func` cannot be traced, or `None` when nothing rules it out.
    pub fn why_not(&self, kernel: &dyn KernelTypes, func: &FuncSig) -> Option<Reason> {
        self.why_not_with(kernel, func, true)
    }

    /// `why_not` for a function the script names exactly (not through a pattern).
    pub fn why_not_named(&self, kernel: &dyn KernelTypes, func: &FuncSig) -> Option<Reason> {
        self.why_not_with(kernel, func, !self.defer_named)
    }

    fn why_not_with(
        &self,
        kernel: &dyn KernelTypes,
        func: &FuncSig,
        ftrace: bool,
    ) -> Option<Reason> {
        let name = func.name.as_str();
        if DENIED.contains(&name) {
            return Some(Reason::Denied);
        }
        if NORETURN.contains(&name) {
            return Some(Reason::NoReturn);
        }
        if ftrace && self.ftrace().is_some_and(|f| !f.contains(name)) {
            return Some(Reason::NotHookable);
        }
        if let KType::Struct { union, .. } = kernel.resolve(func.ret) {
            return Some(Reason::ReturnsByValue { union });
        }
        let mut registers = 0;
        for p in &func.params {
            match kernel.resolve(p.ty) {
                KType::Struct { size, .. } if size > MAX_STRUCT_ARG => {
                    return Some(Reason::StructArgument {
                        param: p.name.clone(),
                        size,
                    });
                }
                KType::Struct { size, .. } => registers += (size as usize).div_ceil(8).max(1),
                _ => registers += 1,
            }
        }
        (registers > MAX_ARG_REGISTERS).then_some(Reason::TooManyRegisters(registers))
    }
}

/// ftrace's list of the functions it can hook, read only as far as the questions asked
/// need. The kernel hands out `available_filter_functions` a page per `read` and starts
/// each read by walking its records from the first, so reading the whole list costs the
/// kernel time quadratic in its length: about 320 ms of a cold start in the 7.2 test guest
/// (the whole front end's time without it: under 190). A script names a few functions,
/// each found somewhere along the list; only a name that is not there (or a pattern, or
/// `-l`) needs all of it.
struct FtraceList {
    /// What is left to read; `None` once it is read to its end (or failed).
    rest: RefCell<Option<std::io::BufReader<Box<dyn std::io::Read>>>>,
    /// The names read so far, in the list's order, while some are left to read (compared
    /// one by one: hashing every name read costs more than the few questions a script asks).
    read: RefCell<Vec<String>>,
    /// Every name, once the list is read to its end.
    all: OnceCell<HashSet<String>>,
    /// Questions answered from `read`; past `SCANS`, the rest is read and hashed.
    scans: Cell<u32>,
    /// A read failed midway: a name not seen so far is taken to be hookable, as when the
    /// list cannot be opened.
    failed: Cell<bool>,
}

impl std::fmt::Debug for FtraceList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FtraceList")
            .field("read", &self.read.borrow().len())
            .field("complete", &self.all.get().is_some())
            .finish()
    }
}

impl FtraceList {
    /// Questions answered by comparing the names read so far, one by one, before the list
    /// is read to its end and hashed (a pattern or `-l` asks about every function).
    const SCANS: u32 = 64;

    fn new(list: Box<dyn std::io::Read>) -> FtraceList {
        FtraceList {
            rest: RefCell::new(Some(std::io::BufReader::new(list))),
            read: RefCell::new(Vec::new()),
            all: OnceCell::new(),
            scans: Cell::new(0),
            failed: Cell::new(false),
        }
    }

    /// Whether ftrace lists `name`, reading on until it appears or the list ends.
    fn contains(&self, name: &str) -> bool {
        if let Some(all) = self.all.get() {
            return all.contains(name) || self.failed.get();
        }
        if self.scans.get() >= Self::SCANS {
            while self.next_name().is_some() {}
            return self.contains(name);
        }
        self.scans.set(self.scans.get() + 1);
        if self.read.borrow().iter().any(|n| n == name) {
            return true;
        }
        while let Some(found) = self.next_name() {
            if found {
                let read = self.read.borrow();
                if read.last().is_some_and(|n| n == name) {
                    return true;
                }
            }
        }
        self.contains(name)
    }

    /// Reads one more line: `Some(true)` when it held a name, `None` at the end (then
    /// `all` holds every name).
    fn next_name(&self) -> Option<bool> {
        use std::io::BufRead;
        let mut rest = self.rest.borrow_mut();
        let mut line = String::new();
        let outcome = match rest.as_mut()?.read_line(&mut line) {
            Ok(0) => None,
            // A line is `name` or `name [module]`; a name may repeat.
            Ok(_) => Some(line.split_whitespace().next().map(str::to_string)),
            Err(_) => {
                self.failed.set(true);
                None
            }
        };
        match outcome {
            Some(name) => {
                let found = name.is_some();
                self.read.borrow_mut().extend(name);
                Some(found)
            }
            None => {
                *rest = None;
                let all = self.read.take().into_iter().collect();
                let _ = self.all.set(all);
                None
            }
        }
    }
}

/// The traceable functions of one kernel, sorted: what `-l` lists and the REPL completes.
pub struct Traceable {
    rule: Rc<Rule>,
    names: Vec<String>,
    /// The running kernel's symbol table, read the first time a listing needs it; `None`
    /// inside when it is not to be read (not the running kernel's types) or cannot be.
    copies: OnceCell<Option<Copies>>,
}

impl Traceable {
    /// The functions of `kernel` that `rule` lets through.
    pub fn new(kernel: &dyn KernelTypes, rule: Rc<Rule>) -> Traceable {
        let names = kernel
            .function_names()
            .into_iter()
            .filter(|n| {
                kernel
                    .function(n)
                    .is_some_and(|f| rule.why_not(kernel, &f).is_none())
            })
            .collect();
        Traceable {
            rule,
            names,
            copies: OnceCell::new(),
        }
    }

    /// With the symbol table given, for `-l`'s warnings about copies.
    #[cfg(test)]
    pub(crate) fn with_copies(self, copies: Copies) -> Traceable {
        Traceable {
            copies: OnceCell::from(Some(copies)),
            ..self
        }
    }

    /// What the symbol table says about `name`'s other copies, if anything.
    pub(crate) fn copies_note(&self, name: &str) -> Option<crate::kallsyms::Note<'_>> {
        self.copies
            .get_or_init(|| self.rule.read_ftrace.then(Copies::running).flatten())
            .as_ref()?
            .note(name)
    }

    /// The rule the list was made with (for the checker).
    pub fn rule(&self) -> Rc<Rule> {
        Rc::clone(&self.rule)
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
}

/// The patterns a session or `-l` names functions by: `*` matches any run of characters,
/// `?` any one character; everything else itself.
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

/// Whether a function name in a script or `-l` is a pattern.
pub fn is_glob(s: &str) -> bool {
    s.contains(['*', '?'])
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

    fn why(rule: &Rule, name: &str) -> Option<Reason> {
        let k = Fixture::new();
        let f = k.function(name).expect("the fixture has it");
        rule.why_not(&k, &f)
    }

    #[test]
    fn each_reason_rules_out_the_fixture_function_it_names() {
        let rule = Rule::btf_only();
        let cases = [
            ("vfs_read", None),
            ("migrate_disable", Some(Reason::Denied)),
            ("do_exit", Some(Reason::NoReturn)),
        ];
        for (name, want) in cases {
            assert_eq!(why(&rule, name), want, "{name}");
        }
    }

    #[test]
    fn trampoline_limits_rule_out_structs_by_value_and_too_many_registers() {
        let k = Fixture::new();
        let path = k.struct_by_name("path").expect("struct path (16 bytes)");
        let open_how = k
            .struct_by_name("open_how")
            .expect("struct open_how (24 bytes)");
        let sig = |ret, params: &[(&str, crate::btf::TypeId)]| FuncSig {
            name: "f".into(),
            ret,
            params: params
                .iter()
                .map(|&(name, ty)| crate::btf::Param {
                    name: name.into(),
                    ty,
                })
                .collect(),
        };
        let paths = |n: usize| vec![("p", path); n];
        let cases = [
            (
                sig(path, &[]),
                Some(Reason::ReturnsByValue { union: false }),
            ),
            (
                sig(0, &[("how", open_how)]),
                Some(Reason::StructArgument {
                    param: "how".into(),
                    size: 24,
                }),
            ),
            (sig(0, &paths(6)), None),
            (sig(0, &paths(7)), Some(Reason::TooManyRegisters(14))),
        ];
        for (f, want) in cases {
            assert_eq!(Rule::btf_only().why_not(&k, &f), want, "{f:?}");
        }
    }

    #[test]
    fn ftrace_list_rules_out_functions_it_does_not_name() {
        let rule = Rule::with_ftrace(&b"vfs_read\nvfs_write [ext4]\n"[..]);
        assert_eq!(why(&rule, "vfs_write"), None);
        assert_eq!(why(&rule, "do_sys_openat2"), Some(Reason::NotHookable));
        let k = Fixture::new();
        let t = Traceable::new(&k, Rc::new(rule));
        assert_eq!(t.names(), ["vfs_read", "vfs_write"]);
    }

    /// Hands out `lines` one per read, as the kernel hands out a page, and counts the reads;
    /// then fails, or ends.
    struct Paged {
        lines: Vec<&'static str>,
        reads: Rc<Cell<usize>>,
        fail_at_end: bool,
    }

    impl std::io::Read for Paged {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.reads.get();
            self.reads.set(n + 1);
            match self.lines.get(n) {
                Some(line) => {
                    buf[..line.len()].copy_from_slice(line.as_bytes());
                    Ok(line.len())
                }
                None if self.fail_at_end => Err(std::io::Error::other("gone")),
                None => Ok(0),
            }
        }
    }

    #[test]
    fn ftrace_list_is_read_only_as_far_as_the_names_asked_for() {
        let reads = Rc::new(Cell::new(0));
        let lines = vec!["do_sys_openat2\n", "vfs_read\n", "vfs_write [ext4]\n"];
        let rule = Rule::with_ftrace(Paged {
            lines,
            reads: Rc::clone(&reads),
            fail_at_end: false,
        });
        assert_eq!(why(&rule, "vfs_read"), None);
        assert_eq!(reads.get(), 2, "stopped at vfs_read");
        assert_eq!(why(&rule, "do_sys_openat2"), None);
        assert_eq!(reads.get(), 2, "already seen: nothing more read");
        assert_eq!(why(&rule, "vfs_write"), None);
        assert_eq!(reads.get(), 3);
        assert_eq!(why(&rule, "migrate_disable"), Some(Reason::Denied));
        assert_eq!(why(&rule, "do_exit"), Some(Reason::NoReturn));
        assert_eq!(reads.get(), 3, "fixed lists need no ftrace list");
        // Past SCANS questions, the list is read to its end and hashed.
        for _ in 0..FtraceList::SCANS {
            assert_eq!(why(&rule, "vfs_read"), None);
        }
        assert_eq!(reads.get(), 4, "read to the end");
        assert_eq!(why(&rule, "vfs_write"), None);
        assert_eq!(why(&rule, "kfree"), Some(Reason::NotHookable));
        assert_eq!(reads.get(), 4);
    }

    #[test]
    fn ftrace_list_that_fails_midway_rules_out_nothing_it_did_not_see() {
        let reads = Rc::new(Cell::new(0));
        let rule = Rule::with_ftrace(Paged {
            lines: vec!["vfs_write\n"],
            reads: Rc::clone(&reads),
            fail_at_end: true,
        });
        assert_eq!(why(&rule, "vfs_read"), None);
        assert_eq!(why(&rule, "vfs_write"), None);
        assert_eq!(reads.get(), 2, "read once, failed once, then never again");
        let rule = Rule::with_ftrace(Paged {
            lines: vec!["vfs_write\n"],
            reads,
            fail_at_end: false,
        });
        assert_eq!(why(&rule, "vfs_read"), Some(Reason::NotHookable));
    }

    #[test]
    fn listed_names_leave_out_what_the_rule_refuses() {
        let k = Fixture::new();
        let t = Traceable::new(&k, Rc::new(Rule::btf_only()));
        assert!(t.contains("vfs_read"));
        assert!(!t.contains("do_exit"));
        assert!(!t.contains("migrate_disable"));
        assert_eq!(t.starting_with("vfs_"), ["vfs_read", "vfs_write"]);
        assert!(t.starting_with("zzzz").is_empty());
    }
}
