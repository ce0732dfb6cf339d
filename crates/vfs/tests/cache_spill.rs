//! Pages SQLite writes before a commit — when its page cache overflows (a spill) or
//! when `sqlite3_db_cacheflush()` asks — compared with `unix`:
//! * after `sqlite3_db_cacheflush()`, and after a statement whose pages spilled, a copy
//!   of the files is `unix`'s at once in rollback mode; in WAL mode the database file is,
//!   and the `-wal` file gets its uncommitted frames at the next VFS call (or at once with
//!   `uring_write_behind=off`);
//! * while a transaction that spilled is open, a second process checkpointing and
//!   reading sees exactly what it sees under `unix` (only committed frames).
//!
//! SQLite's PRNG is seeded before each run, so WAL salts and journal nonces are the
//! same under both VFSes; the tests take turns, since the PRNG is process-wide.

mod common;

use std::path::Path;

use common::{process_state_lock, Mode};
use rusqlite::Connection;

fn seed_prng() {
    common::seed_prng(11);
}

/// SQL making table `t` of `rows` rows of 300-character text, ids 1..=rows.
fn table_of(rows: u32) -> String {
    format!(
        "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<{rows})
           INSERT INTO t(b) SELECT printf('%0300d', x) FROM n;"
    )
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
    let first_differences = a
        .iter()
        .zip(b)
        .filter_map(|((name, x), (_, y))| {
            let at = x.iter().zip(y).position(|(p, q)| p != q)?;
            Some(format!("{name} from byte {at}"))
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "unix [{}] vs io_uring [{}]; bytes differ in [{first_differences}]",
        sizes(a),
        sizes(b)
    )
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
    conn.execute_batch(&table_of(100)).unwrap();
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
    conn.execute_batch(&format!(
        "{}
         BEGIN;
         UPDATE t SET b = upper(b) || 'x' WHERE a % 3 = 0;
         WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<40)
           INSERT INTO t(b) SELECT printf('%0300d', x + 5000) FROM n;",
        table_of(100)
    ))
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
/// preceded in rollback mode by the journal's sync and a lock change). In rollback mode
/// those pages reach the database file before `xWrite` returns, as under `unix` (only a
/// commit's pages, opened by page 1, are queued): a copy made right after the call is
/// `unix`'s. In WAL mode the pages are frames past the last commit: the database file is
/// `unix`'s at once, the `-wal` file gets them at the connection's next VFS call (here a
/// PRAGMA's file control); with `uring_write_behind=off`, at once (docs/ARCHITECTURE.md,
/// "Pages written before a commit").
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
    match mode {
        Mode::Rollback => assert!(
            unix_after == ours_after,
            "{mode:?}: files differ right after sqlite3_db_cacheflush: {}",
            describe_difference(&unix_after, &ours_after)
        ),
        Mode::Wal => {
            let file = |files: &[(String, Vec<u8>)], name: &str| {
                files
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, bytes)| bytes.clone())
            };
            assert!(
                file(&unix_after, "f.db") == file(&ours_after, "f.db"),
                "{mode:?}: the database file differs right after sqlite3_db_cacheflush"
            );
            // The documented difference: the last frames are still queued.
            assert!(
                file(&unix_after, "f.db-wal") != file(&ours_after, "f.db-wal"),
                "{mode:?}: the last frames were expected to stay queued until the next VFS \
                 call (docs/ARCHITECTURE.md); if they now reach the file at once, update \
                 the docs"
            );
        }
    }
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
fn cache_flush_leaves_unix_files_at_once_in_rollback_mode() {
    cache_flush_against_unix(Mode::Rollback);
}

#[test]
fn cache_flush_leaves_unix_database_file_at_once_and_wal_at_the_next_call_in_wal_mode() {
    cache_flush_against_unix(Mode::Wal);
}

/// A rollback-mode transaction that overflows its page cache: at every step — after each
/// statement, whose spilled pages no VFS call follows — the files equal `unix`'s, with
/// `synchronous` FULL and OFF (no journal sync before a spill) and in exclusive locking
/// mode (whose later commits leave page 1 alone, so their pages are written at once).
fn spilling_rollback_transaction_files(vfs: &str, pragmas: &str) -> Vec<Vec<(String, Vec<u8>)>> {
    let dir = tempfile::tempdir().unwrap();
    seed_prng();
    let conn = common::open(&dir.path().join("f.db"), vfs);
    // Statement journals in memory: a temporary file's name would draw on SQLite's PRNG
    // under `unix` (`unixGetTempname`), and the journals' nonces would then differ.
    conn.execute_batch(&format!(
        "PRAGMA temp_store=MEMORY; {pragmas}
         {}
         PRAGMA cache_size=5;",
        table_of(300)
    ))
    .unwrap();
    let mut steps = vec![copy_files(dir.path())];
    conn.execute_batch("BEGIN").unwrap();
    for round in 0..4 {
        // New rows fill new pages at the end of the table: the statement's last VFS
        // calls are spilled page writes, with no read after them.
        conn.execute(
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x<60)
               INSERT INTO t(b) SELECT printf('%0300d', x + ?1 * 1000) FROM n",
            [round],
        )
        .unwrap();
        steps.push(copy_files(dir.path()));
    }
    conn.execute_batch("COMMIT").unwrap();
    steps.push(copy_files(dir.path()));
    conn.execute_batch("UPDATE t SET b = lower(b) WHERE a % 7 = 0")
        .unwrap();
    steps.push(copy_files(dir.path()));
    common::integrity_ok(&conn);
    steps
}

