//! The warm start: a script run before on this kernel by this fslat starts from its cached
//! checked program and object, with no BTF to parse, nothing to check or compile.

use super::Options;
use crate::build::cache::Cache;
use crate::check::program::Program;
use crate::codegen::Mode;
use std::path::PathBuf;

/// The warm-start cache and this run's key in it: the script, the options that shape the
/// program, this fslat binary, the clang asked for and this kernel (release, build, BTF size).
pub fn open(text: &str, opts: &Options) -> Option<(Cache, String)> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt;
    let cache = Cache::open()?;
    let exe = std::fs::metadata("/proc/self/exe").ok()?;
    let btf_path = opts
        .btf
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::btf::VMLINUX_PATH));
    let btf = std::fs::metadata(&btf_path).ok()?;
    // The kernel's release and build (what `uname -rv` prints).
    let release = std::fs::read("/proc/sys/kernel/osrelease").ok()?;
    let version = std::fs::read("/proc/sys/kernel/version").ok()?;
    let mut h = Sha256::new();
    for part in [
        env!("CARGO_PKG_VERSION").as_bytes(),
        format!("{} {}.{}", exe.size(), exe.mtime(), exe.mtime_nsec()).as_bytes(),
        format!("{:?}", opts.mode).as_bytes(),
        // The function limit decides whether a script checks at all.
        format!("{}", opts.max_functions).as_bytes(),
        // --ustack-bytes is compiled in (the copy's size).
        format!(
            "ustack-bytes {} walk {}",
            opts.ustack_bytes, opts.ustack_walk
        )
        .as_bytes(),
        // -v keeps every session's return, to count `errors` (`Session::counts_errors`).
        format!("verbose {}", opts.verbose).as_bytes(),
        btf_path.as_os_str().as_encoded_bytes(),
        format!("{} {}", btf.size(), btf.mtime()).as_bytes(),
        &release,
        &version,
        text.as_bytes(),
        // `$1`.. are constants in the program.
        format!("{} {}", opts.script_args.len(), opts.script_args.join("\0")).as_bytes(),
        // The clang asked for (by name, as cheap as the rest): a run with another clang
        // builds its own object, as the object cache's key already says.
        clang_asked(opts).as_encoded_bytes(),
    ] {
        h.update(part);
        h.update([0]);
    }
    let key = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Some((cache, key))
}

/// The clang this run would look for: `--clang`, else `FSLAT_CLANG`, else none named.
fn clang_asked(opts: &Options) -> std::ffi::OsString {
    opts.clang
        .clone()
        .map(PathBuf::into_os_string)
        .or_else(|| std::env::var_os("FSLAT_CLANG"))
        .unwrap_or_default()
}

pub fn lookup(cache: &Cache, key: &str) -> Option<(Mode, Program, Vec<u8>)> {
    #[derive(serde::Deserialize)]
    struct Entry {
        mode: Mode,
        program: Program,
    }
    let entry: Entry = serde_json::from_slice(&cache.get(&format!("{key}.run.json"))?).ok()?;
    let object = cache.get(&format!("{key}.run.o"))?;
    Some((entry.mode, entry.program, object))
}

pub fn store(cache: &Cache, key: &str, mode: Mode, program: &Program, object: &[u8]) {
    let entry = serde_json::json!({ "mode": mode, "program": program });
    // The object first: an entry is only found once its JSON exists.
    cache.put(&format!("{key}.run.o"), object);
    cache.put(&format!("{key}.run.json"), entry.to_string().as_bytes());
}

/// The warm start's load record for this key (`runtime::replay`).
#[derive(Debug)]
struct Loads {
    cache: Cache,
    name: String,
}

impl crate::runtime::LoadCache for Loads {
    fn get(&self) -> Option<Vec<u8>> {
        self.cache.get(&self.name)
    }

    fn put(&self, record: &[u8]) {
        self.cache.put(&self.name, record);
    }
}

pub fn loads(cache: &Cache, key: &str) -> Option<std::sync::Arc<dyn crate::runtime::LoadCache>> {
    Some(std::sync::Arc::new(Loads {
        cache: cache.clone(),
        name: format!("{key}.run.load"),
    }))
}
