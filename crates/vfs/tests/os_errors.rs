//! What SQLite's error log (`SQLITE_CONFIG_LOG`) receives when a system call fails: the
//! same lines under `unix` and `io_uring`, in os_unix.c's form
//! `os_unix.c:LINE: (ERRNO) CALL(PATH) - MESSAGE`, for the calls os_unix.c logs (open,
//! unlink, ftruncate, mmap, close, fsync), and nothing for those it does not (a failed
//! read). Failures are made with the system-call tables (`xSetSystemCall`), or with a
//! directory where a file should be. Line numbers differ (they are each VFS's own source
//! lines) and are compared as `N`; temporary directories as `DIR`.
//!
//! The log and the tables are per process, so the tests of this binary run one at a time.

mod common;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::{Mutex, Once};

use common::system_calls::{code_of, erase, path_of_fd, set_call, Stand, SEED_SQL};
use common::{open, register};
use rusqlite::ffi;

// ─── The log ───────────────────────────────────────────────────────────────────────────

static LOG: Mutex<Vec<(c_int, String)>> = Mutex::new(Vec::new());

unsafe extern "C" fn collect(_: *mut c_void, code: c_int, message: *const c_char) {
    // SAFETY: SQLite passes a NUL-terminated message.
    let message = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    LOG.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push((code, message));
}

/// Installs the log callback (before SQLite is first initialised) and registers the VFS.
fn setup() -> std::sync::MutexGuard<'static, ()> {
    static CONFIG: Once = Once::new();
    CONFIG.call_once(|| {
        type Callback = unsafe extern "C" fn(*mut c_void, c_int, *const c_char);
        // SAFETY: SQLITE_CONFIG_LOG takes a callback of this type and its first argument;
        // SQLite is shut down first, as sqlite3_config requires.
        unsafe {
            ffi::sqlite3_shutdown();
            let rc = ffi::sqlite3_config(
                ffi::SQLITE_CONFIG_LOG,
                collect as Callback,
                std::ptr::null_mut::<c_void>(),
            );
            assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_config(SQLITE_CONFIG_LOG)");
            assert_eq!(ffi::sqlite3_initialize(), ffi::SQLITE_OK);
        }
    });
    let guard = common::process_state_lock();
    register();
    reset_calls();
    guard
}

/// The log since the last call, with `dir` written `DIR` and os_unix.c line numbers `N`.
fn take_log(dir: &Path) -> Vec<(c_int, String)> {
    let dir = dir.to_string_lossy().into_owned();
    let entries = std::mem::take(&mut *LOG.lock().unwrap());
    entries
        .into_iter()
        .map(|(code, message)| {
            let message = message.replace(&dir, "DIR");
            let message = match message
                .strip_prefix("os_unix.c:")
                .and_then(|rest| rest.split_once(':'))
            {
                Some((line, rest)) if line.chars().all(|c| c.is_ascii_digit()) => {
                    format!("os_unix.c:N:{rest}")
                }
                _ => message,
            };
            let message = match message
                .strip_prefix("cannot open file at line ")
                .and_then(|rest| rest.split_once(' '))
            {
                Some((line, rest)) if line.chars().all(|c| c.is_ascii_digit()) => {
                    format!("cannot open file at line N {rest}")
                }
                _ => message,
            };
            (code, message)
        })
        .collect()
}

// ─── Failing stand-ins ─────────────────────────────────────────────────────────────────

/// Calls on files whose path ends with this fail with [`ERRNO`].
static SUFFIX: Mutex<String> = Mutex::new(String::new());
static ERRNO: AtomicI32 = AtomicI32::new(0);

fn fail_on(suffix: &str, errno: i32) {
    *SUFFIX.lock().unwrap() = suffix.to_string();
    ERRNO.store(errno, Ordering::SeqCst);
}

