//! Runs one method once: open the test file, start the clock when every
//! thread is set up, write, (fdatasync), stop the clock, optionally verify.
//! The timed multi-threaded part ([`run_timed`]) and the positional I/O loops
//! ([`write_all`], [`read_exact_at`]) serve the random reads too.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::buffer::AlignedBuf;
use super::cleanup::{self, TestFile};
use super::options::{Durability, Method, Plan};
use super::pattern;
use super::ring::{RingFile, RingJob, SqpollAnchor};
use super::split;

/// How often the main thread looks for io_uring kernel threads during a run.
const SAMPLE_PERIOD: Duration = Duration::from_millis(20);

/// The measurement of one run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOutcome {
    pub elapsed_s: f64,
    /// Most `iou-wrk-*` threads (io-wq workers: writes the ring could not issue
    /// inline and punted) seen at once during the run.
    pub io_wq_workers_max: usize,
    /// Most `iou-sqp-*` threads (SQPOLL pollers) seen at once.
    pub sqpoll_threads_max: usize,
    /// `Some(true)` when `--verify` read back every byte correctly.
    pub verified: Option<bool>,
}

/// Kernel threads io_uring attached to this process right now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoThreads {
    pub io_wq_workers: usize,
    pub sqpoll: usize,
}

/// Counts `iou-wrk-*` and `iou-sqp-*` among /proc/self/task/*/comm: since Linux
/// 5.12 io_uring's helper threads are threads of the process that owns the ring.
pub fn count_io_threads() -> IoThreads {
    let mut threads = IoThreads::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return threads;
    };
    for task in tasks.flatten() {
        let Ok(comm) = std::fs::read(task.path().join("comm")) else {
            continue;
        };
        if comm.starts_with(b"iou-wrk") {
            threads.io_wq_workers += 1;
        } else if comm.starts_with(b"iou-sqp") {
            threads.sqpoll += 1;
        }
    }
    threads
}

/// Opens (creates, truncates) the test file with the flags the run asks for.
pub fn open_test_file(path: &Path, plan: &Plan) -> anyhow::Result<File> {
    let file = open_with(path, plan, libc::O_CREAT | libc::O_TRUNC)?;
    if plan.preallocate {
        preallocate(&file, plan.size_bytes)?;
    }
    Ok(file)
}

/// A writer thread's own descriptor of the test file, as each fio job opens the file
/// itself, so the comparison with fio is like for like (threads sharing one `struct file`
/// also share its reference count, which `fdget` touches on every `pwrite`). Measured: it
/// did not close the 10-thread `pwrite` gap to fio (docs/BENCH_IO.md).
fn reopen_test_file(path: &Path, plan: &Plan, threads: u32) -> anyhow::Result<File> {
    open_with(path, plan, 0).with_context(|| {
        format!(
            "--threads {threads}: cannot open one descriptor of the test file per thread; \
             raise the open-file limit (ulimit -n) or lower --threads"
        )
    })
}

fn open_with(path: &Path, plan: &Plan, create_flags: libc::c_int) -> anyhow::Result<File> {
    let mut flags = libc::O_WRONLY | libc::O_CLOEXEC | create_flags;
    if plan.direct {
        flags |= libc::O_DIRECT;
    }
    if plan.durability == Durability::Each {
        flags |= libc::O_DSYNC;
    }
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| anyhow!("--dir {} contains a NUL byte", plan.dir.display()))?;
    // SAFETY: c_path is NUL-terminated and outlives the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), flags, 0o600) };
    if fd < 0 {
        let error = io::Error::last_os_error();
        if plan.direct && error.raw_os_error() == Some(libc::EINVAL) {
            bail!(
                "--direct: the filesystem of --dir {} does not support O_DIRECT (EINVAL on open; e.g. tmpfs before Linux 6.6); drop --direct or pick a --dir on a disk filesystem",
                plan.dir.display()
            );
        }
        return Err(error)
            .with_context(|| format!("cannot create the test file {}", path.display()));
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// fallocate(2) mode 0: blocks reserved (unwritten extents), size set; not timed.
fn preallocate(file: &File, size_bytes: u64) -> anyhow::Result<()> {
    let Ok(len) = libc::off_t::try_from(size_bytes) else {
        bail!("--size {size_bytes} is too large for fallocate");
    };
    // SAFETY: plain syscall on an open descriptor.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } != 0 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::EOPNOTSUPP) {
            bail!("--preallocate: the filesystem of --dir does not support fallocate (EOPNOTSUPP); drop --preallocate");
        }
        return Err(error).context("--preallocate: fallocate failed");
    }
    Ok(())
}

