//! The running kernel's release, for messages (`/proc`), and its tracefs events.

/// The running kernel, for messages: "this kernel (Linux 6.1.0-57-cloud-amd64)".
pub fn this_kernel() -> String {
    match kernel_release() {
        Some(r) => format!("this kernel (Linux {r})"),
        None => "this kernel".into(),
    }
}

/// The running kernel's release, as `uname -r` prints it.
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Where tracefs may be mounted: its own mount, or under debugfs on older systems.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The running kernel's tracefs events as (category, name), sorted; `None` when no
/// tracefs can be read.
pub fn tracefs_events() -> Option<Vec<(String, String)>> {
    let dirs = |path: &std::path::Path| -> Option<Vec<String>> {
        let entries = std::fs::read_dir(path).ok()?;
        Some(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect(),
        )
    };
    let root = TRACEFS
        .iter()
        .map(|t| std::path::Path::new(t).join("events"))
        .find(|p| p.is_dir())?;
    let mut events = Vec::new();
    for category in dirs(&root)? {
        for name in dirs(&root.join(&category)).unwrap_or_default() {
            events.push((category.clone(), name));
        }
    }
    events.sort();
    Some(events)
}
