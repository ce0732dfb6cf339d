//! `bench speed --breakdown`: every file target's VFS calls timed by method, in worker
//! processes (the default isolation). The wrapper that times them must see exactly the
//! calls each VFS counts for itself, the parts of a run must add up to the run, and the
//! table, the Markdown report and the JSON export must carry the breakdown.

mod common;

use std::process::Command;

use common::{assert_within_interval, describe, entries, text};

#[test]
fn every_file_target_is_timed_by_method_and_its_parts_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("speed.json");
    let markdown = out.path().join("speed.md");
    let output = Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .args([
            "bench",
            "speed",
            "--allow-debug",
            "--targets",
            "memory,unix,io_uring",
            "--journal",
            "delete,wal",
            "--tests",
            "1,16",
            "--scale",
            "0.02",
            "--runs",
            "6",
            "--warmup",
            "0",
            "--breakdown",
        ])
        .arg("--dir")
        .arg(dir.path())
        .arg("--export-json")
        .arg(&json)
        .arg("--export-markdown")
        .arg(&markdown)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("NOTE: --breakdown")
            && stdout.matches("Where the time goes, by VFS method").count() == 2
            && stdout.contains("outside the VFS")
            && stdout.contains("io_uring:    VFS io_uring on backend"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        entries(dir.path()),
        Vec::<String>::new(),
        "files left in --dir"
    );
    let report = std::fs::read_to_string(&markdown).unwrap();
    assert_eq!(
        report.matches("### Where the time goes").count(),
        2,
        "{report}"
    );

    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // memory once, unix and io_uring in two journal modes, for each of the 2 tests.
    assert_eq!(records.len(), 2 * (1 + 2 * 2));
    for record in &records {
        if record["target"] == "memory" {
            assert!(record.get("breakdown").is_none(), "{record}");
            continue;
        }
        let shares = record["breakdown"].as_array().unwrap();
        let share = |part: &str| shares.iter().find(|s| s["part"] == part);
        // The wrapper saw exactly the calls SQLite made, as each VFS counted them.
        for (part, counted) in [
            ("xRead", "read_calls"),
            ("xWrite", "write_calls"),
            ("xSync", "sync_calls"),
        ] {
            // (The record's counts are whole means, rounded down.)
            let calls = share(part).map_or(0.0, |s| s["calls_per_run"].as_f64().unwrap());
            assert_eq!(
                calls.floor(),
                record[counted].as_f64().unwrap(),
                "{part}: {record}"
            );
        }
        // The whole test is the run's own median; no part takes more than the run.
        let whole = share("whole test").unwrap()["median_s"].as_f64().unwrap();
        assert_eq!(whole, record["median_s"].as_f64().unwrap(), "{record}");
        // Time was measured: an fsync takes some, and the calls take some of the body.
        let median = |part: &str| share(part).unwrap()["median_s"].as_f64().unwrap();
        assert!(median("xSync") > 0.0, "{record}");
        assert!(median("outside the VFS") < whole, "{record}");
        for part in shares {
            let median = part["median_s"].as_f64().unwrap();
            assert!((0.0..=whole).contains(&median), "{part} of {record}");
        }
        // io_uring, opened through the wrapper (which its record does not name), is
        // compared part by part with unix.
        let is_baseline = record["target"] == "unix";
        assert_eq!(
            record["vfs"],
            if is_baseline {
                "unix_counted"
            } else {
                "io_uring"
            }
        );
        for part in shares {
            assert_eq!(part["difference_s"].is_null(), is_baseline, "{part}");
            if !is_baseline {
                assert_within_interval(
                    part,
                    "difference_ci_low_s",
                    "difference_s",
                    "difference_ci_high_s",
                );
            }
        }
        // The engine's own counters still come from the VFS.
        if !is_baseline {
            assert!(record["kernel_entries"].as_u64() > Some(0), "{record}");
        }
    }
}
