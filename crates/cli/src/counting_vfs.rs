//! A pass-through VFS that counts what SQLite asks of another VFS.
//!
//! `register("unix_counted", "unix", Behaviour::Faithful)` registers a VFS whose every
//! method forwards to `unix` unchanged, after counting reads, writes, syncs, truncates and
//! their bytes. The benchmark opens its `unix` databases through it, so SQLite's own VFS
//! gets the same call counts as the io_uring VFS gets from its built-in counters, in the
//! same type ([`sqlite_uring::IoStats`], of which it fills the call counts). The
//! overhead is a few relaxed atomic additions per call, negligible next to a syscall,
//! and comparable to the counters the io_uring VFS keeps for itself.
//!
//! With timing on ([`CountingVfs::enable_timing`], `bench speed --breakdown`), every call
//! of a file method, and of xOpen, xDelete and xAccess, is also timed (two clock reads
//! around the parent's call: tens of nanoseconds with the vDSO clock) and summed per
//! method ([`MethodTimes`]). Off, the cost is one relaxed load per call.
//!
//! [`Behaviour::AnswersOkToPragmas`] deliberately reproduces a real bug (a VFS that
//! answered `SQLITE_OK` to every file control, so SQLite believed the VFS had handled each
//! `PRAGMA` and silently skipped it); it exists so the benchmark's PRAGMA verification can
//! be tested against it.
//!
//! Soundness rests on three facts of the VFS contract: SQLite allocates `szOsFile` bytes
//! for every file and hands the same pointer to every method of that file; it never calls a
//! method of a file whose `pMethods` is NULL; and `pAppData` of a registered VFS is ours.
//! Every callback catches panics, because unwinding out of an `extern "C"` function aborts.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Result};
use rusqlite::ffi;
use serde::{Deserialize, Serialize};
use sqlite_uring::IoStats;

/// What the wrapper does besides counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Forward everything unchanged.
    Faithful,
    /// Claim every `PRAGMA` (`SQLITE_FCNTL_PRAGMA` → `SQLITE_OK`) without applying it.
    AnswersOkToPragmas,
}

/// The VFS methods timed with timing on: every file method, and the VFS methods that
/// act on files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Open,
    Delete,
    Access,
    Close,
    Read,
    Write,
    Truncate,
    Sync,
    FileSize,
    Lock,
    Unlock,
    CheckReservedLock,
    FileControl,
    SectorSize,
    DeviceCharacteristics,
    ShmMap,
    ShmLock,
    ShmBarrier,
    ShmUnmap,
    Fetch,
    Unfetch,
}

/// Number of [`Method`]s.
pub const METHOD_COUNT: usize = 21;

impl Method {
    /// Every method, in the order of [`MethodTimes`]' arrays (`Method as usize`).
    pub const ALL: [Method; METHOD_COUNT] = [
        Method::Open,
        Method::Delete,
        Method::Access,
        Method::Close,
        Method::Read,
        Method::Write,
        Method::Truncate,
        Method::Sync,
        Method::FileSize,
        Method::Lock,
        Method::Unlock,
        Method::CheckReservedLock,
        Method::FileControl,
        Method::SectorSize,
        Method::DeviceCharacteristics,
        Method::ShmMap,
        Method::ShmLock,
        Method::ShmBarrier,
        Method::ShmUnmap,
        Method::Fetch,
        Method::Unfetch,
    ];

    /// SQLite's name of the method (`xRead`, …).
    pub fn name(self) -> &'static str {
        match self {
            Method::Open => "xOpen",
            Method::Delete => "xDelete",
            Method::Access => "xAccess",
            Method::Close => "xClose",
            Method::Read => "xRead",
            Method::Write => "xWrite",
            Method::Truncate => "xTruncate",
            Method::Sync => "xSync",
            Method::FileSize => "xFileSize",
            Method::Lock => "xLock",
            Method::Unlock => "xUnlock",
            Method::CheckReservedLock => "xCheckReservedLock",
            Method::FileControl => "xFileControl",
            Method::SectorSize => "xSectorSize",
            Method::DeviceCharacteristics => "xDeviceCharacteristics",
            Method::ShmMap => "xShmMap",
            Method::ShmLock => "xShmLock",
            Method::ShmBarrier => "xShmBarrier",
            Method::ShmUnmap => "xShmUnmap",
            Method::Fetch => "xFetch",
            Method::Unfetch => "xUnfetch",
        }
    }
}

