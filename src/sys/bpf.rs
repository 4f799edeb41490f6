//! The BPF system calls and libbpf calls that libbpf-rs does not wrap: multi-attach
//! fsession links (Linux 7.2, `BPF_LINK_TYPE_TRACING_MULTI`), the program type of a
//! multi-attach program, the kernel's BTF function ids, and `doctor`'s one-instruction
//! load-and-attach probe.
//!
//! The tracing_multi contract (uapi `linux/bpf.h` of 7.2): the program is loaded with
//! `expected_attach_type = BPF_TRACE_FSESSION_MULTI`; the link is created with
//! `link_create.tracing_multi = { ids, cookies, cnt }`, one BTF function id and one cookie
//! (`bpf_get_attach_cookie`) per function.

use libbpf_rs::{AsRawLibbpf, Link, OpenProgramMut, ProgramMut};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Sets `prog` (not loaded yet) to a tracing program with `attach_type`.
pub fn set_tracing_attach_type(prog: &mut OpenProgramMut, attach_type: u32) -> io::Result<()> {
    let ptr = prog.as_libbpf_object().as_ptr();
    // SAFETY: the pointer is libbpf's own, valid while `prog` is borrowed.
    let rc = unsafe {
        match libbpf_sys::bpf_program__set_type(ptr, libbpf_sys::BPF_PROG_TYPE_TRACING) {
            0 => libbpf_sys::bpf_program__set_expected_attach_type(ptr, attach_type),
            rc => rc,
        }
    };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(())
}

/// The running kernel's BTF as libbpf reads it (`btf__load_vmlinux_btf`), freed when
/// dropped: loaded once for what attaching multi-attach programs asks of it.
pub struct VmlinuxBtf(*mut libbpf_sys::btf);

impl VmlinuxBtf {
    pub fn load() -> Result<VmlinuxBtf, String> {
        // SAFETY: no arguments; returns a new BTF object or NULL (errno set).
        let btf = unsafe { libbpf_sys::btf__load_vmlinux_btf() };
        if btf.is_null() {
            return Err(format!(
                "cannot read the kernel's BTF: {}",
                io::Error::last_os_error()
            ));
        }
        Ok(VmlinuxBtf(btf))
    }

    /// The BTF ids of the functions `names`, in the same order.
    pub fn function_ids(&self, names: &[String]) -> Result<Vec<u32>, String> {
        names
            .iter()
            .map(|name| {
                let missing = || format!("`{name}` has no BTF function id in this kernel");
                let c = CString::new(name.as_str()).map_err(|_| missing())?;
                // SAFETY: `self.0` is valid while `self` lives; `c` outlives the call.
                let id = unsafe {
                    libbpf_sys::btf__find_by_name_kind(
                        self.0,
                        c.as_ptr(),
                        libbpf_sys::BTF_KIND_FUNC,
                    )
                };
                u32::try_from(id)
                    .ok()
                    .filter(|&id| id > 0)
                    .ok_or_else(missing)
            })
            .collect()
    }

    /// The BTF id of the typedef `btf_trace_NAME` of the tracepoint `name`: what a
    /// `tp_btf` program is loaded against.
    pub fn tracepoint_id(&self, name: &str) -> Option<u32> {
        let c = CString::new(format!("btf_trace_{name}")).ok()?;
        // SAFETY: `self.0` is valid while `self` lives; `c` outlives the call.
        let id = unsafe {
            libbpf_sys::btf__find_by_name_kind(self.0, c.as_ptr(), libbpf_sys::BTF_KIND_TYPEDEF)
        };
        u32::try_from(id).ok().filter(|&id| id > 0)
    }

    /// The value of `enum bpf_attach_type`'s member `name` (`BPF_TRACE_FSESSION_MULTI`,
    /// `BPF_TRACE_FEXIT_MULTI`): newer attach types are numbered by the kernel that has
    /// them, so fslat asks it rather than carrying the numbers.
    pub fn attach_type(&self, name: &str) -> Result<u32, String> {
        enum_value(self.0, c"bpf_attach_type", name)
            .ok_or_else(|| format!("this kernel's BTF has no `{name}` in enum bpf_attach_type"))
    }
}

impl Drop for VmlinuxBtf {
    fn drop(&mut self) {
        // SAFETY: from btf__load_vmlinux_btf, freed once, not used after.
        unsafe { libbpf_sys::btf__free(self.0) };
    }
}

