//! One fsession program attached to many functions through one link (Linux 7.2:
//! `BPF_TRACE_FSESSION_MULTI`, `BPF_LINK_TYPE_TRACING_MULTI`). libbpf 1.7 has no wrapper
//! for it, so this module makes the `BPF_LINK_CREATE` system call itself; every unsafe
//! call the multi-attach path needs is here.
//!
//! The kernel's contract (uapi `linux/bpf.h` of 7.2): the program is loaded with
//! `expected_attach_type = BPF_TRACE_FSESSION_MULTI` and `attach_btf_id` of the kernel's
//! stub `bpf_multi_func` (the C names it in `SEC("fsession/bpf_multi_func")`, so libbpf
//! resolves it); the link is created with `link_create.tracing_multi = { ids, cookies,
//! cnt }`, one BTF function id and one cookie (`bpf_get_attach_cookie`) per function.

use crate::codegen::FSESSION_MULTI_ATTACH_TYPE;
use libbpf_rs::{AsRawLibbpf, OpenProgramMut};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Makes `prog` load as a multi-attach fsession program (before the object loads).
pub fn prepare(prog: &mut OpenProgramMut) -> io::Result<()> {
    let ptr = prog.as_libbpf_object().as_ptr();
    // SAFETY: the pointer is libbpf's own, valid while `prog` is borrowed.
    let rc = unsafe {
        match libbpf_sys::bpf_program__set_type(ptr, libbpf_sys::BPF_PROG_TYPE_TRACING) {
            0 => libbpf_sys::bpf_program__set_expected_attach_type(ptr, FSESSION_MULTI_ATTACH_TYPE),
            rc => rc,
        }
    };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(())
}

/// The kernel's BTF ids of `names` (functions), in the same order.
pub fn function_ids(names: &[String]) -> Result<Vec<u32>, String> {
    // SAFETY: no arguments; returns a new BTF object or NULL (errno set).
    let btf = unsafe { libbpf_sys::btf__load_vmlinux_btf() };
    if btf.is_null() {
        return Err(format!(
            "cannot read the kernel's BTF: {}",
            io::Error::last_os_error()
        ));
    }
    let mut ids = Vec::with_capacity(names.len());
    let mut missing = None;
    for name in names {
        let Ok(c) = CString::new(name.as_str()) else {
            missing = Some(name.clone());
            break;
        };
        // SAFETY: `btf` is valid until freed below; `c` outlives the call.
        let id = unsafe {
            libbpf_sys::btf__find_by_name_kind(btf, c.as_ptr(), libbpf_sys::BTF_KIND_FUNC)
        };
        if id <= 0 {
            missing = Some(name.clone());
            break;
        }
        ids.push(id as u32);
    }
    // SAFETY: `btf` came from btf__load_vmlinux_btf and is not used after this.
    unsafe { libbpf_sys::btf__free(btf) };
    match missing {
        Some(name) => Err(format!("`{name}` has no BTF function id in this kernel")),
        None => Ok(ids),
    }
}

/// `union bpf_attr` as `BPF_LINK_CREATE` reads it for `tracing_multi`, padded with zeros
/// to the size of the union's larger members (the kernel checks the tail is zero).
#[repr(C)]
struct LinkCreateTracingMulti {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    ids: u64,
    cookies: u64,
    cnt: u32,
    _pad: u32,
    _rest: [u64; 4],
}

/// Attaches the loaded program `prog` to the functions with BTF `ids`; function `i` gets
/// cookie `i`. The link lives as long as the returned descriptor.
pub fn attach(prog: BorrowedFd, ids: &[u32]) -> io::Result<OwnedFd> {
    // Ascending ids, each with its cookie, so the kernel's own sort changes nothing.
    let mut pairs: Vec<(u32, u64)> = ids.iter().copied().zip(0u64..).collect();
    pairs.sort_unstable();
    let sorted_ids: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    let cookies: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    let attr = LinkCreateTracingMulti {
        prog_fd: prog.as_raw_fd() as u32,
        target_fd: 0,
        attach_type: FSESSION_MULTI_ATTACH_TYPE,
        flags: 0,
        ids: sorted_ids.as_ptr() as u64,
        cookies: cookies.as_ptr() as u64,
        cnt: sorted_ids.len() as u32,
        _pad: 0,
        _rest: [0; 4],
    };
    // SAFETY: `attr` is a valid bpf_attr for BPF_LINK_CREATE of its size; the arrays it
    // points to outlive the call, which only reads them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            libbpf_sys::BPF_LINK_CREATE,
            &attr as *const LinkCreateTracingMulti,
            std::mem::size_of::<LinkCreateTracingMulti>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
