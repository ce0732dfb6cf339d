//! Database-file locking, byte-compatible with SQLite's `unix` VFS.
//!
//! # Lock protocol (os_unix.c, "POSIX advisory locks")
//! Three regions of the database file carry the lock, at the offsets every SQLite uses:
//!
//! | byte(s)                              | SHARED | RESERVED | PENDING | EXCLUSIVE |
//! |--------------------------------------|--------|----------|---------|-----------|
//! | `PENDING_BYTE` (0x40000000)          | read, briefly | –  | write   | write     |
//! | `RESERVED_BYTE` (PENDING_BYTE+1)     |        | write    | (write) | (write)   |
//! | `SHARED_FIRST`..+`SHARED_SIZE` (510) | read   | read     | read    | write     |
//!
//! * SHARED: os_unix.c read-locks PENDING_BYTE (fails while a writer is pending),
//!   read-locks the shared range and releases PENDING_BYTE; here, a reader asks whether
//!   another description holds PENDING_BYTE write-locked (`F_OFD_GETLK`; SQLITE_BUSY if
//!   so), then read-locks the shared range (see "Readers look at PENDING_BYTE").
//! * RESERVED (from SHARED): write-lock RESERVED_BYTE.
//! * EXCLUSIVE: from RESERVED, first write-lock PENDING_BYTE (no new readers), then
//!   write-lock the whole shared range (fails while any reader remains).
//! * Unlock to SHARED: read-lock the shared range, release PENDING and RESERVED bytes.
//!   Unlock to NONE: release everything.
//!
//! `PENDING_BYTE` is where SQLite says it is when the database is opened
//! (`SqliteApi::pending_byte`): 0x40000000, unless `SQLITE_TESTCTRL_PENDING_BYTE` moved it,
//! as SQLite's own test suite does (to 0x10000). os_unix.c reads the same global.
//!
//! # Readers look at PENDING_BYTE instead of locking it
//! A read transaction in rollback mode takes SHARED and drops it: under `unix` four
//! `fcntl`s (lock PENDING_BYTE, lock the shared range, unlock PENDING_BYTE, unlock all),
//! here three (look at PENDING_BYTE, lock the shared range, unlock all). A lookup is one
//! system call cheaper, and the locks other processes see are the same, with one
//! difference, in the writer's favour: `unix`'s reader holds PENDING_BYTE for a moment,
//! and a writer asking for PENDING in that moment gets SQLITE_BUSY; this reader never
//! holds it. Against every writer the outcome is `unix`'s:
//!
//! * a writer that holds PENDING or EXCLUSIVE when the reader looks: the reader gets
//!   SQLITE_BUSY, as `unix`'s does at its PENDING_BYTE lock;
//! * a writer that takes PENDING after the reader looked and before its shared range is
//!   locked: the reader holds SHARED, and the writer's EXCLUSIVE is SQLITE_BUSY until the
//!   reader is done, as for a reader that was there first. Under `unix` that writer
//!   would have got SQLITE_BUSY one step earlier, at PENDING; either way it retries,
//!   and here it already holds PENDING, which keeps later readers out.
//!
//! So a writer never gets SQLITE_BUSY where `unix` gives it the lock, and a reader gets
//! SQLITE_BUSY exactly where `unix`'s would. `tests/multiprocess.rs` runs both against
//! stock `sqlite3` processes.
//!
//! # One lock state per database file per process
//! As os_unix.c's `unixInodeInfo`, the connections of one process to one database file
//! (device and inode) share one lock state ([`Inode`]): the strongest lock any of them
//! holds and how many hold SHARED. A SHARED request while another connection of the
//! process holds SHARED or RESERVED is counted, without a system call, and only the last
//! SHARED holder's release unlocks; a request that another connection of the process
//! precludes (anything while one is PENDING or EXCLUSIVE, RESERVED or EXCLUSIVE while one
//! holds RESERVED, EXCLUSIVE while another reads) is SQLITE_BUSY without one. So a pool of
//! reader connections makes one set of `fcntl`s, as under `unix`, not one set per connection.
//!
//! # Why open-file-description locks
//! We take the same byte ranges with `F_OFD_SETLK` instead of `F_SETLK`. OFD locks and
//! classic POSIX locks conflict with each other, so a stock `sqlite3` process (POSIX locks)
//! and this VFS exclude each other exactly as two stock processes do. OFD locks belong to
//! the open file description, not the process, so every lock of the process's state is
//! taken through one descriptor: the first connection's, which the state keeps open when
//! that connection closes before the others (os_unix.c keeps its lock by the process
//! instead). And closing some other descriptor of the file does not drop our locks — the
//! POSIX trap os_unix.c works around with its unused-fd list. See fcntl(2), "Open file
//! description locks".
//!
//! # A connection carried across `fork()`
//! A forked child shares its parent's open file descriptions, and with them the parent's
//! OFD locks: a lock or unlock the child made through an inherited connection would take
//! or drop the parent's (a `unix` child's POSIX locks are its own). SQLite forbids using
//! a connection in a child it was not opened in; what the child may still do is close
//! it. So a lock opened in another process (`DbLock::is_inherited`, by the fork
//! generation) takes no lock (SQLITE_BUSY, as a `unix` child gets while the parent holds
//! SHARED), and its unlocks and its close leave the parent's locks, and the parent's lock
//! state, alone. A child that opens its own connection gets its own descriptors and
//! locks.

