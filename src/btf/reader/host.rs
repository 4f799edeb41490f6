//! The running kernel's release, for messages (`/proc`).

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
