//! fslat's kernel tests: case files under `tests/kernel/cases/`, run against real kernels.
//!
//! On the host (`cargo test --test kernel`) this binary boots one qemu guest per kernel
//! with `tests/vm/run` and runs itself in it (`--in-guest KERNEL`); in the guest it runs
//! every case file, one at a time, and prints one `ok`/`FAIL`/`skip` line per case. The
//! case format and the environment variables are described in `tests/kernel/README.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// The guests, newest first: Debian's sid (7.x), trixie (6.12), bookworm (6.1) and
/// bullseye (5.10) cloud kernels.
const KERNELS: [&str; 4] = ["sid", "trixie", "bookworm", "bullseye"];
const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const FSLAT: &str = env!("CARGO_BIN_EXE_fslat");
/// Default for the whole guest run of one kernel (boot, every case, power-off).
const DEFAULT_VM_TIMEOUT: u64 = 1800;
/// The clang the cases were asked to use, before the guest put host-clang in its place.
static GUEST_CLANG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// Where the guest's cases keep their files (the guest's /tmp is a fresh tmpfs).
const GUEST_WORK: &str = "/tmp/fslat-kernel";
/// The last line the guest prints; the host reads the counts from it.
const RESULT_PREFIX: &str = "result: ";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--in-guest") {
        let Some(kernel) = args.get(1) else {
            eprintln!("kernel test: --in-guest needs a kernel name");
            return ExitCode::from(2);
        };
        return guest(kernel);
    }
    host(&args)
}

fn cases_dir() -> PathBuf {
    Path::new(MANIFEST_DIR).join("tests/kernel/cases")
}

/// The case files, sorted by name, that pass the filter (a substring of the file name).
fn case_files(filter: Option<&str>) -> Result<Vec<PathBuf>, String> {
    let dir = cases_dir();
    let entries = fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        // A comma separates several substrings: a case runs if its name has any of them.
        .filter(|p| filter.is_none_or(|f| f.split(',').any(|f| file_name(p).contains(f))))
        .collect();
    files.sort();
    Ok(files)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

// ---------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Tally {
    run: u64,
    passed: u64,
    failed: u64,
    skipped: u64,
    /// Wall-clock seconds of the whole guest run (host side only).
    secs: f64,
}

fn host(args: &[String]) -> ExitCode {
    // `cargo test NAME` passes NAME to every test binary: here it filters the case files
    // (and when it names none of them, nothing is booted). Other flags are libtest's and
    // mean nothing here.
    let mut filter = env_nonempty("FSLAT_CASES");
    for a in args {
        match a.as_str() {
            "--list" => {
                match case_files(None) {
                    Ok(files) => {
                        for f in files {
                            println!("{}: test", file_name(&f));
                        }
                    }
                    Err(e) => eprintln!("kernel test: {e}"),
                }
                return ExitCode::SUCCESS;
            }
            s if s.starts_with('-') => {}
            s => filter = Some(s.to_string()),
        }
    }

    let kernels: Vec<String> = match env_nonempty("FSLAT_KERNELS") {
        Some(list) => list
            .split(',')
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect(),
        None => KERNELS.iter().map(|k| k.to_string()).collect(),
    };
    if let Some(bad) = kernels.iter().find(|k| !KERNELS.contains(&k.as_str())) {
        println!(
            "kernel test: FSLAT_KERNELS names '{bad}'; the kernels are {}",
            KERNELS.join(", ")
        );
        println!("0 passed, 1 failed");
        return ExitCode::FAILURE;
    }

    match case_files(filter.as_deref()) {
        Ok(files) if files.is_empty() => {
            println!(
                "kernel test: no case file in {} matches {:?}; nothing to run",
                cases_dir().display(),
                filter.as_deref().unwrap_or("")
            );
            println!("0 passed, 0 failed");
            return if filter.is_some() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        Ok(_) => {}
        Err(e) => {
            println!("kernel test: {e}");
            println!("0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    }
    if let Err(e) = build_user_programs().and_then(|()| build_bundles()) {
        println!("kernel test: {e}");
        println!("0 passed, 1 failed");
        return ExitCode::FAILURE;
    }

    let timeout = match env_nonempty("FSLAT_VM_TIMEOUT") {
        None => DEFAULT_VM_TIMEOUT,
        Some(t) => match t.trim().parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => {
                println!("kernel test: FSLAT_VM_TIMEOUT={t:?} is not a positive integer");
                println!("0 passed, 1 failed");
                return ExitCode::FAILURE;
            }
        },
    };

    // Each guest is one single-threaded qemu: two at a time use both cores of these
    // machines and halve the wall time. One at a time streams each case as it ends; with
    // more, each kernel's report is printed whole when its guest is done.
    let parallel = match std::env::var("FSLAT_VM_PARALLEL") {
        Err(_) => 2,
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                println!("kernel test: FSLAT_VM_PARALLEL={v:?} is not a positive integer");
                println!("0 passed, 1 failed");
                return ExitCode::FAILURE;
            }
        },
    }
    .min(kernels.len().max(1));
    let queue = std::sync::Mutex::new(kernels.iter().enumerate());
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                    let Some((i, k)) = next else { break };
                    let t = if parallel == 1 {
                        run_kernel(k, timeout, filter.as_deref(), &mut |l| {
                            println!("{l}");
                            let _ = std::io::stdout().flush();
                        })
                    } else {
                        println!("== kernel {k}: starting");
                        let mut report = String::new();
                        let t = run_kernel(k, timeout, filter.as_deref(), &mut |l| {
                            report.push_str(l);
                            report.push('\n');
                        });
                        print!("{report}");
                        let _ = std::io::stdout().flush();
                        t
                    };
                    if let Ok(mut d) = done.lock() {
                        d.push((i, k, t));
                    }
                }
            });
        }
    });
    let mut summaries = done.into_inner().unwrap_or_default();
    summaries.sort_by_key(|(i, _, _)| *i);
    let passed: u64 = summaries.iter().map(|(_, _, t)| t.passed).sum();
    let failed: u64 = summaries.iter().map(|(_, _, t)| t.failed).sum();
    let summaries: Vec<_> = summaries.into_iter().map(|(_, k, t)| (k, t)).collect();
    if summaries.len() > 1 {
        println!();
        for (k, t) in &summaries {
            println!(
                "kernel {k}: {} run, {} passed, {} failed, {} skipped ({:.0} s)",
                t.run, t.passed, t.failed, t.skipped, t.secs
            );
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Boots one guest and runs every case in it, giving each line of its report to `out`.
fn run_kernel(
    kernel: &str,
    timeout: u64,
    filter: Option<&str>,
    out: &mut dyn FnMut(&str),
) -> Tally {
    let started = Instant::now();
    let root = Path::new(MANIFEST_DIR);
    let runner = root.join("tests/vm/run");
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            out(&format!(
                "kernel {kernel}: FAILED: cannot find this test binary: {e}"
            ));
            return Tally {
                failed: 1,
                ..Tally::default()
            };
        }
    };
    out(&format!(
        "== kernel {kernel}: booting (tests/vm/run --kernel {kernel}, timeout {timeout} s)"
    ));
    // clang runs on the host for the guest (tests/kernel/host-clang), through a
    // directory both see; FSLAT_GUEST_CLANG=1 keeps every build in the guest.
    let share = (!env_nonempty("FSLAT_GUEST_CLANG").is_some_and(|v| v != "0")).then(|| {
        root.join("target/vm/share")
            .join(format!("{kernel}.{}", std::process::id()))
    });
    if let Some(dir) = &share {
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::remove_dir_all(dir);
        // Sticky and open to all, as /tmp is: cases run fslat as other users too.
        let requests = dir.join("requests");
        if let Err(e) = fs::create_dir_all(&requests)
            .and_then(|()| fs::set_permissions(&requests, fs::Permissions::from_mode(0o1777)))
        {
            out(&format!(
                "kernel {kernel}: FAILED: cannot create {}: {e}",
                dir.display()
            ));
            return Tally {
                failed: 1,
                ..Tally::default()
            };
        }
    }
    let mut cmd = Command::new(&runner);
    cmd.args(["--kernel", kernel, "--timeout", &timeout.to_string(), "-n"]);
    if let Some(dir) = &share {
        cmd.arg("--share").arg(dir).env("FSLAT_HOST_CLANG", "1");
    }
    cmd.arg("--")
        .arg(&exe)
        .args(["--in-guest", kernel])
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(f) = filter {
        // FSLAT_* variables reach the guest.
        cmd.env("FSLAT_CASES", f);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            out(&format!(
                "kernel {kernel}: FAILED: cannot start {}: {e}; run tests/vm/setup-host",
                runner.display()
            ));
            return Tally {
                failed: 1,
                ..Tally::default()
            };
        }
    };

    let stop_server = std::sync::atomic::AtomicBool::new(false);
    let mut seen = Tally::default();
    let mut result: Option<Tally> = None;
    let stdout = child.stdout.take().expect("piped stdout");
    std::thread::scope(|scope| {
        if let Some(dir) = &share {
            let stop = &stop_server;
            scope.spawn(move || clang_server(&dir.join("requests"), stop));
        }
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(release) = line.strip_prefix("kernel: ") {
                out(&format!("== kernel {kernel}: Linux {release}"));
            } else if let Some(clang) = line.strip_prefix("clang: ") {
                out(&format!("== kernel {kernel}: {clang}"));
            } else if let Some(r) = line.strip_prefix(RESULT_PREFIX) {
                result = parse_result(r);
            } else {
                if line.starts_with("ok   ") {
                    seen.passed += 1;
                } else if line.starts_with("FAIL ") {
                    seen.failed += 1;
                } else if line.starts_with("skip ") {
                    seen.skipped += 1;
                }
                out(&line);
            }
        }
        stop_server.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    if let Some(dir) = &share {
        let _ = fs::remove_dir_all(dir);
    }
    let status = child.wait();
    let secs = started.elapsed().as_secs_f64();
    let code = status.as_ref().ok().and_then(ExitStatus::code);

    // Why the guest run itself went wrong, if it did.
    let problem = match code {
        Some(0) | Some(1) if result.is_some() => None,
        Some(2) => Some(format!(
            "tests/vm/run could not start the {kernel} guest (exit 2: the kernel is not \
             fetched, or qemu/virtiofsd/static busybox is missing; its message is above). \
             Run tests/vm/setup-host, then try again"
        )),
        Some(124) => Some(format!(
            "the {kernel} guest timed out after {timeout} s (exit 124; console above). \
             A case hung, or the run needs more time: FSLAT_VM_TIMEOUT=SECS"
        )),
        Some(125) => Some(format!(
            "the {kernel} guest died without an exit code (exit 125; console above). \
             Check the VM setup with tests/vm/selftest; tests/vm/setup-host installs what is missing"
        )),
        other => Some(format!(
            "the guest run ended without its result line (tests/vm/run exit {}); \
             the test binary failed in the guest (output above)",
            other.map_or_else(|| format!("{status:?}"), |c| c.to_string())
        )),
    };

    let mut t = match result {
        Some(r) => r,
        None => Tally {
            run: seen.passed + seen.failed,
            ..seen
        },
    };
    if let Some(p) = problem {
        out(&format!("kernel {kernel}: FAILED: {p}"));
        t.failed += 1;
    }
    t.secs = secs;
    out(&format!(
        "kernel {kernel}: {} cases run, {} passed, {} failed ({secs:.0} s)",
        t.run, t.passed, t.failed
    ));
    t
}

