//! Compiled objects under `$XDG_CACHE_HOME/fslat` (or `~/.cache/fslat`), one file per
//! hash. The directory is private (0700); an entry some other user owns is ignored, so a
//! cache shared by mistake cannot feed root a program.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;

/// Where the cache lives (it may not exist yet); `None` without `XDG_CACHE_HOME` and `HOME`.
pub fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("fslat"))
}

pub struct Cache {
    dir: PathBuf,
    uid: u32,
}

impl Cache {
    /// The cache, or `None` when there is no usable directory (fslat then just compiles).
    pub fn open() -> Option<Cache> {
        let dir = dir()?;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .ok()?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let meta = fs::metadata(&dir).ok()?;
        if meta.uid() != uid {
            return None;
        }
        if meta.permissions().mode() & 0o077 != 0 {
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).ok()?;
        }
        Some(Cache { dir, uid })
    }

    /// The entry `name` (`HASH.o`, ...), if this user wrote it.
    pub fn get(&self, name: &str) -> Option<Vec<u8>> {
        let path = self.dir.join(name);
        let meta = fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.uid() != self.uid {
            return None;
        }
        fs::read(path).ok()
    }

    /// Stores an entry; a failure only costs a recompile next time.
    pub fn put(&self, name: &str, obj: &[u8]) {
        let Ok(mut tmp) = tempfile::NamedTempFile::new_in(&self.dir) else {
            return;
        };
        if tmp.write_all(obj).is_ok() {
            let _ = tmp.persist(self.dir.join(name));
        }
    }
}
