//! Every system call the VFS makes on files, behind one table of function pointers that
//! tests — SQLite's own among them — can replace by name (`xSetSystemCall`,
//! `xGetSystemCall`, `xNextSystemCall`), as os_unix.c's `aSyscall[]` can. A leaf.
//!
//! # The table
//! The names and C signatures are os_unix.c's (`open` is `int(const char*, int, int)`,
//! `openDirectory` is `int(const char *file, int *fd)` and opens the directory holding
//! `file`, …), so a stand-in written for `unix` works here unchanged. Four names are this
//! VFS's own, for calls os_unix.c does not make: `fsync`, `fdatasync`, `fstatfs`, `statx`.
//! Names os_unix.c has but this VFS never calls (`pread64`, `pwrite64`, `fallocate`,
//! `mkdir`, `rmdir`, `mremap`, `ioctl`) have no default, so `xGetSystemCall` returns null
//! for them and `xNextSystemCall` skips them, as os_unix.c does for calls a build leaves
//! out; they can still be set, to no effect. `getpagesize` sizes the WAL-index
//! mappings, as in os_unix.c (SQLite's tests replace it to act as a 64 KiB-page kernel).
//!
//! Overriding one call changes it for every VFS this library registered (the table is
//! per process, like os_unix.c's). `xSetSystemCall(NULL)` restores every default.
//!
//! # What the overrides reach
//! * **Reads and writes**: by default `pread`/`pwrite`. With `pread` (or `pwrite`)
//!   replaced, the replacement is called; with only `read` (or `write`) replaced, a read
//!   is `lseek` + `read` — what os_unix.c does in a build without `USE_PREAD` — so a
//!   stand-in for `read` sees every read, as it would under `unix`.
//! * **The ring**: ring operations are not system calls. While any of `read`, `pread`,
//!   `write`, `pwrite`, `ftruncate`, `fsync`, `fdatasync` is replaced, every batch of
//!   every file goes by syscall through this table, whatever its routing, so the
//!   replacement is honoured on every path (the read fast path and write-behind flushes
//!   included). Faults inside the ring itself are the fault engine's job
//!   (`register_with_faults`).
//! * **Path operations** (`xAccess`, `xFullPathname`) are delegated to the `unix` VFS:
//!   replacing `access`, `getcwd`, `stat`, `lstat` or `readlink` here replaces it in
//!   `unix`'s table too (`entry.rs`), so they see the stand-in.
//! * Not in the table: anonymous memory (the write-behind arena and read-ahead buffers,
//!   `mmap` with no file), the ring's own system calls, `/proc` reads, `lseek` of the
//!   emulated `read`/`write`, `getrandom` for a temporary file's name.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// The calling thread's errno (EIO if, impossibly, there is none).
///
/// A failed call that set no errno (only a replaced system call does that: SQLite's
/// `test_syscall` fails `read` and `write` with errno 0 by default) is reported as
/// [`UNKNOWN_ERRNO`], never as 0, which callers would read as success or as a write that
/// made no progress (SQLITE_FULL); os_unix.c reads it as the call's I/O error.
pub(crate) fn last_errno() -> i32 {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(0) | None => UNKNOWN_ERRNO,
        Some(errno) => errno,
    }
}

/// The errno of a failure that set none: a value no errno has (Linux errnos stay below
/// 4095, `MAX_ERRNO`), which the SQLite-code mapping treats as a plain I/O error.
pub(crate) const UNKNOWN_ERRNO: i32 = 4095;

/// A function pointer of no particular type: what `sqlite3_syscall_ptr` holds.
pub type SyscallPtr = unsafe extern "C" fn();

type Open = unsafe extern "C" fn(*const c_char, c_int, c_int) -> c_int;
type Close = unsafe extern "C" fn(c_int) -> c_int;
type Access = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type Getcwd = unsafe extern "C" fn(*mut c_char, libc::size_t) -> *mut c_char;
type Stat = unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
type Fstat = unsafe extern "C" fn(c_int, *mut libc::stat) -> c_int;
type Ftruncate = unsafe extern "C" fn(c_int, libc::off_t) -> c_int;
type Fcntl = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
type Read = unsafe extern "C" fn(c_int, *mut c_void, libc::size_t) -> libc::ssize_t;
type Pread = unsafe extern "C" fn(c_int, *mut c_void, libc::size_t, libc::off_t) -> libc::ssize_t;
type Write = unsafe extern "C" fn(c_int, *const c_void, libc::size_t) -> libc::ssize_t;
type Pwrite =
    unsafe extern "C" fn(c_int, *const c_void, libc::size_t, libc::off_t) -> libc::ssize_t;
