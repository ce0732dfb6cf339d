//! O_DIRECT WAL (`uring_wal_direct=on`): a synced WAL commit is written as whole blocks
//! through an O_DIRECT descriptor, and every file is still `unix`'s:
//! * the WAL holds `unix`'s bytes (and at most one block of zeros after the last frame),
//!   commit after commit, with commits of 1 to 200 frames, spills that rewrite frames in
//!   place, checkpoints that restart or truncate the WAL, and the database file is
//!   `unix`'s;
//! * with `synchronous=NORMAL` nothing goes direct (a commit is a page-cache copy under
//!   `unix`, far cheaper than a device write), and the WAL is byte-identical;
//! * commits of another process (the stock `sqlite3` shell) and of another connection of
//!   this process between ours land intact: a block this connection wrote last is reused
//!   only while it provably still holds the file's bytes.
//!
//! SQLite's PRNG is seeded before each run, so WAL salts are the same under both VFSes;
//! the tests take turns, since the PRNG is process-wide.

mod common;

use std::path::Path;

use common::process_state_lock;
use rusqlite::{ffi, Connection};

fn seed_prng() {
    common::seed_prng(23);
}

fn wal_direct_writes() -> u64 {
    sqlite_uring::vfs_stats(common::VFS)
        .expect("the VFS is registered")
        .wal_direct_writes
}

/// Opens `db` with `vfs` (and `uri` parameters) in WAL mode with `synchronous`.
fn open_wal(db: &Path, vfs: &str, uri: &str, synchronous: &str) -> Connection {
    let name = format!("file:{}{uri}", db.display());
    let conn = common::open(Path::new(&name), vfs);
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={synchronous};
         PRAGMA wal_autocheckpoint=0;"
    ))
    .unwrap();
    conn
}

/// Commits of 1, 3, 17, 60 and 200 frames, spills that rewrite frames in place, a
/// restarting checkpoint and a truncating one: after each step, the WAL's and the
/// database's bytes.
fn wal_steps(vfs: &str, uri: &str, synchronous: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    seed_prng();
    let conn = open_wal(&db, vfs, uri, synchronous);
    let snapshot = || {
        (
            std::fs::read(dir.path().join("w.db-wal")).unwrap_or_default(),
            std::fs::read(&db).unwrap(),
        )
    };
    conn.execute_batch("CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB);")
        .unwrap();
    let mut steps = vec![snapshot()];
    let insert = |rows: i64, fill: i64| {
        conn.execute(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<?1)
               INSERT INTO t(b) SELECT zeroblob(?2) || randomblob(16) FROM n",
            [rows, fill],
        )
        .unwrap();
    };
    for (rows, fill) in [(1, 100), (2, 3000), (16, 3900), (60, 3900), (200, 3900)] {
        insert(rows, fill);
        steps.push(snapshot());
    }
    // A transaction that overflows a 10-page cache: spilled frames, then the commit
    // rewrites some of them in place.
    conn.execute_batch(
        "PRAGMA cache_size=10; BEGIN;
         UPDATE t SET b = randomblob(3900) WHERE a % 5 = 0;
         UPDATE t SET b = randomblob(3000) WHERE a % 10 = 0;
         COMMIT; PRAGMA cache_size=2000;",
    )
    .unwrap();
    steps.push(snapshot());
    conn.execute_batch("PRAGMA wal_checkpoint(RESTART);")
        .unwrap();
    insert(3, 3900);
    steps.push(snapshot());
    insert(30, 3900);
    steps.push(snapshot());
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    insert(5, 3900);
    steps.push(snapshot());
    common::integrity_ok(&conn);
    drop(conn);
    steps.push(snapshot());
    steps
}

/// The end of the WAL's last commit frame of the current generation (frames whose salts
/// are the header's), 0 for an empty WAL.
fn committed_end(wal: &[u8]) -> usize {
    if wal.len() < 32 {
        return 0;
    }
    let page = u32::from_be_bytes(wal[8..12].try_into().unwrap()) as usize;
    let page = if page == 1 { 65536 } else { page };
    let (salts, mut at, mut end) = (&wal[16..24], 32, 32);
    while at + 24 + page <= wal.len() && &wal[at + 8..at + 16] == salts {
        if wal[at + 4..at + 8] != [0, 0, 0, 0] {
            end = at + 24 + page;
        }
        at += 24 + page;
    }
    end
}

/// `ours` holds `unix`'s WAL: the same bytes up to the last commit frame; past it, where
/// `unix`'s file holds stale frames no reader reads or ends, `unix`'s bytes or the zeros
/// a direct write filled the rest of its last block with (at most a block past
/// `unix`'s end).
fn same_wal(unix: &[u8], ours: &[u8]) -> Result<(), String> {
    let committed = committed_end(unix);
    if committed_end(ours) != committed {
        return Err(format!(
            "committed frames end at {} against unix's {committed}",
            committed_end(ours)
        ));
    }
    if ours.len() < unix.len() || ours.len() >= unix.len() + 4096 {
        return Err(format!(
            "{} bytes against unix's {}",
            ours.len(),
            unix.len()
        ));
    }
    for (at, &byte) in ours.iter().enumerate() {
        let expected = unix.get(at).copied();
        let zero_filled = at >= committed && byte == 0;
        if Some(byte) != expected && !zero_filled {
            return Err(format!(
                "bytes differ from offset {at} (committed end {committed})"
            ));
        }
    }
    Ok(())
}

