//! Reading a script: bounded, UTF-8, and interruptible by Ctrl-C while a FIFO or a
//! terminal keeps it waiting.

use super::{Error, interrupted};
use crate::runtime::signals;
use std::io::Read;

/// Scripts are small: the bound keeps `fslat /dev/zero` from filling memory.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// Opens a file for reading like `File::open`, except that a signal ends the wait:
/// opening a FIFO blocks until a writer comes, and std retries an interrupted open.
pub fn open_interruptible(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    loop {
        // A signal that came before the open began would not interrupt it (a second
        // one does).
        if signals::stop_requested() {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        match crate::sys::open_read_once(path) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted && !signals::stop_requested() => {
            }
            r => return r,
        }
    }
}

/// Reads a whole script of at most MAX_SCRIPT_BYTES of UTF-8 text.
pub fn read_script(r: impl Read, name: &str) -> Result<String, Error> {
    let mut bytes = Vec::new();
    let read_error = |source| Error::ReadScript {
        path: name.to_string(),
        source,
    };
    let mut r = r.take(MAX_SCRIPT_BYTES + 1);
    let mut chunk = [0u8; 8192];
    loop {
        // A FIFO or a terminal can block: Ctrl-C interrupts the read (no SA_RESTART).
        match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => interrupted()?,
            Err(e) => return Err(read_error(e)),
        }
    }
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(Error::ScriptTooLarge {
            path: name.to_string(),
            limit: MAX_SCRIPT_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not UTF-8 text",
        ))
    })
}