use std::ffi::c_int;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::Failure;
use crate::ffi::{
    SQLITE_LOCK_EXCLUSIVE, SQLITE_LOCK_NONE, SQLITE_LOCK_PENDING, SQLITE_LOCK_RESERVED,
    SQLITE_LOCK_SHARED,
};
use crate::sys::fd::FileKey;
use crate::sys::fork::{
    fork_generation, is_older_generation, lock_in_child, register_child_hook, ForkLocal,
    NullDescriptor,
};
use crate::sys::{calls, DbFd};

/// Bytes of the shared range, which starts two bytes after the pending byte.
pub(crate) const SHARED_SIZE: i64 = 510;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockType {
    Read,
    Write,
    Unlock,
}

impl LockType {
    fn raw(self) -> i16 {
        (match self {
            LockType::Read => libc::F_RDLCK,
            LockType::Write => libc::F_WRLCK,
            LockType::Unlock => libc::F_UNLCK,
        }) as i16
    }
}

fn flock(kind: LockType, start: i64, len: i64) -> libc::flock {
    crate::sys::flock(kind.raw().into(), start, len)
}

/// Sets (or releases) an OFD lock without waiting. `Err(errno)` on conflict or failure.
/// One attempt, as os_unix.c makes: `F_OFD_SETLK` never waits, so EINTR can only come
/// from a replaced `fcntl` (the system-call table), and it means SQLITE_BUSY
/// (`Failure::from_lock_errno`, os_unix.c `sqliteErrorFromPosixError`), not a retry.
pub(crate) fn set_lock(
    fd: BorrowedFd<'_>,
    kind: LockType,
    start: i64,
    len: i64,
) -> Result<(), i32> {
    let lock = flock(kind, start, len);
    if calls::fcntl_ofd_setlk(fd.as_raw_fd(), &lock) == 0 {
        return Ok(());
    }
    Err(crate::sys::last_errno())
}

/// Whether another open file description holds a lock that conflicts with `kind` on the
/// range; returns the conflicting lock's type.
pub(crate) fn conflicting_lock(
    fd: BorrowedFd<'_>,
    kind: LockType,
    start: i64,
    len: i64,
) -> Result<Option<LockType>, i32> {
    let mut lock = flock(kind, start, len);
    if calls::fcntl_ofd_getlk(fd.as_raw_fd(), &mut lock) != 0 {
        return Err(crate::sys::last_errno());
    }
    Ok(match lock.l_type as c_int {
        libc::F_RDLCK => Some(LockType::Read),
        libc::F_WRLCK => Some(LockType::Write),
        _ => None,
    })
}

