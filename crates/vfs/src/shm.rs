//! Shared memory for the WAL index (xShmMap/xShmLock/xShmBarrier/xShmUnmap).
//!
//! # Layout, compatible with SQLite's `unix` VFS (os_unix.c, walformat.html)
//! * File: the database path plus `-shm`, created with the database file's permission bits
//!   (and owner, when running as root).
//! * Regions of `region_size_bytes` (SQLite asks for 32 KiB), mapped `MAP_SHARED` from the
//!   file at `region * region_size_bytes`, `getpagesize() / region_size_bytes` regions per
//!   mapping (one on a 4 KiB-page kernel, two on a 64 KiB-page one). The file is extended
//!   by writing one byte at the end of each new 4 KiB page, so that later accesses do not
//!   SIGBUS.
//! * Lock slots: `SQLITE_SHM_NLOCK` (8) one-byte locks at `SHM_LOCK_BASE` (120) + slot:
//!   0 WRITE, 1 CHECKPOINT, 2 RECOVER, 3..7 READ(0..4). The dead-man switch (DMS) byte
//!   is `SHM_LOCK_BASE + 8` (128): every process using the file holds a read lock on it;
//!   the first one in (no lock held by anyone) takes it for write and truncates the file,
//!   discarding an index that a crash may have left inconsistent.
//!
//! # One node per database per process (os_unix.c `unixShmNode`)
//! All connections of this process to one database file (found by device and inode)
//! share one [`Node`]: one `-shm` descriptor, one set of mappings, one DMS read lock and
//! one count per lock slot. Lock rules, held under the node's mutex:
//! * `holders[slot]` is the number of this process's connections holding `slot` shared,
//!   or [`EXCLUSIVE`] when one connection holds it exclusively. A connection's own masks
//!   say which of those holds are its own.
//! * The OS lock (an OFD lock on the node's descriptor) changes only on the transitions:
//!   the first shared holder takes a read lock, the last one releases it; an exclusive
//!   request is refused with SQLITE_BUSY while any other connection of the process holds
//!   the slot, and otherwise takes a write lock.
//!
//! So a read transaction of a reader thread takes and drops its read mark with no system
//! call while another thread of the process holds the same mark, and other processes —
//! stock `sqlite3` among them — see exactly the locks they would see from `unix`: the
//! OFD locks of one descriptor conflict with every other process's and with a `unix`
//! connection's POSIX locks in this process.
//!
//! # A handle carried across `fork()`
//! A forked child shares its parent's `-shm` descriptor, so a lock it took through an
//! inherited handle would be the parent's (two "exclusive" writers, one in each process),
//! and an unlock or a close would drop the parent's. A handle attached in another process
//! (`Shm::is_inherited`) maps nothing new, takes no lock (SQLITE_IOERR_SHMLOCK, which
//! SQLite does not retry), and leaves the node, its locks and the file alone when it
//! detaches, as `lock.rs` does for the database's locks; a connection the child opens
//! gets its own node. The child's fork hook also lets go of the parent's descriptor and
//! mappings (`let_go_of_parents_index_descriptors`).
//!
//! # Flush rule (for write-behind)
//! No connection may observe a WAL-index header that names frames not yet written to the
//! `-wal` file. Any queued writes of the database must therefore be submitted and
//! completed before xShmLock takes or drops an exclusive lock, and before xSync or a
//! database-lock change returns (docs/ARCHITECTURE.md, "Write-behind and its flush
//! points"). A read mark and xShmBarrier publish nothing of the caller's: the header a
//! writer publishes names frames its commit frame's xWrite already flushed. The callers
//! in `file/` flush before calling in here.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::{Arc, Mutex};

use crate::api::SqliteApi;
use crate::error::Failure;
use crate::ffi::{
    SQLITE_CANTOPEN, SQLITE_IOERR_CLOSE, SQLITE_IOERR_SHMMAP, SQLITE_IOERR_SHMOPEN,
    SQLITE_IOERR_SHMSIZE, SQLITE_SHM_NLOCK,
};
use crate::io::Submitter;
use crate::lock::{conflicting_lock, lock_ignoring_poison, set_lock, LockType};
use crate::sys::fork::{
    fork_generation, is_older_generation, lock_in_child, register_child_hook, ForkLocal,
    NullDescriptor,
};
use crate::sys::{calls, DbFd, Mapping, Reuse};

