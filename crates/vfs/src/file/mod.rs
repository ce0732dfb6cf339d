//! One open file of the VFS: what SQLite's `sqlite3_io_methods` do, in safe Rust.
//!
//! `entry.rs` decodes the C arguments (file controls into `control::FileControl`) and
//! calls these methods; nothing here handles a C pointer. All file I/O goes through a
//! [`Submitter`] over the file's engine, or through the write-behind queue, which uses
//! one too; the routing is decided once, at open (`io/engine.rs`), and this code only
//! asks the engine whether a lone read may be a plain `pread`.
//!
//! * `open.rs` — xOpen: URI options, the mode and owner of a new file, temporary files;
//! * `rw.rs` — xRead, xWrite (queued, or written before it returns where the file's
//!   flush points say so: `flush_point.rs`), xTruncate, xSync, xFileSize;
//! * `control.rs` — locks, file controls, `PRAGMA io_uring_stats`, shared memory,
//!   memory-mapped pages.

pub(crate) mod control;
mod open;
mod rw;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;

use crate::config::{SyncMode, SyncPlan};
use crate::direct::{DirectFile, WalDirect};
use crate::error::Failure;
use crate::ffi::SQLITE_LOCK_EXCLUSIVE;
use crate::flush_point::{CallKind, CommitSync, FlushPoints};
use crate::io::{EngineKind, Submitter};
use crate::lock::DbLock;
use crate::mmap::MemoryMap;
use crate::readahead::ReadAhead;
use crate::shm::Shm;
use crate::stats::{IoStats, SharedStats};
use crate::sys::{DbFd, Fd};
use crate::trace::FileLabel;
use crate::vfs::VfsState;
use crate::write_behind;

/// Distinguishes files in the write-behind queue (fds are reused after close).
static NEXT_FILE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(crate) struct File {
    pub(crate) vfs: &'static VfsState,
    id: u64,
    /// The buffered descriptor (I/O names it by number: [`File::fd`]).
    descriptor: Descriptor,
    write_behind: bool,
    /// Which writes must reach the kernel before xWrite returns (`flush_point.rs`).
    flush_points: FlushPoints,
    sync_plan: SyncPlan,
    /// A main database: SQLite's locks live on it (see `lock::close_preserving_process_locks`).
    carries_locks: bool,
    /// The write-behind queue of this file's database (its own, for a temporary file or
    /// a super-journal), found once at open. `None` only while the file is dropped.
    queue: Option<std::sync::Arc<write_behind::Queue>>,

    /// Full path; `None` for anonymous temporary files.
    path: Option<String>,
    /// The O_DIRECT descriptor of a main database opened with `uring_direct=on`.
    direct: Option<DirectFile>,
    /// The O_DIRECT side of a WAL opened with `uring_wal_direct=on` (shared with the
    /// write-behind queue, which flushes through it).
    wal_direct: Option<std::sync::Arc<std::sync::Mutex<WalDirect>>>,
    engine: EngineKind,
    sync_mode: SyncMode,
    lock: DbLock,
    nolock: bool,
    psow: bool,
    persist_wal: bool,
    readonly_shm: bool,
    /// The first xSync after creating a journal or WAL must also sync its directory, so
    /// the new directory entry is durable (os_unix.c UNIXFILE_DIRSYNC).
    dir_sync_pending: bool,
    chunk_size_bytes: i64,
    pub(crate) last_errno: i32,
    /// No other process or connection can reach this file (it was unlinked at open), so
    /// its size may be cached.
    private: bool,
    cached_size_bytes: Option<i64>,
    /// `(st_dev, st_ino)` of the open descriptor, read by the first SQLITE_FCNTL_HAS_MOVED.
    /// Fixed for the descriptor's life: while we hold it open the inode cannot be freed,
    /// so its number cannot name another file on that device.
    identity: Option<(u64, u64)>,
    stats: std::sync::Arc<SharedStats>,
    shm: Option<Shm>,
    mmap: MemoryMap,
    /// B-tree read-ahead of a buffered main database opened with it on (`readahead.rs`).
    readahead: Option<Box<ReadAhead>>,
    /// The descriptor read-ahead reads through (`rw.rs`, `DatabasePages`).
    prefetch_fd: PrefetchFd,
}

