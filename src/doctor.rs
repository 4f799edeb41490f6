//! `fslat doctor`: whether this machine can run fslat, and what to do where it cannot. One
//! line per requirement, `ok` or `missing`. Function tracing is not guessed from the
//! kernel's version or configuration: a two-instruction fentry program is loaded and
//! attached for real, which is the only honest test (lockdown, a disabled ftrace and
//! missing trampolines all show up there and nowhere else).

use crate::btf::{Btf, FEATURES, Feature, Features, KernelTypes};
use crate::build::{cache_dir, find_clang};
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;
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
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
            required: true,
        }
    }

    fn missing(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
            required: true,
        }
    }

    fn optional(mut self) -> Check {
        self.required = false;
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
    if checks.iter().all(|c| c.ok || !c.required) {
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
    checks.push(tracing_check(btf.as_ref(), privileged));
    checks.push(fsession_check(btf.as_ref(), privileged));
    if let Some(b) = &btf {
        checks.extend(feature_checks(&b.features()));
        checks.push(preemption_check(&b.features()));
    }
    checks.push(clang());
    checks.push(cache());
    checks
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
    let missing: Vec<&str> = checks
        .iter()
        .filter(|c| !c.ok && c.required)
        .map(|c| c.name)
        .collect();
    if missing.is_empty() {
        writeln!(out, "fslat can trace on this machine.")?;
    } else {
        writeln!(
            out,
            "fslat cannot trace on this machine: {} missing.",
            missing.join(", ")
        )?;
    }
    out.flush()
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

/// Why loading or attaching the test program failed.
struct ProbeError(crate::sys::bpf::ProbeFailure);

impl ProbeError {
    fn describe(&self) -> String {
        let name = match self.0.errno {
            libc::EPERM => "EPERM".to_string(),
            libc::EACCES => "EACCES".to_string(),
            libc::EINVAL => "EINVAL".to_string(),
            libc::ENOENT => "ENOENT".to_string(),
            ENOTSUPP => "ENOTSUPP".to_string(),
            e => std::io::Error::from_raw_os_error(e).to_string(),
        };
        format!("{} failed with {name}", self.0.step)
    }
}

fn probe(btf_id: u32, attach_type: libbpf_sys::bpf_attach_type) -> Result<(), ProbeError> {
    crate::sys::bpf::probe_tracing(btf_id, attach_type).map_err(ProbeError)
}

fn probe_target(btf: &Btf) -> Option<(&'static str, u32)> {
    PROBE_TARGETS
        .iter()
        .find_map(|&f| btf.function_id(f).map(|id| (f, id)))
}

fn tracing_check(btf: Option<&Btf>, privileged: bool) -> Check {
    const NAME: &str = "fentry/fexit";
    let Some(btf) = btf else {
        return Check::missing(NAME, "not tested: no BTF", "see BTF above");
    };
    if !privileged {
        return Check::missing(
            NAME,
            "not tested: loading a tracing program needs privileges",
            "see privileges above",
        );
    }
    let Some((target, id)) = probe_target(btf) else {
        return Check::missing(
            NAME,
            format!(
                "not tested: none of {} is in the kernel's BTF",
                PROBE_TARGETS.join(", ")
            ),
            "report this with the kernel's version",
        );
    };
    for (kind, attach) in [
        ("fentry", libbpf_sys::BPF_TRACE_FENTRY),
        ("fexit", libbpf_sys::BPF_TRACE_FEXIT),
    ] {
        if let Err(e) = probe(id, attach) {
            let what = format!("a test {kind} program on {target}: {}", e.describe());
            let (detail, fix) = match e.0.errno {
                libc::EPERM | libc::EACCES => (
                    format!("function tracing is unavailable: {what} although fslat is privileged"),
                    "this kernel forbids function tracing (lockdown, or ftrace disabled); \
                     run fslat on another kernel, e.g. in a virtual machine with a \
                     distribution kernel"
                        .to_string(),
                ),
                ENOTSUPP => (
                    format!("function tracing is unavailable: {what}"),
                    "this kernel has no BPF trampolines here (JIT off, or an architecture \
                     without them)"
                        .to_string(),
                ),
                _ => (
                    format!("function tracing is unavailable: {what}"),
                    "run a kernel with CONFIG_FUNCTION_TRACER, CONFIG_DYNAMIC_FTRACE and \
                     CONFIG_BPF_JIT (5.5 or later)"
                        .to_string(),
                ),
            };
            return Check::missing(NAME, detail, fix);
        }
    }
    Check::ok(
        NAME,
        format!("test fentry and fexit programs loaded and attached ({target})"),
    )
}

/// The kernel features fslat adapts to besides fsession (which has its own, loading
/// check): each is in BTF or not, and fslat works either way.
fn feature_checks(features: &Features) -> Vec<Check> {
    FEATURES
        .iter()
        .filter(|i| i.feature != Feature::Fsession)
        .map(|i| {
            if features.has(i.feature) {
                Check::ok(
                    i.name,
                    format!("{} in BTF (Linux {}): {}", i.btf_value, i.since, i.used_for),
                )
            } else {
                Check::missing(
                    i.name,
                    format!(
                        "not in this kernel (no {} in its BTF; it arrived in Linux {})",
                        i.btf_value, i.since
                    ),
                    format!("nothing needed: {}", i.without),
                )
                .optional()
            }
        })
        .collect()
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

fn fsession_check(btf: Option<&Btf>, privileged: bool) -> Check {
    const NAME: &str = "fsession";
    let Some(btf) = btf else {
        return Check::missing(NAME, "not tested: no BTF", "see BTF above").optional();
    };
    if !btf.has_fsession() {
        return Check::missing(
            NAME,
            "not in this kernel (no BPF_TRACE_FSESSION in its BTF; it arrived in Linux 7.0)",
            "nothing needed: fslat runs each session as an fentry + fexit pair instead",
        )
        .optional();
    }
    let tested = match (privileged, probe_target(btf)) {
        (true, Some((target, id))) => Some(probe(id, libbpf_sys::BPF_TRACE_FSESSION).map_or_else(
            |e| {
                Err(format!(
                    "a test fsession program on {target}: {}",
                    e.describe()
                ))
            },
            |()| Ok(target),
        )),
        _ => None,
    };
    match tested {
        Some(Ok(target)) => Check::ok(
            NAME,
            format!("BPF_TRACE_FSESSION in BTF; a test program loaded and attached ({target})"),
        ),
        Some(Err(why)) => Check::missing(
            NAME,
            format!("BPF_TRACE_FSESSION is in BTF, but {why}"),
            "see fentry/fexit above; --mode fentry may still work",
        )
        .optional(),
        None => Check::missing(
            NAME,
            "BPF_TRACE_FSESSION is in BTF; not loaded (see above)",
            "see privileges and BTF above",
        )
        .optional(),
    }
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
