//! The test file is removed on every path: normal end, error (Drop of
//! [`TestFile`]), and SIGINT/SIGTERM/SIGHUP (a signal handler that only calls
//! async-signal-safe functions: unlink, kill, write, _exit).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

/// Path of the test file while a benchmark runs, for the signal handler.
/// Points at a leaked CString that lives until the process exits.
static ARMED_PATH: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());
/// Pid of a running `dd` child, killed by the handler so it stops writing.
static CHILD_PID: AtomicI32 = AtomicI32::new(0);

/// Owns the test file's name: the file is unlinked when this is dropped, so
/// an early `?` return cannot leave a gigabyte behind.
pub struct TestFile {
    path: PathBuf,
}

impl TestFile {
    /// Picks a name in `dir` unique to this process and arms the signal handler.
    pub fn new(dir: &Path) -> anyhow::Result<TestFile> {
        let path = dir.join(format!("sqlite-uring-bench-io.{}.tmp", std::process::id()));
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| anyhow::anyhow!("--dir {} contains a NUL byte", dir.display()))?;
        install_handlers();
        // A previous name is leaked, not freed: the handler may be reading it
        // right now, and it is a few bytes once per benchmark.
        ARMED_PATH.store(c_path.into_raw(), Ordering::SeqCst);
        Ok(TestFile { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the file now (between runs); missing is fine.
    pub fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        if let Err(error) = self.remove() {
            eprintln!(
                "warning: could not remove test file {}: {error}",
                self.path.display()
            );
        }
        // Disarm: the name is no longer ours after this point.
        ARMED_PATH.store(std::ptr::null_mut(), Ordering::SeqCst);
    }
}

/// Records the pid of a child the handler must kill (0 = none).
pub fn set_child(pid: i32) {
    CHILD_PID.store(pid, Ordering::SeqCst);
}

extern "C" fn on_signal(signal: libc::c_int) {
    // Only async-signal-safe calls here: no allocation, no locks, no Rust I/O.
    let child = CHILD_PID.load(Ordering::SeqCst);
    if child > 0 {
        // SAFETY: kill is async-signal-safe; a stale pid is at worst ESRCH.
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    let path = ARMED_PATH.load(Ordering::SeqCst);
    if !path.is_null() {
        // SAFETY: path is a leaked, NUL-terminated CString that is never freed.
        unsafe { libc::unlink(path) };
    }
    let message = b"\ninterrupted: test file removed\n";
    // SAFETY: write and _exit are async-signal-safe; the buffer is static.
    unsafe {
        libc::write(2, message.as_ptr().cast(), message.len());
        libc::_exit(128 + signal);
    }
}

fn install_handlers() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
        // on_signal has the signature sa_handler expects and is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}
