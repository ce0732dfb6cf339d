//! io_uring over one file: one ring per thread with `entries` operations in flight,
//! writing a range (`batch` has twice as many buffers: see [`Strategy::buffers_per_ring`]) or
//! reading a list of offsets. The only file of `bench io` that drives a ring for the
//! file models (the WAL model's one-op commits are in `wal`).
//!
//! Soundness rule for everything below: a submitted write reads its buffer, and a
//! submitted read writes its buffer, asynchronously, so the buffer must stay allocated
//! and unmoved, and must not be read or written by us, from the moment its entry is
//! pushed until its completion is reaped. Buffers live in [`RingFile::slots`] (heap
//! memory that does not move when the Vec or the ring moves), a slot is only touched
//! after its completion was reaped, and `Drop` drains every operation in flight before
//! the buffers are freed (or leaks them if the kernel cannot be waited for).

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};

use anyhow::{anyhow, bail, Context};
use io_uring::{opcode, squeue, types, IoUring};

use super::buffer::AlignedBuf;
use super::options::{RingFlags, Strategy};
use super::pattern;

/// How long the shared SQPOLL thread keeps polling after the queue goes quiet.
const SQPOLL_IDLE_MS: u32 = 1000;
/// A write that keeps failing with EINTR/EAGAIN this often is reported, not retried forever.
const MAX_RETRIES: u32 = 1000;

/// One operation in flight (or waiting to be resubmitted).
struct Slot {
    buf: AlignedBuf,
    offset: u64,
    len: usize,
    /// Bytes already transferred: a short write or read resubmits the rest from here.
    done: usize,
    retries: u32,
}

/// Which way a ring's operations move the data.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Read,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Read => "read",
        }
    }

    /// What a completion of 0 bytes means.
    fn nothing_transferred(self) -> &'static str {
        match self {
            Op::Write => "write made no progress (0 bytes; disk full?)",
            Op::Read => "read returned 0 bytes (past the end of the file)",
        }
    }
}

/// What a read run did: completed reads and bytes read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadTally {
    /// Blocks read in full.
    pub reads: u64,
    pub bytes: u64,
}

/// Creates a ring; with SQPOLL, `attach_to` is the ring whose poller thread
/// is shared, so 100 threads do not spawn 100 busy-polling kernel threads.
///
/// Without SQPOLL each ring is created and driven by one thread, so it asks for
/// what fio asks for (Linux 6.1+): SINGLE_ISSUER, and DEFER_TASKRUN +
/// COOP_TASKRUN, which run completion work when the thread waits instead of
/// interrupting it with an IPI per completion. Older kernels reject the flags
/// with EINVAL; the ring is then created without them.
pub fn create_ring(
    entries: u32,
    flags: RingFlags,
    attach_to: Option<RawFd>,
) -> io::Result<IoUring> {
    if flags.sqpoll {
        let mut builder = IoUring::builder();
        builder.setup_sqpoll(SQPOLL_IDLE_MS);
        if let Some(fd) = attach_to {
            builder.setup_attach_wq(fd);
        }
        return builder.build(entries);
    }
    let mut builder = IoUring::builder();
    builder
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun();
    match builder.build(entries) {
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
            IoUring::builder().build(entries)
        }
        result => result,
    }
}

