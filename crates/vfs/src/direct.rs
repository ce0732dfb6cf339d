//! O_DIRECT mode (URI `uring_direct=on`, [`crate::Options::direct_io`]): the main
//! database's page-aligned reads and writes bypass the page cache through a second,
//! `O_DIRECT` descriptor of the same file.
//!
//! # What goes direct
//! * **Writes queued by write-behind** whose offset and length are multiples of the
//!   file's direct-I/O alignment: they are copied into the queue's aligned arena and
//!   reach the device as one batch on the ring (the one place `bench io` shows io_uring
//!   several times faster than `pwrite`: many O_DIRECT writes in flight at once).
//! * **Aligned reads**, into an aligned buffer owned by the file, then copied out. Two or
//!   more reads in a row at consecutive offsets start a read-ahead window (doubling up to
//!   [`MAX_READAHEAD_BYTES`]), so a table scan is not one device round trip per page.
//!   A lone random read stays one read of exactly the requested size.
//!
//! Everything else — the 100-byte header read at open, unaligned writes, checkpoint
//! writes (write-through, see `write_behind.rs`), size hints — uses the ordinary buffered
//! descriptor. Mixing the two is coherent: a direct write writes back and then invalidates
//! cached pages of its range, and a direct read writes back dirty cached pages of its
//! range first (Linux `fs/iomap/direct-io.c`, `__iomap_dio_rw`: `kiocb_invalidate_pages`
//! before a write, `kiocb_write_and_wait` before a read; ext4 uses it since 5.5). fsync is per inode, so the sync
//! count and order stay exactly `unix`'s.
//!
//! # Read-ahead validity
//! The read-ahead buffer is a private cache, so it is dropped whenever another connection
//! could have changed the file since it was filled: at every lock change (`xLock`,
//! `xUnlock`), every WAL-index lock (`xShmLock`: a read transaction starts or ends there),
//! and on any write or truncate of this file. Within one read transaction SQLite's own
//! locking guarantees the database pages it reads from the file do not change (a
//! checkpointer never backfills over a reader: walformat.html, "WAL-Index Locks"), which
//! is exactly the span the buffer lives in.

use std::ffi::CStr;
use std::os::fd::RawFd;

use crate::io::Submitter;
use crate::sys::{AlignedBuffer, BUFFER_ALIGN_BYTES};

/// Largest read-ahead window.
pub(crate) const MAX_READAHEAD_BYTES: usize = 256 << 10;
/// SQLite's largest page size: a read of one page always fits beside a full window.
const MAX_PAGE_BYTES: usize = 64 << 10;

/// Why the O_DIRECT descriptor could not be opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DirectOpenError {
    /// open(2) failed; EINVAL means the filesystem does not support O_DIRECT.
    Open(i32),
    /// The filesystem's alignment requirement is stricter than a page.
    Alignment(usize),
}

impl std::fmt::Display for DirectOpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirectOpenError::Open(libc::EINVAL) => write!(
                f,
                "uring_direct=on: this filesystem does not support O_DIRECT (EINVAL); \
                 drop uring_direct or put the database on ext4, xfs or btrfs"
            ),
            DirectOpenError::Open(errno) => write!(
                f,
                "uring_direct=on: opening the file with O_DIRECT failed: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            DirectOpenError::Alignment(bytes) => write!(
                f,
                "uring_direct=on: the filesystem requires {bytes}-byte alignment for O_DIRECT, \
                 more than the {BUFFER_ALIGN_BYTES} bytes this VFS aligns to"
            ),
        }
    }
}

/// Direct-I/O alignment of an open file: `statx(STATX_DIOALIGN)` (Linux 6.1+), the larger
/// of the memory and offset requirements; the logical block size of a page (4096) when
/// the kernel does not say.
fn direct_io_alignment(fd: RawFd) -> usize {
    // SAFETY: zeroed statx is a valid value of this plain C struct.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the empty path with AT_EMPTY_PATH refers to `fd`; `stx` is writable.
    let rc = unsafe {
        crate::sys::calls::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return BUFFER_ALIGN_BYTES;
    }
    (stx.stx_dio_mem_align.max(stx.stx_dio_offset_align)) as usize
}

/// The O_DIRECT descriptor of a main database file, and its read-ahead buffer.
pub(crate) struct DirectFile {
    pub(crate) fd: RawFd,
    /// Offsets and lengths of direct I/O must be multiples of this (a power of two).
    pub(crate) align_bytes: usize,
    readahead: ReadAhead,
}

