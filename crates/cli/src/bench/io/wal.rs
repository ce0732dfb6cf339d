//! `bench io --wal`: a WAL commit stream, made durable in several ways.
//!
//! Every commit appends K frames in SQLite's WAL layout (a 32-byte WAL header, then
//! frames of a 24-byte frame header + a 4096-byte page, so frame `f` starts at byte
//! `32 + 4120·f`) and makes them durable before the next commit starts:
//!
//! * `unix` / `unix_fsync`: what SQLite's `unix` VFS does (wal.c `walWriteOneFrame`:
//!   one write for the header and one for the page, through the page cache;
//!   os_unix.c `unixSync` → `full_fsync`: `fdatasync` when built with HAVE_FDATASYNC,
//!   `fsync` otherwise).
//! * `coalesced`: the commit's frames as one buffered write, then fdatasync (what this
//!   project's VFS makes of a WAL commit with write-behind).
//! * the O_DIRECT methods write the same bytes at the same offsets, but O_DIRECT needs
//!   4 KiB-aligned offsets and lengths, so a commit's range `[s, e)` is widened to
//!   `[⌊s⌋₄ₖ, ⌈e⌉₄ₖ)`: the head comes from a copy of the block the previous commit
//!   ended in (the same bytes are written again), the tail after `e` is zeros that the
//!   next commit overwrites. The file keeps SQLite's format byte for byte; only the
//!   file's size may end on a 4 KiB boundary past the last frame, which a WAL reader
//!   ignores (it stops at the first frame whose checksum does not follow).
//!
//! See docs/BENCH_IO.md ("WAL commits") for why each method is as durable as `unix`.

use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use io_uring::{opcode, squeue, types, IoUring};

use super::buffer::AlignedBuf;
use super::cleanup::TestFile;
use super::engine;
use super::options::{IoArgs, RingFlags, WalMethod, WalSpace, DIRECT_ALIGN_BYTES, MAX_WAL_BYTES};
use super::pattern;
use super::ring;

/// SQLite's WAL header.
pub const WAL_HEADER_BYTES: u64 = 32;
/// SQLite's frame header (page number, commit size, salts, checksums).
pub const FRAME_HEADER_BYTES: u64 = 24;
/// Page size of the simulated database (SQLite's default).
pub const PAGE_BYTES: u64 = 4096;
/// One frame: header + page.
pub const FRAME_BYTES: u64 = FRAME_HEADER_BYTES + PAGE_BYTES;
/// Bytes written per call while the file is prepared (outside the clock).
const PREPARE_CHUNK_BYTES: u64 = 1 << 20;
/// Paired comparisons need this many rounds for a 95 % interval (sign test).
pub const MIN_PAIRED_ROUNDS: u32 = 6;
/// A ring operation that keeps failing with EINTR/EAGAIN this often is reported.
const MAX_RETRIES: u32 = 1000;

/// One column of the results: a method, a commit size and a kind of space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WalCase {
    pub method: WalMethod,
    pub frames: u32,
    pub space: WalSpace,
}

impl WalCase {
    /// `wal_unix_4_frames_reused`: unique per case, one token (CSV, DuckDB).
    pub fn name(&self) -> String {
        format!(
            "wal_{}_{}_frames_{}",
            self.method.name(),
            self.frames,
            self.space.name()
        )
    }

    /// Bytes of frames one run appends.
    pub fn frame_bytes(&self, commits: u32) -> u64 {
        u64::from(commits) * u64::from(self.frames) * FRAME_BYTES
    }
}

/// A checked `--wal` invocation: no flag is looked at after this.
#[derive(Clone, Debug)]
pub struct WalPlan {
    pub dir: PathBuf,
    pub rounds: u32,
    pub seed: u64,
    pub verify: bool,
    pub commits: u32,
    /// The first is the baseline.
    pub methods: Vec<WalMethod>,
    pub frames: Vec<u32>,
    pub spaces: Vec<WalSpace>,
    /// Every case, in the order odd rounds run them (even rounds run them backwards).
    pub cases: Vec<WalCase>,
    /// Test seam: fail this commit (0-based) as if the device returned EIO, to prove
    /// the test file is removed on error paths. Never set from the command line.
    pub inject_failure_at_commit: Option<u32>,
}