/// Whether a call on `path` fails (errno set).
fn fails(path: &str) -> bool {
    let errno = ERRNO.load(Ordering::SeqCst);
    if errno == 0 || !path.ends_with(SUFFIX.lock().unwrap().as_str()) {
        return false;
    }
    // SAFETY: errno is thread-local; a failing libc call sets it.
    unsafe { *libc::__errno_location() = errno };
    true
}

unsafe extern "C" fn st_ftruncate(fd: c_int, len: libc::off_t) -> c_int {
    if fails(&path_of_fd(fd)) {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::ftruncate(fd, len) }
}

unsafe extern "C" fn st_unlink(path: *const c_char) -> c_int {
    // SAFETY: a NUL-terminated path.
    if fails(&unsafe { CStr::from_ptr(path) }.to_string_lossy()) {
        return -1;
    }
    // SAFETY: forwarded argument.
    unsafe { libc::unlink(path) }
}

unsafe extern "C" fn st_close(fd: c_int) -> c_int {
    let path = path_of_fd(fd);
    // SAFETY: forwarded argument; the descriptor is closed either way, as Linux does
    // when close(2) reports EIO.
    let rc = unsafe { libc::close(fd) };
    if fails(&path) {
        return -1;
    }
    rc
}

unsafe extern "C" fn st_fsync(fd: c_int) -> c_int {
    if fails(&path_of_fd(fd)) {
        return -1;
    }
    // SAFETY: forwarded argument.
    unsafe { libc::fsync(fd) }
}

unsafe extern "C" fn st_pread(
    fd: c_int,
    buf: *mut c_void,
    len: libc::size_t,
    offset: libc::off_t,
) -> libc::ssize_t {
    if fails(&path_of_fd(fd)) {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::pread(fd, buf, len, offset) }
}

unsafe extern "C" fn st_read(fd: c_int, buf: *mut c_void, len: libc::size_t) -> libc::ssize_t {
    if fails(&path_of_fd(fd)) {
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::read(fd, buf, len) }
}

unsafe extern "C" fn st_mmap(
    addr: *mut c_void,
    len: libc::size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: libc::off_t,
) -> *mut c_void {
    if fd >= 0 && fails(&path_of_fd(fd)) {
        return libc::MAP_FAILED;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::mmap(addr, len, prot, flags, fd, offset) }
}

/// A directory that can never be opened (errno EACCES).
unsafe extern "C" fn st_open_directory(_file: *const c_char, fd: *mut c_int) -> c_int {
    // SAFETY: openDirectory's contract: a writable int; errno is thread-local.
    unsafe {
        *fd = -1;
        *libc::__errno_location() = libc::EACCES;
    }
    ffi::SQLITE_CANTOPEN
}

fn reset_calls() {
    fail_on("", 0);
    for name in ["unix", "io_uring"] {
        assert_eq!(set_call(name, None, None), ffi::SQLITE_OK);
    }
}

/// What one run saw: the result codes of its steps and the log lines they produced.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    codes: Vec<c_int>,
    log: Vec<(c_int, String)>,
}

/// Seeds a fresh database under `vfs_name` with `setup_sql` (no failures), installs
/// `calls` there, runs `scenario` and returns its codes with the log it produced.
fn run(
    vfs_name: &str,
    setup_sql: &str,
    calls: &[(&CStr, Stand)],
    failure: (&str, i32),
    scenario: &dyn Fn(&Path, &str) -> Vec<c_int>,
) -> Seen {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("test.db");
    if !setup_sql.is_empty() {
        open(&path, vfs_name).execute_batch(setup_sql).unwrap();
    }
    take_log(dir.path());
    for (call, function) in calls {
        assert_eq!(
            set_call(vfs_name, Some(call), Some(*function)),
            ffi::SQLITE_OK
        );
    }
    fail_on(failure.0, failure.1);
    let codes = scenario(&path, vfs_name);
    reset_calls();
    Seen {
        codes,
        log: take_log(dir.path()),
    }
}