/// Offset of the first lock slot in the `-shm` file (os_unix.c UNIX_SHM_BASE:
/// `(22 + SQLITE_SHM_NLOCK) * 4`, just past the two copies of the WAL-index header and
/// the checkpoint info).
pub(crate) const SHM_LOCK_BASE: i64 = (22 + SQLITE_SHM_NLOCK as i64) * 4;
/// The dead-man-switch byte (os_unix.c UNIX_SHM_DMS).
pub(crate) const SHM_DMS: i64 = SHM_LOCK_BASE + SQLITE_SHM_NLOCK as i64;
/// Page size used when extending the `-shm` file (os_unix.c unixShmMap, `pgsz`).
const SHM_EXTEND_PAGE_BYTES: i64 = 4096;
/// The first read-mark slot (wal.c WAL_READ_LOCK(0)).
const FIRST_READ_SLOT: i64 = 3;
/// Number of lock slots.
const SLOTS: usize = SQLITE_SHM_NLOCK as usize;

/// `holders[slot]` when one connection of this process holds the slot exclusively.
const EXCLUSIVE: i32 = -1;

/// An xShmLock request as os_unix.c reads its flags (decoded in `entry.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShmLockRequest {
    Shared,
    Exclusive,
    /// SQLITE_SHM_UNLOCK, of a shared lock when SQLITE_SHM_SHARED is set too. The slots
    /// are let go of the way this connection holds them, whichever the flags say.
    Unlock {
        shared: bool,
    },
    /// Flags that are neither an unlock nor exactly a lock: nothing is done (SQLITE_OK).
    Nothing,
}

/// Where failed system calls on a `-shm` file are logged, where os_unix.c logs them:
/// SQLite's log (`SqliteApi::log_os_error`) in the VFS.
pub(crate) trait ErrorLog {
    fn os_error(&self, code: std::ffi::c_int, call: &str, path: &str, errno: i32);
}

/// Nowhere to log: a node or handle dropped without being closed (its failures cannot be
/// told to SQLite any more), and unit tests, which run without SQLite.
pub(crate) struct NoLog;

impl ErrorLog for NoLog {
    fn os_error(&self, _: std::ffi::c_int, _: &str, _: &str, _: i32) {}
}

impl ErrorLog for SqliteApi {
    #[track_caller]
    fn os_error(&self, code: std::ffi::c_int, call: &str, path: &str, errno: i32) {
        self.log_os_error(code, call, path, errno);
    }
}

// ─── The process-wide registry ──────────────────────────────────────────────────────────

type Registry = Mutex<Vec<Arc<Node>>>;

/// The nodes of this process, one per database file with a WAL index in use; a forked
/// child starts without the parent's.
static NODES: ForkLocal<Registry> = ForkLocal::new();

fn registry() -> &'static Registry {
    NODES.get()
}

/// The child's fork hook: its copies of the parent's `-shm` descriptors become
/// `/dev/null`, and its copies of the index's mappings zero-filled memory (a file mapping
/// holds the open file description too), so the parent's DMS and slot locks do not
/// outlive the parent while this child runs without `exec` (as `lock.rs` does for the
/// database's locks). A node a parent thread held locked at the fork is passed over.
fn let_go_of_parents_index_descriptors() {
    let Some(registry) = NODES.last_published() else {
        return;
    };
    let Some(nodes) = lock_in_child(registry) else {
        return;
    };
    let Some(null) = NullDescriptor::open() else {
        return;
    };
    for node in nodes.iter() {
        let Some(state) = lock_in_child(&node.state) else {
            continue;
        };
        for mapping in &state.mappings {
            mapping.let_go_of_file();
        }
        if let Some(fd) = state.fd.as_ref() {
            null.put_over(fd.as_raw_fd());
        }
    }
}

// ─── The node: one per database file per process ────────────────────────────────────────

struct Node {
    /// The database file's device and inode.
    device: u64,
    inode: u64,
    /// The registry that lists this node (a forked child has a new one).
    registry: &'static Registry,
    state: Mutex<NodeState>,
}

