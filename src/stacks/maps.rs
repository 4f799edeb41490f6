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

pub fn read(tgid: u32) -> Vec<Mapping> {
    parse(&std::fs::read_to_string(format!("/proc/{tgid}/maps")).unwrap_or_default())
}

/// Lines such as `7f3a12c00000-7f3a12c28000 r-xp 00028000 08:01 1234 /usr/lib/libc.so.6`;
/// only those with a file path.
fn parse(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut w = line.split_whitespace();
            let (range, _perms, offset, _dev, _inode) =
                (w.next()?, w.next()?, w.next()?, w.next()?, w.next()?);
            let path = w.collect::<Vec<_>>().join(" ");
            if !path.starts_with('/') {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
