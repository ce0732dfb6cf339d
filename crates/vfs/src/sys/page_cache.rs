//! What read-ahead asks the kernel about a file's page cache: whether a range is cached
//! (`cachestat(2)`), a read that never waits for the device (`preadv2(RWF_NOWAIT)`), the
//! file's size, and whether the thread's reads reached a device (`getrusage`). None of
//! these is a call os_unix.c makes, so they bypass the system-call table: a test that
//! fails SQLite's calls is not affected by read-ahead's, and a failure here only forgoes
//! read-ahead.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use super::fd::{DbFd, Fd, Reuse};

/// `cachestat(2)` (Linux 6.5); answered ENOSYS once, it is not tried again.
const SYS_CACHESTAT: libc::c_long = 451;
static CACHESTAT_MISSING: AtomicBool = AtomicBool::new(false);

/// `struct cachestat_range` of `<linux/mman.h>`.
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `struct cachestat` of `<linux/mman.h>`.
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Whether every byte of `len_bytes` at `offset` is in the page cache; `None` when the
/// kernel cannot tell (no `cachestat`, or it failed). Starts no I/O.
pub(crate) fn is_cached(fd: RawFd, offset: u64, len_bytes: u64) -> Option<bool> {
    if CACHESTAT_MISSING.load(Ordering::Relaxed) || len_bytes == 0 {
        return None;
    }
    let range = CachestatRange {
        off: offset,
        len: len_bytes,
    };
    let mut stat = Cachestat::default();
    // SAFETY: `range` and `stat` are live, correctly laid out structs for the whole call;
    // the kernel reads the first and writes the second, and keeps neither.
    let ret = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd,
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if ret != 0 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            CACHESTAT_MISSING.store(true, Ordering::Relaxed);
        }
        return None;
    }
    let page_bytes = page_size_bytes();
    let first = offset / page_bytes;
    let last = (offset + len_bytes - 1) / page_bytes;
    Some(stat.nr_cache > last - first)
}

/// Reads `buf.len()` bytes at `offset` only if they are all in the page cache
/// (`preadv2(RWF_NOWAIT)`): true when `buf` was filled, false otherwise (not cached, short,
/// or any error). Never waits for the device.
pub(crate) fn read_if_cached(fd: RawFd, buf: &mut [u8], offset: u64) -> bool {
    read_nowait(fd, buf, offset) == Ok(buf.len())
}

/// Reads into `buf` at `offset` from the page cache only (`preadv2(RWF_NOWAIT)`): the
/// bytes read (fewer than asked where the file ends or the cache stops), or the errno —
/// `EAGAIN` when the first bytes are not cached (or are being read from the device now),
/// `EOPNOTSUPP` where the file system cannot read without waiting. Never waits for the
/// device.
pub(crate) fn read_nowait(fd: RawFd, buf: &mut [u8], offset: u64) -> Result<usize, i32> {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, exclusively borrowed for the whole call; preadv2 keeps
    // no pointer after it returns.
    let n = unsafe { libc::preadv2(fd, &iov, 1, offset as libc::off_t, libc::RWF_NOWAIT) };
    if n < 0 {
        return Err(super::calls::last_errno());
    }
    // The kernel never returns more than asked.
    assert!(n as usize <= buf.len());
    Ok(n as usize)
}

/// Bytes the calling thread has had read from storage devices for it so far, in 512-byte
/// blocks (`getrusage(RUSAGE_THREAD)`'s `ru_inblock`: the kernel's per-task I/O
/// accounting, which counts a read's bytes when the thread submits it to the block
/// layer); `None` when the call fails. A page-cache hit adds nothing, however long it took.
/// Kernels without task I/O accounting answer 0 always.
pub(crate) fn thread_blocks_read() -> Option<u64> {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, correctly laid out `rusage` for the whole call; the kernel
    // writes it and keeps no pointer to it.
    let ret = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    (ret == 0).then_some(usage.ru_inblock as u64)
}

