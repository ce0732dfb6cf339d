//! Write-behind: `xWrite` copies into one process-wide queue; the queue reaches the kernel
//! in a single submission (adjacent pieces coalesced into one write, a following sync
//! linked to them) at the next flush point.
//!
//! # Flush points (docs/ARCHITECTURE.md has the reasoning for each)
//! The queue holds writes of **one file at a time** and is submitted, and every
//! completion reaped, before:
//! * a write to any *other* file — so writes reach the kernel in the order SQLite issued
//!   them across files (journal before database), which is what keeps
//!   `synchronous=OFF` databases intact after a process crash, as they are under `unix`;
//! * any other VFS method on any file (`xRead`, `xSync`, `xTruncate`, `xFileSize`,
//!   `xLock`/`xUnlock`, `xFileControl`, `xShm*`, `xFetch`, `xClose`, `xDelete`) — so a
//!   read sees the data, a lock change or WAL-index change never publishes unwritten
//!   data, and a sync covers it;
//! * returning from the `xWrite` of a WAL *commit frame* — SQLite publishes the new
//!   WAL-index header right after it without another reportable VFS call, so the frames
//!   must be in the kernel, and their errors returned, by then;
//! * returning from any `xWrite` to a memory-mapped file — SQLite (its sorter, for one)
//!   reads through the mapping without another VFS call;
//! * returning from the `xWrite` that ends a rollback-journal record (its checksum) —
//!   SQLite's rollback reads the journal back, so a failed journal write must surface
//!   before SQLite modifies the page, as it would under `unix`;
//! * returning from any `xWrite` inside a checkpoint (`SQLITE_FCNTL_CKPT_START` …
//!   `CKPT_DONE`) — SQLite ignores CKPT_DONE's result and then publishes `nBackfill`;
//! * the queue filling up (`ARENA_BYTES` or `MAX_PIECES`), or a write overlapping a
//!   queued range (the kernel may reorder writes inside one batch);
//! * a normal process exit (`flush_at_exit`), where `unix` would leave in the files what
//!   SQLite wrote (pages a transaction spilled before committing, for one).
//!
//! # Failed flushes
//! A failed queued write belongs to the file that wrote it, whichever call flushed it:
//! * it is returned by that file's next I/O call (xRead, xWrite, xSync, xTruncate,
//!   xFileSize, …), which SQLite handles as the failed write it is (pager error state,
//!   rollback from the journal);
//! * until then, every write, sync or delete of any *other* file fails too, so nothing can
//!   be ordered after the lost data (a database write after a failed journal write, a
//!   journal deletion after a failed database write);
//! * calls whose errors SQLite reads as something else — xLock/xUnlock and xShmLock
//!   (contention), xShmBarrier and xClose (no result) — flush but never report it.
//!
//! # Buffer lifetime
//! Queued bytes live in the queue's own arena, never in SQLite's buffers, and a flush
//! waits for every completion before it returns (the buffer-lifetime rule of `io/op.rs`), so nothing
//! outlives the mutex-held flush. The arena is allocated once and never freed, which is
//! what lets rings register it (the registered-buffer rule of `io/fixed.rs`).

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::io::fixed::publish_fixed_region;
use crate::io::fork::register_child_hook;
use crate::io::{EngineKind, FlushFailure, Submitter, SyncRequest, MAX_BATCH};
use crate::stats::SharedStats;
use crate::sys::AlignedBuffer;

/// Bytes one queue may hold before it is flushed.
const ARENA_BYTES: usize = 2 << 20;
/// Writes bigger than this bypass the queue (after flushing it): copying them buys nothing.
const DIRECT_WRITE_BYTES: usize = ARENA_BYTES / 4;
/// Distinct pieces per flush: with a directory sync and the linked sync it still fits one
/// batch, so a commit is one submission.
const MAX_PIECES: usize = MAX_BATCH - 2;

/// The file whose writes are queued.
struct Owner {
    file_id: u64,
    fd: RawFd,
    engine: EngineKind,
    file_stats: Arc<SharedStats>,
    vfs_stats: &'static SharedStats,
}

struct Piece {
    offset: u64,
    arena_start: usize,
    len: usize,
}