/// A file's buffered descriptor, owned as its kind of file requires (`sys/fd.rs`).
enum Descriptor {
    /// A main database's: shared with the process's lock state of the file, which keeps
    /// it open after this file closes while other connections lock through it
    /// (`lock.rs`), and closed without dropping the process's POSIX locks.
    Database(Arc<DbFd>),
    /// Any other file's (a journal, a WAL, a temporary file): nobody locks it.
    Other(Fd),
    /// Closed (at close, or by SQLITE_FCNTL_NULL_IO): every call that needs it fails
    /// with EBADF, as on a descriptor closed under `unix`.
    Closed,
}

/// Read-ahead's own descriptor of a database file, opened at its first prefetch.
#[derive(Debug)]
pub(crate) enum PrefetchFd {
    NotYet,
    Open(DbFd),
    /// Could not be opened: read-ahead uses the file's descriptor.
    Unavailable,
}

impl Descriptor {
    /// The descriptor, while it is open.
    fn borrowed(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Descriptor::Database(fd) => Some(fd.as_fd()),
            Descriptor::Other(fd) => Some(fd.as_fd()),
            Descriptor::Closed => None,
        }
    }
}

impl File {
    /// The buffered descriptor's number, for I/O (-1 once it is closed: the kernel then
    /// answers EBADF).
    fn fd(&self) -> RawFd {
        self.descriptor.borrowed().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// fstat(2) of the buffered descriptor (EBADF once it is closed).
    fn fstat(&self) -> Result<libc::stat, i32> {
        self.descriptor
            .borrowed()
            .map_or(Err(libc::EBADF), crate::sys::fstat)
    }

    /// The write-behind flush point at the start of every method but xWrite and xSync:
    /// flushes this file's database's queue (one load when it is empty).
    #[inline]
    fn flush_queue(&self, caller: write_behind::Caller) -> Result<(), Failure> {
        self.queue().flush(caller).map_err(Failure::from)
    }

    fn queue(&self) -> &write_behind::Queue {
        self.queue
            .as_deref()
            .expect("a file has its queue until it is dropped")
    }

    fn submitter(&mut self) -> Submitter<'_> {
        Submitter {
            engine: &self.engine,
            file_stats: &self.stats,
            vfs_stats: &self.vfs.stats,
        }
    }

    fn count(&mut self, delta: IoStats) {
        self.stats.add_single_writer(&delta);
        self.vfs.stats.add(&delta);
    }

    /// Logs a failed system call on this file as os_unix.c does (`SqliteApi::log_os_error`;
    /// an anonymous temporary file has an empty path there too).
    #[track_caller]
    fn log_os_error(&self, code: std::ffi::c_int, call: &str, errno: i32) {
        self.vfs
            .api
            .log_os_error(code, call, self.path.as_deref().unwrap_or(""), errno);
    }

    /// Before every call on the file (`number`: this thread's call count): the flush
    /// points' state sees it (`flush_point.rs`), and an O_DIRECT WAL learns whether its
    /// last commit was synced at once.
    pub(crate) fn note_call(&mut self, number: u64, kind: CallKind) {
        let commit_sync = self.flush_points.call(number, kind);
        if let (Some(sync), Some(wal)) = (commit_sync, &self.wal_direct) {
            crate::lock::lock_ignoring_poison(wal).set_pays(sync == CommitSync::Immediate);
        }
    }

    /// Opened with `nolock=1`: no OS locks and no shared memory (os_unix.c's
    /// nolockIoMethods).
    pub(crate) fn uses_nolock(&self) -> bool {
        self.nolock
    }

