//! The plain-syscall backend: one blocking syscall per op, one kernel entry each.
//!
//! Used as the `io_uring_sync` benchmark target (the same VFS code without the ring, to
//! separate the effect of the ring from the effect of batching) and, when the user opts
//! in, as the fallback where io_uring is unavailable.

use std::os::fd::RawFd;

use super::{Engine, Op};

pub(crate) struct SyscallEngine;

fn result_of(ret: isize) -> i32 {
    if ret < 0 {
        -std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        ret.min(i32::MAX as isize) as i32
    }
}

impl Engine for SyscallEngine {
    unsafe fn perform(&mut self, ops: &[Op], results: &mut [i32]) -> Result<u64, i32> {
        for index in 0..ops.len() {
            let op = &ops[index];
            if let Op::SyncAfterWrites { fd, data_only } = *op {
                results[index] = if chain_completed(ops, &results[..index], index, fd) {
                    // SAFETY: plain syscalls without pointers.
                    result_of(unsafe {
                        if data_only {
                            libc::fdatasync(fd)
                        } else {
                            libc::fsync(fd)
                        }
                    } as isize)
                } else {
                    -libc::ECANCELED
                };
                continue;
            }
            let result = &mut results[index];
            // SAFETY: the caller guarantees each buffer is valid for `len` bytes for the
            // duration of this call; the syscalls do not retain the pointers.
            *result = unsafe {
                match *op {
                    Op::Read {
                        fd,
                        buf,
                        len,
                        offset,
                    } => result_of(libc::pread(fd, buf.cast(), len as usize, offset as i64)),
                    Op::Write {
                        fd,
                        buf,
                        len,
                        offset,
                    } => result_of(libc::pwrite(fd, buf.cast(), len as usize, offset as i64)),
                    Op::Sync {
                        fd,
                        data_only: true,
                    } => result_of(libc::fdatasync(fd) as isize),
                    Op::Sync {
                        fd,
                        data_only: false,
                    } => result_of(libc::fsync(fd) as isize),
                    Op::Truncate { fd, len } => result_of(libc::ftruncate(fd, len as i64) as isize),
                    Op::SyncAfterWrites { .. } => unreachable!("handled above"),
                }
            };
        }
        Ok(ops.len() as u64)
    }
}

/// Whether every `Write` of `fd` directly before `ops[sync_index]` completed in full, the
/// condition for a `SyncAfterWrites` to run (io_uring's link semantics, reproduced).
pub(crate) fn chain_completed(ops: &[Op], results: &[i32], sync_index: usize, fd: RawFd) -> bool {
    ops[..sync_index]
        .iter()
        .zip(results)
        .rev()
        .take_while(|(op, _)| matches!(op, Op::Write { fd: write_fd, .. } if *write_fd == fd))
        .all(|(op, &result)| matches!(op, Op::Write { len, .. } if result == *len as i32))
}