/// A flush failure not yet returned to the file whose write failed.
struct Unreported {
    file_id: u64,
    /// The file was closed: the next write/sync/delete anywhere takes the failure.
    owner_closed: bool,
    failure: FlushFailure,
}

struct WriteQueue {
    owner: Option<Owner>,
    /// Page-aligned, so pieces of an O_DIRECT file (padded to its alignment) can be
    /// written from it directly.
    arena: AlignedBuffer,
    pieces: Vec<Piece>,
    unreported: Option<Unreported>,
}

/// What a flush point does with a failure (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A read-like call of this file: fails only with this file's own failure.
    Reader(u64),
    /// A write, sync, truncate or delete (of this file, or `None` for xDelete): fails with
    /// any pending failure, since it would be ordered after the lost data.
    Writer(Option<u64>),
    /// Lock, barrier or close calls: flush, report nothing.
    Quiet,
}

/// Whether the queue holds writes or an unreported failure: published under the queue's
/// lock whenever a guard is dropped, so a flush point can skip the lock when there is
/// nothing to do. Acquire/Release: a caller that must see queued data is ordered after the
/// xWrite that queued it (same thread, or SQLite's own locking in between), which makes
/// the store visible to its load.
static QUEUE_IN_USE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

static QUEUE: Mutex<WriteQueue> = Mutex::new(WriteQueue {
    owner: None,
    arena: AlignedBuffer::empty(),
    pieces: Vec::new(),
    unreported: None,
});