/// The host side of tests/kernel/host-clang: answers the guest's clang requests in
/// `requests` (each a directory `req.*`: `clang`, `cwd`, `args` NUL-separated, and
/// `in.tar` with fslat's build directory under /tmp) until `stop`.
fn clang_server(requests: &Path, stop: &std::sync::atomic::AtomicBool) {
    let mut handled = std::collections::HashSet::new();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let mut found = false;
        for entry in fs::read_dir(requests).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("req.") && handled.insert(name) {
                found = true;
                let req = entry.path();
                let answer = compile_for_guest(&req);
                if let Err(e) = answer {
                    let _ = fs::write(req.join("stdout"), "");
                    let _ = fs::write(req.join("stderr"), format!("host-clang: {e}\n"));
                    let _ = fs::write(req.join("rc"), "125");
                }
                // Last: the guest waits for this file, then reads the others.
                let _ = fs::write(req.join("done"), "");
            }
        }
        if !found {
            sleep(Duration::from_millis(20));
        }
    }
}

/// Runs one guest request's clang on the host, at the guest's paths, and writes its
/// answer (`stdout`, `stderr`, `rc`, `out`: the object) beside the request.
fn compile_for_guest(req: &Path) -> Result<(), String> {
    let read = |f: &str| fs::read_to_string(req.join(f)).map_err(|e| format!("{f}: {e}"));
    let clang = read("clang")?.trim().to_string();
    let is_clang = clang == "clang"
        || clang
            .strip_prefix("clang-")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
    if !is_clang {
        return Err(format!("{clang:?} is not clang or clang-N"));
    }
    let cwd = read("cwd")?.trim_end_matches('\n').to_string();
    let args: Vec<String> = read("args")?
        .split('\0')
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    // The build directories, at the same absolute paths as in the guest: only fresh ones
    // under /tmp, as fslat makes them.
    let tar = req.join("in.tar");
    let mut made = Vec::new();
    if tar.exists() {
        let list = Command::new("tar")
            .arg("-tf")
            .arg(&tar)
            .output()
            .map_err(|e| format!("tar: {e}"))?;
        for member in String::from_utf8_lossy(&list.stdout).lines() {
            let top = member.split('/').take(2).collect::<Vec<_>>().join("/");
            if !top.starts_with("tmp/") || top.len() <= 4 || member.contains("..") {
                return Err(format!("{member:?} is not under /tmp"));
            }
            let top = Path::new("/").join(top);
            if !made.contains(&top) {
                if top.exists() {
                    return Err(format!("{} exists on the host", top.display()));
                }
                made.push(top);
            }
        }
        let status = Command::new("tar")
            .arg("-xf")
            .arg(&tar)
            .arg("-C")
            .arg("/")
            .status()
            .map_err(|e| format!("tar: {e}"))?;
        if !status.success() {
            return Err(format!("tar -xf: {status}"));
        }
    }
    let result = Command::new(&clang)
        .args(&args)
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .output();
    let object = args
        .iter()
        .position(|a| a == "-o")
        .and_then(|i| args.get(i + 1))
        .and_then(|o| fs::read(o).ok());
    for dir in &made {
        let _ = fs::remove_dir_all(dir);
    }
    let output = result.map_err(|e| format!("cannot run {clang} on the host: {e}"))?;
    let write = |f: &str, b: &[u8]| fs::write(req.join(f), b).map_err(|e| format!("{f}: {e}"));
    write("stdout", &output.stdout)?;
    write("stderr", &output.stderr)?;
    if let Some(obj) = object {
        write("out", &obj)?;
    }
    write(
        "rc",
        output.status.code().unwrap_or(125).to_string().as_bytes(),
    )
}

/// `run=N passed=N failed=N skipped=N`
fn parse_result(s: &str) -> Option<Tally> {
    let mut t = Tally::default();
    for kv in s.split_whitespace() {
        let (k, v) = kv.split_once('=')?;
        let v: u64 = v.parse().ok()?;
        match k {
            "run" => t.run = v,
            "passed" => t.passed = v,
            "failed" => t.failed = v,
            "skipped" => t.skipped = v,
            _ => {}
        }
    }
    Some(t)
}

// ---------------------------------------------------------------------------------------
// Case files
// ---------------------------------------------------------------------------------------

/// What a kernel has that cases may depend on, each detected in the guest from the names
/// in its BTF (independently of fslat's own detection, which cases check against this).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Feature {
    /// `BPF_TRACE_FSESSION` in `enum bpf_attach_type` (Linux 7.0).
    Fsession,
    /// One program attached to many functions (Linux 7.2: `BPF_TRACE_FSESSION_MULTI`).
    FsessionMulti,
    /// `BPF_FUNC_loop` (5.17): `path()`.
    BpfLoop,
    /// `BPF_FUNC_task_storage_get` (5.11): the fallback's per-task call stack.
    TaskStorage,
    /// BPF atomics with fetch and compare-and-swap (5.12), recognised by
    /// `BPF_FUNC_check_mtu`, the helper the same release added.
    Atomics,
    /// uprobe session programs (6.13: `BPF_TRACE_UPROBE_SESSION`).
    UprobeSession,
    /// uprobe_multi links (6.6: `BPF_TRACE_UPROBE_MULTI`).
    UprobeMulti,
    /// `BPF_FUNC_find_vma` (5.17): user frames resolved to files at capture.
    FindVma,
    /// kprobe session programs (6.10: `BPF_TRACE_KPROBE_SESSION`).
    KprobeSession,
    /// Sleepable uprobe programs (6.0), recognised by `bpf_prog_array_free_sleepable`,
    /// the function the same commit added.
    SleepableUprobe,
}