// ─── The process's lock state of a database file (os_unix.c unixInodeInfo) ───────────

/// This process's lock on one database file, shared by its connections to the file.
struct Inode {
    file: FileKey,
    /// The list this state is in (a forked child has another).
    list: &'static Mutex<Vec<Arc<Inode>>>,
    state: Mutex<InodeState>,
}

/// Lock rules: every field changes under the mutex, together with the lock level of the
/// connection making the change, and every OS lock of the process on the file is taken
/// through `fd` while holding it.
struct InodeState {
    /// The descriptor the process's OS locks on the file are taken through: one of its
    /// connections' own, shared with it, so the state keeps it open after that
    /// connection closed while others still lock through it. Writable whenever a
    /// writable connection is attached (`writable`), since a write lock needs a
    /// descriptor open for writing. `None` once the last connection left.
    fd: Option<Arc<DbFd>>,
    writable: bool,
    /// The strongest lock a connection of the process holds (os_unix.c `eFileLock`).
    level: c_int,
    /// Connections holding SHARED or more (os_unix.c `nShared`).
    shared: u32,
    /// Connections attached.
    connections: u32,
}

/// One state per database file this process has open. A forked child's connections
/// build their own states (the parent's descriptors, and the OFD locks on them, are
/// shared with the child).
static INODES: ForkLocal<Mutex<Vec<Arc<Inode>>>> = ForkLocal::new();