struct NodeState {
    /// The `-shm` descriptor every OS lock of the process on the file is taken through;
    /// `None` once closed.
    fd: Option<DbFd>,
    path: CString,
    readonly: bool,
    /// A read-only node found no one holding the DMS: SQLite must build a private heap
    /// index (SQLITE_READONLY_CANTINIT) until someone initialises the file.
    dms_unlocked: bool,
    region_size_bytes: usize,
    /// Regions mapped per `mmap` call.
    regions_per_map: usize,
    /// Every mapping, in order, of `regions_per_map` regions each. SQLite holds pointers
    /// into them until its connection unmaps: they are dropped only when the last
    /// connection of the node leaves.
    mappings: Vec<Mapping>,
    /// Per slot: shared holders in this process, or EXCLUSIVE.
    holders: [i32; SLOTS],
    /// Connections attached.
    connections: usize,
}

impl NodeState {
    /// Regions mapped.
    fn mapped_regions(&self) -> usize {
        self.mappings.len() * self.regions_per_map
    }

    /// The node's descriptor, while it is open.
    fn fd(&self) -> BorrowedFd<'_> {
        self.fd
            .as_ref()
            .expect("an attached node has its descriptor")
            .as_fd()
    }

    /// os_unix.c unixLockSharedMemory: the first user in truncates the index; later users
    /// join with a shared DMS lock; a user mid-initialisation makes us return BUSY.
    fn join_dead_man_switch(&mut self, log: &impl ErrorLog) -> Result<(), Failure> {
        match conflicting_lock(self.fd(), LockType::Write, SHM_DMS, 1).map_err(Failure::Lock)? {
            None if self.readonly => {
                self.dms_unlocked = true;
                return Err(Failure::ReadonlyCantInit);
            }
            None => {
                set_lock(self.fd(), LockType::Write, SHM_DMS, 1).map_err(|_| Failure::Busy)?;
                // Truncate to 3 bytes rather than 0, as os_unix.c does, so a legitimate
                // truncation is recognisable when debugging.
                if calls::ftruncate(self.fd().as_raw_fd(), 3) != 0 {
                    let errno = crate::sys::last_errno();
                    self.log(log, SQLITE_IOERR_SHMOPEN, "ftruncate", errno);
                    return Err(Failure::ShmOpen(errno));
                }
            }
            Some(LockType::Write) => return Err(Failure::Busy),
            Some(_) => {}
        }
        set_lock(self.fd(), LockType::Read, SHM_DMS, 1).map_err(|_| Failure::Busy)?;
        self.dms_unlocked = false;
        Ok(())
    }

    /// Logs a failed system call on the `-shm` file where os_unix.c logs one.
    #[track_caller]
    fn log(&self, log: &impl ErrorLog, code: std::ffi::c_int, call: &str, errno: i32) {
        log.os_error(code, call, &self.path.to_string_lossy(), errno);
    }

    fn map(
        &mut self,
        io: &mut Submitter<'_>,
        log: &impl ErrorLog,
        region: usize,
        region_size_bytes: usize,
        extend: bool,
    ) -> Result<*mut u8, Failure> {
        if self.dms_unlocked {
            self.join_dead_man_switch(log)?;
        }
        // Every region of an index has one size (os_unix.c asserts it, and then maps the
        // new size at offsets counted in it): a mapping of another size is refused.
        if !self.mappings.is_empty() && region_size_bytes != self.region_size_bytes {
            return Err(Failure::ShmMap(libc::EINVAL));
        }
        assert!(region_size_bytes > 0 && region_size_bytes as i64 % SHM_EXTEND_PAGE_BYTES == 0);
        if self.mappings.is_empty() {
            self.region_size_bytes = region_size_bytes;
            let page_bytes = usize::try_from(calls::getpagesize()).unwrap_or(0);
            self.regions_per_map = (page_bytes / region_size_bytes).max(1);
        }
        if self.mapped_regions() <= region {
            // Whole mappings only: a 64 KiB page holds two 32 KiB regions.
            let per_map = self.regions_per_map;
            let wanted_regions = (region + per_map) / per_map * per_map;
            let needed_bytes = (wanted_regions * region_size_bytes) as i64;
            let size_bytes = crate::sys::fstat(self.fd())
                .map_err(Failure::ShmSize)?
                .st_size;
            if size_bytes < needed_bytes {
                if !extend {
                    return Ok(std::ptr::null_mut());
                }
                if let Err(errno) = self.extend(io, size_bytes, needed_bytes) {
                    self.log(log, SQLITE_IOERR_SHMSIZE, "write", errno);
                    return Err(Failure::ShmSize(errno));
                }
            }
            let protection = if self.readonly {
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_WRITE
            };
            let map_bytes = per_map * region_size_bytes;
            while self.mapped_regions() < wanted_regions {
                let offset = (self.mapped_regions() * region_size_bytes) as i64;
                // A new shared mapping of the node's descriptor, kept until `unmap_all`.
                match Mapping::of_file(map_bytes, protection, self.fd().as_raw_fd(), offset) {
                    Ok(mapping) => self.mappings.push(mapping),
                    Err(errno) => {
                        self.log(log, SQLITE_IOERR_SHMMAP, "mmap", errno);
                        return Err(Failure::ShmMap(errno));
                    }
                }
            }
        }
        let per_map = self.regions_per_map;
        let mapping = &self.mappings[region / per_map];
        Ok(mapping.address_at(region % per_map * self.region_size_bytes))
    }

    /// Allocates `[from_bytes, to_bytes)` by writing the last byte of every new page, in
    /// one batch; the errno of a failure.
    fn extend(
        &mut self,
        io: &mut Submitter<'_>,
        from_bytes: i64,
        to_bytes: i64,
    ) -> Result<(), i32> {
        static ZERO: [u8; 1] = [0];
        let first_page = from_bytes / SHM_EXTEND_PAGE_BYTES;
        let last_page = to_bytes / SHM_EXTEND_PAGE_BYTES;
        let pieces: Vec<(u64, &[u8])> = (first_page..last_page)
            .map(|page| {
                (
                    (page * SHM_EXTEND_PAGE_BYTES + SHM_EXTEND_PAGE_BYTES - 1) as u64,
                    &ZERO[..],
                )
            })
            .collect();
        io.write_batch(self.fd().as_raw_fd(), &pieces)
            .map_err(|failure| match failure {
                crate::io::WriteFailure::Errno(errno) => errno,
                crate::io::WriteFailure::NoProgress => libc::ENOSPC,
            })
    }

    /// Drops one connection's holds on the slots of `mask` (`exclusive`: it held them
    /// exclusively). The OS lock goes when no one in the process holds a slot any more.
    /// Inline, so an unlock's release of the way it does not hold a slot (an empty mask)
    /// costs no call.
    #[inline]
    fn release(&mut self, mask: u16, exclusive: bool) -> Result<(), Failure> {
        if mask == 0 {
            return Ok(());
        }
        self.release_slots(mask, exclusive)
    }

    fn release_slots(&mut self, mask: u16, exclusive: bool) -> Result<(), Failure> {
        if mask.is_power_of_two() {
            // One slot (every read mark, and most exclusive locks): no runs to find.
            let slot = mask.trailing_zeros() as usize;
            if !self.drop_hold(slot, exclusive) {
                return Ok(());
            }
            return set_lock(self.fd(), LockType::Unlock, SHM_LOCK_BASE + slot as i64, 1)
                .map_err(Failure::Unlock);
        }
        let mut unlock_mask = 0u16;
        for slot in slots_of(mask) {
            if self.drop_hold(slot, exclusive) {
                unlock_mask |= 1 << slot;
            }
        }
        // Unlock runs of adjacent slots with one call each (an exclusive lock is one run).
        let mut result = Ok(());
        for (start, len) in runs_of(unlock_mask) {
            let unlocked = set_lock(
                self.fd(),
                LockType::Unlock,
                SHM_LOCK_BASE + start as i64,
                len as i64,
            );
            if let Err(errno) = unlocked {
                result = Err(Failure::Unlock(errno));
            }
        }
        result
    }

    /// Drops one connection's hold on `slot` (`exclusive`: it held it exclusively).
    /// Whether no one in the process holds the slot any more (its OS lock must go).
    #[inline]
    fn drop_hold(&mut self, slot: usize, exclusive: bool) -> bool {
        if exclusive {
            assert_eq!(self.holders[slot], EXCLUSIVE, "slot {slot} not exclusive");
            self.holders[slot] = 0;
            true
        } else {
            assert!(self.holders[slot] > 0, "slot {slot} has no shared holder");
            self.holders[slot] -= 1;
            self.holders[slot] == 0
        }
    }

    /// Unmaps every region and closes the descriptor, which releases the node's OFD
    /// locks (or parks it while a `unix` connection of this process holds POSIX locks on
    /// the -shm file). Idempotent. A failed close is logged under `db_path`.
    fn close(&mut self, log: &impl ErrorLog, db_path: &str) {
        self.unmap_all();
        if let Some(fd) = self.fd.take() {
            // The DMS lock and any slot still held: a parked descriptor must block nobody.
            let _ = set_lock(fd.as_fd(), LockType::Unlock, 0, 0);
            fd.close(|errno| log.os_error(SQLITE_IOERR_CLOSE, "close", db_path, errno));
        }
    }

    /// Drops every mapping: only once no connection uses them (the last one left).
    fn unmap_all(&mut self) {
        self.mappings.clear();
    }
}