/// Calls of each method and the wall time spent in them (the parent VFS's time: the
/// wrapper's own work is outside the timed span), indexed by `Method as usize`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodTimes {
    pub calls: [u64; METHOD_COUNT],
    pub ns: [u64; METHOD_COUNT],
}

impl MethodTimes {
    /// Nanoseconds in all methods together.
    pub fn total_ns(&self) -> u64 {
        self.ns.iter().sum()
    }
}

/// [`MethodTimes`] as they are added to, call by call.
struct MethodClock {
    on: AtomicBool,
    calls: [AtomicU64; METHOD_COUNT],
    ns: [AtomicU64; METHOD_COUNT],
}

impl MethodClock {
    fn new() -> MethodClock {
        MethodClock {
            on: AtomicBool::new(false),
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
            ns: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Runs `call`, timing it as a call of `method` when timing is on.
    #[inline]
    fn time<T>(&self, method: Method, call: impl FnOnce() -> T) -> T {
        if !self.on.load(Ordering::Relaxed) {
            return call();
        }
        let started = Instant::now();
        let result = call();
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.calls[method as usize].fetch_add(1, Ordering::Relaxed);
        self.ns[method as usize].fetch_add(ns, Ordering::Relaxed);
        result
    }

    fn snapshot(&self) -> MethodTimes {
        MethodTimes {
            calls: std::array::from_fn(|i| self.calls[i].load(Ordering::Relaxed)),
            ns: std::array::from_fn(|i| self.ns[i].load(Ordering::Relaxed)),
        }
    }

    fn reset(&self) {
        for counter in self.calls.iter().chain(&self.ns) {
            counter.store(0, Ordering::Relaxed);
        }
    }
}

#[derive(Default)]
struct Counters {
    opens: AtomicU64,
    read_calls: AtomicU64,
    write_calls: AtomicU64,
    sync_calls: AtomicU64,
    truncate_calls: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl Counters {
    fn bump(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }

    /// The calls counted, in the VFS's own counter type: the fields a wrapper can see
    /// (SQLite's calls and their bytes); what an engine does is not counted here.
    fn snapshot(&self) -> IoStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IoStats {
            read_calls: get(&self.read_calls),
            write_calls: get(&self.write_calls),
            sync_calls: get(&self.sync_calls),
            truncate_calls: get(&self.truncate_calls),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
            ..IoStats::default()
        }
    }

    fn reset(&self) {
        for counter in [
            &self.opens,
            &self.read_calls,
            &self.write_calls,
            &self.sync_calls,
            &self.truncate_calls,
            &self.bytes_read,
            &self.bytes_written,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }
}

/// One registered counting VFS (lives for the rest of the process, as SQLite keeps a
/// pointer to it).
pub struct CountingVfs {
    name: String,
    parent_name: String,
    parent: *mut ffi::sqlite3_vfs,
    behaviour: Behaviour,
    counters: Counters,
    clock: MethodClock,
}

// SAFETY: `parent` points to a VFS registered with SQLite, which SQLite never frees and
// whose methods are thread-safe by the VFS contract; everything else is immutable or
// atomic.
unsafe impl Send for CountingVfs {}
// SAFETY: as above.
unsafe impl Sync for CountingVfs {}

impl CountingVfs {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Totals of all files opened through this VFS since the last reset.
    pub fn counts(&self) -> IoStats {
        self.counters.snapshot()
    }

    /// Files opened through this VFS since the last reset.
    #[cfg(test)]
    pub fn opens(&self) -> u64 {
        self.counters.opens.load(Ordering::Relaxed)
    }

    /// Zeroes the call counts and the method times.
    pub fn reset(&self) {
        self.counters.reset();
        self.clock.reset();
    }

    /// Times each call of a file method and of xOpen, xDelete and xAccess from now on
    /// ([`CountingVfs::method_times`]). For the rest of the process: the wrapper is
    /// shared by every target that opens its parent.
    pub fn enable_timing(&self) {
        self.clock.on.store(true, Ordering::Relaxed);
    }

    /// Calls and time per method since the last reset (zeroes unless timing is on).
    pub fn method_times(&self) -> MethodTimes {
        self.clock.snapshot()
    }
}

/// Registered wrappers by name, so registering twice returns the first one.
static REGISTERED: Mutex<Option<HashMap<String, &'static CountingVfs>>> = Mutex::new(None);

/// Registers `name` as a counting wrapper of the already registered VFS `parent_name`
/// (not as the default VFS). Idempotent: the same name returns the existing wrapper,
/// provided parent and behaviour match.
pub fn register(
    name: &str,
    parent_name: &str,
    behaviour: Behaviour,
) -> Result<&'static CountingVfs> {
    let mut guard = REGISTERED
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    let registry = guard.get_or_insert_with(HashMap::new);
    if let Some(existing) = registry.get(name) {
        if existing.parent_name != parent_name || existing.behaviour != behaviour {
            bail!(
                "counting VFS {name} is already registered over {} ({:?})",
                existing.parent_name,
                existing.behaviour
            );
        }
        return Ok(existing);
    }
    let parent_c = CString::new(parent_name)?;
    // SAFETY: `parent_c` is a valid NUL-terminated string; sqlite3_vfs_find only reads it
    // (and initialises SQLite if needed).
    let parent = unsafe { ffi::sqlite3_vfs_find(parent_c.as_ptr()) };
    if parent.is_null() {
        bail!("no VFS named {parent_name:?} is registered, so {name} cannot wrap it");
    }
    let name_c = CString::new(name)?;
    // SAFETY: `name_c` is a valid NUL-terminated string.
    if !unsafe { ffi::sqlite3_vfs_find(name_c.as_ptr()) }.is_null() {
        bail!("a VFS named {name:?} is already registered by someone else");
    }
    let state: &'static CountingVfs = Box::leak(Box::new(CountingVfs {
        name: name.to_string(),
        parent_name: parent_name.to_string(),
        parent,
        behaviour,
        counters: Counters::default(),
        clock: MethodClock::new(),
    }));
    // SAFETY: `parent` is a registered VFS, which SQLite never frees; we only read it.
    let parent_ref = unsafe { &*parent };
    let file_size = std::mem::size_of::<CountedFile>() as c_int + parent_ref.szOsFile;
    let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
        // Never claim more than the parent implements: SQLite calls the version-3
        // system-call methods only when iVersion says they exist.
        iVersion: parent_ref.iVersion.min(3),
        szOsFile: file_size,
        mxPathname: parent_ref.mxPathname,
        pNext: ptr::null_mut(),
        // Leaked with the VFS: SQLite keeps the pointer as long as it is registered.
        zName: name_c.into_raw(),
        pAppData: state as *const CountingVfs as *mut c_void,
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        xFullPathname: Some(x_full_pathname),
        xDlOpen: Some(x_dl_open),
        xDlError: Some(x_dl_error),
        xDlSym: Some(x_dl_sym),
        xDlClose: Some(x_dl_close),
        xRandomness: Some(x_randomness),
        xSleep: Some(x_sleep),
        xCurrentTime: Some(x_current_time),
        xGetLastError: Some(x_get_last_error),
        xCurrentTimeInt64: Some(x_current_time_int64),
        xSetSystemCall: Some(x_set_system_call),
        xGetSystemCall: Some(x_get_system_call),
        xNextSystemCall: Some(x_next_system_call),
    }));
    // SAFETY: `vfs` is a fully initialised sqlite3_vfs with 'static lifetime (leaked), as
    // sqlite3_vfs_register requires.
    let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
    if rc != ffi::SQLITE_OK {
        bail!("sqlite3_vfs_register({name:?}) failed with SQLite code {rc}");
    }
    registry.insert(name.to_string(), state);
    Ok(state)
}

