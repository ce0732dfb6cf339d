//! A connection carried across `fork()`, and a WAL index another process uses.
//!
//! A forked child shares its parent's open file descriptions, and the OFD locks on them:
//! a lock or unlock the child made through a connection it inherited would be the
//! parent's. SQLite forbids using such a connection in the child; closing it is what
//! children do. These tests check, against stock `sqlite3` processes, that:
//! * the child's close of an inherited connection leaves the parent's locks, its WAL and
//!   its WAL index as they were, in WAL mode and in the middle of a rollback-mode
//!   transaction, and the parent's later commits are seen by other processes;
//! * a lock asked for through an inherited connection is refused, and the parent's
//!   locks survive the attempt;
//! * the last connection of this process does not delete the WAL and its index while
//!   another process still holds the index's dead-man-switch lock (os_unix.c
//!   `unixIsSharingShmNode`).

mod common;

use std::os::fd::AsRawFd;
use std::path::Path;

use rusqlite::Connection;

use common::{open, register, stock_ok, stock_run};

/// PENDING_BYTE, RESERVED_BYTE and the shared range (os_unix.c).
const PENDING_BYTE: i64 = 0x4000_0000;
const RESERVED_BYTE: i64 = PENDING_BYTE + 1;
const SHARED_FIRST: i64 = PENDING_BYTE + 2;
const SHARED_SIZE: i64 = 510;
/// The WAL index's dead-man-switch byte.
const SHM_DMS: i64 = 128;

/// The type of lock another open file description of `path` would run into when asking
/// for a write lock on `[start, start + len)`: `F_UNLCK` when none.
fn lock_seen_by_others(path: &Path, start: i64, len: i64) -> i16 {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // SAFETY: flock is plain old data; zeroes are a valid value.
    let mut probe: libc::flock = unsafe { std::mem::zeroed() };
    probe.l_type = libc::F_WRLCK as i16;
    probe.l_whence = libc::SEEK_SET as i16;
    probe.l_start = start;
    probe.l_len = len;
    // SAFETY: F_OFD_GETLK reads and writes the flock passed; the descriptor is open. An
    // OFD query sets no lock, and this descriptor takes none, so closing it (a POSIX
    // lock's trap) drops nothing.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut probe) };
    assert_eq!(rc, 0, "F_OFD_GETLK on {}", path.display());
    probe.l_type
}

/// The tests of this file run one at a time: a child forked while another test's thread
/// was inside SQLite (holding one of its process-wide mutexes, the memory statistics'
/// among them) would wait on that mutex for good.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits for child `pid` up to 60 s (then kills it and fails: a child that never ends
/// must fail the test, not hang it); its wait status.
fn wait_for(pid: libc::pid_t, what: &str) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child without blocking.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            return status;
        }
        assert_eq!(done, 0, "waitpid on {what}");
        if std::time::Instant::now() > deadline {
            // SAFETY: our own child, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("{what} was still running after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Forks; the child runs `child` and exits with its result (0 when true), without
/// running the parent's handlers or destructors. Returns the child's exit status.
fn in_forked_child(child: impl FnOnce() -> bool) -> i32 {
    // SAFETY: the child runs `child` (SQLite calls: allocation is fork-safe in glibc) and
    // leaves with `_exit`; it prints nothing (the parent's stdout lock may be held).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let passed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child));
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(if matches!(passed, Ok(true)) { 0 } else { 1 }) };
    }
    let status = wait_for(pid, "the forked child");
    assert!(
        libc::WIFEXITED(status),
        "the child ended by signal: {status}"
    );
    libc::WEXITSTATUS(status)
}

/// Drops `connection` in a forked child (its `sqlite3_close`), as a child closing the
/// connections it inherited does. The child's exit status.
fn close_in_child(connection: &Connection) -> i32 {
    in_forked_child(|| {
        // SAFETY: the child's own copy of the connection, closed once, here; the
        // parent's is untouched (the child's memory is its own).
        drop(unsafe { std::ptr::read(connection) });
        true
    })
}

