//! With default options the VFS adds no thread to the process.
//!
//! Every fsync submitted through the ring runs on an io-wq worker thread of the calling
//! task, and the first such worker stays until the task exits. A second thread in a
//! single-threaded process is not free: measured on the project's machine it made WAL
//! commits 20–40 % slower (ARCHITECTURE.md, "Threads the ring adds"). So the default
//! routes syncs by syscall, and this test holds it to that: rollback and WAL commits,
//! each with a new journal or WAL whose directory must be synced, leave no `iou-*`
//! thread behind. The control, `uring_syncs=ring`, must leave one: it shows that the
//! check sees the workers when there are some.
//!
//! One test function, on one thread: io-wq workers belong to the task that submitted,
//! and another test's thread could otherwise leave some behind.

mod common;

use common::io_uring_threads;
use rusqlite::{Connection, OpenFlags};
use sqlite_uring::Options;

/// A few commits in `journal_mode` on a fresh database of `vfs`, with URI `parameters`.
fn commit_some(vfs: &str, journal_mode: &str, parameters: &str) {
    let dir = tempfile::tempdir().unwrap();
    let uri = format!(
        "file:{}?{parameters}",
        dir.path().join("threads.db").display()
    );
    let conn = Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), vfs).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode={journal_mode}; PRAGMA synchronous=FULL;
         CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);"
    ))
    .unwrap();
    for k in 0..5 {
        conn.execute("INSERT INTO t(v) VALUES (?1)", [format!("row {k}")])
            .unwrap();
    }
    let count: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 5);
}

#[test]
fn default_routing_leaves_no_io_uring_thread_and_ring_syncs_do() {
    let vfs = "threads_default";
    sqlite_uring::register(Options {
        vfs_name: vfs.into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(io_uring_threads(), Vec::<String>::new(), "before any I/O");

    for journal_mode in ["delete", "wal", "truncate"] {
        commit_some(vfs, journal_mode, "");
        assert_eq!(
            io_uring_threads(),
            Vec::<String>::new(),
            "default routing, journal_mode={journal_mode}"
        );
    }

    // The control: the first sync of a new journal is a pair (the journal and its
    // directory); on the ring both run on io-wq workers.
    commit_some(vfs, "delete", "uring_syncs=ring");
    let threads = io_uring_threads();
    assert!(
        threads.iter().any(|name| name.starts_with("iou-wrk-")),
        "uring_syncs=ring left no io-wq worker: {threads:?}"
    );
}
