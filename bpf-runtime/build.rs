//! Cargo build script: copies libbpf's BPF-side headers (from libbpf-sys, the same libbpf
//! fslat links) into OUT_DIR so the binary can embed them and needs no libbpf-dev.

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
    for h in HEADERS {
        let src = include.join("bpf").join(h);
        std::fs::copy(&src, out.join(h))
            .unwrap_or_else(|e| panic!("copying {}: {e}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
    }
    println!("cargo:rerun-if-changed=bpf-runtime/build.rs");
}
