//! SIGINT/SIGTERM during a benchmark: the run stops at the next operation and unwinds,
//! so the guards of the current run remove its database files; a worker process of
//! the run (`--isolation process`) is sent the same signal and does the same.
//!
//! Shared by `bench speed` and `bench blobs`, in the parent and in its workers.

use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{bail, Context};

/// The signal that interrupted the run, 0 while none has.
static INTERRUPTED_BY: AtomicI32 = AtomicI32::new(0);
/// The worker process running the current run (`--isolation process`), 0 when none.
static WORKER_PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only an atomic store and kill(2): both async-signal-safe. The benchmark loops
    // poll the flag between operations, then unwind normally so Drop removes the
    // run's files. A worker gets the signal too (a SIGTERM sent to this process
    // alone would otherwise leave it writing), and cleans up its own files.
    INTERRUPTED_BY.store(signal, Ordering::SeqCst);
    let worker = WORKER_PID.load(Ordering::SeqCst);
    if worker > 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(worker, signal) };
    }
}

/// Records the worker process that signals must reach (`None` once it has exited). A
/// signal that arrived before the worker was recorded is passed on to it here.
fn set_worker(pid: Option<u32>) {
    let pid = pid.and_then(|pid| i32::try_from(pid).ok()).unwrap_or(0);
    WORKER_PID.store(pid, Ordering::SeqCst);
    let signal = INTERRUPTED_BY.load(Ordering::SeqCst);
    if pid > 0 && signal != 0 {
        // SAFETY: kill has no memory-safety preconditions; `pid` is our child.
        unsafe { libc::kill(pid, signal) };
    }
}

/// The `supervise` hook of [`super::worker::run`]: signals reach the worker while it
/// runs; once it has exited, an interrupted run reports the signal rather than the
/// worker's death by it.
pub fn supervise_worker(pid: Option<u32>) -> anyhow::Result<()> {
    set_worker(pid);
    match pid {
        Some(_) => Ok(()),
        None => check_interrupted(),
    }
}

/// Installs the SIGINT/SIGTERM handlers. SA_RESETHAND: a second Ctrl-C kills at once,
/// for a user who does not want to wait for the current SQLite call to return.
pub fn install_handlers() -> anyhow::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores an atomic and
        // calls kill(2).
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("installing the handler for signal {signal}"));
        }
    }
    Ok(())
}

/// Error if a signal arrived: the caller returns it and its guards clean up. One
/// relaxed atomic load, cheap enough to poll between the statements of a timed loop.
pub fn check_interrupted() -> anyhow::Result<()> {
    match INTERRUPTED_BY.load(Ordering::Relaxed) {
        0 => Ok(()),
        signal => bail!(
            "interrupted by {}; the current run's database files were removed",
            if signal == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            }
        ),
    }
}
