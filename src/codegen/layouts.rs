//! What the whole object declares and both sides read: the map and section names, the
//! settings, arguments and counters structs, the numbers `bpf-runtime/` shares with Rust,
//! the script's structs, each event and each aggregation map.

use super::ctypes::{self, c_int};
use super::data::*;
use super::{AGG_ENTRIES, PCT_ENTRIES};
use crate::check::counters;
use crate::check::program::*;
use crate::check::resources::{self, Setting};

/// The names of the maps and sections the templates and fslat.bpf.h define.
pub(super) fn map_names() -> MapNames {
    MapNames {
        events: resources::EVENTS_MAP,
        counters: resources::COUNTERS_MAP,
        kstacks: resources::KSTACKS_MAP,
        kstacks_2: resources::KSTACKS_MAP_2,
        ustacks: resources::USTACKS_MAP,
        ustacks_2: resources::USTACKS_MAP_2,
        stack_second: resources::STACK_SECOND,
        ustack_walked: resources::USTACK_WALKED,
        ustack_tgids: resources::USTACK_TGIDS_MAP,
        interval: resources::INTERVAL_MAP,
        path_scratch: resources::PATH_SCRATCH_MAP,
        uframes: resources::UFRAMES_MAP,
        ufiles: resources::UFILES_MAP,
        ustack_scratch: resources::USTACK_SCRATCH_MAP,
        sched: resources::SCHED_MAP,
        multi_section: resources::MULTI_SECTION,
    }
}

/// `ustack`'s resolved frames, on a kernel with `bpf_find_vma`.
pub(super) fn ustack_files(program: &Program) -> Option<UstackFilesData> {
    (program.uses_ustack && program.features.find_vma).then_some(UstackFilesData {
        frames_entries: resources::UFRAMES_ENTRIES,
        files_entries: resources::UFILES_ENTRIES,
        depth: resources::UFRAME_DEPTH,
        frame_size: resources::UFRAME_SIZE,
        frame_offset_at: resources::UFRAME_OFFSET_AT,
        path_at: resources::UFILE_PATH_AT,
        path_cap: resources::UFILE_PATH_CAP,
    })
}

/// `ustack`'s copies, with `--ustack-bytes`.
pub(super) fn ustack_copy(program: &Program) -> Option<UstackCopyData> {
    let prealloc = program.sessions.iter().any(|s| s.profile.is_some());
    (program.uses_ustack && program.ustack_bytes > 0).then_some(UstackCopyData {
        bytes: program.ustack_bytes,
        prealloc,
        entries: if prealloc {
            resources::UCOPIES_PREALLOC_ENTRIES
        } else {
            resources::UCOPIES_ENTRIES
        },
        map: resources::UCOPIES_MAP,
        scratch: resources::UCOPY_SCRATCH_MAP,
        ip_at: resources::UCOPY_IP_AT,
        sp_at: resources::UCOPY_SP_AT,
        bp_at: resources::UCOPY_BP_AT,
        len_at: resources::UCOPY_LEN_AT,
        nvmas_at: resources::UCOPY_NVMAS_AT,
        vmas_at: resources::UCOPY_VMAS_AT,
        vma_size: resources::UCOPY_VMA_SIZE,
        vma_file_at: resources::UCOPY_VMA_FILE_AT,
        vmas: resources::UCOPY_VMAS,
        bytes_at: resources::UCOPY_BYTES_AT,
    })
}

/// `ustack` walked in the kernel: asked for, with copies to fall back on, and a kernel
/// with `bpf_loop` and `bpf_find_vma`.
pub(super) fn ustack_walk(program: &Program) -> Option<UstackWalkData> {
    let f = &program.features;
    (program.ustack_walk && program.ustack_bytes > 0 && f.bpf_loop && f.find_vma).then(|| {
        UstackWalkData {
            rows_map: resources::UROWS_MAP,
            procs_map: resources::UPROCS_MAP,
            walks_map: resources::UWALKS_MAP,
            slots_map: resources::USLOTS_MAP,
            scratch_map: resources::UWALK_SCRATCH_MAP,
            turns: resources::UWALK_TURNS,
            rows_entries: resources::UROWS_ENTRIES,
            row_steps: resources::UROW_STEPS,
            row_size: resources::UROW_SIZE,
            procs_entries: resources::UPROCS_ENTRIES,
            maps: resources::UWALK_MAPS,
            map_steps: resources::UWALK_MAP_STEPS,
            map_size: resources::UMAP_SIZE,
            maps_at: resources::UPROC_MAPS_AT,
            gen_at: resources::UPROC_GEN_AT,
            error: format!("{:#x}ULL", resources::UWALK_ERROR),
            kinds: [
                resources::UROW_GAP,
                resources::UROW_SP,
                resources::UROW_BP,
                resources::UROW_END,
                resources::UROW_BAD,
            ],
        }
    })
}

/// `struct fslat_settings`, what `-p` and `-c` write before load.
pub(super) fn settings() -> SettingsData {
    SettingsData {
        section: resources::SETTINGS_SECTION,
        fields: Setting::ALL
            .iter()
            .map(|s| LayoutField {
                name: s.field(),
                decl: format!("{} {}", c_int(s.size() as u32, false), s.field()),
                offset: s.offset(),
                about: s.about(),
            })
            .collect(),
        size: Setting::struct_size(),
    }
}

