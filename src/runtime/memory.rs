//! The kernel memory of a loaded map, as the kernel accounts it (`memlock:` in the map's
//! `/proc/self/fdinfo` entry): what `fslat -v` shows for each map at the end of a run.

use libbpf_rs::MapCore;
use std::os::fd::{AsFd, AsRawFd};

/// `NAME (TYPE, N entries at most): B bytes of kernel memory`, or the same without the
/// figure when the kernel does not say it.
pub fn describe(map: &libbpf_rs::MapHandle) -> String {
    let n = map.max_entries();
    let what = format!(
        "map {} ({:?}, {n} {} at most)",
        map.name().to_string_lossy(),
        map.map_type(),
        if n == 1 { "entry" } else { "entries" }
    );
    match memlock(map.as_fd().as_raw_fd()) {
        Some(bytes) => format!("{what}: {} of kernel memory", human(bytes)),
        None => format!("{what}: kernel memory not reported"),
    }
}

/// The `memlock:` figure of the map behind `fd`, in bytes.
fn memlock(fd: i32) -> Option<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    parse_memlock(&info)
}

fn parse_memlock(fdinfo: &str) -> Option<u64> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("memlock:"))
        .and_then(|v| v.trim().parse().ok())
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 10 << 20 => format!("{} MiB ({b} bytes)", b >> 20),
        b if b >= 10 << 10 => format!("{} KiB ({b} bytes)", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_memlock_line_of_a_map_fdinfo() {
        let info = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t2057\nmap_type:\t1\n\
                    key_size:\t8\nvalue_size:\t528\nmax_entries:\t10240\nmap_flags:\t0x1\n\
                    map_extra:\t0x0\nmemlock:\t82304\nmap_id:\t9\nfrozen:\t0\n";
        assert_eq!(parse_memlock(info), Some(82304));
        assert_eq!(parse_memlock("pos:\t0\n"), None);
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(4096), "4096 bytes");
        assert_eq!(human(82304), "80 KiB (82304 bytes)");
        assert_eq!(human(15 << 20), "15 MiB (15728640 bytes)");
    }
}
