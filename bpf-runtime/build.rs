//! Cargo build script: copies libbpf's BPF-side headers (from libbpf-sys, the same libbpf
//! fslat links) into OUT_DIR so the binary can embed them and needs no libbpf-dev, and
//! computes the digest of every header the binary embeds (`build::HEADERS`) for the
//! object cache's key: SHA-256 of 270 KB took about 16 ms of each cold start in the 7.2
//! test guest when it was computed at run time.
//!
//! `bpf_helper_defs.h` (176 KB: 211 helpers, each with its documentation) is embedded with
//! only the helpers fslat's sources name (`bpf_...` in src/, templates/ and bpf-runtime/),
//! and no comments: clang reads the header at every cold start, and the whole of it cost
//! about 14% of clang's compile of the slow-read script on the host. A helper a script
//! needs but the sources do not name would be a compile error (clang is run with
//! `-Werror=implicit-function-declaration`), caught by the tests that compile every shape.

use std::path::PathBuf;

const HEADERS: &[&str] = &[
    "bpf_helpers.h",
    "bpf_helper_defs.h",
    "bpf_core_read.h",
    "bpf_tracing.h",
    "bpf_endian.h",
    "usdt.bpf.h",
];

/// `linux/errno.h` as libbpf's `usdt.bpf.h` includes it: the three codes it returns (their
/// values are the kernel's ABI), so that building needs no kernel headers.
const ERRNO_H: &str =
    "/* The errno values libbpf's usdt.bpf.h returns (include/uapi/asm-generic/errno-base.h). */
#define ENOENT 2
#define ESRCH 3
#define EINVAL 22
";

fn main() {
    let include = PathBuf::from(
        std::env::var("DEP_BPF_INCLUDE").expect("libbpf-sys exports its include directory"),
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // (name in the include directory, contents), as src/build/mod.rs's HEADERS names them.
    let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
    let named = names_in_sources();
    for h in HEADERS {
        let src = include.join("bpf").join(h);
        let mut text = read(&src);
        if *h == "bpf_helper_defs.h" {
            text = helpers_named(&String::from_utf8_lossy(&text), &named).into_bytes();
        }
        std::fs::write(out.join(h), &text)
            .unwrap_or_else(|e| panic!("writing {h} for {}: {e}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
        headers.push((format!("bpf/{h}"), text));
    }
    std::fs::write(out.join("errno.h"), ERRNO_H).unwrap_or_else(|e| panic!("writing errno.h: {e}"));
    headers.push(("linux/errno.h".into(), ERRNO_H.as_bytes().to_vec()));
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
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=templates");
}

/// Every `bpf_...` word of the sources that write BPF C: the Rust (codegen's strings and
/// the checker's builtins), the templates and fslat's own headers.
fn names_in_sources() -> std::collections::HashSet<String> {
    let mut names = std::collections::HashSet::new();
    let mut dirs = vec![
        PathBuf::from("src"),
        PathBuf::from("templates"),
        PathBuf::from("bpf-runtime"),
    ];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a readable directory").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let mut rest = text.as_str();
            while let Some(at) = rest.find("bpf_") {
                let word: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + word.len().max(1)..];
                names.insert(word);
            }
        }
    }
    names
}

/// libbpf's `bpf_helper_defs.h` without its comments and with only the helpers `named`:
/// each helper is one line, `static T (* const bpf_NAME)(...) = (void *) N;`.
fn helpers_named(defs: &str, named: &std::collections::HashSet<String>) -> String {
    let mut out = String::new();
    let mut rest = defs;
    // Comments first: a helper's documentation may hold anything.
    let mut code = String::new();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        match rest[start..].find("*/") {
            Some(end) => rest = &rest[start + end + 2..],
            None => rest = "",
        }
    }
    code.push_str(rest);
    for line in code.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let helper = line
            .split("(* const ")
            .nth(1)
            .and_then(|r| r.split(')').next());
        if helper.is_none_or(|h| named.contains(h)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}
