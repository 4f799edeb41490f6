//! What the kernel's BPF can do, as far as fslat's programs care. The one place that
//! decides it: each feature is recognised by a name in the kernel's BTF (an enum value of
//! the UAPI, or a kernel function that came with it), so `--btf FILE` describes another
//! kernel as fully as `/sys/kernel/btf/vmlinux` describes this one.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// fsession programs: one program at entry and return (Linux 7.0).
    Fsession,
    /// The `bpf_loop` helper (5.17): `path()` walks dentries with it.
    BpfLoop,
    /// Task-local storage for tracing programs (5.11): the fallback's per-task call stack.
    TaskStorage,
    /// BPF atomics with fetch and compare-and-swap (5.12): exact min and max under
    /// concurrent updates. 5.10 has only the plain atomic add.
    Atomics,
    /// uprobe session programs: one program at a user function's entry and return
    /// (Linux 6.13).
    UprobeSession,
    /// One uprobe (or uretprobe) program on many user functions through one link (6.6).
    UprobeMulti,
    /// The `bpf_find_vma` helper (5.17): each user frame is resolved to its file and the
    /// offset in it when the stack is captured.
    FindVma,
    /// kprobe session programs: one program at a kernel function's entry and return,
    /// attached through a kprobe_multi link (Linux 6.10).
    KprobeSession,
    /// Sleepable uprobe programs (Linux 6.0): a user-space program that reads a user
    /// string may fault its page in (`bpf_copy_from_user`).
    SleepableUprobe,
}

/// How a feature is named, which kernel brought it, what fslat uses it for and the BTF
/// enum value that shows it.
pub struct FeatureInfo {
    pub feature: Feature,
    pub name: &'static str,
    pub since: &'static str,
    pub used_for: &'static str,
    /// What fslat does on a kernel without it.
    pub without: &'static str,
    /// The enum whose value shows the feature; `FUNC` when `btf_value` is a kernel
    /// function's name instead.
    pub btf_enum: &'static str,
    pub btf_value: &'static str,
}

/// `FeatureInfo::btf_enum` of a feature shown by a kernel function (BTF `FUNC`).
pub const FUNC: &str = "FUNC";

pub const FEATURES: [FeatureInfo; 9] = [
    FeatureInfo {
        feature: Feature::Fsession,
        name: "fsession",
        since: "7.0",
        used_for: "one program per session at entry and return",
        without: "each session runs as an fentry + fexit pair",
        btf_enum: "bpf_attach_type",
        btf_value: "BPF_TRACE_FSESSION",
    },
    FeatureInfo {
        feature: Feature::BpfLoop,
        name: "bpf_loop",
        since: "5.17",
        used_for: "path()",
        without: "scripts that use path() are refused",
        btf_enum: "bpf_func_id",
        btf_value: "BPF_FUNC_loop",
    },
    FeatureInfo {
        feature: Feature::TaskStorage,
        name: "task_storage",
        since: "5.11",
        used_for: "fentry mode's per-task stack of calls in flight",
        without: "fentry mode keeps the stacks in a map keyed by thread id",
        btf_enum: "bpf_func_id",
        btf_value: "BPF_FUNC_task_storage_get",
    },
    // The atomic instructions are not named in BTF; `bpf_check_mtu` came with them in 5.12.
    FeatureInfo {
        feature: Feature::Atomics,
        name: "atomics",
        since: "5.12",
        used_for: "exact min() and max() under concurrent updates of one key",
        without: "min() and max() are plain stores: exact unless two CPUs update one key at the same instant",
        btf_enum: "bpf_func_id",
        btf_value: "BPF_FUNC_check_mtu",
    },
    FeatureInfo {
        feature: Feature::UprobeSession,
        name: "uprobe_session",
        since: "6.13",
        used_for: "one program per user-space session at entry and return (mode uprobe-session)",
        without: "each user-space session runs as a uprobe + uretprobe pair",
        btf_enum: "bpf_attach_type",
        btf_value: "BPF_TRACE_UPROBE_SESSION",
    },
    FeatureInfo {
        feature: Feature::UprobeMulti,
        name: "uprobe_multi",
        since: "6.6",
        used_for: "a user-space session's functions through one link per direction",
        without: "one uprobe and one uretprobe per user-space function",
        btf_enum: "bpf_attach_type",
        btf_value: "BPF_TRACE_UPROBE_MULTI",
    },
    FeatureInfo {
        feature: Feature::FindVma,
        name: "find_vma",
        since: "5.17",
        used_for: "ustack: each frame's file and offset, read when the stack is captured",
        without: "ustack reads a process's mappings from /proc when it first shows up: a process gone before that is left as addresses",
        btf_enum: "bpf_func_id",
        btf_value: "BPF_FUNC_find_vma",
    },
    FeatureInfo {
        feature: Feature::KprobeSession,
        name: "kprobe_session",
        since: "6.10",
        used_for: "kernel sessions as kprobe session programs (mode kprobe-session): exact counts on a preemptible kernel",
        without: "kernel sessions run on BPF trampolines (fsession or fentry)",
        btf_enum: "bpf_attach_type",
        btf_value: "BPF_TRACE_KPROBE_SESSION",
    },
    // No UAPI name came with sleepable uprobes; the function that frees a program array
    // of sleepable programs did, in the same commit ("bpf: implement sleepable uprobes
    // by chaining gps"), and is in every BTF since.
    FeatureInfo {
        feature: Feature::SleepableUprobe,
        name: "sleepable_uprobe",
        since: "6.0",
        used_for: "str() of user memory the process never touched: a user-space session that reads a user string runs sleepable and faults the page in",
        without: "such a string reads as <unread>, counted in str_unread",
        btf_enum: FUNC,
        btf_value: "bpf_prog_array_free_sleepable",
    },
];

