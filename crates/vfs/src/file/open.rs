//! xOpen: the file's options from its URI, its engine, the mode and owner of a file it
//! creates, and temporary files, as os_unix.c unixOpen does them.

use std::ffi::{c_int, CString};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use crate::api::OpenName;
use crate::config::UriOptions;
use crate::direct::{DirectFile, WalDirect};
use crate::error::Failure;
use crate::ffi::*;
use crate::flush_point::{FlushPoints, FlushRole};
use crate::io::{EngineKind, FileRole};
use crate::lock::DbLock;
use crate::mmap::MemoryMap;
use crate::stats::SharedStats;
use crate::sys::{
    calls, give_created_mode, open_above_stdio, stat_path, DbFd, Filesystem, DEFAULT_FILE_MODE,
};
use crate::vfs::VfsState;
use crate::write_behind;

use super::{Descriptor, File, NEXT_FILE_ID};

/// A file's options: the VFS's defaults as its URI parameters change them.
struct FileOptions {
    engine: EngineKind,
    fallback_to_syscall: bool,
    sync_mode: crate::config::SyncMode,
    /// O_DIRECT for the main database's aligned I/O (see `direct.rs`).
    direct: bool,
    uri: UriOptions,
}

impl FileOptions {
    /// Reads this file's options from the URI parameters of `name` (a journal or WAL
    /// file sees its database's parameters); `file_type` is xOpen's SQLITE_OPEN_* type
    /// bits (`uring_direct` routes a main database and its rollback journal differently).
    fn read(
        vfs: &'static VfsState,
        name: OpenName<'_>,
        file_type: c_int,
    ) -> Result<FileOptions, String> {
        let api = &vfs.api;
        let keys = api.uri_keys(name);
        let uri = UriOptions::parse(&keys, |key| api.uri_parameter(name, key))?;
        let direct = uri.direct.unwrap_or(vfs.direct_io);
        let role = if file_type & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL) != 0 {
            FileRole::DatabaseOrJournal
        } else {
            FileRole::Other
        };
        Ok(FileOptions {
            engine: EngineKind::for_file(&vfs.engine, vfs.routing, &uri, direct, role),
            fallback_to_syscall: uri.fallback_to_syscall.unwrap_or(vfs.fallback_to_syscall),
            sync_mode: uri.sync_mode.unwrap_or(vfs.sync_mode),
            direct,
            uri,
        })
    }
}

/// What a file of xOpen's SQLITE_OPEN_* type is to its flush points.
fn flush_role(file_type: c_int) -> FlushRole {
    if file_type & SQLITE_OPEN_MAIN_DB != 0 {
        FlushRole::Database
    } else if file_type & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_TEMP_JOURNAL) != 0 {
        FlushRole::Journal
    } else if file_type & SQLITE_OPEN_WAL != 0 {
        FlushRole::Wal
    } else {
        FlushRole::Other
    }
}

/// Permissions of DELETEONCLOSE files (os_unix.c findCreateFileMode).
const PRIVATE_FILE_MODE: libc::mode_t = 0o600;

fn cstring(path: &str) -> Result<CString, Failure> {
    CString::new(path).map_err(|_| Failure::CantOpen(libc::EINVAL))
}

/// A fresh name for a temporary file, in the directory os_unix.c would use.
pub(crate) fn temp_file_name() -> String {
    temp_file_name_in(&temp_directory())
}

/// The directory for temporary files, as os_unix.c unixTempFileDir chooses it.
fn temp_directory() -> String {
    let candidates = [
        std::env::var("SQLITE_TMPDIR").ok(),
        std::env::var("TMPDIR").ok(),
        Some("/var/tmp".to_string()),
        Some("/usr/tmp".to_string()),
        Some("/tmp".to_string()),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|dir| {
            let Ok(c_dir) = CString::new(dir.as_str()) else {
                return false;
            };
            let is_dir =
                stat_path(dir).is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
            is_dir && calls::access(&c_dir, libc::W_OK | libc::X_OK) == 0
        })
        .unwrap_or_else(|| ".".to_string())
}

fn temp_file_name_in(directory: &str) -> String {
    let mut random = [0u8; 8];
    if !crate::sys::random_bytes(&mut random) {
        // Uniqueness, not secrecy, is what matters; O_EXCL catches a collision.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        random = (nanos ^ (std::process::id() as u64) << 32).to_le_bytes();
    }
    format!("{directory}/etilqs_{:016x}", u64::from_le_bytes(random))
}

