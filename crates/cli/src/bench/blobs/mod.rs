//! `sqlite-uring bench blobs`: files stored in SQLite (EZFS's workload, measured honestly).
//!
//! Distinct keys and contents, N files of size S written with a commit every K writes,
//! then read back in write order and in random order, every read verified; over targets,
//! journal modes and compression modes; plus the zstd micro-benchmark on its own.
//! See docs/BENCH_BLOBS.md.

mod codec;
#[cfg(any(feature = "duckdb", feature = "duckdb-system"))]
mod duck;
mod guard;
pub(crate) mod isolate;
mod output;
mod runner;
mod store;
mod units;
mod workload;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::export::ExportManager;
use super::options::{ExportOptions, RunOptions};
use super::{signals, Isolation};
use crate::report::envinfo::EnvInfo;
use crate::report::stats::format_bytes;
use codec::{Codec, Compression};
use guard::RemoveOnDrop;
use runner::{Budget, PhaseResult};
use store::{Journal, Target};
use units::ByteSize;
use workload::{ContentKind, ReadOrder, Workload};

/// Default seed: any fixed value makes runs reproducible.
const DEFAULT_SEED: u64 = 0x0E2F_5B10_B5EE_D001;
/// SQLite refuses blobs over SQLITE_MAX_LENGTH (10^9 bytes by default).
const MAX_SIZE_BYTES: u64 = 1_000_000_000;
/// Default data planned per case when `--ops` is not given (see `default_ops`).
const DEFAULT_CASE_BYTES: u64 = 3_000_000_000;

/// Which parts of the benchmark run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Suite {
    /// Write and read files through each target.
    Storage,
    /// zstd compress/decompress alone, one-shot against reused contexts.
    Compressor,
}

/// `sqlite-uring bench blobs` options.
#[derive(Args, Debug, Clone)]
pub struct BlobsArgs {
    /// Blob sizes, with a unit (B, KB = 1000 B, MB, KiB, MiB).
    #[arg(long, value_delimiter = ',', default_value = "64B,300KB,2MB")]
    pub sizes: Vec<ByteSize>,

    /// Writes per commit (1 = every write is its own durable transaction).
    #[arg(long = "batch", value_delimiter = ',', default_value = "1,100,1000")]
    pub batches: Vec<u64>,

    /// Storage targets: memory, unix, io_uring, sync (this VFS on plain syscalls),
    /// duckdb, duckdb-memory (the last two need a build with `--features duckdb`). Our
    /// targets take URI parameters: `io_uring?uring_direct=on` (README lists them)
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "memory,unix,io_uring",
        value_parser = Target::parse
    )]
    pub targets: Vec<Target>,

    /// SQLite journal modes for the on-disk SQLite targets.
    #[arg(long = "journal", value_delimiter = ',', default_value = "delete,wal")]
    pub journals: Vec<Journal>,

    /// Compression of stored blobs: none, zstd (one-shot), zstd-reuse (reused contexts).
    #[arg(
        long = "compression",
        value_delimiter = ',',
        default_value = "none,zstd,zstd-reuse"
    )]
    pub compressions: Vec<Compression>,

    /// zstd compression level.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub zstd_level: i32,

    /// Operations per phase (files written, then read back). Default: per size,
    /// min(1,000,000, 3 GB ÷ size), e.g. 1,000,000 × 64B, 10,000 × 300KB, 1,500 × 2MB.
    #[arg(long)]
    pub ops: Option<u64>,

    /// Measured seconds per phase: a phase stops at --ops or at this, whichever first.
    #[arg(long, default_value_t = 2.0)]
    pub max_seconds: f64,

    /// Runs of every case (a fresh database each); 3 or more give σ and error bars.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// Discarded runs of every case before the measured ones (warms caches and files).
    #[arg(long, default_value_t = 0)]
    pub warmup: u32,

    /// Parts to run.
    #[arg(long, value_delimiter = ',', default_value = "storage,compressor")]
    pub suite: Vec<Suite>,

    /// Blob contents: text (compressible about 3-4×) or random (incompressible).
    #[arg(long, value_enum, default_value_t = ContentKind::Text)]
    pub content: ContentKind,

    /// Seed of keys, contents and the random read order.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    #[command(flatten)]
    pub run: RunOptions,

    #[command(flatten)]
    pub export: ExportOptions,
}

/// What the blobs of every case are made of and how they are compressed.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Data {
    pub seed: u64,
    pub content: ContentKind,
    pub zstd_level: i32,
}

impl BlobsArgs {
    pub fn data(&self) -> Data {
        Data {
            seed: self.seed,
            content: self.content,
            zstd_level: self.zstd_level,
        }
    }
}

/// Where a case reports its progress: the terminal's bar, or a worker's pipe.
pub trait Progress {
    fn phase(&mut self, label: &str, len: u64);
    fn at(&mut self, done: u64);
}