impl Feature {
    pub fn info(self) -> &'static FeatureInfo {
        FEATURES
            .iter()
            .find(|i| i.feature == self)
            .expect("every feature is in FEATURES")
    }
}

/// The features one kernel has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Features {
    pub fsession: bool,
    pub bpf_loop: bool,
    pub task_storage: bool,
    pub atomics: bool,
    pub uprobe_session: bool,
    pub uprobe_multi: bool,
    #[serde(default)]
    pub find_vma: bool,
    #[serde(default)]
    pub kprobe_session: bool,
    #[serde(default)]
    pub sleepable_uprobe: bool,
}

impl Features {
    /// Every feature: what fslat assumes of a kernel it knows nothing about.
    pub fn all() -> Features {
        Features {
            fsession: true,
            bpf_loop: true,
            task_storage: true,
            atomics: true,
            uprobe_session: true,
            uprobe_multi: true,
            find_vma: true,
            kprobe_session: true,
            sleepable_uprobe: true,
        }
    }

    /// Decides each feature with `has(enum, value)`: whether the kernel's BTF has that
    /// enum value (or, for `FUNC`, that function).
    pub fn from_btf(has: impl Fn(&str, &str) -> bool) -> Features {
        let mut f = Features::default();
        for i in &FEATURES {
            if has(i.btf_enum, i.btf_value) {
                f.set(i.feature, true);
            }
        }
        f
    }

    pub fn has(&self, f: Feature) -> bool {
        match f {
            Feature::Fsession => self.fsession,
            Feature::BpfLoop => self.bpf_loop,
            Feature::TaskStorage => self.task_storage,
            Feature::Atomics => self.atomics,
            Feature::UprobeSession => self.uprobe_session,
            Feature::UprobeMulti => self.uprobe_multi,
            Feature::FindVma => self.find_vma,
            Feature::KprobeSession => self.kprobe_session,
            Feature::SleepableUprobe => self.sleepable_uprobe,
        }
    }

    pub fn set(&mut self, f: Feature, on: bool) {
        match f {
            Feature::Fsession => self.fsession = on,
            Feature::BpfLoop => self.bpf_loop = on,
            Feature::TaskStorage => self.task_storage = on,
            Feature::Atomics => self.atomics = on,
            Feature::UprobeSession => self.uprobe_session = on,
            Feature::UprobeMulti => self.uprobe_multi = on,
            Feature::FindVma => self.find_vma = on,
            Feature::KprobeSession => self.kprobe_session = on,
            Feature::SleepableUprobe => self.sleepable_uprobe = on,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Fixture, KernelTypes};

    /// Each feature is read back from BTF exactly as the fixture was built with it.
    #[test]
    fn features_come_from_btf() {
        assert_eq!(Fixture::new().features(), Features::all());
        assert_eq!(
            Fixture::with_features(Features::default()).features(),
            Features::default()
        );
        for i in &FEATURES {
            let mut only = Features::default();
            only.set(i.feature, true);
            assert_eq!(Fixture::with_features(only).features(), only, "{}", i.name);
            let mut all_but = Features::all();
            all_but.set(i.feature, false);
            assert_eq!(
                Fixture::with_features(all_but).features(),
                all_but,
                "{}",
                i.name
            );
        }
        assert!(!Fixture::without_fsession().has_fsession());
    }

    /// The names in the string section decide what the walk over the enums decides.
    #[test]
    fn features_by_names_agree_with_the_parsed_enums() {
        use crate::btf::Btf;
        let mut kernels = vec![Fixture::new(), Fixture::with_features(Features::default())];
        for i in &FEATURES {
            let mut all_but = Features::all();
            all_but.set(i.feature, false);
            kernels.push(Fixture::with_features(all_but));
        }
        kernels.push(Fixture::without_fsession());
        for k in kernels {
            let bytes = k.bytes().to_vec();
            let parsed = Btf::from_bytes(bytes.clone()).expect("the fixture parses");
            let by_names = Btf::features_by_names(&bytes).expect("a BTF header");
            assert_eq!(by_names, (parsed.features(), parsed.has_fsession_multi()));
            assert_eq!(by_names.0, k.features());
        }
        assert!(Btf::features_by_names(b"not BTF").is_err());
    }
}
