//! The fuzz target: scripts generated from the grammar over the fixture kernel and, when
//! it is readable, the host's BTF, and byte-level mutants of them and of the corpus
//! (`tests/fuzz/gen.rs`), through parse, check and code generation (`fslat::compile`)
//! and the rendering of any diagnostics.
//!
//! Properties: nothing panics or aborts; a script that is accepted gives C that clang 14
//! and clang 19 build without a warning. clang costs about 50 ms of CPU per program, so it
//! builds every Nth accepted program (`FSLAT_FUZZ_CLANG_EVERY`, default 8), many to one
//! clang process.
//!
//!     cargo test --release --test fuzz                                  # 3000 inputs
//!     FSLAT_FUZZ_INPUTS=1000000 FSLAT_FUZZ_CLANG_EVERY=500 cargo test --release --test fuzz
//!
//! `FSLAT_FUZZ_SHOW=1` prints each rejected input with its diagnostics.
//! `FSLAT_FUZZ_SEED` (default 18) picks another series; input N of seed S is the same
//! on every run, so `FSLAT_FUZZ_SEED=S FSLAT_FUZZ_FROM=N FSLAT_FUZZ_INPUTS=1` replays
//! one. The inputs run in a child process: one that aborts (a stack overflow, say) is
//! named and written out, and the run goes on after it. Failing inputs are written to
//! `target/fuzz/`; minimised, they belong in `tests/cases/`.

#[path = "fuzz/gen.rs"]
mod generator;

use fslat::btf::{Btf, Features, Fixture, KernelTypes};
use fslat::codegen::Mode;
use fslat::diag::{Source, render};
use generator::{Gen, Kernel, Rng, functions, mutate};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
/// Programs per clang process.
const BATCH: usize = 32;
const CLANGS: [&str; 2] = ["clang-14", "clang-19"];

fn out_dir() -> PathBuf {
    Path::new(MANIFEST_DIR).join("target/fuzz")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        let n: Vec<u64> = args[1..].iter().filter_map(|a| a.parse().ok()).collect();
        let [seed, from, to, every] = n[..] else {
            eprintln!("fuzz: --worker SEED FROM TO CLANG_EVERY");
            return ExitCode::from(2);
        };
        // The pipeline recurses over the expression tree; fslat's main gives it the same.
        let worker = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || worker(seed, from, to, every));
        return match worker.map(|w| w.join()) {
            Ok(Ok(code)) => code,
            _ => ExitCode::FAILURE,
        };
    }
    if args.iter().any(|a| a == "--list") {
        println!("fuzz: test");
        return ExitCode::SUCCESS;
    }
    match host() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("fuzz: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the inputs in worker processes, restarting after one that dies; prints the tally
/// and the throughput. True when every input kept the properties.
fn host() -> Result<bool, String> {
    let seed = generator::env_u64("FSLAT_FUZZ_SEED", 18)?;
    let from = generator::env_u64("FSLAT_FUZZ_FROM", 0)?;
    let count = generator::env_u64("FSLAT_FUZZ_INPUTS", 3000)?;
    let every = generator::env_u64("FSLAT_FUZZ_CLANG_EVERY", 8)?.max(1);
    let to = from + count;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    std::fs::create_dir_all(out_dir()).map_err(|e| format!("{}: {e}", out_dir().display()))?;
    let started = Instant::now();
    let mut next = from;
    let mut failures: Vec<String> = Vec::new();
    let mut stats = Stats::default();
    while next < to {
        // At most 4 GiB of address space per worker: an input that makes the compiler
        // allocate without bound (one took 22 GiB, and the kernel's OOM killer stepped
        // in) fails on its own, as a crasher, and leaves the machine's memory alone.
        let mut child = Command::new("sh")
            .args(["-c", "ulimit -v 4194304 && exec \"$0\" \"$@\""])
            .arg(&exe)
            .args(["--worker", &seed.to_string(), &next.to_string()])
            .args([to.to_string(), every.to_string()])
            .current_dir(MANIFEST_DIR)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        let stdout = child.stdout.take().ok_or("no worker stdout")?;
        let mut current = None;
        let mut finished = false;
        // The worker's tally so far, kept in case it dies before its final one.
        let mut seen = Stats::default();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(i) = line.strip_prefix("input ") {
                current = i.parse::<u64>().ok();
            } else if let Some(f) = line.strip_prefix("FAIL ") {
                failures.push(f.to_string());
            } else if let Some(s) = line.strip_prefix("partial ") {
                seen = Stats::parse(s);
            } else if let Some(s) = line.strip_prefix("stats ") {
                stats.add(&Stats::parse(s));
                finished = true;
            } else {
                println!("{line}");
            }
        }
        let status = child.wait().map_err(|e| format!("worker: {e}"))?;
        if finished && status.success() {
            break;
        }
        // The worker died on input `current`: that input is a crasher.
        let Some(i) = current else {
            return Err(format!("a worker ended ({status}) before its first input"));
        };
        let (text, what) = input(seed, i, &Kernels::load());
        let file = out_dir().join(format!("crash-{seed}-{i}.fsl"));
        let _ = std::fs::write(&file, text.as_bytes());
        failures.push(format!(
            "input {i} ({what}): the process died ({status}); the input is {}",
            file.display()
        ));
        seen.inputs = i + 1 - next;
        stats.add(&seen);
        next = i + 1;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "fuzz: seed {seed}, inputs {from}..{to}: {} generated, {} mutants; {} accepted, {} \
         rejected; {} built with each of {} ({} clang processes)",
        stats.generated,
        stats.mutants,
        stats.accepted,
        stats.rejected,
        stats.built,
        CLANGS.join(" and "),
        stats.clang_runs,
    );
    println!(
        "fuzz: {count} inputs in {secs:.1} s: {:.0} inputs/s ({:.1} s of it in clang)",
        count as f64 / secs.max(1e-9),
        stats.clang_ms as f64 / 1000.0
    );
    for f in &failures {
        println!("FAIL {f}");
    }
    println!(
        "fuzz: {} {}",
        failures.len(),
        if failures.len() == 1 {
            "failure"
        } else {
            "failures"
        }
    );
    Ok(failures.is_empty())
}

