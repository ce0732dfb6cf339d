//! End-to-end tests of `bench io` on small files: argument validation, formats,
//! every method writing correct data, and cleanup on failure. No timing asserts.

use clap::Parser;

use super::options::{parse_size, IoArgs, Method, Plan, RingFlags, Strategy};
use super::output::{self, RunRecord};
use super::{execute, preflight};

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: IoArgs,
}

fn parse(extra: &[&str]) -> Result<IoArgs, clap::Error> {
    let mut argv = vec!["bench-io"];
    argv.extend_from_slice(extra);
    Wrapper::try_parse_from(argv).map(|w| w.args)
}

fn plan(extra: &[&str]) -> anyhow::Result<Plan> {
    let args = parse(extra).map_err(|e| anyhow::anyhow!("{e}"))?;
    Plan::from_args(&args, true)
}

fn ring_works() -> bool {
    match io_uring::IoUring::new(8) {
        Ok(_) => true,
        Err(error) => {
            eprintln!("io_uring unavailable here ({error}): io_uring cases skipped");
            false
        }
    }
}

fn files_in(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn sizes_accept_units() {
    assert_eq!(parse_size("4096"), Ok(4096));
    assert_eq!(parse_size("4KiB"), Ok(4096));
    assert_eq!(parse_size("4k"), Ok(4096));
    assert_eq!(parse_size("64MiB"), Ok(64 << 20));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
    assert_eq!(parse_size("500MB"), Ok(500_000_000));
    assert_eq!(parse_size(" 2 GiB "), Ok(2 << 30));
}

#[test]
fn bad_sizes_are_rejected_with_a_reason() {
    for bad in [
        "",
        "GiB",
        "12XB",
        "1.2.3MiB",
        "-4KiB",
        "0.3B",
        "99999999999999999999",
        "20000000TiB",
    ] {
        let error = parse_size(bad).expect_err(bad);
        assert!(!error.is_empty());
    }
    let error = parse(&["--size", "12XB"]).err().unwrap().to_string();
    assert!(error.contains("--size"), "{error}");
    assert!(error.contains("unknown unit"), "{error}");
}

#[test]
fn zero_threads_entries_rounds_are_rejected() {
    for flag in ["--threads", "--entries", "--rounds"] {
        let error = parse(&[flag, "0"]).err().unwrap().to_string();
        assert!(error.contains(flag), "{flag}: {error}");
    }
    let error = parse(&["--threads", "1,0,4"]).err().unwrap().to_string();
    assert!(error.contains("--threads"), "{error}");
    assert!(parse(&["--entries", "5000"]).is_err());
}

#[test]
fn flag_combinations_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let err = |extra: &[&str]| plan(extra).err().map(|e| e.to_string()).unwrap_or_default();

    let e = err(&["--dir", d, "--direct", "--block-size", "1000"]);
    assert!(
        e.contains("--block-size") && e.contains("4096") && e.contains("--direct"),
        "{e}"
    );
    let e = err(&["--dir", d, "--direct", "--size", "10000"]);
    assert!(e.contains("--size") && e.contains("--direct"), "{e}");
    let e = err(&["--dir", d, "--size", "0"]);
    assert!(e.contains("--size"), "{e}");
    let e = err(&["--dir", d, "--block-size", "0"]);
    assert!(e.contains("--block-size"), "{e}");
    let e = err(&["--dir", d, "--block-size", "1GiB"]);
    assert!(e.contains("--block-size"), "{e}");
    let e = err(&["--dir", "/nonexistent/dir/for/bench"]);
    assert!(e.contains("--dir"), "{e}");
    let e = err(&["--dir", d, "--methods", "pwrite", "--sqpoll"]);
    assert!(e.contains("--methods") && e.contains("io_uring"), "{e}");
    let e = err(&[
        "--dir",
        d,
        "--threads",
        "1024",
        "--entries",
        "4096",
        "--block-size",
        "64KiB",
    ]);
    assert!(e.contains("--entries"), "{e}");
    // batch keeps a second buffer set per ring (its fill overlaps the writes):
    // 300 × 1024 × 4 KiB fits the limit once, not twice.
    let many = ["--dir", d, "--threads", "300", "--entries", "1024"];
    let e = err(&many);
    assert!(e.contains("two buffer sets"), "{e}");
    assert!(plan(&[&many[..], &["--strategy", "refill"]].concat()).is_ok());
    assert!(parse(&["--durability", "sometimes"]).is_err());
    assert!(parse(&["--methods", "mmap"]).is_err());
    // Non-direct runs accept any block size.
    assert!(plan(&["--dir", d, "--block-size", "1000"]).is_ok());
}

#[test]
fn default_matrix_is_io_playgrounds() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(&["--dir", dir.path().to_str().unwrap()]).unwrap();
    let names: Vec<String> = plan.methods.iter().map(|m| m.name(plan.ring)).collect();
    assert_eq!(plan.size_bytes, 1 << 30);
    assert_eq!(plan.block_size_bytes, 4096);
    assert_eq!(names[0], "dd");
    assert_eq!(names[1], "blocking");
    for t in [1, 10, 100] {
        assert!(names.contains(&format!("{t}_threads_pwrite")));
        assert!(names.contains(&format!("{t}_threads_io_uring_refill_1_entries")));
        assert!(names.contains(&format!("{t}_threads_io_uring_batch_128_entries")));
        assert!(names.contains(&format!("{t}_threads_io_uring_refill_128_entries")));
    }
    // One entry: batch = refill, run once.
    assert!(!names.iter().any(|n| n.contains("batch_1_entries")));
    assert_eq!(names.len(), 2 + 3 + 9);
}

