//! Which file a session's FILE names: an absolute path as it is; nothing (`:FUNC`) the
//! traced program (-p's executable, -c's command); a library name (`libc`, funclatency's
//! `c`) the traced process's mapping of it, else the dynamic linker's cache, else the
//! usual library directories.

use super::{ElfError, ldcache};
use std::path::{Path, PathBuf};

/// Where a session's files are looked for: the traced process or command, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lookup {
    /// `-p PID`.
    pub pid: Option<u32>,
    /// `-c CMD`: the command line (its first word is the program).
    pub command: Option<String>,
}

/// Directories searched for a library the process and the cache do not have.
const LIBRARY_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
];

/// The path of the file `spec` names (`""` for the traced program). `Ok(None)` when
/// `spec` is empty and there is no traced program.
pub fn find(spec: &str, lookup: &Lookup) -> Result<Option<PathBuf>, ElfError> {
    if spec.is_empty() {
        return main_executable(lookup);
    }
    if spec.starts_with("./") || spec.starts_with("../") {
        let p = PathBuf::from(spec);
        return match p.canonicalize() {
            Ok(p) => Ok(Some(p)),
            Err(_) => Err(ElfError::NotFound(p)),
        };
    }
    if spec.starts_with('/') {
        let p = PathBuf::from(spec);
        return if p.exists() {
            Ok(Some(p))
        } else {
            Err(ElfError::NotFound(p))
        };
    }
    library(spec, lookup).map(Some)
}

fn main_executable(lookup: &Lookup) -> Result<Option<PathBuf>, ElfError> {
    if let Some(pid) = lookup.pid {
        let exe = PathBuf::from(format!("/proc/{pid}/exe"));
        return match std::fs::read_link(&exe) {
            // The path the process sees; through /proc when it is not ours (another
            // mount namespace, or deleted).
            Ok(p) if p.is_absolute() && p.exists() => Ok(Some(p)),
            Ok(_) => Ok(Some(exe)),
            Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => Err(ElfError::NoProcess(pid)),
            Err(e) => Err(ElfError::Unreadable {
                path: exe,
                why: e.to_string(),
            }),
        };
    }
    let Some(command) = &lookup.command else {
        return Ok(None);
    };
    let program = command.split_whitespace().next().unwrap_or_default();
    if program.contains('/') {
        let p = PathBuf::from(program);
        return match p.canonicalize() {
            Ok(p) => Ok(Some(p)),
            Err(_) => Err(ElfError::NotFound(p)),
        };
    }
    which::which(program)
        .map(Some)
        .map_err(|_| ElfError::NoCommand(program.to_string()))
}

/// `libc` and `c` name `libc.so.6`; `libssl` names `libssl.so.3`.
fn library(spec: &str, lookup: &Lookup) -> Result<PathBuf, ElfError> {
    let stem = if spec.starts_with("lib") || spec.contains(".so") {
        spec.to_string()
    } else {
        format!("lib{spec}")
    };
    let mut looked = Vec::new();
    if let Some(pid) = lookup.pid {
        looked.push(format!("/proc/{pid}/maps"));
        if let Some(p) = in_process(pid, &stem) {
            return Ok(p);
        }
    }
    looked.push(ldcache::PATH.to_string());
    if let Some(p) = ldcache::read(Path::new(ldcache::PATH))
        .into_iter()
        .flatten()
        .find(|(name, path)| names_library(name, &stem) && path.exists())
        .map(|(_, path)| path)
    {
        return Ok(p);
    }
    for dir in LIBRARY_DIRS {
        looked.push((*dir).to_string());
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| names_library(n, &stem))
            .collect();
        names.sort();
        if let Some(n) = names.first() {
            return Ok(Path::new(dir).join(n));
        }
    }
    // A program by name, as bpftrace finds one: the traced program of that name, else
    // PATH (`usdt:python3:audit`).
    if !spec.contains(".so") {
        // An ELF file, not a wrapper script (such as pyenv's shims).
        let elf = |p: &PathBuf| {
            let mut magic = [0u8; 4];
            std::fs::File::open(p)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
                .is_ok_and(|()| &magic == b"\x7fELF")
        };
        if let Ok(Some(exe)) = main_executable(lookup)
            && exe.file_name().is_some_and(|n| n == spec)
            && elf(&exe)
        {
            return Ok(exe);
        }
        looked.push("PATH".to_string());
        if let Some(p) = which::which_all(spec).into_iter().flatten().find(elf) {
            return Ok(p.canonicalize().unwrap_or(p));
        }
    }
    Err(ElfError::NoLibrary {
        name: spec.to_string(),
        looked: looked.join(", "),
    })
}

/// Whether the file name `name` is library `stem`: `libc.so`, `libc.so.6`, `libc-2.31.so`
/// for `libc` (not `libcap.so`).
fn names_library(name: &str, stem: &str) -> bool {
    if stem.contains(".so") {
        return name == stem;
    }
    name.strip_prefix(stem).is_some_and(|rest| {
        rest == ".so"
            || rest.starts_with(".so.")
            || (rest.starts_with('-') && rest.ends_with(".so"))
    })
}

/// The library `stem` as process `pid` has it mapped, reached through its root.
fn in_process(pid: u32, stem: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            p.starts_with('/')
                && Path::new(p)
                    .file_name()
                    .is_some_and(|n| names_library(&n.to_string_lossy(), stem))
        })?;
    let ours = PathBuf::from(path);
    let root = PathBuf::from(format!("/proc/{pid}/root{path}"));
    // The same file in our mount namespace, or the process's own through its root.
    match (std::fs::metadata(&ours), std::fs::metadata(&root)) {
        (Ok(a), Ok(b)) if same_file(&a, &b) => Some(ours),
        (_, Ok(_)) => Some(root),
        (Ok(_), Err(_)) => Some(ours),
        _ => None,
    }
}

fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names_match_their_files_only() {
        for (name, stem, yes) in [
            ("libc.so.6", "libc", true),
            ("libc.so", "libc", true),
            ("libc-2.31.so", "libc", true),
            ("libcap.so.2", "libc", false),
            ("libc.so.6", "libc.so.6", true),
            ("libssl.so.3", "libssl", true),
            ("libssl3.so", "libssl", false),
        ] {
            assert_eq!(names_library(name, stem), yes, "{name} {stem}");
        }
    }

    #[test]
    fn libc_is_found_by_both_its_names() {
        let lookup = Lookup::default();
        let a = find("libc", &lookup).unwrap().unwrap();
        let b = find("c", &lookup).unwrap().unwrap();
        assert_eq!(a, b);
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("libc"));
    }

    #[test]
    fn this_process_maps_libc() {
        let lookup = Lookup {
            pid: Some(std::process::id()),
            command: None,
        };
        let p = find("libc", &lookup).unwrap().unwrap();
        assert!(p.exists(), "{}", p.display());
    }

    #[test]
    fn errors_say_what_is_missing_and_where_fslat_looked() {
        let lookup = Lookup::default();
        match find("libfslat_no_such_lib", &lookup) {
            Err(ElfError::NoLibrary { name, looked }) => {
                assert_eq!(name, "libfslat_no_such_lib");
                assert!(looked.contains("ld.so.cache"), "{looked}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(find("", &lookup), Ok(None));
        assert_eq!(
            find("/no/such/file", &lookup),
            Err(ElfError::NotFound("/no/such/file".into()))
        );
    }
}
