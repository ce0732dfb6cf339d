//! The system-call table (`xSetSystemCall`, `xGetSystemCall`, `xNextSystemCall`): each
//! call replaced by a failing stand-in — EIO, ENOSPC, EINTR, EACCES, short transfers, a
//! 64 KiB page size — under `unix` and under `io_uring`, and the SQLite result codes and
//! the data compared. This is how SQLite's own fault tests drive a VFS; it needs no root,
//! no mount and no chattr (errors.rs keeps one real-filesystem test of each kind).
//!
//! Replacements are per process (both VFSes' tables are), so the tests of this binary
//! run one at a time.

mod common;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use common::system_calls::{code_of, erase, path_of_fd, set_call, vfs, Stand, SEED_SQL};
use common::{extended_code, integrity_ok, open, register, rows};
use rusqlite::ffi;

// ─── The stand-ins ─────────────────────────────────────────────────────────────────────

/// Which calls fail and how: one plan at a time (the tests are serial).
struct Plan {
    /// Calls whose file's path ends with this fail (all files when empty).
    suffix: Mutex<String>,
    /// The errno of a failure; 0: calls go through (short transfers may still apply);
    /// [`NO_ERRNO`]: calls fail and set errno to 0, as `test_syscall`'s `read` and
    /// `write` do by default.
    errno: AtomicI32,
    /// Matching calls to let through before failing.
    skip: AtomicI64,
    /// Matching calls to fail after that (then they pass again); negative: all.
    count: AtomicI64,
    /// Reads and writes transfer at most half of what they are asked (and ≥ 1 byte).
    short: AtomicBool,
    /// Matching calls seen.
    seen: AtomicU64,
    /// When > 0, writes fail only where they would end past this offset of their file:
    /// a disk with that much room (ENOSPC), whatever the number of calls.
    room_bytes: AtomicI64,
}

/// A failure that sets errno to 0 (see [`Plan::errno`]).
const NO_ERRNO: i32 = -1;

static PLAN: Plan = Plan {
    suffix: Mutex::new(String::new()),
    errno: AtomicI32::new(0),
    skip: AtomicI64::new(0),
    count: AtomicI64::new(-1),
    short: AtomicBool::new(false),
    seen: AtomicU64::new(0),
    room_bytes: AtomicI64::new(0),
};

fn set_plan(suffix: &str, errno: i32, skip: i64, count: i64, short: bool) {
    *PLAN.suffix.lock().unwrap() = suffix.to_string();
    PLAN.errno.store(errno, Ordering::SeqCst);
    PLAN.skip.store(skip, Ordering::SeqCst);
    PLAN.count.store(count, Ordering::SeqCst);
    PLAN.short.store(short, Ordering::SeqCst);
    PLAN.seen.store(0, Ordering::SeqCst);
    PLAN.room_bytes.store(0, Ordering::SeqCst);
}

/// A disk with `room_bytes` per file: every write ending past it fails with ENOSPC.
fn set_disk_room(room_bytes: i64) {
    set_plan("", libc::ENOSPC, 0, -1, false);
    PLAN.room_bytes.store(room_bytes, Ordering::SeqCst);
}

/// Whether a write of `len` bytes at `offset` of `path` fails now (errno set).
fn write_fails(path: &str, offset: i64, len: usize) -> bool {
    let room_bytes = PLAN.room_bytes.load(Ordering::SeqCst);
    if room_bytes > 0 && offset + len as i64 <= room_bytes {
        return false;
    }
    fails(path).is_some()
}

/// Whether a call on `path` fails now, and with which errno (set as errno too).
fn fails(path: &str) -> Option<c_int> {
    let matches = {
        let suffix = PLAN.suffix.lock().unwrap();
        suffix.is_empty() || path.ends_with(suffix.as_str())
    };
    if !matches {
        return None;
    }
    PLAN.seen.fetch_add(1, Ordering::SeqCst);
    let errno = PLAN.errno.load(Ordering::SeqCst);
    if errno == 0 {
        return None;
    }
    if PLAN.skip.fetch_sub(1, Ordering::SeqCst) > 0 {
        return None;
    }
    let count = PLAN.count.load(Ordering::SeqCst);
    if count == 0 {
        return None;
    }
    if count > 0 {
        PLAN.count.fetch_sub(1, Ordering::SeqCst);
    }
    let errno = errno.max(0);
    // SAFETY: errno is thread-local; writing it is what a failing libc call does.
    unsafe { *libc::__errno_location() = errno };
    Some(errno)
}

fn shortened(path: &str, len: usize) -> usize {
    let suffix_matches = {
        let suffix = PLAN.suffix.lock().unwrap();
        suffix.is_empty() || path.ends_with(suffix.as_str())
    };
    if PLAN.short.load(Ordering::SeqCst) && suffix_matches && len > 1 {
        len / 2
    } else {
        len
    }
}

unsafe extern "C" fn st_open(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
    // SAFETY: SQLite and the VFS pass a NUL-terminated path.
    let name = unsafe { CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    let writing = flags & (libc::O_RDWR | libc::O_WRONLY) != 0;
    // EACCES is a refusal to write: a read-only open of the same file still works, as
    // with a file the user may only read.
    if PLAN.errno.load(Ordering::SeqCst) == libc::EACCES && !writing {
        // SAFETY: forwarded arguments.
        return unsafe { libc::open(path, flags, mode as libc::c_uint) };
    }
    if fails(&name).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::open(path, flags, mode as libc::c_uint) }
}

unsafe extern "C" fn st_pread(
    fd: c_int,
    buf: *mut c_void,
    len: libc::size_t,
    offset: libc::off_t,
) -> libc::ssize_t {
    let path = path_of_fd(fd);
    if fails(&path).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments, with a length no larger than the caller's.
    unsafe { libc::pread(fd, buf, shortened(&path, len), offset) }
}

