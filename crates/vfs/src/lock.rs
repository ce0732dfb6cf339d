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

pub(crate) const PENDING_BYTE: i64 = 0x4000_0000;
pub(crate) const RESERVED_BYTE: i64 = PENDING_BYTE + 1;
pub(crate) const SHARED_FIRST: i64 = PENDING_BYTE + 2;
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
pub(crate) fn set_lock(fd: RawFd, kind: LockType, start: i64, len: i64) -> Result<(), i32> {
    let lock = flock(kind, start, len);
    loop {
        // SAFETY: `lock` is a valid flock for the duration of the call.
        if unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &lock) } == 0 {
            return Ok(());
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno != libc::EINTR {
            return Err(errno);
        }
    }
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
    if unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut lock) } != 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
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
}

impl DbLock {
    pub(crate) fn new() -> DbLock {
        DbLock {
            level: SQLITE_LOCK_NONE,
        }
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
            set_lock(fd, kind, PENDING_BYTE, 1).map_err(busy_or(Failure::Lock))?;
            if level == SQLITE_LOCK_EXCLUSIVE {
                self.level = SQLITE_LOCK_PENDING;
            }
        }

        if level == SQLITE_LOCK_SHARED {
            let shared = set_lock(fd, LockType::Read, SHARED_FIRST, SHARED_SIZE)
                .map_err(busy_or(Failure::Lock));
            let released = set_lock(fd, LockType::Unlock, PENDING_BYTE, 1);
            shared?;
            released.map_err(Failure::Unlock)?;
            self.level = SQLITE_LOCK_SHARED;
            return Ok(());
        }
        let (start, len) = if level == SQLITE_LOCK_RESERVED {
            (RESERVED_BYTE, 1)
        } else {
            (SHARED_FIRST, SHARED_SIZE)
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
                set_lock(fd, LockType::Read, SHARED_FIRST, SHARED_SIZE).map_err(Failure::RdLock)?;
            }
            set_lock(fd, LockType::Unlock, PENDING_BYTE, 2).map_err(Failure::Unlock)?;
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
        conflicting_lock(fd, LockType::Write, RESERVED_BYTE, 1)
            .map(|conflict| conflict.is_some())
            .map_err(Failure::Lock)
    }

    /// For files opened with `nolock=1`: track the level without OS locks.
    pub(crate) fn set_level_without_os_lock(&mut self, level: c_int) {
        self.level = level;
    }
}
