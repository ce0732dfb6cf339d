//! A `unix` connection of this process that asks for its lock while this VFS closes a
//! descriptor of the same database gets the lock, and keeps it.
//!
//! A close decides from a probe of the file's locks, then calls close(2); closing any
//! descriptor of a file drops every POSIX lock the process holds on it. A `unix` lock
//! granted between the two would be dropped, and its connection would read (or write)
//! under a SQLite lock the kernel no longer holds. The test starts a `unix` read
//! transaction exactly there (the `test-support` hook between probe and close), then asks
//! another process whether the lock is held.
//!
//! This file holds a single test on purpose: the hook is process-wide, and the tests of
//! one file run as threads of one process.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{register, rows};
use rusqlite::{Connection, OpenFlags};

#[test]
fn a_unix_lock_asked_for_during_a_close_waits_for_it_and_is_kept() {
    register();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("close.db");
    Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "unix")
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    let ours =
        Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "io_uring").unwrap();
    assert_eq!(rows(&ours, "SELECT count(*) FROM t"), vec!["1".to_string()]);
    // Opened now, locking nothing until its transaction starts.
    let holder = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "unix").unwrap();

    let (start, started) = mpsc::channel::<()>();
    let (locked, lock_granted) = mpsc::channel::<()>();
    let (end, ended) = mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        started.recv().unwrap();
        holder
            .execute_batch("BEGIN; SELECT count(*) FROM t;")
            .unwrap();
        locked.send(()).unwrap();
        ended.recv().unwrap();
        holder.execute_batch("COMMIT").unwrap();
    });

    // In the close: the reader asks for SHARED, and the close waits a while to see
    // whether it is granted before the descriptor goes.
    let (hook_ran, hook_result) = mpsc::channel();
    sqlite_uring::run_between_probe_and_close(Box::new(move || {
        start.send(()).unwrap();
        let granted_before_close = lock_granted
            .recv_timeout(Duration::from_millis(300))
            .is_ok();
        hook_ran.send((granted_before_close, lock_granted)).unwrap();
    }));
    drop(ours);
    let (granted_before_close, lock_granted) = hook_result
        .recv_timeout(Duration::from_secs(10))
        .expect("closing the io_uring connection closed its database descriptor through the hook");
    if !granted_before_close {
        lock_granted
            .recv_timeout(Duration::from_secs(10))
            .expect("the unix reader got its lock once the close was over");
    }
    let writer = common::stock_run(&path, 0, "BEGIN EXCLUSIVE; COMMIT;");
    end.send(()).unwrap();
    reader.join().unwrap();

    assert!(
        !granted_before_close,
        "a unix lock was granted between the close's probe and its close(2)"
    );
    common::assert_unix_shared_lock_held(&writer);
    common::expect_stock_writer_gets_in(&path);
}