/// Names of every VFS registered in this process, default first.
pub fn registered_vfs_names() -> Vec<String> {
    let mut names = Vec::new();
    // SAFETY: sqlite3_vfs_find(NULL) initialises SQLite and returns the head of its VFS
    // list (it takes SQLITE_MUTEX_STATIC_MAIN itself, so it is called before we take it:
    // static mutexes are not recursive). We follow pNext holding that mutex, under which
    // sqlite3_vfs_register changes the links, so no registration on another thread races
    // the walk. Static mutexes are never freed (enter/leave accept NULL when SQLite is
    // built without mutexes); registered VFS objects are never freed, and their names are
    // NUL-terminated.
    unsafe {
        let mut vfs = ffi::sqlite3_vfs_find(ptr::null());
        let mutex = ffi::sqlite3_mutex_alloc(ffi::SQLITE_MUTEX_STATIC_MAIN);
        ffi::sqlite3_mutex_enter(mutex);
        while !vfs.is_null() {
            if !(*vfs).zName.is_null() {
                names.push(CStr::from_ptr((*vfs).zName).to_string_lossy().into_owned());
            }
            vfs = (*vfs).pNext;
        }
        ffi::sqlite3_mutex_leave(mutex);
    }
    names
}

/// Our per-file object: SQLite's base first (so a `*mut sqlite3_file` can be cast to it),
/// then the parent's file object, which lives in the same allocation right after it.
#[repr(C)]
struct CountedFile {
    base: ffi::sqlite3_file,
    vfs: *const CountingVfs,
    real: *mut ffi::sqlite3_file,
}

