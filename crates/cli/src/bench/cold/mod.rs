//! `sqlite-uring bench cold`: reads of a database several times larger than SQLite's
//! page cache, with its pages evicted from the OS page cache before the timed part
//! (cold) or read into it first (hot), on several targets and journal modes.
//!
//! On cold data SQLite reads one page at a time and waits for each (queue depth 1); a
//! disk serves several times more random reads with many in flight. This benchmark shows
//! what a target makes of that: the time of each test and the bytes the process read
//! from the device (`/proc/self/io`), so that read-ahead that reads more than it saves
//! shows as well.
//!
//! The database is built once per journal mode through SQLite's `unix` VFS (untimed;
//! database.rs) and cached in `--dir`; every target reads that same file. Per case (a
//! test in a cache state), every target × journal mode runs `--warmup` + `--runs` times,
//! interleaved run by run, the order rotating each round, each run in a fresh process
//! (isolate.rs); each run's time is paired with the baseline's of the same round. How to
//! read the output: `docs/BENCH_COLD.md`.
//!
//! With `--database FILE` the tests are the user's `--query` statements on the user's
//! file instead (given.rs describes it from its header): every target opens it read-only
//! in its own journal mode, and a statement that would write is refused before any run.

mod database;
mod given;
pub(crate) mod isolate;
mod output;
mod workload;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::common::export::ExportManager;
use super::common::options::{once_each, ExportOptions, RunOptions, TargetHelp, TargetOptions};
use super::common::pagecache::CacheState;
use super::common::rounds::{on_memory_filesystem, print_header, Rounds};
use super::common::{process_usage, signals};
use crate::bench::common::database::{configure, connect, connect_read_only};
use crate::bench::common::settings::{JournalMode, Settings};
use crate::bench::common::targets;
use crate::report::envinfo;
use database::{Database, DirLock, Spec};
use output::{Case, Combo};
use workload::{ColdTest, RunSpec, Test};

/// Database size by default: a hundred times SQLite's default page cache (2 MiB), and
/// small enough to build in about a minute and fit the page cache of a small VM.
pub const DEFAULT_SIZE_MIB: u64 = 200;
/// Measured runs per case and target by default: the fewest that give most comparisons
/// a verdict (as `bench speed`).
pub const DEFAULT_RUNS: u32 = 10;

/// Options of `bench cold`.
#[derive(Args, Debug, Clone)]
pub struct ColdArgs {
    #[command(flatten)]
    pub compare: TargetOptions<ColdTargets>,

    /// Cache states, comma-separated: cold (the database's pages evicted from the OS page
    /// cache right before the timed part) and hot (read into it first).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "cold,hot",
        value_name = "LIST"
    )]
    pub cache: Vec<CacheState>,

    /// Tests to run, comma-separated [default: all]: scan-without-rowid, scan-rowid,
    /// index-range, create-index, integrity-check, vacuum-into, point-lookups.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "LIST",
        hide_possible_values = true
    )]
    pub tests: Vec<ColdTest>,

    /// Size of the database in MiB (1 to 1048576); it is built once and kept in --dir.
    /// Several times SQLite's page cache (2000 KiB by default) makes every test read from
    /// the file; less than the free memory lets hot runs be hot.
    #[arg(long, default_value_t = DEFAULT_SIZE_MIB, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub size_mib: u64,

    /// Build the database anew even if a valid one is kept in --dir.
    #[arg(long)]
    pub rebuild: bool,

    /// An existing database to measure instead of the one bench cold builds, with the
    /// statements given by --query: every target opens it read-only (nothing of it is
    /// written; for a WAL database SQLite may create an empty -wal and a -shm, as for any
    /// reader), in its own journal mode. Its pages are evicted like the built database's
    /// (no root needed).
    #[arg(long, value_name = "FILE", requires = "query",
          conflicts_with_all = ["tests", "rebuild", "size_mib", "journal", "synchronous"])]
    pub database: Option<PathBuf>,

    /// A read-only statement to time on --database (repeatable: each is a test, query-1,
    /// query-2, … in the order given). Its rows must come out the same through every
    /// target.
    #[arg(long, value_name = "SQL", requires = "database")]
    pub query: Vec<String>,

    /// Measured runs per case and target (at least 1; 6 or more give the paired 95 %
    /// interval, which the closing verdict needs).
    #[arg(long, default_value_t = DEFAULT_RUNS, value_name = "RUNS",
          value_parser = clap::value_parser!(u32).range(1..=crate::bench::common::options::MAX_RUNS))]
    pub runs: u32,

    #[command(flatten)]
    pub run: RunOptions,

    #[command(flatten)]
    pub export: ExportOptions,
}