unsafe extern "C" fn st_read(fd: c_int, buf: *mut c_void, len: libc::size_t) -> libc::ssize_t {
    let path = path_of_fd(fd);
    if fails(&path).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments, with a length no larger than the caller's.
    unsafe { libc::read(fd, buf, shortened(&path, len)) }
}

unsafe extern "C" fn st_pwrite(
    fd: c_int,
    buf: *const c_void,
    len: libc::size_t,
    offset: libc::off_t,
) -> libc::ssize_t {
    let path = path_of_fd(fd);
    if write_fails(&path, offset, len) {
        return -1;
    }
    // SAFETY: forwarded arguments, with a length no larger than the caller's.
    unsafe { libc::pwrite(fd, buf, shortened(&path, len), offset) }
}

unsafe extern "C" fn st_write(fd: c_int, buf: *const c_void, len: libc::size_t) -> libc::ssize_t {
    let path = path_of_fd(fd);
    // SAFETY: lseek on a descriptor the caller passed; SEEK_CUR only reads the offset.
    let offset = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
    if write_fails(&path, offset, len) {
        return -1;
    }
    // SAFETY: forwarded arguments, with a length no larger than the caller's.
    unsafe { libc::write(fd, buf, shortened(&path, len)) }
}

unsafe extern "C" fn st_ftruncate(fd: c_int, len: libc::off_t) -> c_int {
    if fails(&path_of_fd(fd)).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::ftruncate(fd, len) }
}

unsafe extern "C" fn st_unlink(path: *const c_char) -> c_int {
    // SAFETY: a NUL-terminated path.
    if fails(&unsafe { CStr::from_ptr(path) }.to_string_lossy()).is_some() {
        return -1;
    }
    // SAFETY: forwarded argument.
    unsafe { libc::unlink(path) }
}

unsafe extern "C" fn st_open_directory(file: *const c_char, fd: *mut c_int) -> c_int {
    // SAFETY: SQLite's contract for openDirectory: a NUL-terminated path, a writable int.
    unsafe {
        *fd = -1;
        if fails(&CStr::from_ptr(file).to_string_lossy()).is_some() {
            return ffi::SQLITE_CANTOPEN;
        }
        let file = CStr::from_ptr(file).to_string_lossy().into_owned();
        let directory = Path::new(&file).parent().unwrap_or(Path::new("."));
        let c_dir = std::ffi::CString::new(directory.to_string_lossy().as_bytes()).unwrap();
        *fd = libc::open(c_dir.as_ptr(), libc::O_RDONLY);
        if *fd < 0 {
            ffi::SQLITE_CANTOPEN
        } else {
            ffi::SQLITE_OK
        }
    }
}

unsafe extern "C" fn st_getcwd(buf: *mut c_char, size: libc::size_t) -> *mut c_char {
    if fails("getcwd").is_some() {
        return std::ptr::null_mut();
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::getcwd(buf, size) }
}

unsafe extern "C" fn st_getpagesize() -> c_int {
    65536
}

// Stand-ins with the C signatures SQLite's own `test_syscall` uses, where they differ
// from libc's: `fcntl` is variadic in C, and `test_syscall`'s `read`/`pread`/`write`/
// `pwrite` return `int`. A variadic function cannot be defined in stable Rust, so these
// take the third argument as a pointer: on x86-64 System V (the only target these tests
// run on, see the cfg) a variadic call passes its integer and pointer arguments in the
// same registers as a fixed one, so the callee reads `fd`, `cmd` and the argument
// correctly — the same reliance os_unix.c's own casts of `fcntl` have.

#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn st_fcntl(fd: c_int, cmd: c_int, arg: *mut c_void) -> c_int {
    let locking = matches!(
        cmd,
        libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_SETLK | libc::F_OFD_SETLKW
    );
    if locking && fails(&path_of_fd(fd)).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments; every fcntl SQLite and the VFS make takes at most one
    // pointer or integer argument.
    unsafe { libc::fcntl(fd, cmd, arg) }
}

/// `test_syscall`'s `pread`: returns a C `int`.
unsafe extern "C" fn st_pread_int(
    fd: c_int,
    buf: *mut c_void,
    len: libc::size_t,
    offset: libc::off_t,
) -> c_int {
    if fails(&path_of_fd(fd)).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::pread(fd, buf, len, offset) as c_int }
}

/// `test_syscall`'s `pwrite`: returns a C `int`.
unsafe extern "C" fn st_pwrite_int(
    fd: c_int,
    buf: *const c_void,
    len: libc::size_t,
    offset: libc::off_t,
) -> c_int {
    if fails(&path_of_fd(fd)).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::pwrite(fd, buf, len, offset) as c_int }
}

unsafe extern "C" fn st_mmap(
    addr: *mut c_void,
    len: libc::size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    if fd >= 0 && fails(&path_of_fd(fd)).is_some() {
        return libc::MAP_FAILED;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::mmap(addr, len, prot, flags, fd, offset) }
}

unsafe extern "C" fn st_fstat(fd: c_int, out: *mut libc::stat) -> c_int {
    if fails(&path_of_fd(fd)).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::fstat(fd, out) }
}

// ─── Installing them ───────────────────────────────────────────────────────────────────

fn get_call(vfs_name: &str, call: &CStr) -> Option<Stand> {
    let vfs = vfs(vfs_name);
    // SAFETY: as in `common::system_calls::set_call`.
    unsafe { (*vfs).xGetSystemCall.expect("xGetSystemCall")(vfs, call.as_ptr()) }
}

fn next_call(vfs_name: &str, call: Option<&CStr>) -> Option<String> {
    let vfs = vfs(vfs_name);
    // SAFETY: as in `common::system_calls::set_call`; the result is null or a static NUL-terminated name.
    unsafe {
        let next = (*vfs).xNextSystemCall.expect("xNextSystemCall")(
            vfs,
            call.map_or(std::ptr::null(), CStr::as_ptr),
        );
        (!next.is_null()).then(|| CStr::from_ptr(next).to_string_lossy().into_owned())
    }
}