/// The last direct read's buffer: `valid_bytes` bytes of the file from `start`.
struct ReadAhead {
    buffer: AlignedBuffer,
    start: u64,
    valid_bytes: usize,
    /// Where the next read starts if the reader is sequential.
    next_sequential: u64,
    /// Bytes the next sequential miss reads; 0 until two reads in a row were adjacent.
    window_bytes: usize,
}

/// What one direct read did, for the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DirectRead {
    pub(crate) bytes: usize,
    /// Served from the read-ahead buffer, without a kernel call.
    pub(crate) from_readahead: bool,
}

impl DirectFile {
    /// Opens `path` again with O_DIRECT (never creating it: the buffered descriptor did).
    pub(crate) fn open(path: &CStr, readwrite: bool) -> Result<DirectFile, DirectOpenError> {
        let access = if readwrite {
            libc::O_RDWR
        } else {
            libc::O_RDONLY
        };
        // The file exists (the buffered descriptor opened it first): no mode is needed.
        let fd = crate::sys::open_above_stdio(path, access | libc::O_DIRECT | libc::O_CLOEXEC, 0)
            .map_err(DirectOpenError::Open)?;
        let align_bytes = direct_io_alignment(fd);
        if align_bytes > BUFFER_ALIGN_BYTES || !align_bytes.is_power_of_two() {
            // We own the fd and nothing has locked through it.
            crate::sys::close(fd);
            return Err(DirectOpenError::Alignment(align_bytes));
        }
        Ok(DirectFile {
            fd,
            align_bytes,
            readahead: ReadAhead {
                buffer: AlignedBuffer::empty(),
                start: 0,
                valid_bytes: 0,
                next_sequential: u64::MAX,
                window_bytes: 0,
            },
        })
    }

    /// Whether an I/O of `len` bytes at `offset` meets the O_DIRECT alignment rules.
    pub(crate) fn is_aligned(&self, offset: u64, len: usize) -> bool {
        let mask = self.align_bytes - 1;
        len > 0 && len <= MAX_PAGE_BYTES && offset as usize & mask == 0 && len & mask == 0
    }

    /// Forgets the read-ahead buffer (another connection may change the file now).
    pub(crate) fn invalidate(&mut self) {
        self.readahead.valid_bytes = 0;
        self.readahead.next_sequential = u64::MAX;
        self.readahead.window_bytes = 0;
    }

    /// Forgets the read-ahead buffer if it holds any byte of `[offset, offset + len)`.
    pub(crate) fn invalidate_range(&mut self, offset: u64, len: usize) {
        let ra = &self.readahead;
        let cached_end = ra.start + ra.valid_bytes as u64;
        if ra.valid_bytes > 0 && offset < cached_end && ra.start < offset + len as u64 {
            self.readahead.valid_bytes = 0;
        }
    }

    /// Reads `buf` (aligned, see [`DirectFile::is_aligned`]) from `offset`; returns the
    /// bytes read, fewer than `buf.len()` only at the end of the file.
    pub(crate) fn read(
        &mut self,
        io: &mut Submitter<'_>,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<DirectRead, i32> {
        assert!(self.is_aligned(offset, buf.len()));
        let ra = &mut self.readahead;
        let sequential = offset == ra.next_sequential;
        ra.next_sequential = offset + buf.len() as u64;
        let cached_end = ra.start + ra.valid_bytes as u64;
        if ra.valid_bytes > 0 && offset >= ra.start && offset + buf.len() as u64 <= cached_end {
            let from = (offset - ra.start) as usize;
            buf.copy_from_slice(&ra.buffer.prefix(ra.valid_bytes)[from..from + buf.len()]);
            return Ok(DirectRead {
                bytes: buf.len(),
                from_readahead: true,
            });
        }
        // Miss: a sequential reader gets a window that doubles each time (as the kernel's
        // own read-ahead does for buffered files); a random read reads just its page.
        ra.window_bytes = if sequential {
            (ra.window_bytes.max(buf.len()) * 2).min(MAX_READAHEAD_BYTES)
        } else {
            0
        };
        let read_bytes = ra.window_bytes.max(buf.len());
        if ra.buffer.capacity() == 0 {
            ra.buffer = AlignedBuffer::with_capacity(MAX_READAHEAD_BYTES + MAX_PAGE_BYTES);
        }
        ra.valid_bytes = 0;
        let target = &mut ra.buffer.full_mut()[..read_bytes];
        let got = io.read_at(self.fd, target, offset)?;
        ra.start = offset;
        ra.valid_bytes = got;
        let bytes = got.min(buf.len());
        buf[..bytes].copy_from_slice(&ra.buffer.prefix(got)[..bytes]);
        Ok(DirectRead {
            bytes,
            from_readahead: false,
        })
    }
}