/// The kind of job `bench worker` runs for `bench cold`.
pub const WORKER_JOB: super::common::worker::JobKind =
    super::common::worker::JobKind::of::<isolate::Job>();

/// `bench cold`'s `--targets` and `--journal`.
#[derive(Clone, Debug)]
pub struct ColdTargets;

impl TargetHelp for ColdTargets {
    const DEFAULT_TARGETS: &'static str = "unix,io_uring";
    const TARGETS: &'static str = "Targets to compare, comma-separated: unix (SQLite's own \
        VFS), io_uring (ours), sync (our VFS on plain syscalls), io_uring_ring, \
        io_uring_direct, or any registered VFS; ours take URI parameters: \
        `io_uring?uring_readahead=off`. Every target reads the same database file";
    const JOURNAL: &'static str = "Journal modes, comma-separated; each has its own copy of \
        the database (the same pages), checkpointed so that its WAL is empty before each test";
}

/// What a run of `bench cold` measures, from its options.
struct Plan {
    targets: Vec<targets::Target>,
    journals: Vec<JournalMode>,
    cases: Vec<Case>,
}

impl ColdArgs {
    /// Refuses what would fail or mislead, before anything is built.
    fn plan(&self) -> Result<Plan> {
        for name in &self.compare.targets {
            let base = name.trim().split('?').next().unwrap_or_default();
            if base == "memory" {
                bail!(
                    "--targets {}: bench cold reads a database file, and memory has none; \
                     leave it out of --targets",
                    name.trim()
                );
            }
        }
        let targets = self.compare.resolve()?;
        let caches = once_each(&self.cache);
        let (journals, tests) = match &self.database {
            Some(path) => (vec![given::journal_mode(path)?], self.queries()?),
            None => {
                let mut tests = if self.tests.is_empty() {
                    ColdTest::ALL.to_vec()
                } else {
                    once_each(&self.tests)
                };
                tests.sort_unstable();
                let tests = tests.into_iter().map(Test::Builtin).collect();
                (self.compare.journals(), tests)
            }
        };
        if journals.is_empty() || caches.is_empty() {
            bail!("--journal and --cache need at least one value each, e.g. --journal wal --cache cold");
        }
        let cases = tests
            .iter()
            .flat_map(|test| {
                caches.iter().map(move |&cache| Case {
                    test: test.clone(),
                    cache,
                })
            })
            .collect();
        Ok(Plan {
            targets,
            journals,
            cases,
        })
    }

    /// The `--query` statements as tests, each with some text (that it is one read-only
    /// statement is checked once the database is open: `workload::prepare_query`).
    fn queries(&self) -> Result<Vec<Test>> {
        self.query
            .iter()
            .enumerate()
            .map(|(index, sql)| {
                let number = index as u32 + 1;
                if sql.trim().is_empty() {
                    bail!("--query {number} is empty: give a statement to time, e.g. --query 'SELECT count(*) FROM t'");
                }
                Ok(Test::Query {
                    number,
                    sql: sql.clone(),
                })
            })
            .collect()
    }
}

/// `PRAGMA cache_size` of a new connection, and the bytes it allows at `page_size`.
fn default_cache(page_size: u32) -> (i64, u64) {
    let pages = rusqlite::Connection::open_in_memory()
        .and_then(|c| c.query_row("PRAGMA cache_size", [], |row| row.get::<_, i64>(0)))
        .unwrap_or(-2000);
    let bytes = if pages < 0 {
        pages.unsigned_abs() * 1024
    } else {
        pages as u64 * u64::from(page_size)
    };
    (pages, bytes)
}

