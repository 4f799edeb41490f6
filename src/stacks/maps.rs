//! A process's file mappings, from `/proc/PID/maps`, kept so that a user frame blazesym
//! cannot name still says which file it is in (`[libc.so.6]+0x2724a`).

#[derive(Debug, Clone)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    pub path: String,
}

#[cfg(test)]
pub fn read(tgid: u32) -> Vec<Mapping> {
    read_with_uprobes(tgid).0
}

/// The file mappings of `tgid`, and the range of its `[uprobes]` mapping if it has one
/// (`uprobes`).
pub fn read_with_uprobes(tgid: u32) -> (Vec<Mapping>, Option<std::ops::Range<u64>>) {
    let text = std::fs::read_to_string(format!("/proc/{tgid}/maps")).unwrap_or_default();
    (parse(&text), uprobes(&text))
}

/// The kernel's `[uprobes]` mapping (kernel/events/uprobes.c, `xol_add_vma`): made in a
/// process at its first uprobe hit, its first slot is the return trampoline, whose address
/// a pending uretprobe puts in place of its call's return address; the others hold the
/// probed instructions the kernel steps out of line.
fn uprobes(text: &str) -> Option<std::ops::Range<u64>> {
    text.lines().find_map(|line| {
        let mut w = line.split_whitespace();
        let range = w.next()?;
        (w.nth(4)? == "[uprobes]").then_some(())?;
        let (start, end) = range.split_once('-')?;
        Some(u64::from_str_radix(start, 16).ok()?..u64::from_str_radix(end, 16).ok()?)
    })
}

/// The mappings of `tgid` with a file that may run code (`x`), sorted by address.
pub fn executable(tgid: u32) -> Vec<Mapping> {
    let text = std::fs::read_to_string(format!("/proc/{tgid}/maps")).unwrap_or_default();
    let mut maps = parse_where(&text, |perms| perms.contains('x'));
    maps.sort_by_key(|m| m.start);
    maps
}

/// Lines such as `7f3a12c00000-7f3a12c28000 r-xp 00028000 08:01 1234 /usr/lib/libc.so.6`;
/// only those with a file path.
fn parse(text: &str) -> Vec<Mapping> {
    parse_where(text, |_| true)
}

fn parse_where(text: &str, perms_ok: impl Fn(&str) -> bool) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut w = line.split_whitespace();
            let (range, perms, offset, _dev, _inode) =
                (w.next()?, w.next()?, w.next()?, w.next()?, w.next()?);
            let path = w.collect::<Vec<_>>().join(" ");
            if !path.starts_with('/') || !perms_ok(perms) {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path,
            })
        })
        .collect()
}

/// The file holding `addr` and the offset of `addr` in it.
pub fn locate(maps: &[Mapping], addr: u64) -> Option<(&str, u64)> {
    maps.iter()
        .find(|m| (m.start..m.end).contains(&addr))
        .map(|m| (m.path.as_str(), addr - m.start + m.offset))
}

/// The mappings read again (`now`) with those read before (`old`) that no mapping of
/// `now` overlaps: unmapped since (`/etc/ld.so.cache` after the dynamic loader's work, a
/// library closed), they still place the frames of stacks captured before. `None` when
/// an address of `old` is now in another file, or another part of it (the process
/// exec'd another program): the mappings kept should then stay as they are. A mapping
/// split since (`mprotect` of part of it) is the same.
pub fn merge(old: &[Mapping], now: Vec<Mapping>) -> Option<Vec<Mapping>> {
    let mut gone = Vec::new();
    for m in old {
        let mut overlaps = now.iter().filter(|n| n.start < m.end && m.start < n.end);
        let mut any = false;
        for n in overlaps.by_ref() {
            let same = n.path == m.path
                && n.start.wrapping_sub(n.offset) == m.start.wrapping_sub(m.offset);
            if !same {
                return None;
            }
            any = true;
        }
        if !any {
            gone.push(m.clone());
        }
    }
    let mut all = now;
    all.extend(gone);
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_read_again_keep_the_unmapped_and_refuse_another_program() {
        let m = |start, end, offset, path: &str| Mapping {
            start,
            end,
            offset,
            path: path.into(),
        };
        let ranges = |v: Option<Vec<Mapping>>| {
            v.map(|v| {
                v.iter()
                    .map(|m| (m.start, m.path.clone()))
                    .collect::<Vec<_>>()
            })
        };
        // In the dynamic loader: the program, ld.so and its cache file.
        let loader = [
            m(0x1000, 0x3000, 0, "/app"),
            m(0x7000, 0x9000, 0, "/etc/ld.so.cache"),
            m(0xa000, 0xc000, 0, "/ld.so"),
        ];
        // Later: ld.so's mapping split by mprotect, the cache unmapped, libc mapped.
        let settled = vec![
            m(0x1000, 0x3000, 0, "/app"),
            m(0x5000, 0x6000, 0x1000, "/libc.so.6"),
            m(0xa000, 0xb000, 0, "/ld.so"),
            m(0xb000, 0xc000, 0x1000, "/ld.so"),
        ];
        assert_eq!(
            ranges(merge(&loader, settled)),
            Some(vec![
                (0x1000, "/app".into()),
                (0x5000, "/libc.so.6".into()),
                (0xa000, "/ld.so".into()),
                (0xb000, "/ld.so".into()),
                (0x7000, "/etc/ld.so.cache".into()),
            ])
        );
        // After an exec: another file where the program was, or the same file at
        // another offset there.
        assert_eq!(
            ranges(merge(&loader, vec![m(0x2000, 0x4000, 0, "/bin/sh")])),
            None
        );
        assert_eq!(
            ranges(merge(&loader, vec![m(0x1000, 0x2000, 0x4000, "/app")])),
            None
        );
    }

    #[test]
    fn an_address_is_located_in_its_file_at_its_file_offset() {
        let maps = parse(
            "5581a0000000-5581a0001000 r--p 00000000 00:1f 12 /tmp/app\n\
             7f3a12c00000-7f3a12c28000 r-xp 00028000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
             7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0 [stack]\n",
        );
        assert_eq!(maps.len(), 2);
        assert_eq!(
            locate(&maps, 0x7f3a12c0124a),
            Some(("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x2924a))
        );
        assert_eq!(locate(&maps, 0x7ffd1c000010), None);
    }

    #[test]
    fn the_uprobes_mapping_is_found_by_its_name() {
        let text = "7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0 [stack]\n\
                    7fffffffe000-7ffffffff000 --xp 00000000 00:00 0 [uprobes]\n";
        assert_eq!(uprobes(text), Some(0x7fffffffe000..0x7ffffffff000));
        assert_eq!(
            uprobes("7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0 [stack]\n"),
            None
        );
        assert!(parse(text).is_empty());
    }
}
