//! Trace logging: every VFS call SQLite makes, every batch the engine performs and every
//! ring submission, as `log` records at `Trace` level (feature `trace`, on by default).
//!
//! | target | one record per | fields |
//! |---|---|---|
//! | `sqlite_uring::vfs` | VFS call (`entry.rs`) | call, file id/fd/path, offset, length, … , `rc` (SQLite code), `duration_ns` |
//! | `sqlite_uring::io` | batch handed to the engine (`Submitter::perform`; formatted in `io/record.rs`) | engine, each op with its result, `kernel_entries`, `duration_ns` |
//! | `sqlite_uring::ring` | ring submission (`Ring::perform_on_ring`) | `entries` (SQEs), `linked`, `kernel_entries` (io_uring_enter calls), `completions` |
//!
//! So `RUST_LOG=sqlite_uring=trace` shows everything, `RUST_LOG=sqlite_uring::vfs=trace`
//! only the calls SQLite makes.
//!
//! **Zero cost when off.** A hook first asks `enabled`: `log_enabled!`, whose first test
//! is `log::max_level()`, one relaxed atomic load, `Off` unless a logger raised it. Only
//! when that passes does it ask the logger, read the clock, and format — in `#[cold]`
//! functions, off the hot path. Each VFS call asks once. Without the `trace` feature
//! `enabled` is a constant `false` and every hook compiles away.
//!
//! Rust programs install any `log` logger they like (env_logger, …). The loadable
//! extension is a cdylib with its own copy of `log`'s statics, so nobody else can install
//! one for it: [`init_extension_logging`] reads `RUST_LOG` at load and installs
//! [`TraceLogger`], writing where `SQLITE_URING_LOG` says (stderr, `sqlite3_log`, a file).
//! `sqlite-uring bench … --trace FILE` installs it with a file sink.

use std::ffi::{c_int, c_void};
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use crate::ffi::*;

/// Whether a `Trace` record for `target` would be written. When no logger raised
/// `log::max_level()`, this is one relaxed atomic load and a compare.
#[inline(always)]
pub(crate) fn enabled(target: &'static str) -> bool {
    #[cfg(feature = "trace")]
    {
        log::log_enabled!(target: target, log::Level::Trace)
    }
    #[cfg(not(feature = "trace"))]
    {
        let _ = target;
        false
    }
}

/// The start time of a traced event, or `None` (and no clock read) when `target` is off.
#[inline(always)]
pub(crate) fn start(target: &'static str) -> Option<Instant> {
    if enabled(target) {
        Some(Instant::now())
    } else {
        None
    }
}

/// Writes one record for `target`.
pub(crate) fn emit(target: &'static str, line: &str) {
    #[cfg(feature = "trace")]
    log::trace!(target: target, "{line}");
    #[cfg(not(feature = "trace"))]
    let _ = (target, line);
}