/// Runs a callback body, turning a panic into an error code instead of an abort.
fn guard<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(on_panic)
}

/// # Safety
/// `vfs` must be a VFS registered by [`register`] (its pAppData is a `CountingVfs`).
unsafe fn state_of(vfs: *mut ffi::sqlite3_vfs) -> &'static CountingVfs {
    // SAFETY: the caller passes a VFS `register` made, whose pAppData points to a
    // CountingVfs leaked for the life of the process.
    unsafe { &*((*vfs).pAppData as *const CountingVfs) }
}

// ---------------------------------------------------------------------------------------
// VFS methods

unsafe extern "C" fn x_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    guard(ffi::SQLITE_CANTOPEN, || {
        // SAFETY: SQLite passes our VFS and a `szOsFile`-byte allocation for `file`, which
        // we sized as CountedFile followed by the parent's file object; CountedFile's size
        // is a multiple of 8, so the parent's part is as aligned as SQLite's allocation.
        unsafe {
            let state = state_of(vfs);
            let counted = file as *mut CountedFile;
            let real =
                (file as *mut u8).add(std::mem::size_of::<CountedFile>()) as *mut ffi::sqlite3_file;
            (*counted).base.pMethods = ptr::null();
            (*counted).vfs = state;
            (*counted).real = real;
            (*real).pMethods = ptr::null();
            let Some(parent_open) = (*state.parent).xOpen else {
                return ffi::SQLITE_CANTOPEN;
            };
            let rc = state.clock.time(Method::Open, || {
                parent_open(state.parent, name, real, flags, out_flags)
            });
            // SQLite asserts that a failed xOpen leaves pMethods NULL; the parent honours
            // that, and so do we, so nothing is closed twice.
            if rc == ffi::SQLITE_OK && !(*real).pMethods.is_null() {
                (*counted).base.pMethods = methods_for((*(*real).pMethods).iVersion);
                Counters::bump(&state.counters.opens, 1);
            }
            rc
        }
    })
}

/// Calls the parent VFS's method `$method` with the parent VFS object, or returns
/// `$missing` when the parent does not implement it.
///
/// Safety (of every use below): SQLite passes back the object we registered, whose
/// pAppData is our leaked CountingVfs, and its `parent` is a registered VFS that SQLite
/// never frees; every other argument is forwarded exactly as SQLite gave it.
macro_rules! forward_vfs {
    ($state:ident, $method:ident, $missing:expr, |$f:ident| $call:expr) => {{
        let $state = state_of($state);
        match (*$state.parent).$method {
            Some($f) => $call,
            None => $missing,
        }
    }};
}

unsafe extern "C" fn x_delete(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ffi::SQLITE_IOERR_DELETE, || unsafe {
        state_of(vfs).clock.time(Method::Delete, || {
            forward_vfs!(vfs, xDelete, ffi::SQLITE_IOERR_DELETE, |f| f(
                vfs.parent, name, sync_dir
            ))
        })
    })
}

