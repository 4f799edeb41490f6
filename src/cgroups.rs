//! Cgroup v2 names. The kernel side only ever sees the 8-byte cgroup id (what
//! `bpf_get_current_cgroup_id` returns: the inode number of the cgroup's directory);
//! this module turns ids into paths and paths into the systemd unit, container and pod
//! they name (`cgroup_path`, `unit`, `container`, `pod`), and paths into ids for
//! `cgroup == "PATH"`, `under("PATH")` and `--cgroup PATH`.
//!
//! Paths are learnt by walking the hierarchy: once at the first lookup, then again for an
//! id not seen yet. What was learnt is kept for the whole run, so a cgroup removed after
//! it was seen keeps its name (the runtime looks at aggregation keys while tracing, see
//! `runtime::run`, so a cgroup counted and removed before the print is still named).

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};

/// What a cgroup-name builtin shows of the task's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CgroupView {
    /// `cgroup_path`: `/system.slice/nginx.service`.
    Path,
    /// `unit`: the innermost `*.service` or `*.scope` of the path.
    Unit,
    /// `container`: the 64-hex container id of docker, containerd/CRI, CRI-O or podman.
    Container,
    /// `pod`: the Kubernetes pod UID of a `kubepods` path.
    Pod,
}

impl CgroupView {
    pub const ALL: [CgroupView; 4] = [
        CgroupView::Path,
        CgroupView::Unit,
        CgroupView::Container,
        CgroupView::Pod,
    ];

    /// The builtin's name in a script.
    pub fn name(self) -> &'static str {
        match self {
            CgroupView::Path => "cgroup_path",
            CgroupView::Unit => "unit",
            CgroupView::Container => "container",
            CgroupView::Pod => "pod",
        }
    }

    /// What this view shows of `path` (a path below the mount, starting with `/`); empty
    /// where the path has none.
    pub fn of(self, path: &str) -> String {
        let parts = || path.split('/').filter(|p| !p.is_empty()).rev();
        match self {
            CgroupView::Path => path.to_string(),
            CgroupView::Unit => parts()
                .find(|p| p.ends_with(".service") || p.ends_with(".scope"))
                .unwrap_or_default()
                .to_string(),
            CgroupView::Container => parts().find_map(container_id).unwrap_or_default(),
            CgroupView::Pod if path.contains("kubepods") => {
                parts().find_map(pod_uid).unwrap_or_default()
            }
            CgroupView::Pod => String::new(),
        }
    }
}

/// `docker-<id>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`,
/// `libpod-<id>.scope` (systemd cgroup driver) or a bare `<id>` (cgroupfs driver: docker's
/// `/docker/<id>`, the kubelet's `/kubepods/burstable/pod<uid>/<id>`).
fn container_id(part: &str) -> Option<String> {
    let id = part.strip_suffix(".scope").unwrap_or(part);
    let id = ["docker-", "cri-containerd-", "crio-", "libpod-"]
        .iter()
        .find_map(|p| id.strip_prefix(p))
        .unwrap_or(id);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
}

/// `kubepods-burstable-pod<uid with _>.slice` (systemd driver) or `pod<uid>` (cgroupfs).
fn pod_uid(part: &str) -> Option<String> {
    let part = part.strip_suffix(".slice").unwrap_or(part);
    let (_, uid) = part.rsplit_once("pod")?;
    let uid = uid.replace('_', "-");
    (uid.len() == 36 && uid.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit())).then_some(uid)
}

/// A cgroup found by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cgroup {
    pub id: u64,
    /// Depth below the root (the root is 0, `/system.slice` is 1): the ancestor level
    /// `bpf_get_current_ancestor_cgroup_id` takes.
    pub level: u32,
}

/// Why a path names no cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    NotMounted,
    NotAbsolute,
    Missing,
}

impl std::fmt::Display for LookupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LookupError::NotMounted => f.write_str(
                "cgroup v2 is not mounted (no cgroup2 in /proc/self/mountinfo; `mount -t cgroup2 none /sys/fs/cgroup` mounts it)",
            ),
            LookupError::NotAbsolute => {
                f.write_str("a cgroup path starts with `/` (the root of the cgroup v2 hierarchy)")
            }
            LookupError::Missing => {
                f.write_str("no directory of that path in the cgroup v2 hierarchy")
            }
        }
    }
}

/// The cgroup at `path` (below the cgroup v2 mount: `/system.slice/a.service`).
pub fn lookup(path: &str) -> Result<Cgroup, LookupError> {
    if !path.starts_with('/') {
        return Err(LookupError::NotAbsolute);
    }
    let mount = mount().ok_or(LookupError::NotMounted)?;
    let rel = path.trim_matches('/');
    let dir = mount.join(rel);
    let meta = std::fs::metadata(&dir)
        .ok()
        .filter(|m| m.is_dir())
        .ok_or(LookupError::Missing)?;
    let level = rel.split('/').filter(|p| !p.is_empty()).count() as u32;
    Ok(Cgroup {
        id: meta.ino(),
        level,
    })
}

/// What is known of the hierarchy: id → path, for ids seen alive at some walk.
#[derive(Default)]
struct Table {
    paths: HashMap<u64, String>,
    /// Ids a walk did not find (gone before it): not walked for again.
    lost: HashSet<u64>,
    walked: bool,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);

