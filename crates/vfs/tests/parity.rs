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
fn temp_files_go_through_the_vfs_and_are_made_like_unix() {
    register();
    let mut kinds = Vec::new();
    for vfs in ["unix", "io_uring"] {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("t.db"), vfs);
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
            .unwrap();
        let before = sqlite_uring::vfs_stats("io_uring").unwrap();
        let open_before = deleted_file_links();
        conn.execute_batch(
            "PRAGMA temp_store=FILE; PRAGMA cache_size=10;
             CREATE TEMP TABLE big AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<20000)
               SELECT x, printf('%0200d', x) AS pad FROM n;",
        )
        .unwrap();
        let after = sqlite_uring::vfs_stats("io_uring").unwrap();
        if vfs == "io_uring" {
            // 20000 rows × ~200 bytes cannot stay in a 10-page cache: the temp database spills.
            assert!(
                after.bytes_written - before.bytes_written > 1_000_000,
                "temp database did not use the VFS: {before:?} → {after:?}"
            );
        }
        assert_eq!(rows(&conn, "SELECT count(*) FROM big"), vec!["20000"]);
        // The temp database is open now. os_unix.c makes it an O_TMPFILE inode, which
        // never has a name (/proc shows `DIR/#INODE (deleted)`), where the filesystem
        // allows; an `etilqs_*` name, unlinked at open, elsewhere.
        let new_links: Vec<String> = deleted_file_links()
            .into_iter()
            .filter(|link| !open_before.contains(link))
            .collect();
        let unnamed = new_links.iter().any(|link| link.contains("/#"));
        let named = new_links.iter().any(|link| link.contains("/etilqs_"));
        assert!(
            unnamed || named,
            "{vfs}: no open temp file in {new_links:?}"
        );
        kinds.push((unnamed, named));
    }
    assert_eq!(
        kinds[1], kinds[0],
        "(unnamed, named) temp files: io_uring vs unix"
    );
}

/// What this process's open descriptors point at, for files already unlinked.
fn deleted_file_links() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.ends_with(" (deleted)"))
        .collect()
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
fn one_rollback_commit_syncs_like_unix() {
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

/// The same VFS code on plain syscalls (`Backend::Syscall`), under the name the CLI gives it.
fn register_sync_backend() {
    sqlite_uring::register(sqlite_uring::Options {
        vfs_name: "io_uring_sync".into(),
        backend: sqlite_uring::Backend::Syscall,
        ..Default::default()
    })
    .unwrap();
}

/// The main database's `sqlite3_file`, as SQLite hands it to the VFS.
fn main_db_file(conn: &Connection) -> *mut rusqlite::ffi::sqlite3_file {
    let mut file: *mut rusqlite::ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: the handle is open for the borrow of `conn`; SQLITE_FCNTL_FILE_POINTER writes
    // one pointer into `file`, which outlives the call.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_FILE_POINTER,
            (&mut file as *mut *mut rusqlite::ffi::sqlite3_file).cast(),
        )
    };
    assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
    assert!(!file.is_null());
    file
}

#[test]
fn device_characteristics_and_sector_size_are_the_unix_bits() {
    register();
    register_sync_backend();
    let dir = tempfile::tempdir().unwrap();
    let ask = |vfs: &str, uri_suffix: &str| {
        let path = dir.path().join(format!("{vfs}.db"));
        let uri = format!("file:{}{uri_suffix}", path.display());
        let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags_and_vfs(&uri, flags, vfs).unwrap();
        conn.execute_batch("CREATE TABLE IF NOT EXISTS t(x)")
            .unwrap();
        let file = main_db_file(&conn);
        // SAFETY: `file` is the open main database of `conn`, alive for this block; every
        // VFS here fills both methods (io version ≥ 1).
        unsafe {
            let methods = &*(*file).pMethods;
            (
                methods.xDeviceCharacteristics.unwrap()(file),
                methods.xSectorSize.unwrap()(file),
            )
        }
    };
    for uri_suffix in ["", "?psow=0"] {
        let unix = ask("unix", uri_suffix);
        assert_eq!(ask("io_uring", uri_suffix), unix, "{uri_suffix}");
        assert_eq!(ask("io_uring_sync", uri_suffix), unix, "{uri_suffix}");
    }
    // The bit that lets the pager read overflow pages straight into the caller's buffer.
    assert_ne!(
        ask("io_uring", "").0 & rusqlite::ffi::SQLITE_IOCAP_SUBPAGE_READ,
        0
    );
}

#[test]
fn blob_overflow_pages_bypass_the_page_cache_as_with_unix() {
    register();
    register_sync_backend();
    // Cache misses while reading one 1 MB blob on a fresh connection: with SUBPAGE_READ
    // the overflow chain is read straight into the result (a handful of misses: schema,
    // b-tree pages); without it, one miss per overflow page (~250).
    let misses = |vfs: &str| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        let conn = open(&path, vfs);
        conn.execute_batch(
            "CREATE TABLE f(k INTEGER PRIMARY KEY, v BLOB);
             INSERT INTO f VALUES(1, randomblob(1000000));",
        )
        .unwrap();
        drop(conn);
        let conn = open(&path, vfs);
        let length: i64 = conn
            .query_row("SELECT length(v) FROM f WHERE k = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(length, 1_000_000);
        let blob: Vec<u8> = conn
            .query_row("SELECT v FROM f WHERE k = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(blob.len(), 1_000_000);
        let (mut current, mut high) = (0, 0);
        // SAFETY: the handle is open; both out-pointers outlive the call.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_db_status(
                conn.handle(),
                rusqlite::ffi::SQLITE_DBSTATUS_CACHE_MISS,
                &mut current,
                &mut high,
                0,
            )
        };
        assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
        current
    };
    let unix = misses("unix");
    assert!(
        unix < 20,
        "unix read the overflow chain through its cache: {unix}"
    );
    assert_eq!(misses("io_uring"), unix);
    assert_eq!(misses("io_uring_sync"), unix);
}