/// The scenario under `unix` and `io_uring`: equal codes and logs, returned. The message
/// after ` - ` is `strerror`'s, which a SQLite built without `HAVE_STRERROR_R` (as
/// rusqlite's bundled one is) leaves empty; this VFS always writes it, so an empty one
/// under `unix` matches any.
fn compare(
    setup_sql: &str,
    calls: &[(&CStr, Stand)],
    failure: (&str, i32),
    scenario: impl Fn(&Path, &str) -> Vec<c_int>,
) -> Seen {
    let unix = run("unix", setup_sql, calls, failure, &scenario);
    let ours = run("io_uring", setup_sql, calls, failure, &scenario);
    assert_eq!(
        ours.codes, unix.codes,
        "io_uring's result codes differ from unix's"
    );
    let same = ours.log.len() == unix.log.len()
        && ours.log.iter().zip(&unix.log).all(|(o, u)| {
            o == u
                || (o.0 == u.0
                    && u.1.starts_with("os_unix.c:")
                    && u.1.ends_with(" - ")
                    && o.1.starts_with(u.1.as_str())
                    && o.1.len() > u.1.len())
        });
    assert!(
        same,
        "io_uring logs differently from unix:\n  io_uring: {:?}\n  unix:     {:?}",
        ours.log, unix.log
    );
    ours
}

/// The os_unix.c-form lines of a log.
fn os_lines(seen: &Seen) -> Vec<&str> {
    seen.log
        .iter()
        .map(|(_, message)| message.as_str())
        .filter(|message| message.starts_with("os_unix.c:"))
        .collect()
}

// ─── The scenarios ─────────────────────────────────────────────────────────────────────

#[test]
fn failed_opens_are_logged_like_unix() {
    let _serial = setup();
    // A directory where the database should be (oserror.test 1.2).
    let seen = compare("", &[], ("", 0), |path, vfs_name| {
        std::fs::create_dir(path).unwrap();
        let opened = rusqlite::Connection::open_with_flags_and_vfs(
            path,
            rusqlite::OpenFlags::default(),
            vfs_name,
        )
        .and_then(|conn| conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(())));
        vec![code_of(opened)]
    });
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (21) open(DIR/test.db) - Is a directory"],
        "{seen:?}"
    );
    // A database in a directory that does not exist (oserror.test 1.3).
    let seen = compare("", &[], ("", 0), |path, vfs_name| {
        let missing = path.parent().unwrap().join("no-such-dir").join("test.db");
        let opened = rusqlite::Connection::open_with_flags_and_vfs(
            &missing,
            rusqlite::OpenFlags::default(),
            vfs_name,
        );
        vec![code_of(opened)]
    });
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (2) open(DIR/no-such-dir/test.db) - No such file or directory"],
        "{seen:?}"
    );
}

#[test]
fn failed_unlinks_are_logged_like_unix() {
    let _serial = setup();
    // A directory where the WAL file should be (oserror.test 2.1).
    let seen = compare("", &[], ("", 0), |path, vfs_name| {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        std::fs::create_dir(&wal).unwrap();
        let conn = open(path, vfs_name);
        vec![code_of(conn.query_row(
            "SELECT count(*) FROM sqlite_master",
            [],
            |_| Ok(()),
        ))]
    });
    assert_eq!(seen.codes, [ffi::SQLITE_IOERR_DELETE]);
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (21) unlink(DIR/test.db-wal) - Is a directory"],
        "{seen:?}"
    );
    // A journal that may not be deleted.
    let unlink = [(c"unlink", erase(st_unlink as unsafe extern "C" fn(_) -> _))];
    let seen = compare(
        SEED_SQL,
        &unlink,
        ("test.db-journal", libc::EACCES),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            vec![code_of(conn.execute("DELETE FROM t WHERE k < 50", []))]
        },
    );
    assert_eq!(seen.codes, [ffi::SQLITE_IOERR_DELETE]);
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (13) unlink(DIR/test.db-journal) - Permission denied"],
        "{seen:?}"
    );
}

