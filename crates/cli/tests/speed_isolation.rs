//! `bench speed --isolation process` (the default): every run of a test on a target in a
//! fresh worker process. The workers must report what the same runs report in one
//! process: the same rows seen (checksums), the same VFS calls and fsyncs. An
//! interrupted run must stop its worker and leave no files.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    assert_stopped_by_sigterm, assert_within_interval, describe, entries, terminate_and_wait, text,
    workers_of,
};

/// The fields of an exported record that do not depend on timing.
fn deterministic_fields(record: &serde_json::Value) -> String {
    let keep = [
        "test",
        "target",
        "journal",
        "runs",
        "checksum",
        "read_calls",
        "write_calls",
        "sync_calls",
        "truncate_calls",
        "bytes_written",
        "fsyncs",
        "kernel_entries",
    ];
    keep.iter()
        .map(|key| format!("{key}={}", record[key]))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_speed(dir: &Path, json: &Path, isolation: &str) -> Vec<serde_json::Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .args([
            "bench",
            "speed",
            "--allow-debug",
            "--targets",
            "memory,unix,io_uring,io_uring?uring_syncs=ring",
            "--journal",
            "delete,wal",
            "--tests",
            "1,7,12,16",
            "--scale",
            "0.02",
            "--runs",
            "6",
            "--warmup",
            "1",
            "--isolation",
            isolation,
        ])
        .arg("--dir")
        .arg(dir)
        .arg("--export-json")
        .arg(json)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(&format!("isolation {isolation}")),
        "{}",
        describe(&output)
    );
    // Six paired runs: every comparison has its 95 % interval and a verdict line.
    assert!(
        stdout.contains("Verdict against unix")
            && stdout.contains("=> ")
            && !stdout.contains("too few runs"),
        "{}",
        describe(&output)
    );
    assert_eq!(entries(dir), Vec::<String>::new(), "files left in --dir");
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn worker_processes_report_what_one_process_reports() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let isolated = run_speed(dir.path(), &out.path().join("process.json"), "process");
    let in_process = run_speed(dir.path(), &out.path().join("none.json"), "none");
    // memory once, three file targets per journal mode, for each of the 4 tests.
    assert_eq!(isolated.len(), 4 * (1 + 3 * 2));
    let fields = |records: &[serde_json::Value]| -> Vec<String> {
        records.iter().map(deterministic_fields).collect()
    };
    assert_eq!(fields(&isolated), fields(&in_process));
    for record in &isolated {
        let is_baseline = record["target"] == "unix";
        assert_eq!(
            record["paired_median"].is_null(),
            is_baseline,
            "paired ratios for all but the baseline: {record}"
        );
        if !is_baseline {
            assert_within_interval(record, "paired_ci_low", "paired_median", "paired_ci_high");
        }
    }
    // The VFS counters crossed the pipe: io_uring rows count fsyncs and kernel entries.
    assert!(isolated
        .iter()
        .any(|r| r["target"] == "io_uring" && r["fsyncs"].as_u64() > Some(0)));
}

#[test]
fn sigterm_to_the_parent_stops_the_worker_and_removes_every_file() {
    let dir = tempfile::tempdir().unwrap();
    // Test 1 at 100 times its size is 100,000 durable commits: about a minute for one
    // run here, so only a signal forwarded to the worker ends the run in time.
    let child = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .args([
            "bench",
            "speed",
            "--allow-debug",
            "--targets",
            "unix,io_uring",
            "--journal",
            "delete",
            "--tests",
            "1",
            "--scale",
            "100",
            "--runs",
            "2",
            "--warmup",
            "0",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let database = dir
        .path()
        .join(format!("sqlite-uring-speed-{}.db", child.id()));
    let needle = dir.path().display().to_string();
    // Wait until a worker is writing the run's database (between two runs there is
    // briefly neither).
    let deadline = Instant::now() + Duration::from_secs(60);
    let worker = loop {
        let workers = workers_of(child.id(), &needle);
        if database.exists() && workers.len() == 1 {
            break workers[0];
        }
        assert!(
            workers.len() <= 1,
            "at most one worker at a time: {workers:?}"
        );
        assert!(Instant::now() < deadline, "no worker wrote {database:?}");
        std::thread::sleep(Duration::from_millis(20));
    };

    let output = terminate_and_wait(
        child,
        Duration::from_secs(20),
        "worker not signalled, or it does not poll between statements?",
    );
    assert_stopped_by_sigterm(&output, dir.path(), worker, &needle);
}
