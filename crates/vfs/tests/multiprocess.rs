//! Multi-process compatibility: a stock `sqlite3` process (unix VFS, POSIX locks) and
//! processes using the io_uring VFS (OFD locks on the same bytes) share one database, in
//! rollback (`journal_mode=DELETE`) and WAL mode. Every test asserts outcomes (counts,
//! sums, error codes, integrity), never timing: the interleavings vary from run to run,
//! the invariants may not.
//!
//! The io_uring side runs as `examples/torture` children (see that file), or in-process
//! where a lock must be held across the test's own steps.

mod common;

use std::fmt::Debug;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rusqlite::{Connection, ErrorCode};

const COUNTER_SCHEMA: &str = "
    CREATE TABLE counter(id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
    INSERT INTO counter VALUES (1, 0);
    -- One row per increment; the primary key rejects a transaction applied twice.
    CREATE TABLE log(who TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (who, seq));
";

fn sync_for(mode: Mode) -> &'static str {
    // Locking is under test here, not durability: skip the fsyncs that would dominate
    // the runtime (WAL NORMAL still syncs at checkpoints, exercising that path).
    match mode {
        Mode::Rollback => "off",
        Mode::Wal => "normal",
    }
}

/// Holds EXCLUSIVE (rollback) or the WAL write lock through our VFS, so that writers
/// spawned meanwhile block on their first transaction until [`StartGate::open`].
struct StartGate(Connection);

impl StartGate {
    fn close(db: &Path) -> StartGate {
        let conn = open_ours(db);
        conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
        StartGate(conn)
    }

    /// Releases the lock. The connection stays open until the result is dropped (in WAL
    /// mode it keeps the WAL from being checkpointed and deleted by the last closer).
    fn open(self) -> Connection {
        self.0.execute_batch("COMMIT").unwrap();
        self.0
    }
}

// ---------------------------------------------------------------------------------------
// 1. Mixed writers: no lost update.
// ---------------------------------------------------------------------------------------

/// The stock shell's increments, and each io_uring child's (two children, so that
/// io_uring processes also contend with each other).
const STOCK_INCREMENTS: u64 = 1500;
const OURS_WRITERS: [(&str, u64); 2] = [("ours-a", 1500), ("ours-b", 750)];

/// Lock-free work between two transactions of a writer, so that the other process finds
/// the lock free now and then and the commits of both interleave (with SQLite's sleeping
/// busy handler alone, one writer tends to run to completion while the other sleeps).
/// Pacing only, no synchronisation: the outcome is asserted whatever the interleaving.
const STOCK_PACE: &str =
    "WITH RECURSIVE c(x) AS (VALUES (1) UNION ALL SELECT x + 1 FROM c WHERE x < 3000) \
     SELECT count(*) FROM c;\n";
const OURS_PACE_US: u64 = 1000;

/// A stock shell and io_uring children increment one counter concurrently. A child
/// alternates BEGIN IMMEDIATE with deferred read-then-write-absolute transactions (which
/// lose updates if the locks fail to exclude), retrying on BUSY; the shell uses BEGIN
/// IMMEDIATE with a busy timeout. Every increment is also logged, so a lost or doubled
/// transaction shows up in the counts.
fn mixed_writers(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("counter.db");
    create_db(&db, mode, COUNTER_SCHEMA);

    let mut script = format!(
        ".timeout 30000\nSELECT 'ready';\nPRAGMA synchronous={};\n",
        sync_for(mode)
    );
    for i in 0..STOCK_INCREMENTS {
        script.push_str(STOCK_PACE);
        script.push_str(&format!(
            "BEGIN IMMEDIATE;\nUPDATE counter SET n = n + 1 WHERE id = 1;\n\
             INSERT INTO log(who, seq) VALUES ('stock', {i});\nCOMMIT;\n"
        ));
    }
    // Start the writers together: hold the database lock until all have started and
    // said so, so none gets a head start of hundreds of transactions.
    let gate = StartGate::close(&db);
    let ours: Vec<Guard> = OURS_WRITERS
        .iter()
        .map(|(tag, count)| {
            spawn_torture(
                "increment",
                &[
                    format!("db={}", db.display()),
                    format!("mode={}", mode.pragma()),
                    format!("sync={}", sync_for(mode)),
                    format!("count={count}"),
                    format!("tag={tag}"),
                    "busy=spin".to_string(),
                    format!("pace_us={OURS_PACE_US}"),
                ],
            )
        })
        .collect();
    let stock = spawn_stock_script(&db, &script, "incrementing writer");
    let ours: Vec<Started> = ours
        .into_iter()
        .map(|child| await_line(child, |line| line == "ready"))
        .collect();
    let stock = await_line(stock, |line| line == "ready");
    gate.open();
    let stock_out = stock.wait();
    let ours_out: Vec<(String, Output)> = ours
        .into_iter()
        .map(|child| (child.what().to_string(), child.wait()))
        .collect();
    expect_success("stock sqlite3 incrementing writer", &stock_out);
    let mut children_said = String::new();
    for (what, output) in &ours_out {
        expect_success(what, output);
        children_said.push_str(&format!(
            "{what}: {}\n",
            String::from_utf8_lossy(&output.stdout)
                .trim()
                .replace('\n', " ")
        ));
    }
    eprint!("mixed writers {mode:?}:\n{children_said}");

    let mut writers: Vec<(&str, u64)> = OURS_WRITERS.to_vec();
    writers.push(("stock", STOCK_INCREMENTS));
    writers.sort();
    let total: u64 = writers.iter().map(|(_, count)| count).sum();
    let mut expected = format!("{total}\n");
    for (tag, count) in &writers {
        expected.push_str(&format!("{tag}|{count}|0|{}\n", count - 1));
    }
    let query = "SELECT n FROM counter;\n\
                 SELECT who, count(*), min(seq), max(seq) FROM log GROUP BY who ORDER BY who;";
    assert_eq!(
        stock_ok(&db, query),
        expected,
        "final counter/log as read by stock sqlite3 ({mode:?}); children said:\n{children_said}"
    );
    let conn = open_ours(&db);
    let n: i64 = conn
        .query_row("SELECT n FROM counter", [], |r| r.get(0))
        .unwrap();
    let logged: i64 = conn
        .query_row("SELECT count(*) FROM log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        (n, logged),
        (total as i64, total as i64),
        "final counter and log rows as read through io_uring ({mode:?})"
    );
    // How finely the writers interleaved (reported, not asserted: it is timing).
    let switches: i64 = conn
        .query_row(
            "SELECT count(*) FROM log a JOIN log b ON b.rowid = a.rowid + 1 WHERE a.who <> b.who",
            [],
            |r| r.get(0),
        )
        .unwrap();
    eprintln!("mixed writers {mode:?}: commits alternated between the processes {switches} times");
    drop(conn);
    stock_integrity(&db);
    ours_integrity(&db);
}

