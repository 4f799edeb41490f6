//! `-c CMD`: a command fslat starts held at the door until every program is attached,
//! so the trace sees it from its first instruction, and whose exit ends the run.
//!
//! The child is forked by hand: it must exist (so its pid can go into the filter before
//! load) but not exec until released, which `std::process::Command` cannot express (its
//! `spawn` waits for the exec).

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;

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
        let child = crate::sys::fork_gated(&path, &args)?;
        Ok(HeldChild {
            pid: child.pid,
            gate: Some(child.gate),
            exec_error: Some(child.exec_error),
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the command run. Returns the error if it could not exec.
    pub fn release(&mut self) -> io::Result<()> {
        if let Some(gate) = self.gate.take() {
            // The child may have died already: its exec error (or status) says why.
            let _ = File::from(gate).write_all(&[1]);
        }
        if let Some(err) = self.exec_error.take() {
            let mut errno = [0u8; 4];
            if File::from(err).read_exact(&mut errno).is_ok() {
                return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
            }
        }
        Ok(())
    }

    /// Waits for the command to end; its wait status.
    pub fn wait(&mut self) -> i32 {
        while self.status.is_none() {
            self.status = crate::sys::wait_child(self.pid, true);
        }
        self.status.unwrap_or_default()
    }

    /// The command's wait status once it has ended.
    pub fn exited(&mut self) -> Option<i32> {
        if self.status.is_none() {
            self.status = crate::sys::wait_child(self.pid, false);
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
            crate::sys::wait_child(self.pid, true);
        }
    }
}