#[test]
fn a_child_closing_an_inherited_wal_connection_leaves_the_parents_locks_and_files() {
    let _serial = serial();
    register();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wal.db");
    let shm = dir.path().join("wal.db-shm");
    let wal = dir.path().join("wal.db-wal");
    let parent = open(&db, "io_uring");
    let mode: String = parent
        .query_row("PRAGMA journal_mode=wal", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    parent
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    // An open WAL connection holds SHARED on the database and the index's DMS.
    assert_eq!(
        lock_seen_by_others(&db, SHARED_FIRST, SHARED_SIZE),
        libc::F_RDLCK as i16
    );
    assert_eq!(lock_seen_by_others(&shm, SHM_DMS, 1), libc::F_RDLCK as i16);

    assert_eq!(close_in_child(&parent), 0);

    assert_eq!(
        lock_seen_by_others(&db, SHARED_FIRST, SHARED_SIZE),
        libc::F_RDLCK as i16,
        "the parent's SHARED lock survives the child's close"
    );
    assert_eq!(
        lock_seen_by_others(&shm, SHM_DMS, 1),
        libc::F_RDLCK as i16,
        "the parent's hold on the WAL index survives the child's close"
    );
    assert!(
        wal.exists() && shm.exists(),
        "the child deleted the parent's WAL"
    );
    parent.execute("INSERT INTO t VALUES(2)", []).unwrap();
    assert_eq!(stock_ok(&db, "SELECT count(*) FROM t;").trim(), "2");
    drop(parent);
    assert_eq!(stock_ok(&db, "PRAGMA integrity_check;").trim(), "ok");
}

#[test]
fn a_child_closing_an_inherited_connection_mid_transaction_leaves_the_parents_lock() {
    let _serial = serial();
    register();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rollback.db");
    let parent = open(&db, "io_uring");
    parent
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    // RESERVED, before the transaction changed a page (so it has no journal yet: a
    // child rolling back a copy of a journaled transaction would play the parent's
    // journal back and delete it, under `unix` too).
    parent.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(
        lock_seen_by_others(&db, RESERVED_BYTE, 1),
        libc::F_WRLCK as i16
    );

    // The child's close ends its copy of the transaction and unlocks: that may not touch
    // the parent's locks.
    assert_eq!(close_in_child(&parent), 0);

    assert_eq!(
        lock_seen_by_others(&db, RESERVED_BYTE, 1),
        libc::F_WRLCK as i16,
        "the parent's RESERVED lock survives the child's close"
    );
    let writer = stock_run(&db, 0, "BEGIN IMMEDIATE; COMMIT;");
    assert!(
        !writer.status.success(),
        "another process got RESERVED while the parent held it"
    );
    parent
        .execute_batch("INSERT INTO t VALUES(2); COMMIT;")
        .unwrap();
    assert_eq!(stock_ok(&db, "SELECT count(*) FROM t;").trim(), "2");
    assert_eq!(stock_ok(&db, "PRAGMA integrity_check;").trim(), "ok");
}

#[test]
fn a_lock_through_an_inherited_connection_is_refused_and_the_parents_locks_stay() {
    let _serial = serial();
    register();
    let dir = tempfile::tempdir().unwrap();
    for (name, journal) in [("rollback.db", "delete"), ("wal.db", "wal")] {
        let db = dir.path().join(name);
        let parent = open(&db, "io_uring");
        parent
            .query_row(&format!("PRAGMA journal_mode={journal}"), [], |_| Ok(()))
            .unwrap();
        parent
            .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
            .unwrap();
        parent.execute_batch("BEGIN; SELECT * FROM t;").unwrap();
        assert_eq!(
            lock_seen_by_others(&db, SHARED_FIRST, SHARED_SIZE),
            libc::F_RDLCK as i16
        );
        let status = in_forked_child(|| {
            // Reading and writing through the inherited connection must fail at once (no
            // busy handler: a refused lock is SQLITE_BUSY in rollback mode). Its copy of
            // the parent's read transaction ends first.
            parent.busy_timeout(std::time::Duration::ZERO).unwrap();
            let _ = parent.execute_batch("COMMIT");
            let read = parent.query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0));
            let write = parent.execute("INSERT INTO t VALUES(3)", []);
            read.is_err() && write.is_err()
        });
        assert_eq!(
            status, 0,
            "{journal}: the child used the inherited connection"
        );
        assert_eq!(
            lock_seen_by_others(&db, SHARED_FIRST, SHARED_SIZE),
            libc::F_RDLCK as i16,
            "{journal}: the parent's read lock survives the child's attempts"
        );
        parent.execute_batch("COMMIT").unwrap();
        parent.execute("INSERT INTO t VALUES(2)", []).unwrap();
        drop(parent);
        assert_eq!(stock_ok(&db, "SELECT count(*) FROM t;").trim(), "2");
    }
}

