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
use crate::direct::DirectFile;
use crate::error::Failure;
use crate::ffi::SQLITE_LOCK_EXCLUSIVE;
use crate::flush_point::{CallKind, CommitSync, FlushPoints};
use crate::io::{EngineKind, Submitter, SyncRequest};
use crate::lock::DbLock;
use crate::mmap::MemoryMap;
use crate::readahead::ReadAhead;
use crate::shm::Shm;
use crate::stats::{FileReads, IoStats, ReadCounts, SharedStats};
use crate::sys::{DbFd, Fd};
use crate::trace::FileLabel;
use crate::vfs::VfsState;
use crate::write_behind;

/// Distinguishes files in the write-behind queue (fds are reused after close).
static NEXT_FILE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One open file: who it is, its descriptor and lock, its database's write-behind queue,
/// what it is set to, what it caches, and the sides only some files have.
pub(crate) struct File {
    pub(crate) vfs: &'static VfsState,
    id: u64,
    /// Full path, with its NUL for system calls; `None` for anonymous temporary files.
    path: Option<crate::sys::FilePath>,
    /// The buffered descriptor (I/O names it by number: [`File::fd`]).
    descriptor: Descriptor,
    /// `(st_dev, st_ino)` of the open descriptor, read by the first SQLITE_FCNTL_HAS_MOVED.
    /// Fixed for the descriptor's life: while we hold it open the inode cannot be freed,
    /// so its number cannot name another file on that device.
    identity: Option<(u64, u64)>,
    lock: DbLock,
    /// The write-behind queue of this file's database (its own, for a temporary file or
    /// a super-journal), found once at open. `None` only while the file is dropped.
    queue: Option<Arc<write_behind::Queue>>,
    /// Which writes must reach the kernel before xWrite returns (`flush_point.rs`).
    flush_points: FlushPoints,
    settings: Settings,
    /// The first xSync after creating a journal or WAL must also sync its directory, so
    /// the new directory entry is durable (os_unix.c UNIXFILE_DIRSYNC).
    dir_sync_pending: bool,
    pub(crate) last_errno: i32,
    size: SizeCache,
    /// This file's counters, but for its `pread` reads (`reads`).
    stats: Arc<SharedStats>,
    /// This file's `pread` reads, from its first (`VfsStats::open_file`): the VFS's
    /// snapshots read them live, and its totals take them at close.
    reads: Option<Arc<FileReads>>,
    /// `reads` at this file's last `PRAGMA io_uring_stats=reset`.
    reads_at_reset: ReadCounts,
    shm: Option<Shm>,
    mmap: MemoryMap,
    /// B-tree read-ahead of a buffered main database opened with it on.
    readahead: Option<Box<ReadAheadSide>>,
    direct: DirectSides,
}

/// What a file is set to: at open, from the VFS's options and its URI parameters; the
/// file controls change `persist_wal`, `psow` and `chunk_size_bytes`.
struct Settings {
    /// A main database: SQLite's locks live on it (see `lock::close_preserving_process_locks`).
    carries_locks: bool,
    engine: EngineKind,
    sync_mode: SyncMode,
    sync_plan: SyncPlan,
    write_behind: bool,
    nolock: bool,
    psow: bool,
    persist_wal: bool,
    readonly_shm: bool,
    chunk_size_bytes: i64,
}

impl Settings {
    /// The chunk size files grow and shrink by (SQLITE_FCNTL_CHUNK_SIZE), when one is set.
    fn chunk_bytes(&self) -> Option<i64> {
        (self.chunk_size_bytes > 0).then_some(self.chunk_size_bytes)
    }

    /// `size_bytes` rounded up to the chunk size, as os_unix.c sizes a truncate.
    fn chunked(&self, size_bytes: i64) -> i64 {
        self.chunk_bytes()
            .map_or(size_bytes, |chunk| round_up(size_bytes, chunk))
    }