/// Turns a ring creation error into the cause and the remedy.
pub fn explain_ring_error(error: io::Error, flags: RingFlags) -> anyhow::Error {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .map(|s| s.trim().to_string());
    let fallback = "or leave io_uring out: --methods dd,blocking,pwrite";
    match error.raw_os_error() {
        Some(libc::ENOSYS) => anyhow!(
            "io_uring is unavailable: this kernel has no io_uring (ENOSYS); use a kernel built with CONFIG_IO_URING, {fallback}"
        ),
        Some(libc::EPERM) | Some(libc::EACCES) => match disabled.as_deref() {
            Some("2") => anyhow!(
                "io_uring is unavailable: disabled for every process (sysctl kernel.io_uring_disabled=2); run `sysctl -w kernel.io_uring_disabled=0` as root, {fallback}"
            ),
            Some("1") => anyhow!(
                "io_uring is unavailable: restricted to the group in kernel.io_uring_group (sysctl kernel.io_uring_disabled=1); add this user to that group or set it to 0, {fallback}"
            ),
            _ => anyhow!(
                "io_uring is unavailable: the kernel refused to create a ring (EPERM), most likely a seccomp filter (containers block io_uring by default; docker: --security-opt seccomp=unconfined), {fallback}"
            ),
        },
        Some(libc::ENOMEM) => anyhow!(
            "io_uring ring could not be allocated (ENOMEM): raise the locked-memory limit (ulimit -l) or lower --entries/--threads"
        ),
        Some(libc::EINVAL) if flags.sqpoll => anyhow!(
            "the kernel rejected an SQPOLL ring (EINVAL): drop --sqpoll (sharing one poller needs Linux 5.12+)"
        ),
        _ => anyhow!("io_uring ring setup failed: {error}; {fallback}"),
    }
}

/// What the ring needs to know about the run.
pub struct RingJob<'a> {
    pub method_name: &'a str,
    pub strategy: Strategy,
    pub seed: u64,
    pub inject_failure_at: Option<u64>,
}

pub struct RingFile {
    // Field order matters for drop: Drop::drop drains first, then `ring` is
    // closed, then `slots` (the buffers) are freed.
    ring: IoUring,
    slots: Vec<Slot>,
    /// At most this many operations in flight (the ring's size: E, or the queue depth).
    entries: usize,
    in_flight: usize,
    fd: RawFd,
    flags: RingFlags,
}

impl RingFile {
    /// A ring of `entries` with [`Strategy::buffers_per_ring`] block-sized buffers, optionally
    /// registered with the kernel. `fd` must outlive the ring.
    pub fn new(
        fd: RawFd,
        entries: u32,
        strategy: Strategy,
        block_size_bytes: usize,
        flags: RingFlags,
        attach_to: Option<RawFd>,
    ) -> anyhow::Result<RingFile> {
        let ring =
            create_ring(entries, flags, attach_to).map_err(|e| explain_ring_error(e, flags))?;
        let buffers = strategy.buffers_per_ring(entries);
        let mut slots = Vec::with_capacity(buffers as usize);
        for _ in 0..buffers {
            slots.push(Slot {
                buf: AlignedBuf::new(block_size_bytes)?,
                offset: 0,
                len: 0,
                done: 0,
                retries: 0,
            });
        }
        let writer = RingFile {
            ring,
            slots,
            entries: entries as usize,
            in_flight: 0,
            fd,
            flags,
        };
        if flags.register_buffers {
            let iovecs: Vec<libc::iovec> = writer
                .slots
                .iter()
                .map(|slot| libc::iovec {
                    iov_base: slot.buf.as_ptr() as *mut libc::c_void,
                    iov_len: slot.buf.len(),
                })
                .collect();
            // SAFETY: the buffers stay allocated and unmoved for the whole life of the
            // ring: they are owned by `writer.slots`, which is dropped after `ring`
            // (field order) and never resized.
            unsafe { writer.ring.submitter().register_buffers(&iovecs) }.map_err(|e| {
                if e.raw_os_error() == Some(libc::ENOMEM) {
                    anyhow!("--register-buffers: the kernel could not pin the buffers (ENOMEM); raise `ulimit -l` or lower --entries/--threads")
                } else {
                    anyhow!("--register-buffers failed: {e}")
                }
            })?;
        }
        if flags.register_files {
            writer
                .ring
                .submitter()
                .register_files(&[fd])
                .map_err(|e| anyhow!("--register-files failed: {e}"))?;
        }
        Ok(writer)
    }

