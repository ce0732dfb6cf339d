//! Write-behind: `xWrite` copies into the queue of the file's database; the queue reaches
//! the kernel in a single submission (adjacent pieces coalesced into one write, a
//! following sync linked to them) at the next flush point.
//!
//! # Queues: one per database
//! A main database, its rollback journal and its WAL share one [`Queue`] (keyed by the
//! database's path: the journal and WAL are named by SQLite as that path plus `-journal`
//! or `-wal`), because SQLite orders writes *between* them (journal before database).
//! Every other file — a super-journal, a temporary or transient file — has a queue of
//! its own: nothing else is ordered against it through the queue. A file finds its queue
//! once, at xOpen ([`queue_for_database`], [`private_queue`]); no call looks it up again.
//! Different databases never flush, wait for, or fail because of each other's queues.
//! What must still cross databases is ordered by SQLite's own calls: see
//! docs/ARCHITECTURE.md, "Write-behind and its flush points".
//!
//! # Flush points (docs/ARCHITECTURE.md has the reasoning for each)
//! A queue holds writes of **one file at a time** and is submitted, and every
//! completion reaped, before:
//! * a write to any *other* file of its database — so writes reach the kernel in the
//!   order SQLite issued them across files (journal before database), which is what
//!   keeps `synchronous=OFF` databases intact after a process crash, as under `unix`;
//! * any other VFS method on a file of its database (`xSync`, `xTruncate`,
//!   `xLock`/`xUnlock`, `xFileControl`, an exclusive `xShmLock` or its release, `xClose`),
//!   and `xDelete` of one of its files — so a lock change never publishes unwritten
//!   data, and a sync covers it;
//! * a read-like call (`xRead`, `xFileSize`, `xFetch`) of the file whose writes are
//!   queued — so a connection reads its own writes. A read of *another* file handle
//!   (another connection's) does not flush: what one connection has queued is not yet
//!   published, so no other connection may read it (its frames are past every reader's
//!   snapshot, its database pages are under an EXCLUSIVE lock), and everything SQLite
//!   publishes is flushed by the publishing connection first (the flush points here: a
//!   commit frame, a checkpoint's writes, a database-lock change). For the same reason a
//!   shared `xShmLock` (a read mark) and `xShmBarrier` publish nothing of the caller's
//!   and do not flush: reader threads beside a writer would otherwise write, and wait
//!   for, the writer's frames on every read transaction;
//! * returning from the `xWrite` of a WAL *commit frame* — SQLite publishes the new
//!   WAL-index header right after it without another reportable VFS call, so the frames
//!   must be in the kernel, and their errors returned, by then; likewise the commit
//!   frame's header rewritten right after SQLite read its frame back
//!   (`walRewriteChecksums`, after a commit that rewrote spilled frames) and, with
//!   `psow=0`, the rest of the padding frame SQLite writes right after the commit's sync;
//! * returning from any `xWrite` of a main database outside a commit's run of pages (a
//!   run opens with the write of page 1 and ends at any other call on the file) — a
//!   rollback-mode page written before its commit (a cache spill,
//!   `sqlite3_db_cacheflush()`) is followed by no VFS call, and `unix` has it in the file
//!   at once;
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
//!   rollback from the journal), even when a call of another file returned it first;
//! * until then, every write, sync or delete of any *other file of the same database*
//!   fails too, so nothing can be ordered after the lost data (a database write after a
//!   failed journal write, a journal deletion after a failed database write); other
//!   databases never see it;
//! * calls whose errors SQLite reads as something else — xLock/xUnlock and an exclusive
//!   xShmLock (contention), xClose (no result) — flush but never report it;
//! * if the file closes before it learns of it, the database's next write, sync or
//!   delete returns it, unless a call of another file already has.
//!
//! # Memory
//! A queue's bytes live in an arena slot of [`ARENA_BYTES`], carved from one region of
//! [`ARENA_SLOTS`] slots reserved once (an anonymous `MAP_NORESERVE` mapping: untouched
//! pages cost nothing) and published once as the rings' fixed-buffer region (the
//! registered-buffer rule of `io/fixed.rs`: it is never freed or remapped). A queue
//! takes a slot with its first queued write and gives it back (a bit in a free mask)
//! whenever it is empty again, so resident memory follows the number of databases with
//! writes queued *at the same moment*, not the number open. When every slot is taken, a
//! write goes straight through (as with `uring_write_behind=off`); so does a write that
//! must reach the kernel at once while the queue is empty (each page of `VACUUM INTO`'s
//! output, spilled outside a commit), from SQLite's buffer, without a copy.
//!
//! # Buffer lifetime
//! Queued bytes live in the arena, never in SQLite's buffers, and a flush waits for every
//! completion before it returns (the buffer-lifetime rule of `io/op.rs`), so a slot is
//! back in the free mask only when no I/O names it.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::direct::WalDirect;
use crate::io::fixed::publish_fixed_region;
use crate::io::{EngineKind, FlushFailure, Submitter, SyncRequest, WriteFailure, MAX_BATCH};
use crate::stats::SharedStats;
use crate::sys::fork::{register_child_hook, ForkLocal};
use crate::sys::{Slot, SlotRegion};

/// Bytes one queue may hold before it is flushed: one arena slot.
const ARENA_BYTES: usize = 2 << 20;
/// Arena slots in the region: at most this many queues hold writes at the same moment
/// (a bit each in the region's free mask). 128 MiB of address space, resident only as used.
const ARENA_SLOTS: usize = 64;
/// Writes bigger than this bypass the queue (after flushing it): copying them buys nothing.
const DIRECT_WRITE_BYTES: usize = ARENA_BYTES / 4;
/// Distinct pieces per flush: with a directory sync and the linked sync it still fits one
/// batch, so a commit is one submission.
const MAX_PIECES: usize = MAX_BATCH - 2;

/// The arena region: `None` when it could not be mapped (then every write goes straight
/// through). Bit `i` of its free mask set: slot `i` is free. Held in a `static`, so
/// never unmapped, remapped or madvised away (a fork keeps it; the child's rings
/// register its copy).
static REGION: std::sync::OnceLock<Option<SlotRegion>> = std::sync::OnceLock::new();

const _: () = assert!(ARENA_SLOTS == u64::BITS as usize);

/// Maps the region once and publishes it to the rings before any slot is lent.
fn region() -> Option<&'static SlotRegion> {
    static PUBLISHED: std::sync::Once = std::sync::Once::new();
    // Pages cost nothing until written.
    let region = REGION
        .get_or_init(|| SlotRegion::reserve(ARENA_BYTES, ARENA_SLOTS))
        .as_ref()?;
    PUBLISHED.call_once(|| publish_fixed_region(region));
    Some(region)
}

/// One slot of the region, held by one queue (or by a flush that took it out of its
/// queue) and returned to the region's free mask when dropped.
struct Arena(Slot);

impl Arena {
    /// A free slot, or `None` when all are taken (or there is no region).
    fn take() -> Option<Arena> {
        #[cfg(test)]
        tests::ARENA_TAKES.with(|takes| takes.set(takes.get() + 1));
        region()?.take().map(Arena)
    }

    #[cfg(test)]
    fn index(&self) -> usize {
        self.0.index()
    }

    fn bytes(&self) -> &[u8] {
        self.0.bytes()
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.0.bytes_mut()
    }
}

/// The failure of writes a panic stopped a flush of (with nothing in flight: the ring
/// engine aborts the process otherwise). Whether any of them reached the file is unknown;
/// they are lost as far as the queue goes, and reported as a failed write.
const ABANDONED: FlushFailure = FlushFailure::Write(WriteFailure::Errno(libc::EIO));

/// A broken invariant with I/O possibly in flight: unwinding would return to SQLite,
/// which may free or reuse memory the kernel still uses. Stop the process instead.
#[cold]
fn fatal(what: &str) -> ! {
    eprintln!("sqlite-uring: {what}; aborting");
    std::process::abort()
}

/// The file whose writes are queued.
struct Owner {
    file_id: u64,
    /// By number (`sys/fd.rs`): the file flushes its queued writes before it closes the
    /// descriptor (`Queue::flush_before_close`).
    fd: RawFd,
    align_bytes: usize,
    engine: EngineKind,
    file_stats: Arc<SharedStats>,
    vfs_stats: &'static SharedStats,
}

#[derive(Clone, Copy)]
struct Piece {
    offset: u64,
    arena_start: usize,
    len: usize,
}