type Fchmod = unsafe extern "C" fn(c_int, libc::mode_t) -> c_int;
type Unlink = unsafe extern "C" fn(*const c_char) -> c_int;
type OpenDirectory = unsafe extern "C" fn(*const c_char, *mut c_int) -> c_int;
type Fchown = unsafe extern "C" fn(c_int, libc::uid_t, libc::gid_t) -> c_int;
type Geteuid = unsafe extern "C" fn() -> libc::uid_t;
type Mmap = unsafe extern "C" fn(
    *mut c_void,
    libc::size_t,
    c_int,
    c_int,
    c_int,
    libc::off_t,
) -> *mut c_void;
type Munmap = unsafe extern "C" fn(*mut c_void, libc::size_t) -> c_int;
type Getpagesize = unsafe extern "C" fn() -> c_int;
type Readlink = unsafe extern "C" fn(*const c_char, *mut c_char, libc::size_t) -> libc::ssize_t;
type Fsync = unsafe extern "C" fn(c_int) -> c_int;
type Fstatfs = unsafe extern "C" fn(c_int, *mut libc::statfs) -> c_int;
type Statx =
    unsafe extern "C" fn(c_int, *const c_char, c_int, libc::c_uint, *mut libc::statx) -> c_int;

/// os_unix.c's `posixOpen`: `open` with a plain `int` mode, so callers and stand-ins share
/// one non-variadic signature.
unsafe extern "C" fn default_open(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
    // SAFETY: forwarded caller contract (a NUL-terminated path).
    unsafe { libc::open(path, flags, mode as libc::c_uint) }
}

/// os_unix.c's `openDirectory`: opens, through the table's `open`, the directory that
/// holds `file`, for syncing it. SQLITE_OK and the descriptor in `*fd`, or
/// SQLITE_CANTOPEN with `*fd` = -1 and errno set.
unsafe extern "C" fn default_open_directory(file: *const c_char, fd: *mut c_int) -> c_int {
    // SAFETY: the caller passes a NUL-terminated path and a writable int.
    unsafe {
        *fd = -1;
        let file = CStr::from_ptr(file);
        let open_it = |directory: &CStr| loop {
            let opened = open(directory, libc::O_RDONLY | libc::O_CLOEXEC, 0);
            if opened >= 0 {
                *fd = opened;
                return crate::ffi::SQLITE_OK;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return crate::ffi::SQLITE_CANTOPEN;
            }
        };
        match super::path::directory_len(file.to_bytes()) {
            Some(len) => super::path::with_c_prefix(file, len, open_it),
            None => open_it(super::path::directory_name(file.to_bytes())),
        }
    }
}

unsafe extern "C" fn default_getpagesize() -> c_int {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as c_int }
}

/// One system call: its name, its default, and what replaced it (null: the default).
struct Entry {
    name: &'static CStr,
    default: Option<SyscallPtr>,
    current: AtomicPtr<()>,
}

macro_rules! erase {
    ($f:expr, $ty:ty) => {
        // SAFETY: only changes the static type of a function pointer; every call site
        // restores exactly `$ty` before calling (the typed wrappers below).
        Some(unsafe { std::mem::transmute::<$ty, SyscallPtr>($f) })
    };
}

const fn entry(name: &'static CStr, default: Option<SyscallPtr>) -> Entry {
    Entry {
        name,
        default,
        current: AtomicPtr::new(std::ptr::null_mut()),
    }
}

// Indices into TABLE, in os_unix.c's order, then this VFS's own.
const OPEN: usize = 0;
const CLOSE: usize = 1;
const ACCESS: usize = 2;
const STAT: usize = 4;
const FSTAT: usize = 5;
const FTRUNCATE: usize = 6;
const FCNTL: usize = 7;
const READ: usize = 8;
const PREAD: usize = 9;
const WRITE: usize = 11;
const PWRITE: usize = 12;
const FCHMOD: usize = 14;
const UNLINK: usize = 16;
const OPEN_DIRECTORY: usize = 17;
const FCHOWN: usize = 20;
const GETEUID: usize = 21;
const MMAP: usize = 22;
const MUNMAP: usize = 23;
const GETPAGESIZE: usize = 25;
const LSTAT: usize = 27;
const FSYNC: usize = 29;
const FDATASYNC: usize = 30;
const FSTATFS: usize = 31;
const STATX: usize = 32;