#[test]
fn a_spilling_rollback_transaction_leaves_unix_files_at_every_step() {
    let _serial = process_state_lock();
    common::register();
    for pragmas in [
        "PRAGMA synchronous=FULL;",
        "PRAGMA synchronous=OFF;",
        "PRAGMA locking_mode=EXCLUSIVE;",
    ] {
        let unix = spilling_rollback_transaction_files("unix", pragmas);
        let ours = spilling_rollback_transaction_files(common::VFS, pragmas);
        assert!(
            unix[0] != unix[1],
            "{pragmas} the first statement spilled nothing under unix; the test proves nothing"
        );
        assert_eq!(unix.len(), ours.len());
        for (step, (u, o)) in unix.iter().zip(&ours).enumerate() {
            assert!(
                u == o,
                "{pragmas} files differ at step {step}: {}",
                describe_difference(u, o)
            );
        }
    }
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
    // Its randomblob() draws on the PRNG the other tests seed.
    let _serial = process_state_lock();
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

/// The rows a fresh `unix` connection reads from a copy of `db` alone (no journal: the
/// copy shows the database file's bytes as they are), as SQLite's own cache-flush tests
/// inspect the file.
fn rows_of_a_copy(db: &Path, sql: &str) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let copy = scratch.path().join("copy.db");
    std::fs::copy(db, &copy).unwrap();
    let conn = common::open(&copy, "unix");
    common::rows(&conn, sql).join(" ")
}

/// The scenarios of SQLite's `cacheflush.test` on a connection of `vfs`: after each
/// `sqlite3_db_cacheflush()`, what a copy of each database file reads, and the call's
/// outcome (SQLITE_BUSY while another connection reads, ATTACHed databases, savepoints).
fn cache_flush_scenarios(vfs: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (main, aux) = (dir.path().join("test.db"), dir.path().join("test.db2"));
    let db = common::open(&main, vfs);
    // SQLITE_BUSY at once, not after rusqlite's default 5 s of retries.
    db.busy_timeout(std::time::Duration::ZERO).unwrap();
    let mut seen = Vec::new();
    let mut flush_and_read = |db: &Connection, file: &Path, sql: &str| {
        let outcome = match db.cache_flush() {
            Ok(()) => "ok".to_string(),
            Err(e) => e.to_string(),
        };
        seen.push(format!("{outcome}: {}", rows_of_a_copy(file, sql)));
    };
    db.execute_batch(
        "CREATE TABLE t1(a, b); INSERT INTO t1 VALUES(1, 2);
         BEGIN; INSERT INTO t1 VALUES(3, 4);",
    )
    .unwrap();
    flush_and_read(&db, &main, "SELECT * FROM t1");
    db.execute_batch(
        "COMMIT; CREATE TABLE t2(a, b);
         BEGIN; INSERT INTO t1 VALUES(5, 6); INSERT INTO t2 VALUES('a', 'b');",
    )
    .unwrap();
    flush_and_read(&db, &main, "SELECT * FROM t1 UNION ALL SELECT * FROM t2");
    // Another connection's read transaction: the flush needs EXCLUSIVE, so SQLITE_BUSY,
    // and nothing reaches the file.
    db.execute_batch("COMMIT; BEGIN; INSERT INTO t1 VALUES(9, 10);")
        .unwrap();
    let reader = common::open(&main, vfs);
    reader.execute_batch("BEGIN; SELECT * FROM t1;").unwrap();
    flush_and_read(&db, &main, "SELECT * FROM t1");
    drop(reader);
    flush_and_read(&db, &main, "SELECT * FROM t1");
    db.execute_batch("COMMIT").unwrap();
    // ATTACHed databases are flushed too.
    db.execute(
        "ATTACH ?1 AS aux",
        [aux.to_str().expect("a UTF-8 temporary path")],
    )
    .unwrap();
    db.execute_batch(
        "CREATE TABLE aux.t4(x, y); INSERT INTO t4 VALUES('A', 'B');
         BEGIN; INSERT INTO t1 VALUES(11, 12); INSERT INTO t4 VALUES('C', 'D');",
    )
    .unwrap();
    flush_and_read(&db, &main, "SELECT * FROM t1");
    flush_and_read(&db, &aux, "SELECT * FROM t4");
    db.execute_batch("COMMIT").unwrap();
    // Savepoints: what a flush writes follows ROLLBACK TO.
    db.execute_batch(
        "CREATE TABLE ta(a, aa); CREATE TABLE tb(b, bb);
         INSERT INTO ta VALUES('a', randomblob(500)); INSERT INTO tb VALUES('b', randomblob(500));
         BEGIN; UPDATE ta SET a = 'A'; SAVEPOINT one; UPDATE tb SET b = 'B';",
    )
    .unwrap();
    let both = "SELECT a FROM ta UNION ALL SELECT b FROM tb";
    flush_and_read(&db, &main, both);
    db.execute_batch("ROLLBACK TO one").unwrap();
    flush_and_read(&db, &main, both);
    db.execute_batch(
        "INSERT INTO tb VALUES('c', randomblob(10)); SAVEPOINT two; UPDATE tb SET b = upper(b);",
    )
    .unwrap();
    flush_and_read(&db, &main, both);
    db.execute_batch("ROLLBACK TO two").unwrap();
    flush_and_read(&db, &main, both);
    db.execute_batch("ROLLBACK").unwrap();
    seen.push(common::rows(&db, both).join(" "));
    common::integrity_ok(&db);
    seen
}

