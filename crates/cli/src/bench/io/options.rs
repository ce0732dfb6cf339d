//! Command-line options of `bench io`, parsed once into [`IoArgs`] and checked
//! into a [`Plan`] that the engine runs without re-reading flags.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, ValueEnum};

use crate::bench::common::options::{ExportOptions, PlaceOptions};
use crate::report::stats::format_bytes;

/// Largest accepted `--block-size`: bigger buffers stop being "an IO model"
/// and only measure memcpy, and T×E of them must fit in memory.
pub const MAX_BLOCK_SIZE_BYTES: u64 = 64 << 20;
/// Upper bound of the buffers the io_uring methods allocate (threads × entries ×
/// block size); above it the run would swap or fail to pin registered buffers.
pub const MAX_BUFFER_MEMORY_BYTES: u64 = 2 << 30;
/// O_DIRECT needs offsets, lengths and buffer addresses aligned to the device's
/// logical block; 4096 satisfies every common device.
pub const DIRECT_ALIGN_BYTES: u64 = 4096;

/// `sqlite-uring bench io`: write one file in fixed-size blocks through several
/// IO models and report how fast each was, honestly (fsync, O_DIRECT, verify); or
/// (`--wal`) a WAL commit stream; or (`--reads`) cold random reads by queue depth.
#[derive(Args, Debug, Clone)]
pub struct IoArgs {
    #[command(flatten)]
    pub place: PlaceOptions,
    /// Bytes written per run, with units: 64MiB, 1GiB, 500MB, 4096. With --reads: the
    /// size of the file the reads are drawn from.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    pub size: u64,
    /// Bytes per write call / ring entry, with units (4KiB, 1MiB); with --reads, bytes
    /// per read.
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    pub block_size: u64,
    /// Thread counts for the pwrite and io_uring methods, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Vec<u32>,
    /// Ring sizes (entries kept in flight per thread) for io_uring, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,128",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub entries: Vec<u32>,
    /// io_uring submission strategies: batch = submit E, wait for all E;
    /// refill = keep up to E in flight, sleep until one completes when full.
    #[arg(long, value_delimiter = ',', default_value = "batch,refill")]
    pub strategy: Vec<Strategy>,
    /// Methods to run, comma-separated (dd is skipped when not installed).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "dd,blocking,pwrite,io_uring"
    )]
    pub methods: Vec<MethodKind>,
    /// Open with O_DIRECT (bypass the page cache); buffers are 4096-aligned.
    #[arg(long)]
    pub direct: bool,
    /// none: no sync (measures the page cache); end: one fdatasync before the
    /// clock stops; each: O_DSYNC, every write is durable when it returns.
    #[arg(long, value_enum, default_value = "end")]
    pub durability: Durability,
    /// Rounds; each round runs every method once, in order (interleaved).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// io_uring: register the buffers (IORING_REGISTER_BUFFERS, WRITE_FIXED / READ_FIXED).
    #[arg(long)]
    pub register_buffers: bool,
    /// io_uring: register the file descriptor (IORING_REGISTER_FILES).
    #[arg(long)]
    pub register_files: bool,
    /// io_uring: kernel thread polls the submission queue (IORING_SETUP_SQPOLL);
    /// all rings of a run share one poller thread.
    #[arg(long)]
    pub sqpoll: bool,
    /// Reserve the file's blocks with fallocate(2) before the clock starts (as
    /// fio does by default), so writes fill allocated space instead of extending
    /// the file. On ext4 this decides whether O_DIRECT ring writes run in parallel.
    #[arg(long)]
    pub preallocate: bool,
    /// After every run, read the file back and check every byte. With --reads: compare
    /// every block read with the data written (inside the timed loop: for checking, not
    /// for measuring).
    #[arg(long)]
    pub verify: bool,
    /// Seed of the data generator (same seed, same file contents).
    #[arg(long, default_value_t = 0x5EED_1234)]
    pub seed: u64,
    /// Random reads instead of writes: write one file of --size once, then read
    /// --reads-per-run distinct --block-size blocks of it at random per run, by queue
    /// depth (--queue-depths), through --read-methods, from a cold page cache and with
    /// O_DIRECT (--read-cache) (docs/BENCH_IO.md, "Random reads").
    #[arg(long, conflicts_with_all = READ_CONFLICTS)]
    pub reads: bool,
    /// --reads: reads kept in flight, comma-separated; io_uring keeps N in one ring on
    /// one thread, pread runs N threads. The smallest is the baseline of the ratios.
    #[arg(long, value_delimiter = ',', default_value = "1,4,32,128", requires = "reads",
          value_parser = clap::value_parser!(u32).range(1..=MAX_QUEUE_DEPTH as i64))]
    pub queue_depths: Vec<u32>,
    /// --reads: how the reads are issued, comma-separated: io_uring (one thread, one
    /// ring, N reads in flight), pread (N threads, one blocking pread each).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "io_uring,pread",
        requires = "reads"
    )]
    pub read_methods: Vec<ReadMethod>,
    /// --reads: buffered (through a page cache emptied before every run) and/or direct
    /// (O_DIRECT), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "buffered,direct",
        requires = "reads"
    )]
    pub read_cache: Vec<ReadCache>,
    /// --reads: reads per run, each of a different block of the file.
    #[arg(long, default_value_t = 16384, requires = "reads",
          value_parser = clap::value_parser!(u32).range(1..=MAX_READS_PER_RUN as i64))]
    pub reads_per_run: u32,
    /// --reads: read this existing file instead of writing one (it is neither written nor
    /// removed; its page cache is still emptied before every run), e.g. the file fio reads.
    #[arg(long, value_name = "FILE", requires = "reads", conflicts_with_all = ["size", "verify"])]
    pub read_file: Option<PathBuf>,
    /// Simulate a WAL commit stream instead of writing one file: every commit appends
    /// --commit-frames frames (24-byte header + 4096-byte page, SQLite's layout) and makes
    /// them durable, through each of --wal-methods (docs/BENCH_IO.md, "WAL commits").
    #[arg(long, conflicts_with_all = WAL_CONFLICTS)]
    pub wal: bool,
    /// --wal: how a commit's frames are written and made durable, comma-separated; the
    /// first is the baseline of the ratios (default: all, `unix` first).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "unix,unix_fsync,coalesced,direct_fdatasync,direct_dsync,uring_dsync,uring_fdatasync",
        requires = "wal"
    )]
    pub wal_methods: Vec<WalMethod>,
    /// --wal: frames per commit (pages a transaction changed), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16", requires = "wal",
          value_parser = clap::value_parser!(u32).range(1..=MAX_COMMIT_FRAMES as i64))]
    pub commit_frames: Vec<u32>,
    /// --wal: commits per run (each run starts on a fresh WAL file).
    #[arg(long, default_value_t = 200, requires = "wal",
          value_parser = clap::value_parser!(u32).range(1..=MAX_COMMITS as i64))]
    pub commits: u32,
    /// --wal: where the frames land, comma-separated: reused = space already allocated
    /// and written (a WAL restarted after a checkpoint: every write is an overwrite),
    /// grows = a new, empty file (every commit extends it).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "reused",
        requires = "wal"
    )]
    pub wal_space: Vec<WalSpace>,
    #[command(flatten)]
    pub export: ExportOptions,
}

