//! Every `unsafe` call fslat makes to the operating system is in this module (and
//! `bpf.rs`, `load.rs` and `perf.rs` beside it); the rest of the crate is safe code
//! (`lib.rs` denies `unsafe_code` outside `sys`). Each function here has one small
//! contract, written on it.

pub mod bpf;
pub mod load;
pub mod perf;
pub mod probe;

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Raises this process's soft limit of open files to its hard limit: a session of many
/// functions in fentry or fsession mode holds a program and a link descriptor for each
/// (ext4_* on 7.2: about 940), past the usual soft limit of 1024. bpftrace does the same.
pub fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Drops every capability of the calling thread: effective, permitted, inheritable and
/// ambient. Capabilities are per thread in Linux: the process's other threads keep
/// theirs, and threads this one starts from now on have none. For the threads that read
/// network input.
pub fn drop_thread_capabilities() -> io::Result<()> {
    keep_thread_capabilities(0).map(|_| ())
}

/// Capability numbers (linux/capability.h), as bits of the sets below.
pub mod cap {
    pub const DAC_OVERRIDE: u32 = 1;
    pub const DAC_READ_SEARCH: u32 = 2;
    pub const SYS_PTRACE: u32 = 19;
    pub const SYS_ADMIN: u32 = 21;
    pub const SYSLOG: u32 = 34;
    pub const PERFMON: u32 = 38;
    pub const BPF: u32 = 39;
    pub const CHECKPOINT_RESTORE: u32 = 40;

    /// The set of `caps`.
    pub const fn set(caps: &[u32]) -> u64 {
        let mut s = 0;
        let mut i = 0;
        while i < caps.len() {
            s |= 1 << caps[i];
            i += 1;
        }
        s
    }
}

/// `_LINUX_CAPABILITY_VERSION_3` (capget(2), capset(2)): two 32-bit words of each set.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

/// The calling thread's (effective, permitted) capability sets, bit n for capability n.
pub fn thread_capabilities() -> io::Result<(u64, u64)> {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two data structs of the layout above, which live across the
    // call; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok((
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
    ))
}

/// Keeps, of the calling thread's effective and permitted capabilities, only those in
/// `keep` (bit n: capability n), and clears its inheritable and ambient sets, so nothing
/// it runs inherits any. Per thread, as `drop_thread_capabilities`; what is dropped
/// cannot be taken back. Returns the effective set kept.
pub fn keep_thread_capabilities(keep: u64) -> io::Result<u64> {
    let (effective, permitted) = thread_capabilities()?;
    let (effective, permitted) = (effective & keep, permitted & keep);
    // SAFETY: prctl with integer arguments only. Linux before 4.3 has no ambient set
    // (EINVAL), and then nothing to clear.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [0, 32].map(|shift| CapData {
        effective: (effective >> shift) as u32,
        permitted: (permitted >> shift) as u32,
        inheritable: 0,
    });
    // SAFETY: capset reads a header and two data structs of the layout above, which
    // live across the call; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(effective)
}

/// Whether this process may write `path` (access(2) with W_OK).
pub fn can_write(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// One open(2) for reading, close-on-exec. Unlike `File::open` it does not retry on
/// EINTR, so a signal can end the wait for a FIFO's writer.
pub fn open_read_once(path: &Path) -> io::Result<File> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// mkfifo(3).
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A pipe, both ends close-on-exec: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A forked child that execs `path` with `argv` only once a byte is written to `gate`.
pub struct GatedChild {
    pub pid: libc::pid_t,
    /// Writing a byte lets the child exec; closing it without one makes it exit 126.
    pub gate: OwnedFd,
    /// Carries the child's errno (4 bytes) if exec fails; closes when exec succeeds.
    pub exec_error: OwnedFd,
}

/// Forks a child that waits at a gate, then execs `path` with `argv` (argv[0] included).
pub fn fork_gated(path: &CStr, argv: &[CString]) -> io::Result<GatedChild> {
    let mut argv: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let (gate_read, gate_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    // SAFETY: the child only calls async-signal-safe functions (close, read, execv,
    // write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: as above; the descriptors are the pipes made before the fork.
        unsafe {
            libc::close(gate_write.as_raw_fd());
            libc::close(err_read.as_raw_fd());
            let mut byte = 0u8;
            loop {
                let n = libc::read(gate_read.as_raw_fd(), (&raw mut byte).cast(), 1);
                if n > 0 {
                    break;
                }
                // The gate closed without a byte: fslat gave up before attaching.
                if n == 0 || *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
            libc::execv(path.as_ptr(), argv.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_write.as_raw_fd(), (&raw const errno).cast(), 4);
            libc::_exit(127);
        }
    }
    Ok(GatedChild {
        pid,
        gate: gate_write,
        exec_error: err_read,
    })
}

/// waitpid(2) on a child of ours: its wait status once it has ended (with `block`, waits
/// for that).
pub fn wait_child(pid: libc::pid_t, block: bool) -> Option<i32> {
    let mut status = 0;
    let flags = if block { 0 } else { libc::WNOHANG };
    // SAFETY: waitpid on our own child with a valid status pointer.
    (unsafe { libc::waitpid(pid, &mut status, flags) } == pid).then_some(status)
}

/// pidfd_open(2) (Linux 5.3): a descriptor that becomes readable when process `pid`
/// exits. ESRCH when there is no such process.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Whether `fd` is readable now (poll(2) without waiting).
pub fn readable_now(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLIN != 0 }
}

/// Installs `handler` for `signals`, without SA_RESTART (so blocking calls return with
/// EINTR). The handler must be async-signal-safe.
pub fn set_signal_handler(signals: &[libc::c_int], handler: extern "C" fn(libc::c_int)) {
    for &sig in signals {
        // SAFETY: a zeroed sigaction with an empty mask and the given handler, which the
        // caller guarantees is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Gives `sig` back its default action.
pub fn default_signal_action(sig: libc::c_int) {
    // SAFETY: setting a signal's disposition back to its default has no preconditions.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
    }
}

/// Blocks (`block`) or unblocks `signals` in the calling thread.
pub fn set_thread_signal_mask(signals: &[libc::c_int], block: bool) {
    let how = if block {
        libc::SIG_BLOCK
    } else {
        libc::SIG_UNBLOCK
    };
    // SAFETY: a zeroed sigset filled by sigemptyset/sigaddset; pthread_sigmask only
    // changes the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in signals {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// A read-only private mapping of a whole file.
pub struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is private and read-only, and lives as long as the value.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `file` (None for an empty file or when mmap fails: read it instead).
    pub fn new(file: &File) -> Option<Mapping> {
        let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh read-only private mapping of an open file; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mapping { ptr, len })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr maps len readable bytes until drop.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}