const FEATURES: [(Feature, &str, &str); 10] = [
    (Feature::Fsession, "fsession", "BPF_TRACE_FSESSION"),
    (
        Feature::FsessionMulti,
        "fsession-multi",
        "BPF_TRACE_FSESSION_MULTI",
    ),
    (Feature::BpfLoop, "bpf_loop", "BPF_FUNC_loop"),
    (
        Feature::TaskStorage,
        "task_storage",
        "BPF_FUNC_task_storage_get",
    ),
    (Feature::Atomics, "atomics", "BPF_FUNC_check_mtu"),
    (
        Feature::UprobeSession,
        "uprobe_session",
        "BPF_TRACE_UPROBE_SESSION",
    ),
    (
        Feature::UprobeMulti,
        "uprobe_multi",
        "BPF_TRACE_UPROBE_MULTI",
    ),
    (Feature::FindVma, "find_vma", "BPF_FUNC_find_vma"),
    (
        Feature::KprobeSession,
        "kprobe_session",
        "BPF_TRACE_KPROBE_SESSION",
    ),
    (
        Feature::SleepableUprobe,
        "sleepable_uprobe",
        "bpf_prog_array_free_sleepable",
    ),
];

impl Feature {
    fn name(self) -> &'static str {
        FEATURES
            .iter()
            .find(|(f, ..)| *f == self)
            .map_or("?", |(_, n, _)| n)
    }
}

/// What each guest must have: a guest that does not match would silently turn cases into
/// skips.
fn expected_features(kernel: &str) -> Option<&'static [Feature]> {
    use Feature::*;
    Some(match kernel {
        "sid" => &[
            Fsession,
            FsessionMulti,
            BpfLoop,
            TaskStorage,
            Atomics,
            UprobeSession,
            UprobeMulti,
            FindVma,
            KprobeSession,
            SleepableUprobe,
        ],
        "trixie" => &[
            BpfLoop,
            TaskStorage,
            Atomics,
            UprobeMulti,
            FindVma,
            KprobeSession,
            SleepableUprobe,
        ],
        "bookworm" => &[BpfLoop, TaskStorage, Atomics, FindVma, SleepableUprobe],
        "bullseye" => &[],
        _ => return None,
    })
}

/// One `REQUIRES` word: a feature the kernel must have (`bpf_loop`) or lack (`no-bpf_loop`).
#[derive(Clone, Copy, PartialEq, Debug)]
struct Requires {
    feature: Feature,
    present: bool,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Stop {
    Int,
    Term,
    SelfEnd,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Op {
    Eq,
    Ne,
    Ge,
    Le,
    Gt,
    Lt,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Ge => ">=",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Lt => "<",
        }
    }

    fn holds<T: PartialOrd>(self, a: &T, b: &T) -> bool {
        match self {
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::Ge => a >= b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Lt => a < b,
        }
    }
}

#[derive(Clone, Debug)]
enum CondValue {
    Num(i128),
    Str(String),
}

#[derive(Clone, Debug)]
enum Cond {
    /// `matched == events + dropped`
    Ledger,
    Cmp(String, Op, CondValue),
}

#[derive(Clone, Debug)]
enum Expect {
    Line(String),
    Regex(String),
    NotRegex(String),
    StderrRegex(String),
    LinesRegex(String, u64),
    Summary(Option<String>, Vec<Cond>),
    /// A checker command, fed fslat's stdout; it passes by exiting 0.
    Check(Vec<String>),
}

#[derive(Clone, Debug)]
struct Case {
    name: String,
    requires: Vec<Requires>,
    /// Only on these kernels of the test bed (`KERNELS`), for behaviour no BTF name
    /// tells apart; empty: every kernel.
    kernels: Vec<String>,
    /// Not on these kernels, each with the reason it cannot run there (`SKIP`).
    skips: Vec<(String, String)>,
    workload: Option<Vec<String>>,
    prog: Option<String>,
    args: Vec<String>,
    /// Run this file (a script with a `#!` line) instead of fslat, fslat on PATH.
    exec: Option<String>,
    /// What fslat reads on standard input (else /dev/null).
    stdin: Option<String>,
    /// A checker run once fslat traces; it creates the go file itself.
    check: Option<Vec<String>>,
    /// A command run before fslat starts (files fslat's arguments name).
    setup: Option<Vec<String>>,
    /// Environment variables of fslat's process (`ENV NAME=VALUE`).
    env: Vec<(String, String)>,
    /// fslat compiles with the guest's own clang, not on the host (`GUEST_CLANG`).
    guest_clang: bool,
    /// `NO_SECOND_CLANG reason`: the second-clang pass leaves the program out (it cannot
    /// attach without the case's workload).
    no_second_clang: bool,
    /// `BUNDLE`: the case runs a second time from a bundle of its script built on the
    /// host (`build_bundles`), with no clang reachable, and must give the same results.
    bundle: bool,
    /// `BUNDLE only`: the case runs from its bundle and not as a script.
    bundle_only: bool,
    /// `BUNDLE_BUILD words…`: what `fslat build` gets after the script (examples that
    /// type `$1`..).
    bundle_build: Vec<String>,
    /// fslat runs with no clang on PATH and `FSLAT_CLANG` naming none (the bundle run).
    no_clang: bool,
    stop: Stop,
    timeout: Duration,
    exit: i32,
    expects: Vec<(String, Expect)>,
}

