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
//! The hook is process-wide and the tests of one file run as threads of one process, so
//! the tests here take turns.

mod common;

use std::path::PathBuf;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use common::{register, rows};
use rusqlite::{Connection, OpenFlags};

/// The tests here set the process-wide hook one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A one-row database `name` in a new directory, written through `unix`, and an
/// `io_uring` connection that has read it (so it has the database's descriptor open).
fn read_through_io_uring(name: &str) -> (tempfile::TempDir, PathBuf, Connection) {
    register();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "unix")
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    let ours =
        Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), "io_uring").unwrap();
    assert_eq!(rows(&ours, "SELECT count(*) FROM t"), vec!["1".to_string()]);
    (dir, path, ours)
}

#[test]
fn a_unix_lock_asked_for_during_a_close_waits_for_it_and_is_kept() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, path, ours) = read_through_io_uring("close.db");
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

/// A child forked while a close holds the gate (a thread of the parent closing) finds it
/// open: its `unix` connections take their locks as usual instead of waiting for a close
/// that will never end in the child.
#[test]
fn a_child_forked_during_a_close_finds_the_gate_open() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, path, ours) = read_through_io_uring("fork.db");

    let (forked, child) = mpsc::channel();
    let child_path = path.clone();
    sqlite_uring::run_between_probe_and_close(Box::new(move || {
        // SAFETY: the child runs one `unix` read transaction and leaves with _exit, running
        // no destructor of the parent's state.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let read = std::panic::catch_unwind(|| {
                let conn =
                    Connection::open_with_flags_and_vfs(&child_path, OpenFlags::default(), "unix")
                        .unwrap();
                conn.execute_batch("BEGIN; SELECT count(*) FROM t; COMMIT;")
                    .is_ok()
            });
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(if matches!(read, Ok(true)) { 0 } else { 1 }) };
        }
        forked.send(pid).unwrap();
    }));
    drop(ours);
    let pid = child
        .recv_timeout(Duration::from_secs(10))
        .expect("closing the io_uring connection closed its database descriptor through the hook");
    assert!(pid > 0, "fork failed");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid place for waitpid's answer.
        let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if reaped == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: the child is ours and has not been reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("the child's unix lock request waited at a gate its parent's close held");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's unix read transaction failed (wait status {status})"
    );
}
