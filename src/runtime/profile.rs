//! `profile RATE`: a perf event (the software CPU clock) on every online CPU for each
//! profile, the profile's program attached to each; at the end, what the clocks say was
//! due and never reached the program (`lost`).

use super::errors::RuntimeError;
use crate::check::program::{Rate, Session};
use crate::sys::perf;
use std::os::fd::{IntoRawFd, OwnedFd};

/// The perf events of the run's profiles, kept open to read their clocks at the end.
#[derive(Default)]
pub struct Profiles {
    sessions: Vec<Clocks>,
}

struct Clocks {
    session: usize,
    period_ns: u64,
    /// Each online CPU's event.
    cpus: Vec<(usize, OwnedFd)>,
}

impl Profiles {
    /// Opens a CPU clock per online CPU at `s`'s rate and attaches `prog` to each.
    pub fn attach(
        &mut self,
        prog: &libbpf_rs::ProgramMut,
        s: &Session,
    ) -> Result<Vec<libbpf_rs::Link>, RuntimeError> {
        let Some(rate) = s.profile else {
            return Ok(Vec::new());
        };
        let hertz = match rate {
            Rate::Hertz(hz) => Some(hz),
            Rate::Period(_) => None,
        };
        let mut links = Vec::new();
        let mut cpus = Vec::new();
        for cpu in online_cpus()? {
            let fd = perf::cpu_clock(cpu as u32, hertz, rate.period_ns())
                .map_err(|e| open_error(e, rate, cpu))?;
            // libbpf closes the descriptor it is given when the link goes: it gets a
            // copy, this one stays to read the clock.
            let copy = fd.try_clone().map_err(|e| RuntimeError::Profile {
                reason: e.to_string(),
            })?;
            let link =
                prog.attach_perf_event(copy.into_raw_fd())
                    .map_err(|e| RuntimeError::Profile {
                        reason: format!("cannot attach the program to CPU {cpu}'s clock: {e}"),
                    })?;
            links.push(link);
            cpus.push((cpu, fd));
        }
        self.sessions.push(Clocks {
            session: s.index,
            period_ns: rate.period_ns(),
            cpus,
        });
        Ok(links)
    }

    /// Stops every clock: no sample after this, and the counts stay as they are.
    pub fn stop(&self) {
        for c in &self.sessions {
            for (_, fd) in &c.cpus {
                // A clock that cannot be stopped stops with the link.
                let _ = perf::disable(fd);
            }
        }
    }

    /// Samples of profile `session` that its CPUs' clocks were due to take but that
    /// never ran its program (the kernel throttled the clock, or a timer came more than a
    /// period late), from each CPU's `samples`; the one sample a CPU may have in
    /// flight at the moment of reading is not counted as lost.
    pub fn lost(&self, session: usize, samples: &[u64]) -> Option<u64> {
        let c = self.sessions.iter().find(|c| c.session == session)?;
        let mut lost = 0;
        for (cpu, fd) in &c.cpus {
            let due = perf::count(fd).ok()? / c.period_ns;
            let seen = samples.get(*cpu).copied().unwrap_or(0);
            lost += due.saturating_sub(seen + 1);
        }
        Some(lost)
    }
}

/// The CPUs `/sys/devices/system/cpu/online` lists (`0-3,5`).
fn online_cpus() -> Result<Vec<usize>, RuntimeError> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).map_err(|e| RuntimeError::Profile {
        reason: format!("cannot read {path}: {e}"),
    })?;
    parse_cpu_list(text.trim()).ok_or_else(|| RuntimeError::Profile {
        reason: format!("cannot read {path}: `{}` is not a CPU list", text.trim()),
    })
}

fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().ok()?..=b.parse().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// What the kernel refusing a CPU clock means, and what to do.
fn open_error(e: std::io::Error, rate: Rate, cpu: usize) -> RuntimeError {
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    let reason = match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP | libc::ENOSYS) => format!(
            "this kernel has no perf events for the CPU clock ({e}): it was built without CONFIG_PERF_EVENTS, or CPU {cpu} has none"
        ),
        Some(libc::EINVAL) if matches!(rate, Rate::Hertz(_)) => format!(
            "the kernel refuses {rate}: it samples at most {} times a second now (kernel.perf_event_max_sample_rate, lowered by the kernel when samples take long); profile at a lower rate",
            sysctl("perf_event_max_sample_rate")
        ),
        Some(libc::EACCES | libc::EPERM) => format!(
            "the kernel does not let this process open perf events (kernel.perf_event_paranoid = {}): run as root, or with CAP_PERFMON",
            sysctl("perf_event_paranoid")
        ),
        _ => format!("cannot open CPU {cpu}'s clock at {rate}: {e}"),
    };
    RuntimeError::Profile { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-3,5,7-8"), Some(vec![0, 1, 2, 3, 5, 7, 8]));
        assert_eq!(parse_cpu_list("x"), None);
    }
}