/// `struct fslat_args`, the run-time arguments; none when they are all constants.
pub(super) fn args(program: &Program) -> Option<ArgsData> {
    (!program.args.is_empty()).then(|| ArgsData {
        section: resources::ARGS_SECTION,
        fields: program
            .arg_fields()
            .iter()
            .map(|f| ArgFieldData {
                name: resources::arg_field(f.arg.n),
                decl: f.decl(),
                offset: f.offset,
                about: f.arg.name(),
            })
            .collect(),
        size: program.args_size(),
    })
}

/// `struct fslat_counters`, from `check::counters`.
pub(super) fn counters() -> Vec<LayoutField> {
    counters::in_bpf()
        .map(|c| LayoutField {
            name: c.name,
            decl: format!("__u64 {}", c.name),
            offset: c.offset().unwrap_or(0),
            about: c.about,
        })
        .collect()
}

/// Every number both sides use; the generated C checks each (`templates/layouts`).
pub(super) fn numbers() -> Vec<Number> {
    use crate::aggregate::buckets;
    let n = |name, value: u64, from| Number {
        name,
        value: value.to_string(),
        from,
    };
    vec![
        n(
            "FSLAT_NS_PER_US",
            buckets::NS_PER_US,
            "aggregate::buckets::NS_PER_US",
        ),
        n(
            "FSLAT_HIST_SLOTS",
            buckets::HIST_SLOTS as u64,
            "aggregate::buckets::HIST_SLOTS",
        ),
        n(
            "FSLAT_PCT_SHIFT",
            u64::from(buckets::PCT_SHIFT),
            "aggregate::buckets::PCT_SHIFT",
        ),
        n(
            "FSLAT_PCT_SLOTS",
            buckets::PCT_SLOTS as u64,
            "aggregate::buckets::PCT_SLOTS",
        ),
        n(
            "FSLAT_PATH_CAP",
            u64::from(crate::check::PATH_CAP),
            "check::PATH_CAP",
        ),
        n(
            "FSLAT_FN_MARK",
            resources::FN_MARK as u64,
            "check::resources::FN_MARK",
        ),
    ]
}

/// The structs the script's types name, in declaration order.
pub(super) fn structs(program: &Program) -> Vec<StructData> {
    program
        .structs
        .iter()
        .enumerate()
        .map(|(i, s)| StructData {
            c_name: ctypes::struct_name(&s.name),
            members: s
                .members
                .iter()
                .map(|m| ctypes::member_decl(m, &format!("fslat_enum_{i}_{}", m.name)))
                .collect(),
        })
        .collect()
}

/// Each session's aggregation maps; a profile's are preallocated.
pub(super) fn aggregation_maps(program: &Program) -> Vec<AggMapData> {
    program
        .sessions
        .iter()
        .flat_map(|s| {
            let prealloc = s.profile.is_some();
            s.aggregations
                .iter()
                .map(move |a| agg_map_data(a, prealloc))
        })
        .collect()
}

pub fn field_member(i: usize) -> String {
    format!("f{i}")
}

fn field_decl(kind: FieldKind, member: &str) -> String {
    match kind {
        FieldKind::Int(s) | FieldKind::Formatted(s, _) => {
            format!("{} {member}", c_int(u32::from(s.size), s.signed))
        }
        FieldKind::Bool => format!("__u8 {member}"),
        FieldKind::Duration | FieldKind::Ptr => format!("__u64 {member}"),
        FieldKind::Stack(_) | FieldKind::CgroupName(_) => format!("__u64 {member}"),
        FieldKind::Str { cap } => format!("char {member}[{cap}]"),
    }
}

pub(super) fn event_data(e: &EventSchema) -> EventData {
    EventData {
        id: e.id,
        label: e.session.clone(),
        size: e.size,
        fields: e
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| FieldData {
                name: f.name.clone(),
                member: field_member(i),
                decl: field_decl(f.kind, &field_member(i)),
                offset: f.offset,
            })
            .collect(),
    }
}

/// `items` in their first order, each once.
pub(super) fn unique<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn agg_map_data(a: &Aggregation, prealloc: bool) -> AggMapData {
    AggMapData {
        id: a.id,
        map: a.map(),
        title: a.title.replace("*/", "* /"),
        key_fields: if a.keys.is_empty() {
            vec!["__u32 none".into()]
        } else {
            a.keys
                .iter()
                .enumerate()
                .map(|(i, k)| field_decl(k.kind, &field_member(i)))
                .collect()
        },
        key_size: a.key_size,
        value_type: a.func.c_value(&a.spec()).ty,
        per_cpu_array: a.per_cpu_array(),
        max_map: a.max_map(),
        value_decl: a.func.c_decl(&a.spec()),
        entries: if a.func.per_cpu_max() {
            PCT_ENTRIES
        } else {
            AGG_ENTRIES
        },
        prealloc,
    }
}