/// One run of `method`: returns its time, and leaves the file for the caller to remove.
pub fn run_once(plan: &Plan, method: Method, test_file: &TestFile) -> anyhow::Result<RunOutcome> {
    let name = method.name(plan.ring);
    let mut outcome = match method {
        Method::Dd => run_dd(plan, test_file.path())?,
        _ => {
            let file = open_test_file(test_file.path(), plan)?;
            let mut outcome = run_threads(plan, method, &name, &file, test_file.path())?;
            if plan.verify {
                let reader = File::open(test_file.path())?;
                match pattern::verify(&reader, plan.seed, plan.size_bytes)? {
                    Ok(()) => outcome.verified = Some(true),
                    Err(problem) => bail!("--verify failed for {name}: {problem}"),
                }
            }
            outcome
        }
    };
    outcome.elapsed_s = outcome.elapsed_s.max(1e-9);
    Ok(outcome)
}

/// The start line: workers set up (buffers, rings), arrive, and wait for the
/// main thread to fire the start, so setup is not timed. Unlike a Barrier it
/// can be aborted when a later thread cannot even be spawned.
#[derive(Default)]
struct StartLine {
    state: Mutex<(usize, Signal)>,
    changed: Condvar,
}

#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum Signal {
    #[default]
    Wait,
    Go,
    Abort,
}

impl StartLine {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, Signal)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called once per worker; true when the run goes ahead.
    fn arrive_and_wait(&self) -> bool {
        let mut state = self.lock();
        state.0 += 1;
        self.changed.notify_all();
        while state.1 == Signal::Wait {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.1 == Signal::Go
    }

    fn wait_for(&self, workers: usize) {
        let mut state = self.lock();
        while state.0 < workers {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn fire(&self, signal: Signal) {
        self.lock().1 = signal;
        self.changed.notify_all();
    }
}

/// A worker's place at the start line; arriving on drop means a worker that
/// failed during setup still lets the others be released.
pub(super) struct StartGate<'a> {
    line: &'a StartLine,
    arrived: bool,
}

impl StartGate<'_> {
    /// Waits until every worker is set up and the clock has started.
    pub(super) fn pass(&mut self) -> anyhow::Result<()> {
        if !self.arrived {
            self.arrived = true;
            if !self.line.arrive_and_wait() {
                bail!("aborted before the start");
            }
        }
        Ok(())
    }
}

impl Drop for StartGate<'_> {
    fn drop(&mut self) {
        let _ = self.pass();
    }
}

/// What the timed part of a run on several threads measured.
pub(super) struct Timed<T> {
    /// From the start signal to the end of the last worker.
    pub elapsed: Duration,
    /// Most io_uring kernel threads seen at once during the run.
    pub peak: IoThreads,
    /// Each worker's result, in worker order.
    pub results: Vec<T>,
}

/// Runs `worker(index, gate)` on `threads` threads named `bench-io-<index>`. Each worker
/// sets up (buffers, ring), passes `gate`, does its timed work and returns the instant it
/// finished with its result. The clock starts when every worker is at the start line and
/// stops when the last one finished; meanwhile the calling thread samples io_uring's
/// kernel threads. The first worker error is returned; a thread that cannot be started
/// is reported with `threads_flag`, the option that set the thread count.
pub(super) fn run_timed<T, F>(
    threads: u32,
    name: &str,
    threads_flag: &str,
    worker: F,
) -> anyhow::Result<Timed<T>>
where
    T: Send,
    F: Fn(usize, &mut StartGate) -> anyhow::Result<(Instant, T)> + Sync,
{
    let line = StartLine::default();
    let finished = AtomicUsize::new(0);
    let errors: Mutex<Vec<anyhow::Error>> = Mutex::new(Vec::new());
    let done: Mutex<Vec<(usize, Instant, T)>> = Mutex::new(Vec::with_capacity(threads as usize));
    let mut peak = IoThreads::default();

    let start = std::thread::scope(|scope| -> anyhow::Result<Instant> {
        for index in 0..threads as usize {
            let (line, finished, errors, done, worker) =
                (&line, &finished, &errors, &done, &worker);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-io-{index}"))
                .spawn_scoped(scope, move || {
                    let mut gate = StartGate {
                        line,
                        arrived: false,
                    };
                    let result = worker(index, &mut gate);
                    drop(gate);
                    match result {
                        Ok((at, value)) => done
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((index, at, value)),
                        Err(error) => errors.lock().unwrap_or_else(|e| e.into_inner()).push(error),
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                });
            if let Err(error) = spawned {
                line.fire(Signal::Abort);
                bail!(
                    "cannot start thread {index} of {threads} for {name}: {error}; lower {threads_flag}"
                );
            }
        }
        line.wait_for(threads as usize);
        let start = Instant::now();
        line.fire(Signal::Go);
        // First look after 1 ms, then back off to SAMPLE_PERIOD: io-wq workers
        // appear with the first punted I/O and stay for the run, so short
        // runs are caught without polling /proc hard during long ones.
        let mut period = Duration::from_millis(1);
        while finished.load(Ordering::SeqCst) < threads as usize {
            std::thread::sleep(period);
            let now = count_io_threads();
            peak.io_wq_workers = peak.io_wq_workers.max(now.io_wq_workers);
            peak.sqpoll = peak.sqpoll.max(now.sqpoll);
            period = (period * 2).min(SAMPLE_PERIOD);
        }
        Ok(start)
    })?;

    if let Some(error) = errors
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .next()
    {
        return Err(error);
    }
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(index, _, _)| *index);
    // The clock stops when the last thread finished, not when we noticed.
    let last = done.iter().map(|(_, at, _)| *at).max().unwrap_or(start);
    Ok(Timed {
        elapsed: last.saturating_duration_since(start),
        peak,
        results: done.into_iter().map(|(_, _, value)| value).collect(),
    })
}

