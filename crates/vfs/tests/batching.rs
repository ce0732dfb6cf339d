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
