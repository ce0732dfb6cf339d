//! O_DIRECT mode (`uring_direct=on`): same bytes on disk as `unix`, page reads really go
//! through the O_DIRECT descriptor (with read-ahead for sequential scans), and the
//! read-ahead buffer never serves a page another connection, or this one, has changed.

mod common;

use std::path::Path;

use common::{integrity_ok, open, register, rows};
use rusqlite::{Connection, OpenFlags};

/// Opens `path` through `io_uring` with O_DIRECT.
fn open_direct(path: &Path) -> Connection {
    register();
    let uri = format!("file:{}?uring_direct=on", path.display());
    Connection::open_with_flags_and_vfs(
        uri,
        OpenFlags::default() | OpenFlags::SQLITE_OPEN_URI,
        "io_uring",
    )
    .unwrap_or_else(|e| panic!("open {} with uring_direct=on: {e}", path.display()))
}

/// A counter from `PRAGMA io_uring_stats`' per-file object.
fn file_counter(conn: &Connection, name: &str) -> u64 {
    let json = rows(conn, "PRAGMA io_uring_stats").remove(0);
    let file = &json[json.find("\"file\":").expect("file counters")..];
    let key = format!("\"{name}\":");
    let at = file
        .find(&key)
        .unwrap_or_else(|| panic!("{name} in {json}"))
        + key.len();
    file[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {json}"))
}

/// Builds, changes and vacuums a database; returns what it read along the way.
fn workload(conn: &Connection, journal_mode: &str) -> Vec<String> {
    conn.execute_batch(&format!(
        "PRAGMA journal_mode={journal_mode};
         PRAGMA cache_size=16;
         CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
         CREATE INDEX tv ON t(v);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<4000)
           INSERT INTO t(v, b) SELECT printf('%08d', (x*7919)%4000), zeroblob(x%700) FROM n;
         BEGIN;
         UPDATE t SET v = v || '+' WHERE id % 5 = 0;
         DELETE FROM t WHERE id % 11 = 0;
         COMMIT;"
    ))
    .unwrap();
    let mut out = rows(
        conn,
        "SELECT count(*), total(length(v)), total(length(b)) FROM t",
    );
    out.extend(rows(conn, "SELECT v FROM t ORDER BY v DESC LIMIT 3"));
    conn.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    out.extend(rows(conn, "PRAGMA page_count"));
    integrity_ok(conn);
    out
}

#[test]
fn direct_files_match_unix_byte_for_byte() {
    register();
    for journal_mode in ["delete", "wal"] {
        let unix_dir = tempfile::tempdir().unwrap();
        let direct_dir = tempfile::tempdir().unwrap();
        let unix_out = workload(&open(&unix_dir.path().join("d.db"), "unix"), journal_mode);
        let direct = open_direct(&direct_dir.path().join("d.db"));
        let direct_out = workload(&direct, journal_mode);
        assert_eq!(unix_out, direct_out, "{journal_mode}");
        let align = rows(&direct, "PRAGMA io_uring_stats").remove(0);
        assert!(
            !align.contains("\"direct_align_bytes\":null"),
            "{journal_mode}: the main database has no O_DIRECT descriptor: {align}"
        );
        drop(direct);
        let a = std::fs::read(unix_dir.path().join("d.db")).unwrap();
        let b = std::fs::read(direct_dir.path().join("d.db")).unwrap();
        assert!(
            a == b,
            "{journal_mode}: database files differ ({} vs {} bytes)",
            a.len(),
            b.len()
        );
    }
}

