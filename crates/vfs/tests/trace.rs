//! Trace logging (`RUST_LOG=sqlite_uring=trace`): a scripted session's records name the
//! calls SQLite made, in order, with the right offsets; with tracing off nothing is
//! written and the logger is not even asked.
//!
//! `log` takes one logger per process, so this binary installs one capturing logger, and
//! the tests take turns (`log::max_level()` is process-wide) and keep only the records of
//! their own thread.
#![cfg(feature = "trace")]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;

use common::{open_ours, rows};

struct Captured {
    thread: ThreadId,
    target: String,
    message: String,
}

/// Keeps every record of a `sqlite_uring` target, and counts how often it was asked.
struct Capture {
    records: Mutex<Vec<Captured>>,
    accept: AtomicBool,
    asked: Mutex<Vec<ThreadId>>,
}

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.asked.lock().unwrap().push(std::thread::current().id());
        self.accept.load(Ordering::SeqCst) && metadata.target().starts_with("sqlite_uring")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            self.records.lock().unwrap().push(Captured {
                thread: std::thread::current().id(),
                target: record.target().to_string(),
                message: record.args().to_string(),
            });
        }
    }

    fn flush(&self) {}
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture: &'static Capture = Box::leak(Box::new(Capture {
            records: Mutex::new(Vec::new()),
            accept: AtomicBool::new(true),
            asked: Mutex::new(Vec::new()),
        }));
        log::set_logger(capture).expect("the only logger of this test binary");
        capture
    })
}

/// One test at a time: the max level and the logger's answer are process-wide.
fn turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    let guard = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let capture = capture();
    capture.records.lock().unwrap().clear();
    capture.asked.lock().unwrap().clear();
    capture.accept.store(true, Ordering::SeqCst);
    guard
}

/// This thread's records of `target`, as messages.
fn messages(target: &str) -> Vec<String> {
    let me = std::thread::current().id();
    capture()
        .records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.thread == me && r.target == target)
        .map(|r| r.message.clone())
        .collect()
}

fn times_asked_on_this_thread() -> usize {
    let me = std::thread::current().id();
    capture()
        .asked
        .lock()
        .unwrap()
        .iter()
        .filter(|t| **t == me)
        .count()
}

/// Index of the first record at or after `from` that starts with `call` and contains
/// every one of `parts`; panics with the whole trace when there is none.
fn find(trace: &[String], from: usize, call: &str, parts: &[&str]) -> usize {
    trace
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, line)| {
            line.starts_with(&format!("{call} ")) && parts.iter().all(|p| line.contains(p))
        })
        .map(|(index, _)| index)
        .unwrap_or_else(|| {
            panic!(
                "no `{call}` record containing {parts:?} at or after record {from}; trace:\n{}",
                trace.join("\n")
            )
        })
}

fn quoted(path: &Path) -> String {
    format!("file={:?}", path.display().to_string())
}

/// Field `key=value` of a record, as a number.
fn field(line: &str, key: &str) -> u64 {
    line.split(' ')
        .find_map(|word| word.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key}= is not a number in {line}"))
}

