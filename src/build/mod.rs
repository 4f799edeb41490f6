//! Stage 4: C → BPF object. clang runs in a temporary directory holding the generated C
//! and the headers fslat carries; objects are cached by a hash of everything that goes
//! into them (the C, the headers, the flags and which clang).

pub mod cache;

pub use cache::dir as cache_dir;

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Headers every program may include, embedded in the binary: (path in the include
/// directory, contents).
pub const HEADERS: &[(&str, &str)] = &[
    ("fslat.bpf.h", include_str!("../../bpf-runtime/fslat.bpf.h")),
    (
        "bpf/bpf_helpers.h",
        include_str!(concat!(env!("OUT_DIR"), "/bpf_helpers.h")),
    ),
    (
        "bpf/bpf_helper_defs.h",
        include_str!(concat!(env!("OUT_DIR"), "/bpf_helper_defs.h")),
    ),
    (
        "bpf/bpf_core_read.h",
        include_str!(concat!(env!("OUT_DIR"), "/bpf_core_read.h")),
    ),
    (
        "bpf/bpf_tracing.h",
        include_str!(concat!(env!("OUT_DIR"), "/bpf_tracing.h")),
    ),
    (
        "bpf/bpf_endian.h",
        include_str!(concat!(env!("OUT_DIR"), "/bpf_endian.h")),
    ),
];

const CLANG_FLAGS: &[&str] = &[
    "-target",
    "bpf",
    "-mcpu=v3",
    "-O2",
    "-g",
    "-D__TARGET_ARCH_x86",
    "-Wall",
    "-Wno-unused-variable",
    "-Wno-unused-function",
    "-Werror=implicit-function-declaration",
];

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(
        "clang was not found: fslat compiles its BPF programs with it.\n  Install it (Debian: `apt-get install clang`), or name one with --clang PATH or FSLAT_CLANG."
    )]
    NoClang,
    #[error("cannot run clang at {path}: {source}")]
    ClangStart {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "clang rejected the C that fslat generated. This is a bug in fslat; please report it with the script.\n  The C is kept at {kept}\n{stderr}"
    )]
    Clang { kept: PathBuf, stderr: String },
    #[error("cannot prepare the build directory: {0}")]
    Io(#[from] std::io::Error),
}

/// Where clang is: `explicit` (from --clang), else FSLAT_CLANG, else `clang` on PATH,
/// else the newest versioned `clang-N`.
pub fn find_clang(explicit: Option<&Path>) -> Result<PathBuf, BuildError> {
    if let Some(p) = explicit {
        return which::which(p).map_err(|_| BuildError::NoClang);
    }
    if let Some(p) = std::env::var_os("FSLAT_CLANG").filter(|v| !v.is_empty()) {
        return which::which(&p).map_err(|_| BuildError::NoClang);
    }
    if let Ok(p) = which::which("clang") {
        return Ok(p);
    }
    (11..=30)
        .rev()
        .find_map(|v| which::which(format!("clang-{v}")).ok())
        .ok_or(BuildError::NoClang)
}

pub struct Compiler {
    clang: PathBuf,
    /// Which clang binary this is (its real path, size and modification time), for the
    /// cache key: cheaper than running `clang --version` on every start.
    identity: String,
    cache: Option<cache::Cache>,
}

impl Compiler {
    pub fn new(clang: PathBuf, use_cache: bool) -> Result<Self, BuildError> {
        use std::os::unix::fs::MetadataExt;
        let start_error = |source| BuildError::ClangStart {
            path: clang.clone(),
            source,
        };
        let real = std::fs::canonicalize(&clang).map_err(start_error)?;
        let meta = std::fs::metadata(&real).map_err(start_error)?;
        let identity = format!(
            "{} {} {}.{}",
            real.display(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        Ok(Compiler {
            clang,
            identity,
            cache: if use_cache {
                cache::Cache::open()
            } else {
                None
            },
        })
    }

    /// Compiles `c` to a BPF object, from the cache when it was built before.
    pub fn compile(&self, c: &str) -> Result<Vec<u8>, BuildError> {
        let key = self.key(c);
        if let Some(obj) = self.cache.as_ref().and_then(|k| k.get(&format!("{key}.o"))) {
            return Ok(obj);
        }
        let dir = tempfile::Builder::new().prefix("fslat-build-").tempdir()?;
        for (name, text) in HEADERS {
            let path = dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)?;
        }
        let src = dir.path().join("program.bpf.c");
        let obj = dir.path().join("program.bpf.o");
        std::fs::write(&src, c)?;
        let out = Command::new(&self.clang)
            .args(CLANG_FLAGS)
            .arg("-I")
            .arg(dir.path())
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .output()
            .map_err(|source| BuildError::ClangStart {
                path: self.clang.clone(),
                source,
            })?;
        if !out.status.success() {
            let kept = std::env::temp_dir().join(format!("fslat-bug-{}.bpf.c", &key[..12]));
            std::fs::write(&kept, c)?;
            return Err(BuildError::Clang {
                kept,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        let bytes = std::fs::read(&obj)?;
        if let Some(cache) = &self.cache {
            cache.put(&format!("{key}.o"), &bytes);
        }
        Ok(bytes)
    }

    fn key(&self, c: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.identity.as_bytes());
        for f in CLANG_FLAGS {
            h.update(f.as_bytes());
            h.update([0]);
        }
        for (name, text) in HEADERS {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(text.as_bytes());
        }
        h.update(c.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}
