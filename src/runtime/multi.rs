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

/// What attaching one multi-attach session needs from the kernel's BTF, read before the
/// object loads: the attach type of its mode and its functions' BTF ids.
pub struct Plan {
    attach_type: u32,
    ids: Vec<u32>,
    /// Each function's cookie (its index in the program's tables).
    cookies: Vec<u64>,
}

/// The plan for a session in `mode` over the functions `funcs`, function `i` with cookie
/// `cookies[i]`, from `btf`.
pub fn plan(
    btf: &bpf::VmlinuxBtf,
    mode: Mode,
    funcs: &[String],
    cookies: Vec<u64>,
) -> Result<Plan, String> {
    let attach_type = btf.attach_type(match mode {
        Mode::FexitMulti => "BPF_TRACE_FEXIT_MULTI",
        _ => "BPF_TRACE_FSESSION_MULTI",
    })?;
    Ok(Plan {
        attach_type,
        ids: btf.function_ids(funcs)?,
        cookies,
    })
}

/// Makes `prog` load as the multi-attach program `plan` is for (before the object loads).
pub fn prepare(prog: &mut OpenProgramMut, plan: &Plan) -> io::Result<()> {
    bpf::set_tracing_attach_type(prog, plan.attach_type)
}

/// Attaches the loaded program `prog` to the plan's functions, each with its cookie. The
/// link lives as long as the returned descriptor.
pub fn attach(prog: BorrowedFd, plan: &Plan) -> io::Result<OwnedFd> {
    // Ascending ids, each with its cookie, so the kernel's own sort changes nothing.
    let mut pairs: Vec<(u32, u64)> = plan
        .ids
        .iter()
        .copied()
        .zip(plan.cookies.iter().copied())
        .collect();
    pairs.sort_unstable();
    let sorted_ids: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    let cookies: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    bpf::link_create_tracing_multi(prog, plan.attach_type, &sorted_ids, &cookies)
}