#[test]
fn failed_truncates_are_logged_like_unix() {
    let _serial = setup();
    let truncate = [(
        c"ftruncate",
        erase(st_ftruncate as unsafe extern "C" fn(_, _) -> _),
    )];
    let seen = compare(
        &format!("PRAGMA journal_mode=TRUNCATE; {SEED_SQL}"),
        &truncate,
        ("test.db-journal", libc::EIO),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            conn.execute_batch("PRAGMA journal_mode=TRUNCATE").unwrap();
            vec![code_of(conn.execute("DELETE FROM t WHERE k < 50", []))]
        },
    );
    assert_eq!(seen.codes, [ffi::SQLITE_IOERR_TRUNCATE]);
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (5) ftruncate(DIR/test.db-journal) - Input/output error"],
        "{seen:?}"
    );
}

#[test]
fn failed_mmaps_are_logged_like_unix_and_reads_go_on() {
    let _serial = setup();
    let mmap = [(
        c"mmap",
        erase(st_mmap as unsafe extern "C" fn(_, _, _, _, _, _) -> _),
    )];
    let seen = compare(
        SEED_SQL,
        &mmap,
        ("test.db", libc::ENOMEM),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            conn.execute_batch("PRAGMA mmap_size=8000000").unwrap();
            let count = conn.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0));
            assert_eq!(count.as_ref().ok(), Some(&200));
            vec![code_of(count)]
        },
    );
    assert_eq!(seen.codes, [0]);
    assert_eq!(seen.log.len(), 1, "{seen:?}");
    assert_eq!(
        seen.log[0],
        (
            ffi::SQLITE_OK,
            "os_unix.c:N: (12) mmap(DIR/test.db) - Cannot allocate memory".to_string()
        )
    );
}

/// The WAL index's calls: a failed `mmap` of `-shm` (SQLITE_IOERR_SHMMAP) and a failed
/// `ftruncate` of it by the first connection in (SQLITE_IOERR_SHMOPEN), each logged with
/// the `-shm` file's name.
#[test]
fn failed_wal_index_calls_are_logged_like_unix() {
    let _serial = setup();
    let mmap = [(
        c"mmap",
        erase(st_mmap as unsafe extern "C" fn(_, _, _, _, _, _) -> _),
    )];
    let wal = format!("PRAGMA journal_mode=WAL; {SEED_SQL}");
    let count = |path: &Path, vfs_name: &str| {
        let conn = open(path, vfs_name);
        vec![code_of(conn.query_row("SELECT count(*) FROM t", [], |r| {
            r.get::<_, i64>(0)
        }))]
    };
    // SQLite tries twice (both VFSes log twice, compared above); each line names -shm.
    let only = |seen: &Seen, line: &str| {
        let lines = os_lines(seen);
        assert!(
            !lines.is_empty() && lines.iter().all(|l| *l == line),
            "{seen:?}"
        );
    };
    let seen = compare(&wal, &mmap, ("test.db-shm", libc::ENOMEM), count);
    assert_eq!(seen.codes, [ffi::SQLITE_IOERR_SHMMAP]);
    only(
        &seen,
        "os_unix.c:N: (12) mmap(DIR/test.db-shm) - Cannot allocate memory",
    );
    let truncate = [(
        c"ftruncate",
        erase(st_ftruncate as unsafe extern "C" fn(_, _) -> _),
    )];
    let seen = compare(&wal, &truncate, ("test.db-shm", libc::EIO), count);
    assert_eq!(seen.codes, [ffi::SQLITE_IOERR_SHMOPEN]);
    only(
        &seen,
        "os_unix.c:N: (5) ftruncate(DIR/test.db-shm) - Input/output error",
    );
}

#[test]
fn failed_closes_are_logged_like_unix() {
    let _serial = setup();
    let close = [(c"close", erase(st_close as unsafe extern "C" fn(_) -> _))];
    let seen = compare(
        SEED_SQL,
        &close,
        ("test.db-journal", libc::EIO),
        |path, vfs_name| {
            let conn = open(path, vfs_name);
            vec![code_of(conn.execute("DELETE FROM t WHERE k < 50", []))]
        },
    );
    assert_eq!(seen.codes, [0]);
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (5) close(DIR/test.db-journal) - Input/output error"],
        "{seen:?}"
    );
}