#[test]
fn playground_csv_row_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(&["--dir", dir.path().to_str().unwrap(), "--size", "1GiB"]).unwrap();
    let outcome = super::engine::RunOutcome {
        elapsed_s: 0.5,
        ..Default::default()
    };
    let method = Method::IoUring {
        threads: 10,
        entries: 128,
        strategy: Strategy::Refill,
    };
    let record = RunRecord::new(&plan, method, 2, &outcome);
    assert_eq!(
        record.csv_row(),
        "10_threads_io_uring_refill_128_entries,0.500000,2147483648"
    );
    let flags = RingFlags {
        register_buffers: true,
        register_files: true,
        sqpoll: true,
    };
    assert_eq!(
        method.name(flags),
        "10_threads_io_uring_refill_128_entries_regbuf_regfile_sqpoll"
    );

    let csv_path = dir.path().join("runs.csv");
    crate::report::export::export_csv(&csv_path, std::slice::from_ref(&record)).unwrap();
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("method,seconds,bytes_per_sec,round,kind,threads,entries,strategy,"));
    assert!(lines.next().unwrap().starts_with(
        "10_threads_io_uring_refill_128_entries,0.5,2147483648.0,2,io_uring,10,128,refill,"
    ));

    let value = serde_json::to_value(&record).unwrap();
    assert_eq!(value["method"], "10_threads_io_uring_refill_128_entries");
    assert_eq!(value["bytes_per_sec"], 2147483648.0);
    assert_eq!(value["durability"], "end");
    assert_eq!(value["strategy"], "refill");
    let summaries = output::summarize(
        &plan,
        &[
            record.clone(),
            RunRecord {
                seconds: 1.0,
                ..record
            },
        ],
    );
    assert_eq!(summaries.len(), 1);
    let json = serde_json::to_value(&summaries[0]).unwrap();
    assert_eq!(json["time_s"]["mean"], 0.75);
    assert_eq!(json["time_s"]["runs"], 2);
    assert_eq!(output::format_rate(2_147_483_648.0), "2.1 GB/s");
}

/// Every method writes every byte once, correctly (checked by --verify), in a
/// buffered and an O_DIRECT pass, and leaves no file behind.
#[test]
fn every_method_writes_verifiable_data() {
    let uring = ring_works();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let methods = if uring {
        "blocking,pwrite,io_uring"
    } else {
        "blocking,pwrite"
    };
    for extra in [
        &["--durability", "end", "--size", "1MiB"][..],
        &[
            "--direct",
            "--durability",
            "none",
            "--size",
            "1MiB",
            "--register-buffers",
            "--register-files",
        ][..],
        &["--durability", "each", "--size", "300KiB", "--sqpoll"][..],
    ] {
        if !uring
            && extra
                .iter()
                .any(|a| a.starts_with("--register") || *a == "--sqpoll")
        {
            continue;
        }
        let mut argv = vec![
            "--dir",
            d,
            "--threads",
            "1,3",
            "--entries",
            "1,8",
            "--methods",
            methods,
            "--verify",
            "--allow-debug",
        ];
        argv.extend_from_slice(extra);
        let plan = plan(&argv).unwrap();
        preflight(&plan).unwrap();
        let mut seen = 0;
        let records = execute(&plan, &mut |_| seen += 1).unwrap();
        assert_eq!(records.len(), plan.methods.len() * plan.rounds as usize);
        assert_eq!(seen, records.len());
        assert!(
            records.iter().all(|r| r.verified == Some(true)),
            "{extra:?}"
        );
        assert!(
            files_in(dir.path()).is_empty(),
            "left behind: {:?}",
            files_in(dir.path())
        );
    }
}

#[test]
fn odd_sizes_and_more_threads_than_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let methods = if ring_works() {
        "blocking,pwrite,io_uring"
    } else {
        "blocking,pwrite"
    };
    let plan = plan(&[
        "--dir",
        d,
        "--size",
        "12345",
        "--block-size",
        "1000",
        "--threads",
        "7",
        "--entries",
        "3",
        "--methods",
        methods,
        "--verify",
        "--rounds",
        "1",
    ])
    .unwrap();
    let records = execute(&plan, &mut |_| {}).unwrap();
    assert!(records.iter().all(|r| r.verified == Some(true)));
}

/// A run that fails mid-way (an injected EIO at 64 KiB) removes its file, for
/// every method, and the error names the method and the offset.
#[test]
fn failing_run_removes_the_test_file() {
    let uring = ring_works();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut cases = vec!["blocking", "pwrite"];
    if uring {
        cases.push("io_uring");
    }
    for (methods, strategy) in cases
        .into_iter()
        .flat_map(|m| [(m, "batch"), (m, "refill")])
    {
        let mut plan = plan(&[
            "--dir",
            d,
            "--size",
            "1MiB",
            "--threads",
            "2",
            "--entries",
            "4",
            "--methods",
            methods,
            "--strategy",
            strategy,
        ])
        .unwrap();
        plan.inject_failure_at = Some(64 << 10);
        let error = execute(&plan, &mut |_| {}).unwrap_err().to_string();
        assert!(
            error.contains("offset 65536") && error.contains("EIO"),
            "{error}"
        );
        assert!(error.contains(&plan.methods[0].name(plan.ring)), "{error}");
        assert!(
            files_in(dir.path()).is_empty(),
            "left behind after {methods}: {:?}",
            files_in(dir.path())
        );
    }
}

#[test]
fn not_enough_space_fails_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(&[
        "--dir",
        dir.path().to_str().unwrap(),
        "--size",
        "1000000TiB",
        "--methods",
        "pwrite",
    ])
    .unwrap();
    let error = preflight(&plan).unwrap_err().to_string();
    assert!(
        error.contains("--size") && error.contains("--dir") && error.contains("free"),
        "{error}"
    );
    assert!(files_in(dir.path()).is_empty());
}
