//! Load: the object into the kernel, from the warm start's record (`replay`) when it
//! serves, else with libbpf: opened, its settings written and maps sized, its programs
//! prepared (attach targets, multi-attach plans, shared bodies), loaded, and attached
//! (`attach`).

use super::attach::{self, Links};
use super::errors;
use super::loaded::Loaded;
use super::multi;
use super::replay;
use super::shared::{self, Body, Copy};
use super::{RuntimeError, Settings, present, present_targets};
use crate::check::program::Program;
use crate::check::resources::{self, Mode, ProgRole, Setting};
use libbpf_rs::{ObjectBuilder, OpenObject};
use std::collections::{HashMap, HashSet};

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

/// The maps' sizes this run asks for (`--max-keys`, `--max-in-flight`, `-b`), by map.
pub(super) struct Sizes {
    aggregation_maps: HashSet<String>,
    span_maps: HashSet<String>,
}

impl Sizes {
    pub(super) fn new(program: &Program) -> Sizes {
        Sizes {
            aggregation_maps: program
                .sessions
                .iter()
                .flat_map(|s| &s.aggregations)
                // A per-CPU array has its one slot whatever --max-keys says.
                .filter(|a| !a.per_cpu_array())
                .flat_map(|a| std::iter::once(a.map()).chain(a.max_map()))
                .collect(),
            span_maps: program
                .sessions
                .iter()
                .filter(|s| s.span.is_some())
                .flat_map(|s| [s.calls_map(0), s.span_depth_map()])
                .collect(),
        }
    }

    /// Map `name`'s size for this run, and what asked for it; `None`: the object's.
    pub(super) fn max_entries(
        &self,
        name: &str,
        settings: &Settings,
    ) -> Option<(u32, &'static str)> {
        if name == resources::EVENTS_MAP {
            Some((settings.ring_size, "sizing the ring buffer"))
        } else if let Some(n) = settings
            .max_keys
            .filter(|_| self.aggregation_maps.contains(name))
        {
            Some((n, "sizing an aggregation map (--max-keys)"))
        } else {
            settings
                .max_in_flight
                .filter(|_| self.span_maps.contains(name))
                .map(|n| (n, "sizing a span's map (--max-in-flight)"))
        }
    }
}

/// Writes this run's part of map `name`'s initial data (the settings, the arguments).
pub(super) fn initial_data(
    name: &str,
    data: &mut [u8],
    settings: &Settings,
) -> Result<(), RuntimeError> {
    if name == resources::SETTINGS_SECTION {
        let data = data
            .get_mut(..Setting::struct_size())
            .ok_or(RuntimeError::Missing(
                "struct fslat_settings in its section",
            ))?;
        write_settings(data, settings);
    } else if name == resources::ARGS_SECTION {
        data.get_mut(..settings.args.len())
            .ok_or(RuntimeError::Missing("struct fslat_args in its section"))?
            .copy_from_slice(&settings.args);
    }
    Ok(())
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
            .filter(|s| {
                !matches!(
                    settings.mode.of_session(s),
                    Mode::KprobeSession | Mode::KprobeEntry
                )
            })
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

/// Writes this run's settings into `fslat_settings` (the initial value of its section).
pub(super) fn write_settings(data: &mut [u8], settings: &Settings) {
    for s in Setting::ALL {
        let value = match s {
            Setting::TargetTgid => settings.target_tgid.to_ne_bytes().to_vec(),
            Setting::TargetCgroup => settings.target_cgroup.to_ne_bytes().to_vec(),
            Setting::UnderLevel => (settings.under_cgroup.map_or(0, |c| c.level))
                .to_ne_bytes()
                .to_vec(),
            Setting::UnderCgroup => (settings.under_cgroup.map_or(0, |c| c.id))
                .to_ne_bytes()
                .to_vec(),
        };
        let at = s.offset();
        if let Some(field) = data.get_mut(at..at + value.len()) {
            field.copy_from_slice(&value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::resources::Mode;

    #[test]
    fn settings_land_where_the_generated_struct_has_them() {
        let settings = Settings {
            target_tgid: 0x1122_3344,
            target_cgroup: 0x5566_7788_99aa_bbcc,
            under_cgroup: Some(crate::cgroups::Cgroup {
                id: 0x0102_0304_0506_0708,
                level: 3,
            }),
            ..super::super::tests::settings(Mode::Fsession)
        };
        // `struct fslat_settings { __u32 target_tgid; __u64 target_cgroup; __u32
        // under_level; __u64 under_cgroup; }`: each u64 is 8-aligned, after 4 bytes of
        // padding.
        assert_eq!(Setting::struct_size(), 32);
        let mut data = vec![0xffu8; 32];
        write_settings(&mut data, &settings);
        let mut expected = Vec::new();
        expected.extend(0x1122_3344u32.to_ne_bytes());
        expected.extend([0xff; 4]);
        expected.extend(0x5566_7788_99aa_bbccu64.to_ne_bytes());
        expected.extend(3u32.to_ne_bytes());
        expected.extend([0xff; 4]);
        expected.extend(0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(data, expected);
    }
}
