//! Options: set once at registration ([`Options`]) and per file by URI parameter.
//!
//! URI parameters owned by this VFS all start with `uring_`; an unknown `uring_*` key or a
//! malformed value makes `xOpen` fail with `SQLITE_CANTOPEN` and a `sqlite3_log` message
//! naming the parameter (see README, "URI parameters").

/// Which engine performs the file I/O of a registered VFS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// io_uring: one ring per thread, every read/write/sync/truncate submitted through it.
    IoUring,
    /// The same VFS code with plain `pread`/`pwritev`/`fsync`/`ftruncate` syscalls.
    Syscall,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::IoUring => "io_uring",
            Backend::Syscall => "syscall",
        }
    }
}

/// How `xSync` makes data durable.
///
/// SQLite's `unix` VFS calls `fdatasync()` only when compiled with `HAVE_FDATASYNC`
/// (Debian's libsqlite3 is); otherwise it calls `fsync()` (the amalgamation default,
/// which is what rusqlite's `bundled` build uses; see `os_unix.c`, "We do not trust
/// systems to provide a working fdatasync()"). `Fsync` is never weaker than `unix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncMode {
    Fsync,
    Fdatasync,
}

impl SyncMode {
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Fsync => "fsync",
            SyncMode::Fdatasync => "fdatasync",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<SyncMode> {
        match text {
            "fsync" => Some(SyncMode::Fsync),
            "fdatasync" => Some(SyncMode::Fdatasync),
            _ => None,
        }
    }
}

/// How the io_uring backend issues buffered *writes* (reads, syncs and truncation always
/// go through the ring).
///
/// A filesystem without async buffered-write support (ext4 and tmpfs, as measured by
/// `bench io`: every ring write is handed to an io-wq worker thread) makes a ring write
/// cost a worker handoff — about twice a `pwrite` of 4 KiB. With `Syscall`, queued writes
/// are issued with `pwrite` from the calling thread, still coalesced and still followed
/// by the overlapped fsyncs. `bench speed` measures both (`io_uring` vs `io_uring_ringw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteSubmission {
    /// IORING_OP_WRITE, linked to the fsync at xSync.
    Ring,
    /// pwrite(2) from the submitting thread.
    Syscall,
}

impl WriteSubmission {
    pub fn name(self) -> &'static str {
        match self {
            WriteSubmission::Ring => "ring",
            WriteSubmission::Syscall => "syscall",
        }
    }
}

/// Registration options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Name under which the VFS is registered (default `io_uring`).
    pub vfs_name: String,
    /// I/O engine (default [`Backend::IoUring`]).
    pub backend: Backend,
    /// Register as the default VFS, so plain opens use it.
    pub make_default: bool,
    /// When io_uring is unavailable, fall back to [`Backend::Syscall`] instead of failing.
    /// The fallback is reported in [`crate::Registration::fallback_reason`].
    pub fallback_to_syscall: bool,
    /// Default sync primitive for files of this VFS (URI `uring_sync` overrides it).
    pub sync_mode: SyncMode,
    /// How the io_uring backend issues writes (URI `uring_writes` overrides it).
    pub write_submission: WriteSubmission,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            vfs_name: "io_uring".to_string(),
            backend: Backend::IoUring,
            make_default: false,
            fallback_to_syscall: false,
            sync_mode: SyncMode::Fsync,
            write_submission: WriteSubmission::Syscall,
        }
    }
}
