//! The io_uring VFS must behave exactly like SQLite's `unix` VFS: same results, same
//! bytes on disk, same PRAGMA read-backs.

mod common;

use common::{integrity_ok, open, register, rows};
use rusqlite::Connection;
use std::path::Path;

/// A deterministic workload touching every kind of file SQLite opens: main database,
/// rollback journal, statement journals, temp database, transient sort files, ATTACH.
fn workload(conn: &Connection, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    conn.execute_batch(
        "PRAGMA cache_size=20;
         CREATE TABLE t1(a INTEGER PRIMARY KEY, b INTEGER, c TEXT, d BLOB);
         CREATE INDEX t1b ON t1(b);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<3000)
           INSERT INTO t1(b,c,d) SELECT (x*7919)%1000, printf('row %d %s', x, hex(x*x)), zeroblob(x%300) FROM n;
         INSERT INTO t1(b,c,d) VALUES(5, 'big', zeroblob(20000));
         UPDATE t1 SET c = c || '!' WHERE b < 100;
         DELETE FROM t1 WHERE a % 17 = 0;",
    )
    .unwrap();
    for sql in [
        "SELECT count(*), sum(b), total(length(c)), total(length(d)) FROM t1",
        "SELECT b, count(*) FROM t1 GROUP BY b ORDER BY 2 DESC, 1 LIMIT 5",
        "SELECT a, c FROM t1 WHERE c LIKE '%99%' ORDER BY c DESC LIMIT 7",
    ] {
        out.extend(rows(conn, sql));
    }
    // Savepoints and rollback.
    conn.execute_batch(
        "BEGIN;
         SAVEPOINT s1; DELETE FROM t1 WHERE b < 500; ROLLBACK TO s1; RELEASE s1;
         UPDATE t1 SET b = b + 1 WHERE a < 100;
         COMMIT;
         BEGIN; DELETE FROM t1; ROLLBACK;",
    )
    .unwrap();
    out.extend(rows(conn, "SELECT count(*), sum(b) FROM t1"));
    // A statement journal: a multi-row UPDATE that fails half-way inside a transaction.
    conn.execute_batch("CREATE TABLE u(x UNIQUE); INSERT INTO u VALUES(1),(2),(3);")
        .unwrap();
    conn.execute_batch("BEGIN").unwrap();
    assert!(conn.execute("UPDATE u SET x = 3 WHERE x < 3", []).is_err());
    conn.execute_batch("COMMIT").unwrap();
    out.extend(rows(conn, "SELECT group_concat(x) FROM u"));
    // Temp tables and a big sort spill to temporary files.
    conn.execute_batch(
        "PRAGMA temp_store=FILE;
         CREATE TEMP TABLE scratch AS SELECT * FROM t1;
         INSERT INTO scratch SELECT * FROM t1 WHERE a > 0 AND 0;",
    )
    .unwrap();
    out.extend(rows(conn, "SELECT count(*), sum(b) FROM scratch"));
    out.extend(rows(conn, "SELECT c FROM t1 ORDER BY c || d LIMIT 3"));
    // ATTACH uses the connection's VFS.
    let aux = dir.join("aux.db");
    conn.execute("ATTACH ?1 AS aux", [aux.to_str().unwrap()])
        .unwrap();
    conn.execute_batch("CREATE TABLE aux.a AS SELECT a, b FROM t1 WHERE b > 900;")
        .unwrap();
    out.extend(rows(conn, "SELECT count(*), sum(b) FROM aux.a"));
    conn.execute_batch("DETACH aux").unwrap();
    conn.execute_batch("DROP TABLE u; VACUUM;").unwrap();
    out.extend(rows(conn, "PRAGMA page_count"));
    integrity_ok(conn);
    out
}

#[test]
fn results_and_bytes_match_unix() {
    register();
    let unix_dir = tempfile::tempdir().unwrap();
    let uring_dir = tempfile::tempdir().unwrap();
    let unix_out = {
        let conn = open(&unix_dir.path().join("p.db"), "unix");
        workload(&conn, unix_dir.path())
    };
    let uring_out = {
        let conn = open(&uring_dir.path().join("p.db"), "io_uring");
        workload(&conn, uring_dir.path())
    };
    assert_eq!(unix_out, uring_out);
    for name in ["p.db", "aux.db"] {
        let a = std::fs::read(unix_dir.path().join(name)).unwrap();
        let b = std::fs::read(uring_dir.path().join(name)).unwrap();
        assert!(
            a == b,
            "{name}: files differ between unix and io_uring ({} vs {} bytes)",
            a.len(),
            b.len()
        );
    }
    // No stray journal or temp files left behind by either VFS.
    let list = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(list(unix_dir.path()), list(uring_dir.path()));
}

