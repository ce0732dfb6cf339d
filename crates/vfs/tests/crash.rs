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

use common::*;

const SCHEMA: &str = "
    CREATE TABLE seqs(seq INTEGER PRIMARY KEY, pad BLOB NOT NULL);
    CREATE TABLE meta(writes INTEGER NOT NULL, last INTEGER NOT NULL);
    INSERT INTO meta VALUES (0, 0);
";
/// Rounds with our VFS as the writer; the opener alternates stock / ours.
const OURS_WRITER_ROUNDS: usize = 25;
/// Rounds with the stock shell as the writer and our VFS recovering.
const STOCK_WRITER_ROUNDS: usize = 8;
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
}

const STATE_SQL: &str = "SELECT count(*), coalesce(max(seq), 0), \
     (SELECT writes FROM meta), (SELECT last FROM meta) FROM seqs";

/// Opens the database with `opener` (the first open since the kill, so it performs the
/// recovery) and reads the state.
fn recover_and_read(db: &Path, opener: Side) -> State {
    match opener {
        Side::Stock => {
            let out = stock_ok(db, &format!("PRAGMA integrity_check;\n{STATE_SQL};"));
            let lines: Vec<&str> = out.lines().collect();
            let numbers: Vec<i64> = lines
                .get(1)
                .map(|line| line.split('|').filter_map(|f| f.parse().ok()).collect())
                .unwrap_or_default();
            assert!(
                lines.len() == 2 && numbers.len() == 4,
                "unexpected output of stock sqlite3 after recovery: {out:?}"
            );
            State {
                integrity: lines[0].to_string(),
                count: numbers[0],
                max: numbers[1],
                writes: numbers[2],
                last: numbers[3],
            }
        }
        Side::Ours => {
            let conn = open_ours(db);
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            let integrity: String = conn
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap_or_else(|e| panic!("io_uring integrity_check after a crash: {e}"));
            let (count, max, writes, last) = conn
                .query_row(STATE_SQL, [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .unwrap_or_else(|e| panic!("io_uring read after a crash: {e}"));
            State {
                integrity,
                count,
                max,
                writes,
                last,
            }
        }
    }
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
    create_db(&db, mode, SCHEMA);
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
        let writer = match writer_side {
            Side::Ours => spawn_torture(
                "crash-writer",
                &[
                    format!("db={}", db.display()),
                    format!("mode={}", mode.pragma()),
                    "sync=full".to_string(),
                ],
            ),
            Side::Stock => {
                spawn_stock_script(&db, &stock_writer_script(committed + 1), "crash writer")
            }
        };
        let what = writer.what.clone();
        // Let the first commit of the round happen, so every kill lands in a database
        // that has a transaction in progress or just committed (a pipe handshake).
        let writer = await_line(writer, |line| {
            line.strip_prefix("committed|")
                .unwrap_or(line)
                .parse::<i64>()
                .is_ok()
        });
        std::thread::sleep(Duration::from_millis(
            rng.range(KILL_AFTER_MS.0, KILL_AFTER_MS.1),
        ));
        let output = writer.kill();
        let context = || {
            format!(
                "{mode:?} round {round} (writer {writer_side:?}, recovery by {opener:?}, \
                 {committed} rows before the round)\n{}",
                describe(&what, &output)
            )
        };
        assert_eq!(
            output.status.signal(),
            Some(libc::SIGKILL),
            "the writer should have been running until killed; it was not.\n{}",
            context()
        );

        let numbers = reported(&output);
        let expected_numbers: Vec<i64> =
            (committed + 1..=committed + numbers.len() as i64).collect();
        assert_eq!(
            numbers,
            expected_numbers,
            "the writer must report consecutive sequence numbers continuing from the \
             previous round\n{}",
            context()
        );
        let last_reported = committed + numbers.len() as i64;

        let slot = (opener == Side::Ours) as usize;
        if file_len(&journal).is_some_and(|len| len > 0) {
            tally.hot_journals[slot] += 1;
        }
        if file_len(&wal).is_some_and(|len| len > 32) {
            tally.wal_frames_left[slot] += 1;
        } else if mode == Mode::Wal && writer_side == Side::Ours {
            // A commit returned before the kill, and only a checkpoint by the last
            // connection (there was none: the writer was killed) removes WAL frames.
            panic!(
                "expected WAL frames left by the killed writer\n{}",
                context()
            );
        }

        let state = recover_and_read(&db, opener);
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
    let mut script = String::from(".timeout 10000\nPRAGMA synchronous=FULL;\n");
    for seq in first..first + 5000 {
        script.push_str(&format!(
            "BEGIN IMMEDIATE;\n\
             INSERT INTO seqs(seq, pad) VALUES ({seq}, randomblob({}));\n\
             UPDATE meta SET writes = writes + 1, last = {seq};\n\
             COMMIT;\n\
             SELECT 'committed', {seq};\n",
            100 + (seq * 7919) % 5000
        ));
        if seq % 16 == 0 {
            script.push_str("PRAGMA wal_checkpoint(PASSIVE);\n");
        }
    }
    script
}

#[test]
fn crash_recovery_rollback() {
    crash_rounds(Mode::Rollback, 0x00C0_FFEE_0001);
}

#[test]
fn crash_recovery_wal() {
    crash_rounds(Mode::Wal, 0x00C0_FFEE_0002);
}
