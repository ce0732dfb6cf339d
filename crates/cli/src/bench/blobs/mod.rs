//! `sqlite-uring bench blobs`: files stored in SQLite (EZFS's workload, measured honestly).
//!
//! Distinct keys and contents, N files of size S written with a commit every K writes,
//! then read back in write order and in random order, every read verified; over targets,
//! journal modes and compression modes; plus the zstd micro-benchmark on its own.
//! See docs/BENCH_BLOBS.md.

mod backend;
mod case;
mod codec;
#[cfg(any(feature = "duckdb", feature = "duckdb-system"))]
mod duck;
mod guard;
pub(crate) mod isolate;
mod output;
mod plan;
mod runner;
mod store;
mod units;
mod workload;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::common::export::ExportManager;
use super::common::options::Isolation;
use super::common::signals;
use crate::report::envinfo::EnvInfo;
use crate::report::stats::format_bytes;
use case::{run_storage_case, Measured};
pub use plan::BlobsArgs;
use plan::{Plan, StorageCase};
use runner::{Budget, PhaseResult};
use workload::Workload;

/// The kind of job `bench worker` runs for `bench blobs`.
pub const WORKER_JOB: super::common::worker::JobKind =
    super::common::worker::JobKind::of::<isolate::Job>();

/// Refuses to start when the largest case cannot fit: on disk (statvfs of `--dir`) for
/// file targets, in memory (MemAvailable) for in-memory targets.
fn check_room(plan: &Plan, dir: &Path) -> anyhow::Result<()> {
    let largest = |on_disk: bool| {
        plan.storage
            .iter()
            .filter(|c| c.target.on_disk() == on_disk)
            .max_by_key(|c| c.planned_bytes())
    };
    if let Some(case) = largest(true) {
        let free = guard::free_bytes(dir)?;
        if case.planned_bytes() > free {
            bail!(
                "--dir {} has {} free, but the largest case ({}, {} files) may need {}; \
                 free space, choose another --dir, or lower --ops / --sizes",
                dir.display(),
                format_bytes(free),
                case.label(),
                case.ops,
                format_bytes(case.planned_bytes())
            );
        }
    }
    if let Some(case) = largest(false) {
        let available = guard::available_memory_bytes()?;
        if case.planned_bytes() > available {
            bail!(
                "the largest in-memory case ({}, {} files) may need {} of memory but {} is \
                 available; lower --ops or --sizes, or drop memory targets from --targets",
                case.label(),
                case.ops,
                format_bytes(case.planned_bytes()),
                format_bytes(available)
            );
        }
    }
    Ok(())
}