fn install(vfs_name: &str, calls: &[(&CStr, Stand)]) {
    for (call, function) in calls {
        assert_eq!(
            set_call(vfs_name, Some(call), Some(*function)),
            ffi::SQLITE_OK
        );
    }
}

fn reset_all() {
    set_plan("", 0, 0, -1, false);
    for name in ["unix", "io_uring"] {
        assert_eq!(set_call(name, None, None), ffi::SQLITE_OK);
    }
}

/// Serialises the tests and resets every replacement when a test ends, even on failure.
struct Serial(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl Drop for Serial {
    fn drop(&mut self) {
        reset_all();
    }
}

fn serial() -> Serial {
    let guard = common::process_state_lock();
    register();
    reset_all();
    Serial(guard)
}

fn read_calls() -> Vec<(&'static CStr, Stand)> {
    vec![
        (
            c"pread",
            erase(st_pread as unsafe extern "C" fn(_, _, _, _) -> _),
        ),
        (
            c"read",
            erase(st_read as unsafe extern "C" fn(_, _, _) -> _),
        ),
    ]
}

fn write_calls() -> Vec<(&'static CStr, Stand)> {
    vec![
        (
            c"pwrite",
            erase(st_pwrite as unsafe extern "C" fn(_, _, _, _) -> _),
        ),
        (
            c"write",
            erase(st_write as unsafe extern "C" fn(_, _, _) -> _),
        ),
    ]
}

// ─── Scenarios, each run under both VFSes ─────────────────────────────────────────────

/// What a scenario saw: the SQLite result codes of its steps, then the database's rows
/// and integrity after the replacements are gone.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    codes: Vec<i32>,
    /// Row count and a digest of every row.
    rows: (usize, u64),
}

/// Runs `scenario` on a fresh database under `vfs_name` with `calls` installed there, and
/// returns its outcome; the database is seeded (`setup`) before anything is replaced.
fn run(
    vfs_name: &str,
    setup: &str,
    calls: &[(&CStr, Stand)],
    plan: impl Fn(),
    scenario: impl Fn(&Path) -> Vec<i32>,
) -> Outcome {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("test.db");
    open(&path, vfs_name).execute_batch(setup).unwrap();
    plan();
    install(vfs_name, calls);
    let codes = scenario(&path);
    reset_all();
    let conn = open(&path, vfs_name);
    integrity_ok(&conn);
    let all = rows(&conn, "SELECT k, v FROM t ORDER BY k");
    Outcome {
        codes,
        rows: (all.len(), common::fnv(all.join("\n").as_bytes())),
    }
}

/// The same scenario under `unix` and `io_uring`: equal outcomes, returned.
fn compare(
    setup: &str,
    calls: &[(&CStr, Stand)],
    plan: impl Fn(),
    scenario: impl Fn(&Path, &str) -> Vec<i32>,
) -> Outcome {
    let unix = run("unix", setup, calls, &plan, |p| scenario(p, "unix"));
    let ours = run("io_uring", setup, calls, &plan, |p| scenario(p, "io_uring"));
    assert_eq!(ours, unix, "io_uring differs from unix");
    ours
}

/// The result code of counting the seeded table's rows on `conn`.
fn count_code(conn: &rusqlite::Connection) -> i32 {
    code_of(conn.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)))
}

/// The seed, once in rollback (DELETE) and once in WAL journal mode.
fn seeds_in_both_journal_modes() -> [String; 2] {
    [
        format!("PRAGMA journal_mode=DELETE; {SEED_SQL}"),
        format!("PRAGMA journal_mode=WAL; {SEED_SQL}"),
    ]
}

/// A transaction big enough to spill nothing but to rewrite many pages at commit.
fn update_all(path: &Path, vfs_name: &str) -> Vec<i32> {
    let conn = open(path, vfs_name);
    vec![code_of(conn.execute_batch(
        "BEGIN; UPDATE t SET v = CAST(printf('%0300d', k * 7) AS BLOB) WHERE k % 2 = 0; COMMIT;",
    ))]
}

#[test]
fn failed_database_writes_give_unix_codes_and_roll_back() {
    let _serial = serial();
    for (errno, code) in [
        (libc::EIO, ffi::SQLITE_IOERR_WRITE),
        (libc::ENOSPC, ffi::SQLITE_FULL),
    ] {
        let outcome = compare(
            SEED_SQL,
            &write_calls(),
            || set_plan("test.db", errno, 0, -1, false),
            update_all,
        );
        assert_eq!(outcome.codes, vec![code], "errno {errno}");
        assert_eq!(outcome.rows.0, 200);
    }
}

#[test]
fn failed_journal_and_wal_writes_give_unix_codes() {
    let _serial = serial();
    for (setup, suffix) in [
        (
            format!("PRAGMA journal_mode=DELETE; {SEED_SQL}"),
            "test.db-journal",
        ),
        (
            format!("PRAGMA journal_mode=WAL; {SEED_SQL}"),
            "test.db-wal",
        ),
    ] {
        for errno in [libc::EIO, libc::ENOSPC] {
            let outcome = compare(
                &setup,
                &write_calls(),
                || set_plan(suffix, errno, 0, -1, false),
                update_all,
            );
            assert_ne!(outcome.codes, vec![0], "{suffix} errno {errno}");
        }
    }
}

#[test]
fn failed_reads_give_unix_codes() {
    let _serial = serial();
    for errno in [libc::EIO, libc::EACCES] {
        let outcome = compare(
            SEED_SQL,
            &read_calls(),
            || set_plan("test.db", errno, 0, -1, false),
            |path, vfs_name| {
                let opened = rusqlite::Connection::open_with_flags_and_vfs(
                    path,
                    rusqlite::OpenFlags::default(),
                    vfs_name,
                );
                match opened {
                    Err(error) => vec![extended_code(&error)],
                    Ok(conn) => vec![
                        0,
                        code_of(
                            conn.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)),
                        ),
                    ],
                }
            },
        );
        assert_ne!(outcome.codes, vec![0], "errno {errno}");
    }
}

