//! The I/O engine: the one interface between the SQLite-facing code and the kernel.
//!
//! ```text
//! file.rs / shm.rs / writeback.rs
//!        ──► Submitter::{read_at, write_at, sync, truncate, write_batch, flush}
//!                           │  (retries EINTR/EAGAIN, continues short transfers,
//!                           │   maps nothing to SQLite codes: returns errno)
//!                           ▼
//!                      Engine::perform(ops, results)      one call = one batch
//!                 ┌─────────┼──────────────┐
//!            uring.rs   syscall.rs     fault.rs (wraps either; tests)
//! ```
//!
//! **Buffer-lifetime rule.** [`Op`] carries raw pointers. `Engine::perform` returns only
//! after every op it was given has completed (its completion reaped), so a buffer only
//! has to outlive the `perform` call that names it. No I/O is ever in flight between two
//! VFS method calls; that is what lets a file move between threads (SQLite's
//! multi-thread mode) while each thread owns its own ring.
//!
//! **Registered-buffer rule.** A ring may register memory with the kernel
//! (IORING_REGISTER_BUFFERS), which pins its pages for as long as the ring lives, and
//! then writes from it without pinning them per I/O (IORING_OP_WRITE_FIXED). A registered
//! range must therefore never be freed or remapped while any ring lives — a ring would go
//! on writing from the old pages. So the only memory ever offered for registration is
//! [`fixed_region`]: the write-behind arena, allocated once and never freed (`writeback.rs`).

pub(crate) mod fault;
pub(crate) mod power_loss;
pub(crate) mod syscall;
pub(crate) mod uring;

use std::os::fd::RawFd;
use std::sync::Arc;

use crate::config::Submission;
use crate::stats::{IoStats, SharedStats};

/// Where the memory rings may register lives, `(address, length)`; published once.
static FIXED_REGION: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

/// Environment switch: `SQLITE_URING_REGISTER_BUFFERS=off` keeps rings from registering
/// the arena (for measuring what registration buys, or under a tight RLIMIT_MEMLOCK).
pub(crate) const REGISTER_BUFFERS_ENV: &str = "SQLITE_URING_REGISTER_BUFFERS";

/// Offers `len` bytes at `start` to the rings for registration; only the first region
/// offered is kept.
///
/// # Safety
/// The memory must stay allocated, at this address, until the process exits (the
/// registered-buffer rule): rings keep writing from the pages they pinned.
pub(crate) unsafe fn publish_fixed_region(start: *const u8, len: usize) {
    assert!(!start.is_null() && len > 0);
    let _ = FIXED_REGION.set((start as usize, len));
}

/// Whether `SQLITE_URING_REGISTER_BUFFERS=off` (or `0`) was set; read once.
pub(crate) fn buffer_registration_switched_off() -> bool {
    static SWITCHED_OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SWITCHED_OFF.get_or_init(|| {
        std::env::var(REGISTER_BUFFERS_ENV).is_ok_and(|value| value == "off" || value == "0")
    })
}

/// The region a ring may register: `None` before the arena exists, or when registration
/// is switched off.
pub(crate) fn fixed_region() -> Option<(usize, usize)> {
    if buffer_registration_switched_off() {
        None
    } else {
        FIXED_REGION.get().copied()
    }
}

/// One I/O operation. Pointers must stay valid until the `perform` that carries them
/// returns (see the module's buffer-lifetime rule).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Read {
        fd: RawFd,
        buf: *mut u8,
        len: u32,
        offset: u64,
    },
    Write {
        fd: RawFd,
        buf: *const u8,
        len: u32,
        offset: u64,
    },
    Sync {
        fd: RawFd,
        data_only: bool,
    },
    /// A sync of `fd` that starts only after every `Write` placed immediately before it in
    /// the same batch has completed in full; it is cancelled (`-ECANCELED`) when one of
    /// them failed or was short. On io_uring this is a linked chain (IOSQE_IO_LINK).
    SyncAfterWrites {
        fd: RawFd,
        data_only: bool,
    },
    Truncate {
        fd: RawFd,
        len: u64,
    },
}