/// SQLite's own `cacheflush.test` copies the database file right after
/// `sqlite3_db_cacheflush()` and reads the copy: the same here as under `unix`.
#[test]
fn sqlites_cache_flush_scenarios_read_the_same_from_a_copy_as_under_unix() {
    // Its randomblob() draws on the PRNG the other tests seed.
    let _serial = process_state_lock();
    common::register();
    let unix = cache_flush_scenarios("unix");
    assert_eq!(
        unix[0], "ok: 1|2 3|4",
        "under unix the flushed row was not in the copy: {unix:?}"
    );
    assert!(unix[2].contains("database is locked"), "{unix:?}");
    let ours = cache_flush_scenarios(common::VFS);
    assert_eq!(ours, unix);
}

/// One write to a `-wal` file, and what SQLite had published to readers by then.
#[derive(Clone, Copy, Debug)]
struct WalWrite {
    /// The first frame the write reaches (1-based).
    frame: u64,
    len: usize,
    /// A commit-frame header written alone.
    commit_header: bool,
    /// The WAL index's `mxFrame` (the last frame published) at the moment of the write.
    published: u32,
    /// The write changes a byte of a published frame.
    changes_published: bool,
}

static WAL_WRITES: std::sync::Mutex<Vec<WalWrite>> = std::sync::Mutex::new(Vec::new());

/// 4 KiB pages: the WAL's frames are 4120 bytes.
const FRAME_BYTES: u64 = 4096 + 24;

/// A `pwrite` stand-in that records every WAL write (see `WAL_WRITES`), reading the
/// published `mxFrame` from the `-shm` file (WalIndexHdr.mxFrame, offset 16).
unsafe extern "C" fn recording_pwrite(
    fd: std::ffi::c_int,
    buf: *const std::ffi::c_void,
    len: libc::size_t,
    offset: libc::off_t,
) -> libc::ssize_t {
    let path = common::system_calls::path_of_fd(fd);
    if path.ends_with("-wal") && offset >= 32 {
        // SAFETY: SQLite's buffer of `len` bytes, live for the call.
        let bytes = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
        let commit_header = len == 24 && bytes[4..8] != [0, 0, 0, 0];
        let shm = format!("{}-shm", path.trim_end_matches("-wal"));
        let mut index = [0u8; 20];
        let published = std::fs::File::open(&shm)
            .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut index, 0))
            .map(|()| u32::from_ne_bytes(index[16..20].try_into().unwrap()))
            .unwrap_or(0);
        // The part of the write inside published frames, compared with the file's bytes.
        let published_end = 32 + u64::from(published) * FRAME_BYTES;
        let inside = (published_end.saturating_sub(offset as u64) as usize).min(len);
        let mut current = vec![0u8; inside];
        let changes_published = inside > 0
            && std::fs::File::open(&path)
                .and_then(|f| {
                    std::os::unix::fs::FileExt::read_exact_at(&f, &mut current, offset as u64)
                })
                .map_or(true, |()| current[..] != bytes[..inside]);
        WAL_WRITES.lock().unwrap().push(WalWrite {
            frame: (offset as u64 - 32) / FRAME_BYTES + 1,
            len,
            commit_header,
            published,
            changes_published,
        });
    }
    // SAFETY: forwarded arguments.
    unsafe { libc::pwrite(fd, buf, len, offset) }
}

