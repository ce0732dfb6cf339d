//! `bench io --reads`: random reads by queue depth, from a cold page cache or with
//! O_DIRECT, through io_uring (one thread, one ring, N reads in flight) and through N
//! threads of blocking `pread` (fio's `psync` with `numjobs=N`).
//!
//! The test file is written once (seeded data, fsynced) and read by every run. Before
//! each run its pages are dropped from the page cache with
//! `posix_fadvise(POSIX_FADV_DONTNEED)` and the pages still resident are counted
//! (`mincore`), so buffered reads are cold and the output says whether they were.
//! A run reads `--reads-per-run` distinct blocks at random (a seeded sample of the
//! file's blocks in random order; every case of a round reads the same offsets), and
//! buffered descriptors get `POSIX_FADV_RANDOM`, as fio gives them for random I/O, so
//! the kernel reads no neighbouring pages ahead that a later read would then find cached.
//!
//! See docs/BENCH_IO.md ("Random reads").

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};

use super::buffer::AlignedBuf;
use super::cleanup::TestFile;
use super::engine::{self, StartGate};
use super::options::{
    IoArgs, ReadCache, ReadMethod, RingFlags, Strategy, DIRECT_ALIGN_BYTES, MAX_BLOCK_SIZE_BYTES,
    MAX_BUFFER_MEMORY_BYTES,
};
use super::pattern;
use super::ring::{self, ReadTally, RingFile, RingJob, SqpollAnchor};
use crate::bench::common::pagecache::{self, Failed};
use crate::bench::common::rng::{self, SplitMix64};
use crate::report::stats::format_bytes;

/// Bytes written per call while the test file is made (outside any clock).
const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Page size `mincore` reports residency in.
const PAGE_BYTES: u64 = 4096;

/// One column of the results: how the reads are issued, through which cache, how many
/// at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ReadCase {
    pub method: ReadMethod,
    pub cache: ReadCache,
    pub depth: u32,
    /// The run's io_uring options (default for `pread`): they are part of the name.
    #[serde(skip)]
    pub ring: RingFlags,
}

impl ReadCase {
    /// `randread_io_uring_qd32_buffered`: unique per case, one token (CSV, DuckDB);
    /// io_uring cases end in `_regbuf`, `_regfile`, `_sqpoll` as the write models do.
    pub fn name(&self) -> String {
        let mut name = format!(
            "randread_{}_qd{}_{}",
            self.method.name(),
            self.depth,
            self.cache.name()
        );
        if self.ring.register_buffers {
            name.push_str("_regbuf");
        }
        if self.ring.register_files {
            name.push_str("_regfile");
        }
        if self.ring.sqpoll {
            name.push_str("_sqpoll");
        }
        name
    }

    /// Threads the case runs: one ring, or one pread thread per read in flight.
    pub fn threads(&self) -> u32 {
        match self.method {
            ReadMethod::IoUring => 1,
            ReadMethod::Pread => self.depth,
        }
    }
}

/// A checked `--reads` invocation: no flag is looked at after this.
#[derive(Clone, Debug)]
pub struct ReadPlan {
    pub dir: PathBuf,
    /// `--read-file`: read this file as it is; `None`: write a test file in `dir`.
    pub existing: Option<PathBuf>,
    /// Bytes of the file the reads are drawn from.
    pub size_bytes: u64,
    pub block_size_bytes: u64,
    pub reads_per_run: u32,
    pub depths: Vec<u32>,
    pub methods: Vec<ReadMethod>,
    pub caches: Vec<ReadCache>,
    /// Every case, in the order odd rounds run them (even rounds run them backwards).
    pub cases: Vec<ReadCase>,
    pub rounds: u32,
    pub seed: u64,
    pub verify: bool,
    pub ring: RingFlags,
    /// Test seam: fail the read of this offset as if the device returned EIO, to prove
    /// the test file is removed on error paths. Never set from the command line.
    pub inject_failure_at: Option<u64>,
}