#[test]
fn sequential_scans_read_ahead_and_random_reads_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scan.db");
    {
        let conn = open(&path, "unix");
        conn.execute_batch(
            "PRAGMA page_size=4096;
             CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
             WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<2000)
               INSERT INTO t(v) SELECT randomblob(1000) FROM n;",
        )
        .unwrap();
    }
    let conn = open_direct(&path);
    conn.execute_batch("PRAGMA cache_size=4").unwrap();
    // A table scan of a freshly built table reads its pages in file order.
    assert_eq!(
        rows(&conn, "SELECT count(*), sum(length(v)) FROM t"),
        vec!["2000|2000000"]
    );
    let direct_reads = file_counter(&conn, "direct_reads");
    let hits = file_counter(&conn, "readahead_hits");
    assert!(direct_reads > 0, "no O_DIRECT reads");
    assert!(
        hits > 4 * direct_reads,
        "a scan of ~500 pages should mostly hit the read-ahead window: {direct_reads} device reads, {hits} hits"
    );
    // Point lookups far apart: each is its own read of one page, never a window.
    rows(&conn, "PRAGMA io_uring_stats=reset");
    for id in [3, 1500, 40, 1200, 700] {
        rows(&conn, &format!("SELECT length(v) FROM t WHERE id = {id}"));
    }
    let reads = file_counter(&conn, "read_calls");
    assert_eq!(
        file_counter(&conn, "readahead_hits"),
        0,
        "no window for random reads"
    );
    assert!(
        file_counter(&conn, "direct_reads") >= 5,
        "each lookup reads its leaf page"
    );
    assert_eq!(
        file_counter(&conn, "kernel_entries"),
        reads,
        "one kernel entry per read: no read-ahead, no ring hand-off"
    );
    integrity_ok(&conn);
}

/// O_DIRECT page writes reach the ring from the write-behind arena, which each thread's
/// ring registers once: they go as IORING_OP_WRITE_FIXED, and the bytes are the same.
/// The commit measured rewrites pages scattered over the table: pages that are not
/// adjacent cannot coalesce, so they make a batch of several writes, which goes to the
/// ring (one write alone would go by syscall: it has nothing to overlap with).
#[test]
fn queued_direct_writes_go_from_the_registered_arena() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixed.db");
    let conn = open_direct(&path);
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
         BEGIN;
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<300)
           INSERT INTO t(v) SELECT hex(zeroblob(750)) || 0 FROM n;
         COMMIT;",
    )
    .unwrap();
    // Every test runs on a thread of its own, so this thread's ring is this test's.
    let before = sqlite_uring::thread_ring_fixed_writes();
    conn.execute_batch("UPDATE t SET v = substr(v, 1, 1500) || id WHERE id % 30 = 1")
        .unwrap();
    conn.execute_batch("UPDATE t SET v = substr(v, 1, 1500) || id WHERE id % 30 != 1")
        .unwrap();
    let fixed_writes = sqlite_uring::thread_ring_fixed_writes() - before;
    assert!(
        fixed_writes > 0,
        "no WRITE_FIXED from the arena (is SQLITE_URING_REGISTER_BUFFERS=off set?)"
    );
    drop(conn);
    let unix = open(&path, "unix");
    integrity_ok(&unix);
    // 300 rows of 1500 zeros and the row number (1–300: 792 digits in all).
    assert_eq!(
        rows(
            &unix,
            "SELECT count(*), sum(length(v)), sum(CAST(substr(v, 1501) AS INTEGER)) FROM t"
        ),
        vec!["300|450792|45150"]
    );
}

