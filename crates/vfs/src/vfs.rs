//! The state every file of a registered VFS shares ([`VfsState`]: its name, SQLite's
//! function table, the `unix` VFS it delegates path operations to, its engine and
//! defaults, its counters), and the VFS-level I/O method, xDelete.

use std::ffi::{CStr, CString};
use std::os::fd::AsRawFd;

use crate::api::{FoundVfs, SqliteApi};
use crate::config::{Backend, Submission, SyncMode};
use crate::error::Failure;
use crate::ffi::*;
use crate::io::{EngineKind, Routing, Submitter};
use crate::stats::{SharedStats, VfsStats};
use crate::sys::calls;
use crate::write_behind;

/// Everything a registered VFS needs; leaked at registration (SQLite keeps the pointer
/// for the life of the process) and reached from callbacks through `pAppData`.
pub(crate) struct VfsState {
    pub(crate) name: String,
    pub(crate) api: SqliteApi,
    /// SQLite's `unix` VFS: path operations (xAccess, xFullPathname, …) go there.
    pub(crate) parent: FoundVfs,
    pub(crate) engine: EngineKind,
    pub(crate) fallback_to_syscall: bool,
    pub(crate) sync_mode: SyncMode,
    /// Default of the `uring_direct` URI parameter.
    pub(crate) direct_io: bool,
    pub(crate) stats: VfsStats,
    /// What io_uring files of this VFS send through the ring unless their URI says
    /// otherwise (`Routing::from_options` of the registration options).
    pub(crate) routing: Routing,
    pub(crate) backend: Backend,
    pub(crate) read_submission: Submission,
    pub(crate) write_submission: Submission,
    pub(crate) sync_submission: Submission,
    /// Default of the `uring_sqpoll` URI parameter.
    pub(crate) sqpoll: bool,
    /// Default of the `uring_readahead` URI parameter.
    pub(crate) readahead: bool,
    pub(crate) fallback_reason: Option<String>,
    /// Mapped bytes xFetch requires past a page, as the `unix` VFS of the running SQLite
    /// does (`mmap::eof_buffer_bytes`).
    pub(crate) mmap_eof_buffer_bytes: i64,
    pub(crate) c_name: CString,
}

impl VfsState {
    /// xDelete: unlink, then sync the directory when SQLite asks (journal deletion is a
    /// commit point in DELETE mode).
    /// `path` is `c_path` as text (both SQLite's name, decoded once at the edge).
    pub(crate) fn delete(&self, path: &str, c_path: &CStr, sync_dir: bool) -> Result<(), Failure> {
        debug_assert_eq!(path.as_bytes(), c_path.to_bytes());
        // A queued write of this file's database that failed unreported (e.g. at a
        // journal's xClose) must stop the journal from being deleted: it is what repairs
        // the database. Other databases' queues are not touched.
        write_behind::flush_for_delete(path)?;
        if calls::unlink(c_path) != 0 {
            let errno = crate::sys::last_errno();
            if errno == libc::ENOENT {
                return Err(Failure::DeleteNoent);
            }
            self.api
                .log_os_error(SQLITE_IOERR_DELETE, "unlink", path, errno);
            return Err(Failure::Delete(errno));
        }
        if sync_dir {
            let scratch = SharedStats::default();
            let mut io = Submitter {
                engine: &self.engine,
                file_stats: &scratch,
                vfs_stats: &self.stats.totals,
            };
            // As os_unix.c unixDelete: a directory that cannot be opened is logged (by
            // the default openDirectory) and is not an error of the delete; a failed fsync
            // is, logged under the deleted file's name; a failed close is logged.
            let dir_fd = match crate::sys::open_directory_of(c_path) {
                Ok(fd) => fd,
                Err(errno) => {
                    if !calls::is_replaced(c"openDirectory") {
                        self.api.log_os_error(
                            SQLITE_CANTOPEN,
                            "openDirectory",
                            &crate::sys::directory_of(path),
                            errno,
                        );
                    }
                    return Ok(());
                }
            };
            let synced = io.sync(dir_fd.as_raw_fd(), self.sync_mode == SyncMode::Fdatasync);
            if let Err(errno) = synced {
                self.api
                    .log_os_error(SQLITE_IOERR_DIR_FSYNC, "fsync", path, errno);
            }
            if let Err(errno) = dir_fd.close() {
                self.api
                    .log_os_error(SQLITE_IOERR_CLOSE, "close", "", errno);
            }
            synced.map_err(Failure::DirFsync)?;
        }
        Ok(())
    }
}