impl Op {
    pub(crate) fn kind(&self) -> OpKind {
        match self {
            Op::Read { .. } => OpKind::Read,
            Op::Write { .. } => OpKind::Write,
            Op::Sync { .. } | Op::SyncAfterWrites { .. } => OpKind::Sync,
            Op::Truncate { .. } => OpKind::Truncate,
        }
    }
}

/// The kind of an [`Op`], for fault rules and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Write,
    Sync,
    Truncate,
}

/// A backend that performs batches of [`Op`]s.
pub(crate) trait Engine {
    /// Performs every op in `ops`; `results[i]` receives op i's result: bytes transferred
    /// (reads/writes), 0 (sync/truncate), or `-errno`. Ops in one batch are independent:
    /// the engine may run them in any order or concurrently.
    ///
    /// Returns the number of kernel entries made, or `Err(errno)` when the batch could not
    /// be submitted at all (then no op ran, or every op's result is still reported).
    ///
    /// # Safety
    /// Every pointer in `ops` must be valid for its length until this call returns.
    unsafe fn perform(&mut self, ops: &[Op], results: &mut [i32]) -> Result<u64, i32>;
}

/// Which operations of the io_uring engine bypass the ring (see [`crate::Submission`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Routing {
    pub(crate) syscall_reads: bool,
    pub(crate) syscall_writes: bool,
    /// Syncs (plain or linked) run by syscall after the batch's ring ops, one after the
    /// other, instead of together on the ring (where each runs on an io-wq worker): less
    /// CPU, no overlap (ARCHITECTURE.md, "What goes through the ring").
    pub(crate) syscall_syncs: bool,
    /// A batch left with a single ring op runs it as a syscall: one op alone cannot
    /// overlap with anything, so the ring only adds a worker hand-off.
    pub(crate) lone_op_by_syscall: bool,
    /// Use this thread's SQPOLL ring instead of its ordinary one (`uring_sqpoll`).
    pub(crate) sqpoll: bool,
}

impl Routing {
    pub(crate) const ALL_RING: Routing =
        Routing::new(Submission::Ring, Submission::Ring, Submission::Ring);

    /// Routing for the given submissions; asking for everything on the ring means every
    /// op, lone ones included.
    pub(crate) const fn new(reads: Submission, writes: Submission, syncs: Submission) -> Routing {
        let syscall_reads = matches!(reads, Submission::Syscall);
        let syscall_writes = matches!(writes, Submission::Syscall);
        let syscall_syncs = matches!(syncs, Submission::Syscall);
        Routing {
            syscall_reads,
            syscall_writes,
            syscall_syncs,
            lone_op_by_syscall: syscall_reads || syscall_writes || syscall_syncs,
            sqpoll: false,
        }
    }

    /// The same routing on this thread's SQPOLL ring (`on`) or its ordinary ring.
    pub(crate) const fn with_sqpoll(self, on: bool) -> Routing {
        Routing { sqpoll: on, ..self }
    }

    fn submission(by_syscall: bool) -> Submission {
        if by_syscall {
            Submission::Syscall
        } else {
            Submission::Ring
        }
    }

    pub(crate) fn reads(self) -> Submission {
        Self::submission(self.syscall_reads)
    }

    pub(crate) fn writes(self) -> Submission {
        Self::submission(self.syscall_writes)
    }

    pub(crate) fn syncs(self) -> Submission {
        Self::submission(self.syscall_syncs)
    }

    /// Whether reads, writes and syncs all bypass the ring (the default for buffered
    /// files): only a batch of two or more truncates could still reach it.
    pub(crate) fn reads_writes_syncs_by_syscall(self) -> bool {
        self.syscall_reads && self.syscall_writes && self.syscall_syncs
    }

