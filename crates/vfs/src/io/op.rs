//! One I/O operation ([`Op`]), the [`Engine`] interface that performs batches of them,
//! and the retry rules every engine path shares. The leaf of `io/`.
//!
//! **Buffer-lifetime rule.** [`Op`] carries raw pointers. `Engine::perform` returns only
//! after every op it was given has completed (its completion reaped), so a buffer only
//! has to outlive the `perform` call that names it. No I/O is ever in flight between two
//! VFS method calls; that is what lets a file move between threads (SQLite's
//! multi-thread mode) while each thread owns its own ring. Building an `Op` is safe;
//! `unsafe` starts at `perform`, whose caller vouches for the buffers.
//!
//! An op names its descriptor by number, as an SQE does: the file that owns it
//! (`sys/fd.rs`) keeps it open until the op has completed, and a file's queued writes
//! are flushed before it closes.

use std::os::fd::RawFd;

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

impl Op {
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
    /// # Safety
    /// Every pointer in `ops` must be valid for its length until this call returns.
    unsafe fn perform(&mut self, ops: &[Op], results: &mut [i32]) -> Result<u64, i32>;
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

pub(crate) fn write_op(fd: RawFd, offset: u64, bytes: &[u8]) -> Op {
    assert!(bytes.len() <= i32::MAX as usize);
    Op::Write {
        fd,
        buf: bytes.as_ptr(),
        len: bytes.len() as u32,
        offset,
    }
}