    /// What trace records say about this file.
    pub(crate) fn trace_label(&self) -> FileLabel<'_> {
        FileLabel {
            id: self.id,
            fd: self.fd(),
            path: self.path.as_deref(),
        }
    }

    /// Whether the cached size can be trusted: nobody else can change the file.
    fn size_cache_valid(&self) -> bool {
        self.private || self.lock.level() == SQLITE_LOCK_EXCLUSIVE
    }

    fn note_size_at_least(&mut self, end_bytes: i64) {
        if let Some(size) = self.cached_size_bytes.as_mut() {
            *size = (*size).max(end_bytes);
        }
    }

    fn as_reader(&self) -> write_behind::Caller {
        write_behind::Caller::Reader(self.id)
    }

    fn as_writer(&self) -> write_behind::Caller {
        write_behind::Caller::Writer(Some(self.id))
    }

    /// The write-behind view of this file, through its buffered descriptor.
    fn writer(&self) -> write_behind::Writer<'_> {
        self.writer_through(self.fd(), 1)
    }

    /// The write-behind view of this file through `fd`, whose queued pieces must start
    /// at multiples of `align_bytes` (the O_DIRECT descriptor's alignment, or 1).
    fn writer_through(&self, fd: RawFd, align_bytes: usize) -> write_behind::Writer<'_> {
        write_behind::Writer {
            file_id: self.id,
            fd,
            align_bytes,
            fallback_fd: self.fd(),
            engine: &self.engine,
            file_stats: &self.stats,
            vfs_stats: &self.vfs.stats,
            wal_direct: self.wal_direct.as_ref(),
        }
    }

    /// Drops what this file caches of other connections' data: called wherever another
    /// connection may have changed the file since (lock changes).
    fn forget_cached_reads(&mut self) {
        if let Some(direct) = self.direct.as_mut() {
            direct.invalidate();
        }
        if let Some(readahead) = self.readahead.as_deref_mut() {
            readahead.forget();
        }
    }
}

impl File {
    /// Closes the file's descriptors (at close, or for `SQLITE_FCNTL_NULL_IO`), after
    /// the database's lock state has let go of them. Every failed close is logged under
    /// this file's name, as os_unix.c's robust_close logs those of closeUnixFile and
    /// closePendingFds. Linux frees a descriptor whatever close(2) returns, so nothing
    /// leaks.
    fn close_descriptors(&mut self) {
        // The WAL's O_DIRECT descriptor closes with its last owner (the write-behind
        // queue holds it while this file's writes are queued).
        self.wal_direct = None;
        let direct = self.direct.take();
        let prefetch_fd = std::mem::replace(&mut self.prefetch_fd, PrefetchFd::Unavailable);
        let descriptor = std::mem::replace(&mut self.descriptor, Descriptor::Closed);
        // The process's lock state of a database ends with its last connection and hands
        // back its share of the descriptor it locked through; otherwise it keeps it (and
        // with it this file's own descriptor, when that is the one) for the others.
        let lock_fd = self.lock.detach();
        let failed_close = |errno| {
            self.log_os_error(crate::ffi::SQLITE_IOERR_CLOSE, "close", errno);
        };
        if let Some(lock_fd) = lock_fd {
            crate::lock::release(lock_fd, failed_close);
        }
        if let Some(direct) = direct {
            // Same inode as the database's descriptor.
            direct.fd.close(failed_close);
        }
        if let PrefetchFd::Open(prefetch_fd) = prefetch_fd {
            self.engine.before_prefetch_descriptor_closes();
            // The same inode again.
            prefetch_fd.close(failed_close);
        }
        match descriptor {
            Descriptor::Database(fd) => crate::lock::release(fd, failed_close),
            // Nobody locks journals, WALs or temp files.
            Descriptor::Other(fd) => {
                if let Err(errno) = fd.close() {
                    failed_close(errno);
                }
            }
            Descriptor::Closed => {}
        }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let queue = self.queue.take();
        if let Some(queue) = queue.as_ref() {
            queue.flush_before_close(self.id);
        }
        self.mmap.unmap();
        if let Some(shm) = self.shm.take() {
            // Not unmapped by SQLite (an error path): detached here, where a failed close
            // of the -shm descriptor can still be logged under this file's name.
            shm.close(false, &self.vfs.api, self.path.as_deref().unwrap_or(""));
        }
        self.close_descriptors();
        if let Some(queue) = queue {
            write_behind::release(queue);
        }
    }
}

/// `value` rounded up to a multiple of `chunk` (> 0). Near `i64::MAX` the sum wraps to a
/// negative size, as os_unix.c's does (`unixTruncate`, `fcntlSizeHint`): the truncate then
/// fails with EINVAL and the size hint does nothing, as under `unix`.
fn round_up(value: i64, chunk: i64) -> i64 {
    debug_assert!(chunk > 0, "a chunk size is positive");
    value.wrapping_add(chunk - 1) / chunk * chunk
}
