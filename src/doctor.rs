//! `fslat doctor`: whether this machine can run fslat, and what to do where it cannot. One
//! line per requirement, `ok` or `missing`. Nothing is guessed from the kernel's version,
//! configuration or BTF: a two-instruction program of each kind fslat uses (fentry, fexit,
//! fsession, kprobe session, tp_btf, uprobe, uprobe_multi, uprobe session) is loaded,
//! attached and detached for real, and each map kind and helper tried, which is the only
//! honest test (lockdown, a disabled ftrace, a kernel without kprobes and missing
//! trampolines all show up there and nowhere else). The report ends with what can be
//! traced: kernel functions, tracepoints, user functions.

use crate::btf::{Btf, FEATURES, Feature, FeatureInfo, Features, KernelTypes};
use crate::build::{cache_dir, find_clang};
use crate::sys::bpf::ProbeFailure;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;

const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";
const JIT_PATH: &str = "/proc/sys/net/core/bpf_jit_enable";
/// Attach targets for the test program, best first: `bpf_fentry_test1` exists for exactly
/// this purpose and runs only when BPF's own self-tests call it.
const PROBE_TARGETS: [&str; 2] = ["bpf_fentry_test1", "vfs_read"];
use crate::sys::cap::{BPF as CAP_BPF, PERFMON as CAP_PERFMON, SYS_ADMIN as CAP_SYS_ADMIN};
/// The kernel's ENOTSUPP (not a userspace errno): no BPF trampoline for this program.
const ENOTSUPP: i32 = 524;

/// One line of the report.
struct Check {
    name: &'static str,
    ok: bool,
    /// What was found.
    detail: String,
    /// What to do about it, for a check that is missing.
    fix: Option<String>,
    /// fslat cannot trace without it.
    required: bool,
    /// What a program of this kind traces, when it loaded and attached.
    reaches: Option<Reach>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
            required: true,
            reaches: None,
        }
    }

    fn missing(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
            required: true,
            reaches: None,
        }
    }

    fn optional(mut self) -> Check {
        self.required = false;
        self
    }

    fn reaches(mut self, reach: Reach) -> Check {
        self.reaches = Some(reach);
        self
    }
}

/// Runs every check, writes the report to standard output, and returns the exit status:
/// 0 when everything fslat needs is there.
pub fn main() -> i32 {
    let checks = checks();
    let mut out = std::io::stdout().lock();
    match report(&checks, &mut out) {
        Ok(()) => {}
        Err(e) => {
            crate::stderr_line!("fslat: error: cannot write the report: {e}");
            return 1;
        }
    }
    if verdict(&checks).starts_with("fslat can trace") {
        0
    } else {
        1
    }
}

fn checks() -> Vec<Check> {
    let mut checks = vec![kernel_release()];
    let (privileges, privileged) = privileges();
    checks.push(privileges);
    if privileged {
        checks.push(while_tracing());
    }
    checks.push(locked_memory());
    let btf = Btf::vmlinux();
    checks.push(match &btf {
        Ok(b) => Check::ok("BTF", format!("{BTF_PATH} ({} types)", b.type_count())),
        Err(e) => Check::missing(
            "BTF",
            e.to_string(),
            "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (every major distribution's is)",
        ),
    });
    checks.push(jit());
    let btf = btf.ok();
    let targets = btf.as_ref().filter(|_| privileged).map(Targets::find);
    let (btf, targets) = (btf.as_ref(), targets.as_ref());
    checks.push(ring_buffer_check(btf, targets));
    checks.push(tracing_check(btf, targets));
    checks.push(fsession_check(btf, targets));
    let features = btf.map(Btf::features);
    let lines = |keep: fn(Feature) -> bool| {
        FEATURES
            .iter()
            .filter(move |i| keep(i.feature))
            .map(move |i| feature_check(i, features.as_ref().expect("with BTF"), btf, targets))
    };
    if features.is_some() {
        checks.extend(lines(|f| f == Feature::KprobeSession));
    }
    checks.push(tracepoint_check(btf, targets));
    checks.push(uprobe_check(btf, targets));
    if let Some(f) = &features {
        checks.extend(lines(|f| {
            !matches!(f, Feature::Fsession | Feature::KprobeSession)
        }));
        checks.push(preemption_check(f));
    }
    checks.push(clang());
    checks.push(cache());
    checks
}

