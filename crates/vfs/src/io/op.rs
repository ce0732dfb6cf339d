//! One I/O operation ([`Op`]), the [`Engine`] interface that performs batches of them,
//! and the retry rules every engine path shares. The leaf of `io/`.
//!
//! **Buffer-lifetime rule.** An [`Op`] borrows its buffer (`&'buf mut [u8]` to read into,
//! `&'buf [u8]` to write from) for as long as it exists, and `Engine::perform` takes the
//! ops by `&mut` and returns only after every op it was given has completed (its
//! completion reaped), so the borrow checker keeps each buffer alive and untouched for
//! the whole `perform` call, and no I/O is ever in flight between two VFS method calls;
//! that is what lets a file move between threads (SQLite's multi-thread mode) while each
//! thread owns its own ring. Building and performing an op is safe: `unsafe` starts where
//! a buffer's address goes to the kernel (`io/uring.rs`), whose engine keeps the rule
//! (it reaps every completion before it returns, and aborts the process rather than
//! return while the kernel may still hold a buffer).
//!
//! An op names its descriptor by number, as an SQE does: the file that owns it
//! (`sys/fd.rs`) keeps it open until the op has completed, and a file's queued writes
//! are flushed before it closes.

use std::os::fd::RawFd;

/// One I/O operation, borrowing its buffer for `'buf`. Not `Copy`: a read's buffer is
/// borrowed mutably, once. A buffer holds at most `i32::MAX` bytes (a result is an `i32`).
pub(crate) enum Op<'buf> {
    Read {
        fd: RawFd,
        buf: &'buf mut [u8],
        offset: u64,
    },
    Write {
        fd: RawFd,
        buf: &'buf [u8],
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
    /// Asks the kernel to bring `len` bytes at `offset` into its page cache
    /// (`POSIX_FADV_WILLNEED`): it completes once the read is started, not when the data
    /// has arrived, and carries no buffer, so nothing of it outlives `perform`. Read-ahead
    /// (`readahead.rs`) issues these; a failure changes nothing but speed.
    Prefetch {
        fd: RawFd,
        offset: u64,
        len: u32,
    },
}

/// An op as it is logged: a buffer by its length, not its bytes.
impl std::fmt::Debug for Op<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.kind() {
            OpKind::Read => "Read",
            OpKind::Write => "Write",
            OpKind::Sync if matches!(self, Op::SyncAfterWrites { .. }) => "SyncAfterWrites",
            OpKind::Sync => "Sync",
            OpKind::Truncate => "Truncate",
            OpKind::Prefetch => "Prefetch",
        };
        match self {
            Op::Read { fd, offset, .. } | Op::Write { fd, offset, .. } => f
                .debug_struct(name)
                .field("fd", fd)
                .field("len", &self.buffer_len())
                .field("offset", offset)
                .finish(),
            Op::Sync { fd, data_only } | Op::SyncAfterWrites { fd, data_only } => f
                .debug_struct(name)
                .field("fd", fd)
                .field("data_only", data_only)
                .finish(),
            Op::Truncate { fd, len } => f
                .debug_struct(name)
                .field("fd", fd)
                .field("len", len)
                .finish(),
            Op::Prefetch { fd, offset, len } => f
                .debug_struct(name)
                .field("fd", fd)
                .field("offset", offset)
                .field("len", len)
                .finish(),
        }
    }
}

impl Op<'_> {
    /// The bytes a read or write transfers (0 for other ops).
    pub(crate) fn buffer_len(&self) -> u32 {
        match self {
            Op::Read { buf, .. } => buf.len() as u32,
            Op::Write { buf, .. } => buf.len() as u32,
            _ => 0,
        }
    }

    /// The same op, borrowing its buffer from `self` for a shorter time (to hand a part
    /// of a batch to another engine).
    pub(crate) fn reborrow(&mut self) -> Op<'_> {
        match self {
            Op::Read { fd, buf, offset } => Op::Read {
                fd: *fd,
                buf,
                offset: *offset,
            },
            Op::Write { fd, buf, offset } => Op::Write {
                fd: *fd,
                buf,
                offset: *offset,
            },
            Op::Sync { fd, data_only } => Op::Sync {
                fd: *fd,
                data_only: *data_only,
            },
            Op::SyncAfterWrites { fd, data_only } => Op::SyncAfterWrites {
                fd: *fd,
                data_only: *data_only,
            },
            Op::Truncate { fd, len } => Op::Truncate { fd: *fd, len: *len },
            Op::Prefetch { fd, offset, len } => Op::Prefetch {
                fd: *fd,
                offset: *offset,
                len: *len,
            },
        }
    }

    pub(crate) fn kind(&self) -> OpKind {
        match self {
            Op::Read { .. } => OpKind::Read,
            Op::Write { .. } => OpKind::Write,
            Op::Sync { .. } | Op::SyncAfterWrites { .. } => OpKind::Sync,
            Op::Truncate { .. } => OpKind::Truncate,
            Op::Prefetch { .. } => OpKind::Prefetch,
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
    Prefetch,
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
    /// Every op has completed when this returns (the buffer-lifetime rule): an engine
    /// that hands buffers to the kernel reaps them all first.
    fn perform(&mut self, ops: &mut [Op<'_>], results: &mut [i32]) -> Result<u64, i32>;
}

/// How many times an op is reissued after EINTR/EAGAIN before the error is reported.
/// Regular files do not return EAGAIN for blocking I/O; the bound turns a kernel or
/// seccomp oddity into an error instead of a livelock.
pub(crate) const RETRY_LIMIT: u32 = 64;

pub(crate) fn is_retryable(errno: i32) -> bool {
    errno == libc::EINTR || errno == libc::EAGAIN
}

/// Most ops submitted in one batch; longer lists are split into several batches.
pub(crate) const MAX_BATCH: usize = 64;

pub(crate) fn write_op(fd: RawFd, offset: u64, bytes: &[u8]) -> Op<'_> {
    assert!(bytes.len() <= i32::MAX as usize);
    Op::Write {
        fd,
        buf: bytes,
        offset,
    }
}

/// Ops in a short batch array: a commit's few coalesced pieces and its two syncs fit,
/// so the common flush fills and moves a quarter of a kilobyte instead of
/// [`MAX_BATCH`]'s two.
pub(crate) const SHORT_BATCH: usize = 8;

/// Placeholders for a batch array of `N` ops, overwritten before use: a plain sync of
/// `fd`.
pub(crate) fn batch_array<'buf, const N: usize>(fd: RawFd) -> [Op<'buf>; N] {
    std::array::from_fn(|_| Op::Sync {
        fd,
        data_only: true,
    })
}