    /// xSync's request: the file's sync primitive and plan, and the directory to sync
    /// with it, if any.
    fn sync_request(&self, directory_fd: Option<RawFd>) -> SyncRequest {
        SyncRequest {
            data_only: self.sync_mode == SyncMode::Fdatasync,
            directory_fd,
            plan: self.sync_plan,
        }
    }
}

/// xFileSize's answer, cached while nobody else can change the file: it is private, or
/// this connection holds an EXCLUSIVE lock on it (`exclusive` below).
struct SizeCache {
    /// No other process or connection can reach this file (it was unlinked at open).
    private: bool,
    bytes: Option<i64>,
}

impl SizeCache {
    fn valid(&self, exclusive: bool) -> bool {
        self.private || exclusive
    }

    /// The cached size, when it can be trusted.
    fn get(&self, exclusive: bool) -> Option<i64> {
        self.bytes.filter(|_| self.valid(exclusive))
    }

    /// Caches `size_bytes` if it can be trusted (forgets the cached size if not).
    fn remember(&mut self, size_bytes: i64, exclusive: bool) {
        self.bytes = self.valid(exclusive).then_some(size_bytes);
    }

    /// A truncate to `size_bytes` succeeded: cached if it can be trusted (otherwise
    /// the cache is left as it is).
    fn truncated_to(&mut self, size_bytes: i64, exclusive: bool) {
        if self.valid(exclusive) {
            self.bytes = Some(size_bytes);
        }
    }

    /// A write ended at `end_bytes`.
    fn note_at_least(&mut self, end_bytes: i64) {
        if let Some(size) = self.bytes.as_mut() {
            *size = (*size).max(end_bytes);
        }
    }

    /// What the file's size is is unknown (a failed write or truncate).
    fn forget(&mut self) {
        self.bytes = None;
    }

    /// The lock that kept others out was dropped: they may change the file now.
    fn lock_dropped(&mut self) {
        if !self.private {
            self.bytes = None;
        }
    }
}

/// B-tree read-ahead (`readahead.rs`) and the descriptor it reads through (`rw.rs`,
/// `DatabasePages`).
struct ReadAheadSide {
    btree: ReadAhead,
    prefetch_fd: PrefetchFd,
    /// Whether a sampled whole-page read may ask the page cache alone first (`rw.rs`,
    /// `ReadAheadSide::sampled_read`, `RWF_NOWAIT`): false once the file system refused
    /// it, and then every sampled read is timed and confirmed (`timed_read`).
    nowait_probe: bool,
    /// How long a sampled read must take to have reached the device.
    device_read: DeviceReadDurations,
}

/// How long a sampled read must take to count as a device read that wakes read-ahead
/// (`rw.rs`): [`crate::readahead::DEVICE_READ`] for a timed read (then confirmed by the
/// thread's I/O accounting), and
/// [`crate::readahead::DEVICE_READ_AFTER_MISS`] after the page cache said it lacked the
/// bytes. The unit tests set both to zero, so what they assert does not depend on how fast
/// their disk answers.
#[derive(Clone, Copy)]
struct DeviceReadDurations {
    alone: std::time::Duration,
    after_miss: std::time::Duration,
}

impl DeviceReadDurations {
    const MEASURED: Self = Self {
        alone: crate::readahead::DEVICE_READ,
        after_miss: crate::readahead::DEVICE_READ_AFTER_MISS,
    };
}