fn parse_case(text: &str) -> Result<Case, String> {
    let mut name = None;
    let mut requires: Option<Vec<Requires>> = None;
    let mut kernels: Vec<String> = Vec::new();
    let mut skips: Vec<(String, String)> = Vec::new();
    let mut workload = None;
    let mut prog: Option<String> = None;
    let mut args = Vec::new();
    let mut exec = None;
    let mut stdin: Option<String> = None;
    let mut check: Option<Vec<String>> = None;
    let mut setup: Option<Vec<String>> = None;
    let mut env = Vec::new();
    let mut guest_clang = false;
    let mut no_second_clang = false;
    let mut bundle = false;
    let mut bundle_only = false;
    let mut bundle_build = Vec::new();
    let mut stop = None;
    let mut timeout = None;
    let mut exit = None;
    let mut expects = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |m: String| format!("line {}: {m}", n + 1);
        let (directive, rest) = match line.split_once(char::is_whitespace) {
            Some((d, r)) => (d, r.trim()),
            None => (line, ""),
        };
        let need = |what: &str| -> Result<(), String> {
            if rest.is_empty() {
                Err(err(format!("{directive} needs {what}")))
            } else {
                Ok(())
            }
        };
        let once = |seen: bool| -> Result<(), String> {
            if seen {
                Err(err(format!("{directive} given twice")))
            } else {
                Ok(())
            }
        };
        match directive {
            "NAME" => {
                need("a text")?;
                once(name.is_some())?;
                name = Some(rest.to_string());
            }
            "SKIP" => {
                let (k, why) = rest.split_once(' ').unwrap_or((rest, ""));
                if !KERNELS.contains(&k) || why.trim().is_empty() {
                    return Err(err(format!(
                        "SKIP {rest:?}: a kernel ({}) and the reason",
                        KERNELS.join(", ")
                    )));
                }
                skips.push((k.to_string(), why.trim().to_string()));
            }
            "KERNELS" => {
                need("kernel names")?;
                for k in rest.split_whitespace() {
                    if !KERNELS.contains(&k) {
                        return Err(err(format!("KERNELS {k:?}: one of {}", KERNELS.join(", "))));
                    }
                    kernels.push(k.to_string());
                }
            }
            "REQUIRES" => {
                need("features")?;
                once(requires.is_some())?;
                let mut all = Vec::new();
                for word in rest.split_whitespace() {
                    let (present, name) = match word.strip_prefix("no-") {
                        Some(n) => (false, n),
                        None => (true, word),
                    };
                    let Some((feature, ..)) = FEATURES.iter().find(|(_, n, _)| *n == name) else {
                        let names: Vec<&str> = FEATURES.iter().map(|(_, n, _)| *n).collect();
                        return Err(err(format!(
                            "REQUIRES {word:?}: a feature ({}), or no-FEATURE",
                            names.join(", ")
                        )));
                    };
                    all.push(Requires {
                        feature: *feature,
                        present,
                    });
                }
                requires = Some(all);
            }
            "WORKLOAD" => {
                need("workload.py arguments")?;
                once(workload.is_some())?;
                workload = Some(rest.split_whitespace().map(String::from).collect());
            }
            "PROG" => {
                need("a program")?;
                // Several PROG lines make one program, one line each.
                prog = Some(match prog {
                    Some(p) => format!("{p}\n{rest}"),
                    None => rest.to_string(),
                });
            }
            "EXEC" => {
                need("a file to run")?;
                once(exec.is_some())?;
                exec = Some(rest.to_string());
            }
            "STDIN" => {
                need("a line")?;
                // Several STDIN lines are fslat's input, one line each.
                stdin = Some(match stdin {
                    Some(i) => format!("{i}{rest}\n"),
                    None => format!("{rest}\n"),
                });
            }
            "CHECK" => {
                need("a checker and its arguments")?;
                once(check.is_some())?;
                check = Some(rest.split_whitespace().map(String::from).collect());
            }
            "ENV" => {
                need("NAME=VALUE")?;
                let Some((k, v)) = rest.split_once('=') else {
                    return Err(err(format!("ENV {rest:?} is not NAME=VALUE")));
                };
                env.push((k.to_string(), v.to_string()));
            }
            "SETUP" => {
                need("a command and its arguments")?;
                once(setup.is_some())?;
                setup = Some(rest.split_whitespace().map(String::from).collect());
            }
            "GUEST_CLANG" => {
                once(guest_clang)?;
                guest_clang = true;
            }
            "NO_SECOND_CLANG" => {
                need("the reason")?;
                once(no_second_clang)?;
                no_second_clang = true;
            }
            "BUNDLE" => {
                once(bundle)?;
                bundle = true;
                bundle_only = match rest {
                    "" => false,
                    "only" => true,
                    _ => return Err(err(format!("BUNDLE {rest:?}: nothing, or `only`"))),
                };
            }
            "BUNDLE_BUILD" => {
                need("the words `fslat build` gets after the script")?;
                once(!bundle_build.is_empty())?;
                bundle_build = split_args(rest)?;
            }
            "ARGS" => {
                need("arguments")?;
                args.extend(split_args(rest)?);
            }
            "STOP" => {
                once(stop.is_some())?;
                stop = Some(match rest {
                    "int" => Stop::Int,
                    "term" => Stop::Term,
                    "self" => Stop::SelfEnd,
                    _ => return Err(err(format!("STOP {rest:?}: int, term or self"))),
                });
            }
            "TIMEOUT" => {
                once(timeout.is_some())?;
                match rest.parse::<u64>() {
                    Ok(s) if s > 0 => timeout = Some(Duration::from_secs(s)),
                    _ => return Err(err(format!("TIMEOUT {rest:?}: whole seconds, > 0"))),
                }
            }
            "EXPECT_EXIT" => {
                once(exit.is_some())?;
                exit = Some(
                    rest.parse::<i32>()
                        .map_err(|_| err(format!("EXPECT_EXIT {rest:?}: an integer")))?,
                );
            }
            "EXPECT" => {
                need("a line")?;
                expects.push((line.to_string(), Expect::Line(rest.to_string())));
            }
            "EXPECT_REGEX" | "NOT_EXPECT_REGEX" | "EXPECT_STDERR_REGEX" => {
                need("a regular expression")?;
                let re = rest.to_string();
                let e = match directive {
                    "EXPECT_REGEX" => Expect::Regex(re),
                    "NOT_EXPECT_REGEX" => Expect::NotRegex(re),
                    _ => Expect::StderrRegex(re),
                };
                expects.push((line.to_string(), e));
            }
            "EXPECT_LINES_REGEX" => {
                let Some((re, count)) = rest.rsplit_once(char::is_whitespace) else {
                    return Err(err("EXPECT_LINES_REGEX needs a regex and a count".into()));
                };
                let count = count
                    .parse::<u64>()
                    .map_err(|_| err(format!("EXPECT_LINES_REGEX: {count:?} is not a count")))?;
                let re = re.trim();
                if re.is_empty() {
                    return Err(err("EXPECT_LINES_REGEX needs a regex and a count".into()));
                }
                expects.push((line.to_string(), Expect::LinesRegex(re.to_string(), count)));
            }
            "EXPECT_CHECK" => {
                need("a command")?;
                let words = rest.split_whitespace().map(String::from).collect();
                expects.push((line.to_string(), Expect::Check(words)));
            }
            "EXPECT_SUMMARY" => {
                need("conditions")?;
                let mut words = rest.split_whitespace().peekable();
                let label = match words.peek() {
                    Some(w) if w.ends_with(':') => {
                        let l = w.trim_end_matches(':').to_string();
                        words.next();
                        Some(l)
                    }
                    _ => None,
                };
                let conds = words
                    .map(parse_cond)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?;
                if conds.is_empty() {
                    return Err(err("EXPECT_SUMMARY needs conditions".into()));
                }
                expects.push((line.to_string(), Expect::Summary(label, conds)));
            }
            _ => return Err(err(format!("unknown directive {directive:?}"))),
        }
    }
    let name = name.ok_or("no NAME line")?;
    let uses_pid = prog.as_deref().is_some_and(|p| p.contains("$PID"))
        || args.iter().any(|a| a.contains("$PID"))
        || check.iter().flatten().any(|a| a.contains("$PID"))
        || expects.iter().any(|(l, _)| l.contains("$PID"));
    if uses_pid && workload.is_none() {
        return Err("$PID is used but there is no WORKLOAD".into());
    }
    Ok(Case {
        name,
        requires: requires.unwrap_or_default(),
        kernels,
        skips,
        workload,
        prog,
        args,
        exec,
        stdin,
        check,
        setup,
        env,
        guest_clang,
        no_second_clang,
        bundle,
        bundle_only,
        bundle_build,
        no_clang: false,
        stop: stop.unwrap_or(Stop::Int),
        timeout: timeout.unwrap_or(Duration::from_secs(60)),
        exit: exit.unwrap_or(0),
        expects,
    })
}

/// `field OP value`, or `ledger`.
fn parse_cond(w: &str) -> Result<Cond, String> {
    if w == "ledger" {
        return Ok(Cond::Ledger);
    }
    let bad = || format!("condition {w:?}: want FIELD OP VALUE with OP one of == != >= <= > <");
    let at = w.find(['=', '!', '<', '>']).ok_or_else(bad)?;
    let (field, rest) = w.split_at(at);
    let (op, value) = if let Some(v) = rest.strip_prefix("==") {
        (Op::Eq, v)
    } else if let Some(v) = rest.strip_prefix("!=") {
        (Op::Ne, v)
    } else if let Some(v) = rest.strip_prefix(">=") {
        (Op::Ge, v)
    } else if let Some(v) = rest.strip_prefix("<=") {
        (Op::Le, v)
    } else if let Some(v) = rest.strip_prefix('>') {
        (Op::Gt, v)
    } else if let Some(v) = rest.strip_prefix('<') {
        (Op::Lt, v)
    } else {
        return Err(bad());
    };
    if field.is_empty() || value.is_empty() {
        return Err(bad());
    }
    let value = match value.parse::<i128>() {
        Ok(n) => CondValue::Num(n),
        Err(_) if matches!(op, Op::Eq | Op::Ne) => CondValue::Str(value.to_string()),
        Err(_) => return Err(format!("condition {w:?}: {value:?} is not a number")),
    };
    Ok(Cond::Cmp(field.to_string(), op, value))
}

// ---------------------------------------------------------------------------------------
// Guest side
// ---------------------------------------------------------------------------------------