impl Drop for NodeState {
    fn drop(&mut self) {
        self.close(&NoLog, "");
    }
}

fn slots_of(mask: u16) -> impl Iterator<Item = usize> {
    debug_assert!(u32::from(mask) >> SLOTS == 0, "a slot past the lock array");
    let mut rest = mask;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let slot = rest.trailing_zeros() as usize;
        // The lowest set bit cleared.
        rest &= rest - 1;
        Some(slot)
    })
}

/// The runs of adjacent slots in `mask`, lowest first: `(first slot, length)`.
fn runs_of(mask: u16) -> impl Iterator<Item = (usize, usize)> {
    let mut rest = u32::from(mask);
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let start = rest.trailing_zeros();
        // The run's length: the ones from `start` up (at most 16, so `!` leaves a zero).
        let len = (!(rest >> start)).trailing_zeros();
        rest &= !(((1u32 << len) - 1) << start);
        Some((start as usize, len as usize))
    })
}

// ─── One connection's handle ────────────────────────────────────────────────────────────

/// A connection's use of its database's node: which slots it holds.
pub(crate) struct Shm {
    node: Arc<Node>,
    shared_mask: u16,
    exclusive_mask: u16,
    /// Detached already (by `close`).
    left: bool,
    /// The fork generation of the process that attached (`is_inherited`).
    generation: u64,
}