#[test]
fn the_last_connection_keeps_the_wal_while_another_process_holds_its_index() {
    let _serial = serial();
    register();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let shm = dir.path().join("shared.db-shm");
    let wal = dir.path().join("shared.db-wal");
    let connection = open(&db, "io_uring");
    connection
        .query_row("PRAGMA journal_mode=wal", [], |_| Ok(()))
        .unwrap();
    connection
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();

    // Another process holds the dead-man switch (as a process using the index does) but
    // no lock on the database: its database lock was lost.
    let (ready_read, ready_write) = std::io::pipe().unwrap();
    let (release_read, release_write) = std::io::pipe().unwrap();
    // SAFETY: the child takes a POSIX read lock on the DMS byte, tells the parent, waits
    // for the parent to close its pipe end, and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        drop(ready_read);
        drop(release_write);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&shm);
        let locked = file.as_ref().is_ok_and(|file| {
            // SAFETY: flock is plain old data; F_SETLK reads it.
            let mut lock: libc::flock = unsafe { std::mem::zeroed() };
            lock.l_type = libc::F_RDLCK as i16;
            lock.l_whence = libc::SEEK_SET as i16;
            lock.l_start = SHM_DMS;
            lock.l_len = 1;
            // SAFETY: the descriptor is open; F_SETLK reads the flock.
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) == 0 }
        });
        let mut ready_write = ready_write;
        let _ = std::io::Write::write_all(&mut ready_write, &[locked as u8]);
        let mut byte = [0u8; 1];
        let _ = std::io::Read::read(&mut { release_read }, &mut byte);
        // SAFETY: ends the child.
        unsafe { libc::_exit(0) };
    }
    drop(ready_write);
    drop(release_read);
    let mut locked = [0u8; 1];
    std::io::Read::read_exact(&mut { ready_read }, &mut locked).unwrap();
    assert_eq!(locked[0], 1, "the helper process took its DMS lock");

    drop(connection);
    let kept = wal.exists() && shm.exists();

    drop(release_write);
    wait_for(pid, "the process holding the index");
    assert!(
        kept,
        "the last connection deleted the WAL and its index while another process held it"
    );
    assert_eq!(stock_ok(&db, "SELECT count(*) FROM t;").trim(), "1");

    // With no one else on the index, the last connection cleans up as usual.
    let connection = open(&db, "io_uring");
    assert_eq!(
        connection
            .query_row("SELECT count(*) FROM t", [], |row| row.get::<_, i64>(0))
            .unwrap(),
        1
    );
    drop(connection);
    assert!(
        !wal.exists() && !shm.exists(),
        "the WAL outlived its last user"
    );
}

#[test]
fn a_process_locks_die_with_it_while_a_child_it_forked_lives_on() {
    let _serial = serial();
    register();
    let dir = tempfile::tempdir().unwrap();
    let rollback = dir.path().join("rollback.db");
    let wal = dir.path().join("wal.db");
    let wal_index = dir.path().join("wal.db-shm");
    for (db, journal) in [(&rollback, "delete"), (&wal, "wal")] {
        let setup = open(db, "io_uring");
        setup
            .query_row(&format!("PRAGMA journal_mode={journal}"), [], |_| Ok(()))
            .unwrap();
        setup.execute_batch("CREATE TABLE t(x);").unwrap();
    }
    let (ready_read, ready_write) = std::io::pipe().unwrap();
    let (release_read, release_write) = std::io::pipe().unwrap();
    // SAFETY: the child opens connections, takes locks, forks a worker and kills itself;
    // the worker only tells it is running and waits for the release pipe to close.
    let holder = unsafe { libc::fork() };
    assert!(holder >= 0, "fork failed");
    if holder == 0 {
        let writer = open(&rollback, "io_uring");
        let reader = open(&wal, "io_uring");
        let held = writer.execute_batch("BEGIN IMMEDIATE").is_ok()
            && reader
                .query_row("SELECT count(*) FROM t", [], |_| Ok(()))
                .is_ok();
        // SAFETY: as above; the worker inherits every descriptor and does not exec.
        let worker = unsafe { libc::fork() };
        if worker == 0 {
            drop(release_write);
            let mut ready_write = ready_write;
            let _ = std::io::Write::write_all(&mut ready_write, &[held as u8]);
            drop(ready_write);
            let mut byte = [0u8; 1];
            let _ = std::io::Read::read(&mut { release_read }, &mut byte);
            // SAFETY: ends the worker.
            unsafe { libc::_exit(0) };
        }
        // SAFETY: the holder dies holding its locks, as a crashed process does.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
    drop(ready_write);
    drop(release_read);
    wait_for(holder, "the lock holder");
    let mut held = [0u8; 1];
    std::io::Read::read_exact(&mut { ready_read }, &mut held).unwrap();
    assert_eq!(held[0], 1, "the holder took its locks");

    // The worker still runs, with every descriptor of the holder it inherited.
    let rollback_reserved = lock_seen_by_others(&rollback, RESERVED_BYTE, 1);
    let wal_shared = lock_seen_by_others(&wal, SHARED_FIRST, SHARED_SIZE);
    let wal_dms = lock_seen_by_others(&wal_index, SHM_DMS, 1);
    let writer = stock_run(&rollback, 0, "BEGIN IMMEDIATE; COMMIT;");
    drop(release_write);
    assert_eq!(
        (rollback_reserved, wal_shared, wal_dms),
        (
            libc::F_UNLCK as i16,
            libc::F_UNLCK as i16,
            libc::F_UNLCK as i16
        ),
        "a dead process's locks stayed while its forked worker lived"
    );
    assert!(
        writer.status.success(),
        "another process could not write after the holder died: {}",
        String::from_utf8_lossy(&writer.stderr)
    );
}
