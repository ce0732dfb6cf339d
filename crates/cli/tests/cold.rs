//! `bench cold` as a user runs it: every run in a fresh worker process, on a database
//! built once and kept in --dir, with every export; and `bench speed --cache cold`.
//! These tests check what is measured and written, never how fast anything was.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{describe, entries, text};

fn sqlite_uring(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sqlite-uring"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}

/// A directory on the disk: on tmpfs nothing is read from a device.
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap()
}

const TESTS: [&str; 7] = [
    "scan-without-rowid",
    "scan-rowid",
    "index-range",
    "create-index",
    "integrity-check",
    "vacuum-into",
    "point-lookups",
];

#[test]
fn a_tiny_run_measures_every_cell_and_writes_every_export() {
    let dir = disk_dir();
    let out = tempfile::tempdir().unwrap();
    let file = |name: &str| out.path().join(name).display().to_string();
    let (json, csv, markdown, chart) = (
        file("cold.json"),
        file("cold.csv"),
        file("cold.md"),
        file("cold.svg"),
    );
    let output = sqlite_uring(
        &[
            "bench",
            "cold",
            "--allow-debug",
            "--size-mib",
            "2",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--export-json",
            &json,
            "--export-csv",
            &csv,
            "--export-markdown",
            &markdown,
            "--chart",
            &chart,
        ],
        dir.path(),
    );
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("building"), "{stdout}");
    assert!(stdout.contains("isolation process"), "{stdout}");
    assert!(stdout.contains("Verdict against unix"), "{stdout}");
    let on_tmpfs = stdout.contains("(tmpfs on");

    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // 7 tests × 2 cache states × 2 targets × 2 journal modes, each exactly once.
    assert_eq!(records.len(), 7 * 2 * 2 * 2);
    for test in TESTS {
        for cache in ["cold", "hot"] {
            for target in ["unix", "io_uring"] {
                for journal in ["delete", "wal"] {
                    let found: Vec<&serde_json::Value> = records
                        .iter()
                        .filter(|r| {
                            r["test"] == test
                                && r["cache"] == cache
                                && r["target"] == target
                                && r["journal"] == journal
                        })
                        .collect();
                    assert_eq!(found.len(), 1, "{test} {cache} {target} {journal}");
                    let record = found[0];
                    let read_bytes = record["read_bytes"]
                        .as_u64()
                        .unwrap_or_else(|| panic!("no read_bytes: {record}"));
                    if cache == "cold" && !on_tmpfs {
                        assert!(read_bytes > 0, "a cold run reads the device: {record}");
                        assert!(
                            record["resident_after_evict_pages"].as_f64().is_some(),
                            "{record}"
                        );
                    }
                    assert_eq!(record["runs"], 1);
                    assert!(record["mean_s"].as_f64().unwrap() > 0.0);
                    assert!(record["database_pages"].as_u64().unwrap() >= 512);
                    assert_eq!(record["page_size"], 4096);
                    // Paired with unix of the same journal mode and cache state.
                    assert_eq!(record["paired_median"].is_null(), target == "unix");
                }
            }
        }
    }
    // Every target read the same rows from the same bytes.
    for test in TESTS {
        let checksums: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| r["test"] == test)
            .map(|r| &r["checksum"])
            .collect();
        assert!(checksums.iter().all(|c| *c == checksums[0]), "{test}");
    }
    let csv_rows = csv::Reader::from_path(&csv).unwrap().records().count();
    assert_eq!(csv_rows, records.len());
    let markdown = std::fs::read_to_string(&markdown).unwrap();
    for wanted in [
        "# sqlite-uring bench cold",
        "cold:        before each timed test",
        "hot:         before each timed test",
        "pages of 4096 B",
        "cache_size:  -2000",
        "## 7. point-lookups · hot",
        "## Verdict",
    ] {
        assert!(markdown.contains(wanted), "{wanted}: {markdown}");
    }
    assert!(std::fs::read_to_string(&chart).unwrap().contains("<svg"));

    // The database is kept for the next invocation, and nothing else is left.
    let mut kept = entries(dir.path());
    kept.sort();
    assert_eq!(
        kept,
        [
            "sqlite-uring-cold-2mib-p4096-v1-delete.db",
            "sqlite-uring-cold-2mib-p4096-v1-wal.db"
        ]
    );
    let again = sqlite_uring(
        &[
            "bench",
            "cold",
            "--allow-debug",
            "--size-mib",
            "2",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--tests",
            "point-lookups",
            "--journal",
            "wal",
        ],
        dir.path(),
    );
    assert!(again.status.success(), "{}", describe(&again));
    let stdout = text(&again.stdout);
    assert!(
        stdout.contains("reusing") && !stdout.contains("building"),
        "{stdout}"
    );
    let forced = sqlite_uring(
        &[
            "bench",
            "cold",
            "--allow-debug",
            "--size-mib",
            "2",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--tests",
            "scan-rowid",
            "--cache",
            "cold",
            "--journal",
            "wal",
            "--rebuild",
        ],
        dir.path(),
    );
    assert!(forced.status.success(), "{}", describe(&forced));
    assert!(
        text(&forced.stdout).contains("building"),
        "{}",
        describe(&forced)
    );
}