impl Shm {
    /// Attaches to this process's node for the database, opening (creating if allowed)
    /// `<db>-shm` and joining the DMS protocol when this is the first connection.
    /// `db_stat` is the database file's fstat: its device and inode find the node, its
    /// permission bits and owner are given to a new `-shm` file.
    pub(crate) fn open(
        db_path: &str,
        db_stat: &libc::stat,
        readonly_shm: bool,
        log: &impl ErrorLog,
    ) -> Result<Shm, Failure> {
        register_child_hook(let_go_of_parents_index_descriptors);
        let registry = registry();
        let mut nodes = lock_ignoring_poison(registry);
        let device = db_stat.st_dev;
        let inode = db_stat.st_ino;
        let node = match nodes
            .iter()
            .find(|node| node.device == device && node.inode == inode)
        {
            Some(node) => Arc::clone(node),
            None => {
                let state = open_node_state(db_path, db_stat, readonly_shm, log)?;
                let node = Arc::new(Node {
                    device,
                    inode,
                    registry,
                    state: Mutex::new(state),
                });
                nodes.push(Arc::clone(&node));
                node
            }
        };
        lock_ignoring_poison(&node.state).connections += 1;
        Ok(Shm {
            node,
            shared_mask: 0,
            exclusive_mask: 0,
            left: false,
            generation: fork_generation(),
        })
    }

    /// Whether the handle was attached in another process, whose child this is ("A handle
    /// carried across `fork()`").
    #[inline]
    pub(crate) fn is_inherited(&self) -> bool {
        is_older_generation(self.generation)
    }

    /// Whether another process uses the WAL index: a lock on the DMS byte that is not
    /// this process's node's (os_unix.c unixIsSharingShmNode, which refuses RESERVED and
    /// EXCLUSIVE database locks then, so the last connection in does not delete the WAL
    /// and the index from under a process whose database lock was lost). A failed
    /// query counts as use, as there.
    pub(crate) fn used_by_another_process(&self) -> bool {
        if self.is_inherited() {
            return true;
        }
        let state = lock_ignoring_poison(&self.node.state);
        conflicting_lock(state.fd(), LockType::Write, SHM_DMS, 1).map_or(true, |c| c.is_some())
    }

    /// xShmMap. Returns the region pointer (null when it does not exist and `extend` is
    /// false) and whether the node is read-only (SQLite then gets SQLITE_READONLY).
    pub(crate) fn map(
        &mut self,
        io: &mut Submitter<'_>,
        log: &impl ErrorLog,
        region: usize,
        region_size_bytes: usize,
        extend: bool,
    ) -> Result<(*mut u8, bool), Failure> {
        if self.is_inherited() {
            return Err(Failure::ShmMap(0));
        }
        let mut state = lock_ignoring_poison(&self.node.state);
        let readonly = state.readonly;
        state
            .map(io, log, region, region_size_bytes, extend)
            .map(|base| (base, readonly))
    }

