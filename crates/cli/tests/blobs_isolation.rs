//! `bench blobs --isolation process` (the default): every run of a case in a fresh
//! worker process. The workers' results must be those the same runs give in one
//! process, and an interrupted run must stop its worker and leave no files.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_stopped_by_sigterm, describe, entries, terminate_and_wait, text, workers_of};

/// The fields of an exported record that do not depend on timing.
fn deterministic_fields(record: &serde_json::Value) -> String {
    let keep = [
        "target",
        "journal",
        "compression",
        "size_bytes",
        "batch",
        "phase",
        "runs",
        "ops_done",
        "stopped_by",
        "logical_bytes",
        "stored_bytes",
        "verified",
        "commits",
        "db_bytes",
        "fsyncs",
    ];
    keep.iter()
        .map(|key| format!("{key}={}", record[key]))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_blobs(dir: &Path, json: &Path, isolation: &[&str]) -> Vec<String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"));
    command.args([
        "bench",
        "blobs",
        "--allow-debug",
        "--suite",
        "storage",
        "--targets",
        "memory,unix,io_uring",
        "--journal",
        "delete,wal",
        "--sizes",
        "64B,20KB",
        "--batch",
        "1,10",
        "--compression",
        "none,zstd",
        "--ops",
        "25",
        "--max-seconds",
        "60",
        "--runs",
        "2",
        "--warmup",
        "1",
    ]);
    command.args(isolation).arg("--dir").arg(dir);
    command.arg("--export-json").arg(json);
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    let isolation_name = isolation.last().copied().unwrap_or("process");
    assert!(
        text(&output.stdout).contains(&format!("isolation {isolation_name}")),
        "{}",
        describe(&output)
    );
    assert_eq!(entries(dir), Vec::<String>::new(), "files left in --dir");
    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    records.iter().map(deterministic_fields).collect()
}

#[test]
fn worker_processes_report_what_one_process_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let isolated = run_blobs(dir.path(), &out.path().join("process.json"), &[]);
    let in_process = run_blobs(
        dir.path(),
        &out.path().join("none.json"),
        &["--isolation", "none"],
    );
    // memory once, unix and io_uring per journal: 5 targets × 2 sizes × 2 batches
    // × 2 compressions × 3 phases.
    assert_eq!(isolated.len(), 5 * 2 * 2 * 2 * 3);
    assert_eq!(isolated, in_process);
    // Every blob of both measured runs was verified, in every read phase.
    assert!(
        isolated
            .iter()
            .filter(|r| r.contains("phase=\"read"))
            .all(|r| r.contains("verified=50")),
        "{isolated:#?}"
    );
    // The VFS counters crossed the pipe: io_uring rows have fsyncs.
    assert!(isolated
        .iter()
        .any(|r| r.contains("target=\"io_uring\"") && !r.contains("fsyncs=null")));
}

#[test]
fn sigterm_to_the_parent_stops_the_worker_and_removes_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .args([
            "bench",
            "blobs",
            "--allow-debug",
            "--suite",
            "storage",
            "--targets",
            "io_uring",
            "--journal",
            "delete",
            "--sizes",
            "20KB",
            "--batch",
            "1",
            "--compression",
            "none",
            "--ops",
            "1000000",
            "--max-seconds",
            "120",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the worker is writing its database.
    let deadline = Instant::now() + Duration::from_secs(60);
    let database = loop {
        let found = entries(dir.path())
            .into_iter()
            .map(|run_dir| dir.path().join(run_dir).join("blobs-io_uring.db"))
            .find(|db| db.exists());
        if let Some(db) = found {
            break db;
        }
        assert!(Instant::now() < deadline, "no database appeared");
        std::thread::sleep(Duration::from_millis(20));
    };
    let needle = dir.path().display().to_string();
    let workers = workers_of(child.id(), &needle);
    assert_eq!(
        workers.len(),
        1,
        "one worker expected while {database:?} exists"
    );

    // Unforwarded, the signal would wait for the worker's case: up to 3 × 120 s.
    let output = terminate_and_wait(child, Duration::from_secs(60), "worker not signalled?");
    assert_stopped_by_sigterm(&output, dir.path(), workers[0], &needle);
}
