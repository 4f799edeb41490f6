//! The front ends on the host: `-l` over the host kernel's BTF, `doctor`, completions and
//! the man page, and the REPL — scripted through standard input, and interactive through a
//! pseudo-terminal (tmux; `tests/vm/setup-host` installs it). Nothing here traces: what
//! runs a script stops before loading, and `doctor`'s test programs are all that may load,
//! so the tests hold whether or not the host allows function tracing.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

const FSLAT: &str = env!("CARGO_BIN_EXE_fslat");

fn fslat(args: &[&str]) -> Output {
    fslat_with_stdin(args, None)
}

fn fslat_with_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(FSLAT)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {FSLAT}: {e}"));
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(text.as_bytes())
            .expect("write fslat's stdin");
    }
    let out = child.wait_with_output().expect("wait for fslat");
    one_message_prefix(args, &out);
    out
}

/// Every error fslat prints starts `fslat: error: ` — or `error[F…]: ` for a diagnostic
/// about the script, which shows its code and the script's line — and every warning
/// likewise (docs/language.md, "Limits and exit status"). Checked on every run of every
/// test here, so each error path these tests take is checked. A failure (1, or 2 for a
/// wrong command line) says why on standard error, except `doctor`, whose report is on
/// standard output, and the REPL, which goes on after an error.
fn one_message_prefix(args: &[&str], out: &Output) {
    let stderr = text(&out.stderr);
    for line in stderr.lines() {
        let message = line.strip_prefix("fslat: ").unwrap_or(line);
        let word = message.split_whitespace().next().unwrap_or("");
        for kind in ["error", "warning"] {
            if word.to_ascii_lowercase().starts_with(kind) {
                assert!(
                    line.starts_with(&format!("fslat: {kind}: "))
                        || line.starts_with(&format!("{kind}[F")),
                    "fslat {args:?}: a message without fslat's prefix: {line}\n{stderr}"
                );
            }
        }
    }
    let quiet = matches!(args.first(), Some(&"doctor" | &"repl"));
    if matches!(out.status.code(), Some(1 | 2)) && !quiet {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with("fslat: error: ") || l.starts_with("error[F")),
            "fslat {args:?} failed ({:?}) without an error message:\n{stderr}",
            out.status.code()
        );
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn list_glob_prints_matching_names_sorted_one_a_line() {
    let out = fslat(&["-l", "vfs_rea*"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"vfs_read"), "{stdout}");
    assert!(lines.iter().all(|l| l.starts_with("vfs_rea")), "{stdout}");
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
}

#[test]
fn list_exact_name_prints_its_signature() {
    let out = fslat(&["-l", "vfs_read"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("ssize_t vfs_read("), "{stdout}");
    assert!(stdout.contains("struct file *file"), "{stdout}");
    assert!(stdout.contains("size_t count"), "{stdout}");
}

#[test]
fn list_verbose_glob_prints_signatures() {
    let out = fslat(&["-lv", "vfs_rea*"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("ssize_t vfs_read(struct file *file")),
        "{stdout}"
    );
}

#[test]
fn list_unknown_name_fails_with_a_suggestion() {
    let out = fslat(&["-l", "vfs_raed"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.starts_with("fslat: error: `vfs_raed` is not a kernel function with BTF"),
        "{stderr}"
    );
    assert!(stderr.contains("vfs_read"), "{stderr}");
}

#[test]
fn list_glob_matching_nothing_fails() {
    let out = fslat(&["-l", "zzz_no_such_*"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("no traceable kernel function matches `zzz_no_such_*`"),
        "{out:?}"
    );
}

/// tests/kernel/user's program built with DWARF (and a stripped copy) in a new directory.
fn user_programs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let built = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/kernel/user/build"
    ))
    .arg(dir.path())
    .status()
    .expect("tests/kernel/user/build runs (it needs gcc)");
    assert!(built.success());
    let stripped = dir.path().join("ufunc-stripped");
    std::fs::copy(dir.path().join("ufunc"), &stripped).unwrap();
    let strip = Command::new("strip")
        .arg("--strip-all")
        .arg(&stripped)
        .status();
    assert!(strip.is_ok_and(|s| s.success()), "strip (binutils) runs");
    dir
}

#[test]
fn list_user_functions_of_a_file_with_their_dwarf_signatures() {
    let dir = user_programs();
    let exe = dir.path().join("ufunc");
    let out = fslat(&["-l", &format!("{}:*e*", exe.display())]);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    for f in ["greet", "middle", "outer", "leaf"] {
        assert!(lines.iter().any(|l| l == f), "{f} in {lines:?}");
    }
    let out = fslat(&["-lv", &format!("{}:norm", exe.display())]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("long int norm(struct point *p)  // offset 0x"),
        "{stdout}"
    );
}