#[test]
fn short_reads_and_writes_complete_like_unix() {
    let _serial = serial();
    let mut calls = read_calls();
    calls.extend(write_calls());
    for setup in seeds_in_both_journal_modes() {
        let outcome = compare(
            &setup,
            &calls,
            || set_plan("", 0, 0, -1, true),
            |path, vfs| {
                let mut codes = update_all(path, vfs);
                let conn = open(path, vfs);
                codes.push(code_of(conn.query_row(
                    "SELECT sum(length(v)) FROM t",
                    [],
                    |r| r.get::<_, i64>(0),
                )));
                codes
            },
        );
        assert_eq!(outcome.codes, vec![0, 0]);
    }
}

#[test]
fn interrupted_opens_are_retried_like_unix() {
    let _serial = serial();
    let calls = [(
        c"open",
        erase(st_open as unsafe extern "C" fn(_, _, _) -> _),
    )];
    for setup in seeds_in_both_journal_modes() {
        // The first three opens of every kind of file are interrupted.
        let outcome = compare(
            &setup,
            &calls,
            || set_plan("", libc::EINTR, 0, 3, false),
            update_all,
        );
        assert_eq!(outcome.codes, vec![0]);
    }
}

/// A database the user may not write is opened read-only, reads work, writes are
/// SQLITE_READONLY (errors.rs has the same with chattr +i on a real file).
#[test]
fn a_database_that_cannot_be_opened_for_writing_is_read_only_like_unix() {
    let _serial = serial();
    let calls = [(
        c"open",
        erase(st_open as unsafe extern "C" fn(_, _, _) -> _),
    )];
    let outcome = compare(
        SEED_SQL,
        &calls,
        || set_plan("test.db", libc::EACCES, 0, -1, false),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            vec![
                count_code(&conn),
                code_of(conn.execute("DELETE FROM t", [])),
            ]
        },
    );
    assert_eq!(outcome.codes, vec![0, ffi::SQLITE_READONLY]);
    assert_eq!(outcome.rows.0, 200);
}

/// A disk that fills up: SQLITE_FULL and nothing committed is lost (errors.rs fills a
/// real 512 KiB tmpfs).
#[test]
fn a_full_disk_is_sqlite_full_and_loses_nothing_like_unix() {
    let _serial = serial();
    let outcome = compare(
        SEED_SQL,
        &write_calls(),
        // Room for the seed and a few more rows in every file.
        || set_disk_room(200 << 10),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            let mut codes = Vec::new();
            for _ in 0..20 {
                let code = code_of(conn.execute("INSERT INTO t(v) VALUES (zeroblob(20000))", []));
                codes.push(code);
                if code != 0 {
                    break;
                }
            }
            codes
        },
    );
    assert_eq!(outcome.codes.last(), Some(&ffi::SQLITE_FULL), "{outcome:?}");
}

#[test]
fn failed_truncates_and_deletes_give_unix_codes() {
    let _serial = serial();
    let truncate = [(
        c"ftruncate",
        erase(st_ftruncate as unsafe extern "C" fn(_, _) -> _),
    )];
    let outcome = compare(
        &format!("PRAGMA journal_mode=TRUNCATE; {SEED_SQL}"),
        &truncate,
        || set_plan("test.db-journal", libc::EIO, 0, -1, false),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            conn.execute_batch("PRAGMA journal_mode=TRUNCATE").unwrap();
            vec![code_of(conn.execute("DELETE FROM t WHERE k < 50", []))]
        },
    );
    assert_eq!(outcome.codes, vec![ffi::SQLITE_IOERR_TRUNCATE]);
    let unlink = [(c"unlink", erase(st_unlink as unsafe extern "C" fn(_) -> _))];
    let outcome = compare(
        SEED_SQL,
        &unlink,
        || set_plan("test.db-journal", libc::EACCES, 0, -1, false),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            vec![code_of(conn.execute("DELETE FROM t WHERE k < 50", []))]
        },
    );
    assert_eq!(outcome.codes, vec![ffi::SQLITE_IOERR_DELETE]);
}

/// A stand-in `fcntl` whose lock queries (`F_GETLK`, `F_OFD_GETLK`) fail as planned.
#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn st_fcntl_query(fd: c_int, cmd: c_int, arg: *mut c_void) -> c_int {
    let query = matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK);
    if query && fails(&path_of_fd(fd)).is_some() {
        return -1;
    }
    // SAFETY: forwarded arguments, as in `st_fcntl`.
    unsafe { libc::fcntl(fd, cmd, arg) }
}

/// xCheckReservedLock's failed lock query is SQLITE_IOERR_CHECKRESERVEDLOCK, as from
/// os_unix.c. SQLite asks when a journal is left beside the database (is it hot?).
/// `io_uring`'s reader asks about PENDING_BYTE first (a query `unix` does not make),
/// so its plan lets one query through.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_failed_reserved_lock_query_gives_the_unix_code() {
    let _serial = serial();
    let calls = [(
        c"fcntl",
        erase(st_fcntl_query as unsafe extern "C" fn(_, _, _) -> _),
    )];
    let scenario = |path: &Path, vfs_name: &str| {
        // A journal whose first byte is zero: not hot, once the question can be asked.
        std::fs::write(path.with_extension("db-journal"), [0u8; 512]).unwrap();
        vec![count_code(&open(path, vfs_name))]
    };
    let unix = run(
        "unix",
        SEED_SQL,
        &calls,
        || set_plan("test.db", libc::EIO, 0, 1, false),
        |path| scenario(path, "unix"),
    );
    let ours = run(
        "io_uring",
        SEED_SQL,
        &calls,
        || set_plan("test.db", libc::EIO, 1, 1, false),
        |path| scenario(path, "io_uring"),
    );
    assert_eq!(unix.codes, vec![ffi::SQLITE_IOERR_CHECKRESERVEDLOCK]);
    assert_eq!(ours, unix);
}

