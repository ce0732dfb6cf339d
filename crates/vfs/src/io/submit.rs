//! [`Submitter`]: performs ops for one file through its engine and counts them; the
//! retry, short-transfer and flush-plan logic (linked or separate syncs) every caller
//! shares. It returns errno values and typed flush failures; [`FlushFailure`] becomes a
//! SQLite result code through [`Failure`], the one mapping of the crate.

use std::os::fd::RawFd;

use crate::config::SyncPlan;
use crate::error::Failure;
use crate::stats::{IoStats, SharedStats};

use super::engine::EngineKind;
use super::op::{
    batch_array, is_retryable, write_op, Op, OpKind, MAX_BATCH, RETRY_LIMIT, SHORT_BATCH,
};
use super::record;

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
/// other order is slower: docs/DESIGN.md, "Parity with `unix` comes first"); on the ring
/// the directory's is not linked, so the two overlap.
fn push_syncs(ops: &mut [Op<'_>], fd: RawFd, request: SyncRequest, after_writes: bool) -> usize {
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

/// A failed flush as SQLite sees it: the failed write's errno as a write error, a write
/// that made no progress as SQLITE_FULL, a failed sync as SQLITE_IOERR_FSYNC.
impl From<FlushFailure> for Failure {
    fn from(failure: FlushFailure) -> Failure {
        match failure {
            FlushFailure::Write(write) => write.into(),
            FlushFailure::Sync(errno) => Failure::Fsync(errno),
        }
    }
}

/// A failed write as SQLite sees it (see [`Failure::from_write_errno`]).
impl From<WriteFailure> for Failure {
    fn from(failure: WriteFailure) -> Failure {
        match failure {
            WriteFailure::Errno(errno) => Failure::from_write_errno(errno),
            WriteFailure::NoProgress => Failure::Full(0),
        }
    }
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
    /// Performs `ops` through the file's engine (`Engine::perform`) and counts them.
    pub(crate) fn perform(&mut self, ops: &mut [Op<'_>], results: &mut [i32]) -> Result<(), i32> {
        let started = crate::trace::start(crate::trace::TARGET_IO);
        let outcome = self.engine.perform(ops, results);
        if let Some(started) = started {
            record::batch(started, self.engine.name(), ops, results, outcome);
        }
        let entries = outcome?;
        let fsyncs = ops.iter().filter(|op| op.kind() == OpKind::Sync).count() as u64;
        for (index, value) in [
            (SharedStats::OPS, ops.len() as u64),
            (SharedStats::KERNEL_ENTRIES, entries),
            (SharedStats::FSYNCS, fsyncs),
        ] {
            if value != 0 {
                self.file_stats.add_field(index, value, true);
                self.vfs_stats.add_field(index, value, false);
            }
        }
        Ok(())
    }

    /// Adds counters the caller measured (what the ops themselves do is counted by
    /// `perform`).
    pub(crate) fn count(&mut self, delta: IoStats) {
        self.file_stats.add_single_writer(&delta);
        self.vfs_stats.add(&delta);
    }

    /// Asks the kernel to read database pages `pages` (numbered from 1, of
    /// `page_size_bytes`) into its page cache: runs of consecutive pages become one range,
    /// at most [`MAX_BATCH`] ranges a batch (one ring submission on the io_uring engine).
    /// Counted as `prefetched_pages`; failures are not reported, since a prefetch changes
    /// nothing but speed.
    pub(crate) fn prefetch_pages(&mut self, fd: RawFd, pages: &[u32], page_size_bytes: u32) {
        let page_bytes = u64::from(page_size_bytes);
        let mut ops = batch_array::<MAX_BATCH>(fd);
        let mut count = 0usize;
        let mut index = 0usize;
        let mut delta = IoStats {
            prefetched_pages: pages.len() as u64,
            ..IoStats::default()
        };
        while index < pages.len() {
            let first = pages[index];
            let mut run = 1usize;
            while index + run < pages.len()
                && u64::from(pages[index + run]) == u64::from(first) + run as u64
                && (run as u64 + 1) * page_bytes <= u64::from(u32::MAX)
            {
                run += 1;
            }
            ops[count] = Op::Prefetch {
                fd,
                offset: u64::from(first).saturating_sub(1) * page_bytes,
                len: (run as u64 * page_bytes) as u32,
            };
            count += 1;
            index += run;
            if count == MAX_BATCH || index == pages.len() {
                let started = crate::trace::start(crate::trace::TARGET_IO);
                let outcome = self.engine.prefetch(&mut ops[..count]);
                if let Some(started) = started {
                    record::batch(
                        started,
                        self.engine.name(),
                        &ops[..count],
                        &[0; MAX_BATCH][..count],
                        outcome,
                    );
                }
                delta.ops += count as u64;
                delta.kernel_entries += outcome.unwrap_or(0);
                count = 0;
            }
        }
        self.count(delta);
    }

    fn perform_one(&mut self, op: &mut Op<'_>) -> i32 {
        let mut result = [0i32];
        match self.perform(std::slice::from_mut(op), &mut result) {
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
            let len = (buf.len() - done).min(i32::MAX as usize) as u32;
            let result = self.perform_one(&mut Op::Read {
                fd,
                buf: &mut buf[done..done + len as usize],
                offset: offset + done as u64,
            });
            match result {
                0 => break,
                // More than asked: a replaced `pread` (the kernel never does).
                n if n > 0 && n as u32 > len => return Err(libc::EIO),
                n if n > 0 => done += n as usize,
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
            let len = (buf.len() - done).min(i32::MAX as usize) as u32;
            let result = self.perform_one(&mut Op::Write {
                fd,
                buf: &buf[done..done + len as usize],
                offset: offset + done as u64,
            });
            match result {
                0 => return Err(WriteFailure::NoProgress),
                // More than asked: a replaced `pwrite` (the kernel never does).
                n if n > 0 && n as u32 > len => return Err(WriteFailure::Errno(libc::EIO)),
                n if n > 0 => done += n as usize,
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
        // The same flush either way; only the arrays it builds its batches in differ.
        if pieces.len() + 2 <= SHORT_BATCH {
            self.flush_in::<SHORT_BATCH>(fd, pieces, sync, linked)
        } else {
            self.flush_in::<MAX_BATCH>(fd, pieces, sync, linked)
        }
    }

    /// [`Submitter::flush`] with batches built in arrays of `N` ops; `N` holds a linked
    /// batch whole.
    fn flush_in<const N: usize>(
        &mut self,
        fd: RawFd,
        pieces: &[(u64, &[u8])],
        sync: Option<SyncRequest>,
        linked: bool,
    ) -> Result<(), FlushFailure> {
        assert!(N <= MAX_BATCH && (!linked || pieces.len() + 2 <= N));
        let mut ops = batch_array::<N>(fd);
        let mut results = [0i32; N];
        if linked {
            let request = sync.expect("linked implies a sync request");
            let mut count = 0;
            for (offset, bytes) in pieces {
                ops[count] = write_op(fd, *offset, bytes);
                count += 1;
            }
            let file_sync = count;
            count += push_syncs(&mut ops[count..], fd, request, true);
            self.perform(&mut ops[..count], &mut results[..count])
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
        for chunk in pieces.chunks(N) {
            for (slot, (offset, bytes)) in ops.iter_mut().zip(chunk) {
                *slot = write_op(fd, *offset, bytes);
            }
            let count = chunk.len();
            self.perform(&mut ops[..count], &mut results[..count])
                .map_err(|errno| FlushFailure::Write(WriteFailure::Errno(errno)))?;
            self.finish_writes(fd, chunk, &results[..count])
                .map_err(FlushFailure::from)?;
        }
        if let Some(request) = sync {
            let count = push_syncs(&mut ops, fd, request, false);
            self.perform(&mut ops[..count], &mut results[..count])
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
            } else if result as usize > bytes.len() && result > 0 {
                // More than asked: a replaced `pwrite` (the kernel never does).
                Err(WriteFailure::Errno(libc::EIO))
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

    fn simple(&mut self, mut op: Op<'_>) -> Result<(), i32> {
        let mut retries = 0;
        loop {
            match self.perform_one(&mut op) {
                n if n >= 0 => return Ok(()),
                n if is_retryable(-n) && retries < RETRY_LIMIT => retries += 1,
                n => return Err(-n),
            }
        }
    }
}