impl File {
    /// Permission bits (and owner to copy when root) for a file about to be created, as
    /// os_unix.c findCreateFileMode chooses them: a journal's or WAL's database's, a
    /// delete-on-close file's 0600, or the `modeof=` file's. A database or `modeof=` file
    /// that cannot be stat()ed fails the open with SQLITE_IOERR_FSTAT, as there
    /// (getFileMode); a journal or WAL name with no `-` before its last `.` has no
    /// database to copy from (mode 0: the default).
    fn create_mode(
        vfs: &VfsState,
        path: &str,
        name: OpenName<'_>,
        flags: c_int,
    ) -> Result<(libc::mode_t, Option<(u32, u32)>), Failure> {
        let mode_of = |file: &str| match stat_path(file) {
            Some(st) => Ok((st.st_mode & 0o777, Some((st.st_uid, st.st_gid)))),
            None => Err(Failure::Fstat(crate::sys::last_errno())),
        };
        if flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL) != 0 {
            // The database is the name up to the last `-` after the last `.` (os_unix.c
            // scans back from the end, and never to the first byte).
            let bytes = path.as_bytes();
            let dash = (1..bytes.len())
                .rev()
                .take_while(|&at| bytes[at] != b'.')
                .find(|&at| bytes[at] == b'-');
            return match dash {
                Some(dash) => mode_of(&path[..dash]),
                None => Ok((0, None)),
            };
        }
        if flags & SQLITE_OPEN_DELETEONCLOSE != 0 {
            return Ok((PRIVATE_FILE_MODE, None));
        }
        match vfs.api.uri_parameter(name, c"modeof") {
            Some(model) => mode_of(&model),
            None => Ok((0, None)),
        }
    }

    /// xOpen. Returns the file and the flags SQLite should see (read-only when a
    /// read-write open fell back to read-only, as os_unix.c does).
    pub(crate) fn open(
        vfs: &'static VfsState,
        name: OpenName<'_>,
        flags: c_int,
    ) -> Result<(File, c_int), Failure> {
        let file_type = flags & 0x0FFF_FF00;
        let is_delete = flags & SQLITE_OPEN_DELETEONCLOSE != 0;
        let is_create = flags & SQLITE_OPEN_CREATE != 0;
        let is_exclusive = flags & SQLITE_OPEN_EXCLUSIVE != 0;
        let is_readwrite = flags & SQLITE_OPEN_READWRITE != 0;
        let is_new_journal = is_create
            && [
                SQLITE_OPEN_SUPER_JOURNAL,
                SQLITE_OPEN_MAIN_JOURNAL,
                SQLITE_OPEN_WAL,
            ]
            .contains(&(file_type & !SQLITE_OPEN_NOFOLLOW));
        // os_unix.c unixOpen: on Linux an anonymous temporary file is an O_TMPFILE inode
        // that never has a name, so no other process can open it and nothing is left to
        // unlink; a named file, unlinked at once, only where the filesystem refuses that.
        let mut unnamed_fd = None;
        let path = if let Some(path) = name.path() {
            path
        } else {
            // SQLite only opens anonymous files as temporary, delete-on-close files.
            assert!(is_delete, "xOpen with a NULL name must be DELETEONCLOSE");
            let directory = temp_directory();
            if let Ok(c_directory) = cstring(&directory) {
                let os_flags = libc::O_RDWR | libc::O_EXCL | libc::O_TMPFILE | libc::O_CLOEXEC;
                unnamed_fd = open_above_stdio(&c_directory, os_flags, PRIVATE_FILE_MODE).ok();
            }
            match &unnamed_fd {
                // Only for messages: the inode has no name.
                Some(_) => format!("{directory}/(O_TMPFILE)"),
                None => temp_file_name_in(&directory),
            }
        };

        let options = match FileOptions::read(vfs, name, file_type) {
            Ok(options) => options,
            Err(message) => {
                vfs.api.log(
                    SQLITE_CANTOPEN,
                    &format!("sqlite-uring: cannot open {path}: {message}"),
                );
                return Err(Failure::CantOpen(libc::EINVAL));
            }
        };
        let mut engine = options.engine;
        if let Err(reason) = engine.ensure_available() {
            if options.fallback_to_syscall {
                vfs.api.log(
                    SQLITE_WARNING,
                    &format!("sqlite-uring: {path}: io_uring unavailable, using plain syscalls as requested: {reason}"),
                );
                engine = EngineKind::Syscall;
            } else {
                vfs.api.log(
                    SQLITE_CANTOPEN,
                    &format!("sqlite-uring: cannot open {path}: {reason}"),
                );
                return Err(Failure::CantOpen(libc::ENOSYS));
            }
        }

        let mut os_flags = libc::O_CLOEXEC
            | if is_readwrite {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            };
        if is_create {
            os_flags |= libc::O_CREAT;
        }
        if is_exclusive {
            os_flags |= libc::O_EXCL;
        }
        // os_unix.c unixOpen opens every file O_NOFOLLOW, whatever SQLITE_OPEN_NOFOLLOW
        // says: the main database's name has had its symlinks resolved by xFullPathname
        // already, so a symlink here is one planted at a journal, WAL or temp-file name.
        os_flags |= libc::O_NOFOLLOW;
        let (mode, owner) = File::create_mode(vfs, &path, name, flags)?;
        let c_path = cstring(&path)?;
        let mut out_flags = flags;
        let effective_mode = if mode == 0 { DEFAULT_FILE_MODE } else { mode };
        let open = |os_flags: c_int| open_above_stdio(&c_path, os_flags, effective_mode);
        let is_unnamed = unnamed_fd.is_some();
        let fd = match unnamed_fd.map_or_else(|| open(os_flags), Ok) {
            Ok(fd) => fd,
            Err(errno) => {
                // Every failed open is logged as os_unix.c unixOpen logs it: "open", the
                // name, and the errno left by the last call made (for a journal in a
                // directory we may not write, that of the access(2) that found no file).
                let log_open = |errno| vfs.api.log_os_error(SQLITE_CANTOPEN, "open", &path, errno);
                if is_new_journal
                    && errno == libc::EACCES
                    && calls::access(&c_path, libc::F_OK) != 0
                {
                    log_open(crate::sys::last_errno());
                    return Err(Failure::ReadonlyDirectory(errno));
                }
                if errno != libc::EISDIR && is_readwrite {
                    // os_unix.c: a database we may not write is opened read-only.
                    let readonly = (os_flags & !(libc::O_RDWR | libc::O_CREAT)) | libc::O_RDONLY;
                    out_flags = (flags & !(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE))
                        | SQLITE_OPEN_READONLY;
                    open(readonly).map_err(|errno| {
                        log_open(errno);
                        Failure::CantOpen(errno)
                    })?
                } else {
                    log_open(errno);
                    return Err(Failure::CantOpen(errno));
                }
            }
        };
        give_created_mode(fd.as_fd(), mode);
        if let Some((uid, gid)) = owner {
            // As root, a new journal or WAL must stay usable by the database's owner.
            if calls::geteuid() == 0 && flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL) != 0 {
                let _ = calls::fchown(fd.as_raw_fd(), uid, gid);
            }
        }
        // With everything routed to syscalls already (the default) there is nothing to
        // decide, and a rollback transaction opens its journal anew each time: the
        // fstatfs is only made when the answer matters.
        let engine = engine.for_filesystem(|| Filesystem::of_fd(fd.as_fd()).ok());
        let direct = if options.direct && file_type & SQLITE_OPEN_MAIN_DB != 0 {
            match DirectFile::open(&c_path, out_flags & SQLITE_OPEN_READWRITE != 0) {
                Ok(direct) => Some(direct),
                Err(why) => {
                    vfs.api.log(
                        SQLITE_CANTOPEN,
                        &format!(
                            "sqlite-uring: cannot open {path}: {}",
                            why.describe("uring_direct")
                        ),
                    );
                    // A main database's descriptor.
                    DbFd::from(fd).close(|errno| {
                        vfs.api
                            .log_os_error(SQLITE_IOERR_CLOSE, "close", &path, errno)
                    });
                    return Err(Failure::CantOpen(why.errno()));
                }
            }
        } else {
            None
        };
        // A WAL's synced commits may go O_DIRECT (`uring_wal_direct=on`). It writes
        // write-behind's flushes: `UriOptions::parse` refuses it without write-behind.
        debug_assert!(!options.uri.wal_direct || options.uri.write_behind);
        let wal_direct = if options.uri.wal_direct
            && file_type & SQLITE_OPEN_WAL != 0
            && out_flags & SQLITE_OPEN_READWRITE != 0
        {
            match WalDirect::open(&c_path) {
                Ok(wal) => Some(std::sync::Arc::new(std::sync::Mutex::new(wal))),
                Err(why) => {
                    vfs.api.log(
                        SQLITE_CANTOPEN,
                        &format!(
                            "sqlite-uring: cannot open {path}: {}",
                            why.describe("uring_wal_direct")
                        ),
                    );
                    // A WAL descriptor carries no lock of the process.
                    if let Err(errno) = fd.close() {
                        vfs.api
                            .log_os_error(SQLITE_IOERR_CLOSE, "close", &path, errno);
                    }
                    return Err(Failure::CantOpen(why.errno()));
                }
            }
        } else {
            None
        };
        // A main database is fstat()ed once here to find its inode, as os_unix.c
        // findInodeInfo does for every main database, `nolock=1` or not: the inode keys
        // the process's lock state of the file and is what `has_moved` compares the path
        // with. Its failure fails the open with a plain SQLITE_IOERR (findInodeInfo's
        // code), not SQLITE_CANTOPEN, and the descriptor is closed.
        let is_main_db = file_type & SQLITE_OPEN_MAIN_DB != 0;
        let (descriptor, lock, identity) = if is_main_db {
            // A database's descriptor closes only without dropping the process's POSIX
            // locks on the file.
            let fd = DbFd::from(fd);
            match crate::sys::fstat(fd.as_fd()) {
                Ok(st) => {
                    let fd = Arc::new(fd);
                    // Only a main database is locked; SQLite's tests move the pending
                    // byte before opening any (moving it with a database open is
                    // undefined behaviour).
                    let lock = if options.uri.nolock {
                        DbLock::new(vfs.api.pending_byte())
                    } else {
                        DbLock::attach(
                            &fd,
                            &st,
                            out_flags & SQLITE_OPEN_READWRITE != 0,
                            vfs.api.pending_byte(),
                        )
                    };
                    (Descriptor::Database(fd), lock, Some((st.st_dev, st.st_ino)))
                }
                Err(errno) => {
                    let failed_close = |errno| {
                        vfs.api
                            .log_os_error(SQLITE_IOERR_CLOSE, "close", &path, errno)
                    };
                    if let Some(direct) = direct {
                        direct.fd.close(failed_close);
                    }
                    fd.close(failed_close);
                    return Err(Failure::Inode(errno));
                }
            }
        } else {
            (
                Descriptor::Other(fd),
                DbLock::new(crate::api::DEFAULT_PENDING_BYTE),
                None,
            )
        };
        if is_delete && !is_unnamed {
            // Unlinking now means even a crash cannot leave the file behind.
            calls::unlink(&c_path);
        }
        let id = NEXT_FILE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A main database, its journal and its WAL share a queue (SQLite orders writes
        // between them); any other file — temporary, transient, a super-journal — is
        // ordered against nothing else through the queue and gets one of its own.
        let database = if name.is_null() || is_delete {
            None
        } else if file_type & SQLITE_OPEN_MAIN_DB != 0 {
            Some(path.as_str())
        } else if file_type & SQLITE_OPEN_MAIN_JOURNAL != 0 {
            path.strip_suffix("-journal")
        } else if file_type & SQLITE_OPEN_WAL != 0 {
            path.strip_suffix("-wal")
        } else {
            None
        };
        let queue = match database {
            Some(database) => write_behind::queue_for_database(database),
            None => write_behind::private_queue(id),
        };
        // Read-ahead follows a main database's B-trees through the page cache; an
        // O_DIRECT database bypasses that cache and keeps its own sequential window.
        let readahead = (file_type & SQLITE_OPEN_MAIN_DB != 0
            && direct.is_none()
            && options.uri.readahead.unwrap_or(vfs.readahead))
        .then(|| Box::new(crate::readahead::ReadAhead::dormant()));
        let file = File {
            vfs,
            id,
            queue: Some(queue),
            descriptor,
            carries_locks: file_type & SQLITE_OPEN_MAIN_DB != 0,
            write_behind: options.uri.write_behind,
            flush_points: FlushPoints::new(flush_role(file_type)),
            sync_plan: options.uri.sync_plan,
            wal_direct,
            path: (!name.is_null()).then_some(path),
            direct,
            engine,
            sync_mode: options.sync_mode,
            lock,
            nolock: options.uri.nolock,
            psow: options.uri.psow,
            persist_wal: false,
            readonly_shm: options.uri.readonly_shm,
            dir_sync_pending: is_new_journal,
            chunk_size_bytes: 0,
            last_errno: 0,
            private: is_delete,
            cached_size_bytes: None,
            identity,
            stats: std::sync::Arc::new(SharedStats::default()),
            shm: None,
            mmap: MemoryMap::new(0, vfs.mmap_eof_buffer_bytes),
            readahead,
            prefetch_fd: super::PrefetchFd::NotYet,
        };
        file.verify_db_file();
        Ok((file, out_flags))
    }

    /// os_unix.c verifyDbFile, made when a main database has been opened and when it is
    /// closed: one fstat of its descriptor, and a warning in SQLite's log
    /// (SQLITE_WARNING) when that fails, when the file has no link or more than one, or
    /// when its path names another file now. Nothing fails; other files are not checked.
    pub(crate) fn verify_db_file(&self) {
        if !self.carries_locks {
            return;
        }
        let path = self.path.as_deref().unwrap_or("");
        let warn = |what: &str| self.vfs.api.log(SQLITE_WARNING, &format!("{what} {path}"));
        let Ok(st) = self.fstat() else {
            return warn("cannot fstat db file");
        };
        if st.st_nlink == 0 {
            warn("file unlinked while open:");
        } else if st.st_nlink > 1 {
            warn("multiple links to file:");
        } else if self.identity.is_some_and(|identity| {
            stat_path(path).is_none_or(|now| (now.st_dev, now.st_ino) != identity)
        }) {
            warn("file renamed while open:");
        }
    }
}
