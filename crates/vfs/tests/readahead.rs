//! B-tree read-ahead (`uring_readahead`, on by default): a scan of data the kernel does not
//! have cached (ascending, descending, or `integrity_check`'s walk) asks for the pages
//! SQLite reads next, a point lookup and a scan of cached
//! data ask for nothing, and every result is what `unix` returns — with page sizes 512
//! and 65536, after VACUUM, on files with corrupt interior pages, and while another
//! process writes.
//!
//! The database files live in a directory on a disk-backed filesystem (`/var/tmp`):
//! evicting a file's pages (`POSIX_FADV_DONTNEED`) is what makes a run cold, and tmpfs
//! keeps its pages whatever it is told.

mod common;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use common::{register, rows, Mode};
use rusqlite::{Connection, OpenFlags};

/// A directory on a filesystem whose pages can be evicted.
fn cold_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("readahead-")
        .tempdir_in("/var/tmp")
        .expect("a temporary directory in /var/tmp")
}

/// Writes back and evicts every page of `path` (and of its WAL, if any) from the page
/// cache, so the next reads reach the device.
fn evict(path: &Path) {
    for file in [path.to_path_buf(), wal_of(path)] {
        let Ok(handle) = std::fs::File::open(&file) else {
            continue;
        };
        handle.sync_all().unwrap();
        // SAFETY: posix_fadvise takes no pointers; the descriptor is open.
        let errno =
            unsafe { libc::posix_fadvise(handle.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(errno, 0, "evicting {}", file.display());
    }
}

fn wal_of(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", path.display()))
}

/// Opens `path` through `vfs` with URI parameters `params` (`""` for none) and a page
/// cache far smaller than the database, as a cold scan of a large file sees it.
fn open(path: &Path, vfs: &str, params: &str) -> Connection {
    register();
    let uri = format!("file:{}?{params}", path.display());
    let conn = Connection::open_with_flags_and_vfs(
        uri,
        OpenFlags::default() | OpenFlags::SQLITE_OPEN_URI,
        vfs,
    )
    .unwrap_or_else(|e| panic!("open {} with {vfs}: {e}", path.display()));
    conn.execute_batch("PRAGMA cache_size=-256").unwrap();
    conn
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

/// A database whose tables were filled in random key order, so their leaf pages are
/// scattered: a `WITHOUT ROWID` table `w` with random text keys grown beside a rowid
/// table `r` (their pages interleave), and an index on `r.c`.
fn build(path: &Path, page_size_bytes: u32, rows_count: u32, mode: Mode) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA page_size={page_size_bytes};
         PRAGMA journal_mode={};
         CREATE TABLE w(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
         CREATE TABLE r(id INTEGER PRIMARY KEY, c INTEGER, v TEXT);
         CREATE INDEX rc ON r(c);",
        mode.pragma()
    ))
    .unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    conn.execute_batch("BEGIN").unwrap();
    {
        let mut into_w = conn.prepare("INSERT INTO w VALUES (?1, ?2)").unwrap();
        let mut into_r = conn
            .prepare("INSERT INTO r(id, c, v) VALUES (?1, ?2, ?3)")
            .unwrap();
        for i in 0..rows_count {
            let key = format!("{:016x}-{i}", next());
            let value = "v".repeat(40 + (next() % 120) as usize);
            into_w.execute((key, &value)).unwrap();
            let id = (next() % (u64::from(rows_count) * 64)) as i64;
            let _ = into_r.execute((id, (next() % 100_000) as i64, &value));
        }
    }
    conn.execute_batch("COMMIT").unwrap();
    if mode == Mode::Wal {
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
    }
}

/// The scans and lookups whose results are compared with `unix`'s.
const SCANS: [&str; 6] = [
    "SELECT count(*), sum(length(v)), min(k), max(k) FROM w",
    "SELECT count(*), sum(c), sum(length(v)) FROM r",
    "SELECT count(*), sum(length(v)) FROM r WHERE c BETWEEN 20000 AND 40000",
    "SELECT k FROM w ORDER BY k DESC LIMIT 3",
    DESCENDING_SCAN,
    "PRAGMA integrity_check",
];

/// A scan from the last key to the first.
const DESCENDING_SCAN: &str =
    "SELECT count(*), sum(length(v)), group_concat(substr(k, 1, 2), '') FROM (SELECT k, v FROM w ORDER BY k DESC)";

/// Runs every scan cold (the file evicted before each) through `vfs`; returns the
/// results and the pages read-ahead asked for (0 on `unix`).
fn cold_scans(path: &Path, vfs: &str, params: &str) -> (Vec<String>, u64) {
    let mut out = Vec::new();
    let mut prefetched_pages = 0;
    for sql in SCANS {
        evict(path);
        let conn = open(path, vfs, params);
        out.extend(rows(&conn, sql));
        if vfs != "unix" {
            prefetched_pages += file_counter(&conn, "prefetched_pages");
        }
    }
    (out, prefetched_pages)
}

/// Runs `sql` cold (the file evicted before each) through `unix` and through `io_uring`,
/// checks that both return the same rows, and returns the `io_uring` connection, whose
/// counters tell what read-ahead did.
fn cold_as_unix(path: &Path, sql: &str) -> Connection {
    evict(path);
    let expected = rows(&open(path, "unix", ""), sql);
    evict(path);
    let conn = open(path, "io_uring", "");
    assert_eq!(rows(&conn, sql), expected, "{sql}");
    conn
}

#[test]
fn a_cold_scan_prefetches_and_returns_what_unix_returns() {
    let dir = cold_dir();
    let path = dir.path().join("scan.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    let (expected, _) = cold_scans(&path, "unix", "");
    evict(&path);
    let conn = open(&path, "io_uring", "");
    let got = rows(&conn, SCANS[0]);
    assert_eq!(got, expected[..1]);
    // How many depends on what the kernel's own read-ahead brought in meanwhile (pages it
    // has are not asked for again), so only that read-ahead ran is asserted here; the
    // algorithm's reach is held by readahead.rs's unit tests.
    assert!(
        file_counter(&conn, "prefetched_pages") > 0,
        "a cold scan of {} pages prefetched only {} (skipped {})",
        rows(&conn, "PRAGMA page_count")[0],
        file_counter(&conn, "prefetched_pages"),
        file_counter(&conn, "prefetch_skips")
    );
    drop(conn);
    let (all, _) = cold_scans(&path, "io_uring", "");
    assert_eq!(all, expected);
}

#[test]
fn descending_scans_and_integrity_check_prefetch_and_return_what_unix_returns() {
    // Both read children from the last to the first: `integrity_check` visits a page's
    // right child, then its cells from the last.
    let dir = cold_dir();
    let path = dir.path().join("descending.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    for sql in [DESCENDING_SCAN, "PRAGMA integrity_check"] {
        let conn = cold_as_unix(&path, sql);
        assert!(
            file_counter(&conn, "prefetched_pages") > 0,
            "{sql}: cold, of {} pages, prefetched none (skipped {})",
            rows(&conn, "PRAGMA page_count")[0],
            file_counter(&conn, "prefetch_skips")
        );
    }
}

/// Leaf pages of b-tree `name`, by SQLite's own count.
fn leaf_pages(path: &Path, name: &str) -> u64 {
    let conn = Connection::open(path).unwrap();
    conn.query_row(
        "SELECT count(*) FROM dbstat WHERE name = ?1 AND pagetype = 'leaf'",
        [name],
        |row| row.get::<_, i64>(0),
    )
    .unwrap() as u64
}

/// SCANS[2]'s rows lie on nearly every leaf of `r`: asking for more pages than the index
/// has leaves and half the table's means row read-ahead asked for the rows' leaves
/// (without it, only the index's leaves and a few others are asked for).
///
/// `cold_run` runs the query cold and returns the pages read-ahead asked for. Read-ahead
/// wakes when one of SQLite's sampled reads reaches the device; on a file this small, now
/// and then no sampled read of the query finds its page missing (the kernel's own
/// read-around, on the database's descriptor, which is not `POSIX_FADV_RANDOM`, the likely
/// reason), and read-ahead sleeps through it: about one run in 15 to 20 with the other
/// tests of this file beside it. Such a run is repeated, up to 3 runs in all.
fn assert_rows_asked_for(path: &Path, mut cold_run: impl FnMut() -> u64) {
    let index_leaves = leaf_pages(path, "rc");
    let table_leaves = leaf_pages(path, "r");
    let mut prefetched_pages = 0;
    for _ in 0..3 {
        prefetched_pages = cold_run();
        if prefetched_pages > index_leaves + table_leaves / 2 {
            return;
        }
    }
    panic!(
        "{prefetched_pages} pages prefetched; the index has {index_leaves} leaves, the table {table_leaves}"
    );
}

#[test]
fn an_index_range_that_reads_its_rows_prefetches_them() {
    // SCANS[2] reads a fifth of index `rc` in order and each entry's row from `r`: the
    // rows' leaves, scattered over the table, are asked for ahead (row read-ahead).
    let dir = cold_dir();
    let path = dir.path().join("range.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    assert_rows_asked_for(&path, || {
        file_counter(&cold_as_unix(&path, SCANS[2]), "prefetched_pages")
    });
}

#[test]
fn an_index_range_prefetches_its_rows_when_readahead_sleeps_as_the_query_starts() {
    // A connection that has read cached data (read-ahead asleep, the schema in SQLite's
    // cache) then meets cold data: read-ahead wakes at the query's first reads and must
    // still find the rows.
    let dir = cold_dir();
    let path = dir.path().join("asleep.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    evict(&path);
    let expected = rows(&open(&path, "unix", ""), SCANS[2]);
    assert_rows_asked_for(&path, || {
        let conn = open(&path, "io_uring", "");
        // Hot: every page cached, the whole table read once through the connection.
        std::fs::read(&path).unwrap();
        rows(&conn, "SELECT count(*), sum(length(v)) FROM r");
        rows(&conn, "SELECT count(*) FROM w");
        let before = file_counter(&conn, "prefetched_pages");
        evict(&path);
        assert_eq!(rows(&conn, SCANS[2]), expected);
        file_counter(&conn, "prefetched_pages") - before
    });
}

#[test]
fn a_covering_index_range_prefetches_no_row() {
    // The same range, answered from the index alone: no row is read, none is asked for.
    let dir = cold_dir();
    let path = dir.path().join("covering.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    let index_leaves = leaf_pages(&path, "rc");
    let sql = "SELECT count(*), sum(c) FROM r WHERE c BETWEEN 20000 AND 40000";
    let conn = cold_as_unix(&path, sql);
    let prefetched_pages = file_counter(&conn, "prefetched_pages");
    assert!(
        prefetched_pages <= index_leaves,
        "{prefetched_pages} pages prefetched; the index has {index_leaves} leaves"
    );
}

#[test]
fn readahead_off_prefetches_nothing() {
    let dir = cold_dir();
    let path = dir.path().join("off.db");
    build(&path, 4096, 5_000, Mode::Rollback);
    evict(&path);
    let conn = open(&path, "io_uring", "uring_readahead=off");
    rows(&conn, SCANS[0]);
    assert_eq!(file_counter(&conn, "prefetched_pages"), 0);
    assert_eq!(file_counter(&conn, "prefetch_skips"), 0);
}

#[test]
fn cold_point_lookups_prefetch_nothing() {
    let dir = cold_dir();
    let path = dir.path().join("lookups.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    let keys = {
        let conn = Connection::open(&path).unwrap();
        rows(&conn, "SELECT k FROM w ORDER BY substr(k, 9) LIMIT 200")
    };
    evict(&path);
    let conn = open(&path, "io_uring", "");
    let mut found = 0;
    for key in &keys {
        found += conn
            .query_row("SELECT count(*) FROM w WHERE k = ?1", [key], |row| {
                row.get::<_, i64>(0)
            })
            .unwrap();
    }
    assert_eq!(found, keys.len() as i64);
    assert_eq!(
        file_counter(&conn, "prefetched_pages"),
        0,
        "point lookups must not start read-ahead"
    );
}

#[test]
fn a_scan_of_cached_pages_prefetches_nothing() {
    for mode in [Mode::Rollback, Mode::Wal] {
        let dir = cold_dir();
        let path = dir.path().join("hot.db");
        build(&path, 4096, 20_000, mode);
        // Read the whole file once so the kernel has every page.
        std::fs::read(&path).unwrap();
        let conn = open(&path, "io_uring", "");
        for _ in 0..5 {
            let got = rows(&conn, SCANS[0]);
            assert_eq!(got.len(), 1);
        }
        // Read-ahead sleeps on cached data, and awake it asks for no page the kernel has.
        assert_eq!(file_counter(&conn, "prefetched_pages"), 0);
        if mode == Mode::Wal {
            // Every sampled read of a WAL-mode database is a page read, which asks the
            // page cache, not the clock: no read wakes read-ahead, so not one cache check
            // is made. (A rollback-mode transaction starts with a read of header bytes,
            // which is timed, and a slow one on a loaded machine wakes it for a while.)
            assert_eq!(file_counter(&conn, "prefetch_skips"), 0);
        }
    }
}

#[test]
fn page_sizes_512_and_65536_scan_as_unix_does() {
    for page_size_bytes in [512u32, 65536] {
        let dir = cold_dir();
        let path = dir.path().join(format!("p{page_size_bytes}.db"));
        // Enough rows for interior pages with many children at either size.
        let rows_count = if page_size_bytes == 512 {
            8_000
        } else {
            60_000
        };
        build(&path, page_size_bytes, rows_count, Mode::Rollback);
        let (expected, _) = cold_scans(&path, "unix", "");
        let (got, prefetched_pages) = cold_scans(&path, "io_uring", "");
        assert_eq!(got, expected, "page size {page_size_bytes}");
        assert!(prefetched_pages > 0, "page size {page_size_bytes}");
    }
}

#[test]
fn wal_mode_and_vacuum_scan_as_unix_does() {
    let dir = cold_dir();
    let path = dir.path().join("wal.db");
    build(&path, 4096, 10_000, Mode::Wal);
    // Changes that stay in the WAL, SQLite reading their pages from there: a connection
    // kept open holds the database, so no other connection's close checkpoints it.
    let keeper = open(&path, "unix", "");
    keeper
        .execute_batch(
            "PRAGMA wal_autocheckpoint=0;
             UPDATE w SET v = v || 'x' WHERE k < '4';
             DELETE FROM r WHERE c % 3 = 0;",
        )
        .unwrap();
    let wal_frames_kept = || {
        let bytes = std::fs::metadata(wal_of(&path)).map_or(0, |m| m.len());
        assert!(bytes > 0, "the WAL was checkpointed");
    };
    wal_frames_kept();
    let (expected, _) = cold_scans(&path, "unix", "");
    let (got, prefetched_pages) = cold_scans(&path, "io_uring", "");
    assert_eq!(got, expected);
    assert!(prefetched_pages > 0, "WAL mode");
    wal_frames_kept();
    drop(keeper);
    open(&path, "unix", "")
        .execute_batch("PRAGMA journal_mode=delete; VACUUM;")
        .unwrap();
    // VACUUM lays each table out in key order: the kernel's own read-ahead of a file read
    // in order finds the next pages, so read-ahead may find them cached and ask for none.
    let (expected, _) = cold_scans(&path, "unix", "");
    let (got, _) = cold_scans(&path, "io_uring", "");
    assert_eq!(got, expected, "rollback mode after VACUUM");
    // And back in WAL mode, VACUUMed again, with changes kept in the WAL.
    let keeper = open(&path, "unix", "");
    keeper
        .execute_batch(
            "PRAGMA journal_mode=wal; VACUUM; PRAGMA wal_autocheckpoint=0;
             UPDATE w SET v = 'y' || v WHERE k > 'c';",
        )
        .unwrap();
    wal_frames_kept();
    let (expected, _) = cold_scans(&path, "unix", "");
    let (got, _) = cold_scans(&path, "io_uring", "");
    assert_eq!(got, expected, "WAL mode after VACUUM");
    wal_frames_kept();
    drop(keeper);
}

/// Overwrites bytes of interior pages: child pointers out of range, a cell pointer past
/// the page, a child naming the page itself, a bad page type.
fn corrupt_interior_pages(path: &Path) -> usize {
    let mut bytes = std::fs::read(path).unwrap();
    let page_bytes = 4096usize;
    let mut corrupted = 0;
    for page in 2..bytes.len() / page_bytes {
        let start = page * page_bytes;
        let kind = bytes[start];
        if kind != 0x02 && kind != 0x05 {
            continue;
        }
        match corrupted % 4 {
            // The right-most child far past the end of the file.
            0 => bytes[start + 8..start + 12].copy_from_slice(&0x7fff_ff00u32.to_be_bytes()),
            // The first cell pointer past the page.
            1 => bytes[start + 12..start + 14].copy_from_slice(&0xfff0u16.to_be_bytes()),
            // The right-most child is the page itself.
            2 => bytes[start + 8..start + 12].copy_from_slice(&(page as u32 + 1).to_be_bytes()),
            // Not a page type at all.
            _ => bytes[start] = 0x07,
        }
        corrupted += 1;
        if corrupted == 12 {
            break;
        }
    }
    std::fs::write(path, bytes).unwrap();
    corrupted
}

#[test]
fn corrupt_interior_pages_give_unix_results_and_no_crash() {
    let dir = cold_dir();
    let path = dir.path().join("corrupt.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    assert!(corrupt_interior_pages(&path) > 0);
    let outcome = |vfs: &str| -> Vec<String> {
        let mut out = Vec::new();
        for sql in SCANS {
            evict(&path);
            let conn = open(&path, vfs, "");
            let result = conn
                .prepare(sql)
                .and_then(|mut stmt| {
                    let columns = stmt.column_count();
                    let mut rows = stmt.query([])?;
                    let mut text = Vec::new();
                    while let Some(row) = rows.next()? {
                        for i in 0..columns {
                            text.push(format!("{:?}", row.get_ref(i)?));
                        }
                    }
                    Ok(text.join("|"))
                })
                .unwrap_or_else(|e| format!("error: {}", common::extended_code(&e)));
            out.push(result);
        }
        out
    };
    assert_eq!(outcome("io_uring"), outcome("unix"));
}

/// The bank's total, by a scan of the evicted file.
fn cold_total(conn: &Connection, path: &Path) -> i64 {
    evict(path);
    conn.query_row("SELECT sum(amount) FROM bank", [], |row| row.get(0))
        .unwrap()
}

/// Every row of the bank, in key order, by a scan of the evicted file.
fn cold_bank(conn: &Connection, path: &Path) -> String {
    evict(path);
    conn.query_row(
        "SELECT group_concat(id || ':' || amount || ':' || hex(pad), ',') FROM (SELECT * FROM bank ORDER BY id)",
        [],
        |row| row.get(0),
    )
    .unwrap()
}

#[test]
fn scans_under_a_writer_in_another_process_see_only_committed_states() {
    for mode in [Mode::Rollback, Mode::Wal] {
        let dir = cold_dir();
        let path = dir.path().join("busy.db");
        build(&path, 4096, 10_000, mode);
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE bank(id INTEGER PRIMARY KEY, amount INTEGER, pad TEXT);
                 WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<5000)
                   INSERT INTO bank SELECT (x*7919)%1000003, 100, randomblob(120) FROM n;",
            )
            .unwrap();
        }
        // A stock sqlite3 process moves amounts between rows, one transaction at a time:
        // every committed state sums to 500000.
        let script: String = (0..400)
            .map(|i| {
                format!(
                    "BEGIN; UPDATE bank SET amount = amount - {d} WHERE id = (SELECT id FROM bank ORDER BY id LIMIT 1 OFFSET {a});
                     UPDATE bank SET amount = amount + {d} WHERE id = (SELECT id FROM bank ORDER BY id LIMIT 1 OFFSET {b}); COMMIT;\n",
                    d = i % 7 + 1,
                    a = (i * 37) % 5000,
                    b = (i * 91 + 13) % 5000
                )
            })
            .collect();
        let writer =
            common::spawn_stock_script(&path, &format!(".timeout 10000\n{script}"), "stock writer");
        let mut scans = 0;
        let conn = open(&path, "io_uring", "");
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        let mut writer = writer;
        loop {
            let done = writer.exited().is_some();
            assert_eq!(
                cold_total(&conn, &path),
                500_000,
                "{mode:?}: a scan saw a state never committed"
            );
            scans += 1;
            if done {
                break;
            }
        }
        let output = writer.wait();
        common::expect_success("stock writer", &output);
        assert!(scans > 0);
        // How many scans overlapped the writer above depends on the scheduler; here a
        // stock process commits between every two cold scans, so the file always changes
        // under the path and the prefetch descriptor read-ahead keeps.
        let prefetched_before_commits = file_counter(&conn, "prefetched_pages");
        let unix = open(&path, "unix", "");
        if mode == Mode::Wal {
            // The writer's 400 commits left most of the table's pages in the WAL, where
            // SQLite reads them without the database file (nor its read-ahead): bring them
            // back, so the scans below read the table from the database file again.
            let busy: i64 = unix
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
                .unwrap();
            assert_eq!(busy, 0, "the checkpoint was blocked");
        }
        let mut stock = common::StockSession::start(&path, 10_000);
        for i in 0..20 {
            stock.run_ok(&format!(
                "BEGIN; UPDATE bank SET amount = amount - 3 WHERE id = (SELECT id FROM bank ORDER BY id LIMIT 1 OFFSET {a});
                 UPDATE bank SET amount = amount + 3 WHERE id = (SELECT id FROM bank ORDER BY id LIMIT 1 OFFSET {b}); COMMIT;",
                a = (i * 53) % 5000,
                b = (i * 97 + 7) % 5000
            ));
            assert_eq!(
                cold_total(&conn, &path),
                500_000,
                "{mode:?}: a scan after commit {i} saw a wrong state"
            );
            // The stock process keeps the database open between its commits: every row,
            // byte for byte, as `unix` reads the same committed state.
            assert_eq!(
                cold_bank(&conn, &path),
                cold_bank(&unix, &path),
                "{mode:?}: the rows after commit {i}"
            );
        }
        // The scans between the commits were cold (the table's leaves lie in random key
        // order, and nothing reads the file between the eviction and the scan), so
        // read-ahead ran under each. (Beside the running writer nothing is certain: its
        // own statements scan the table and may put its pages back in the page cache
        // between an eviction and a scan.)
        assert!(
            file_counter(&conn, "prefetched_pages") > prefetched_before_commits,
            "{mode:?}: read-ahead asked for no page between the commits"
        );
        drop(unix);
        stock.finish();
        common::ours_integrity(&path);
    }
}

#[test]
fn cold_scans_leave_no_io_wq_worker_thread() {
    // By default a prefetch is a posix_fadvise from the calling thread; with reads routed
    // to the ring, prefetches are buffered ring reads, which ext4 starts from the
    // submitting thread. Either way no worker thread may appear: it would stay in the
    // process and make every later system call on a descriptor dearer
    // (docs/ARCHITECTURE.md, "Threads the ring adds").
    let dir = cold_dir();
    let path = dir.path().join("threads.db");
    build(&path, 4096, 20_000, Mode::Wal);
    for params in ["", "uring_reads=ring"] {
        let (_, prefetched_pages) = cold_scans(&path, "io_uring", params);
        assert!(prefetched_pages > 0, "{params}");
    }
    let workers: Vec<String> = common::io_uring_threads()
        .into_iter()
        .filter(|name| name.starts_with("iou-wrk-"))
        .collect();
    assert!(
        workers.is_empty(),
        "io-wq workers after cold scans: {workers:?}"
    );
}

#[test]
fn closing_after_readahead_keeps_a_unix_connections_lock() {
    // Read-ahead reads through a descriptor of its own; closing it, like closing any
    // descriptor of the file, would drop this process's POSIX locks, which a `unix`
    // connection of the same process holds. (Evicting opens and closes the file too, so it
    // happens before the lock is taken.) The holder's read touches the schema alone: a
    // count of `r` (its index) would have the kernel's read-ahead on `unix`'s descriptor
    // bring much of this small file back into the cache, and the scan below could then
    // find its pages cached and ask for none.
    let dir = cold_dir();
    let path = dir.path().join("locks.db");
    build(&path, 4096, 20_000, Mode::Rollback);
    evict(&path);
    let holder = open(&path, "unix", "");
    holder
        .execute_batch("BEGIN; SELECT count(*) FROM sqlite_schema;")
        .unwrap();
    {
        let scanner = open(&path, "io_uring", "");
        rows(&scanner, SCANS[0]);
        assert!(file_counter(&scanner, "prefetched_pages") > 0);
    }
    let writer = common::stock_run(&path, 0, "BEGIN EXCLUSIVE; COMMIT;");
    assert!(
        !writer.status.success() && String::from_utf8_lossy(&writer.stderr).contains("locked"),
        "another process took EXCLUSIVE while a unix connection here held SHARED: {}",
        common::describe("stock sqlite3", &writer)
    );
    holder.execute_batch("COMMIT").unwrap();
    common::expect_success(
        "stock writer after the unix connection's read ended",
        &common::stock_run(&path, 1000, "BEGIN EXCLUSIVE; COMMIT;"),
    );
}