impl ReadPlan {
    /// Checks the `--reads` options; errors name the flag and the remedy.
    pub fn from_args(args: &IoArgs) -> anyhow::Result<ReadPlan> {
        if !args.reads {
            bail!("internal error: a read plan without --reads");
        }
        let depths = dedup(&args.queue_depths);
        let methods = dedup(&args.read_methods);
        let caches = dedup(&args.read_cache);
        if depths.is_empty() {
            bail!("--queue-depths needs at least one depth, e.g. --queue-depths 1,4,32,128");
        }
        if methods.is_empty() {
            bail!("--read-methods needs io_uring, pread or both");
        }
        if caches.is_empty() {
            bail!("--read-cache needs buffered, direct or both");
        }
        if !args.place.dir.is_dir() {
            bail!(
                "--dir {} is not an existing directory; create it or point --dir at one",
                args.place.dir.display()
            );
        }
        let block = args.block_size;
        if block == 0 {
            bail!("--block-size must be more than 0 bytes (e.g. --block-size 4KiB)");
        }
        if block > MAX_BLOCK_SIZE_BYTES {
            bail!(
                "--block-size {} is larger than the {} this benchmark allows; use e.g. --block-size 4KiB",
                format_bytes(block),
                format_bytes(MAX_BLOCK_SIZE_BYTES)
            );
        }
        let direct = caches.contains(&ReadCache::Direct);
        if direct && !block.is_multiple_of(DIRECT_ALIGN_BYTES) {
            bail!(
                "--block-size {block} is not a multiple of 4096, which --read-cache direct (O_DIRECT) requires; use --block-size 4KiB or --read-cache buffered"
            );
        }
        let size_bytes = match &args.read_file {
            Some(path) => {
                let metadata = std::fs::metadata(path).with_context(|| {
                    format!(
                        "--read-file {}: cannot read its size; name an existing file",
                        path.display()
                    )
                })?;
                if !metadata.is_file() {
                    bail!(
                        "--read-file {} is not a regular file; name a file (e.g. the one fio read)",
                        path.display()
                    );
                }
                metadata.len()
            }
            None => args.size,
        };
        let blocks = size_bytes / block;
        let reads = u64::from(args.reads_per_run);
        if reads > blocks {
            let (flag, remedy) = if args.read_file.is_some() {
                ("--read-file", "name a larger file")
            } else {
                ("--size", "raise --size")
            };
            bail!(
                "--reads-per-run {reads} needs {reads} distinct blocks, but {flag} gives a {} file of {blocks} blocks of --block-size {block}; {remedy} or lower --reads-per-run",
                format_bytes(size_bytes)
            );
        }
        let max_depth = *depths.iter().max().unwrap_or(&1);
        if reads < u64::from(max_depth) {
            bail!(
                "--reads-per-run {reads} is fewer than --queue-depths {max_depth}: some of the {max_depth} reads in flight would never get one; raise --reads-per-run"
            );
        }
        let ring = RingFlags {
            register_buffers: args.register_buffers,
            register_files: args.register_files,
            sqpoll: args.sqpoll,
        };
        if ring != RingFlags::default() && !methods.contains(&ReadMethod::IoUring) {
            bail!("--register-buffers/--register-files/--sqpoll only affect io_uring; add io_uring to --read-methods or drop them");
        }
        // A ring has one buffer per read in flight, pread one per thread; --verify
        // adds a buffer of expected bytes per thread.
        let buffers = u64::from(max_depth) + u64::from(args.verify) * u64::from(max_depth);
        let buffer_bytes = buffers * block;
        if buffer_bytes > MAX_BUFFER_MEMORY_BYTES {
            bail!(
                "--queue-depths {max_depth} × --block-size {} needs {} of buffers (limit {}); lower one of them",
                format_bytes(block),
                format_bytes(buffer_bytes),
                format_bytes(MAX_BUFFER_MEMORY_BYTES)
            );
        }
        let mut cases = Vec::new();
        for &cache in &caches {
            for &method in &methods {
                for &depth in &depths {
                    cases.push(ReadCase {
                        method,
                        cache,
                        depth,
                        ring: match method {
                            ReadMethod::IoUring => ring,
                            ReadMethod::Pread => RingFlags::default(),
                        },
                    });
                }
            }
        }
        Ok(ReadPlan {
            dir: args.place.dir.clone(),
            existing: args.read_file.clone(),
            size_bytes,
            block_size_bytes: block,
            reads_per_run: args.reads_per_run,
            depths,
            methods,
            caches,
            cases,
            rounds: args.rounds,
            seed: args.seed,
            verify: args.verify,
            ring,
            inject_failure_at: None,
        })
    }

    /// The depth every case's ratio is taken against (QD 1 unless left out).
    pub fn base_depth(&self) -> u32 {
        self.depths.iter().copied().min().unwrap_or(1)
    }

    /// Whole blocks of the file: the reads are drawn from these.
    pub fn blocks(&self) -> u64 {
        self.size_bytes / self.block_size_bytes
    }