/// The O_DIRECT side of one WAL file of the database (`uring_wal_direct=on`), which its
/// flushes may go through, whichever thread flushes them.
struct WalSide {
    file_id: u64,
    direct: WalDirect,
}

/// A flush failure not yet returned to the file whose write failed.
struct Unreported {
    file_id: u64,
    /// The file was closed: the next write/sync/delete of the database takes it.
    owner_closed: bool,
    /// A write, sync or delete of another file has returned it already. If the file
    /// closes before it learns of it, it is forgotten: nobody is left to tell, and the
    /// call that got it failed its transaction.
    returned: bool,
    failure: FlushFailure,
}

struct QueueState {
    /// Held exactly while pieces are queued.
    arena: Option<Arena>,
    /// Bytes of the arena in use (pieces and alignment padding).
    arena_len: usize,
    owner: Option<Owner>,
    /// Capacity `MAX_PIECES`, reserved when the queue is made: never grows.
    pieces: Vec<Piece>,
    unreported: Option<Unreported>,
    /// The O_DIRECT sides of the database's WAL files opened with `uring_wal_direct=on`
    /// (one per file: each connection has its own), owned here from the file's open
    /// to its close ([`Queue::adopt_wal_direct`]) and used only under the queue's lock
    /// ([`Queue::with_wal_direct`]), or by the one file's sync that took it out.
    wal_sides: Vec<WalSide>,
}

/// What a queue is found by.
#[derive(Clone, Debug, PartialEq, Eq)]
enum QueueKey {
    /// A main database's path: its files share the queue.
    Database(Box<str>),
    /// A file with a queue of its own, by file id.
    Private(u64),
}

/// The write-behind queue of one database (or of one file that is ordered against
/// nothing else).
pub(crate) struct Queue {
    key: QueueKey,
    /// Whether the queue holds writes or an unreported failure: published under the
    /// queue's lock whenever a guard is dropped, so a flush point can skip the lock when
    /// there is nothing to do. Acquire/Release: a caller that must see queued data is
    /// ordered after the xWrite that queued it (same thread, or SQLite's own locking in
    /// between), which makes the store visible to its load.
    in_use: AtomicBool,
    state: Mutex<QueueState>,
}

/// Every queue a file uses, by key. Taken at xOpen, xClose and xDelete, never per I/O.
/// A database's entry outlives its files only while it holds an unreported failure.
/// This process's: a forked child starts with none (the parent's map may have been
/// locked at the fork, and its queues hold the parent's writes).
static QUEUES: ForkLocal<Mutex<QueueMap>> = ForkLocal::new();

/// The queues by key: a database's by its path, looked up as a `&str`, so opening or
/// deleting a journal (once per rollback commit) copies no path; a private queue by its
/// file's id.
#[derive(Default)]
struct QueueMap {
    databases: BTreeMap<Box<str>, Arc<Queue>>,
    private: BTreeMap<u64, Arc<Queue>>,
}

impl QueueMap {
    fn is_empty(&self) -> bool {
        self.databases.is_empty() && self.private.is_empty()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.databases.len() + self.private.len()
    }

    /// The queue under `key`.
    fn get(&self, key: &QueueKey) -> Option<&Arc<Queue>> {
        match key {
            QueueKey::Database(path) => self.databases.get(path),
            QueueKey::Private(id) => self.private.get(id),
        }
    }

    #[cfg(test)]
    fn contains_key(&self, key: &QueueKey) -> bool {
        self.get(key).is_some()
    }

    /// Forgets `queue`. Only that queue: in a forked child, a file inherited from the
    /// parent holds the parent's queue, whose key the child's own queue may have too.
    fn remove(&mut self, queue: &Arc<Queue>) {
        if !self
            .get(&queue.key)
            .is_some_and(|entry| Arc::ptr_eq(entry, queue))
        {
            return;
        }
        match &queue.key {
            QueueKey::Database(path) => self.databases.remove(path),
            QueueKey::Private(id) => self.private.remove(id),
        };
    }

    /// Every queue: the databases' by path, then the private ones by file id.
    fn values(&self) -> impl Iterator<Item = &Arc<Queue>> {
        self.databases.values().chain(self.private.values())
    }

    /// A new queue under `key`, which has none yet.
    fn insert_new(&mut self, key: QueueKey) -> Arc<Queue> {
        if self.is_empty() {
            // From now on a queue can hold writes a forked child must not issue again,
            // and writes a normal exit must not lose.
            register_child_hook(forget_after_fork);
            register_exit_flush();
        }
        let queue = Arc::new(Queue {
            key: key.clone(),
            in_use: AtomicBool::new(false),
            state: Mutex::new(QueueState {
                arena: None,
                arena_len: 0,
                owner: None,
                pieces: Vec::with_capacity(MAX_PIECES),
                unreported: None,
                wal_sides: Vec::new(),
            }),
        });
        let previous = match key {
            QueueKey::Database(path) => self.databases.insert(path, queue.clone()),
            QueueKey::Private(id) => self.private.insert(id, queue.clone()),
        };
        assert!(previous.is_none(), "a second queue under one key");
        queue
    }
}

fn queues() -> MutexGuard<'static, QueueMap> {
    QUEUES
        .get()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The database a file named `path` belongs to, as far as write order goes: a journal's
/// or WAL's database (SQLite names them `<database>-journal`, `<database>-wal`), else
/// `path` itself.
pub(crate) fn database_of(path: &str) -> &str {
    path.strip_suffix("-journal")
        .or_else(|| path.strip_suffix("-wal"))
        .unwrap_or(path)
}

/// The queue a main database, its journal and its WAL share (`database` from
/// [`database_of`]).
pub(crate) fn queue_for_database(database: &str) -> Arc<Queue> {
    let mut queues = queues();
    if let Some(queue) = queues.databases.get(database) {
        return queue.clone();
    }
    queues.insert_new(QueueKey::Database(database.into()))
}

/// A queue for one file alone (temporary files, super-journals).
pub(crate) fn private_queue(file_id: u64) -> Arc<Queue> {
    let mut queues = queues();
    match queues.private.get(&file_id) {
        Some(queue) => queue.clone(),
        None => queues.insert_new(QueueKey::Private(file_id)),
    }
}

/// The locked queue; dropping the guard returns an empty queue's arena slot, checks the
/// invariants (debug builds) and republishes `in_use`.
struct QueueGuard<'a> {
    state: MutexGuard<'a, QueueState>,
    in_use: &'a AtomicBool,
}

impl std::ops::Deref for QueueGuard<'_> {
    type Target = QueueState;
    fn deref(&self) -> &QueueState {
        &self.state
    }
}

impl std::ops::DerefMut for QueueGuard<'_> {
    fn deref_mut(&mut self) -> &mut QueueState {
        &mut self.state
    }
}

impl Drop for QueueGuard<'_> {
    fn drop(&mut self) {
        if self.state.pieces.is_empty() {
            self.state.arena = None;
            self.state.arena_len = 0;
        }
        // Not while unwinding: a panic in a destructor then aborts the process, and a
        // flush that panicked has already made the queue consistent (`QueueState::flush`).
        if !std::thread::panicking() {
            debug_assert_eq!(self.state.violation(), None);
        }
        let in_use = self.state.owner.is_some() || self.state.unreported.is_some();
        self.in_use.store(in_use, Ordering::Release);
    }
}

/// What `xWrite` needs to know about its file.
pub(crate) struct Writer<'a> {
    pub(crate) file_id: u64,
    pub(crate) fd: RawFd,
    /// Queued pieces start at a multiple of this in the arena (an O_DIRECT file's
    /// alignment; 1 otherwise). The caller queues only writes whose offset and length
    /// are multiples of it too.
    pub(crate) align_bytes: usize,
    /// The descriptor a write that cannot be queued goes through: `fd`, or the file's
    /// buffered descriptor when `fd` is O_DIRECT (SQLite's buffers are not aligned).
    pub(crate) fallback_fd: RawFd,
    pub(crate) engine: &'a EngineKind,
    pub(crate) file_stats: &'a Arc<SharedStats>,
    pub(crate) vfs_stats: &'static SharedStats,
}

impl Writer<'_> {
    fn submitter(&self) -> Submitter<'_> {
        Submitter {
            engine: self.engine,
            file_stats: self.file_stats,
            vfs_stats: self.vfs_stats,
        }
    }

    /// Writes `data` at once through the fallback descriptor (`wal`: the file's O_DIRECT
    /// WAL side, whose cached block this write may change).
    fn write_through(
        &self,
        wal: Option<&mut WalDirect>,
        offset: u64,
        data: &[u8],
    ) -> Result<(), FlushFailure> {
        if let Some(wal) = wal {
            wal.forget();
        }
        self.submitter()
            .write_at(self.fallback_fd, data, offset)
            .map_err(FlushFailure::Write)
    }
}