    /// xShmLock on slots `[offset, offset + count)` (os_unix.c unixShmLock's rules; see
    /// the module docs). `entry.rs` decoded the flags and checked the range. Inline into
    /// `File::shm_lock`, its one caller.
    #[inline]
    pub(crate) fn lock(
        &mut self,
        offset: i32,
        count: i32,
        request: ShmLockRequest,
    ) -> Result<(), Failure> {
        assert!(offset >= 0 && count >= 1 && offset + count <= SQLITE_SHM_NLOCK);
        let mask: u16 = (((1u32 << count) - 1) << offset) as u16;
        if self.is_inherited() {
            // The node's counts and locks are the parent's: a lock is refused, with an
            // error SQLite does not retry (SQLITE_BUSY would make a reader retry for
            // seconds), and an unlock forgets the handle's own record only.
            return match request {
                ShmLockRequest::Nothing | ShmLockRequest::Unlock { .. } => {
                    self.shared_mask &= !mask;
                    self.exclusive_mask &= !mask;
                    Ok(())
                }
                ShmLockRequest::Shared | ShmLockRequest::Exclusive => Err(Failure::ShmLock),
            };
        }
        let mut state = lock_ignoring_poison(&self.node.state);
        match request {
            ShmLockRequest::Nothing => Ok(()),
            ShmLockRequest::Unlock { .. } => {
                let shared = self.shared_mask & mask;
                let exclusive = self.exclusive_mask & mask;
                self.shared_mask &= !mask;
                self.exclusive_mask &= !mask;
                let released_shared = state.release(shared, false);
                let released_exclusive = state.release(exclusive, true);
                released_shared.and(released_exclusive)
            }
            ShmLockRequest::Shared => {
                assert_eq!(
                    count, 1,
                    "SQLite takes shared WAL-index locks one slot at a time"
                );
                let slot = offset as usize;
                if self.shared_mask & mask != 0 {
                    return Ok(());
                }
                match state.holders[slot] {
                    // Held exclusively, by another connection or by this one (which
                    // SQLite never asks): SQLITE_BUSY, as os_unix.c answers both.
                    EXCLUSIVE => return Err(Failure::Busy),
                    0 => {
                        // os_unix.c unixShmSystemLock: any failure to lock is SQLITE_BUSY.
                        set_lock(state.fd(), LockType::Read, SHM_LOCK_BASE + offset as i64, 1)
                            .map_err(|_| Failure::Busy)?;
                    }
                    _ => {}
                }
                state.holders[slot] += 1;
                self.shared_mask |= mask;
                Ok(())
            }
            ShmLockRequest::Exclusive => {
                // Any holder of a slot makes an exclusive request SQLITE_BUSY, this
                // connection included (a slot it holds shared or exclusively already,
                // which SQLite never asks for), as in os_unix.c: no system call is needed
                // to know.
                if slots_of(mask).any(|slot| state.holders[slot] != 0) {
                    return Err(Failure::Busy);
                }
                set_lock(
                    state.fd(),
                    LockType::Write,
                    SHM_LOCK_BASE + offset as i64,
                    count as i64,
                )
                .map_err(|_| Failure::Busy)?;
                for slot in slots_of(mask) {
                    state.holders[slot] = EXCLUSIVE;
                }
                self.exclusive_mask |= mask;
                Ok(())
            }
        }
    }

    /// SQLITE_FCNTL_EXTERNAL_READER: does another process hold a read mark? (As in
    /// os_unix.c, this process's own connections are not external.)
    pub(crate) fn has_external_reader(&self) -> Result<bool, Failure> {
        if self.is_inherited() {
            // The parent's readers are external to this process.
            return Ok(true);
        }
        let state = lock_ignoring_poison(&self.node.state);
        conflicting_lock(
            state.fd(),
            LockType::Write,
            SHM_LOCK_BASE + FIRST_READ_SLOT,
            SQLITE_SHM_NLOCK as i64 - FIRST_READ_SLOT,
        )
        .map(|conflict| conflict.is_some())
        .map_err(Failure::Lock)
    }

