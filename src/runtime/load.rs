//! Load: the object into the kernel, from the warm start's record (`replay`) when it
//! serves, else with libbpf: opened, its settings written and maps sized, its programs
//! prepared (attach targets, multi-attach plans, shared bodies), loaded, and attached
//! (`attach`).

use super::attach::{self, Links};
use super::configure::{Sizes, initial_data};
use super::errors;
use super::loaded::Loaded;
use super::multi;
use super::replay;
use super::shared::{self, Body, Copy};
use super::{RuntimeError, Settings, present, present_targets};
use crate::check::program::Program;
use crate::check::resources::{self, ProgRole};
use libbpf_rs::{ObjectBuilder, OpenObject};
use std::collections::HashMap;

/// What is in the kernel and attached, and what keeps it so.
pub(super) struct Attached {
    pub _obj: Option<libbpf_rs::Object>,
    pub loaded: Loaded,
    pub links: Links,
    pub copies: Vec<Copy>,
}

/// Loads and attaches `object` (compiled from `program`) with this run's settings.
pub(super) fn load(
    program: &Program,
    object: &[u8],
    settings: &Settings,
) -> Result<Attached, RuntimeError> {
    match replayed(program, settings) {
        Some(r) => Ok(Attached {
            _obj: None,
            loaded: r.loaded,
            links: Links {
                _links: Vec::new(),
                _fd_links: r.links,
                _multi_links: Vec::new(),
                // A program with a profile is never replayed (`replay::eligible`).
                profiles: Default::default(),
            },
            copies: r.copies,
        }),
        None => with_libbpf(program, object, settings),
    }
}

/// What the warm start's load record made, when there is one and it serves.
fn replayed(program: &Program, settings: &Settings) -> Option<replay::Replayed> {
    settings
        .load_cache
        .as_ref()
        .filter(|_| replay::eligible(program, settings))
        .and_then(|cache| cache.get())
        .and_then(|bytes| replay::Record::decode(&bytes))
        .and_then(|record| match replay::load(&record, program, settings) {
            Ok(r) => {
                if settings.verbose {
                    crate::stderr_line!(
                        "fslat: loaded from the warm start's load record (the kernel's BTF not read)"
                    );
                }
                Some(r)
            }
            Err(why) => {
                if settings.verbose {
                    crate::stderr_line!(
                        "fslat: the warm start's load record did not load ({why}); loading with libbpf"
                    );
                }
                None
            }
        })
}

/// Opens, loads and attaches `object` with libbpf (the record of the load kept for the
/// next warm start, where it can serve).
fn with_libbpf(
    program: &Program,
    object: &[u8],
    settings: &Settings,
) -> Result<Attached, RuntimeError> {
    let (mut open, sized) = open(program, object, settings)?;
    let (bodies, plans) = prepare(&mut open, program, settings)?;
    let obj = open.load().map_err(|e| errors::load_error(e, program))?;
    // The load record for the next warm start: made now, while every map holds its
    // initial data; the shared bodies' copies are added as they load.
    let mut record = match settings
        .load_cache
        .as_ref()
        .filter(|_| replay::eligible(program, settings))
    {
        Some(_) => match replay::record(&obj, &sized) {
            Ok(record) => Some(record),
            Err(why) => {
                if settings.verbose {
                    crate::stderr_line!("fslat: no load record for the warm start: {why}");
                }
                None
            }
        },
        None => None,
    };
    let (links, copies) =
        attach::attach(&obj, program, settings, &plans, &bodies, record.as_mut())?;
    if let (Some(cache), Some(record)) = (&settings.load_cache, &record) {
        cache.put(&record.encode());
    }
    let loaded = Loaded::from_object(&obj).map_err(|e| {
        RuntimeError::libbpf("reading the loaded object")(libbpf_rs::Error::from(e))
    })?;
    Ok(Attached {
        _obj: Some(obj),
        loaded,
        links,
        copies,
    })
}