/// What a flush point does with a failure (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A read-like call of this file: flushes only writes this file queued (another
    /// file's are unpublished, so not readable by it) and fails only with this file's
    /// own failure.
    Reader(u64),
    /// A write, sync, truncate or delete (of this file, or `None` for xDelete): fails with
    /// any pending failure of its database, since it would be ordered after the lost data.
    Writer(Option<u64>),
    /// Lock, barrier or close calls: flush, report nothing.
    Quiet,
    /// xClose of this file, whose writes are queued: flush, report nothing; a failure is
    /// kept as a closed file's.
    Closing(u64),
}

impl Caller {
    /// Whether this is a call of file `file_id` itself.
    fn is_file(self, file_id: u64) -> bool {
        matches!(self, Caller::Reader(id) | Caller::Writer(Some(id)) if id == file_id)
    }
}

/// A queue's submission, taken out of it: the slot and its pieces. Only a ring-routed
/// sync takes one out (to submit without the lock); every other flush submits the
/// queue's pieces where they are ([`QueueState::flush`]).
struct Batch {
    arena: Arena,
    count: usize,
    pieces: [Piece; MAX_PIECES],
    owner: Owner,
}

impl Batch {
    /// Submits the batch, and `sync` after it; `wal`: the owner's O_DIRECT WAL side.
    fn submit(
        &self,
        sync: Option<SyncRequest>,
        wal: Option<&mut WalDirect>,
    ) -> Result<(), FlushFailure> {
        submit_pieces(
            &self.owner,
            self.arena.bytes(),
            &self.pieces[..self.count],
            sync,
            wal,
        )
    }
}

/// File `file_id`'s O_DIRECT WAL side among `sides`, if it has one.
fn wal_side_of(sides: &mut [WalSide], file_id: u64) -> Option<&mut WalDirect> {
    sides
        .iter_mut()
        .find(|side| side.file_id == file_id)
        .map(|side| &mut side.direct)
}

/// Submits `pieces` of the arena slot `bytes` for `owner`, and `sync` after them; `wal`:
/// the owner's O_DIRECT WAL side. Returns once every completion is in (the slot may then
/// be reused).
fn submit_pieces(
    owner: &Owner,
    bytes: &[u8],
    pieces: &[Piece],
    sync: Option<SyncRequest>,
    wal: Option<&mut WalDirect>,
) -> Result<(), FlushFailure> {
    // A commit's few coalesced pieces fill a short array; the slices never allocate.
    if pieces.len() <= SHORT_PIECES {
        let slices = slices_of::<SHORT_PIECES>(bytes, pieces);
        submit_slices(owner, &slices[..pieces.len()], sync, wal)
    } else {
        let slices = slices_of::<MAX_PIECES>(bytes, pieces);
        submit_slices(owner, &slices[..pieces.len()], sync, wal)
    }
}

/// Pieces queued in a short array of slices ([`submit_pieces`]).
const SHORT_PIECES: usize = 6;