#[test]
fn mixed_writers_no_lost_update_rollback() {
    mixed_writers(Mode::Rollback);
}

#[test]
fn mixed_writers_no_lost_update_wal() {
    mixed_writers(Mode::Wal);
}

// ---------------------------------------------------------------------------------------
// 2. A lock held by either side blocks the other.
// ---------------------------------------------------------------------------------------

fn assert_busy<T: Debug>(what: &str, result: rusqlite::Result<T>) {
    match result {
        Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {}
        other => panic!("{what}: expected SQLITE_BUSY, got {other:?}"),
    }
}

fn count_rows(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
}

/// Our connection with no busy timeout: contention must surface as SQLITE_BUSY at once.
fn ours_no_wait(db: &Path) -> Connection {
    let conn = open_ours(db);
    conn.busy_timeout(Duration::ZERO).unwrap();
    conn
}

/// Runs `sql` in a fresh stock shell with `.timeout 0`, expecting "database is locked".
fn assert_stock_locked(db: &Path, sql: &str, what: &str) {
    let output = stock_run(db, 0, sql);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("database is locked"),
        "{what}: expected the stock shell to fail with \"database is locked\"; it did not.\n{}",
        describe(&format!("sqlite3 `{sql}`"), &output)
    );
}

fn stock_count(db: &Path) -> i64 {
    let output = stock_run(db, 0, "SELECT count(*) FROM t;");
    expect_success("stock `SELECT count(*) FROM t`", &output);
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("count")
}

fn locks_block(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("locks.db");
    create_db(
        &db,
        mode,
        "CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('init');",
    );
    let ours = ours_no_wait(&db);

    // (a) Stock holds EXCLUSIVE (in WAL mode: the WAL write lock).
    let mut stock = StockSession::start(&db, 0);
    stock.run_ok("BEGIN EXCLUSIVE; INSERT INTO t VALUES ('stock-exclusive');");
    assert_busy(
        "io_uring INSERT while stock sqlite3 holds BEGIN EXCLUSIVE",
        ours.execute("INSERT INTO t VALUES ('ours-a')", []),
    );
    match mode {
        Mode::Rollback => assert_busy(
            "io_uring SELECT while stock sqlite3 holds EXCLUSIVE (rollback mode)",
            count_rows(&ours),
        ),
        // WAL readers are never blocked by the writer, and do not see its open transaction.
        Mode::Wal => assert_eq!(
            count_rows(&ours).unwrap(),
            1,
            "io_uring read during stock EXCLUSIVE (WAL)"
        ),
    }
    stock.run_ok("COMMIT;");
    ours.execute("INSERT INTO t VALUES ('ours-a')", [])
        .expect("io_uring INSERT after stock COMMIT");
    assert_eq!(count_rows(&ours).unwrap(), 3);

    // (b) Stock holds RESERVED: our writes wait, our reads do not.
    stock.run_ok("BEGIN IMMEDIATE; INSERT INTO t VALUES ('stock-reserved');");
    assert_busy(
        "io_uring INSERT while stock sqlite3 holds BEGIN IMMEDIATE",
        ours.execute("INSERT INTO t VALUES ('ours-b')", []),
    );
    assert_eq!(
        count_rows(&ours).expect("io_uring read while stock holds RESERVED"),
        3,
        "io_uring read must not see stock's uncommitted row"
    );
    stock.run_ok("COMMIT;");
    ours.execute("INSERT INTO t VALUES ('ours-b')", [])
        .expect("io_uring INSERT after stock COMMIT");
    assert_eq!(count_rows(&ours).unwrap(), 5);

    // (c) We hold EXCLUSIVE: the stock shell's writes (and, in rollback mode, reads) fail.
    ours.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES ('ours-exclusive');")
        .unwrap();
    assert_stock_locked(
        &db,
        "INSERT INTO t VALUES ('stock-c');",
        "stock write while io_uring holds EXCLUSIVE",
    );
    match mode {
        Mode::Rollback => assert_stock_locked(
            &db,
            "SELECT count(*) FROM t;",
            "stock read while io_uring holds EXCLUSIVE (rollback mode)",
        ),
        Mode::Wal => assert_eq!(stock_count(&db), 5, "stock read during io_uring EXCLUSIVE"),
    }
    ours.execute_batch("COMMIT").unwrap();
    stock_ok(&db, "INSERT INTO t VALUES ('stock-c');");
    assert_eq!(stock_count(&db), 7);

    // (d) We hold RESERVED: stock writes fail, stock reads work.
    ours.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES ('ours-reserved');")
        .unwrap();
    assert_stock_locked(
        &db,
        "INSERT INTO t VALUES ('stock-d');",
        "stock write while io_uring holds RESERVED",
    );
    assert_eq!(
        stock_count(&db),
        7,
        "stock read while io_uring holds RESERVED"
    );
    ours.execute_batch("COMMIT").unwrap();
    stock_ok(&db, "INSERT INTO t VALUES ('stock-d');");
    assert_eq!(count_rows(&ours).unwrap(), 9);

    match mode {
        Mode::Rollback => pending_blocks_new_readers(&db, &ours, &mut stock),
        Mode::Wal => wal_snapshots_and_read_marks(&db, &ours, &mut stock),
    }
    stock.finish();
    drop(ours);
    stock_integrity(&db);
    ours_integrity(&db);
}

