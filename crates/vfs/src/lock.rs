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
//! * SHARED: read-lock PENDING_BYTE (fails while a writer is pending), read-lock the shared
//!   range, release PENDING_BYTE.
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
//! # One lock state per database file per process
//! As os_unix.c's `unixInodeInfo`, the connections of one process to one database file
//! (device and inode) share one lock state ([`Inode`]): the strongest lock any of them
//! holds and how many hold SHARED. A SHARED request while another connection of the
//! process holds SHARED or RESERVED is counted, without a system call, and only the last
//! SHARED holder's release unlocks; a request that another connection of the process
//! precludes (anything while one is PENDING or EXCLUSIVE, RESERVED or EXCLUSIVE while one
//! holds RESERVED, EXCLUSIVE while another reads) is SQLITE_BUSY without one. So a pool of
//! reader connections makes the `fcntl`s `unix` makes, not one set per connection.
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

use std::ffi::c_int;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::Failure;
use crate::ffi::{
    SQLITE_LOCK_EXCLUSIVE, SQLITE_LOCK_NONE, SQLITE_LOCK_PENDING, SQLITE_LOCK_RESERVED,
    SQLITE_LOCK_SHARED,
};
use crate::io::fork::ProcessRegistry;
use crate::sys::calls;

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
    // SAFETY: flock is plain data; all-zero is a valid value (and l_pid must be 0 for OFD).
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind.raw();
    lock.l_whence = libc::SEEK_SET as i16;
    lock.l_start = start;
    lock.l_len = len;
    lock
}

/// Sets (or releases) an OFD lock without waiting. `Err(errno)` on conflict or failure.
/// One attempt, as os_unix.c makes: `F_OFD_SETLK` never waits, so EINTR can only come
/// from a replaced `fcntl` (the system-call table), and it means SQLITE_BUSY
/// (`Failure::from_lock_errno`, os_unix.c `sqliteErrorFromPosixError`), not a retry.
pub(crate) fn set_lock(fd: RawFd, kind: LockType, start: i64, len: i64) -> Result<(), i32> {
    let lock = flock(kind, start, len);
    // SAFETY: `lock` is a valid flock for the duration of the call.
    if unsafe { calls::fcntl_ptr(fd, libc::F_OFD_SETLK, &lock as *const _ as *mut _) } == 0 {
        return Ok(());
    }
    Err(crate::sys::last_errno())
}