/// `pieces` as `(offset, bytes)` slices of the slot `bytes`, in an array of `N` (the
/// entries past `pieces` empty).
fn slices_of<'a, const N: usize>(bytes: &'a [u8], pieces: &[Piece]) -> [(u64, &'a [u8]); N] {
    assert!(pieces.len() <= N);
    std::array::from_fn(|index| match pieces.get(index) {
        Some(piece) => (
            piece.offset,
            &bytes[piece.arena_start..piece.arena_start + piece.len],
        ),
        None => (0, &[][..]),
    })
}

fn submit_slices(
    owner: &Owner,
    slices: &[(u64, &[u8])],
    sync: Option<SyncRequest>,
    wal: Option<&mut WalDirect>,
) -> Result<(), FlushFailure> {
    let mut io = Submitter {
        engine: &owner.engine,
        file_stats: &owner.file_stats,
        vfs_stats: owner.vfs_stats,
    };
    if let Some(wal) = wal {
        if wal.pays() {
            // Whole blocks through the WAL's O_DIRECT descriptor; the sync, if any, after
            // them on the ordinary one (fsync is per inode).
            wal.write_pieces(&mut io, owner.fd, slices)?;
            let Some(request) = sync else {
                return Ok(());
            };
            let synced = io.flush(owner.fd, &[], Some(request));
            if synced.is_err() {
                // SQLite will not publish these frames: the cached block is no longer
                // known to be what the next commit follows.
                wal.forget();
            }
            return synced;
        }
        wal.forget();
    }
    io.flush(owner.fd, slices, sync)
}

impl QueueState {
    /// Why the queue is inconsistent, or `None`. Checked after every change in debug
    /// builds (the guard's drop) and by the tests.
    fn violation(&self) -> Option<String> {
        if self.owner.is_some() == self.pieces.is_empty() {
            return Some("an owner without pieces, or pieces without an owner".into());
        }
        if self.owner.is_some() && self.unreported.is_some() {
            return Some("writes queued while a failure is unreported".into());
        }
        if self.pieces.is_empty() != self.arena.is_none() {
            return Some("an arena slot held without pieces, or pieces without one".into());
        }
        if self.arena.is_none() && self.arena_len != 0 {
            return Some(format!(
                "{} arena bytes used without a slot",
                self.arena_len
            ));
        }
        if self.arena_len > ARENA_BYTES || self.pieces.len() > MAX_PIECES {
            return Some(format!(
                "{} bytes, {} pieces: over the limits",
                self.arena_len,
                self.pieces.len()
            ));
        }
        if self.pieces.capacity() < MAX_PIECES {
            return Some("the pieces lost their reserved capacity".into());
        }
        let align = self.owner.as_ref().map_or(1, |o| o.align_bytes);
        let mut arena_end = 0;
        for (index, piece) in self.pieces.iter().enumerate() {
            if piece.len == 0 || piece.arena_start < arena_end {
                return Some(format!("piece {index} is empty or out of arena order"));
            }
            arena_end = piece.arena_start + piece.len;
            if arena_end > self.arena_len {
                return Some(format!("piece {index} ends past the arena's used bytes"));
            }
            if piece.arena_start % align != 0
                || piece.offset % align as u64 != 0
                || piece.len % align != 0
            {
                return Some(format!("piece {index} is not aligned to {align}"));
            }
            let end = piece.offset + piece.len as u64;
            if let Some(other) = self.pieces[..index]
                .iter()
                .position(|p| piece.offset < p.offset + p.len as u64 && p.offset < end)
            {
                return Some(format!("pieces {other} and {index} overlap in the file"));
            }
        }
        None
    }

    fn overlaps(&self, offset: u64, len: usize) -> bool {
        let end = offset + len as u64;
        self.pieces
            .iter()
            .any(|p| offset < p.offset + p.len as u64 && p.offset < end)
    }

    /// The O_DIRECT WAL side of file `file_id`, if it has one.
    fn wal_of(&mut self, file_id: u64) -> Option<&mut WalDirect> {
        wal_side_of(&mut self.wal_sides, file_id)
    }

    /// Takes file `file_id`'s O_DIRECT WAL side out of the queue.
    fn take_wal_side(&mut self, file_id: u64) -> Option<WalSide> {
        let at = self
            .wal_sides
            .iter()
            .position(|side| side.file_id == file_id)?;
        Some(self.wal_sides.swap_remove(at))
    }

    /// Takes everything queued out of the queue, leaving it empty; `None` when it is.
    fn take_batch(&mut self) -> Option<Batch> {
        let owner = self.owner.take()?;
        let Some(arena) = self.arena.take() else {
            fatal("write-behind queue has pieces but no arena slot");
        };
        let empty = Piece {
            offset: 0,
            arena_start: 0,
            len: 0,
        };
        let mut batch = Batch {
            arena,
            count: self.pieces.len(),
            pieces: [empty; MAX_PIECES],
            owner,
        };
        batch.pieces[..self.pieces.len()].copy_from_slice(&self.pieces);
        self.pieces.clear();
        self.arena_len = 0;
        Some(batch)
    }

    /// Submits the queue for `caller` and empties it, from the pieces where they are: the
    /// lock is held throughout. (A sync that follows the writes goes after the lock is
    /// dropped, or with a batch taken out of the queue: `Queue::sync`.)
    ///
    /// A panic on the way (with no ring I/O in flight: the ring engine aborts the process
    /// then) empties the queue too, its writes lost, before it unwinds on to the caller's
    /// FFI boundary (an I/O error there): no piece is left without its owner, to be
    /// written later through another file's descriptor at its old offset. The loss is
    /// kept for the owner as any failure is ([`QueueState::lost`]).
    fn flush(&mut self, caller: Caller) -> Result<(), FlushFailure> {
        let Some(owner) = self.owner.take() else {
            return Ok(());
        };
        let Some(arena) = self.arena.as_ref() else {
            fatal("write-behind queue has pieces but no arena slot");
        };
        // The pieces stay borrowed while the WAL side is: `wal_of` would borrow it all.
        let wal = wal_side_of(&mut self.wal_sides, owner.file_id);
        let pieces = &self.pieces;
        let submitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            submit_pieces(&owner, arena.bytes(), pieces, None, wal)
        }));
        self.pieces.clear();
        self.arena_len = 0;
        // Keep the slot: the caller may queue again under the same lock; the guard
        // returns it if the queue stays empty.
        match submitted {
            Ok(result) => result,
            Err(panic) => {
                if let Some(wal) = self.wal_of(owner.file_id) {
                    // What reached the file is unknown.
                    wal.forget();
                }
                let _ = self.lost(owner.file_id, ABANDONED, caller);
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// The failure, if any, that `caller` must return before doing anything.
    fn pending_failure_for(&mut self, caller: Caller) -> Result<(), FlushFailure> {
        let Some(unreported) = self.unreported.as_mut() else {
            return Ok(());
        };
        let failure = unreported.failure;
        if caller.is_file(unreported.file_id) {
            self.unreported = None;
            return Err(failure);
        }
        match caller {
            Caller::Writer(_) => {
                if unreported.owner_closed {
                    self.unreported = None;
                } else {
                    unreported.returned = true;
                }
                Err(failure)
            }
            Caller::Reader(_) | Caller::Quiet | Caller::Closing(_) => Ok(()),
        }
    }

    /// Flushes for `caller`. A failure is kept for the owner file unless `caller` is it,
    /// and returned to `caller` if it is a write, sync or delete.
    fn flush_for(&mut self, caller: Caller) -> Result<(), FlushFailure> {
        let owner_id = self.owner.as_ref().map(|o| o.file_id);
        let Err(failure) = self.flush(caller) else {
            return Ok(());
        };
        self.lost(
            owner_id.expect("only a non-empty queue can fail"),
            failure,
            caller,
        )
    }

    /// File `owner_id`'s queued writes failed in a flush for `caller`: what `caller`
    /// returns. A call of the owner itself returns the failure. Otherwise it is kept for
    /// the owner, whose next call returns it: the owner may be another connection, which
    /// would otherwise go on to publish what was never written (a WAL commit after its
    /// spilled frames failed under a checkpointer's call). A write, sync or delete of
    /// another file returns it too: it would be ordered after the lost data, and the
    /// failure fails SQLite's transaction there, whose rollback only needs what was
    /// flushed before (journal records are never left queued: see `File::write`).
    ///
    /// A failure is kept only while nothing is queued (no write is queued while one is
    /// unreported: every write returns it first), so there is never an earlier one here;
    /// if there were, it would stay, as the first loss.
    fn lost(
        &mut self,
        owner_id: u64,
        failure: FlushFailure,
        caller: Caller,
    ) -> Result<(), FlushFailure> {
        if caller.is_file(owner_id) {
            return Err(failure);
        }
        let returned = matches!(caller, Caller::Writer(_));
        self.unreported.get_or_insert(Unreported {
            file_id: owner_id,
            owner_closed: caller == Caller::Closing(owner_id),
            returned,
            failure,
        });
        if returned {
            Err(failure)
        } else {
            Ok(())
        }
    }

    /// Copies `data` into the arena as a piece (coalesced with the last one when it
    /// continues it on disk and in the arena). The caller made room.
    fn push(&mut self, writer: &Writer<'_>, offset: u64, data: &[u8]) {
        let arena_start = self.arena_len.next_multiple_of(writer.align_bytes);
        let end = arena_start + data.len();
        let arena = self.arena.as_mut().expect("a slot is taken before pushing");
        arena.bytes_mut()[arena_start..end].copy_from_slice(data);
        self.arena_len = end;
        if self.owner.is_none() {
            self.owner = Some(Owner {
                file_id: writer.file_id,
                fd: writer.fd,
                align_bytes: writer.align_bytes,
                engine: writer.engine.clone(),
                file_stats: writer.file_stats.clone(),
                vfs_stats: writer.vfs_stats,
            });
        }
        match self.pieces.last_mut() {
            // Coalesce: the new bytes continue the last piece on disk and in the arena.
            Some(last)
                if last.offset + last.len as u64 == offset
                    && last.arena_start + last.len == arena_start =>
            {
                last.len += data.len()
            }
            _ => self.pieces.push(Piece {
                offset,
                arena_start,
                len: data.len(),
            }),
        }
    }
}

impl Queue {
    fn lock(&self) -> QueueGuard<'_> {
        // A panic while the lock is held leaves the queue consistent: a flush that
        // panics empties it before unwinding on (`QueueState::flush`), and the other
        // calls made under the lock (a write straight through the file's descriptor, the
        // WAL side's bookkeeping) change no piece. So a poisoned lock is taken as it is.
        QueueGuard {
            state: self
                .state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            in_use: &self.in_use,
        }
    }

    /// The flush point at the start of every VFS method but xWrite and xSync. Inlined:
    /// the common case, an empty queue, is one load at the call site (every xRead passes
    /// here).
    #[inline]
    pub(crate) fn flush(&self, caller: Caller) -> Result<(), FlushFailure> {
        if !self.in_use.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flush_in_use(caller)
    }

    #[cold]
    fn flush_in_use(&self, caller: Caller) -> Result<(), FlushFailure> {
        let mut queue = self.lock();
        queue.pending_failure_for(caller)?;
        if let Caller::Reader(file_id) = caller {
            if queue.owner.as_ref().is_some_and(|o| o.file_id != file_id) {
                return Ok(());
            }
        }
        queue.flush_for(caller)
    }

    /// xWrite. `flush_now`: the write must reach the kernel before xWrite returns.
    pub(crate) fn write(
        &self,
        writer: &Writer<'_>,
        offset: u64,
        data: &[u8],
        flush_now: bool,
    ) -> Result<(), FlushFailure> {
        let mut queue = self.lock();
        // An O_DIRECT WAL side learns every write of its file (the frame size, the WAL
        // header), whatever becomes of it.
        if let Some(wal) = queue.wal_of(writer.file_id) {
            wal.note_write(offset, data);
        }
        let caller = Caller::Writer(Some(writer.file_id));
        queue.pending_failure_for(caller)?;
        // One file's writes may go through two descriptors (O_DIRECT and buffered): a
        // queue holds one descriptor's.
        let other_owner = queue
            .owner
            .as_ref()
            .is_some_and(|o| o.file_id != writer.file_id || o.fd != writer.fd);
        assert!(writer.align_bytes.is_power_of_two());
        if other_owner
            || queue.arena_len.next_multiple_of(writer.align_bytes) + data.len() > ARENA_BYTES
            || queue.pieces.len() == MAX_PIECES
            || queue.overlaps(offset, data.len())
        {
            queue.flush_for(caller)?;
        }
        if data.len() > DIRECT_WRITE_BYTES {
            // The queue holds at most this file's writes to other ranges now: order
            // between files is kept.
            return writer.write_through(queue.wal_of(writer.file_id), offset, data);
        }
        if flush_now && queue.pieces.is_empty() && queue.wal_of(writer.file_id).is_none() {
            // A lone write that must reach the kernel now (a page spilled outside a
            // commit, as `VACUUM INTO`'s output gets for every page): nothing queued to
            // keep it ordered after or to coalesce with, so it goes from SQLite's buffer
            // as under `unix`, without the copy into the arena. A file with an O_DIRECT
            // WAL side keeps the batch path, which may write whole blocks through it.
            return writer.write_through(None, offset, data);
        }
        if queue.arena.is_none() {
            match Arena::take() {
                Some(arena) => queue.arena = Some(arena),
                // Every slot holds another database's writes: this one goes straight
                // through, as with write-behind off (the queue is empty, so order is kept).
                None => return writer.write_through(queue.wal_of(writer.file_id), offset, data),
            }
        }
        queue.push(writer, offset, data);
        if flush_now {
            queue.flush_for(caller)?;
        }
        Ok(())
    }

    /// xSync of `writer`'s file: its queued writes and the sync (and the directory sync,
    /// if due) in one submission. Another file's queued writes are flushed first.
    pub(crate) fn sync(
        &self,
        writer: &Writer<'_>,
        request: SyncRequest,
    ) -> Result<(), FlushFailure> {
        let mut queue = self.lock();
        let caller = Caller::Writer(Some(writer.file_id));
        queue.pending_failure_for(caller)?;
        let owns_queue = queue
            .owner
            .as_ref()
            .is_some_and(|o| o.file_id == writer.file_id);
        if owns_queue && !writer.engine.syncs_by_syscall() {
            // Ring-routed syncs go in the writes' own submission (linked). The batch,
            // with its arena slot, is taken out of the queue and submitted without the
            // lock, so the fsync does not hold up other threads' writes to this
            // database; the slot returns to the free mask once every completion is in.
            // The file's O_DIRECT WAL side goes with it and comes back after: only this
            // file, which is in this call, uses it.
            // A panic on the way (with no ring I/O in flight: the engine aborts the
            // process then) loses the batch, which is this file's and reaches this call as
            // an I/O error; the WAL side comes back all the same, its cached block
            // forgotten.
            let batch = queue.take_batch().expect("the queue has an owner");
            let mut wal = queue.take_wal_side(writer.file_id);
            drop(queue);
            let submitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                batch.submit(Some(request), wal.as_mut().map(|side| &mut side.direct))
            }));
            if let Some(mut side) = wal {
                if submitted.is_err() {
                    side.direct.forget();
                }
                self.lock().wal_sides.push(side);
            }
            return submitted.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
        // Otherwise the fsync waits without the lock: held, it made every other thread's
        // writes wait for this file's fsync, and the sync needs nothing queued.
        if owns_queue {
            queue.flush(caller)?;
        } else {
            queue.flush_for(caller)?;
        }
        drop(queue);
        writer.submitter().flush(writer.fd, &[], Some(request))
    }

    /// Takes ownership of file `file_id`'s O_DIRECT WAL side (at its open): its flushes
    /// go through it from now on, whichever thread makes them.
    pub(crate) fn adopt_wal_direct(&self, file_id: u64, direct: WalDirect) {
        self.lock().wal_sides.push(WalSide { file_id, direct });
    }

    /// Closes file `file_id`'s O_DIRECT WAL side (its descriptor closes with it), after
    /// the file's queued writes were flushed (at close, or SQLITE_FCNTL_NULL_IO).
    pub(crate) fn close_wal_direct(&self, file_id: u64) {
        let side = self.lock().take_wal_side(file_id);
        drop(side);
    }

    /// Runs `use_it` on file `file_id`'s O_DIRECT WAL side, under the queue's lock: the
    /// file's own bookkeeping (whether its commits are synced at once, a truncate).
    pub(crate) fn with_wal_direct(&self, file_id: u64, use_it: impl FnOnce(&mut WalDirect)) {
        if let Some(wal) = self.lock().wal_of(file_id) {
            use_it(wal);
        }
    }

    /// xClose of a file: its queued writes must reach the kernel before its fd is
    /// closed. A failure of this file's writes, now or earlier, that no call has
    /// returned goes to the next write/sync/delete of the database; one a call of
    /// another file returned is forgotten.
    pub(crate) fn flush_before_close(&self, file_id: u64) {
        let mut queue = self.lock();
        if queue.owner.as_ref().is_some_and(|o| o.file_id == file_id) {
            let _ = queue.flush_for(Caller::Closing(file_id));
        }
        match queue.unreported.as_mut().filter(|u| u.file_id == file_id) {
            Some(unreported) if unreported.returned => queue.unreported = None,
            Some(unreported) => unreported.owner_closed = true,
            None => {}
        }
    }
}

