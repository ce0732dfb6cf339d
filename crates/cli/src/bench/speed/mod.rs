//! `sqlite-uring bench speed`: the 16 tests of sqlite.org/speed.html on several storage
//! targets and journal modes, measured with hyperfine's conventions.
//!
//! Per test, every target × journal mode runs `--warmup` + `--runs` times, interleaved
//! run by run (the order rotates each round) so slow drifts of the machine hit all of
//! them alike. Each run gets a fresh process (isolate.rs) and a fresh database rebuilt by
//! an untimed prologue; only the test body is timed. Run by run, each target's time is
//! paired with the baseline's of the same round (the paired median and its interval).
//! How to read the output: `docs/BENCH_SPEED.md`.

mod breakdown;
pub(crate) mod isolate;
mod output;
mod runner;
mod verdict;
pub(crate) mod workload;

use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::common::export::ExportManager;
use super::common::options::{ExportOptions, Isolation, RunOptions, TargetHelp, TargetOptions};
use super::common::pagecache::CacheState;
use super::common::rounds::{memory_filesystem_caution, print_header, Rounds};
use super::common::signals;
use crate::bench::common::checksum;
use crate::bench::common::counts;
use crate::bench::common::paired::Compared;
use crate::bench::common::settings::{JournalMode, Settings};
use crate::bench::common::targets::{self, Target, IO_URING_VFS};
use crate::report::{envinfo, stats};
use output::{ComboResult, RunInfo, TestResult};
use runner::{Mode, RunOutcome, TestPlan};
use workload::Sizes;

/// Measured runs per test and target by default: the fewest that give most comparisons
/// a verdict (at 10 paired runs, the sign test's 95 % interval of the median ratio lies
/// on one side of 1 when 9 of the 10 ratios do), and at `--scale 0.1` the whole default
/// suite (16 tests × 5 targets × 11 rounds, a fresh process each) still takes about two
/// minutes on 2 cores.
pub const DEFAULT_RUNS: u32 = 10;

/// Options of `bench speed`.
#[derive(Args, Debug, Clone)]
pub struct SpeedArgs {
    #[command(flatten)]
    pub compare: TargetOptions<SpeedTargets>,

    /// Measured runs per test and target (at least 1; 3 or more give σ and error bars, 6 or
    /// more the paired 95 % interval, which the closing verdict needs).
    #[arg(long, default_value_t = DEFAULT_RUNS, value_name = "RUNS", value_parser = clap::value_parser!(u32).range(1..=crate::bench::common::options::MAX_RUNS))]
    pub runs: u32,

    /// Multiplies every row and statement count of speed.html (0.1 = a tenth of the
    /// 25000-row tables); must be > 0.
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR", value_parser = parse_scale, allow_negative_numbers = true)]
    pub scale: f64,

    /// Tests to run, comma-separated numbers 1-16 (earlier tests still build the state in
    /// the untimed prologue) [default: all 16].
    #[arg(long, value_delimiter = ',', value_name = "LIST", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub tests: Vec<u32>,

    /// Prepare each distinct statement once and bind parameters, instead of sending SQL
    /// text as speed.html did.
    #[arg(long)]
    pub prepared: bool,

    /// Page-cache state of each timed test: `hot` (the database's pages stay cached after
    /// the untimed prologue) or `cold` (after the prologue, SQLite's page cache is emptied
    /// and the database's files, its WAL or journal included, are written back and
    /// evicted from the OS page cache with POSIX_FADV_DONTNEED, so the body reads from
    /// the device; no root needed).
    #[arg(long, value_enum, default_value = "hot", value_name = "STATE")]
    pub cache: CacheState,

    /// Also time the calls SQLite makes to each file target's VFS, by method (xRead,
    /// xWrite, xSync, … and xOpen, xDelete, xAccess), and show under each test where each
    /// target's time goes: the baseline's median time per method, and every other
    /// target's paired difference from it with its 95 % interval (terminal, Markdown and
    /// JSON). Each target's VFS is then reached through the counting wrapper, whose two
    /// clock reads per call (tens of nanoseconds) every target pays alike: times are
    /// comparable within the run, not with runs without --breakdown.
    #[arg(long)]
    pub breakdown: bool,

