//! Typed errors of the library, mapped once to SQLite result codes. A leaf: it names no
//! other module of the crate but `ffi` (the codes).

use std::fmt;

/// An error of the VFS library (registration, probing, options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// io_uring cannot be used in this process: the cause and the remedy.
    IoUringUnavailable(String),
    /// An option or URI parameter is malformed or unknown.
    InvalidOption(String),
    /// SQLite refused the registration (its result code).
    RegistrationFailed { vfs_name: String, sqlite_code: i32 },
    /// The parent VFS (`unix`) is not registered in this SQLite.
    NoParentVfs,
    /// A directory's filesystem could not be probed ([`crate::probe_filesystem`]): the
    /// directory and the cause.
    FilesystemProbe(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::IoUringUnavailable(why) => write!(f, "io_uring is unavailable: {why}"),
            Error::InvalidOption(why) => write!(f, "invalid sqlite-uring option: {why}"),
            Error::RegistrationFailed {
                vfs_name,
                sqlite_code,
            } => write!(
                f,
                "sqlite3_vfs_register(\"{vfs_name}\") failed with SQLite code {sqlite_code}"
            ),
            Error::NoParentVfs => write!(
                f,
                "SQLite has no \"unix\" VFS to delegate path operations to (is this Linux?)"
            ),
            Error::FilesystemProbe(why) => write!(f, "cannot probe the filesystem: {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// Why a VFS method failed. Each variant maps to exactly one SQLite result code in
/// [`Failure::code`], the single place where this crate chooses SQLite codes; the errno
/// (when there is one) is kept for `SQLITE_FCNTL_LAST_ERRNO` and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    Busy,
    ShortRead,
    Read(i32),
    /// EIO/ERANGE/ENXIO on read: os_unix.c reports these as SQLITE_IOERR_CORRUPTFS.
    CorruptFs(i32),
    Write(i32),
    /// ENOSPC, or a write that made no progress.
    Full(i32),
    Fsync(i32),
    DirFsync(i32),
    Truncate(i32),
    Fstat(i32),
    /// The fstat that finds a database's inode at open failed: a plain SQLITE_IOERR, as
    /// os_unix.c findInodeInfo returns.
    Inode(i32),
    Lock(i32),
    Unlock(i32),
    RdLock(i32),
    /// The lock query of xCheckReservedLock failed.
    CheckReservedLock(i32),
    Delete(i32),
    DeleteNoent,
    CantOpen(i32),
    ReadonlyDirectory(i32),
    ShmOpen(i32),
    ShmSize(i32),
    ShmMap(i32),
    /// xShmLock on a file with no WAL index, or with slots or flags no lock names.
    ShmLock,
    ReadonlyCantInit,
    Perm(i32),
    /// A file control was given a bad argument; the message is in its result slot.
    BadArgument,
    /// A pointer SQLite always passes was null: the call did nothing.
    Misuse,
    /// A Rust panic was caught at the FFI boundary.
    Internal,
}

impl Failure {
    pub(crate) fn code(self) -> std::ffi::c_int {
        use crate::ffi::*;
        match self {
            Failure::Busy => SQLITE_BUSY,
            Failure::ShortRead => SQLITE_IOERR_SHORT_READ,
            Failure::Read(_) => SQLITE_IOERR_READ,
            Failure::CorruptFs(_) => SQLITE_IOERR_CORRUPTFS,
            Failure::Write(_) => SQLITE_IOERR_WRITE,
            Failure::Full(_) => SQLITE_FULL,
            Failure::Fsync(_) => SQLITE_IOERR_FSYNC,
            Failure::DirFsync(_) => SQLITE_IOERR_DIR_FSYNC,
            Failure::Truncate(_) => SQLITE_IOERR_TRUNCATE,
            Failure::Fstat(_) => SQLITE_IOERR_FSTAT,
            Failure::Inode(_) => SQLITE_IOERR,
            Failure::Lock(_) => SQLITE_IOERR_LOCK,
            Failure::Unlock(_) => SQLITE_IOERR_UNLOCK,
            Failure::RdLock(_) => SQLITE_IOERR_RDLOCK,
            Failure::CheckReservedLock(_) => SQLITE_IOERR_CHECKRESERVEDLOCK,
            Failure::Delete(_) => SQLITE_IOERR_DELETE,
            Failure::DeleteNoent => SQLITE_IOERR_DELETE_NOENT,
            Failure::CantOpen(_) => SQLITE_CANTOPEN,
            Failure::ReadonlyDirectory(_) => SQLITE_READONLY_DIRECTORY,
            Failure::ShmOpen(_) => SQLITE_IOERR_SHMOPEN,
            Failure::ShmSize(_) => SQLITE_IOERR_SHMSIZE,
            Failure::ShmMap(_) => SQLITE_IOERR_SHMMAP,
            Failure::ShmLock => SQLITE_IOERR_SHMLOCK,
            Failure::ReadonlyCantInit => SQLITE_READONLY_CANTINIT,
            Failure::Perm(_) => SQLITE_PERM,
            Failure::BadArgument => SQLITE_ERROR,
            Failure::Misuse => SQLITE_MISUSE,
            Failure::Internal => SQLITE_IOERR,
        }
    }

    /// The errno behind the failure; 0 when it is not a system error.
    pub(crate) fn errno(self) -> i32 {
        match self {
            Failure::Read(e)
            | Failure::CorruptFs(e)
            | Failure::Write(e)
            | Failure::Full(e)
            | Failure::Fsync(e)
            | Failure::DirFsync(e)
            | Failure::Truncate(e)
            | Failure::Fstat(e)
            | Failure::Inode(e)
            | Failure::Lock(e)
            | Failure::Unlock(e)
            | Failure::RdLock(e)
            | Failure::CheckReservedLock(e)
            | Failure::Delete(e)
            | Failure::CantOpen(e)
            | Failure::ReadonlyDirectory(e)
            | Failure::ShmOpen(e)
            | Failure::ShmSize(e)
            | Failure::ShmMap(e)
            | Failure::Perm(e) => e,
            _ => 0,
        }
    }

    /// Classifies a read errno as os_unix.c's unixRead does.
    pub(crate) fn from_read_errno(errno: i32) -> Failure {
        match errno {
            libc::ERANGE | libc::EIO | libc::ENXIO => Failure::CorruptFs(errno),
            _ => Failure::Read(errno),
        }
    }

    /// Classifies a write errno as os_unix.c unixWrite does: only ENOSPC is SQLITE_FULL
    /// (EDQUOT and EFBIG, e.g. RLIMIT_FSIZE, are SQLITE_IOERR_WRITE there too).
    pub(crate) fn from_write_errno(errno: i32) -> Failure {
        match errno {
            libc::ENOSPC => Failure::Full(errno),
            _ => Failure::Write(errno),
        }
    }

    /// Classifies a failed lock request as os_unix.c's sqliteErrorFromPosixError does:
    /// contention is SQLITE_BUSY, anything else the given I/O error.
    pub(crate) fn from_lock_errno(errno: i32, otherwise: fn(i32) -> Failure) -> Failure {
        match errno {
            libc::EACCES
            | libc::EAGAIN
            | libc::ETIMEDOUT
            | libc::EBUSY
            | libc::EINTR
            | libc::ENOLCK => Failure::Busy,
            libc::EPERM => Failure::Perm(errno),
            _ => otherwise(errno),
        }
    }
}