/// A second descriptor of the file open on `fd`, read-only, for read-ahead's reads: a new
/// open file description (`/proc/self/fd/N` reopens the inode), at 3 or above, with
/// `POSIX_FADV_RANDOM`, so the kernel reads exactly the ranges asked for and its own
/// read-ahead heuristics, which follow a file description's reads, neither react to
/// read-ahead's scattered reads nor lose track of SQLite's. `None` when it cannot be had;
/// the caller then uses `fd` itself.
///
/// A descriptor of the database, closed as one (`sys::DbFd`): closing any descriptor of a
/// file drops this process's POSIX locks on it, so it is parked instead while the process
/// holds some. The same goes for a reopening that lands on 0, 1 or 2 and is moved above
/// them.
pub(crate) fn open_for_prefetch(fd: RawFd) -> Option<DbFd> {
    // One parked by an earlier connection's read-ahead on the file, taken back.
    if let Some(parked) =
        super::fd::take_parked(libc::O_RDONLY, Reuse::Prefetch, || super::fd::file_key(fd))
    {
        return Some(DbFd::reusable(parked, Reuse::Prefetch));
    }
    let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).ok()?;
    // SAFETY: `path` is NUL-terminated and not retained.
    let opened = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if opened < 0 {
        return None;
    }
    // SAFETY: open just returned `opened`, and nothing else has it.
    let opened = unsafe { Fd::from_raw(opened) };
    let prefetch_fd = if opened.as_raw_fd() >= 3 {
        DbFd::reusable(opened, Reuse::Prefetch)
    } else {
        // SAFETY: fcntl takes no pointers; `opened` is open.
        let moved = unsafe { libc::fcntl(opened.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
        // The slot's descriptor goes as any descriptor of the database does, a `unix`
        // connection's locks kept.
        drop(DbFd::from(opened));
        if moved < 0 {
            return None;
        }
        // SAFETY: F_DUPFD_CLOEXEC just returned `moved`, and nothing else has it.
        DbFd::reusable(unsafe { Fd::from_raw(moved) }, Reuse::Prefetch)
    };
    // A failure only leaves the kernel's heuristics on for this descriptor.
    advise(prefetch_fd.as_raw_fd(), libc::POSIX_FADV_RANDOM);
    Some(prefetch_fd)
}

/// `posix_fadvise(advice)` of the whole file open on `fd` (`POSIX_FADV_RANDOM`: the
/// kernel's read-ahead off for this open file description; `POSIX_FADV_DONTNEED`: its
/// clean pages dropped from the page cache); 0, or the errno.
pub(crate) fn advise(fd: RawFd, advice: libc::c_int) -> i32 {
    advise_range(fd, 0, 0, advice)
}

/// `posix_fadvise(POSIX_FADV_WILLNEED)` of `len` bytes at `offset`: starts reading them
/// into the page cache and returns; 0, or the errno.
#[inline]
pub(crate) fn prefetch(fd: RawFd, offset: u64, len: u32) -> i32 {
    advise_range(fd, offset, u64::from(len), libc::POSIX_FADV_WILLNEED)
}

/// `posix_fadvise(advice)` of `len_bytes` at `offset` of the file open on `fd` (0 bytes:
/// to its end); 0, or the errno.
#[inline]
pub(crate) fn advise_range(fd: RawFd, offset: u64, len_bytes: u64, advice: libc::c_int) -> i32 {
    // SAFETY: posix_fadvise takes no pointers.
    unsafe { libc::posix_fadvise(fd, offset as libc::off_t, len_bytes as libc::off_t, advice) }
}

/// The file's size, by `fstat(2)` outside the system-call table; 0 when it fails.
pub(crate) fn size_bytes(fd: RawFd) -> u64 {
    // SAFETY: `stat` is plain data that fstat(2) writes and does not keep.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut stat) == 0 {
            stat.st_size.max(0) as u64
        } else {
            0
        }
    }
}

fn page_size_bytes() -> u64 {
    // SAFETY: sysconf takes no pointers.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_written_file_is_cached_and_an_evicted_one_is_read_only_when_cached() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[5u8; 8192]).unwrap();
        let fd = file.as_raw_fd();
        // Just written: in the page cache (where cachestat exists).
        if let Some(cached) = is_cached(fd, 0, 8192) {
            assert!(cached);
        }
        let mut buf = [0u8; 4096];
        assert!(read_if_cached(fd, &mut buf, 4096));
        assert_eq!(buf, [5u8; 4096]);
        // Past the end: nothing to read, so not "read".
        assert!(!read_if_cached(fd, &mut buf, 8192));
        assert_eq!(size_bytes(fd), 8192);
        assert_eq!(size_bytes(-1), 0);
        assert!(!read_if_cached(-1, &mut buf, 0));
        let second = open_for_prefetch(fd).expect("a second descriptor");
        assert!(second.as_raw_fd() >= 3 && second.as_raw_fd() != fd);
        assert!(read_if_cached(second.as_raw_fd(), &mut buf, 0));
        assert_eq!(size_bytes(second.as_raw_fd()), 8192);
        let mut failed_closes = 0;
        second.close(|_| failed_closes += 1);
        assert_eq!(failed_closes, 0);
        assert!(open_for_prefetch(-1).is_none());
    }
}