/// `--database` and `--query`, as a user runs them: each run in a worker process reads
/// the user's file (WAL mode here) read-only, the queries' rows agree across targets, and
/// the file's bytes are as they were.
#[test]
fn a_given_database_is_read_by_workers_and_left_as_it_was() {
    let dir = disk_dir();
    let database = dir.path().join("mine.db");
    let connection = rusqlite::Connection::open(&database).unwrap();
    connection
        .execute_batch(
            "PRAGMA journal_mode=wal;
             CREATE TABLE t(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
             WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5000)
               INSERT INTO t SELECT hex(randomblob(8)), printf('%.*c', 100 + x % 50, 'v') FROM n;",
        )
        .unwrap();
    drop(connection);
    let before = std::fs::read(&database).unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("mine.json").display().to_string();
    let output = sqlite_uring(
        &[
            "bench",
            "cold",
            "--allow-debug",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--database",
            database.to_str().unwrap(),
            "--query",
            "SELECT count(*), sum(length(v)) FROM t",
            "--query",
            "SELECT k FROM t WHERE k > '8' LIMIT 5",
            "--export-json",
            &json,
        ],
        dir.path(),
    );
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("(given, opened read-only by every target)")
            && stdout.contains("journal mode wal")
            && stdout.contains("1. query-1 · cold: `SELECT count(*), sum(length(v)) FROM t`"),
        "{stdout}"
    );
    let records: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(records.len(), 2 * 2 * 2);
    for query in ["query-1", "query-2"] {
        let of_query: Vec<&serde_json::Value> =
            records.iter().filter(|r| r["test"] == query).collect();
        assert_eq!(of_query.len(), 4);
        assert!(of_query
            .iter()
            .all(|r| r["checksum"] == of_query[0]["checksum"] && r["journal"] == "wal"));
    }
    assert_eq!(std::fs::read(&database).unwrap(), before);
}

#[test]
fn bad_arguments_name_the_flag_and_build_nothing() {
    let dir = disk_dir();
    for (args, wanted) in [
        (vec!["--size-mib", "0"], "--size-mib"),
        (vec!["--tests", "scan-everything"], "--tests"),
        (vec!["--cache", "lukewarm"], "--cache"),
        (
            vec!["--baseline", "sync"],
            "--baseline sync is not among --targets",
        ),
        (vec!["--targets", "unix,memory"], "--targets memory"),
    ] {
        let mut words = vec!["bench", "cold", "--allow-debug"];
        words.extend(&args);
        let output = sqlite_uring(&words, dir.path());
        assert!(!output.status.success(), "{args:?}: {}", describe(&output));
        let stderr = text(&output.stderr);
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert_eq!(entries(dir.path()), Vec::<String>::new());
}

#[test]
fn speed_with_a_cold_cache_says_so() {
    let dir = disk_dir();
    let output = sqlite_uring(
        &[
            "bench",
            "speed",
            "--allow-debug",
            "--targets",
            "unix,io_uring",
            "--journal",
            "wal",
            "--tests",
            "4,7",
            "--scale",
            "0.02",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--cache",
            "cold",
        ],
        dir.path(),
    );
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("cache cold (pages evicted before each timed test)"),
        "{stdout}"
    );
    assert_eq!(entries(dir.path()), Vec::<String>::new(), "files left");
}