unsafe extern "C" fn x_access(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    out: *mut c_int,
) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ffi::SQLITE_IOERR_ACCESS, || unsafe {
        state_of(vfs).clock.time(Method::Access, || {
            forward_vfs!(vfs, xAccess, ffi::SQLITE_IOERR_ACCESS, |f| f(
                vfs.parent, name, flags, out
            ))
        })
    })
}

unsafe extern "C" fn x_full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ffi::SQLITE_CANTOPEN, || unsafe {
        forward_vfs!(vfs, xFullPathname, ffi::SQLITE_CANTOPEN, |f| f(
            vfs.parent, name, n_out, out
        ))
    })
}

unsafe extern "C" fn x_dl_open(vfs: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ptr::null_mut(), || unsafe {
        forward_vfs!(vfs, xDlOpen, ptr::null_mut(), |f| f(vfs.parent, name))
    })
}

unsafe extern "C" fn x_dl_error(vfs: *mut ffi::sqlite3_vfs, n: c_int, message: *mut c_char) {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard((), || unsafe {
        forward_vfs!(vfs, xDlError, (), |f| f(vfs.parent, n, message))
    })
}

type DlSym = Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)>;

unsafe extern "C" fn x_dl_sym(
    vfs: *mut ffi::sqlite3_vfs,
    handle: *mut c_void,
    symbol: *const c_char,
) -> DlSym {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(None, || unsafe {
        forward_vfs!(vfs, xDlSym, None, |f| f(vfs.parent, handle, symbol))
    })
}

unsafe extern "C" fn x_dl_close(vfs: *mut ffi::sqlite3_vfs, handle: *mut c_void) {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard((), || unsafe {
        forward_vfs!(vfs, xDlClose, (), |f| f(vfs.parent, handle))
    })
}

unsafe extern "C" fn x_randomness(vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(0, || unsafe {
        forward_vfs!(vfs, xRandomness, 0, |f| f(vfs.parent, n, out))
    })
}

unsafe extern "C" fn x_sleep(vfs: *mut ffi::sqlite3_vfs, microseconds: c_int) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(0, || unsafe {
        forward_vfs!(vfs, xSleep, 0, |f| f(vfs.parent, microseconds))
    })
}

unsafe extern "C" fn x_current_time(vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ffi::SQLITE_ERROR, || unsafe {
        forward_vfs!(vfs, xCurrentTime, ffi::SQLITE_ERROR, |f| f(vfs.parent, out))
    })
}

unsafe extern "C" fn x_get_last_error(
    vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(0, || unsafe {
        forward_vfs!(vfs, xGetLastError, 0, |f| f(vfs.parent, n, out))
    })
}

unsafe extern "C" fn x_current_time_int64(
    vfs: *mut ffi::sqlite3_vfs,
    out: *mut ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ffi::SQLITE_ERROR, || unsafe {
        forward_vfs!(vfs, xCurrentTimeInt64, ffi::SQLITE_ERROR, |f| f(
            vfs.parent, out
        ))
    })
}

unsafe extern "C" fn x_set_system_call(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    call: ffi::sqlite3_syscall_ptr,
) -> c_int {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ffi::SQLITE_NOTFOUND, || unsafe {
        forward_vfs!(vfs, xSetSystemCall, ffi::SQLITE_NOTFOUND, |f| f(
            vfs.parent, name, call
        ))
    })
}

unsafe extern "C" fn x_get_system_call(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
) -> ffi::sqlite3_syscall_ptr {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(None, || unsafe {
        forward_vfs!(vfs, xGetSystemCall, None, |f| f(vfs.parent, name))
    })
}

unsafe extern "C" fn x_next_system_call(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
) -> *const c_char {
    // SAFETY: `vfs` is the object we registered (see forward_vfs!).
    guard(ptr::null(), || unsafe {
        forward_vfs!(vfs, xNextSystemCall, ptr::null(), |f| f(vfs.parent, name))
    })
}

// ---------------------------------------------------------------------------------------
// File methods

