//! What this run writes into the object before it loads, by libbpf or by the warm start's
//! replay alike: the maps' sizes (`--max-keys`, `--max-in-flight`, `--max-stacks`, `-b`)
//! and the initial data of the settings and arguments sections.

use super::{RuntimeError, Settings};
use crate::check::program::Program;
use crate::check::resources::{self, Setting};
use std::collections::HashSet;

/// The maps' sizes this run asks for (`--max-keys`, `--max-in-flight`, `--max-stacks`,
/// `-b`), by map.
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
        } else if let Some(n) = settings.max_stacks.filter(|_| {
            [
                resources::KSTACKS_MAP,
                resources::KSTACKS_MAP_2,
                resources::USTACKS_MAP,
                resources::USTACKS_MAP_2,
            ]
            .contains(&name)
        }) {
            Some((n, "sizing a stack map (--max-stacks)"))
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