impl WalPlan {
    /// Checks the `--wal` options; errors name the flag and the remedy.
    pub fn from_args(args: &IoArgs) -> anyhow::Result<WalPlan> {
        if !args.wal {
            bail!("internal error: a WAL plan without --wal");
        }
        let mut methods: Vec<WalMethod> = Vec::new();
        for &method in &args.wal_methods {
            if !methods.contains(&method) {
                methods.push(method);
            }
        }
        let mut frames: Vec<u32> = Vec::new();
        for &count in &args.commit_frames {
            if !frames.contains(&count) {
                frames.push(count);
            }
        }
        let mut spaces: Vec<WalSpace> = Vec::new();
        for &space in &args.wal_space {
            if !spaces.contains(&space) {
                spaces.push(space);
            }
        }
        if methods.is_empty() {
            bail!("--wal-methods needs at least one method, e.g. --wal-methods unix,direct_dsync");
        }
        if frames.is_empty() {
            bail!("--commit-frames needs at least one count, e.g. --commit-frames 1,16");
        }
        if spaces.is_empty() {
            bail!("--wal-space needs reused, grows or both");
        }
        if !args.place.dir.is_dir() {
            bail!(
                "--dir {} is not an existing directory; create it or point --dir at one",
                args.place.dir.display()
            );
        }
        let largest = u64::from(*frames.iter().max().unwrap_or(&1));
        let wal_bytes = WAL_HEADER_BYTES + u64::from(args.commits) * largest * FRAME_BYTES;
        if wal_bytes > MAX_WAL_BYTES {
            bail!(
                "--commits {} × --commit-frames {largest} makes a {}-byte WAL, more than the {} this benchmark allows; lower --commits",
                args.commits,
                wal_bytes,
                MAX_WAL_BYTES
            );
        }
        let mut cases = Vec::new();
        for &space in &spaces {
            for &count in &frames {
                for &method in &methods {
                    cases.push(WalCase {
                        method,
                        frames: count,
                        space,
                    });
                }
            }
        }
        Ok(WalPlan {
            dir: args.place.dir.clone(),
            rounds: args.rounds,
            seed: args.seed,
            verify: args.verify,
            commits: args.commits,
            methods,
            frames,
            spaces,
            cases,
            inject_failure_at_commit: None,
        })
    }

    pub fn baseline(&self) -> WalMethod {
        self.methods[0]
    }

    pub fn uses_ring(&self) -> bool {
        self.methods.iter().any(|m| m.uses_ring())
    }

    pub fn uses_direct(&self) -> bool {
        self.methods.iter().any(|m| m.direct())
    }

    /// The cases in the order round `round` (1-based) runs them: forwards in odd
    /// rounds, backwards in even ones, so no method always runs right after another.
    pub fn round_order(&self, round: u32) -> Vec<WalCase> {
        let mut cases = self.cases.clone();
        if round.is_multiple_of(2) {
            cases.reverse();
        }
        cases
    }
}

/// The measurement of one run.
#[derive(Clone, Debug, Default)]
pub struct WalOutcome {
    pub elapsed_s: f64,
    /// Each commit's time from its first write to durable, in seconds.
    pub commit_s: Vec<f64>,
    /// io-wq workers (`iou-wrk`) of the run's own thread when its last commit finished
    /// (ring methods): 0 when the ring completed every write inline.
    pub io_wq_workers: usize,
    /// `Some(true)` when `--verify` read back every byte correctly.
    pub verified: Option<bool>,
}

