//! The warm start's loader. libbpf reads and indexes the whole of the kernel's BTF on
//! every load of an object with tracing programs, CO-RE relocations or kfuncs (in the 7.2
//! guest, 42 of the 45 guest-ms that loading fslat's object takes). What it finds there
//! (attach and kfunc BTF ids, CO-RE offsets) is the same on every load on the same
//! kernel. So after a load by libbpf, fslat keeps a record of what went to the kernel
//! (`sys::load::Record`): the object's BTF as the kernel holds it, each map's definition
//! and initial data, each program's final instructions (map descriptors noted by
//! position), its attach BTF id, function and line info. A warm start on the same kernel
//! (the warm cache's key says which) makes the same system calls from the record, with no
//! BTF read at all, and attaches the programs itself. A record that does not load falls
//! back to libbpf.
//!
//! Only objects whose programs attach to one kernel function each, or to several by one
//! kprobe session, are recorded: shared bodies, multi-attach tracing links and user-space
//! probes need what libbpf (or fslat's copies) look up at each start.

use super::loaded::Loaded;
use super::{Settings, Sizes, initial_data, present};
use crate::check::program::Program;
use crate::check::resources::{Mode, ProgRole};
pub use crate::sys::load::{Record, record};
use std::os::fd::{AsFd, OwnedFd};

/// Whether `program` run with `settings` loads the same way at every start: a program
/// on one kernel function each, or on several by a kprobe session (`record` refuses an
/// object with any other kind of program).
pub fn eligible(program: &Program, settings: &Settings) -> bool {
    settings.absent.is_empty()
        && program.sessions.iter().all(|s| {
            s.user.is_none() && (!s.several || settings.mode.of_session(s) == Mode::KprobeSession)
        })
}

/// Maps made, programs loaded and attached from a record: what `run` reads, and the
/// links.
pub struct Replayed {
    pub loaded: Loaded,
    pub links: Vec<OwnedFd>,
}

/// Makes what `rec` describes, with this run's settings (initial data, sizes), and
/// attaches each program as libbpf's path does (fentry mode: returns before entries).
pub fn load(rec: &Record, program: &Program, settings: &Settings) -> Result<Replayed, String> {
    let sizes = Sizes::new(program);
    let made = crate::sys::load::make(
        rec,
        |name| sizes.max_entries(name, settings).map(|(n, _)| n),
        |name, data| initial_data(name, data, settings).map_err(|e| e.to_string()),
    )?;
    let progs = made.progs;
    let roles = program.progs();
    let mut links = Vec::new();
    for exits in [true, false] {
        for (name, fd, attach_type) in &progs {
            let found = roles.get(name);
            if found.is_some_and(|p| p.role == ProgRole::Exit) != exits {
                continue;
            }
            let Some(p) = found else { continue };
            let s = program
                .sessions
                .get(p.session)
                .ok_or("a program of no session")?;
            let link = match p.role {
                ProgRole::Multi => {
                    let (funcs, cookies) = present(s, settings);
                    crate::sys::load::attach_kprobe_session(
                        fd.as_fd(),
                        *attach_type,
                        &funcs,
                        &cookies,
                    )
                }
                _ => crate::sys::bpf::link_tracing(fd, *attach_type),
            }
            .map_err(|e| format!("attaching {name}: {e}"))?;
            links.push(link);
        }
    }
    let loaded = Loaded::new(
        made.maps,
        progs.into_iter().map(|(n, fd, _)| (n, fd)).collect(),
    );
    Ok(Replayed { loaded, links })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eligible_in(script: &str, mode: Mode) -> bool {
        let (program, _) = crate::compile(script, &crate::btf::Fixture::new(), mode)
            .unwrap_or_else(|d| panic!("{d:?}"));
        eligible(&program, &super::super::tests::settings(mode))
    }

    /// One function a program, or several in one kprobe session: the same system calls at
    /// every start. A shared body's copies and a multi-attach link need ids looked up.
    #[test]
    fn replays_what_loads_the_same_way_every_time() {
        let one = "session vfs_read { count() }";
        let several = "session vfs_read, vfs_write { count() by func }";
        assert!(eligible_in(one, Mode::Fsession));
        assert!(eligible_in(one, Mode::Fentry));
        assert!(eligible_in(one, Mode::KprobeSession));
        assert!(eligible_in(several, Mode::KprobeSession));
        assert!(!eligible_in(several, Mode::Fentry));
        assert!(!eligible_in(several, Mode::Fsession));
        assert!(!eligible_in(several, Mode::FsessionMulti));
    }

    #[test]
    fn a_record_of_another_format_is_not_replayed() {
        let text = r#"{"format":0,"btf":"","maps":[],"progs":[]}"#;
        assert!(Record::decode(text.as_bytes()).is_none());
        let now = text.replace(r#""format":0"#, r#""format":1"#);
        assert!(Record::decode(now.as_bytes()).is_some());
        assert!(Record::decode(b"{").is_none());
    }
}
