//! The state every file of a registered VFS shares ([`VfsState`]: its name, SQLite's
//! function table, the `unix` VFS it delegates path operations to, its engine and
//! defaults, its counters), and the VFS-level I/O method, xDelete.

use std::ffi::CString;

use crate::api::SqliteApi;
use crate::config::{Backend, Submission, SyncMode};
use crate::error::Failure;
use crate::ffi::*;
use crate::io::{EngineKind, Routing, Submitter};
use crate::stats::SharedStats;
use crate::write_behind;

/// Everything a registered VFS needs; leaked at registration (SQLite keeps the pointer
/// for the life of the process) and reached from callbacks through `pAppData`.
pub(crate) struct VfsState {
    pub(crate) name: String,
    pub(crate) api: SqliteApi,
    /// SQLite's `unix` VFS: path operations (xAccess, xFullPathname, …) go there.
    pub(crate) parent: *mut sqlite3_vfs,
    pub(crate) engine: EngineKind,
    pub(crate) fallback_to_syscall: bool,
    pub(crate) sync_mode: SyncMode,
    /// Default of the `uring_direct` URI parameter.
    pub(crate) direct_io: bool,
    pub(crate) stats: SharedStats,
    /// What io_uring files of this VFS send through the ring unless their URI says
    /// otherwise (`Routing::from_options` of the registration options).
    pub(crate) routing: Routing,
    pub(crate) backend: Backend,
    pub(crate) read_submission: Submission,
    pub(crate) write_submission: Submission,
    pub(crate) sync_submission: Submission,
    /// Default of the `uring_sqpoll` URI parameter.
    pub(crate) sqpoll: bool,
    pub(crate) fallback_reason: Option<String>,
    pub(crate) c_name: CString,
}

// SAFETY: `parent` points to SQLite's static unix VFS, which SQLite allows to be used from
// any thread; everything else is immutable after registration or atomic (stats).
unsafe impl Send for VfsState {}
// SAFETY: as above.
unsafe impl Sync for VfsState {}

impl VfsState {
    /// xDelete: unlink, then sync the directory when SQLite asks (journal deletion is a
    /// commit point in DELETE mode).
    pub(crate) fn delete(&self, path: &str, sync_dir: bool) -> Result<(), Failure> {
        // A queued write of this file's database that failed unreported (e.g. at a
        // journal's xClose) must stop the journal from being deleted: it is what repairs
        // the database. Other databases' queues are not touched.
        write_behind::flush_for_delete(path)?;
        let c_path = CString::new(path).map_err(|_| Failure::Delete(libc::EINVAL))?;
        // SAFETY: `c_path` is NUL-terminated.
        if unsafe { crate::sys::calls::unlink(c_path.as_ptr()) } != 0 {
            let errno = crate::sys::last_errno();
            return Err(if errno == libc::ENOENT {
                Failure::DeleteNoent
            } else {
                Failure::Delete(errno)
            });
        }
        if sync_dir {
            let scratch = SharedStats::default();
            let mut io = Submitter {
                engine: &self.engine,
                file_stats: &scratch,
                vfs_stats: &self.stats,
            };
            match io.sync_directory_of(path, self.sync_mode == SyncMode::Fdatasync) {
                // os_unix.c: a directory that cannot be opened is not an error.
                Ok(()) | Err(Failure::CantOpen(_)) => {}
                Err(failure) => return Err(failure),
            }
        }
        Ok(())
    }
}
