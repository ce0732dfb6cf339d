//! One open file of the VFS: what SQLite's `sqlite3_io_methods` do, in safe Rust.
//!
//! `entry.rs` converts the C arguments and calls these methods; nothing here knows about
//! C pointers except the few file controls whose argument types SQLite defines. All file
//! I/O goes through a [`Submitter`] over the file's engine (io_uring, syscalls, or the
//! fault injector); this code never learns which one runs.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::RawFd;

use crate::config::{Submission, SyncMode};
use crate::direct::DirectFile;
use crate::error::Failure;
use crate::ffi::*;
use crate::io::{
    EngineKind, FlushFailure, Routing, Submitter, SyncPlan, SyncRequest, WriteFailure,
};
use crate::lock::DbLock;
use crate::mmap::MemoryMap;
use crate::shm::Shm;
use crate::stats::{IoStats, SharedStats};
use crate::vfs::VfsState;
use crate::writeback;

/// os_unix.c SQLITE_DEFAULT_SECTOR_SIZE: what `unix` reports on Linux.
const SECTOR_SIZE_BYTES: c_int = 4096;
/// os_unix.c SQLITE_DEFAULT_FILE_PERMISSIONS.
const DEFAULT_FILE_MODE: libc::mode_t = 0o644;
/// Permissions of DELETEONCLOSE files (os_unix.c findCreateFileMode).
const PRIVATE_FILE_MODE: libc::mode_t = 0o600;
/// os_unix.c SQLITE_MINIMUM_FILE_DESCRIPTOR: never put a database on fd 0, 1 or 2, where
/// a stray `printf` could overwrite it.
const MINIMUM_FILE_DESCRIPTOR: RawFd = 3;

/// The URI parameters this VFS owns; any other `uring_*` key is rejected at open.
pub(crate) const URI_PARAMETERS: [&str; 10] = [
    "uring_direct",
    "uring_sqpoll",
    "uring_reads",
    "uring_writes",
    "uring_syncs",
    "uring_backend",
    "uring_fallback",
    "uring_sync",
    "uring_sync_plan",
    "uring_write_behind",
];

/// Per-file options from URI parameters (`uring_*` plus the SQLite ones os_unix.c reads).
struct FileOptions {
    engine: EngineKind,
    fallback_to_syscall: bool,
    sync_mode: SyncMode,
    psow: bool,
    readonly_shm: bool,
    nolock: bool,
    write_behind: bool,
    sync_plan: SyncPlan,
    /// O_DIRECT for the main database's aligned I/O (see `direct.rs`).
    direct: bool,
}

/// Distinguishes files in the write-behind queue (fds are reused after close).
static NEXT_FILE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Size of a WAL frame header (walformat.html, "WAL Frame Format").
const WAL_FRAME_HEADER_BYTES: usize = 24;
/// Size of the WAL file header, which precedes the first frame.
const WAL_HEADER_BYTES: u64 = 32;
/// The checksum that ends a rollback-journal record (fileformat.html, "The Rollback
/// Journal").
const JOURNAL_CHECKSUM_BYTES: usize = 4;
/// The page number that starts a rollback-journal record.
const JOURNAL_PAGE_NUMBER_BYTES: i64 = 4;
/// SQLite's smallest page size.
const MIN_PAGE_BYTES: usize = 512;

/// The write-behind flush point at the start of every method but xWrite and xSync.
fn flush_queue(caller: writeback::Caller) -> Result<(), Failure> {
    writeback::flush(caller).map_err(Failure::from_flush)
}

/// Result of a file control: handled, or not ours (SQLITE_NOTFOUND, so SQLite applies
/// its own default — answering OK to an unknown opcode would make SQLite ignore PRAGMAs).
pub(crate) enum Control {
    Handled,
    NotFound,
}

pub(crate) struct File {
    pub(crate) vfs: &'static VfsState,
    id: u64,
    fd: RawFd,
    is_wal: bool,
    /// A rollback journal (main or temp): queued writes never span a journal record.
    is_journal: bool,
    /// End offset and length of this file's previous write, to recognise record ends.
    last_write_end: i64,
    last_write_len: usize,
    write_behind: bool,
    sync_plan: SyncPlan,
    /// A main database: SQLite's locks live on it (see `lock::close_preserving_process_locks`).
    carries_locks: bool,

    /// The last write was a WAL commit-frame header: its page must be flushed at once.
    commit_frame_pending: bool,
    /// Between SQLITE_FCNTL_CKPT_START and CKPT_DONE: writes go straight through.
    in_checkpoint: bool,
    /// Full path; `None` for anonymous temporary files.
    path: Option<String>,
    /// The O_DIRECT descriptor of a main database opened with `uring_direct=on`.
    direct: Option<DirectFile>,
    engine: EngineKind,
    sync_mode: SyncMode,
    lock: DbLock,
    nolock: bool,
    psow: bool,
    persist_wal: bool,
    readonly_shm: bool,
    /// The first xSync after creating a journal or WAL must also sync its directory, so
    /// the new directory entry is durable (os_unix.c UNIXFILE_DIRSYNC).
    dir_sync_pending: bool,
    chunk_size_bytes: i64,
    pub(crate) last_errno: i32,
    /// No other process or connection can reach this file (it was unlinked at open), so
    /// its size may be cached.
    private: bool,
    cached_size_bytes: Option<i64>,
    /// `(st_dev, st_ino)` of the open descriptor, read by the first SQLITE_FCNTL_HAS_MOVED.
    /// Fixed for the descriptor's life: while we hold it open the inode cannot be freed,
    /// so its number cannot name another file on that device.
    identity: Option<(u64, u64)>,
    stats: std::sync::Arc<SharedStats>,
    shm: Option<Shm>,
    mmap: MemoryMap,
}