fn run_threads(
    plan: &Plan,
    method: Method,
    name: &str,
    file: &File,
    path: &Path,
) -> anyhow::Result<RunOutcome> {
    let threads = method.threads();
    let ranges = split::split_ranges(plan.size_bytes, plan.block_size_bytes, threads);
    // One thread writes through the file as opened; several get a descriptor each.
    let own_files = (threads > 1)
        .then(|| {
            (0..threads)
                .map(|_| reopen_test_file(path, plan, threads))
                .collect::<anyhow::Result<Vec<File>>>()
        })
        .transpose()?;
    let fd_of = |index: usize| {
        own_files
            .as_ref()
            .map_or(file.as_raw_fd(), |files| files[index].as_raw_fd())
    };
    let anchor = if method.is_io_uring() {
        SqpollAnchor::new(plan.ring)?
    } else {
        None
    };
    let attach_to = anchor.as_ref().map(SqpollAnchor::fd);
    let timed = run_timed(threads, name, "--threads", |index, gate| {
        let range = ranges[index].clone();
        let done = write_worker(plan, method, name, fd_of(index), range, attach_to, gate)?;
        Ok((done, ()))
    })?;
    let mut elapsed = timed.elapsed;
    if plan.durability == Durability::End {
        let sync_start = Instant::now();
        file.sync_data()
            .with_context(|| format!("{name}: fdatasync failed"))?;
        elapsed += sync_start.elapsed();
    }
    Ok(RunOutcome {
        elapsed_s: elapsed.as_secs_f64(),
        io_wq_workers_max: timed.peak.io_wq_workers,
        sqpoll_threads_max: timed.peak.sqpoll,
        verified: None,
    })
}

/// Sets up this thread's buffer or ring, waits at the start line, writes its range.
/// Returns when it finished.
fn write_worker(
    plan: &Plan,
    method: Method,
    name: &str,
    fd: RawFd,
    range: Range<u64>,
    attach_to: Option<RawFd>,
    gate: &mut StartGate,
) -> anyhow::Result<Instant> {
    let block = plan.block_size_bytes;
    match method {
        Method::IoUring {
            entries, strategy, ..
        } => {
            let mut writer =
                RingFile::new(fd, entries, strategy, block as usize, plan.ring, attach_to)?;
            let job = RingJob {
                method_name: name,
                strategy,
                seed: plan.seed,
                inject_failure_at: plan.inject_failure_at,
            };
            gate.pass()?;
            writer.write_range(range, block, &job)?;
            Ok(Instant::now())
        }
        Method::Blocking | Method::Pwrite { .. } => {
            let positional = matches!(method, Method::Pwrite { .. });
            let mut buf = AlignedBuf::new(block as usize)?;
            gate.pass()?;
            for (offset, len) in split::blocks(range, block) {
                if plan.inject_failure_at == Some(offset) {
                    bail!("{name} at offset {offset}: injected failure (EIO)");
                }
                let data = &mut buf.as_mut_slice()[..len];
                pattern::fill(data, plan.seed, offset);
                write_all(
                    fd,
                    data,
                    offset,
                    if positional {
                        WriteCall::Pwrite
                    } else {
                        WriteCall::Write
                    },
                )
                .with_context(|| format!("{name} at offset {offset}"))?;
            }
            Ok(Instant::now())
        }
        Method::Dd => bail!("internal error: dd is not a thread method"),
    }
}