impl Table {
    /// Walks the hierarchy and adds what is there now (keeping what went away).
    fn walk(&mut self) {
        self.walked = true;
        let Some(mount) = mount() else { return };
        let mut stack = vec![(mount, String::new())];
        while let Some((dir, rel)) = stack.pop() {
            if let Ok(meta) = std::fs::metadata(&dir) {
                let path = if rel.is_empty() {
                    "/".into()
                } else {
                    rel.clone()
                };
                self.paths.insert(meta.ino(), path);
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    stack.push((e.path(), format!("{rel}/{name}")));
                }
            }
        }
    }

    /// Whether a walk could tell more about `id`.
    fn unknown(&self, id: u64) -> bool {
        !self.walked || !(self.paths.contains_key(&id) || self.lost.contains(&id))
    }

    /// Walks if one of `ids` is unknown; ids still not found are lost.
    fn learn(&mut self, ids: &[u64]) {
        if ids.iter().any(|&id| self.unknown(id)) {
            self.walk();
            let lost: Vec<u64> = ids
                .iter()
                .copied()
                .filter(|id| !self.paths.contains_key(id))
                .collect();
            self.lost.extend(lost);
        }
    }
}

/// The path of cgroup `id`, learnt now or earlier in the run.
pub fn path_of(id: u64) -> Option<String> {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    t.learn(&[id]);
    t.paths.get(&id).cloned()
}

/// What `view` shows of cgroup `id`. An id never seen alive (a cgroup created and removed
/// between two looks) shows as `cgroup:ID` for `cgroup_path` and empty otherwise; the
/// hierarchy is walked for it once, not at every look.
pub fn name(view: CgroupView, id: u64) -> String {
    match (path_of(id), view) {
        (Some(path), v) => v.of(&path),
        (None, CgroupView::Path) => format!("cgroup:{id}"),
        (None, _) => String::new(),
    }
}

/// Learns the paths of these ids while their cgroups may still exist: one walk at most,
/// at the first call or when one of them is new.
pub fn remember(ids: &[u64]) {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    t.learn(ids);
    if !t.walked {
        t.walk();
    }
}

/// `fslat --cgroups`: every cgroup whose path names a unit, container or pod, with those
/// names, sorted by path.
pub fn named() -> Result<Vec<(String, [String; 3])>, LookupError> {
    mount().ok_or(LookupError::NotMounted)?;
    let mut t = Table::default();
    t.walk();
    let mut rows: Vec<_> = t
        .paths
        .into_values()
        .map(|p| {
            let names = [
                CgroupView::Unit.of(&p),
                CgroupView::Container.of(&p),
                CgroupView::Pod.of(&p),
            ];
            (p, names)
        })
        .filter(|(_, n)| n.iter().any(|s| !s.is_empty()))
        .collect();
    rows.sort();
    Ok(rows)
}

/// Where the cgroup v2 hierarchy is mounted: `/proc/self/mountinfo`'s fields are `ID
/// PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER_OPTIONS`.
pub fn mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        (after.split_whitespace().next() == Some("cgroup2"))
            .then(|| before.split_whitespace().nth(4).map(unescape_mount))
            .flatten()
    })
}

/// mountinfo writes a space, tab, newline or backslash in a path as `\NNN` (octal).
fn unescape_mount(path: &str) -> PathBuf {
    let mut out = Vec::new();
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from(
        String::from_utf8_lossy(&out).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const UID: &str = "7f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f";

    #[test]
    fn units_are_the_innermost_service_or_scope() {
        let unit = |p: &str| CgroupView::Unit.of(p);
        assert_eq!(unit("/system.slice/nginx.service"), "nginx.service");
        assert_eq!(
            unit("/user.slice/user-1000.slice/session-2.scope"),
            "session-2.scope"
        );
        assert_eq!(unit("/system.slice/a.service/worker"), "a.service");
        assert_eq!(unit("/system.slice"), "");
        assert_eq!(unit("/"), "");
    }

    #[test]
    fn containers_follow_each_runtime_s_path_convention() {
        let c = |p: String| CgroupView::Container.of(&p);
        for p in [
            format!("/system.slice/docker-{HEX}.scope"),
            format!("/docker/{HEX}"),
            format!("/machine.slice/libpod-{HEX}.scope"),
            format!(
                "/kubepods.slice/kubepods-pod{}.slice/crio-{HEX}.scope",
                UID.replace('-', "_")
            ),
            format!(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{HEX}.scope",
                UID.replace('-', "_")
            ),
            format!("/kubepods/burstable/pod{UID}/{HEX}"),
        ] {
            assert_eq!(c(p.clone()), HEX, "{p}");
        }
        assert_eq!(c(format!("/system.slice/crio-conmon-{HEX}.scope")), "");
        assert_eq!(c("/system.slice/docker-12ab.scope".into()), "");
        assert_eq!(c("/system.slice/docker.service".into()), "");
    }

    #[test]
    fn pods_are_the_uid_of_a_kubepods_path() {
        let pod = |p: String| CgroupView::Pod.of(&p);
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{HEX}.scope",
            UID.replace('-', "_")
        );
        assert_eq!(pod(systemd), UID);
        assert_eq!(pod(format!("/kubepods/burstable/pod{UID}/{HEX}")), UID);
        assert_eq!(pod(format!("/kubepods/pod{UID}")), UID);
        assert_eq!(pod(format!("/system.slice/pod{UID}")), "");
        assert_eq!(pod("/kubepods.slice/kubepods-burstable.slice".into()), "");
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(
            unescape_mount("/sys/fs/cgroup"),
            PathBuf::from("/sys/fs/cgroup")
        );
        assert_eq!(unescape_mount("/a\\040b"), PathBuf::from("/a b"));
        assert_eq!(unescape_mount("/a\\"), PathBuf::from("/a\\"));
    }

    #[test]
    fn a_relative_path_is_refused_before_the_filesystem_is_asked() {
        assert_eq!(lookup("system.slice"), Err(LookupError::NotAbsolute));
    }
}