/// The routing chosen by measurement for O_DIRECT: the database's page writes go to the
/// ring, and so do the syncs of the database and of its rollback journal (whose header
/// rewrite is linked to its second fsync: one linked submission per commit); a WAL keeps
/// syscalls (a ring fsync would only add an io-wq thread to every later WAL commit).
/// `uring_syncs=syscall` takes every sync off the ring.
#[test]
fn direct_rollback_commits_sync_on_the_ring_and_wal_commits_do_not() {
    let routing = |conn: &Connection| {
        let json = rows(conn, "PRAGMA io_uring_stats").remove(0);
        ["reads", "writes", "syncs"]
            .map(|key| {
                let at = json.find(&format!("\"{key}\":\"")).unwrap() + key.len() + 4;
                json[at..].split('"').next().unwrap().to_string()
            })
            .join(",")
    };
    let commits = 20;
    let dir = tempfile::tempdir().unwrap();
    for (journal_mode, uri_extra, linked_per_commit) in [
        ("delete", "", 1),
        ("delete", "&uring_syncs=syscall", 0),
        // WAL commits sync the WAL only, and checkpoint writes are write-through.
        ("wal", "", 0),
    ] {
        register();
        let path = dir
            .path()
            .join(format!("link-{journal_mode}{}.db", uri_extra.len()));
        let conn = Connection::open_with_flags_and_vfs(
            format!("file:{}?uring_direct=on{uri_extra}", path.display()),
            OpenFlags::default() | OpenFlags::SQLITE_OPEN_URI,
            "io_uring",
        )
        .unwrap();
        conn.execute_batch(&format!(
            "PRAGMA journal_mode={journal_mode}; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
        ))
        .unwrap();
        let expected_routing = if uri_extra.is_empty() {
            "syscall,ring,ring"
        } else {
            "syscall,ring,syscall"
        };
        assert_eq!(
            routing(&conn),
            expected_routing,
            "{journal_mode}{uri_extra}"
        );
        // Every test runs on a thread of its own, so this thread's ring is this test's.
        let before = sqlite_uring::thread_ring_linked_syncs();
        for _ in 0..commits {
            // Three pages per commit: page 1, the table's leaf, an overflow page.
            conn.execute("INSERT INTO t(v) VALUES(zeroblob(5000))", [])
                .unwrap();
        }
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        let linked = sqlite_uring::thread_ring_linked_syncs() - before;
        assert_eq!(
            linked,
            commits * linked_per_commit,
            "{journal_mode}{uri_extra}: one linked fsync (the journal header's) per \
             rollback commit, none in WAL mode or with syncs routed to syscalls"
        );
        drop(conn);
        let unix = open(&path, "unix");
        integrity_ok(&unix);
        assert_eq!(
            rows(&unix, "SELECT count(*), sum(length(v)) FROM t"),
            vec![format!("{commits}|{}", commits * 5000)]
        );
    }
}

/// Another connection (through `unix`, so with POSIX locks, in this process) changes
/// pages this connection has in its read-ahead buffer; the next statement must see the
/// change, in both journal modes and across a checkpoint.
#[test]
fn readahead_never_serves_pages_another_connection_changed() {
    for journal_mode in ["delete", "wal"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.db");
        let writer = open(&path, "unix");
        writer
            .execute_batch(&format!(
                "PRAGMA journal_mode={journal_mode};
                 CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);
                 WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM s WHERE x<1500)
                   INSERT INTO t(n, pad) SELECT 1, zeroblob(500) FROM s;"
            ))
            .unwrap();
        let reader = open_direct(&path);
        reader.execute_batch("PRAGMA cache_size=2").unwrap();
        let sum = |conn: &Connection| rows(conn, "SELECT sum(n) FROM t");
        assert_eq!(sum(&reader), vec!["1500"], "{journal_mode}");
        for round in 2..5 {
            writer
                .execute(&format!("UPDATE t SET n = {round}"), [])
                .unwrap();
            if journal_mode == "wal" && round == 3 {
                // Move the new pages into the database file, where O_DIRECT reads them.
                writer
                    .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                    .unwrap();
            }
            assert_eq!(
                sum(&reader),
                vec![(1500 * round).to_string()],
                "{journal_mode}, round {round}"
            );
        }
        assert!(
            file_counter(&reader, "readahead_hits") > 0,
            "{journal_mode}"
        );
        integrity_ok(&reader);
    }
}

/// This connection's own writes (a transaction bigger than its page cache spills pages
/// to the file mid-transaction and reads them back) are never hidden by read-ahead.
#[test]
fn readahead_never_serves_pages_this_connection_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open_direct(&dir.path().join("own.db"));
    conn.execute_batch(
        "PRAGMA cache_size=3;
         CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);
         WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM s WHERE x<3000)
           INSERT INTO t(n, pad) SELECT x, zeroblob(300) FROM s;",
    )
    .unwrap();
    conn.execute_batch("BEGIN").unwrap();
    for round in 0..3 {
        conn.execute("UPDATE t SET n = n + 1", []).unwrap();
        assert_eq!(
            rows(&conn, "SELECT sum(n) FROM t"),
            vec![(3000 * 3001 / 2 + 3000 * (round + 1)).to_string()],
            "round {round}"
        );
    }
    conn.execute_batch("COMMIT").unwrap();
    integrity_ok(&conn);
    drop(conn);
    let check = open(&dir.path().join("own.db"), "unix");
    assert_eq!(
        rows(&check, "SELECT sum(n) FROM t"),
        vec![(3000 * 3001 / 2 + 9000).to_string()]
    );
}

