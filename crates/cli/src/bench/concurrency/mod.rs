//! `sqlite-uring bench concurrency`: what connection pools and many-database services
//! do, measured as throughput and latency on several targets, paired against the
//! baseline (`unix`) run by run.
//!
//! Cells are a pattern (workload.rs, processes.rs) with a thread count N and, for the
//! databases pattern, a journal mode. Per cell, round after round, every target runs
//! once, each run in a fresh process (isolate.rs), the order of targets rotating each
//! round; each run's rates are paired with the baseline's of the same round. How to read
//! the output: `docs/BENCH_CONCURRENCY.md`.

mod cell;
pub(crate) mod isolate;
mod output;
mod processes;
pub(crate) mod workload;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::common::export::ExportManager;
use super::common::options::{once_each, ExportOptions, RunOptions, TargetHelp, TargetOptions};
use super::common::rounds::{memory_filesystem_caution, print_header, Rounds};
use super::common::signals;
use crate::bench::common::settings::JournalMode;
use crate::report::envinfo;
use cell::{Cell, RunJob};
use workload::{Pattern, Shape, SCAN_ROWS};

/// Thread counts measured by default: a pool's range, from one reader to many more
/// threads than cores.
pub const DEFAULT_THREADS: &str = "1,2,4,8,16,64";
/// Window of one run by default. Long enough for a few hundred durable commits on a
/// virtio disk and tens of thousands of reads, short enough that the default run (24
/// cells × 2 targets × 7 rounds) takes about three minutes on 2 cores.
pub const DEFAULT_DURATION_MS: u64 = 250;
/// Measured runs per cell and target by default: the fewest with a paired 95 % interval.
pub const DEFAULT_RUNS: u32 = 6;
/// Seed of every run's random keys: the same keys on every target.
const SEED: u64 = 0x00C0_FFEE_5EED;

/// Options of `bench concurrency`.
#[derive(Args, Debug, Clone)]
pub struct ConcurrencyArgs {
    /// Patterns to measure, comma-separated: readers (N reader threads and one writer on
    /// one WAL database), databases (N threads, one database each), processes (one
    /// writer, N reader processes: stock sqlite3 and this program, alternately).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "readers,databases,processes",
        value_name = "LIST"
    )]
    pub patterns: Vec<Pattern>,

    /// N: reader threads (readers), threads with their own database (databases), reader
    /// processes (processes); comma-separated, each 1 to 1024.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_THREADS, value_name = "LIST",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Vec<u32>,

    #[command(flatten)]
    pub compare: TargetOptions<ConcurrencyTargets>,

    /// Length of each measured run's window, in milliseconds (10 to 600000). Every
    /// thread works until the window closes: a fixed window keeps all N threads busy
    /// for the whole measurement, where a fixed operation count would end with the
    /// slowest thread alone.
    #[arg(long, default_value_t = DEFAULT_DURATION_MS, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub duration_ms: u64,

    /// Measured runs per cell and target (at least 1; 6 or more give the paired 95 %
    /// interval the verdict needs).
    #[arg(long, default_value_t = DEFAULT_RUNS, value_name = "RUNS",
          value_parser = clap::value_parser!(u32).range(1..=crate::bench::common::options::MAX_RUNS))]
    pub runs: u32,

    /// Rows of each database's table (100-byte payloads; at least 50, a scan's length).
    #[arg(long, default_value_t = 10_000, value_name = "ROWS",
          value_parser = clap::value_parser!(u64).range(SCAN_ROWS..))]
    pub rows: u64,

    /// The stock sqlite3 program of the processes pattern (it opens the same database
    /// with its own SQLite and the unix VFS).
    #[arg(long, default_value = "sqlite3", value_name = "PROGRAM")]
    pub sqlite3: PathBuf,

    #[command(flatten)]
    pub run: RunOptions,

    #[command(flatten)]
    pub export: ExportOptions,
}

/// The kind of job `bench worker` runs for `bench concurrency`.
pub const WORKER_JOB: super::common::worker::JobKind =
    super::common::worker::JobKind::of::<cell::Job>();