/// Rollback mode: a writer that cannot get EXCLUSIVE because of a reader keeps PENDING,
/// which must stop *new* readers of the other kind (os_unix.c PENDING_BYTE protocol).
fn pending_blocks_new_readers(db: &Path, ours: &Connection, stock: &mut StockSession) {
    let before = count_rows(ours).unwrap();

    // Stock reader holds SHARED; our COMMIT needs EXCLUSIVE and fails, keeping PENDING.
    stock.run_ok("BEGIN; SELECT count(*) FROM t;");
    ours.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES ('ours-pending');")
        .unwrap();
    assert_busy(
        "io_uring COMMIT while a stock reader holds SHARED",
        ours.execute_batch("COMMIT"),
    );
    assert_stock_locked(
        db,
        "SELECT count(*) FROM t;",
        "new stock reader while io_uring holds PENDING",
    );
    stock.run_ok("COMMIT;");
    ours.execute_batch("COMMIT")
        .expect("io_uring COMMIT retried after the stock reader finished");
    assert_eq!(stock_count(db), before + 1);

    // Reverse: our reader holds SHARED; the stock COMMIT fails and keeps PENDING.
    let reader = ours_no_wait(db);
    reader.execute_batch("BEGIN").unwrap();
    assert_eq!(count_rows(&reader).unwrap(), before + 1);
    stock.run_ok("BEGIN IMMEDIATE; INSERT INTO t VALUES ('stock-pending');");
    let printed = stock.run("COMMIT;");
    assert!(
        printed.contains("database is locked"),
        "stock COMMIT while an io_uring reader holds SHARED: expected \"database is \
         locked\", got {printed:?}; transcript:\n{}",
        stock.transcript()
    );
    // A new connection of this process shares the SHARED lock the process holds, PENDING
    // or not, as a second `unix` connection of one process does (os_unix.c counts SHARED
    // holders per process); once the process reads no more, PENDING keeps it out.
    let newcomer = ours_no_wait(db);
    assert_eq!(
        count_rows(&newcomer).expect("new io_uring reader beside this process's reader"),
        before + 1
    );
    reader.execute_batch("COMMIT").unwrap();
    assert_busy(
        "new io_uring reader while stock sqlite3 holds PENDING",
        count_rows(&newcomer),
    );
    stock.run_ok("COMMIT;");
    assert_eq!(count_rows(&newcomer).unwrap(), before + 2);
}

/// WAL mode: a reader's snapshot (its WAL-index read mark) survives the other side's
/// commits, and keeps the other side's TRUNCATE checkpoint from resetting the WAL.
fn wal_snapshots_and_read_marks(db: &Path, ours: &Connection, stock: &mut StockSession) {
    let before = count_rows(ours).unwrap();
    let truncate = |conn: &Connection| -> (i64, i64, i64) {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap()
    };

    // Stock snapshot vs our commits and checkpoint.
    let printed = stock.run_ok("BEGIN; SELECT count(*) FROM t;");
    assert_eq!(printed.trim(), before.to_string());
    ours.execute("INSERT INTO t VALUES ('ours-wal-1')", [])
        .unwrap();
    ours.execute("INSERT INTO t VALUES ('ours-wal-2')", [])
        .unwrap();
    let printed = stock.run_ok("SELECT count(*) FROM t;");
    assert_eq!(
        printed.trim(),
        before.to_string(),
        "stock read transaction must keep its snapshot across io_uring commits"
    );
    let (busy, _, _) = truncate(ours);
    assert_eq!(
        busy, 1,
        "io_uring TRUNCATE checkpoint must report busy while a stock reader holds an old snapshot"
    );
    stock.run_ok("COMMIT;");
    assert_eq!(
        truncate(ours),
        (0, 0, 0),
        "io_uring TRUNCATE checkpoint with no readers"
    );
    let printed = stock.run_ok("SELECT count(*) FROM t;");
    assert_eq!(printed.trim(), (before + 2).to_string());

    // Our snapshot vs stock commits and checkpoint.
    let reader = ours_no_wait(db);
    reader.execute_batch("BEGIN").unwrap();
    assert_eq!(count_rows(&reader).unwrap(), before + 2);
    stock.run_ok("INSERT INTO t VALUES ('stock-wal-1'); INSERT INTO t VALUES ('stock-wal-2');");
    assert_eq!(
        count_rows(&reader).unwrap(),
        before + 2,
        "io_uring read transaction must keep its snapshot across stock commits"
    );
    let printed = stock.run_ok("PRAGMA wal_checkpoint(TRUNCATE);");
    assert!(
        printed.trim().starts_with("1|"),
        "stock TRUNCATE checkpoint must report busy while an io_uring reader holds an old \
         snapshot; printed {printed:?}"
    );
    reader.execute_batch("COMMIT").unwrap();
    let printed = stock.run_ok("PRAGMA wal_checkpoint(TRUNCATE);");
    assert_eq!(
        printed.trim(),
        "0|0|0",
        "stock TRUNCATE checkpoint with no readers"
    );
    assert_eq!(count_rows(&reader).unwrap(), before + 4);
    let wal_len = std::fs::metadata(format!("{}-wal", db.display()))
        .map(|m| m.len())
        .unwrap_or(0);
    assert_eq!(
        wal_len, 0,
        "WAL file after a successful TRUNCATE checkpoint"
    );
}