    pub fn uses_ring(&self) -> bool {
        self.methods.contains(&ReadMethod::IoUring)
    }

    /// The cases in the order round `round` (1-based) runs them: forwards in odd
    /// rounds, backwards in even ones, so no case always runs right after another.
    pub fn round_order(&self, round: u32) -> Vec<ReadCase> {
        let mut cases = self.cases.clone();
        if round.is_multiple_of(2) {
            cases.reverse();
        }
        cases
    }

    /// The offsets every case of round `round` reads.
    pub fn round_offsets(&self, round: u32) -> Vec<u64> {
        let seed = rng::mix(self.seed ^ u64::from(round).wrapping_mul(rng::GOLDEN_GAMMA));
        random_offsets(
            seed,
            self.blocks(),
            self.reads_per_run as usize,
            self.block_size_bytes,
        )
    }
}

fn dedup<T: PartialEq + Copy>(values: &[T]) -> Vec<T> {
    let mut unique = Vec::with_capacity(values.len());
    for &value in values {
        if !unique.contains(&value) {
            unique.push(value);
        }
    }
    unique
}

/// `count` distinct offsets of whole blocks among the first `blocks` blocks, in random
/// order: Floyd's sampling (every subset equally likely, memory for `count` values only,
/// however large the file), then a Fisher–Yates shuffle, from a SplitMix64 stream of
/// `seed`. `count` is at most `blocks`.
pub fn random_offsets(seed: u64, blocks: u64, count: usize, block_size_bytes: u64) -> Vec<u64> {
    let count = count.min(usize::try_from(blocks).unwrap_or(usize::MAX));
    let mut rng = SplitMix64::new(seed);
    let mut chosen: HashSet<u64> = HashSet::with_capacity(count);
    let mut picks: Vec<u64> = Vec::with_capacity(count);
    for j in blocks - count as u64..blocks {
        let pick = rng.below(j + 1);
        // j was out of reach of every earlier draw, so it is always new.
        let pick = if chosen.contains(&pick) { j } else { pick };
        chosen.insert(pick);
        picks.push(pick);
    }
    // Floyd's order is not uniform (late picks favour large blocks): shuffle.
    for i in (1..picks.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        picks.swap(i, j);
    }
    for pick in &mut picks {
        *pick *= block_size_bytes;
    }
    picks
}

/// Thread `index` of `threads`'s share of `offsets`: contiguous, as even as possible,
/// together every offset exactly once.
pub fn share(offsets: &[u64], index: usize, threads: usize) -> &[u64] {
    let threads = threads.max(1);
    let n = offsets.len();
    &offsets[n * index / threads..n * (index + 1) / threads]
}

/// Opens `path` for reading, with O_DIRECT for `ReadCache::Direct`.
fn open_for_reading(path: &Path, cache: ReadCache, flag: &str) -> anyhow::Result<File> {
    let mut flags = libc::O_RDONLY | libc::O_CLOEXEC;
    if cache == ReadCache::Direct {
        flags |= libc::O_DIRECT;
    }
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| anyhow!("{flag} {} contains a NUL byte", path.display()))?;
    // SAFETY: c_path is NUL-terminated and outlives the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
    if fd < 0 {
        let error = io::Error::last_os_error();
        if cache == ReadCache::Direct && error.raw_os_error() == Some(libc::EINVAL) {
            bail!(
                "--read-cache direct: the filesystem of {} does not support O_DIRECT (EINVAL on open; e.g. tmpfs before Linux 6.6); use --read-cache buffered or a file on a disk filesystem ({flag})",
                path.display()
            );
        }
        return Err(error).with_context(|| {
            format!(
                "cannot open {} for reading; raise the open-file limit (ulimit -n) if many pread threads ran out of descriptors",
                path.display()
            )
        });
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    if cache == ReadCache::Buffered {
        // fio's fadvise_hint for random I/O: no read-ahead of neighbouring pages.
        // SAFETY: plain syscall on an open descriptor; no memory is passed.
        let error = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM) };
        if error != 0 {
            return Err(io::Error::from_raw_os_error(error))
                .context("posix_fadvise(POSIX_FADV_RANDOM) failed");
        }
    }
    Ok(file)
}

