//! WAL mode, the shared-memory WAL index and memory-mapped I/O, tested differentially:
//! each scenario runs under `unix` and under `io_uring`, and everything observable
//! (query results, error codes, which files exist and their sizes) must be identical.

mod common;

use common::{open, register, rows};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// Files in `dir`, with sizes (the -shm size is SQLite's business, so only its presence).
fn files(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let len = e.metadata().unwrap().len();
            if name.ends_with("-shm") {
                name
            } else {
                format!("{name}:{len}")
            }
        })
        .collect();
    names.sort();
    names.join(",")
}

fn outcome<T: std::fmt::Debug>(result: rusqlite::Result<T>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(rusqlite::Error::SqliteFailure(e, _)) => format!("err {}", e.extended_code),
        Err(other) => format!("err {other}"),
    }
}

fn differential(scenario: fn(&str, &Path) -> Vec<String>) {
    register();
    // In the target directory (ext4 in CI): some scenarios need chattr.
    let unix_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let uring_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let unix = scenario("unix", unix_dir.path());
    let uring = scenario("io_uring", uring_dir.path());
    if std::env::var("SHOW_LOG").is_ok() {
        eprintln!("{uring:#?}");
    }
    assert_eq!(unix, uring, "io_uring differs from unix");
}

fn open_uri(vfs: &str, uri: &str, flags: OpenFlags) -> rusqlite::Result<Connection> {
    Connection::open_with_flags_and_vfs(uri, flags | OpenFlags::SQLITE_OPEN_URI, vfs)
}

#[test]
fn wal_files_and_checkpoints_behave_like_unix() {
    differential(|vfs, dir| {
        let mut log = Vec::new();
        let db = dir.join("w.db");
        let conn = open(&db, vfs);
        log.extend(rows(&conn, "PRAGMA journal_mode=WAL"));
        conn.execute_batch(
            "CREATE TABLE t(x INTEGER PRIMARY KEY, y TEXT); PRAGMA wal_autocheckpoint=0;",
        )
        .unwrap();
        for i in 0..50 {
            conn.execute("INSERT INTO t(y) VALUES(printf('%0500d', ?1))", [i])
                .unwrap();
        }
        log.push(files(dir));
        let reader = open(&db, vfs);
        log.extend(rows(&reader, "SELECT count(*), sum(length(y)) FROM t"));
        for mode in ["PASSIVE", "FULL", "RESTART", "TRUNCATE"] {
            conn.execute("INSERT INTO t(y) VALUES('more')", []).unwrap();
            log.extend(rows(&conn, &format!("PRAGMA wal_checkpoint({mode})")));
            log.push(format!("{mode}: {}", files(dir)));
        }
        // A reader holding a snapshot blocks a RESTART checkpoint from completing.
        reader.execute_batch("BEGIN").unwrap();
        log.extend(rows(&reader, "SELECT count(*) FROM t"));
        conn.execute("INSERT INTO t(y) VALUES('during read')", [])
            .unwrap();
        log.extend(rows(&conn, "PRAGMA wal_checkpoint(RESTART)"));
        log.extend(rows(&reader, "SELECT count(*) FROM t"));
        reader.execute_batch("COMMIT").unwrap();
        log.extend(rows(&reader, "SELECT count(*) FROM t"));
        // journal_size_limit truncates the WAL after a checkpoint.
        conn.execute_batch("PRAGMA journal_size_limit=8192; PRAGMA wal_autocheckpoint=10;")
            .unwrap();
        for i in 0..40 {
            conn.execute("INSERT INTO t(y) VALUES(printf('%01000d', ?1))", [i])
                .unwrap();
        }
        log.push(format!("limited: {}", files(dir)));
        drop(reader);
        drop(conn);
        // Closing the last connection checkpoints and deletes -wal and -shm.
        log.push(format!("closed: {}", files(dir)));
        log
    });
}

#[test]
fn persistent_wal_and_exclusive_locking_behave_like_unix() {
    differential(|vfs, dir| {
        let mut log = Vec::new();
        let db = dir.join("p.db");
        let conn = open(&db, vfs);
        log.extend(rows(&conn, "PRAGMA journal_mode=WAL"));
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
            .unwrap();
        // SQLITE_FCNTL_PERSIST_WAL keeps the -wal file after the last connection closes.
        let mut persist: std::ffi::c_int = 1;
        // SAFETY: the handle is live and the opcode's argument is an int.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_PERSIST_WAL,
                (&mut persist as *mut std::ffi::c_int).cast(),
            )
        };
        log.push(format!("persist rc {rc}"));
        drop(conn);
        log.push(format!("persisted: {}", files(dir)));
        // locking_mode=EXCLUSIVE before WAL: the index lives in heap memory, no -shm.
        let ex = dir.join("x.db");
        let conn = open(&ex, vfs);
        log.extend(rows(&conn, "PRAGMA locking_mode=EXCLUSIVE"));
        log.extend(rows(&conn, "PRAGMA journal_mode=WAL"));
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1),(2);")
            .unwrap();
        log.push(format!("exclusive: {}", files(dir)));
        let other = open(&ex, vfs);
        other.busy_timeout(std::time::Duration::ZERO).unwrap();
        log.push(outcome(other.query_row(
            "SELECT count(*) FROM t",
            [],
            |r| r.get::<_, i64>(0),
        )));
        drop(conn);
        log.push(outcome(other.query_row(
            "SELECT count(*) FROM t",
            [],
            |r| r.get::<_, i64>(0),
        )));
        log
    });
}