/// Which of the three things a script traces each kind of program reaches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    Kernel,
    Tracepoints,
    User,
}

impl Reach {
    const ALL: [(Reach, &'static str); 3] = [
        (Reach::Kernel, "kernel functions"),
        (Reach::Tracepoints, "tracepoints"),
        (Reach::User, "user functions"),
    ];
}

/// The three things, each with whether some program that reaches it loaded and attached,
/// and the lines that say so.
fn reach(checks: &[Check]) -> Vec<(&'static str, bool, Vec<&'static str>)> {
    Reach::ALL
        .iter()
        .map(|&(r, words)| {
            let lines: Vec<&Check> = checks.iter().filter(|c| c.reaches == Some(r)).collect();
            let ok: Vec<&'static str> = lines.iter().filter(|c| c.ok).map(|c| c.name).collect();
            if ok.is_empty() {
                (words, false, lines.iter().map(|c| c.name).collect())
            } else {
                (words, true, ok)
            }
        })
        .collect()
}

fn report(checks: &[Check], out: &mut dyn Write) -> std::io::Result<()> {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in checks {
        let status = if c.ok { "ok" } else { "missing" };
        writeln!(out, "{:width$}  {status:7}  {}", c.name, c.detail)?;
        if let Some(fix) = &c.fix {
            writeln!(out, "{:width$}  {:7}  fix: {fix}", "", "")?;
        }
    }
    writeln!(out, "What fslat can trace here:")?;
    for (words, ok, names) in reach(checks) {
        let (answer, how) = if ok {
            ("yes", names.join(", "))
        } else {
            ("no", format!("refused: {}", names.join(", ")))
        };
        writeln!(out, "  {words:16}  {answer:3}  ({how})")?;
    }
    writeln!(out, "{}", verdict(checks))?;
    out.flush()
}

/// The last line: what fslat can trace on this machine, or what it lacks for anything.
fn verdict(checks: &[Check]) -> String {
    let missing: Vec<&str> = checks
        .iter()
        .filter(|c| !c.ok && c.required)
        .map(|c| c.name)
        .collect();
    if !missing.is_empty() {
        return format!(
            "fslat cannot trace on this machine: {} missing.",
            missing.join(", ")
        );
    }
    let reach = reach(checks);
    let yes: Vec<&str> = reach.iter().filter(|r| r.1).map(|r| r.0).collect();
    let no: Vec<&str> = reach.iter().filter(|r| !r.1).map(|r| r.0).collect();
    match (yes.is_empty(), no.is_empty()) {
        (true, _) => "fslat cannot trace on this machine: every test program was refused.".into(),
        (false, true) => "fslat can trace on this machine.".into(),
        (false, false) => format!(
            "fslat can trace {} on this machine, not {}.",
            words_and(&yes),
            words_and(&no)
        ),
    }
}

fn words_and(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn kernel_release() -> Check {
    match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(r) => Check::ok("kernel", format!("Linux {}", r.trim())),
        Err(e) => Check::missing(
            "kernel",
            format!("cannot read /proc/sys/kernel/osrelease: {e}"),
            "mount /proc",
        ),
    }
}

/// The calling thread's effective capability set. Not /proc/self/status: that is the
/// process's first thread, which gives up its capabilities once fslat's thread runs
/// (src/main.rs).
fn effective_caps() -> Option<u64> {
    crate::sys::thread_capabilities()
        .ok()
        .map(|(effective, _)| effective)
}

/// The check, and whether loading BPF tracing programs is allowed to this process.
fn privileges() -> (Check, bool) {
    let root = crate::sys::euid() == 0;
    let caps = effective_caps().unwrap_or(0);
    let has = |cap: u32| caps & (1 << cap) != 0;
    // CAP_SYS_ADMIN still stands in for both (bpf_capable, perfmon_capable).
    let bpf = has(CAP_BPF) || has(CAP_SYS_ADMIN);
    let perfmon = has(CAP_PERFMON) || has(CAP_SYS_ADMIN);
    let who = if root { "root" } else { "not root" };
    if bpf && perfmon {
        let check = Check::ok(
            "privileges",
            format!("{who}, with CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)"),
        );
        return (check, true);
    }
    let lacking: Vec<&str> = [(bpf, "CAP_BPF"), (perfmon, "CAP_PERFMON")]
        .into_iter()
        .filter(|(have, _)| !have)
        .map(|(_, name)| name)
        .collect();
    let check = Check::missing(
        "privileges",
        format!("{who}, without {}", lacking.join(" and ")),
        "run fslat with sudo, or give it CAP_BPF and CAP_PERFMON (setcap cap_bpf,cap_perfmon+ep)",
    );
    (check, false)
}

/// What a run keeps once attached (runtime/privileges.rs): tried for real, as the run
/// does, on a map made for the purpose.
fn while_tracing() -> Check {
    const NAME: &str = "after attach";
    match crate::sys::bpf::small_map() {
        Ok(map) if crate::sys::bpf::fd_use_without_capabilities(map.as_fd()) => Check::ok(
            NAME,
            "this kernel lets fslat read its maps with no capability: a run drops them all once attached (kstack/ustack keep what symbolization reads)",
        ),
        Ok(_) => Check::ok(
            NAME,
            "this kernel checks CAP_BPF on every bpf(2) call (as Linux 5.10 does with unprivileged BPF off): a run keeps CAP_BPF once attached and drops the rest (kstack/ustack keep what symbolization reads)",
        ),
        Err(e) => Check::missing(
            NAME,
            format!("not tested: a test map could not be made: {e}"),
            "see privileges above",
        )
        .optional(),
    }
}

/// Linux before 5.11 charges BPF maps and programs to the locked-memory limit
/// (RLIMIT_MEMLOCK); later kernels to the memory cgroup. libbpf raises the soft limit
/// up to the hard one by itself.
fn locked_memory() -> Check {
    const NAME: &str = "locked memory";
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    if !charges_memlock(&release) {
        return Check::ok(
            NAME,
            "not limited: Linux 5.11 and later charge BPF memory to the memory cgroup",
        );
    }
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let hard = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))
        .and_then(|l| l.split_whitespace().nth(4))
        .unwrap_or("unknown")
        .to_string();
    if hard == "unlimited" {
        return Check::ok(
            NAME,
            "this kernel (before 5.11) charges BPF maps to the locked-memory limit; the hard limit is unlimited, which fslat raises the soft one to",
        );
    }
    Check::missing(
        NAME,
        format!(
            "this kernel (before 5.11) charges BPF maps to the locked-memory limit, and its hard limit is {hard} bytes: bigger programs (percentiles, many keys, a big -b) may not load"
        ),
        "run with `ulimit -l unlimited` (as root), LimitMEMLOCK=infinity in a systemd unit, or give fslat CAP_SYS_RESOURCE",
    )
    .optional()
}