fn progress_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:>40} {bar:30} {pos}/{len} {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// The run's settings in one line, for the terminal and the Markdown export.
fn settings(args: &BlobsArgs, isolation: Isolation) -> String {
    format!(
        "content {}, seed {:#x}, zstd level {}, at most {} s per phase, {} run(s) per case \
         after {} warmup run(s), isolation {}",
        args.content.name(),
        args.seed,
        args.zstd_level,
        args.max_seconds,
        args.runs,
        args.warmup,
        isolation.name()
    )
}

/// Removes the run's directory when the run ends, however it ends.
struct RunDir(PathBuf);

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The indices of `range`, starting `shift` places in and wrapping around.
fn rotated(range: std::ops::Range<usize>, shift: usize) -> impl Iterator<Item = usize> {
    let len = range.len();
    (0..len).map(move |i| range.start + (i + shift) % len.max(1))
}

pub fn run(args: BlobsArgs) -> anyhow::Result<()> {
    // Before any allocation of the benchmark: in this process and in every worker.
    let malloc_pinned = guard::pin_malloc_thresholds();
    if !malloc_pinned {
        eprintln!(
            "warning: glibc refused the fixed malloc thresholds: large-blob read rates will \
             depend on the allocation history of each process"
        );
    }
    let plan = Plan::from_args(&args)?;
    let isolation = args.run.isolation()?;
    let worker_exe = isolation.worker_exe()?;
    if let Some(warning) = args.run.check()? {
        eprintln!("{warning}");
    }
    let exports = ExportManager::new(&args.export)?;
    let dir = &args.run.place.dir;
    // Unavailable targets fail here, before any case runs.
    for target in plan.targets() {
        store::ensure_registered(target)?;
    }
    check_room(&plan, dir)?;

    let env = EnvInfo::collect(dir);
    for line in env.lines() {
        println!("{line}");
    }
    let settings = settings(&args, isolation);
    println!("blobs: {settings}");

    signals::install_handlers()?;
    let trace = crate::trace_file::start(args.run.trace.as_deref())?;
    let run_dir = dir.join(format!("sqlite-uring-blobs-{}", std::process::id()));
    std::fs::create_dir(&run_dir)
        .with_context(|| format!("creating {} (is --dir writable?)", run_dir.display()))?;
    let _run_dir = RunDir(run_dir.clone());

    let multi = MultiProgress::new();
    let runs_per_case = u64::from(args.warmup) + u64::from(args.runs);
    let total = (plan.storage.len() + plan.compressor.len()) as u64 * runs_per_case;
    let overall = multi.add(ProgressBar::new(total));
    overall.set_style(progress_style());
    overall.set_prefix("cases");
    let bar = multi.add(ProgressBar::new(0));
    bar.set_style(progress_style());

    // Runs interleave the targets of a case (unix, io_uring, unix, io_uring, …), so a
    // change of the machine's load during the run hits them alike instead of one of them,
    // and each run starts one target later (run r begins with target r mod n), so every
    // target is measured first, second, … equally often: the position inside the process
    // matters by itself (BENCH_BLOBS.md, "Position in the process").
    let mut storage_runs: Vec<Vec<Vec<Measured>>> =
        plan.storage.iter().map(|_| Vec::new()).collect();
    let same_case = |c: &StorageCase| (c.compression, c.size, c.batch);
    let mut start = 0;
    while start < plan.storage.len() {
        let mut end = start + 1;
        while end < plan.storage.len()
            && same_case(&plan.storage[end]) == same_case(&plan.storage[start])
        {
            end += 1;
        }
        for run in 0..(args.warmup + args.runs) {
            for index in rotated(start..end, run as usize) {
                let case = &plan.storage[index];
                let measured = match &worker_exe {
                    Some(exe) => isolate::run_in_worker(
                        exe,
                        &isolate::Job::new(case, &args, &run_dir),
                        &bar,
                    )?,
                    None => {
                        run_storage_case(case, &args.data(), &run_dir, plan.max, &mut bar.clone())?
                    }
                };
                if run >= args.warmup {
                    storage_runs[index].push(measured);
                }
                overall.inc(1);
            }
        }
        start = end;
    }
    let mut compressor_runs: Vec<Vec<Vec<PhaseResult>>> = Vec::new();
    for &(mode, size, ops) in &plan.compressor {
        let workload = Workload {
            seed: args.seed,
            size_bytes: size.bytes() as usize,
            content: args.content,
        };
        let mut runs = Vec::new();
        for run in 0..(args.warmup + args.runs) {
            bar.set_prefix(format!("{} {size} compressor", mode.name()));
            bar.set_length(ops);
            bar.set_position(0);
            let budget = Budget { ops, max: plan.max };
            let measured =
                runner::compressor_phases(mode, args.zstd_level, &workload, budget, &mut |n| {
                    bar.set_position(n)
                })
                .with_context(|| format!("compressor {} {size}", mode.name()))?;
            if run >= args.warmup {
                runs.push(measured);
            }
            overall.inc(1);
        }
        compressor_runs.push(runs);
    }
    bar.finish_and_clear();
    overall.finish_and_clear();
    if let Some(trace) = trace {
        let path = trace.path().to_path_buf();
        trace.finish()?;
        println!("trace written to {}", path.display());
    }
    // A signal after the last operation still means the user wanted out.
    signals::check_interrupted()?;

    let records = output::records(&args, &plan, &storage_runs, &compressor_runs);
    output::report(&args, &env, &settings, records, &exports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use codec::Compression;
    use plan::parse_test_args;
    use plan::{dedup, default_ops};
    use std::time::Duration;
    use store::{Journal, Target};
    use units::ByteSize;

    fn parse(line: &str) -> Result<BlobsArgs, clap::Error> {
        parse_test_args(line.split_whitespace())
    }

    fn plan_error(line: &str) -> String {
        format!("{:#}", Plan::from_args(&parse(line).unwrap()).unwrap_err())
    }

    #[test]
    fn every_target_takes_every_position_across_runs() {
        let orders: Vec<Vec<usize>> = (0..3).map(|run| rotated(4..7, run).collect()).collect();
        assert_eq!(orders, vec![vec![4, 5, 6], vec![5, 6, 4], vec![6, 4, 5]]);
        for position in 0..3 {
            let mut seen: Vec<usize> = orders.iter().map(|order| order[position]).collect();
            seen.sort();
            assert_eq!(seen, vec![4, 5, 6], "position {position}");
        }
        assert_eq!(rotated(2..3, 5).collect::<Vec<_>>(), vec![2]);
    }

    #[test]
    fn defaults_expand_to_the_issue_matrix() {
        let plan = Plan::from_args(&parse("").unwrap()).unwrap();
        // memory once, unix and io_uring per journal: (1 + 2 + 2) × 3 compressions
        // × 3 sizes × 3 batches.
        assert_eq!(plan.storage.len(), 5 * 3 * 3 * 3);
        assert!(plan
            .storage
            .iter()
            .all(|c| c.journal.is_some() == c.target.has_journal()));
        assert_eq!(plan.compressor.len(), 2 * 3);
        assert_eq!(plan.max, Duration::from_secs(2));
        let ops: Vec<u64> = ["64B", "300KB", "2MB"]
            .iter()
            .map(|s| default_ops(s.parse().unwrap()))
            .collect();
        assert_eq!(ops, [1_000_000, 10_000, 1_500]);
    }

    #[test]
    fn lists_are_deduplicated_in_order() {
        let args = parse("--targets unix,memory,unix --batch 100,1,100 --journal wal").unwrap();
        let plan = Plan::from_args(&args).unwrap();
        assert_eq!(plan.targets(), [Target::UNIX, Target::MEMORY]);
        let batches = dedup(&plan.storage.iter().map(|c| c.batch).collect::<Vec<_>>());
        assert_eq!(batches, [100, 1]);
    }

    #[test]
    fn bad_values_are_refused_with_the_flag_named() {
        assert!(plan_error("--batch 0").contains("--batch 0"));
        assert!(plan_error("--ops 0").contains("--ops 0"));
        assert!(plan_error("--max-seconds 0").contains("--max-seconds"));
        assert!(plan_error("--max-seconds=-1").contains("--max-seconds"));
        assert!(plan_error("--max-seconds NaN").contains("--max-seconds"));
        assert!(plan_error("--sizes 8B").contains("--sizes 8B"));
        assert!(plan_error("--sizes 2GB").contains("--sizes 2GB"));
        assert!(plan_error("--zstd-level 99").contains("--zstd-level 99"));
        // Parse-time errors come from clap, which names the flag too.
        for line in [
            "--sizes 300",
            "--targets oracle",
            "--compression lz4",
            "--batch x",
            "--runs 0",
        ] {
            let error = parse(line).err().unwrap_or_else(|| panic!("{line} parsed"));
            let flag = line.split_whitespace().next().unwrap();
            assert!(error.to_string().contains(flag), "{line}: {error}");
        }
    }

    #[test]
    fn isolation_defaults_to_a_process_per_run_except_when_tracing() {
        let of = |line: &str| {
            let args = parse(line).unwrap();
            args.run.isolation()
        };
        assert_eq!(of("").unwrap(), Isolation::Process);
        assert_eq!(of("--isolation none").unwrap(), Isolation::None);
        assert_eq!(of("--trace t.log").unwrap(), Isolation::None);
        assert_eq!(
            of("--trace t.log --isolation none").unwrap(),
            Isolation::None
        );
        let error = of("--trace t.log --isolation process")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--trace") && error.contains("--isolation none"),
            "{error}"
        );
        assert!(parse("--isolation thread").is_err());
    }

    /// A result file that cannot be written is refused before the first case runs (the
    /// run would otherwise measure for minutes and then fail): the trace file, which the
    /// run creates first, is never created.
    #[test]
    fn a_bad_export_path_is_refused_before_running() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.log");
        for flag in [
            "--export-json",
            "--export-csv",
            "--export-markdown",
            "--chart",
        ] {
            let mut args = parse(&format!(
                "--allow-debug --suite storage --targets memory --sizes 64B --ops 10 \
                 --isolation none {flag} /nonexistent-sqlite-uring/out"
            ))
            .unwrap();
            args.run.place.dir = dir.path().to_path_buf();
            args.run.trace = Some(trace.clone());
            let message = format!("{:#}", run(args).unwrap_err());
            assert!(
                message.contains(&format!("{flag} /nonexistent-sqlite-uring/out"))
                    && message.contains("create it or choose another path"),
                "{message}"
            );
            assert!(!trace.exists(), "{flag}: the run started");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn compressor_only_plans_no_storage() {
        let plan = Plan::from_args(&parse("--suite compressor --sizes 64B").unwrap()).unwrap();
        assert!(plan.storage.is_empty());
        assert_eq!(plan.compressor.len(), 2);
    }

    #[test]
    fn room_check_refuses_plans_that_cannot_fit() {
        let dir = tempfile::tempdir().unwrap();
        let args = parse("--targets unix --sizes 1GB --ops 1000000 --journal delete").unwrap();
        let error = format!(
            "{:#}",
            check_room(&Plan::from_args(&args).unwrap(), dir.path()).unwrap_err()
        );
        assert!(error.contains("--dir") && error.contains("free"), "{error}");

        let args = parse("--targets memory --sizes 1GB --ops 1000000").unwrap();
        let error = format!(
            "{:#}",
            check_room(&Plan::from_args(&args).unwrap(), dir.path()).unwrap_err()
        );
        assert!(error.contains("memory"), "{error}");

        let args = parse("--targets memory,unix --sizes 64B --ops 10").unwrap();
        check_room(&Plan::from_args(&args).unwrap(), dir.path()).unwrap();
    }

    #[test]
    fn planned_bytes_cover_data_and_one_batch() {
        let case = StorageCase {
            target: Target::UNIX,
            journal: Some(Journal::Wal),
            compression: Compression::None,
            size: ByteSize(1_000_000),
            batch: 100,
            ops: 1000,
        };
        assert!(case.planned_bytes() > 1100 * 1_000_000);
        assert!(case.planned_bytes() < 1300 * 1_000_000);
    }

    #[test]
    fn unavailable_duckdb_is_a_clear_error() {
        if store::DUCKDB_BUILT {
            return;
        }
        let error = format!(
            "{:#}",
            store::ensure_registered(Target::DUCKDB).unwrap_err()
        );
        assert!(error.contains("--features duckdb"), "{error}");
    }
}