    /// xShmUnmap: detach; when this was the node's last connection, unmap, close
    /// (dropping the OFD locks) and, if SQLite says so, delete the file.
    /// A failed close of the `-shm` descriptor is logged under `db_path`, the leaving
    /// connection's database, as os_unix.c's unixShmPurge logs it.
    pub(crate) fn close(mut self, delete: bool, log: &impl ErrorLog, db_path: &str) {
        self.leave(delete, log, db_path);
    }

    fn leave(&mut self, delete: bool, log: &impl ErrorLog, db_path: &str) {
        assert!(!self.left);
        self.left = true;
        if self.is_inherited() {
            // The parent's node, its locks and its file stay; so does its registry (which
            // may be locked for good here). The share dropped with this handle is never
            // the last: the parent's registry keeps one.
            self.shared_mask = 0;
            self.exclusive_mask = 0;
            return;
        }
        let node = Arc::clone(&self.node);
        // Registry before node, as in `open`: no one attaches to a node being closed.
        let mut nodes = lock_ignoring_poison(node.registry);
        let mut state = lock_ignoring_poison(&node.state);
        // SQLite drops its locks before xShmUnmap; a connection closed without it (an
        // error path) must not leave its slots counted.
        let _ = state.release(self.shared_mask, false);
        let _ = state.release(self.exclusive_mask, true);
        self.shared_mask = 0;
        self.exclusive_mask = 0;
        assert!(state.connections > 0);
        state.connections -= 1;
        if state.connections > 0 {
            return;
        }
        nodes.retain(|listed| !Arc::ptr_eq(listed, &node));
        if delete {
            calls::unlink(&state.path);
        }
        // Under the registry lock: a new node for the file never meets this one's fd.
        state.close(log, db_path);
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        if !self.left {
            self.leave(false, &NoLog, "");
        }
    }
}

