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
        "fslat_str.bpf.h",
        include_str!("../../bpf-runtime/fslat_str.bpf.h"),
    ),
    (
        "fslat_math.bpf.h",
        include_str!("../../bpf-runtime/fslat_math.bpf.h"),
    ),
    (
        "fslat_agg.bpf.h",
        include_str!("../../bpf-runtime/fslat_agg.bpf.h"),
    ),
    (
        "fslat_calls.bpf.h",
        include_str!("../../bpf-runtime/fslat_calls.bpf.h"),
    ),
    (
        "fslat_path.bpf.h",
        include_str!("../../bpf-runtime/fslat_path.bpf.h"),
    ),
    (
        "fslat_stacks.bpf.h",
        include_str!("../../bpf-runtime/fslat_stacks.bpf.h"),
    ),
    (
        "fslat_uretprobes.bpf.h",
        include_str!("../../bpf-runtime/fslat_uretprobes.bpf.h"),
    ),
    (
        "fslat_sched.bpf.h",
        include_str!("../../bpf-runtime/fslat_sched.bpf.h"),
    ),
    (
        "fslat_pct.bpf.h",
        include_str!("../../bpf-runtime/fslat_pct.bpf.h"),
    ),
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
    (
        "bpf/usdt.bpf.h",
        include_str!(concat!(env!("OUT_DIR"), "/usdt.bpf.h")),
    ),
    (
        "linux/errno.h",
        include_str!(concat!(env!("OUT_DIR"), "/errno.h")),
    ),
    (
        "fslat_usdt.bpf.h",
        include_str!("../../bpf-runtime/fslat_usdt.bpf.h"),
    ),
];

/// SHA-256 of `HEADERS` (each name, a 0 byte and its text, in name order), computed by the
/// build script: hashing them at every cold start cost more than the rest of the key.
const HEADERS_DIGEST: &str = env!("FSLAT_HEADERS_DIGEST");

/// What clang is given besides the include directory and the files (the fuzz target builds
/// many programs per clang process with the same).
pub const CLANG_FLAGS: &[&str] = &[
    "-target",
    "bpf",
    "-mcpu=v3",
    "-O2",
    "-g",
    "-D__TARGET_ARCH_x86",
    "-Wall",
    "-Wno-unused-variable",
    "-Wno-unused-function",
    // What clang 15 and later make errors by default, so every clang reports the same.
    "-Werror=implicit-function-declaration",
    "-Werror=int-conversion",
    "-Werror=incompatible-pointer-types",
    "-Werror=implicit-int",
];

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(
        "clang was not found: fslat compiles its BPF programs with it.\n  Install it (Debian: `apt-get install clang`), or name one with --clang PATH or FSLAT_CLANG."
    )]
    NoClang,
    #[error(
        "{origin} names {path}, which {reason}.\n  Name clang's path (e.g. /usr/bin/clang-19), or leave {origin} out to use clang on PATH."
    )]
    ClangNamed {
        path: PathBuf,
        origin: &'static str,
        reason: &'static str,
    },
    #[error("cannot run clang at {path}: {source}")]
    ClangStart {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "clang rejected the C that fslat generated. This is a bug in fslat; please report it with the script.\n  The C is kept at {kept}\n{stderr}"
    )]
    Clang { kept: PathBuf, stderr: String },
    #[error(
        "{path} did not build the program ({status}); is it clang?\n  Name a working clang with --clang PATH or FSLAT_CLANG.{}",
        if stderr.trim().is_empty() { String::new() } else { format!("\n{}", stderr.trim_end()) }
    )]
    NotClang {
        path: PathBuf,
        status: String,
        stderr: String,
    },
    /// The cancel check said stop while clang ran (Ctrl-C, SIGTERM).
    #[error("interrupted while compiling")]
    Interrupted,
    #[error("cannot prepare the build directory: {0}")]
    Io(#[from] std::io::Error),
}