/// Runs every round of every case, calling `on_record` after each run. The test file
/// is removed after every run and on every error path.
pub fn execute(
    plan: &WalPlan,
    on_run: &mut dyn FnMut(u32, WalCase, &WalOutcome),
) -> anyhow::Result<()> {
    let test_file = TestFile::new(&plan.dir)?;
    for round in 1..=plan.rounds {
        for case in plan.round_order(round) {
            let outcome = run_once(plan, case, &test_file);
            test_file.remove().with_context(|| {
                format!("cannot remove the test file {}", test_file.path().display())
            })?;
            let outcome = outcome?;
            engine::settle(&plan.dir);
            on_run(round, case, &outcome);
        }
    }
    Ok(())
}

/// Checks before anything is measured: O_DIRECT and RWF_DSYNC on this filesystem,
/// io_uring. Each error names the flag and the remedy.
pub fn preflight(plan: &WalPlan) -> anyhow::Result<()> {
    if plan.uses_ring() {
        ring::check_available(4, RingFlags::default())?;
    }
    if plan.uses_direct() {
        let probe = TestFile::new(&plan.dir)?;
        let file = open_wal(probe.path(), true, &plan.dir)?;
        let mut block = AlignedBuf::new(DIRECT_ALIGN_BYTES as usize)?;
        let data = &mut block.as_mut_slice()[..DIRECT_ALIGN_BYTES as usize];
        pattern::fill(data, plan.seed, 0);
        if plan.methods.contains(&WalMethod::DirectDsync)
            || plan.methods.contains(&WalMethod::UringDsync)
        {
            pwritev2_all(file.as_raw_fd(), data, 0, libc::RWF_DSYNC).map_err(|error| {
                anyhow!(
                    "--wal-methods: an O_DIRECT pwritev2(RWF_DSYNC) failed in --dir {}: {error}; leave direct_dsync and uring_dsync out of --wal-methods",
                    plan.dir.display()
                )
            })?;
        } else {
            write_all_at(file.as_raw_fd(), data, 0)?;
        }
    }
    Ok(())
}

