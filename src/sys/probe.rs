//! `doctor`'s probes: each makes the smallest program (or map) of one kind fslat uses,
//! attaches it where that kind attaches, and takes it away again. What fails says so with
//! the step and the kernel's errno: the kernel's own answer, never one guessed from its
//! version or BTF.

use super::bpf::ProbeFailure;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// `r0 = 0; exit`.
fn return_zero() -> [libbpf_sys::bpf_insn; 2] {
    let mut mov = libbpf_sys::bpf_insn {
        code: (libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K) as u8,
        ..Default::default()
    };
    mov.set_dst_reg(0);
    let exit = libbpf_sys::bpf_insn {
        code: (libbpf_sys::BPF_JMP | libbpf_sys::BPF_EXIT) as u8,
        ..Default::default()
    };
    [mov, exit]
}

fn fd_or(step: &'static str, rc: i32) -> Result<OwnedFd, ProbeFailure> {
    if rc < 0 {
        return Err(ProbeFailure { step, errno: -rc });
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

/// Loads `insns` as a `prog_type` program expecting `attach_type`.
fn load(
    prog_type: libbpf_sys::bpf_prog_type,
    attach_type: u32,
    insns: &[libbpf_sys::bpf_insn],
) -> Result<OwnedFd, ProbeFailure> {
    load_flags(prog_type, attach_type, insns, 0)
}

/// `load` with `prog_flags` (`BPF_F_SLEEPABLE`).
fn load_flags(
    prog_type: libbpf_sys::bpf_prog_type,
    attach_type: u32,
    insns: &[libbpf_sys::bpf_insn],
    prog_flags: u32,
) -> Result<OwnedFd, ProbeFailure> {
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type: attach_type,
        prog_flags,
        ..Default::default()
    };
    // SAFETY: the name, license and instructions outlive the call, which copies them.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            prog_type,
            c"fslat_doctor".as_ptr(),
            c"GPL".as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            &mut opts,
        )
    };
    fd_or("loading", fd)
}

/// A kprobe session program on the kernel function `symbol`, through a kprobe_multi link
/// in session mode (Linux 6.10), as `--mode kprobe-session` attaches.
pub fn kprobe_session(symbol: &str) -> Result<(), ProbeFailure> {
    let attach = libbpf_sys::BPF_TRACE_KPROBE_SESSION;
    let prog = load(libbpf_sys::BPF_PROG_TYPE_KPROBE, attach, &return_zero())?;
    super::load::attach_kprobes(
        std::os::fd::AsFd::as_fd(&prog),
        attach,
        &[symbol.to_string()],
        &[0],
        super::bpf::KprobeAt::Session,
    )
    .map(drop)
    .map_err(|e| ProbeFailure {
        step: "attaching",
        errno: e.raw_os_error().unwrap_or(libc::EINVAL),
    })
}

/// A uprobe_multi link (`attach_type` BPF_TRACE_UPROBE_MULTI, or BPF_TRACE_UPROBE_SESSION
/// for a session) at `offset` of the file `path`, in this process only.
pub fn uprobe_multi(path: &Path, offset: u64, attach_type: u32) -> Result<(), ProbeFailure> {
    let prog = load(
        libbpf_sys::BPF_PROG_TYPE_KPROBE,
        attach_type,
        &return_zero(),
    )?;
    let path = path_c(path)?;
    let offsets = [offset as std::os::raw::c_ulong];
    let mut opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        ..Default::default()
    };
    opts.__bindgen_anon_1.uprobe_multi.path = path.as_ptr();
    opts.__bindgen_anon_1.uprobe_multi.offsets = offsets.as_ptr();
    opts.__bindgen_anon_1.uprobe_multi.cnt = 1;
    opts.__bindgen_anon_1.uprobe_multi.pid = std::process::id();
    // SAFETY: a loaded program; the path and offsets outlive the call, which reads them.
    let link = unsafe { libbpf_sys::bpf_link_create(prog.as_raw_fd(), 0, attach_type, &opts) };
    fd_or("attaching", link).map(drop)
}

/// A classic uprobe at `offset` of the file `path`, in this process only: a perf event of
/// the `uprobe` PMU with the program set on it, as libbpf attaches `--mode uprobe`'s.
pub fn uprobe(path: &Path, offset: u64) -> Result<(), ProbeFailure> {
    uprobe_flags(path, offset, 0)
}

/// `uprobe` with a sleepable program (`uprobe.s`, Linux 6.0; 5.10's verifier refuses a
/// sleepable program of this type at load).
pub fn sleepable_uprobe(path: &Path, offset: u64) -> Result<(), ProbeFailure> {
    uprobe_flags(path, offset, libbpf_sys::BPF_F_SLEEPABLE)
}

