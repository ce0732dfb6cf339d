//! The opt-in SQPOLL ring (`uring_sqpoll=on`, `Options::sqpoll`): same results, same bytes
//! and the same syncs as the ordinary ring; only how entries reach the kernel differs.
//! Counts, not timings.

mod common;

use common::{integrity_ok, open, rows};
use rusqlite::{Connection, OpenFlags};
use sqlite_uring::{IoStats, Options, Submission};

/// Everything through the ring, so the SQPOLL ring really carries the reads, writes and
/// syncs (the default routing sends lone reads and writes to syscalls).
fn register_all_ring(vfs: &str, sqpoll: bool) {
    sqlite_uring::register(Options {
        vfs_name: vfs.into(),
        read_submission: Submission::Ring,
        write_submission: Submission::Ring,
        sync_submission: Submission::Ring,
        sqpoll,
        ..Default::default()
    })
    .unwrap();
}

/// Builds and changes a database through `vfs`; returns what it read, the database bytes
/// and the VFS counters of the run.
fn workload(vfs: &str, journal_mode: &str) -> (Vec<String>, Vec<u8>, IoStats) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let before = sqlite_uring::vfs_stats(vfs).unwrap();
    let conn = open(&path, vfs);
    conn.execute_batch(&format!(
        "PRAGMA journal_mode={journal_mode};
         CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<3000)
           INSERT INTO t(v) SELECT printf('%0200d', x) FROM n;"
    ))
    .unwrap();
    for id in (1..=3000).step_by(97) {
        conn.execute(
            "UPDATE t SET v = upper(hex(v)) WHERE id = ?1",
            rusqlite::params![id],
        )
        .unwrap();
    }
    conn.execute_batch("DELETE FROM t WHERE id % 5 = 0; PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let read = rows(&conn, "SELECT count(*), sum(length(v)), max(v) FROM t");
    integrity_ok(&conn);
    drop(conn);
    let after = sqlite_uring::vfs_stats(vfs).unwrap();
    (read, std::fs::read(&path).unwrap(), after.since(&before))
}

#[test]
fn sqpoll_ring_gives_the_same_results_bytes_and_syncs() {
    register_all_ring("sqpoll_on", true);
    register_all_ring("sqpoll_off", false);
    for journal_mode in ["delete", "wal"] {
        let (read_on, bytes_on, stats_on) = workload("sqpoll_on", journal_mode);
        let (read_off, bytes_off, stats_off) = workload("sqpoll_off", journal_mode);
        assert_eq!(read_on, read_off, "{journal_mode}");
        assert!(
            bytes_on == bytes_off,
            "{journal_mode}: database bytes differ"
        );
        assert_eq!(stats_on.sync_calls, stats_off.sync_calls, "{journal_mode}");
        assert_eq!(stats_on.fsyncs, stats_off.fsyncs, "{journal_mode}");
        assert_eq!(
            stats_on.write_calls, stats_off.write_calls,
            "{journal_mode}"
        );
        assert_eq!(
            stats_on.bytes_written, stats_off.bytes_written,
            "{journal_mode}"
        );
        assert!(stats_on.fsyncs > 0, "{journal_mode}: nothing was synced");
    }
}

#[test]
fn uring_sqpoll_uri_parameter_is_reported_and_validated() {
    common::register();
    let dir = tempfile::tempdir().unwrap();
    let open_uri = |query: &str| {
        let uri = format!("file:{}?{query}", dir.path().join("u.db").display());
        Connection::open_with_flags_and_vfs(
            uri,
            OpenFlags::default() | OpenFlags::SQLITE_OPEN_URI,
            "io_uring",
        )
    };
    let conn = open_uri("uring_sqpoll=on&uring_reads=ring&uring_writes=ring").unwrap();
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    let stats = rows(&conn, "PRAGMA io_uring_stats").remove(0);
    assert!(stats.contains(r#""sqpoll":"on""#), "{stats}");
    drop(conn);
    let conn = open_uri("uring_sqpoll=off").unwrap();
    let stats = rows(&conn, "PRAGMA io_uring_stats").remove(0);
    assert!(stats.contains(r#""sqpoll":"off""#), "{stats}");
    drop(conn);
    let error = open_uri("uring_sqpoll=yes").unwrap_err().to_string();
    assert!(error.contains("unable to open"), "{error}");
}
