//! `-c CMD`: a command fslat starts held at the door until every program is attached,
//! so the trace sees it from its first instruction, and whose exit ends the run.
//!
//! The child is forked by hand: it must exist (so its pid can go into the filter before
//! load) but not exec until released, which `std::process::Command` cannot express (its
//! `spawn` waits for the exec).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub struct HeldChild {
    pid: libc::pid_t,
    /// Writing a byte lets the child exec.
    gate: Option<OwnedFd>,
    /// Carries the child's errno if exec fails; closes (close-on-exec) when exec succeeds.
    exec_error: Option<OwnedFd>,
    status: Option<i32>,
}

/// Characters that need a shell; without them the command is split on white space and
/// run directly.
const SHELL_CHARS: &[char] = &[
    '|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', '*', '?', '[', ']', '~', '\n',
    '#', '=', '{', '}',
];

pub fn needs_shell(cmd: &str) -> bool {
    cmd.contains(SHELL_CHARS)
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

impl HeldChild {
    /// Forks a child for `cmd` that waits before exec.
    pub fn spawn(cmd: &str) -> io::Result<HeldChild> {
        let words: Vec<String> = if needs_shell(cmd) {
            vec!["/bin/sh".into(), "-c".into(), cmd.into()]
        } else {
            cmd.split_whitespace().map(String::from).collect()
        };
        let program = words
            .first()
            .ok_or_else(|| invalid("the command is empty"))?;
        // Say "not found" now, not after the trace has started.
        let path = which::which(program).map_err(|_| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("`{program}` is not a file or a command on PATH"),
            )
        })?;
        let path = CString::new(path.into_os_string().into_encoded_bytes())
            .map_err(|_| invalid("the command contains a NUL byte"))?;
        let args: Vec<CString> = words
            .iter()
            .map(|w| CString::new(w.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| invalid("the command contains a NUL byte"))?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
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
        drop(gate_read);
        drop(err_write);
        Ok(HeldChild {
            pid,
            gate: Some(gate_write),
            exec_error: Some(err_read),
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the command run. Returns the error if it could not exec.
    pub fn release(&mut self) -> io::Result<()> {
        if let Some(gate) = self.gate.take() {
            // SAFETY: one byte from a valid buffer to a descriptor we own.
            unsafe { libc::write(gate.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        }
        if let Some(err) = self.exec_error.take() {
            let mut errno = [0u8; 4];
            // SAFETY: reading at most 4 bytes into a 4-byte buffer.
            let n = unsafe { libc::read(err.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
            if n == 4 {
                return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
            }
        }
        Ok(())
    }

    /// The command's wait status once it has ended.
    pub fn exited(&mut self) -> Option<i32> {
        if self.status.is_none() {
            let mut status = 0;
            // SAFETY: waitpid on our own child with a valid status pointer.
            if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
                self.status = Some(status);
            }
        }
        self.status
    }
}

impl Drop for HeldChild {
    /// A command that never got to run (fslat failed before attaching) is not left
    /// behind: closing the gate makes it exit; then it is reaped.
    fn drop(&mut self) {
        self.gate.take();
        if self.status.is_none() {
            let mut status = 0;
            // SAFETY: waitpid on our own child.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