#[test]
fn list_usdt_probes_with_their_argument_types_and_say_why_none() {
    let dir = user_programs();
    let exe = dir.path().join("sdt");
    let out = fslat(&["-l", &format!("usdt:{}:fslat:*", exe.display())]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let args = format!(
        "usdt:{}:fslat:args(s8 arg0, u8 arg1, s16 arg2, u16 arg3, s32 arg4, u32 arg5, s64 arg6, u64 arg7)",
        exe.display()
    );
    assert!(stdout.lines().any(|l| l == args), "{stdout}");
    assert_eq!(stdout.lines().count(), 5, "{stdout}");
    let out = fslat(&[
        "-l",
        "-f",
        "json",
        &format!("usdt:{}:guarded", exe.display()),
    ]);
    let line: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(line["name"], "guarded");
    assert!(line["semaphore"].is_u64(), "{line}");
    let out = fslat(&["-l", &format!("usdt:{}:nope", exe.display())]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("matches `nope`; its providers: fslat"),
        "{out:?}"
    );
    let plain = dir.path().join("ufunc");
    let out = fslat(&["-l", &format!("usdt:{}", plain.display())]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("has no USDT probes (no .note.stapsdt section)"),
        "{out:?}"
    );
}

/// USDT points a file cannot give, each refused with one error before anything loads:
/// (the file of tests/kernel/user, the point and action, the code, what the error says).
const USDT_REFUSED: &[(&str, &str, &str, &[&str])] = &[
    (
        "sdt",
        "argz { count() }",
        "F0841",
        &[
            "has no USDT probe `argz`",
            "did you mean `args`?",
            "its providers: `fslat`",
        ],
    ),
    (
        "sdt",
        "nope:args { count() }",
        "F0841",
        &["has no USDT probe `nope:args`"],
    ),
    (
        "ufunc",
        "foo { count() }",
        "F0840",
        &["has no USDT probes (no `.note.stapsdt` section)"],
    ),
    (
        "sdt",
        "guarded { emit arg1 }",
        "F0404",
        &[
            "`arg1` does not exist",
            "USDT probe `fslat:guarded` has 1 argument(s)",
        ],
    ),
    (
        "sdt-odd",
        "odd { count() }",
        "F0844",
        &[
            "USDT probe `fslat:odd` cannot be enabled: its semaphore (file offset 0x",
            ") is not 2-byte aligned",
        ],
    ),
    (
        "sdt-odd",
        "twice { count() }",
        "F0842",
        &["USDT probe `twice` is in several providers of the file: `fslat`, `other`"],
    ),
    (
        "sdt-odd",
        "global { count() }",
        "F0843",
        &["its argument 0 (`-4@fslat_counter(%rip)`) is in a form libbpf cannot read"],
    ),
];

#[test]
fn usdt_points_a_file_cannot_give_are_one_error_each() {
    let dir = user_programs();
    for (file, point, code, says) in USDT_REFUSED {
        let exe = dir.path().join(file);
        let script = format!("on usdt:{}:{point}", exe.display());
        let out = fslat(&["--emit", "c", "-e", &script]);
        assert_eq!(out.status.code(), Some(1), "{script}: {out:?}");
        let stderr = text(&out.stderr);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(errors.len(), 1, "{script}: {stderr}");
        assert!(
            errors[0].starts_with(&format!("error[{code}]: ")),
            "{script}: {stderr}"
        );
        for s in *says {
            assert!(stderr.contains(s), "{script}: {s:?} in {stderr}");
        }
    }
}

/// A USDT point that checks compiles (`--emit c`) with libbpf's USDT header.
#[test]
fn usdt_points_compile_with_libbpfs_usdt_header() {
    let dir = user_programs();
    let exe = dir.path().join("sdt");
    let out = fslat(&[
        "--emit",
        "c",
        "-e",
        &format!(
            "span usdt:{0}:enter(pid) -> usdt:{0}:fslat:leave(pid) {{ hist(latency) by start.arg0 }}",
            exe.display()
        ),
    ]);
    assert!(out.status.success(), "{out:?}");
    let c = text(&out.stdout);
    assert!(c.contains("#include \"fslat_usdt.bpf.h\""), "{c}");
    assert!(c.contains("SEC(\"usdt\")"), "{c}");
    assert!(c.contains("bpf_usdt_arg((void *)ctx, 0, "), "{c}");
}

#[test]
fn cpp_functions_are_listed_and_named_demangled() {
    let dir = user_programs();
    let exe = dir.path().join("cxx");
    let out = fslat(&["-l", &format!("{}:shop::*", exe.display())]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // Overloads keep their parameters; a name only one function has does not.
    assert_eq!(
        lines,
        [
            "shop::Cart::add",
            "shop::Cart::total",
            "shop::price(int, int)",
            "shop::price(long)",
            "shop::stock"
        ]
    );
    // A method defined outside its class: DWARF through its declaration, with `this`.
    let out = fslat(&["-lv", &format!("{}:shop::Cart::add", exe.display())]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(
            "long int shop::Cart::add(struct Cart *this, long int price)  // offset 0x"
        ),
        "{stdout}"
    );
    // By name, by the mangled symbol, quoted with parameters, after bpftrace's `cpp:`.
    for func in [
        "shop::Cart::add",
        "_ZN4shop4Cart3addEl",
        "cpp:shop::Cart::add",
        "\"shop::price(long)\"",
    ] {
        let out = fslat(&[
            "--emit",
            "c",
            "-e",
            &format!("session {}:{func} {{ count() }}", exe.display()),
        ]);
        assert!(out.status.success(), "{func}: {out:?}");
    }
    let out = fslat(&[
        "--emit",
        "c",
        "-e",
        &format!("session {}:shop::price {{ count() }}", exe.display()),
    ]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("`shop::price` is overloaded"), "{stderr}");
}

#[test]
fn user_sessions_on_a_stripped_file_or_a_missing_function_say_why() {
    let dir = user_programs();
    let stripped = dir.path().join("ufunc-stripped");
    let out = fslat(&["-e", &format!("session {}:nap", stripped.display())]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("has no symbol table (it is stripped)"),
        "{stderr}"
    );
    let exe = dir.path().join("ufunc");
    let out = fslat(&[
        "-e",
        &format!("session {}:nape {{ count() }}", exe.display()),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("has no function `nape` in its symbol tables"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `nap`"), "{stderr}");
    // Debian's libc has no DWARF: its parameters are the registers.
    let out = fslat(&["-e", "session libc:malloc { emit size }"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("unknown name `size`"), "{stderr}");
    assert!(stderr.contains("`malloc` has no DWARF"), "{stderr}");
}

/// A function the compiler also copied (`NAME.isra.0` in /proc/kallsyms) is marked on its
/// signature line: a session on it does not see calls through the copy. The function is
/// found in this host's own symbol table.
#[test]
fn list_marks_a_function_with_compiler_copies() {
    let table = std::fs::read_to_string("/proc/kallsyms").expect("read /proc/kallsyms");
    let copied: Vec<&str> = table
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| !n.starts_with("__pfx_"))
        .filter_map(|n| n.split_once(".isra.").map(|(base, _)| base))
        .collect();
    let (name, out) = copied
        .iter()
        .take(200)
        .map(|name| (name, fslat(&["-l", name])))
        .find(|(_, out)| out.status.success())
        .expect("a function of this kernel with BTF and an .isra copy");
    let stdout = text(&out.stdout);
    let line = stdout.trim_end();
    assert!(line.contains(&format!(" {name}(")), "{stdout}");
    assert!(
        line.contains(")  // warning: partly inlined: the compiler made copies of it ("),
        "{stdout}"
    );
    assert!(line.contains(&format!("(`{name}.")), "{stdout}");
    assert!(
        line.ends_with("and calls through them are not seen"),
        "{stdout}"
    );
}

/// `--help` carries the language, so the binary alone is enough: every action has an
/// example, and every example is a script fslat accepts (against this host's kernel).
#[test]
fn help_summarises_the_language_with_examples_that_check() {
    let out = fslat(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    let help = text(&out.stdout);
    for word in [
        "tgid",
        "latency",
        "ret",
        "emit",
        "count()",
        "hist(",
        "sum(",
        "percentiles(",
    ] {
        assert!(help.contains(word), "{word} missing from --help:\n{help}");
    }
    let examples: Vec<&str> = help
        .lines()
        .filter_map(|l| l.strip_prefix("      "))
        .filter(|l| l.starts_with("session "))
        .collect();
    assert!(examples.len() >= 7, "{help}");
    for example in examples {
        let out = fslat(&["--emit", "ir", "-e", example]);
        assert!(out.status.success(), "{example}: {}", text(&out.stderr));
    }
    assert!(
        !help.contains("docs/"),
        "--help points into the source tree:\n{help}"
    );
}

/// doctor's report, whatever this host allows: a line for each requirement, a fix under
/// each one missing, what can be traced (kernel functions, tracepoints, user functions:
/// yes when a test program of one of the kinds that trace it loaded and attached), and a
/// verdict and exit status that follow from those lines.
#[test]
fn doctor_verdict_and_exit_status_follow_from_its_lines() {
    let out = fslat(&["doctor"]);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let status = |name: &str| -> &str {
        let line = lines
            .iter()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with("  "))
            .unwrap_or_else(|| panic!("no {name} line:\n{stdout}"));
        line[name.len()..].split_whitespace().next().unwrap_or("")
    };
    let required = [
        "kernel",
        "privileges",
        "BTF",
        "BPF JIT",
        "ring buffer",
        "clang",
    ];
    let kinds = [
        (
            "kernel functions",
            &["fentry/fexit", "fsession", "kprobe_session"][..],
        ),
        ("tracepoints", &["tp_btf"][..]),
        (
            "user functions",
            &["uprobe", "uprobe_session", "uprobe_multi"][..],
        ),
    ];
    for name in required.iter().chain(&["cache"]) {
        assert!(
            matches!(status(name), "ok" | "missing"),
            "{name}: {}\n{stdout}",
            status(name)
        );
    }
    for (i, line) in lines.iter().enumerate() {
        if line.contains("  missing  ") {
            assert!(
                lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with("fix: ")),
                "no fix under: {line}\n{stdout}"
            );
        }
    }
    let mut can = Vec::new();
    let mut cannot = Vec::new();
    for (what, names) in kinds {
        let ok: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| status(n) == "ok")
            .collect();
        let line = lines
            .iter()
            .find(|l| l.trim_start().starts_with(what))
            .unwrap_or_else(|| panic!("no `{what}` line:\n{stdout}"));
        let expected = if ok.is_empty() {
            cannot.push(what);
            format!("  {what:16}  no   (refused: {})", names.join(", "))
        } else {
            can.push(what);
            format!("  {what:16}  yes  ({})", ok.join(", "))
        };
        assert_eq!(*line, expected, "{stdout}");
    }
    let verdict = *lines.last().expect("a verdict line");
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|n| status(n) == "missing")
        .collect();
    let expected = if !missing.is_empty() {
        format!(
            "fslat cannot trace on this machine: {} missing.",
            missing.join(", ")
        )
    } else if can.is_empty() {
        "fslat cannot trace on this machine: every test program was refused.".into()
    } else if cannot.is_empty() {
        "fslat can trace on this machine.".into()
    } else {
        format!(
            "fslat can trace {} on this machine, not {}.",
            can.join(" and "),
            cannot.join(" and ")
        )
    };
    assert_eq!(verdict, expected, "{stdout}");
    let code = if expected.starts_with("fslat can") {
        0
    } else {
        1
    };
    assert_eq!(out.status.code(), Some(code), "{stdout}");
    // Advice a user of the installed binary can follow: nothing in the source tree.
    for tree_only in ["tests/", "docs/", "examples/"] {
        assert!(!stdout.contains(tree_only), "{tree_only} in:\n{stdout}");
    }
}

/// On a host whose kernel refuses function tracing to root (this project's machines:
/// fentry loads fail with EPERM, no CONFIG_KPROBES) but allows uprobes, doctor says that
/// user functions and tracepoints can be traced and kernel functions cannot, exits 0, and
/// its fix says whether ftrace_enabled or lockdown is the cause, from the files themselves.
/// (Before: "fslat cannot trace on this machine", exit 1, and a guess at the cause.)
#[test]
fn doctor_on_a_host_that_refuses_function_tracing_says_user_functions_work() {
    let out = fslat(&["doctor"]);
    let stdout = text(&out.stdout);
    let Some(fentry) = stdout.lines().find(|l| l.starts_with("fentry/fexit ")) else {
        panic!("no fentry/fexit line:\n{stdout}");
    };
    if !fentry.ends_with("loading failed with EPERM") {
        return; // a host that allows function tracing (or where fslat is not root)
    }
    let ftrace = std::fs::read_to_string("/proc/sys/kernel/ftrace_enabled")
        .map(|v| v.trim().to_string())
        .unwrap_or_default();
    let fix = stdout
        .lines()
        .skip_while(|l| !l.starts_with("fentry/fexit "))
        .nth(1)
        .unwrap_or("");
    if ftrace == "0" {
        assert!(
            fix.contains("/proc/sys/kernel/ftrace_enabled is 0"),
            "{stdout}"
        );
    } else {
        assert!(
            fix.contains(&format!("neither ftrace being off nor lockdown is why (/proc/sys/kernel/ftrace_enabled is {ftrace}")),
            "{stdout}"
        );
    }
    for line in [
        "  kernel functions  no   (refused: fentry/fexit, fsession, kprobe_session)",
        "  tracepoints       yes  (tp_btf)",
    ] {
        assert!(stdout.lines().any(|l| l == line), "no `{line}`:\n{stdout}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("  user functions    yes  (uprobe")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("uprobe  ") && l.contains(" ok ")),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some(
            "fslat can trace tracepoints and user functions on this machine, not kernel functions."
        )
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");
}

/// `-p` of a process that does not exist, or of a thread, is refused before anything is
/// compiled or loaded (so on this host too).
#[test]
fn pid_of_no_process_or_of_a_thread_is_refused_naming_it() {
    let out = fslat(&["-p", "4294967295", "-e", "session vfs_read"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        "fslat: error: -p 4294967295: there is no process 4294967295\n"
    );
    // This test binary runs tests on threads besides its main one.
    let pid = std::process::id();
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let tid = std::fs::read_link("/proc/thread-self").expect("thread-self");
        let tid = tid
            .file_name()
            .expect("a tid")
            .to_string_lossy()
            .into_owned();
        tx.send(tid).expect("send");
        let _ = done_rx.recv();
    });
    let tid = rx.recv().expect("the thread's id");
    let out = fslat(&["-p", &tid, "-e", "session vfs_read"]);
    drop(done_tx);
    thread.join().expect("join");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!(
            "fslat: error: -p {tid}: {tid} is a thread of process {pid}; -p takes the process id: -p {pid}\n"
        )
    );
}

fn fails_with_usage_words(args: &[&str], words: &str) {
    let out = fslat(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    assert_eq!(
        text(&out.stderr),
        format!("fslat: error: {words}\n"),
        "{args:?}"
    );
}

#[test]
fn two_script_files_are_refused_in_words() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (dir.path().join("a.fsl"), dir.path().join("b.fsl"));
    for p in [&a, &b] {
        std::fs::write(p, "session vfs_read\n").expect("write a script");
    }
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    fails_with_usage_words(
        &[&a, &b],
        &format!(
            "fslat runs one script, and `{b}` is a second script file; put the sessions of both in one file, or run fslat once for each"
        ),
    );
    fails_with_usage_words(
        &["-e", "session vfs_read", &a],
        "give the program either with -e or as a script file, not both",
    );
}

/// `fslat -l vfs_*` unquoted, in a directory where the glob matches files.
#[test]
fn two_list_globs_are_refused_in_words() {
    fails_with_usage_words(
        &["-l", "vfs_read.fsl", "vfs_write.fsl"],
        "-l takes one GLOB, and `vfs_write.fsl` is a second one; quote a glob so the shell does not expand it into file names (`fslat -l 'vfs_*'`)",
    );
    fails_with_usage_words(
        &["-l", "a", "-l", "b"],
        "give -l once, with one GLOB (`fslat -l 'vfs_*'`)",
    );
}

#[test]
fn output_to_the_script_itself_is_refused_and_the_script_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("s.fsl");
    std::fs::write(&script, "session vfs_read\n").expect("write the script");
    let other_name = dir.path().join("sub/../s.fsl");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    let out = fslat(&[
        "--emit",
        "c",
        &script.to_string_lossy(),
        "-o",
        &other_name.to_string_lossy(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!(
            "fslat: error: -o {} is the script itself: its output would overwrite it; write the output to another file\n",
            other_name.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&script).expect("read"),
        "session vfs_read\n"
    );
}

#[test]
fn completions_generate_for_every_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = fslat(&["completions", shell]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{shell}: {out:?}");
        assert!(stdout.contains("pid"), "{shell}: no --pid:\n{stdout}");
        assert!(stdout.contains("doctor"), "{shell}: no doctor:\n{stdout}");
    }
    let out = fslat(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// The manual page: fslat's options and each subcommand's (from clap), no page it
/// names that does not exist (clap_mangen's default SEE ALSO lists `fslat-build(1)`),
/// the language summary line for line as --help has it, and the sections a man page
/// has; `man --warnings` renders it without a warning.
#[test]
fn man_page_gives_every_command_its_options_and_renders_without_warnings() {
    let out = fslat(&["man"]);
    let roff = text(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(roff.contains(".TH fslat 1"), "{roff}");
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "COMMANDS",
        "\"THE LANGUAGE\"",
        "\"EXIT STATUS\"",
        "ENVIRONMENT",
        "FILES",
        "EXAMPLES",
        "\"SEE ALSO\"",
    ] {
        assert!(
            roff.lines().any(|l| l == format!(".SH {section}")),
            "no {section}:\n{roff}"
        );
    }
    assert!(
        !roff.contains("fslat-"),
        "a page that does not exist:\n{roff}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("fslat.1");
    std::fs::write(&page, &roff).expect("write the page");
    let man = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("man (tests/vm/setup-host installs man-db)");
    let shown = text(&man.stdout);
    assert!(man.status.success(), "{man:?}");
    assert_eq!(text(&man.stderr), "", "man --warnings:\n{shown}");
    let section = |title: &str| -> String {
        shown
            .lines()
            .skip_while(|l| *l != title)
            .skip(1)
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let commands = section("COMMANDS");
    for (command, option) in [
        ("build", "-o, --output <FILE>"),
        ("build", "--max-functions <N>"),
        ("run", "<FILE> The bundle to run"),
        ("completions", "<SHELL>"),
    ] {
        let from = commands
            .find(&format!("   fslat {command}\n"))
            .unwrap_or_else(|| panic!("no fslat {command}:\n{commands}"));
        assert!(
            commands[from..].contains(option),
            "fslat {command}: no {option}:\n{commands}"
        );
    }
    // The language keeps --help's lines: a heading and its first entry stay two lines.
    let language = section("THE LANGUAGE");
    let help = text(&fslat(&["--help"]).stdout);
    for line in [
        "Names:",
        "  tgid            the process (what user space calls the pid)",
    ] {
        assert!(help.lines().any(|l| l == line), "--help: no `{line}`");
        assert!(
            language
                .lines()
                .any(|l| l.strip_prefix("       ") == Some(line)),
            "THE LANGUAGE: no `{line}`:\n{language}"
        );
    }
    // Every environment variable the source reads is under ENVIRONMENT.
    let environment = section("ENVIRONMENT");
    for name in variables_read(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path()) {
        assert!(
            environment
                .lines()
                .any(|l| l.trim_start().starts_with(name.as_str())),
            "{name} is read but not under ENVIRONMENT:\n{environment}"
        );
    }
    // EXIT STATUS has the statuses docs/language.md's table has, in the same order.
    let statuses: Vec<String> = section("EXIT STATUS")
        .lines()
        .filter(|l| l.len() > 7 && !l[7..].starts_with(' ') && l.starts_with("       "))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    let language_md =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/language.md"))
            .expect("docs/language.md");
    let documented: Vec<String> = language_md
        .lines()
        .skip_while(|l| !l.contains("| status | when |"))
        .skip(2)
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(|l| {
            l.trim_start()
                .trim_start_matches('|')
                .split('|')
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .collect();
    assert_eq!(statuses, documented, "{shown}");
    assert_eq!(statuses, ["0", "1", "2", "N", "130", "141"]);
}

/// The environment variables the sources under `dir` read: `var_os("NAME")` and every
/// `"OTEL_..."` literal (the OTLP settings are read through a table).
fn variables_read(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs")
                || path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().contains("tests"))
            {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("read a source file");
            for (i, _) in source.match_indices('"') {
                let rest = &source[i + 1..];
                let Some(end) = rest.find('"') else { continue };
                let word = &rest[..end];
                let read = source[..i].ends_with("var_os(") || source[..i].ends_with("var(");
                let otel = word.starts_with("OTEL_")
                    && word.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
                if (read || otel) && !word.is_empty() && !names.iter().any(|n| n == word) {
                    names.push(word.to_string());
                }
            }
        }
    }
    names.sort();
    assert!(names.iter().any(|n| n == "FSLAT_CLANG"), "{names:?}");
    names
}

#[test]
fn a_script_named_like_a_subcommand_is_still_a_script() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("doctor.fsl");
    std::fs::write(&script, "session vfs_read where latncy > 1ms\n").expect("write script");
    let out = fslat(&[script.to_str().expect("utf-8 path"), "--emit", "c"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains("unknown name `latncy`"),
        "{out:?}"
    );
}

#[test]
fn a_subcommand_after_options_is_explained() {
    let out = fslat(&["-p", "1", "doctor"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains("`doctor` is a subcommand and must come first"),
        "{out:?}"
    );
}

#[test]
fn scripted_repl_checks_entries_and_shows_c() {
    let input = "session vfs_read where latncy > 1ms\n\
                 session vfs_read where latency > 1ms {\n  count() by comm\n}\n\
                 :c\n:mode fentry\n:list vfs_rea*\n:quit\n:c\n";
    let out = fslat_with_stdin(&["repl"], Some(input));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // The first entry's diagnostic makes the scripted REPL's exit status 1.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error[F0401]: unknown name `latncy`"),
        "{stderr}"
    );
    assert!(stderr.contains("--> <input>:1:24"), "{stderr}");
    assert!(stderr.contains("ok: vfs_read"), "{stderr}");
    assert!(stderr.contains("Mode fentry (fentry)."), "{stderr}");
    assert!(stdout.contains("SEC(\""), "no C on stdout:\n{stdout}");
    assert!(stdout.lines().any(|l| l == "vfs_read"), "{stdout}");
    // `:quit` ends it: the second `:c` is never run.
    assert_eq!(
        stdout.matches("// Generated by fslat").count(),
        1,
        "{stdout}"
    );
}

#[test]
fn scripted_repl_without_errors_exits_0() {
    let out = fslat_with_stdin(&["repl"], Some("session vfs_write\n:help\n"));
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains(":run [DUR]"), "{out:?}");
}

/// `exit`, `quit`, `help` and `clear` typed without the colon are the commands, not a
/// kernel function to write a session for.
#[test]
fn scripted_repl_takes_exit_quit_help_and_clear_as_commands() {
    for word in ["exit", "quit"] {
        let input = format!("session vfs_read\nclear\n:c\nhelp\n{word}\n:help\n");
        let out = fslat_with_stdin(&["repl"], Some(&input));
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        // `:c` after `clear` fails: no script; that is the one failure.
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("The script is empty."), "{stderr}");
        assert!(!stderr.contains("write `session"), "{stderr}");
        // `help` printed the list once; `:help` after `exit`/`quit` never ran.
        assert_eq!(stdout.matches(":run [DUR]").count(), 1, "{stdout}");
    }
}

/// bpftrace's spellings of a kernel probe list kernel functions; `-f json` lists one
/// object a line; a system call's name suggests its implementations first.
#[test]
fn list_takes_bpftrace_probes_json_and_leads_a_syscall_to_its_functions() {
    for glob in ["kprobe:vfs_rea*", "fentry:vfs_rea*", "kfunc:vfs_rea*"] {
        let out = fslat(&["-l", glob]);
        assert!(out.status.success(), "{glob}: {out:?}");
        assert!(
            text(&out.stdout).lines().any(|l| l == "vfs_read"),
            "{out:?}"
        );
    }
    let out = fslat(&["-l", "vfs_rea*", "-f", "json"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(
        stdout.lines().any(|l| l == r#"{"function":"vfs_read"}"#),
        "{stdout}"
    );
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        assert!(v["function"].is_string(), "{line}");
    }
    let out = fslat(&["-l", "read"]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("did you mean one of vfs_read, ksys_read"),
        "{stderr}"
    );
}

/// `--cgroups -f json`: one object a line; with nothing to show, it says so.
#[test]
fn cgroups_list_in_json_or_says_why_it_is_empty() {
    let out = fslat(&["--cgroups", "-f", "json"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        assert!(v["path"].is_string(), "{line}");
    }
    if stdout.is_empty() {
        assert!(
            text(&out.stderr).contains("has a systemd unit, container or pod"),
            "{out:?}"
        );
    }
}

/// A private tmux server with one pane running fslat's REPL.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(name: &str, state: &Path) -> Tmux {
        let socket = format!("fslat-test-{}-{name}", std::process::id());
        let t = Tmux { socket };
        let command = format!(
            "env NO_COLOR=1 XDG_STATE_HOME={} {FSLAT} repl",
            state.display()
        );
        let out = t.tmux(&[
            "new-session",
            "-d",
            "-s",
            "repl",
            "-x",
            "160",
            "-y",
            "50",
            &command,
        ]);
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            text(&out.stderr)
        );
        t.wait_for("the prompt", |s| s.lines().any(|l| l.starts_with("fslat>")));
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run tmux ({e}): these tests need it; run tests/vm/setup-host")
            })
    }

    /// Types `keys` (tmux key names: "Tab", "Enter", or literal text).
    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "repl"];
        args.extend(keys);
        let out = self.tmux(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    fn screen(&self) -> String {
        text(
            &self
                .tmux(&["capture-pane", "-p", "-t", "repl", "-S", "-200"])
                .stdout,
        )
    }

    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        // Generous: the REPL runs clang for `:c`, and a loaded host (parallel builds, guests)
        // has taken more than 20 s; this waits for a screen, it times nothing.
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{screen}");
            }
            sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

#[test]
fn repl_on_a_terminal_completes_function_and_parameter_names() {
    let state = tempfile::tempdir().expect("temp dir");
    let t = Tmux::start("complete", state.path());
    // Ambiguous: the candidates are listed.
    t.send(&["session vfs_re", "Tab"]);
    t.wait_for("the list of vfs_re* candidates", |s| {
        s.contains("vfs_readlink") && s.contains("vfs_rename")
    });
    // One more letter and Tab: the longest common prefix, `vfs_read`.
    t.send(&["a", "Tab"]);
    t.wait_for("vfs_read completed", |s| {
        s.lines().any(|l| l.trim_end() == "fslat> session vfs_read")
    });
    t.send(&["C-e", " where cou", "Tab"]);
    t.wait_for("the parameter count completed", |s| {
        s.contains("session vfs_read where count")
    });
    t.send(&[" > 1 and laten", "Tab", " > 1ms", "Enter"]);
    t.wait_for("the entry accepted", |s| {
        s.contains("ok: vfs_read") && s.contains("where count > 1 and latency > 1ms")
    });
}

#[test]
fn repl_on_a_terminal_points_diagnostics_into_typed_text_and_shows_c() {
    let state = tempfile::tempdir().expect("temp dir");
    let t = Tmux::start("diag", state.path());
    t.send(&["session vfs_read where tgid == 1 and latncy > 1ms", "Enter"]);
    let screen = t.wait_for("the diagnostic", |s| s.contains("did you mean `latency`?"));
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("1 | session vfs_read where tgid == 1 and latncy > 1ms"))
        .unwrap_or_else(|| panic!("no source line:\n{screen}"));
    let caret = lines.get(at + 1).copied().unwrap_or("");
    let source_col = lines[at].find("latncy").expect("latncy on the source line");
    assert_eq!(
        caret.find('^'),
        Some(source_col),
        "the caret is not under `latncy`:\n{screen}"
    );
    assert!(caret.contains("^^^^^^"), "{screen}");

    // An entry over three lines: the braces keep it open.
    t.send(&["session vfs_write {", "Enter"]);
    t.send(&["count() by comm", "Enter"]);
    t.send(&["}", "Enter"]);
    t.wait_for("the three-line entry accepted", |s| {
        s.contains("ok: vfs_write")
    });
    t.send(&[":c", "Enter"]);
    t.wait_for("the C", |s| {
        s.contains("SEC(\"fexit/vfs_write\")") || s.contains("SEC(\"fsession/vfs_write\")")
    });
    t.send(&[":quit", "Enter"]);
    let history = state.path().join("fslat/history");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&history).is_ok_and(|h| h.contains(":quit")) {
        assert!(
            Instant::now() < deadline,
            "no history at {}",
            history.display()
        );
        sleep(Duration::from_millis(50));
    }
    let saved = std::fs::read_to_string(&history).unwrap_or_default();
    assert!(saved.contains("latncy"), "{saved}");
    assert!(saved.contains("session vfs_write {"), "{saved}");
}