static TABLE: [Entry; 33] = [
    entry(c"open", erase!(default_open, Open)),
    entry(c"close", erase!(libc::close, Close)),
    entry(c"access", erase!(libc::access, Access)),
    entry(c"getcwd", erase!(libc::getcwd, Getcwd)),
    entry(c"stat", erase!(libc::stat, Stat)),
    entry(c"fstat", erase!(libc::fstat, Fstat)),
    entry(c"ftruncate", erase!(libc::ftruncate, Ftruncate)),
    entry(c"fcntl", erase!(libc::fcntl, Fcntl)),
    entry(c"read", erase!(libc::read, Read)),
    entry(c"pread", erase!(libc::pread, Pread)),
    entry(c"pread64", None),
    entry(c"write", erase!(libc::write, Write)),
    entry(c"pwrite", erase!(libc::pwrite, Pwrite)),
    entry(c"pwrite64", None),
    entry(c"fchmod", erase!(libc::fchmod, Fchmod)),
    entry(c"fallocate", None),
    entry(c"unlink", erase!(libc::unlink, Unlink)),
    entry(
        c"openDirectory",
        erase!(default_open_directory, OpenDirectory),
    ),
    entry(c"mkdir", None),
    entry(c"rmdir", None),
    entry(c"fchown", erase!(libc::fchown, Fchown)),
    entry(c"geteuid", erase!(libc::geteuid, Geteuid)),
    entry(c"mmap", erase!(libc::mmap, Mmap)),
    entry(c"munmap", erase!(libc::munmap, Munmap)),
    entry(c"mremap", None),
    entry(c"getpagesize", erase!(default_getpagesize, Getpagesize)),
    entry(c"readlink", erase!(libc::readlink, Readlink)),
    entry(c"lstat", erase!(libc::lstat, Stat)),
    entry(c"ioctl", None),
    entry(c"fsync", erase!(libc::fsync, Fsync)),
    entry(c"fdatasync", erase!(libc::fdatasync, Fsync)),
    entry(c"fstatfs", erase!(libc::fstatfs, Fstatfs)),
    entry(c"statx", erase!(libc::statx, Statx)),
];

/// Names whose replacement must also reach the `unix` VFS, which performs the path
/// operations this VFS delegates to it.
pub const PATH_OPERATION_CALLS: [&CStr; 5] = [c"access", c"getcwd", c"stat", c"lstat", c"readlink"];

/// Entries whose replacement sends every I/O batch by syscall (see the module docs).
const IO_CALLS: [usize; 7] = [READ, PREAD, WRITE, PWRITE, FTRUNCATE, FSYNC, FDATASYNC];

/// Bit `i` set: `IO_CALLS[i]` is replaced.
static IO_REPLACED: AtomicU32 = AtomicU32::new(0);

/// Whether any I/O call is replaced: then batches go by syscall through the table.
#[inline]
pub(crate) fn io_replaced() -> bool {
    IO_REPLACED.load(Ordering::Relaxed) != 0
}

/// Whether `name` is replaced now (os_unix.c logs a failed `openDirectory` inside its
/// own, so a stand-in's failure is not logged).
pub(crate) fn is_replaced(name: &CStr) -> bool {
    index_of(name).is_some_and(|index| !TABLE[index].current.load(Ordering::Acquire).is_null())
}

fn index_of(name: &CStr) -> Option<usize> {
    TABLE.iter().position(|entry| entry.name == name)
}

fn publish_io_replaced() {
    let mut bits = 0;
    for (bit, &index) in IO_CALLS.iter().enumerate() {
        if !TABLE[index].current.load(Ordering::Acquire).is_null() {
            bits |= 1 << bit;
        }
    }
    IO_REPLACED.store(bits, Ordering::Release);
}

/// Why `set` refused.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownSystemCall;

