//! What `bench blobs` runs, from its options: the flags, and the matrix of storage cases
//! and compressor runs they expand to, checked before anything runs.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};

use super::codec::Compression;
use super::store::{Journal, Target};
use super::units::ByteSize;
use super::workload::{self, ContentKind};
use crate::bench::common::options::{ExportOptions, RunOptions};

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
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=crate::bench::common::options::MAX_RUNS))]
    pub runs: u32,

    /// Discarded runs of every case before the measured ones (warms caches and files).
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=crate::bench::common::options::MAX_RUNS))]
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
    pub fn label(&self) -> String {
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

pub fn dedup<T: Ord + Clone>(items: &[T]) -> Vec<T> {
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
    pub fn targets(&self) -> Vec<Target> {
        dedup(&self.storage.iter().map(|c| c.target).collect::<Vec<_>>())
    }
}

/// `bench blobs` flags (without the subcommand words) parsed as the command line is,
/// for the tests of this module's parts.
#[cfg(test)]
pub(crate) fn parse_test_args<'a>(
    words: impl IntoIterator<Item = &'a str>,
) -> Result<BlobsArgs, clap::Error> {
    crate::bench::common::options::parse_flags(words)
}