/// `bench concurrency`'s `--targets` and `--journal`.
#[derive(Clone, Debug)]
pub struct ConcurrencyTargets;

impl TargetHelp for ConcurrencyTargets {
    const DEFAULT_TARGETS: &'static str = "unix,io_uring";
    const TARGETS: &'static str = "Targets to compare, comma-separated: unix (SQLite's own \
        VFS), io_uring (ours), sync (our VFS on plain syscalls), io_uring_ring, \
        io_uring_direct, or any registered VFS; ours take URI parameters: \
        `io_uring?uring_syncs=ring`";
    const JOURNAL: &'static str = "Journal modes of the databases and readers patterns, \
        comma-separated (in a rollback-journal mode the readers pattern has no writer, which \
        would lock its readers out; processes is WAL: readers in other processes beside a \
        writer need it)";
}

/// Every cell of the run, pattern by pattern, N ascending.
pub fn cells(args: &ConcurrencyArgs) -> Vec<Cell> {
    let mut threads = args.threads.clone();
    threads.sort_unstable();
    threads.dedup();
    let patterns = once_each(&args.patterns);
    let journals = args.compare.journals();
    let mut cells = Vec::new();
    for pattern in patterns {
        let modes = match pattern {
            Pattern::Databases | Pattern::Readers => journals.clone(),
            Pattern::Processes => vec![JournalMode::Wal],
        };
        for journal in modes {
            for &n in &threads {
                cells.push(Cell {
                    pattern,
                    journal,
                    threads: n,
                });
            }
        }
    }
    cells
}

impl ConcurrencyArgs {
    fn shape(&self) -> Shape {
        Shape {
            rows: self.rows,
            synchronous: self.compare.pairing.synchronous,
            duration_ms: self.duration_ms,
            seed: SEED,
        }
    }

    /// The job of one run of `cell` on `target`, its databases in `dir`.
    pub fn job(&self, cell: &Cell, target: &str, dir: &std::path::Path) -> RunJob {
        RunJob {
            pattern: cell.pattern,
            journal: cell.journal,
            threads: cell.threads,
            target: target.to_string(),
            shape: self.shape(),
            dir: dir.to_path_buf(),
            sqlite3: self.sqlite3.clone(),
        }
    }

    /// Refuses what would fail or mislead, before any run.
    fn check(&self) -> Result<()> {
        if self.patterns.is_empty() || self.threads.is_empty() {
            bail!("--patterns and --threads need at least one value each, e.g. --patterns readers --threads 1,4");
        }
        if (self.patterns.contains(&Pattern::Databases)
            || self.patterns.contains(&Pattern::Readers))
            && self.compare.journal.is_empty()
        {
            bail!("--journal is empty; name at least one journal mode, e.g. --journal delete,wal");
        }
        self.compare.pairing.check_baseline(
            self.compare.targets.iter().map(|t| t.trim()),
            &self.compare.targets,
        )?;
        for target in &self.compare.targets {
            workload::resolve_target(target.trim())?;
        }
        let mut seen: Vec<&str> = Vec::new();
        for target in &self.compare.targets {
            if seen.contains(&target.trim()) {
                bail!(
                    "--targets names {} twice; list each target once",
                    target.trim()
                );
            }
            seen.push(target.trim());
        }
        if self.patterns.contains(&Pattern::Processes) {
            let version = std::process::Command::new(&self.sqlite3)
                .arg("--version")
                .output();
            if !version.is_ok_and(|o| o.status.success()) {
                bail!(
                    "--sqlite3 {}: cannot run it; install Debian's sqlite3 (apt-get install \
                     sqlite3), point --sqlite3 at a sqlite3 program, or leave processes out of \
                     --patterns",
                    self.sqlite3.display()
                );
            }
        }
        Ok(())
    }
}