fn guest(kernel: &str) -> ExitCode {
    // Every case starts python3 (the workload, the checkers) at least once. A pyenv shim
    // on PATH is a bash script that runs pyenv to pick the interpreter: 4.4 s a start
    // under TCG, against 0.4 s for the interpreter itself. The cases want the system's
    // python3 anyway, so the shims go (before any thread exists: set_var is safe here).
    if let Ok(path) = std::env::var("PATH") {
        let kept: Vec<&str> = path
            .split(':')
            .filter(|d| !d.contains("pyenv/shims"))
            .collect();
        // SAFETY: the guest's main function, before any other thread is started.
        unsafe { std::env::set_var("PATH", kept.join(":")) };
    }
    let release = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("(unknown: {e})"));
    println!("kernel: {release}");
    let btf = fs::read("/sys/kernel/btf/vmlinux");
    // A BTF string is NUL-terminated and follows another's NUL.
    let has = |name: &str| {
        let needle = format!("\0{name}\0");
        btf.as_ref()
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
    };
    let features: Vec<Feature> = FEATURES
        .iter()
        .filter(|(_, _, btf_name)| has(btf_name))
        .map(|(f, ..)| *f)
        .collect();
    let yes_no = |f: Feature| if features.contains(&f) { "yes" } else { "no" };
    println!(
        "features: {}",
        FEATURES
            .iter()
            .map(|(f, n, _)| format!("{n}={}", yes_no(*f)))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let mut t = Tally::default();
    let host_clang = env_nonempty("FSLAT_HOST_CLANG").is_some();
    let guest_clang = env_nonempty("FSLAT_CLANG").unwrap_or_else(|| "clang".to_string());
    let _ = GUEST_CLANG.set(guest_clang.clone());
    if host_clang {
        match host_clang_wrapper(&guest_clang) {
            // SAFETY: the guest's main function, before any other thread is started.
            Ok(w) => unsafe { std::env::set_var("FSLAT_CLANG", w) },
            Err(e) => engine_fail(&mut t, "(engine): host clang", e),
        }
    }
    match clang_version() {
        Ok(v) if host_clang => println!("clang: {v}, run on the host (tests/kernel/host-clang)"),
        Ok(v) => println!("clang: {v}"),
        Err(e) => engine_fail(&mut t, "(engine): clang", e),
    }
    if let Err(e) = &btf {
        engine_fail(
            &mut t,
            "(engine): /sys/kernel/btf/vmlinux",
            format!("cannot read it: {e}"),
        );
    }
    // The guests are chosen for what they lack or have: a guest that does not match
    // would silently turn cases into skips.
    if let Some(want) = expected_features(kernel) {
        for (f, name, btf_name) in FEATURES {
            let (wanted, got) = (want.contains(&f), features.contains(&f));
            if wanted != got {
                engine_fail(
                    &mut t,
                    "(engine): feature detection",
                    format!(
                        "the {kernel} guest ({release}) is expected to {} {name}, but \
                         /sys/kernel/btf/vmlinux {} {btf_name}",
                        if wanted { "have" } else { "lack" },
                        if got { "names" } else { "does not name" }
                    ),
                );
            }
        }
    }

    let filter = env_nonempty("FSLAT_CASES");
    // FSLAT_SHOW=1: the details of passing cases too, as for failures.
    let show = env_nonempty("FSLAT_SHOW").is_some_and(|v| v != "0");
    let files = match case_files(filter.as_deref()) {
        Ok(f) => f,
        Err(e) => {
            engine_fail(&mut t, "(engine): case files", e);
            Vec::new()
        }
    };
    // FSLAT_REPEAT=N: the selected cases N times over in this one boot (to find a case
    // that fails now and then, without paying a boot per run).
    let repeat = env_nonempty("FSLAT_REPEAT")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let files: Vec<PathBuf> = (0..repeat).flat_map(|_| files.iter().cloned()).collect();
    let _ = fs::remove_dir_all(GUEST_WORK);
    if let Err(e) = fs::create_dir_all(GUEST_WORK) {
        engine_fail(
            &mut t,
            "(engine): work directory",
            format!("cannot create {GUEST_WORK}: {e}"),
        );
    }
    let _ = std::io::stdout().flush();

    // The cases this kernel ran, for the second clang's pass.
    let mut ran: Vec<(String, Case)> = Vec::new();
    for path in &files {
        let file = file_name(path);
        let case = match fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| parse_case(&text.replace("$UDIR", &user_programs_dir())))
        {
            Ok(c) => c,
            Err(e) => {
                t.run += 1;
                t.failed += 1;
                println!("FAIL {file}: (cannot parse the case file)");
                print_indented("", &format!("- {e}"));
                let _ = std::io::stdout().flush();
                continue;
            }
        };
        if let Some(r) = case
            .requires
            .iter()
            .find(|r| features.contains(&r.feature) != r.present)
        {
            t.skipped += 1;
            let name = r.feature.name();
            if r.present {
                println!(
                    "skip {file}: {} (needs {name}; {release} has none)",
                    case.name
                );
            } else {
                println!("skip {file}: {} (needs a kernel without {name})", case.name);
            }
            let _ = std::io::stdout().flush();
            continue;
        }
        if let Some((_, why)) = case.skips.iter().find(|(k, _)| k == kernel) {
            t.skipped += 1;
            println!("skip {file}: {} (not on {kernel}: {why})", case.name);
            let _ = std::io::stdout().flush();
            continue;
        }
        if !case.kernels.is_empty() && !case.kernels.iter().any(|k| k == kernel) {
            t.skipped += 1;
            println!(
                "skip {file}: {} (only on {})",
                case.name,
                case.kernels.join(", ")
            );
            let _ = std::io::stdout().flush();
            continue;
        }
        let stem = file.trim_end_matches(".case").to_string();
        let bundled = case.bundle.then(|| as_bundle(&case, &stem));
        if !case.bundle_only {
            ran.push((file.clone(), case));
            let (file, case) = ran.last().expect("just pushed");
            run_and_report(case, file, &Path::new(GUEST_WORK).join(&stem), show, &mut t);
        }
        if let Some(case) = bundled {
            let dir = Path::new(GUEST_WORK).join(format!("{stem}-bundle"));
            run_and_report(
                &case,
                &format!("{file} (bundle, no clang)"),
                &dir,
                show,
                &mut t,
            );
        }
    }
    if let Some(second) = env_nonempty("FSLAT_SECOND_CLANG") {
        let clang = if host_clang {
            host_clang_wrapper(&second)
        } else {
            Ok(second)
        };
        match clang {
            Ok(c) => second_clang_pass(&c, &ran, &mut t),
            Err(e) => engine_fail(&mut t, "(engine): second clang", e),
        }
    }
    println!(
        "{RESULT_PREFIX}run={} passed={} failed={} skipped={}",
        t.run, t.passed, t.failed, t.skipped
    );
    let _ = std::io::stdout().flush();
    if t.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one case in `dir` and prints its line (and details when it failed, or with `show`).
fn run_and_report(case: &Case, label: &str, dir: &Path, show: bool, t: &mut Tally) {
    t.run += 1;
    let case_start = Instant::now();
    let run = run_case(case, dir);
    let took = case_start.elapsed().as_secs_f64();
    if run.failures.is_empty() {
        t.passed += 1;
        println!("ok   {label} [{took:.1} s]: {}", case.name);
        if show {
            println!("{}", run.report());
        }
    } else {
        t.failed += 1;
        println!("FAIL {label} [{took:.1} s]: {}", case.name);
        println!("{}", run.report());
    }
    let _ = std::io::stdout().flush();
}

/// The options of a case's fslat command that make a run, not a program: they are left
/// out of the second clang's pass, with their values.
const RUN_OPTIONS: [&str; 11] = [
    "-c",
    "-d",
    "-i",
    "-o",
    "--flamegraph",
    "--listen",
    "--otlp",
    "--otlp-ca",
    "--otlp-header",
    "-p",
    "--web-config",
];

/// The second clang's pass (`FSLAT_SECOND_CLANG`): every distinct program of the cases
/// this kernel runs (a `PROG` and its program options, no `EXEC` or `STDIN`, exit 0
/// expected, no `session :FUNC`) is compiled with that clang, loaded, attached for 200 ms and detached, with
/// no workload. What a second clang can change is the object code the verifier judges;
/// the cases' answers come from the first pass.
fn second_clang_pass(clang: &str, ran: &[(String, Case)], t: &mut Tally) {
    match Command::new(clang)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            println!(
                "second clang: {clang} ({})",
                text.lines().next().unwrap_or("").trim()
            );
        }
        _ => {
            engine_fail(
                t,
                "(engine): second clang",
                format!("cannot run {clang} --version (FSLAT_SECOND_CLANG)"),
            );
            return;
        }
    }
    let me = std::process::id().to_string();
    let shown = Path::new(clang)
        .file_name()
        .map_or_else(|| clang.to_string(), |n| n.to_string_lossy().into_owned());
    let mut seen = std::collections::BTreeSet::new();
    for (file, case) in ran {
        let Some(prog) = &case.prog else { continue };
        // `session :FUNC` names a function of -p's program, which this pass does not run
        // (the same kind of program loads in the other user-space cases).
        let of_traced_program = prog
            .split_whitespace()
            .zip(prog.split_whitespace().skip(1))
            .any(|(a, b)| a == "session" && b.starts_with(':'));
        if case.exec.is_some()
            || case.stdin.is_some()
            || case.exit != 0
            || of_traced_program
            || case.no_second_clang
        {
            continue;
        }
        let mut argv = vec!["-e".to_string(), prog.replace("$PID", &me)];
        let mut args = case.args.iter();
        while let Some(a) = args.next() {
            if RUN_OPTIONS.contains(&a.as_str()) {
                args.next();
            } else {
                argv.push(a.replace("$PID", &me));
            }
        }
        if argv
            .iter()
            .any(|a| a == "-l" || a == "doctor" || a == "repl")
            || !seen.insert(argv.clone())
        {
            continue;
        }
        argv.extend([
            "--clang".to_string(),
            clang.to_string(),
            "-d".into(),
            "200ms".into(),
        ]);
        let started = Instant::now();
        let out = Command::new(FSLAT)
            .args(&argv)
            .current_dir(MANIFEST_DIR)
            .stdin(Stdio::null())
            .output();
        let took = started.elapsed().as_secs_f64();
        t.run += 1;
        let failure = match &out {
            Err(e) => Some(format!("cannot start {FSLAT}: {e}")),
            Ok(o) if !o.status.success() => Some(describe_status(&o.status)),
            Ok(o)
                if !String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .any(|l| l.starts_with("Tracing")) =>
            {
                Some("no Tracing line".to_string())
            }
            Ok(_) => None,
        };
        match failure {
            None => {
                t.passed += 1;
                println!("ok   {shown}: {file} [{took:.1} s]: loaded and attached");
            }
            Some(why) => {
                t.failed += 1;
                println!("FAIL {shown}: {file} [{took:.1} s]: {why}");
                println!("    command: {}", describe("fslat", &argv));
                if let Ok(o) = &out {
                    print_indented("  stdout", &String::from_utf8_lossy(&o.stdout));
                    print_indented("  stderr", &String::from_utf8_lossy(&o.stderr));
                }
            }
        }
        let _ = std::io::stdout().flush();
    }
}