/// Whether another open file description holds a lock that conflicts with `kind` on the
/// range; returns the conflicting lock's type.
pub(crate) fn conflicting_lock(
    fd: RawFd,
    kind: LockType,
    start: i64,
    len: i64,
) -> Result<Option<LockType>, i32> {
    let mut lock = flock(kind, start, len);
    // SAFETY: `lock` is a valid, writable flock for the duration of the call.
    if unsafe {
        calls::fcntl_ptr(
            fd,
            libc::F_OFD_GETLK,
            (&mut lock as *mut libc::flock).cast(),
        )
    } != 0
    {
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
    /// The descriptor the process's OS locks on the file are taken through: a
    /// connection's own (lent), or one the state keeps open after that connection closed
    /// (`fd_kept`). Writable whenever a writable connection is attached (`writable`),
    /// since a write lock needs a descriptor open for writing.
    fd: RawFd,
    fd_kept: bool,
    writable: bool,
    /// The strongest lock a connection of the process holds (os_unix.c `eFileLock`).
    level: c_int,
    /// Connections holding SHARED or more (os_unix.c `nShared`).
    shared: u32,
    /// Connections attached.
    connections: u32,
}

/// One state per database file this process has open.
static INODES: ProcessRegistry<Inode> = ProcessRegistry::new();

/// Fork hook: a child's connections build their own states (the parent's descriptors,
/// and the OFD locks on them, are shared with the child).
fn forget_inodes_after_fork() {
    INODES.forget();
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

/// What a connection that closes hands back: which descriptors to close, with
/// [`close_preserving_process_locks`].
pub(crate) struct Detached {
    /// The connection's own descriptor, unless the state keeps it (other connections of
    /// the process lock through it).
    pub(crate) close_own: bool,
    /// A descriptor the state had kept from a connection closed earlier, now unused.
    pub(crate) close_kept: Option<RawFd>,
}

/// The SQLite lock level one database file handle holds.
pub(crate) struct DbLock {
    level: c_int,
    /// `PENDING_BYTE`; RESERVED_BYTE is the next byte and the shared range starts after it.
    pending_byte: i64,
    /// The process's state of the file; `None` for files SQLite does not lock (journals,
    /// WAL files, temporary files) and for `nolock=1`.
    inode: Option<Arc<Inode>>,
}

impl DbLock {
    /// A lock without OS locks.
    pub(crate) fn new(pending_byte: i64) -> DbLock {
        DbLock {
            level: SQLITE_LOCK_NONE,
            pending_byte,
            inode: None,
        }
    }

    /// A main database's lock, joined to the process's state of the file `fd` is open on
    /// (`stat` is its fstat), or starting it, with `fd` as the descriptor its locks are
    /// taken through. `writable`: `fd` is open for writing.
    pub(crate) fn attach(
        fd: RawFd,
        stat: &libc::stat,
        writable: bool,
        pending_byte: i64,
    ) -> DbLock {
        let file = FileKey {
            dev: stat.st_dev,
            inode: stat.st_ino,
        };
        let list = INODES.list(forget_inodes_after_fork);
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
                        fd,
                        fd_kept: false,
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

    /// xLock: raise the lock to `level` (SHARED, RESERVED or EXCLUSIVE).
    pub(crate) fn lock(&mut self, level: c_int) -> Result<(), Failure> {
        if self.level >= level {
            return Ok(());
        }
        // The transitions SQLite makes (sqlite3.h, xLock); anything else is a caller bug.
        assert!(self.level != SQLITE_LOCK_NONE || level == SQLITE_LOCK_SHARED);
        assert!(level != SQLITE_LOCK_PENDING);
        assert!(level != SQLITE_LOCK_RESERVED || self.level == SQLITE_LOCK_SHARED);
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
        let fd = state.fd;

        // PENDING_BYTE guards new SHARED locks: readers take it briefly (read), a writer
        // heading for EXCLUSIVE holds it (write) so no new reader starts meanwhile.
        if level == SQLITE_LOCK_SHARED
            || (level == SQLITE_LOCK_EXCLUSIVE && self.level == SQLITE_LOCK_RESERVED)
        {
            let kind = if level == SQLITE_LOCK_SHARED {
                LockType::Read
            } else {
                LockType::Write
            };
            set_lock(fd, kind, pending_byte, 1).map_err(busy_or(Failure::Lock))?;
            if level == SQLITE_LOCK_EXCLUSIVE {
                self.level = SQLITE_LOCK_PENDING;
                state.level = SQLITE_LOCK_PENDING;
            }
        }

        if level == SQLITE_LOCK_SHARED {
            assert!(state.shared == 0 && state.level == SQLITE_LOCK_NONE);
            let shared = set_lock(fd, LockType::Read, shared_first, SHARED_SIZE)
                .map_err(busy_or(Failure::Lock));
            let released = set_lock(fd, LockType::Unlock, pending_byte, 1);
            shared?;
            released.map_err(Failure::Unlock)?;
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
        set_lock(fd, LockType::Write, start, len).map_err(busy_or(Failure::Lock))?;
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
        let (pending_byte, shared_first) = (self.pending_byte, self.shared_first());
        let mut state = state_of(&self.inode);
        let fd = state.fd;
        if self.level > SQLITE_LOCK_SHARED {
            // Only one connection of the process holds more than SHARED.
            assert_eq!(state.level, self.level);
            if level == SQLITE_LOCK_SHARED {
                set_lock(fd, LockType::Read, shared_first, SHARED_SIZE).map_err(Failure::RdLock)?;
            }
            set_lock(fd, LockType::Unlock, pending_byte, 2).map_err(Failure::Unlock)?;
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
                set_lock(fd, LockType::Unlock, 0, 0).map_err(Failure::Unlock)?;
            }
        }
        Ok(())
    }

    /// xCheckReservedLock: does any connection hold RESERVED or more?
    pub(crate) fn check_reserved(&self) -> Result<bool, Failure> {
        if self.level > SQLITE_LOCK_SHARED {
            return Ok(true);
        }
        let state = state_of(&self.inode);
        if state.level > SQLITE_LOCK_SHARED {
            return Ok(true);
        }
        // An OFD lock never conflicts with its own description's locks: what this finds
        // is another process's.
        conflicting_lock(state.fd, LockType::Write, self.reserved_byte(), 1)
            .map(|conflict| conflict.is_some())
            .map_err(Failure::Lock)
    }

    /// For files opened with `nolock=1`: track the level without OS locks.
    pub(crate) fn set_level_without_os_lock(&mut self, level: c_int) {
        self.level = level;
    }

    /// The connection with descriptor `fd` closes: drops its lock (SQLite unlocks before
    /// xClose; an error path may not have) and leaves the process's state, which keeps
    /// `fd` if other connections lock through it. Says which descriptors to close.
    pub(crate) fn detach(&mut self, fd: RawFd) -> Detached {
        if self.level > SQLITE_LOCK_NONE && self.inode.is_some() {
            let _ = self.unlock(SQLITE_LOCK_NONE);
        }
        let Some(inode) = self.inode.take() else {
            return Detached {
                close_own: true,
                close_kept: None,
            };
        };
        // The list before the state, as in `attach`: no connection joins a state that is
        // being dropped.
        let mut inodes = lock_ignoring_poison(inode.list);
        let mut state = lock_ignoring_poison(&inode.state);
        assert!(state.connections > 0);
        state.connections -= 1;
        if state.connections == 0 {
            inodes.retain(|listed| !Arc::ptr_eq(listed, &inode));
            if state.level != SQLITE_LOCK_NONE {
                // A failed unlock left the process's account and the OS apart: drop
                // whatever the description still holds before it is closed or parked.
                let _ = set_lock(state.fd, LockType::Unlock, 0, 0);
                state.level = SQLITE_LOCK_NONE;
            }
            let kept = state.fd_kept.then_some(state.fd);
            state.fd = -1;
            return Detached {
                close_own: true,
                close_kept: kept,
            };
        }
        if state.fd == fd {
            // Other connections of the process still lock through this descriptor.
            state.fd_kept = true;
            return Detached {
                close_own: false,
                close_kept: None,
            };
        }
        Detached {
            close_own: true,
            close_kept: None,
        }
    }
}

impl InodeState {
    /// Takes the process's locks through `fd` (writable) from now on, moving the read
    /// lock a read-only descriptor can hold: a write lock needs a writable descriptor.
    /// If the read lock cannot be taken through `fd`, the old descriptor stays (a write
    /// lock through it then fails, and SQLite reports it).
    fn lock_through(&mut self, fd: RawFd, pending_byte: i64) {
        let old = self.fd;
        if self.shared > 0 {
            // A read-only descriptor carries at most SHARED: the shared range.
            assert_eq!(self.level, SQLITE_LOCK_SHARED);
            if set_lock(fd, LockType::Read, pending_byte + 2, SHARED_SIZE).is_err() {
                return;
            }
            let _ = set_lock(old, LockType::Unlock, 0, 0);
        }
        if self.fd_kept {
            close_preserving_process_locks(old, |_| {});
        }
        self.fd = fd;
        self.fd_kept = false;
        self.writable = true;
    }
}

// ─── Closing descriptors without dropping this process's POSIX locks ─────────────────
//
// POSIX record locks belong to the process, and close(2) of *any* descriptor of a file
// releases all of them (fcntl(2), "Advisory record locking"). If a `unix`-VFS connection
// in this process holds SQLite locks on a database (or its -shm) that we also have open,
// closing our descriptor would silently release its locks. As os_unix.c does for its own
// connections, such a descriptor is parked instead and closed once the process holds no
// POSIX lock on that file any more. Our own OFD locks are released before parking, so a
// parked descriptor blocks nobody.
//
// Whose locks are on a file is read from /proc/self/fdinfo, not /proc/locks: /proc/locks
// is rendered a page at a time, one walk of the machine's lock list per read(2), and a
// walk starts at the line number where the last one stopped. A lock released anywhere
// earlier in the list between two reads shifts the lines, and one is skipped; with
// other processes taking and dropping locks, this process's own line goes missing now and
// then, and the close then dropped a `unix` connection's EXCLUSIVE lock.

/// A parked descriptor, owned by the parking list alone.
struct Parked {
    fd: RawFd,
}

/// A file, as fstat(2) names it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileKey {
    dev: libc::dev_t,
    inode: libc::ino_t,
}

static PARKED: std::sync::Mutex<Vec<Parked>> = std::sync::Mutex::new(Vec::new());

/// Closes that found a lock on the file (or a parked descriptor) and so had to find out
/// whose locks they are (for tests: the one-fcntl path must be the usual one).
#[cfg(feature = "test-support")]
static LOCK_OWNER_CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(feature = "test-support")]
pub(crate) fn lock_owner_checks() -> u64 {
    LOCK_OWNER_CHECKS.load(std::sync::atomic::Ordering::Relaxed)
}

fn file_key(fd: RawFd) -> Option<FileKey> {
    // SAFETY: stat is plain data written by fstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is writable for the call.
    if unsafe { calls::fstat(fd, &mut stat) } != 0 {
        return None;
    }
    Some(FileKey {
        dev: stat.st_dev,
        inode: stat.st_ino,
    })
}

/// What a whole-file `F_OFD_GETLK` from a descriptor holding no lock itself says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// No lock on any byte: an OFD lock conflicts with every other lock, this process's
    /// POSIX locks included (fcntl(2), "Open file description locks"), so there is
    /// nothing to preserve.
    Free,
    /// The first conflicting lock is a POSIX lock of this process.
    ThisProcess,
    /// Another owner's lock (another process's, or an OFD lock), which may hide one of
    /// this process's on the same bytes; or the probe failed.
    Unknown,
}