#[test]
fn temp_files_go_through_the_vfs() {
    register();
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir.path().join("t.db"), "io_uring");
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    let before = sqlite_uring::vfs_stats("io_uring").unwrap();
    conn.execute_batch(
        "PRAGMA temp_store=FILE; PRAGMA cache_size=10;
         CREATE TEMP TABLE big AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<20000)
           SELECT x, printf('%0200d', x) AS pad FROM n;",
    )
    .unwrap();
    let after = sqlite_uring::vfs_stats("io_uring").unwrap();
    // 20000 rows × ~200 bytes cannot stay in a 10-page cache: the temp database spills.
    assert!(
        after.bytes_written - before.bytes_written > 1_000_000,
        "temp database did not use the VFS: {before:?} → {after:?}"
    );
    assert_eq!(rows(&conn, "SELECT count(*) FROM big"), vec!["20000"]);
    // The temp file was unlinked at open: nothing named etilqs_* may remain anywhere we look.
    drop(conn);
}

/// Every PRAGMA reads back the same value under io_uring as under unix (a VFS that
/// answers OK to unknown file controls makes SQLite silently ignore them).
#[test]
fn pragmas_read_back_like_unix() {
    register();
    let script = [
        "PRAGMA journal_mode",
        "PRAGMA journal_mode=TRUNCATE",
        "PRAGMA journal_mode=PERSIST",
        "PRAGMA journal_mode=MEMORY",
        "PRAGMA journal_mode=OFF",
        "PRAGMA journal_mode=WAL",
        "PRAGMA journal_mode",
        "PRAGMA journal_mode=DELETE",
        "PRAGMA synchronous",
        "PRAGMA synchronous=NORMAL",
        "PRAGMA synchronous",
        "PRAGMA page_size",
        "PRAGMA cache_size=-4000",
        "PRAGMA cache_size",
        "PRAGMA mmap_size",
        "PRAGMA mmap_size=268435456",
        "PRAGMA mmap_size",
        "PRAGMA mmap_size=0",
        "PRAGMA locking_mode",
        "PRAGMA locking_mode=EXCLUSIVE",
        "PRAGMA locking_mode=NORMAL",
        "PRAGMA journal_size_limit=65536",
        "PRAGMA journal_size_limit",
        "PRAGMA wal_autocheckpoint=123",
        "PRAGMA wal_autocheckpoint",
        "PRAGMA auto_vacuum",
        "PRAGMA user_version=7",
        "PRAGMA user_version",
        "PRAGMA application_id=42",
        "PRAGMA application_id",
        "PRAGMA secure_delete=ON",
        "PRAGMA secure_delete",
        "PRAGMA temp_store=FILE",
        "PRAGMA temp_store",
        "PRAGMA cell_size_check=ON",
        "PRAGMA cell_size_check",
        "PRAGMA page_count",
        "PRAGMA freelist_count",
        "PRAGMA integrity_check",
    ];
    let run = |vfs: &str| {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("p.db"), vfs);
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
            .unwrap();
        script
            .iter()
            .map(|sql| format!("{sql} -> {:?}", rows(&conn, sql)))
            .collect::<Vec<_>>()
    };
    let unix = run("unix");
    let uring = run("io_uring");
    assert_eq!(unix, uring);
    // And the VFS answers its own pragma with JSON counters.
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir.path().join("s.db"), "io_uring");
    let stats = rows(&conn, "PRAGMA io_uring_stats");
    assert!(stats[0].starts_with("{\"vfs\":\"io_uring\""), "{stats:?}");
    assert_eq!(rows(&conn, "PRAGMA io_uring_stats=reset"), vec!["reset"]);
}

#[test]
fn device_characteristics_and_sector_size_match_unix() {
    // A VFS of its own: the counters are per VFS and other tests run concurrently.
    let name = "io_uring_sync_count";
    sqlite_uring::register(sqlite_uring::Options {
        vfs_name: name.into(),
        ..Default::default()
    })
    .unwrap();
    // SQLite exposes neither directly; journal behaviour depends on them. A VFS claiming
    // SAFE_APPEND or SEQUENTIAL lets SQLite skip journal syncs, so count them.
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir.path().join("d.db"), name);
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    let before = sqlite_uring::vfs_stats(name).unwrap();
    conn.execute_batch("BEGIN; INSERT INTO t VALUES(2); UPDATE t SET x = x + 1; COMMIT;")
        .unwrap();
    let after = sqlite_uring::vfs_stats(name).unwrap();
    // Rollback commit with synchronous=FULL, as os_unix.c on Linux: journal, journal header,
    // database; plus the directory sync after the journal is created.
    assert_eq!(
        after.sync_calls - before.sync_calls,
        3,
        "xSync calls of one DELETE-mode commit"
    );
    assert_eq!(
        after.fsyncs - before.fsyncs,
        4,
        "fsyncs (3 files + 1 directory) of one commit"
    );
}