#[derive(Default)]
struct Stats {
    inputs: u64,
    generated: u64,
    mutants: u64,
    accepted: u64,
    rejected: u64,
    built: u64,
    clang_runs: u64,
    clang_ms: u64,
}

impl Stats {
    fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {}",
            self.inputs,
            self.generated,
            self.mutants,
            self.accepted,
            self.rejected,
            self.built,
            self.clang_runs,
            self.clang_ms
        )
    }

    fn parse(s: &str) -> Stats {
        let n: Vec<u64> = s
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let g = |i: usize| n.get(i).copied().unwrap_or(0);
        Stats {
            inputs: g(0),
            generated: g(1),
            mutants: g(2),
            accepted: g(3),
            rejected: g(4),
            built: g(5),
            clang_runs: g(6),
            clang_ms: g(7),
        }
    }

    fn add(&mut self, o: &Stats) {
        self.inputs += o.inputs;
        self.generated += o.generated;
        self.mutants += o.mutants;
        self.accepted += o.accepted;
        self.rejected += o.rejected;
        self.built += o.built;
        self.clang_runs += o.clang_runs;
        self.clang_ms += o.clang_ms;
    }
}

/// The kernels inputs are generated over.
struct Kernels {
    fixture: Fixture,
    /// The fixture without the features Linux 5.10 lacks (fentry mode only).
    old: Fixture,
    host: Option<Btf>,
    /// What the generator picks from, per kernel (the fixture's serve both fixtures).
    fixture_functions: Vec<String>,
    host_functions: Vec<String>,
    corpus: Vec<Vec<u8>>,
}

impl Kernels {
    fn load() -> Kernels {
        let mut corpus = Vec::new();
        for dir in ["tests/cases", "examples"] {
            let Ok(entries) = std::fs::read_dir(Path::new(MANIFEST_DIR).join(dir)) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "fsl"))
                .collect();
            paths.sort();
            corpus.extend(paths.iter().filter_map(|p| std::fs::read(p).ok()));
        }
        let fixture = Fixture::new();
        // FSLAT_FUZZ_HOST=0: the fixture only.
        let host = match std::env::var("FSLAT_FUZZ_HOST").as_deref() {
            Ok("0") => None,
            _ => Btf::vmlinux().ok(),
        };
        // Thousands of lookups follow: index now, as fslat's own listing does.
        if let Some(h) = &host {
            h.index_functions();
        }
        Kernels {
            fixture_functions: functions(&fixture, 300),
            host_functions: host.as_ref().map_or_else(Vec::new, |h| functions(h, 300)),
            fixture,
            old: Fixture::with_features(Features::default()),
            host,
            corpus,
        }
    }
}

