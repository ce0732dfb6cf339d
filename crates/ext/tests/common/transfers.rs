//! The scenario of the binding tests (`node.rs`, `go.rs`, `java.rs`): an application in
//! another language, with its own SQLite, loads the extension and writes through
//! `io_uring` in WAL mode, while Debian's stock `sqlite3` CLI (the `unix` VFS, classic
//! POSIX locks) reads the same database from other processes.
//!
//! Every writer runs the same workload, given the arguments
//! `EXTENSION DATABASE TRANSFERS HALFWAY_FILE RESUME_FILE`: 100 accounts whose balances
//! start at 1000; TRANSFERS transactions, each moving an amount between two accounts and
//! logging it, every 50th also writing a 1 MB batch of notes (256 blobs of 4 KiB) through
//! a 32-page cache, so SQLite spills into the WAL before the commit. Halfway it creates
//! HALFWAY_FILE and waits for RESUME_FILE. At the end it prints one JSON line:
//! `{"stats": <PRAGMA io_uring_stats before closing>, "log": {"n", "weighted"},
//! "balances": "b1,b2,…", "notes": N}`.
//!
//! Declared with `#[path]` by the tests that use it (not from `common/mod.rs`, which every
//! test of this crate includes).

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const TRANSFERS: usize = 3000;
const INITIAL_TOTAL: i64 = 100 * 1000;
const NOTES_PER_BATCH: usize = 256;
const NOTE_BYTES: u64 = 4096;
/// Reads of the free-running reader at most (a bound on its loop, not a target).
const MAX_READS: usize = 100_000;
/// Guards against hangs only; nothing here measures time.
const HANG_GUARD: Duration = Duration::from_secs(600);

/// One snapshot read by the stock CLI: `transfers|total|mismatched accounts|notes`.
/// The mismatch count compares every balance with 1000 plus its logged credits minus its
/// logged debits, in the same statement, so it is 0 in any consistent snapshot.
fn cli_snapshot(db: &Path) -> Option<(usize, i64, i64, i64)> {
    let output = Command::new("sqlite3")
        .args(["-bail", "-cmd", ".timeout 10000"])
        .arg(db)
        .arg(
            "SELECT (SELECT count(*) FROM log), (SELECT sum(balance) FROM acct),
               (SELECT count(*) FROM acct a WHERE a.balance != 1000
                  + (SELECT coalesce(sum(amount), 0) FROM log WHERE dst = a.id)
                  - (SELECT coalesce(sum(amount), 0) FROM log WHERE src = a.id)),
               (SELECT count(*) FROM note);",
        )
        .stdin(Stdio::null())
        .output()
        .expect("Debian's sqlite3 CLI is required (apt-get install sqlite3)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("no such table") {
        return None; // the writer has not created its schema yet
    }
    assert!(output.status.success(), "sqlite3 failed: {stdout}{stderr}");
    let fields: Vec<&str> = stdout.trim().split('|').collect();
    assert_eq!(fields.len(), 4, "{stdout}");
    Some((
        fields[0].parse().unwrap(),
        fields[1].parse().unwrap(),
        fields[2].parse().unwrap(),
        fields[3].parse().unwrap(),
    ))
}

fn assert_consistent(snapshot: (usize, i64, i64, i64), context: &str) {
    let (transfers, total, mismatched, notes) = snapshot;
    assert_eq!(
        total, INITIAL_TOTAL,
        "{context}: money appeared or vanished"
    );
    assert_eq!(mismatched, 0, "{context}: balances disagree with the log");
    assert_eq!(
        notes,
        (transfers / 50 * NOTES_PER_BATCH) as i64,
        "{context}: a note batch is torn from its transfer"
    );
}