/// A file's O_DIRECT sides (`direct.rs`), each there only when opened with it.
struct DirectSides {
    /// A main database's O_DIRECT descriptor (`uring_direct=on`).
    database: Option<DirectFile>,
    /// A WAL opened with `uring_wal_direct=on`: its O_DIRECT side is owned by the
    /// write-behind queue, which flushes through it (`Queue::adopt_wal_direct`); the
    /// file reaches it through the queue.
    wal: bool,
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
            engine: &self.settings.engine,
            file_stats: &self.stats,
            vfs_stats: &self.vfs.stats.totals,
        }
    }

    fn count(&mut self, delta: IoStats) {
        self.stats.add_single_writer(&delta);
        self.vfs.stats.totals.add(&delta);
    }

    /// [`File::count`] of one counter (a `SharedStats` field index): the write and sync
    /// paths' per-call counts.
    fn count_field(&mut self, index: usize, value: u64) {
        self.stats.add_field(index, value, true);
        self.vfs.stats.totals.add_field(index, value, false);
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
    #[inline]
    pub(crate) fn note_call(&mut self, number: u64, kind: CallKind) {
        let commit_sync = self.flush_points.call(number, kind);
        if let (Some(sync), true) = (commit_sync, self.direct.wal) {
            self.tell_wal_direct(sync);
        }
    }

    #[cold]
    fn tell_wal_direct(&mut self, sync: CommitSync) {
        self.queue()
            .with_wal_direct(self.id, |wal| wal.set_pays(sync == CommitSync::Immediate));
    }

    /// Opened with `nolock=1`: no OS locks and no shared memory (os_unix.c's
    /// nolockIoMethods).
    pub(crate) fn uses_nolock(&self) -> bool {
        self.settings.nolock
    }

    /// What trace records say about this file.
    pub(crate) fn trace_label(&self) -> FileLabel<'_> {
        FileLabel {
            id: self.id,
            fd: self.fd(),
            path: self.path.as_deref(),
        }
    }

    /// Whether this connection holds an EXCLUSIVE lock on the file: nobody else can
    /// change it (`SizeCache`).
    fn exclusive(&self) -> bool {
        self.lock.level() == SQLITE_LOCK_EXCLUSIVE
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
            engine: &self.settings.engine,
            file_stats: &self.stats,
            vfs_stats: &self.vfs.stats.totals,
        }
    }

    /// Counts an `xRead` of `bytes` served by `pread` in `preads` calls: a plain load and
    /// store per counter, after the file's first read (`count_first_pread`).
    #[inline]
    fn count_pread(&mut self, bytes: u64, preads: u64) {
        match &self.reads {
            Some(reads) => reads.add(bytes, preads),
            None => self.count_first_pread(bytes, preads),
        }
    }

    #[cold]
    fn count_first_pread(&mut self, bytes: u64, preads: u64) {
        self.reads
            .insert(self.vfs.stats.open_file())
            .add(bytes, preads);
    }

    /// This file's counters, its `pread` reads since its last reset included.
    fn stats_snapshot(&self) -> IoStats {
        let mut stats = self.stats.snapshot();
        if let Some(reads) = &self.reads {
            reads.counts().since(self.reads_at_reset).add_to(&mut stats);
        }
        stats
    }

    /// Drops what this file caches of other connections' data: called wherever another
    /// connection may have changed the file since (lock changes).
    fn forget_cached_reads(&mut self) {
        if let Some(direct) = self.direct.database.as_mut() {
            direct.invalidate();
        }
        if let Some(readahead) = self.readahead.as_deref_mut() {
            readahead.btree.forget();
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
        // The WAL's O_DIRECT side closes in its owner, the write-behind queue, which
        // holds none of this file's writes by now (flushed at close and before
        // SQLITE_FCNTL_NULL_IO).
        if std::mem::take(&mut self.direct.wal) {
            self.queue().close_wal_direct(self.id);
        }
        let direct = self.direct.database.take();
        let prefetch_fd = match self.readahead.as_deref_mut() {
            Some(readahead) => {
                std::mem::replace(&mut readahead.prefetch_fd, PrefetchFd::Unavailable)
            }
            None => PrefetchFd::Unavailable,
        };
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
            self.settings.engine.before_prefetch_descriptor_closes();
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
        if let Some(reads) = self.reads.take() {
            self.vfs.stats.close_file(&reads);
        }
        if let Some(queue) = self.queue.as_ref() {
            queue.flush_before_close(self.id);
        }
        self.mmap.unmap();
        if let Some(shm) = self.shm.take() {
            // Not unmapped by SQLite (an error path): detached here, where a failed close
            // of the -shm descriptor can still be logged under this file's name.
            shm.close(false, &self.vfs.api, self.path.as_deref().unwrap_or(""));
        }
        self.close_descriptors();
        if let Some(queue) = self.queue.take() {
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