/// Creates (truncates) the WAL file, with O_DIRECT for the direct methods.
fn open_wal(path: &Path, direct: bool, dir: &Path) -> anyhow::Result<File> {
    let mut flags = libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    if direct {
        flags |= libc::O_DIRECT;
    }
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| anyhow!("--dir {} contains a NUL byte", dir.display()))?;
    // SAFETY: c_path is NUL-terminated and outlives the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), flags, 0o600) };
    if fd < 0 {
        let error = io::Error::last_os_error();
        if direct && error.raw_os_error() == Some(libc::EINVAL) {
            bail!(
                "--wal-methods: the filesystem of --dir {} does not support O_DIRECT (EINVAL on open); use --wal-methods unix,unix_fsync or pick a --dir on a disk filesystem",
                dir.display()
            );
        }
        return Err(error)
            .with_context(|| format!("cannot create the WAL file {}", path.display()));
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn align_down(offset: u64) -> u64 {
    offset / DIRECT_ALIGN_BYTES * DIRECT_ALIGN_BYTES
}

fn align_up(offset: u64) -> u64 {
    offset.div_ceil(DIRECT_ALIGN_BYTES) * DIRECT_ALIGN_BYTES
}

/// The aligned range an O_DIRECT commit of the frame bytes `[start, end)` writes.
pub fn aligned_range(start: u64, end: u64) -> (u64, u64) {
    (align_down(start), align_up(end))
}

/// One run of `case` on a fresh file: prepare (not timed), commit `plan.commits`
/// times (timed), verify (not timed).
pub fn run_once(plan: &WalPlan, case: WalCase, test_file: &TestFile) -> anyhow::Result<WalOutcome> {
    let direct = case.method.direct();
    let file = open_wal(test_file.path(), direct, &plan.dir)?;
    let fd = file.as_raw_fd();
    let end = WAL_HEADER_BYTES + case.frame_bytes(plan.commits);
    prepare(plan, case, &file, end)?;
    engine::settle(&plan.dir);

    // The commits run on a thread of their own: io_uring's io-wq workers belong to the
    // thread that submits (`iou-wrk-<its tid>`) and idle for seconds after their last
    // job, so a fresh thread counts only the workers this run's writes needed.
    let (elapsed_s, commit_s, io_wq_workers) = std::thread::scope(|scope| {
        scope
            .spawn(|| commit_stream(plan, case, fd))
            .join()
            .unwrap_or_else(|_| Err(anyhow!("{}: the commit thread panicked", case.name())))
    })?;

    let verified = if plan.verify {
        match verify(test_file.path(), plan.seed, end)? {
            None => Some(true),
            Some(offset) => bail!(
                "--verify failed for {}: byte {offset} of the WAL differs from what was committed",
                case.name()
            ),
        }
    } else {
        None
    };
    Ok(WalOutcome {
        elapsed_s,
        commit_s,
        io_wq_workers,
        verified,
    })
}

/// The timed part of a run, on the calling (fresh) thread: run time, each commit's
/// time, and the io-wq workers this thread's ring needed.
fn commit_stream(
    plan: &WalPlan,
    case: WalCase,
    fd: RawFd,
) -> anyhow::Result<(f64, Vec<f64>, usize)> {
    let mut writer = CommitWriter::new(plan, case, fd)?;
    let mut commit_s = Vec::with_capacity(plan.commits as usize);
    let start = Instant::now();
    for commit in 0..plan.commits {
        if plan.inject_failure_at_commit == Some(commit) {
            bail!("{} commit {commit}: injected failure (EIO)", case.name());
        }
        let began = Instant::now();
        writer
            .commit(commit)
            .with_context(|| format!("{} commit {commit}", case.name()))?;
        commit_s.push(began.elapsed().as_secs_f64());
    }
    let elapsed_s = start.elapsed().as_secs_f64().max(1e-9);
    let io_wq_workers = if case.method.uses_ring() {
        io_wq_workers_of_this_thread()
    } else {
        0
    };
    drop(writer);
    Ok((elapsed_s, commit_s, io_wq_workers))
}

/// `iou-wrk-<tid>` threads of the calling thread's io-wq (the name holds the tid of
/// the submitting thread; the kernel cuts names at 15 bytes, enough for 7 digits).
fn io_wq_workers_of_this_thread() -> usize {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let name = format!("iou-wrk-{tid}");
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read(task.path().join("comm"))
                .is_ok_and(|comm| comm.strip_suffix(b"\n").unwrap_or(&comm) == name.as_bytes())
        })
        .count()
}

/// Before the clock: `reused` allocates and writes the whole WAL with other bytes (a
/// WAL restarted after a checkpoint), `grows` writes only the WAL header; both sync.
/// The direct methods write this with O_DIRECT too, so their file has no cached pages,
/// and the buffered ones through the page cache, as each would have left its WAL.
fn prepare(plan: &WalPlan, case: WalCase, file: &File, end: u64) -> anyhow::Result<()> {
    let fd = file.as_raw_fd();
    let direct = case.method.direct();
    let mut buf = AlignedBuf::new(PREPARE_CHUNK_BYTES as usize)?;
    match case.space {
        WalSpace::Reused => {
            let length = align_up(end) + DIRECT_ALIGN_BYTES;
            let Ok(len) = libc::off_t::try_from(length) else {
                bail!("--commits: the WAL would be too large for fallocate");
            };
            // SAFETY: plain syscall on an open descriptor.
            if unsafe { libc::fallocate(fd, 0, 0, len) } != 0 {
                let error = io::Error::last_os_error();
                if error.raw_os_error() == Some(libc::EOPNOTSUPP) {
                    bail!("--wal-space reused: the filesystem of --dir does not support fallocate (EOPNOTSUPP); use --wal-space grows");
                }
                return Err(error).context("--wal-space reused: fallocate failed");
            }
            let old_seed = plan.seed.wrapping_add(1);
            let mut at = 0;
            while at < length {
                let len = (length - at).min(PREPARE_CHUNK_BYTES) as usize;
                let data = &mut buf.as_mut_slice()[..len];
                pattern::fill(data, old_seed, at);
                if at == 0 {
                    pattern::fill(&mut data[..WAL_HEADER_BYTES as usize], plan.seed, 0);
                }
                write_all_at(fd, data, at).context("preparing the reused WAL")?;
                at += len as u64;
            }
        }
        WalSpace::Grows => {
            let len = if direct {
                DIRECT_ALIGN_BYTES
            } else {
                WAL_HEADER_BYTES
            } as usize;
            let data = &mut buf.as_mut_slice()[..len];
            data.fill(0);
            pattern::fill(&mut data[..WAL_HEADER_BYTES as usize], plan.seed, 0);
            write_all_at(fd, data, 0).context("writing the WAL header")?;
        }
    }
    file.sync_data().context("syncing the prepared WAL")?;
    Ok(())
}

