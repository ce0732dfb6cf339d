//! Tests of `bench io --wal`: option parsing and validation, the aligned O_DIRECT
//! layout, every method committing SQLite's WAL bytes (checked by --verify), the
//! exports, and cleanup on failure. No timing asserts.

use std::os::unix::fs::OpenOptionsExt;

use clap::Parser;

use super::options::{IoArgs, WalMethod, WalSpace};
use super::wal::{self, aligned_range, WalCase, WalPlan, FRAME_BYTES, WAL_HEADER_BYTES};
use super::wal_output::{self, WalRunRecord};
use crate::bench::common::export::ExportManager;

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

fn wal_plan(extra: &[&str]) -> anyhow::Result<WalPlan> {
    let args = parse(extra).map_err(|e| anyhow::anyhow!("{e}"))?;
    WalPlan::from_args(&args)
}

fn files_in(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The methods this machine can run in `dir`: the O_DIRECT ones need a filesystem
/// with O_DIRECT, the ring ones io_uring; each missing piece is said, not hidden.
fn available_methods(dir: &std::path::Path) -> String {
    let mut methods = vec!["unix", "unix_fsync", "coalesced"];
    let probe = dir.join("odirect-probe");
    let direct = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(&probe);
    if direct {
        methods.extend(["direct_fdatasync", "direct_dsync"]);
        if io_uring::IoUring::new(4).is_ok() {
            methods.extend(["uring_dsync", "uring_fdatasync"]);
        } else {
            eprintln!("io_uring unavailable here: ring methods left out");
        }
    } else {
        eprintln!(
            "no O_DIRECT in {}: O_DIRECT methods left out",
            dir.display()
        );
    }
    methods.join(",")
}

#[test]
fn wal_defaults_and_case_order() {
    let dir = tempfile::tempdir().unwrap();
    let plan = wal_plan(&["--wal", "--dir", dir.path().to_str().unwrap()]).unwrap();
    assert_eq!(plan.baseline(), WalMethod::Unix);
    assert_eq!(plan.methods.len(), 7);
    assert_eq!(plan.frames, vec![1, 4, 16]);
    assert_eq!(plan.spaces, vec![WalSpace::Reused]);
    assert_eq!(plan.commits, 200);
    assert_eq!(plan.cases.len(), 7 * 3);
    assert_eq!(plan.cases[0].name(), "wal_unix_1_frames_reused");
    assert_eq!(plan.cases[1].name(), "wal_unix_fsync_1_frames_reused");
    let forwards = plan.round_order(1);
    let mut backwards = plan.round_order(2);
    backwards.reverse();
    assert_eq!(forwards, backwards);
    assert_eq!(plan.round_order(3), forwards);

    let plan = wal_plan(&[
        "--wal",
        "--dir",
        dir.path().to_str().unwrap(),
        "--wal-methods",
        "direct-dsync,unix,direct_dsync",
        "--commit-frames",
        "2,2,8",
        "--wal-space",
        "grows,reused,grows",
        "--commits",
        "7",
    ])
    .unwrap();
    assert_eq!(
        plan.methods,
        vec![WalMethod::DirectDsync, WalMethod::Unix],
        "deduplicated, in the order given; the first is the baseline"
    );
    assert_eq!(plan.frames, vec![2, 8]);
    assert_eq!(plan.spaces, vec![WalSpace::Grows, WalSpace::Reused]);
    assert_eq!(plan.cases.len(), 2 * 2 * 2);
    assert_eq!(plan.commits, 7);
}

#[test]
fn wal_options_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let parse_error = |extra: &[&str]| {
        parse(extra)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };

    // The WAL options need --wal; the one-file options conflict with it.
    for flag in [
        &["--commits", "5"][..],
        &["--commit-frames", "2"],
        &["--wal-methods", "unix"],
        &["--wal-space", "grows"],
    ] {
        let e = parse_error(flag);
        assert!(e.contains("--wal"), "{flag:?}: {e}");
    }
    for flag in [
        &["--size", "1MiB"][..],
        &["--direct"],
        &["--methods", "pwrite"],
        &["--durability", "each"],
        &["--preallocate"],
        &["--threads", "2"],
    ] {
        let mut argv = vec!["--wal", "--dir", d];
        argv.extend_from_slice(flag);
        let e = parse_error(&argv);
        assert!(e.contains("cannot be used with"), "{flag:?}: {e}");
    }
    let e = parse_error(&["--wal", "--commit-frames", "0"]);
    assert!(e.contains("--commit-frames"), "{e}");
    let e = parse_error(&["--wal", "--commit-frames", "257"]);
    assert!(e.contains("--commit-frames"), "{e}");
    let e = parse_error(&["--wal", "--commits", "0"]);
    assert!(e.contains("--commits"), "{e}");
    let e = parse_error(&["--wal", "--wal-methods", "unix,fsync_only"]);
    assert!(
        e.contains("--wal-methods") && e.contains("direct_dsync"),
        "{e}"
    );
    let e = parse_error(&["--wal", "--wal-space", "sparse"]);
    assert!(e.contains("--wal-space"), "{e}");

    // Checked in the plan: the WAL's size, the directory.
    let e = wal_plan(&[
        "--wal",
        "--dir",
        d,
        "--commits",
        "100000",
        "--commit-frames",
        "256",
    ])
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("--commits") && e.contains("lower"), "{e}");
    let e = wal_plan(&["--wal", "--dir", "/nonexistent/dir/for/bench"])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--dir"), "{e}");
    // Without --wal the one-file benchmark parses as before.
    assert!(!parse(&["--size", "1MiB"]).unwrap().wal);
}