/// Runs a trace formatter; a panic in it must never reach SQLite or change a result.
pub(crate) fn quietly(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

/// One VFS call and its arguments, as `entry.rs` received them. Out-pointers are read
/// (after the call, when it succeeded) to show what the call returned.
#[derive(Clone, Copy)]
pub(crate) enum Call {
    Open {
        flags: c_int,
    },
    Delete {
        sync_dir: c_int,
    },
    Close,
    Read {
        offset: i64,
        len: c_int,
    },
    Write {
        offset: i64,
        len: c_int,
    },
    Truncate {
        size: i64,
    },
    Sync {
        flags: c_int,
    },
    FileSize {
        out: *const i64,
    },
    Lock {
        level: c_int,
    },
    Unlock {
        level: c_int,
    },
    CheckReservedLock {
        out: *const c_int,
    },
    FileControl {
        op: c_int,
    },
    ShmMap {
        region: c_int,
        size: c_int,
        extend: c_int,
    },
    ShmLock {
        offset: c_int,
        count: c_int,
        flags: c_int,
    },
    ShmBarrier,
    ShmUnmap {
        delete: c_int,
    },
    Fetch {
        offset: i64,
        len: c_int,
        out: *const *mut c_void,
    },
    Unfetch {
        offset: i64,
        page: *const c_void,
    },
}

impl Call {
    /// The `sqlite3_io_methods` / `sqlite3_vfs` member name.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Call::Open { .. } => "xOpen",
            Call::Delete { .. } => "xDelete",
            Call::Close => "xClose",
            Call::Read { .. } => "xRead",
            Call::Write { .. } => "xWrite",
            Call::Truncate { .. } => "xTruncate",
            Call::Sync { .. } => "xSync",
            Call::FileSize { .. } => "xFileSize",
            Call::Lock { .. } => "xLock",
            Call::Unlock { .. } => "xUnlock",
            Call::CheckReservedLock { .. } => "xCheckReservedLock",
            Call::FileControl { .. } => "xFileControl",
            Call::ShmMap { .. } => "xShmMap",
            Call::ShmLock { .. } => "xShmLock",
            Call::ShmBarrier => "xShmBarrier",
            Call::ShmUnmap { .. } => "xShmUnmap",
            Call::Fetch { .. } => "xFetch",
            Call::Unfetch { .. } => "xUnfetch",
        }
    }

    /// Appends ` key=value` pairs for the arguments, and for what a successful call
    /// returned through its out-pointer.
    ///
    /// # Safety
    /// Out-pointers must be the ones SQLite passed to the call being traced, which is
    /// still running.
    unsafe fn write_args(&self, out: &mut String, rc: c_int) {
        let _ = match *self {
            Call::Open { flags } => write!(out, " flags={flags:#x} ({})", open_flags(flags)),
            Call::Delete { sync_dir } => write!(out, " sync_dir={sync_dir}"),
            Call::Close | Call::ShmBarrier => Ok(()),
            Call::Read { offset, len } | Call::Write { offset, len } => {
                write!(out, " offset={offset} len={len}")
            }
            Call::Truncate { size } => write!(out, " size={size}"),
            Call::Sync { flags } => write!(out, " flags={}", sync_flags(flags)),
            Call::FileSize { out: size } => match rc == SQLITE_OK && !size.is_null() {
                // SAFETY: SQLite's out-pointer, written by the call (caller contract).
                true => write!(out, " size={}", unsafe { *size }),
                false => Ok(()),
            },
            Call::Lock { level } | Call::Unlock { level } => {
                write!(out, " level={}", lock_level(level))
            }
            Call::CheckReservedLock { out: reserved } => {
                match rc == SQLITE_OK && !reserved.is_null() {
                    // SAFETY: SQLite's out-pointer, written by the call (caller contract).
                    true => write!(out, " reserved={}", unsafe { *reserved }),
                    false => Ok(()),
                }
            }
            Call::FileControl { op } => match file_control_name(op) {
                Some(name) => write!(out, " op={name}"),
                None => write!(out, " op={op}"),
            },
            Call::ShmMap {
                region,
                size,
                extend,
            } => write!(out, " region={region} size={size} extend={extend}"),
            Call::ShmLock {
                offset,
                count,
                flags,
            } => write!(
                out,
                " offset={offset} n={count} flags={}",
                shm_lock_flags(flags)
            ),
            Call::ShmUnmap { delete } => write!(out, " delete={delete}"),
            Call::Fetch {
                offset,
                len,
                out: page,
            } => {
                // SAFETY: SQLite's out-pointer, written by the call (caller contract).
                let mapped = rc == SQLITE_OK && !page.is_null() && unsafe { !(*page).is_null() };
                write!(out, " offset={offset} len={len} mapped={}", mapped as u8)
            }
            Call::Unfetch { offset, page } => {
                write!(out, " offset={offset} release={}", !page.is_null() as u8)
            }
        };
    }
}

