//! Write-behind must actually batch: kernel entries per commit drop, the number of
//! fsyncs does not. Counts, not timings.

mod common;

use common::{open, rows};
use rusqlite::{Connection, OpenFlags};
use sqlite_uring::{IoStats, Options};

/// Kernel entries and fsyncs of one multi-page commit on a VFS of its own.
fn one_commit(vfs: &str, journal_mode: &str, write_behind: &str) -> IoStats {
    sqlite_uring::register(Options {
        vfs_name: vfs.into(),
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let uri = format!(
        "file:{}?uring_write_behind={write_behind}",
        dir.path().join("b.db").display()
    );
    let conn = Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), vfs).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode={journal_mode}; PRAGMA synchronous=FULL;
         CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<2000)
           INSERT INTO t(v) SELECT printf('%0100d', x) FROM n;"
    ))
    .unwrap();
    let before = sqlite_uring::vfs_stats(vfs).unwrap();
    // Touches ~50 pages scattered over the table: a multi-page commit.
    conn.execute_batch("UPDATE t SET v = v || 'u' WHERE k % 40 = 0")
        .unwrap();
    let after = sqlite_uring::vfs_stats(vfs).unwrap();
    assert_eq!(rows(&conn, "PRAGMA integrity_check"), vec!["ok"]);
    after.since(&before)
}

#[test]
fn write_behind_cuts_kernel_entries_not_syncs() {
    for journal_mode in ["delete", "wal"] {
        let through = one_commit(&format!("batch_off_{journal_mode}"), journal_mode, "off");
        let behind = one_commit(&format!("batch_on_{journal_mode}"), journal_mode, "on");
        // Same SQLite-level calls and the same durability work…
        assert_eq!(through.write_calls, behind.write_calls, "{journal_mode}");
        assert_eq!(through.sync_calls, behind.sync_calls, "{journal_mode}");
        assert_eq!(
            through.fsyncs, behind.fsyncs,
            "{journal_mode}: write-behind must not change the fsyncs"
        );
        // …in at most a third of the kernel entries.
        assert!(
            behind.kernel_entries * 3 <= through.kernel_entries,
            "{journal_mode}: {} kernel entries with write-behind vs {} without",
            behind.kernel_entries,
            through.kernel_entries
        );
    }
}

#[test]
fn unix_compatible_files_with_write_behind() {
    // A second process (the stock sqlite3 CLI) reading right after our commit must see it:
    // the commit's writes reached the kernel before xUnlock / the WAL-index publication.
    common::register();
    for journal_mode in ["delete", "wal"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let conn = open(&db, "io_uring");
        conn.execute_batch(&format!(
            "PRAGMA journal_mode={journal_mode}; CREATE TABLE t(x);"
        ))
        .unwrap();
        for i in 0..20 {
            conn.execute("INSERT INTO t VALUES(?1)", [i]).unwrap();
            let output = std::process::Command::new("sqlite3")
                .arg(&db)
                .arg("SELECT count(*) FROM t")
                .output()
                .expect("Debian's sqlite3 CLI is required");
            assert_eq!(
                String::from_utf8_lossy(&output.stdout).trim(),
                (i + 1).to_string(),
                "{journal_mode}"
            );
        }
    }
}

/// The main database file's `read_calls` in `PRAGMA io_uring_stats`.
fn file_read_calls(conn: &Connection) -> u64 {
    let text: String = conn
        .query_row("PRAGMA io_uring_stats", [], |row| row.get(0))
        .unwrap();
    text.split("\"file\":{\"read_calls\":")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no file read_calls in {text}"))
}