/// A directory that cannot be opened for syncing is not an error (os_unix.c); the
/// journal is still written, synced and deleted.
#[test]
fn an_unopenable_directory_is_not_an_error_like_unix() {
    let _serial = serial();
    let calls = [(
        c"openDirectory",
        erase(st_open_directory as unsafe extern "C" fn(_, _) -> _),
    )];
    let outcome = compare(
        SEED_SQL,
        &calls,
        || set_plan("", libc::EACCES, 0, -1, false),
        update_all,
    );
    assert_eq!(outcome.codes, vec![0]);
    assert!(PLAN.seen.load(Ordering::SeqCst) == 0, "reset after the run");
}

/// The size of `db`'s `-shm` file, as an `i32` for an outcome (0 when absent).
fn shm_size(db: &Path) -> i32 {
    let mut shm = db.as_os_str().to_owned();
    shm.push("-shm");
    std::fs::metadata(shm).map_or(0, |m| m.len() as i32)
}

/// A kernel with 64 KiB pages (SQLite's wal64k.test): the WAL index is mapped and grown in
/// whole 64 KiB pages, two 32 KiB regions at a time, exactly as under `unix`.
#[test]
fn a_64k_page_size_maps_the_wal_index_like_unix() {
    let _serial = serial();
    let calls = [(
        c"getpagesize",
        erase(st_getpagesize as unsafe extern "C" fn() -> _),
    )];
    let outcome = compare(
        &format!("PRAGMA journal_mode=WAL; {SEED_SQL}"),
        &calls,
        || set_plan("", 0, 0, -1, false),
        |path, vfs_name| {
            let mut codes = update_all(path, vfs_name);
            let conn = open(path, vfs_name);
            codes.push(code_of(
                conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)"),
            ));
            // A WAL index that outgrows its first 64 KiB: small pages, many frames.
            let grown = path.with_file_name("grown.db");
            let conn = open(&grown, vfs_name);
            conn.execute_batch(
                "PRAGMA page_size=512; PRAGMA journal_mode=WAL; CREATE TABLE g(x); BEGIN;",
            )
            .unwrap();
            codes.push(shm_size(&grown));
            let mut inserts = 0;
            while shm_size(&grown) == codes[codes.len() - 1] && inserts < 100_000 {
                conn.execute("INSERT INTO g VALUES(zeroblob(400))", [])
                    .unwrap();
                inserts += 1;
            }
            conn.execute_batch("COMMIT").unwrap();
            codes.push(inserts);
            codes.push(shm_size(&grown));
            integrity_ok(&conn);
            codes
        },
    );
    assert_eq!(outcome.codes[..2], [0, 0]);
    assert_eq!(
        outcome.codes[2], 65536,
        "one 64 KiB page: {:?}",
        outcome.codes
    );
    assert_eq!(outcome.codes[4], 131072, "then two: {:?}", outcome.codes);
}

/// `xFullPathname` is delegated to `unix`: a replaced `getcwd` reaches it there, so a
/// relative name fails to open under both VFSes.
#[test]
fn path_operations_see_replaced_calls() {
    let _serial = serial();
    let calls = [(
        c"getcwd",
        erase(st_getcwd as unsafe extern "C" fn(_, _) -> _),
    )];
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let previous = std::env::current_dir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let mut codes = Vec::new();
    for vfs_name in ["unix", "io_uring"] {
        set_plan("getcwd", libc::ERANGE, 0, -1, false);
        install(vfs_name, &calls);
        let opened = rusqlite::Connection::open_with_flags_and_vfs(
            "relative.db",
            rusqlite::OpenFlags::default(),
            vfs_name,
        );
        codes.push(code_of(opened.map(drop)) & 0xff);
        reset_all();
    }
    std::env::set_current_dir(previous).unwrap();
    assert_eq!(codes, vec![ffi::SQLITE_CANTOPEN, ffi::SQLITE_CANTOPEN]);
}

/// A replaced read or write is honoured even where the routing would use the ring, on
/// the read fast path, and by write-behind flushes: the stand-in sees the I/O, and its
/// failure surfaces.
#[test]
fn replaced_calls_reach_every_routing() {
    let _serial = serial();
    let mut calls = read_calls();
    calls.extend(write_calls());
    for uri in [
        "",
        "?uring_reads=ring&uring_writes=ring&uring_syncs=ring",
        "?uring_backend=syscall",
        "?uring_write_behind=off",
    ] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let path = dir.path().join("test.db");
        let uri_path = format!("file:{}{uri}", path.display());
        let open_uri = || {
            rusqlite::Connection::open_with_flags_and_vfs(
                &uri_path,
                rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_URI,
                "io_uring",
            )
            .unwrap()
        };
        open_uri().execute_batch(SEED_SQL).unwrap();
        install("io_uring", &calls);
        set_plan("test.db", 0, 0, -1, false);
        let conn = open_uri();
        assert_eq!(rows(&conn, "SELECT count(*) FROM t"), vec!["200"]);
        let reads = PLAN.seen.load(Ordering::SeqCst);
        assert!(reads > 0, "{uri}: no read reached the stand-in");
        conn.execute_batch("UPDATE t SET v = randomblob(300) WHERE k < 100")
            .unwrap();
        assert!(
            PLAN.seen.load(Ordering::SeqCst) > reads,
            "{uri}: no write reached the stand-in"
        );
        // Writes alone fail now (a failed read is another code, tested above).
        reset_all();
        install("io_uring", &write_calls());
        set_plan("test.db", libc::EIO, 0, -1, false);
        let error = conn
            .execute_batch("UPDATE t SET v = randomblob(300) WHERE k >= 100")
            .unwrap_err();
        assert_eq!(
            extended_code(&error),
            ffi::SQLITE_IOERR_WRITE,
            "{uri}: {error}"
        );
        drop(conn);
        reset_all();
        integrity_ok(&open_uri());
    }
}