    /// The SQE for the rest of slot `index` not yet transferred. Building is safe;
    /// only pushing it (which hands the buffer to the kernel) is unsafe.
    fn entry(&self, index: usize, op: Op) -> squeue::Entry {
        let slot = &self.slots[index];
        let buf = slot.buf.as_ptr().wrapping_add(slot.done);
        let len = (slot.len - slot.done) as u32;
        let offset = slot.offset + slot.done as u64;
        let fixed = index as u16;
        let (fixed_buffer, fixed_file) = (self.flags.register_buffers, self.flags.register_files);
        let entry = match (op, fixed_buffer, fixed_file) {
            (Op::Write, true, true) => opcode::WriteFixed::new(types::Fixed(0), buf, len, fixed)
                .offset(offset)
                .build(),
            (Op::Write, true, false) => {
                opcode::WriteFixed::new(types::Fd(self.fd), buf, len, fixed)
                    .offset(offset)
                    .build()
            }
            (Op::Write, false, true) => opcode::Write::new(types::Fixed(0), buf, len)
                .offset(offset)
                .build(),
            (Op::Write, false, false) => opcode::Write::new(types::Fd(self.fd), buf, len)
                .offset(offset)
                .build(),
            (Op::Read, true, true) => {
                opcode::ReadFixed::new(types::Fixed(0), buf.cast_mut(), len, fixed)
                    .offset(offset)
                    .build()
            }
            (Op::Read, true, false) => {
                opcode::ReadFixed::new(types::Fd(self.fd), buf.cast_mut(), len, fixed)
                    .offset(offset)
                    .build()
            }
            (Op::Read, false, true) => opcode::Read::new(types::Fixed(0), buf.cast_mut(), len)
                .offset(offset)
                .build(),
            (Op::Read, false, false) => opcode::Read::new(types::Fd(self.fd), buf.cast_mut(), len)
                .offset(offset)
                .build(),
        };
        entry.user_data(index as u64)
    }

    fn push(&mut self, index: usize, op: Op) -> anyhow::Result<()> {
        // The ring may round its size up; the model's depth is `entries`.
        assert!(
            self.in_flight < self.entries,
            "more than E operations in flight"
        );
        let entry = self.entry(index, op);
        // SAFETY: the entry points into slots[index].buf, which is allocated, not
        // touched by us until this entry's completion is reaped (the slot is out of
        // the free list), and kept alive past any in-flight operation by Drop's drain.
        // A read writes the buffer through the pointer the allocation handed out; no
        // Rust reference to that memory exists while the read is in flight.
        unsafe { self.ring.submission().push(&entry) }.map_err(|_| {
            anyhow!("submission queue full (internal error: more than --entries in flight)")
        })?;
        self.in_flight += 1;
        Ok(())
    }