#[test]
fn aligned_range_covers_the_commit_in_whole_blocks() {
    // The first frame starts after the 32-byte WAL header, in block 0.
    assert_eq!(
        aligned_range(WAL_HEADER_BYTES, WAL_HEADER_BYTES + FRAME_BYTES),
        (0, 8192)
    );
    for frames in [1u64, 3, 16] {
        for commit in 0..200u64 {
            let start = WAL_HEADER_BYTES + commit * frames * FRAME_BYTES;
            let end = start + frames * FRAME_BYTES;
            let (a, b) = aligned_range(start, end);
            assert!(a <= start && end <= b);
            assert_eq!(a % 4096, 0);
            assert_eq!(b % 4096, 0);
            assert!(start - a < 4096 && b - end < 4096);
        }
    }
}

/// Every method commits exactly SQLite's WAL bytes (header, then 24 + 4096 bytes per
/// frame at 32 + 4120·f), in reused and growing space, checked byte by byte by
/// --verify; the records, summaries and exports are well formed; no file is left.
#[test]
fn every_wal_method_commits_sqlites_bytes_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let methods = available_methods(dir.path());
    let out = tempfile::tempdir().unwrap();
    let json_path = out.path().join("wal.json");
    let csv_path = out.path().join("wal.csv");
    let md_path = out.path().join("wal.md");
    let svg_path = out.path().join("wal.svg");
    let args = parse(&[
        "--wal",
        "--dir",
        d,
        "--wal-methods",
        &methods,
        "--commit-frames",
        "1,3",
        "--commits",
        "9",
        "--wal-space",
        "reused,grows",
        "--rounds",
        "2",
        "--verify",
        "--allow-debug",
        "--export-json",
        json_path.to_str().unwrap(),
        "--export-csv",
        csv_path.to_str().unwrap(),
        "--export-markdown",
        md_path.to_str().unwrap(),
        "--chart",
        svg_path.to_str().unwrap(),
    ])
    .unwrap();
    let plan = WalPlan::from_args(&args).unwrap();
    wal::preflight(&plan).unwrap();
    let mut records: Vec<WalRunRecord> = Vec::new();
    let mut order: Vec<(u32, WalCase)> = Vec::new();
    wal::execute(&plan, &mut |round, case, outcome| {
        assert_eq!(outcome.commit_s.len(), 9);
        order.push((round, case));
        records.push(WalRunRecord::new(&plan, round, case, outcome));
    })
    .unwrap();
    let cases = plan.cases.len();
    assert_eq!(cases, methods.split(',').count() * 2 * 2);
    assert_eq!(records.len(), 2 * cases);
    assert!(records.iter().all(|r| r.verified == Some(true)));
    // Round 2 runs the cases backwards.
    assert_eq!(order[0].1, order[2 * cases - 1].1);
    assert_eq!(order[cases - 1].1, order[cases].1);
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );

    let summaries = wal_output::summarize(&plan, &records);
    assert_eq!(summaries.len(), cases);
    for summary in &summaries {
        assert_eq!(summary.time_s.runs, 2);
        let baseline = format!(
            "wal_unix_{}_frames_{}",
            summary.commit_frames,
            summary.space.name()
        );
        assert_eq!(summary.baseline, baseline);
        if summary.wal_method == WalMethod::Unix {
            assert_eq!(summary.speedup_vs_baseline.unwrap().ratio, 1.0);
            assert!(summary.paired_time_ratio.is_none());
        } else {
            let paired = summary.paired_time_ratio.as_ref().unwrap();
            assert_eq!(paired.pairs, 2);
            assert_eq!(paired.verdict, "too few rounds");
        }
    }

    let notes = wal_output::notes(&plan);
    let env = crate::report::envinfo::EnvInfo::collect(&plan.dir);
    let line = wal_output::plan_line(&plan);
    let report = wal_output::report(
        wal_output::WalJsonReport {
            env: &env,
            workload: "wal",
            commits: plan.commits,
            commit_frames: &plan.frames,
            spaces: &plan.spaces,
            frame_bytes: FRAME_BYTES,
            baseline: plan.baseline().name(),
            rounds: plan.rounds,
            seed: plan.seed,
            runs: &records,
            summaries: &summaries,
            notes: &notes,
        },
        &plan,
        &line,
    );
    let exports = ExportManager::new(&args.export).unwrap();
    assert!(exports.write(&report).unwrap().is_empty());

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let item = &json[0];
    assert_eq!(item["workload"], "wal");
    assert_eq!(item["frame_bytes"], 4120);
    assert_eq!(item["baseline"], "unix");
    assert_eq!(item["runs"].as_array().unwrap().len(), 2 * cases);
    assert_eq!(item["summaries"].as_array().unwrap().len(), cases);
    let first = &item["runs"][0];
    assert_eq!(first["wal_method"], "unix");
    assert_eq!(first["space"], "reused");
    assert_eq!(first["commit_frames"], 1);
    assert_eq!(first["commits"], 9);
    assert_eq!(first["verified"], true);
    assert!(item["summaries"][1]["paired_time_ratio"]["median"].is_number());

    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with(
        "method,seconds,bytes_per_sec,round,wal_method,commit_frames,space,commits,commits_per_sec,"
    ));
    assert!(lines
        .next()
        .unwrap()
        .starts_with("wal_unix_1_frames_reused,"));
    assert_eq!(csv.lines().count(), 1 + 2 * cases);
    let markdown = std::fs::read_to_string(&md_path).unwrap();
    assert!(
        markdown.contains("| method | frames | space |"),
        "{markdown}"
    );
    assert!(markdown.contains("| unix | 1 | reused |"), "{markdown}");
    assert!(std::fs::read_to_string(&svg_path).unwrap().contains("<svg"));
}

#[test]
fn failing_wal_run_removes_the_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut plan = wal_plan(&[
        "--wal",
        "--dir",
        d,
        "--wal-methods",
        "unix",
        "--commit-frames",
        "2",
        "--commits",
        "5",
        "--rounds",
        "1",
    ])
    .unwrap();
    plan.inject_failure_at_commit = Some(3);
    let error = wal::execute(&plan, &mut |_, _, _| {}).unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("wal_unix_2_frames_reused commit 3"), "{text}");
    assert!(
        files_in(dir.path()).is_empty(),
        "{:?}",
        files_in(dir.path())
    );
}