/// Whether a kernel release (`5.10.0-32-cloud-amd64`) is before 5.11.
fn charges_memlock(release: &str) -> bool {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    major != 0 && (major, minor) < (5, 11)
}

fn jit() -> Check {
    match std::fs::read_to_string(JIT_PATH) {
        Ok(v) if matches!(v.trim(), "1" | "2") => {
            Check::ok("BPF JIT", format!("on ({JIT_PATH} = {})", v.trim()))
        }
        Ok(v) => Check::missing(
            "BPF JIT",
            format!("off ({JIT_PATH} = {})", v.trim()),
            format!("fentry, fexit and fsession need the JIT: echo 1 > {JIT_PATH}"),
        ),
        Err(e) => Check::missing(
            "BPF JIT",
            format!("cannot read {JIT_PATH}: {e}"),
            "use a kernel built with CONFIG_BPF_JIT=y",
        ),
    }
}

/// The kernel's own answer to a probe: the step that failed and the errno, by name.
fn describe(f: &ProbeFailure) -> String {
    let name = match f.errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::E2BIG => "E2BIG",
        libc::ENOSYS => "ENOSYS",
        libc::ESRCH => "ESRCH",
        libc::EBADF => "EBADF",
        libc::EFAULT => "EFAULT",
        ENOTSUPP => "ENOTSUPP",
        e => {
            return format!(
                "{} failed: {}",
                f.step,
                std::io::Error::from_raw_os_error(e)
            );
        }
    };
    format!("{} failed with {name}", f.step)
}