/// Opens every database once through every target (untimed), so that a target its VFS
/// refuses (an unknown URI parameter, say) fails now, named, rather than after a build
/// and a series of runs.
fn check_targets_open(plan: &Plan, databases: &[Database], args: &ColdArgs) -> Result<()> {
    for target in &plan.targets {
        let vfs = target.vfs.as_deref().unwrap_or_default();
        for database in databases {
            let settings = Settings {
                journal: database.journal,
                synchronous: args.compare.pairing.synchronous,
            };
            let opened = if args.database.is_some() {
                connect_read_only(target, vfs, &database.path)
            } else {
                connect(target, vfs, &database.path).and_then(|connection| {
                    configure(&connection, target, settings).map(|()| connection)
                })
            };
            let connection = opened.with_context(|| {
                format!(
                    "--targets {}: cannot open the database through it; fix the target \
                         (its URI parameters) or leave it out of --targets",
                    target.label
                )
            })?;
            // The user's statements, each checked once, on the first target's connection.
            if args.database.is_some() && target.label == plan.targets[0].label {
                for case in plan.cases.iter().filter(|c| c.cache == plan.cases[0].cache) {
                    if let Test::Query { number, sql } = &case.test {
                        workload::prepare_query(&connection, *number, sql)?;
                    }
                }
            }
        }
    }
    Ok(())
}