/// What a trace record says about an open file.
#[derive(Clone, Copy)]
pub(crate) struct FileLabel<'a> {
    pub(crate) id: u64,
    pub(crate) fd: i32,
    /// `None` for an anonymous temporary file.
    pub(crate) path: Option<&'a str>,
}

/// `id=3 fd=7 file="/path"` (`file=<temp>` for an anonymous temporary file).
pub(crate) fn describe_file(file: FileLabel<'_>) -> String {
    let FileLabel { id, fd, path } = file;
    match path {
        Some(path) => format!("id={id} fd={fd} file={path:?}"),
        None => format!("id={id} fd={fd} file=<temp>"),
    }
}

/// Writes the record of a finished VFS call on an open file.
///
/// # Safety
/// As [`Call::write_args`].
#[cold]
#[inline(never)]
pub(crate) unsafe fn file_call(started: Instant, call: Call, rc: c_int, file: FileLabel<'_>) {
    // SAFETY: forwarded caller contract.
    quietly(|| unsafe { call_record(started, call, rc, &describe_file(file)) });
}

/// Writes the record of a finished VFS call; `subject` names the file (see
/// [`describe_file`]).
///
/// # Safety
/// As [`Call::write_args`].
#[cold]
#[inline(never)]
pub(crate) unsafe fn call(started: Instant, call: Call, rc: c_int, subject: &str) {
    // SAFETY: forwarded caller contract.
    quietly(|| unsafe { call_record(started, call, rc, subject) });
}

/// # Safety
/// As [`Call::write_args`].
unsafe fn call_record(started: Instant, call: Call, rc: c_int, subject: &str) {
    let duration_ns = started.elapsed().as_nanos();
    let mut line = String::with_capacity(160);
    let _ = write!(line, "{} {subject}", call.name());
    // SAFETY: forwarded caller contract.
    unsafe { call.write_args(&mut line, rc) };
    let _ = write!(line, " rc={rc}");
    if rc != SQLITE_OK {
        let _ = write!(line, " ({})", result_name(rc));
    }
    let _ = write!(line, " duration_ns={duration_ns}");
    emit(TARGET_VFS, &line);
}

fn open_flags(flags: c_int) -> String {
    let kinds = [
        (SQLITE_OPEN_MAIN_DB, "main_db"),
        (SQLITE_OPEN_TEMP_DB, "temp_db"),
        (SQLITE_OPEN_TRANSIENT_DB, "transient_db"),
        (SQLITE_OPEN_MAIN_JOURNAL, "main_journal"),
        (SQLITE_OPEN_TEMP_JOURNAL, "temp_journal"),
        (SQLITE_OPEN_SUBJOURNAL, "subjournal"),
        (SQLITE_OPEN_SUPER_JOURNAL, "super_journal"),
        (SQLITE_OPEN_WAL, "wal"),
        (SQLITE_OPEN_READONLY, "readonly"),
        (SQLITE_OPEN_READWRITE, "readwrite"),
        (SQLITE_OPEN_CREATE, "create"),
        (SQLITE_OPEN_EXCLUSIVE, "exclusive"),
        (SQLITE_OPEN_DELETEONCLOSE, "deleteonclose"),
    ];
    let names: Vec<&str> = kinds
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    names.join("|")
}

fn sync_flags(flags: c_int) -> String {
    let kind = if flags & 0x0f == SQLITE_SYNC_FULL {
        "FULL"
    } else {
        "NORMAL"
    };
    if flags & SQLITE_SYNC_DATAONLY != 0 {
        format!("{kind}|DATAONLY")
    } else {
        kind.to_string()
    }
}

fn lock_level(level: c_int) -> &'static str {
    match level {
        SQLITE_LOCK_NONE => "NONE",
        SQLITE_LOCK_SHARED => "SHARED",
        SQLITE_LOCK_RESERVED => "RESERVED",
        SQLITE_LOCK_PENDING => "PENDING",
        SQLITE_LOCK_EXCLUSIVE => "EXCLUSIVE",
        _ => "?",
    }
}