/// Reads `[0, end)` back; the offset of the first wrong byte, if any.
fn verify(path: &Path, seed: u64, end: u64) -> anyhow::Result<Option<u64>> {
    let mut actual = vec![0u8; PREPARE_CHUNK_BYTES as usize];
    let mut expected = vec![0u8; PREPARE_CHUNK_BYTES as usize];
    // A buffered descriptor of its own: O_DIRECT ones need aligned reads.
    let reader = File::open(path).context("--verify: cannot open the WAL for reading")?;
    let mut at = 0;
    while at < end {
        let len = (end - at).min(PREPARE_CHUNK_BYTES) as usize;
        reader
            .read_exact_at(&mut actual[..len], at)
            .with_context(|| format!("--verify: the WAL is shorter than {end} bytes"))?;
        pattern::fill(&mut expected[..len], seed, at);
        if let Some(i) = (0..len).find(|&i| actual[i] != expected[i]) {
            return Ok(Some(at + i as u64));
        }
        at += len as u64;
    }
    Ok(None)
}

/// Writes commits for one run: buffers (and a ring) made before the clock starts.
struct CommitWriter {
    // Field order matters for drop: Drop::drop waits for in-flight ops, then `ring`
    // closes, then `buf` is freed.
    ring: Option<IoUring>,
    /// Dropped by hand in Drop, once no op in flight can read it any more.
    buf: ManuallyDrop<AlignedBuf>,
    /// Ring operations submitted and not yet reaped.
    in_flight: usize,
    fd: RawFd,
    method: WalMethod,
    frames: u64,
    seed: u64,
    /// Bytes at the start of `buf` that already hold the head of the next commit's
    /// first block (the end of the previous commit), O_DIRECT methods only.
    carried: usize,
}

impl CommitWriter {
    fn new(plan: &WalPlan, case: WalCase, fd: RawFd) -> anyhow::Result<CommitWriter> {
        let frames = u64::from(case.frames);
        let buf_bytes = match case.method {
            WalMethod::Unix | WalMethod::UnixFsync => FRAME_BYTES,
            WalMethod::Coalesced => frames * FRAME_BYTES,
            _ => align_up(frames * FRAME_BYTES) + 2 * DIRECT_ALIGN_BYTES,
        };
        let mut buf = AlignedBuf::new(buf_bytes as usize)?;
        // The first commit starts in block 0, after the WAL header.
        let carried = if case.method.direct() {
            pattern::fill(
                &mut buf.as_mut_slice()[..WAL_HEADER_BYTES as usize],
                plan.seed,
                0,
            );
            WAL_HEADER_BYTES as usize
        } else {
            0
        };
        let ring = if case.method.uses_ring() {
            Some(
                ring::create_ring(4, RingFlags::default(), None)
                    .map_err(|e| ring::explain_ring_error(e, RingFlags::default()))?,
            )
        } else {
            None
        };
        Ok(CommitWriter {
            ring,
            buf: ManuallyDrop::new(buf),
            in_flight: 0,
            fd,
            method: case.method,
            frames,
            seed: plan.seed,
            carried,
        })
    }