#[test]
fn a_negative_pid_is_refused_naming_the_option() {
    let out = fslat(&["-p", "-1", "-e", "session vfs_read"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--pid"), "{stderr}");
    assert!(stderr.contains("not a process id"), "{stderr}");
    assert!(!stderr.contains("-- -1"), "{stderr}");
}

#[test]
fn btf_that_is_not_a_file_is_refused_naming_the_option() {
    for path in ["/dev/zero", "/nonexistent/btf"] {
        let out = fslat(&["--btf", path, "--emit", "c", "-e", "session vfs_read"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.starts_with("fslat: error: --btf: "), "{stderr}");
        assert_eq!(stderr.matches("--btf").count(), 2, "one hint: {stderr}");
    }
}

/// The fixture kernel's BTF with its `struct dentry` renamed to something that is C of its
/// own: before, it went into the generated program as it was.
#[test]
fn btf_with_a_name_that_is_not_a_c_identifier_is_refused() {
    let mut bytes = fslat::btf::Fixture::new().bytes().to_vec();
    let (from, to) = (&b"\0dentry\0"[..], &b"\0d;#x\ny\0"[..]);
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the fixture names struct dentry");
    bytes[at..at + from.len()].copy_from_slice(to);
    let file = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(file.path(), &bytes).expect("write the BTF");
    let path = file.path().to_string_lossy().into_owned();
    let script = "session vfs_read { emit file->f_path.dentry->d_name.name as name }";
    let out = fslat(&["--btf", &path, "--emit", "c", "-e", script]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is named \"d;#x\\ny\""), "{stderr}");
    assert!(stderr.contains("not a C identifier"), "{stderr}");
    assert!(out.stdout.is_empty(), "no C: {}", text(&out.stdout));
}

#[test]
fn a_clang_that_is_not_clang_is_named_not_blamed_on_fslat() {
    let cases = [
        ("/bin/false", "is it clang?"),
        ("/etc/passwd", "is not an executable program"),
        ("/nonexistent/clang", "does not exist"),
    ];
    for (clang, says) in cases {
        let out = fslat(&[
            "--clang",
            clang,
            "--no-cache",
            "--emit",
            "obj",
            "-o",
            "/dev/null",
            "-e",
            "session vfs_read",
        ]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{clang}: {stderr}");
        assert!(stderr.contains(says), "{clang}: {stderr}");
        assert!(!stderr.contains("bug in fslat"), "{clang}: {stderr}");
    }
}

#[test]
fn c_that_clang_rejects_is_kept_in_a_new_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    // A "clang" that rejects everything the way clang does.
    let fake = dir.path().join("clang");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'program.bpf.c:1:1: error: no' >&2\nexit 1\n",
    )
    .expect("write fake clang");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    let out = Command::new(FSLAT)
        .args(["--clang", fake.to_str().expect("utf-8"), "--no-cache"])
        .args(["--emit", "obj", "-o", "/dev/null", "-e", "session vfs_read"])
        .env("TMPDIR", &tmp)
        .output()
        .expect("run fslat");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let kept: Vec<_> = std::fs::read_dir(&tmp)
        .expect("read tmp")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    assert_eq!(kept.len(), 1, "{stderr}");
    assert!(stderr.contains(&*kept[0].to_string_lossy()), "{stderr}");
    let meta = std::fs::symlink_metadata(&kept[0]).expect("stat");
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_closed_standard_output_ends_quietly_with_a_non_zero_status() {
    let mut child = Command::new(FSLAT)
        .args(["-l", "*"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fslat");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(141), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn a_signal_while_waiting_for_a_script_ends_with_130() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("script.fsl");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    for signal in ["-INT", "-TERM"] {
        let child = Command::new(FSLAT)
            .args(["--emit", "c"])
            .arg(&fifo)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run fslat");
        let pid = child.id().to_string();
        // Wait until fslat is blocked opening the FIFO (openat is system call 257).
        let deadline = Instant::now() + Duration::from_secs(30);
        let in_open = || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|t| {
                    std::fs::read_to_string(t.path().join("syscall"))
                        .is_ok_and(|s| s.starts_with("257 "))
                })
        };
        while !in_open() {
            assert!(Instant::now() < deadline, "fslat never opened the FIFO");
            sleep(Duration::from_millis(20));
        }
        assert!(
            Command::new("kill")
                .args([signal, &pid])
                .status()
                .expect("kill")
                .success()
        );
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(130), "{signal}: {out:?}");
    }
}