/// Where clang is: `explicit` (from --clang), else FSLAT_CLANG, else `clang` on PATH,
/// else the newest versioned `clang-N`.
pub fn find_clang(explicit: Option<&Path>) -> Result<PathBuf, BuildError> {
    let named = |p: &Path, origin: &'static str| {
        which::which(p).map_err(|_| BuildError::ClangNamed {
            path: p.to_path_buf(),
            origin,
            reason: if p.is_dir() {
                "is a directory"
            } else if p.exists() {
                "is not an executable program"
            } else {
                "does not exist (nor is it a program on PATH)"
            },
        })
    };
    if let Some(p) = explicit {
        return named(p, "--clang");
    }
    if let Some(p) = std::env::var_os("FSLAT_CLANG").filter(|v| !v.is_empty()) {
        return named(Path::new(&p), "FSLAT_CLANG");
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
    /// Polled while clang runs: true stops it.
    cancel: fn() -> bool,
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
            cancel: || false,
        })
    }

    /// Stops a build (clang is killed, `BuildError::Interrupted`) once `cancel` says so.
    pub fn cancel_when(self, cancel: fn() -> bool) -> Self {
        Compiler { cancel, ..self }
    }

    /// Compiles `c` to a BPF object, from the cache when it was built before.
    pub fn compile(&self, c: &str) -> Result<Vec<u8>, BuildError> {
        self.compile_with_warnings(c).map(|(obj, _)| obj)
    }

    /// Like `compile`, also returning what clang warned about (empty from the cache):
    /// fslat's tests require generated C to build without a warning.
    pub fn compile_with_warnings(&self, c: &str) -> Result<(Vec<u8>, String), BuildError> {
        use std::os::unix::fs::PermissionsExt;
        let key = self.key(c);
        if let Some(obj) = self.cache.as_ref().and_then(|k| k.get(&format!("{key}.o"))) {
            return Ok((obj, String::new()));
        }
        let dir = tempfile::Builder::new()
            .prefix("fslat-build-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()?;
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
        // clang's messages go to a file, so polling for a cancel needs no reader thread.
        let log_path = dir.path().join("clang.log");
        let log = std::fs::File::create(&log_path)?;
        let start_error = |source| BuildError::ClangStart {
            path: self.clang.clone(),
            source,
        };
        let mut child = Command::new(&self.clang)
            .args(CLANG_FLAGS)
            .arg("-I")
            .arg(dir.path())
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(start_error)?;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(start_error)? {
                break status;
            }
            if (self.cancel)() {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BuildError::Interrupted);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        };
        let out = std::process::Output {
            status,
            stdout: Vec::new(),
            stderr: std::fs::read(&log_path)?,
        };
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            if !stderr.contains("error") {
                // Not clang's diagnostics: the program named is not a working clang.
                return Err(BuildError::NotClang {
                    path: self.clang.clone(),
                    status: out.status.to_string(),
                    stderr,
                });
            }
            return Err(BuildError::Clang {
                kept: keep_source(c)?,
                stderr,
            });
        }
        let bytes = std::fs::read(&obj)?;
        if !cache::is_bpf_object(&bytes) {
            return Err(BuildError::NotClang {
                path: self.clang.clone(),
                status: "success, but no BPF object".into(),
                stderr,
            });
        }
        if let Some(cache) = &self.cache {
            cache.put(&format!("{key}.o"), &bytes);
        }
        Ok((bytes, stderr))
    }

    fn key(&self, c: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.identity.as_bytes());
        for f in CLANG_FLAGS {
            h.update(f.as_bytes());
            h.update([0]);
        }
        h.update(HEADERS_DIGEST.as_bytes());
        h.update(c.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Keeps C that clang rejected for a bug report: a new file only fslat can have made
/// (O_EXCL, random name, mode 0600), never one planted in the temporary directory.
fn keep_source(c: &str) -> Result<PathBuf, BuildError> {
    use std::io::Write;
    let mut f = tempfile::Builder::new()
        .prefix("fslat-bug-")
        .suffix(".bpf.c")
        .tempfile()?;
    f.write_all(c.as_bytes())?;
    let (_, path) = f.keep().map_err(|e| BuildError::Io(e.error))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build script hashes the files of bpf-runtime/ and libbpf's headers; the
    /// binary embeds `HEADERS`: the same files, or the cache would keep objects built
    /// from other headers.
    #[test]
    fn headers_digest_is_the_digest_of_the_embedded_headers() {
        let mut headers = HEADERS.to_vec();
        headers.sort();
        let mut h = Sha256::new();
        for (name, text) in headers {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(text.as_bytes());
        }
        let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(digest, HEADERS_DIGEST);
    }
}