/// Runs `sql` on `conn` with every WAL write recorded; returns the records.
fn recording_wal_writes(conn: &Connection, sql: &str) -> Vec<WalWrite> {
    use common::system_calls::{erase, set_call};
    WAL_WRITES.lock().unwrap().clear();
    assert_eq!(
        set_call(
            common::VFS,
            Some(c"pwrite"),
            Some(erase(
                recording_pwrite as unsafe extern "C" fn(_, _, _, _) -> _
            )),
        ),
        0
    );
    let outcome = conn.execute_batch(sql);
    set_call(common::VFS, None, None);
    outcome.unwrap();
    common::integrity_ok(conn);
    WAL_WRITES.lock().unwrap().clone()
}

/// A database in WAL mode with `settings`, 400 rows, and a 10-page cache.
fn spilling_wal_database(dir: &Path, uri: &str, settings: &str) -> Connection {
    let name = format!("file:{}{uri}", dir.join("r.db").display());
    let conn = common::open(Path::new(&name), common::VFS);
    conn.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; {settings}
         {}
         PRAGMA cache_size=10;",
        table_of(400)
    ))
    .unwrap();
    conn
}

/// A WAL transaction that spilled frames and then changed those pages again makes SQLite
/// rewrite them in place at commit and then rewrite the checksums of every frame from the
/// first rewritten one to the commit frame (wal.c `walRewriteChecksums`: read a frame,
/// write its header). The rewritten commit-frame header must reach the file before SQLite
/// publishes the commit in the WAL index, as under `unix`: a process killed between the
/// publication and its next VFS call would otherwise leave a commit other connections
/// have read whose frames fail WAL recovery's checksum.
#[test]
fn rewritten_commit_frame_checksums_reach_the_wal_before_the_commit_is_published() {
    let _serial = process_state_lock();
    common::register();
    let dir = tempfile::tempdir().unwrap();
    let conn = spilling_wal_database(dir.path(), "", "PRAGMA synchronous=NORMAL;");
    let writes = recording_wal_writes(
        &conn,
        "BEGIN;
         UPDATE t SET b = upper(b) || 'x';
         UPDATE t SET b = b || 'y' WHERE a <= 40;
         COMMIT;",
    );
    let rewritten: Vec<_> = writes.iter().filter(|w| w.commit_header).collect();
    assert!(
        !rewritten.is_empty(),
        "no commit-frame header was rewritten alone: the test proves nothing"
    );
    for write in rewritten {
        assert!(
            write.published < write.frame as u32,
            "the commit frame {}'s rewritten header was written after the WAL index \
             published frames up to {}",
            write.frame,
            write.published
        );
    }
}

/// No write ever changes a WAL frame SQLite has already published to readers: every byte
/// of a commit is in the file before `walIndexWriteHdr`, as under `unix` — with spills and
/// in-place rewrites, with `synchronous` NORMAL and FULL, with `psow=0` (whose synced
/// commits are padded to a sector boundary and synced inside the last padding frame, the
/// rest of which SQLite writes after the sync), and with `uring_wal_direct=on` (whose
/// block writes rewrite the end of the last published frame with the bytes it holds).
#[test]
fn no_wal_write_changes_a_frame_already_published() {
    let _serial = process_state_lock();
    common::register();
    for (uri, synchronous) in [
        ("", "NORMAL"),
        ("", "FULL"),
        ("?psow=0", "FULL"),
        ("?psow=0&uring_wal_direct=on", "FULL"),
        ("?uring_wal_direct=on", "FULL"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let conn = spilling_wal_database(
            dir.path(),
            uri,
            &format!("PRAGMA synchronous={synchronous};"),
        );
        let writes = recording_wal_writes(
            &conn,
            "INSERT INTO t(b) VALUES('one');
             BEGIN;
             UPDATE t SET b = upper(b) || 'x';
             UPDATE t SET b = b || 'y' WHERE a <= 40;
             COMMIT;
             INSERT INTO t(b) VALUES('two');
             BEGIN; UPDATE t SET b = b || 'z' WHERE a % 3 = 0; COMMIT;",
        );
        assert!(
            writes.len() > 10,
            "{uri} {synchronous}: too few WAL writes recorded"
        );
        for write in &writes {
            assert!(
                !write.changes_published,
                "{uri} synchronous={synchronous}: a {}-byte write from frame {} changed \
                 bytes of frames the WAL index had published (up to {})",
                write.len, write.frame, write.published
            );
        }
    }
}