fn show_phase(bar: &ProgressBar, label: &str, len: u64) {
    bar.set_prefix(label.to_string());
    bar.set_length(len);
    bar.set_position(0);
}

impl Progress for ProgressBar {
    fn phase(&mut self, label: &str, len: u64) {
        show_phase(self, label, len);
    }

    fn at(&mut self, done: u64) {
        self.set_position(done);
    }
}

/// One storage case: everything but the phase.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StorageCase {
    pub target: Target,
    /// `None` for targets without a SQLite journal (memory, DuckDB).
    pub journal: Option<Journal>,
    pub compression: Compression,
    pub size: ByteSize,
    pub batch: u64,
    pub ops: u64,
}

impl StorageCase {
    fn label(&self) -> String {
        format!(
            "{} {} {} {}×{}",
            self.target.name(),
            self.journal.map_or("-", Journal::name),
            self.compression.name(),
            self.size,
            self.batch
        )
    }

    /// Upper bound of the bytes the case's database (and journal/WAL) can occupy.
    ///
    /// Per file: the blob (uncompressed: random content does not shrink), the key twice
    /// (table and PRIMARY KEY index) and ~64 B of record and page overhead; plus one
    /// batch again for the journal or the WAL, which holds a whole transaction before a
    /// checkpoint; plus 10% and 16 MB of slack.
    pub fn planned_bytes(&self) -> u64 {
        let per_file = self.size.bytes() + 2 * 32 + 64;
        let data = self.ops.saturating_mul(per_file);
        let journal = self.batch.min(self.ops).saturating_mul(per_file);
        let total = data.saturating_add(journal);
        total.saturating_add(total / 10).saturating_add(16 << 20)
    }
}

/// Operations per phase for a size when `--ops` is not given: EZFS's 1M for small files,
/// capped so that one case plans at most 3 GB (EZFS's 100K × 300KB would be 30 GB and,
/// in memory, more than this machine has).
pub fn default_ops(size: ByteSize) -> u64 {
    (DEFAULT_CASE_BYTES / size.bytes().max(1)).clamp(1, 1_000_000)
}

/// The validated plan of a run.
#[derive(Debug)]
pub struct Plan {
    pub storage: Vec<StorageCase>,
    /// (compression mode, size, ops) of the compressor micro-benchmark.
    pub compressor: Vec<(Compression, ByteSize, u64)>,
    pub max: Duration,
}

fn dedup<T: Ord + Clone>(items: &[T]) -> Vec<T> {
    // Keep the user's order, drop repeats: `--batch 1,1` must not run a case twice.
    let mut seen = BTreeSet::new();
    items
        .iter()
        .filter(|x| seen.insert((*x).clone()))
        .cloned()
        .collect()
}

impl Plan {
    /// Checks every option and expands the case matrix. Errors name the flag and the fix.
    pub fn from_args(args: &BlobsArgs) -> anyhow::Result<Plan> {
        if args.sizes.is_empty() {
            bail!("--sizes is empty: give at least one size, e.g. --sizes 64B");
        }
        for size in &args.sizes {
            if size.bytes() < workload::MIN_SIZE_BYTES || size.bytes() > MAX_SIZE_BYTES {
                bail!(
                    "--sizes {size}: sizes must be between {}B (room for a distinct header) \
                     and 1GB (SQLite's default maximum blob length)",
                    workload::MIN_SIZE_BYTES
                );
            }
        }
        if args.batches.contains(&0) {
            bail!("--batch 0: a commit needs at least one write; use e.g. --batch 1,100,1000");
        }
        if args.ops == Some(0) {
            bail!("--ops 0: give at least 1 operation per phase, or leave --ops out");
        }
        if !(args.max_seconds.is_finite() && args.max_seconds > 0.0 && args.max_seconds <= 86_400.0)
        {
            bail!(
                "--max-seconds {}: give a positive number of seconds up to 86400, e.g. 2",
                args.max_seconds
            );
        }
        let levels = zstd::compression_level_range();
        if !levels.contains(&args.zstd_level) {
            bail!(
                "--zstd-level {}: zstd accepts {} to {}",
                args.zstd_level,
                levels.start(),
                levels.end()
            );
        }
        let suites = dedup(&args.suite);
        if suites.is_empty() {
            bail!("--suite is empty: use storage, compressor or both");
        }
        let targets = dedup(&args.targets);
        let journals = dedup(&args.journals);
        let compressions = dedup(&args.compressions);
        let sizes = dedup(&args.sizes);
        let batches = dedup(&args.batches);

        let mut storage = Vec::new();
        if suites.contains(&Suite::Storage) {
            if targets.is_empty() || compressions.is_empty() || batches.is_empty() {
                bail!("--targets, --compression and --batch need at least one value each");
            }
            if journals.is_empty() && targets.iter().any(|t| t.has_journal()) {
                bail!("--journal is empty: use delete, wal or both");
            }
            // Targets innermost: unix and io_uring run the same case back to back, so a
            // drift of the machine over the run does not fall between them.
            for &compression in &compressions {
                for (j, &journal) in journals.iter().enumerate() {
                    for &size in &sizes {
                        for &batch in &batches {
                            for &target in &targets {
                                // Journal-less targets run once, not once per journal mode.
                                if !target.has_journal() && j > 0 {
                                    continue;
                                }
                                storage.push(StorageCase {
                                    target,
                                    journal: target.has_journal().then_some(journal),
                                    compression,
                                    size,
                                    batch,
                                    ops: args.ops.unwrap_or_else(|| default_ops(size)),
                                });
                            }
                        }
                    }
                }
            }
        }

        let mut compressor = Vec::new();
        if suites.contains(&Suite::Compressor) {
            for mode in [Compression::Zstd, Compression::ZstdReuse] {
                for &size in &sizes {
                    // The micro-benchmark is cheap per op: EZFS ran 5M; cap by time anyway.
                    compressor.push((mode, size, args.ops.unwrap_or(5_000_000)));
                }
            }
        }
        Ok(Plan {
            storage,
            compressor,
            max: Duration::from_secs_f64(args.max_seconds),
        })
    }