#[test]
fn the_table_answers_like_os_unix() {
    let _serial = serial();
    // Known names, an unknown one, and resetting.
    assert_eq!(set_call("io_uring", Some(c"open"), None), ffi::SQLITE_OK);
    assert_eq!(
        set_call("io_uring", Some(c"nosuchcall"), None),
        ffi::SQLITE_NOTFOUND
    );
    assert_eq!(set_call("io_uring", Some(c""), None), ffi::SQLITE_NOTFOUND);
    assert!(get_call("io_uring", c"open").is_some());
    assert!(get_call("io_uring", c"nosuchcall").is_none());
    let stand = erase(st_open as unsafe extern "C" fn(_, _, _) -> _);
    let default = get_call("io_uring", c"open").unwrap();
    install("io_uring", &[(c"open", stand)]);
    assert_eq!(
        get_call("io_uring", c"open").map(|f| f as *const ()),
        Some(stand as *const ())
    );
    assert_eq!(set_call("io_uring", Some(c"open"), None), ffi::SQLITE_OK);
    assert_eq!(
        get_call("io_uring", c"open").map(|f| f as *const ()),
        Some(default as *const ())
    );
    // xNextSystemCall lists exactly the names that exist, and os_unix.c's names we call.
    let mut listed = Vec::new();
    let mut name = next_call("io_uring", None);
    while let Some(current) = name {
        let c_name = std::ffi::CString::new(current.clone()).unwrap();
        assert!(
            get_call("io_uring", &c_name).is_some(),
            "{current} listed but null"
        );
        name = next_call("io_uring", Some(&c_name));
        listed.push(current);
    }
    for expected in [
        "open",
        "close",
        "access",
        "getcwd",
        "stat",
        "fstat",
        "ftruncate",
        "fcntl",
        "read",
        "pread",
        "write",
        "pwrite",
        "fchmod",
        "unlink",
        "openDirectory",
        "fchown",
        "geteuid",
        "mmap",
        "munmap",
        "getpagesize",
        "readlink",
        "lstat",
    ] {
        assert!(
            listed.iter().any(|n| n == expected),
            "{expected} not in {listed:?}"
        );
    }
    // A replacement of a path-operation call reaches unix; others stay ours.
    let getcwd = erase(st_getcwd as unsafe extern "C" fn(_, _) -> _);
    install("io_uring", &[(c"getcwd", getcwd), (c"open", stand)]);
    assert_eq!(
        get_call("unix", c"getcwd").map(|f| f as *const ()),
        Some(getcwd as *const ())
    );
    assert_ne!(
        get_call("unix", c"open").map(|f| f as *const ()),
        Some(stand as *const ())
    );
}

/// Runs `body` on a thread and fails the test if it has not finished within
/// `limit_s` seconds: a guard against a hang, not a measurement.
fn within(limit_s: u64, what: &str, body: impl FnOnce() -> Outcome + Send + 'static) -> Outcome {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(body());
    });
    receiver
        .recv_timeout(std::time::Duration::from_secs(limit_s))
        .unwrap_or_else(|_| panic!("{what}: still running after {limit_s} s (a retry loop?)"))
}

/// Connections of one process share one WAL index per database, as under `unix`
/// (os_unix.c `unixShmNode`): while one connection holds a read transaction, a second
/// one opens, reads and closes without opening, mapping or locking the `-shm` file.
/// Every such call passes through the counting stand-ins (`open`, `mmap`, the locking
/// `fcntl`s) and is counted for files whose name ends in `-shm`.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_second_connection_shares_the_wal_index_like_unix() {
    let _serial = serial();
    let calls = [
        (
            c"open",
            erase(st_open as unsafe extern "C" fn(_, _, _) -> _),
        ),
        (
            c"mmap",
            erase(st_mmap as unsafe extern "C" fn(_, _, _, _, _, _) -> _),
        ),
        (
            c"fcntl",
            erase(st_fcntl as unsafe extern "C" fn(_, _, _) -> _),
        ),
    ];
    let outcome = compare(
        &format!("PRAGMA journal_mode=WAL; {SEED_SQL}"),
        &calls,
        || set_plan("-shm", 0, 0, -1, false),
        |path, vfs_name| {
            let first = open(path, vfs_name);
            first.execute_batch("BEGIN").unwrap();
            let mut codes = vec![count_code(&first)];
            let opened_by_first = PLAN.seen.swap(0, Ordering::SeqCst);
            let second = open(path, vfs_name);
            codes.push(count_code(&second));
            drop(second);
            codes.push(PLAN.seen.swap(0, Ordering::SeqCst) as i32);
            first.execute_batch("COMMIT").unwrap();
            // The first connection did open, map and lock it.
            codes.push((opened_by_first > 0) as i32);
            codes
        },
    );
    assert_eq!(outcome.codes, vec![0, 0, 0, 1]);
}

/// Connections of one process share the database's lock as os_unix.c's do: while one
/// connection reads, a second one's read transactions take and drop SHARED without a
/// locking `fcntl` (a rollback-mode reader pool makes one set of system calls, as under
/// `unix`, not a set per connection), and the rules between them are `unix`'s: a writer's
/// EXCLUSIVE waits for the other reader and stays PENDING, which keeps new readers and a
/// second writer out, until the reader is done.
#[cfg(target_arch = "x86_64")]
#[test]
fn connections_of_one_process_share_the_database_lock_like_unix() {
    let _serial = serial();
    let calls = [(
        c"fcntl",
        erase(st_fcntl as unsafe extern "C" fn(_, _, _) -> _),
    )];
    let outcome = compare(
        SEED_SQL,
        &calls,
        || set_plan("test.db", 0, 0, -1, false),
        |path, vfs_name| {
            let no_wait = |conn: &rusqlite::Connection| {
                conn.busy_timeout(std::time::Duration::ZERO).unwrap();
            };
            let first = open(path, vfs_name);
            no_wait(&first);
            first.execute_batch("BEGIN").unwrap();
            let mut codes = vec![count_code(&first)];
            let second = open(path, vfs_name);
            no_wait(&second);
            PLAN.seen.store(0, Ordering::SeqCst);
            codes.push(count_code(&second));
            codes.push(count_code(&second));
            codes.push(PLAN.seen.swap(0, Ordering::SeqCst) as i32);
            codes.push(code_of(
                second.execute_batch("BEGIN; DELETE FROM t WHERE k < 10;"),
            ));
            codes.push(code_of(second.execute_batch("COMMIT")));
            let third = open(path, vfs_name);
            no_wait(&third);
            codes.push(count_code(&third));
            codes.push(code_of(first.execute_batch("DELETE FROM t WHERE k = 20")));
            codes.push(code_of(first.execute_batch("COMMIT")));
            codes.push(code_of(second.execute_batch("COMMIT")));
            codes.push(count_code(&third));
            codes
        },
    );
    let busy = ffi::SQLITE_BUSY;
    assert_eq!(
        outcome.codes,
        vec![0, 0, 0, 0, 0, busy, busy, busy, 0, 0, 0]
    );
}

