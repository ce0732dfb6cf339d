//! Typed errors of the library, mapped once to SQLite result codes.

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
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::IoUringUnavailable(why) => write!(f, "io_uring is unavailable: {why}"),
            Error::InvalidOption(why) => write!(f, "invalid sqlite-uring option: {why}"),
            Error::RegistrationFailed { vfs_name, sqlite_code } => write!(
                f,
                "sqlite3_vfs_register(\"{vfs_name}\") failed with SQLite code {sqlite_code}"
            ),
            Error::NoParentVfs => write!(
                f,
                "SQLite has no \"unix\" VFS to delegate path operations to (is this Linux?)"
            ),
        }
    }
}

impl std::error::Error for Error {}