/// Creates the test file and writes `size_bytes` of the seeded pattern, then fsyncs it.
fn write_test_file(path: &Path, plan: &ReadPlan) -> anyhow::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("cannot create the test file {}", path.display()))?;
    let mut chunk = vec![0u8; WRITE_CHUNK_BYTES];
    let mut at = 0u64;
    while at < plan.size_bytes {
        let len = (plan.size_bytes - at).min(WRITE_CHUNK_BYTES as u64) as usize;
        let data = &mut chunk[..len];
        pattern::fill(data, plan.seed, at);
        engine::write_all(file.as_raw_fd(), data, at, engine::WriteCall::Pwrite)
            .with_context(|| format!("writing the test file {} at {at}", path.display()))?;
        at += len as u64;
    }
    file.sync_all()
        .with_context(|| format!("fsync of the test file {}", path.display()))?;
    Ok(file)
}

/// Checks before anything is written: io_uring, O_DIRECT. Each error names the flag and
/// the remedy.
pub fn preflight(plan: &ReadPlan) -> anyhow::Result<()> {
    if plan.uses_ring() {
        let max_depth = plan.depths.iter().copied().max().unwrap_or(1);
        ring::check_available(max_depth, plan.ring).map_err(|error| {
            anyhow!("{error} (for --reads: or leave io_uring out with --read-methods pread)")
        })?;
    }
    if plan.caches.contains(&ReadCache::Direct) {
        match &plan.existing {
            Some(path) => drop(open_for_reading(path, ReadCache::Direct, "--read-file")?),
            None => {
                let probe = TestFile::new(&plan.dir)?;
                drop(
                    std::fs::File::create(probe.path())
                        .with_context(|| format!("cannot create {}", probe.path().display()))?,
                );
                drop(open_for_reading(probe.path(), ReadCache::Direct, "--dir")?);
            }
        }
    }
    Ok(())
}

/// The measurement of one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOutcome {
    pub elapsed_s: f64,
    /// Blocks read in full, and bytes read: exactly `reads_per_run` and that many blocks.
    pub reads: u64,
    pub bytes: u64,
    /// Most `iou-wrk-*` threads (reads the ring handed to io-wq) seen at once.
    pub io_wq_workers_max: usize,
    /// Pages of the file in the page cache when the clock started (after eviction).
    pub resident_pages: u64,
    /// Pages of the file.
    pub file_pages: u64,
    /// `Some(true)` when `--verify` compared every block read with the file's data.
    pub verified: Option<bool>,
}

/// What the run loop needs besides the plan: how to empty the page cache.
pub type Evict<'a> = &'a mut dyn FnMut(&File) -> io::Result<()>;

/// Writes the test file once (or opens `--read-file`), then runs every round of every
/// case, emptying the file's page cache with `evict` before each run and calling
/// `on_run` after it. A written test file is removed at the end and on every error path.
pub fn execute(
    plan: &ReadPlan,
    evict: Evict,
    on_run: &mut dyn FnMut(u32, ReadCase, &ReadOutcome),
) -> anyhow::Result<()> {
    let guard;
    let (path, file) = match &plan.existing {
        Some(path) => {
            let file = File::open(path)
                .with_context(|| format!("--read-file {}: cannot open it", path.display()))?;
            (path.as_path(), file)
        }
        None => {
            guard = TestFile::new(&plan.dir)?;
            let file = write_test_file(guard.path(), plan)?;
            (guard.path(), file)
        }
    };
    for round in 1..=plan.rounds {
        let offsets = plan.round_offsets(round);
        for case in plan.round_order(round) {
            let outcome = run_once(plan, case, path, &file, &offsets, &mut *evict)?;
            on_run(round, case, &outcome);
        }
    }
    Ok(())
}