fn shm_lock_flags(flags: c_int) -> String {
    let action = if flags & SQLITE_SHM_UNLOCK != 0 {
        "UNLOCK"
    } else {
        "LOCK"
    };
    let mode = if flags & SQLITE_SHM_EXCLUSIVE != 0 {
        "EXCLUSIVE"
    } else {
        "SHARED"
    };
    format!("{action}|{mode}")
}

/// Names of the file-control opcodes of sqlite3.h.
fn file_control_name(op: c_int) -> Option<&'static str> {
    Some(match op {
        1 => "LOCKSTATE",
        4 => "LAST_ERRNO",
        5 => "SIZE_HINT",
        6 => "CHUNK_SIZE",
        7 => "FILE_POINTER",
        8 => "SYNC_OMITTED",
        9 => "WIN32_AV_RETRY",
        10 => "PERSIST_WAL",
        11 => "OVERWRITE",
        12 => "VFSNAME",
        13 => "POWERSAFE_OVERWRITE",
        14 => "PRAGMA",
        15 => "BUSYHANDLER",
        16 => "TEMPFILENAME",
        18 => "MMAP_SIZE",
        19 => "TRACE",
        20 => "HAS_MOVED",
        21 => "SYNC",
        22 => "COMMIT_PHASETWO",
        23 => "WIN32_SET_HANDLE",
        24 => "WAL_BLOCK",
        25 => "ZIPVFS",
        26 => "RBU",
        27 => "VFS_POINTER",
        28 => "JOURNAL_POINTER",
        29 => "WIN32_GET_HANDLE",
        30 => "PDB",
        31 => "BEGIN_ATOMIC_WRITE",
        32 => "COMMIT_ATOMIC_WRITE",
        33 => "ROLLBACK_ATOMIC_WRITE",
        34 => "LOCK_TIMEOUT",
        35 => "DATA_VERSION",
        36 => "SIZE_LIMIT",
        37 => "CKPT_DONE",
        38 => "RESERVE_BYTES",
        39 => "CKPT_START",
        40 => "EXTERNAL_READER",
        41 => "CKSM_FILE",
        42 => "RESET_CACHE",
        43 => "NULL_IO",
        44 => "BLOCK_ON_CONNECT",
        _ => return None,
    })
}

/// The name of the result code (sqlite3.h): the extended codes this VFS returns, else
/// the primary code's.
fn result_name(rc: c_int) -> &'static str {
    match rc {
        SQLITE_IOERR_READ => return "SQLITE_IOERR_READ",
        SQLITE_IOERR_SHORT_READ => return "SQLITE_IOERR_SHORT_READ",
        SQLITE_IOERR_WRITE => return "SQLITE_IOERR_WRITE",
        SQLITE_IOERR_FSYNC => return "SQLITE_IOERR_FSYNC",
        SQLITE_IOERR_DIR_FSYNC => return "SQLITE_IOERR_DIR_FSYNC",
        SQLITE_IOERR_TRUNCATE => return "SQLITE_IOERR_TRUNCATE",
        SQLITE_IOERR_FSTAT => return "SQLITE_IOERR_FSTAT",
        SQLITE_IOERR_DELETE => return "SQLITE_IOERR_DELETE",
        SQLITE_IOERR_DELETE_NOENT => return "SQLITE_IOERR_DELETE_NOENT",
        SQLITE_IOERR_SHMOPEN => return "SQLITE_IOERR_SHMOPEN",
        SQLITE_IOERR_SHMMAP => return "SQLITE_IOERR_SHMMAP",
        SQLITE_IOERR_MMAP => return "SQLITE_IOERR_MMAP",
        SQLITE_IOERR_CORRUPTFS => return "SQLITE_IOERR_CORRUPTFS",
        SQLITE_READONLY_CANTINIT => return "SQLITE_READONLY_CANTINIT",
        _ => {}
    }
    match rc & 0xff {
        0 => "SQLITE_OK",
        1 => "SQLITE_ERROR",
        2 => "SQLITE_INTERNAL",
        3 => "SQLITE_PERM",
        4 => "SQLITE_ABORT",
        5 => "SQLITE_BUSY",
        6 => "SQLITE_LOCKED",
        7 => "SQLITE_NOMEM",
        8 => "SQLITE_READONLY",
        9 => "SQLITE_INTERRUPT",
        10 => "SQLITE_IOERR",
        11 => "SQLITE_CORRUPT",
        12 => "SQLITE_NOTFOUND",
        13 => "SQLITE_FULL",
        14 => "SQLITE_CANTOPEN",
        15 => "SQLITE_PROTOCOL",
        18 => "SQLITE_TOOBIG",
        21 => "SQLITE_MISUSE",
        22 => "SQLITE_NOLFS",
        23 => "SQLITE_AUTH",
        25 => "SQLITE_RANGE",
        26 => "SQLITE_NOTADB",
        27 => "SQLITE_NOTICE",
        28 => "SQLITE_WARNING",
        _ => "SQLITE_?",
    }
}