/// The method tables differ only in iVersion: each file gets the one matching its parent
/// file's, so SQLite never believes WAL shared memory or mmap exists where it does not.
static METHODS: [ffi::sqlite3_io_methods; 3] = [methods(1), methods(2), methods(3)];

fn methods_for(parent_version: c_int) -> *const ffi::sqlite3_io_methods {
    &METHODS[(parent_version.clamp(1, 3) - 1) as usize]
}

const fn methods(version: c_int) -> ffi::sqlite3_io_methods {
    ffi::sqlite3_io_methods {
        iVersion: version,
        xClose: Some(f_close),
        xRead: Some(f_read),
        xWrite: Some(f_write),
        xTruncate: Some(f_truncate),
        xSync: Some(f_sync),
        xFileSize: Some(f_file_size),
        xLock: Some(f_lock),
        xUnlock: Some(f_unlock),
        xCheckReservedLock: Some(f_check_reserved_lock),
        xFileControl: Some(f_file_control),
        xSectorSize: Some(f_sector_size),
        xDeviceCharacteristics: Some(f_device_characteristics),
        xShmMap: Some(f_shm_map),
        xShmLock: Some(f_shm_lock),
        xShmBarrier: Some(f_shm_barrier),
        xShmUnmap: Some(f_shm_unmap),
        xFetch: Some(f_fetch),
        xUnfetch: Some(f_unfetch),
    }
}

/// Calls the parent file's method `$method` with the parent file object, or returns
/// `$missing` when the parent does not implement it.
///
/// Safety (of every use below): SQLite only calls our methods on files our x_open opened
/// successfully, so `file` is a CountedFile whose `real` holds an open parent file with
/// non-NULL pMethods, and `vfs` points to the leaked, never-freed CountingVfs.
macro_rules! forward_file {
    ($file:ident, $method:ident, $kind:expr, $missing:expr, |$real:ident, $f:ident| $call:expr) => {{
        let counted = $file as *mut CountedFile;
        let $real = (*counted).real;
        (*(*counted).vfs)
            .clock
            .time($kind, || match (*(*$real).pMethods).$method {
                Some($f) => $call,
                None => $missing,
            })
    }};
}

/// # Safety
/// `file` must be a file opened by [`x_open`] (its `vfs` points to a leaked CountingVfs).
unsafe fn counters_of(file: *mut ffi::sqlite3_file) -> &'static Counters {
    // SAFETY: the caller passes a file x_open filled in, a CountedFile whose `vfs` points
    // to a CountingVfs leaked for the life of the process.
    unsafe { &(*(*(file as *mut CountedFile)).vfs).counters }
}

unsafe extern "C" fn f_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_CLOSE, || unsafe {
        forward_file!(file, xClose, Method::Close, ffi::SQLITE_OK, |real, f| f(
            real
        ))
    })
}

unsafe extern "C" fn f_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_READ, || unsafe {
        let counters = counters_of(file);
        Counters::bump(&counters.read_calls, 1);
        Counters::bump(&counters.bytes_read, amount.max(0) as u64);
        forward_file!(
            file,
            xRead,
            Method::Read,
            ffi::SQLITE_IOERR_READ,
            |real, f| f(real, buf, amount, offset)
        )
    })
}

unsafe extern "C" fn f_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_WRITE, || unsafe {
        let counters = counters_of(file);
        Counters::bump(&counters.write_calls, 1);
        Counters::bump(&counters.bytes_written, amount.max(0) as u64);
        forward_file!(
            file,
            xWrite,
            Method::Write,
            ffi::SQLITE_IOERR_WRITE,
            |real, f| f(real, buf, amount, offset)
        )
    })
}

unsafe extern "C" fn f_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_TRUNCATE, || unsafe {
        Counters::bump(&counters_of(file).truncate_calls, 1);
        forward_file!(
            file,
            xTruncate,
            Method::Truncate,
            ffi::SQLITE_IOERR_TRUNCATE,
            |real, f| f(real, size)
        )
    })
}

unsafe extern "C" fn f_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_FSYNC, || unsafe {
        Counters::bump(&counters_of(file).sync_calls, 1);
        forward_file!(
            file,
            xSync,
            Method::Sync,
            ffi::SQLITE_IOERR_FSYNC,
            |real, f| f(real, flags)
        )
    })
}