#[test]
fn bad_listen_and_otlp_values_name_the_option() {
    for (args, says) in [
        (["--listen", "localhost:9435"], "--listen"),
        (["--listen", "127.0.0.1"], "is not ADDR:PORT"),
        (["--listen", ""], "the value is empty"),
        (
            ["--otlp", "127.0.0.1:4318"],
            "is not an http:// or https:// URL",
        ),
        (["--otlp", "http://collector:x"], "is not a port"),
        (["--otlp-header", "api-key"], "is not NAME=VALUE"),
        (["--otlp-header", "a b=c"], "is not a header name"),
    ] {
        let mut all = vec!["-e", "session vfs_read"];
        all.extend(args);
        let out = fslat(&all);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(args[0]) && err.contains(says),
            "{args:?}: {err}"
        );
    }
}

/// A web configuration is read and checked while the arguments are, before anything
/// else: its errors end the run with the file, the problem, and exit status 2.
#[test]
fn a_bad_web_config_ends_the_run_before_anything_is_loaded() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bad = dir.path().join("web.yml");
    std::fs::write(&bad, "basic_auth_users:\n  alice: hunter2\n").expect("write");
    let bad = bad.to_str().expect("utf-8 path");
    let empty = dir.path().join("empty.yml");
    std::fs::write(&empty, "").expect("write");
    let empty = empty.to_str().expect("utf-8 path");
    let missing = dir.path().join("absent.yml");
    let missing = missing.to_str().expect("utf-8 path");
    for (args, says) in [
        (
            vec!["--listen", "127.0.0.1:0", "--web-config", bad],
            "the password of \"alice\" is not a bcrypt hash",
        ),
        (
            vec!["--listen", "127.0.0.1:0", "--web-config", missing],
            "cannot read it",
        ),
        (
            vec!["--web-config", empty],
            "the following required arguments were not provided",
        ),
    ] {
        let mut all = vec!["-e", "session vfs_read"];
        all.extend(&args);
        let out = fslat(&all);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--web-config") && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(!err.contains("Tracing"), "{err}");
    }
}