/// `/tmp/host-clang/NAME`, a program that runs clang NAME on the host
/// (tests/kernel/host-clang), for FSLAT_CLANG and --clang.
/// ARGS's words: split at white space, except inside single quotes (`-c 'prog 1 2'`).
fn split_args(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('\'') {
            let end = quoted
                .find('\'')
                .ok_or_else(|| format!("ARGS {text:?}: a quote is not closed"))?;
            words.push(quoted[..end].to_string());
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            words.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        }
    }
    Ok(words)
}

/// Where tests/kernel/user/build puts the user-space programs the cases trace (`$UDIR`
/// in a case): the guests see the host's tree at the same path.
fn user_programs_dir() -> String {
    format!("{MANIFEST_DIR}/target/fslat-user")
}

/// Where `build_bundles` puts the `BUNDLE` cases' bundles (`bundle_file`).
fn bundles_dir() -> String {
    format!("{MANIFEST_DIR}/target/fslat-bundles")
}

/// The script a `BUNDLE` case runs: its `EXEC` file, a `.fsl` file in its `ARGS`, or its
/// `PROG` (written to `STEM.fsl` beside the bundle), and the arguments left for the run.
fn bundle_source(case: &Case, stem: &str) -> Result<(PathBuf, Vec<String>), String> {
    if let Some(exec) = &case.exec {
        return Ok((Path::new(MANIFEST_DIR).join(exec), case.args.clone()));
    }
    if let Some(at) = case.args.iter().position(|a| a.ends_with(".fsl")) {
        let mut rest = case.args.clone();
        let script = rest.remove(at);
        return Ok((Path::new(MANIFEST_DIR).join(script), rest));
    }
    match &case.prog {
        Some(p) if p.contains("$PID") => {
            Err("a BUNDLE case's program cannot use $PID (a bundle is built before the workload runs; use ARGS -p $PID)".into())
        }
        Some(_) => Ok((
            Path::new(&bundles_dir()).join(format!("{stem}.fsl")),
            case.args.clone(),
        )),
        None => Err("a BUNDLE case needs EXEC, PROG or a script in ARGS".into()),
    }
}

/// The bundle a `BUNDLE` case runs: one per script file and `BUNDLE_BUILD` words, so
/// cases that run one script's bundle with different arguments run the same file; a
/// `PROG`'s is its case's (`STEM.fslb`).
fn bundle_file(case: &Case, stem: &str) -> String {
    let script = case
        .exec
        .clone()
        .or_else(|| case.args.iter().find(|a| a.ends_with(".fsl")).cloned());
    let mut name = match script {
        Some(s) => Path::new(&s)
            .file_stem()
            .map_or(stem.to_string(), |n| n.to_string_lossy().into_owned()),
        None => stem.to_string(),
    };
    for w in &case.bundle_build {
        name.push('-');
        name.extend(
            w.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
        );
    }
    format!("{}/{name}.fslb", bundles_dir())
}

/// The bundle run of a `BUNDLE` case: `fslat BUNDLE ARGS`, no clang reachable.
fn as_bundle(case: &Case, stem: &str) -> Case {
    let mut args = vec![bundle_file(case, stem)];
    args.extend(
        bundle_source(case, stem)
            .map(|(_, a)| a)
            .unwrap_or_default(),
    );
    Case {
        exec: None,
        prog: None,
        args,
        guest_clang: false,
        no_second_clang: false,
        bundle: false,
        bundle_only: false,
        bundle_build: Vec::new(),
        no_clang: true,
        ..case.clone()
    }
}

/// Builds a bundle of every `BUNDLE` case's script on the host, with the host's fslat,
/// kernel types and clang, before any guest boots: the guests run them with no clang.
fn build_bundles() -> Result<(), String> {
    let dir = bundles_dir();
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {dir}: {e}"))?;
    let mut built = std::collections::HashSet::new();
    for path in case_files(None)? {
        let file = file_name(&path);
        let stem = file.trim_end_matches(".case");
        let text = fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        let case = parse_case(&text.replace("$UDIR", &user_programs_dir()))
            .map_err(|e| format!("{file}: {e}"))?;
        let bundle = bundle_file(&case, stem);
        if !case.bundle || !built.insert(bundle.clone()) {
            continue;
        }
        let (script, _) = bundle_source(&case, stem).map_err(|e| format!("{file}: {e}"))?;
        if let (None, None, Some(p)) = (
            &case.exec,
            case.args.iter().find(|a| a.ends_with(".fsl")),
            &case.prog,
        ) {
            fs::write(&script, format!("{p}\n")).map_err(|e| format!("{file}: {e}"))?;
        }
        let out = Command::new(FSLAT)
            .arg("build")
            .arg(&script)
            .args(&case.bundle_build)
            .arg("-o")
            .arg(&bundle)
            .output()
            .map_err(|e| format!("cannot run {FSLAT}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{file}: fslat build {} failed ({}): {}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// A directory of links to every program on PATH but clang's (`clang`, `clang-19`...),
/// for the runs that must find no clang.
fn path_without_clang() -> Result<String, String> {
    let dir = Path::new(GUEST_WORK).join("path-without-clang");
    if dir.is_dir() {
        return Ok(dir.to_string_lossy().into_owned());
    }
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = std::env::var("PATH").unwrap_or_default();
    for d in path.split(':').filter(|d| !d.is_empty()) {
        let Ok(entries) = fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().starts_with("clang") {
                continue;
            }
            // The first directory on PATH with a name wins, as for the shell.
            let _ = std::os::unix::fs::symlink(e.path(), dir.join(&name));
        }
    }
    Ok(dir.to_string_lossy().into_owned())
}

/// Builds tests/kernel/user's programs on the host, before any guest boots.
fn build_user_programs() -> Result<(), String> {
    let script = format!("{MANIFEST_DIR}/tests/kernel/user/build");
    let out = Command::new(&script)
        .arg(user_programs_dir())
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{script} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn host_clang_wrapper(name: &str) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let base = Path::new(name)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = Path::new("/tmp/host-clang");
    let path = dir.join(&base);
    // A copy of host-clang beside the wrapper, not the clone's: an unprivileged fslat
    // (not_root.case) must be able to run it wherever the clone lives (root's home is
    // mode 700).
    let shared = dir.join(".host-clang");
    let script = format!(
        "#!/bin/sh\nexec {} {} \"$@\"\n",
        shared.display(),
        shell_quote(&base)
    );
    fs::create_dir_all(dir)
        .and_then(|()| fs::copy(format!("{MANIFEST_DIR}/tests/kernel/host-clang"), &shared))
        .and_then(|_| fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)))
        .and_then(|()| fs::write(&path, script))
        .and_then(|()| fs::set_permissions(&path, fs::Permissions::from_mode(0o755)))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path.to_string_lossy().into_owned())
}

/// The clang fslat compiles with in the cases (`FSLAT_CLANG`, as fslat reads it, else
/// `clang`): its name and the first line of its `--version`.
fn clang_version() -> Result<String, String> {
    let clang = env_nonempty("FSLAT_CLANG").unwrap_or_else(|| "clang".to_string());
    let out = Command::new(&clang)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {clang} (FSLAT_CLANG names the clang to use): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next() {
        Some(first) if out.status.success() => Ok(format!("{clang} ({})", first.trim())),
        _ => Err(format!(
            "{clang} --version failed ({})",
            describe_status(&out.status)
        )),
    }
}

/// A failure of the engine or the guest itself, not of one case: it counts as a failed case.
fn engine_fail(t: &mut Tally, what: &str, detail: String) {
    println!("FAIL {what}");
    print_indented("", &format!("- {detail}"));
    t.run += 1;
    t.failed += 1;
}

fn print_indented(prefix: &str, text: &str) {
    for l in text.lines() {
        println!("{prefix}    {l}");
    }
}

/// What happened in one case, for the report.
#[derive(Default)]
struct Run {
    failures: Vec<String>,
    command: String,
    workload: Option<String>,
    status: String,
    secs: f64,
    stdout: String,
    stderr: String,
    workload_out: String,
    check_out: Option<String>,
}