    /// Whether the whole batch goes by syscall: at most one op is left for the ring, and
    /// a lone ring op goes by syscall too.
    pub(crate) fn all_by_syscall(self, ops: &[Op]) -> bool {
        self.lone_op_by_syscall && ops.iter().filter(|op| !self.bypasses(op)).count() <= 1
    }

    fn bypasses(self, op: &Op) -> bool {
        match op {
            Op::Read { .. } => self.syscall_reads,
            Op::Write { .. } => self.syscall_writes,
            Op::Sync { .. } | Op::SyncAfterWrites { .. } => self.syscall_syncs,
            Op::Truncate { .. } => false,
        }
    }
}

/// Which engine a file uses. Chosen at open; the SQLite-facing code never looks inside.
#[derive(Clone)]
pub(crate) enum EngineKind {
    /// The ring, with reads and/or writes issued by syscall (see [`crate::Submission`]).
    IoUring(Routing),
    Syscall,
    Fault(Arc<fault::FaultPlan>),
}

impl std::fmt::Debug for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl EngineKind {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            EngineKind::IoUring(_) => "io_uring",
            EngineKind::Syscall => "syscall",
            EngineKind::Fault(_) => "fault-injection",
        }
    }

    /// How reads, writes and syncs are issued, for `PRAGMA io_uring_stats`.
    pub(crate) fn routing_json(&self) -> String {
        let routing = match self {
            EngineKind::IoUring(routing) => *routing,
            EngineKind::Syscall | EngineKind::Fault(_) => Routing::new(
                Submission::Syscall,
                Submission::Syscall,
                Submission::Syscall,
            ),
        };
        format!(
            r#""reads":"{}","writes":"{}","syncs":"{}","lone_ops":"{}","sqpoll":"{}""#,
            routing.reads().name(),
            routing.writes().name(),
            routing.syncs().name(),
            Routing::submission(routing.lone_op_by_syscall).name(),
            if routing.sqpoll { "on" } else { "off" }
        )
    }

    /// Whether a lone read goes by `pread` from the calling thread (never for the
    /// fault-injecting engine, whose point is to see every op).
    pub(crate) fn reads_by_syscall(&self) -> bool {
        match self {
            EngineKind::Syscall => true,
            EngineKind::IoUring(routing) => routing.syscall_reads || routing.lone_op_by_syscall,
            EngineKind::Fault(_) => false,
        }
    }

    /// Whether a sync runs as a syscall of its own after the writes before it (so nothing
    /// is gained by submitting both at once): everything but ring-routed syncs.
    pub(crate) fn syncs_by_syscall(&self) -> bool {
        match self {
            EngineKind::Syscall => true,
            EngineKind::IoUring(routing) => routing.syscall_syncs,
            EngineKind::Fault(plan) => plan.inner().syncs_by_syscall(),
        }
    }

    /// Checks, on this thread, that the engine can run; the error names cause and remedy.
    pub(crate) fn ensure_available(&self) -> Result<(), String> {
        match self {
            // A file whose reads, writes and syncs all go by syscall (the default for
            // buffered files) never submits, so the thread opening it need not own a ring.
            EngineKind::IoUring(routing)
                if routing.reads_writes_syncs_by_syscall() && !routing.sqpoll =>
            {
                uring::ensure_process_can_make_rings()
            }
            EngineKind::IoUring(routing) => uring::ensure_thread_ring(routing.sqpoll),
            EngineKind::Syscall => Ok(()),
            EngineKind::Fault(plan) => plan.inner().ensure_available(),
        }
    }

    /// # Safety
    /// As [`Engine::perform`].
    pub(crate) unsafe fn perform(&self, ops: &[Op], results: &mut [i32]) -> Result<u64, i32> {
        debug_assert_eq!(ops.len(), results.len());
        // SAFETY: forwarded caller contract.
        unsafe {
            match self {
                // The common case, a lone read or write routed to syscalls, skips the
                // thread's ring entirely (a thread-local lookup per xRead is measurable
                // next to a page-cache pread).
                EngineKind::IoUring(routing) if routing.all_by_syscall(ops) => {
                    syscall::SyscallEngine.perform(ops, results)
                }
                EngineKind::IoUring(routing) => uring::with_thread_ring(routing.sqpoll, |ring| {
                    ring.perform_with(ops, results, *routing)
                }),
                EngineKind::Syscall => syscall::SyscallEngine.perform(ops, results),
                EngineKind::Fault(plan) => plan.perform(ops, results),
            }
        }
    }
}

