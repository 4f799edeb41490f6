//! Compiled objects under `$XDG_CACHE_HOME/fslat` (or `~/.cache/fslat`), one file per
//! hash. fslat runs as root, so the cache is used only when it is safe to: the directory
//! is a real directory (not a symlink), owned by this user and private (0700); fslat
//! creates it so, and never changes the mode of one it did not create. Every entry ends
//! with the SHA-256 of its contents: a truncated or damaged entry is removed and rebuilt,
//! never served.

use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the cache lives (it may not exist yet); `None` without `XDG_CACHE_HOME` and `HOME`.
pub fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("fslat"))
}

fn euid() -> u32 {
    crate::sys::euid()
}

/// Why an existing cache directory is not used, in words for `doctor` (None: usable).
pub fn unsafe_reason(dir: &Path) -> Option<String> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    if meta.file_type().is_symlink() {
        return Some("is a symbolic link; fslat does not follow it".into());
    }
    if !meta.is_dir() {
        return Some("is not a directory".into());
    }
    if meta.uid() != euid() {
        return Some(format!(
            "belongs to uid {}, not to you (uid {})",
            meta.uid(),
            euid()
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Some(format!(
            "is mode {mode:04o}; fslat uses only a private (0700) cache"
        ));
    }
    None
}

/// Whether `bytes` look like a BPF ELF object (64-bit ELF, machine EM_BPF).
pub fn is_bpf_object(bytes: &[u8]) -> bool {
    const EM_BPF: u16 = 247;
    bytes.len() > 64
        && bytes.starts_with(b"\x7fELF\x02")
        && u16::from_le_bytes([bytes[18], bytes[19]]) == EM_BPF
}

const DIGEST: usize = 32;

#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    uid: u32,
}

impl Cache {
    /// The cache, or `None` when there is no safe directory (fslat then just compiles).
    pub fn open() -> Option<Cache> {
        let dir = dir()?;
        if fs::symlink_metadata(&dir).is_err() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .ok()?;
        }
        if unsafe_reason(&dir).is_some() {
            return None;
        }
        Some(Cache { dir, uid: euid() })
    }

    /// The entry `name` (`HASH.o`, ...), if this user wrote it and it is whole.
    pub fn get(&self, name: &str) -> Option<Vec<u8>> {
        let path = self.dir.join(name);
        let meta = fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.uid() != self.uid {
            return None;
        }
        let mut bytes = fs::read(&path).ok()?;
        let whole = bytes.len() >= DIGEST && {
            let (body, digest) = bytes.split_at(bytes.len() - DIGEST);
            Sha256::digest(body).as_slice() == digest
        };
        if !whole {
            let _ = fs::remove_file(&path);
            return None;
        }
        bytes.truncate(bytes.len() - DIGEST);
        Some(bytes)
    }

    /// Stores an entry; a failure only costs a recompile next time.
    pub fn put(&self, name: &str, data: &[u8]) {
        let Ok(mut tmp) = tempfile::NamedTempFile::new_in(&self.dir) else {
            return;
        };
        if tmp.write_all(data).is_ok() && tmp.write_all(&Sha256::digest(data)).is_ok() {
            let _ = tmp.persist(self.dir.join(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_in(dir: &Path) -> Cache {
        Cache {
            dir: dir.to_path_buf(),
            uid: euid(),
        }
    }

    #[test]
    fn an_entry_comes_back_as_stored() {
        let d = tempfile::tempdir().unwrap();
        let c = cache_in(d.path());
        c.put("a.o", b"object bytes");
        assert_eq!(c.get("a.o").as_deref(), Some(&b"object bytes"[..]));
    }

    #[test]
    fn a_truncated_entry_is_removed_not_served() {
        let d = tempfile::tempdir().unwrap();
        let c = cache_in(d.path());
        c.put("a.o", b"object bytes");
        let path = d.path().join("a.o");
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
        assert_eq!(c.get("a.o"), None);
        assert!(!path.exists());
    }

    #[test]
    fn a_garbage_entry_is_not_served() {
        let d = tempfile::tempdir().unwrap();
        let c = cache_in(d.path());
        fs::write(d.path().join("a.o"), vec![0x55; 100]).unwrap();
        assert_eq!(c.get("a.o"), None);
    }

    #[test]
    fn a_symlinked_cache_directory_is_refused_and_its_target_untouched() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        fs::create_dir(&target).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        let link = d.path().join("fslat");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let why = unsafe_reason(&link).expect("a symlink is refused");
        assert!(why.contains("symbolic link"), "{why}");
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn a_shared_cache_directory_is_refused_not_chmodded() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("fslat");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let why = unsafe_reason(&dir).expect("a world-writable cache is refused");
        assert!(why.contains("0777"), "{why}");
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777);
    }

    #[test]
    fn a_private_cache_directory_is_used() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("fslat");
        fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        assert_eq!(unsafe_reason(&dir), None);
    }

    #[test]
    fn only_bpf_elf_objects_pass_the_object_check() {
        let mut elf = vec![0u8; 128];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        elf[18..20].copy_from_slice(&247u16.to_le_bytes());
        assert!(is_bpf_object(&elf));
        elf[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
        assert!(!is_bpf_object(&elf));
        assert!(!is_bpf_object(b"\x7fELF"));
    }
}