impl Run {
    fn report(&self) -> String {
        let mut r = String::new();
        for f in &self.failures {
            let _ = writeln!(r, "    - {f}");
        }
        if let Some(w) = &self.workload {
            let _ = writeln!(r, "    workload: {w}");
        }
        let mut outputs = Vec::new();
        if self.command.is_empty() {
            let _ = writeln!(r, "    fslat: not started");
        } else {
            let _ = writeln!(r, "    command: {}", self.command);
            let _ = writeln!(r, "    fslat: {} after {:.1} s", self.status, self.secs);
            outputs.push(("stdout", &self.stdout));
            outputs.push(("stderr", &self.stderr));
        }
        if self.workload.is_some() {
            outputs.push(("workload stderr", &self.workload_out));
        }
        if let Some(out) = &self.check_out {
            outputs.push(("check output", out));
        }
        for (what, text) in outputs {
            if text.is_empty() {
                let _ = writeln!(r, "    {what}: (empty)");
                continue;
            }
            let _ = writeln!(r, "    {what}:");
            let lines: Vec<&str> = text.lines().collect();
            const HEAD: usize = 40;
            const TAIL: usize = 20;
            if lines.len() <= HEAD + TAIL + 1 {
                for l in &lines {
                    let _ = writeln!(r, "      | {l}");
                }
            } else {
                for l in &lines[..HEAD] {
                    let _ = writeln!(r, "      | {l}");
                }
                let _ = writeln!(r, "      | ... {} lines ...", lines.len() - HEAD - TAIL);
                for l in &lines[lines.len() - TAIL..] {
                    let _ = writeln!(r, "      | {l}");
                }
            }
        }
        r.trim_end().to_string()
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn describe(program: &str, args: &[String]) -> String {
    let mut s = shell_quote(program);
    for a in args {
        s.push(' ');
        s.push_str(&shell_quote(a));
    }
    s
}

fn describe_status(s: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{s:?}"),
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on a child this process spawned and has not reaped yet.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

fn kill_and_reap(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        signal(child, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Waits for `child` until `deadline`; None when it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) => {}
            Err(_) => return None,
        }
        if Instant::now() >= deadline {
            return None;
        }
        sleep(Duration::from_millis(20));
    }
}

/// Runs a `CHECK` command (from the repository's root) to its end or `deadline`, with
/// `FSLAT_GO` (the go file: the checker starts the workload when it is ready),
/// `FSLAT_PID_OF_FSLAT` (none for a `SETUP`, which runs before fslat) and
/// `FSLAT_CASE_DIR` set. Returns its output and, if it failed, why.
fn run_check(
    argv: &[String],
    dir: &Path,
    go: &Path,
    fslat_pid: Option<u32>,
    deadline: Instant,
) -> (String, Option<String>) {
    let out_path = dir.join(if fslat_pid.is_some() {
        "check.out"
    } else {
        "setup.out"
    });
    let spawned = (|| -> std::io::Result<Child> {
        let out = fs::File::create(&out_path)?;
        let mut command = Command::new(&argv[0]);
        if let Some(pid) = fslat_pid {
            command.env("FSLAT_PID_OF_FSLAT", pid.to_string());
        }
        command
            .args(&argv[1..])
            .current_dir(MANIFEST_DIR)
            .env("FSLAT_GO", go)
            .env("FSLAT_CASE_DIR", dir)
            .stdin(Stdio::null())
            .stderr(out.try_clone()?)
            .stdout(out)
            .spawn()
    })();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return (
                String::new(),
                Some(format!("cannot start the check {}: {e}", argv[0])),
            );
        }
    };
    let status = wait_until(&mut child, deadline);
    if status.is_none() {
        kill_and_reap(&mut child);
    }
    let out = read_lossy(&out_path);
    let failure = match status {
        Some(s) if s.success() => None,
        Some(s) => Some(format!(
            "{} {} failed ({})",
            if fslat_pid.is_some() {
                "the check"
            } else {
                "the setup"
            },
            describe(&argv[0], &argv[1..]),
            describe_status(&s)
        )),
        None => Some(format!("{} timed out", describe(&argv[0], &argv[1..]))),
    };
    (out, failure)
}

fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn run_case(case: &Case, dir: &Path) -> Run {
    let mut run = Run::default();
    let _ = fs::remove_dir_all(dir);
    if let Err(e) = fs::create_dir_all(dir) {
        run.failures
            .push(format!("cannot create {}: {e}", dir.display()));
        return run;
    }
    let go = dir.join("go");
    let out_path = dir.join("fslat.out");
    let err_path = dir.join("fslat.err");
    let wout_path = dir.join("workload.out");
    let werr_path = dir.join("workload.err");
    let start = Instant::now();
    let deadline = start + case.timeout;

    // The workload first: it prints its pid, then waits for the go file.
    let mut workload: Option<Child> = None;
    let mut pid = None;
    if let Some(wargs) = &case.workload {
        let mut argv: Vec<String> = vec![
            "tests/kernel/workload.py".into(),
            "--go".into(),
            go.to_string_lossy().into_owned(),
        ];
        argv.extend(wargs.iter().cloned());
        let desc = describe("python3", &argv);
        run.workload = Some(desc.clone());
        let spawned = (|| -> std::io::Result<Child> {
            Command::new("python3")
                .args(&argv)
                .current_dir(MANIFEST_DIR)
                .stdin(Stdio::null())
                .stdout(fs::File::create(&wout_path)?)
                .stderr(fs::File::create(&werr_path)?)
                .spawn()
        })();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                run.failures.push(format!("cannot start the workload: {e}"));
                return run;
            }
        };
        // Its first line is its pid.
        loop {
            let text = read_lossy(&wout_path);
            if let Some((first, _)) = text.split_once('\n') {
                match first.trim().parse::<u32>() {
                    Ok(p) => pid = Some(p),
                    Err(_) => run
                        .failures
                        .push(format!("the workload's first line {first:?} is not a pid")),
                }
                break;
            }
            if let Ok(Some(s)) = child.try_wait() {
                run.failures.push(format!(
                    "the workload ended ({}) before printing its pid",
                    describe_status(&s)
                ));
                break;
            }
            if Instant::now() >= deadline {
                run.failures
                    .push("timed out waiting for the workload's pid".to_string());
                break;
            }
            sleep(Duration::from_millis(20));
        }
        if let Some(p) = pid {
            run.workload = Some(format!("{desc}  (pid {p})"));
        }
        workload = Some(child);
        if !run.failures.is_empty() {
            if let Some(w) = workload.as_mut() {
                kill_and_reap(w);
            }
            run.workload_out = read_lossy(&werr_path);
            return run;
        }
    }

    let subst = |s: &str| {
        let s = s.replace("$DIR", &dir.to_string_lossy());
        match pid {
            Some(p) => s.replace("$PID", &p.to_string()),
            None => s,
        }
    };
    if let Some(argv) = &case.setup {
        let argv: Vec<String> = argv.iter().map(|a| subst(a)).collect();
        let (out, failure) = run_check(&argv, dir, &go, None, deadline);
        run.check_out = Some(out);
        if let Some(why) = failure {
            run.failures.push(why);
            if let Some(w) = workload.as_mut() {
                kill_and_reap(w);
            }
            return run;
        }
    }
    let mut argv = Vec::new();
    if let Some(p) = &case.prog {
        argv.push("-e".to_string());
        argv.push(subst(p));
    }
    argv.extend(case.args.iter().map(|a| subst(a)));
    let program = case.exec.as_deref().unwrap_or(FSLAT);
    run.command = describe(case.exec.as_deref().unwrap_or("fslat"), &argv);
    let fslat_dir = Path::new(FSLAT).parent().unwrap_or(Path::new("/"));
    let rest_of_path = if case.no_clang {
        match path_without_clang() {
            Ok(p) => p,
            Err(e) => {
                run.failures.push(e);
                return run;
            }
        }
    } else {
        std::env::var("PATH").unwrap_or_default()
    };
    let path = format!("{}:{rest_of_path}", fslat_dir.display());

    let spawned = (|| -> std::io::Result<Child> {
        let input = match &case.stdin {
            Some(text) => {
                let p = dir.join("stdin");
                fs::write(&p, subst(text))?;
                Stdio::from(fs::File::open(p)?)
            }
            None => Stdio::null(),
        };
        let mut fslat = Command::new(program);
        if case.guest_clang
            && let Some(clang) = GUEST_CLANG.get()
        {
            fslat.env("FSLAT_CLANG", clang);
        }
        for (k, v) in &case.env {
            fslat.env(k, subst(v));
        }
        if case.no_clang {
            fslat.env("FSLAT_CLANG", "/nonexistent/clang");
        }
        fslat
            .args(&argv)
            .env("PATH", &path)
            .current_dir(MANIFEST_DIR)
            .stdin(input)
            .stdout(fs::File::create(&out_path)?)
            .stderr(fs::File::create(&err_path)?)
            .spawn()
    })();
    let mut fslat = match spawned {
        Ok(c) => c,
        Err(e) => {
            run.failures.push(format!("cannot start {FSLAT}: {e}"));
            if let Some(w) = workload.as_mut() {
                kill_and_reap(w);
            }
            return run;
        }
    };

    // Wait for the Tracing line (or for fslat to end without it).
    let mut tracing = false;
    let mut status = None;
    let mut timed_out = None;
    loop {
        if read_lossy(&err_path)
            .lines()
            .any(|l| l.starts_with("Tracing"))
        {
            tracing = true;
            break;
        }
        if let Ok(Some(s)) = fslat.try_wait() {
            // It may have written the line just before it ended.
            tracing = read_lossy(&err_path)
                .lines()
                .any(|l| l.starts_with("Tracing"));
            status = Some(s);
            break;
        }
        if Instant::now() >= deadline {
            timed_out = Some("waiting for the Tracing line");
            break;
        }
        sleep(Duration::from_millis(20));
    }
    let traced_at = Instant::now();

    let mut workload_status = None;
    if tracing && timed_out.is_none() {
        if let Some(argv) = &case.check {
            let argv: Vec<String> = argv.iter().map(|a| subst(a)).collect();
            let (out, failure) = run_check(&argv, dir, &go, Some(fslat.id()), deadline);
            run.check_out = Some(run.check_out.take().unwrap_or_default() + &out);
            run.failures.extend(failure);
        }
        if let Some(w) = workload.as_mut() {
            if !go.exists()
                && let Err(e) = fs::write(&go, b"")
            {
                run.failures
                    .push(format!("cannot create the go file {}: {e}", go.display()));
            }
            workload_status = wait_until(w, deadline);
            if workload_status.is_none() {
                timed_out = Some("waiting for the workload to end");
            }
        }
        if timed_out.is_none() && status.is_none() {
            let sig = match case.stop {
                Stop::Int => Some(libc::SIGINT),
                Stop::Term => Some(libc::SIGTERM),
                Stop::SelfEnd => None,
            };
            if let Some(sig) = sig {
                if workload.is_none() {
                    let when = traced_at + Duration::from_secs(1);
                    while Instant::now() < when && matches!(fslat.try_wait(), Ok(None)) {
                        sleep(Duration::from_millis(20));
                    }
                }
                if let Ok(None) = fslat.try_wait() {
                    signal(&fslat, sig);
                }
            }
            status = wait_until(&mut fslat, deadline);
            if status.is_none() {
                timed_out = Some(match case.stop {
                    Stop::SelfEnd => "waiting for fslat to end by itself",
                    _ => "waiting for fslat to end after the signal",
                });
            }
        }
    }
    if status.is_none() {
        status = fslat.try_wait().ok().flatten();
    }
    if status.is_none() {
        kill_and_reap(&mut fslat);
    }
    if let Some(w) = workload.as_mut()
        && workload_status.is_none()
    {
        // fslat ended before tracing (an error case) or the case timed out: the workload
        // never got its go file, or was still running.
        kill_and_reap(w);
    }
    run.secs = start.elapsed().as_secs_f64();
    run.stdout = read_lossy(&out_path);
    run.stderr = read_lossy(&err_path);
    run.workload_out = read_lossy(&werr_path);
    run.status = match &status {
        Some(s) => describe_status(s),
        None => "killed (timeout)".to_string(),
    };

    if let Some(what) = timed_out {
        run.failures.push(format!(
            "timed out after {} s {what}",
            case.timeout.as_secs()
        ));
        return run;
    }
    if let Some(ws) = workload_status
        && !ws.success()
    {
        run.failures
            .push(format!("the workload failed ({})", describe_status(&ws)));
    }
    match status.and_then(|s| s.code()) {
        Some(c) if c == case.exit => {}
        _ => run.failures.push(format!(
            "EXPECT_EXIT {}: fslat ended with {}",
            case.exit, run.status
        )),
    }
    for (line, e) in &case.expects {
        if let Err(why) = check(e, &subst, &run, &out_path, &err_path) {
            run.failures.push(format!("{}: {why}", subst(line)));
        }
    }
    run
}