/// OTLP settings from the options and the environment are checked before anything is
/// loaded: a bad one ends the run with what is wrong and where it came from.
#[test]
fn bad_otlp_settings_end_the_run_before_tracing() {
    for (args, env, says) in [
        (
            vec!["--otlp-header", "a=b"],
            None,
            "fslat: error: --otlp-header and --otlp-ca need --otlp URL (or OTEL_EXPORTER_OTLP_ENDPOINT)",
        ),
        (
            vec![],
            Some(("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")),
            "fslat: error: OTEL_EXPORTER_OTLP_ENDPOINT: `collector:4318` is not an http:// or https:// URL",
        ),
        (
            vec!["--otlp", "https://127.0.0.1:1", "--otlp-ca", "Cargo.toml"],
            None,
            "fslat: error: --otlp-ca: Cargo.toml: no PEM certificate in it",
        ),
    ] {
        let mut command = Command::new(FSLAT);
        command
            .args(["-e", "session vfs_read"])
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
        if let Some((k, v)) = env {
            command.env(k, v);
        }
        let out = command.output().expect("run fslat");
        let err = text(&out.stderr);
        // A usage error, as a bad --web-config is (clap's).
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with(says), "{args:?}: {err}");
        assert!(!err.contains("Tracing"), "{err}");
    }
}