    /// Submits what is queued and sleeps in the kernel until `want` completions are
    /// ready (no busy spinning). EINTR is retried: nothing submitted is lost.
    fn submit_and_wait(&mut self, want: usize) -> io::Result<()> {
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                // Kernel short of resources or CQ backlog: reap what is there first.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY)) => {
                    if !self.ring.completion().is_empty() {
                        return Ok(());
                    }
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Takes a free slot and fills it with the next block of `range`; `None` when
    /// the range is used up or no slot is free.
    fn fill_next(
        &mut self,
        free: &mut Vec<usize>,
        next: &mut u64,
        range: &Range<u64>,
        block_size_bytes: u64,
        job: &RingJob,
    ) -> anyhow::Result<Option<usize>> {
        if *next >= range.end {
            return Ok(None);
        }
        let Some(index) = free.pop() else {
            return Ok(None);
        };
        let at = *next;
        let len = (range.end - at).min(block_size_bytes) as usize;
        if job.inject_failure_at == Some(at) {
            bail!("{} at offset {at}: injected failure (EIO)", job.method_name);
        }
        let slot = &mut self.slots[index];
        pattern::fill(&mut slot.buf.as_mut_slice()[..len], job.seed, at);
        (slot.offset, slot.len, slot.done, slot.retries) = (at, len, 0, 0);
        *next += len as u64;
        Ok(Some(index))
    }

    /// Reaps every completion the ring holds (into `completions`, reused). A slot whose
    /// operation failed with EINTR or EAGAIN (up to [`MAX_RETRIES`] times) or transferred
    /// only part of its bytes goes to `resubmit`; one done in full to `finished`. Returns
    /// the bytes transferred; an error names `method_name`, the offset and `op`.
    fn reap(
        &mut self,
        completions: &mut Vec<(u64, i32)>,
        op: Op,
        method_name: &str,
        resubmit: &mut Vec<usize>,
        mut finished: impl FnMut(usize, &Slot) -> anyhow::Result<()>,
    ) -> anyhow::Result<u64> {
        completions.clear();
        completions.extend(
            self.ring
                .completion()
                .map(|cqe| (cqe.user_data(), cqe.result())),
        );
        // Counted before handling them: an error below must not make Drop
        // wait for completions that were already reaped.
        self.in_flight -= completions.len();
        let mut bytes = 0;
        for &(user_data, result) in completions.iter() {
            let index = user_data as usize;
            let slot = self
                .slots
                .get_mut(index)
                .ok_or_else(|| anyhow!("completion with unknown user_data {user_data}"))?;
            let at = slot.offset + slot.done as u64;
            if result < 0 {
                let errno = -result;
                if (errno == libc::EINTR || errno == libc::EAGAIN) && slot.retries < MAX_RETRIES {
                    slot.retries += 1;
                    resubmit.push(index);
                    continue;
                }
                bail!(
                    "{method_name} at offset {at}: {} failed: {}",
                    op.name(),
                    io::Error::from_raw_os_error(errno)
                );
            }
            if result == 0 {
                bail!("{method_name} at offset {at}: {}", op.nothing_transferred());
            }
            slot.done += result as usize;
            bytes += result as u64;
            if slot.done < slot.len {
                // Short transfer: continue with the rest of the same buffer.
                resubmit.push(index);
            } else {
                finished(index, slot)?;
            }
        }
        Ok(bytes)
    }

    /// Writes `range` of the file in block-size writes with up to `entries` in flight.
    pub fn write_range(
        &mut self,
        range: Range<u64>,
        block_size_bytes: u64,
        job: &RingJob,
    ) -> anyhow::Result<()> {
        let mut free: Vec<usize> = (0..self.slots.len()).rev().collect();
        // batch only: the next batch, filled while the current one is in flight.
        let mut filled: VecDeque<usize> = VecDeque::with_capacity(self.entries);
        let mut resubmit: Vec<usize> = Vec::new();
        let mut completions: Vec<(u64, i32)> = Vec::with_capacity(self.entries);
        let mut next = range.start;

        loop {
            // batch: push only once the whole previous batch completed.
            // refill: top up whenever a slot is free.
            let may_push = job.strategy == Strategy::Refill || self.in_flight == 0;
            while may_push && self.in_flight < self.entries {
                let index = if let Some(index) = resubmit.pop() {
                    index
                } else if let Some(index) = filled.pop_front() {
                    index
                } else if let Some(index) =
                    self.fill_next(&mut free, &mut next, &range, block_size_bytes, job)?
                {
                    index
                } else {
                    break;
                };
                self.push(index, Op::Write)?;
            }
            if self.in_flight == 0 {
                assert!(filled.is_empty() && resubmit.is_empty());
                return Ok(());
            }
            if job.strategy == Strategy::Batch {
                // Hand the batch to the device first, then fill the next one
                // into the other buffer set while it is written.
                self.submit_and_wait(0)
                    .with_context(|| format!("{}: io_uring_enter failed", job.method_name))?;
                while filled.len() < self.entries {
                    match self.fill_next(&mut free, &mut next, &range, block_size_bytes, job)? {
                        Some(index) => filled.push_back(index),
                        None => break,
                    }
                }
            }
            let want = match job.strategy {
                Strategy::Batch => self.in_flight,
                Strategy::Refill => 1,
            };
            self.submit_and_wait(want)
                .with_context(|| format!("{}: io_uring_enter failed", job.method_name))?;

            self.reap(
                &mut completions,
                Op::Write,
                job.method_name,
                &mut resubmit,
                |index, _| {
                    free.push(index);
                    Ok(())
                },
            )?;
        }
    }

    /// Reads `block_size_bytes` at each of `offsets` with up to `entries` reads in
    /// flight: a slot is refilled with the next offset as soon as its read completed,
    /// and every read that became ready is submitted with one `io_uring_enter`.
    /// `on_read(offset, data)` sees each block once its read completed in full (a short
    /// read resubmits the rest). Allocates nothing per read.
    pub fn read_offsets<F>(
        &mut self,
        offsets: &[u64],
        block_size_bytes: usize,
        job: &RingJob,
        mut on_read: F,
    ) -> anyhow::Result<ReadTally>
    where
        F: FnMut(u64, &[u8]) -> anyhow::Result<()>,
    {
        if self
            .slots
            .iter()
            .any(|slot| slot.buf.len() < block_size_bytes)
        {
            bail!("internal error: ring buffers smaller than a {block_size_bytes}-byte read");
        }
        let mut free: Vec<usize> = (0..self.entries.min(self.slots.len())).rev().collect();
        let mut resubmit: Vec<usize> = Vec::with_capacity(self.entries);
        let mut completions: Vec<(u64, i32)> = Vec::with_capacity(self.entries);
        let mut next = offsets.iter();
        let mut tally = ReadTally::default();
        loop {
            while self.in_flight < self.entries {
                let index = if let Some(index) = resubmit.pop() {
                    index
                } else if free.is_empty() {
                    break;
                } else if let Some(&at) = next.next() {
                    if job.inject_failure_at == Some(at) {
                        bail!("{} at offset {at}: injected failure (EIO)", job.method_name);
                    }
                    let index = free.pop().unwrap_or_default();
                    let slot = &mut self.slots[index];
                    (slot.offset, slot.len, slot.done, slot.retries) = (at, block_size_bytes, 0, 0);
                    index
                } else {
                    break;
                };
                self.push(index, Op::Read)?;
            }
            if self.in_flight == 0 {
                return Ok(tally);
            }
            self.submit_and_wait(1)
                .with_context(|| format!("{}: io_uring_enter failed", job.method_name))?;
            tally.bytes += self.reap(
                &mut completions,
                Op::Read,
                job.method_name,
                &mut resubmit,
                |index, slot| {
                    tally.reads += 1;
                    on_read(slot.offset, &slot.buf.as_slice()[..slot.len])?;
                    free.push(index);
                    Ok(())
                },
            )?;
        }
    }
}

impl Drop for RingFile {
    fn drop(&mut self) {
        // Wait for every operation still using our buffers (after an error).
        while self.in_flight > 0 {
            if self
                .ring
                .submit_and_wait(1)
                .is_err_and(|e| e.raw_os_error() != Some(libc::EINTR))
            {
                // We cannot prove the kernel is done with the buffers: leak them
                // rather than free memory an operation may still use.
                std::mem::forget(std::mem::take(&mut self.slots));
                return;
            }
            let reaped = self.ring.completion().count();
            self.in_flight = self.in_flight.saturating_sub(reaped);
        }
    }
}

/// Keeps the SQPOLL poller ring that every worker ring of a run attaches to.
pub struct SqpollAnchor {
    ring: IoUring,
}

impl SqpollAnchor {
    pub fn new(flags: RingFlags) -> anyhow::Result<Option<SqpollAnchor>> {
        if !flags.sqpoll {
            return Ok(None);
        }
        let ring = create_ring(1, flags, None).map_err(|e| explain_ring_error(e, flags))?;
        Ok(Some(SqpollAnchor { ring }))
    }

    pub fn fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }
}

/// Fails early, before any file is written, if rings with these settings cannot be made.
pub fn check_available(max_entries: u32, flags: RingFlags) -> anyhow::Result<()> {
    let anchor = SqpollAnchor::new(flags)?;
    create_ring(max_entries, flags, anchor.as_ref().map(SqpollAnchor::fd))
        .map_err(|e| explain_ring_error(e, flags))?;
    Ok(())
}
