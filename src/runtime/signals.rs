//! SIGINT and SIGTERM end a run cleanly: the handler only sets a flag that the event
//! loop polls (the poll itself returns early with EINTR).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers (without SA_RESTART, so blocking calls return on a signal).
pub fn install() {
    // The handler only stores to an atomic, which is async-signal-safe.
    crate::sys::set_signal_handler(&[libc::SIGINT, libc::SIGTERM], on_signal);
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Forgets an earlier stop (the REPL runs again after Ctrl-C).
pub fn reset() {
    STOP.store(false, Ordering::SeqCst);
}

/// Gives SIGTERM back its default action (the REPL at its prompt must end on it, while
/// Ctrl-C there only interrupts what is being done).
pub fn restore_sigterm() {
    crate::sys::default_signal_action(libc::SIGTERM);
}

/// Blocks SIGINT and SIGTERM in the calling thread (and the threads it starts after);
/// `main` does this before starting the thread that runs fslat, which unblocks them with
/// `unblock_in_this_thread`: the signals then reach that thread, so its blocking system
/// calls (opening a FIFO, waiting for clang) are the ones they interrupt.
pub fn block_in_this_thread() {
    crate::sys::set_thread_signal_mask(&[libc::SIGINT, libc::SIGTERM], true);
}

pub fn unblock_in_this_thread() {
    crate::sys::set_thread_signal_mask(&[libc::SIGINT, libc::SIGTERM], false);
}