    /// Targets the storage cases use, in first-use order.
    fn targets(&self) -> Vec<Target> {
        dedup(&self.storage.iter().map(|c| c.target).collect::<Vec<_>>())
    }
}

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

/// One phase of one run, with the VFS's own I/O counters when it has them.
pub struct Measured {
    pub result: PhaseResult,
    pub io: Option<sqlite_uring::IoStats>,
    /// Database (+ journal/WAL) bytes at the end of the write phase.
    pub db_bytes: Option<u64>,
}

fn progress_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:>40} {bar:30} {pos}/{len} {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Runs the write and both read phases of one case once, in a fresh database that is
/// removed afterwards (also on error and on SIGINT/SIGTERM).
fn run_storage_case(
    case: &StorageCase,
    data: &Data,
    run_dir: &Path,
    max: Duration,
    progress: &mut dyn Progress,
) -> anyhow::Result<Vec<Measured>> {
    let path = run_dir.join(format!("blobs-{}.db", case.target.file_stem()));
    let files = RemoveOnDrop::new(store::database_files(case.target, &path));
    // Declared after `files`, so the connection closes before the files are removed.
    let mut store = store::open_store(case.target, case.journal.unwrap_or(Journal::Delete), &path)?;
    let mut codec = Codec::new(case.compression, data.zstd_level)?;
    let workload = Workload {
        seed: data.seed,
        size_bytes: case.size.bytes() as usize,
        content: data.content,
    };
    let budget = Budget { ops: case.ops, max };
    let stats_vfs = case.target.stats_vfs();
    let take_stats = || {
        stats_vfs.and_then(|name| {
            let stats = sqlite_uring::vfs_stats(name);
            sqlite_uring::reset_vfs_stats(name);
            stats
        })
    };

    let mut measured = Vec::new();
    progress.phase(&format!("{} write", case.label()), case.ops);
    crate::trace_file::mark(format_args!("blobs {} · write phase", case.label()));
    take_stats();
    let (write, checksums) = runner::write_phase(
        store.as_mut(),
        &mut codec,
        &workload,
        case.batch,
        budget,
        &mut |n| progress.at(n),
    )
    .with_context(|| format!("case {}: write phase", case.label()))?;
    measured.push(Measured {
        result: write,
        io: take_stats(),
        db_bytes: case.target.on_disk().then(|| files.size_bytes()),
    });
    store
        .settle()
        .with_context(|| format!("case {}: checkpoint after the write phase", case.label()))?;
    // The checkpoint's I/O belongs to neither phase.
    take_stats();
    for order in [ReadOrder::Sequential, ReadOrder::Random] {
        let phase_name = if order == ReadOrder::Sequential {
            "read-seq"
        } else {
            "read-random"
        };
        crate::trace_file::mark(format_args!("blobs {} · {phase_name} phase", case.label()));
        progress.phase(
            &format!("{} {phase_name}", case.label()),
            checksums.len().min(case.ops as usize) as u64,
        );
        let read = runner::read_phase(
            store.as_mut(),
            &mut codec,
            &workload,
            &checksums,
            order,
            budget,
            &mut |n| progress.at(n),
        )
        .with_context(|| format!("case {}: {phase_name} phase", case.label()))?;
        measured.push(Measured {
            result: read,
            io: take_stats(),
            db_bytes: None,
        });
    }
    drop(store);
    drop(files);
    Ok(measured)
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

/// `bench blobs` flags (without the subcommand words) parsed as the command line is,
/// for the tests of this module's parts.
#[cfg(test)]
pub(crate) fn parse_test_args<'a>(
    words: impl IntoIterator<Item = &'a str>,
) -> Result<BlobsArgs, clap::Error> {
    super::parse_flags(words)
}

#[cfg(test)]
mod tests {
    use super::*;

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