    /// Commit number `commit`: its frames written and durable when this returns.
    fn commit(&mut self, commit: u32) -> anyhow::Result<()> {
        let start = WAL_HEADER_BYTES + u64::from(commit) * self.frames * FRAME_BYTES;
        let end = start + self.frames * FRAME_BYTES;
        match self.method {
            WalMethod::Unix | WalMethod::UnixFsync => {
                let page_at = FRAME_HEADER_BYTES as usize;
                for frame in 0..self.frames {
                    let at = start + frame * FRAME_BYTES;
                    let data = &mut self.buf.as_mut_slice()[..FRAME_BYTES as usize];
                    pattern::fill(data, self.seed, at);
                    // Two writes per frame, as wal.c's walWriteOneFrame makes them.
                    write_all_at(self.fd, &data[..page_at], at)?;
                    write_all_at(self.fd, &data[page_at..], at + FRAME_HEADER_BYTES)?;
                }
                // SAFETY: plain syscalls on an open descriptor.
                let synced = unsafe {
                    if self.method == WalMethod::Unix {
                        libc::fdatasync(self.fd)
                    } else {
                        libc::fsync(self.fd)
                    }
                };
                if synced != 0 {
                    return Err(io::Error::last_os_error()).context("sync failed");
                }
            }
            WalMethod::Coalesced => {
                let data = &mut self.buf.as_mut_slice()[..(end - start) as usize];
                pattern::fill(data, self.seed, start);
                write_all_at(self.fd, data, start)?;
                // SAFETY: plain syscall on an open descriptor.
                if unsafe { libc::fdatasync(self.fd) } != 0 {
                    return Err(io::Error::last_os_error()).context("fdatasync failed");
                }
            }
            _ => {
                let (block_start, block_end) = aligned_range(start, end);
                let head = (start - block_start) as usize;
                let len = (block_end - block_start) as usize;
                if head != self.carried {
                    bail!(
                        "internal error: {head} head bytes needed, {} carried",
                        self.carried
                    );
                }
                let tail = (end - block_start) as usize;
                {
                    let data = self.buf.as_mut_slice();
                    pattern::fill(&mut data[head..tail], self.seed, start);
                    data[tail..len].fill(0);
                }
                match self.method {
                    WalMethod::DirectFdatasync => {
                        write_all_at(self.fd, &self.buf.as_mut_slice()[..len], block_start)?;
                        // SAFETY: plain syscall on an open descriptor.
                        if unsafe { libc::fdatasync(self.fd) } != 0 {
                            return Err(io::Error::last_os_error()).context("fdatasync failed");
                        }
                    }
                    WalMethod::DirectDsync => {
                        let data = &self.buf.as_mut_slice()[..len];
                        pwritev2_all(self.fd, data, block_start, libc::RWF_DSYNC)?;
                    }
                    WalMethod::UringDsync => self.ring_commit(block_start, len, false)?,
                    WalMethod::UringFdatasync => self.ring_commit(block_start, len, true)?,
                    WalMethod::Unix | WalMethod::UnixFsync | WalMethod::Coalesced => {
                        bail!("internal error: a buffered method in the O_DIRECT path")
                    }
                }
                // Carry the block the commit ended in, when the next commit starts in it.
                let next_head = (end % DIRECT_ALIGN_BYTES) as usize;
                if next_head > 0 {
                    let last_block = len - DIRECT_ALIGN_BYTES as usize;
                    self.buf
                        .as_mut_slice()
                        .copy_within(last_block..last_block + next_head, 0);
                }
                self.carried = next_head;
            }
        }
        Ok(())
    }