/// The options of the one-file write benchmark that mean nothing to `--wal`.
const WAL_CONFLICTS: [&str; 12] = [
    "size",
    "block_size",
    "threads",
    "entries",
    "strategy",
    "methods",
    "direct",
    "durability",
    "register_buffers",
    "register_files",
    "sqpoll",
    "preallocate",
];

/// The write-model options that mean nothing to `--reads`.
const READ_CONFLICTS: [&str; 8] = [
    "wal",
    "threads",
    "entries",
    "strategy",
    "methods",
    "direct",
    "durability",
    "preallocate",
];

/// Largest `--queue-depths`: pread runs this many threads.
pub const MAX_QUEUE_DEPTH: u32 = 1024;
/// Largest `--reads-per-run`: the offsets of a run are kept in memory (8 bytes each).
pub const MAX_READS_PER_RUN: u32 = 1 << 24;

/// How `--reads` issues its reads (`--read-methods`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadMethod {
    /// One thread, one ring: N reads in flight, a slot refilled as soon as its read completes.
    #[value(name = "io_uring", alias = "io-uring", alias = "uring")]
    IoUring,
    /// N threads, each a loop of blocking pread(2) on its own descriptor (fio's psync
    /// with numjobs=N).
    Pread,
}

impl ReadMethod {
    pub fn name(self) -> &'static str {
        match self {
            ReadMethod::IoUring => "io_uring",
            ReadMethod::Pread => "pread",
        }
    }
}

/// Whether `--reads` goes through the page cache (`--read-cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadCache {
    /// Through the page cache, emptied (POSIX_FADV_DONTNEED) before every run: cold reads.
    Buffered,
    /// O_DIRECT: from the device into the 4096-aligned buffer.
    Direct,
}

