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

/// Whether the io_uring backend issues a kind of operation through the ring or with a
/// plain syscall from the calling thread (reads, writes, and syncs: see
/// [`Options::sync_submission`]). Unless all three are `Ring`, a batch left with a single
/// ring operation runs it as a syscall: alone it cannot overlap with anything.
///
/// Measured on this project's machine (ext4 on virtio, and tmpfs; `bench io`,
/// `bench speed`): a lone buffered read or write through the ring costs one
/// `io_uring_enter` like the syscall, plus a hand-off to an io-wq worker thread whenever
/// the filesystem cannot complete it without blocking — every buffered write on ext4,
/// reads on tmpfs — which makes it up to several times slower than `pread`/`pwrite`.
/// `Syscall` (the default for reads and writes) keeps write-behind and coalescing, so a
/// commit still makes a fraction of `unix`'s kernel entries; `Ring` is for filesystems and
/// modes where ring I/O runs inline (XFS/btrfs buffered writes, O_DIRECT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Submission {
    /// Through the ring (IORING_OP_READ / IORING_OP_WRITE / IORING_OP_FSYNC).
    Ring,
    /// pread(2) / pwrite(2) / fsync(2) from the calling thread.
    Syscall,
}

impl Submission {
    pub fn name(self) -> &'static str {
        match self {
            Submission::Ring => "ring",
            Submission::Syscall => "syscall",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Submission> {
        match text {
            "ring" => Some(Submission::Ring),
            "syscall" => Some(Submission::Syscall),
            _ => None,
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
    /// How the io_uring backend issues reads (URI `uring_reads` overrides it).
    pub read_submission: Submission,
    /// How the io_uring backend issues writes (URI `uring_writes` overrides it).
    pub write_submission: Submission,
    /// How the io_uring backend issues fsync/fdatasync (URI `uring_syncs` overrides it).
    /// `Syscall` (the default) runs them in turn from the calling thread, as `unix` does.
    /// `Ring` submits a new journal's fsync together with its directory's, so the two
    /// overlap, and links queued ring writes to their fsync; a lone sync still runs as a
    /// syscall. The ring runs every fsync on an io-wq worker thread, and the first one
    /// stays for the life of the calling thread: measured here, one such thread in a
    /// process that was single-threaded makes its WAL commits 20–40 % slower and every
    /// file-descriptor system call ~35 ns dearer, which costs more than the overlap gains
    /// (ARCHITECTURE.md, "Threads the ring adds"). `Ring` is for processes that already
    /// run threads on several CPUs.
    pub sync_submission: Submission,
    /// Open main databases with an additional O_DIRECT descriptor for their aligned page
    /// I/O, and submit its queued writes through the ring (URI `uring_direct` overrides
    /// it). Off by default: without the page cache every cold read reaches the device.
    pub direct_io: bool,
    /// Give io_uring files a ring with a kernel submission thread (IORING_SETUP_SQPOLL,
    /// URI `uring_sqpoll` overrides it), and wait for its completions by spinning on the
    /// completion queue for up to `SQPOLL_SPIN_US` before entering the kernel: a batch
    /// that completes meanwhile costs no system call at all. Off by default: the poller
    /// and the spinning waiter each keep a CPU busy (measured in docs/BENCH_SPEED.md).
    pub sqpoll: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            vfs_name: "io_uring".to_string(),
            backend: Backend::IoUring,
            make_default: false,
            fallback_to_syscall: false,
            sync_mode: SyncMode::Fsync,
            read_submission: Submission::Syscall,
            write_submission: Submission::Syscall,
            sync_submission: Submission::Syscall,
            direct_io: false,
            sqpoll: false,
        }
    }
}
