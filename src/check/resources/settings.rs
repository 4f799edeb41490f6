//! `struct fslat_settings`: what fslat writes into the object before load (`-p`, `-c`,
//! `--cgroup`), its section and each field's place.

/// The section of `fslat_settings`, the settings fslat writes before load: `const
/// volatile`, so the verifier prunes what a setting of 0 ("off") disables.
pub const SETTINGS_SECTION: &str = ".rodata.fslat";

/// A field of `struct fslat_settings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `-p` (and `-c` without cgroup v2): the one process traced; 0 traces every process.
    TargetTgid,
    /// `-c`: the cgroup v2 id whose tasks are traced; 0 traces every cgroup.
    TargetCgroup,
    /// `--cgroup PATH`: PATH's depth below the root (its ancestor level).
    UnderLevel,
    /// `--cgroup PATH`: PATH's cgroup id; tasks in it or below it are traced; 0: off.
    UnderCgroup,
}

impl Setting {
    pub const ALL: [Setting; 4] = [
        Setting::TargetTgid,
        Setting::TargetCgroup,
        Setting::UnderLevel,
        Setting::UnderCgroup,
    ];

    pub fn field(self) -> &'static str {
        match self {
            Setting::TargetTgid => "target_tgid",
            Setting::TargetCgroup => "target_cgroup",
            Setting::UnderLevel => "under_level",
            Setting::UnderCgroup => "under_cgroup",
        }
    }

    /// What it is, for the comment in the C.
    pub fn about(self) -> &'static str {
        match self {
            Setting::TargetTgid => "-p: the one process traced; 0 traces every process",
            Setting::TargetCgroup => "-c: the cgroup v2 id traced; 0 traces every cgroup",
            Setting::UnderLevel => "--cgroup: the depth of its cgroup below the root",
            Setting::UnderCgroup => "--cgroup: the cgroup id traced, with all below it; 0: off",
        }
    }

    /// Every setting is an unsigned integer of this many bytes.
    pub fn size(self) -> usize {
        match self {
            Setting::TargetTgid | Setting::UnderLevel => 4,
            Setting::TargetCgroup | Setting::UnderCgroup => 8,
        }
    }

    /// Where it sits in the struct (each is aligned to its size, in the order of `ALL`).
    pub fn offset(self) -> usize {
        let mut at: usize = 0;
        for s in Setting::ALL {
            at = at.div_ceil(s.size()) * s.size();
            if s == self {
                break;
            }
            at += s.size();
        }
        at
    }

    /// The size of the whole struct.
    pub fn struct_size() -> usize {
        let end = Setting::ALL
            .iter()
            .map(|s| s.offset() + s.size())
            .max()
            .unwrap_or(0);
        let align = Setting::ALL.iter().map(|s| s.size()).max().unwrap_or(1);
        end.div_ceil(align) * align
    }
}
