//! What a run traces when it is not every process: `-p`'s process, watched so that its
//! exit ends the run, and `-c`'s command, put in a cgroup v2 of its own so that everything
//! it starts (a pipeline's commands, `sh -c`'s children) is traced with it.

use super::Error;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `-p PID`: the process, and a descriptor that tells when it has exited.
pub struct Watched {
    pid: u32,
    exit: OwnedFd,
    told: bool,
}

impl Watched {
    /// Refuses a process that does not exist, or a thread id given for a process id.
    pub fn open(pid: u32) -> Result<Watched, Error> {
        check_process(pid)?;
        let exit = crate::sys::pidfd_open(pid).map_err(|e| match e.raw_os_error() {
            Some(libc::ESRCH) => Error::NoSuchProcess(pid),
            _ => Error::WatchProcess { pid, source: e },
        })?;
        Ok(Watched {
            pid,
            exit,
            told: false,
        })
    }

    /// Whether the process has exited; says so on standard error the first time.
    pub fn exited(&mut self) -> bool {
        if !self.told && crate::sys::readable_now(&self.exit) {
            self.told = true;
            crate::stderr_line!("fslat: process {} exited; the run ends", self.pid);
        }
        self.told
    }
}

/// That `pid` names a running process by its process id (TGID): `/proc/PID` also exists
/// for a thread's id, which a TGID filter would never match.
pub fn check_process(pid: u32) -> Result<(), Error> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| Error::NoSuchProcess(pid))?;
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    match tgid {
        Some(tgid) if tgid != pid => Err(Error::ThreadNotProcess { tid: pid, tgid }),
        _ => Ok(()),
    }
}

/// How many threads process `pid` has, when `pid` is a running process's id (its TGID).
pub fn threads_of_process(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    (field("Tgid:")? == pid).then(|| field("Threads:"))?
}

/// `-c CMD`'s cgroup: created for the command while it waits to exec, removed at the end.
pub struct CommandCgroup {
    dir: PathBuf,
    id: u64,
}

impl CommandCgroup {
    /// A new cgroup beside fslat's own (below it), with process `pid` moved into it; or
    /// why there cannot be one.
    pub fn for_child(pid: u32) -> Result<CommandCgroup, String> {
        let mount = crate::cgroups::mount().ok_or(
            "cgroup v2 is not mounted (no cgroup2 in /proc/self/mountinfo; `mount -t cgroup2 none /sys/fs/cgroup` mounts it)",
        )?;
        let own = own_cgroup().unwrap_or_default();
        let name = format!("fslat-{}", std::process::id());
        let mut why = String::new();
        // Below fslat's own cgroup first; the hierarchy's root if that is refused.
        for parent in [mount.join(own.trim_start_matches('/')), mount.clone()] {
            let dir = parent.join(&name);
            match Self::create(&dir, pid) {
                Ok(cg) => return Ok(cg),
                Err(e) => why = format!("cannot use {}: {e}", dir.display()),
            }
        }
        Err(why)
    }

    fn create(dir: &Path, pid: u32) -> std::io::Result<CommandCgroup> {
        std::fs::create_dir(dir)?;
        let cg = CommandCgroup {
            dir: dir.to_path_buf(),
            // A cgroup v2 id is its directory's inode number (kernfs), what
            // bpf_get_current_cgroup_id returns.
            id: std::fs::metadata(dir)?.ino(),
        };
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())?;
        Ok(cg)
    }

    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for CommandCgroup {
    /// Processes the command left running move to the parent cgroup; then the cgroup goes.
    fn drop(&mut self) {
        let parent = self.dir.parent().map(|p| p.join("cgroup.procs"));
        let mut why = None;
        for _ in 0..50 {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                // Retrying does not give back a permission.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    why = Some(e);
                    break;
                }
                Err(e) => why = Some(e),
            }
            let left = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            if let Some(parent) = &parent {
                for pid in left.split_whitespace() {
                    let _ = std::fs::write(parent, pid);
                }
            }
            // A process that has just exited leaves its cgroup a moment later.
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let left = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        let why = match (why, left.split_whitespace().count()) {
            (Some(e), _) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                format!("{e}; remove it as root with `rmdir {}`", self.dir.display())
            }
            (_, n) if n > 0 => format!(
                "{n} process(es) the command started still run in it and could not be moved out"
            ),
            (Some(e), _) => e.to_string(),
            (None, _) => "it is still there".to_string(),
        };
        crate::stderr_line!(
            "fslat: warning: could not remove the command's cgroup {}: {why}",
            self.dir.display()
        );
    }
}

/// fslat's own cgroup v2 path (`0::/PATH` in /proc/self/cgroup).
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_a_process_and_a_missing_one_is_named() {
        assert!(check_process(std::process::id()).is_ok());
        assert!(matches!(
            check_process(u32::MAX),
            Err(Error::NoSuchProcess(u32::MAX))
        ));
    }
}
