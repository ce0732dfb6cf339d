//! A database opened while descriptor 0 is free keeps the POSIX locks a `unix` connection
//! of the same process holds on the file.
//!
//! The open lands in the lowest free slot; the VFS moves the descriptor above stdio, and
//! the one left in the slot must then be closed the way any descriptor of a database is:
//! a plain close (os_unix.c's) drops every POSIX lock this process holds on the file.
//!
//! This file holds a single test on purpose: it closes the process's descriptor 0 for a
//! while, and integration-test files are separate processes, so no other test can be
//! handed it meanwhile.

mod common;

use common::{register, rows};
use rusqlite::{Connection, OpenFlags};

#[test]
fn a_database_opened_where_stdin_was_keeps_a_unix_connections_lock() {
    register();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stdin.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    let holder = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "unix").unwrap();
    holder
        .execute_batch("BEGIN; SELECT count(*) FROM t;")
        .unwrap();
    // SAFETY: copies descriptor 0 above stdio, then closes it; restored below.
    let saved_stdin = unsafe {
        let saved = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 10);
        assert!(saved >= 10);
        libc::close(0);
        saved
    };
    let opened = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "io_uring");
    // SAFETY: fcntl takes no pointers.
    let slot_0_plugged = unsafe { libc::fcntl(0, libc::F_GETFD) } != -1;
    let writer = common::stock_run(&path, 0, "BEGIN EXCLUSIVE; COMMIT;");
    let counted = opened
        .as_ref()
        .map(|conn| rows(conn, "SELECT count(*) FROM t"))
        .map_err(|e| e.to_string());
    holder.execute_batch("COMMIT").unwrap();
    drop(opened);
    // SAFETY: puts the saved descriptor back in slot 0 and closes the copy (whatever
    // holds slot 0 now, the VFS's /dev/null or a parked descriptor, is replaced; a parked
    // one was kept for the lock alone, which is gone).
    unsafe {
        libc::dup2(saved_stdin, 0);
        libc::close(saved_stdin);
    }
    assert_eq!(
        counted.expect("open through io_uring"),
        vec!["1".to_string()]
    );
    assert!(slot_0_plugged, "slot 0 left free for the next open");
    common::assert_unix_shared_lock_held(&writer);
    common::expect_stock_writer_gets_in(&path);
}
