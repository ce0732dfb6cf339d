//! `SQLITE_TESTCTRL_PENDING_BYTE` moves the bytes SQLite's file locks use (SQLite's own
//! test suite moves them to 0x10000); this VFS locks where the running SQLite says, so a
//! `unix` connection and an `io_uring` one still exclude each other. Moving the byte is
//! process-wide (and must happen before any database is opened), so this binary holds
//! this one test.

mod common;

use std::ffi::c_uint;

use common::{extended_code, open, register};
use rusqlite::ffi;

const MOVED_PENDING_BYTE: c_uint = 0x10000;

fn count(conn: &rusqlite::Connection) -> Result<i64, i32> {
    conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .map_err(|e| extended_code(&e))
}

#[test]
fn locks_follow_a_moved_pending_byte() {
    // SAFETY: SQLITE_TESTCTRL_PENDING_BYTE takes one unsigned int; no database is open.
    let old =
        unsafe { ffi::sqlite3_test_control(ffi::SQLITE_TESTCTRL_PENDING_BYTE, MOVED_PENDING_BYTE) };
    assert_eq!(old, 0x4000_0000);
    register();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("test.db");
    open(&path, "unix")
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
        .unwrap();

    // A unix writer holding EXCLUSIVE keeps an io_uring reader out...
    let unix = open(&path, "unix");
    let ours = open(&path, "io_uring");
    for conn in [&unix, &ours] {
        conn.busy_timeout(std::time::Duration::ZERO).unwrap();
    }
    unix.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES (3);")
        .unwrap();
    assert_eq!(count(&ours), Err(ffi::SQLITE_BUSY));
    unix.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&ours), Ok(3));

    // ...and an io_uring writer keeps a unix reader out.
    ours.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES (4);")
        .unwrap();
    assert_eq!(count(&unix), Err(ffi::SQLITE_BUSY));
    ours.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&unix), Ok(4));
}
