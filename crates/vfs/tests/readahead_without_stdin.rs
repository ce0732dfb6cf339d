//! Read-ahead's own descriptor of a database, opened while descriptor 0 is free, keeps the
//! POSIX locks a `unix` connection of the same process holds on the file.
//!
//! The reopen lands in the lowest free slot; a descriptor there is moved above stdio, and
//! the one in the slot must then be closed the way any descriptor of a database is: a
//! plain close drops every POSIX lock this process holds on the file.
//!
//! This file holds a single test on purpose: it closes the process's descriptor 0 for a
//! while, and integration-test files are separate processes, so no other test can be
//! handed it meanwhile.

mod common;

use std::os::fd::AsRawFd;
use std::path::Path;

use common::{file_counter, register, rows};
use rusqlite::{Connection, OpenFlags};

/// Opens `path` through `vfs` with a page cache far smaller than the database, so a scan
/// reads its pages through the VFS.
fn open(path: &Path, vfs: &str) -> Connection {
    register();
    let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)
        .unwrap_or_else(|e| panic!("open {} with {vfs}: {e}", path.display()));
    conn.execute_batch("PRAGMA cache_size=-256").unwrap();
    conn
}

/// A rowid table filled in random key order, so its leaves are scattered in the file.
fn build(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("CREATE TABLE r(id INTEGER PRIMARY KEY, v TEXT);")
        .unwrap();
    common::fill_random_rowid_table(&conn);
}

/// Writes back and evicts every page of `path` from the page cache.
fn evict(path: &Path) {
    let file = std::fs::File::open(path).unwrap();
    file.sync_all().unwrap();
    // SAFETY: posix_fadvise takes no pointers; the descriptor is open.
    let errno = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(errno, 0, "evicting {}", path.display());
}

/// Evicts every page of `path` from the page cache without opening it in this process
/// (GNU `dd`'s `nocache` flag: `POSIX_FADV_DONTNEED` on the whole file).
fn evict_from_another_process(path: &Path) {
    let status = std::process::Command::new("dd")
        .arg(format!("if={}", path.display()))
        .args(["iflag=nocache", "count=0", "status=none"])
        .status()
        .expect("dd (coreutils) runs");
    assert!(status.success(), "dd iflag=nocache on {}", path.display());
}

#[test]
fn readahead_opening_its_descriptor_where_stdin_was_keeps_a_unix_connections_lock() {
    // On a file system whose pages can be evicted: tmpfs keeps them.
    let dir = tempfile::Builder::new()
        .prefix("readahead-")
        .tempdir_in("/var/tmp")
        .expect("a temporary directory in /var/tmp");
    let path = dir.path().join("stdin.db");
    build(&path);
    // Evicting opens and closes the file, which would drop the lock below: first.
    evict(&path);
    let holder = open(&path, "unix");
    holder
        .execute_batch("BEGIN; SELECT count(*) FROM sqlite_schema;")
        .unwrap();
    let scanner = open(&path, "io_uring");
    // Whatever the scanner opens at its first read is opened now, with stdin in place.
    rows(&scanner, "SELECT count(*) FROM sqlite_schema");
    // SAFETY: copies descriptor 0 above stdio, then closes it; restored below.
    let saved_stdin = unsafe {
        let saved = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 10);
        assert!(saved >= 10);
        libc::close(0);
        saved
    };
    // A scan wakes read-ahead when one of its sampled reads reaches the device; should the
    // kernel's own read-around have cached every page sampled, the file is evicted again
    // (by another process: a descriptor of ours closed would drop the holder's lock).
    let mut scanned = Vec::new();
    let mut prefetched = 0;
    for _ in 0..3 {
        scanned = rows(&scanner, "SELECT count(*), sum(length(v)) FROM r");
        prefetched = file_counter(&scanner, "prefetched_pages");
        if prefetched > 0 {
            break;
        }
        evict_from_another_process(&path);
    }
    let writer = common::stock_run(&path, 0, "BEGIN EXCLUSIVE; COMMIT;");
    holder.execute_batch("COMMIT").unwrap();
    // Closing the scanner's descriptors closes any it kept open for the lock's sake.
    drop(scanner);
    // SAFETY: puts the saved descriptor back in slot 0 and closes the copy.
    unsafe {
        libc::dup2(saved_stdin, 0);
        libc::close(saved_stdin);
    }
    assert_eq!(scanned.len(), 1);
    assert!(prefetched > 0, "read-ahead opened no descriptor");
    common::assert_unix_shared_lock_held(&writer);
    common::expect_stock_writer_gets_in(&path);
}
