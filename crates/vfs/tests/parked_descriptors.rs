//! Descriptors parked at a close are taken back by the next open of the same file.
//!
//! A descriptor of a database (or its `-shm`) is parked instead of closed while a `unix`
//! connection of this process holds a POSIX lock on the file, since closing it would drop
//! that lock. A WAL-mode `unix` connection holds SHARED on the database and the WAL
//! index's dead-man switch for its whole life; without reuse, each connection of ours
//! opened and closed meanwhile would leave descriptors parked for good, until opens
//! failed with EMFILE (os_unix.c reuses its own the same way, `findReusableFd`).
//!
//! This file counts the process's open descriptors, so it holds a single test: the
//! tests of one file run as threads of one process, and another test's descriptors would
//! be counted too.

mod common;

use std::os::fd::AsRawFd;
use std::path::Path;

use common::{create_db, file_counter, open, register, rows, stock_ok, Mode};
use rusqlite::Connection;

/// Open descriptors of this process.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Writes back and evicts every page of the file open on `file` from the page cache (its descriptor
/// opened before the `unix` connection's lock, and closed after it, since closing any
/// descriptor of the file drops this process's POSIX locks on it).
fn evict(file: &std::fs::File) {
    // Dirty pages are not dropped: written back first.
    file.sync_all().unwrap();
    // SAFETY: posix_fadvise takes no pointers; the descriptor is open.
    let errno = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(errno, 0);
}

/// Opens `path` through `io_uring`, scans the table, and closes: what the scan read, and
/// the pages read-ahead asked for (through a descriptor of its own).
fn cycle(path: &Path) -> (Vec<String>, u64) {
    let conn = open(path, "io_uring");
    conn.execute_batch("PRAGMA cache_size=-256").unwrap();
    let scanned = rows(&conn, "SELECT count(*), sum(length(v)) FROM r");
    (scanned, file_counter(&conn, "prefetched_pages"))
}

/// A rowid table filled in random key order, so its leaves are scattered in the file and
/// a cold scan wakes read-ahead; checkpointed, so its pages are in the database file.
fn build(path: &Path, mode: Mode) {
    create_db(
        path,
        mode,
        "CREATE TABLE r(id INTEGER PRIMARY KEY, v TEXT);",
    );
    let conn = Connection::open(path).unwrap();
    common::fill_random_rowid_table(&conn);
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
}

#[test]
fn connections_opened_and_closed_beside_a_unix_connection_take_back_the_parked_descriptors() {
    // On a file system whose pages can be evicted: tmpfs keeps them.
    let dir = tempfile::Builder::new()
        .prefix("parked-")
        .tempdir_in("/var/tmp")
        .unwrap();
    register();
    for mode in [Mode::Wal, Mode::Rollback] {
        let path = dir.path().join(format!("{}.db", mode.pragma()));
        build(&path, mode);
        let evictor = std::fs::File::open(&path).unwrap();
        let holder = open(&path, "unix");
        // WAL: SHARED and the dead-man switch for the connection's life; rollback:
        // SHARED while the read transaction lasts.
        holder
            .execute_batch("BEGIN; SELECT count(*) FROM r;")
            .unwrap();
        let expected = cycle(&path).0;
        let before = open_descriptors();
        let mut prefetched_pages = 0;
        for round in 0..60 {
            // Every fourth round cold, so read-ahead opens (and parks) its own descriptor.
            if round % 4 == 0 {
                evict(&evictor);
            }
            let (scanned, prefetched) = cycle(&path);
            assert_eq!(scanned, expected, "{mode:?} round {round}");
            prefetched_pages += prefetched;
        }
        assert!(
            prefetched_pages > 0,
            "{mode:?}: read-ahead opened no descriptor"
        );
        let after = open_descriptors();
        // Slack for what one connection leaves parked.
        assert!(
            after <= before + 4,
            "{mode:?}: {before} descriptors before 60 connections, {after} after"
        );
        // The holder's locks stood throughout.
        match mode {
            Mode::Rollback => {
                // A writer in another process waits for its SHARED.
                let writer = common::stock_run(&path, 0, "BEGIN EXCLUSIVE; COMMIT;");
                assert!(
                    !writer.status.success(),
                    "another process took EXCLUSIVE while a unix connection here held SHARED"
                );
            }
            Mode::Wal => {
                // Another process is not the last connection: it leaves the WAL.
                stock_ok(&path, "SELECT count(*) FROM r;");
                assert!(
                    Path::new(&format!("{}-wal", path.display())).exists(),
                    "another process's close deleted the WAL of a connection open here"
                );
            }
        }
        holder.execute_batch("COMMIT").unwrap();
        drop(holder);
        drop(evictor);
        common::expect_success(
            "stock writer after the unix connection closed",
            &common::stock_run(&path, 1000, "BEGIN EXCLUSIVE; COMMIT;"),
        );
    }
}