pub fn run(args: ColdArgs) -> Result<()> {
    let isolation = args.run.isolation()?;
    let worker_exe = isolation.worker_exe()?;
    let debug_warning = args.run.check()?;
    let exports = ExportManager::new(&args.export)?;
    let plan = args.plan()?;
    // The device reads are half of what this measures: no counter, no run.
    process_usage::read_bytes()?;
    let dir = &args.run.place.dir;
    let _lock = DirLock::acquire(dir)?;
    signals::install_handlers()?;

    let databases = match &args.database {
        Some(path) => {
            let database = given::describe(path)?;
            if database.journal != plan.journals[0] {
                bail!(
                    "--database {}: its journal mode changed while the run started; run it \
                     again when nothing else changes the database",
                    path.display()
                );
            }
            vec![database]
        }
        None => database::prepare(dir, &Spec::new(args.size_mib), &plan.journals, args.rebuild)?,
    };
    // What is measured is the database's filesystem and device.
    let env = match &args.database {
        Some(path) => envinfo::EnvInfo::collect(
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new(".")),
        ),
        None => envinfo::EnvInfo::collect(dir),
    };
    check_targets_open(&plan, &databases, &args)?;
    let first = &databases[0];
    let (cache_pages, cache_bytes) = default_cache(first.page_size);

    // A given database is only read: no synchronous setting applies to it.
    let synchronous = match &args.database {
        Some(_) => "n/a (read-only)",
        None => args.compare.pairing.synchronous.name(),
    };
    let mut header = env.lines();
    for database in &databases {
        header.push(if args.database.is_some() {
            format!(
                "database:    {} (given, opened read-only by every target): {:.1} MiB = {} pages of {} B ({} free) · journal mode {}{}",
                database.path.display(),
                database.mib(),
                database.pages,
                database.page_size,
                database.free_pages,
                database.journal.name(),
                match given::wal_bytes(&database.path) {
                    0 => String::new(),
                    bytes => format!(" · its -wal holds {} (read as it is)", stats_bytes(bytes)),
                },
            )
        } else {
            format!(
                "database:    {} ({}): {:.1} MiB = {} pages of {} B ({} free) · {} rows in w and in r · written through unix",
                database.path.display(),
                database.origin,
                database.mib(),
                database.pages,
                database.page_size,
                database.free_pages,
                database.rows,
            )
        });
    }
    for query in &args.query {
        header.push(format!("query:       {}", workload::one_line(query)));
    }
    header.push(format!(
        "cache_size:  {cache_pages} ({}) per connection, SQLite's default: the database is {:.1} times larger",
        stats_bytes(cache_bytes),
        first.bytes() as f64 / cache_bytes.max(1) as f64
    ));
    let caches: Vec<CacheState> =
        once_each(&plan.cases.iter().map(|c| c.cache).collect::<Vec<_>>());
    for cache in &caches {
        header.push(match cache {
            CacheState::Cold => "cold:        before each timed test, SQLite's page cache emptied and the database's files \
                                 written back and evicted from the OS page cache (posix_fadvise POSIX_FADV_DONTNEED; no root)"
                .to_string(),
            CacheState::Hot => "hot:         before each timed test, the database's files read once into the OS page cache \
                                (the warm-up read) and SQLite's page cache emptied"
                .to_string(),
        });
    }
    header.push(format!(
        "settings:    synchronous={} · journal {} · cache {} · {} warmup + {} runs · baseline {} · isolation {} · device reads: /proc/self/io read_bytes of the run's process",
        synchronous,
        plan.journals.iter().map(|j| j.name()).collect::<Vec<_>>().join(","),
        caches.iter().map(|c| c.name()).collect::<Vec<_>>().join(","),
        args.compare.pairing.warmup,
        args.runs,
        args.compare.pairing.baseline,
        isolation.name(),
    ));
    let mut cautions: Vec<String> = debug_warning.into_iter().collect();
    if on_memory_filesystem(&env) {
        let (what, remedy) = match &args.database {
            Some(_) => ("--database", "measure a copy of it on a disk"),
            None => ("--dir", "point --dir at a disk"),
        };
        cautions.push(format!(
            "WARNING: {what} is on {}: its pages are the file and cannot be evicted, so cold \
             runs are hot and nothing is read from a device; {remedy}",
            env.filesystem
        ));
    }
    if first.bytes() < 4 * cache_bytes {
        cautions.push(format!(
            "WARNING: the database ({:.1} MiB) is less than 4 times SQLite's page cache ({}): \
             much of it stays in SQLite's cache within a test; {}",
            first.mib(),
            stats_bytes(cache_bytes),
            if args.database.is_some() {
                "a larger database shows more of the device"
            } else {
                "raise --size-mib"
            }
        ));
    }
    if env.available_memory_bytes > 0 && first.bytes() > env.available_memory_bytes / 2 {
        cautions.push(format!(
            "WARNING: the database ({:.1} MiB) is more than half the available memory: hot \
             runs may not find it cached; {}",
            first.mib(),
            if args.database.is_some() {
                "read the hot results with that in mind"
            } else {
                "lower --size-mib"
            }
        ));
    }
    if let Some(path) = &args.run.trace {
        cautions.push(format!(
            "NOTE: --trace {}: every call to this project's VFS is written there, so its \
             targets run slower than untraced ones",
            path.display()
        ));
    }
    println!();
    let header = print_header(header, cautions, Some(output::TERMINAL_OMITS));

    let combos: Vec<Combo> = plan
        .journals
        .iter()
        .flat_map(|&journal| {
            plan.targets.iter().map(move |target| Combo {
                target: target.label.clone(),
                vfs: target.vfs.clone().unwrap_or_default(),
                journal,
                engine_counted: target.counter.counts_engine(),
            })
        })
        .collect();
    let database_of = |journal: JournalMode| -> &Database {
        databases
            .iter()
            .find(|d| d.journal == journal)
            .expect("one database per journal mode")
    };
    let scratch = dir.join(format!(
        "sqlite-uring-cold-vacuum-{}.db",
        std::process::id()
    ));
    let pairing = &args.compare.pairing;
    let rounds = Rounds::new(pairing.warmup, args.runs, plan.cases.len(), combos.len());
    let table_output = crate::report::table::Output::stdout();
    let trace = crate::trace_file::start(args.run.trace.as_deref())?;
    let mut results = Vec::new();
    for case in &plan.cases {
        let outcomes = rounds.case(combos.len(), |step| {
            let combo = &combos[step.index];
            let database = database_of(combo.journal);
            let job = RunSpec {
                test: case.test.clone(),
                cache: case.cache,
                target: combo.target.clone(),
                journal: combo.journal,
                synchronous: pairing.synchronous,
                database: database.path.clone(),
                given: args.database.is_some(),
                rows: database.rows,
                scratch: scratch.clone(),
            };
            rounds.message(format!("{} · {}", step.phase, job.describe()));
            crate::trace_file::mark(format_args!(
                "cold {} · {} {}",
                job.describe(),
                step.phase,
                step.round + 1
            ));
            match &worker_exe {
                Some(exe) => isolate::run_in_worker(exe, &job),
                None => isolate::run_here(&job),
            }
        })?;
        let result = output::summarise(case.clone(), &combos, &outcomes, &pairing.baseline)?;
        rounds.show(
            &format!("{}. {}", case.test.number(), case.title()),
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
        synchronous: synchronous.to_string(),
        database: args.database.as_ref().map(|p| p.display().to_string()),
        baseline: args.compare.pairing.baseline.clone(),
        database_mib: first.mib(),
        database_pages: first.pages,
        page_size: first.page_size,
        rows: first.rows,
    };
    let report = output::report(&header, &results, &info, &verdict);
    for warning in exports.write(&report)? {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

fn stats_bytes(bytes: u64) -> String {
    crate::report::stats::format_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::common::options::TINY_RUN;
    use std::path::Path;

    fn parse(words: &[&str]) -> Result<ColdArgs, clap::Error> {
        crate::bench::common::options::parse_flags(words.iter().copied())
    }

    #[test]
    fn defaults_and_parsing() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.compare.targets, ["unix", "io_uring"]);
        assert_eq!(args.compare.pairing.baseline, "unix");
        assert_eq!(
            args.compare.journal,
            [JournalMode::Delete, JournalMode::Wal]
        );
        assert_eq!(args.cache, [CacheState::Cold, CacheState::Hot]);
        assert!(args.tests.is_empty());
        assert_eq!(
            (args.size_mib, args.runs, args.compare.pairing.warmup),
            (200, 10, 1)
        );
        assert!(!args.rebuild);
        let plan = args.plan().unwrap();
        assert_eq!(plan.cases.len(), 7 * 2);
        assert_eq!(
            plan.cases[..2],
            [
                Case {
                    test: Test::Builtin(ColdTest::ScanWithoutRowid),
                    cache: CacheState::Cold
                },
                Case {
                    test: Test::Builtin(ColdTest::ScanWithoutRowid),
                    cache: CacheState::Hot
                }
            ]
        );

        let args = parse(&[
            "--tests",
            "point-lookups,scan-rowid,point-lookups",
            "--cache",
            "hot",
            "--journal",
            "wal",
            "--size-mib",
            "3",
            "--rebuild",
        ])
        .unwrap();
        let plan = args.plan().unwrap();
        let tests: Vec<Test> = plan.cases.iter().map(|c| c.test.clone()).collect();
        assert_eq!(
            tests,
            [
                Test::Builtin(ColdTest::ScanRowid),
                Test::Builtin(ColdTest::PointLookups)
            ]
        );
        assert_eq!(plan.journals, [JournalMode::Wal]);
        assert!(args.rebuild && args.size_mib == 3);
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (words, flag) in [
            (vec!["--size-mib", "0"], "--size-mib"),
            (vec!["--size-mib", "lots"], "--size-mib"),
            (vec!["--tests", "scan-everything"], "--tests"),
            (vec!["--cache", "warm"], "--cache"),
            (vec!["--journal", "wall"], "--journal"),
            (vec!["--runs", "0"], "--runs"),
        ] {
            let message = parse(&words).err().unwrap().to_string();
            assert!(message.contains(flag), "{words:?}: {message}");
        }
        let message = parse(&["--tests", "scan-everything"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            message.contains("scan-without-rowid"),
            "lists the tests: {message}"
        );
        for (words, wanted) in [
            (
                vec!["--targets", "io_uring"],
                "--baseline unix is not among --targets",
            ),
            (vec!["--targets", "unix,memory"], "--targets memory"),
            (vec!["--targets", "unix,tape"], "tape"),
            (vec!["--targets", "unix,unix"], "twice"),
            (
                vec!["--targets", "unix,unix?uring_readahead=on"],
                "not unix",
            ),
        ] {
            let message = format!("{:#}", parse(&words).unwrap().plan().err().unwrap());
            assert!(message.contains(wanted), "{words:?}: {message}");
        }
        // Refused before anything is built in --dir.
        let dir = tempfile::tempdir().unwrap();
        let mut args =
            parse(&["--allow-debug", "--targets", "io_uring", "--size-mib", "1"]).unwrap();
        args.run.place.dir = dir.path().to_path_buf();
        let message = format!("{:#}", run(args.clone()).unwrap_err());
        assert!(message.contains("--baseline"), "{message}");
        args.compare.targets = vec!["unix".into()];
        args.export.export_json = Some("/nonexistent/cold.json".into());
        let message = format!("{:#}", run(args).unwrap_err());
        assert!(message.contains("--export-json"), "{message}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A target its VFS refuses to open with fails before the first run, named.
    #[test]
    fn a_target_that_cannot_open_the_database_is_named() {
        let _counters = targets::counters_lock();
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let mut args = parse(&[
            "--allow-debug",
            "--targets",
            "unix,io_uring?uring_no_such_key=on",
            "--journal",
            "wal",
            "--size-mib",
            "1",
            "--isolation",
            "none",
        ])
        .unwrap();
        args.run.place.dir = dir.path().to_path_buf();
        let message = format!("{:#}", run(args).unwrap_err());
        assert!(
            message.contains("--targets io_uring?uring_no_such_key=on: cannot open")
                && message.contains("uring_no_such_key"),
            "{message}"
        );
    }

    #[test]
    fn worker_jobs_round_trip() {
        let query = Test::Query {
            number: 2,
            sql: "SELECT 'a \"quoted\" text', x FROM t\nWHERE x > 1".into(),
        };
        let tests = ColdTest::ALL.map(Test::Builtin);
        for test in tests.iter().chain([&query]) {
            for cache in [CacheState::Cold, CacheState::Hot] {
                let job = RunSpec {
                    test: test.clone(),
                    cache,
                    target: "io_uring?uring_readahead=off&uring_syncs=ring".into(),
                    journal: JournalMode::Wal,
                    synchronous: crate::bench::common::settings::Synchronous::Extra,
                    database: Path::new("/var/tmp/odd dir/c.db").into(),
                    given: matches!(test, Test::Query { .. }),
                    rows: 123_456,
                    scratch: Path::new("/var/tmp/odd dir/v.db").into(),
                };
                assert_eq!(crate::bench::common::worker::round_trip(&job), job);
            }
        }
    }

    /// A tiny real run in this process with every export.
    #[test]
    fn tiny_run_in_this_process_exports_every_format() {
        let _counters = targets::counters_lock();
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let out = tempfile::tempdir().unwrap();
        let mut args = parse(
            &[
                TINY_RUN.as_slice(),
                &["--targets", "unix,sync", "--size-mib", "1"],
            ]
            .concat(),
        )
        .unwrap();
        args.run.place.dir = dir.path().to_path_buf();
        args.export.export_json = Some(out.path().join("c.json"));
        args.export.export_csv = Some(out.path().join("c.csv"));
        args.export.export_markdown = Some(out.path().join("c.md"));
        args.export.chart = Some(out.path().join("c.svg"));
        run(args).unwrap();
        let json = std::fs::read_to_string(out.path().join("c.json")).unwrap();
        let records: Vec<output::ColdRecord> = serde_json::from_str(&json).unwrap();
        // 7 tests × 2 cache states × 2 targets × 2 journal modes.
        assert_eq!(records.len(), 7 * 2 * 2 * 2);
        for record in &records {
            assert_eq!(record.runs, 2);
            assert!(record.mean_s > 0.0 && record.rows > 0, "{record:?}");
            assert_eq!(
                record.cache == "cold",
                record.resident_after_evict_pages.is_some()
            );
        }
        let csv_rows = csv::Reader::from_path(out.path().join("c.csv"))
            .unwrap()
            .deserialize::<output::ColdRecord>()
            .count();
        assert_eq!(csv_rows, records.len());
        let markdown = std::fs::read_to_string(out.path().join("c.md")).unwrap();
        assert!(markdown.contains("Verdict against unix"), "{markdown}");
        assert!(
            markdown.contains("cold:        before each timed test"),
            "{markdown}"
        );
        assert!(std::fs::read_to_string(out.path().join("c.svg"))
            .unwrap()
            .contains("<svg"));
        // Only the cached databases remain in --dir.
        let mut names = names(dir.path());
        names.sort();
        assert_eq!(
            names,
            [
                "sqlite-uring-cold-1mib-p4096-v1-delete.db",
                "sqlite-uring-cold-1mib-p4096-v1-wal.db"
            ]
        );
    }

    /// A small database of the user's kind: a table in random key order, in `journal` mode;
    /// in WAL mode its last changes stay in the WAL (no checkpoint at close).
    fn user_database(dir: &Path, journal: &str) -> std::path::PathBuf {
        let path = dir.join(format!("user-{journal}.db"));
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .unwrap();
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode={journal}; PRAGMA wal_autocheckpoint=0;
                 CREATE TABLE t(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
                 WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000)
                   INSERT INTO t SELECT hex(randomblob(8)), printf('%.*c', 100 + x % 50, 'v') FROM n;"
            ))
            .unwrap();
        drop(connection);
        path
    }

    /// The bytes of `path` and of its WAL (empty when it has none).
    fn file_and_wal(path: &Path) -> (Vec<u8>, Vec<u8>) {
        (
            std::fs::read(path).unwrap(),
            std::fs::read(crate::bench::common::database::companion(path, "-wal"))
                .unwrap_or_default(),
        )
    }

    #[test]
    fn database_and_query_go_together_and_exclude_the_built_database_options() {
        for (words, wanted) in [
            (vec!["--database", "x.db"], "--query"),
            (vec!["--query", "SELECT 1"], "--database"),
            (
                vec![
                    "--database",
                    "x.db",
                    "--query",
                    "SELECT 1",
                    "--tests",
                    "scan-rowid",
                ],
                "--tests",
            ),
            (
                vec![
                    "--database",
                    "x.db",
                    "--query",
                    "SELECT 1",
                    "--size-mib",
                    "5",
                ],
                "--size-mib",
            ),
            (
                vec![
                    "--database",
                    "x.db",
                    "--query",
                    "SELECT 1",
                    "--journal",
                    "wal",
                ],
                "--journal",
            ),
            (
                vec!["--database", "x.db", "--query", "SELECT 1", "--rebuild"],
                "--rebuild",
            ),
            (
                vec![
                    "--database",
                    "x.db",
                    "--query",
                    "SELECT 1",
                    "--synchronous",
                    "off",
                ],
                "--synchronous",
            ),
        ] {
            let message = parse(&words).err().unwrap().to_string();
            assert!(message.contains(wanted), "{words:?}: {message}");
        }
        let dir = tempfile::tempdir().unwrap();
        let wal = user_database(dir.path(), "wal");
        let args = parse(&[
            "--database",
            wal.to_str().unwrap(),
            "--query",
            "SELECT count(*) FROM t",
            "--query",
            "SELECT max(k) FROM t",
        ])
        .unwrap();
        let plan = args.plan().unwrap();
        // The file's own journal mode; each query in each cache state, in the order given.
        assert_eq!(plan.journals, [JournalMode::Wal]);
        let names: Vec<String> = plan
            .cases
            .iter()
            .map(|c| format!("{} {}", c.test.name(), c.cache.name()))
            .collect();
        assert_eq!(
            names,
            ["query-1 cold", "query-1 hot", "query-2 cold", "query-2 hot"]
        );
        for (words, wanted) in [
            (vec!["--query", " "], "--query 1 is empty"),
            (vec!["--query", "SELECT 1"], "not a SQLite database"),
        ] {
            let text = dir.path().join("notes.txt");
            std::fs::write(&text, "x".repeat(200)).unwrap();
            let database = if wanted.contains("empty") {
                &wal
            } else {
                &text
            };
            let mut all = vec!["--database", database.to_str().unwrap()];
            all.extend(words);
            let message = format!("{:#}", parse(&all).unwrap().plan().err().unwrap());
            assert!(message.contains(wanted), "{message}");
        }
    }

    /// `--database`: every target reads the user's file read-only, in its own journal
    /// mode; a statement that would write, or does not prepare, stops the run before any
    /// measurement; the file is left byte for byte as it was.
    #[test]
    fn a_given_database_is_measured_read_only_with_its_queries() {
        let _counters = targets::counters_lock();
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let out = tempfile::tempdir().unwrap();
        for journal in ["delete", "wal"] {
            let database = user_database(dir.path(), journal);
            let before = file_and_wal(&database);
            // In WAL mode the table's rows are still in the WAL, and are read from it.
            assert_eq!(journal == "wal", !before.1.is_empty(), "{journal}");
            let with = |queries: &[&str]| {
                let mut words = TINY_RUN.to_vec();
                words.extend(["--targets", "unix,io_uring", "--database"]);
                words.push(database.to_str().unwrap());
                for query in queries {
                    words.extend(["--query", query]);
                }
                let mut args = parse(&words).unwrap();
                args.run.place.dir = dir.path().to_path_buf();
                args
            };
            for (queries, wanted) in [
                (
                    vec!["SELECT count(*) FROM t", "DELETE FROM t"],
                    "--query 2 (DELETE FROM t) is not read-only",
                ),
                (
                    vec!["PRAGMA journal_mode"],
                    "--query 1 (PRAGMA journal_mode) is not read-only",
                ),
                (vec!["SELEKT 1"], "--query 1 (SELEKT 1) does not prepare"),
                (
                    vec!["/* only a comment */"],
                    "--query 1 (/* only a comment */) holds no statement",
                ),
                (
                    vec!["SELECT v FROM t WHERE k = ?"],
                    "--query 1 (SELECT v FROM t WHERE k = ?) has parameters",
                ),
            ] {
                let message = format!("{:#}", run(with(&queries)).unwrap_err());
                // The query is at fault, not a target.
                assert!(
                    message.starts_with(wanted) && !message.contains("--targets"),
                    "{journal}: {message}"
                );
            }
            let mut args = with(&[
                "SELECT count(*), sum(length(v)) FROM t",
                "SELECT k FROM t ORDER BY k DESC LIMIT 3",
            ]);
            args.export.export_json = Some(out.path().join("q.json"));
            args.export.export_markdown = Some(out.path().join("q.md"));
            run(args).unwrap();
            let json = std::fs::read_to_string(out.path().join("q.json")).unwrap();
            let records: Vec<output::ColdRecord> = serde_json::from_str(&json).unwrap();
            // 2 queries × 2 cache states × 2 targets, in the file's journal mode.
            assert_eq!(records.len(), 2 * 2 * 2, "{journal}");
            for record in &records {
                assert!(record.test == "query-1" || record.test == "query-2");
                assert_eq!(
                    record.query.as_deref(),
                    Some(if record.test == "query-1" {
                        "SELECT count(*), sum(length(v)) FROM t"
                    } else {
                        "SELECT k FROM t ORDER BY k DESC LIMIT 3"
                    })
                );
                assert_eq!(record.database.as_deref(), database.to_str());
                assert_eq!(record.journal, journal);
                assert_eq!(record.synchronous, "n/a (read-only)");
                assert_eq!(record.rows, 0);
                assert!(record.mean_s > 0.0);
            }
            let markdown = std::fs::read_to_string(out.path().join("q.md")).unwrap();
            assert!(
                markdown.contains("given, opened read-only")
                    && markdown.contains("query:       SELECT k FROM t ORDER BY k DESC LIMIT 3"),
                "{markdown}"
            );
            if journal == "wal" {
                assert!(markdown.contains("its -wal holds"), "{markdown}");
            }
            assert!(
                file_and_wal(&database) == before,
                "{journal}: the files changed"
            );
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}
