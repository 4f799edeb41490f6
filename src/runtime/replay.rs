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
//! Every kernel session is recorded: a program on one function, a shared body's copies
//! (runtime/shared.rs; each with its function), a kprobe session on several. Multi-attach
//! tracing links (their function ids) and user-space probes (their offsets) are looked up
//! at each start, and load through libbpf.

use super::configure::{Sizes, initial_data};
use super::loaded::Loaded;
use super::shared::Copy;
use super::{Settings, present};
use crate::check::program::Program;
use crate::check::resources::{Mode, Prog, ProgRole};
use crate::sys::load::MadeProg;
pub use crate::sys::load::{Record, record};
use std::os::fd::{AsFd, OwnedFd};

/// Whether `program` run with `settings` loads the same way at every start: programs on
/// one kernel function each (a shared body's copies among them), or on several by a
/// kprobe session. A multi-attach tracing link's function ids and user-space probes'
/// offsets (USDT probes' too) are looked up at each start (`record` refuses any other kind of program).
pub fn eligible(program: &Program, settings: &Settings) -> bool {
    // The scheduler hooks belong to no session: libbpf attaches them by their section.
    settings.absent.is_empty()
        && !program.uses_sched
        && program.sessions.iter().all(|s| {
            s.user.is_none()
                && s.profile.is_none()
                && !s.offcpu
                && !s.at_usdt()
                && !matches!(
                    settings.mode.of_session(s),
                    Mode::FsessionMulti | Mode::FexitMulti
                )
        })
}

/// Maps made, programs loaded and attached from a record: what `run` reads, the links,
/// and the shared bodies' copies.
pub struct Replayed {
    pub loaded: Loaded,
    pub links: Vec<OwnedFd>,
    pub copies: Vec<Copy>,
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
    let roles = program.progs();
    // Each program's role, session and function: a copy's are its body's, for its function.
    let prog_of = |p: &MadeProg| -> Option<Prog> {
        match &p.copy_of {
            Some((body, target)) => roles.get(body).map(|b| Prog {
                target: *target,
                ..*b
            }),
            None => roles.get(&p.name).copied(),
        }
    };
    let mut links = Vec::new();
    let mut copies = Vec::new();
    let mut attached: Vec<Option<(Prog, OwnedFd)>> = made.progs.iter().map(|_| None).collect();
    for exits in [true, false] {
        for (i, p) in made.progs.iter().enumerate() {
            let Some(prog) = prog_of(p) else { continue };
            if (prog.role == ProgRole::Exit) != exits {
                continue;
            }
            let s = program
                .sessions
                .get(prog.session)
                .ok_or("a program of no session")?;
            let link = match prog.role {
                ProgRole::Multi => {
                    let (funcs, cookies) = present(s, settings);
                    let at = super::attach::kprobe_at(settings.mode.of_session(s));
                    crate::sys::load::attach_kprobes(
                        p.fd.as_fd(),
                        p.attach_type,
                        &funcs,
                        &cookies,
                        at,
                    )
                }
                _ => crate::sys::bpf::link_tracing(&p.fd, p.attach_type),
            }
            .map_err(|e| format!("attaching {}: {e}", p.name))?;
            attached[i] = Some((prog, link));
        }
    }
    let mut progs = Vec::new();
    for (p, a) in made.progs.into_iter().zip(attached) {
        match (p.copy_of.is_some(), a) {
            (true, Some((prog, link))) => copies.push(Copy {
                name: p.name,
                prog,
                fd: p.fd,
                link: Some(link),
            }),
            (_, a) => {
                links.extend(a.map(|(_, link)| link));
                progs.push((p.name, p.fd));
            }
        }
    }
    Ok(Replayed {
        loaded: Loaded::new(made.maps, progs),
        links,
        copies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eligible_in(script: &str, mode: Mode) -> bool {
        let (program, _) = crate::compile(script, &crate::btf::Fixture::new(), mode)
            .unwrap_or_else(|d| panic!("{d:?}"));
        eligible(&program, &super::super::tests::settings(mode))
    }

    /// One function a program (a shared body's copies too), or several in one kprobe
    /// session: the same system calls at every start. A multi-attach link needs ids
    /// looked up.
    #[test]
    fn replays_what_loads_the_same_way_every_time() {
        let one = "session vfs_read { count() }";
        let several = "session vfs_read, vfs_write { count() by func }";
        assert!(eligible_in(one, Mode::Fsession));
        assert!(eligible_in(one, Mode::Fentry));
        assert!(eligible_in(one, Mode::KprobeSession));
        assert!(eligible_in(several, Mode::KprobeSession));
        assert!(eligible_in(several, Mode::Fentry));
        assert!(eligible_in(several, Mode::Fsession));
        assert!(!eligible_in(several, Mode::FsessionMulti));
    }

    #[test]
    fn a_record_of_another_format_is_not_replayed() {
        let text = r#"{"format":0,"btf":"","maps":[],"progs":[]}"#;
        assert!(Record::decode(text.as_bytes()).is_none());
        let format = crate::sys::load::FORMAT;
        let now = text.replace(r#""format":0"#, &format!(r#""format":{format}"#));
        assert!(Record::decode(now.as_bytes()).is_some());
        assert!(Record::decode(b"{").is_none());
    }
}