/// open(2), retried on EINTR, with the descriptor moved to [`MINIMUM_FILE_DESCRIPTOR`] or
/// above, and the low slot it was handed plugged with `/dev/null`, so later opens do not
/// land there again (os_unix.c robust_open does both). Every descriptor this VFS opens on
/// a database file goes through here: the buffered one and the O_DIRECT one alike.
pub(crate) fn open_above_stdio(
    path: &CStr,
    os_flags: c_int,
    mode: libc::mode_t,
) -> Result<RawFd, i32> {
    let fd = loop {
        // SAFETY: `path` is NUL-terminated; open does not retain it.
        let fd = unsafe { libc::open(path.as_ptr(), os_flags, mode as libc::c_uint) };
        if fd >= 0 {
            break fd;
        }
        let errno = last_errno();
        if errno != libc::EINTR {
            return Err(errno);
        }
    };
    if fd >= MINIMUM_FILE_DESCRIPTOR {
        return Ok(fd);
    }
    // SAFETY: plain fcntl/close/open on the descriptor we just opened and own; the plug
    // is deliberately left open for the life of the process, as os_unix.c leaves it.
    unsafe {
        let moved = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, MINIMUM_FILE_DESCRIPTOR);
        let errno = last_errno();
        libc::close(fd);
        libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if moved < 0 {
            return Err(errno);
        }
        Ok(moved)
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// SQLite's boolean URI values (sqlite3GetBoolean): digits, on/yes/true/full/extra, off/no/false.
fn uri_boolean(value: Option<&str>, default: bool) -> bool {
    let Some(value) = value else { return default };
    if let Ok(number) = value.parse::<i64>() {
        return number != 0;
    }
    match value.to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" | "full" | "extra" => true,
        "off" | "no" | "false" => false,
        _ => default,
    }
}

fn cstring(path: &str) -> Result<CString, Failure> {
    CString::new(path).map_err(|_| Failure::CantOpen(libc::EINVAL))
}

fn stat_path(path: &str) -> Option<libc::stat> {
    let path = CString::new(path).ok()?;
    // SAFETY: stat is plain data written by stat(2); `path` is NUL-terminated.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        (libc::stat(path.as_ptr(), &mut stat) == 0).then_some(stat)
    }
}

fn fstat(fd: RawFd) -> Result<libc::stat, i32> {
    // SAFETY: stat is plain data written by fstat(2).
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut stat) == 0 {
            Ok(stat)
        } else {
            Err(last_errno())
        }
    }
}

/// Whether `fd` lives on tmpfs or ramfs (statfs(2) magic numbers).
fn is_memory_backed(fd: RawFd) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // SAFETY: statfs is plain data written by fstatfs.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `fs` is writable for the call.
    if unsafe { libc::fstatfs(fd, &mut fs) } != 0 {
        return false;
    }
    matches!(fs.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
}

/// The directory holding `path`, as os_unix.c osOpenDirectory computes it.
pub(crate) fn directory_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(index) => &path[..index],
        None => ".",
    }
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
            // SAFETY: `c_dir` is NUL-terminated.
            is_dir && unsafe { libc::access(c_dir.as_ptr(), libc::W_OK | libc::X_OK) } == 0
        })
        .unwrap_or_else(|| ".".to_string())
}