/// After xClose: forgets `queue` when no file uses it any more (`queue` was the closing
/// file's handle) and it holds no failure still to report; a private queue always.
pub(crate) fn release(queue: Arc<Queue>) {
    let mut queues = queues();
    // The map's handle and this one: no other file has the queue, and none can get it
    // while the map is locked.
    if Arc::strong_count(&queue) > 2 {
        return;
    }
    // With no other file, `in_use` means an unreported failure (the closing file's own
    // writes were flushed): read without the queue's lock, which a thread flushing may
    // hold, so no open or close of another database waits for that flush.
    let keep = matches!(queue.key, QueueKey::Database(_)) && queue.in_use.load(Ordering::Acquire);
    if !keep {
        queues.remove(&queue);
    }
}

/// xDelete of `path`: flushes the queue of the database the file belongs to, which fails
/// the delete with that database's unreported failure (a journal is not deleted after a
/// lost database write). Other databases' queues are not touched.
pub(crate) fn flush_for_delete(path: &str) -> Result<(), FlushFailure> {
    let Some(queue) = queues().databases.get(database_of(path)).cloned() else {
        return Ok(());
    };
    let result = queue.flush(Caller::Writer(None));
    if result.is_err() {
        // The failure may have been the last thing the entry was kept for.
        release_if_unused(queue);
    }
    result
}

fn release_if_unused(queue: Arc<Queue>) {
    let mut queues = queues();
    if Arc::strong_count(&queue) == 2 && !queue.in_use.load(Ordering::Acquire) {
        queues.remove(&queue);
    }
}

/// Runs `visit` on every queue that can be locked without waiting: the map and each
/// queue are only `try_lock`ed, so this is safe where a lock may be held forever (a
/// forked child, whose other threads are gone) or must not be waited for (an exit
/// handler).
///
/// Returns whether every queue (and the map) could be locked.
fn for_each_queue(map: &Mutex<QueueMap>, mut visit: impl FnMut(&mut QueueGuard<'_>)) -> bool {
    let Ok(queues) = map.try_lock() else {
        return false;
    };
    let mut all = true;
    for queue in queues.values() {
        match queue.state.try_lock() {
            Ok(state) => {
                let mut guard = QueueGuard {
                    state,
                    in_use: &queue.in_use,
                };
                visit(&mut guard);
            }
            Err(_) => all = false,
        }
    }
    all
}

/// Flushes every queue of the process that is not locked (a failure stays with its
/// owner file, as any quiet flush's).
#[cfg(test)]
pub(crate) fn flush_every_queue() {
    for_each_queue(QUEUES.get(), |queue| {
        let _ = queue.flush_for(Caller::Quiet);
    });
}

/// Set in a forked child when a queue (or the map of queues) was locked at `fork()`: what
/// it holds may be the parent's, so this process's exit writes nothing.
static PARENTS_QUEUES: AtomicBool = AtomicBool::new(false);

/// How long the exit handler waits for queues other threads hold, in 1 ms steps.
const EXIT_LOCK_ATTEMPTS: u32 = 1000;

/// Registers [`flush_at_exit`] with `atexit`, once per process (when the first queue is
/// made): std never drops statics, so nothing else would write the queues at a normal
/// exit.
fn register_exit_flush() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // An `extern "C"` function that never unwinds (it catches panics) and lives as
        // long as the program text (in the extension, glibc ties it to the library's
        // handle through __cxa_atexit).
        crate::sys::at_exit(flush_at_exit);
    });
}

