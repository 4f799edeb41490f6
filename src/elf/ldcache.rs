//! The dynamic linker's cache (`/etc/ld.so.cache`, glibc's "new" format: what
//! `ldconfig -p` prints): library file names and their paths.

use std::path::{Path, PathBuf};

pub const PATH: &str = "/etc/ld.so.cache";

const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
/// `struct cache_file_new` up to its entries.
const HEADER: usize = 48;
/// `struct file_entry_new`: flags, key, value, osversion (4 bytes each), hwcap (8).
const ENTRY: usize = 24;
/// `FLAG_X8664_LIB64` in the entry's flags (its "libc6,x86-64" in `ldconfig -p`).
const X86_64: u32 = 0x0300;
const ARCH_MASK: u32 = 0xff00;

/// The x86-64 libraries of the cache at `path` as (file name, path), in the cache's
/// order (which is the linker's preference); `None` when it is missing or unreadable.
pub fn read(path: &Path) -> Option<Vec<(String, PathBuf)>> {
    parse(&std::fs::read(path).ok()?)
}

fn parse(bytes: &[u8]) -> Option<Vec<(String, PathBuf)>> {
    // An old-format cache has the new one after its own entries; offsets in the new
    // format count from its header.
    let base = bytes.windows(MAGIC.len()).position(|w| w == MAGIC)?;
    let new = bytes.get(base..)?;
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(new.get(at..at + 4)?.try_into().ok()?))
    };
    let nlibs = u32_at(20)? as usize;
    // Each entry takes ENTRY bytes: a count the file cannot hold is a damaged cache.
    if nlibs > new.len() / ENTRY {
        return None;
    }
    let string = |at: u32| -> Option<String> {
        let s = new.get(at as usize..)?;
        let end = s.iter().position(|b| *b == 0)?;
        String::from_utf8(s[..end].to_vec()).ok()
    };
    let mut libs = Vec::new();
    for i in 0..nlibs {
        let at = HEADER + i * ENTRY;
        let flags = u32_at(at)?;
        if flags & ARCH_MASK != X86_64 {
            continue;
        }
        let (Some(name), Some(path)) = (string(u32_at(at + 4)?), string(u32_at(at + 8)?)) else {
            continue;
        };
        libs.push((name, PathBuf::from(path)));
    }
    Some(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(u32, &str, &str)]) -> Vec<u8> {
        let mut strings = Vec::new();
        let strings_at = HEADER + entries.len() * ENTRY;
        let mut b = MAGIC.to_vec();
        b.extend((entries.len() as u32).to_le_bytes());
        b.resize(HEADER, 0);
        for (flags, name, path) in entries {
            let key = (strings_at + strings.len()) as u32;
            strings.extend(name.as_bytes());
            strings.push(0);
            let value = (strings_at + strings.len()) as u32;
            strings.extend(path.as_bytes());
            strings.push(0);
            b.extend(flags.to_le_bytes());
            b.extend(key.to_le_bytes());
            b.extend(value.to_le_bytes());
            b.extend([0u8; 12]);
        }
        b.extend(strings);
        b
    }

    #[test]
    fn reads_x86_64_entries_in_order() {
        let b = cache(&[
            (0x0303, "libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
            (0x0003, "libc.so.6", "/lib32/libc.so.6"),
            (0x0303, "libm.so.6", "/lib/x86_64-linux-gnu/libm.so.6"),
        ]);
        let libs = parse(&b).unwrap();
        assert_eq!(
            libs,
            vec![
                ("libc.so.6".into(), "/lib/x86_64-linux-gnu/libc.so.6".into()),
                ("libm.so.6".into(), "/lib/x86_64-linux-gnu/libm.so.6".into()),
            ]
        );
    }

    #[test]
    fn damaged_caches_are_refused_not_trusted() {
        let b = cache(&[(0x0303, "libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6")]);
        for len in 0..b.len() {
            let _ = parse(&b[..len]);
        }
        let mut huge = b.clone();
        huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&huge), None);
        let mut bad = b.clone();
        let at = HEADER + 4;
        bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&bad), Some(vec![]));
    }

    #[test]
    fn this_machine_has_a_cache_with_libc() {
        let libs = read(Path::new(PATH)).expect("Debian has /etc/ld.so.cache");
        assert!(libs.iter().any(|(n, _)| n.starts_with("libc.so")));
    }
}