    /// One submission: the O_DIRECT write with RWF_DSYNC, or the write linked to an
    /// fdatasync. A short write (or a retried EINTR/EAGAIN) submits the rest again.
    fn ring_commit(&mut self, offset: u64, len: usize, linked_sync: bool) -> anyhow::Result<()> {
        let mut done = 0usize;
        let mut retries = 0u32;
        loop {
            let ptr = self.buf.as_ptr().wrapping_add(done);
            let write = opcode::Write::new(types::Fd(self.fd), ptr, (len - done) as u32)
                .offset(offset + done as u64);
            let write = if linked_sync {
                write.build().flags(squeue::Flags::IO_LINK)
            } else {
                write.rw_flags(libc::RWF_DSYNC).build()
            }
            .user_data(0);
            let sync = opcode::Fsync::new(types::Fd(self.fd))
                .flags(types::FsyncFlags::DATASYNC)
                .build()
                .user_data(1);
            let ring = self
                .ring
                .as_mut()
                .ok_or_else(|| anyhow!("internal error: no ring"))?;
            let ops = if linked_sync { 2 } else { 1 };
            {
                let mut queue = ring.submission();
                // SAFETY: the write reads self.buf, which is not touched and not freed
                // until its completion is reaped below (or by Drop, which waits for
                // every op still in flight before the buffer is freed).
                unsafe {
                    queue
                        .push(&write)
                        .map_err(|_| anyhow!("internal error: submission queue full"))?;
                    if linked_sync {
                        queue
                            .push(&sync)
                            .map_err(|_| anyhow!("internal error: submission queue full"))?;
                    }
                }
            }
            self.in_flight += ops;
            let mut results = [0i32; 2];
            let mut reaped = 0;
            while reaped < ops {
                let ring = self
                    .ring
                    .as_mut()
                    .ok_or_else(|| anyhow!("internal error: no ring"))?;
                match ring.submit_and_wait(ops - reaped) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) => return Err(e).context("io_uring_enter failed"),
                }
                for cqe in ring.completion() {
                    results[(cqe.user_data() as usize).min(1)] = cqe.result();
                    reaped += 1;
                    self.in_flight -= 1;
                }
            }
            let (written, synced) = (results[0], results[1]);
            if written < 0 {
                let errno = -written;
                if (errno == libc::EINTR || errno == libc::EAGAIN) && retries < MAX_RETRIES {
                    retries += 1;
                    continue;
                }
                bail!("ring write failed: {}", io::Error::from_raw_os_error(errno));
            }
            if written == 0 {
                bail!("ring write made no progress (0 bytes; disk full?)");
            }
            done += written as usize;
            if done < len {
                // Short: the linked fdatasync was cancelled; write and sync the rest.
                continue;
            }
            if linked_sync && synced < 0 {
                bail!(
                    "ring fdatasync failed: {}",
                    io::Error::from_raw_os_error(-synced)
                );
            }
            return Ok(());
        }
    }
}

impl Drop for CommitWriter {
    fn drop(&mut self) {
        if let Some(ring) = self.ring.as_mut() {
            // Wait for every op still reading the buffer (after an error).
            while self.in_flight > 0 {
                if ring
                    .submit_and_wait(1)
                    .is_err_and(|e| e.raw_os_error() != Some(libc::EINTR))
                {
                    // The kernel may still read the buffer: leak it rather than free it.
                    return;
                }
                let reaped = ring.completion().count();
                self.in_flight = self.in_flight.saturating_sub(reaped);
            }
        }
        // SAFETY: no op is in flight (none was submitted, or all were reaped above), so
        // nothing reads the buffer any more, and it is dropped exactly once, here.
        unsafe { ManuallyDrop::drop(&mut self.buf) };
    }
}

/// pwrite(2) until `data` is written: EINTR/EAGAIN retried, short writes continued.
fn write_all_at(fd: RawFd, data: &[u8], offset: u64) -> io::Result<()> {
    engine::write_all(fd, data, offset, engine::WriteCall::Pwrite)
}

/// pwritev2(2) with `flags` until `data` is written.
fn pwritev2_all(fd: RawFd, data: &[u8], offset: u64, flags: libc::c_int) -> io::Result<()> {
    engine::write_all(fd, data, offset, engine::WriteCall::Pwritev2(flags))
}
