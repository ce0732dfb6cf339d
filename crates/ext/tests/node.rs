//! Node.js's better-sqlite3 (its own SQLite, built from source by npm) loading the
//! extension and writing through `io_uring` in WAL mode, while Debian's stock `sqlite3`
//! CLI (the `unix` VFS, classic POSIX locks) reads the same database from other processes.
//!
//! better-sqlite3 is found through `npm root -g` (`.ci/run` installs it globally at a
//! pinned version); without it the test fails, naming the install command.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const INSTALL: &str =
    "npm_config_build_from_source=true npm_config_nodedir=/usr npm install -g better-sqlite3@12.11.1";
const TRANSFERS: usize = 3000;
const INITIAL_TOTAL: i64 = 100 * 1000;
/// Reads of the free-running reader at most (a bound on its loop, not a target).
const MAX_READS: usize = 100_000;
/// Guards against hangs only; nothing here measures time.
const HANG_GUARD: Duration = Duration::from_secs(600);

/// The directory holding better-sqlite3, for NODE_PATH.
fn global_node_modules() -> PathBuf {
    let output = Command::new("npm")
        .args(["root", "-g"])
        .output()
        .unwrap_or_else(|error| panic!("node and npm are required ({error}); then: {INSTALL}"));
    assert!(output.status.success(), "npm root -g failed");
    let root = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    assert!(
        root.join("better-sqlite3/package.json").is_file(),
        "better-sqlite3 is not installed in {}. Install it with:\n    {INSTALL}\n(.ci/run does)",
        root.display()
    );
    root
}

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
        (transfers / 50 * 256) as i64,
        "{context}: a note batch is torn from its transfer"
    );
}

#[test]
fn better_sqlite3_writes_through_io_uring_while_the_stock_cli_reads() {
    let node_modules = global_node_modules();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let half = dir.path().join("half");
    let go = dir.path().join("go");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/node_writer.js");

    let mut writer = Command::new("node")
        .arg(&script)
        .arg(common::extension())
        .arg(&db)
        .arg(TRANSFERS.to_string())
        .arg(&half)
        .arg(&go)
        .env("NODE_PATH", &node_modules)
        .env_remove("RUST_LOG")
        .env_remove("SQLITE_URING_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node is required");

    // Halfway, the writer waits: the CLI must see exactly the first half, committed by
    // another process through another VFS and still in the WAL.
    let deadline = Instant::now() + HANG_GUARD;
    while !half.exists() {
        if let Some(status) = writer.try_wait().unwrap() {
            let output = writer.wait_with_output().unwrap();
            panic!(
                "the writer exited ({status}) before halfway:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert!(Instant::now() < deadline, "the writer stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
    let snapshot = cli_snapshot(&db).expect("the schema exists halfway");
    assert_eq!(snapshot.0, TRANSFERS / 2, "the CLI's view halfway");
    assert_consistent(snapshot, "halfway");
    assert!(
        fs::metadata(dir.path().join("node.db-wal")).unwrap().len() > 0,
        "the first half is in the WAL the CLI read"
    );
    fs::write(&go, b"").unwrap();

    // The second half, read concurrently by one CLI process after another.
    let mut reads = 0;
    let mut last_seen = TRANSFERS / 2;
    while writer.try_wait().unwrap().is_none() && reads < MAX_READS {
        if let Some(snapshot) = cli_snapshot(&db) {
            assert_consistent(snapshot, &format!("read {reads}"));
            assert!(snapshot.0 >= last_seen, "a later read saw fewer transfers");
            last_seen = snapshot.0;
        }
        reads += 1;
    }
    let output = writer.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the writer failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let seen_by_node: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen_by_node["vfs"], "io_uring");

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
        format!(
            "{}|{}",
            seen_by_node["log"]["n"], seen_by_node["log"]["weighted"]
        ),
        "log as the CLI reads it vs as the writer saw it"
    );
    assert_eq!(
        lines[2],
        seen_by_node["balances"].as_str().unwrap(),
        "balances"
    );
    assert_eq!(
        seen_by_node["notes"].as_u64().unwrap(),
        (TRANSFERS / 50 * 256) as u64
    );
}