impl ReadCache {
    pub fn name(self) -> &'static str {
        match self {
            ReadCache::Buffered => "buffered",
            ReadCache::Direct => "direct",
        }
    }
}

/// Largest `--commit-frames`: 256 pages (1 MiB) per transaction already is a bulk load.
pub const MAX_COMMIT_FRAMES: u32 = 256;
/// Largest `--commits`: runs are meant to be short and many.
pub const MAX_COMMITS: u32 = 100_000;
/// Largest WAL file one run may write (commits × frames × frame size).
pub const MAX_WAL_BYTES: u64 = 1 << 30;

/// How a WAL commit's frames reach the file and become durable (`--wal-methods`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WalMethod {
    /// SQLite's `unix` VFS built with HAVE_FDATASYNC: buffered pwrite of each frame's
    /// header and page, then fdatasync.
    Unix,
    /// The same with fsync: the amalgamation's default (HAVE_FDATASYNC unset), which
    /// rusqlite's bundled SQLite uses.
    #[value(name = "unix_fsync", alias = "unix-fsync")]
    UnixFsync,
    /// One buffered pwrite of the whole commit, then fdatasync: what the io_uring VFS's
    /// write-behind makes of a WAL commit (the control that separates O_DIRECT's effect
    /// from merging the writes).
    Coalesced,
    /// O_DIRECT pwrite of the commit's 4 KiB-aligned blocks, then fdatasync.
    #[value(name = "direct_fdatasync", alias = "direct-fdatasync")]
    DirectFdatasync,
    /// O_DIRECT pwritev2(RWF_DSYNC) of the commit's blocks: durable when it returns.
    #[value(name = "direct_dsync", alias = "direct-dsync")]
    DirectDsync,
    /// The RWF_DSYNC write submitted through io_uring.
    #[value(name = "uring_dsync", alias = "uring-dsync")]
    UringDsync,
    /// The O_DIRECT write linked (IOSQE_IO_LINK) to an fdatasync in one io_uring submission.
    #[value(name = "uring_fdatasync", alias = "uring-fdatasync")]
    UringFdatasync,
}

impl WalMethod {
    pub fn name(self) -> &'static str {
        match self {
            WalMethod::Unix => "unix",
            WalMethod::UnixFsync => "unix_fsync",
            WalMethod::Coalesced => "coalesced",
            WalMethod::DirectFdatasync => "direct_fdatasync",
            WalMethod::DirectDsync => "direct_dsync",
            WalMethod::UringDsync => "uring_dsync",
            WalMethod::UringFdatasync => "uring_fdatasync",
        }
    }

    /// Writes with O_DIRECT in the aligned representation.
    pub fn direct(self) -> bool {
        !matches!(
            self,
            WalMethod::Unix | WalMethod::UnixFsync | WalMethod::Coalesced
        )
    }

    pub fn uses_ring(self) -> bool {
        matches!(self, WalMethod::UringDsync | WalMethod::UringFdatasync)
    }
}

/// Where a WAL run's frames land (`--wal-space`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WalSpace {
    /// Allocated and written before the clock starts: pure overwrites.
    Reused,
    /// A new empty file: every commit appends.
    Grows,
}