#[test]
fn uring_direct_rejects_bad_values_and_leaves_journals_buffered() {
    register();
    let dir = tempfile::tempdir().unwrap();
    let bad = format!(
        "file:{}?uring_direct=yes",
        dir.path().join("x.db").display()
    );
    let error = Connection::open_with_flags_and_vfs(
        bad,
        OpenFlags::default() | OpenFlags::SQLITE_OPEN_URI,
        "io_uring",
    )
    .and_then(|c| c.execute_batch("CREATE TABLE t(x)"))
    .unwrap_err();
    assert!(
        error.to_string().contains("unable to open"),
        "uring_direct=yes must be refused: {error}"
    );
    // Journals and WAL frames are not page-aligned: only the database gets O_DIRECT, and
    // mmap stays off for it (mapped reads would bypass O_DIRECT).
    let conn = open_direct(&dir.path().join("y.db"));
    assert_eq!(rows(&conn, "PRAGMA mmap_size=1000000"), vec!["0"]);
    conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
        .unwrap();
    integrity_ok(&conn);
}

/// Drives the VFS's file methods directly, as SQLite would, to reach the exact read
/// sequences that decide whether the read-ahead buffer may serve a page: after this
/// file's own write of a buffered page, and after another writer changed the file while
/// this one held no lock.
mod methods {
    use super::*;
    use rusqlite::ffi;
    use std::ffi::{c_int, CString};
    use std::os::unix::fs::FileExt;

    const PAGE: usize = 4096;

    /// One file opened through the `io_uring` VFS's xOpen, closed on drop.
    struct RawFile {
        file: *mut ffi::sqlite3_file,
        storage: Vec<u64>,
        name: ffi::sqlite3_filename,
    }

    impl RawFile {
        fn open(path: &Path) -> RawFile {
            register();
            let database = CString::new(path.to_str().unwrap()).unwrap();
            let empty = CString::new("").unwrap();
            let params = [c"uring_direct".as_ptr(), c"on".as_ptr()];
            // SAFETY: NUL-terminated strings; the filename is freed in Drop.
            let name = unsafe {
                ffi::sqlite3_create_filename(
                    database.as_ptr(),
                    empty.as_ptr(),
                    empty.as_ptr(),
                    1,
                    params.as_ptr() as *mut *const std::ffi::c_char,
                )
            };
            // SAFETY: the VFS was registered above; its name is NUL-terminated.
            let vfs = unsafe { ffi::sqlite3_vfs_find(c"io_uring".as_ptr()) };
            assert!(!vfs.is_null());
            // SAFETY: `vfs` is a live registered VFS.
            let size_bytes = unsafe { (*vfs).szOsFile } as usize;
            let mut storage = vec![0u64; size_bytes.div_ceil(8)];
            let file = storage.as_mut_ptr() as *mut ffi::sqlite3_file;
            let mut out_flags: c_int = 0;
            let flags = ffi::SQLITE_OPEN_READWRITE
                | ffi::SQLITE_OPEN_CREATE
                | ffi::SQLITE_OPEN_MAIN_DB
                | ffi::SQLITE_OPEN_URI;
            // SAFETY: `file` has szOsFile bytes; `name` came from sqlite3_create_filename.
            let rc = unsafe { ((*vfs).xOpen.unwrap())(vfs, name, file, flags, &mut out_flags) };
            assert_eq!(rc, ffi::SQLITE_OK, "xOpen");
            RawFile {
                file,
                storage,
                name,
            }
        }

        fn methods(&self) -> &ffi::sqlite3_io_methods {
            // SAFETY: xOpen succeeded, so pMethods is set and static.
            unsafe { &*(*self.file).pMethods }
        }

        fn read_page(&self, page_index: usize) -> Vec<u8> {
            let mut page = vec![0u8; PAGE];
            // SAFETY: `page` is PAGE writable bytes; the file is open.
            let rc = unsafe {
                (self.methods().xRead.unwrap())(
                    self.file,
                    page.as_mut_ptr().cast(),
                    PAGE as c_int,
                    (page_index * PAGE) as i64,
                )
            };
            assert_eq!(rc, ffi::SQLITE_OK, "xRead of page {page_index}");
            page
        }