#[cfg(feature = "trace")]
mod logger;
mod targets;
#[cfg(feature = "trace")]
pub use logger::{install, Filter, Sink, TraceLogger};
pub use targets::{COMPILED_IN, LOG_DESTINATION_ENV, TARGET_IO, TARGET_RING, TARGET_VFS};

/// Installs the extension's logger when `RUST_LOG` enables a `sqlite_uring` target, with
/// the destination `SQLITE_URING_LOG` names: unset or `stderr`, `sqlite3_log` (records
/// go to the host's `SQLITE_CONFIG_LOG` callback with code `SQLITE_NOTICE`; a no-op when
/// the host set none), or a file path (appended to). The first load decides; later loads
/// of the same library change nothing. An unusable `SQLITE_URING_LOG` is an error naming
/// the variable. Without the `trace` feature this does nothing.
///
/// # Safety
/// `api_routines` must be the pointer SQLite passed to the extension entry point.
#[doc(hidden)]
pub unsafe fn init_extension_logging(api_routines: *const c_void) -> Result<(), String> {
    #[cfg(feature = "trace")]
    {
        // SAFETY: forwarded caller contract.
        unsafe { logger::init_extension_logging(api_routines) }
    }
    #[cfg(not(feature = "trace"))]
    {
        let _ = api_routines;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_records_name_the_arguments() {
        let mut line = String::new();
        let size = 8192i64;
        // SAFETY: `size` is a live local standing in for SQLite's out-pointer.
        unsafe {
            Call::Write {
                offset: 4096,
                len: 4096,
            }
            .write_args(&mut line, SQLITE_OK);
            Call::FileSize { out: &size }.write_args(&mut line, SQLITE_OK);
            Call::Lock {
                level: SQLITE_LOCK_EXCLUSIVE,
            }
            .write_args(&mut line, SQLITE_BUSY);
            Call::ShmLock {
                offset: 3,
                count: 1,
                flags: SQLITE_SHM_LOCK | SQLITE_SHM_SHARED,
            }
            .write_args(&mut line, SQLITE_OK);
            Call::Open {
                flags: SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
            }
            .write_args(&mut line, SQLITE_OK);
        }
        assert_eq!(
            line,
            " offset=4096 len=4096 size=8192 level=EXCLUSIVE offset=3 n=1 flags=LOCK|SHARED \
             flags=0x106 (main_db|readwrite|create)"
        );
        assert_eq!(result_name(522), "SQLITE_IOERR_SHORT_READ");
        assert_eq!(result_name(SQLITE_IOERR | (99 << 8)), "SQLITE_IOERR");
        assert_eq!(
            sync_flags(SQLITE_SYNC_FULL | SQLITE_SYNC_DATAONLY),
            "FULL|DATAONLY"
        );
    }
}