/// A database's descriptor (os_unix.c closeUnixFile), its `-shm` descriptor (unixShmPurge,
/// logged under the database's name) and the directory descriptors that a new journal's
/// first sync and a `synchronous=EXTRA` delete open (unixSync: under the journal's name;
/// unixDelete: under no name): each failed close is logged as `unix` logs it, and fails
/// nothing.
#[test]
fn failed_closes_of_databases_wal_indexes_and_directories_are_logged_like_unix() {
    let _serial = setup();
    let close = [(c"close", erase(st_close as unsafe extern "C" fn(_) -> _))];
    let read_and_close = |path: &Path, vfs_name: &str| {
        let conn = open(path, vfs_name);
        let read = conn.query_row("SELECT count(*) FROM t", [], |_| Ok(()));
        drop(conn);
        vec![code_of(read)]
    };

    let seen = compare(SEED_SQL, &close, ("test.db", libc::EIO), read_and_close);
    assert_eq!(seen.codes, [0]);
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (5) close(DIR/test.db) - Input/output error"],
        "{seen:?}"
    );

    // The last connection deletes the -shm file before it closes its descriptor, under
    // both VFSes.
    let wal = format!("{SEED_SQL}; PRAGMA journal_mode=WAL;");
    let shm = ("test.db-shm (deleted)", libc::EIO);
    let seen = compare(&wal, &close, shm, read_and_close);
    assert_eq!(seen.codes, [0]);
    assert_eq!(
        os_lines(&seen),
        ["os_unix.c:N: (5) close(DIR/test.db) - Input/output error"],
        "{seen:?}"
    );

    let seen = compare(SEED_SQL, &close, ("", 0), |path, vfs_name| {
        let conn = open(path, vfs_name);
        conn.execute_batch("PRAGMA synchronous=EXTRA").unwrap();
        // Only the directory's descriptors fail from here on.
        let dir = path.parent().unwrap().to_string_lossy().into_owned();
        fail_on(&dir, libc::EIO);
        let deleted = conn.execute("DELETE FROM t WHERE k < 50", []);
        vec![code_of(deleted)]
    });
    assert_eq!(seen.codes, [0]);
    assert_eq!(
        os_lines(&seen),
        [
            "os_unix.c:N: (5) close(DIR/test.db-journal) - Input/output error",
            "os_unix.c:N: (5) close() - Input/output error",
        ],
        "{seen:?}"
    );
}

/// Failed reads and a replaced openDirectory that fails: os_unix.c logs neither (its
/// openDirectory logs inside itself, which a replacement is not).
#[test]
fn what_unix_does_not_log_is_not_logged() {
    let _serial = setup();
    let reads = [
        (
            c"pread",
            erase(st_pread as unsafe extern "C" fn(_, _, _, _) -> _),
        ),
        (
            c"read",
            erase(st_read as unsafe extern "C" fn(_, _, _) -> _),
        ),
    ];
    let seen = compare(
        SEED_SQL,
        &reads,
        ("test.db", libc::EIO),
        |path, vfs_name| {
            // rusqlite reads the database while opening it.
            let conn = rusqlite::Connection::open_with_flags_and_vfs(
                path,
                rusqlite::OpenFlags::default(),
                vfs_name,
            )
            .and_then(|conn| conn.query_row("SELECT count(*) FROM t", [], |_| Ok(())));
            vec![code_of(conn)]
        },
    );
    assert_eq!(seen.codes, [ffi::SQLITE_IOERR_CORRUPTFS]);
    assert!(os_lines(&seen).is_empty(), "{seen:?}");
    let directory = [(
        c"openDirectory",
        erase(st_open_directory as unsafe extern "C" fn(_, _) -> _),
    )];
    let seen = compare(SEED_SQL, &directory, ("", 0), |path, vfs_name| {
        let conn = open(path, vfs_name);
        vec![code_of(conn.execute("DELETE FROM t WHERE k < 50", []))]
    });
    assert_eq!(seen.codes, [0]);
    assert!(seen.log.is_empty(), "{seen:?}");
}