/// Input `i` of `seed`: its text and what it is (kernel, mode, generated or mutant).
fn input(seed: u64, i: u64, k: &Kernels) -> (String, String) {
    input_for(seed, i, k).0
}

/// Input `i`, with the kernel and mode it is compiled for.
fn input_for(seed: u64, i: u64, k: &Kernels) -> ((String, String), &dyn KernelTypes, Mode) {
    let mut rng = Rng::new(seed, i);
    let (types, mode, kname): (&dyn KernelTypes, Mode, &str) = match (rng.below(4), &k.host) {
        (0, Some(host)) => (host, Mode::Fentry, "host"),
        (1, _) => (&k.old, Mode::Fentry, "fixture-5.10"),
        (2, _) => (&k.fixture, Mode::Fentry, "fixture"),
        _ => (&k.fixture, Mode::Fsession, "fixture"),
    };
    let kernel = Kernel {
        types,
        functions: if kname == "host" {
            &k.host_functions
        } else {
            &k.fixture_functions
        },
    };
    let (text, how) = match rng.below(3) {
        0 => {
            let base = if k.corpus.is_empty() || rng.one_in(2) {
                Gen::script(&mut rng, &kernel).into_bytes()
            } else {
                rng.pick(&k.corpus).clone()
            };
            let bytes = mutate(&mut rng, &base);
            (String::from_utf8_lossy(&bytes).into_owned(), "mutant")
        }
        _ => (Gen::script(&mut rng, &kernel), "generated"),
    };
    (
        (text, format!("{how}, {kname}, {}", mode.name())),
        types,
        mode,
    )
}

/// Runs inputs `from..to`, announcing each on stdout before it runs (so the parent can
/// name the one that kills the process), then `stats ...`.
fn worker(seed: u64, from: u64, to: u64, every: u64) -> ExitCode {
    let kernels = Kernels::load();
    let clangs: Vec<(&str, PathBuf)> = CLANGS
        .iter()
        .filter_map(|c| {
            fslat::build::find_clang(Some(Path::new(c)))
                .ok()
                .map(|p| (*c, p))
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if clangs.len() != CLANGS.len() {
        let _ = writeln!(
            out,
            "FAIL clang-14 and clang-19 are both needed (run tests/vm/setup-host)"
        );
    }
    // A panic is reported as a failure of its input, not printed by the default hook.
    std::panic::set_hook(Box::new(|_| {}));
    let mut stats = Stats::default();
    let mut batch: Vec<Pending> = Vec::new();
    // FSLAT_FUZZ_SHOW=1: every rejected input with its diagnostics (to tune the generator).
    let show = std::env::var_os("FSLAT_FUZZ_SHOW").is_some();
    for i in from..to {
        let _ = writeln!(out, "input {i}");
        let _ = out.flush();
        let ((text, what), types, mode) = input_for(seed, i, &kernels);
        stats.inputs += 1;
        if what.starts_with("mutant") {
            stats.mutants += 1;
        } else {
            stats.generated += 1;
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            match fslat::compile(&text, types, mode) {
                Ok((_, c)) => Ok(c),
                Err(diags) => {
                    let source = Source {
                        name: "fuzz.fsl",
                        text: &text,
                    };
                    // The messages alone: the rendering quotes the script, which
                    // may say anything.
                    let bug = diags
                        .iter()
                        .any(|d| d.kind.message().contains("bug in fslat"));
                    Err((render(&source, &diags, false), bug))
                }
            }
        }));
        match result {
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let file = save(seed, i, "panic", &text, None);
                let _ = writeln!(out, "FAIL input {i} ({what}): panicked: {msg}; {file}");
            }
            Ok(Err((rendered, bug))) => {
                stats.rejected += 1;
                if show {
                    let _ = writeln!(out, "--- input {i} ({what}) rejected:\n{text}\n{rendered}");
                }
                if bug {
                    let file = save(seed, i, "bug", &text, None);
                    let _ = writeln!(out, "FAIL input {i} ({what}): {rendered}; {file}");
                }
            }
            Ok(Ok(c)) => {
                stats.accepted += 1;
                if stats.accepted % every == 0 {
                    batch.push(Pending { i, what, text, c });
                }
            }
        }
        if batch.len() >= BATCH || (i + 1 == to && !batch.is_empty()) {
            for f in build_batch(seed, &clangs, &batch, &mut stats) {
                let _ = writeln!(out, "FAIL {f}");
            }
            batch.clear();
        }
        if (i + 1 - from) % 1000 == 0 {
            let _ = writeln!(out, "partial {}", stats.line());
        }
    }
    let _ = writeln!(out, "stats {}", stats.line());
    ExitCode::SUCCESS
}

