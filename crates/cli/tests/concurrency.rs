//! `bench concurrency` end to end, as users run it: every pattern (the processes
//! pattern starts stock `sqlite3` processes and reader processes of this binary), each
//! run in a fresh worker process, both targets, every export. Nothing here depends on
//! timing: it checks that every kind of operation ran and was checked, and the shape
//! of the results.

mod common;

use std::process::Command;

use common::{describe, entries, text};

#[test]
fn a_tiny_run_of_every_pattern_exports_both_targets() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("concurrency.json");
    let svg = out.path().join("concurrency.svg");
    let markdown = out.path().join("concurrency.md");
    let output = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .args([
            "bench",
            "concurrency",
            "--allow-debug",
            "--threads",
            "1,2",
            "--duration-ms",
            "30",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--rows",
            "300",
            "--synchronous",
            "normal",
        ])
        .arg("--dir")
        .arg(dir.path())
        .arg("--export-json")
        .arg(&json)
        .arg("--export-markdown")
        .arg(&markdown)
        .arg("--chart")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("Verdict against unix"), "{stdout}");
    assert!(stdout.contains("processes:   stock sqlite3 3."), "{stdout}");

    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let key = |r: &serde_json::Value| {
        format!(
            "{} {} {} {}",
            r["pattern"].as_str().unwrap(),
            r["journal"].as_str().unwrap(),
            r["threads"],
            r["kind"].as_str().unwrap()
        )
    };
    let mut expected = Vec::new();
    for n in [1, 2] {
        for kind in ["lookup", "scan", "commit"] {
            expected.push(format!("readers wal {n} {kind}"));
        }
        // A rollback-mode reader pool has no writer.
        for kind in ["lookup", "scan"] {
            expected.push(format!("readers delete {n} {kind}"));
        }
        for journal in ["delete", "wal"] {
            expected.push(format!("databases {journal} {n} commit"));
        }
        expected.push(format!("processes wal {n} commit"));
        expected.push(format!("processes wal {n} sqlite3 lookup"));
    }
    // N = 2 readers: one stock sqlite3 process and one of this program.
    expected.push("processes wal 2 lookup".into());
    expected.push("processes wal 2 scan".into());
    for target in ["unix", "io_uring"] {
        let mut found: Vec<String> = records
            .iter()
            .filter(|r| r["target"] == target)
            .map(key)
            .collect();
        found.sort();
        let mut wanted = expected.clone();
        wanted.sort();
        assert_eq!(found, wanted, "records of {target}");
    }
    for record in &records {
        assert_eq!(record["runs"], 2, "{record}");
        assert_eq!(record["baseline"], "unix");
        // Every run completed operations of the kind, each checked by the workload.
        assert!(record["ops_mean"].as_f64().unwrap() >= 1.0, "{record}");
        assert!(
            record["rate_mean_per_s"].as_f64().unwrap() > 0.0,
            "{record}"
        );
        let p50 = record["p50_latency_us"].as_f64().unwrap();
        let p99 = record["p99_latency_us"].as_f64().unwrap();
        assert!(p50 > 0.0 && p99 >= p50, "{record}");
        match record["target"].as_str().unwrap() {
            "unix" => {
                assert_eq!(record["relative"], 1.0);
                assert!(record["paired_median"].is_null());
                assert_eq!(record["vfs"], "unix_counted");
            }
            _ => {
                assert!(record["paired_median"].as_f64().unwrap() > 0.0, "{record}");
                // Two runs are too few for an interval, hence for a verdict.
                assert!(record["paired_ci_low"].is_null() && record["verdict"].is_null());
                assert_eq!(record["vfs"], "io_uring");
            }
        }
    }
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg"));
    assert!(chart.contains("processes sqlite3 lookups/s · io_uring"));
    let report = std::fs::read_to_string(&markdown).unwrap();
    assert!(report.contains("## processes (wal), N = 2: 1 writer + 2 reader process(es)"));
    // The run directories and databases are gone, and no reader process is left.
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    assert!(
        common::workers_of(std::process::id(), &dir.path().to_string_lossy()).is_empty(),
        "processes of the run are still running"
    );
}