#[test]
fn rollback_session_is_traced_in_order_with_page_offsets() {
    let _turn = turn();
    log::set_max_level(log::LevelFilter::Trace);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("traced.db");
    let journal = dir.path().join("traced.db-journal");

    // Syncs on the ring, so the trace shows a ring submission too (the journal's fsync and
    // its directory's, submitted together).
    common::register();
    let conn = rusqlite::Connection::open_with_flags_and_vfs(
        format!("file:{}?uring_syncs=ring", db.display()),
        rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        common::VFS,
    )
    .unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode=DELETE; PRAGMA page_size=4096;
         CREATE TABLE t(x);
         BEGIN; INSERT INTO t VALUES(randomblob(3000)), (randomblob(3000)), (randomblob(3000));
         COMMIT;",
    )
    .unwrap();
    let page_count: u64 = rows(&conn, "PRAGMA page_count")[0].parse().unwrap();
    drop(conn);
    log::set_max_level(log::LevelFilter::Off);
    assert!(page_count >= 3, "the inserts should have split the table");

    let trace = messages(sqlite_uring::trace::TARGET_VFS);
    let db_file = quoted(&db);
    let journal_file = quoted(&journal);
    for line in &trace {
        assert!(
            line.contains(" rc=") && line.contains(" duration_ns="),
            "every record has a result and a duration: {line}"
        );
    }

    // The last transaction (the INSERT): its first journal open and everything after.
    let open_db = find(&trace, 0, "xOpen", &[&db_file, "main_db", "rc=0"]);
    let shared = find(
        &trace,
        open_db,
        "xLock",
        &[&db_file, "level=SHARED", "rc=0"],
    );
    let last_journal_open = trace
        .iter()
        .rposition(|l| l.starts_with("xOpen ") && l.contains(&journal_file))
        .expect("the INSERT opened a rollback journal");
    let reserved = trace[..last_journal_open]
        .iter()
        .rposition(|l| l.starts_with("xLock ") && l.contains("level=RESERVED"))
        .expect("RESERVED before the journal is opened");
    assert!(shared < reserved);
    assert!(trace[last_journal_open].contains("main_journal"));
    let journal_write = find(&trace, last_journal_open, "xWrite", &[&journal_file]);
    let journal_sync = find(&trace, journal_write, "xSync", &[&journal_file, "rc=0"]);
    let exclusive = find(
        &trace,
        journal_write,
        "xLock",
        &[&db_file, "level=EXCLUSIVE"],
    );
    // Page n of the database is written at offset page_size × (n − 1).
    let last_page = format!("offset={} len=4096", 4096 * (page_count - 1));
    let page_write = find(
        &trace,
        journal_sync,
        "xWrite",
        &[&db_file, &last_page, "rc=0"],
    );
    assert!(exclusive < page_write);
    for line in trace[journal_sync..]
        .iter()
        .filter(|l| l.starts_with("xWrite ") && l.contains(&db_file))
    {
        assert_eq!(field(line, "offset") % 4096, 0, "{line}");
        assert_eq!(field(line, "len"), 4096, "{line}");
    }
    let db_sync = find(&trace, page_write, "xSync", &[&db_file, "flags=", "rc=0"]);
    let delete = find(&trace, db_sync, "xDelete", &[&journal_file, "rc=0"]);
    let unlock = find(
        &trace,
        delete,
        "xUnlock",
        &[&db_file, "level=SHARED", "rc=0"],
    );
    find(&trace, unlock, "xUnlock", &[&db_file, "level=NONE", "rc=0"]);
    find(&trace, unlock, "xClose", &[&db_file, "rc=0"]);
    find(&trace, open_db, "xFileSize", &[&db_file, "size=", "rc=0"]);

    // Below the calls: the batches the engine performed, and the ring submissions.
    // Write-behind coalesces adjacent pages: some write covers the last page.
    let batches = messages(sqlite_uring::trace::TARGET_IO);
    let end = 4096 * page_count;
    assert!(
        batches.iter().flat_map(|b| b.split("; ")).any(|op| {
            op.contains("write fd=")
                && field(op, "offset") < end
                && field(op, "offset") + field(op, "len") >= end
        }),
        "a batch wrote the last page:\n{}",
        batches.join("\n")
    );
    assert!(batches.iter().any(|b| b.contains("fsync fd=")));
    assert!(batches.iter().all(|b| b.contains("kernel_entries=")));
    if batches
        .iter()
        .any(|b| b.starts_with("batch engine=io_uring"))
    {
        // With uring_syncs=ring the journal's first sync goes to the ring with its
        // directory's sync: 2 entries.
        let ring = messages(sqlite_uring::trace::TARGET_RING);
        assert!(
            ring.iter().any(|r| r.starts_with("submit entries=2 ")
                && r.contains("kernel_entries=1")
                && r.contains("completions=2")),
            "{}",
            ring.join("\n")
        );
    }
}

