//! Pages SQLite writes before a commit — when its page cache overflows (a spill) or
//! when `sqlite3_db_cacheflush()` asks — compared with `unix`:
//! * after `sqlite3_db_cacheflush()`, a copy of the files has the pages `unix` wrote at
//!   the next VFS call (or at once with `uring_write_behind=off`), in rollback and WAL
//!   mode;
//! * while a transaction that spilled is open, a second process checkpointing and
//!   reading sees exactly what it sees under `unix` (only committed frames).
//!
//! SQLite's PRNG is seeded before each run, so WAL salts and journal nonces are the
//! same under both VFSes; the tests take turns, since the PRNG is process-wide.

mod common;

use std::path::Path;

use common::{process_state_lock, Mode};
use rusqlite::{ffi, Connection};

fn seed_prng() {
    // SAFETY: SQLITE_TESTCTRL_PRNG_SEED takes an int and a (null) sqlite3 pointer.
    unsafe {
        ffi::sqlite3_test_control(
            ffi::SQLITE_TESTCTRL_PRNG_SEED,
            11 as std::ffi::c_int,
            std::ptr::null_mut::<ffi::sqlite3>(),
        )
    };
}

/// Every file in `dir`, by name, with its bytes, read without going through SQLite.
fn copy_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn describe_difference(a: &[(String, Vec<u8>)], b: &[(String, Vec<u8>)]) -> String {
    let sizes = |files: &[(String, Vec<u8>)]| {
        files
            .iter()
            .map(|(name, bytes)| format!("{name}: {} bytes", bytes.len()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("unix [{}] vs io_uring [{}]", sizes(a), sizes(b))
}

fn open_in(dir: &Path, vfs: &str, mode: Mode) -> Connection {
    seed_prng();
    let conn = common::open(&dir.join("f.db"), vfs);
    let reported: String = conn
        .query_row(&format!("PRAGMA journal_mode={}", mode.pragma()), [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(reported, mode.pragma());
    conn.execute_batch(
        "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<100)
           INSERT INTO t(b) SELECT printf('%0300d', x) FROM n;",
    )
    .unwrap();
    conn
}

/// The files (read without going through SQLite) right before
/// `sqlite3_db_cacheflush()` in an open transaction, right after it, and after a
/// following `PRAGMA data_version` (whose SQLITE_FCNTL_PRAGMA is a VFS call, hence a
/// write-behind flush point).
fn files_around_cache_flush(vfs: &str, uri: &str, mode: Mode) -> [Vec<(String, Vec<u8>)>; 3] {
    let dir = tempfile::tempdir().unwrap();
    seed_prng();
    let name = format!("file:{}{uri}", dir.path().join("f.db").display());
    let conn = common::open(Path::new(&name), vfs);
    let reported: String = conn
        .query_row(&format!("PRAGMA journal_mode={}", mode.pragma()), [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(reported, mode.pragma());
    conn.execute_batch(
        "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<100)
           INSERT INTO t(b) SELECT printf('%0300d', x) FROM n;
         BEGIN;
         UPDATE t SET b = upper(b) || 'x' WHERE a % 3 = 0;
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<40)
           INSERT INTO t(b) SELECT printf('%0300d', x + 5000) FROM n;",
    )
    .unwrap();
    let before = copy_files(dir.path());
    conn.cache_flush().unwrap();
    let after = copy_files(dir.path());
    let _: i64 = conn
        .query_row("PRAGMA data_version", [], |r| r.get(0))
        .unwrap();
    let after_next_call = copy_files(dir.path());
    conn.execute_batch("COMMIT").unwrap();
    common::integrity_ok(&conn);
    [before, after, after_next_call]
}

/// `sqlite3_db_cacheflush()` makes no VFS call of its own: SQLite writes each dirty page
/// as it writes a spilled one (pager.c `sqlite3PagerFlush` → `pagerStress`: `xWrite`s,
/// preceded in rollback mode by the journal's sync and a lock change). So by default the
/// pages are queued like any spilled page, and reach the file at the connection's next
/// VFS call on the database (here a PRAGMA's file control); with `uring_write_behind=off` they are in the file
/// when the call returns, as under `unix` (docs/ARCHITECTURE.md, "Pages written before a
/// commit").
fn cache_flush_against_unix(mode: Mode) {
    let _serial = process_state_lock();
    common::register();
    let [unix_before, unix_after, unix_next] = files_around_cache_flush("unix", "", mode);
    assert!(
        unix_before != unix_after,
        "{mode:?}: sqlite3_db_cacheflush wrote nothing under unix; the test proves nothing"
    );
    assert!(
        unix_after == unix_next,
        "{mode:?}: the PRAGMA wrote under unix"
    );
    let [ours_before, ours_after, ours_next] = files_around_cache_flush(common::VFS, "", mode);
    assert!(
        unix_before == ours_before,
        "{mode:?}: files differ before the flush: {}",
        describe_difference(&unix_before, &ours_before)
    );
    // The documented difference: the last pages SQLite wrote are still queued (the
    // -shm, a mapping, and pages a flush point in between wrote are already there).
    assert!(
        ours_after != unix_after,
        "{mode:?}: the last pages were expected to stay queued until the next VFS call \
         (docs/ARCHITECTURE.md); if they now reach the file at once, update the docs"
    );
    assert!(
        unix_after == ours_next,
        "{mode:?}: files differ after the next VFS call: {}",
        describe_difference(&unix_after, &ours_next)
    );
    let [_, through_after, _] =
        files_around_cache_flush(common::VFS, "?uring_write_behind=off", mode);
    assert!(
        unix_after == through_after,
        "{mode:?}: with uring_write_behind=off, files differ right after \
         sqlite3_db_cacheflush: {}",
        describe_difference(&unix_after, &through_after)
    );
}

#[test]
fn cache_flush_pages_reach_the_files_like_unix_at_the_next_call_or_at_once_without_write_behind_rollback(
) {
    cache_flush_against_unix(Mode::Rollback);
}

#[test]
fn cache_flush_pages_reach_the_files_like_unix_at_the_next_call_or_at_once_without_write_behind_wal(
) {
    cache_flush_against_unix(Mode::Wal);
}

/// What a stock `sqlite3` process (its own `unix` VFS) reports and leaves while `vfs`'s
/// connection holds a transaction whose pages overflowed a 10-page cache, and after it
/// commits: checkpoint result, rows, and the database file's bytes.
fn second_process_view(vfs: &str) -> (Vec<String>, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("f.db");
    let conn = open_in(dir.path(), vfs, Mode::Wal);
    let wal = dir.path().join("f.db-wal");
    let committed_wal_bytes = std::fs::metadata(&wal).unwrap().len();
    conn.execute_batch(
        "PRAGMA cache_size=10;
         PRAGMA synchronous=NORMAL; -- no sync at commit: only the commit frame flushes
         BEGIN;
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<1500)
           INSERT INTO t(b) SELECT printf('%0300d', x + 9000) FROM n;",
    )
    .unwrap();
    if vfs == "unix" {
        assert!(
            std::fs::metadata(&wal).unwrap().len() > committed_wal_bytes,
            "unix wrote no uncommitted frame; the test proves nothing"
        );
    }
    let sql = "PRAGMA wal_checkpoint;
               SELECT count(*), sum(length(b)), max(a) FROM t;
               PRAGMA integrity_check;";
    let mut seen = vec![common::stock_ok(&db, sql)];
    let mut db_bytes = vec![std::fs::read(&db).unwrap()];
    conn.execute_batch("COMMIT").unwrap();
    seen.push(common::stock_ok(&db, sql));
    db_bytes.push(std::fs::read(&db).unwrap());
    drop(conn);
    seen.push(common::stock_ok(&db, sql));
    db_bytes.push(std::fs::read(&db).unwrap());
    (seen, db_bytes)
}

#[test]
fn a_second_process_checkpointing_meanwhile_sees_what_it_sees_under_unix() {
    let _serial = process_state_lock();
    common::register();
    let (unix_seen, unix_bytes) = second_process_view("unix");
    let (ours_seen, ours_bytes) = second_process_view(common::VFS);
    assert!(
        unix_seen[0].contains("\n100|30000|100\n"),
        "under unix the reader saw: {unix_seen:?}"
    );
    assert_eq!(ours_seen, unix_seen, "what the stock shell reported");
    for (step, (unix, ours)) in unix_bytes.iter().zip(&ours_bytes).enumerate() {
        assert!(unix == ours, "database bytes differ at step {step}");
    }
}

/// Frames a spilling transaction has queued are that connection's until it publishes
/// them: another connection of the process reading meanwhile neither writes them for it
/// (a reader thread would otherwise pay for, and wait on, the writer's writes) nor sees
/// them; the writer's own next call writes them, and its commit publishes them.
#[test]
fn another_connections_reads_leave_a_spilling_transactions_frames_queued() {
    common::register();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("spill.db");
    let wal_bytes = || std::fs::metadata(dir.path().join("spill.db-wal")).map_or(0, |m| m.len());
    let writer = common::open(&db, common::VFS);
    writer
        .execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    let reader = common::open(&db, common::VFS);
    let count = |conn: &Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&reader), 1);
    writer
        .execute_batch(
            "PRAGMA cache_size=10; BEGIN;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<200)
             INSERT INTO t SELECT randomblob(3000) FROM n;",
        )
        .unwrap();
    let before_read = wal_bytes();
    assert_eq!(count(&reader), 1, "the reader saw uncommitted rows");
    assert_eq!(
        wal_bytes(),
        before_read,
        "another connection's read wrote the writer's queued frames"
    );
    // The writer's own next call writes them: there were some.
    let _: i64 = writer
        .query_row("PRAGMA data_version", [], |r| r.get(0))
        .unwrap();
    assert!(
        wal_bytes() > before_read,
        "nothing was queued; the test proves nothing"
    );
    writer.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&reader), 201);
    common::integrity_ok(&reader);
}