unsafe extern "C" fn f_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_FSTAT, || unsafe {
        forward_file!(
            file,
            xFileSize,
            Method::FileSize,
            ffi::SQLITE_IOERR_FSTAT,
            |real, f| f(real, size)
        )
    })
}

unsafe extern "C" fn f_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_LOCK, || unsafe {
        forward_file!(
            file,
            xLock,
            Method::Lock,
            ffi::SQLITE_IOERR_LOCK,
            |real, f| f(real, level)
        )
    })
}

unsafe extern "C" fn f_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_UNLOCK, || unsafe {
        forward_file!(
            file,
            xUnlock,
            Method::Unlock,
            ffi::SQLITE_IOERR_UNLOCK,
            |real, f| f(real, level)
        )
    })
}

unsafe extern "C" fn f_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, || unsafe {
        forward_file!(
            file,
            xCheckReservedLock,
            Method::CheckReservedLock,
            ffi::SQLITE_IOERR_CHECKRESERVEDLOCK,
            |real, f| f(real, out)
        )
    })
}

unsafe extern "C" fn f_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_NOTFOUND, || unsafe {
        let behaviour = (*(*(file as *mut CountedFile)).vfs).behaviour;
        if behaviour == Behaviour::AnswersOkToPragmas && op == ffi::SQLITE_FCNTL_PRAGMA {
            // The bug being reproduced: "handled", so SQLite skips its own PRAGMA code.
            return ffi::SQLITE_OK;
        }
        forward_file!(
            file,
            xFileControl,
            Method::FileControl,
            ffi::SQLITE_NOTFOUND,
            |real, f| f(real, op, arg)
        )
    })
}

unsafe extern "C" fn f_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(4096, || unsafe {
        forward_file!(file, xSectorSize, Method::SectorSize, 4096, |real, f| f(
            real
        ))
    })
}

unsafe extern "C" fn f_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(0, || unsafe {
        forward_file!(
            file,
            xDeviceCharacteristics,
            Method::DeviceCharacteristics,
            0,
            |real, f| f(real)
        )
    })
}

unsafe extern "C" fn f_shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    page_size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_SHMMAP, || unsafe {
        forward_file!(
            file,
            xShmMap,
            Method::ShmMap,
            ffi::SQLITE_IOERR_SHMMAP,
            |real, f| f(real, page, page_size, extend, out)
        )
    })
}

unsafe extern "C" fn f_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_SHMLOCK, || unsafe {
        forward_file!(
            file,
            xShmLock,
            Method::ShmLock,
            ffi::SQLITE_IOERR_SHMLOCK,
            |real, f| f(real, offset, n, flags)
        )
    })
}

unsafe extern "C" fn f_shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard((), || unsafe {
        forward_file!(file, xShmBarrier, Method::ShmBarrier, (), |real, f| f(real))
    })
}

unsafe extern "C" fn f_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_SHMMAP, || unsafe {
        forward_file!(
            file,
            xShmUnmap,
            Method::ShmUnmap,
            ffi::SQLITE_OK,
            |real, f| f(real, delete)
        )
    })
}

unsafe extern "C" fn f_fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_MMAP, || unsafe {
        // "No mapping" is a valid answer: SQLite then reads through xRead.
        forward_file!(
            file,
            xFetch,
            Method::Fetch,
            {
                *out = ptr::null_mut();
                ffi::SQLITE_OK
            },
            |real, f| f(real, offset, amount, out)
        )
    })
}