#[test]
fn wal_session_traces_shared_memory_frames_and_fetches() {
    let _turn = turn();
    log::set_max_level(log::LevelFilter::Trace);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wal.db");
    let wal = dir.path().join("wal.db-wal");

    let conn = open_ours(&db);
    conn.execute_batch(
        "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA mmap_size=1048576;
         CREATE TABLE t(x); INSERT INTO t VALUES(randomblob(40000));
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
    .unwrap();
    // Reads the overflow pages through the mapping (all but the last page of the file).
    assert_eq!(rows(&conn, "SELECT length(x) FROM t"), ["40000"]);
    drop(conn);
    log::set_max_level(log::LevelFilter::Off);

    let trace = messages(sqlite_uring::trace::TARGET_VFS);
    let wal_file = quoted(&wal);
    let db_file = quoted(&db);
    let open_wal = find(&trace, 0, "xOpen", &[&wal_file, "wal", "rc=0"]);
    find(
        &trace,
        0,
        "xShmMap",
        &[&db_file, "region=0 size=32768", "rc=0"],
    );
    find(&trace, 0, "xShmLock", &[&db_file, "flags=LOCK|"]);
    find(&trace, 0, "xShmBarrier", &[&db_file]);
    // WAL header (32 bytes), then each frame: a 24-byte header and the page.
    let header = find(&trace, open_wal, "xWrite", &[&wal_file, "offset=0 len=32"]);
    let frame = find(&trace, header, "xWrite", &[&wal_file, "offset=32 len=24"]);
    find(&trace, frame, "xWrite", &[&wal_file, "offset=56 len=4096"]);
    find(&trace, frame, "xFileControl", &[&db_file, "op=CKPT_START"]);
    find(&trace, frame, "xTruncate", &[&wal_file, "size=0"]);
    find(&trace, 0, "xFetch", &[&db_file, "mapped=1", "rc=0"]);
    find(&trace, 0, "xUnfetch", &[&db_file]);
    find(&trace, 0, "xShmUnmap", &[&db_file, "delete=1"]);
}

#[test]
fn disabled_tracing_writes_nothing_and_never_asks_the_logger() {
    let _turn = turn();
    let session = |name: &str| {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_ours(&dir.path().join(name));
        conn.execute_batch(
            "CREATE TABLE t(x); BEGIN; INSERT INTO t VALUES(randomblob(5000)); COMMIT;
             PRAGMA journal_mode=WAL; INSERT INTO t VALUES(2);",
        )
        .unwrap();
        assert_eq!(rows(&conn, "SELECT count(*) FROM t"), ["2"]);
    };

    // Off (no logger raised log::max_level()): the hooks stop at the atomic load.
    log::set_max_level(log::LevelFilter::Off);
    session("off.db");
    assert_eq!(times_asked_on_this_thread(), 0);
    assert!(messages(sqlite_uring::trace::TARGET_VFS).is_empty());
    assert!(messages(sqlite_uring::trace::TARGET_IO).is_empty());
    assert!(messages(sqlite_uring::trace::TARGET_RING).is_empty());

    // A logger at trace level that refuses our targets: asked, but nothing is written.
    capture().accept.store(false, Ordering::SeqCst);
    log::set_max_level(log::LevelFilter::Trace);
    session("refused.db");
    log::set_max_level(log::LevelFilter::Off);
    assert!(times_asked_on_this_thread() > 0);
    assert!(capture().records.lock().unwrap().is_empty());
}

#[test]
fn compiled_in_is_reported() {
    const { assert!(sqlite_uring::trace::COMPILED_IN) };
    // The extension and the CLI parse RUST_LOG like env_logger.
    let filter = sqlite_uring::trace::Filter::parse("warn,sqlite_uring::vfs=trace");
    assert_eq!(
        filter.level_for(sqlite_uring::trace::TARGET_VFS),
        log::LevelFilter::Trace
    );
    assert_eq!(
        filter.level_for(sqlite_uring::trace::TARGET_RING),
        log::LevelFilter::Warn
    );
}