/// Reads into `buf` from `offset` by `pread` until it is full or the file ends, retrying
/// EINTR/EAGAIN and continuing short reads, uncounted; returns the outcome (bytes read, or
/// errno) and the `pread` calls made. The path for reads that go by syscall anyway: SQLite's
/// reads are mostly single pages from the page cache, where the generic batch path cost
/// ~250 instructions per read more than `unix`, 10–15 % of a large-blob read (callgrind;
/// docs/BENCH_BLOBS.md).
#[inline]
pub(crate) fn pread_fully(fd: RawFd, buf: &mut [u8], offset: u64) -> (Result<usize, i32>, u64) {
    if buf.len() <= i32::MAX as usize {
        // SAFETY: `buf` is an exclusive borrow of `buf.len()` bytes for the whole call;
        // pread does not retain the pointer.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), offset as i64) };
        if n >= 0 && n as usize == buf.len() {
            return (Ok(buf.len()), 1);
        }
        // End of file: 0 bytes is final, as in os_unix.c seekAndRead. (SQLite reads past
        // the end on every rollback commit: the 8 bytes after the journal header.)
        if n == 0 {
            return (Ok(0), 1);
        }
        // A short read continues where it stopped; a failure goes to the loop's retry.
        if n > 0 {
            assert!(n as usize <= buf.len(), "kernel read more than asked");
            let (outcome, calls) = pread_loop(fd, buf, offset, n as usize);
            return (outcome, calls + 1);
        }
    }
    // Failed or huge: the full loop (a read is idempotent).
    let (outcome, calls) = pread_loop(fd, buf, offset, 0);
    (outcome, calls + 1)
}

/// The loop of [`pread_fully`], from `done` bytes already read into `buf`.
#[cold]
fn pread_loop(fd: RawFd, buf: &mut [u8], offset: u64, done: usize) -> (Result<usize, i32>, u64) {
    let mut done = done;
    let mut retries = 0;
    let mut calls = 0u64;
    let outcome = loop {
        if done == buf.len() {
            break Ok(done);
        }
        let rest = &mut buf[done..];
        let len = rest.len().min(i32::MAX as usize);
        // SAFETY: `rest` is an exclusive borrow of `len` or more bytes for the whole
        // call; pread does not retain the pointer.
        let n = unsafe {
            libc::pread(
                fd,
                rest.as_mut_ptr().cast(),
                len,
                (offset + done as u64) as i64,
            )
        };
        calls += 1;
        match n {
            0 => break Ok(done),
            n if n > 0 => {
                assert!(n as usize <= len, "kernel read more than asked");
                done += n as usize;
            }
            _ => {
                let errno = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                if is_retryable(errno) && retries < RETRY_LIMIT {
                    retries += 1;
                } else {
                    break Err(errno);
                }
            }
        }
    };
    (outcome, calls)
}

/// How many times an op is reissued after EINTR/EAGAIN before the error is reported.
/// Regular files do not return EAGAIN for blocking I/O; the bound turns a kernel or
/// seccomp oddity into an error instead of a livelock.
const RETRY_LIMIT: u32 = 64;

fn is_retryable(errno: i32) -> bool {
    errno == libc::EINTR || errno == libc::EAGAIN
}

/// Most ops submitted in one batch; longer lists are split into several batches.
pub(crate) const MAX_BATCH: usize = 64;

fn write_op(fd: RawFd, offset: u64, bytes: &[u8]) -> Op {
    assert!(bytes.len() <= i32::MAX as usize);
    Op::Write {
        fd,
        buf: bytes.as_ptr(),
        len: bytes.len() as u32,
        offset,
    }
}