#[test]
fn synced_commits_go_o_direct_and_leave_unix_files() {
    let _serial = process_state_lock();
    common::register();
    let unix = wal_steps("unix", "", "FULL");
    let before = wal_direct_writes();
    let ours = wal_steps(common::VFS, "?uring_wal_direct=on", "FULL");
    let direct_writes = wal_direct_writes() - before;
    assert!(
        direct_writes >= 5,
        "only {direct_writes} O_DIRECT WAL writes: the commits were not written direct"
    );
    assert_eq!(unix.len(), ours.len());
    for (step, ((unix_wal, unix_db), (ours_wal, ours_db))) in unix.iter().zip(&ours).enumerate() {
        if let Err(why) = same_wal(unix_wal, ours_wal) {
            panic!("step {step}: the WAL differs from unix's: {why}");
        }
        assert!(unix_db == ours_db, "step {step}: the database differs");
    }
}

#[test]
fn unsynced_commits_stay_buffered_and_byte_identical() {
    let _serial = process_state_lock();
    common::register();
    let unix = wal_steps("unix", "", "NORMAL");
    let before = wal_direct_writes();
    let ours = wal_steps(common::VFS, "?uring_wal_direct=on", "NORMAL");
    assert_eq!(
        wal_direct_writes(),
        before,
        "synchronous=NORMAL commits were written O_DIRECT"
    );
    for (step, (u, o)) in unix.iter().zip(&ours).enumerate() {
        assert!(u == o, "step {step}: files differ from unix's");
    }
}

/// Our connection, another connection of this process and a stock `sqlite3` process take
/// turns committing to one WAL: every commit lands, whoever wrote the block before.
#[test]
fn commits_of_other_connections_and_processes_between_ours_land_intact() {
    let _serial = process_state_lock();
    common::register();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    // 1 KiB pages: frames (1048 bytes) smaller than a block, so the others' commits end
    // inside the block this connection wrote last, whose cached copy is then stale.
    common::open(&db, "unix")
        .execute_batch("PRAGMA page_size=1024; VACUUM;")
        .unwrap();
    let ours = open_wal(&db, common::VFS, "?uring_wal_direct=on", "FULL");
    ours.execute_batch("CREATE TABLE t(who TEXT, n INTEGER, b BLOB);")
        .unwrap();
    let other = open_wal(&db, common::VFS, "?uring_wal_direct=on", "FULL");
    let before = wal_direct_writes();
    let mut expected: i64 = 0;
    for round in 0..24i64 {
        let rows = 1 + round % 4;
        ours.execute(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<?1)
               INSERT INTO t SELECT 'ours', ?2, randomblob(100 + 300 * x) FROM n",
            [rows, round],
        )
        .unwrap();
        expected += rows;
        // One small commit by one other writer, or one by each: a frame or two.
        if round % 3 != 1 {
            other
                .execute("INSERT INTO t VALUES('other', ?1, randomblob(60))", [round])
                .unwrap();
            expected += 1;
        }
        if round % 3 != 0 {
            common::stock_ok(
                &db,
                &format!(
                    "PRAGMA synchronous=FULL;
                     INSERT INTO t VALUES('stock', {round}, randomblob(80));"
                ),
            );
            expected += 1;
        }
        let seen: i64 = ours
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(seen, expected, "round {round}: rows seen by our connection");
        let stock = common::stock_ok(&db, "SELECT count(*) FROM t; PRAGMA integrity_check;");
        assert_eq!(
            stock.trim(),
            format!("{expected}\nok"),
            "round {round}: what the stock shell reads"
        );
    }
    assert!(
        wal_direct_writes() > before,
        "no commit was written O_DIRECT: the test proves nothing"
    );
    common::integrity_ok(&ours);
    drop(other);
    drop(ours);
    assert_eq!(
        common::stock_ok(&db, "SELECT count(*) FROM t; PRAGMA integrity_check;").trim(),
        format!("{expected}\nok")
    );
}

/// `uring_wal_direct=on` writes the write-behind queue's flushes: without write-behind
/// the database does not open, and the error says why.
#[test]
fn wal_direct_without_write_behind_is_refused_at_open() {
    common::register();
    let dir = tempfile::tempdir().unwrap();
    let name = format!(
        "file:{}?uring_wal_direct=on&uring_write_behind=off",
        dir.path().join("r.db").display()
    );
    let opened = Connection::open_with_flags_and_vfs(
        &name,
        rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        common::VFS,
    )
    .and_then(|conn| conn.execute_batch("CREATE TABLE t(x)"));
    let error = opened.expect_err("uring_wal_direct=on opened without write-behind");
    assert_eq!(
        common::extended_code(&error),
        ffi::SQLITE_CANTOPEN,
        "{error}"
    );
}