/// Lines of `file` that `grep -E` matches.
fn grep_count(re: &str, file: &Path) -> Result<u64, String> {
    let out = Command::new("grep")
        .args(["-E", "-c", "-e", re, "--"])
        .arg(file)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run grep: {e}"))?;
    match out.status.code() {
        Some(0) | Some(1) => String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| "grep printed no count".to_string()),
        _ => Err(format!(
            "grep -E failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

fn check(
    e: &Expect,
    subst: &dyn Fn(&str) -> String,
    run: &Run,
    out: &Path,
    err: &Path,
) -> Result<(), String> {
    match e {
        Expect::Line(l) => {
            let l = subst(l);
            if run.stdout.lines().any(|x| x == l) {
                Ok(())
            } else {
                Err("no stdout line is exactly this".into())
            }
        }
        Expect::Regex(re) => match grep_count(&subst(re), out)? {
            0 => Err("no stdout line matches".into()),
            _ => Ok(()),
        },
        Expect::NotRegex(re) => match grep_count(&subst(re), out)? {
            0 => Ok(()),
            n => Err(format!("{n} stdout lines match")),
        },
        Expect::StderrRegex(re) => match grep_count(&subst(re), err)? {
            0 => Err("no stderr line matches".into()),
            _ => Ok(()),
        },
        Expect::LinesRegex(re, want) => match grep_count(&subst(re), out)? {
            n if n == *want => Ok(()),
            n => Err(format!("{n} stdout lines match, not {want}")),
        },
        Expect::Check(words) => {
            let words: Vec<String> = words.iter().map(|w| subst(w)).collect();
            let (cmd, args) = words.split_first().ok_or("EXPECT_CHECK needs a command")?;
            let done = Command::new(cmd)
                .args(args)
                .current_dir(MANIFEST_DIR)
                .stdin(fs::File::open(out).map_err(|e| format!("cannot read stdout: {e}"))?)
                .output()
                .map_err(|e| format!("cannot run {cmd}: {e}"))?;
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&done.stdout),
                String::from_utf8_lossy(&done.stderr)
            );
            if done.status.success() {
                Ok(())
            } else {
                Err(format!("the check failed: {}", said.trim()))
            }
        }
        Expect::Summary(label, conds) => {
            let Some(fields) = find_summary(&run.stdout, label.as_deref()) else {
                return Err(match label {
                    Some(l) => format!("no summary for session {l:?} on stdout"),
                    None => "no summary on stdout".into(),
                });
            };
            let mut bad = Vec::new();
            for c in conds {
                if let Err(why) = check_cond(c, &fields) {
                    bad.push(why);
                }
            }
            if bad.is_empty() {
                Ok(())
            } else {
                Err(bad.join("; "))
            }
        }
    }
}

/// The fields of the first summary (for `label`, if given): a text `SUMMARY LABEL k=v...`
/// line or a JSON `{"type":"summary","session":LABEL,...}` line.
fn find_summary(stdout: &str, label: Option<&str>) -> Option<BTreeMap<String, String>> {
    for line in stdout.lines() {
        let mut fields = BTreeMap::new();
        let session;
        if let Some(rest) = line.strip_prefix("SUMMARY ") {
            let mut words = rest.split_whitespace();
            session = words.next().unwrap_or("").to_string();
            for w in words {
                if let Some((k, v)) = w.split_once('=') {
                    fields.insert(k.to_string(), v.to_string());
                }
            }
        } else if line.starts_with('{') {
            let Ok(serde_json::Value::Object(obj)) = serde_json::from_str(line) else {
                continue;
            };
            if obj.get("type").and_then(|t| t.as_str()) != Some("summary") {
                continue;
            }
            session = obj
                .get("session")
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_string();
            for (k, v) in obj {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                fields.insert(k, v);
            }
        } else {
            continue;
        }
        if label.is_none_or(|l| l == session) {
            return Some(fields);
        }
    }
    None
}

fn number(fields: &BTreeMap<String, String>, name: &str) -> Result<i128, String> {
    let v = fields
        .get(name)
        .ok_or_else(|| format!("the summary has no field {name}"))?;
    v.parse().map_err(|_| format!("{name}={v} is not a number"))
}

fn check_cond(c: &Cond, fields: &BTreeMap<String, String>) -> Result<(), String> {
    match c {
        Cond::Ledger => {
            let m = number(fields, "matched")?;
            let e = number(fields, "events")?;
            let d = number(fields, "dropped")?;
            if m == e + d {
                Ok(())
            } else {
                Err(format!(
                    "ledger: matched={m} but events + dropped = {e} + {d} = {}",
                    e + d
                ))
            }
        }
        Cond::Cmp(field, op, CondValue::Num(want)) => {
            let got = number(fields, field)?;
            if op.holds(&got, want) {
                Ok(())
            } else {
                Err(format!("{field}={got}, want {field}{}{want}", op.as_str()))
            }
        }
        Cond::Cmp(field, op, CondValue::Str(want)) => {
            let got = fields
                .get(field)
                .ok_or_else(|| format!("the summary has no field {field}"))?;
            if op.holds(got, want) {
                Ok(())
            } else {
                Err(format!("{field}={got}, want {field}{}{want}", op.as_str()))
            }
        }
    }
}