/// The writer's output, for a failure message.
fn output_of(writer: Child) -> String {
    let output = writer.wait_with_output().unwrap();
    format!(
        "{}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Kills the writer (a hang guard fired) and fails with what it printed.
fn give_up(mut writer: Child, what: &str) -> ! {
    let _ = writer.kill();
    panic!("{what}; the writer: {}", output_of(writer))
}

/// Runs `writer` (a command for the writer program, without the arguments) on a new
/// database in `dir`, reads that database with the stock CLI halfway and then
/// concurrently until the writer exits, and checks every snapshot, the final file and the
/// writer's report.
pub fn check_writer_against_stock_readers(mut writer: Command, dir: &Path) {
    let db = dir.join("transfers.db");
    let half = dir.join("half");
    let resume = dir.join("resume");
    let mut writer = writer
        .arg(crate::common::extension())
        .arg(&db)
        .arg(TRANSFERS.to_string())
        .arg(&half)
        .arg(&resume)
        .env_remove("RUST_LOG")
        .env_remove("SQLITE_URING_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the writer");

    // Halfway, the writer waits: the CLI must see exactly the first half, committed by
    // another process through another VFS and still in the WAL.
    let deadline = Instant::now() + HANG_GUARD;
    while !half.exists() {
        if writer.try_wait().unwrap().is_some() {
            panic!("the writer exited before halfway: {}", output_of(writer));
        }
        if Instant::now() > deadline {
            give_up(writer, "the writer never reached halfway");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let snapshot = cli_snapshot(&db).expect("the schema exists halfway");
    assert_eq!(snapshot.0, TRANSFERS / 2, "the CLI's view halfway");
    assert_consistent(snapshot, "halfway");
    assert!(
        fs::metadata(dir.join("transfers.db-wal")).unwrap().len() > 0,
        "the first half is in the WAL the CLI read"
    );
    fs::write(&resume, b"").unwrap();

    // The second half, read concurrently by one CLI process after another.
    let mut reads = 0;
    let mut last_seen = TRANSFERS / 2;
    while writer.try_wait().unwrap().is_none() && reads < MAX_READS {
        if Instant::now() > deadline {
            give_up(writer, "the writer did not finish");
        }
        if let Some(snapshot) = cli_snapshot(&db) {
            assert_consistent(snapshot, &format!("read {reads}"));
            assert!(snapshot.0 >= last_seen, "a later read saw fewer transfers");
            last_seen = snapshot.0;
        }
        reads += 1;
    }
    eprintln!("{reads} reads while the writer ran its second half");
    let output = writer.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the writer failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "the writer's report is not JSON ({error}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    });

    // The VFS carried the writes: the database was open on io_uring, whose counters (all
    // files of the writer's VFS) hold at least the bytes of every note batch, which
    // passed through the WAL.
    let stats = &report["stats"];
    assert_eq!(stats["vfs"], "io_uring", "{report}");
    let note_bytes = (TRANSFERS / 50 * NOTES_PER_BATCH) as u64 * NOTE_BYTES;
    let total = &stats["vfs_total"];
    assert!(
        total["bytes_written"].as_u64().unwrap() >= note_bytes,
        "the VFS wrote fewer bytes than the notes hold ({note_bytes}): {report}"
    );
    assert!(total["sync_calls"].as_u64().unwrap() > 0, "{report}");
    assert!(
        stats["file"]["write_calls"].as_u64().unwrap() > 0,
        "{report}"
    );

    // The final state, as the stock CLI reads it (the writer has closed: the WAL was
    // checkpointed into the database file), equals what the writer saw.
    let snapshot = cli_snapshot(&db).unwrap();
    assert_eq!(snapshot.0, TRANSFERS);
    assert_consistent(snapshot, "final");
    let output = Command::new("sqlite3")
        .arg(&db)
        .arg(
            "PRAGMA integrity_check;
             SELECT count(*), sum(amount * seq) FROM log;
             SELECT group_concat(balance, ',') FROM (SELECT balance FROM acct ORDER BY id);",
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "ok", "{stdout}");
    assert_eq!(
        lines[1],
        format!("{}|{}", report["log"]["n"], report["log"]["weighted"]),
        "log as the CLI reads it vs as the writer saw it"
    );
    assert_eq!(lines[2], report["balances"].as_str().unwrap(), "balances");
    assert_eq!(
        report["notes"].as_u64().unwrap(),
        (TRANSFERS / 50 * NOTES_PER_BATCH) as u64
    );
}