#[test]
fn readonly_shm_behaves_like_unix() {
    differential(|vfs, dir| {
        let mut log = Vec::new();
        let db = dir.join("r.db");
        let writer = open(&db, vfs);
        writer
            .execute_batch(
                "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES(1),(2),(3);",
            )
            .unwrap();
        let uri = format!("file:{}?readonly_shm=1&mode=ro", db.display());
        // With a writer holding the index, a readonly_shm reader shares it.
        let reader = open_uri(vfs, &uri, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        log.push(outcome(
            reader.query_row("SELECT sum(x) FROM t", [], |r| r.get::<_, i64>(0)),
        ));
        writer.execute("INSERT INTO t VALUES(10)", []).unwrap();
        log.push(outcome(
            reader.query_row("SELECT sum(x) FROM t", [], |r| r.get::<_, i64>(0)),
        ));
        log.push(outcome(reader.execute("INSERT INTO t VALUES(99)", [])));
        // Copy the database and its WAL (no -shm) while the writer still has frames in
        // the WAL: a readonly_shm reader alone must rebuild a private index.
        writer
            .execute_batch("PRAGMA wal_autocheckpoint=0; INSERT INTO t VALUES(100);")
            .unwrap();
        let copy = dir.join("copy");
        std::fs::create_dir(&copy).unwrap();
        std::fs::copy(&db, copy.join("r.db")).unwrap();
        std::fs::copy(dir.join("r.db-wal"), copy.join("r.db-wal")).unwrap();
        let uri = format!(
            "file:{}?readonly_shm=1&mode=ro",
            copy.join("r.db").display()
        );
        let alone = open_uri(vfs, &uri, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        log.push(outcome(
            alone.query_row("SELECT sum(x) FROM t", [], |r| r.get::<_, i64>(0)),
        ));
        log.push(format!("copy: {}", files(&copy)));
        drop(alone);
        // An -shm file this process cannot open read-write (immutable, so even root
        // cannot) and nobody has initialised: SQLITE_READONLY_CANTINIT, and SQLite reads
        // the WAL through a private heap index.
        std::fs::copy(dir.join("r.db-shm"), copy.join("r.db-shm")).unwrap();
        let shm = copy.join("r.db-shm");
        let chattr = |flag: &str| {
            std::process::Command::new("chattr")
                .arg(flag)
                .arg(&shm)
                .status()
                .unwrap()
        };
        assert!(
            chattr("+i").success(),
            "chattr +i needs ext4 and CAP_LINUX_IMMUTABLE"
        );
        let uri = format!("file:{}?mode=ro", copy.join("r.db").display());
        let result = open_uri(vfs, &uri, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| c.query_row("SELECT sum(x) FROM t", [], |r| r.get::<_, i64>(0)));
        chattr("-i");
        log.push(format!("immutable shm: {}", outcome(result)));
        log
    });
}

/// Reads through the mapping must equal reads through the engine, while the database
/// grows (remapping) and after checkpoints truncate the WAL.
#[test]
fn mmap_results_identical_to_reads_while_growing() {
    register();
    let run = |vfs: &str, mmap_bytes: i64, journal: &str| -> (Vec<String>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let writer = open(&db, vfs);
        let reader = open(&db, vfs);
        for conn in [&writer, &reader] {
            conn.execute_batch(&format!(
                "PRAGMA mmap_size={mmap_bytes}; PRAGMA cache_size=5;"
            ))
            .unwrap();
        }
        writer
            .execute_batch(&format!(
                "PRAGMA journal_mode={journal}; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);"
            ))
            .unwrap();
        let mut log = Vec::new();
        for round in 0..12 {
            writer
                .execute(
                    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<400)
                     INSERT INTO t(v) SELECT printf('%d-%0300d', ?1, x) FROM n",
                    [round],
                )
                .unwrap();
            if round % 4 == 3 && journal == "wal" {
                writer
                    .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                    .unwrap();
            }
            writer
                .execute("UPDATE t SET v = v || 'u' WHERE k % 7 = ?1", [round % 7])
                .unwrap();
            log.extend(rows(
                &reader,
                "SELECT count(*), sum(length(v)), max(v) FROM t",
            ));
            log.extend(rows(
                &reader,
                "SELECT v FROM t WHERE k % 997 = 1 ORDER BY k",
            ));
        }
        log.extend(rows(&reader, "PRAGMA integrity_check"));
        let read_calls = if vfs == "io_uring" {
            let stats = rows(&reader, "PRAGMA io_uring_stats")[0].clone();
            let file = &stats[stats.find("\"file\":").unwrap()..];
            let start = file.find("\"read_calls\":").unwrap() + "\"read_calls\":".len();
            file[start..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        } else {
            0
        };
        (log, read_calls)
    };
    for journal in ["delete", "wal"] {
        let (baseline, _) = run("unix", 0, journal);
        let (unmapped, reads_unmapped) = run("io_uring", 0, journal);
        let (mapped, reads_mapped) = run("io_uring", 1 << 30, journal);
        let (unix_mapped, _) = run("unix", 1 << 30, journal);
        assert_eq!(
            baseline, unmapped,
            "{journal}: io_uring without mmap differs from unix"
        );
        assert_eq!(
            baseline, mapped,
            "{journal}: io_uring with mmap differs from unix"
        );
        assert_eq!(
            baseline, unix_mapped,
            "{journal}: unix with mmap differs from unix without"
        );
        // The mapping is really used: most page reads become xFetch instead of xRead.
        assert!(
            reads_mapped * 2 < reads_unmapped,
            "{journal}: mmap did not replace reads ({reads_mapped} vs {reads_unmapped})"
        );
    }
}

/// What a stock `sqlite3` process gets for `sql` with no busy timeout: its output, or
/// its error message.
fn stock(db: &Path, sql: &str) -> String {
    let output = common::stock_run(db, 0, sql);
    let text = if output.status.success() {
        output.stdout
    } else {
        output.stderr
    };
    String::from_utf8_lossy(&text).trim().to_string()
}

/// Connections of one process share one WAL index per database, as under `unix`: read
/// marks are counted per slot, so another process sees a mark held until the last of
/// them lets it go; an exclusive request fails while another connection of the process
/// holds the slot; and the process's locks stop other processes exactly as `unix`'s do.
#[test]
fn connections_of_one_process_lock_the_wal_index_like_unix() {
    differential(|vfs, dir| {
        let mut log = Vec::new();
        let db = dir.join("n.db");
        let writer = open(&db, vfs);
        log.extend(rows(&writer, "PRAGMA journal_mode=WAL"));
        writer
            .execute_batch(
                "PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x); INSERT INTO t VALUES(1);",
            )
            .unwrap();
        let first = open(&db, vfs);
        let second = open(&db, vfs);
        for conn in [&writer, &first, &second] {
            conn.busy_timeout(std::time::Duration::ZERO).unwrap();
        }
        // Two readers on one snapshot hold the same read mark.
        first.execute_batch("BEGIN").unwrap();
        log.extend(rows(&first, "SELECT count(*) FROM t"));
        second.execute_batch("BEGIN").unwrap();
        log.extend(rows(&second, "SELECT count(*) FROM t"));
        writer.execute("INSERT INTO t VALUES(2)", []).unwrap();
        log.push(format!(
            "both reading: {}",
            stock(&db, "PRAGMA wal_checkpoint(TRUNCATE);")
        ));
        first.execute_batch("COMMIT").unwrap();
        log.push(format!(
            "one reading: {}",
            stock(&db, "PRAGMA wal_checkpoint(TRUNCATE);")
        ));
        second.execute_batch("COMMIT").unwrap();
        log.push(format!(
            "none reading: {}",
            stock(&db, "PRAGMA wal_checkpoint(TRUNCATE);")
        ));
        // The write lock: refused to a second connection and to another process.
        first.execute_batch("BEGIN IMMEDIATE").unwrap();
        log.push(outcome(second.execute_batch("BEGIN IMMEDIATE")));
        log.push(format!(
            "other process: {}",
            stock(&db, "INSERT INTO t VALUES(3);")
        ));
        first.execute("INSERT INTO t VALUES(4)", []).unwrap();
        first.execute_batch("COMMIT").unwrap();
        log.push(outcome(second.execute_batch(
            "BEGIN IMMEDIATE; INSERT INTO t VALUES(5); COMMIT;",
        )));
        // A reader of this process on an old snapshot stops this process's RESTART, and
        // a stock reader stops it the same way.
        first.execute_batch("BEGIN").unwrap();
        log.extend(rows(&first, "SELECT count(*) FROM t"));
        writer.execute("INSERT INTO t VALUES(6)", []).unwrap();
        log.extend(rows(&writer, "PRAGMA wal_checkpoint(RESTART)"));
        first.execute_batch("COMMIT").unwrap();
        log.extend(rows(&writer, "PRAGMA wal_checkpoint(RESTART)"));
        log.push(stock(&db, "SELECT group_concat(x) FROM t;"));
        drop(first);
        drop(second);
        drop(writer);
        log.push(format!("closed: {}", files(dir)));
        log
    });
}