/// The `fcntl`s on `test.db` since the last [`take_lock_calls`]: (command, lock type,
/// start, length), recorded by [`rec_fcntl`].
static LOCK_CALLS: Mutex<Vec<(c_int, i16, i64, i64)>> = Mutex::new(Vec::new());

fn take_lock_calls() -> Vec<(c_int, i16, i64, i64)> {
    std::mem::take(&mut *LOCK_CALLS.lock().unwrap())
}

/// A stand-in `fcntl` that records every lock command on `test.db` and makes it.
#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn rec_fcntl(fd: c_int, cmd: c_int, arg: *mut c_void) -> c_int {
    let locking = matches!(
        cmd,
        libc::F_SETLK
            | libc::F_SETLKW
            | libc::F_GETLK
            | libc::F_OFD_SETLK
            | libc::F_OFD_SETLKW
            | libc::F_OFD_GETLK
    );
    if locking && path_of_fd(fd).ends_with("test.db") {
        // SAFETY: every lock command takes a `struct flock *` (fcntl(2)).
        let lock = unsafe { &*(arg as *const libc::flock) };
        LOCK_CALLS
            .lock()
            .unwrap()
            .push((cmd, lock.l_type, lock.l_start, lock.l_len));
    }
    // SAFETY: forwarded arguments, as in `st_fcntl`.
    unsafe { libc::fcntl(fd, cmd, arg) }
}

/// A rollback-mode read transaction locks the same bytes as under `unix` in one system
/// call fewer: `unix` read-locks PENDING_BYTE, read-locks the shared range and releases
/// both (four `fcntl`s); `io_uring` looks at PENDING_BYTE (`F_OFD_GETLK`), read-locks the
/// shared range and releases it (three), and never holds PENDING_BYTE, so a writer
/// asking for it is never refused because of a reader (src/lock.rs, "Readers look at
/// PENDING_BYTE instead of locking it").
#[cfg(target_arch = "x86_64")]
#[test]
fn a_read_transaction_looks_at_the_pending_byte_instead_of_locking_it() {
    let _serial = serial();
    const PENDING_BYTE: i64 = 0x4000_0000;
    let (read, unlock) = (libc::F_RDLCK as i16, libc::F_UNLCK as i16);
    let mut seen = Vec::new();
    for vfs_name in ["unix", "io_uring"] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let path = dir.path().join("test.db");
        open(&path, vfs_name)
            .execute_batch(&format!("PRAGMA journal_mode=DELETE; {SEED_SQL}"))
            .unwrap();
        let conn = open(&path, vfs_name);
        assert_eq!(count_code(&conn), 0);
        install(
            vfs_name,
            &[(
                c"fcntl",
                erase(rec_fcntl as unsafe extern "C" fn(_, _, _) -> _),
            )],
        );
        take_lock_calls();
        assert_eq!(count_code(&conn), 0);
        seen.push(take_lock_calls());
        reset_all();
    }
    let shared = (PENDING_BYTE + 2, 510);
    assert_eq!(
        seen[0],
        vec![
            (libc::F_SETLK, read, PENDING_BYTE, 1),
            (libc::F_SETLK, read, shared.0, shared.1),
            (libc::F_SETLK, unlock, PENDING_BYTE, 1),
            (libc::F_SETLK, unlock, 0, 0),
        ],
        "unix's read transaction"
    );
    assert_eq!(
        seen[1],
        vec![
            (libc::F_OFD_GETLK, read, PENDING_BYTE, 1),
            (libc::F_OFD_SETLK, read, shared.0, shared.1),
            (libc::F_OFD_SETLK, unlock, 0, 0),
        ],
        "io_uring's read transaction"
    );
}

/// A read-only connection opened first lends the process's lock state its descriptor;
/// a writable connection opened next must still get its write locks (a write lock needs
/// a descriptor open for writing), while the read-only one keeps reading: the same codes
/// as `unix` under the same steps.
#[test]
fn a_read_only_first_connection_does_not_stop_a_writer_of_the_process() {
    let _serial = serial();
    let outcome = compare(
        SEED_SQL,
        &[],
        || set_plan("", 0, 0, -1, false),
        |path, vfs_name| {
            let reader = rusqlite::Connection::open_with_flags_and_vfs(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                vfs_name,
            )
            .unwrap();
            reader.busy_timeout(std::time::Duration::ZERO).unwrap();
            reader.execute_batch("BEGIN").unwrap();
            let mut codes = vec![count_code(&reader)];
            let writer = open(path, vfs_name);
            writer.busy_timeout(std::time::Duration::ZERO).unwrap();
            codes.push(code_of(
                writer.execute_batch("BEGIN IMMEDIATE; DELETE FROM t WHERE k <= 10;"),
            ));
            codes.push(code_of(writer.execute_batch("COMMIT")));
            codes.push(code_of(reader.execute_batch("COMMIT")));
            codes.push(code_of(writer.execute_batch("COMMIT")));
            codes.push(count_code(&reader));
            drop(reader);
            codes.push(code_of(writer.execute_batch("DELETE FROM t WHERE k <= 20")));
            codes
        },
    );
    assert_eq!(outcome.codes, vec![0, 0, ffi::SQLITE_BUSY, 0, 0, 0, 0]);
    assert_eq!(outcome.rows.0, 180);
}

