//! xOpen: the file's options from its URI, its engine, the mode and owner of a file it
//! creates, and temporary files, as os_unix.c unixOpen does them. `File::open` runs the
//! steps in os_unix.c's order: xOpen's flags decoded (`OpenFlags`), the path or an
//! anonymous temporary file (`path_or_anonymous`), the options and an engine that can
//! run (`FileOptions::for_open`), the mode of a new file (`File::create_mode`), the
//! descriptor with its read-only fallback (`open_descriptor`), the O_DIRECT descriptors
//! (`open_direct_sides`), the descriptor's owner and lock state (`attach_descriptor`),
//! and the write-behind queue (`queue_of`).

use std::ffi::{c_int, CStr, CString};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use crate::config::UriOptions;
use crate::direct::{DirectFile, DirectOpenError, WalDirect};
use crate::error::Failure;
use crate::ffi::*;
use crate::flush_point::{FlushPoints, FlushRole};
use crate::io::{EngineKind, FileRole};
use crate::lock::DbLock;
use crate::mmap::MemoryMap;
use crate::open_name::OpenName;
use crate::stats::{ReadCounts, SharedStats};
use crate::sys::{
    calls, give_created_mode, open_above_stdio, open_reusing_parked, stat_c_path, stat_path,
    with_c_prefix, DbFd, Fd, FilePath, Filesystem, Reuse, DEFAULT_FILE_MODE,
};
use crate::vfs::VfsState;
use crate::write_behind;

