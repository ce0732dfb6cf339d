//! Every `extern "C"` function SQLite calls: the `sqlite3_vfs` and `sqlite3_io_methods`
//! callbacks. Each decodes its C arguments (file controls into a typed
//! [`FileControl`]), calls safe code in `file/` and `vfs.rs`, writes results back, and
//! returns through [`guard`], the one place where a `Result` becomes a SQLite code and
//! where panics stop (no panic may unwind into C); `x_shm_barrier` alone, a fence that
//! cannot fail or panic, needs no guard. Every call is also where a trace record is
//! written when `sqlite_uring::vfs` tracing is on (`trace.rs`; one atomic load when off).
//!
//! # Hostile arguments
//!
//! A VFS shim stacked above this one, or a buggy caller, can pass any value. The safe
//! methods assert what SQLite always passes (offsets and sizes ≥ 0, the lock transitions
//! sqlite3.h allows, shared-memory slots 0..8, a buffer behind every amount); this layer
//! makes those assertions invariants by answering every other value before calling
//! them, as `unix` answers it where `unix` answers it cleanly:
//!
//! * a value the kernel rejects (a negative xWrite offset, an xRead or xWrite whose end
//!   passes `i64::MAX`, a null xWrite buffer) gets the call's I/O error with the errno the
//!   system call would have set (EINVAL, EFAULT), unlogged, as os_unix.c does; a negative
//!   xTruncate size is os_unix.c's logged ftruncate(2) failure;
//! * a value `unix` turns into a crash, a pointer outside its mapping, or lock state that
//!   no longer matches the locks it holds (a negative xRead offset or amount, a null xRead
//!   buffer, a negative xWrite amount, xShmMap's negative region or a region size that is
//!   not whole 4 KiB pages, xShmLock slots outside 0..8, lock transitions sqlite3.h does
//!   not define) gets the call's I/O error code and a line in SQLite's log
//!   (`sqlite3_log`); an xFetch outside the file, where `unix` hands out a pointer outside
//!   its mapping, answers "no page" (SQLITE_OK, null) and logs;
//! * a null pointer where SQLite always passes one (an out-pointer, a file control's
//!   argument) is SQLITE_MISUSE and logged: `unix` dereferences it;
//! * amounts of zero, levels a lock or unlock already satisfies, any level on a journal,
//!   WAL or temporary file (os_unix.c's nolockIoMethods), file-control opcodes this VFS
//!   does not know, and xShmLock flags that name neither a lock nor an unlock are answered
//!   as `unix` answers them (SQLITE_OK, SQLITE_NOTFOUND), doing nothing.
//!
//! `tests/hostile_args.rs` compares each class with what `unix` does;
//! `tests/vfs_methods.rs` runs random call sequences against both.

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::Failure;
use crate::ffi::*;
use crate::file::control::{ControlReply, FileControl, ShmLockRequest};
use crate::file::File;
use crate::flush_point::CallKind;
use crate::sys::calls;
use crate::trace::{self, Call};
use crate::vfs::VfsState;

/// What SQLite allocates for each open file (`szOsFile`): the base struct SQLite reads,
/// followed by our pointer to the Rust file object.
#[repr(C)]
pub(crate) struct RawFile {
    base: sqlite3_file,
    file: *mut File,
}

/// Runs `body`, mapping its outcome to a SQLite result code; panics become SQLITE_IOERR.
fn guard(
    log: Option<&VfsState>,
    what: &str,
    body: impl FnOnce() -> Result<c_int, Failure>,
) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(code)) => code,
        Ok(Err(failure)) => failure_code(failure),
        Err(panic) => panicked(log, what, panic),
    }
}

/// The result code of a failed call (apart from the success path, which is one test).
#[cold]
fn failure_code(failure: Failure) -> c_int {
    failure.code()
}

/// A panic caught in `what`: logged, and SQLITE_IOERR.
#[cold]
fn panicked(log: Option<&VfsState>, what: &str, panic: Box<dyn std::any::Any + Send>) -> c_int {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    if let Some(vfs) = log {
        vfs.api.log(
            SQLITE_IOERR,
            &format!("sqlite-uring: internal error in {what}: {message}"),
        );
    }
    Failure::Internal.code()
}

/// # Safety
/// `raw` must be a file SQLite opened through our xOpen (methods set, pointer live).
unsafe fn file_of<'a>(raw: *mut sqlite3_file) -> &'a mut File {
    // SAFETY: caller contract; SQLite never calls two methods of one file concurrently,
    // so the exclusive borrow is unique for the duration of the callback.
    unsafe { &mut *(*(raw as *mut RawFile)).file }
}