unsafe extern "C" fn f_unfetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    page: *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls this only on a file x_open opened (see forward_file!).
    guard(ffi::SQLITE_IOERR_MMAP, || unsafe {
        forward_file!(
            file,
            xUnfetch,
            Method::Unfetch,
            ffi::SQLITE_OK,
            |real, f| f(real, offset, page)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{Connection, OpenFlags};

    #[test]
    fn counts_calls_of_a_real_database_and_forwards_results() {
        let counted = register("unix_counted_test", "unix", Behaviour::Faithful).unwrap();
        // Registering again returns the same wrapper.
        let again = register("unix_counted_test", "unix", Behaviour::Faithful).unwrap();
        assert!(std::ptr::eq(counted, again));
        assert!(registered_vfs_names()
            .iter()
            .any(|n| n == "unix_counted_test"));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counted.db");
        counted.reset();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let conn = Connection::open_with_flags_and_vfs(&path, flags, "unix_counted_test").unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode=wal", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        let sum: i64 = conn
            .query_row("SELECT sum(x) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(sum, 6);
        drop(conn);
        let counts = counted.counts();
        assert!(counted.opens() >= 2, "{counts:?}");
        assert!(
            counts.write_calls > 0 && counts.bytes_written > 0,
            "{counts:?}"
        );
        assert!(counts.sync_calls > 0, "{counts:?}");
        counted.reset();
        assert_eq!(counted.counts(), IoStats::default());
        assert_eq!(counted.opens(), 0);
    }

    /// Timing is off until asked for (no call is timed), then every file method and
    /// xOpen/xDelete/xAccess is timed, with the calls SQLite made; a reset zeroes it.
    #[test]
    fn method_times_follow_the_calls_once_timing_is_on() {
        let timed = register("unix_timed_test", "unix", Behaviour::Faithful).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let work = |name: &str| {
            let conn = Connection::open_with_flags_and_vfs(
                dir.path().join(name),
                flags,
                "unix_timed_test",
            )
            .unwrap();
            conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
                .unwrap();
        };
        work("before.db");
        assert_eq!(timed.method_times(), MethodTimes::default());

        timed.enable_timing();
        timed.reset();
        work("after.db");
        let times = timed.method_times();
        let counts = timed.counts();
        let calls = |method: Method| times.calls[method as usize];
        assert_eq!(calls(Method::Write), counts.write_calls);
        assert_eq!(calls(Method::Sync), counts.sync_calls);
        assert_eq!(calls(Method::Read), counts.read_calls);
        assert_eq!(calls(Method::Open), timed.opens());
        assert!(
            calls(Method::Close) >= 1 && calls(Method::Delete) >= 1,
            "{times:?}"
        );
        assert!(
            calls(Method::Lock) >= 1 && calls(Method::FileControl) >= 1,
            "{times:?}"
        );
        // Only called methods have time; an fsync takes some.
        for method in Method::ALL {
            let (calls, ns) = (times.calls[method as usize], times.ns[method as usize]);
            assert!(ns == 0 || calls > 0, "{} {calls} {ns}", method.name());
        }
        assert!(times.ns[Method::Sync as usize] > 0, "{times:?}");
        assert!(times.total_ns() >= times.ns[Method::Sync as usize]);
        timed.reset();
        assert_eq!(timed.method_times(), MethodTimes::default());
    }

    /// `Method as usize` indexes `MethodTimes`: `ALL` lists every method at its own index,
    /// each with its own SQLite name.
    #[test]
    fn methods_index_their_own_slot() {
        for (index, method) in Method::ALL.into_iter().enumerate() {
            assert_eq!(method as usize, index);
            assert!(method.name().starts_with('x'));
        }
        let names: std::collections::HashSet<&str> = Method::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), METHOD_COUNT);
    }

    #[test]
    fn unknown_parent_and_conflicting_registration_are_errors() {
        assert!(register("x_counted", "no-such-vfs", Behaviour::Faithful).is_err());
        register("unix_counted_conflict", "unix", Behaviour::Faithful).unwrap();
        assert!(register(
            "unix_counted_conflict",
            "unix",
            Behaviour::AnswersOkToPragmas
        )
        .is_err());
    }

    #[test]
    fn broken_wrapper_swallows_pragmas() {
        register(
            "unix_ignores_pragmas_test",
            "unix",
            Behaviour::AnswersOkToPragmas,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let conn = Connection::open_with_flags_and_vfs(
            dir.path().join("b.db"),
            flags,
            "unix_ignores_pragmas_test",
        )
        .unwrap();
        // SQLite believes the VFS handled it: no row comes back and nothing changes.
        let mut statement = conn.prepare("PRAGMA journal_mode=wal").unwrap();
        let mut rows = statement.query([]).unwrap();
        assert!(rows.next().unwrap().is_none());
    }
}