impl WalSpace {
    pub fn name(self) -> &'static str {
        match self {
            WalSpace::Reused => "reused",
            WalSpace::Grows => "grows",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Submit E writes, wait until all E complete, then refill (IO Playground's Go code).
    Batch,
    /// Keep up to E writes in flight; when full, sleep in the kernel until one completes.
    Refill,
}

impl Strategy {
    /// Buffers a ring of `entries` allocates with this strategy (reads use `refill`).
    ///
    /// `batch` keeps a second set: while one batch is in the device, the data of the
    /// next one is generated into the other set, so the time to fill E buffers is not
    /// spent with an idle device. The model is unchanged (E submitted together, all E
    /// awaited before the next E are submitted); fio, which reuses its buffers without
    /// refilling them, has no fill time to hide. `refill` has no free buffer while its
    /// queue is full, so a second set would never be used.
    pub fn buffers_per_ring(self, entries: u32) -> u32 {
        match self {
            Strategy::Batch => entries.saturating_mul(2),
            Strategy::Refill => entries,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    None,
    End,
    Each,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::None => "none",
            Durability::End => "end",
            Durability::Each => "each",
        }
    }

    /// What it does, for the header.
    pub fn explain(self) -> &'static str {
        match self {
            Durability::None => {
                "no sync: the clock stops with data possibly only in the page cache"
            }
            Durability::End => "one fdatasync before the clock stops",
            Durability::Each => "O_DSYNC: every write is durable when it completes",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MethodKind {
    Dd,
    Blocking,
    Pwrite,
    #[value(name = "io_uring", alias = "io-uring", alias = "uring")]
    IoUring,
}

/// One IO model with its parameters: a column of the results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Method {
    /// `dd if=/dev/zero`, IO Playground's control (writes zeros, not verifiable).
    Dd,
    /// One thread, `write(2)` loop at the file position.
    Blocking,
    /// `threads` threads, each `pwrite(2)` over its own range.
    Pwrite { threads: u32 },
    /// `threads` threads, each with its own ring of `entries`.
    IoUring {
        threads: u32,
        entries: u32,
        strategy: Strategy,
    },
}

/// io_uring options that apply to every io_uring method of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RingFlags {
    pub register_buffers: bool,
    pub register_files: bool,
    pub sqpoll: bool,
}

impl Method {
    /// IO Playground's naming (`10_goroutines_pwrite`) with threads instead of goroutines,
    /// so rows of both can sit in one DuckDB table.
    pub fn name(&self, flags: RingFlags) -> String {
        match *self {
            Method::Dd => "dd".to_string(),
            Method::Blocking => "blocking".to_string(),
            Method::Pwrite { threads } => format!("{threads}_threads_pwrite"),
            Method::IoUring {
                threads,
                entries,
                strategy,
            } => {
                let strategy = match strategy {
                    Strategy::Batch => "batch",
                    Strategy::Refill => "refill",
                };
                let mut name = format!("{threads}_threads_io_uring_{strategy}_{entries}_entries");
                if flags.register_buffers {
                    name.push_str("_regbuf");
                }
                if flags.register_files {
                    name.push_str("_regfile");
                }
                if flags.sqpoll {
                    name.push_str("_sqpoll");
                }
                name
            }
        }
    }

    pub fn threads(&self) -> u32 {
        match *self {
            Method::Dd | Method::Blocking => 1,
            Method::Pwrite { threads } | Method::IoUring { threads, .. } => threads,
        }
    }

    pub fn is_io_uring(&self) -> bool {
        matches!(self, Method::IoUring { .. })
    }
}

/// Everything a run needs, validated: no flag is looked at after this.
#[derive(Clone, Debug)]
pub struct Plan {
    pub dir: PathBuf,
    pub size_bytes: u64,
    pub block_size_bytes: u64,
    pub direct: bool,
    pub durability: Durability,
    pub rounds: u32,
    pub ring: RingFlags,
    pub preallocate: bool,
    pub verify: bool,
    pub seed: u64,
    /// Methods in the order each round runs them.
    pub methods: Vec<Method>,
    /// Test seam: fail the write at this offset as if the device returned EIO,
    /// to prove cleanup on error paths. Never set from the command line.
    pub inject_failure_at: Option<u64>,
}

impl Plan {
    /// Checks the combination of flags; errors name the flag and the remedy.
    /// `dd_available` decides whether a requested `dd` row is kept.
    pub fn from_args(args: &IoArgs, dd_available: bool) -> anyhow::Result<Plan> {
        if args.size == 0 {
            bail!("--size must be more than 0 bytes (e.g. --size 64MiB)");
        }
        if args.block_size == 0 {
            bail!("--block-size must be more than 0 bytes (e.g. --block-size 4KiB)");
        }
        if args.block_size > MAX_BLOCK_SIZE_BYTES {
            bail!(
                "--block-size {} is larger than the {} this benchmark allows; use e.g. --block-size 1MiB",
                format_bytes(args.block_size),
                format_bytes(MAX_BLOCK_SIZE_BYTES)
            );
        }
        if args.direct && !args.block_size.is_multiple_of(DIRECT_ALIGN_BYTES) {
            bail!(
                "--block-size {} is not a multiple of 4096, which --direct (O_DIRECT) requires; use --block-size 4KiB (or 8KiB, 64KiB…) or drop --direct",
                args.block_size
            );
        }
        if args.direct && !args.size.is_multiple_of(DIRECT_ALIGN_BYTES) {
            bail!(
                "--size {} is not a multiple of 4096, which --direct (O_DIRECT) requires for the last write; round --size to whole KiB×4 or drop --direct",
                args.size
            );
        }
        if args.threads.is_empty() {
            bail!("--threads needs at least one count, e.g. --threads 1,10");
        }
        if args.entries.is_empty() {
            bail!("--entries needs at least one ring size, e.g. --entries 1,128");
        }
        if args.strategy.is_empty() {
            bail!("--strategy needs batch, refill or both");
        }
        if args.methods.is_empty() {
            bail!("--methods needs at least one of dd,blocking,pwrite,io_uring");
        }
        if !args.place.dir.is_dir() {
            bail!(
                "--dir {} is not an existing directory; create it or point --dir at one",
                args.place.dir.display()
            );
        }
        let wants = |kind: MethodKind| args.methods.contains(&kind);
        let ring_options = args.register_buffers || args.register_files || args.sqpoll;
        if ring_options && !wants(MethodKind::IoUring) {
            bail!("--register-buffers/--register-files/--sqpoll only affect io_uring; add io_uring to --methods or drop them");
        }
        if wants(MethodKind::IoUring) {
            let max_threads = u64::from(*args.threads.iter().max().unwrap_or(&1));
            let max_entries = *args.entries.iter().max().unwrap_or(&1);
            let max_buffers = args
                .strategy
                .iter()
                .map(|&strategy| u64::from(strategy.buffers_per_ring(max_entries)))
                .max()
                .unwrap_or(u64::from(max_entries));
            let buffers_bytes = max_threads * max_buffers * args.block_size;
            if buffers_bytes > MAX_BUFFER_MEMORY_BYTES {
                let per_ring = if max_buffers > u64::from(max_entries) {
                    " (batch keeps two buffer sets per ring)"
                } else {
                    ""
                };
                bail!(
                    "--threads {max_threads} × --entries {max_entries} × --block-size {}{per_ring} needs {} of buffers (limit {}); lower one of them",
                    format_bytes(args.block_size),
                    format_bytes(buffers_bytes),
                    format_bytes(MAX_BUFFER_MEMORY_BYTES)
                );
            }
        }

        let mut methods = Vec::new();
        let mut push = |method: Method| {
            if !methods.contains(&method) {
                methods.push(method);
            }
        };
        if wants(MethodKind::Dd) && dd_available {
            push(Method::Dd);
        }
        if wants(MethodKind::Blocking) {
            push(Method::Blocking);
        }
        if wants(MethodKind::Pwrite) {
            for &threads in &args.threads {
                push(Method::Pwrite { threads });
            }
        }
        if wants(MethodKind::IoUring) {
            for &strategy in &args.strategy {
                for &entries in &args.entries {
                    // With one entry, batch and refill do the same thing
                    // (submit one, wait for it); run it once, as refill.
                    let strategy = if entries == 1 {
                        Strategy::Refill
                    } else {
                        strategy
                    };
                    for &threads in &args.threads {
                        push(Method::IoUring {
                            threads,
                            entries,
                            strategy,
                        });
                    }
                }
            }
        }
        if methods.is_empty() {
            bail!("--methods dd was the only method and dd is not installed; add blocking,pwrite or io_uring");
        }

        Ok(Plan {
            dir: args.place.dir.clone(),
            size_bytes: args.size,
            block_size_bytes: args.block_size,
            direct: args.direct,
            durability: args.durability,
            rounds: args.rounds,
            ring: RingFlags {
                register_buffers: args.register_buffers,
                register_files: args.register_files,
                sqpoll: args.sqpoll,
            },
            preallocate: args.preallocate,
            verify: args.verify,
            seed: args.seed,
            methods,
            inject_failure_at: None,
        })
    }

    pub fn uses_io_uring(&self) -> bool {
        self.methods.iter().any(Method::is_io_uring)
    }
}

/// Parses `4096`, `4K`, `4KiB`, `64MiB`, `1GiB`, `500MB`, `1.5GiB`: binary
/// prefixes for K/Ki, decimal for KB/MB/GB (as `dd` and `fio` read them).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let unit = unit.trim();
    if number.is_empty() {
        return Err(format!(
            "'{text}' has no number; write e.g. 64MiB, 1GiB or 4096"
        ));
    }
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{text}'; use B, KiB, MiB, GiB, TiB (×1024) or KB, MB, GB, TB (×1000)"
            ))
        }
    };
    let bytes = if number.contains('.') {
        let value: f64 = number
            .parse()
            .map_err(|_| format!("'{number}' in '{text}' is not a number"))?;
        let bytes = value * multiplier as f64;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(format!("'{text}' is too large"));
        }
        if bytes.fract() != 0.0 {
            return Err(format!("'{text}' is not a whole number of bytes"));
        }
        bytes as u64
    } else {
        let value: u64 = number
            .parse()
            .map_err(|_| format!("'{number}' in '{text}' is not a whole number or is too large"))?;
        value
            .checked_mul(multiplier)
            .ok_or_else(|| format!("'{text}' is too large"))?
    };
    Ok(bytes)
}