/// Numbers this thread's file-method calls, so a file can tell that one call came right
/// after another with no call on any other file in between.
fn next_call_number() -> u64 {
    thread_local! {
        static CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    CALLS.with(|calls| {
        let number = calls.get() + 1;
        calls.set(number);
        number
    })
}

/// Runs a file method; a failure's errno is remembered for SQLITE_FCNTL_LAST_ERRNO (0
/// after a short read or a full disk, as os_unix.c stores). With
/// tracing on, the call is recorded with its result and duration. Failed system calls are
/// logged where they fail, as os_unix.c's unixLogError does, only for the calls it logs
/// (`SqliteApi::log_os_error`): a failed read, write, lock or fstat is not logged, under
/// `unix` or here.
///
/// # Safety
/// As [`file_of`]; out-pointers in `call` must be the ones SQLite passed to this call.
unsafe fn with_file(
    raw: *mut sqlite3_file,
    call: Call,
    body: impl FnOnce(&mut File) -> Result<c_int, Failure>,
) -> c_int {
    // SAFETY: forwarded caller contract.
    let file = unsafe { file_of(raw) };
    let vfs = file.vfs;
    let what = call.name();
    let started = trace::start(trace::TARGET_VFS);
    let code = guard(Some(vfs), what, || {
        file.note_call(
            next_call_number(),
            match call {
                Call::Write { .. } => CallKind::Write,
                Call::Sync { .. } => CallKind::Sync,
                _ => CallKind::Other,
            },
        );
        let result = body(file);
        if let Err(failure) = result {
            remember_errno(file, failure);
        }
        result
    });
    if let Some(started) = started {
        // SAFETY: `call` holds this callback's own arguments (caller contract).
        unsafe { trace::file_call(started, call, code, file.trace_label()) };
    }
    code
}

/// Keeps a failed call's errno for SQLITE_FCNTL_LAST_ERRNO: 0, "not a system error", for
/// a short read and a full disk, as os_unix.c stores; a failure with no errno leaves the
/// last one.
#[cold]
fn remember_errno(file: &mut File, failure: Failure) {
    match failure {
        Failure::ShortRead | Failure::Full(_) => file.last_errno = 0,
        failure if failure.errno() != 0 => file.last_errno = failure.errno(),
        _ => {}
    }
}

/// Logs a call this layer refuses (see "Hostile arguments" above) under the file's name,
/// with the code it returns, and gives back the failure to return.
fn refuse(file: &File, failure: Failure, what: &str) -> Failure {
    file.log_refusal(failure.code(), &format!("{what} refused"));
    failure
}

// ─── sqlite3_io_methods ────────────────────────────────────────────────────────────────

pub(crate) static IO_METHODS: sqlite3_io_methods = sqlite3_io_methods {
    i_version: 3,
    x_close: Some(x_close),
    x_read: Some(x_read),
    x_write: Some(x_write),
    x_truncate: Some(x_truncate),
    x_sync: Some(x_sync),
    x_file_size: Some(x_file_size),
    x_lock: Some(x_lock),
    x_unlock: Some(x_unlock),
    x_check_reserved_lock: Some(x_check_reserved_lock),
    x_file_control: Some(x_file_control),
    x_sector_size: Some(x_sector_size),
    x_device_characteristics: Some(x_device_characteristics),
    x_shm_map: Some(x_shm_map),
    x_shm_lock: Some(x_shm_lock),
    x_shm_barrier: Some(x_shm_barrier),
    x_shm_unmap: Some(x_shm_unmap),
    x_fetch: Some(x_fetch),
    x_unfetch: Some(x_unfetch),
};

/// For `nolock=1`: no shared memory, as os_unix.c's nolockIoMethods (WAL then needs
/// `locking_mode=EXCLUSIVE`, exactly as with `unix`).
pub(crate) static NOLOCK_IO_METHODS: sqlite3_io_methods = sqlite3_io_methods {
    i_version: 3,
    x_shm_map: None,
    x_shm_lock: None,
    x_shm_barrier: None,
    x_shm_unmap: None,
    ..IO_METHODS
};

unsafe extern "C" fn x_close(raw: *mut sqlite3_file) -> c_int {
    // SAFETY: SQLite calls xClose once on a file our xOpen set up; the Box was created
    // there and is reclaimed exactly once here.
    unsafe {
        let raw = raw as *mut RawFile;
        let file = std::mem::replace(&mut (*raw).file, std::ptr::null_mut());
        (*raw).base.methods = std::ptr::null();
        if file.is_null() {
            return SQLITE_OK;
        }
        let vfs = (*file).vfs;
        let started = trace::start(trace::TARGET_VFS);
        let subject = started.map(|_| trace::describe_file((*file).trace_label()));
        let code = guard(Some(vfs), "xClose", || {
            (*file).verify_db_file();
            drop(Box::from_raw(file));
            Ok(SQLITE_OK)
        });
        if let (Some(started), Some(subject)) = (started, subject) {
            trace::call(started, Call::Close, code, &subject);
        }
        code
    }
}

unsafe extern "C" fn x_read(
    raw: *mut sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite passes a live file and a writable buffer of `amount` bytes; the
    // arguments are checked below before the buffer is touched.
    unsafe {
        with_file(
            raw,
            Call::Read {
                offset,
                len: amount,
            },
            |file| {
                // One test lets every read SQLite makes through; the rest are answered
                // apart.
                if amount <= 0
                    || offset < 0
                    || buf.is_null()
                    || offset > i64::MAX - i64::from(amount)
                {
                    return unusual_read(file, buf, amount, offset);
                }
                let buf = std::slice::from_raw_parts_mut(buf as *mut u8, amount as usize);
                file.read(buf, offset).map(|()| SQLITE_OK)
            },
        )
    }
}

/// xRead's answer to arguments SQLite never passes (`x_read` sends only these here).
#[cold]
fn unusual_read(
    file: &mut File,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> Result<c_int, Failure> {
    // Nothing to read, whatever the offset: SQLITE_OK, as from `unix` (which copies or
    // preads zero bytes).
    if amount == 0 {
        return Ok(SQLITE_OK);
    }
    if offset < 0 || amount < 0 {
        // `unix` copies from before its mapping at a negative offset (a crash), and past
        // the buffer for a negative amount.
        return Err(refuse(
            file,
            Failure::Read(libc::EINVAL),
            &format!("xRead of {amount} bytes at offset {offset}"),
        ));
    }
    // pread(2)'s answer, which os_unix.c returns unlogged.
    if offset.checked_add(i64::from(amount)).is_none() {
        return Err(Failure::Read(libc::EINVAL));
    }
    // pread(2)'s EFAULT where there are bytes to copy; where there are none (past the end
    // of the file) `unix` zero-fills the null buffer.
    debug_assert!(buf.is_null());
    Err(refuse(
        file,
        Failure::Read(libc::EFAULT),
        &format!("xRead of {amount} bytes at offset {offset} into no buffer"),
    ))
}

unsafe extern "C" fn x_write(
    raw: *mut sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite passes a live file and a readable buffer of `amount` bytes; the
    // arguments are checked below before the buffer is touched.
    unsafe {
        with_file(
            raw,
            Call::Write {
                offset,
                len: amount,
            },
            |file| {
                // pwrite(2) refuses a negative offset whatever the amount (EINVAL), and
                // os_unix.c returns that unlogged.
                if offset < 0 {
                    return Err(Failure::Write(libc::EINVAL));
                }
                // Nothing to write: SQLITE_OK, as from `unix`, and the file (and the size
                // this VFS may cache) stays as it is.
                if amount == 0 {
                    return Ok(SQLITE_OK);
                }
                if amount < 0 {
                    // `unix` writes the amount's low 17 bits' worth of bytes (128 KiB - 1
                    // for -1) from a buffer that has none.
                    return Err(refuse(
                        file,
                        Failure::Write(libc::EINVAL),
                        &format!("xWrite of {amount} bytes at offset {offset}"),
                    ));
                }
                if offset.checked_add(i64::from(amount)).is_none() {
                    return Err(Failure::Write(libc::EINVAL));
                }
                if buf.is_null() {
                    return Err(Failure::Write(libc::EFAULT));
                }
                let buf = std::slice::from_raw_parts(buf as *const u8, amount as usize);
                file.write(buf, offset).map(|()| SQLITE_OK)
            },
        )
    }
}

unsafe extern "C" fn x_truncate(raw: *mut sqlite3_file, size: i64) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::Truncate { size }, |file| {
            // What ftruncate(2) answers (EINVAL), logged as os_unix.c logs it. (With a
            // chunk size set, os_unix.c rounds a size just below zero up to 0 first and
            // empties the file; a negative size is refused here whatever the chunk size.)
            if size < 0 {
                return Err(file.refuse_negative_truncate());
            }
            file.truncate(size).map(|()| SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_sync(raw: *mut sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::Sync { flags }, |file| {
            file.sync(flags).map(|()| SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_file_size(raw: *mut sqlite3_file, size: *mut i64) -> c_int {
    // SAFETY: SQLite passes a live file and a writable i64.
    unsafe {
        with_file(raw, Call::FileSize { out: size }, |file| {
            if size.is_null() {
                return Err(refuse(
                    file,
                    Failure::Misuse,
                    "xFileSize with no out-pointer",
                ));
            }
            *size = file.file_size()?;
            Ok(SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_lock(raw: *mut sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::Lock { level }, |file| {
            if !file.takes_locks() {
                return file.lock(level).map(|()| SQLITE_OK);
            }
            let held = file.lock_level();
            // A level already held (any level at or below it, negative ones included) is
            // SQLITE_OK with nothing done, as under `unix`.
            if level <= held {
                return Ok(SQLITE_OK);
            }
            // The transitions sqlite3.h defines (SQLite never asks for PENDING). `unix`
            // takes some lock for any other and records a level that no longer matches
            // it: from NONE, its unlock then leaves the lock held.
            let defined = matches!(
                (held, level),
                (SQLITE_LOCK_NONE, SQLITE_LOCK_SHARED)
                    | (SQLITE_LOCK_SHARED, SQLITE_LOCK_RESERVED)
                    | (
                        SQLITE_LOCK_SHARED | SQLITE_LOCK_RESERVED | SQLITE_LOCK_PENDING,
                        SQLITE_LOCK_EXCLUSIVE
                    )
            );
            if !defined {
                return Err(refuse(
                    file,
                    Failure::Lock(libc::EINVAL),
                    &format!("xLock({level}) while holding lock level {held}"),
                ));
            }
            file.lock(level).map(|()| SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_unlock(raw: *mut sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::Unlock { level }, |file| {
            if !file.takes_locks() {
                return file.unlock(level).map(|()| SQLITE_OK);
            }
            let held = file.lock_level();
            // Nothing to release: SQLITE_OK, as under `unix`, whatever the level.
            if level >= held {
                return Ok(SQLITE_OK);
            }
            // xUnlock goes to SHARED or NONE. `unix` records any other level as held
            // (a negative one as 255) while keeping or dropping locks that do not match.
            if level != SQLITE_LOCK_NONE && level != SQLITE_LOCK_SHARED {
                return Err(refuse(
                    file,
                    Failure::Unlock(libc::EINVAL),
                    &format!("xUnlock({level}) while holding lock level {held}"),
                ));
            }
            file.unlock(level).map(|()| SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_check_reserved_lock(raw: *mut sqlite3_file, out: *mut c_int) -> c_int {
    // SAFETY: SQLite passes a live file and a writable int.
    unsafe {
        with_file(raw, Call::CheckReservedLock { out }, |file| {
            if out.is_null() {
                return Err(refuse(
                    file,
                    Failure::Misuse,
                    "xCheckReservedLock with no out-pointer",
                ));
            }
            *out = file.check_reserved_lock()? as c_int;
            Ok(SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_file_control(raw: *mut sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: SQLite passes a live file and the argument type documented for `op`.
    unsafe {
        with_file(raw, Call::FileControl { op }, |file| {
            let Some(control) = decode_file_control(op, arg) else {
                return Err(refuse(
                    file,
                    Failure::Misuse,
                    &format!("xFileControl({op}) with a null argument"),
                ));
            };
            let reply = file.file_control(control)?;
            write_reply(file, reply, arg)
        })
    }
}

/// The file control `op` with its argument read, as sqlite3.h documents each opcode's
/// argument type; `None` when the opcode reads or writes its argument and that is null
/// (`unix` dereferences it). An opcode this VFS does not answer never looks at its
/// argument, nor does SQLITE_FCNTL_PRAGMA with a null one (SQLITE_NOTFOUND, as `unix`
/// answers every pragma).
///
/// # Safety
/// `arg` must be null or point to the argument type SQLite documents for `op`.
unsafe fn decode_file_control(op: c_int, arg: *mut c_void) -> Option<FileControl> {
    let uses_argument = matches!(
        op,
        SQLITE_FCNTL_LOCKSTATE
            | SQLITE_FCNTL_LAST_ERRNO
            | SQLITE_FCNTL_CHUNK_SIZE
            | SQLITE_FCNTL_SIZE_HINT
            | SQLITE_FCNTL_PERSIST_WAL
            | SQLITE_FCNTL_POWERSAFE_OVERWRITE
            | SQLITE_FCNTL_VFSNAME
            | SQLITE_FCNTL_TEMPFILENAME
            | SQLITE_FCNTL_HAS_MOVED
            | SQLITE_FCNTL_MMAP_SIZE
            | SQLITE_FCNTL_EXTERNAL_READER
    );
    if uses_argument && arg.is_null() {
        return None;
    }
    // SAFETY: (whole block) each arm reads `arg`, non-null where it is read, as the type
    // sqlite3.h documents for that opcode; SQLite owns the pointee for the duration of
    // the call.
    unsafe {
        Some(match op {
            SQLITE_FCNTL_LOCKSTATE => FileControl::LockState,
            SQLITE_FCNTL_LAST_ERRNO => FileControl::LastErrno,
            SQLITE_FCNTL_CHUNK_SIZE => FileControl::ChunkSize(*(arg as *const c_int) as i64),
            SQLITE_FCNTL_SIZE_HINT => FileControl::SizeHint(*(arg as *const i64)),
            SQLITE_FCNTL_PERSIST_WAL => FileControl::PersistWal(*(arg as *const c_int)),
            SQLITE_FCNTL_POWERSAFE_OVERWRITE => {
                FileControl::PowersafeOverwrite(*(arg as *const c_int))
            }
            SQLITE_FCNTL_VFSNAME => FileControl::VfsName,
            SQLITE_FCNTL_TEMPFILENAME => FileControl::TempFilename,
            SQLITE_FCNTL_HAS_MOVED => FileControl::HasMoved,
            SQLITE_FCNTL_MMAP_SIZE => FileControl::MmapSize(*(arg as *const i64)),
            SQLITE_FCNTL_EXTERNAL_READER => FileControl::ExternalReader,
            SQLITE_FCNTL_NULL_IO => FileControl::NullIo,
            SQLITE_FCNTL_CKPT_START => FileControl::CheckpointStart,
            SQLITE_FCNTL_CKPT_DONE => FileControl::CheckpointDone,
            SQLITE_FCNTL_SYNC => FileControl::Sync,
            SQLITE_FCNTL_COMMIT_PHASETWO => FileControl::CommitPhaseTwo,
            SQLITE_FCNTL_PRAGMA if !arg.is_null() => {
                // A `char*[3]`: [0] receives the result, [1] is the pragma's name, [2] its
                // value or null.
                let args = arg as *const *const c_char;
                let (name, value) = (*args.add(1), *args.add(2));
                if name.is_null() {
                    return Some(FileControl::Other(op));
                }
                FileControl::Pragma {
                    name: std::ffi::CStr::from_ptr(name)
                        .to_string_lossy()
                        .into_owned(),
                    value: (!value.is_null()).then(|| {
                        std::ffi::CStr::from_ptr(value)
                            .to_string_lossy()
                            .into_owned()
                    }),
                }
            }
            _ => FileControl::Other(op),
        })
    }
}

/// Writes a file control's reply where its argument says and returns its code.
///
/// # Safety
/// As [`decode_file_control`], for the opcode the reply answers.
unsafe fn write_reply(
    file: &File,
    reply: ControlReply,
    arg: *mut c_void,
) -> Result<c_int, Failure> {
    // SAFETY: (whole block) the file control produced a reply of the kind its opcode's
    // argument holds (an int, an i64, or a `char*` slot, which for SQLITE_FCNTL_PRAGMA is
    // the array's first element); SQLite frees a string it receives with sqlite3_free.
    unsafe {
        match reply {
            ControlReply::NotFound => return Ok(SQLITE_NOTFOUND),
            ControlReply::Done => {}
            ControlReply::Int(value) => *(arg as *mut c_int) = value,
            ControlReply::Int64(value) => *(arg as *mut i64) = value,
            ControlReply::Text(text) => {
                *(arg as *mut *mut c_char) = file.vfs.api.alloc_cstring(&text);
            }
            ControlReply::TextError(text) => {
                *(arg as *mut *mut c_char) = file.vfs.api.alloc_cstring(&text);
                return Err(Failure::BadArgument);
            }
        }
    }
    Ok(SQLITE_OK)
}

unsafe extern "C" fn x_sector_size(raw: *mut sqlite3_file) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe { file_of(raw) }.sector_size()
}

unsafe extern "C" fn x_device_characteristics(raw: *mut sqlite3_file) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe { file_of(raw) }.device_characteristics()
}

/// The unit `-shm` files grow by (os_unix.c unixShmMap's `pgsz`): a region size is a
/// whole number of them.
const SHM_PAGE_BYTES: c_int = 4096;

unsafe extern "C" fn x_shm_map(
    raw: *mut sqlite3_file,
    region: c_int,
    region_size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite passes a live file and a writable pointer slot (checked for null).
    unsafe {
        let call = Call::ShmMap {
            region,
            size: region_size,
            extend,
        };
        with_file(raw, call, |file| {
            if out.is_null() {
                return Err(refuse(file, Failure::Misuse, "xShmMap with no out-pointer"));
            }
            *out = std::ptr::null_mut();
            // `unix` reads the region pointer before its array for a negative region (a
            // crash), and maps a size that is not whole pages past the end of its file
            // (SIGBUS when touched); a size ≤ 0 fails its mmap(2).
            if region < 0 || region_size <= 0 || region_size % SHM_PAGE_BYTES != 0 {
                return Err(refuse(
                    file,
                    Failure::ShmMap(libc::EINVAL),
                    &format!("xShmMap of region {region} of {region_size} bytes"),
                ));
            }
            let (pointer, readonly) =
                file.shm_map(region as usize, region_size as usize, extend != 0)?;
            *out = pointer.cast();
            Ok(if readonly { SQLITE_READONLY } else { SQLITE_OK })
        })
    }
}

unsafe extern "C" fn x_shm_lock(
    raw: *mut sqlite3_file,
    offset: c_int,
    count: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        let call = Call::ShmLock {
            offset,
            count,
            flags,
        };
        with_file(raw, call, |file| {
            // os_unix.c reads what any flags mean in this order: with SQLITE_SHM_UNLOCK an
            // unlock (shared if SQLITE_SHM_SHARED is set too), else exactly a shared or an
            // exclusive lock; anything else it ignores.
            let request = if flags & SQLITE_SHM_UNLOCK != 0 {
                ShmLockRequest::Unlock {
                    shared: flags & SQLITE_SHM_SHARED != 0,
                }
            } else if flags == SQLITE_SHM_LOCK | SQLITE_SHM_SHARED {
                ShmLockRequest::Shared
            } else if flags == SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE {
                ShmLockRequest::Exclusive
            } else {
                ShmLockRequest::Nothing
            };
            // `unix` indexes its lock array with the slot (outside 0..8: memory that is
            // not the array, or a crash) and counts a shared lock on several slots on the
            // first only.
            let end = i64::from(offset) + i64::from(count);
            let shared = matches!(
                request,
                ShmLockRequest::Shared | ShmLockRequest::Unlock { shared: true }
            );
            if offset < 0
                || count < 1
                || end > i64::from(SQLITE_SHM_NLOCK)
                || (shared && count != 1)
            {
                return Err(refuse(
                    file,
                    Failure::ShmLock,
                    &format!("xShmLock of {count} slots from {offset} with flags {flags:#x}"),
                ));
            }
            file.shm_lock(offset, count, request).map(|()| SQLITE_OK)
        })
    }
}

/// xShmBarrier: a full memory barrier between WAL-index writes and reads of other
/// processes' writes (the mapping is shared memory). It runs outside [`with_file`]: a
/// fence touches no file state and can neither fail nor panic. No flush: the header a
/// writer publishes after it names frames its commit frame's xWrite already flushed, and
/// a reader's barrier publishes nothing. It still takes a call number, so the flush
/// points of the files around it see a call between them, as for any other call.
unsafe extern "C" fn x_shm_barrier(raw: *mut sqlite3_file) {
    let started = trace::start(trace::TARGET_VFS);
    next_call_number();
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    if let Some(started) = started {
        // SAFETY: SQLite passes a live file of ours; the label only reads it.
        let file = unsafe { file_of(raw) };
        // SAFETY: `Call::ShmBarrier` holds no pointer.
        unsafe { trace::file_call(started, Call::ShmBarrier, SQLITE_OK, file.trace_label()) };
    }
}

unsafe extern "C" fn x_shm_unmap(raw: *mut sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::ShmUnmap { delete }, |file| {
            file.shm_unmap(delete != 0);
            Ok(SQLITE_OK)
        })
    }
}

/// os_unix.c unixFetch's margin (`nEofBuffer`): a fetched page has this many mapped bytes
/// after it. `mmap.rs` applies the margin the running SQLite uses; this bound only keeps
/// its arithmetic within `i64`.
const FETCH_MARGIN_BYTES: i64 = 256;

unsafe extern "C" fn x_fetch(
    raw: *mut sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite passes a live file and a writable pointer slot (checked for null).
    unsafe {
        let call = Call::Fetch {
            offset,
            len: amount,
            out: out as *const *mut c_void,
        };
        with_file(raw, call, |file| {
            if out.is_null() {
                return Err(refuse(file, Failure::Misuse, "xFetch with no out-pointer"));
            }
            *out = std::ptr::null_mut();
            // No page (SQLITE_OK with null, after which SQLite reads): `unix` hands out a
            // pointer outside its mapping for a negative offset or amount, or where
            // offset + amount overflows.
            let in_range = offset >= 0
                && amount >= 0
                && offset
                    .checked_add(i64::from(amount) + FETCH_MARGIN_BYTES)
                    .is_some();
            if !in_range {
                file.log_refusal(
                    SQLITE_OK,
                    &format!("xFetch of {amount} bytes at offset {offset}: no page"),
                );
                return Ok(SQLITE_OK);
            }
            *out = file.fetch(offset, amount)?.cast();
            Ok(SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_unfetch(raw: *mut sqlite3_file, offset: i64, page: *mut c_void) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        let call = Call::Unfetch {
            offset,
            page: page as *const c_void,
        };
        with_file(raw, call, |file| {
            file.unfetch(page.cast());
            Ok(SQLITE_OK)
        })
    }
}

// ─── sqlite3_vfs ───────────────────────────────────────────────────────────────────────

/// # Safety
/// `vfs` must be one of our registered VFS objects.
unsafe fn state_of(vfs: *mut sqlite3_vfs) -> &'static VfsState {
    // SAFETY: registration stores a leaked, immutable VfsState in pAppData.
    unsafe { &*((*vfs).p_app_data as *const VfsState) }
}

pub(crate) unsafe extern "C" fn x_open(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    raw: *mut sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite passes our VFS, `szOsFile` writable bytes at `raw`, and a filename
    // that is null or lives for the call.
    unsafe {
        let state = state_of(vfs);
        let raw = raw as *mut RawFile;
        (*raw).base.methods = std::ptr::null();
        (*raw).file = std::ptr::null_mut();
        let started = trace::start(trace::TARGET_VFS);
        // A file without a name is an anonymous temporary file, delete-on-close or not:
        // os_unix.c opens one for a null name whatever the flags say. SQLite sees its
        // own flags back.
        let open_flags = if name.is_null() {
            flags | SQLITE_OPEN_DELETEONCLOSE
        } else {
            flags
        };
        let code = guard(Some(state), "xOpen", || {
            // The name and its URI parameters, decoded once: `file/` holds no C pointer.
            let Some(decoded) = state.api.open_name(name) else {
                return Err(refuse_non_utf8_path(
                    state,
                    name,
                    "open",
                    Failure::CantOpen(libc::EILSEQ),
                ));
            };
            let (file, flags_out) = File::open(state, decoded, open_flags)?;
            let flags_out =
                (flags_out & !SQLITE_OPEN_DELETEONCLOSE) | (flags & SQLITE_OPEN_DELETEONCLOSE);
            let methods = if file.uses_nolock() {
                &NOLOCK_IO_METHODS
            } else {
                &IO_METHODS
            };
            (*raw).file = Box::into_raw(Box::new(file));
            (*raw).base.methods = methods;
            if !out_flags.is_null() {
                *out_flags = flags_out;
            }
            Ok(SQLITE_OK)
        });
        if let Some(started) = started {
            let call = Call::Open { flags };
            match (*raw).file.as_ref() {
                Some(file) => trace::file_call(started, call, code, file.trace_label()),
                None if name.is_null() => trace::call(started, call, code, "file=<temp>"),
                None => {
                    let path = std::ffi::CStr::from_ptr(name).to_string_lossy();
                    trace::call(started, call, code, &format!("file={path:?}"));
                }
            }
        }
        code
    }
}

/// A path that is not UTF-8, refused by xOpen (SQLITE_CANTOPEN) and xDelete
/// (SQLITE_IOERR_DELETE) and logged. This VFS keeps paths as text (its lock, queue and
/// shared-memory registries are keyed by them, its messages quote them); a lossy copy
/// would name another file than the one `unix` opens, so the two VFSes would not share
/// the database. `verb`: what was refused; `failure`: the answer.
///
/// # Safety
/// `name` is a NUL-terminated path SQLite passed, alive for the call.
unsafe fn refuse_non_utf8_path(
    state: &VfsState,
    name: *const c_char,
    verb: &str,
    failure: Failure,
) -> Failure {
    // SAFETY: caller contract.
    let shown = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
    state.api.log(
        failure.code(),
        &format!(
            "sqlite-uring: cannot {verb} {shown:?}: the path is not UTF-8, which this VFS \
             needs (the unix VFS takes any bytes)"
        ),
    );
    failure
}

pub(crate) unsafe extern "C" fn x_delete(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    // SAFETY: SQLite passes our VFS and a NUL-terminated path (a null one is checked).
    unsafe {
        let state = state_of(vfs);
        if name.is_null() {
            // unlink(2)'s EFAULT, logged as os_unix.c unixDelete logs it.
            state
                .api
                .log_os_error(SQLITE_IOERR_DELETE, "unlink", "", libc::EFAULT);
            return Failure::Delete(libc::EFAULT).code();
        }
        let c_path = std::ffi::CStr::from_ptr(name);
        let Ok(path) = c_path.to_str() else {
            return refuse_non_utf8_path(state, name, "delete", Failure::Delete(libc::EILSEQ))
                .code();
        };
        let started = trace::start(trace::TARGET_VFS);
        let code = guard(Some(state), "xDelete", || {
            state
                .delete(path, c_path, sync_dir & 1 != 0)
                .map(|()| SQLITE_OK)
        });
        if let Some(started) = started {
            trace::call(
                started,
                Call::Delete { sync_dir },
                code,
                &format!("file={path:?}"),
            );
        }
        code
    }
}

/// xSetSystemCall: replaces a system call of the table (`sys/calls.rs`) by name; a null
/// name restores every default, a null function restores that call's. A call the `unix`
/// VFS makes for the path operations delegated to it (`access`, `getcwd`, `stat`,
/// `lstat`, `readlink`) is replaced in `unix`'s table too, so those operations see it.
pub(crate) unsafe extern "C" fn x_set_system_call(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    function: sqlite3_syscall_ptr,
) -> c_int {
    // SAFETY: SQLite passes our VFS, a NUL-terminated name or null, and a function of the
    // named call's C signature and contract (xSetSystemCall's, which `calls::set`
    // requires).
    unsafe {
        let state = state_of(vfs);
        guard(Some(state), "xSetSystemCall", || {
            let name = (!name.is_null()).then(|| std::ffi::CStr::from_ptr(name));
            if calls::set(name, function).is_err() {
                return Ok(SQLITE_NOTFOUND);
            }
            let delegated = name.is_none_or(|name| calls::PATH_OPERATION_CALLS.contains(&name));
            let parent = state.parent.as_ptr();
            if let (true, Some(set_parent)) = (delegated, (*parent).x_set_system_call) {
                if (*parent).i_version >= 3 {
                    set_parent(
                        parent,
                        name.map_or(std::ptr::null(), |n| n.as_ptr()),
                        function,
                    );
                }
            }
            Ok(SQLITE_OK)
        })
    }
}

/// xGetSystemCall: what the named call does now (null for an unknown name).
pub(crate) unsafe extern "C" fn x_get_system_call(
    _vfs: *mut sqlite3_vfs,
    name: *const c_char,
) -> sqlite3_syscall_ptr {
    if name.is_null() {
        return None;
    }
    // SAFETY: SQLite passes a NUL-terminated name.
    calls::get(unsafe { std::ffi::CStr::from_ptr(name) })
}

/// xNextSystemCall: the name after `name` (the first for null) that calls something.
pub(crate) unsafe extern "C" fn x_next_system_call(
    _vfs: *mut sqlite3_vfs,
    name: *const c_char,
) -> *const c_char {
    // SAFETY: SQLite passes a NUL-terminated name or null.
    let name = (!name.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(name) });
    calls::next(name).map_or(std::ptr::null(), |next| next.as_ptr())
}

/// Path operations are not file I/O: they go to the `unix` VFS, so names, symlink
/// handling and access checks are exactly SQLite's.
macro_rules! delegate {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty, $fallback:expr) => {
        pub(crate) unsafe extern "C" fn $name(vfs: *mut sqlite3_vfs, $($arg: $ty),*) -> $ret {
            // SAFETY: `parent` is the live `unix` VFS found at registration; we pass its
            // own pointer and SQLite's arguments through unchanged.
            unsafe {
                let parent = state_of(vfs).parent.as_ptr();
                match (*parent).$field {
                    Some(method) => method(parent, $($arg),*),
                    None => $fallback,
                }
            }
        }
    };
}

delegate!(x_access, x_access, (name: *const c_char, flags: c_int, out: *mut c_int) -> c_int, SQLITE_ERROR);
delegate!(x_full_pathname, x_full_pathname, (name: *const c_char, size: c_int, out: *mut c_char) -> c_int, SQLITE_ERROR);
delegate!(x_dl_open, x_dl_open, (name: *const c_char) -> *mut c_void, std::ptr::null_mut());
delegate!(x_dl_error, x_dl_error, (size: c_int, out: *mut c_char) -> (), ());
delegate!(x_dl_sym, x_dl_sym, (handle: *mut c_void, symbol: *const c_char) -> Option<unsafe extern "C" fn()>, None);
delegate!(x_dl_close, x_dl_close, (handle: *mut c_void) -> (), ());
delegate!(x_randomness, x_randomness, (size: c_int, out: *mut c_char) -> c_int, 0);
delegate!(x_sleep, x_sleep, (microseconds: c_int) -> c_int, 0);
delegate!(x_current_time, x_current_time, (out: *mut f64) -> c_int, SQLITE_ERROR);
delegate!(x_get_last_error, x_get_last_error, (size: c_int, out: *mut c_char) -> c_int, 0);
delegate!(x_current_time_int64, x_current_time_int64, (out: *mut i64) -> c_int, SQLITE_ERROR);