/// xSetSystemCall: replaces `name` with `function` (`None`: back to its default); with
/// no name, restores every default.
///
/// # Safety
/// `function` must have the named call's C signature (os_unix.c's, or this table's for
/// its own four names) and keep that call's contract: read and write no more than the
/// pointers it is given allow, keep none of them. Every call through the table relies
/// on it.
pub unsafe fn set(
    name: Option<&CStr>,
    function: Option<SyscallPtr>,
) -> Result<(), UnknownSystemCall> {
    match name {
        None => {
            for entry in &TABLE {
                entry.current.store(std::ptr::null_mut(), Ordering::Release);
            }
        }
        Some(name) => {
            let index = index_of(name).ok_or(UnknownSystemCall)?;
            let pointer = function.map_or(std::ptr::null_mut(), |f| f as *mut ());
            TABLE[index].current.store(pointer, Ordering::Release);
        }
    }
    publish_io_replaced();
    Ok(())
}

/// xGetSystemCall: what `name` calls now (null for an unknown name, or one without a
/// default that was never replaced).
pub fn get(name: &CStr) -> Option<SyscallPtr> {
    index_of(name).and_then(current)
}

/// xNextSystemCall: the name after `name` (the first with `None`) that calls something.
pub fn next(name: Option<&CStr>) -> Option<&'static CStr> {
    let start = match name {
        None => 0,
        Some(name) => index_of(name).map_or(TABLE.len(), |i| i + 1),
    };
    (start..TABLE.len())
        .find(|&i| current(i).is_some())
        .map(|i| TABLE[i].name)
}

fn current(index: usize) -> Option<SyscallPtr> {
    let pointer = TABLE[index].current.load(Ordering::Acquire);
    if pointer.is_null() {
        TABLE[index].default
    } else {
        // SAFETY: only `set` stores here, and only a SyscallPtr cast to a data pointer;
        // the round trip restores it.
        Some(unsafe { std::mem::transmute::<*mut (), SyscallPtr>(pointer) })
    }
}

/// The entry's current function as `F`.
///
/// # Safety
/// `F` must be the entry's C signature (the one in the table above).
#[inline]
unsafe fn function<F: Copy>(index: usize) -> F {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<SyscallPtr>());
    let function = current(index).expect("called entries have a default");
    // SAFETY: caller contract: `F` is this entry's function-pointer type.
    unsafe { std::mem::transmute_copy::<SyscallPtr, F>(&function) }
}

// ─── Typed calls ───────────────────────────────────────────────────────────────────────
// Safe wrappers: each passes references where the C call takes pointers, so nothing it
// hands the call can dangle, and calls the entry as its C signature, which `set`'s
// contract keeps (a stand-in honours the call's contract). Descriptors are passed by
// number: the kernel checks them, and which descriptor may be used or closed when is
// what the owning types of `sys/fd.rs` decide (`close` is theirs alone). What stays
// `unsafe` is memory: `munmap` unmaps pages others may still point into.

