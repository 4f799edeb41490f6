//! One fsession program attached to many functions through one link (Linux 7.2:
//! `BPF_TRACE_FSESSION_MULTI`, `BPF_LINK_TYPE_TRACING_MULTI`). libbpf 1.7 has no wrapper
//! for it, so `sys::bpf` makes the `BPF_LINK_CREATE` system call itself.
//!
//! The kernel's contract (uapi `linux/bpf.h` of 7.2): the program is loaded with
//! `expected_attach_type = BPF_TRACE_FSESSION_MULTI` and `attach_btf_id` of the kernel's
//! stub `bpf_multi_func` (the C names it in `SEC("fsession/bpf_multi_func")`, so libbpf
//! resolves it); the link is created with `link_create.tracing_multi = { ids, cookies,
//! cnt }`, one BTF function id and one cookie (`bpf_get_attach_cookie`) per function.

use crate::check::resources::Mode;
use crate::sys::bpf;
use libbpf_rs::OpenProgramMut;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::OnceLock;

/// The attach type of a multi-attach program of a session in `mode`, as the running
/// kernel numbers it (`enum bpf_attach_type` in its BTF; 61 and 60 on 7.2), read once.
fn attach_type(mode: Mode) -> io::Result<u32> {
    const NAMES: [&str; 2] = ["BPF_TRACE_FSESSION_MULTI", "BPF_TRACE_FEXIT_MULTI"];
    static TYPES: OnceLock<Vec<Result<u32, String>>> = OnceLock::new();
    let types = TYPES.get_or_init(|| bpf::vmlinux_attach_types(&NAMES));
    let i = usize::from(mode == Mode::FexitMulti);
    types[i].clone().map_err(io::Error::other)
}

/// Makes `prog` load as a multi-attach program of a session in `mode` (before the
/// object loads).
pub fn prepare(prog: &mut OpenProgramMut, mode: Mode) -> io::Result<()> {
    bpf::set_tracing_attach_type(prog, attach_type(mode)?)
}

/// The kernel's BTF ids of `names` (functions), in the same order.
pub fn function_ids(names: &[String]) -> Result<Vec<u32>, String> {
    bpf::vmlinux_function_ids(names)
}

/// Attaches the loaded program `prog` to the functions with BTF `ids`; function `i` gets
/// cookie `i`. The link lives as long as the returned descriptor.
pub fn attach(prog: BorrowedFd, mode: Mode, ids: &[u32]) -> io::Result<OwnedFd> {
    // Ascending ids, each with its cookie, so the kernel's own sort changes nothing.
    let mut pairs: Vec<(u32, u64)> = ids.iter().copied().zip(0u64..).collect();
    pairs.sort_unstable();
    let sorted_ids: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    let cookies: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    bpf::link_create_tracing_multi(prog, attach_type(mode)?, &sorted_ids, &cookies)
}
