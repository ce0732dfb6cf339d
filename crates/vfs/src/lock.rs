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

struct Parked {
    fd: RawFd,
    file: FileKey,
}

/// `major:minor:inode`, as /proc/locks names a file.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileKey {
    major: u32,
    minor: u32,
    inode: u64,
}

static PARKED: std::sync::Mutex<Vec<Parked>> = std::sync::Mutex::new(Vec::new());

/// Closes that had to read /proc/locks (for tests: the one-fcntl path must be the usual one).
static PROC_LOCKS_SCANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(crate) fn proc_locks_scans() -> u64 {
    PROC_LOCKS_SCANS.load(std::sync::atomic::Ordering::Relaxed)
}

fn file_key(fd: RawFd) -> Option<FileKey> {
    // SAFETY: stat is plain data written by fstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is writable for the call.
    if unsafe { calls::fstat(fd, &mut stat) } != 0 {
        return None;
    }
    Some(FileKey {
        major: libc::major(stat.st_dev),
        minor: libc::minor(stat.st_dev),
        inode: stat.st_ino,
    })
}

/// Files on which this process holds POSIX locks, from /proc/locks lines such as
/// `3: POSIX  ADVISORY  READ 1234 fe:00:10018963 1073741826 1073742335`.
/// `None` when /proc/locks cannot be read.
fn files_with_process_posix_locks() -> Option<Vec<FileKey>> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = std::process::id().to_string();
    let mut files = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // Blocked waiters are listed with a "->" field; they hold nothing.
        if fields.len() < 8 || fields[1] != "POSIX" || fields[4] != pid {
            continue;
        }
        let mut device = fields[5].split(':');
        let (Some(major), Some(minor), Some(inode)) = (device.next(), device.next(), device.next())
        else {
            continue;
        };
        if let (Ok(major), Ok(minor), Ok(inode)) = (
            u32::from_str_radix(major, 16),
            u32::from_str_radix(minor, 16),
            inode.parse::<u64>(),
        ) {
            files.push(FileKey {
                major,
                minor,
                inode,
            });
        }
    }
    Some(files)
}

/// Closes `fd` (of a database or -shm file, which carry SQLite's locks) unless that would
/// release POSIX locks this process holds on the same file; then parks it. Parked
/// descriptors whose file is free again are closed on the way.
pub(crate) fn close_preserving_process_locks(fd: RawFd) {
    let _ = set_lock(fd, LockType::Unlock, 0, 0);
    let mut parked = PARKED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // The common case in one fcntl: nobody holds any lock on any byte of the file. An
    // OFD lock conflicts with every other lock, this process's POSIX locks included
    // (fcntl(2), "Open file description locks"), so a free whole-file probe proves there
    // is nothing to preserve. Otherwise /proc/locks tells whose locks they are; reading
    // it costs five system calls and a walk of every lock on the machine.
    if parked.is_empty() && matches!(conflicting_lock(fd, LockType::Write, 0, 0), Ok(None)) {
        // The caller hands over ownership of `fd`.
        crate::sys::close(fd);
        return;
    }
    PROC_LOCKS_SCANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let locked_files = files_with_process_posix_locks();
    let still_locked = |file: &FileKey| {
        locked_files
            .as_ref()
            .is_some_and(|files| files.contains(file))
    };
    parked.retain(|p| {
        if still_locked(&p.file) {
            return true;
        }
        // A parked descriptor is owned by the parking list alone.
        crate::sys::close(p.fd);
        false
    });
    match file_key(fd) {
        Some(file) if still_locked(&file) => parked.push(Parked { fd, file }),
        // The caller hands over ownership of `fd`.
        _ => crate::sys::close(fd),
    }
}