/// `object` opened, this run's settings and arguments written, its maps sized; with the
/// sizes the object had of the maps it sized (for the load record).
fn open(
    program: &Program,
    object: &[u8],
    settings: &Settings,
) -> Result<(OpenObject, HashMap<String, u32>), RuntimeError> {
    let sizes = Sizes::new(program);
    // The maps this run sizes, with their sizes in the object (for the load record).
    let mut sized = HashMap::new();
    let mut open = ObjectBuilder::default()
        .name("fslat")
        .map_err(RuntimeError::libbpf("naming the object"))?
        .open_memory(object)
        .map_err(RuntimeError::libbpf("opening the BPF object"))?;
    for mut map in open.maps_mut() {
        let name = map.name().to_string_lossy().into_owned();
        if let Some(data) = map.initial_value_mut() {
            initial_data(&name, data, settings)?;
        } else if name == resources::SETTINGS_SECTION || name == resources::ARGS_SECTION {
            return Err(RuntimeError::Missing("the settings' or arguments' section"));
        }
        if let Some((n, what)) = sizes.max_entries(&name, settings) {
            sized.insert(name, map.max_entries());
            map.set_max_entries(n).map_err(RuntimeError::libbpf(what))?;
        }
    }
    Ok((open, sized))
}

/// Sets each program's attach target, autoload and multi-attach plan; returns the
/// shared bodies (by program name) and the multi-attach plans (by session index).
#[allow(clippy::type_complexity)]
fn prepare(
    open: &mut OpenObject,
    program: &Program,
    settings: &Settings,
) -> Result<(HashMap<String, Body>, HashMap<usize, multi::Plan>), RuntimeError> {
    let progs = program.progs();
    // Multi-attach sessions: their attach types and function ids, from one read of the
    // kernel's BTF, by session index.
    let mut vmlinux = None;
    let mut plans = HashMap::new();
    let absent = |p: &resources::Prog| settings.absent.contains(&(p.session, p.target));
    // Shared bodies: each program's session and the functions it is loaded for, the first
    // by libbpf (its attach target set here), the others as copies after the load.
    let mut bodies: HashMap<String, Body> = HashMap::new();
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let found = progs.get(&name);
        if let Some((role, s)) = found
            .filter(|p| p.role != ProgRole::Multi)
            .and_then(|p| Some((p.role, program.sessions.get(p.session)?)))
            .filter(|(_, s)| settings.mode.shares_body(s))
        {
            let ts = present_targets(s, settings);
            let Some(&first) = ts.first() else {
                prog.set_autoload(false);
                continue;
            };
            prog.set_attach_target(0, Some(s.targets[first].func.clone()))
                .map_err(|e| errors::attach_error(e, program, &name))?;
            bodies.insert(
                name,
                Body {
                    session: s.index,
                    role,
                    targets: ts,
                    marks: Vec::new(),
                    marked: Vec::new(),
                },
            );
            continue;
        }
        if found.is_some_and(|p| p.role != ProgRole::Multi && absent(p)) {
            prog.set_autoload(false);
            continue;
        }
        let user = found
            .and_then(|p| program.sessions.get(p.session))
            .is_some_and(|s| s.user.is_some());
        if let Some(s) = found
            .filter(|p| p.role == ProgRole::Multi && !user)
            .and_then(|p| program.sessions.get(p.session))
            .filter(|s| !settings.mode.of_session(s).is_kprobe())
        {
            let failed = |reason: String| RuntimeError::MultiAttach {
                session: s.label.clone(),
                reason,
            };
            let btf = match &mut vmlinux {
                Some(btf) => btf,
                None => vmlinux.insert(crate::sys::bpf::VmlinuxBtf::load().map_err(failed)?),
            };
            let (funcs, cookies) = present(s, settings);
            let plan =
                multi::plan(btf, settings.mode.of_session(s), &funcs, cookies).map_err(failed)?;
            multi::prepare(&mut prog, &plan).map_err(|e| failed(e.to_string()))?;
            plans.insert(s.index, plan);
        }
    }
    drop(vmlinux);
    if !bodies.is_empty() {
        shared::prepare(open, program, &mut bodies)?;
    }
    Ok((bodies, plans))
}