/// Every lock request interrupted (EINTR), for good: os_unix.c does not retry a
/// non-blocking lock, it reports SQLITE_BUSY. Retrying forever would hang.
#[cfg(target_arch = "x86_64")]
#[test]
fn interrupted_locks_are_busy_like_unix_not_retried_forever() {
    let _serial = serial();
    let outcome = within(120, "a lock failing with EINTR", || {
        let calls = [(
            c"fcntl",
            erase(st_fcntl as unsafe extern "C" fn(_, _, _) -> _),
        )];
        compare(
            SEED_SQL,
            &calls,
            || set_plan("test.db", libc::EINTR, 0, -1, false),
            |path, vfs_name| {
                let conn = open(path, vfs_name);
                vec![count_code(&conn)]
            },
        )
    });
    assert_eq!(outcome.codes, vec![ffi::SQLITE_BUSY]);
}

/// `test_syscall`'s read and write stand-ins return `int`: their -1 must read as -1 (and
/// its EINTR be retried, as os_unix.c retries it), not as a huge byte count. The database
/// is open (its schema read) before the stand-ins go in.
#[cfg(target_arch = "x86_64")]
#[test]
fn int_returning_read_and_write_stand_ins_are_understood_like_unix() {
    let _serial = serial();
    let calls = [
        (
            c"pread",
            erase(st_pread_int as unsafe extern "C" fn(_, _, _, _) -> _),
        ),
        (
            c"pwrite",
            erase(st_pwrite_int as unsafe extern "C" fn(_, _, _, _) -> _),
        ),
    ];
    for journal in ["DELETE", "WAL"] {
        // Every third call on the database interrupted, five times; then every call
        // failing with EIO.
        for (errno, skip, count) in [(libc::EINTR, 2, 5), (libc::EIO, 0, -1)] {
            let mut outcomes = Vec::new();
            for vfs_name in ["unix", "io_uring"] {
                let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
                let path = dir.path().join("test.db");
                let conn = open(&path, vfs_name);
                conn.execute_batch(&format!("PRAGMA journal_mode={journal}; {SEED_SQL}"))
                    .unwrap();
                install(vfs_name, &calls);
                set_plan("test.db", errno, skip, count, false);
                let codes = vec![
                    code_of(conn.execute_batch(
                        "UPDATE t SET v = CAST(printf('%0300d', k * 7) AS BLOB) WHERE k % 2 = 0",
                    )),
                    code_of(
                        conn.query_row("SELECT sum(length(v)) FROM t", [], |r| r.get::<_, i64>(0)),
                    ),
                ];
                reset_all();
                drop(conn);
                integrity_ok(&open(&path, vfs_name));
                outcomes.push(codes);
            }
            assert_eq!(
                outcomes[1], outcomes[0],
                "{journal} errno {errno}: io_uring differs"
            );
            if errno == libc::EINTR {
                assert_eq!(outcomes[0], vec![0, 0], "{journal}: EINTR is retried");
            }
        }
    }
}

/// A failing `fstat` is an I/O error where one is asked for, never a sign that the
/// database moved (which would make it read-only). Both VFSes open the database before
/// `fstat` starts failing (`unix` fstats at open, and would fail there).
#[test]
fn a_failing_fstat_never_makes_a_database_look_moved() {
    let _serial = serial();
    let calls = [(c"fstat", erase(st_fstat as unsafe extern "C" fn(_, _) -> _))];
    let mut outcomes = Vec::new();
    for vfs_name in ["unix", "io_uring"] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let path = dir.path().join("test.db");
        open(&path, vfs_name).execute_batch(SEED_SQL).unwrap();
        let conn = open(&path, vfs_name);
        assert_eq!(rows(&conn, "SELECT count(*) FROM t"), vec!["200"]);
        install(vfs_name, &calls);
        set_plan("test.db", libc::EIO, 0, -1, false);
        let mut codes = Vec::new();
        for k in 0..3 {
            codes.push(code_of(conn.execute(
                "INSERT INTO t(v) VALUES (CAST(printf('%0300d', ?1) AS BLOB))",
                [k],
            )));
        }
        reset_all();
        assert!(
            !codes.contains(&ffi::SQLITE_READONLY_DBMOVED),
            "{vfs_name}: {codes:?}"
        );
        drop(conn);
        integrity_ok(&open(&path, vfs_name));
        outcomes.push(codes);
    }
    assert_eq!(outcomes[1], outcomes[0], "io_uring differs from unix");
}

/// `test_syscall` fails `read` and `write` with errno 0 by default: os_unix.c reads that as
/// the call's I/O error (SQLITE_IOERR_WRITE / READ), not as a full disk.
#[test]
fn a_failure_without_errno_is_an_io_error_like_unix() {
    let _serial = serial();
    let outcome = compare(
        SEED_SQL,
        &write_calls(),
        || set_plan("test.db", NO_ERRNO, 0, -1, false),
        update_all,
    );
    assert_eq!(outcome.codes, vec![ffi::SQLITE_IOERR_WRITE]);
    let outcome = compare(
        SEED_SQL,
        &read_calls(),
        || set_plan("test.db", NO_ERRNO, 0, -1, false),
        |path, vfs_name| match rusqlite::Connection::open_with_flags_and_vfs(
            path,
            rusqlite::OpenFlags::default(),
            vfs_name,
        ) {
            Err(error) => vec![extended_code(&error)],
            Ok(conn) => {
                vec![count_code(&conn)]
            }
        },
    );
    assert_eq!(outcome.codes, vec![ffi::SQLITE_IOERR_READ]);
}