#[test]
fn locks_block_across_processes_rollback() {
    locks_block(Mode::Rollback);
}

#[test]
fn locks_block_across_processes_wal() {
    locks_block(Mode::Wal);
}

/// One side switches the database between rollback and WAL while the other stays
/// connected: the switch lives in the file header (and the `-wal`/`-shm` files), so the
/// connected side must pick it up on its next transaction, with no lost rows.
#[test]
fn journal_mode_switch_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("switch.db");
    create_db(
        &db,
        Mode::Rollback,
        "CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('init');",
    );
    let ours = open_ours(&db);
    ours.busy_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(count_rows(&ours).unwrap(), 1);

    // Stock switches to WAL while our connection is open (idle).
    assert_eq!(
        stock_ok(
            &db,
            "PRAGMA journal_mode=WAL;\nINSERT INTO t VALUES ('stock-wal');"
        ),
        "wal\n"
    );
    assert_eq!(
        count_rows(&ours).unwrap(),
        2,
        "io_uring sees the stock WAL commit"
    );
    ours.execute("INSERT INTO t VALUES ('ours-wal')", [])
        .unwrap();
    let mode: String = ours
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "io_uring connection after the stock switch");
    assert_eq!(stock_count(&db), 3, "stock sees the io_uring WAL commit");
    assert!(
        Path::new(&format!("{}-wal", db.display())).exists(),
        "a WAL file while our connection is open in WAL mode"
    );

    // We switch back to rollback; stock follows.
    let mode: String = ours
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "io_uring switching back to rollback");
    assert!(
        !Path::new(&format!("{}-wal", db.display())).exists(),
        "the WAL is checkpointed and deleted when leaving WAL mode"
    );
    assert_eq!(
        stock_ok(
            &db,
            "PRAGMA journal_mode;\nINSERT INTO t VALUES ('stock-delete');"
        ),
        "delete\n"
    );
    assert_eq!(
        count_rows(&ours).unwrap(),
        4,
        "io_uring sees the stock rollback-mode commit"
    );
    drop(ours);
    stock_integrity(&db);
    ours_integrity(&db);
}

// ---------------------------------------------------------------------------------------
// 3. Consistent snapshots: the bank-transfer invariant.
// ---------------------------------------------------------------------------------------

const ACCOUNTS: u64 = 64;
const OPENING_BALANCE: i64 = 1000;
const OURS_TRANSFERS: u64 = 2000;
const STOCK_TRANSFERS: u64 = 1500;
const OURS_WRITER_SEED: u64 = 0x5EED_0001;
const OURS_READER_SEED: u64 = 0x5EED_0002;
const STOCK_WRITER_SEED: u64 = 0x5EED_0003;
/// Our bank processes read through mmap (xFetch) while the stock writer changes pages
/// under them; the stock side uses plain reads (its default).
const OURS_MMAP_BYTES: u64 = 8 << 20;
const WAL_HEADER_BYTES: u64 = 32;
const WAL_FRAME_HEADER_BYTES: u64 = 24;
const PAGE_BYTES: u64 = 4096;
/// wal.c HASHTABLE_NPAGE_ONE: frames indexed by the first 32 KiB WAL-index region.
const FRAMES_IN_FIRST_SHM_REGION: u64 = 4062;

/// One transfer drawn exactly as `torture bank-write` draws it.
fn draw_transfer(rng: &mut Rng) -> (usize, usize, i64) {
    let from = rng.below(ACCOUNTS) as i64 + 1;
    let to = (from + rng.below(ACCOUNTS - 1) as i64) % ACCOUNTS as i64 + 1;
    let amount = rng.below(50) as i64 + 1;
    (from as usize, to as usize, amount)
}

