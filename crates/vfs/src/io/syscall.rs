//! The plain-syscall backend: one blocking syscall per op, one kernel entry each, made
//! through the system-call table (`sys::calls`), so a replaced call is honoured.
//!
//! Used as the `io_uring_sync` benchmark target (the same VFS code without the ring, to
//! separate the effect of the ring from the effect of batching) and, when the user opts
//! in, as the fallback where io_uring is unavailable.

use std::os::fd::RawFd;

use crate::sys::calls;

use super::op::{is_retryable, Engine, Op, RETRY_LIMIT};

pub(crate) struct SyscallEngine;

fn result_of(ret: isize) -> i32 {
    if ret < 0 {
        -crate::sys::last_errno()
    } else {
        ret.min(i32::MAX as isize) as i32
    }
}

impl Engine for SyscallEngine {
    fn perform(&mut self, ops: &mut [Op<'_>], results: &mut [i32]) -> Result<u64, i32> {
        for index in 0..ops.len() {
            if let Op::SyncAfterWrites { fd, data_only } = ops[index] {
                results[index] = if chain_completed(ops, &results[..index], index, fd) {
                    result_of(if data_only {
                        calls::fdatasync(fd)
                    } else {
                        calls::fsync(fd)
                    } as isize)
                } else {
                    -libc::ECANCELED
                };
                continue;
            }
            results[index] = match &mut ops[index] {
                Op::Read { fd, buf, offset } => result_of(calls::pread(*fd, buf, *offset as i64)),
                Op::Write { fd, buf, offset } => result_of(calls::pwrite(*fd, buf, *offset as i64)),
                Op::Sync {
                    fd,
                    data_only: true,
                } => result_of(calls::fdatasync(*fd) as isize),
                Op::Sync {
                    fd,
                    data_only: false,
                } => result_of(calls::fsync(*fd) as isize),
                Op::Truncate { fd, len } => result_of(calls::ftruncate(*fd, *len as i64) as isize),
                Op::Prefetch { fd, offset, len } => prefetch_by_syscall(*fd, *offset, *len),
                Op::SyncAfterWrites { .. } => unreachable!("handled above"),
            };
        }
        Ok(ops.len() as u64)
    }
}

/// `posix_fadvise(POSIX_FADV_WILLNEED)`: starts reading the range into the page cache and
/// returns. Not a call of os_unix.c, so not in the system-call table (SQLite's tests
/// enumerate the table's names); a failure only forgoes the read-ahead.
pub(crate) fn prefetch_by_syscall(fd: RawFd, offset: u64, len: u32) -> i32 {
    -crate::sys::page_cache::prefetch(fd, offset, len)
}

/// Whether every `Write` of `fd` directly before `ops[sync_index]` completed in full, the
/// condition for a `SyncAfterWrites` to run (io_uring's link semantics, reproduced).
pub(crate) fn chain_completed(ops: &[Op], results: &[i32], sync_index: usize, fd: RawFd) -> bool {
    ops[..sync_index]
        .iter()
        .zip(results)
        .rev()
        .take_while(|(op, _)| matches!(op, Op::Write { fd: write_fd, .. } if *write_fd == fd))
        .all(|(op, &result)| matches!(op, Op::Write { buf, .. } if result == buf.len() as i32))
}

/// Reads into `buf` from `offset` by `pread` until it is full or the file ends, retrying
/// EINTR/EAGAIN and continuing short reads, uncounted; returns the outcome (bytes read, or
/// errno) and the `pread` calls made. The path for reads that go by syscall anyway: SQLite's
/// reads are mostly single pages from the page cache, where the generic batch path's
/// extra instructions per read showed in large-blob reads (docs/DESIGN.md, "A lone read
/// is one `pread`").
#[inline]
pub(crate) fn pread_fully(fd: RawFd, buf: &mut [u8], offset: u64) -> (Result<usize, i32>, u64) {
    if buf.len() <= i32::MAX as usize {
        let n = calls::pread(fd, buf, offset as i64);
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
            if n as usize > buf.len() {
                // More than asked: only a replaced `pread` can answer that.
                return (Err(libc::EIO), 1);
            }
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
        let len = (buf.len() - done).min(i32::MAX as usize);
        let n = calls::pread(
            fd,
            &mut buf[done..done + len],
            (offset + done as u64) as i64,
        );
        calls += 1;
        match n {
            0 => break Ok(done),
            // More than asked: only a replaced `pread` can answer that.
            n if n > 0 && n as usize > len => break Err(libc::EIO),
            n if n > 0 => done += n as usize,
            _ => {
                let errno = crate::sys::last_errno();
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