/// os_unix.c's fsync is not in its system-call table, so `unix` cannot be made to fail
/// one; this VFS's own `fsync` entry can, and the failure is logged as os_unix.c's
/// unixSync logs it.
#[test]
fn a_failed_fsync_is_logged_as_os_unix_logs_it() {
    let _serial = setup();
    let fsync = [
        (c"fsync", erase(st_fsync as unsafe extern "C" fn(_) -> _)),
        (
            c"fdatasync",
            erase(st_fsync as unsafe extern "C" fn(_) -> _),
        ),
    ];
    let seen = run(
        "io_uring",
        SEED_SQL,
        &fsync,
        ("test.db", libc::EIO),
        &|path, vfs_name| {
            let conn = open(path, vfs_name);
            vec![code_of(conn.execute("DELETE FROM t WHERE k < 50", []))]
        },
    );
    assert_eq!(seen.codes, [ffi::SQLITE_IOERR_FSYNC]);
    // The commit's fsync, then the one of the rollback that follows it.
    let lines = os_lines(&seen);
    assert!(!lines.is_empty(), "{seen:?}");
    for line in lines {
        assert_eq!(
            line, "os_unix.c:N: (5) full_fsync(DIR/test.db) - Input/output error",
            "{seen:?}"
        );
    }
    assert!(seen
        .log
        .iter()
        .all(|(code, _)| *code == ffi::SQLITE_IOERR_FSYNC));
}

// ─── fstat at open and close (sysfault.test, case 1.2) ────────────────────────────────

/// The fstat calls seen since [`fail_fstat`] and which of them fail: the `at`th (counting
/// from 1; 0: none), and every later one too when `persistent`, as SQLite's
/// `test_syscall fault N PERSIST` counts them.
static FSTAT_SEEN: AtomicI64 = AtomicI64::new(0);
static FSTAT_FAIL_AT: AtomicI64 = AtomicI64::new(0);
static FSTAT_PERSISTENT: AtomicBool = AtomicBool::new(false);
static FSTAT_ERRNO: AtomicI32 = AtomicI32::new(0);

fn fail_fstat(at: i64, persistent: bool, errno: i32) {
    FSTAT_SEEN.store(0, Ordering::SeqCst);
    FSTAT_FAIL_AT.store(at, Ordering::SeqCst);
    FSTAT_PERSISTENT.store(persistent, Ordering::SeqCst);
    FSTAT_ERRNO.store(errno, Ordering::SeqCst);
}

unsafe extern "C" fn st_fstat_counted(fd: c_int, out: *mut libc::stat) -> c_int {
    let seen = FSTAT_SEEN.fetch_add(1, Ordering::SeqCst) + 1;
    let at = FSTAT_FAIL_AT.load(Ordering::SeqCst);
    if at > 0 && (seen == at || (seen > at && FSTAT_PERSISTENT.load(Ordering::SeqCst))) {
        // SAFETY: errno is thread-local; a failing libc call sets it.
        unsafe { *libc::__errno_location() = FSTAT_ERRNO.load(Ordering::SeqCst) };
        return -1;
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::fstat(fd, out) }
}