/// The port is bound before anything is loaded: in use, the run ends with the reason and
/// never starts tracing.
#[test]
fn a_listen_port_in_use_ends_the_run_before_tracing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = taken.local_addr().expect("its address").to_string();
    let out = fslat(&["-e", "session vfs_read", "--listen", &addr]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("--listen {addr}: cannot listen there")) && err.contains("in use"),
        "{err}"
    );
    assert!(!err.contains("Tracing"), "{err}");
}

#[test]
fn a_generated_filter_of_4000_terms_compiles_without_crashing() {
    let terms: Vec<String> = (0..4000).map(|i| format!("tgid == {i}")).collect();
    let script = format!("session vfs_read where {}", terms.join(" or "));
    for emit in ["ast", "c"] {
        let out = fslat_with_stdin(&["--emit", emit, "-o", "/dev/null", "-"], Some(&script));
        assert!(out.status.success(), "--emit {emit}: {}", text(&out.stderr));
    }
}

#[test]
fn interval_of_zero_or_garbage_is_refused_naming_the_option() {
    for bad in ["0", "", "5x"] {
        let out = fslat(&["-e", "session vfs_read { count() }", "-i", bad]);
        assert!(!out.status.success(), "-i {bad:?}: {out:?}");
        let err = text(&out.stderr);
        assert!(err.contains("--interval"), "-i {bad:?}: {err}");
    }
}

/// A kernel's types without fsession (the fixture's, as raw BTF in a file), so the test
/// does not depend on what the host kernel has.
fn btf_without_fsession(dir: &Path) -> String {
    let path = dir.join("vmlinux-6.x");
    std::fs::write(&path, fslat::btf::Fixture::without_fsession().bytes()).expect("write BTF");
    path.to_str().expect("utf-8 path").to_string()
}

#[test]
fn emit_in_a_mode_the_kernel_lacks_writes_it_with_a_note_and_a_run_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let btf = btf_without_fsession(dir.path());
    let emit_c = |mode: &str, program: &str| {
        fslat(&["--btf", &btf, "--mode", mode, "--emit", "c", "-e", program])
    };

    let out = emit_c("fsession", "session vfs_read");
    assert!(out.status.success(), "{out:?}");
    let c = text(&out.stdout);
    assert!(c.contains("SEC(\"fsession/vfs_read\")"), "{c}");
    assert!(!c.contains("SEC(\"fexit/"), "{c}");
    assert_eq!(
        text(&out.stderr),
        "fslat: note: --mode fsession: this kernel could not load it (fsession arrived in Linux 7.0); what --emit writes is for a kernel that can\n"
    );

    let out = emit_c("fsession-multi", "session vfs_read, vfs_write");
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stdout).contains("SEC(\"fslat.multi\")"),
        "{out:?}"
    );
    assert!(text(&out.stderr).contains("Linux 7.2"), "{out:?}");

    let object = dir.path().join("fsession.o");
    let out = fslat(&[
        "--btf",
        &btf,
        "--mode",
        "fsession",
        "--emit",
        "obj",
        "-o",
        object.to_str().expect("utf-8 path"),
        "-e",
        "session vfs_read",
    ]);
    assert!(out.status.success(), "{out:?}");
    let bytes = std::fs::read(&object).expect("the object was written");
    assert!(bytes.starts_with(b"\x7fELF"), "not an ELF object");

    // The mode the kernel has is written without a note.
    let out = emit_c("fentry", "session vfs_read");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stderr), "");

    // Running is loading: refused before anything is compiled.
    let out = fslat(&[
        "--btf",
        &btf,
        "--mode",
        "fsession",
        "-e",
        "session vfs_read",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).starts_with("fslat: error: --mode fsession: this kernel has no fsession"),
        "{out:?}"
    );
}

/// `fslat SCRIPT 1234 10ms bash`: the words after the script are `$1`.. in it.
#[test]
fn words_after_the_script_are_its_arguments() {
    let dir = tempfile::tempdir().expect("temp dir");
    let btf = btf_without_fsession(dir.path());
    let script = dir.path().join("s.fsl");
    std::fs::write(
        &script,
        "session vfs_read where tgid == $1 and latency > $2 and comm == $3 { emit $# as n }\n",
    )
    .expect("write a script");
    let script = script.to_string_lossy();
    let out = fslat(&[
        "--btf", &btf, "--emit", "c", &script, "1234", "10ms", "bash",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let c = text(&out.stdout);
    for want in ["(1234ULL)", "(10000000ULL)", "\"bash\"", "= 3ULL;"] {
        assert!(c.contains(want), "no {want} in\n{c}");
    }
    // `--` lets an argument start with `-`.
    let errors = dir.path().join("e.fsl");
    std::fs::write(&errors, "session vfs_read where ret == $1\n").expect("write a script");
    let errors = errors.to_string_lossy();
    let out = fslat(&["--btf", &btf, "--emit", "c", &errors, "--", "-1"]);
    assert!(
        text(&out.stdout).contains("(-1LL)"),
        "{}",
        text(&out.stderr)
    );
    let out = fslat(&["--btf", &btf, "--emit", "c", &script, "1234"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error[F0405]: `$2` is not given: the script was run with 1 argument\n"),
        "{stderr}"
    );
    assert!(stderr.contains("`$3` is not given"), "{stderr}");
}

/// `fslat -e PROGRAM 1234`, as bpftrace takes it: the words after -e's program are its
/// `$1`..; a script file there is still refused.
#[test]
fn words_after_an_inline_program_are_its_arguments() {
    let dir = tempfile::tempdir().expect("temp dir");
    let btf = btf_without_fsession(dir.path());
    let out = fslat(&[
        "--btf",
        &btf,
        "--emit",
        "c",
        "-e",
        "session vfs_read where tgid == $1 and comm == $2",
        "1234",
        "bash",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let c = text(&out.stdout);
    for want in ["(1234ULL)", "\"bash\""] {
        assert!(c.contains(want), "no {want} in\n{c}");
    }
}

/// A user without the capabilities to load hears that first: not about clang, which is
/// not even looked for (here it names none), nor about the kernel's types. Needs root
/// to become that user (`setpriv`), as the suite runs.
#[test]
fn without_privileges_the_run_says_so_before_looking_for_clang() {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", FSLAT])
        .args(["-e", "session vfs_read { count() }"])
        .env("FSLAT_CLANG", "/nonexistent/clang")
        .output()
        .expect("run setpriv (util-linux)");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("needs root (or the CAP_BPF and CAP_PERFMON capabilities): run it with sudo"),
        "{err}"
    );
    assert!(!err.contains("clang"), "{err}");
}

/// A run that fails before it traces pushes nothing to `--otlp`, and its error comes at
/// once: here the command of `-c` cannot start (a collector that is not there would have
/// taken the final push's retries, 4 s, and a warning about it, before the error).
#[test]
fn a_run_that_never_traced_pushes_nothing_and_fails_at_once() {
    let out = fslat(&[
        "--otlp",
        "http://127.0.0.1:9",
        "-c",
        "/nonexistent/command",
        "-e",
        "session vfs_read { count() }",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot start the command `/nonexistent/command`"),
        "{err}"
    );
    assert!(!err.contains("--otlp"), "{err}");
}

/// libbpf's log (-v) goes to standard error from a callback libbpf calls; a reader that
/// went away (`fslat -v ... 2>&1 | head`) made the write panic there, and a panic in a
/// callback from C aborted fslat (status 134). On this host the run then fails to load
/// (not root, or function tracing forbidden); on one that traces, it ends after `-d 1`.
#[test]
fn a_closed_standard_error_during_libbpfs_log_does_not_abort() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(FSLAT)
        .args(["-v", "-d", "1", "-e", "session vfs_read"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fslat");
    drop(child.stderr.take());
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), None, "{status:?}");
    assert!(matches!(status.code(), Some(0 | 1)), "{status:?}");
}

#[test]
fn durations_on_the_command_line_take_exact_decimals() {
    let run = |flag: &str, value: &str| {
        fslat(&[
            "--emit",
            "c",
            "-o",
            "/dev/null",
            flag,
            value,
            "-e",
            "session vfs_read { count() }",
        ])
    };
    for (flag, value) in [
        ("-d", "1.5s"),
        ("-d", "0.25"),
        ("-i", "0.5s"),
        ("-d", "1.5m"),
    ] {
        let out = run(flag, value);
        assert!(
            out.status.success(),
            "{flag} {value}: {}",
            text(&out.stderr)
        );
    }
    let out = run("-d", "1.5ns");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--duration") && err.contains("`1.5ns` is finer than a nanosecond"),
        "{err}"
    );
}

/// `pid` is the kernel's thread id: compared with the id of a process that has several
/// threads, it sees the main thread only, and fslat says so.
#[test]
fn pid_compared_with_a_threaded_process_warns_that_pid_is_the_thread() {
    // This test's own process, with one more thread held while fslat runs.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let _ = done_rx.recv();
    });
    let pid = std::process::id();
    let mut single = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("start sleep");
    let emit = |filter: String| {
        fslat(&[
            "--emit",
            "c",
            "-o",
            "/dev/null",
            "-e",
            &format!("session vfs_read where {filter}"),
        ])
    };
    let out = emit(format!("latency > 1ms and {pid} == pid"));
    let threaded = emit(format!("tgid == {pid}"));
    let one_thread = emit(format!("pid == {}", single.id()));
    drop(done_tx);
    thread.join().expect("join");
    let _ = single.kill();
    let _ = single.wait();

    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let threads = err
        .split(&format!("{pid} is a process with "))
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    assert!(threads.is_some_and(|n| n >= 2), "{err}");
    assert_eq!(
        err,
        format!(
            "fslat: warning: vfs_read: `pid` is a thread id, and {pid} is a process with {} threads: `pid` compared with {pid} sees only its main thread; `tgid` is the process id (`tgid == {pid}`)\n",
            threads.unwrap_or_default()
        )
    );
    for other in [threaded, one_thread] {
        assert!(other.status.success(), "{}", text(&other.stderr));
        assert_eq!(text(&other.stderr), "", "no warning");
    }
}

/// `dist/fslat-agent.service` keeps what fslat needs (CAP_BPF and CAP_PERFMON, nothing
/// else, the system calls of a service plus bpf and perf_event_open, localhost) and rates
/// 2.0 or lower in systemd's offline security analysis (9.0 before it was hardened, then
/// 3.1 without a system call filter, IP address lists and ProtectProc).
#[test]
fn the_agent_unit_is_hardened_to_an_exposure_of_2_or_less() {
    let unit = concat!(env!("CARGO_MANIFEST_DIR"), "/dist/fslat-agent.service");
    let content = std::fs::read_to_string(unit).expect("the unit file");
    for line in [
        "CapabilityBoundingSet=CAP_BPF CAP_PERFMON",
        "AmbientCapabilities=CAP_BPF CAP_PERFMON",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "SystemCallFilter=@system-service bpf perf_event_open",
        "IPAddressDeny=any",
        "IPAddressAllow=localhost",
        "ProtectProc=invisible",
    ] {
        assert!(
            content.lines().any(|l| l == line),
            "{line} is not in the unit"
        );
    }
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager", unit])
        .output()
        .expect("systemd-analyze runs (systemd 250 or later)");
    let report = text(&out.stdout);
    let level = report
        .lines()
        .find_map(|l| l.split_once("Overall exposure level for fslat-agent.service: "))
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}\n{}", text(&out.stderr)));
    assert!(level <= 2.0, "exposure {level}:\n{report}");
}