/// How a flush that ends in a sync is submitted (see [`Submitter::flush`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPlan {
    /// Writes →link→ fsync in one submission.
    Linked,
    /// Writes in one submission, then the fsync in another.
    Separate,
}

/// A sync to perform at the end of a flush.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SyncRequest {
    pub(crate) data_only: bool,
    /// The containing directory, to sync alongside (first sync after creating a journal).
    pub(crate) directory_fd: Option<RawFd>,
    pub(crate) plan: SyncPlan,
}

/// Puts `request`'s syncs at the start of `ops` — the file's (`SyncAfterWrites`, linked
/// behind the writes just before it, when `after_writes`), then its directory's when due
/// — and returns how many. The directory comes after the file, as in os_unix.c
/// `unixSync`: by syscall they run in that order (on ext4 the file's fsync commits the
/// new directory entry with it and the directory's fsync then finds little to do; the
/// other order made a rollback commit ~8 % slower); on the ring the directory's is not
/// linked, so the two overlap.
fn push_syncs(ops: &mut [Op], fd: RawFd, request: SyncRequest, after_writes: bool) -> usize {
    let data_only = request.data_only;
    ops[0] = if after_writes {
        Op::SyncAfterWrites { fd, data_only }
    } else {
        Op::Sync { fd, data_only }
    };
    match request.directory_fd {
        Some(dir_fd) => {
            ops[1] = Op::Sync {
                fd: dir_fd,
                data_only,
            };
            2
        }
        None => 1,
    }
}

/// A flush that did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlushFailure {
    Write(WriteFailure),
    Sync(i32),
}

impl From<WriteFailure> for FlushFailure {
    fn from(failure: WriteFailure) -> Self {
        FlushFailure::Write(failure)
    }
}

/// A write that did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteFailure {
    /// The kernel reported an error.
    Errno(i32),
    /// The kernel accepted zero bytes without an error (no space, in practice).
    NoProgress,
}

/// Performs ops for one file and counts them.
pub(crate) struct Submitter<'a> {
    pub(crate) engine: &'a EngineKind,
    pub(crate) file_stats: &'a SharedStats,
    pub(crate) vfs_stats: &'a SharedStats,
}