fn counted_fstat() -> [(&'static CStr, Stand); 1] {
    [(
        c"fstat",
        erase(st_fstat_counted as unsafe extern "C" fn(_, _) -> _),
    )]
}

/// sysfault.test's `open_and_write_body`: open, write in rollback mode, switch to WAL,
/// write, read, and write a temporary table; the result code of each step up to the
/// first that fails, then the rows read (as a code: 0 when they are right).
fn open_and_write(path: &Path, vfs_name: &str) -> Vec<c_int> {
    let conn = match rusqlite::Connection::open_with_flags_and_vfs(
        path,
        rusqlite::OpenFlags::default(),
        vfs_name,
    ) {
        Ok(conn) => conn,
        Err(error) => return vec![common::extended_code(&error)],
    };
    let mut codes = vec![0];
    let steps: [&dyn Fn() -> rusqlite::Result<()>; 5] = [
        &|| conn.execute_batch("CREATE TABLE t1(a, b); INSERT INTO t1 VALUES(1, 2);"),
        &|| {
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            assert_eq!(mode, "wal");
            Ok(())
        },
        &|| conn.execute_batch("INSERT INTO t1 VALUES(3, 4);"),
        &|| {
            let rows: Vec<(i64, i64)> = conn
                .prepare("SELECT * FROM t1")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            assert_eq!(rows, [(1, 2), (3, 4)]);
            Ok(())
        },
        &|| conn.execute_batch("CREATE TEMP TABLE t2(x); INSERT INTO t2 VALUES('y');"),
    ];
    for step in steps {
        let code = code_of(step());
        codes.push(code);
        if code != 0 {
            break;
        }
    }
    codes
}

/// sysfault-1.2.{1,2}-vfsfault-{transient,persistent}.1: the first fstat of the session
/// is the one that finds the database's inode at open (os_unix.c findInodeInfo). It
/// failing fails the open with a plain SQLITE_IOERR ("disk I/O error"), whatever the
/// errno (EOVERFLOW too: the bundled SQLite has large-file support), once or for good.
#[test]
fn a_failing_first_fstat_fails_the_open_with_an_io_error_like_unix() {
    let _serial = setup();
    for errno in [libc::ENOMEM, libc::EOVERFLOW] {
        for persistent in [false, true] {
            let seen = compare("", &counted_fstat(), ("", 0), |path, vfs_name| {
                fail_fstat(1, persistent, errno);
                open_and_write(path, vfs_name)
            });
            assert_eq!(
                seen.codes,
                [ffi::SQLITE_IOERR],
                "errno {errno}, persistent {persistent}"
            );
            assert!(seen.log.is_empty(), "{seen:?}");
        }
    }
}

/// Every fstat of the session failing in turn, once or from then on: the same codes and
/// log lines as `unix` each time. Besides the open's, `unix` fstats a database right
/// after opening it and when closing it (os_unix.c verifyDbFile: a failure is only a
/// warning in the log), a new journal, WAL or -shm to give it its mode (robust_open: a
/// failure is ignored), and for xFileSize, the WAL index's database and size
/// (SQLITE_IOERR_FSTAT, SQLITE_IOERR_SHMSIZE); so does this VFS, in the same order.
#[test]
fn every_fstat_of_a_session_fails_or_is_ignored_like_unix() {
    let _serial = setup();
    let calls = counted_fstat();
    // How many fstat calls the session makes when none fails: the same under both.
    let counts: Vec<i64> = ["unix", "io_uring"]
        .iter()
        .map(|vfs_name| {
            let seen = run(vfs_name, "", &calls, ("", 0), &|path, vfs_name| {
                fail_fstat(0, false, 0);
                let codes = open_and_write(path, vfs_name);
                assert_eq!(codes, [0; 6]);
                codes
            });
            assert!(seen.log.is_empty(), "{vfs_name}: {seen:?}");
            FSTAT_SEEN.load(Ordering::SeqCst)
        })
        .collect();
    assert_eq!(counts[1], counts[0], "fstat calls of the session");
    for at in 1..=counts[0] + 1 {
        for persistent in [false, true] {
            let seen = compare("", &calls, ("", 0), |path, vfs_name| {
                fail_fstat(at, persistent, libc::EIO);
                open_and_write(path, vfs_name)
            });
            // sysfault.test's accepted outcomes: the session completes, or fails with
            // "disk I/O error" (some SQLITE_IOERR).
            let last = *seen.codes.last().unwrap();
            assert!(
                last == 0 || last & 0xff == ffi::SQLITE_IOERR,
                "fstat #{at} failing (persistent {persistent}): {seen:?}"
            );
        }
    }
}