/// Reads through an interactive stock shell until both writers have finished (or
/// `abort` is raised), checking every sum; returns how many reads were checked.
fn stock_bank_reader(
    db: &Path,
    total: i64,
    writers: i64,
    checkpoints: bool,
    abort: &AtomicBool,
) -> Result<u64, String> {
    let mut session = StockSession::start(db, 30_000);
    if !checkpoints {
        session.run_ok("PRAGMA wal_autocheckpoint=0;");
    }
    let started = Instant::now();
    let half = ACCOUNTS / 2;
    let mut checked = 0u64;
    for batch in 0u64.. {
        if abort.load(Ordering::SeqCst) {
            return Ok(checked);
        }
        if started.elapsed() > Duration::from_secs(150) {
            return Err("stock reader: writers did not finish within 150 s".into());
        }
        let mut sql = String::new();
        for _ in 0..10 {
            sql.push_str("SELECT 'sum', sum(balance), count(*) FROM accounts;\n");
        }
        // Two statements in one read transaction must see one snapshot.
        sql.push_str(&format!(
            "BEGIN;\nSELECT 'part', sum(balance) FROM accounts WHERE id <= {half};\n\
             SELECT 'part', sum(balance) FROM accounts WHERE id > {half};\nCOMMIT;\n"
        ));
        if checkpoints && batch % 3 == 1 {
            sql.push_str("PRAGMA wal_checkpoint(PASSIVE);\n");
        }
        if checkpoints && batch % 20 == 10 {
            sql.push_str("PRAGMA wal_checkpoint(RESTART);\n");
        }
        sql.push_str("SELECT 'done', count(*) FROM done;");
        let printed = session.run(&sql);
        let mut parts = Vec::new();
        let mut done = None;
        for line in printed.lines() {
            let fields: Vec<&str> = line.split('|').collect();
            match fields[0] {
                "sum" => {
                    checked += 1;
                    if fields[1..] != [total.to_string(), ACCOUNTS.to_string()] {
                        return Err(format!(
                            "stock reader saw {line:?}; expected sum|{total}|{ACCOUNTS}"
                        ));
                    }
                }
                "part" => parts.push(
                    fields[1]
                        .parse::<i64>()
                        .map_err(|e| format!("{line:?}: {e}"))?,
                ),
                "done" => {
                    done = Some(
                        fields[1]
                            .parse::<i64>()
                            .map_err(|e| format!("{line:?}: {e}"))?,
                    )
                }
                _ if line.to_lowercase().contains("error") => {
                    return Err(format!(
                        "stock reader: {line}\ntranscript tail:\n{}",
                        tail(session.transcript().as_bytes(), 3000)
                    ));
                }
                _ => {} // checkpoint results: busy|log|checkpointed
            }
        }
        if parts.len() != 2 || parts[0] + parts[1] != total {
            return Err(format!(
                "stock reader: one read transaction saw partial sums {parts:?}, expected two summing to {total}"
            ));
        }
        checked += 1;
        if done == Some(writers) {
            break;
        }
    }
    session.finish();
    Ok(checked)
}

