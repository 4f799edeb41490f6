//! Cargo build script: copies libbpf's BPF-side headers (from libbpf-sys, the same libbpf
//! fslat links) into OUT_DIR so the binary can embed them and needs no libbpf-dev, and
//! computes the digest of every header the binary embeds (`build::HEADERS`) for the
//! object cache's key: SHA-256 of 270 KB took about 16 ms of each cold start in the 7.2
//! test guest when it was computed at run time.

use std::path::PathBuf;

const HEADERS: &[&str] = &[
    "bpf_helpers.h",
    "bpf_helper_defs.h",
    "bpf_core_read.h",
    "bpf_tracing.h",
    "bpf_endian.h",
];

fn main() {
    let include = PathBuf::from(
        std::env::var("DEP_BPF_INCLUDE").expect("libbpf-sys exports its include directory"),
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // (name in the include directory, contents), as src/build/mod.rs's HEADERS names them.
    let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
    for h in HEADERS {
        let src = include.join("bpf").join(h);
        std::fs::copy(&src, out.join(h))
            .unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
        headers.push((format!("bpf/{h}"), read(&src)));
    }
    let own = std::fs::read_dir("bpf-runtime").expect("bpf-runtime/ is readable");
    for entry in own {
        let path = entry.expect("bpf-runtime/ is readable").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".bpf.h") {
            headers.push((name.to_string(), read(&path)));
        }
    }
    headers.sort();
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (name, text) in &headers {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(text);
    }
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=FSLAT_HEADERS_DIGEST={digest}");
    println!("cargo:rerun-if-changed=bpf-runtime");
}

fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}