/// The package ships the agent's script (/etc/fslat/agent.fsl): without it, enabling the
/// unit restart-looped every 5 s. It checks; the unit listens on localhost by default.
#[test]
fn the_agent_ships_a_script_that_checks_and_listens_on_localhost() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{dir}/Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains(r#"["dist/agent.fsl", "etc/fslat/agent.fsl", "644"]"#),
        "the package does not install dist/agent.fsl"
    );
    let unit =
        std::fs::read_to_string(format!("{dir}/dist/fslat-agent.service")).expect("the unit file");
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .expect("ExecStart");
    assert!(exec.contains("--listen 127.0.0.1:9435 "), "{exec}");
    assert!(exec.ends_with(" /etc/fslat/agent.fsl"), "{exec}");
    let out = fslat(&[
        "--emit",
        "c",
        "-o",
        "/dev/null",
        &format!("{dir}/dist/agent.fsl"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The package ships a commented web config (/etc/fslat/web.yml) that fslat takes as it
/// is (plain http, no authentication: what localhost needs) and whose comments show TLS
/// and basic authentication; the unit's comments say how to use it beyond localhost.
#[test]
fn the_agent_ships_a_commented_web_config_that_loads_as_it_is() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{dir}/Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains(r#"["dist/web.yml", "etc/fslat/web.yml", "644"]"#),
        "the package does not install dist/web.yml"
    );
    let web = std::fs::read_to_string(format!("{dir}/dist/web.yml")).expect("dist/web.yml");
    assert!(
        web.lines().all(|l| l.is_empty() || l.starts_with('#')),
        "{web}"
    );
    for key in [
        "# tls_server_config:",
        "#   cert_file:",
        "# basic_auth_users:",
    ] {
        assert!(web.contains(key), "no `{key}` in:\n{web}");
    }
    let out = fslat(&[
        "--listen",
        "127.0.0.1:9435",
        "--web-config",
        &format!("{dir}/dist/web.yml"),
        "--emit",
        "c",
        "-o",
        "/dev/null",
        "-e",
        "session vfs_read",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let unit =
        std::fs::read_to_string(format!("{dir}/dist/fslat-agent.service")).expect("the unit file");
    assert!(unit.contains("--web-config /etc/fslat/web.yml"), "{unit}");
}

/// `-f folded` and `--flamegraph` show stack counts only: a program without one is refused before anything
/// is built or loaded (so on this host too), saying what to add.
#[test]
fn folded_output_without_a_stack_count_is_refused() {
    for (option, value, named) in [
        ("-f", "folded", "-f folded"),
        ("--flamegraph", "/nonexistent/f.svg", "--flamegraph"),
    ] {
        let out = fslat(&[option, value, "-e", "session vfs_read { count() by comm }"]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "fslat: error: {named} shows `count() by kstack` and `count() by ustack` aggregations, and this program has none: count by a stack (`session vfs_read {{ count() by kstack }}`)\n"
            )
        );
    }
}

/// `fslat build` over the fixture kernel's types (a file, so the test does not depend on
/// the host kernel): the bundle's path and the BTF file's.
fn fixture_bundle(dir: &Path, script: &str, args: &[&str]) -> (String, String) {
    let btf = dir.join("vmlinux-fixture");
    std::fs::write(&btf, fslat::btf::Fixture::new().bytes()).expect("write BTF");
    let src = dir.join("s.fsl");
    std::fs::write(&src, script).expect("write script");
    let out_path = dir.join("s.fslb");
    let mut argv = vec![
        "build",
        src.to_str().expect("utf-8"),
        "--btf",
        btf.to_str().expect("utf-8"),
        "-o",
        out_path.to_str().expect("utf-8"),
    ];
    argv.extend(args);
    let out = fslat(&argv);
    assert!(out.status.success(), "{out:?}");
    (
        out_path.to_str().expect("utf-8").into(),
        btf.to_str().expect("utf-8").into(),
    )
}

/// One line on standard error, `fslat: error: ` and then `starts`, and exit status 1.
fn refused(out: &Output, starts: &str) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(err.starts_with(&format!("fslat: error: {starts}")), "{err}");
    err
}

#[test]
fn build_writes_one_program_per_kernel_profile_and_mode_each_object_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, _) = fixture_bundle(
        dir.path(),
        "session vfs_read where latency > 1ms { emit; min(count) }",
        &["-v"],
    );
    let bytes = std::fs::read(&path).expect("the bundle");
    let b = fslat::bundle::Bundle::decode(&bytes).expect("a good bundle");
    let has = |mode: fslat::codegen::Mode, f: fslat::btf::Features, multi: bool| {
        b.variants
            .iter()
            .any(|v| v.mode == mode && v.features == f && v.multi == multi && v.program.is_ok())
    };
    use fslat::btf::Features;
    use fslat::codegen::Mode;
    // 5.10: fentry, none of the optional features; 7.0: fsession; 7.2: fsession-multi.
    assert!(has(Mode::Fentry, Features::default(), false));
    assert!(has(Mode::Fsession, Features::all(), false));
    assert!(has(Mode::FsessionMulti, Features::all(), true));
    assert!(
        has(Mode::Fentry, Features::all(), true),
        "--mode fentry on 7.2"
    );
    // 5.10's plain-store min() and task storage's absence change the C; 6.6's uprobe_multi
    // does not, so those profiles share an object.
    let objects: std::collections::BTreeSet<usize> = b.variants.iter().map(|v| v.object).collect();
    assert_eq!(objects.len(), b.objects.len());
    assert!(
        b.objects.len() < b.variants.len(),
        "{} objects",
        b.objects.len()
    );
    for o in &b.objects {
        assert_eq!(&o[..4], b"\x7fELF");
    }
}

