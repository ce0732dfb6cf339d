//! Crash recovery across implementations: a writer is SIGKILLed at pseudo-random moments
//! (fixed seed) while committing in a loop, and the next process to open the database —
//! alternately the stock `sqlite3` shell and our VFS — must recover it (roll back the hot
//! journal, or rebuild the WAL index from the WAL) with every reported commit intact.
//!
//! The writer prints a sequence number only after its COMMIT returned, so after a kill:
//! * `integrity_check` is ok;
//! * the sequence numbers form 1..=max with no gap (count == max);
//! * max is the last number reported, or one more (committed, killed before printing);
//! * the `meta` row, updated in the same transaction, agrees (writes == last == max).
//!
//! SIGKILL leaves the page cache intact, so this tests atomicity and recovery of what
//! the process wrote, not power-loss durability; `synchronous=FULL` is used anyway so
//! the sync paths run as in production.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::crash_sql::crash_transaction_sql;
use common::*;
use rusqlite::Connection;

const SCHEMA: &str = "
    CREATE TABLE seqs(seq INTEGER PRIMARY KEY, pad BLOB NOT NULL);
    CREATE TABLE bulk(id INTEGER PRIMARY KEY, pad BLOB NOT NULL);
    CREATE TABLE meta(writes INTEGER NOT NULL, last INTEGER NOT NULL);
    INSERT INTO meta VALUES (0, 0);
";
/// Creates the database with auto_vacuum=FULL (which must precede everything else, even
/// the switch to WAL, which writes the first page).
fn create_crash_db(db: &Path, mode: Mode) {
    open_ours(db)
        .execute_batch("PRAGMA auto_vacuum=FULL;")
        .unwrap();
    create_db(db, mode, SCHEMA);
    assert_eq!(
        stock_ok(db, "PRAGMA auto_vacuum;"),
        "1\n",
        "auto_vacuum=FULL in effect"
    );
}

/// Rounds with our VFS as the writer; the opener alternates stock / ours.
const OURS_WRITER_ROUNDS: usize = 25;
/// Rounds with the stock shell as the writer and our VFS recovering.
const STOCK_WRITER_ROUNDS: usize = 8;
/// Rounds per side in the tests with a connection that survives the kills.
const SURVIVOR_ROUNDS: usize = 8;
/// Kill delay after the writer's first commit of the round.
const KILL_AFTER_MS: (u64, u64) = (20, 150);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Stock,
    Ours,
}

/// What recovery found.
#[derive(Debug, PartialEq, Eq)]
struct State {
    integrity: String,
    count: i64,
    max: i64,
    writes: i64,
    last: i64,
    bulk: i64,
}

const STATE_SQL: &str = "SELECT count(*), coalesce(max(seq), 0), \
     (SELECT writes FROM meta), (SELECT last FROM meta), (SELECT count(*) FROM bulk) \
     FROM seqs";

/// Rows in `bulk` after transaction `last` (see [`crash_transaction_sql`]).
fn expected_bulk(last: i64) -> i64 {
    if (3..=6).contains(&(last % 8)) && last >= 3 {
        120
    } else {
        0
    }
}

/// Parses the stock shell's output of `PRAGMA integrity_check; STATE_SQL`.
fn parse_stock_state(out: &str) -> State {
    let lines: Vec<&str> = out.lines().collect();
    let numbers: Vec<i64> = lines
        .get(1)
        .map(|line| line.split('|').filter_map(|f| f.parse().ok()).collect())
        .unwrap_or_default();
    assert!(
        lines.len() == 2 && numbers.len() == 5,
        "unexpected output of stock sqlite3 reading the state: {out:?}"
    );
    State {
        integrity: lines[0].to_string(),
        count: numbers[0],
        max: numbers[1],
        writes: numbers[2],
        last: numbers[3],
        bulk: numbers[4],
    }
}