/// The child's fork hook: its copies of the descriptors the parent's lock states lock
/// through become `/dev/null` (`NullDescriptor`), so the parent's locks do not outlive
/// the parent while this child runs without `exec`. A state a parent thread held locked
/// at the fork is passed over (the hook may only `try_lock`).
fn let_go_of_parents_lock_descriptors() {
    let Some(list) = INODES.last_published() else {
        return;
    };
    let Some(inodes) = lock_in_child(list) else {
        return;
    };
    let Some(null) = NullDescriptor::open() else {
        return;
    };
    for inode in inodes.iter() {
        let Some(state) = lock_in_child(&inode.state) else {
            continue;
        };
        if let Some(fd) = state.fd.as_deref() {
            null.put_over(fd.as_raw_fd());
        }
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked (the lock states
/// here and the WAL-index nodes of `shm` leave no update half done across a call that
/// can fail).
pub(crate) fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The process's lock state a database's lock belongs to, locked. Takes the field, not
/// the `DbLock`, so the caller can update its own level while holding it.
fn state_of(inode: &Option<Arc<Inode>>) -> MutexGuard<'_, InodeState> {
    let inode = inode
        .as_deref()
        .expect("SQLite locks only main databases, which have a lock state");
    lock_ignoring_poison(&inode.state)
}

/// The SQLite lock level one database file handle holds.
pub(crate) struct DbLock {
    level: c_int,
    /// `PENDING_BYTE`; RESERVED_BYTE is the next byte and the shared range starts after it.
    pending_byte: i64,
    /// The process's state of the file; `None` for files SQLite does not lock (journals,
    /// WAL files, temporary files) and for `nolock=1`.
    inode: Option<Arc<Inode>>,
    /// The fork generation of the process that attached `inode` (`is_inherited`).
    generation: u64,
    /// The file's use in a process it was not opened in was logged already.
    inherited_use_logged: bool,
}

impl DbLock {
    /// A lock without OS locks.
    pub(crate) fn new(pending_byte: i64) -> DbLock {
        DbLock {
            level: SQLITE_LOCK_NONE,
            pending_byte,
            inode: None,
            generation: fork_generation(),
            inherited_use_logged: false,
        }
    }

    /// A main database's lock, joined to the process's state of the file `fd` is open on
    /// (`stat` is its fstat), or starting it, with `fd` as the descriptor its locks are
    /// taken through (the state holds a share of it). `writable`: `fd` is open for
    /// writing.
    pub(crate) fn attach(
        fd: &Arc<DbFd>,
        stat: &libc::stat,
        writable: bool,
        pending_byte: i64,
    ) -> DbLock {
        let file = FileKey::of(stat);
        register_child_hook(let_go_of_parents_lock_descriptors);
        let list = INODES.get();
        let mut inodes = lock_ignoring_poison(list);
        let inode = match inodes.iter().find(|inode| inode.file == file) {
            Some(inode) => {
                let mut state = lock_ignoring_poison(&inode.state);
                state.connections += 1;
                if writable && !state.writable {
                    state.lock_through(fd, pending_byte);
                }
                drop(state);
                Arc::clone(inode)
            }
            None => {
                let inode = Arc::new(Inode {
                    file,
                    list,
                    state: Mutex::new(InodeState {
                        fd: Some(Arc::clone(fd)),
                        writable,
                        level: SQLITE_LOCK_NONE,
                        shared: 0,
                        connections: 1,
                    }),
                });
                inodes.push(Arc::clone(&inode));
                inode
            }
        };
        DbLock {
            level: SQLITE_LOCK_NONE,
            pending_byte,
            inode: Some(inode),
            generation: fork_generation(),
            inherited_use_logged: false,
        }
    }

    fn reserved_byte(&self) -> i64 {
        self.pending_byte + 1
    }

    fn shared_first(&self) -> i64 {
        self.pending_byte + 2
    }

    pub(crate) fn level(&self) -> c_int {
        self.level
    }

    /// Whether the lock state was attached in another process, whose child this is: its
    /// descriptor's locks are the parent's ("A connection carried across `fork()`").
    #[inline]
    pub(crate) fn is_inherited(&self) -> bool {
        self.inode.is_some() && is_older_generation(self.generation)
    }

    /// True the first time it is asked: the caller logs the file's use in a child once,
    /// not at every retry of a busy handler.
    pub(crate) fn first_inherited_use(&mut self) -> bool {
        !std::mem::replace(&mut self.inherited_use_logged, true)
    }

    /// xLock: raise the lock to `level` (SHARED, RESERVED or EXCLUSIVE).
    pub(crate) fn lock(&mut self, level: c_int) -> Result<(), Failure> {
        if self.level >= level {
            return Ok(());
        }
        // The transitions SQLite makes (sqlite3.h, xLock); anything else is a caller bug.
        assert!(self.level != SQLITE_LOCK_NONE || level == SQLITE_LOCK_SHARED);
        assert!(level != SQLITE_LOCK_PENDING);
        assert!(level != SQLITE_LOCK_RESERVED || self.level == SQLITE_LOCK_SHARED);
        if self.is_inherited() {
            // The parent's state and locks: not this process's to take or count.
            return Err(Failure::Busy);
        }
        let busy_or =
            |otherwise: fn(i32) -> Failure| move |errno| Failure::from_lock_errno(errno, otherwise);
        let (pending_byte, reserved_byte, shared_first) =
            (self.pending_byte, self.reserved_byte(), self.shared_first());
        let mut state = state_of(&self.inode);
        assert!(state.level >= self.level);

        // Another connection of this process holds a lock that precludes this one: a
        // writer on its way to EXCLUSIVE (or there), or a request for more than SHARED
        // while another connection holds more than SHARED.
        if self.level != state.level
            && (state.level >= SQLITE_LOCK_PENDING || level > SQLITE_LOCK_SHARED)
        {
            return Err(Failure::Busy);
        }
        // SHARED beside another connection's SHARED or RESERVED: the process holds the
        // OS lock already.
        if level == SQLITE_LOCK_SHARED
            && (state.level == SQLITE_LOCK_SHARED || state.level == SQLITE_LOCK_RESERVED)
        {
            assert!(state.shared > 0);
            state.shared += 1;
            self.level = SQLITE_LOCK_SHARED;
            return Ok(());
        }

        // PENDING_BYTE guards new SHARED locks: a writer heading for EXCLUSIVE holds it
        // (write) so no new reader starts meanwhile; a new reader looks whether anyone
        // does before it takes the shared range ("Readers look at PENDING_BYTE" above).
        if level == SQLITE_LOCK_EXCLUSIVE && self.level == SQLITE_LOCK_RESERVED {
            state
                .set_lock(LockType::Write, pending_byte, 1)
                .map_err(busy_or(Failure::Lock))?;
            self.level = SQLITE_LOCK_PENDING;
            state.level = SQLITE_LOCK_PENDING;
        }

        if level == SQLITE_LOCK_SHARED {
            assert!(state.shared == 0 && state.level == SQLITE_LOCK_NONE);
            if conflicting_lock(state.fd(), LockType::Read, pending_byte, 1)
                .map_err(busy_or(Failure::Lock))?
                .is_some()
            {
                return Err(Failure::Busy);
            }
            state
                .set_lock(LockType::Read, shared_first, SHARED_SIZE)
                .map_err(busy_or(Failure::Lock))?;
            state.shared = 1;
            state.level = SQLITE_LOCK_SHARED;
            self.level = SQLITE_LOCK_SHARED;
            return Ok(());
        }
        if level == SQLITE_LOCK_EXCLUSIVE && state.shared > 1 {
            // Another connection of this process is still reading; this one stays
            // PENDING, as under `unix`, and no new reader of the process starts.
            return Err(Failure::Busy);
        }
        let (start, len) = if level == SQLITE_LOCK_RESERVED {
            (reserved_byte, 1)
        } else {
            (shared_first, SHARED_SIZE)
        };
        state
            .set_lock(LockType::Write, start, len)
            .map_err(busy_or(Failure::Lock))?;
        self.level = level;
        state.level = level;
        Ok(())
    }

    /// xUnlock: lower the lock to `level` (SHARED or NONE).
    pub(crate) fn unlock(&mut self, level: c_int) -> Result<(), Failure> {
        assert!(level <= SQLITE_LOCK_SHARED);
        if self.level <= level {
            return Ok(());
        }
        if self.is_inherited() {
            // What the connection held is the parent's: it stays.
            self.level = level;
            return Ok(());
        }
        let (pending_byte, shared_first) = (self.pending_byte, self.shared_first());
        let mut state = state_of(&self.inode);
        if self.level > SQLITE_LOCK_SHARED {
            // Only one connection of the process holds more than SHARED.
            assert_eq!(state.level, self.level);
            if level == SQLITE_LOCK_SHARED {
                state
                    .set_lock(LockType::Read, shared_first, SHARED_SIZE)
                    .map_err(Failure::RdLock)?;
            }
            state
                .set_lock(LockType::Unlock, pending_byte, 2)
                .map_err(Failure::Unlock)?;
            state.level = SQLITE_LOCK_SHARED;
            self.level = SQLITE_LOCK_SHARED;
        }
        if level == SQLITE_LOCK_NONE {
            assert!(state.shared > 0);
            state.shared -= 1;
            self.level = SQLITE_LOCK_NONE;
            if state.shared == 0 {
                // The last reader of the process: the OS lock goes. Whatever the call
                // says, the process holds no lock any more by its own account, as in
                // os_unix.c.
                state.level = SQLITE_LOCK_NONE;
                state
                    .set_lock(LockType::Unlock, 0, 0)
                    .map_err(Failure::Unlock)?;
            }
        }
        Ok(())
    }

    /// xCheckReservedLock: does any connection hold RESERVED or more?
    pub(crate) fn check_reserved(&self) -> Result<bool, Failure> {
        if self.level > SQLITE_LOCK_SHARED {
            return Ok(true);
        }
        if self.is_inherited() {
            // Its descriptor cannot tell the parent's locks from its own: answer as if a
            // writer were there, which makes SQLite take no journal for a hot one.
            return Ok(true);
        }
        let state = state_of(&self.inode);
        if state.level > SQLITE_LOCK_SHARED {
            return Ok(true);
        }
        // An OFD lock never conflicts with its own description's locks: what this finds
        // is another process's.
        conflicting_lock(state.fd(), LockType::Write, self.reserved_byte(), 1)
            .map(|conflict| conflict.is_some())
            .map_err(Failure::CheckReservedLock)
    }

    /// For files opened with `nolock=1`: track the level without OS locks.
    pub(crate) fn set_level_without_os_lock(&mut self, level: c_int) {
        self.level = level;
    }

    /// The connection closes: drops its lock (SQLite unlocks before xClose; an error
    /// path may not have) and leaves the process's state of the file. When it was the
    /// last connection, the state ends and hands back the descriptor it locked through,
    /// for the caller to release after its own (`lock::release`); otherwise the state
    /// keeps its share, and with it the descriptor open, for the other connections.
    pub(crate) fn detach(&mut self) -> Option<Arc<DbFd>> {
        if self.is_inherited() {
            // The parent's state, list and locks stay as they are (its list may even be
            // locked for good here, by a thread that is not in this process). The share
            // dropped here is never the last: the parent's list keeps one.
            self.level = SQLITE_LOCK_NONE;
            self.inode = None;
            return None;
        }
        if self.level > SQLITE_LOCK_NONE && self.inode.is_some() {
            let _ = self.unlock(SQLITE_LOCK_NONE);
        }
        let inode = self.inode.take()?;
        // The list before the state, as in `attach`: no connection joins a state that is
        // being dropped.
        let mut inodes = lock_ignoring_poison(inode.list);
        let mut state = lock_ignoring_poison(&inode.state);
        assert!(state.connections > 0);
        state.connections -= 1;
        if state.connections > 0 {
            return None;
        }
        inodes.retain(|listed| !Arc::ptr_eq(listed, &inode));
        if state.level != SQLITE_LOCK_NONE {
            // A failed unlock left the process's account and the OS apart: drop whatever
            // the description still holds before it is closed or parked.
            let _ = state.set_lock(LockType::Unlock, 0, 0);
            state.level = SQLITE_LOCK_NONE;
        }
        state.fd.take()
    }
}

/// Lets go of one share of a database descriptor: the last share closes it, without
/// dropping this process's POSIX locks on the file (`DbFd::close`), reporting a failed
/// close(2) to `failed_close`; an earlier one leaves it open for the other holders.
pub(crate) fn release(fd: Arc<DbFd>, failed_close: impl FnMut(i32)) {
    if let Some(fd) = Arc::into_inner(fd) {
        fd.close(failed_close);
    }
}

impl InodeState {
    /// The descriptor the process's locks on the file are taken through.
    fn fd(&self) -> BorrowedFd<'_> {
        self.fd
            .as_deref()
            .expect("an attached state has its descriptor")
            .as_fd()
    }

    /// [`set_lock`] through the state's descriptor.
    fn set_lock(&self, kind: LockType, start: i64, len: i64) -> Result<(), i32> {
        set_lock(self.fd(), kind, start, len)
    }

    /// Takes the process's locks through `fd` (writable) from now on, moving the read
    /// lock a read-only descriptor can hold: a write lock needs a writable descriptor.
    /// If the read lock cannot be taken through `fd`, the old descriptor stays (a write
    /// lock through it then fails, and SQLite reports it). The state's share of the old
    /// descriptor is released: closed if the connection it came from has closed.
    fn lock_through(&mut self, fd: &Arc<DbFd>, pending_byte: i64) {
        if self.shared > 0 {
            // A read-only descriptor carries at most SHARED: the shared range.
            assert_eq!(self.level, SQLITE_LOCK_SHARED);
            if set_lock(fd.as_fd(), LockType::Read, pending_byte + 2, SHARED_SIZE).is_err() {
                return;
            }
            let _ = self.set_lock(LockType::Unlock, 0, 0);
        }
        if let Some(old) = self.fd.replace(Arc::clone(fd)) {
            release(old, |_| {});
        }
        self.writable = true;
    }
}