/// Every read is in its VFS's totals once its call has returned: the totals hold every
/// read the database file counted (in rollback mode exactly those: a SELECT reads no
/// other file; in WAL mode the WAL is empty, checkpointed, and its header may be read
/// too).
#[test]
fn reads_are_in_the_vfs_totals_once_their_call_returns() {
    for journal_mode in ["delete", "wal"] {
        let vfs = format!("io_uring_read_totals_{journal_mode}");
        sqlite_uring::register(Options {
            vfs_name: vfs.clone(),
            ..Default::default()
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let conn = Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), &*vfs).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA journal_mode={journal_mode}; PRAGMA cache_size=2;
             CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);
             WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<3000)
               INSERT INTO t(v) SELECT printf('%0200d', x) FROM n;
             PRAGMA wal_checkpoint(TRUNCATE);"
        ))
        .unwrap();
        let file_before = file_read_calls(&conn);
        let before = sqlite_uring::vfs_stats(&vfs).unwrap();
        // Many reads (a 2-page cache: every page of the scan is read), then a few.
        for query in [
            "SELECT sum(length(v)) FROM t",
            "SELECT v FROM t WHERE k = 7",
        ] {
            conn.query_row(query, [], |_| Ok(())).unwrap();
        }
        let totals = sqlite_uring::vfs_stats(&vfs).unwrap().since(&before);
        let file = file_read_calls(&conn) - file_before;
        assert!(file > 65, "{journal_mode}: {file} reads");
        if journal_mode == "delete" {
            assert_eq!(totals.read_calls, file, "{journal_mode}");
        } else {
            assert!(
                totals.read_calls >= file,
                "{journal_mode}: {totals:?}, file {file}"
            );
        }
        assert!(totals.bytes_read >= file * 16);
        assert_eq!(totals.kernel_entries, totals.ops);
    }
}

/// A WAL file takes no lock and is not the file `PRAGMA io_uring_stats` is asked on: its
/// reads are in the VFS's totals as soon as they return all the same, the connection
/// still open, and closing it adds none. A reset forgets reads made before it for good:
/// none of them reaches the totals later, at a close.
#[test]
fn wal_reads_are_counted_while_the_wal_is_open_and_a_reset_is_final() {
    let vfs = "io_uring_wal_read_totals";
    sqlite_uring::register(Options {
        vfs_name: vfs.into(),
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let open = || Connection::open_with_flags_and_vfs(&path, OpenFlags::default(), vfs).unwrap();
    let writer = open();
    writer
        .execute_batch(
            "PRAGMA journal_mode=wal; PRAGMA wal_autocheckpoint=0;
             CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);
             WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<300)
               INSERT INTO t(v) SELECT printf('%0200d', x) FROM n;",
        )
        .unwrap();
    // The table's pages are in the WAL only (nothing was checkpointed): a reader with a
    // 2-page cache reads each of them from it.
    let reader = open();
    reader.execute_batch("PRAGMA cache_size=2").unwrap();
    let before = sqlite_uring::vfs_stats(vfs).unwrap();
    let file_before = file_read_calls(&reader);
    reader
        .query_row("SELECT sum(length(v)) FROM t", [], |_| Ok(()))
        .unwrap();
    let file = file_read_calls(&reader) - file_before;
    let open_totals = sqlite_uring::vfs_stats(vfs).unwrap().since(&before);
    let wal_reads = open_totals.read_calls - file;
    assert!(
        (10..64).contains(&wal_reads),
        "the scan should read its pages from the WAL: {open_totals:?}, database file {file}"
    );
    drop(reader);
    let closed_totals = sqlite_uring::vfs_stats(vfs).unwrap().since(&before);
    assert_eq!(
        closed_totals.read_calls, open_totals.read_calls,
        "the WAL's reads were counted late, at its close"
    );
    assert_eq!(closed_totals.bytes_read, open_totals.bytes_read);

    // Reads made before a reset stay out of the totals, also once their file closes.
    let reader = open();
    reader.execute_batch("PRAGMA cache_size=2").unwrap();
    reader
        .query_row("SELECT sum(length(v)) FROM t", [], |_| Ok(()))
        .unwrap();
    sqlite_uring::reset_vfs_stats(vfs);
    drop(reader);
    let after_reset = sqlite_uring::vfs_stats(vfs).unwrap();
    assert_eq!(
        after_reset.read_calls, 0,
        "reads made before the reset reached the totals: {after_reset:?}"
    );
    drop(writer);
}