fn uprobe_flags(path: &Path, offset: u64, prog_flags: u32) -> Result<(), ProbeFailure> {
    let prog = load_flags(
        libbpf_sys::BPF_PROG_TYPE_KPROBE,
        0,
        &return_zero(),
        prog_flags,
    )?;
    let pmu = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .ok_or(ProbeFailure {
            step: "finding the uprobe PMU (/sys/bus/event_source/devices/uprobe/type)",
            errno: libc::ENOENT,
        })?;
    let path = path_c(path)?;
    let mut attr = libbpf_sys::perf_event_attr {
        type_: pmu,
        size: std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32,
        ..Default::default()
    };
    attr.__bindgen_anon_3.uprobe_path = path.as_ptr() as u64;
    attr.__bindgen_anon_4.probe_offset = offset;
    // SAFETY: `attr` and the path it points to outlive the call; the kernel returns a new
    // descriptor or an error.
    let pfd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const libbpf_sys::perf_event_attr,
            0,
            -1,
            -1,
            libc::c_ulong::from(libbpf_sys::PERF_FLAG_FD_CLOEXEC),
        )
    };
    let pfd = if pfd < 0 {
        Err(ProbeFailure {
            step: "opening the uprobe",
            errno: std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL),
        })
    } else {
        // SAFETY: a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(pfd as i32) })
    }?;
    // _IOW('$', 8, __u32): PERF_EVENT_IOC_SET_BPF.
    const SET_BPF: libc::c_ulong = 0x4004_2408;
    // SAFETY: both descriptors are open; the kernel takes its own reference on the program.
    let rc = unsafe { libc::ioctl(pfd.as_raw_fd(), SET_BPF as _, prog.as_raw_fd()) };
    if rc < 0 {
        return Err(ProbeFailure {
            step: "attaching",
            errno: std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL),
        });
    }
    Ok(())
}

fn path_c(path: &Path) -> Result<CString, ProbeFailure> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| ProbeFailure {
        step: "naming the file",
        errno: libc::EINVAL,
    })
}

/// A BPF ring buffer of one page, as every run makes for its events.
pub fn ring_buffer() -> Result<(), ProbeFailure> {
    // SAFETY: no name, no options; the descriptor returned is ours to own.
    let fd = unsafe {
        libbpf_sys::bpf_map_create(
            libbpf_sys::BPF_MAP_TYPE_RINGBUF,
            std::ptr::null(),
            0,
            0,
            4096,
            std::ptr::null(),
        )
    };
    fd_or("making the map", fd).map(drop)
}

/// Whether the kernel makes a task storage map (libbpf's probe, which gives it the BTF
/// such a map needs). `Err` with libbpf's errno when it could not tell.
pub fn task_storage() -> Result<bool, ProbeFailure> {
    // SAFETY: no options.
    let rc = unsafe {
        libbpf_sys::libbpf_probe_bpf_map_type(
            libbpf_sys::BPF_MAP_TYPE_TASK_STORAGE,
            std::ptr::null(),
        )
    };
    yes_no("making the map", rc)
}

/// Whether the verifier lets a kprobe program call helper `id` (libbpf's probe: it loads
/// one that does).
pub fn helper(id: libbpf_sys::bpf_func_id) -> Result<bool, ProbeFailure> {
    // SAFETY: no options.
    let rc = unsafe {
        libbpf_sys::libbpf_probe_bpf_helper(libbpf_sys::BPF_PROG_TYPE_KPROBE, id, std::ptr::null())
    };
    yes_no("loading", rc)
}

fn yes_no(step: &'static str, rc: i32) -> Result<bool, ProbeFailure> {
    match rc {
        0 => Ok(false),
        rc if rc > 0 => Ok(true),
        rc => Err(ProbeFailure { step, errno: -rc }),
    }
}

/// A kprobe program with one atomic fetch-and-add on its stack (the BPF atomics of Linux
/// 5.12, which min() and max() use; 5.10 knows only the plain add and refuses it).
pub fn atomics() -> Result<(), ProbeFailure> {
    let insn = |code: u32, dst: u8, src: u8, off: i16, imm: i32| {
        let mut i = libbpf_sys::bpf_insn {
            code: code as u8,
            off,
            imm,
            ..Default::default()
        };
        i.set_dst_reg(dst);
        i.set_src_reg(src);
        i
    };
    let mov_imm = libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K;
    let [ret, exit] = return_zero();
    let insns = [
        insn(mov_imm, 1, 0, 0, 0),
        insn(
            libbpf_sys::BPF_STX | libbpf_sys::BPF_MEM | libbpf_sys::BPF_DW,
            10,
            1,
            -8,
            0,
        ),
        insn(mov_imm, 1, 0, 0, 1),
        insn(
            libbpf_sys::BPF_STX | libbpf_sys::BPF_ATOMIC | libbpf_sys::BPF_DW,
            10,
            1,
            -8,
            (libbpf_sys::BPF_ADD | libbpf_sys::BPF_FETCH) as i32,
        ),
        ret,
        exit,
    ];
    load(libbpf_sys::BPF_PROG_TYPE_KPROBE, 0, &insns).map(drop)
}