        fn write_page(&self, page_index: usize, fill: u8) {
            let page = vec![fill; PAGE];
            // SAFETY: `page` is PAGE readable bytes; the file is open.
            let rc = unsafe {
                (self.methods().xWrite.unwrap())(
                    self.file,
                    page.as_ptr().cast(),
                    PAGE as c_int,
                    (page_index * PAGE) as i64,
                )
            };
            assert_eq!(rc, ffi::SQLITE_OK, "xWrite of page {page_index}");
        }

        fn lock(&self, level: c_int) {
            // SAFETY: the file is open.
            let rc = unsafe { (self.methods().xLock.unwrap())(self.file, level) };
            assert_eq!(rc, ffi::SQLITE_OK, "xLock({level})");
        }

        fn unlock(&self, level: c_int) {
            // SAFETY: the file is open.
            let rc = unsafe { (self.methods().xUnlock.unwrap())(self.file, level) };
            assert_eq!(rc, ffi::SQLITE_OK, "xUnlock({level})");
        }

        fn counters(&self) -> String {
            let mut args: [*mut std::ffi::c_char; 3] = [
                std::ptr::null_mut(),
                c"io_uring_stats".as_ptr() as *mut _,
                std::ptr::null_mut(),
            ];
            // SAFETY: SQLITE_FCNTL_PRAGMA takes a char*[3]; the result is sqlite3_malloc'ed.
            unsafe {
                let rc = (self.methods().xFileControl.unwrap())(
                    self.file,
                    ffi::SQLITE_FCNTL_PRAGMA,
                    args.as_mut_ptr().cast(),
                );
                assert_eq!(rc, ffi::SQLITE_OK);
                let text = std::ffi::CStr::from_ptr(args[0])
                    .to_string_lossy()
                    .into_owned();
                ffi::sqlite3_free(args[0].cast());
                text
            }
        }
    }

    impl Drop for RawFile {
        fn drop(&mut self) {
            // SAFETY: the file is open; xClose is called once; the filename outlives it.
            unsafe {
                (self.methods().xClose.unwrap())(self.file);
                ffi::sqlite3_free_filename(self.name);
            }
            let _ = &self.storage;
        }
    }

    fn hits(file: &RawFile) -> u64 {
        let json = file.counters();
        let at = json.find("\"readahead_hits\":").unwrap() + "\"readahead_hits\":".len();
        json[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Reads pages 0..=4 in order: the sequential misses load a read-ahead window that
    /// covers the next pages too.
    fn warm(file: &RawFile) {
        for index in 0..5 {
            assert_eq!(file.read_page(index), vec![1u8; PAGE]);
        }
    }

    #[test]
    fn a_page_this_file_wrote_is_read_back_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        std::fs::write(&path, vec![1u8; 64 * PAGE]).unwrap();
        let file = RawFile::open(&path);
        file.lock(ffi::SQLITE_LOCK_SHARED);
        file.lock(ffi::SQLITE_LOCK_RESERVED);
        warm(&file);
        let before = hits(&file);
        assert_eq!(file.read_page(5), vec![1u8; PAGE]);
        assert!(
            hits(&file) > before,
            "page 5 should come from the read-ahead window"
        );
        file.write_page(5, 2);
        assert_eq!(
            file.read_page(5),
            vec![2u8; PAGE],
            "own write hidden by read-ahead"
        );
        file.unlock(ffi::SQLITE_LOCK_NONE);
    }

    #[test]
    fn a_page_changed_by_another_writer_between_locks_is_read_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.db");
        std::fs::write(&path, vec![1u8; 64 * PAGE]).unwrap();
        let file = RawFile::open(&path);
        file.lock(ffi::SQLITE_LOCK_SHARED);
        warm(&file);
        file.unlock(ffi::SQLITE_LOCK_NONE);
        // Another process writes while this file holds no lock.
        let other = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        other.write_all_at(&[3u8; PAGE], (6 * PAGE) as u64).unwrap();
        other.sync_all().unwrap();
        file.lock(ffi::SQLITE_LOCK_SHARED);
        assert_eq!(
            file.read_page(6),
            vec![3u8; PAGE],
            "read-ahead served a page from before the lock"
        );
        file.unlock(ffi::SQLITE_LOCK_NONE);
    }
}