/// Opens `<db>-shm` for a new node (os_unix.c unixOpenSharedMemory) and joins the DMS.
fn open_node_state(
    db_path: &str,
    db_stat: &libc::stat,
    readonly_shm: bool,
    log: &impl ErrorLog,
) -> Result<NodeState, Failure> {
    let path =
        CString::new(format!("{db_path}-shm")).map_err(|_| Failure::CantOpen(libc::EINVAL))?;
    let mode = db_stat.st_mode & 0o777;
    // os_unix.c opens it through robust_open with the database's bits: created with them
    // and, when the umask took some away, fchmod'ed to them.
    let open =
        |flags: i32| crate::sys::open_with_created_mode(&path, flags | libc::O_NOFOLLOW, mode);
    let mut readonly = false;
    let read_write = if readonly_shm {
        Err(libc::EACCES)
    } else {
        open(libc::O_RDWR | libc::O_CREAT)
    };
    let fd = match read_write {
        // A descriptor of the -shm file, on which a `unix` connection of this process may
        // hold POSIX locks.
        Ok(fd) => DbFd::reusable(fd, Reuse::Open),
        Err(_) => {
            readonly = true;
            let fd = open(libc::O_RDONLY).map_err(|errno| {
                log.os_error(SQLITE_CANTOPEN, "open", &path.to_string_lossy(), errno);
                Failure::CantOpen(errno)
            })?;
            DbFd::reusable(fd, Reuse::Open)
        }
    };
    // Running as root must not leave a -shm file other users of the database cannot open
    // (os_unix.c robustFchown).
    if calls::geteuid() == 0 {
        let _ = calls::fchown(fd.as_raw_fd(), db_stat.st_uid, db_stat.st_gid);
    }
    // From here on, dropping `state` closes the fd.
    let mut state = NodeState {
        fd: Some(fd),
        path,
        readonly,
        dms_unlocked: false,
        region_size_bytes: 0,
        regions_per_map: 1,
        mappings: Vec::new(),
        holders: [0; SLOTS],
        connections: 0,
    };
    match state.join_dead_man_switch(log) {
        Ok(()) | Err(Failure::ReadonlyCantInit) => Ok(state),
        Err(failure) => Err(failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_of(path: &std::path::Path) -> libc::stat {
        let file = std::fs::File::create(path).unwrap();
        crate::sys::fstat(file.as_fd()).unwrap()
    }

    fn raw_fd(shm: &Shm) -> Option<std::os::fd::RawFd> {
        lock_ignoring_poison(&shm.node.state)
            .fd
            .as_ref()
            .map(AsRawFd::as_raw_fd)
    }

    #[test]
    fn connections_share_a_node_until_the_last_leaves_and_a_forked_child_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("node.db");
        let st = stat_of(&db);
        let path = db.to_str().unwrap();
        let first = Shm::open(path, &st, false, &NoLog).unwrap();
        let second = Shm::open(path, &st, false, &NoLog).unwrap();
        assert!(Arc::ptr_eq(&first.node, &second.node));
        assert_eq!(lock_ignoring_poison(&first.node.state).connections, 2);
        // A forked child's first user gets a node (and descriptor) of its own, never the
        // parent's, even with the registry locked at the fork by a thread of the parent.
        let parent_node = Arc::as_ptr(&first.node) as usize;
        let parent_fd = raw_fd(&first);
        let held = lock_ignoring_poison(registry());
        let child = crate::sys::fork::run_in_forked_child(|| {
            let in_child = Shm::open(path, &st, false, &NoLog).unwrap();
            Arc::as_ptr(&in_child.node) as usize != parent_node
                && raw_fd(&in_child) != parent_fd
                && lock_ignoring_poison(&in_child.node.state).connections == 1
        });
        drop(held);
        child.unwrap();
        drop(second);
        let node = Arc::clone(&first.node);
        first.close(true, &NoLog, "");
        // The last connection closed the descriptor and deleted the file.
        assert!(lock_ignoring_poison(&node.state).fd.is_none());
        assert!(!dir.path().join("node.db-shm").exists());
    }

    #[test]
    fn slots_and_runs_of_a_mask_match_its_bits() {
        // Against the obvious reading of every mask of the 8 slots.
        for mask in 0u16..=0xff {
            let slots: Vec<usize> = slots_of(mask).collect();
            let expected: Vec<usize> = (0..SLOTS).filter(|s| mask & (1 << s) != 0).collect();
            assert_eq!(slots, expected, "slots of {mask:#010b}");
            let mut runs = Vec::new();
            let mut slot = 0;
            while slot < SLOTS {
                if mask & (1 << slot) == 0 {
                    slot += 1;
                    continue;
                }
                let start = slot;
                while slot < SLOTS && mask & (1 << slot) != 0 {
                    slot += 1;
                }
                runs.push((start, slot - start));
            }
            assert_eq!(
                runs_of(mask).collect::<Vec<_>>(),
                runs,
                "runs of {mask:#010b}"
            );
        }
        assert_eq!(runs_of(0xffff).collect::<Vec<_>>(), [(0, 16)]);
    }

    #[test]
    fn slot_counts_follow_each_connections_holds() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("slots.db");
        let st = stat_of(&db);
        let path = db.to_str().unwrap();
        let mut first = Shm::open(path, &st, false, &NoLog).unwrap();
        let mut second = Shm::open(path, &st, false, &NoLog).unwrap();
        let shared = ShmLockRequest::Shared;
        let exclusive = ShmLockRequest::Exclusive;
        let unlock_shared = ShmLockRequest::Unlock { shared: true };
        let unlock_exclusive = ShmLockRequest::Unlock { shared: false };
        let holders = |shm: &Shm| lock_ignoring_poison(&shm.node.state).holders;
        first.lock(3, 1, shared).unwrap();
        second.lock(3, 1, shared).unwrap();
        assert_eq!(holders(&first)[3], 2);
        assert!(matches!(second.lock(3, 1, exclusive), Err(Failure::Busy)));
        first.lock(3, 1, unlock_shared).unwrap();
        // Its last holder is refused it exclusively too while holding it shared, as under
        // os_unix.c (SQLite never asks); once released, it gets it.
        assert!(matches!(second.lock(3, 1, exclusive), Err(Failure::Busy)));
        second.lock(3, 1, unlock_shared).unwrap();
        second.lock(3, 1, exclusive).unwrap();
        assert!(matches!(second.lock(3, 1, exclusive), Err(Failure::Busy)));
        assert!(matches!(second.lock(3, 1, shared), Err(Failure::Busy)));
        assert_eq!(holders(&first)[3], EXCLUSIVE);
        assert!(matches!(first.lock(3, 1, shared), Err(Failure::Busy)));
        second.lock(3, 1, unlock_exclusive).unwrap();
        first.lock(0, 2, exclusive).unwrap();
        assert_eq!(holders(&first)[..3], [EXCLUSIVE, EXCLUSIVE, 0]);
        // A connection dropped while holding locks gives them back.
        drop(first);
        assert_eq!(holders(&second), [0; SLOTS]);
        second.lock(0, 8, exclusive).unwrap();
    }
}
