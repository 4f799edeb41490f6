//! SIGINT and SIGTERM end a run cleanly: the handler only sets a flag that the event
//! loop polls (the poll itself returns early with EINTR).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers (without SA_RESTART, so blocking calls return on a signal).
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
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
    // SAFETY: setting a signal's disposition back to its default has no preconditions.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread (and the threads it starts after);
/// `main` does this before starting the thread that runs fslat, which unblocks them with
/// `unblock_in_this_thread`: the signals then reach that thread, so its blocking system
/// calls (opening a FIFO, waiting for clang) are the ones they interrupt.
pub fn block_in_this_thread() {
    set_mask(libc::SIG_BLOCK);
}

pub fn unblock_in_this_thread() {
    set_mask(libc::SIG_UNBLOCK);
}

fn set_mask(how: libc::c_int) {
    // SAFETY: a zeroed sigset filled by sigemptyset/sigaddset; pthread_sigmask only
    // changes the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}