/// `checkpoints`: whether every process checkpoints now and then (explicitly and
/// automatically) or none does, so that the WAL only grows.
fn bank(mode: Mode, checkpoints: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bank.db");
    // The filler spreads the accounts over several pages, so a transfer and a sum touch
    // different pages and a torn snapshot would be visible.
    create_db(
        &db,
        mode,
        &format!(
            "CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, filler BLOB);
             WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {ACCOUNTS})
             INSERT INTO accounts SELECT i, {OPENING_BALANCE}, randomblob(300) FROM k;
             CREATE TABLE done(who TEXT PRIMARY KEY);"
        ),
    );
    let total = OPENING_BALANCE * ACCOUNTS as i64;

    // Expected final balances: transfers commute, so they do not depend on interleaving.
    let mut expected = vec![OPENING_BALANCE; ACCOUNTS as usize + 1];
    let mut rng = Rng::new(OURS_WRITER_SEED);
    for _ in 0..OURS_TRANSFERS {
        let (from, to, amount) = draw_transfer(&mut rng);
        expected[from] -= amount;
        expected[to] += amount;
    }
    let mut script = format!(
        ".timeout 30000\nSELECT 'ready';\nPRAGMA synchronous={};\n",
        sync_for(mode)
    );
    if !checkpoints {
        script.push_str("PRAGMA wal_autocheckpoint=0;\n");
    }
    let mut rng = Rng::new(STOCK_WRITER_SEED);
    for i in 0..STOCK_TRANSFERS {
        let (from, to, amount) = draw_transfer(&mut rng);
        expected[from] -= amount;
        expected[to] += amount;
        script.push_str(STOCK_PACE);
        script.push_str(&format!(
            "BEGIN IMMEDIATE;\nUPDATE accounts SET balance = balance - {amount} WHERE id = {from};\n\
             UPDATE accounts SET balance = balance + {amount} WHERE id = {to};\nCOMMIT;\n"
        ));
        if checkpoints && i % 100 == 30 {
            script.push_str("PRAGMA wal_checkpoint(PASSIVE);\n");
        }
        if checkpoints && i % 500 == 300 {
            script.push_str("PRAGMA wal_checkpoint(RESTART);\n");
        }
    }
    script.push_str("INSERT INTO done VALUES ('stock-writer');\n");

    let common_args = |extra: &[String]| {
        let mut args = vec![
            format!("db={}", db.display()),
            format!("mode={}", mode.pragma()),
            format!("sync={}", sync_for(mode)),
            format!("checkpoints={}", if checkpoints { "on" } else { "off" }),
        ];
        args.extend_from_slice(extra);
        args
    };
    let gate = StartGate::close(&db);
    let ours_reader = spawn_torture(
        "bank-read",
        &common_args(&[
            format!("total={total}"),
            format!("accounts={ACCOUNTS}"),
            "writers=2".into(),
            format!("seed={OURS_READER_SEED}"),
            format!("mmap={OURS_MMAP_BYTES}"),
        ]),
    );
    let abort = Arc::new(AtomicBool::new(false));
    let stock_reader = {
        let (db, abort) = (db.clone(), abort.clone());
        std::thread::spawn(move || stock_bank_reader(&db, total, 2, checkpoints, &abort))
    };
    let ours_writer = spawn_torture(
        "bank-write",
        &common_args(&[
            format!("count={OURS_TRANSFERS}"),
            format!("seed={OURS_WRITER_SEED}"),
            "tag=ours-writer".into(),
            format!("mmap={OURS_MMAP_BYTES}"),
            "busy=spin".into(),
            format!("pace_us={OURS_PACE_US}"),
        ]),
    );
    let stock_writer = spawn_stock_script(&db, &script, "bank writer");
    let ours_writer = await_line(ours_writer, |line| line == "ready");
    let stock_writer = await_line(stock_writer, |line| line == "ready");
    let keeper = gate.open();

    let ours_writer_what = ours_writer.what().to_string();
    let ours_writer_out = ours_writer.wait();
    let stock_writer_out = stock_writer.wait();
    let writers_ok = ours_writer_out.status.success() && stock_writer_out.status.success();
    if !writers_ok {
        // The readers wait for both writers; release them before reporting.
        abort.store(true, Ordering::SeqCst);
    }
    let ours_reader_what = ours_reader.what.clone();
    let ours_reader_out = if writers_ok {
        ours_reader.wait()
    } else {
        ours_reader.kill()
    };
    let stock_reader_result = stock_reader.join().expect("stock reader thread panicked");
    expect_success(&ours_writer_what, &ours_writer_out);
    expect_success("stock sqlite3 bank writer", &stock_writer_out);
    expect_success(&ours_reader_what, &ours_reader_out);
    let stock_reads = stock_reader_result.unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    eprintln!(
        "bank {mode:?}: io_uring writer: {} io_uring reader: {} stock reader: {stock_reads} checked reads",
        String::from_utf8_lossy(&ours_writer_out.stdout).trim(),
        String::from_utf8_lossy(&ours_reader_out.stdout).trim(),
    );

    if !checkpoints {
        // Nothing checkpointed, so the WAL was never restarted: it holds every frame.
        let wal_bytes = std::fs::metadata(format!("{}-wal", db.display()))
            .map(|m| m.len())
            .unwrap_or(0);
        // (`keeper` is still open, so no process has checkpointed the WAL on close.)
        let frames =
            wal_bytes.saturating_sub(WAL_HEADER_BYTES) / (WAL_FRAME_HEADER_BYTES + PAGE_BYTES);
        eprintln!("bank {mode:?} without checkpoints: {frames} WAL frames");
        assert!(
            frames > FRAMES_IN_FIRST_SHM_REGION,
            "expected the WAL to outgrow the first WAL-index region ({FRAMES_IN_FIRST_SHM_REGION} \
             frames); it has {frames} frames ({wal_bytes} bytes)"
        );
    }
    drop(keeper);
    let expected_rows: String = (1..=ACCOUNTS as usize)
        .map(|id| format!("{id}|{}\n", expected[id]))
        .collect();
    assert_eq!(
        stock_ok(&db, "SELECT id, balance FROM accounts ORDER BY id;"),
        expected_rows,
        "final balances ({mode:?}) as read by stock sqlite3: every transfer applied exactly once"
    );
    let conn = open_ours(&db);
    let rows: String = conn
        .prepare("SELECT id, balance FROM accounts ORDER BY id")
        .unwrap()
        .query_map([], |r| {
            Ok(format!("{}|{}\n", r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })
        .unwrap()
        .collect::<rusqlite::Result<String>>()
        .unwrap();
    assert_eq!(
        rows, expected_rows,
        "final balances ({mode:?}) as read through io_uring"
    );
    drop(conn);
    stock_integrity(&db);
    ours_integrity(&db);
}

#[test]
fn bank_snapshots_mixed_processes_rollback() {
    bank(Mode::Rollback, true);
}

#[test]
fn bank_snapshots_mixed_processes_wal() {
    bank(Mode::Wal, true);
}

/// WAL mode with no checkpoints at all: the WAL grows past 4062 frames, so the WAL index
/// spans several 32 KiB shm regions that both implementations map and extend.
#[test]
fn bank_snapshots_wal_index_spanning_shm_regions() {
    bank(Mode::Wal, false);
}

// ---------------------------------------------------------------------------------------
// 5. Many threads, one process.
// ---------------------------------------------------------------------------------------

const THREAD_WRITERS: usize = 4;
const THREAD_INCREMENTS: i64 = 250;

/// One increment per call, retried on BUSY; `deferred` reads then writes an absolute
/// value (a lost update if two connections could both commit from one snapshot).
fn increment_once(conn: &Connection, who: &str, seq: i64, deferred: bool) -> Result<u64, String> {
    let started = Instant::now();
    let mut retries = 0;
    loop {
        let attempt = (|| -> rusqlite::Result<()> {
            conn.execute_batch(if deferred { "BEGIN" } else { "BEGIN IMMEDIATE" })?;
            let n: i64 = conn.query_row("SELECT n FROM counter WHERE id = 1", [], |r| r.get(0))?;
            conn.execute("UPDATE counter SET n = ?1 WHERE id = 1", [n + 1])?;
            conn.execute(
                "INSERT INTO log(who, seq) VALUES (?1, ?2)",
                rusqlite::params![who, seq],
            )?;
            conn.execute_batch("COMMIT")
        })();
        match attempt {
            Ok(()) => return Ok(retries),
            Err(e) => {
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                if e.sqlite_error_code() != Some(ErrorCode::DatabaseBusy) {
                    return Err(format!("{who} increment {seq}: {e}"));
                }
                if started.elapsed() > Duration::from_secs(60) {
                    return Err(format!(
                        "{who} increment {seq}: still BUSY after {retries} retries"
                    ));
                }
                retries += 1;
                std::thread::yield_now();
            }
        }
    }
}

fn threads(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared.db");
    create_db(&shared, mode, COUNTER_SCHEMA);
    let private: Vec<_> = (0..2)
        .map(|i| {
            let path = dir.path().join(format!("private-{i}.db"));
            create_db(&path, mode, COUNTER_SCHEMA);
            path
        })
        .collect();
    let open = |path: &Path| {
        let conn = open_ours(path);
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        conn.execute_batch(&format!("PRAGMA synchronous={}", sync_for(mode)))
            .unwrap();
        conn
    };
    let writers_left = AtomicUsize::new(THREAD_WRITERS);

    let results: Vec<Result<String, String>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for w in 0..THREAD_WRITERS {
            let (open, shared, writers_left) = (&open, &shared, &writers_left);
            handles.push(scope.spawn(move || {
                let conn = open(shared);
                let who = format!("thread-{w}");
                let mut retries = 0;
                let result = (0..THREAD_INCREMENTS).try_for_each(|seq| {
                    retries += increment_once(&conn, &who, seq, (seq + w as i64) % 2 == 0)?;
                    Ok::<_, String>(())
                });
                writers_left.fetch_sub(1, Ordering::SeqCst);
                result.map(|()| format!("{who}: {retries} busy retries"))
            }));
        }
        for (i, path) in private.iter().enumerate() {
            let open = &open;
            handles.push(scope.spawn(move || {
                let conn = open(path);
                for seq in 0..THREAD_INCREMENTS {
                    increment_once(&conn, "private", seq, seq % 2 == 0)?;
                }
                Ok(format!("private-{i}: done"))
            }));
        }
        // A reader checking, in single statements and in multi-statement read
        // transactions, that the counter always matches the log.
        let (open, shared, writers_left) = (&open, &shared, &writers_left);
        handles.push(scope.spawn(move || {
            let conn = open(shared);
            let mut reads = 0u64;
            let started = Instant::now();
            while writers_left.load(Ordering::SeqCst) > 0 {
                let read = (|| -> rusqlite::Result<(i64, i64)> {
                    if reads & 1 == 0 {
                        conn.query_row(
                            "SELECT n, (SELECT count(*) FROM log) FROM counter",
                            [],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                    } else {
                        conn.execute_batch("BEGIN")?;
                        let n = conn.query_row("SELECT n FROM counter", [], |r| r.get(0))?;
                        let logged =
                            conn.query_row("SELECT count(*) FROM log", [], |r| r.get(0))?;
                        conn.execute_batch("COMMIT")?;
                        Ok((n, logged))
                    }
                })();
                match read {
                    Ok((n, logged)) if n == logged => reads += 1,
                    Ok((n, logged)) => {
                        return Err(format!("reader saw counter {n} but {logged} log rows"))
                    }
                    Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {
                        if !conn.is_autocommit() {
                            let _ = conn.execute_batch("ROLLBACK");
                        }
                    }
                    Err(e) => return Err(format!("reader: {e}")),
                }
                if started.elapsed() > Duration::from_secs(120) {
                    return Err("reader: writers did not finish within 120 s".into());
                }
            }
            Ok(format!("reader: {reads} consistent reads"))
        }));
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "{mode:?}: thread failures: {failures:#?}"
    );
    eprintln!("threads {mode:?}: {results:?}");

    let check = |path: &Path, expected: i64| {
        let conn = open(path);
        let (n, logged): (i64, i64) = conn
            .query_row(
                "SELECT n, (SELECT count(*) FROM log) FROM counter",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            (n, logged),
            (expected, expected),
            "{mode:?}: counter and log rows of {}",
            path.display()
        );
        drop(conn);
        ours_integrity(path);
    };
    check(&shared, THREAD_WRITERS as i64 * THREAD_INCREMENTS);
    for path in &private {
        check(path, THREAD_INCREMENTS);
    }
    stock_integrity(&shared);
}

#[test]
fn threads_in_one_process_rollback() {
    threads(Mode::Rollback);
}

#[test]
fn threads_in_one_process_wal() {
    threads(Mode::Wal);
}

// ---------------------------------------------------------------------------------------
// unix-VFS and io_uring connections to one database in one process.
// ---------------------------------------------------------------------------------------
//
// POSIX locks (the `unix` VFS's) belong to the process and are all released when the
// process closes *any* descriptor of the file. os_unix.c guards against this among its
// own connections; the io_uring VFS closes a database or `-shm` descriptor only when the
// process holds no POSIX lock on the file, and parks it otherwise (`src/lock.rs`). Were
// it closed, other processes would read during the unix connection's EXCLUSIVE
// transaction (rollback), or see no SHARED lock, take EXCLUSIVE on close, checkpoint and
// delete the WAL and `-shm` under it, after which its commits go to an unlinked WAL that
// no other process sees. Each case runs on the test directory's filesystem and on btrfs,
// whose stat(2) device numbers are not the ones the kernel's lock listings print.

const SAME_PROCESS_BUG: &str = "VFS bug: closing an io_uring connection dropped the unix VFS's \
     POSIX locks held by the same process";

/// A btrfs filesystem on a loop device (a sparse image in a temporary directory), mounted
/// on a temporary directory until dropped. Needs root, loop devices and mkfs.btrfs.
struct BtrfsMount {
    mount: tempfile::TempDir,
    _image_dir: tempfile::TempDir,
}

impl BtrfsMount {
    fn new() -> BtrfsMount {
        use std::process::{Command, Stdio};
        let image_dir = tempfile::tempdir().unwrap();
        let image = image_dir.path().join("btrfs.img");
        std::fs::File::create(&image)
            .and_then(|file| file.set_len(256 << 20))
            .unwrap();
        let status = Command::new("mkfs.btrfs")
            .arg("-q")
            .arg(&image)
            .stdout(Stdio::null())
            .status()
            .expect("mkfs.btrfs is needed for this test (Debian: apt-get install -y btrfs-progs)");
        assert!(status.success(), "mkfs.btrfs {} failed", image.display());
        let mount = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(mount.path())
            .status()
            .expect("mount(8) is needed for this test");
        assert!(
            status.success(),
            "mounting a btrfs image needs root and loop devices (CI runs as root)"
        );
        BtrfsMount {
            mount,
            _image_dir: image_dir,
        }
    }

    fn path(&self) -> &Path {
        self.mount.path()
    }
}

impl Drop for BtrfsMount {
    fn drop(&mut self) {
        // Lazily: a descriptor this process parked (or a connection still open) keeps the
        // filesystem busy until the process exits, and a plain umount would then fail and
        // leave the mount and its loop device behind.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.mount.path())
            .status();
    }
}

fn unix_lock_survives_io_uring_close_rollback(dir: &Path) {
    let db = dir.join("mixed-in-process.db");
    create_db(
        &db,
        Mode::Rollback,
        "CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('init');",
    );
    let unix = Connection::open(&db).unwrap();
    unix.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES ('unix');")
        .unwrap();
    assert_stock_locked(
        &db,
        "SELECT count(*) FROM t;",
        "stock read while a unix-VFS connection holds EXCLUSIVE",
    );
    {
        let ours = ours_no_wait(&db);
        assert_busy(
            "io_uring read while a unix-VFS connection of this process holds EXCLUSIVE",
            count_rows(&ours),
        );
    } // the io_uring connection closes its descriptor of the database here
    assert_stock_locked(
        &db,
        "SELECT count(*) FROM t;",
        &format!(
            "stock read while the unix-VFS connection still holds EXCLUSIVE, after an \
             io_uring connection of the same process closed ({SAME_PROCESS_BUG})"
        ),
    );
    unix.execute_batch("COMMIT").unwrap();
}

/// The close's one-fcntl probe reports the first conflicting lock on the file, here the
/// stock process's SHARED lock (taken first, so listed first), which hides the unix-VFS
/// connection's SHARED lock on the same bytes: the close must look further than the
/// probe before it decides to close.
fn unix_lock_behind_another_process_lock_survives_io_uring_close(dir: &Path) {
    let db = dir.join("mixed-behind-stock.db");
    create_db(
        &db,
        Mode::Rollback,
        "CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('init');",
    );
    let mut stock = StockSession::start(&db, 0);
    stock.run_ok("BEGIN; SELECT count(*) FROM t;");
    let unix = Connection::open(&db).unwrap();
    unix.execute_batch("BEGIN; SELECT count(*) FROM t;")
        .unwrap();
    {
        let ours = ours_no_wait(&db);
        assert_eq!(count_rows(&ours).unwrap(), 1);
    } // the io_uring connection closes its descriptor of the database here
    stock.run_ok("COMMIT;");
    stock.finish();
    assert_stock_locked(
        &db,
        "INSERT INTO t VALUES ('stock');",
        &format!(
            "stock write while the unix-VFS connection still holds SHARED, after an \
             io_uring connection of the same process closed beside another process's \
             SHARED lock ({SAME_PROCESS_BUG})"
        ),
    );
    unix.execute_batch("COMMIT").unwrap();
    assert_eq!(stock_count(&db), 1);
}

fn unix_commit_visible_after_io_uring_close_wal(dir: &Path) {
    let db = dir.join("mixed-in-process-wal.db");
    create_db(
        &db,
        Mode::Wal,
        "CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('init');",
    );
    let unix = Connection::open(&db).unwrap();
    assert_eq!(count_rows(&unix).unwrap(), 1);
    {
        let ours = ours_no_wait(&db);
        assert_eq!(count_rows(&ours).unwrap(), 1);
    } // closes our descriptors of the database and -shm
      // A stock process writes and closes. With the unix-VFS connection's SHARED lock
      // intact it cannot be the last connection, so the WAL must survive.
    stock_ok(&db, "INSERT INTO t VALUES ('stock');");
    let wal_survived = Path::new(&format!("{}-wal", db.display())).exists();
    unix.execute("INSERT INTO t VALUES ('unix')", []).unwrap();
    assert_eq!(
        stock_count(&db),
        3,
        "a commit by the unix-VFS connection must be visible to other processes (the WAL \
         {} the stock process's close; {SAME_PROCESS_BUG})",
        if wal_survived {
            "survived"
        } else {
            "was checkpointed and deleted by"
        }
    );
    drop(unix);
}

#[test]
fn same_process_unix_vfs_lock_survives_io_uring_close_rollback() {
    let dir = tempfile::tempdir().unwrap();
    unix_lock_survives_io_uring_close_rollback(dir.path());
}

#[test]
fn same_process_unix_vfs_lock_behind_another_process_lock_survives_io_uring_close() {
    let dir = tempfile::tempdir().unwrap();
    unix_lock_behind_another_process_lock_survives_io_uring_close(dir.path());
}

#[test]
fn same_process_unix_vfs_commit_visible_after_io_uring_close_wal() {
    let dir = tempfile::tempdir().unwrap();
    unix_commit_visible_after_io_uring_close_wal(dir.path());
}

#[test]
fn same_process_unix_vfs_locks_survive_io_uring_close_on_btrfs() {
    let btrfs = BtrfsMount::new();
    unix_lock_survives_io_uring_close_rollback(btrfs.path());
    unix_lock_behind_another_process_lock_survives_io_uring_close(btrfs.path());
    unix_commit_visible_after_io_uring_close_wal(btrfs.path());
}