use super::{
    Descriptor, DeviceReadDurations, DirectSides, File, PrefetchFd, ReadAheadSide, Settings,
    SizeCache, NEXT_FILE_ID,
};

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
        name: &OpenName,
        file_type: c_int,
    ) -> Result<FileOptions, String> {
        let uri = UriOptions::parse(&name.uri)?;
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

    /// The options of the file xOpen opens at `path`, with an engine that can run: a
    /// URI parameter SQLite cannot use, or io_uring unavailable without
    /// `uring_fallback=syscall`, fails the open with the reason in SQLite's log.
    fn for_open(
        vfs: &'static VfsState,
        name: &OpenName,
        file_type: c_int,
        path: &str,
    ) -> Result<FileOptions, Failure> {
        let mut options = match FileOptions::read(vfs, name, file_type) {
            Ok(options) => options,
            Err(message) => {
                vfs.api.log(
                    SQLITE_CANTOPEN,
                    &format!("sqlite-uring: cannot open {path}: {message}"),
                );
                return Err(Failure::CantOpen(libc::EINVAL));
            }
        };
        if let Err(reason) = options.engine.ensure_available() {
            if options.fallback_to_syscall {
                vfs.api.log(
                    SQLITE_WARNING,
                    &format!("sqlite-uring: {path}: io_uring unavailable, using plain syscalls as requested: {reason}"),
                );
                options.engine = EngineKind::Syscall;
            } else {
                vfs.api.log(
                    SQLITE_CANTOPEN,
                    &format!("sqlite-uring: cannot open {path}: {reason}"),
                );
                return Err(Failure::CantOpen(libc::ENOSYS));
            }
        }
        Ok(options)
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

/// xOpen's flags, decoded once.
struct OpenFlags {
    flags: c_int,
    /// The SQLITE_OPEN_* type bits (main database, journal, WAL, …).
    file_type: c_int,
    is_delete: bool,
    is_create: bool,
    is_exclusive: bool,
    is_readwrite: bool,
    /// A journal or WAL being created: its first xSync also syncs its directory.
    is_new_journal: bool,
}

impl OpenFlags {
    fn decode(flags: c_int) -> OpenFlags {
        let file_type = flags & 0x0FFF_FF00;
        let is_create = flags & SQLITE_OPEN_CREATE != 0;
        OpenFlags {
            flags,
            file_type,
            is_delete: flags & SQLITE_OPEN_DELETEONCLOSE != 0,
            is_create,
            is_exclusive: flags & SQLITE_OPEN_EXCLUSIVE != 0,
            is_readwrite: flags & SQLITE_OPEN_READWRITE != 0,
            is_new_journal: is_create
                && [
                    SQLITE_OPEN_SUPER_JOURNAL,
                    SQLITE_OPEN_MAIN_JOURNAL,
                    SQLITE_OPEN_WAL,
                ]
                .contains(&(file_type & !SQLITE_OPEN_NOFOLLOW)),
        }
    }

    /// Whether the file is of one of these SQLITE_OPEN_* types.
    fn is(&self, types: c_int) -> bool {
        self.file_type & types != 0
    }

    /// open(2)'s flags.
    fn os_flags(&self) -> c_int {
        let mut os_flags = libc::O_CLOEXEC
            | if self.is_readwrite {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            };
        if self.is_create {
            os_flags |= libc::O_CREAT;
        }
        if self.is_exclusive {
            os_flags |= libc::O_EXCL;
        }
        // os_unix.c unixOpen opens every file O_NOFOLLOW, whatever SQLITE_OPEN_NOFOLLOW
        // says: the main database's name has had its symlinks resolved by xFullPathname
        // already, so a symlink here is one planted at a journal, WAL or temp-file name.
        os_flags | libc::O_NOFOLLOW
    }
}

/// The file's path, or for an anonymous file a temporary one's. os_unix.c unixOpen: on
/// Linux an anonymous temporary file is an O_TMPFILE inode that never has a name
/// (returned open), so no other process can open it and nothing is left to unlink; a
/// named file, unlinked at once, only where the filesystem refuses that.
fn path_or_anonymous(
    path: Option<FilePath>,
    open: &OpenFlags,
) -> Result<(FilePath, Option<Fd>), Failure> {
    if let Some(path) = path {
        return Ok((path, None));
    }
    // SQLite only opens anonymous files as temporary, delete-on-close files.
    assert!(
        open.is_delete,
        "xOpen with a NULL name must be DELETEONCLOSE"
    );
    let directory = temp_directory();
    let mut unnamed_fd = None;
    if let Ok(c_directory) = cstring(&directory) {
        let os_flags = libc::O_RDWR | libc::O_EXCL | libc::O_TMPFILE | libc::O_CLOEXEC;
        unnamed_fd = open_above_stdio(&c_directory, os_flags, PRIVATE_FILE_MODE).ok();
    }
    let path = match &unnamed_fd {
        // Only for messages: the inode has no name.
        Some(_) => format!("{directory}/(O_TMPFILE)"),
        None => temp_file_name_in(&directory),
    };
    // The directory came from a NUL-terminated string (an environment variable or a
    // constant), so the name has no NUL either.
    let path = FilePath::new(&path).ok_or(Failure::CantOpen(libc::EINVAL))?;
    Ok((path, unnamed_fd))
}

/// Opens the file's descriptor (or takes the O_TMPFILE one already open). Returns it
/// and the flags SQLite should see: a database we may not write is opened read-only.
fn open_descriptor(
    vfs: &VfsState,
    path: &str,
    c_path: &CStr,
    open: &OpenFlags,
    mode: libc::mode_t,
    unnamed_fd: Option<Fd>,
) -> Result<(Fd, c_int), Failure> {
    let os_flags = open.os_flags();
    let effective_mode = if mode == 0 { DEFAULT_FILE_MODE } else { mode };
    // A main database may take back a descriptor of the file parked at a close.
    let open_with = |os_flags: c_int| {
        if open.is(SQLITE_OPEN_MAIN_DB) {
            open_reusing_parked(c_path, os_flags, effective_mode)
        } else {
            open_above_stdio(c_path, os_flags, effective_mode)
        }
    };
    let errno = match unnamed_fd.map_or_else(|| open_with(os_flags), Ok) {
        Ok(fd) => return Ok((fd, open.flags)),
        Err(errno) => errno,
    };
    // Every failed open is logged as os_unix.c unixOpen logs it: "open", the name, and
    // the errno left by the last call made (for a journal in a directory we may not
    // write, that of the access(2) that found no file).
    let log_open = |errno| vfs.api.log_os_error(SQLITE_CANTOPEN, "open", path, errno);
    if open.is_new_journal && errno == libc::EACCES && calls::access(c_path, libc::F_OK) != 0 {
        log_open(crate::sys::last_errno());
        return Err(Failure::ReadonlyDirectory(errno));
    }
    if errno != libc::EISDIR && open.is_readwrite {
        // os_unix.c: a database we may not write is opened read-only.
        let readonly = (os_flags & !(libc::O_RDWR | libc::O_CREAT)) | libc::O_RDONLY;
        let out_flags =
            (open.flags & !(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
        let fd = open_with(readonly).map_err(|errno| {
            log_open(errno);
            Failure::CantOpen(errno)
        })?;
        Ok((fd, out_flags))
    } else {
        log_open(errno);
        Err(Failure::CantOpen(errno))
    }
}

/// A file's O_DIRECT descriptors, as opened (at most one of them).
struct DirectDescriptors {
    /// A main database's (`direct.rs`, `DirectFile`).
    database: Option<DirectFile>,
    /// A WAL's, which the write-behind queue will own and flush through.
    wal: Option<WalDirect>,
}

/// The file's descriptor, owned as its kind of file requires, with the process's lock
/// state of the file and its `(st_dev, st_ino)` (a main database's only).
struct Attached {
    descriptor: Descriptor,
    lock: DbLock,
    identity: Option<(u64, u64)>,
}

/// The O_DIRECT descriptors of a file opened with them: a main database's
/// (`uring_direct=on`) or a writable WAL's (`uring_wal_direct=on`). A failure is logged
/// with its cause; the caller closes the file's descriptor.
fn open_direct_sides(
    vfs: &VfsState,
    path: &str,
    c_path: &CStr,
    open: &OpenFlags,
    direct: bool,
    uri: &UriOptions,
    writable: bool,
) -> Result<DirectDescriptors, Failure> {
    let refused = |why: DirectOpenError, parameter: &str| {
        vfs.api.log(
            SQLITE_CANTOPEN,
            &format!(
                "sqlite-uring: cannot open {path}: {}",
                why.describe(parameter)
            ),
        );
        Failure::CantOpen(why.errno())
    };
    let direct = if direct && open.is(SQLITE_OPEN_MAIN_DB) {
        let direct =
            DirectFile::open(c_path, writable).map_err(|why| refused(why, "uring_direct"))?;
        Some(direct)
    } else {
        None
    };
    // A WAL's synced commits may go O_DIRECT (`uring_wal_direct=on`). It writes
    // write-behind's flushes: `UriOptions::parse` refuses it without write-behind.
    debug_assert!(!uri.wal_direct || uri.write_behind);
    let wal_direct = if uri.wal_direct && open.is(SQLITE_OPEN_WAL) && writable {
        let wal = WalDirect::open(c_path).map_err(|why| refused(why, "uring_wal_direct"))?;
        Some(wal)
    } else {
        None
    };
    Ok(DirectDescriptors {
        database: direct,
        wal: wal_direct,
    })
}

/// Closes the descriptor of a file whose open failed before it was attached, logging a
/// failed close under its name.
fn close_unattached(vfs: &VfsState, path: &str, fd: Fd, is_main_db: bool) {
    let failed_close = |errno| {
        vfs.api
            .log_os_error(SQLITE_IOERR_CLOSE, "close", path, errno)
    };
    if is_main_db {
        // A main database's descriptor.
        DbFd::reusable(fd, Reuse::Open).close(failed_close);
    } else if let Err(errno) = fd.close() {
        // Nobody locks any other file's.
        failed_close(errno);
    }
}

/// Attaches the file's descriptor to what owns it. A main database is fstat()ed once
/// here to find its inode, as os_unix.c findInodeInfo does for every main database,
/// `nolock=1` or not: the inode keys the process's lock state of the file and is what
/// `has_moved` compares the path with. Its failure fails the open with a plain
/// SQLITE_IOERR (findInodeInfo's code), not SQLITE_CANTOPEN, and the descriptors
/// (`direct`'s too) are closed.
fn attach_descriptor(
    vfs: &VfsState,
    path: &str,
    fd: Fd,
    open: &OpenFlags,
    nolock: bool,
    writable: bool,
    direct: &mut Option<DirectFile>,
) -> Result<Attached, Failure> {
    if !open.is(SQLITE_OPEN_MAIN_DB) {
        return Ok(Attached {
            descriptor: Descriptor::Other(fd),
            lock: DbLock::new(crate::api::DEFAULT_PENDING_BYTE),
            identity: None,
        });
    }
    // A database's descriptor closes only without dropping the process's POSIX locks on
    // the file; parked, a later open of the file may take it back.
    let fd = DbFd::reusable(fd, Reuse::Open);
    match crate::sys::fstat(fd.as_fd()) {
        Ok(st) => {
            let fd = Arc::new(fd);
            // Only a main database is locked; SQLite's tests move the pending byte
            // before opening any (moving it with a database open is undefined
            // behaviour).
            let lock = if nolock {
                DbLock::new(vfs.api.pending_byte())
            } else {
                DbLock::attach(&fd, &st, writable, vfs.api.pending_byte())
            };
            Ok(Attached {
                descriptor: Descriptor::Database(fd),
                lock,
                identity: Some((st.st_dev, st.st_ino)),
            })
        }
        Err(errno) => {
            let failed_close = |errno| {
                vfs.api
                    .log_os_error(SQLITE_IOERR_CLOSE, "close", path, errno)
            };
            if let Some(direct) = direct.take() {
                direct.fd.close(failed_close);
            }
            fd.close(failed_close);
            Err(Failure::Inode(errno))
        }
    }
}

/// The write-behind queue of the file. A main database, its journal and its WAL share a
/// queue (SQLite orders writes between them); any other file — temporary, transient, a
/// super-journal — is ordered against nothing else through the queue and gets one of
/// its own.
fn queue_of(named: bool, open: &OpenFlags, path: &str, id: u64) -> Arc<write_behind::Queue> {
    let database = if !named || open.is_delete {
        None
    } else if open.is(SQLITE_OPEN_MAIN_DB) {
        Some(path)
    } else if open.is(SQLITE_OPEN_MAIN_JOURNAL) {
        path.strip_suffix("-journal")
    } else if open.is(SQLITE_OPEN_WAL) {
        path.strip_suffix("-wal")
    } else {
        None
    };
    match database {
        Some(database) => write_behind::queue_for_database(database),
        None => write_behind::private_queue(id),
    }
}

impl File {
    /// Permission bits (and owner to copy when root) for a file about to be created, as
    /// os_unix.c findCreateFileMode chooses them: a journal's or WAL's database's, a
    /// delete-on-close file's 0600, or the `modeof=` file's. A database or `modeof=` file
    /// that cannot be stat()ed fails the open with SQLITE_IOERR_FSTAT, as there
    /// (getFileMode); a journal or WAL name with no `-` before its last `.` has no
    /// database to copy from (mode 0: the default).
    fn create_mode(
        path: &FilePath,
        name: &OpenName,
        flags: c_int,
    ) -> Result<(libc::mode_t, Option<(u32, u32)>), Failure> {
        let mode_of = |stat: Option<libc::stat>| match stat {
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
                Some(dash) => mode_of(with_c_prefix(path.as_c_str(), dash, stat_c_path)),
                None => Ok((0, None)),
            };
        }
        if flags & SQLITE_OPEN_DELETEONCLOSE != 0 {
            return Ok((PRIVATE_FILE_MODE, None));
        }
        match name.uri.get("modeof") {
            Some(model) => mode_of(stat_path(model)),
            None => Ok((0, None)),
        }
    }

    /// xOpen. Returns the file and the flags SQLite should see (read-only when a
    /// read-write open fell back to read-only, as os_unix.c does).
    pub(crate) fn open(
        vfs: &'static VfsState,
        mut name: OpenName,
        flags: c_int,
    ) -> Result<(File, c_int), Failure> {
        let open = OpenFlags::decode(flags);
        if open.is(SQLITE_OPEN_MAIN_DB) {
            // Its descriptors close only once `unix`'s lock requests wait for the close.
            vfs.parent.gate_lock_requests();
        }
        let named = name.path.is_some();
        let (path, unnamed_fd) = path_or_anonymous(name.path.take(), &open)?;
        let options = FileOptions::for_open(vfs, &name, open.file_type, &path)?;
        let (mode, owner) = File::create_mode(&path, &name, flags)?;
        let c_path = path.as_c_str();
        let is_unnamed = unnamed_fd.is_some();
        let (fd, out_flags) = open_descriptor(vfs, &path, c_path, &open, mode, unnamed_fd)?;
        give_created_mode(fd.as_fd(), mode);
        if let Some((uid, gid)) = owner {
            // As root, a new journal or WAL must stay usable by the database's owner.
            if calls::geteuid() == 0 && open.is(SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL) {
                let _ = calls::fchown(fd.as_raw_fd(), uid, gid);
            }
        }
        // With everything routed to syscalls already (the default) there is nothing to
        // decide, and a rollback transaction opens its journal anew each time: the
        // fstatfs is only made when the answer matters.
        let engine = options
            .engine
            .for_filesystem(|| Filesystem::of_fd(fd.as_fd()).ok());
        let writable = out_flags & SQLITE_OPEN_READWRITE != 0;
        let DirectDescriptors {
            database: mut direct,
            wal: wal_direct,
        } = match open_direct_sides(
            vfs,
            &path,
            c_path,
            &open,
            options.direct,
            &options.uri,
            writable,
        ) {
            Ok(sides) => sides,
            Err(failure) => {
                close_unattached(vfs, &path, fd, open.is(SQLITE_OPEN_MAIN_DB));
                return Err(failure);
            }
        };
        let Attached {
            descriptor,
            lock,
            identity,
        } = attach_descriptor(
            vfs,
            &path,
            fd,
            &open,
            options.uri.nolock,
            writable,
            &mut direct,
        )?;
        if open.is_delete && !is_unnamed {
            // Unlinking now means even a crash cannot leave the file behind.
            calls::unlink(c_path);
        }
        let id = NEXT_FILE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let queue = queue_of(named, &open, &path, id);
        let has_wal_direct = wal_direct.is_some();
        if let Some(wal_direct) = wal_direct {
            // Its flushes, whichever thread makes them, go through it: the queue owns it.
            queue.adopt_wal_direct(id, wal_direct);
        }
        // Read-ahead follows a main database's B-trees through the page cache; an
        // O_DIRECT database bypasses that cache and keeps its own sequential window.
        let readahead = (open.is(SQLITE_OPEN_MAIN_DB)
            && direct.is_none()
            && options.uri.readahead.unwrap_or(vfs.readahead))
        .then(|| {
            Box::new(ReadAheadSide {
                btree: crate::readahead::ReadAhead::dormant(),
                prefetch_fd: PrefetchFd::NotYet,
                nowait_probe: true,
                device_read: DeviceReadDurations::MEASURED,
            })
        });
        let file = File {
            vfs,
            id,
            path: named.then_some(path),
            descriptor,
            identity,
            lock,
            queue: Some(queue),
            flush_points: FlushPoints::new(flush_role(open.file_type)),
            settings: Settings {
                carries_locks: open.is(SQLITE_OPEN_MAIN_DB),
                engine,
                sync_mode: options.sync_mode,
                sync_plan: options.uri.sync_plan,
                write_behind: options.uri.write_behind,
                nolock: options.uri.nolock,
                psow: options.uri.psow,
                persist_wal: false,
                readonly_shm: options.uri.readonly_shm,
                chunk_size_bytes: 0,
            },
            dir_sync_pending: open.is_new_journal,
            last_errno: 0,
            size: SizeCache {
                private: open.is_delete,
                bytes: None,
            },
            stats: Arc::new(SharedStats::default()),
            reads: None,
            reads_at_reset: ReadCounts::default(),
            shm: None,
            mmap: MemoryMap::new(0, vfs.mmap_eof_buffer_bytes),
            readahead,
            direct: DirectSides {
                database: direct,
                wal: has_wal_direct,
            },
        };
        file.verify_db_file();
        Ok((file, out_flags))
    }

    /// os_unix.c verifyDbFile, made when a main database has been opened and when it is
    /// closed: one fstat of its descriptor, and a warning in SQLite's log
    /// (SQLITE_WARNING) when that fails, when the file has no link or more than one, or
    /// when its path names another file now. Nothing fails; other files are not checked.
    pub(crate) fn verify_db_file(&self) {
        if !self.settings.carries_locks {
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
            let now = self.path.as_ref().and_then(|p| stat_c_path(p.as_c_str()));
            now.is_none_or(|now| (now.st_dev, now.st_ino) != identity)
        }) {
            warn("file renamed while open:");
        }
    }
}