fn temp_file_name_in(directory: &str) -> String {
    let mut random = [0u8; 8];
    // SAFETY: getrandom writes at most random.len() bytes into the buffer.
    let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    if got != random.len() as isize {
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
    fn submitter(&mut self) -> Submitter<'_> {
        Submitter {
            engine: &self.engine,
            file_stats: &self.stats,
            vfs_stats: &self.vfs.stats,
        }
    }

    fn count(&mut self, delta: IoStats) {
        self.stats.add_single_writer(&delta);
        self.vfs.stats.add(&delta);
    }

    pub(crate) fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    pub(crate) fn engine_name(&self) -> &'static str {
        self.engine.name()
    }

    /// The file's unique id and current descriptor, for trace records.
    pub(crate) fn trace_ids(&self) -> (u64, RawFd) {
        (self.id, self.fd)
    }

    /// Reads this file's options from the URI parameters of `name` (a journal or WAL
    /// file sees its database's parameters); `file_type` is xOpen's SQLITE_OPEN_* type
    /// bits (`uring_direct` routes a main database and its rollback journal differently).
    ///
    /// # Safety
    /// `name` must be null or a filename pointer SQLite passed to xOpen.
    unsafe fn options(
        vfs: &'static VfsState,
        name: *const c_char,
        file_type: c_int,
    ) -> Result<FileOptions, String> {
        let api = &vfs.api;
        // SAFETY: forwarded caller contract.
        let param = |key: &CStr| unsafe { api.uri_parameter(name, key) };
        // SAFETY: forwarded caller contract.
        for key in unsafe { api.uri_keys(name) } {
            if key.starts_with("uring_") && !URI_PARAMETERS.contains(&key.as_str()) {
                return Err(format!(
                    "unknown URI parameter `{key}`; this VFS knows {}",
                    URI_PARAMETERS.join(", ")
                ));
            }
        }
        let mut engine = vfs.engine.clone();
        match param(c"uring_backend").as_deref() {
            None => {}
            // A fault-injecting VFS keeps its engine: the test decides.
            Some("io_uring") if !matches!(engine, EngineKind::Fault(_)) => {
                engine = EngineKind::IoUring(vfs.routing_default())
            }
            Some("syscall") if !matches!(engine, EngineKind::Fault(_)) => {
                engine = EngineKind::Syscall
            }
            Some("io_uring" | "syscall") => {}
            Some(other) => {
                return Err(format!(
                    "uring_backend={other} is not valid; use io_uring or syscall"
                ))
            }
        }
        let fallback_to_syscall = match param(c"uring_fallback").as_deref() {
            None => vfs.fallback_to_syscall,
            Some("syscall") => true,
            Some("none") => false,
            Some(other) => {
                return Err(format!(
                    "uring_fallback={other} is not valid; use syscall or none"
                ))
            }
        };
        let sync_mode = match param(c"uring_sync") {
            None => vfs.sync_mode,
            Some(text) => SyncMode::parse(&text)
                .ok_or_else(|| format!("uring_sync={text} is not valid; use fsync or fdatasync"))?,
        };
        let direct = match param(c"uring_direct").as_deref() {
            None => vfs.direct_io,
            Some("on") => true,
            Some("off") => false,
            Some(other) => return Err(format!("uring_direct={other} is not valid; use on or off")),
        };
        let sqpoll = match param(c"uring_sqpoll").as_deref() {
            None => None,
            Some("on") => Some(true),
            Some("off") => Some(false),
            Some(other) => return Err(format!("uring_sqpoll={other} is not valid; use on or off")),
        };
        let submission = |key: &CStr| -> Result<Option<Submission>, String> {
            let Some(text) = param(key) else {
                return Ok(None);
            };
            Submission::parse(&text).map(Some).ok_or_else(|| {
                format!(
                    "{}={text} is not valid; use ring or syscall",
                    key.to_string_lossy()
                )
            })
        };
        let (reads, writes, syncs) = (
            submission(c"uring_reads")?,
            submission(c"uring_writes")?,
            submission(c"uring_syncs")?,
        );
        if let EngineKind::IoUring(routing) = &mut engine {
            // With `uring_direct=on`, by measurement (docs/BENCH_SPEED.md, "Session 6"),
            // the database and its rollback journal put writes and syncs on the ring:
            // O_DIRECT page writes run inline there and overlap on the device
            // (docs/BENCH_IO.md), a direct rollback commit has io-wq workers anyway, and
            // ring syncs (the journal's header rewrite linked to its fsync) made
            // multi-page rollback commits 8-9 % faster than syscalls, tied elsewhere. A
            // WAL keeps the VFS's routing: WAL commits touch no direct file, and a ring
            // fsync would add the io-wq thread that slows every later commit (WAL test 1:
            // 1.35× `unix` with ring syncs, 1.20× without).
            let database_or_journal =
                file_type & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL) != 0;
            let (default_writes, default_syncs) = if direct && database_or_journal {
                (Submission::Ring, Submission::Ring)
            } else {
                (routing.writes(), routing.syncs())
            };
            *routing = Routing::new(
                reads.unwrap_or(routing.reads()),
                writes.unwrap_or(default_writes),
                syncs.unwrap_or(default_syncs),
            )
            .with_sqpoll(sqpoll.unwrap_or(routing.sqpoll));
        }
        let write_behind = match param(c"uring_write_behind").as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => {
                return Err(format!(
                    "uring_write_behind={other} is not valid; use on or off"
                ))
            }
        };
        let sync_plan = match param(c"uring_sync_plan").as_deref() {
            None | Some("linked") => SyncPlan::Linked,
            Some("separate") => SyncPlan::Separate,
            Some(other) => {
                return Err(format!(
                    "uring_sync_plan={other} is not valid; use linked or separate"
                ))
            }
        };
        Ok(FileOptions {
            direct,
            write_behind,
            sync_plan,
            engine,
            fallback_to_syscall,
            sync_mode,
            // os_unix.c: SQLITE_POWERSAFE_OVERWRITE defaults to 1; `psow=0` turns it off.
            psow: uri_boolean(param(c"psow").as_deref(), true),
            readonly_shm: uri_boolean(param(c"readonly_shm").as_deref(), false),
            nolock: uri_boolean(param(c"nolock").as_deref(), false),
        })
    }

    /// Permission bits (and owner to copy when root) for a file about to be created, as
    /// os_unix.c findCreateFileMode chooses them.
    ///
    /// # Safety
    /// `name` as in [`File::options`].
    unsafe fn create_mode(
        vfs: &VfsState,
        path: &str,
        name: *const c_char,
        flags: c_int,
    ) -> (libc::mode_t, Option<(u32, u32)>) {
        if flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL) != 0 {
            // The database is the journal/WAL name without its "-suffix".
            let database = match path.rfind('-') {
                Some(dash) if !path[dash..].contains('.') && !path[dash..].contains('/') => {
                    &path[..dash]
                }
                _ => return (0, None),
            };
            return match stat_path(database) {
                Some(st) => (st.st_mode & 0o777, Some((st.st_uid, st.st_gid))),
                None => (0, None),
            };
        }
        if flags & SQLITE_OPEN_DELETEONCLOSE != 0 {
            return (PRIVATE_FILE_MODE, None);
        }
        // SAFETY: forwarded caller contract.
        if let Some(model) = unsafe { vfs.api.uri_parameter(name, c"modeof") } {
            if let Some(st) = stat_path(&model) {
                return (st.st_mode & 0o777, Some((st.st_uid, st.st_gid)));
            }
        }
        (0, None)
    }

    /// xOpen. Returns the file and the flags SQLite should see (read-only when a
    /// read-write open fell back to read-only, as os_unix.c does).
    ///
    /// # Safety
    /// `name` must be null or the filename pointer SQLite passed to xOpen.
    pub(crate) unsafe fn open(
        vfs: &'static VfsState,
        name: *const c_char,
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
        let path = if name.is_null() {
            // SQLite only opens anonymous files as temporary, delete-on-close files.
            assert!(is_delete, "xOpen with a NULL name must be DELETEONCLOSE");
            let directory = temp_directory();
            if let Ok(c_directory) = cstring(&directory) {
                let os_flags = libc::O_RDWR | libc::O_EXCL | libc::O_TMPFILE | libc::O_CLOEXEC;
                unnamed_fd = open_above_stdio(&c_directory, os_flags, PRIVATE_FILE_MODE).ok();
            }
            match unnamed_fd {
                // Only for messages: the inode has no name.
                Some(_) => format!("{directory}/(O_TMPFILE)"),
                None => temp_file_name_in(&directory),
            }
        } else {
            // SAFETY: SQLite passes a NUL-terminated filename.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        };

        // SAFETY: forwarded caller contract.
        let options = match unsafe { File::options(vfs, name, file_type) } {
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
        // SAFETY: forwarded caller contract.
        let (mode, owner) = unsafe { File::create_mode(vfs, &path, name, flags) };
        let c_path = cstring(&path)?;
        let mut out_flags = flags;
        let effective_mode = if mode == 0 { DEFAULT_FILE_MODE } else { mode };
        let open = |os_flags: c_int| open_above_stdio(&c_path, os_flags, effective_mode);
        let fd = match unnamed_fd.map_or_else(|| open(os_flags), Ok) {
            Ok(fd) => fd,
            Err(errno) => {
                // SAFETY: `c_path` is NUL-terminated.
                let exists = unsafe { libc::access(c_path.as_ptr(), libc::F_OK) } == 0;
                if is_new_journal && errno == libc::EACCES && !exists {
                    return Err(Failure::ReadonlyDirectory(errno));
                } else if errno != libc::EISDIR && is_readwrite {
                    // os_unix.c: a database we may not write is opened read-only.
                    let readonly = (os_flags & !(libc::O_RDWR | libc::O_CREAT)) | libc::O_RDONLY;
                    out_flags = (flags & !(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE))
                        | SQLITE_OPEN_READONLY;
                    open(readonly).map_err(Failure::CantOpen)?
                } else {
                    return Err(Failure::CantOpen(errno));
                }
            }
        };
        if mode != 0 {
            // os_unix.c robust_open: a new file gets exactly `mode`, whatever the umask.
            if let Ok(st) = fstat(fd) {
                if st.st_size == 0 && st.st_mode & 0o777 != mode {
                    // SAFETY: plain syscall on our fd.
                    unsafe { libc::fchmod(fd, mode) };
                }
            }
        }
        if let Some((uid, gid)) = owner {
            // As root, a new journal or WAL must stay usable by the database's owner.
            // SAFETY: plain syscalls on our fd.
            unsafe {
                if libc::geteuid() == 0 && flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL) != 0
                {
                    let _ = libc::fchown(fd, uid, gid);
                }
            }
        }
        if let EngineKind::IoUring(routing) = engine {
            // With everything routed to syscalls already (the default) there is nothing to
            // decide, and a rollback transaction opens its journal anew each time: skip the
            // fstatfs.
            if routing.lone_op_by_syscall
                && !routing.reads_writes_syncs_by_syscall()
                && is_memory_backed(fd)
            {
                // tmpfs/ramfs: fsync does nothing there, so not even the journal/directory
                // sync pair has anything to overlap; the ring would only add worker
                // hand-offs (measured: 2.2× `unix` on speed test 1). Explicit
                // `uring_reads=ring&uring_writes=ring` keeps the ring.
                engine = EngineKind::Syscall;
            }
        }
        let direct = if options.direct && file_type & SQLITE_OPEN_MAIN_DB != 0 {
            match DirectFile::open(&c_path, out_flags & SQLITE_OPEN_READWRITE != 0) {
                Ok(direct) => Some(direct),
                Err(why) => {
                    vfs.api.log(
                        SQLITE_CANTOPEN,
                        &format!("sqlite-uring: cannot open {path}: {why}"),
                    );
                    crate::lock::close_preserving_process_locks(fd);
                    return Err(Failure::CantOpen(match why {
                        crate::direct::DirectOpenError::Open(errno) => errno,
                        crate::direct::DirectOpenError::Alignment(_) => libc::EINVAL,
                    }));
                }
            }
        } else {
            None
        };
        if is_delete && unnamed_fd.is_none() {
            // Unlinking now means even a crash cannot leave the file behind.
            // SAFETY: `c_path` is NUL-terminated.
            unsafe { libc::unlink(c_path.as_ptr()) };
        }
        let file = File {
            vfs,
            id: NEXT_FILE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            fd,
            is_wal: file_type & SQLITE_OPEN_WAL != 0,
            carries_locks: file_type & SQLITE_OPEN_MAIN_DB != 0,

            is_journal: file_type & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_TEMP_JOURNAL) != 0,
            last_write_end: -1,
            last_write_len: 0,
            write_behind: options.write_behind,
            sync_plan: options.sync_plan,
            commit_frame_pending: false,
            in_checkpoint: false,
            path: (!name.is_null()).then_some(path),
            direct,
            engine,
            sync_mode: options.sync_mode,
            lock: DbLock::new(),
            nolock: options.nolock,
            psow: options.psow,
            persist_wal: false,
            readonly_shm: options.readonly_shm,
            dir_sync_pending: is_new_journal,
            chunk_size_bytes: 0,
            last_errno: 0,
            private: is_delete,
            cached_size_bytes: None,
            identity: None,
            stats: std::sync::Arc::new(SharedStats::default()),
            shm: None,
            mmap: MemoryMap::new(0),
        };
        Ok((file, out_flags))
    }

    /// Whether the cached size can be trusted: nobody else can change the file.
    fn size_cache_valid(&self) -> bool {
        self.private || self.lock.level() == SQLITE_LOCK_EXCLUSIVE
    }

    fn note_size_at_least(&mut self, end_bytes: i64) {
        if let Some(size) = self.cached_size_bytes.as_mut() {
            *size = (*size).max(end_bytes);
        }
    }

    /// xRead: fills `buf` from `offset`; a read past the end zero-fills the rest and
    /// reports SQLITE_IOERR_SHORT_READ, as SQLite requires.
    pub(crate) fn read(&mut self, buf: &mut [u8], offset: i64) -> Result<(), Failure> {
        assert!(offset >= 0);
        flush_queue(self.as_reader())?;
        let from_map = self.mmap.read_prefix(buf, offset);
        let fd = self.fd;
        let rest = &mut buf[from_map..];
        let mut direct_read = None;
        // Kernel entries of the pread fast path, counted below with the read itself (the
        // other paths count theirs through the Submitter).
        let mut preads = 0u64;
        let read = if rest.is_empty() {
            Ok(0)
        } else if self.direct.is_none()
            && self.engine.reads_by_syscall()
            && !crate::trace::enabled(crate::trace::TARGET_IO)
        {
            let (outcome, calls) =
                crate::io::pread_fully(fd, rest, (offset + from_map as i64) as u64);
            preads = calls;
            outcome.map_err(Failure::from_read_errno)
        } else {
            let at = (offset + from_map as i64) as u64;
            let mut io = Submitter {
                engine: &self.engine,
                file_stats: &self.stats,
                vfs_stats: &self.vfs.stats,
            };
            match self
                .direct
                .as_mut()
                .filter(|d| d.is_aligned(at, rest.len()))
            {
                Some(direct) => match direct.read(&mut io, rest, at) {
                    Ok(done) => {
                        direct_read = Some(done.from_readahead);
                        Ok(done.bytes)
                    }
                    // A short read that stopped off the alignment (a file whose size is
                    // not a multiple of it) cannot continue direct: the buffered fd can.
                    Err(libc::EINVAL) => {
                        direct.invalidate();
                        io.read_at(fd, rest, at)
                    }
                    Err(errno) => Err(errno),
                },
                None => io.read_at(fd, rest, at),
            }
            .map_err(Failure::from_read_errno)
        };
        // One counter update per call: each is a locked instruction on the shared totals.
        let total = from_map + *read.as_ref().unwrap_or(&0);
        if direct_read.is_none() {
            self.stats.add_pread(total as u64, preads, true);
            self.vfs.stats.add_pread(total as u64, preads, false);
        } else {
            // Direct reads count their kernel entries through the Submitter.
            self.count(IoStats {
                read_calls: 1,
                bytes_read: total as u64,
                direct_reads: (direct_read == Some(false)) as u64,
                readahead_hits: (direct_read == Some(true)) as u64,
                ..IoStats::default()
            });
        }
        read?;
        if total < buf.len() {
            buf[total..].fill(0);
            return Err(Failure::ShortRead);
        }
        Ok(())
    }

    fn as_reader(&self) -> writeback::Caller {
        writeback::Caller::Reader(self.id)
    }

    fn as_writer(&self) -> writeback::Caller {
        writeback::Caller::Writer(Some(self.id))
    }

    /// The write-behind view of this file, through its buffered descriptor.
    fn writer(&self) -> writeback::Writer<'_> {
        self.writer_through(self.fd, 1)
    }

    /// The write-behind view of this file through `fd`, whose queued pieces must start
    /// at multiples of `align_bytes` (the O_DIRECT descriptor's alignment, or 1).
    fn writer_through(&self, fd: RawFd, align_bytes: usize) -> writeback::Writer<'_> {
        writeback::Writer {
            file_id: self.id,
            fd,
            align_bytes,
            engine: &self.engine,
            file_stats: &self.stats,
            vfs_stats: &self.vfs.stats,
        }
    }

    /// xWrite: queued for write-behind (see `writeback.rs` for when it reaches the
    /// kernel), or written at once when write-behind is off. A write that cannot make
    /// progress is SQLITE_FULL, as in os_unix.c.
    pub(crate) fn write(&mut self, buf: &[u8], offset: i64) -> Result<(), Failure> {
        assert!(offset >= 0);
        self.count(IoStats {
            write_calls: 1,
            ..IoStats::default()
        });
        // A journal record is a 4-byte page number, the page, and a 4-byte checksum. Its
        // checksum write flushes: SQLite reads the journal back to roll back its cache,
        // so a failed journal write must surface before SQLite modifies the page, exactly
        // where a failed pwrite surfaces under `unix`. The checksum is told from the page
        // number of the record after a journal header (also 4 bytes after ≥ 512) by where
        // the write before it started: records start at a header's end and are page
        // size + 8 bytes long, headers sit at multiples of the sector size (pager.c
        // `journalHdrOffset`), so a record's page starts at 4 mod 8 and a header at 0.
        let previous_write_start = self.last_write_end - self.last_write_len as i64;
        let journal_record_end = self.is_journal
            && buf.len() == JOURNAL_CHECKSUM_BYTES
            && self.last_write_len >= MIN_PAGE_BYTES
            && self.last_write_end == offset
            && previous_write_start % 8 == JOURNAL_PAGE_NUMBER_BYTES;
        self.last_write_end = offset + buf.len() as i64;
        self.last_write_len = buf.len();
        if let Some(direct) = self.direct.as_mut() {
            direct.invalidate_range(offset as u64, buf.len());
        }
        let result = if self.write_behind {
            // SQLite publishes a WAL commit right after writing the commit frame's page,
            // with no reportable call in between: that page flushes the queue.
            // While the file is memory-mapped, SQLite may read the new bytes through the
            // mapping without another VFS call (its sorter does): they must be in the page
            // cache when xWrite returns, as with `unix`.
            let flush_now = self.in_checkpoint
                || journal_record_end
                || self.mmap.is_mapped()
                || std::mem::take(&mut self.commit_frame_pending);
            // An aligned page write of an O_DIRECT file is queued for its direct fd; a
            // write that must reach the kernel at once (a checkpoint's) is one lone write,
            // cheaper into the page cache than a device round trip.
            let writer = match self
                .direct
                .as_ref()
                .filter(|d| !flush_now && d.is_aligned(offset as u64, buf.len()))
            {
                Some(direct) => self.writer_through(direct.fd, direct.align_bytes),
                None => self.writer(),
            };
            let result = writeback::write(&writer, offset as u64, buf, flush_now);
            if self.is_wal
                && buf.len() == WAL_FRAME_HEADER_BYTES
                && offset as u64 >= WAL_HEADER_BYTES
                && buf[4..8] != [0, 0, 0, 0]
            {
                // Bytes 4..8 of a frame header: database size after a commit, 0 otherwise.
                self.commit_frame_pending = true;
            }
            result
        } else {
            flush_queue(self.as_writer())
                .and_then(|()| {
                    let fd = self.fd;
                    self.submitter()
                        .write_at(fd, buf, offset as u64)
                        .map_err(|f| Failure::from_flush(FlushFailure::Write(f)))
                })
                .map_err(|failure| match failure {
                    Failure::Full(e) => FlushFailure::Write(if e == 0 {
                        WriteFailure::NoProgress
                    } else {
                        WriteFailure::Errno(e)
                    }),
                    other => FlushFailure::Write(WriteFailure::Errno(other.errno())),
                })
        };
        match result {
            Ok(()) => {
                self.count(IoStats {
                    bytes_written: buf.len() as u64,
                    ..IoStats::default()
                });
                self.note_size_at_least(offset + buf.len() as i64);
                Ok(())
            }
            Err(failure) => {
                self.cached_size_bytes = None;
                Err(Failure::from_flush(failure))
            }
        }
    }

    /// xTruncate, rounding up to the chunk size like os_unix.c.
    pub(crate) fn truncate(&mut self, size_bytes: i64) -> Result<(), Failure> {
        assert!(size_bytes >= 0);
        self.count(IoStats {
            truncate_calls: 1,
            ..IoStats::default()
        });
        let size_bytes = if self.chunk_size_bytes > 0 {
            round_up(size_bytes, self.chunk_size_bytes)
        } else {
            size_bytes
        };
        flush_queue(self.as_writer())?;
        if let Some(direct) = self.direct.as_mut() {
            direct.invalidate();
        }
        let fd = self.fd;
        if let Err(errno) = self.submitter().truncate(fd, size_bytes as u64) {
            self.cached_size_bytes = None;
            return Err(Failure::Truncate(errno));
        }
        self.mmap.clamp_to(size_bytes);
        if self.size_cache_valid() {
            self.cached_size_bytes = Some(size_bytes);
        }
        Ok(())
    }

    /// xSync: one fsync/fdatasync of the file (the SQLITE_SYNC_* flags make no difference
    /// on Linux, as in os_unix.c full_fsync), plus the one-time directory sync after a
    /// journal or WAL was created.
    pub(crate) fn sync(&mut self, _flags: c_int) -> Result<(), Failure> {
        self.count(IoStats {
            sync_calls: 1,
            ..IoStats::default()
        });
        let data_only = self.sync_mode == SyncMode::Fdatasync;
        // The directory sync is independent of the file's: both are submitted together
        // and both complete before xSync returns, as os_unix.c's two sequential calls do.
        let directory_fd = match (&self.path, self.dir_sync_pending) {
            (Some(path), true) => open_directory(directory_of(path)),
            _ => None,
        };
        let request = SyncRequest {
            data_only,
            directory_fd,
            plan: self.sync_plan,
        };
        let result = writeback::sync(&self.writer(), request);
        if let Some(dir_fd) = directory_fd {
            // SAFETY: we opened dir_fd above and own it.
            unsafe { libc::close(dir_fd) };
        }
        result.map_err(Failure::from_flush)?;
        self.dir_sync_pending = false;
        Ok(())
    }

    /// xFileSize. Caches the size while nobody else can change the file.
    pub(crate) fn file_size(&mut self) -> Result<i64, Failure> {
        flush_queue(self.as_reader())?;
        if self.size_cache_valid() {
            if let Some(size) = self.cached_size_bytes {
                return Ok(size);
            }
        }
        let mut size = fstat(self.fd).map_err(Failure::Fstat)?.st_size;
        // os_unix.c: a 1-byte file is reported as empty (a workaround some filesystems
        // need when a zero-size database is opened); kept for identical behaviour.
        if size == 1 {
            size = 0;
        }
        self.cached_size_bytes = self.size_cache_valid().then_some(size);
        Ok(size)
    }

    /// Drops what this file caches of other connections' data: called wherever another
    /// connection may have changed the file since (lock changes).
    fn forget_cached_reads(&mut self) {
        if let Some(direct) = self.direct.as_mut() {
            direct.invalidate();
        }
    }

    pub(crate) fn lock(&mut self, level: c_int) -> Result<(), Failure> {
        flush_queue(writeback::Caller::Quiet)?;
        self.forget_cached_reads();
        if self.nolock {
            self.lock
                .set_level_without_os_lock(level.max(self.lock.level()));
            return Ok(());
        }
        self.lock.lock(self.fd, level)
    }

    pub(crate) fn unlock(&mut self, level: c_int) -> Result<(), Failure> {
        flush_queue(writeback::Caller::Quiet)?;
        self.forget_cached_reads();
        if !self.private {
            // Another connection may change the file once we drop EXCLUSIVE.
            self.cached_size_bytes = None;
        }
        if self.nolock {
            self.lock
                .set_level_without_os_lock(level.min(self.lock.level()));
            return Ok(());
        }
        self.lock.unlock(self.fd, level)
    }

    pub(crate) fn check_reserved_lock(&mut self) -> Result<bool, Failure> {
        flush_queue(writeback::Caller::Quiet)?;
        if self.nolock {
            return Ok(false);
        }
        self.lock.check_reserved(self.fd)
    }

    pub(crate) fn sector_size(&self) -> c_int {
        SECTOR_SIZE_BYTES
    }

    /// Exactly what the `unix` VFS reports on Linux (os_unix.c setDeviceCharacteristics):
    /// POWERSAFE_OVERWRITE (unless `psow=0`) and SUBPAGE_READ. Claiming SAFE_APPEND or
    /// SEQUENTIAL would let SQLite skip journal syncs.
    ///
    /// SUBPAGE_READ (SQLite ≥ 3.48) is what lets the pager read a blob's overflow pages
    /// straight into the caller's buffer (sqlite3PagerDirectReadOk) instead of through
    /// its page cache; without it large-blob reads were 10–30 % slower than `unix`.
    /// `read` serves any offset and length: it flushes pending writes first, and an O_DIRECT
    /// file sends a read its alignment does not allow to the buffered descriptor.
    pub(crate) fn device_characteristics(&self) -> c_int {
        let psow = if self.psow {
            SQLITE_IOCAP_POWERSAFE_OVERWRITE
        } else {
            0
        };
        psow | SQLITE_IOCAP_SUBPAGE_READ
    }

    /// SQLITE_FCNTL_SIZE_HINT (os_unix.c fcntlSizeHint): with a chunk size, allocate up
    /// to the next chunk; with mmap on, extend the file and the mapping.
    fn size_hint(&mut self, size_bytes: i64) -> Result<(), Failure> {
        if self.chunk_size_bytes > 0 {
            let target = round_up(size_bytes, self.chunk_size_bytes);
            let st = fstat(self.fd).map_err(Failure::Fstat)?;
            if target > st.st_size {
                // Write one byte at the end of every block of the new region, then at the
                // new end, like os_unix.c does without posix_fallocate.
                let block = st.st_blksize.max(512);
                let mut pieces = Vec::new();
                let mut at = (st.st_size / block) * block + block - 1;
                while at < target + block - 1 {
                    pieces.push(((at.min(target - 1)) as u64, &[0u8][..]));
                    at += block;
                }
                let fd = self.fd;
                self.submitter()
                    .write_batch(fd, &pieces)
                    .map_err(|failure| match failure {
                        WriteFailure::Errno(errno) => Failure::from_write_errno(errno),
                        WriteFailure::NoProgress => Failure::Full(0),
                    })?;
                self.note_size_at_least(target);
            }
        }
        if self.mmap.wants_growth(size_bytes) {
            if self.chunk_size_bytes <= 0 {
                let fd = self.fd;
                self.submitter()
                    .truncate(fd, size_bytes as u64)
                    .map_err(Failure::Truncate)?;
                self.note_size_at_least(size_bytes);
            }
            self.mmap.grow_to(self.fd, size_bytes)?;
        }
        Ok(())
    }

    /// os_unix.c fileHasMoved: the path no longer names this file. SQLite asks before
    /// every write transaction; like os_unix.c (which compares with the inode it noted at
    /// open), this costs one stat(2) of the path, not a stat and an fstat.
    fn has_moved(&mut self) -> bool {
        let Some(path) = &self.path else { return false };
        let identity = match self.identity {
            Some(identity) => identity,
            None => {
                let Ok(mine) = fstat(self.fd) else {
                    return true;
                };
                let identity = (mine.st_dev, mine.st_ino);
                self.identity = Some(identity);
                identity
            }
        };
        match stat_path(path) {
            Some(st) => (st.st_dev, st.st_ino) != identity,
            None => true,
        }
    }

    /// `PRAGMA io_uring_stats` (this file's and the VFS's counters as JSON) and
    /// `PRAGMA io_uring_stats=reset`. Other pragmas are SQLite's.
    ///
    /// # Safety
    /// `args` must be the `char*[3]` SQLite passes with SQLITE_FCNTL_PRAGMA.
    unsafe fn pragma(&mut self, args: *mut *mut c_char) -> Result<Control, Failure> {
        // SAFETY: caller contract: args[1] is the pragma name, args[2] its value or null.
        let (name, value) = unsafe {
            let name = *args.add(1);
            let value = *args.add(2);
            if name.is_null() {
                return Ok(Control::NotFound);
            }
            (
                CStr::from_ptr(name).to_string_lossy().to_ascii_lowercase(),
                (!value.is_null()).then(|| CStr::from_ptr(value).to_string_lossy().into_owned()),
            )
        };
        if name != "io_uring_stats" {
            return Ok(Control::NotFound);
        }
        let text = match value.as_deref() {
            None => format!(
                "{{\"vfs\":\"{}\",\"engine\":\"{}\",{},\"direct_align_bytes\":{},\"file\":{},\"vfs_total\":{}}}",
                self.vfs.name,
                self.engine.name(),
                self.engine.routing_json(),
                self.direct
                    .as_ref()
                    .map_or("null".to_string(), |d| d.align_bytes.to_string()),
                self.stats.snapshot().to_json(),
                self.vfs.stats.snapshot().to_json()
            ),
            Some(v) if v.eq_ignore_ascii_case("reset") => {
                self.stats.reset();
                self.vfs.stats.reset();
                "reset".to_string()
            }
            Some(other) => format!("unknown argument `{other}`: use PRAGMA io_uring_stats or PRAGMA io_uring_stats=reset"),
        };
        let failed = text.starts_with("unknown");
        // SAFETY: args[0] receives a string from sqlite3_malloc, which SQLite frees.
        unsafe { *args = self.vfs.api.alloc_cstring(&text) };
        if failed {
            return Err(Failure::BadArgument);
        }
        Ok(Control::Handled)
    }

    /// xFileControl. Answers the opcodes os_unix.c answers on Linux, plus
    /// `PRAGMA io_uring_stats`; everything else is SQLITE_NOTFOUND.
    ///
    /// # Safety
    /// `arg` must point to the argument type SQLite documents for `op`.
    pub(crate) unsafe fn file_control(
        &mut self,
        op: c_int,
        arg: *mut c_void,
    ) -> Result<Control, Failure> {
        match op {
            // Checkpoint writes go straight through: SQLite ignores CKPT_DONE's result and
            // then publishes nBackfill, so nothing may still be queued by then.
            SQLITE_FCNTL_CKPT_START => {
                flush_queue(self.as_writer())?;
                self.in_checkpoint = true;
                return Ok(Control::NotFound);
            }
            SQLITE_FCNTL_CKPT_DONE => {
                self.in_checkpoint = false;
                flush_queue(writeback::Caller::Quiet)?;
                return Ok(Control::NotFound);
            }
            // Sent after a commit's database writes, before xSync or instead of it with
            // synchronous=OFF; SQLite checks its result: a reportable flush point.
            SQLITE_FCNTL_SYNC | SQLITE_FCNTL_SIZE_HINT => flush_queue(self.as_writer())?,
            _ => flush_queue(writeback::Caller::Quiet)?,
        }
        // SAFETY (whole block): each arm casts `arg` to the type sqlite3.h documents for
        // that opcode; SQLite owns the pointee for the duration of the call.
        unsafe {
            match op {
                SQLITE_FCNTL_LOCKSTATE => *(arg as *mut c_int) = self.lock.level(),
                SQLITE_FCNTL_LAST_ERRNO => *(arg as *mut c_int) = self.last_errno,
                SQLITE_FCNTL_CHUNK_SIZE => self.chunk_size_bytes = *(arg as *const c_int) as i64,
                SQLITE_FCNTL_SIZE_HINT => self.size_hint(*(arg as *const i64))?,
                SQLITE_FCNTL_PERSIST_WAL => mode_bit(&mut self.persist_wal, arg as *mut c_int),
                SQLITE_FCNTL_POWERSAFE_OVERWRITE => mode_bit(&mut self.psow, arg as *mut c_int),
                SQLITE_FCNTL_VFSNAME => {
                    *(arg as *mut *mut c_char) = self.vfs.api.alloc_cstring(&self.vfs.name);
                }
                SQLITE_FCNTL_TEMPFILENAME => {
                    *(arg as *mut *mut c_char) = self.vfs.api.alloc_cstring(&temp_file_name());
                }
                SQLITE_FCNTL_HAS_MOVED => *(arg as *mut c_int) = self.has_moved() as c_int,
                SQLITE_FCNTL_MMAP_SIZE => {
                    let requested = *(arg as *const i64);
                    // Mapped reads would go through the page cache O_DIRECT bypasses.
                    let requested = if self.direct.is_some() { 0 } else { requested };
                    *(arg as *mut i64) = self.mmap.set_limit(self.fd, requested)?;
                }
                SQLITE_FCNTL_EXTERNAL_READER => {
                    let external = match &self.shm {
                        Some(shm) => shm.has_external_reader()?,
                        None => false,
                    };
                    *(arg as *mut c_int) = external as c_int;
                }
                SQLITE_FCNTL_NULL_IO => {
                    libc::close(self.fd);
                    self.fd = -1;
                    if let Some(direct) = self.direct.take() {
                        libc::close(direct.fd);
                    }
                }
                SQLITE_FCNTL_PRAGMA => return self.pragma(arg as *mut *mut c_char),
                _ => return Ok(Control::NotFound),
            }
        }
        Ok(Control::Handled)
    }

    /// xShmMap. `Ok((pointer, readonly))`; SQLite gets SQLITE_READONLY when `readonly`.
    pub(crate) fn shm_map(
        &mut self,
        region: usize,
        region_size_bytes: usize,
        extend: bool,
    ) -> Result<(*mut u8, bool), Failure> {
        flush_queue(writeback::Caller::Quiet)?;
        if self.shm.is_none() {
            let path = self.path.clone().ok_or(Failure::ShmOpen(libc::EINVAL))?;
            let st = fstat(self.fd).map_err(Failure::Fstat)?;
            self.shm = Some(Shm::open(&path, &st, self.readonly_shm)?);
        }
        let mut shm = self.shm.take().expect("opened above");
        let result = shm.map(&mut self.submitter(), region, region_size_bytes, extend);
        let readonly = shm.is_readonly();
        self.shm = Some(shm);
        Ok((result?, readonly))
    }

    pub(crate) fn shm_lock(
        &mut self,
        offset: c_int,
        count: c_int,
        flags: c_int,
    ) -> Result<(), Failure> {
        // Taking or dropping a WAL-index lock can publish what was written: flush first.
        flush_queue(writeback::Caller::Quiet)?;
        // A read transaction starts or ends here.
        self.forget_cached_reads();
        match self.shm.as_mut() {
            Some(shm) => shm.lock(offset, count, flags),
            None => Err(Failure::ShmOpen(libc::EBADF)),
        }
    }

    /// xShmBarrier: a full memory barrier between WAL-index writes and reads of other
    /// processes' writes (the mapping is shared memory).
    pub(crate) fn shm_barrier(&mut self) {
        let _ = flush_queue(writeback::Caller::Quiet);
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn shm_unmap(&mut self, delete: bool) {
        let _ = flush_queue(writeback::Caller::Quiet);
        if let Some(shm) = self.shm.take() {
            shm.close(delete);
        }
    }

    pub(crate) fn fetch(&mut self, offset: i64, amount: c_int) -> Result<*mut u8, Failure> {
        // A fetched page is read straight from the page cache: queued writes first.
        flush_queue(self.as_reader())?;
        self.mmap.fetch(self.fd, offset, amount)
    }

    pub(crate) fn unfetch(&mut self, page: *mut u8) {
        self.mmap.unfetch(page)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        writeback::flush_before_close(self.id);
        self.mmap.unmap();
        self.shm = None;
        if let Some(direct) = self.direct.take() {
            // Same inode as `fd`: closing it would drop this process's POSIX locks too.
            crate::lock::close_preserving_process_locks(direct.fd);
        }
        if self.fd >= 0 {
            if self.carries_locks {
                crate::lock::close_preserving_process_locks(self.fd);
            } else {
                // SAFETY: we own the fd; nobody locks journals, WALs or temp files.
                unsafe { libc::close(self.fd) };
            }
            self.fd = -1;
        }
    }
}

