//! Perf events for `profile RATE`: one software CPU clock per CPU, which the profile's
//! BPF program is attached to.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The first fields of `struct perf_event_attr` (`PERF_ATTR_SIZE_VER0`, 64 bytes): every
/// kernel takes a shorter attr and reads the rest as zeros.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    /// `sample_period`, or `sample_freq` with the `freq` flag.
    sample: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_FREQ: u64 = 1 << 10;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `_IO('$', 1)`.
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// Opens CPU `cpu`'s software CPU clock (`cpu-clock`), sampling `hertz` times a second
/// (`Some`) or every `period_ns`, for every task on that CPU, disabled: attaching a BPF
/// program enables it (libbpf does).
pub fn cpu_clock(cpu: u32, hertz: Option<u64>, period_ns: u64) -> io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample: hertz.unwrap_or(period_ns),
        flags: FLAG_DISABLED | if hertz.is_some() { FLAG_FREQ } else { 0 },
        ..PerfEventAttr::default()
    };
    // SAFETY: `attr` is a valid perf_event_attr of the size it states, read by the call
    // only; pid -1 with a cpu is a per-CPU event; no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Stops the event: no more samples, and its count stays as it is.
pub fn disable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: an ioctl without argument on a descriptor this process owns.
    if unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_DISABLE, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The event's count: for the CPU clock, the nanoseconds it ran.
pub fn count(fd: &OwnedFd) -> io::Result<u64> {
    let mut file = File::from(fd.try_clone()?);
    let mut buf = [0u8; 8];
    file.read_exact(&mut buf)?;
    Ok(u64::from_ne_bytes(buf))
}