/// The locked queue; dropping the guard republishes [`QUEUE_IN_USE`].
struct QueueGuard(MutexGuard<'static, WriteQueue>);

impl std::ops::Deref for QueueGuard {
    type Target = WriteQueue;
    fn deref(&self) -> &WriteQueue {
        &self.0
    }
}

impl std::ops::DerefMut for QueueGuard {
    fn deref_mut(&mut self) -> &mut WriteQueue {
        &mut self.0
    }
}

impl Drop for QueueGuard {
    fn drop(&mut self) {
        let in_use = self.0.owner.is_some() || self.0.unreported.is_some();
        QUEUE_IN_USE.store(in_use, std::sync::atomic::Ordering::Release);
    }
}

fn queue() -> QueueGuard {
    // The queue's invariants hold between statements, so a panic elsewhere (caught at the
    // FFI boundary) does not make it unusable.
    QueueGuard(
        QUEUE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

/// What `xWrite` needs to know about its file.
pub(crate) struct Writer<'a> {
    pub(crate) file_id: u64,
    pub(crate) fd: RawFd,
    /// Queued pieces start at a multiple of this in the arena (an O_DIRECT file's
    /// alignment; 1 otherwise). The caller queues only writes whose offset and length
    /// are multiples of it too.
    pub(crate) align_bytes: usize,
    pub(crate) engine: &'a EngineKind,
    pub(crate) file_stats: &'a Arc<SharedStats>,
    pub(crate) vfs_stats: &'static SharedStats,
}

impl WriteQueue {
    fn overlaps(&self, offset: u64, len: usize) -> bool {
        let end = offset + len as u64;
        self.pieces
            .iter()
            .any(|p| offset < p.offset + p.len as u64 && p.offset < end)
    }

    /// Submits the queue (and `sync`, if given, for the owner) and empties it.
    fn flush(&mut self, sync: Option<SyncRequest>) -> Result<(), FlushFailure> {
        let Some(owner) = self.owner.as_ref() else {
            assert!(self.pieces.is_empty());
            return Ok(());
        };
        let mut slices: [(u64, &[u8]); MAX_PIECES] = [(0, &[]); MAX_PIECES];
        assert!(self.pieces.len() <= MAX_PIECES);
        for (slot, piece) in slices.iter_mut().zip(&self.pieces) {
            *slot = (
                piece.offset,
                &self.arena.as_slice()[piece.arena_start..piece.arena_start + piece.len],
            );
        }
        let mut io = Submitter {
            engine: &owner.engine,
            file_stats: &owner.file_stats,
            vfs_stats: owner.vfs_stats,
        };
        let result = io.flush(owner.fd, &slices[..self.pieces.len()], sync);
        self.pieces.clear();
        self.arena.clear();
        self.owner = None;
        result
    }
}

impl WriteQueue {
    /// The failure, if any, that `caller` must return before doing anything.
    fn pending_failure_for(&mut self, caller: Caller) -> Result<(), FlushFailure> {
        let Some(unreported) = self.unreported.as_ref() else {
            return Ok(());
        };
        let failure = unreported.failure;
        let mine = match caller {
            Caller::Reader(id) | Caller::Writer(Some(id)) => id == unreported.file_id,
            _ => false,
        };
        match caller {
            _ if mine => {
                self.unreported = None;
                Err(failure)
            }
            Caller::Writer(_) => {
                if unreported.owner_closed {
                    self.unreported = None;
                }
                Err(failure)
            }
            Caller::Reader(_) | Caller::Quiet => Ok(()),
        }
    }

    /// Flushes for `caller`; a failure is kept for the owner file unless `caller` is it.
    fn flush_for(&mut self, caller: Caller) -> Result<(), FlushFailure> {
        let owner_id = self.owner.as_ref().map(|o| o.file_id);
        let Err(failure) = self.flush(None) else {
            return Ok(());
        };
        let owner_id = owner_id.expect("only a non-empty queue can fail");
        match caller {
            Caller::Reader(id) if id == owner_id => Err(failure),
            // A write, sync or delete that returns the failure fails SQLite's transaction,
            // whose rollback only needs what was flushed before (journal records are never
            // left queued: see `File::write`).
            Caller::Writer(_) => Err(failure),
            Caller::Reader(_) | Caller::Quiet => {
                self.unreported.get_or_insert(Unreported {
                    file_id: owner_id,
                    owner_closed: false,
                    failure,
                });
                Ok(())
            }
        }
    }
}

/// The flush point at the start of every VFS method but xWrite and xSync. Inlined: the
/// common case, an empty queue, is one load at the call site (every xRead passes here).
#[inline]
pub(crate) fn flush(caller: Caller) -> Result<(), FlushFailure> {
    if !QUEUE_IN_USE.load(std::sync::atomic::Ordering::Acquire) {
        return Ok(());
    }
    flush_in_use(caller)
}

#[cold]
fn flush_in_use(caller: Caller) -> Result<(), FlushFailure> {
    let mut queue = queue();
    queue.pending_failure_for(caller)?;
    queue.flush_for(caller)
}

/// xWrite. `flush_now`: the write must reach the kernel before xWrite returns.
pub(crate) fn write(
    writer: &Writer<'_>,
    offset: u64,
    data: &[u8],
    flush_now: bool,
) -> Result<(), FlushFailure> {
    let mut queue = queue();
    let caller = Caller::Writer(Some(writer.file_id));
    queue.pending_failure_for(caller)?;
    // One file's writes may go through two descriptors (O_DIRECT and buffered): a queue
    // holds one descriptor's.
    let other_owner = queue
        .owner
        .as_ref()
        .is_some_and(|o| o.file_id != writer.file_id || o.fd != writer.fd);
    assert!(writer.align_bytes.is_power_of_two());
    if other_owner
        || queue.arena.len().next_multiple_of(writer.align_bytes) + data.len() > ARENA_BYTES
        || queue.pieces.len() == MAX_PIECES
        || queue.overlaps(offset, data.len())
    {
        queue.flush_for(caller)?;
    }
    if data.len() > DIRECT_WRITE_BYTES {
        // An O_DIRECT write needs an aligned source; SQLite's buffers are not.
        assert_eq!(
            writer.align_bytes, 1,
            "only small aligned writes may be queued for O_DIRECT"
        );
        let mut io = Submitter {
            engine: writer.engine,
            file_stats: writer.file_stats,
            vfs_stats: writer.vfs_stats,
        };
        return io
            .write_at(writer.fd, data, offset)
            .map_err(FlushFailure::Write);
    }
    if queue.arena.capacity() == 0 {
        queue.arena = AlignedBuffer::with_capacity(ARENA_BYTES);
        queue.pieces.reserve_exact(MAX_PIECES);
        // SAFETY: the arena is allocated here once and never freed or replaced: QUEUE is
        // a static, nothing assigns `arena` again (its capacity is never 0 after this),
        // and a fork keeps it (`forget_after_fork` only clears it).
        unsafe { publish_fixed_region(queue.arena.as_ptr(), queue.arena.capacity()) };
        // From now on the queue can hold writes a forked child must not issue again, and
        // writes a normal exit must not lose.
        register_child_hook(forget_after_fork);
        register_exit_flush();
    }
    if queue.owner.is_none() {
        queue.owner = Some(Owner {
            file_id: writer.file_id,
            fd: writer.fd,
            engine: writer.engine.clone(),
            file_stats: writer.file_stats.clone(),
            vfs_stats: writer.vfs_stats,
        });
    }
    queue.arena.pad_to(writer.align_bytes);
    let arena_start = queue.arena.len();
    queue.arena.extend_from_slice(data);
    match queue.pieces.last_mut() {
        // Coalesce: the new bytes continue the last piece on disk and in the arena.
        Some(last)
            if last.offset + last.len as u64 == offset
                && last.arena_start + last.len == arena_start =>
        {
            last.len += data.len()
        }
        _ => queue.pieces.push(Piece {
            offset,
            arena_start,
            len: data.len(),
        }),
    }
    if flush_now {
        queue.flush_for(caller)?;
    }
    Ok(())
}

/// xSync of `writer`'s file: its queued writes and the sync (and the directory sync, if
/// due) in one submission. Another file's queued writes are flushed first.
pub(crate) fn sync(writer: &Writer<'_>, request: SyncRequest) -> Result<(), FlushFailure> {
    let mut queue = queue();
    let caller = Caller::Writer(Some(writer.file_id));
    queue.pending_failure_for(caller)?;
    let owns_queue = queue
        .owner
        .as_ref()
        .is_some_and(|o| o.file_id == writer.file_id);
    if owns_queue && !writer.engine.syncs_by_syscall() {
        // Ring-routed syncs go in the writes' own submission (linked), which needs the
        // queue's arena, so the lock is held until they complete.
        return queue.flush(Some(request));
    }
    // Otherwise the fsync waits without the lock: held, it made every other thread's
    // writes wait for this file's fsync (two threads committing to two databases took
    // 1.08× `unix`'s time, examples/parallel_writers.rs), and the sync needs nothing
    // queued.
    if owns_queue {
        queue.flush(None)?;
    } else {
        queue.flush_for(caller)?;
    }
    drop(queue);
    let mut io = Submitter {
        engine: writer.engine,
        file_stats: writer.file_stats,
        vfs_stats: writer.vfs_stats,
    };
    io.flush(writer.fd, &[], Some(request))
}

/// In a child after `fork()` (registered with `io::fork`): the queued writes are the
/// parent's, and the parent will submit them; the child must not write them a second time.
fn forget_after_fork() {
    // A parent thread that does not exist in the child may have held the lock; then the
    // queue stays as it is and every flush in the child blocks — SQLite's documentation
    // already forbids using a connection across fork() in that situation — and the exit
    // handler leaves it alone.
    if let Ok(mut queue) = QUEUE.try_lock() {
        queue.owner = None;
        queue.pieces.clear();
        queue.arena.clear();
        queue.unreported = None;
        QUEUE_IN_USE.store(false, std::sync::atomic::Ordering::Release);
    } else {
        PARENTS_QUEUE.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Set in a forked child whose copy of the queue was locked at `fork()`: what it holds
/// is the parent's, and this process never writes it.
static PARENTS_QUEUE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long the exit handler waits for a queue another thread holds, in 1 ms steps.
const EXIT_LOCK_ATTEMPTS: u32 = 1000;

/// Registers [`flush_at_exit`] with `atexit`, once per process (at the first queued
/// write): std never drops statics, so nothing else would write the queue at a normal
/// exit.
fn register_exit_flush() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: an `extern "C"` function that never unwinds (it catches panics) and
        // lives as long as the program text (in the extension, glibc ties it to the
        // library's handle through __cxa_atexit).
        unsafe { libc::atexit(flush_at_exit) };
    });
}

/// At a normal process exit (`exit()`, a return from `main`, an interpreter ending)
/// without the connections closed: the queued writes reach the kernel, as they would
/// have under `unix`, which wrote them at `xWrite` (a transaction's spilled pages or
/// frames: SQLite had not committed them, but `unix` leaves them in the files).
///
/// Never blocks for long and never panics: it waits up to [`EXIT_LOCK_ATTEMPTS`] ms for
/// a queue another thread holds (a flush in progress finishes in that time; a thread
/// stuck while holding it loses its queue, as a crash would), leaves a forked child's copy
/// of its parent's queue alone, and writes by plain `pwrite`, whatever the file's
/// routing: the thread's ring is a thread-local, which may be gone by now (glibc runs
/// the main thread's TLS destructors before `atexit` handlers).
extern "C" fn flush_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        for _ in 0..EXIT_LOCK_ATTEMPTS {
            if PARENTS_QUEUE.load(std::sync::atomic::Ordering::Acquire)
                || !QUEUE_IN_USE.load(std::sync::atomic::Ordering::Acquire)
            {
                return;
            }
            let guard = match QUEUE.try_lock() {
                Ok(guard) => guard,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
            };
            let mut queue = QueueGuard(guard);
            // A failure not yet reported means lost data: nothing may follow it.
            if queue.unreported.is_some() {
                return;
            }
            if let Some(owner) = queue.owner.as_mut() {
                owner.engine = EngineKind::Syscall;
            }
            let _ = queue.flush_for(Caller::Quiet);
            return;
        }
    });
}