/// `value` rounded up to a multiple of `chunk` (> 0).
fn round_up(value: i64, chunk: i64) -> i64 {
    (value + chunk - 1) / chunk * chunk
}

/// os_unix.c unixModeBit: negative queries, zero clears, positive sets.
///
/// # Safety
/// `arg` must point to a writable int.
unsafe fn mode_bit(flag: &mut bool, arg: *mut c_int) {
    // SAFETY: caller contract.
    unsafe {
        if *arg < 0 {
            *arg = *flag as c_int;
        } else {
            *flag = *arg != 0;
        }
    }
}

/// Opens `directory` for syncing (os_unix.c osOpenDirectory); `None` if it cannot be
/// opened, which os_unix.c does not treat as an error either.
fn open_directory(directory: &str) -> Option<RawFd> {
    let c_dir = CString::new(directory).ok()?;
    // SAFETY: `c_dir` is NUL-terminated.
    let fd = unsafe { libc::open(c_dir.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    (fd >= 0).then_some(fd)
}

/// Opens `directory` and syncs it through `io` (journal creation, xDelete with dirSync).
pub(crate) fn sync_directory_with(
    io: &mut Submitter<'_>,
    directory: &str,
    data_only: bool,
) -> Result<(), Failure> {
    let c_dir = cstring(directory).map_err(|_| Failure::DirFsync(libc::EINVAL))?;
    // SAFETY: `c_dir` is NUL-terminated.
    let dir_fd = unsafe { libc::open(c_dir.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if dir_fd < 0 {
        return Err(Failure::CantOpen(last_errno()));
    }
    let result = io.sync(dir_fd, data_only).map_err(Failure::DirFsync);
    // SAFETY: we own dir_fd.
    unsafe { libc::close(dir_fd) };
    result
}