    #[command(flatten)]
    pub run: RunOptions,

    #[command(flatten)]
    pub export: ExportOptions,
}

/// `bench speed`'s `--targets` and `--journal`.
#[derive(Clone, Debug)]
pub struct SpeedTargets;

impl TargetHelp for SpeedTargets {
    const DEFAULT_TARGETS: &'static str = "memory,unix,io_uring";
    const TARGETS: &'static str = "Targets to compare, comma-separated: memory (`:memory:`, \
        the CPU floor), unix (SQLite's own VFS), io_uring (ours), sync (our VFS on plain \
        syscalls), io_uring_ring (reads, writes and syncs through the ring), io_uring_direct \
        (O_DIRECT main database), or the name of any registered VFS. Our targets take URI \
        parameters: `io_uring?uring_sync_plan=separate&uring_write_behind=off`";
    const JOURNAL: &'static str = "Journal modes, comma-separated; every file target runs in \
        each (memory always journals in memory)";
}

fn parse_scale(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|_| {
        format!("{text:?} is not a number; use e.g. --scale 0.1 for a tenth of the full size")
    })?;
    if !value.is_finite() || value <= 0.0 {
        return Err(format!(
            "the scale must be a positive number (e.g. 1 for speed.html's sizes, 0.1 for a tenth); got {text}"
        ));
    }
    Ok(value)
}

/// One target in one journal mode: a line of the result tables.
#[derive(Clone)]
struct Combo {
    target: Target,
    /// `None` for `:memory:`, which runs once whatever --journal says.
    journal: Option<JournalMode>,
}

impl Combo {
    fn label(&self) -> String {
        match self.journal {
            None => self.target.label.clone(),
            Some(journal) => format!("{} ({})", self.target.label, journal.name()),
        }
    }

    fn journal_name(&self) -> &'static str {
        self.journal.map_or("memory", JournalMode::name)
    }
}

/// The kind of job `bench worker` runs for `bench speed`.
pub const WORKER_JOB: super::common::worker::JobKind =
    super::common::worker::JobKind::of::<isolate::Job>();

/// The worker's job of test `number` on `combo`, with the parent's settings.
fn worker_job(args: &SpeedArgs, number: u32, combo: &Combo, database: &Path) -> isolate::Job {
    isolate::Job {
        test: number,
        target: combo.target.label.clone(),
        journal: combo.journal.unwrap_or(JournalMode::Delete),
        synchronous: args.compare.pairing.synchronous,
        scale: args.scale,
        prepared: args.prepared,
        cache: args.cache,
        database: database.to_path_buf(),
        breakdown: args.breakdown,
    }
}