fn probe(btf_id: u32, attach_type: libbpf_sys::bpf_attach_type) -> Result<(), ProbeFailure> {
    crate::sys::bpf::probe_tracing(btf_id, attach_type)
}

/// What the kernel-side probes attach to, and where the user-space ones do.
struct Targets {
    /// A kernel function with BTF, and its id.
    kernel: Option<(&'static str, u32)>,
    /// `sched_switch`'s `btf_trace_` typedef id, for tp_btf.
    tracepoint: Option<u32>,
    /// This very binary and the file offset of its entry point, which runs once at start:
    /// a uprobe there fires never again.
    user: Option<(PathBuf, u64)>,
}

impl Targets {
    fn find(btf: &Btf) -> Targets {
        let kernel = PROBE_TARGETS
            .iter()
            .find_map(|&f| btf.function_id(f).map(|id| (f, id)));
        let tracepoint = crate::sys::bpf::VmlinuxBtf::load()
            .ok()
            .and_then(|b| b.tracepoint_id(TRACEPOINT));
        Targets {
            kernel,
            tracepoint,
            user: entry_point(),
        }
    }
}

/// The tracepoint tp_btf is tested on: every kernel fslat runs on has it.
const TRACEPOINT: &str = "sched_switch";

/// This executable and the offset in its file of its ELF entry point.
fn entry_point() -> Option<(PathBuf, u64)> {
    use object::{Object, ObjectSegment};
    let path = std::env::current_exe().ok()?;
    let data = std::fs::read(&path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let entry = file.entry();
    file.segments().find_map(|seg| {
        let (offset, size) = seg.file_range();
        let start = seg.address();
        (start..start + size)
            .contains(&entry)
            .then(|| (path.clone(), offset + (entry - start)))
    })
}

/// Why the kernel refused a function tracing program with EPERM or EACCES to a privileged
/// fslat: ftrace turned off, lockdown, or (when neither) something this report cannot see.
fn function_tracing_refused() -> String {
    const FTRACE: &str = "/proc/sys/kernel/ftrace_enabled";
    const LOCKDOWN: &str = "/sys/kernel/security/lockdown";
    let ftrace = std::fs::read_to_string(FTRACE).map(|v| v.trim().to_string());
    let lockdown = std::fs::read_to_string(LOCKDOWN).ok().and_then(|v| {
        let start = v.find('[')?;
        let end = v[start..].find(']')?;
        Some(v[start + 1..start + end].to_string())
    });
    if ftrace.as_deref().ok() == Some("0") {
        return format!(
            "ftrace is turned off ({FTRACE} is 0): `sysctl kernel.ftrace_enabled=1` turns it on"
        );
    }
    if let Some(mode) = lockdown.as_deref().filter(|m| *m != "none") {
        return format!(
            "the kernel is locked down ({LOCKDOWN} says [{mode}]), which forbids BPF tracing of kernel functions: boot it with lockdown=none (or Secure Boot off)"
        );
    }
    let ftrace = match ftrace {
        Ok(v) => format!("{FTRACE} is {v}"),
        Err(_) => format!("{FTRACE} is not there"),
    };
    let lockdown = match lockdown {
        Some(mode) => format!("{LOCKDOWN} says [{mode}]"),
        None => format!("{LOCKDOWN} is not there"),
    };
    format!(
        "neither ftrace being off nor lockdown is why ({ftrace}, {lockdown}): a policy this \
         report cannot see (a security module, a sandbox or the hypervisor) forbids it; trace \
         kernel functions on another kernel, e.g. a virtual machine with a distribution kernel"
    )
}

/// The fix for a kernel-side probe that failed with `errno`.
fn kernel_fix(errno: i32) -> String {
    match errno {
        libc::EPERM | libc::EACCES => function_tracing_refused(),
        ENOTSUPP => "this kernel has no BPF trampolines here (JIT off, or an architecture \
                     without them)"
            .to_string(),
        libc::EOPNOTSUPP => "this kernel was built without kprobes or fprobe \
                             (CONFIG_KPROBES, CONFIG_FPROBE)"
            .to_string(),
        _ => "run a kernel with CONFIG_FUNCTION_TRACER, CONFIG_DYNAMIC_FTRACE and \
              CONFIG_BPF_JIT (5.5 or later)"
            .to_string(),
    }
}

fn tracing_check(btf: Option<&Btf>, targets: Option<&Targets>) -> Check {
    const NAME: &str = "fentry/fexit";
    let Some(targets) = targets else {
        return untested(NAME, btf.is_some()).reaches(Reach::Kernel);
    };
    let Some((target, id)) = targets.kernel else {
        return Check::missing(
            NAME,
            format!(
                "not tested: none of {} is in the kernel's BTF",
                PROBE_TARGETS.join(", ")
            ),
            "report this with the kernel's version",
        )
        .optional()
        .reaches(Reach::Kernel);
    };
    for (kind, attach) in [
        ("fentry", libbpf_sys::BPF_TRACE_FENTRY),
        ("fexit", libbpf_sys::BPF_TRACE_FEXIT),
    ] {
        if let Err(e) = probe(id, attach) {
            return Check::missing(
                NAME,
                format!("a test {kind} program on {target}: {}", describe(&e)),
                kernel_fix(e.errno),
            )
            .optional()
            .reaches(Reach::Kernel);
        }
    }
    Check::ok(
        NAME,
        format!("test fentry and fexit programs loaded and attached ({target})"),
    )
    .reaches(Reach::Kernel)
}

/// A line for a probe that could not run: no BTF, or no privileges.
fn untested(name: &'static str, have_btf: bool) -> Check {
    if have_btf {
        Check::missing(
            name,
            "not tested: loading a program needs privileges",
            "see privileges above",
        )
    } else {
        Check::missing(name, "not tested: no BTF", "see BTF above")
    }
    .optional()
}

/// tp_btf: the tracepoints of spans and `on` (`tp:sched_switch`).
fn tracepoint_check(btf: Option<&Btf>, targets: Option<&Targets>) -> Check {
    const NAME: &str = "tp_btf";
    let Some(targets) = targets else {
        return untested(NAME, btf.is_some()).reaches(Reach::Tracepoints);
    };
    let Some(id) = targets.tracepoint else {
        return Check::missing(
            NAME,
            format!("not tested: no btf_trace_{TRACEPOINT} in the kernel's BTF"),
            "report this with the kernel's version",
        )
        .optional()
        .reaches(Reach::Tracepoints);
    };
    match probe(id, libbpf_sys::BPF_TRACE_RAW_TP) {
        Ok(()) => Check::ok(
            NAME,
            format!("a test program loaded and attached ({TRACEPOINT}): tracepoints of spans and `on`"),
        ),
        Err(e) => Check::missing(
            NAME,
            format!("a test program on {TRACEPOINT}: {}", describe(&e)),
            "tracepoints (tp:NAME in spans and `on`) cannot be traced here; run a kernel with CONFIG_BPF_EVENTS",
        )
        .optional(),
    }
    .reaches(Reach::Tracepoints)
}

/// A classic uprobe: how user-space sessions run where the kernel has nothing newer.
fn uprobe_check(btf: Option<&Btf>, targets: Option<&Targets>) -> Check {
    const NAME: &str = "uprobe";
    let Some(targets) = targets else {
        return untested(NAME, btf.is_some()).reaches(Reach::User);
    };
    let Some((path, offset)) = &targets.user else {
        return Check::missing(
            NAME,
            "not tested: cannot read fslat's own executable to attach to",
            "run fslat from a readable file",
        )
        .optional()
        .reaches(Reach::User);
    };
    match crate::sys::probe::uprobe(path, *offset) {
        Ok(()) => Check::ok(
            NAME,
            "a test program loaded and attached (on fslat itself): user-space sessions (mode uprobe)",
        ),
        Err(e) => Check::missing(
            NAME,
            format!("a test uprobe on fslat itself: {}", describe(&e)),
            "run a kernel with CONFIG_UPROBES and CONFIG_UPROBE_EVENTS (every major distribution's has them)",
        )
        .optional(),
    }
    .reaches(Reach::User)
}

/// A line of `FEATURES`, tested where the kernel's BTF names it.
fn feature_check(
    info: &FeatureInfo,
    features: &Features,
    btf: Option<&Btf>,
    targets: Option<&Targets>,
) -> Check {
    let reach = match info.feature {
        Feature::UprobeSession | Feature::UprobeMulti => Some(Reach::User),
        Feature::KprobeSession => Some(Reach::Kernel),
        _ => None,
    };
    let with_reach = |c: Check| match reach {
        Some(r) => c.reaches(r),
        None => c,
    };
    let absent = format!(
        "not in this kernel (no {} in its BTF; it arrived in Linux {})",
        info.btf_value, info.since
    );
    let without = format!("nothing needed: {}", info.without);
    let Some(targets) = targets else {
        return with_reach(if features.has(info.feature) {
            untested(info.name, btf.is_some())
        } else {
            Check::missing(info.name, absent, without).optional()
        });
    };
    with_reach(match feature_probe(info.feature, targets) {
        Ok(made) => Check::ok(
            info.name,
            format!("{made} (Linux {}): {}", info.since, info.used_for),
        ),
        // The kernel's answer, where its BTF already says it is not there.
        Err((made, (why, _))) if !features.has(info.feature) => {
            Check::missing(info.name, format!("{absent}: {made}: {why}"), without).optional()
        }
        Err((made, (why, errno))) => Check::missing(
            info.name,
            format!("{} is in BTF, but {made}: {why}", info.btf_value),
            match (reach, errno) {
                (Some(Reach::Kernel), Some(errno)) => kernel_fix(errno),
                _ => without,
            },
        )
        .optional(),
    })
}

/// What one feature's probe made (`Ok`: "a test program ... loaded"), or what it tried and
/// the kernel's answer (with the errno, when there is one).
type FeatureProbe = Result<String, (String, (String, Option<i32>))>;

fn feature_probe(feature: Feature, targets: &Targets) -> FeatureProbe {
    use crate::sys::probe;
    let errno = |e: ProbeFailure| (describe(&e), Some(e.errno));
    let helper = |name: &str, id| {
        let made = format!("a test program calling {name}");
        match probe::helper(id) {
            Ok(true) => Ok(format!("{made} loaded")),
            Ok(false) => Err((made, ("the verifier does not know the helper".into(), None))),
            Err(e) => Err((made, errno(e))),
        }
    };
    let user = |attach, what: &str| {
        let made = format!("a test {what} on fslat itself");
        let Some((path, offset)) = &targets.user else {
            return Err((made, ("cannot read fslat's own executable".into(), None)));
        };
        probe::uprobe_multi(path, *offset, attach)
            .map(|()| format!("{made} loaded and attached"))
            .map_err(|e| (made, errno(e)))
    };
    match feature {
        Feature::BpfLoop => helper("bpf_loop", libbpf_sys::BPF_FUNC_loop),
        Feature::FindVma => helper("bpf_find_vma", libbpf_sys::BPF_FUNC_find_vma),
        Feature::TaskStorage => {
            let made = "a test task storage map".to_string();
            match probe::task_storage() {
                Ok(true) => Ok(format!("{made} made")),
                Ok(false) => Err((made, ("the kernel refused it".into(), None))),
                Err(e) => Err((made, errno(e))),
            }
        }
        Feature::Atomics => {
            let made = "a test program with an atomic fetch-and-add".to_string();
            probe::atomics()
                .map(|()| format!("{made} loaded"))
                .map_err(|e| (made, errno(e)))
        }
        Feature::UprobeSession => user(
            libbpf_sys::BPF_TRACE_UPROBE_SESSION,
            "uprobe session program",
        ),
        Feature::UprobeMulti => user(libbpf_sys::BPF_TRACE_UPROBE_MULTI, "uprobe_multi program"),
        Feature::SleepableUprobe => {
            let made = "a test sleepable uprobe program on fslat itself".to_string();
            let Some((path, offset)) = &targets.user else {
                return Err((made, ("cannot read fslat's own executable".into(), None)));
            };
            probe::sleepable_uprobe(path, *offset)
                .map(|()| format!("{made} loaded and attached"))
                .map_err(|e| (made, errno(e)))
        }
        Feature::KprobeSession => {
            let Some((target, _)) = targets.kernel else {
                return Err((
                    "a test kprobe session program".into(),
                    ("no kernel function to attach it to".into(), None),
                ));
            };
            let made = format!("a test kprobe session program on {target}");
            probe::kprobe_session(target)
                .map(|()| format!("{made} loaded and attached"))
                .map_err(|e| (made, errno(e)))
        }
        // Its own line (fsession_check), tested on the trampoline like fentry.
        Feature::Fsession => Err(("fsession".into(), ("tested above".into(), None))),
    }
}

/// The ring buffer every run sends its events through.
fn ring_buffer_check(btf: Option<&Btf>, targets: Option<&Targets>) -> Check {
    const NAME: &str = "ring buffer";
    if targets.is_none() {
        let mut c = untested(NAME, btf.is_some());
        c.required = true;
        return c;
    }
    match crate::sys::probe::ring_buffer() {
        Ok(()) => Check::ok(NAME, "a test ring buffer made (Linux 5.8): events"),
        Err(e) => Check::missing(
            NAME,
            format!("a test ring buffer: {}", describe(&e)),
            "fslat needs BPF ring buffers (Linux 5.8); run a newer kernel",
        ),
    }
}

/// The scheduler's preemption model, and the mode auto takes for it
/// (btf/preemption.rs): informational, fslat works either way.
fn preemption_check(features: &Features) -> Check {
    let p = crate::btf::preemption::running();
    let what = match (p.model.preempts_programs(), features.kprobe_session) {
        (true, true) => {
            "a task can be preempted inside a trampoline's program, so auto runs kernel sessions as kprobe sessions (exact counts)"
        }
        (true, false) => {
            "a task can be preempted inside a trampoline's program and the kernel has no kprobe sessions: the kernel may skip calls (missed= says how many)"
        }
        (false, _) => {
            "no task is preempted inside a BPF program: auto runs kernel sessions on trampolines"
        }
    };
    Check::ok(
        "preemption",
        format!("{} (from {}): {what}", p.model.name(), p.source),
    )
}

fn fsession_check(btf: Option<&Btf>, targets: Option<&Targets>) -> Check {
    const NAME: &str = "fsession";
    let Some(btf) = btf else {
        return untested(NAME, false).reaches(Reach::Kernel);
    };
    if !btf.has_fsession() {
        return Check::missing(
            NAME,
            "not in this kernel (no BPF_TRACE_FSESSION in its BTF; it arrived in Linux 7.0)",
            "nothing needed: fslat runs each session as an fentry + fexit pair instead",
        )
        .optional()
        .reaches(Reach::Kernel);
    }
    let Some((target, id)) = targets.and_then(|t| t.kernel) else {
        return Check::missing(
            NAME,
            "BPF_TRACE_FSESSION is in BTF; not loaded (see above)",
            "see privileges and BTF above",
        )
        .optional()
        .reaches(Reach::Kernel);
    };
    match probe(id, libbpf_sys::BPF_TRACE_FSESSION) {
        Ok(()) => Check::ok(
            NAME,
            format!("BPF_TRACE_FSESSION in BTF; a test program loaded and attached ({target})"),
        ),
        Err(e) => Check::missing(
            NAME,
            format!(
                "BPF_TRACE_FSESSION is in BTF, but a test fsession program on {target}: {}",
                describe(&e)
            ),
            kernel_fix(e.errno),
        )
        .optional(),
    }
    .reaches(Reach::Kernel)
}

fn clang() -> Check {
    let path = match find_clang(None) {
        Ok(p) => p,
        Err(_) => {
            return Check::missing(
                "clang",
                "not found (FSLAT_CLANG, clang, clang-N on PATH)",
                "install it (Debian: apt-get install clang), or set FSLAT_CLANG=/path/to/clang",
            );
        }
    };
    match Command::new(&path).arg("--version").output() {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let version = text.lines().next().unwrap_or("").trim().to_string();
            Check::ok("clang", format!("{} ({version})", path.display()))
        }
        Ok(out) => Check::missing(
            "clang",
            format!("{} --version failed ({})", path.display(), out.status),
            "reinstall clang, or set FSLAT_CLANG to a working one",
        ),
        Err(e) => Check::missing(
            "clang",
            format!("cannot run {}: {e}", path.display()),
            "reinstall clang, or set FSLAT_CLANG to a working one",
        ),
    }
}

fn cache() -> Check {
    const NAME: &str = "cache";
    let Some(dir) = cache_dir() else {
        return Check::missing(
            NAME,
            "no directory: neither XDG_CACHE_HOME nor HOME is set",
            "set HOME (fslat compiles every time without a cache)",
        )
        .optional();
    };
    let shown = dir.display();
    match std::fs::symlink_metadata(&dir) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = dir.ancestors().skip(1).find(|p| p.exists());
            return match parent {
                Some(p) if writable(p) => Check::ok(
                    NAME,
                    format!("{shown} (not there yet; created 0700 on first use)"),
                ),
                _ => Check::missing(
                    NAME,
                    format!("{shown} does not exist and cannot be created"),
                    "set XDG_CACHE_HOME to a writable directory",
                )
                .optional(),
            };
        }
        Err(e) => {
            return Check::missing(
                NAME,
                format!("{shown}: {e}"),
                "set XDG_CACHE_HOME to a writable directory",
            )
            .optional();
        }
    }
    if let Some(why) = crate::build::cache::unsafe_reason(&dir) {
        return Check::missing(
            NAME,
            format!("{shown} {why}: fslat does not use it (it compiles every time)"),
            "remove it (fslat creates a private one), or set XDG_CACHE_HOME to a private directory of yours",
        )
        .optional();
    }
    if !writable(&dir) {
        return Check::missing(
            NAME,
            format!("{shown} is not writable"),
            format!("chmod 700 {shown}"),
        )
        .optional();
    }
    Check::ok(NAME, format!("{shown} (0700, yours)"))
}

fn writable(p: &Path) -> bool {
    crate::sys::can_write(p)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_kernels_before_5_11_charge_bpf_memory_to_the_locked_memory_limit() {
        for (release, charged) in [
            ("5.10.0-32-cloud-amd64", true),
            ("4.19.0-27-amd64", true),
            ("5.11.0", false),
            ("6.1.0-28-cloud-amd64", false),
            ("7.2.13+deb14-cloud-amd64", false),
            ("", false),
        ] {
            assert_eq!(super::charges_memlock(release), charged, "{release}");
        }
    }
}