fn probe(fd: RawFd) -> Probe {
    let mut lock = flock(LockType::Write, 0, 0);
    // SAFETY: `lock` is a valid, writable flock for the duration of the call.
    if unsafe {
        calls::fcntl_ptr(
            fd,
            libc::F_OFD_GETLK,
            (&mut lock as *mut libc::flock).cast(),
        )
    } != 0
    {
        return Probe::Unknown;
    }
    if lock.l_type as c_int == libc::F_UNLCK {
        Probe::Free
    } else if lock.l_pid > 0 && lock.l_pid as u32 == std::process::id() {
        // F_OFD_GETLK reports an OFD lock's l_pid as -1, a POSIX lock's as its process.
        Probe::ThisProcess
    } else {
        Probe::Unknown
    }
}

/// Of `files`, those on which this process holds a POSIX lock; `None` when that cannot
/// be found out (no /proc).
///
/// A POSIX lock is listed (`lock:` lines, Linux 4.1+) in /proc/self/fdinfo/N of the
/// descriptor it was taken through, and closing any descriptor of the file drops all of
/// them, so every one this process still holds shows under a descriptor of that file it
/// has open. Each fdinfo file is rendered whole in one go, so it cannot skip a line.
fn files_with_process_posix_locks(files: &[FileKey]) -> Option<Vec<FileKey>> {
    let mut locked = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        let Some(fd) = entry
            .ok()
            .and_then(|entry| entry.file_name().to_str()?.parse::<RawFd>().ok())
        else {
            continue;
        };
        let Some(file) = file_key(fd) else {
            continue;
        };
        if !files.contains(&file) || locked.contains(&file) {
            continue;
        }
        // A descriptor closed since the listing has no fdinfo, and held no lock still
        // standing: its close dropped them.
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
            continue;
        };
        // `lock:\t1: POSIX  ADVISORY  READ 1234 fe:00:10018963 1073741826 1073742335`;
        // only this process's own POSIX locks are listed.
        if info.lines().any(|line| {
            line.strip_prefix("lock:")
                .is_some_and(|lock| lock.split_whitespace().nth(1) == Some("POSIX"))
        }) {
            locked.push(file);
        }
    }
    Some(locked)
}