/// open(2) with a plain `int` mode (os_unix.c `posixOpen`): the new descriptor, or -1.
/// Only `sys` opens descriptors, each into an owning [`super::fd::Fd`].
pub(super) fn open(path: &CStr, flags: c_int, mode: c_int) -> c_int {
    // SAFETY: `Open` is the entry's C signature; `path` is NUL-terminated and outlives
    // the call, which does not keep it.
    unsafe { function::<Open>(OPEN)(path.as_ptr(), flags, mode) }
}
/// close(2). Only [`super::fd::Fd`] closes, once, when it is consumed or dropped.
pub(super) fn close(fd: RawFd) -> c_int {
    // SAFETY: `Close` is the entry's C signature; it takes no pointer.
    unsafe { function::<Close>(CLOSE)(fd) }
}
pub(crate) fn access(path: &CStr, mode: c_int) -> c_int {
    // SAFETY: `Access` is the entry's C signature; `path` is NUL-terminated and outlives
    // the call.
    unsafe { function::<Access>(ACCESS)(path.as_ptr(), mode) }
}
pub(crate) fn stat(path: &CStr, out: &mut libc::stat) -> c_int {
    // SAFETY: `Stat` is the entry's C signature; `path` is NUL-terminated and `out`
    // writable, both for the whole call.
    unsafe { function::<Stat>(STAT)(path.as_ptr(), out) }
}
pub(crate) fn fstat(fd: RawFd, out: &mut libc::stat) -> c_int {
    // SAFETY: `Fstat` is the entry's C signature; `out` is writable for the call.
    unsafe { function::<Fstat>(FSTAT)(fd, out) }
}
pub(crate) fn ftruncate(fd: RawFd, len: libc::off_t) -> c_int {
    // SAFETY: `Ftruncate` is the entry's C signature; it takes no pointer.
    unsafe { function::<Ftruncate>(FTRUNCATE)(fd, len) }
}
/// fcntl(F_OFD_SETLK): sets or releases an open-file-description lock without waiting.
pub(crate) fn fcntl_ofd_setlk(fd: RawFd, lock: &libc::flock) -> c_int {
    // SAFETY: `Fcntl` is the entry's C signature; F_OFD_SETLK reads a `flock`, which
    // `lock` is for the whole call.
    unsafe { function::<Fcntl>(FCNTL)(fd, libc::F_OFD_SETLK, lock as *const libc::flock) }
}
/// fcntl(F_OFD_GETLK): the first lock that conflicts with `lock`, written into it.
pub(crate) fn fcntl_ofd_getlk(fd: RawFd, lock: &mut libc::flock) -> c_int {
    // SAFETY: `Fcntl` is the entry's C signature; F_OFD_GETLK reads and writes a
    // `flock`, which `lock` is, writable, for the whole call.
    unsafe { function::<Fcntl>(FCNTL)(fd, libc::F_OFD_GETLK, lock as *mut libc::flock) }
}
/// fcntl(F_DUPFD_CLOEXEC): a duplicate of `fd` at `min_fd` or above, or -1. Only `sys`
/// makes descriptors.
pub(super) fn fcntl_dupfd_cloexec(fd: RawFd, min_fd: c_int) -> c_int {
    // SAFETY: `Fcntl` is the entry's C signature; F_DUPFD_CLOEXEC takes an int.
    unsafe { function::<Fcntl>(FCNTL)(fd, libc::F_DUPFD_CLOEXEC, min_fd) }
}
/// fcntl(F_GETFL): the file status flags and access mode of `fd`'s open file
/// description, or -1.
pub(super) fn fcntl_getfl(fd: RawFd) -> c_int {
    // SAFETY: `Fcntl` is the entry's C signature; F_GETFL takes no third argument, and a
    // zero there is ignored.
    unsafe { function::<Fcntl>(FCNTL)(fd, libc::F_GETFL, 0) }
}
/// lstat(2): `stat` of the link itself where `path` names a symbolic link.
pub(crate) fn lstat(path: &CStr, out: &mut libc::stat) -> c_int {
    // SAFETY: `Stat` is the entry's C signature (lstat's is stat's); `path` is
    // NUL-terminated and `out` writable, both for the whole call.
    unsafe { function::<Stat>(LSTAT)(path.as_ptr(), out) }
}
/// fcntl(F_GETFD): whether descriptor slot `fd` holds an open descriptor.
pub(super) fn is_open(fd: RawFd) -> bool {
    // SAFETY: `Fcntl` is the entry's C signature; F_GETFD takes no third argument, and a
    // zero there is ignored.
    unsafe { function::<Fcntl>(FCNTL)(fd, libc::F_GETFD, 0) != -1 }
}
/// Reads at `offset` into `buf`: `pread`, or `lseek` + `read` when only `read` is
/// replaced.
///
/// The result is kept as a C `int`, as os_unix.c keeps it (`got` in `seekAndRead`): a
/// stand-in written for `unix` may return `int`, whose -1 leaves the upper half of the
/// return register undefined. Every caller asks for at most `i32::MAX` bytes, so a real
/// `pread` loses nothing.
#[inline]
pub(crate) fn pread(fd: RawFd, buf: &mut [u8], offset: libc::off_t) -> libc::ssize_t {
    let len = buf.len();
    debug_assert!(len <= i32::MAX as usize);
    let buf = buf.as_mut_ptr().cast::<c_void>();
    let emulated = !TABLE[READ].current.load(Ordering::Relaxed).is_null()
        && TABLE[PREAD].current.load(Ordering::Relaxed).is_null();
    let got = if emulated {
        // SAFETY: lseek takes no pointer.
        if unsafe { libc::lseek(fd, offset, libc::SEEK_SET) } != offset {
            return -1;
        }
        // SAFETY: `Read` is the entry's C signature; `buf` is writable for `len` bytes
        // (an exclusive borrow) for the whole call, which does not keep it.
        unsafe { function::<Read>(READ)(fd, buf, len) }
    } else {
        // SAFETY: `Pread` is the entry's C signature; `buf` as above.
        unsafe { function::<Pread>(PREAD)(fd, buf, len, offset) }
    };
    got as c_int as libc::ssize_t
}
/// Writes `buf` at `offset`: `pwrite`, or `lseek` + `write` when only `write` is
/// replaced. The result is kept as a C `int`, as in [`pread`] (os_unix.c
/// `seekAndWriteFd`).
pub(crate) fn pwrite(fd: RawFd, buf: &[u8], offset: libc::off_t) -> libc::ssize_t {
    let len = buf.len();
    debug_assert!(len <= i32::MAX as usize);
    let buf = buf.as_ptr().cast::<c_void>();
    let emulated = !TABLE[WRITE].current.load(Ordering::Relaxed).is_null()
        && TABLE[PWRITE].current.load(Ordering::Relaxed).is_null();
    let wrote = if emulated {
        // SAFETY: lseek takes no pointer.
        if unsafe { libc::lseek(fd, offset, libc::SEEK_SET) } != offset {
            return -1;
        }
        // SAFETY: `Write` is the entry's C signature; `buf` is readable for `len` bytes
        // for the whole call, which does not keep it.
        unsafe { function::<Write>(WRITE)(fd, buf, len) }
    } else {
        // SAFETY: `Pwrite` is the entry's C signature; `buf` as above.
        unsafe { function::<Pwrite>(PWRITE)(fd, buf, len, offset) }
    };
    wrote as c_int as libc::ssize_t
}
pub(crate) fn fchmod(fd: RawFd, mode: libc::mode_t) -> c_int {
    // SAFETY: `Fchmod` is the entry's C signature; it takes no pointer.
    unsafe { function::<Fchmod>(FCHMOD)(fd, mode) }
}
pub(crate) fn unlink(path: &CStr) -> c_int {
    // SAFETY: `Unlink` is the entry's C signature; `path` is NUL-terminated and outlives
    // the call.
    unsafe { function::<Unlink>(UNLINK)(path.as_ptr()) }
}
/// Opens the directory holding `file` (os_unix.c `openDirectory`): SQLITE_OK and the
/// descriptor in `fd`, or SQLITE_CANTOPEN. Only `sys` makes descriptors.
pub(super) fn open_directory(file: &CStr, fd: &mut c_int) -> c_int {
    // SAFETY: `OpenDirectory` is the entry's C signature; `file` is NUL-terminated and
    // `fd` writable for the whole call.
    unsafe { function::<OpenDirectory>(OPEN_DIRECTORY)(file.as_ptr(), fd) }
}
pub(crate) fn fchown(fd: RawFd, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    // SAFETY: `Fchown` is the entry's C signature; it takes no pointer.
    unsafe { function::<Fchown>(FCHOWN)(fd, uid, gid) }
}
pub(crate) fn geteuid() -> libc::uid_t {
    // SAFETY: `Geteuid` is the entry's C signature; it takes no argument.
    unsafe { function::<Geteuid>(GETEUID)() }
}
/// mmap(2) of `len` bytes of `fd` at `offset`, at an address the kernel chooses: a new
/// mapping, which overlaps no memory in use (so `flags` must not hold MAP_FIXED). The
/// caller unmaps it with [`munmap`] once nothing points into it; `MAP_FAILED` on failure.
/// Only [`super::Mapping`] maps: it owns what it maps and unmaps it once.
pub(super) fn mmap(
    len: libc::size_t,
    prot: c_int,
    flags: c_int,
    fd: RawFd,
    offset: libc::off_t,
) -> *mut c_void {
    assert_eq!(
        flags & (libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE),
        0,
        "mmap at a fixed address"
    );
    // SAFETY: `Mmap` is the entry's C signature; with a null address and no MAP_FIXED
    // the kernel places the mapping where nothing is mapped, so no memory changes under
    // anyone.
    unsafe { function::<Mmap>(MMAP)(std::ptr::null_mut(), len, prot, flags, fd, offset) }
}
/// munmap(2).
///
/// # Safety
/// `addr` and `len` must be a mapping made by [`mmap`] (or a whole part of one), and no
/// reference or pointer into it may be used afterwards.
pub(super) unsafe fn munmap(addr: *mut c_void, len: libc::size_t) -> c_int {
    // SAFETY: `Munmap` is the entry's C signature; the caller keeps the contract above.
    unsafe { function::<Munmap>(MUNMAP)(addr, len) }
}
/// The page size the WAL index is mapped in (os_unix.c `unixShmRegionPerMap`).
pub(crate) fn getpagesize() -> c_int {
    // SAFETY: `Getpagesize` is the entry's C signature; it takes no argument.
    unsafe { function::<Getpagesize>(GETPAGESIZE)() }
}
pub(crate) fn fsync(fd: RawFd) -> c_int {
    // SAFETY: `Fsync` is the entry's C signature; it takes no pointer.
    unsafe { function::<Fsync>(FSYNC)(fd) }
}
pub(crate) fn fdatasync(fd: RawFd) -> c_int {
    // SAFETY: `Fsync` is the entry's C signature (fdatasync has fsync's); no pointer.
    unsafe { function::<Fsync>(FDATASYNC)(fd) }
}
pub(crate) fn fstatfs(fd: RawFd, out: &mut libc::statfs) -> c_int {
    // SAFETY: `Fstatfs` is the entry's C signature; `out` is writable for the call.
    unsafe { function::<Fstatfs>(FSTATFS)(fd, out) }
}
pub(crate) fn statx(
    dirfd: RawFd,
    path: &CStr,
    flags: c_int,
    mask: libc::c_uint,
    out: &mut libc::statx,
) -> c_int {
    // SAFETY: `Statx` is the entry's C signature; `path` is NUL-terminated and `out`
    // writable for the whole call.
    unsafe { function::<Statx>(STATX)(dirfd, path.as_ptr(), flags, mask, out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The table is per process: these tests only touch names the rest of the unit tests
    // never call (`mkdir`, `ioctl`, `getpagesize` through `get`).

    #[test]
    fn names_defaults_and_listing_follow_os_unix() {
        assert_eq!(TABLE[OPEN].name, c"open");
        assert_eq!(TABLE[OPEN_DIRECTORY].name, c"openDirectory");
        assert_eq!(TABLE[STATX].name, c"statx");
        assert_eq!(TABLE[GETPAGESIZE].name, c"getpagesize");
        assert_eq!(TABLE[MUNMAP].name, c"munmap");
        for delegated in PATH_OPERATION_CALLS {
            assert!(get(delegated).is_some(), "{delegated:?} has a default");
        }
        assert!(get(c"nosuchcall").is_none());
        assert!(get(c"pread64").is_none(), "never called: no default");
        assert!(get(c"open").is_some());
        let mut listed = Vec::new();
        let mut name = next(None);
        while let Some(current) = name {
            listed.push(current.to_str().unwrap());
            name = next(Some(current));
        }
        for absent in [
            "pread64",
            "pwrite64",
            "fallocate",
            "mkdir",
            "rmdir",
            "mremap",
            "ioctl",
        ] {
            assert!(!listed.contains(&absent), "{absent} listed: {listed:?}");
        }
        assert_eq!(listed.first(), Some(&"open"));
        assert!(listed.contains(&"openDirectory") && listed.contains(&"fsync"));
        assert_eq!(next(Some(c"nosuchcall")), None);
        // SAFETY: no function is installed.
        let unknown = unsafe { set(Some(c"nosuchcall"), None) };
        assert_eq!(unknown, Err(UnknownSystemCall));
    }

    #[test]
    fn a_replacement_is_returned_and_reset() {
        unsafe extern "C" fn stand_in() {}
        assert!(get(c"mkdir").is_none());
        // SAFETY: `mkdir` is never called, so the stand-in's signature does not matter.
        unsafe { set(Some(c"mkdir"), Some(stand_in)) }.unwrap();
        assert_eq!(
            get(c"mkdir").map(|f| f as *const ()),
            Some(stand_in as *const ())
        );
        assert!(!io_replaced(), "mkdir is not an I/O call");
        // SAFETY: back to no function.
        unsafe { set(Some(c"mkdir"), None) }.unwrap();
        assert!(get(c"mkdir").is_none());
        // A call with a default: replaced, then back to the default.
        let default = get(c"ioctl");
        assert!(default.is_none());
        // SAFETY: `ioctl` is never called, so the stand-in's signature does not matter.
        unsafe { set(Some(c"ioctl"), Some(stand_in)) }.unwrap();
        // SAFETY: back to every default.
        unsafe { set(None, None) }.unwrap();
        assert!(get(c"ioctl").is_none());
    }
}