#[test]
fn a_bundle_that_is_truncated_altered_or_not_one_is_refused_with_one_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, btf) = fixture_bundle(dir.path(), "session vfs_read", &[]);
    let bytes = std::fs::read(&path).expect("the bundle");
    let cut = dir.path().join("cut.fslb");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let mut altered = bytes.clone();
    altered[bytes.len() / 3] ^= 1;
    let flipped = dir.path().join("altered.fslb");
    std::fs::write(&flipped, &altered).expect("write");
    for file in [&cut, &flipped] {
        let f = file.to_str().expect("utf-8");
        for argv in [vec![f, "--btf", &btf], vec!["run", f, "--btf", &btf]] {
            let err = refused(
                &fslat(&argv),
                &format!("cannot run the bundle {f}: it is truncated or altered"),
            );
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
    let script = dir.path().join("s.fsl");
    let s = script.to_str().expect("utf-8");
    refused(
        &fslat(&["run", s]),
        &format!("cannot run the bundle {s}: it is not an fslat bundle"),
    );
}

/// The bundle at `path` with its header's `field` set to `value`, sealed again.
fn with_header_field(path: &str, field: &str, value: &str) -> Vec<u8> {
    let bytes = std::fs::read(path).expect("the bundle");
    let len = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    let mut header: serde_json::Value =
        serde_json::from_slice(&bytes[16..16 + len]).expect("JSON header");
    header[field] = value.into();
    let objects = vec![bytes[16 + len..bytes.len() - fslat::bundle::CHECKSUM_LEN].to_vec()];
    fslat::bundle::seal(&serde_json::to_vec(&header).expect("JSON"), &objects)
}

#[test]
fn a_bundle_of_another_fslat_version_or_architecture_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, btf) = fixture_bundle(dir.path(), "session vfs_read", &[]);
    let other = dir.path().join("other.fslb");
    let o = other.to_str().expect("utf-8");
    std::fs::write(&other, with_header_field(&path, "fslat", "0.0.1")).expect("write");
    let err = refused(&fslat(&[o, "--btf", &btf]), "cannot run the bundle");
    assert!(
        err.contains(&format!(
            "built by fslat 0.0.1, and this is fslat {}",
            env!("CARGO_PKG_VERSION")
        )),
        "{err}"
    );
    std::fs::write(&other, with_header_field(&path, "arch", "s390x")).expect("write");
    let err = refused(&fslat(&[o, "--btf", &btf]), "cannot run the bundle");
    assert!(
        err.contains("built for s390x, and this machine is"),
        "{err}"
    );
}

#[test]
fn a_bundle_takes_its_arguments_at_run_time_and_refuses_ones_that_do_not_fit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = "session vfs_read where count == $1 and comm == $2 and latency >= $3 { lhist(count, 0, $4, 1) }";
    let (path, btf) = fixture_bundle(dir.path(), script, &["1", "bash", "1ms", "10"]);
    let long = "x".repeat(64);
    for (args, message) in [
        (
            vec!["1", "bash", "1ms", "20"],
            "`$4` is fixed at `10` in this bundle (lhist's bounds compiled in when it was built), and this run gives `20`",
        ),
        (
            vec!["x", "bash", "1ms", "10"],
            "`$1` is an integer in this bundle, and `x` is not one",
        ),
        (
            vec!["1", "bash", "5", "10"],
            "`$3` is a duration in this bundle, and `5` is not one",
        ),
        (
            vec!["1", &long, "1ms", "10"],
            "`$2` holds at most 63 bytes in this bundle, and `xxxx",
        ),
        (
            vec!["1"],
            "`$2` is not given: the program reads it, and this run has 1 argument",
        ),
    ] {
        let mut argv = vec![path.as_str(), "--btf", &btf];
        argv.extend(&args);
        let err = refused(&fslat(&argv), &format!("the bundle's arguments: {message}"));
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn a_bundle_is_built_without_arguments_unless_one_is_compiled_in() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, _) = fixture_bundle(
        dir.path(),
        "session vfs_read where ret == $1 and $# == 1",
        &[],
    );
    let bytes = std::fs::read(&path).expect("the bundle");
    let b = fslat::bundle::Bundle::decode(&bytes).expect("a good bundle");
    let program = b.variants[0].program.as_ref().expect("a program");
    let names: Vec<String> = program.args.iter().map(|a| a.name()).collect();
    assert_eq!(names, ["$#", "$1"]);
    // An lhist bound is compiled in: `fslat build` needs its value.
    let btf = dir.path().join("vmlinux-fixture");
    let src = dir.path().join("h.fsl");
    std::fs::write(&src, "session vfs_read { lhist(count, 0, $1, 1) }").expect("write");
    let out = fslat(&[
        "build",
        src.to_str().expect("utf-8"),
        "--btf",
        btf.to_str().expect("utf-8"),
        "-o",
        dir.path().join("h.fslb").to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).starts_with(
            "error[F0409]: `$1` sets lhist's bounds, which a bundle compiles in, and `fslat build` was not given it"
        ),
        "{out:?}"
    );
}

#[test]
fn a_bundle_naming_a_function_this_kernel_lacks_is_refused_naming_it_and_the_kernel() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, _) = fixture_bundle(dir.path(), "session vfs_write", &[]);
    let btf = kernel_without_vfs_write(dir.path());
    let out = fslat(&[&path, "--btf", &btf]);
    let err = refused(
        &out,
        "session vfs_write: the function vfs_write is not in the kernel described by",
    );
    assert!(
        err.contains("a bundle attaches to the functions it was built with"),
        "{err}"
    );
}

#[test]
fn a_bundle_list_leaves_out_the_function_this_kernel_lacks_and_says_which() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, _) = fixture_bundle(dir.path(), "session vfs_read, vfs_write", &[]);
    let btf = kernel_without_vfs_write(dir.path());
    // This machine cannot load BPF: what is checked is the warning before the second try.
    let out = fslat(&[&path, "--btf", &btf]);
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "fslat: warning: session vfs_read,vfs_write: 1 of its 2 functions are not in the kernel described by"
        ) && err.contains("traced without them: vfs_write\n"),
        "{err}"
    );
}

/// The fixture kernel's types with vfs_write renamed (a kernel that lacks it), written
/// under `dir`; its path.
fn kernel_without_vfs_write(dir: &std::path::Path) -> String {
    let bytes = fslat::btf::Fixture::new().bytes().to_vec();
    let at = bytes
        .windows(10)
        .position(|w| w == b"vfs_write\0")
        .expect("the fixture names vfs_write");
    let mut other = bytes.clone();
    other[at..at + 9].copy_from_slice(b"vfs_wrote");
    let btf = dir.join("vmlinux-other");
    std::fs::write(&btf, other).expect("write BTF");
    btf.to_str().expect("utf-8").to_string()
}

#[test]
fn a_user_space_session_cannot_go_into_a_bundle() {
    let dir = user_programs();
    let src = dir.path().join("u.fsl");
    let exe = dir.path().join("ufunc");
    std::fs::write(&src, format!("session {}:greet", exe.display())).expect("write");
    let out_path = dir.path().join("u.fslb");
    let out = fslat(&[
        "build",
        src.to_str().expect("utf-8"),
        "-o",
        out_path.to_str().expect("utf-8"),
    ]);
    refused(
        &out,
        &format!(
            "a bundle cannot hold the user-space session {}:greet",
            exe.display()
        ),
    );
    assert!(!out_path.exists());
}

/// docs/performance.md is the benchmark's head, its latest results and benches/doc-notes.md
/// (benches/run writes it so): notes added to the doc alone would be lost at the next run.
#[test]
fn performance_doc_ends_with_the_bench_notes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    let doc = read("docs/performance.md");
    let notes = read("benches/doc-notes.md");
    assert!(
        doc.trim_end().ends_with(notes.trim_end()),
        "docs/performance.md does not end with benches/doc-notes.md: edit both alike"
    );
}