struct Pending {
    i: u64,
    what: String,
    text: String,
    c: String,
}

fn save(seed: u64, i: u64, kind: &str, text: &str, c: Option<&str>) -> String {
    let file = out_dir().join(format!("{kind}-{seed}-{i}.fsl"));
    let _ = std::fs::write(&file, text);
    if let Some(c) = c {
        let _ = std::fs::write(file.with_extension("bpf.c"), c);
    }
    format!("the input is {}", file.display())
}

/// Builds a batch with each clang, one clang process for all of it, and says which
/// programs clang warned about or refused. clang names each message's file first
/// (`p7.c:12:3: warning: ...`), which tells the programs apart.
fn build_batch(
    seed: u64,
    clangs: &[(&str, PathBuf)],
    batch: &[Pending],
    stats: &mut Stats,
) -> Vec<String> {
    let mut failures = Vec::new();
    let dir = match tempfile::Builder::new().prefix("fslat-fuzz-").tempdir() {
        Ok(d) => d,
        Err(e) => return vec![format!("cannot make a build directory: {e}")],
    };
    let mut files = Vec::new();
    let written = (|| -> std::io::Result<()> {
        for (name, text) in fslat::build::HEADERS {
            let path = dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)?;
        }
        for (n, p) in batch.iter().enumerate() {
            let name = format!("p{n}.c");
            std::fs::write(dir.path().join(&name), &p.c)?;
            files.push(name);
        }
        Ok(())
    })();
    if let Err(e) = written {
        return vec![format!("cannot write the batch: {e}")];
    }
    for (clang, path) in clangs {
        let t = Instant::now();
        let out = Command::new(path)
            .args(fslat::build::CLANG_FLAGS)
            .arg("-I")
            .arg(dir.path())
            .arg("-c")
            .args(&files)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output();
        stats.clang_ms += t.elapsed().as_millis() as u64;
        stats.clang_runs += 1;
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("cannot run {clang}: {e}"));
                continue;
            }
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut blamed = vec![false; batch.len()];
        for line in stderr.lines() {
            let Some(n) = line
                .strip_prefix('p')
                .and_then(|l| l.split_once(".c:"))
                .and_then(|(n, _)| n.parse::<usize>().ok())
            else {
                continue;
            };
            if n < batch.len()
                && !blamed[n]
                && (line.contains("warning:") || line.contains("error:"))
            {
                blamed[n] = true;
                let p = &batch[n];
                let file = save(seed, p.i, "clang", &p.text, Some(&p.c));
                failures.push(format!(
                    "input {} ({}): {clang}: {line}; {file}",
                    p.i, p.what
                ));
            }
        }
        let objects = files
            .iter()
            .filter(|f| {
                std::fs::read(dir.path().join(f).with_extension("o"))
                    .is_ok_and(|b| b.starts_with(b"\x7fELF"))
            })
            .count();
        if !out.status.success() && !blamed.iter().any(|b| *b) {
            failures.push(format!(
                "{clang} failed on a batch without naming a program: {stderr}"
            ));
        }
        if out.status.success() {
            if *clang == CLANGS[0] {
                stats.built += objects as u64;
            }
            if objects != batch.len() {
                failures.push(format!(
                    "{clang}: {objects} objects for {} programs",
                    batch.len()
                ));
            }
        }
        for f in &files {
            let _ = std::fs::remove_file(dir.path().join(f).with_extension("o"));
        }
    }
    failures
}