pub fn run(args: SpeedArgs) -> Result<()> {
    let isolation = args.run.isolation()?;
    let worker_exe = isolation.worker_exe()?;
    let debug_warning = args.run.check()?;
    let exports = ExportManager::new(&args.export)?;
    if args.compare.journal.is_empty() {
        bail!("--journal is empty; name at least one journal mode, e.g. --journal delete,wal");
    }
    // Keep the user's order (the first journal mode is memory's reference), once each.
    let journals = args.compare.journals();
    let mut tests = if args.tests.is_empty() {
        (1..=16).collect()
    } else {
        args.tests.clone()
    };
    tests.sort_unstable();
    tests.dedup();
    let mut targets = args.compare.resolve()?;
    if args.breakdown {
        targets = targets::with_method_times(targets)?;
    }
    let combos = combos(&targets, &journals);
    let mode = if args.prepared {
        Mode::Prepared
    } else {
        Mode::Text
    };

    let env = envinfo::EnvInfo::collect(&args.run.place.dir);
    let mut cautions: Vec<String> = debug_warning.into_iter().collect();
    if let Some(path) = &args.run.trace {
        cautions.push(format!(
            "NOTE: --trace {}: every call to this project's VFS is written there, so its \
             targets run slower than untraced ones (unix and memory are not traced)",
            path.display()
        ));
    }
    if args.breakdown {
        cautions.push(
            "NOTE: --breakdown: every file target's VFS calls are timed through the counting \
             wrapper (two clock reads per call, for every target alike): compare these \
             times with each other, not with runs without --breakdown"
                .to_string(),
        );
    }
    cautions.extend(memory_filesystem_caution(&env));
    let header = print_header(
        header(&args, &env, &targets, &journals, mode, isolation),
        cautions,
        Some(output::TERMINAL_OMITS),
    );

    let database_path = args
        .run
        .place
        .dir
        .join(format!("sqlite-uring-speed-{}.db", std::process::id()));
    let pairing = &args.compare.pairing;
    let rounds = Rounds::new(pairing.warmup, args.runs, tests.len(), combos.len());
    let table_output = crate::report::table::Output::stdout();
    let trace = crate::trace_file::start(args.run.trace.as_deref())?;
    signals::install_handlers()?;
    let mut results = Vec::new();
    for &number in &tests {
        let plan = TestPlan::new(number, Sizes { scale: args.scale }, mode);
        let outcomes = rounds.case(combos.len(), |step| {
            let combo = &combos[step.index];
            rounds.message(format!(
                "test {number} · {} · {}",
                step.phase,
                combo.label()
            ));
            crate::trace_file::mark(format_args!(
                "speed test {number} ({}) · {} {} · {}",
                workload::test_name(number),
                step.phase,
                step.round + 1,
                combo.label()
            ));
            match &worker_exe {
                Some(exe) => {
                    isolate::run_in_worker(exe, &worker_job(&args, number, combo, &database_path))
                }
                None => {
                    let settings = Settings {
                        journal: combo.journal.unwrap_or(JournalMode::Delete),
                        synchronous: pairing.synchronous,
                    };
                    runner::run_once(
                        &combo.target,
                        settings,
                        &database_path,
                        &plan,
                        mode,
                        args.cache,
                    )
                }
            }
        })?;
        let result = summarise(number, &combos, &outcomes, &pairing.baseline, &journals)?;
        rounds.show(
            &output::title(&result),
            output::terminal_table(&result, table_output),
            &output::notes(&result),
        );
        if let Some(table) = output::breakdown_table(&result, table_output) {
            rounds.show(
                output::BREAKDOWN_TITLE,
                table,
                &[format!("note: {}", output::BREAKDOWN_NOTE)],
            );
        }
        results.push(result);
    }
    rounds.finish(trace)?;

    let verdict = print_closing(&results, &pairing.baseline);
    let info = RunInfo {
        synchronous: pairing.synchronous.name().to_string(),
        mode: mode.name().to_string(),
        scale: args.scale,
        cache: args.cache.name().to_string(),
    };
    let report = output::report(&header, &results, &info, &verdict, &pairing.baseline);
    for warning in exports.write(&report)? {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// The environment and the settings of the run, as its output begins.
fn header(
    args: &SpeedArgs,
    env: &envinfo::EnvInfo,
    targets: &[Target],
    journals: &[JournalMode],
    mode: Mode,
    isolation: Isolation,
) -> Vec<String> {
    let pairing = &args.compare.pairing;
    let mut header = env.lines();
    header.push(format!(
        "settings:    synchronous={} · journal {} · {} statements · scale {} · {} warmup + {} runs · baseline {} · isolation {} · {}",
        pairing.synchronous.name(),
        journals.iter().map(|j| j.name()).collect::<Vec<_>>().join(","),
        mode.name(),
        args.scale,
        pairing.warmup,
        args.runs,
        pairing.baseline,
        isolation.name(),
        cache_setting(args.cache),
    ));
    if targets
        .iter()
        .any(|t| t.vfs.as_deref() == Some(IO_URING_VFS))
    {
        if let Ok(registration) = targets::io_uring_registration() {
            header.push(format!(
                "io_uring:    VFS {} on backend {}{}",
                registration.vfs_name,
                registration.backend.name(),
                registration
                    .fallback_reason
                    .as_ref()
                    .map_or_else(String::new, |why| format!(" (fallback: {why})"))
            ));
        }
    }
    header
}

/// Prints what closes the output: the remedies of the warnings, the geometric means and
/// the verdict, which it returns.
fn print_closing(results: &[TestResult], baseline: &str) -> Vec<String> {
    let remedies = output::warning_remedies(results);
    if !remedies.is_empty() {
        println!("About the warnings:");
        for remedy in remedies {
            println!("  - {remedy}");
        }
        println!();
    }
    println!("Geometric mean of Relative over {} test(s):", results.len());
    for (label, mean, count) in output::geometric_means(results) {
        println!("  {label:<24} {mean:.3}  ({count} tests)");
    }
    println!();
    let verdict = verdict::summary(results, baseline);
    for line in &verdict {
        println!("{line}");
    }
    verdict
}

/// The cache state as the settings header states it.
fn cache_setting(cache: CacheState) -> &'static str {
    match cache {
        CacheState::Hot => "cache hot",
        CacheState::Cold => "cache cold (pages evicted before each timed test)",
    }
}

/// Memory once (it has no journal file), then every file target in every journal mode.
fn combos(targets: &[Target], journals: &[JournalMode]) -> Vec<Combo> {
    let mut combos: Vec<Combo> = targets
        .iter()
        .filter(|t| t.is_memory())
        .map(|t| Combo {
            target: t.clone(),
            journal: None,
        })
        .collect();
    for &journal in journals {
        for target in targets.iter().filter(|t| !t.is_memory()) {
            combos.push(Combo {
                target: target.clone(),
                journal: Some(journal),
            });
        }
    }
    combos
}

/// Summaries, warnings and the checksum check of one test.
fn summarise(
    number: u32,
    combos: &[Combo],
    outcomes: &[Vec<RunOutcome>],
    baseline: &str,
    journals: &[JournalMode],
) -> Result<TestResult> {
    check_checksums(number, combos, outcomes)?;
    let baseline_of = |combo: &Combo| -> Option<usize> {
        // Memory is compared to the baseline in the first journal mode; a memory baseline
        // is the reference of everything.
        let journal = combo.journal.or(journals.first().copied());
        combos.iter().position(|c| {
            c.target.label == baseline && (c.target.is_memory() || c.journal == journal)
        })
    };
    let times = |runs: &[RunOutcome]| -> Vec<f64> { runs.iter().map(|o| o.elapsed_s).collect() };
    // Every run's method times, when the target was timed (`--breakdown`).
    let timed = |runs: &[RunOutcome]| -> Option<Vec<breakdown::TimedRun>> {
        runs.iter()
            .map(|o| o.methods.map(|m| (o.elapsed_s, m)))
            .collect()
    };
    let mut results = Vec::new();
    for (index, (combo, runs)) in combos.iter().zip(outcomes).enumerate() {
        let samples = times(runs);
        let baseline = baseline_of(combo);
        let is_baseline = baseline == Some(index);
        // Outcomes are stored in round order, so index i of two combos is one pair.
        let base_samples = baseline.map(|b| times(&outcomes[b]));
        let compared = Compared::of(&samples, base_samples.as_deref(), is_baseline)
            .with_context(|| format!("test {number} on {} has no valid timing", combo.label()))?;
        let base_timed = baseline
            .filter(|_| !is_baseline)
            .and_then(|b| timed(&outcomes[b]));
        let breakdown = timed(runs).and_then(|runs| {
            // A target compared with an untimed baseline (memory) shows its own times.
            breakdown::of(&runs, base_timed.as_deref())
        });
        results.push(ComboResult {
            label: combo.label(),
            target: combo.target.label.clone(),
            vfs: combo
                .target
                .vfs
                .clone()
                .unwrap_or_else(|| ":memory:".into()),
            journal: combo.journal_name().to_string(),
            summary: compared.summary,
            cpu_mean_s: runs.iter().map(|o| o.cpu_s).sum::<f64>() / runs.len().max(1) as f64,
            checksum: runs[0].checksum,
            io: counts::mean(runs.iter().map(|o| o.io)),
            engine_counted: combo.target.counter.counts_engine(),
            warnings: stats::warnings(&samples),
            baseline,
            is_baseline,
            relative: compared.relative,
            paired: compared.paired,
            breakdown,
        });
    }
    let unfair = unfair_comparisons(&results);
    Ok(TestResult {
        number,
        name: workload::test_name(number),
        combos: results,
        unfair,
    })
}

/// Every run of every target must have seen the same rows and left the same database.
fn check_checksums(number: u32, combos: &[Combo], outcomes: &[Vec<RunOutcome>]) -> Result<()> {
    let runs = combos
        .iter()
        .zip(outcomes)
        .flat_map(|(combo, runs)| runs.iter().map(move |o| (combo.label(), o.checksum.hex())));
    match checksum::mismatch(runs) {
        None => Ok(()),
        Some(listing) => bail!(
            "CHECKSUM MISMATCH in test {number} ({}): the targets returned different query \
             results or stored different data, so at least one storage layer is wrong and no \
             timing of this suite can be trusted. Checksums per run: {listing}",
            workload::test_name(number),
        ),
    }
}

/// SQLite decides when to sync from what the VFS tells it (sector size, device
/// characteristics); if two VFSes got different numbers of xSync calls for the same work,
/// their times compare different durability work, not different I/O paths.
///
/// Every counted file target is checked against `unix` in the same journal mode (SQLite's
/// own behaviour is the reference), or against its baseline when `unix` is not measured.
fn unfair_comparisons(results: &[ComboResult]) -> Vec<String> {
    let mut found = Vec::new();
    for (index, result) in results.iter().enumerate() {
        let reference = results
            .iter()
            .position(|r| r.target == "unix" && r.journal == result.journal)
            .or(result.baseline);
        let Some(reference) = reference.filter(|&r| r != index) else {
            continue;
        };
        let base = &results[reference];
        if let (Some(mine), Some(theirs)) = (result.io, base.io) {
            if mine.sync_calls != theirs.sync_calls {
                found.push(format!(
                    "{} received {} xSync calls per run but {} received {}: SQLite synced \
                     differently on them, so their times are not a like-for-like comparison",
                    result.label, mine.sync_calls, base.label, theirs.sync_calls
                ));
            }
        }
    }
    found
}

/// `bench speed` flags (without the subcommand words) parsed as the command line is,
/// for the tests of this module's parts.
#[cfg(test)]
pub(crate) fn parse_test_args<'a>(
    words: impl IntoIterator<Item = &'a str>,
) -> Result<SpeedArgs, clap::Error> {
    super::common::options::parse_flags(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::common::checksum::Checksum;
    use crate::bench::common::options::TINY_RUN;
    use sqlite_uring::IoStats;
    use std::path::PathBuf;

    fn parse(extra: &[&str]) -> Result<SpeedArgs, clap::Error> {
        parse_test_args(extra.iter().copied())
    }

    /// A worker's job describes exactly one run of the parent's test on one of its
    /// targets, for every combination, URI parameters and an odd scale included, and
    /// crosses the command line unchanged.
    #[test]
    fn worker_jobs_reproduce_each_run_of_the_parent() {
        let parent = parse(&[
            "--targets",
            "memory,unix,io_uring?uring_syncs=syscall&uring_sync_plan=separate,sync",
            "--journal",
            "wal,delete",
            "--synchronous",
            "normal",
            "--scale",
            "0.0123456789",
            "--prepared",
            "--cache",
            "cold",
            "--runs",
            "7",
            "--warmup",
            "2",
            "--dir",
            "/var/tmp/some dir",
        ])
        .unwrap();
        let targets = targets::resolve(&parent.compare.targets).unwrap();
        let combos = combos(&targets, &parent.compare.journal);
        assert_eq!(combos.len(), 1 + 3 * 2);
        let database = Path::new("/var/tmp/some dir/x.db");
        for combo in &combos {
            let job = worker_job(&parent, 12, combo, database);
            let child = crate::bench::common::worker::round_trip(&job);
            assert_eq!(child, job);
            assert_eq!(child.test, 12);
            assert_eq!(child.target, combo.target.label);
            assert_eq!(child.journal, combo.journal.unwrap_or(JournalMode::Delete));
            assert_eq!(child.synchronous, parent.compare.pairing.synchronous);
            assert_eq!(child.scale.to_bits(), parent.scale.to_bits());
            assert!(child.prepared);
            assert_eq!(child.cache, CacheState::Cold);
            assert_eq!(child.database, database);
            // The worker can resolve the target it is sent.
            let [resolved] = targets::resolve(std::slice::from_ref(&child.target))
                .unwrap()
                .try_into()
                .ok()
                .unwrap();
            assert_eq!(resolved.uri_parameters, combo.target.uri_parameters);
        }
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (argv, flag) in [
            (vec!["--scale", "0"], "--scale"),
            (vec!["--scale", "-1"], "--scale"),
            (vec!["--scale", "abc"], "--scale"),
            (vec!["--runs", "0"], "--runs"),
            (vec!["--runs", "100001"], "--runs"),
            (vec!["--warmup", "4294967295"], "--warmup"),
            (vec!["--journal", "wall"], "--journal"),
            (vec!["--tests", "17"], "--tests"),
            (vec!["--synchronous", "maybe"], "--synchronous"),
            (vec!["--cache", "warm"], "--cache"),
        ] {
            let message = parse(&argv).err().unwrap().to_string();
            assert!(message.contains(flag), "{argv:?}: {message}");
        }
        let args = parse(&["--targets", "memory,unix", "--scale", "0.5"]).unwrap();
        assert_eq!(args.compare.targets, ["memory", "unix"]);
        assert_eq!(
            args.compare.journal,
            [JournalMode::Delete, JournalMode::Wal]
        );
        assert_eq!(args.cache, CacheState::Hot);
    }

    /// `--cache cold` runs every test with its pages evicted, says so in the settings
    /// header, and records the state with every result.
    #[test]
    fn cold_runs_say_so_and_record_it() {
        let _counters = targets::counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let mut args = parse(&[
            "--allow-debug",
            "--targets",
            "memory,unix",
            "--journal",
            "wal",
            "--tests",
            "4,16",
            "--scale",
            "0.01",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--cache",
            "cold",
            "--isolation",
            "none",
        ])
        .unwrap();
        args.run.place.dir = dir.path().to_path_buf();
        args.export.export_json = Some(dir.path().join("cold.json"));
        args.export.export_markdown = Some(dir.path().join("cold.md"));
        run(args).unwrap();
        let markdown = std::fs::read_to_string(dir.path().join("cold.md")).unwrap();
        assert!(
            markdown.contains("cache cold (pages evicted before each timed test)"),
            "{markdown}"
        );
        let json = std::fs::read_to_string(dir.path().join("cold.json")).unwrap();
        let records: Vec<output::SpeedRecord> = serde_json::from_str(&json).unwrap();
        assert_eq!(records.len(), 2 * 2);
        assert!(records.iter().all(|r| r.cache == "cold"), "{records:?}");
    }

    #[test]
    fn bad_directories_targets_and_baselines_are_refused() {
        let mut args = parse(&["--allow-debug", "--dir", "/nonexistent/speed"]).unwrap();
        let message = format!("{:#}", run(args.clone()).unwrap_err());
        assert!(
            message.contains("--dir") && message.contains("create it"),
            "{message}"
        );

        // /proc refuses new files even to root.
        args.run.place.dir = PathBuf::from("/proc");
        let message = format!("{:#}", run(args.clone()).unwrap_err());
        assert!(message.contains("--dir /proc is not writable"), "{message}");

        let dir = tempfile::tempdir().unwrap();
        args.run.place.dir = dir.path().to_path_buf();
        args.compare.targets = vec!["memory".into(), "tape".into()];
        let message = format!("{:#}", run(args.clone()).unwrap_err());
        assert!(
            message.contains("--targets") && message.contains("tape"),
            "{message}"
        );

        args.compare.targets = vec!["memory".into()];
        let message = format!("{:#}", run(args.clone()).unwrap_err());
        assert!(
            message.contains("--baseline unix is not among --targets"),
            "{message}"
        );

        args.export.export_json = Some(PathBuf::from("/nonexistent/out.json"));
        let message = format!("{:#}", run(args).unwrap_err());
        assert!(message.contains("--export-json"), "{message}");
    }

    fn outcome(checksum: Checksum, syncs: u64) -> RunOutcome {
        RunOutcome {
            elapsed_s: 0.01,
            cpu_s: 0.01,
            checksum,
            io: Some(IoStats {
                sync_calls: syncs,
                ..IoStats::default()
            }),
            methods: None,
        }
    }

    fn file_combos() -> Vec<Combo> {
        let targets = targets::resolve(&["unix".into(), "unix-none".into()]).unwrap();
        combos(&targets, &[JournalMode::Wal])
    }

    /// Each file target's breakdown pairs with its baseline in the same journal mode, run
    /// by run; memory is not timed; with an untimed baseline (memory) every target shows
    /// its own times; the records name the VFS measured, not the timing wrapper.
    #[test]
    fn breakdowns_pair_with_the_baseline_of_the_same_journal_mode() {
        use crate::counting_vfs::{Method, MethodTimes};
        let targets = targets::resolve(&["memory".into(), "unix".into(), "io_uring".into()])
            .and_then(targets::with_method_times)
            .unwrap();
        let journals = [JournalMode::Delete, JournalMode::Wal];
        let combos = combos(&targets, &journals);
        let labels: Vec<String> = combos.iter().map(Combo::label).collect();
        assert_eq!(
            labels,
            [
                "memory",
                "unix (delete)",
                "io_uring (delete)",
                "unix (wal)",
                "io_uring (wal)"
            ]
        );
        // xRead takes 100 µs + 10 µs × the combo's index, plus a drift shared by the round.
        let runs = |index: usize, timed: bool| -> Vec<RunOutcome> {
            (0..8)
                .map(|round| {
                    let mut times = MethodTimes::default();
                    times.calls[Method::Read as usize] = 5;
                    times.ns[Method::Read as usize] = 100_000 + 10_000 * index as u64 + round;
                    RunOutcome {
                        elapsed_s: 0.001,
                        cpu_s: 0.001,
                        checksum: Checksum::default(),
                        io: None,
                        methods: timed.then_some(times),
                    }
                })
                .collect()
        };
        let outcomes: Vec<Vec<RunOutcome>> = (0..combos.len())
            .map(|index| runs(index, index != 0))
            .collect();
        let read_difference = |result: &TestResult, index: usize| {
            let shares = result.combos[index].breakdown.as_ref().unwrap();
            assert_eq!(shares[0].part, "xRead");
            shares[0].difference.map(|d| d.median)
        };
        let result = summarise(16, &combos, &outcomes, "unix", &journals).unwrap();
        assert!(result.combos[0].breakdown.is_none());
        assert_eq!(read_difference(&result, 1), None);
        assert_eq!(read_difference(&result, 3), None);
        let delete = read_difference(&result, 2).unwrap();
        let wal = read_difference(&result, 4).unwrap();
        assert!((delete - 10e-6).abs() < 1e-12, "{delete}");
        assert!((wal - 10e-6).abs() < 1e-12, "{wal}");
        assert_eq!(result.combos[2].vfs, "io_uring");
        assert_eq!(result.combos[1].vfs, "unix_counted");

        let against_memory = summarise(16, &combos, &outcomes, "memory", &journals).unwrap();
        for index in 1..combos.len() {
            assert_eq!(read_difference(&against_memory, index), None);
        }
    }

    #[test]
    fn a_checksum_mismatch_fails_loudly() {
        let combos = file_combos();
        let mut other = Checksum::default();
        other.text("different");
        let same = vec![vec![outcome(Checksum::default(), 1)]; 2];
        assert!(check_checksums(3, &combos, &same).is_ok());
        let differing = vec![
            vec![outcome(Checksum::default(), 1)],
            vec![outcome(other, 1)],
        ];
        let message = check_checksums(3, &combos, &differing)
            .unwrap_err()
            .to_string();
        assert!(message.contains("CHECKSUM MISMATCH in test 3"), "{message}");
        assert!(message.contains("unix-none (wal)"), "{message}");
    }

    #[test]
    fn differing_sync_counts_are_flagged_unfair() {
        let combos = file_combos();
        let runs = vec![
            vec![outcome(Checksum::default(), 10)],
            vec![outcome(Checksum::default(), 12)],
        ];
        let result = summarise(1, &combos, &runs, "unix", &[JournalMode::Wal]).unwrap();
        assert_eq!(result.unfair.len(), 1, "{:?}", result.unfair);
        assert!(result.unfair[0].contains("unix-none (wal) received 12 xSync"));
        let fair = vec![vec![outcome(Checksum::default(), 10)]; 2];
        let result = summarise(1, &combos, &fair, "unix", &[JournalMode::Wal]).unwrap();
        assert!(result.unfair.is_empty());
    }

    #[test]
    fn smoke_run_of_the_whole_suite_at_a_tiny_scale() {
        let _counters = targets::counters_lock();
        let dir = tempfile::tempdir().unwrap();
        let out = |name: &str| Some(dir.path().join(name));
        let mut args = parse(
            &[
                TINY_RUN.as_slice(),
                &["--targets", "memory,unix", "--scale", "0.01"],
            ]
            .concat(),
        )
        .unwrap();
        args.run.place.dir = dir.path().to_path_buf();
        args.export.export_json = out("speed.json");
        args.export.export_csv = out("speed.csv");
        args.export.export_markdown = out("speed.md");
        args.export.chart = out("speed.svg");
        run(args).unwrap();

        let json = std::fs::read_to_string(dir.path().join("speed.json")).unwrap();
        // Without --breakdown, nothing is timed by method.
        assert!(!json.contains("breakdown"), "{json}");
        let records: Vec<output::SpeedRecord> = serde_json::from_str(&json).unwrap();
        // memory once + unix in delete and wal, for each of the 16 tests.
        assert_eq!(records.len(), 16 * 3);
        for test in 1..=16 {
            let of_test: Vec<_> = records.iter().filter(|r| r.test == test).collect();
            assert_eq!(of_test.len(), 3);
            assert!(of_test.iter().all(|r| r.checksum == of_test[0].checksum));
            let unix_wal = of_test.iter().find(|r| r.journal == "wal").unwrap();
            assert_eq!(unix_wal.relative, Some(1.0));
            assert!(unix_wal.sync_calls.is_some());
        }
        let mut csv = csv::Reader::from_path(dir.path().join("speed.csv")).unwrap();
        let from_csv: Vec<output::SpeedRecord> = csv.deserialize().map(|r| r.unwrap()).collect();
        assert_eq!(from_csv.len(), records.len());
        let markdown = std::fs::read_to_string(dir.path().join("speed.md")).unwrap();
        assert!(markdown.contains("## Test 16: DROP TABLE"));
        let svg = std::fs::read_to_string(dir.path().join("speed.svg")).unwrap();
        assert!(svg.contains("memory"));
        // No database files are left behind.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".db"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