/// Closes `fd` (of a database or -shm file, which carry SQLite's locks) unless that would
/// release POSIX locks this process holds on the same file; then parks it. The caller
/// has released the OFD locks taken through `fd` first, so a parked descriptor blocks
/// nobody. Parked
/// descriptors whose file is free again are closed on the way. Each close(2) that fails
/// is reported to `failed_close` with its errno (os_unix.c's robust_close logs those of
/// its closeUnixFile, closePendingFds and unixShmPurge); the descriptor is gone either
/// way, as Linux frees it whatever close(2) returns.
pub(crate) fn close_preserving_process_locks(fd: RawFd, mut failed_close: impl FnMut(i32)) {
    let mut close = |fd: RawFd| {
        // SAFETY: `fd` is the caller's, handed over, or a parked one owned by the list,
        // and is closed once, here; nothing uses it afterwards.
        if unsafe { calls::close(fd) } != 0 {
            failed_close(crate::sys::last_errno());
        }
    };
    let mut parked = PARKED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // The common case in one fcntl: nobody holds any lock on any byte of the file.
    // Otherwise the process's descriptors of the file tell whose locks they are.
    let this = probe(fd);
    if parked.is_empty() && this == Probe::Free {
        // The caller hands over ownership of `fd`.
        close(fd);
        return;
    }
    #[cfg(feature = "test-support")]
    LOCK_OWNER_CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Each descriptor with what its probe says, and its file when the probe cannot settle
    // whether this process holds a lock on it.
    let mut candidates: Vec<(RawFd, Probe, Option<FileKey>)> = Vec::with_capacity(parked.len() + 1);
    candidates.extend(parked.drain(..).map(|p| (p.fd, probe(p.fd), None)));
    candidates.push((fd, this, None));
    for (fd, probe, file) in candidates.iter_mut() {
        if *probe == Probe::Unknown {
            *file = file_key(*fd);
        }
    }
    let unsettled: Vec<FileKey> = candidates.iter().filter_map(|c| c.2).collect();
    // One walk of the descriptor table for the files the probes could not settle.
    let locked_files = if unsettled.is_empty() {
        Some(Vec::new())
    } else {
        files_with_process_posix_locks(&unsettled)
    };
    for (fd, probe, file) in candidates {
        let keep = match probe {
            Probe::Free => false,
            Probe::ThisProcess => true,
            // Without /proc (or fstat) only the probe can tell, and it saw another
            // owner's lock first, which may hide ours: closed, as os_unix.c's own
            // bookkeeping cannot be read from here.
            Probe::Unknown => match (&locked_files, file) {
                (Some(files), Some(file)) => files.contains(&file),
                _ => false,
            },
        };
        if keep {
            parked.push(Parked { fd });
        } else {
            close(fd);
        }
    }
}