/// xClose of a file: its queued writes must reach the kernel before its fd is closed. A
/// failure of this file's writes, now or earlier, goes to the next write/sync/delete.
pub(crate) fn flush_before_close(file_id: u64) {
    let mut queue = queue();
    if queue.owner.as_ref().is_some_and(|o| o.file_id == file_id) {
        let _ = queue.flush_for(Caller::Quiet);
    }
    if let Some(unreported) = queue.unreported.as_mut().filter(|u| u.file_id == file_id) {
        unreported.owner_closed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::fd::AsRawFd;

    /// Serialises the tests of this module: they share the process-wide queue.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[derive(Debug, Clone)]
    struct Write {
        file: usize,
        offset: u64,
        len: usize,
        seed: u8,
    }

    fn write_strategy() -> impl Strategy<Value = Write> {
        (
            0..2usize,
            prop_oneof![0..64u64, 4000..4200u64, 8188..8200u64, 0..(4u64 << 20)],
            prop_oneof![
                1..8usize,
                4..5usize,
                4096..4097usize,
                1..9000usize,
                (DIRECT_WRITE_BYTES - 10)..(DIRECT_WRITE_BYTES + 10)
            ],
            any::<u8>(),
        )
            .prop_map(|(file, offset, len, seed)| Write {
                file,
                offset,
                len,
                seed,
            })
    }

    fn bytes(write: &Write) -> Vec<u8> {
        (0..write.len)
            .map(|i| write.seed.wrapping_add((i % 251) as u8))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Writes through the queue (with a flush, or a read-side flush, at random points)
        /// leave both files byte-identical to the same writes applied in order.
        #[test]
        fn queue_matches_in_order_writes(
            writes in proptest::collection::vec(write_strategy(), 1..120),
            flush_every in 1..40usize,
            engine in prop_oneof![
                Just(EngineKind::IoUring(crate::io::routing::Routing::ALL_RING)),
                Just(EngineKind::IoUring(crate::io::routing::Routing::new(
                    crate::config::Submission::Syscall,
                    crate::config::Submission::Syscall,
                    crate::config::Submission::Syscall,
                ))),
                Just(EngineKind::IoUring(crate::io::routing::Routing::new(
                    crate::config::Submission::Syscall,
                    crate::config::Submission::Ring,
                    crate::config::Submission::Syscall,
                ))),
                Just(EngineKind::Syscall)
            ],
        ) {
            let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
            let dir = tempfile::tempdir().unwrap();
            let queued: Vec<std::fs::File> = (0..2).map(|i| std::fs::File::create(dir.path().join(format!("q{i}"))).unwrap()).collect();
            let expected: Vec<std::fs::File> = (0..2).map(|i| std::fs::File::create(dir.path().join(format!("e{i}"))).unwrap()).collect();
            let stats = Arc::new(SharedStats::default());
            static VFS_STATS: std::sync::OnceLock<SharedStats> = std::sync::OnceLock::new();
            let vfs_stats = VFS_STATS.get_or_init(SharedStats::default);
            for (index, write) in writes.iter().enumerate() {
                let data = bytes(write);
                let writer = Writer {
                    file_id: 1_000_000 + write.file as u64,
                    fd: queued[write.file].as_raw_fd(),
                    align_bytes: 1,
                    engine: &engine,
                    file_stats: &stats,
                    vfs_stats,
                };
                super::write(&writer, write.offset, &data, false).unwrap();
                use std::os::unix::fs::FileExt;
                expected[write.file].write_all_at(&data, write.offset).unwrap();
                if index % flush_every == 0 {
                    flush(Caller::Quiet).unwrap();
                }
            }
            flush(Caller::Quiet).unwrap();
            for i in 0..2 {
                let got = std::fs::read(dir.path().join(format!("q{i}"))).unwrap();
                let want = std::fs::read(dir.path().join(format!("e{i}"))).unwrap();
                prop_assert!(got == want, "file {} differs ({} vs {} bytes)", i, got.len(), want.len());
            }
        }
    }

    #[test]
    fn adjacent_writes_coalesce_into_one_op() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("c")).unwrap();
        let stats = Arc::new(SharedStats::default());
        let vfs_stats: &'static SharedStats = Box::leak(Box::default());
        let writer = Writer {
            file_id: 2_000_000,
            fd: file.as_raw_fd(),
            align_bytes: 1,
            engine: &EngineKind::IoUring(crate::io::routing::Routing::ALL_RING),
            file_stats: &stats,
            vfs_stats,
        };
        // A rollback-journal record: page number, page, checksum.
        super::write(&writer, 512, &[1; 4], false).unwrap();
        super::write(&writer, 516, &[2; 4096], false).unwrap();
        super::write(&writer, 4612, &[3; 4], false).unwrap();
        assert_eq!(
            stats.snapshot().ops,
            0,
            "nothing submitted before the flush point"
        );
        flush(Caller::Quiet).unwrap();
        let counted = stats.snapshot();
        assert_eq!((counted.ops, counted.kernel_entries), (1, 1), "{counted:?}");
        assert_eq!(std::fs::metadata(dir.path().join("c")).unwrap().len(), 4616);
    }

    /// Pieces queued for an O_DIRECT descriptor start at aligned arena offsets, with an
    /// unaligned write of the same file through its buffered descriptor in between (it
    /// must flush the direct pieces and not join their queue): a misaligned piece, or an
    /// unaligned one sent to the O_DIRECT descriptor, fails with EINVAL.
    #[test]
    fn aligned_writers_get_aligned_pieces_on_an_o_direct_file() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("direct");
        std::fs::write(&path, vec![0u8; 64 << 10]).unwrap();
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let direct = crate::direct::DirectFile::open(&c_path, true)
            .expect("O_DIRECT on the test filesystem");
        let buffered = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let stats = Arc::new(SharedStats::default());
        let vfs_stats: &'static SharedStats = Box::leak(Box::default());
        let engine = EngineKind::IoUring(crate::io::routing::Routing::ALL_RING);
        let aligned = Writer {
            file_id: 3_000_000,
            fd: direct.fd,
            align_bytes: direct.align_bytes,
            engine: &engine,
            file_stats: &stats,
            vfs_stats,
        };
        let unaligned = Writer {
            fd: buffered.as_raw_fd(),
            align_bytes: 1,
            ..aligned
        };
        let page = 4096usize;
        super::write(&aligned, 0, &[1; 4096], false).unwrap();
        super::write(&aligned, 3 * page as u64, &[2; 4096], false).unwrap();
        super::write(&unaligned, 100, &[3; 7], false).unwrap();
        super::write(&aligned, page as u64, &[4; 4096], false).unwrap();
        super::write(&aligned, 2 * page as u64, &[5; 4096], false).unwrap();
        flush(Caller::Quiet).unwrap();
        let mut want = vec![0u8; 64 << 10];
        want[..page].fill(1);
        want[100..107].fill(3);
        want[page..2 * page].fill(4);
        want[2 * page..3 * page].fill(5);
        want[3 * page..4 * page].fill(2);
        assert!(
            std::fs::read(&path).unwrap() == want,
            "file content differs"
        );
        // SAFETY: the test owns the descriptor.
        unsafe { libc::close(direct.fd) };
    }
}