/// One run of `case`: descriptors opened, the page cache emptied and counted, then the
/// reads of `offsets` timed.
pub fn run_once(
    plan: &ReadPlan,
    case: ReadCase,
    path: &Path,
    file: &File,
    offsets: &[u64],
    evict: Evict,
) -> anyhow::Result<ReadOutcome> {
    let name = case.name();
    let threads = case.threads();
    let flag = if plan.existing.is_some() {
        "--read-file"
    } else {
        "--dir"
    };
    // One descriptor per thread, as each fio job opens the file itself.
    let files = (0..threads)
        .map(|_| open_for_reading(path, case.cache, flag))
        .collect::<anyhow::Result<Vec<File>>>()
        .with_context(|| format!("{name}: opening {threads} descriptor(s)"))?;
    evict(file).with_context(|| {
        format!(
            "{name}: posix_fadvise(POSIX_FADV_DONTNEED) on {} failed",
            path.display()
        )
    })?;
    let size_bytes = usize::try_from(plan.size_bytes)
        .with_context(|| format!("{name}: {} is too large to map", path.display()))?;
    let resident = pagecache::resident_pages(file, size_bytes)
        .map_err(Failed::into_error)
        .with_context(|| format!("{name}: mincore of {} failed", path.display()))?;
    let anchor = if case.method == ReadMethod::IoUring {
        SqpollAnchor::new(case.ring)?
    } else {
        None
    };
    let attach_to = anchor.as_ref().map(SqpollAnchor::fd);
    let block = plan.block_size_bytes as usize;
    let timed = engine::run_timed(threads, &name, "--queue-depths", |index, gate| {
        let part = share(offsets, index, threads as usize);
        let fd = files[index].as_raw_fd();
        read_worker(plan, case, &name, fd, part, block, attach_to, gate)
    })?;
    let tally = timed
        .results
        .iter()
        .fold(ReadTally::default(), |sum, t| ReadTally {
            reads: sum.reads + t.reads,
            bytes: sum.bytes + t.bytes,
        });
    let expected = offsets.len() as u64;
    if tally.reads != expected || tally.bytes != expected * plan.block_size_bytes {
        bail!(
            "internal error: {name} read {} blocks / {} bytes, expected {expected} / {}",
            tally.reads,
            tally.bytes,
            expected * plan.block_size_bytes
        );
    }
    Ok(ReadOutcome {
        elapsed_s: timed.elapsed.as_secs_f64().max(1e-9),
        reads: tally.reads,
        bytes: tally.bytes,
        io_wq_workers_max: timed.peak.io_wq_workers,
        resident_pages: resident,
        file_pages: plan.size_bytes.div_ceil(PAGE_BYTES),
        verified: plan.verify.then_some(true),
    })
}

/// Compares each block read with the seeded data the test file holds (`--verify`).
struct Checker {
    seed: u64,
    expected: Vec<u8>,
}

impl Checker {
    fn check(&mut self, offset: u64, data: &[u8]) -> anyhow::Result<()> {
        let expected = &mut self.expected[..data.len()];
        pattern::fill(expected, self.seed, offset);
        if let Some(at) = data.iter().zip(expected.iter()).position(|(a, b)| a != b) {
            bail!(
                "--verify: byte {} of the block read at offset {offset} is {:#04x}, expected {:#04x}: the read returned the wrong data",
                at,
                data[at],
                expected[at]
            );
        }
        Ok(())
    }
}

/// Sets up this thread's ring or buffer (and checker), waits at the start line, reads
/// its share of the offsets. Returns when it finished and what it read.
#[allow(clippy::too_many_arguments)]
fn read_worker(
    plan: &ReadPlan,
    case: ReadCase,
    name: &str,
    fd: RawFd,
    offsets: &[u64],
    block: usize,
    attach_to: Option<RawFd>,
    gate: &mut StartGate,
) -> anyhow::Result<(Instant, ReadTally)> {
    let mut checker = plan.verify.then(|| Checker {
        seed: plan.seed,
        expected: vec![0u8; block],
    });
    let mut check = |offset: u64, data: &[u8]| match checker.as_mut() {
        Some(checker) => checker.check(offset, data),
        None => Ok(()),
    };
    match case.method {
        ReadMethod::IoUring => {
            let mut ring = RingFile::new(
                fd,
                case.depth,
                Strategy::Refill,
                block,
                case.ring,
                attach_to,
            )?;
            let job = RingJob {
                method_name: name,
                strategy: Strategy::Refill,
                seed: plan.seed,
                inject_failure_at: plan.inject_failure_at,
            };
            gate.pass()?;
            let tally = ring.read_offsets(offsets, block, &job, &mut check)?;
            Ok((Instant::now(), tally))
        }
        ReadMethod::Pread => {
            let mut buf = AlignedBuf::new(block)?;
            let mut tally = ReadTally::default();
            gate.pass()?;
            for &offset in offsets {
                if plan.inject_failure_at == Some(offset) {
                    bail!("{name} at offset {offset}: injected failure (EIO)");
                }
                let data = &mut buf.as_mut_slice()[..block];
                engine::read_exact_at(fd, data, offset)
                    .with_context(|| format!("{name} at offset {offset}"))?;
                tally.reads += 1;
                tally.bytes += block as u64;
                check(offset, data)?;
            }
            Ok((Instant::now(), tally))
        }
    }
}