/// The system call that writes a piece in [`write_all`].
#[derive(Clone, Copy)]
pub(super) enum WriteCall {
    /// write(2) at the file position (`offset` is not used).
    Write,
    /// pwrite(2) at `offset`.
    Pwrite,
    /// pwritev2(2) at `offset` with these `RWF_*` flags.
    Pwritev2(libc::c_int),
}

/// `call` until `data` is written: EINTR/EAGAIN retried, short writes continued.
pub(super) fn write_all(fd: RawFd, data: &[u8], offset: u64, call: WriteCall) -> io::Result<()> {
    let mut done = 0usize;
    while done < data.len() {
        let rest = &data[done..];
        let at = (offset + done as u64) as libc::off_t;
        let iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: rest (and iov, which points into it) is a live borrowed slice for the
        // duration of the call.
        let written = unsafe {
            match call {
                WriteCall::Write => libc::write(fd, rest.as_ptr().cast(), rest.len()),
                WriteCall::Pwrite => libc::pwrite(fd, rest.as_ptr().cast(), rest.len(), at),
                WriteCall::Pwritev2(flags) => libc::pwritev2(fd, &iov, 1, at, flags),
            }
        };
        if written < 0 {
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                _ => return Err(error),
            }
        }
        if written == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "write made no progress (disk full?)",
            ));
        }
        done += written as usize;
    }
    Ok(())
}

/// pread(2) until `buf` is full: EINTR/EAGAIN retried, short reads continued. Reading
/// past the end of the file is an error (`UnexpectedEof`), not a short result.
pub(super) fn read_exact_at(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let rest = &mut buf[done..];
        let at = (offset + done as u64) as libc::off_t;
        // SAFETY: rest is a live, exclusively borrowed slice of rest.len() writable bytes
        // for the duration of the call.
        let read = unsafe { libc::pread(fd, rest.as_mut_ptr().cast(), rest.len(), at) };
        if read < 0 {
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                _ => return Err(error),
            }
        }
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ));
        }
        done += read as usize;
    }
    Ok(())
}

/// Whether `dd` can be run (found on PATH).
pub fn dd_available() -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join("dd").is_file()))
        .unwrap_or(false)
}

/// IO Playground's control: `dd if=/dev/zero`, with the same block size, O_DIRECT and
/// durability as the other methods. Timed from spawn to exit (includes exec, ~1 ms).
fn run_dd(plan: &Plan, path: &Path) -> anyhow::Result<RunOutcome> {
    if plan.preallocate {
        // Reserve the blocks outside the clock; dd then must not truncate them away.
        drop(open_test_file(path, plan)?);
    }
    let mut command = Command::new("dd");
    command
        .arg("if=/dev/zero")
        .arg(format!("of={}", path.display()))
        .arg(format!("bs={}", plan.block_size_bytes))
        .arg(format!("count={}", plan.size_bytes))
        .arg("iflag=count_bytes")
        .arg("status=none");
    let mut oflags = Vec::new();
    let mut convs = Vec::new();
    if plan.direct {
        oflags.push("direct");
    }
    if plan.preallocate {
        convs.push("notrunc");
    }
    match plan.durability {
        Durability::None => {}
        Durability::End => convs.push("fdatasync"),
        Durability::Each => oflags.push("dsync"),
    }
    if !oflags.is_empty() {
        command.arg(format!("oflag={}", oflags.join(",")));
    }
    if !convs.is_empty() {
        command.arg(format!("conv={}", convs.join(",")));
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let child = command
        .spawn()
        .context("cannot start dd; leave it out with --methods blocking,pwrite,io_uring")?;
    cleanup::set_child(child.id() as i32);
    let output = child.wait_with_output();
    cleanup::set_child(0);
    let elapsed = start.elapsed();
    let output = output.context("waiting for dd")?;
    if !output.status.success() {
        bail!(
            "dd failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(RunOutcome {
        elapsed_s: elapsed.as_secs_f64(),
        ..RunOutcome::default()
    })
}

/// Flushes the filesystem between runs (outside the clock), so one run's
/// background writeback does not slow the next.
pub fn settle(dir: &Path) {
    if let Ok(dir) = File::open(dir) {
        // SAFETY: dir is an open descriptor for the duration of the call.
        unsafe { libc::syncfs(dir.as_raw_fd()) };
    }
}
