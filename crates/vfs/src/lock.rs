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
//! # Why open-file-description locks
//! We take the same byte ranges with `F_OFD_SETLK` instead of `F_SETLK`. OFD locks and
//! classic POSIX locks conflict with each other, so a stock `sqlite3` process (POSIX locks)
//! and this VFS exclude each other exactly as two stock processes do. OFD locks belong to
//! the open file description, not the process, so (a) two connections of one process
//! conflict like two processes, which replaces os_unix.c's in-process inode table, and
//! (b) closing some other descriptor of the file does not drop our locks — the POSIX trap
//! os_unix.c works around with its unused-fd list. See fcntl(2), "Open file description
//! locks".

use std::ffi::c_int;
use std::os::fd::RawFd;

use crate::error::Failure;
use crate::ffi::{
    SQLITE_LOCK_EXCLUSIVE, SQLITE_LOCK_NONE, SQLITE_LOCK_PENDING, SQLITE_LOCK_RESERVED,
    SQLITE_LOCK_SHARED,
};
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

/// The SQLite lock level one database file handle holds.
pub(crate) struct DbLock {
    level: c_int,
    /// `PENDING_BYTE`; RESERVED_BYTE is the next byte and the shared range starts after it.
    pending_byte: i64,
}

impl DbLock {
    pub(crate) fn new(pending_byte: i64) -> DbLock {
        DbLock {
            level: SQLITE_LOCK_NONE,
            pending_byte,
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
    pub(crate) fn lock(&mut self, fd: RawFd, level: c_int) -> Result<(), Failure> {
        if self.level >= level {
            return Ok(());
        }
        // The transitions SQLite makes (sqlite3.h, xLock); anything else is a caller bug.
        assert!(self.level != SQLITE_LOCK_NONE || level == SQLITE_LOCK_SHARED);
        assert!(level != SQLITE_LOCK_PENDING);
        assert!(level != SQLITE_LOCK_RESERVED || self.level == SQLITE_LOCK_SHARED);
        let busy_or =
            |otherwise: fn(i32) -> Failure| move |errno| Failure::from_lock_errno(errno, otherwise);

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
            set_lock(fd, kind, self.pending_byte, 1).map_err(busy_or(Failure::Lock))?;
            if level == SQLITE_LOCK_EXCLUSIVE {
                self.level = SQLITE_LOCK_PENDING;
            }
        }

        if level == SQLITE_LOCK_SHARED {
            let shared = set_lock(fd, LockType::Read, self.shared_first(), SHARED_SIZE)
                .map_err(busy_or(Failure::Lock));
            let released = set_lock(fd, LockType::Unlock, self.pending_byte, 1);
            shared?;
            released.map_err(Failure::Unlock)?;
            self.level = SQLITE_LOCK_SHARED;
            return Ok(());
        }
        let (start, len) = if level == SQLITE_LOCK_RESERVED {
            (self.reserved_byte(), 1)
        } else {
            (self.shared_first(), SHARED_SIZE)
        };
        set_lock(fd, LockType::Write, start, len).map_err(busy_or(Failure::Lock))?;
        self.level = level;
        Ok(())
    }

    /// xUnlock: lower the lock to `level` (SHARED or NONE).
    pub(crate) fn unlock(&mut self, fd: RawFd, level: c_int) -> Result<(), Failure> {
        assert!(level <= SQLITE_LOCK_SHARED);
        if self.level <= level {
            return Ok(());
        }
        if self.level > SQLITE_LOCK_SHARED {
            if level == SQLITE_LOCK_SHARED {
                set_lock(fd, LockType::Read, self.shared_first(), SHARED_SIZE)
                    .map_err(Failure::RdLock)?;
            }
            set_lock(fd, LockType::Unlock, self.pending_byte, 2).map_err(Failure::Unlock)?;
            self.level = SQLITE_LOCK_SHARED;
        }
        if level == SQLITE_LOCK_NONE {
            set_lock(fd, LockType::Unlock, 0, 0).map_err(Failure::Unlock)?;
            self.level = SQLITE_LOCK_NONE;
        }
        Ok(())
    }

    /// xCheckReservedLock: does any connection hold RESERVED or more?
    pub(crate) fn check_reserved(&self, fd: RawFd) -> Result<bool, Failure> {
        if self.level > SQLITE_LOCK_SHARED {
            return Ok(true);
        }
        conflicting_lock(fd, LockType::Write, self.reserved_byte(), 1)
            .map(|conflict| conflict.is_some())
            .map_err(Failure::Lock)
    }

    /// For files opened with `nolock=1`: track the level without OS locks.
    pub(crate) fn set_level_without_os_lock(&mut self, level: c_int) {
        self.level = level;
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
static LOCK_OWNER_CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
/// release POSIX locks this process holds on the same file; then parks it. Parked
/// descriptors whose file is free again are closed on the way.
pub(crate) fn close_preserving_process_locks(fd: RawFd) {
    let _ = set_lock(fd, LockType::Unlock, 0, 0);
    let mut parked = PARKED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // The common case in one fcntl: nobody holds any lock on any byte of the file.
    // Otherwise the process's descriptors of the file tell whose locks they are.
    let this = probe(fd);
    if parked.is_empty() && this == Probe::Free {
        // The caller hands over ownership of `fd`.
        crate::sys::close(fd);
        return;
    }
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
            // `fd` is the caller's, handed over, or a parked one, owned by the list.
            crate::sys::close(fd);
        }
    }
}