impl Submitter<'_> {
    /// # Safety
    /// As [`Engine::perform`].
    pub(crate) unsafe fn perform(&mut self, ops: &[Op], results: &mut [i32]) -> Result<(), i32> {
        let started = crate::trace::start(crate::trace::TARGET_IO);
        // SAFETY: forwarded caller contract.
        let outcome = unsafe { self.engine.perform(ops, results) };
        if let Some(started) = started {
            crate::trace::io_batch(started, self.engine.name(), ops, results, outcome);
        }
        let entries = outcome?;
        let mut delta = IoStats {
            ops: ops.len() as u64,
            kernel_entries: entries,
            ..IoStats::default()
        };
        delta.fsyncs = ops.iter().filter(|op| op.kind() == OpKind::Sync).count() as u64;
        self.file_stats.add_single_writer(&delta);
        self.vfs_stats.add(&delta);
        Ok(())
    }

    fn perform_one(&mut self, op: Op) -> i32 {
        let mut result = [0i32];
        // SAFETY: every caller builds `op` from a live borrow that outlives this call.
        match unsafe { self.perform(&[op], &mut result) } {
            Ok(()) => result[0],
            Err(errno) => -errno,
        }
    }

    /// Reads into `buf` from `offset` until it is full or the file ends.
    /// Returns the bytes read (fewer than `buf.len()` only at end of file).
    pub(crate) fn read_at(&mut self, fd: RawFd, buf: &mut [u8], offset: u64) -> Result<usize, i32> {
        let mut done = 0usize;
        let mut retries = 0;
        while done < buf.len() {
            let rest = &mut buf[done..];
            let len = rest.len().min(i32::MAX as usize) as u32;
            let result = self.perform_one(Op::Read {
                fd,
                buf: rest.as_mut_ptr(),
                len,
                offset: offset + done as u64,
            });
            match result {
                0 => break,
                n if n > 0 => {
                    assert!(n as u32 <= len, "kernel read more than asked");
                    done += n as usize;
                }
                n if is_retryable(-n) && retries < RETRY_LIMIT => retries += 1,
                n => return Err(-n),
            }
        }
        Ok(done)
    }

    /// Writes all of `buf` at `offset`, continuing short writes.
    pub(crate) fn write_at(
        &mut self,
        fd: RawFd,
        buf: &[u8],
        offset: u64,
    ) -> Result<(), WriteFailure> {
        let mut done = 0usize;
        let mut retries = 0;
        while done < buf.len() {
            let rest = &buf[done..];
            let len = rest.len().min(i32::MAX as usize) as u32;
            let result = self.perform_one(Op::Write {
                fd,
                buf: rest.as_ptr(),
                len,
                offset: offset + done as u64,
            });
            match result {
                0 => return Err(WriteFailure::NoProgress),
                n if n > 0 => {
                    assert!(n as u32 <= len, "kernel wrote more than asked");
                    done += n as usize;
                }
                n if is_retryable(-n) && retries < RETRY_LIMIT => retries += 1,
                n => return Err(WriteFailure::Errno(-n)),
            }
        }
        Ok(())
    }

    /// Writes independent `(offset, bytes)` pieces of `fd` in one batch (one kernel entry
    /// on the ring), completing any short or interrupted piece afterwards.
    pub(crate) fn write_batch(
        &mut self,
        fd: RawFd,
        pieces: &[(u64, &[u8])],
    ) -> Result<(), WriteFailure> {
        self.flush(fd, pieces, None)
            .map_err(|failure| match failure {
                FlushFailure::Write(write) => write,
                FlushFailure::Sync(errno) => WriteFailure::Errno(errno),
            })
    }

    /// The write-behind flush: writes `pieces` of `fd` and, with `sync`, makes them durable
    /// — all in one submission when the batch fits the ring. Returns the first failure;
    /// a write failure takes precedence over the sync that depended on it.
    ///
    /// * `SyncPlan::Linked`: writes and a `SyncAfterWrites` in one batch (plus the
    ///   independent directory sync alongside, so both syncs overlap).
    /// * `SyncPlan::Separate`: the writes as one batch, then the sync(s) as another.
    pub(crate) fn flush(
        &mut self,
        fd: RawFd,
        pieces: &[(u64, &[u8])],
        sync: Option<SyncRequest>,
    ) -> Result<(), FlushFailure> {
        let linked = matches!(
            sync,
            Some(SyncRequest {
                plan: SyncPlan::Linked,
                ..
            })
        ) && pieces.len() + 2 <= MAX_BATCH;
        let mut ops = [Op::Sync {
            fd,
            data_only: true,
        }; MAX_BATCH];
        let mut results = [0i32; MAX_BATCH];
        if linked {
            let request = sync.expect("linked implies a sync request");
            let mut count = 0;
            for (offset, bytes) in pieces {
                ops[count] = write_op(fd, *offset, bytes);
                count += 1;
            }
            let file_sync = count;
            count += push_syncs(&mut ops[count..], fd, request, true);
            // SAFETY: every buffer is borrowed from `pieces`, which outlives this call.
            unsafe { self.perform(&ops[..count], &mut results[..count]) }
                .map_err(|errno| FlushFailure::Write(WriteFailure::Errno(errno)))?;
            self.finish_writes(fd, pieces, &results[..pieces.len()])
                .map_err(FlushFailure::from)?;
            // A failed directory sync is ignored, as os_unix.c does: some filesystems
            // cannot sync a directory.
            let sync_result = results[file_sync];
            if sync_result >= 0 {
                return Ok(());
            }
            if sync_result != -libc::ECANCELED && !is_retryable(-sync_result) {
                return Err(FlushFailure::Sync(-sync_result));
            }
            // Cancelled because a write was short (now completed) or interrupted: sync again.
            return self.sync(fd, request.data_only).map_err(FlushFailure::Sync);
        }
        for chunk in pieces.chunks(MAX_BATCH) {
            for (slot, (offset, bytes)) in ops.iter_mut().zip(chunk) {
                *slot = write_op(fd, *offset, bytes);
            }
            let count = chunk.len();
            // SAFETY: every buffer is borrowed from `pieces`, which outlives this call.
            unsafe { self.perform(&ops[..count], &mut results[..count]) }
                .map_err(|errno| FlushFailure::Write(WriteFailure::Errno(errno)))?;
            self.finish_writes(fd, chunk, &results[..count])
                .map_err(FlushFailure::from)?;
        }
        if let Some(request) = sync {
            let count = push_syncs(&mut ops, fd, request, false);
            // SAFETY: sync ops carry no buffers.
            unsafe { self.perform(&ops[..count], &mut results[..count]) }
                .map_err(FlushFailure::Sync)?;
            match results[0] {
                result if result >= 0 => {}
                result if is_retryable(-result) => self
                    .sync(fd, request.data_only)
                    .map_err(FlushFailure::Sync)?,
                result => return Err(FlushFailure::Sync(-result)),
            }
        }
        Ok(())
    }

    /// Checks a batch's write results, finishing short or interrupted pieces one by one.
    fn finish_writes(
        &mut self,
        fd: RawFd,
        pieces: &[(u64, &[u8])],
        results: &[i32],
    ) -> Result<(), WriteFailure> {
        let mut first_failure = None;
        for ((offset, bytes), &result) in pieces.iter().zip(results) {
            if result == bytes.len() as i32 {
                continue;
            }
            let outcome = if result == 0 && !bytes.is_empty() {
                Err(WriteFailure::NoProgress)
            } else if result < 0 && !is_retryable(-result) && result != -libc::ECANCELED {
                Err(WriteFailure::Errno(-result))
            } else {
                let written = result.max(0) as usize;
                self.write_at(fd, &bytes[written..], offset + written as u64)
            };
            if let Err(failure) = outcome {
                first_failure.get_or_insert(failure);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    pub(crate) fn sync(&mut self, fd: RawFd, data_only: bool) -> Result<(), i32> {
        self.simple(Op::Sync { fd, data_only })
    }

    pub(crate) fn truncate(&mut self, fd: RawFd, len: u64) -> Result<(), i32> {
        self.simple(Op::Truncate { fd, len })
    }

    fn simple(&mut self, op: Op) -> Result<(), i32> {
        let mut retries = 0;
        loop {
            match self.perform_one(op) {
                n if n >= 0 => return Ok(()),
                n if is_retryable(-n) && retries < RETRY_LIMIT => retries += 1,
                n => return Err(-n),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn pread_fully_reads_whole_short_and_failed() {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &[7u8; 100]).unwrap();
        let fd = file.as_raw_fd();
        let mut buf = [0u8; 50];
        assert_eq!(pread_fully(fd, &mut buf, 10), (Ok(50), 1));
        assert_eq!(buf, [7u8; 50]);
        // Past the end: the first pread comes back short, the loop continues from there
        // and finds EOF.
        let mut buf = [0u8; 200];
        let (outcome, calls) = pread_fully(fd, &mut buf, 0);
        assert_eq!(outcome, Ok(100));
        assert_eq!(calls, 2);
        assert_eq!(&buf[..100], &[7u8; 100][..]);
        // Wholly past the end: one pread, which returns 0, is the answer (os_unix.c makes
        // one too; SQLite does this on every rollback commit).
        let mut buf = [1u8; 8];
        assert_eq!(pread_fully(fd, &mut buf, 512), (Ok(0), 1));
        assert_eq!(pread_fully(-1, &mut buf, 0).0, Err(libc::EBADF));
    }
}
