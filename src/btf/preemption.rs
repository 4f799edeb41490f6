//! Whether the running kernel may preempt a task inside a BPF program. A BPF trampoline
//! (fsession, fentry, fexit) runs its program with preemption on and marks it active on
//! its CPU meanwhile: when the task is preempted there, the calls other tasks make on that
//! CPU are skipped (docs/performance.md, "Calls the kernel skips on Linux 7.2"). A
//! kprobe runs its program with preemption off and skips none of them, so on a
//! preemptible kernel fslat's auto mode prefers kprobe sessions.
//!
//! The kernel says its model in `/sys/kernel/debug/sched/preempt` (the current one in
//! parentheses: `full (lazy)` on Debian's 7.2, `none (voluntary) full` on its 6.12), but
//! only where debugfs is mounted and readable. Otherwise: `uname -v` names a kernel built
//! preemptible (`PREEMPT`, `PREEMPT_RT`); one built with `PREEMPT_DYNAMIC` takes
//! `preempt=` from its command line, and without it runs its build's default, which since
//! Linux 7.0 ("sched: Further restrict the preemption modes") can only be full or lazy on
//! x86-64 and arm64, and before it was voluntary in the distributions' builds.

use serde::Serialize;

/// The scheduler's preemption model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Model {
    None,
    Voluntary,
    Full,
    Lazy,
    Rt,
}

impl Model {
    /// Whether a task can be preempted anywhere in kernel code, BPF programs included.
    pub fn preempts_programs(self) -> bool {
        matches!(self, Model::Full | Model::Lazy | Model::Rt)
    }

    pub fn name(self) -> &'static str {
        match self {
            Model::None => "none",
            Model::Voluntary => "voluntary",
            Model::Full => "full",
            Model::Lazy => "lazy",
            Model::Rt => "rt",
        }
    }

    fn parse(word: &str) -> Option<Model> {
        Some(match word {
            "none" => Model::None,
            "voluntary" => Model::Voluntary,
            "full" => Model::Full,
            "lazy" => Model::Lazy,
            _ => return None,
        })
    }
}

/// A kernel's model and how fslat learnt it (for `-v` and `fslat doctor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Preemption {
    pub model: Model,
    pub source: &'static str,
}

const DEBUGFS: &str = "/sys/kernel/debug/sched/preempt";

/// The running kernel's preemption model.
pub fn running() -> Preemption {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    decide(
        std::fs::read_to_string(DEBUGFS).ok().as_deref(),
        &read("/proc/sys/kernel/version"),
        &read("/proc/sys/kernel/osrelease"),
        &read("/proc/cmdline"),
    )
}

/// The model from the kernel's own files: `sched/preempt` of debugfs (if readable),
/// `uname -v`, `uname -r` and the command line.
fn decide(debugfs: Option<&str>, version: &str, release: &str, cmdline: &str) -> Preemption {
    let current = debugfs.and_then(|t| {
        let open = t.find('(')?;
        let close = open + t[open..].find(')')?;
        Model::parse(&t[open + 1..close])
    });
    if let Some(model) = current {
        return Preemption {
            model,
            source: DEBUGFS,
        };
    }
    let words: Vec<&str> = version.split_whitespace().collect();
    let has = |w: &str| words.contains(&w);
    let from = |model, source| Preemption { model, source };
    if has("PREEMPT_RT") {
        return from(Model::Rt, "uname -v (PREEMPT_RT)");
    }
    if has("PREEMPT_DYNAMIC") {
        let asked = cmdline
            .split_whitespace()
            .find_map(|a| a.strip_prefix("preempt="))
            .and_then(Model::parse);
        if let Some(model) = asked {
            return from(model, "preempt= on the kernel command line");
        }
        let major = release
            .split(['.', '-'])
            .next()
            .and_then(|m| m.trim().parse::<u32>().ok());
        return match major {
            Some(m) if m >= 7 => from(
                Model::Lazy,
                "PREEMPT_DYNAMIC from Linux 7.0 (only full and lazy)",
            ),
            _ => from(
                Model::Voluntary,
                "PREEMPT_DYNAMIC before Linux 7.0 (the distributions' default)",
            ),
        };
    }
    if has("PREEMPT") {
        return from(Model::Full, "uname -v (PREEMPT)");
    }
    from(Model::Voluntary, "uname -v (no PREEMPT)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the guests' kernels say (tests/vm: Debian's 7.2 and 6.12) and the other
    /// ways a kernel says it.
    #[test]
    fn model_from_the_kernels_files() {
        let v72 = "#1 SMP PREEMPT_DYNAMIC Debian 7.2.13-1 (2026-10-28)";
        let v612 = "#1 SMP PREEMPT_DYNAMIC Debian 6.12.118-1 (2026-11-20)";
        let cases: [(Option<&str>, &str, &str, &str, Model); 9] = [
            (
                Some("full (lazy) \n"),
                v72,
                "7.2.13+deb14-cloud-amd64",
                "",
                Model::Lazy,
            ),
            (
                Some("none (voluntary) full \n"),
                v612,
                "6.12.118+deb13-cloud-amd64",
                "",
                Model::Voluntary,
            ),
            (
                Some("none voluntary (full) lazy\n"),
                v612,
                "6.12.1",
                "",
                Model::Full,
            ),
            (None, v72, "7.2.13+deb14-cloud-amd64", "quiet", Model::Lazy),
            (
                None,
                v612,
                "6.12.118+deb13-cloud-amd64",
                "quiet",
                Model::Voluntary,
            ),
            (None, v612, "6.12.118", "quiet preempt=full", Model::Full),
            (None, "#1 SMP PREEMPT_RT Tue", "6.12.1-rt", "", Model::Rt),
            (None, "#1 SMP PREEMPT Tue", "5.10.0", "", Model::Full),
            (
                None,
                "#1 SMP Debian 5.10.1",
                "5.10.0-30-cloud-amd64",
                "",
                Model::Voluntary,
            ),
        ];
        for (debugfs, version, release, cmdline, want) in cases {
            let got = decide(debugfs, version, release, cmdline);
            assert_eq!(got.model, want, "{debugfs:?} {version} {release} {cmdline}");
        }
        assert!(Model::Lazy.preempts_programs() && !Model::Voluntary.preempts_programs());
    }
}