/// The value of member `name` of the enum `enum_name` in `btf`.
fn enum_value(btf: *mut libbpf_sys::btf, enum_name: &std::ffi::CStr, name: &str) -> Option<u32> {
    // SAFETY: `btf` is a valid BTF object for the whole function; libbpf returns records
    // that live as long as it, and an enum's `vlen` members follow its `btf_type`.
    unsafe {
        let id =
            libbpf_sys::btf__find_by_name_kind(btf, enum_name.as_ptr(), libbpf_sys::BTF_KIND_ENUM);
        if id <= 0 {
            return None;
        }
        let t = libbpf_sys::btf__type_by_id(btf, id as u32);
        if t.is_null() {
            return None;
        }
        let vlen = ((*t).info & 0xffff) as usize;
        let members = t.add(1) as *const libbpf_sys::btf_enum;
        (0..vlen).find_map(|i| {
            let m = *members.add(i);
            let n = libbpf_sys::btf__name_by_offset(btf, m.name_off);
            (!n.is_null() && std::ffi::CStr::from_ptr(n).to_bytes() == name.as_bytes())
                .then_some(m.val as u32)
        })
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

/// `BPF_LINK_CREATE` of a tracing_multi link: `prog` on the functions `ids`, function
/// `ids[i]` with cookie `cookies[i]`. The link lives as long as the returned descriptor.
pub fn link_create_tracing_multi(
    prog: BorrowedFd,
    attach_type: u32,
    ids: &[u32],
    cookies: &[u64],
) -> io::Result<OwnedFd> {
    assert_eq!(ids.len(), cookies.len(), "one cookie per function");
    let attr = LinkCreateTracingMulti {
        prog_fd: prog.as_raw_fd() as u32,
        target_fd: 0,
        attach_type,
        flags: 0,
        ids: ids.as_ptr() as u64,
        cookies: cookies.as_ptr() as u64,
        cnt: ids.len() as u32,
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

/// Why `probe_tracing` failed: the step ("loading" or "attaching") and the errno.
pub struct ProbeFailure {
    pub step: &'static str,
    pub errno: i32,
}

/// Loads `r0 = 0; exit` as a tracing program of `attach_type` on the FUNC `btf_id`,
/// attaches it, and takes it away again.
pub fn probe_tracing(
    btf_id: u32,
    attach_type: libbpf_sys::bpf_attach_type,
) -> Result<(), ProbeFailure> {
    let mut mov = libbpf_sys::bpf_insn {
        code: (libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K) as u8,
        ..Default::default()
    };
    mov.set_dst_reg(0);
    let exit = libbpf_sys::bpf_insn {
        code: (libbpf_sys::BPF_JMP | libbpf_sys::BPF_EXIT) as u8,
        ..Default::default()
    };
    let prog = load_tracing("fslat_doctor", &[mov, exit], attach_type, btf_id).map_err(|f| {
        ProbeFailure {
            step: "loading",
            errno: f.errno,
        }
    })?;
    link_tracing(&prog, attach_type).map_err(|e| ProbeFailure {
        step: "attaching",
        errno: e.raw_os_error().unwrap_or(libc::EINVAL),
    })?;
    Ok(())
}

/// How many times the kernel skipped program `prog` because it was already running on
/// that CPU (`bpf_prog_info.recursion_misses`, Linux 5.12+; `None` on an older kernel,
/// which does not fill the field).
pub fn prog_recursion_misses(prog: BorrowedFd) -> io::Result<Option<u64>> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is a bpf_prog_info of `len` bytes with every pointer field null, so
    // the kernel writes only into it.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    let end = std::mem::offset_of!(libbpf_sys::bpf_prog_info, recursion_misses) + 8;
    Ok((len as usize >= end).then_some(info.recursion_misses))
}

/// Whether a thread that holds no capability can use a BPF object (a program or a map)
/// through an fd it already holds. Linux 5.10 checks CAP_BPF on every bpf(2) command
/// while unprivileged BPF is disabled (Debian's default); 6.1, 6.12 and 7.2 check only
/// when an object is made (seen in the test guests). Tried for real: a short-lived thread
/// drops every capability and asks for `fd`'s information.
pub fn fd_use_without_capabilities(fd: BorrowedFd) -> bool {
    std::thread::scope(|s| {
        s.spawn(|| super::drop_thread_capabilities().is_ok() && object_info(fd).is_ok())
            .join()
            .unwrap_or(false)
    })
}

/// BPF_OBJ_GET_INFO_BY_FD into a zeroed buffer bigger than any kernel's info struct (the
/// kernel accepts a longer buffer whose tail is zero, and fills what it knows).
fn object_info(fd: BorrowedFd) -> io::Result<()> {
    let mut info = [0u64; 64];
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is `len` zeroed bytes: every pointer field of the kernel's info
    // struct is null, so the kernel writes only into it.
    let rc = unsafe {
        libbpf_sys::bpf_obj_get_info_by_fd(fd.as_raw_fd(), info.as_mut_ptr().cast(), &mut len)
    };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(())
}

/// A one-entry array map, for `doctor` to try `fd_use_without_capabilities` on.
pub fn small_map() -> io::Result<OwnedFd> {
    let name = CString::new("fslat_doctor").expect("no NUL");
    // SAFETY: a valid name and no options; the fd returned is ours to own.
    let fd = unsafe {
        libbpf_sys::bpf_map_create(
            libbpf_sys::BPF_MAP_TYPE_ARRAY,
            name.as_ptr(),
            4,
            8,
            1,
            std::ptr::null(),
        )
    };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Where a kprobe_multi link runs its program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KprobeAt {
    /// At entry and return (`SEC("kprobe.session")`, the link in session mode).
    Session,
    /// At entry only (`SEC("kprobe.multi")`).
    Entry,
    /// At return only (`SEC("kretprobe.multi")`, `BPF_F_KPROBE_MULTI_RETURN`).
    Return,
}

/// Attaches the kprobe program `prog` to the kernel functions `symbols` through one
/// kprobe_multi link, function `symbols[i]` with cookie `cookies[i]`
/// (`bpf_get_attach_cookie`), where `at` says.
pub fn attach_kprobes(
    prog: &ProgramMut<'_>,
    symbols: &[String],
    cookies: &[u64],
    at: KprobeAt,
) -> io::Result<Link> {
    assert_eq!(symbols.len(), cookies.len(), "one cookie per function");
    let names: Vec<CString> = symbols
        .iter()
        .map(|s| CString::new(s.as_str()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
        .collect::<io::Result<_>>()?;
    let mut ptrs: Vec<*const std::os::raw::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let opts = libbpf_sys::bpf_kprobe_multi_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_kprobe_multi_opts>() as _,
        syms: ptrs.as_mut_ptr(),
        cookies: cookies.as_ptr(),
        cnt: symbols.len() as _,
        session: at == KprobeAt::Session,
        retprobe: at == KprobeAt::Return,
        ..Default::default()
    };
    // SAFETY: `prog` is a loaded program; `opts` and the arrays it points to (the names,
    // their pointers, the cookies) outlive the call, which only reads them.
    let link = unsafe {
        libbpf_sys::bpf_program__attach_kprobe_multi_opts(
            prog.as_libbpf_object().as_ptr(),
            std::ptr::null(),
            &opts,
        )
    };
    match std::ptr::NonNull::new(link) {
        // SAFETY: libbpf returned a new link that nothing else owns.
        Some(link) => Ok(unsafe { Link::from_ptr(link) }),
        None => Err(io::Error::last_os_error()),
    }
}

/// libbpf's `bpf_object__prepare`: maps made, programs relocated, nothing loaded.
pub fn prepare_object(open: &mut libbpf_rs::OpenObject) -> io::Result<()> {
    // SAFETY: libbpf's own object, not loaded; libbpf refuses a second prepare.
    let rc = unsafe { libbpf_sys::bpf_object__prepare(open.as_libbpf_object().as_ptr()) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(())
}

/// Replaces the instructions of `prog` (not loaded yet) with `insns`.
pub fn set_insns(
    prog: &mut OpenProgramMut,
    mut insns: Vec<libbpf_sys::bpf_insn>,
) -> io::Result<()> {
    // SAFETY: libbpf's own program, not loaded; libbpf copies the instructions.
    let rc = unsafe {
        libbpf_sys::bpf_program__set_insns(
            prog.as_libbpf_object().as_ptr(),
            insns.as_mut_ptr(),
            insns.len() as _,
        )
    };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(())
}

/// Whether libbpf made `map` (a map it did not create has no descriptor).
pub fn map_made(map: &libbpf_rs::Map) -> bool {
    // SAFETY: libbpf's own map, valid while `map` is borrowed.
    unsafe { libbpf_sys::bpf_map__fd(map.as_libbpf_object().as_ptr()) >= 0 }
}

/// Whether libbpf loaded `prog` (one it did not load has no descriptor).
pub fn prog_loaded(prog: &libbpf_rs::Program) -> bool {
    // SAFETY: libbpf's own program, valid while `prog` is borrowed.
    unsafe { libbpf_sys::bpf_program__fd(prog.as_libbpf_object().as_ptr()) >= 0 }
}

/// The attach type `prog` was loaded with.
pub fn expected_attach_type(prog: &ProgramMut) -> u32 {
    // SAFETY: libbpf's own program, valid while `prog` is borrowed.
    unsafe { libbpf_sys::bpf_program__expected_attach_type(prog.as_libbpf_object().as_ptr()) }
}

/// Why `load_tracing` failed: the errno and the verifier's log.
pub struct LoadFailure {
    pub errno: i32,
    pub log: String,
}

/// Loads `insns` as a tracing program `name` of `attach_type` on the kernel function
/// with BTF id `btf_id`. On failure, loads again with the verifier's log on, for the
/// message.
pub fn load_tracing(
    name: &str,
    insns: &[libbpf_sys::bpf_insn],
    attach_type: u32,
    btf_id: u32,
) -> Result<OwnedFd, LoadFailure> {
    // The kernel keeps 15 bytes of a program's name.
    let name = CString::new(name.chars().take(15).collect::<String>()).unwrap_or_default();
    let license = c"GPL";
    let mut log = vec![0u8; 0];
    for log_level in [0, 1] {
        if log_level == 1 {
            log = vec![0u8; 1 << 20];
        }
        let mut opts = libbpf_sys::bpf_prog_load_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
            expected_attach_type: attach_type,
            attach_btf_id: btf_id,
            log_level,
            log_size: log.len() as u32,
            log_buf: if log.is_empty() {
                std::ptr::null_mut()
            } else {
                log.as_mut_ptr().cast()
            },
            ..Default::default()
        };
        // SAFETY: the pointers are valid for the call; the kernel copies the instructions
        // and writes at most `log_size` bytes of log.
        let fd = unsafe {
            libbpf_sys::bpf_prog_load(
                libbpf_sys::BPF_PROG_TYPE_TRACING,
                name.as_ptr(),
                license.as_ptr(),
                insns.as_ptr(),
                insns.len() as _,
                &mut opts,
            )
        };
        if fd >= 0 {
            // SAFETY: a new descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        if log_level == 1 {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            return Err(LoadFailure {
                errno: -fd,
                log: String::from_utf8_lossy(&log[..end]).into_owned(),
            });
        }
    }
    unreachable!("the second try returns")
}

/// Attaches the loaded copy `prog` (to the function it was loaded for). The link lives
/// as long as the returned descriptor.
pub fn link_tracing(prog: &OwnedFd, attach_type: u32) -> io::Result<OwnedFd> {
    // SAFETY: `prog` is a loaded program; NULL options are allowed (libbpf falls back to
    // BPF_RAW_TRACEPOINT_OPEN where the kernel cannot link tracing programs, 5.10).
    let link =
        unsafe { libbpf_sys::bpf_link_create(prog.as_raw_fd(), 0, attach_type, std::ptr::null()) };
    if link < 0 {
        return Err(io::Error::from_raw_os_error(-link));
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(link) })
}

#[cfg(test)]
mod tests {
    /// The host's own BTF: BPF_TRACE_FENTRY has been 24 since it arrived (5.5); a name
    /// the enum lacks is an error naming it.
    #[test]
    fn attach_types_come_from_the_kernels_btf() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            return;
        }
        let btf = super::VmlinuxBtf::load().expect("the host's BTF loads");
        assert_eq!(btf.attach_type("BPF_TRACE_FENTRY"), Ok(24));
        assert!(
            btf.attach_type("BPF_TRACE_NO_SUCH")
                .is_err_and(|e| e.contains("BPF_TRACE_NO_SUCH"))
        );
    }
}