/// The stock sqlite3's version line, for the header.
fn sqlite3_version(program: &std::path::Path) -> String {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| v.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

pub fn run(args: ConcurrencyArgs) -> Result<()> {
    let isolation = args.run.isolation()?;
    let worker_exe = isolation.worker_exe()?;
    let debug_warning = args.run.check()?;
    let exports = ExportManager::new(&args.export)?;
    args.check()?;
    let targets: Vec<String> = args
        .compare
        .targets
        .iter()
        .map(|t| t.trim().to_string())
        .collect();
    let cells = cells(&args);

    let env = envinfo::EnvInfo::collect(&args.run.place.dir);
    let mut header = env.lines();
    header.push(format!(
        "settings:    synchronous={} · {} ms window · {} rows · {} warmup + {} runs · baseline {} · isolation {}",
        args.compare.pairing.synchronous.name(),
        args.duration_ms,
        args.rows,
        args.compare.pairing.warmup,
        args.runs,
        args.compare.pairing.baseline,
        isolation.name(),
    ));
    if args.patterns.contains(&Pattern::Processes) {
        header.push(format!(
            "processes:   stock {} {}",
            args.sqlite3.display(),
            sqlite3_version(&args.sqlite3)
        ));
    }
    let mut cautions: Vec<String> = debug_warning.into_iter().collect();
    cautions.extend(memory_filesystem_caution(&env));
    if args.run.trace.is_some() {
        cautions.push(
            "NOTE: --trace: every call to this project's VFS is written to the trace, so its \
             targets run slower than untraced ones"
                .to_string(),
        );
    }
    let header = print_header(header, cautions, None);

    let run_dir = args
        .run
        .place
        .dir
        .join(format!("sqlite-uring-concurrency-{}", std::process::id()));
    let pairing = &args.compare.pairing;
    let rounds = Rounds::new(pairing.warmup, args.runs, cells.len(), targets.len());
    let table_output = crate::report::table::Output::stdout();
    let trace = crate::trace_file::start(args.run.trace.as_deref())?;
    signals::install_handlers()?;
    let mut results = Vec::new();
    for cell in &cells {
        let outcomes = rounds.case(targets.len(), |step| {
            let job = args.job(cell, &targets[step.index], &run_dir);
            rounds.message(format!("{} · {}", step.phase, job.describe()));
            crate::trace_file::mark(format_args!(
                "concurrency {} · {} {}",
                job.describe(),
                step.phase,
                step.round + 1
            ));
            match &worker_exe {
                Some(exe) => isolate::run_in_worker(exe, &job),
                None => isolate::run_here(&job),
            }
        })?;
        let result = output::summarise(*cell, &targets, &outcomes, &pairing.baseline)
            .with_context(|| cell.title())?;
        rounds.show(
            &cell.title(),
            output::terminal_table(&result, table_output),
            &output::notes(&result),
        );
        results.push(result);
    }
    rounds.finish(trace)?;
    let verdict = output::verdict(&results, &args.compare.pairing.baseline);
    for line in &verdict {
        println!("{line}");
    }
    let info = output::RecordInfo {
        synchronous: pairing.synchronous.name().to_string(),
        duration_ms: args.duration_ms,
        rows: args.rows,
        baseline: pairing.baseline.clone(),
    };
    let report = output::report(&header, &results, &info, &verdict);
    for warning in exports.write(&report)? {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::common::settings::Synchronous;
    use std::path::Path;

    fn parse(words: &[&str]) -> Result<ConcurrencyArgs, clap::Error> {
        crate::bench::common::options::parse_flags(words.iter().copied())
    }

    #[test]
    fn defaults_and_parsing() {
        let args = parse(&[]).unwrap();
        assert_eq!(
            args.patterns,
            [Pattern::Readers, Pattern::Databases, Pattern::Processes]
        );
        assert_eq!(args.threads, [1, 2, 4, 8, 16, 64]);
        assert_eq!(args.compare.targets, ["unix", "io_uring"]);
        assert_eq!(args.compare.pairing.baseline, "unix");
        assert_eq!(
            args.compare.journal,
            [JournalMode::Delete, JournalMode::Wal]
        );
        assert_eq!(args.compare.pairing.synchronous, Synchronous::Full);
        assert_eq!(args.duration_ms, 250);
        assert!(args.duration_ms <= 1000);
        assert_eq!(
            (args.compare.pairing.warmup, args.runs, args.rows),
            (1, 6, 10_000)
        );
        assert_eq!(args.sqlite3, Path::new("sqlite3"));
        assert_eq!(args.run.place.dir, Path::new("."));
        // 6 N × (readers and databases in 2 modes each + processes).
        assert_eq!(cells(&args).len(), 30);

        let args = parse(&[
            "--patterns",
            "databases,readers,databases",
            "--threads",
            "8,2,8",
            "--journal",
            "wal",
            "--targets",
            "unix,io_uring?uring_syncs=ring",
            "--duration-ms",
            "40",
            "--runs",
            "9",
            "--rows",
            "50",
            "--synchronous",
            "normal",
            "--export-json",
            "c.json",
            "--chart",
            "c.svg",
        ])
        .unwrap();
        assert_eq!(args.compare.targets[1], "io_uring?uring_syncs=ring");
        assert_eq!(args.export.chart.as_deref(), Some(Path::new("c.svg")));
        let found: Vec<(Pattern, JournalMode, u32)> = cells(&args)
            .iter()
            .map(|c| (c.pattern, c.journal, c.threads))
            .collect();
        assert_eq!(
            found,
            [
                (Pattern::Databases, JournalMode::Wal, 2),
                (Pattern::Databases, JournalMode::Wal, 8),
                (Pattern::Readers, JournalMode::Wal, 2),
                (Pattern::Readers, JournalMode::Wal, 8),
            ]
        );
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (words, flag) in [
            (vec!["--threads", "0"], "--threads"),
            (vec!["--threads", "2,x"], "--threads"),
            (vec!["--duration-ms", "5"], "--duration-ms"),
            (vec!["--runs", "0"], "--runs"),
            (vec!["--rows", "49"], "--rows"),
            (vec!["--patterns", "pool"], "--patterns"),
            (vec!["--journal", "wall"], "--journal"),
        ] {
            let message = parse(&words).err().unwrap().to_string();
            assert!(message.contains(flag), "{words:?}: {message}");
        }
        let dir = tempfile::tempdir().unwrap();
        let with_dir = |words: &[&str]| {
            let mut args = parse(words).unwrap();
            args.run.place.dir = dir.path().to_path_buf();
            args.run.place.allow_debug = true;
            format!("{:#}", run(args).unwrap_err())
        };
        let message = with_dir(&["--targets", "io_uring"]);
        assert!(
            message.contains("--baseline unix is not among --targets"),
            "{message}"
        );
        let message = with_dir(&["--targets", "unix,memory"]);
        assert!(
            message.contains("--targets memory") && message.contains("no"),
            "{message}"
        );
        let message = with_dir(&["--targets", "unix,tape"]);
        assert!(message.contains("tape"), "{message}");
        let message = with_dir(&["--targets", "unix,unix"]);
        assert!(message.contains("twice"), "{message}");
        let message = with_dir(&["--sqlite3", "/nonexistent/sqlite3"]);
        assert!(
            message.contains("--sqlite3 /nonexistent/sqlite3") && message.contains("apt-get"),
            "{message}"
        );
        let message = with_dir(&["--export-csv", "/nonexistent/c.csv"]);
        assert!(message.contains("--export-csv"), "{message}");
        // Nothing was left in --dir by the refusals.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A run's job crosses the worker command line unchanged, for every cell and target.
    #[test]
    fn worker_jobs_round_trip() {
        let args = parse(&[
            "--targets",
            "unix,io_uring?uring_syncs=ring&uring_sync_plan=separate",
            "--threads",
            "1,64",
            "--duration-ms",
            "123",
            "--rows",
            "777",
            "--synchronous",
            "extra",
            "--sqlite3",
            "/opt/odd dir/sqlite3",
        ])
        .unwrap();
        let dir = Path::new("/var/tmp/some dir/run");
        for cell in cells(&args) {
            for target in &args.compare.targets {
                let job = args.job(&cell, target, dir);
                let cell::Job::Run(back) =
                    crate::bench::common::worker::round_trip(&cell::Job::Run(job.clone()))
                else {
                    panic!("a concurrency run came back as another job")
                };
                assert_eq!(back, job);
                assert_eq!(
                    (back.pattern, back.journal, back.threads),
                    (cell.pattern, cell.journal, cell.threads)
                );
                assert_eq!(&back.target, target);
                assert_eq!(back.shape.duration_ms, 123);
                assert_eq!(back.shape.rows, 777);
                assert_eq!(back.shape.synchronous, Synchronous::Extra);
                assert_eq!(back.dir, dir);
                assert_eq!(back.sqlite3, Path::new("/opt/odd dir/sqlite3"));
            }
        }
        let reader = cell::Job::Reader(cell::ReaderJob {
            target: "io_uring?uring_syncs=ring".into(),
            database: dir.join("shared.db"),
            shape: args.shape(),
            index: 5,
        });
        assert_eq!(crate::bench::common::worker::round_trip(&reader), reader);
    }

    /// A tiny real run of both in-process patterns (the processes pattern needs this
    /// program's binary: tests/concurrency.rs runs it), with every export.
    #[test]
    fn tiny_run_in_this_process_exports_every_format() {
        let _counters = crate::bench::common::targets::counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let mut args = parse(&[
            "--allow-debug",
            "--patterns",
            "readers,databases",
            "--threads",
            "1,2",
            "--duration-ms",
            "20",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--rows",
            "200",
            "--synchronous",
            "normal",
            // A unit test's executable is the test harness: it cannot be a worker.
            "--isolation",
            "none",
        ])
        .unwrap();
        args.run.place.dir = dir.path().to_path_buf();
        args.export.export_json = Some(out.path().join("c.json"));
        args.export.export_csv = Some(out.path().join("c.csv"));
        args.export.export_markdown = Some(out.path().join("c.md"));
        args.export.chart = Some(out.path().join("c.svg"));
        run(args).unwrap();

        let json = std::fs::read_to_string(out.path().join("c.json")).unwrap();
        let records: Vec<output::ConcurrencyRecord> = serde_json::from_str(&json).unwrap();
        // readers: 2 N × (lookups, scans) in rollback mode and × 3 kinds in WAL mode;
        // databases: 2 modes × 2 N × commits; each on 2 targets.
        assert_eq!(records.len(), (2 * 2 + 2 * 3 + 2 * 2) * 2);
        assert!(records
            .iter()
            .filter(|r| r.pattern == "readers" && r.journal == "delete")
            .all(|r| r.kind != "commit"));
        for record in &records {
            assert!(record.ops_mean >= 1.0, "{record:?}");
            assert!(record.rate_mean_per_s > 0.0);
            assert!(record.p50_latency_us.unwrap() > 0.0);
            assert!(record.p99_latency_us >= record.p50_latency_us);
            assert_eq!(record.runs, 2);
            match record.target.as_str() {
                "unix" => assert_eq!(record.relative, Some(1.0)),
                "io_uring" => assert!(record.relative.is_some_and(|r| r > 0.0)),
                other => panic!("unexpected target {other}"),
            }
        }
        let csv_rows = csv::Reader::from_path(out.path().join("c.csv"))
            .unwrap()
            .deserialize::<output::ConcurrencyRecord>()
            .count();
        assert_eq!(csv_rows, records.len());
        let markdown = std::fs::read_to_string(out.path().join("c.md")).unwrap();
        assert!(markdown.contains("## readers (wal), N = 2"), "{markdown}");
        assert!(markdown.contains("Verdict against unix"), "{markdown}");
        let svg = std::fs::read_to_string(out.path().join("c.svg")).unwrap();
        assert!(
            svg.contains("readers lookups/s · io_uring"),
            "chart lines are labelled"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the run's databases are removed"
        );
    }
}