fn read_state_ours(conn: &Connection) -> State {
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("io_uring integrity_check after a crash: {e}"));
    let (count, max, writes, last, bulk) = conn
        .query_row(STATE_SQL, [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap_or_else(|e| panic!("io_uring read after a crash: {e}"));
    State {
        integrity,
        count,
        max,
        writes,
        last,
        bulk,
    }
}

/// Opens the database with `opener` (the first open since the kill, so it performs the
/// recovery) and reads the state.
fn recover_and_read(db: &Path, opener: Side) -> State {
    match opener {
        Side::Stock => parse_stock_state(&stock_ok(
            db,
            &format!("PRAGMA integrity_check;\n{STATE_SQL};"),
        )),
        Side::Ours => {
            let conn = open_ours(db);
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            read_state_ours(&conn)
        }
    }
}

/// Checks the state after a kill against what the writer reported.
fn check_state(state: &State, last_reported: i64, context: &dyn Fn() -> String) {
    assert_eq!(
        state.integrity,
        "ok",
        "integrity after recovery\n{}",
        context()
    );
    assert!(
        state.max == last_reported || state.max == last_reported + 1,
        "after recovery the highest sequence number is {}, but the writer reported {} \
         as committed (at most one more commit may be unreported)\n{}",
        state.max,
        last_reported,
        context()
    );
    assert_eq!(
        (state.count, state.writes, state.last),
        (state.max, state.max, state.max),
        "after recovery (count, meta.writes, meta.last) must all equal max(seq) = {}: \
         rows 1..=max present, each in one transaction with its meta update\n{}",
        state.max,
        context()
    );
    assert_eq!(
        state.bulk,
        expected_bulk(state.max),
        "after recovery the big transactions must be all or nothing: bulk rows after \
         transaction {}\n{}",
        state.max,
        context()
    );
}

/// How our writer does its I/O in a round: memory-mapped reads, or O_DIRECT for the
/// database (`uring_direct`, whose page writes reach the device as ring batches).
#[derive(Clone, Copy, Debug)]
struct WriterIo {
    mmap: bool,
    direct: bool,
}

impl WriterIo {
    /// Round `round` of a suite cycles through buffered, mmap and O_DIRECT writers.
    fn for_round(round: usize) -> WriterIo {
        WriterIo {
            mmap: round % 3 == 1,
            direct: round % 3 == 2,
        }
    }
}

/// Spawns a writer of `side` continuing after `committed`, lets it commit at least once,
/// kills it after a pseudo-random delay, and returns its output (checked: killed, and
/// reporting consecutive numbers from `committed + 1`) with the last reported number.
fn run_and_kill(
    db: &Path,
    mode: Mode,
    side: Side,
    committed: i64,
    rng: &mut Rng,
    writer: WriterIo,
    context: &str,
) -> (Output, String, i64) {
    let writer = match side {
        Side::Ours => spawn_torture(
            "crash-writer",
            &[
                format!("db={}", db.display()),
                format!("mode={}", mode.pragma()),
                "sync=full".to_string(),
                format!("mmap={}", if writer.mmap { 16 << 20 } else { 0 }),
                format!("direct={}", if writer.direct { "on" } else { "off" }),
            ],
        ),
        Side::Stock => spawn_stock_script(db, &stock_writer_script(committed + 1), "crash writer"),
    };
    let what = writer.what.clone();
    // Let the first commit of the round happen, so every kill lands in a database that
    // has a transaction in progress or just committed (a pipe handshake).
    let writer = await_line(writer, |line| {
        line.strip_prefix("committed|")
            .unwrap_or(line)
            .parse::<i64>()
            .is_ok()
    });
    // The kill moment (seeded): this sleep picks where in the write loop the crash lands;
    // nothing waits on it, and every outcome is checked, whatever the moment.
    std::thread::sleep(Duration::from_millis(
        rng.range(KILL_AFTER_MS.0, KILL_AFTER_MS.1),
    ));
    let output = writer.kill();
    assert_eq!(
        output.status.signal(),
        Some(libc::SIGKILL),
        "{context}: the writer should have been running until killed; it was not.\n{}",
        describe(&what, &output)
    );
    let numbers = reported(&output);
    let expected: Vec<i64> = (committed + 1..=committed + numbers.len() as i64).collect();
    assert_eq!(
        numbers,
        expected,
        "{context}: the writer must report consecutive sequence numbers continuing from \
         the previous round\n{}",
        describe(&what, &output)
    );
    let last = committed + numbers.len() as i64;
    (output, what, last)
}

/// Sequence numbers in the writer's stdout: complete lines only (the kill may land
/// anywhere), the shell's `committed|N` or the child's bare `N`.
fn reported(output: &Output) -> Vec<i64> {
    let text = String::from_utf8_lossy(&output.stdout);
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .filter_map(|line| line.strip_prefix("committed|").unwrap_or(line).parse().ok())
        .collect()
}

fn journal_paths(db: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let db = db.display();
    (format!("{db}-journal").into(), format!("{db}-wal").into())
}

fn file_len(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// Tallies of what the kills left behind, reported at the end (they depend on timing,
/// so they are not asserted).
#[derive(Default, Debug)]
struct Tally {
    hot_journals: [usize; 2],
    wal_frames_left: [usize; 2],
    unreported_commits: usize,
}

fn crash_rounds(mode: Mode, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    create_crash_db(&db, mode);
    let (journal, wal) = journal_paths(&db);
    let mut rng = Rng::new(seed);
    let mut committed = 0i64;
    let mut tally = Tally::default();

    let rounds = (0..OURS_WRITER_ROUNDS)
        .map(|round| {
            let opener = if round % 2 == 0 {
                Side::Stock
            } else {
                Side::Ours
            };
            (Side::Ours, opener)
        })
        .chain((0..STOCK_WRITER_ROUNDS).map(|_| (Side::Stock, Side::Ours)));

    for (round, (writer_side, opener)) in rounds.enumerate() {
        let label = format!(
            "{mode:?} round {round} (writer {writer_side:?} {:?}, recovery by {opener:?}, \
             {committed} rows before the round)",
            WriterIo::for_round(round)
        );
        let (output, what, last_reported) = run_and_kill(
            &db,
            mode,
            writer_side,
            committed,
            &mut rng,
            WriterIo::for_round(round),
            &label,
        );
        let context = || format!("{label}\n{}", describe(&what, &output));

        let slot = (opener == Side::Ours) as usize;
        if file_len(&journal).is_some_and(|len| len > 0) {
            tally.hot_journals[slot] += 1;
        }
        if file_len(&wal).is_some_and(|len| len > 32) {
            tally.wal_frames_left[slot] += 1;
        } else if mode == Mode::Wal {
            // A commit returned before the kill, and only a checkpoint by the last
            // connection to close (there was none: the writer was killed) deletes the WAL.
            panic!(
                "expected WAL frames left by the killed writer\n{}",
                context()
            );
        }

        let state = recover_and_read(&db, opener);
        check_state(&state, last_reported, &context);
        if state.max > last_reported {
            tally.unreported_commits += 1;
        }
        committed = state.max;
    }
    eprintln!(
        "crash {mode:?}: {committed} commits over {} kills; hot journals left (stock/ours \
         recovering): {:?}; WAL with frames left (stock/ours recovering): {:?}; \
         commits done but not reported: {}",
        OURS_WRITER_ROUNDS + STOCK_WRITER_ROUNDS,
        tally.hot_journals,
        tally.wal_frames_left,
        tally.unreported_commits
    );
    stock_integrity(&db);
    ours_integrity(&db);
}

/// The stock shell's version of `torture crash-writer`: the same transactions, numbered
/// from `first`, each followed by a line printed after its COMMIT returned.
fn stock_writer_script(first: i64) -> String {
    let mut script =
        String::from(".timeout 10000\nPRAGMA synchronous=FULL;\nPRAGMA cache_size=16;\n");
    for seq in first..first + 5000 {
        script.push_str(&crash_transaction_sql(seq));
        script.push_str(&format!("SELECT 'committed', {seq};\n"));
        if seq % 16 == 0 {
            script.push_str("PRAGMA wal_checkpoint(PASSIVE);\n");
        }
    }
    script
}

/// A connection that stays open while writers of the other kind are killed under it:
/// instead of a fresh opener's recovery, a live connection must notice the dead writer's
/// leftovers (hot journal; WAL frames and a possibly half-updated WAL index, with the
/// dead process's shm locks gone) and carry on, reading and writing.
enum Survivor {
    Stock(StockSession),
    Ours(Connection),
}

impl Survivor {
    fn state(&mut self) -> State {
        match self {
            Survivor::Stock(session) => parse_stock_state(
                &session.run_ok(&format!("PRAGMA integrity_check;\n{STATE_SQL};")),
            ),
            Survivor::Ours(conn) => read_state_ours(conn),
        }
    }

    fn append(&mut self, seq: i64) {
        let sql = crash_transaction_sql(seq);
        match self {
            Survivor::Stock(session) => {
                session.run_ok(&sql);
            }
            Survivor::Ours(conn) => conn
                .execute_batch(&sql)
                .unwrap_or_else(|e| panic!("io_uring survivor appending {seq}: {e}")),
        }
    }
}

fn crash_with_survivor(mode: Mode, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("survivor.db");
    create_crash_db(&db, mode);
    let mut rng = Rng::new(seed);
    let mut committed = 0i64;
    for survivor_side in [Side::Stock, Side::Ours] {
        let mut survivor = match survivor_side {
            Side::Stock => {
                let mut session = StockSession::start(&db, 10_000);
                session.run_ok("PRAGMA cache_size=16;");
                Survivor::Stock(session)
            }
            Side::Ours => {
                let conn = open_ours(&db);
                conn.busy_timeout(Duration::from_secs(10)).unwrap();
                // Reads through mmap, while other processes change and shrink the file.
                conn.execute_batch("PRAGMA cache_size=16; PRAGMA mmap_size=16777216;")
                    .unwrap();
                Survivor::Ours(conn)
            }
        };
        // Join before the first writer starts (in WAL mode: map the WAL index).
        assert_eq!(survivor.state().max, committed);
        let writer_side = match survivor_side {
            Side::Stock => Side::Ours,
            Side::Ours => Side::Stock,
        };
        for round in 0..SURVIVOR_ROUNDS {
            let label = format!(
                "{mode:?} survivor {survivor_side:?} round {round} (writer {writer_side:?} {:?}, \
                 {committed} rows before the round)",
                WriterIo::for_round(round)
            );
            let (output, what, last_reported) = run_and_kill(
                &db,
                mode,
                writer_side,
                committed,
                &mut rng,
                WriterIo::for_round(round),
                &label,
            );
            let context = || format!("{label}\n{}", describe(&what, &output));
            let state = survivor.state();
            check_state(&state, last_reported, &context);
            committed = state.max + 1;
            survivor.append(committed);
        }
        let state = survivor.state();
        assert_eq!(
            (state.integrity.as_str(), state.count, state.max),
            ("ok", committed, committed),
            "{mode:?}: state after the {survivor_side:?} survivor's last append"
        );
        if let Survivor::Stock(session) = survivor {
            session.finish();
        }
    }
    stock_integrity(&db);
    ours_integrity(&db);
}

#[test]
fn crash_with_live_survivor_rollback() {
    crash_with_survivor(Mode::Rollback, 0x00C0_FFEE_0003);
}

#[test]
fn crash_with_live_survivor_wal() {
    crash_with_survivor(Mode::Wal, 0x00C0_FFEE_0004);
}

#[test]
fn crash_recovery_rollback() {
    crash_rounds(Mode::Rollback, 0x00C0_FFEE_0001);
}

#[test]
fn crash_recovery_wal() {
    crash_rounds(Mode::Wal, 0x00C0_FFEE_0002);
}