/// At a normal process exit (`exit()`, a return from `main`, an interpreter ending)
/// without the connections closed: every queue's writes reach the kernel, as they would
/// have under `unix`, which wrote them at `xWrite` (a transaction's spilled pages or
/// frames: SQLite had not committed them, but `unix` leaves them in the files).
///
/// Never blocks for long and never panics: it retries queues other threads hold every
/// 1 ms for at most [`EXIT_LOCK_ATTEMPTS`] (a flush in progress finishes in that time; a
/// thread stuck while holding one loses that queue, as a crash would), writes nothing of
/// a queue whose failure is unreported (nothing may follow lost data) nor in a forked
/// child that may hold its parent's queue, and writes by plain `pwrite`, whatever the
/// file's routing: the thread's ring is a thread-local, which may be gone by now (glibc
/// runs the main thread's TLS destructors before `atexit` handlers).
extern "C" fn flush_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        for _ in 0..EXIT_LOCK_ATTEMPTS {
            if PARENTS_QUEUES.load(Ordering::Acquire) {
                return;
            }
            let all_visited = for_each_queue(QUEUES.get(), |queue| {
                if queue.unreported.is_some() {
                    return;
                }
                if let Some(owner) = queue.owner.as_mut() {
                    owner.engine = EngineKind::Syscall;
                }
                let _ = queue.flush_for(Caller::Quiet);
            });
            if all_visited {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

/// In a child after `fork()` (registered with `sys::fork`): the queued writes are the
/// parent's, and the parent will submit them; the child must not write them a second
/// time. A queue whose lock a parent thread held stays as it is, and every flush of it
/// in the child blocks — SQLite's documentation already forbids using a connection
/// across fork() in that situation. The child's own databases get queues of their own
/// (`QUEUES` is a `ForkLocal`), so opening one never waits on the parent's map.
fn forget_after_fork() {
    // The parent's map: the child's own starts empty at its first use, but the parent's
    // queues stay reachable through the files the child inherited.
    let Some(parents) = QUEUES.last_published() else {
        return;
    };
    let all_visited = for_each_queue(parents, |queue| {
        queue.owner = None;
        queue.pieces.clear();
        queue.arena_len = 0;
        queue.arena = None;
        queue.unreported = None;
    });
    if !all_visited {
        PARENTS_QUEUES.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::AtomicU64;

    thread_local! {
        /// Slots taken by this thread's queues (`Arena::take`): each test runs on a
        /// thread of its own.
        pub(super) static ARENA_TAKES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn vfs_stats() -> &'static SharedStats {
        static VFS_STATS: std::sync::OnceLock<SharedStats> = std::sync::OnceLock::new();
        VFS_STATS.get_or_init(SharedStats::default)
    }

    /// File ids of this module's tests: far from the VFS's, distinct per call.
    fn next_test_id() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1 << 40);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    fn engines() -> impl Strategy<Value = EngineKind> {
        use crate::config::Submission::{Ring, Syscall};
        use crate::io::routing::Routing;
        prop_oneof![
            Just(EngineKind::IoUring(Routing::ALL_RING)),
            Just(EngineKind::IoUring(Routing::new(Syscall, Syscall, Syscall))),
            Just(EngineKind::IoUring(Routing::new(Syscall, Ring, Syscall))),
            Just(EngineKind::IoUring(Routing::new(Syscall, Syscall, Ring))),
            Just(EngineKind::Syscall)
        ]
    }

    /// One step of a random schedule over several databases' queues.
    #[derive(Debug, Clone)]
    enum Step {
        Write {
            database: usize,
            file: usize,
            offset: u64,
            len: usize,
            seed: u8,
            flush_now: bool,
        },
        /// A read-like, quiet or writer flush point of one file.
        Flush {
            database: usize,
            file: usize,
            kind: u8,
        },
        Sync {
            database: usize,
            file: usize,
        },
    }

    const DATABASES: usize = 3;
    const FILES_PER_DATABASE: usize = 2;

    fn step_strategy() -> impl Strategy<Value = Step> {
        let write = (
            0..DATABASES,
            0..FILES_PER_DATABASE,
            prop_oneof![0..64u64, 4000..4200u64, 8188..8200u64, 0..(4u64 << 20)],
            prop_oneof![
                1..8usize,
                4..5usize,
                4096..4097usize,
                1..9000usize,
                (DIRECT_WRITE_BYTES - 10)..(DIRECT_WRITE_BYTES + 10)
            ],
            any::<u8>(),
            prop::bool::weighted(0.05),
        )
            .prop_map(
                |(database, file, offset, len, seed, flush_now)| Step::Write {
                    database,
                    file,
                    offset,
                    len,
                    seed,
                    flush_now,
                },
            );
        prop_oneof![
            8 => write,
            1 => (0..DATABASES, 0..FILES_PER_DATABASE, 0..3u8)
                .prop_map(|(database, file, kind)| Step::Flush { database, file, kind }),
            1 => (0..DATABASES, 0..FILES_PER_DATABASE)
                .prop_map(|(database, file)| Step::Sync { database, file }),
        ]
    }

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| seed.wrapping_add((i % 251) as u8))
            .collect()
    }

    /// Slots held by `queues` (each queue that holds pieces holds exactly one, and no
    /// two queues the same).
    fn check_queues(queues: &[Arc<Queue>]) -> Result<(), String> {
        let mut held = 0u64;
        for queue in queues {
            let state = queue.lock();
            if let Some(violation) = state.violation() {
                return Err(violation);
            }
            if let Some(arena) = state.arena.as_ref() {
                let index = arena.index();
                if held & (1 << index) != 0 {
                    return Err(format!("slot {index} held by two queues"));
                }
                if region().is_some_and(|region| region.is_free(index)) {
                    return Err(format!("slot {index} held and free"));
                }
                held |= 1 << index;
            }
            let in_use = state.owner.is_some() || state.unreported.is_some();
            drop(state);
            if queue.in_use.load(Ordering::Acquire) != in_use {
                return Err("in_use does not match the queue".into());
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Random writes, flush points and syncs over several databases' queues (two
        /// files each) leave every file byte-identical to the same writes applied in
        /// order, the queues' invariants hold after every step, and a flush point of
        /// one database never submits another database's writes.
        #[test]
        fn queues_match_in_order_writes(
            steps in proptest::collection::vec(step_strategy(), 1..150),
            engine in engines(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let name = |d: usize, f: usize, kind: &str| dir.path().join(format!("{kind}{d}_{f}"));
            let open = |path: std::path::PathBuf| {
                std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).unwrap()
            };
            let mut queued = Vec::new();
            let mut expected = Vec::new();
            let mut ids = Vec::new();
            let mut stats = Vec::new();
            for d in 0..DATABASES {
                for f in 0..FILES_PER_DATABASE {
                    queued.push(open(name(d, f, "q")));
                    expected.push(open(name(d, f, "e")));
                    ids.push(next_test_id());
                    stats.push(Arc::new(SharedStats::default()));
                }
            }
            let databases: Vec<Arc<Queue>> = (0..DATABASES)
                .map(|d| queue_for_database(&format!("{}/db{d}", dir.path().display())))
                .collect();
            for step in &steps {
                let (database, file) = match *step {
                    Step::Write { database, file, .. }
                    | Step::Flush { database, file, .. }
                    | Step::Sync { database, file } => (database, file),
                };
                let index = database * FILES_PER_DATABASE + file;
                let writer = Writer {
                    file_id: ids[index],
                    fd: queued[index].as_raw_fd(),
                    align_bytes: 1,
                    fallback_fd: queued[index].as_raw_fd(),
                    engine: &engine,
                    file_stats: &stats[index],
                    vfs_stats: vfs_stats(),
                };
                let others_before: Vec<u64> = (0..stats.len())
                    .filter(|i| i / FILES_PER_DATABASE != database)
                    .map(|i| stats[i].snapshot().ops)
                    .collect();
                let queue = &databases[database];
                match *step {
                    Step::Write { offset, len, seed, flush_now, .. } => {
                        let data = bytes(len, seed);
                        queue.write(&writer, offset, &data, flush_now).unwrap();
                        expected[index].write_all_at(&data, offset).unwrap();
                    }
                    Step::Flush { kind, .. } => queue
                        .flush(match kind {
                            0 => Caller::Reader(ids[index]),
                            1 => Caller::Writer(Some(ids[index])),
                            _ => Caller::Quiet,
                        })
                        .unwrap(),
                    Step::Sync { .. } => queue
                        .sync(&writer, SyncRequest {
                            data_only: true,
                            directory_fd: None,
                            plan: crate::config::SyncPlan::Linked,
                        })
                        .unwrap(),
                }
                if let Err(violation) = check_queues(&databases) {
                    prop_assert!(false, "after {:?}: {}", step, violation);
                }
                let others_after: Vec<u64> = (0..stats.len())
                    .filter(|i| i / FILES_PER_DATABASE != database)
                    .map(|i| stats[i].snapshot().ops)
                    .collect();
                prop_assert_eq!(others_before, others_after, "{:?} submitted another database's writes", step);
            }
            flush_every_queue();
            for queue in &databases {
                prop_assert!(!queue.in_use.load(Ordering::Acquire));
            }
            for index in 0..queued.len() {
                let (d, f) = (index / FILES_PER_DATABASE, index % FILES_PER_DATABASE);
                let got = std::fs::read(name(d, f, "q")).unwrap();
                let want = std::fs::read(name(d, f, "e")).unwrap();
                prop_assert!(got == want, "file {}_{} differs ({} vs {} bytes)", d, f, got.len(), want.len());
            }
            for queue in databases {
                release(queue);
            }
        }
    }

    #[test]
    fn journal_and_wal_share_their_databases_queue() {
        assert_eq!(database_of("/d/x.db-journal"), "/d/x.db");
        assert_eq!(database_of("/d/x.db-wal"), "/d/x.db");
        assert_eq!(database_of("/d/x.db"), "/d/x.db");
        assert_eq!(database_of("/d/x.db-mj0123ABCD"), "/d/x.db-mj0123ABCD");
        let db = queue_for_database("/nonexistent/share.db");
        let journal = queue_for_database(database_of("/nonexistent/share.db-journal"));
        assert!(Arc::ptr_eq(&db, &journal));
        let other = queue_for_database("/nonexistent/other.db");
        assert!(!Arc::ptr_eq(&db, &other));
        let private = private_queue(next_test_id());
        assert!(!Arc::ptr_eq(&db, &private));
        release(journal);
        assert!(queues().contains_key(&db.key), "one file still has it");
        let key = db.key.clone();
        release(db);
        assert!(!queues().contains_key(&key), "forgotten with its last file");
        release(other);
        release(private);
    }

    #[test]
    fn a_forked_child_gets_its_own_queues_even_with_the_map_locked_at_the_fork() {
        let parents = queue_for_database("/nonexistent/parent-of-fork.db");
        // A file of the parent's the child closes: the last handle to its queue but the
        // parent's map's.
        let inherited_path = "/nonexistent/inherited-by-fork.db";
        let inherited = queue_for_database(inherited_path);
        // Held across the fork, as a thread of the parent opening or closing a file may
        // hold it: in the child that lock would never be released.
        let held = queues();
        // `inherited` is moved into the closure (the parent drops its handle there);
        // `parents` stays the parent's.
        let child = crate::sys::fork::run_in_forked_child(|| {
            let own = queue_for_database("/nonexistent/parent-of-fork.db");
            let fresh = !Arc::ptr_eq(&own, &parents) && queues().len() == 1;
            // Closing the inherited file leaves the child's own queue of that database.
            let own_of_inherited = queue_for_database(inherited_path);
            release(inherited);
            let kept = queues().len() == 2;
            release(own_of_inherited);
            release(own);
            fresh && kept && queues().is_empty()
        });
        drop(held);
        child.unwrap();
        release(queue_for_database(inherited_path));
        assert!(
            queues().contains_key(&parents.key),
            "the parent's map as it was"
        );
        release(parents);
    }

    /// A writer of its own file id for `file`'s buffered descriptor.
    fn buffered_writer<'a>(
        file: &std::fs::File,
        engine: &'a EngineKind,
        stats: &'a Arc<SharedStats>,
    ) -> Writer<'a> {
        Writer {
            file_id: next_test_id(),
            fd: file.as_raw_fd(),
            align_bytes: 1,
            fallback_fd: file.as_raw_fd(),
            engine,
            file_stats: stats,
            vfs_stats: vfs_stats(),
        }
    }

    #[test]
    fn adjacent_writes_coalesce_into_one_op() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("c")).unwrap();
        let stats = Arc::new(SharedStats::default());
        let queue = private_queue(next_test_id());
        let engine = EngineKind::IoUring(crate::io::routing::Routing::ALL_RING);
        let writer = buffered_writer(&file, &engine, &stats);
        // A rollback-journal record: page number, page, checksum.
        queue.write(&writer, 512, &[1; 4], false).unwrap();
        queue.write(&writer, 516, &[2; 4096], false).unwrap();
        queue.write(&writer, 4612, &[3; 4], false).unwrap();
        assert_eq!(
            stats.snapshot().ops,
            0,
            "nothing submitted before the flush point"
        );
        queue.flush(Caller::Quiet).unwrap();
        let counted = stats.snapshot();
        assert_eq!((counted.ops, counted.kernel_entries), (1, 1), "{counted:?}");
        assert_eq!(std::fs::metadata(dir.path().join("c")).unwrap().len(), 4616);
        release(queue);
    }

    #[test]
    fn a_lone_write_that_must_go_now_takes_no_arena_slot() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("spill")).unwrap();
        let stats = Arc::new(SharedStats::default());
        let queue = private_queue(next_test_id());
        let writer = buffered_writer(&file, &EngineKind::Syscall, &stats);
        // A page spilled outside a commit, into an empty queue: written from the caller's
        // buffer at once, without taking a slot to copy it into.
        let takes = || ARENA_TAKES.with(|takes| takes.get());
        let before = takes();
        queue.write(&writer, 4096, &[7; 4096], true).unwrap();
        assert_eq!(stats.snapshot().ops, 1);
        assert_eq!(takes(), before, "no slot taken for a lone write");
        assert!(!queue.in_use.load(Ordering::Acquire));
        // Behind a queued write, one that must go now joins it: one op for both.
        queue.write(&writer, 8192, &[1; 4096], false).unwrap();
        assert_eq!(takes(), before + 1);
        queue.write(&writer, 12288, &[2; 4096], true).unwrap();
        let counted = stats.snapshot();
        assert_eq!((counted.ops, counted.kernel_entries), (2, 2), "{counted:?}");
        assert!(queue.lock().pieces.is_empty());
        let bytes = std::fs::read(dir.path().join("spill")).unwrap();
        assert_eq!(bytes.len(), 4 * 4096);
        for (page, value) in [0u8, 7, 1, 2].into_iter().enumerate() {
            assert!(bytes[page * 4096..(page + 1) * 4096]
                .iter()
                .all(|&b| b == value));
        }
        release(queue);
    }

    fn data_sync() -> SyncRequest {
        SyncRequest {
            data_only: true,
            directory_fd: None,
            plan: crate::config::SyncPlan::Linked,
        }
    }

    const EBADF: Result<(), FlushFailure> = Err(FlushFailure::Write(
        crate::io::WriteFailure::Errno(libc::EBADF),
    ));

    /// A directory with a `wal` opened read-only (every write to it fails with EBADF) and
    /// a writable `db`.
    fn unwritable_wal_and_db() -> (tempfile::TempDir, std::fs::File, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wal"), b"").unwrap();
        let wal = std::fs::File::open(dir.path().join("wal")).unwrap();
        let db = std::fs::File::create(dir.path().join("db")).unwrap();
        (dir, wal, db)
    }

    /// A queued write that fails when another file's sync (or write, or delete) flushes
    /// it is returned to that call and kept for the file that wrote it, whose next call
    /// returns it too: a WAL writer whose spilled frames a checkpointer's sync flushed
    /// must not go on to commit them. Until it does, the other files' writes fail.
    #[test]
    fn a_failure_returned_to_another_files_call_is_kept_for_the_writer() {
        let (dir, wal, db) = unwritable_wal_and_db();
        let stats = Arc::new(SharedStats::default());
        let engine = EngineKind::Syscall;
        let queue = queue_for_database(&format!("{}/kept.db", dir.path().display()));
        let writer = buffered_writer(&wal, &engine, &stats);
        let checkpointer = buffered_writer(&db, &engine, &stats);
        // The writer's next read-like call learns of it; so does, another time, its sync.
        for writers_call in [
            Caller::Reader(writer.file_id),
            Caller::Writer(Some(writer.file_id)),
        ] {
            queue.write(&writer, 32, &[1; 100], false).unwrap();
            assert_eq!(queue.sync(&checkpointer, data_sync()), EBADF);
            assert_eq!(
                queue.write(&checkpointer, 0, &[2; 10], false),
                EBADF,
                "ordered after the lost write"
            );
            assert_eq!(queue.flush(writers_call), EBADF, "the writer is told");
            queue.write(&checkpointer, 0, &[2; 10], false).unwrap();
            queue.sync(&checkpointer, data_sync()).unwrap();
        }
        queue.write(&writer, 32, &[1; 100], false).unwrap();
        assert_eq!(queue.sync(&checkpointer, data_sync()), EBADF);
        assert_eq!(queue.sync(&writer, data_sync()), EBADF, "the writer's sync");
        queue.sync(&writer, data_sync()).unwrap();
        assert!(!queue.in_use.load(Ordering::Acquire));
        release(queue);
    }

    /// A kept failure whose writer closes before its next call: one that a call of another
    /// file already returned is forgotten (nobody is left to tell, and the call that got
    /// it failed its transaction); one that no call returned (a lock call flushed it)
    /// goes to the next write, sync or delete of the database.
    #[test]
    fn a_kept_failure_outlives_its_closed_writer_only_until_some_call_returns_it() {
        let (dir, wal, db) = unwritable_wal_and_db();
        let stats = Arc::new(SharedStats::default());
        let engine = EngineKind::Syscall;
        let queue = queue_for_database(&format!("{}/closed.db", dir.path().display()));
        let other = buffered_writer(&db, &engine, &stats);
        for returned in [true, false] {
            let writer = buffered_writer(&wal, &engine, &stats);
            queue.write(&writer, 32, &[1; 100], false).unwrap();
            if returned {
                assert_eq!(queue.flush(Caller::Writer(None)), EBADF);
            } else {
                queue.flush(Caller::Quiet).unwrap();
            }
            queue.flush_before_close(writer.file_id);
            if returned {
                queue.write(&other, 0, &[2; 10], false).unwrap();
            } else {
                assert_eq!(queue.write(&other, 0, &[2; 10], false), EBADF);
                queue.write(&other, 0, &[2; 10], false).unwrap();
            }
            queue.sync(&other, data_sync()).unwrap();
            assert!(!queue.in_use.load(Ordering::Acquire));
        }
        release(queue);
    }

    /// A panic while a flush submits the queue (by syscall, so nothing is in flight)
    /// leaves the queue empty and consistent: its writes are lost, and kept as a failure
    /// for the file that wrote them unless the panic reached that file's own call. No
    /// lost piece stays behind to be written later through another file's descriptor.
    #[cfg(feature = "test-support")]
    #[test]
    fn a_panic_while_flushing_empties_the_queue_and_the_writer_learns_of_it() {
        use crate::io::fault::{FaultKind, FaultPlan, FaultRule};
        let dir = tempfile::tempdir().unwrap();
        let wal = std::fs::File::create(dir.path().join("wal")).unwrap();
        let db = std::fs::File::create(dir.path().join("db")).unwrap();
        let plan = FaultPlan::new(crate::config::Backend::Syscall);
        let engine = EngineKind::Fault(plan.clone());
        let stats = Arc::new(SharedStats::default());
        let queue = queue_for_database(&format!("{}/panic.db", dir.path().display()));
        let writer = buffered_writer(&wal, &engine, &stats);
        let other = buffered_writer(&db, &engine, &stats);
        let panic_at_next_write = || {
            plan.add(FaultRule {
                op: crate::io::op::OpKind::Write,
                path_suffix: Some("/wal".into()),
                skip: 0,
                count: 1,
                kind: FaultKind::PanicInFlight,
            })
        };
        let flush_panics = |caller| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| queue.flush(caller))).is_err()
        };
        // The panic reaches another file's call: the writer is told at its next one.
        queue.write(&writer, 0, &[1; 100], false).unwrap();
        panic_at_next_write();
        assert!(flush_panics(Caller::Writer(Some(other.file_id))));
        assert_eq!(queue.lock().violation(), None);
        assert_eq!(queue.flush(Caller::Reader(writer.file_id)), Err(ABANDONED));
        queue.write(&other, 0, &[2; 10], false).unwrap();
        queue.flush(Caller::Quiet).unwrap();
        assert_eq!(std::fs::read(dir.path().join("db")).unwrap(), vec![2; 10]);
        // The panic reaches the writer's own call: nothing more to tell it.
        queue.write(&writer, 0, &[1; 100], false).unwrap();
        panic_at_next_write();
        assert!(flush_panics(Caller::Reader(writer.file_id)));
        assert_eq!(queue.lock().violation(), None);
        assert!(!queue.in_use.load(Ordering::Acquire));
        queue.flush(Caller::Writer(Some(writer.file_id))).unwrap();
        assert_eq!(std::fs::read(dir.path().join("wal")).unwrap(), b"");
        // The panic reaches the writer's close: its failure goes to the next write.
        queue.write(&writer, 0, &[1; 100], false).unwrap();
        panic_at_next_write();
        let closed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            queue.flush_before_close(writer.file_id)
        }));
        assert!(closed.is_err());
        assert_eq!(queue.write(&other, 0, &[3; 10], false), Err(ABANDONED));
        queue.write(&other, 0, &[3; 10], false).unwrap();
        queue.flush(Caller::Quiet).unwrap();
        assert_eq!(std::fs::read(dir.path().join("db")).unwrap(), vec![3; 10]);
        assert_eq!(std::fs::read(dir.path().join("wal")).unwrap(), b"");
        assert_eq!(plan.injected(), 3);
        release(queue);
    }

    /// A failed queued write of one database is reported by its own file and fails the
    /// writes of its database's other files until then; another database's queue, in the
    /// same process, neither flushes it nor sees the failure.
    #[test]
    fn a_failure_stays_with_its_database() {
        let dir = tempfile::tempdir().unwrap();
        let good = std::fs::File::create(dir.path().join("good")).unwrap();
        let journal = std::fs::File::create(dir.path().join("journal")).unwrap();
        // Read-only: every write to it fails with EBADF.
        let bad = std::fs::File::open(dir.path().join("good")).unwrap();
        let stats = Arc::new(SharedStats::default());
        let engine = EngineKind::Syscall;
        let writer = |file: &std::fs::File| Writer {
            file_id: 0,
            fd: file.as_raw_fd(),
            align_bytes: 1,
            fallback_fd: file.as_raw_fd(),
            engine: &engine,
            file_stats: &stats,
            vfs_stats: vfs_stats(),
        };
        let failing = queue_for_database(&format!("{}/failing.db", dir.path().display()));
        let healthy = queue_for_database(&format!("{}/healthy.db", dir.path().display()));
        let (bad_id, journal_id, good_id) = (next_test_id(), next_test_id(), next_test_id());
        failing
            .write(
                &Writer {
                    file_id: bad_id,
                    ..writer(&bad)
                },
                0,
                &[1; 100],
                false,
            )
            .unwrap();
        // A quiet flush point (a lock call) keeps the failure for its owner.
        failing.flush(Caller::Quiet).unwrap();
        healthy
            .write(
                &Writer {
                    file_id: good_id,
                    ..writer(&good)
                },
                0,
                &[2; 100],
                false,
            )
            .unwrap();
        healthy.flush(Caller::Writer(Some(good_id))).unwrap();
        assert!(!healthy.in_use.load(Ordering::Acquire));
        // Another file of the failing database: its write is ordered after the loss.
        let journal_write = failing.write(
            &Writer {
                file_id: journal_id,
                ..writer(&journal)
            },
            0,
            &[3; 10],
            false,
        );
        assert_eq!(
            journal_write,
            Err(FlushFailure::Write(crate::io::WriteFailure::Errno(
                libc::EBADF
            )))
        );
        assert_eq!(
            failing.flush(Caller::Reader(bad_id)),
            Err(FlushFailure::Write(crate::io::WriteFailure::Errno(
                libc::EBADF
            ))),
            "the owner reports its failure"
        );
        failing.flush(Caller::Writer(Some(journal_id))).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("good")).unwrap(),
            vec![2; 100]
        );
        release(failing);
        release(healthy);
    }

    /// Pieces queued for an O_DIRECT descriptor start at aligned arena offsets, with an
    /// unaligned write of the same file through its buffered descriptor in between (it
    /// must flush the direct pieces and not join their queue): a misaligned piece, or an
    /// unaligned one sent to the O_DIRECT descriptor, fails with EINVAL.
    #[test]
    fn aligned_writers_get_aligned_pieces_on_an_o_direct_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("direct");
        std::fs::write(&path, vec![0u8; 64 << 10]).unwrap();
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let direct = crate::direct::DirectFile::open(&c_path, true)
            .expect("O_DIRECT on the test filesystem");
        let buffered = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let stats = Arc::new(SharedStats::default());
        let engine = EngineKind::IoUring(crate::io::routing::Routing::ALL_RING);
        let queue = queue_for_database(path.to_str().unwrap());
        let aligned = Writer {
            file_id: next_test_id(),
            fd: direct.fd.as_raw_fd(),
            align_bytes: direct.align_bytes,
            fallback_fd: buffered.as_raw_fd(),
            engine: &engine,
            file_stats: &stats,
            vfs_stats: vfs_stats(),
        };
        let unaligned = Writer {
            fd: buffered.as_raw_fd(),
            align_bytes: 1,
            ..aligned
        };
        let page = 4096usize;
        queue.write(&aligned, 0, &[1; 4096], false).unwrap();
        queue
            .write(&aligned, 3 * page as u64, &[2; 4096], false)
            .unwrap();
        queue.write(&unaligned, 100, &[3; 7], false).unwrap();
        queue
            .write(&aligned, page as u64, &[4; 4096], false)
            .unwrap();
        queue
            .write(&aligned, 2 * page as u64, &[5; 4096], false)
            .unwrap();
        queue.flush(Caller::Quiet).unwrap();
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
        release(queue);
        drop(direct);
    }
}
