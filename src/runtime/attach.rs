//! Attach: each program libbpf loaded, to its functions (fexit before fentry), and a
//! shared body's copies, loaded and attached as its first is. (`replay` attaches what it
//! loads itself, in the same order.)

use super::RuntimeError;
use super::errors;
use super::multi;
use super::shared::{self, Body, Copy};
use super::user;
use super::{Settings, present};
use crate::check::program::Program;
use crate::check::resources::{self, Mode, ProgRole};
use crate::sys::bpf::KprobeAt;
use crate::sys::load::Record;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};

/// What keeps the programs attached: dropping it detaches them (all but a shared body's
/// copies, whose links are in their `Copy`).
pub(super) struct Links {
    pub _links: Vec<libbpf_rs::Link>,
    pub _fd_links: Vec<OwnedFd>,
    pub _multi_links: Vec<OwnedFd>,
    /// The profiles' perf events, read for `lost` after the links go.
    pub profiles: super::profile::Profiles,
}

/// A kprobe-session session's (or an entry-only or return-only one's) program, on its
/// functions.
fn attach_kprobes(
    prog: &libbpf_rs::ProgramMut,
    s: &crate::check::program::Session,
    settings: &Settings,
) -> Result<libbpf_rs::Link, RuntimeError> {
    let (funcs, cookies) = present(s, settings);
    let at = kprobe_at(settings.mode.of_session(s));
    crate::sys::bpf::attach_kprobes(prog, &funcs, &cookies, at).map_err(|e| {
        RuntimeError::KprobeAttach {
            session: s.label.clone(),
            reason: e.to_string(),
        }
    })
}

/// Where a kprobe mode's program runs on its kprobe_multi link.
pub(super) fn kprobe_at(mode: Mode) -> KprobeAt {
    match mode {
        Mode::KprobeSession => KprobeAt::Session,
        Mode::KprobeReturn => KprobeAt::Return,
        _ => KprobeAt::Entry,
    }
}

/// Attaches the programs of `obj`, loaded by libbpf: `plans` are the multi-attach
/// sessions' (by session index), `bodies` the shared bodies' (by program name); the
/// copies it loads are added to the warm start's `record`.
pub(super) fn attach(
    obj: &libbpf_rs::Object,
    program: &Program,
    settings: &Settings,
    plans: &HashMap<usize, multi::Plan>,
    bodies: &HashMap<String, Body>,
    mut record: Option<&mut Record>,
) -> Result<(Links, Vec<Copy>), RuntimeError> {
    let progs = program.progs();
    let absent = |p: &resources::Prog| settings.absent.contains(&(p.session, p.target));
    let copy_ids = shared::btf_ids(program, bodies)?;
    // fentry mode: every fexit program before any fentry program, so that each entry
    // pushed has its return attached (a call returning in between would leave its entry
    // behind). A call already in flight at attach pushed nothing: its return finds its
    // task's stack empty.
    let mut links = Vec::new();
    let mut multi_links = Vec::new();
    let mut copies: Vec<Copy> = Vec::new();
    let mut profiles = super::profile::Profiles::default();
    let mut usdt = Vec::new();
    for exits in [true, false] {
        for prog in obj.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let found = progs.get(&name);
            if found.is_some_and(|p| p.role == ProgRole::Exit) != exits
                || found.is_some_and(|p| p.role != ProgRole::Multi && absent(p))
            {
                continue;
            }
            if let Some((s, point)) = found.and_then(|p| {
                let s = program.sessions.get(p.session)?;
                Some((s, user::usdt_point(s, p.role, &name)?))
            }) {
                let pid = settings.target_tgid;
                links.extend(user::attach_usdt(&prog, s, point, pid, &mut usdt)?);
                continue;
            }
            if let Some((p, s)) = found.and_then(|p| {
                program
                    .sessions
                    .get(p.session)
                    .filter(|s| s.user.is_some())
                    .map(|s| (p, s))
            }) {
                links.push(user::attach(
                    &prog,
                    s,
                    p.role,
                    p.target,
                    settings.target_tgid,
                )?);
                continue;
            }
            if let Some(s) = found
                .filter(|p| p.role == ProgRole::Multi)
                .and_then(|p| program.sessions.get(p.session))
                .filter(|s| settings.mode.of_session(s).is_kprobe())
            {
                links.push(attach_kprobes(&prog, s, settings)?);
                continue;
            }
            if let Some(s) = found
                .filter(|p| p.role == ProgRole::Multi)
                .and_then(|p| program.sessions.get(p.session))
            {
                let link = plans
                    .get(&s.index)
                    .ok_or(RuntimeError::Missing("a multi-attach session's plan"))
                    .and_then(|plan| {
                        multi::attach(prog.as_fd(), plan).map_err(|e| RuntimeError::MultiAttach {
                            session: s.label.clone(),
                            reason: e.to_string(),
                        })
                    })?;
                multi_links.push(link);
                continue;
            }
            if let Some(s) = found
                .and_then(|p| program.sessions.get(p.session))
                .filter(|s| s.profile.is_some())
            {
                links.extend(profiles.attach(&prog, s)?);
                continue;
            }
            let link = prog
                .attach()
                .map_err(|e| errors::attach_error(e, program, &name))?;
            links.push(link);
            if let Some(body) = bodies.get(&name) {
                copies.extend(shared::load_copies(
                    &prog,
                    &name,
                    body,
                    program,
                    &copy_ids,
                    record.as_deref_mut(),
                )?);
            }
        }
    }
    Ok((
        Links {
            _links: links,
            _fd_links: Vec::new(),
            _multi_links: multi_links,
            profiles,
        },
        copies,
    ))
}
