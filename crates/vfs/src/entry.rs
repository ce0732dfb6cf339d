//! Every `extern "C"` function SQLite calls: the `sqlite3_vfs` and `sqlite3_io_methods`
//! callbacks. Each decodes its C arguments (file controls into a typed
//! [`FileControl`]), calls safe code in `file/` and `vfs.rs`, writes results back, and
//! returns through [`guard`], the one place where a `Result` becomes a SQLite code and
//! where panics stop (no panic may unwind into C). Every call is also where a trace record
//! is written when `sqlite_uring::vfs` tracing is on (`trace.rs`; one atomic load when off).

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::Failure;
use crate::ffi::*;
use crate::file::control::{ControlReply, FileControl};
use crate::file::{CallKind, File};
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
        Ok(Err(failure)) => failure.code(),
        Err(panic) => {
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
    }
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

/// Runs a file method; a failure's errno is remembered for SQLITE_FCNTL_LAST_ERRNO. With
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
            if failure.errno() != 0 {
                file.last_errno = failure.errno();
            }
        }
        result
    });
    if let Some(started) = started {
        // SAFETY: `call` holds this callback's own arguments (caller contract).
        unsafe { trace::file_call(started, call, code, file.trace_label()) };
    }
    code
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
    // SAFETY: SQLite passes a live file and a writable buffer of `amount` bytes.
    unsafe {
        with_file(
            raw,
            Call::Read {
                offset,
                len: amount,
            },
            |file| {
                let buf = std::slice::from_raw_parts_mut(buf as *mut u8, amount as usize);
                file.read(buf, offset).map(|()| SQLITE_OK)
            },
        )
    }
}

unsafe extern "C" fn x_write(
    raw: *mut sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite passes a live file and a readable buffer of `amount` bytes.
    unsafe {
        with_file(
            raw,
            Call::Write {
                offset,
                len: amount,
            },
            |file| {
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
            *size = file.file_size()?;
            Ok(SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_lock(raw: *mut sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::Lock { level }, |file| {
            file.lock(level).map(|()| SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_unlock(raw: *mut sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::Unlock { level }, |file| {
            file.unlock(level).map(|()| SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_check_reserved_lock(raw: *mut sqlite3_file, out: *mut c_int) -> c_int {
    // SAFETY: SQLite passes a live file and a writable int.
    unsafe {
        with_file(raw, Call::CheckReservedLock { out }, |file| {
            *out = file.check_reserved_lock()? as c_int;
            Ok(SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_file_control(raw: *mut sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: SQLite passes a live file and the argument type documented for `op`.
    unsafe {
        with_file(raw, Call::FileControl { op }, |file| {
            let control = decode_file_control(op, arg);
            let reply = file.file_control(control)?;
            write_reply(file, reply, arg)
        })
    }
}

/// The file control `op` with its argument read, as sqlite3.h documents each opcode's
/// argument type.
///
/// # Safety
/// `arg` must point to the argument type SQLite documents for `op`.
unsafe fn decode_file_control(op: c_int, arg: *mut c_void) -> FileControl {
    // SAFETY (whole block): each arm reads `arg` as the type sqlite3.h documents for that
    // opcode; SQLite owns the pointee for the duration of the call.
    unsafe {
        match op {
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
            SQLITE_FCNTL_PRAGMA => {
                // A `char*[3]`: [0] receives the result, [1] is the pragma's name, [2] its
                // value or null.
                let args = arg as *const *const c_char;
                let (name, value) = (*args.add(1), *args.add(2));
                if name.is_null() {
                    return FileControl::Other(op);
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
        }
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
    // SAFETY (whole block): the file control produced a reply of the kind its opcode's
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

unsafe extern "C" fn x_shm_map(
    raw: *mut sqlite3_file,
    region: c_int,
    region_size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite passes a live file and a writable pointer slot.
    unsafe {
        *out = std::ptr::null_mut();
        let call = Call::ShmMap {
            region,
            size: region_size,
            extend,
        };
        with_file(raw, call, |file| {
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
            file.shm_lock(offset, count, flags).map(|()| SQLITE_OK)
        })
    }
}

unsafe extern "C" fn x_shm_barrier(raw: *mut sqlite3_file) {
    // SAFETY: SQLite passes a live file.
    unsafe {
        with_file(raw, Call::ShmBarrier, |file| {
            file.shm_barrier();
            Ok(SQLITE_OK)
        });
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

unsafe extern "C" fn x_fetch(
    raw: *mut sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite passes a live file and a writable pointer slot.
    unsafe {
        *out = std::ptr::null_mut();
        let call = Call::Fetch {
            offset,
            len: amount,
            out: out as *const *mut c_void,
        };
        with_file(raw, call, |file| {
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
    // SAFETY: SQLite passes our VFS and `szOsFile` writable bytes at `raw`.
    unsafe {
        let state = state_of(vfs);
        let raw = raw as *mut RawFile;
        (*raw).base.methods = std::ptr::null();
        (*raw).file = std::ptr::null_mut();
        let started = trace::start(trace::TARGET_VFS);
        let code = guard(Some(state), "xOpen", || {
            let (file, flags_out) = File::open(state, name, flags)?;
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

pub(crate) unsafe extern "C" fn x_delete(
    vfs: *mut sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    // SAFETY: SQLite passes our VFS and a NUL-terminated path.
    unsafe {
        let state = state_of(vfs);
        let path = std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned();
        let started = trace::start(trace::TARGET_VFS);
        let code = guard(Some(state), "xDelete", || {
            state.delete(&path, sync_dir & 1 != 0).map(|()| SQLITE_OK)
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
    // SAFETY: SQLite passes our VFS and a NUL-terminated name or null.
    unsafe {
        let state = state_of(vfs);
        guard(Some(state), "xSetSystemCall", || {
            let name = (!name.is_null()).then(|| std::ffi::CStr::from_ptr(name));
            if calls::set(name, function).is_err() {
                return Ok(SQLITE_NOTFOUND);
            }
            let delegated = name.is_none_or(|name| calls::PATH_OPERATION_CALLS.contains(&name));
            let parent = state.parent;
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
                let parent = state_of(vfs).parent;
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
