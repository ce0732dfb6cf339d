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
//! writes (write-through, see `writeback.rs`), size hints — uses the ordinary buffered
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

/// Alignment of every [`AlignedBuffer`]: a page, which satisfies any `stx_dio_mem_align`
/// Linux reports for block devices (their logical block size, at most a page here).
pub(crate) const BUFFER_ALIGN_BYTES: usize = 4096;
/// Largest read-ahead window.
pub(crate) const MAX_READAHEAD_BYTES: usize = 256 << 10;
/// SQLite's largest page size: a read of one page always fits beside a full window.
const MAX_PAGE_BYTES: usize = 64 << 10;

/// A fixed-capacity byte buffer aligned to [`BUFFER_ALIGN_BYTES`], for O_DIRECT I/O and
/// the write-behind arena. Its memory is anonymous `mmap` memory: it reads as zeros, so
/// every byte is initialised, and the kernel supplies each page on first touch.
pub(crate) struct AlignedBuffer {
    ptr: *mut u8,
    len: usize,
    capacity: usize,
}

// SAFETY: the buffer exclusively owns its allocation; moving it between threads moves
// that ownership, like a Vec<u8>.
unsafe impl Send for AlignedBuffer {}

impl AlignedBuffer {
    pub(crate) const fn empty() -> AlignedBuffer {
        AlignedBuffer {
            ptr: std::ptr::null_mut(),
            len: 0,
            capacity: 0,
        }
    }

    /// Why `mmap` and not the allocator: `alloc_zeroed` with a page alignment cannot use
    /// calloc's fresh zero pages, so it `memset` the whole buffer. For the 2 MiB
    /// write-behind arena, of which a commit typically uses a few pages, that was ~0.9 ms
    /// of page faults and zeroing at the first write of every process (callgrind: 2.1 M
    /// instructions in `memset`, session 5). Anonymous pages are zero and page-aligned,
    /// and untouched ones cost nothing.
    pub(crate) fn with_capacity(capacity: usize) -> AlignedBuffer {
        assert!(capacity > 0);
        // SAFETY: an anonymous private mapping of a non-zero length at an address the
        // kernel chooses; it aliases nothing, and Drop unmaps exactly this range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                capacity,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let layout = std::alloc::Layout::from_size_align(capacity, BUFFER_ALIGN_BYTES)
                .expect("buffer capacity fits a Layout");
            std::alloc::handle_alloc_error(layout);
        }
        let ptr = ptr.cast::<u8>();
        // Pages are at least 4 KiB on every Linux architecture.
        assert_eq!(
            ptr as usize % BUFFER_ALIGN_BYTES,
            0,
            "mmap returns whole pages"
        );
        AlignedBuffer {
            ptr,
            len: 0,
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Start of the allocation (null while empty).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends zeros until the length is a multiple of `align_bytes`.
    pub(crate) fn pad_to(&mut self, align_bytes: usize) {
        let padded = self.len.next_multiple_of(align_bytes);
        assert!(
            padded <= self.capacity,
            "padding past the buffer's capacity"
        );
        let len = self.len;
        self.full_mut()[len..padded].fill(0);
        self.len = padded;
    }

    pub(crate) fn extend_from_slice(&mut self, data: &[u8]) {
        let end = self.len + data.len();
        assert!(end <= self.capacity, "append past the buffer's capacity");
        let len = self.len;
        self.full_mut()[len..end].copy_from_slice(data);
        self.len = end;
    }

    /// The filled part.
    pub(crate) fn as_slice(&self) -> &[u8] {
        self.prefix(self.len)
    }

    /// The first `len_bytes` bytes of the capacity, however they were filled (appends, or
    /// a read into [`AlignedBuffer::full_mut`]).
    fn prefix(&self, len_bytes: usize) -> &[u8] {
        assert!(len_bytes <= self.capacity);
        if self.capacity == 0 {
            return &[];
        }
        // SAFETY: `ptr` owns `capacity` initialised bytes (anonymous pages read as zero).
        unsafe { std::slice::from_raw_parts(self.ptr, len_bytes) }
    }

    /// The whole capacity, to read into.
    pub(crate) fn full_mut(&mut self) -> &mut [u8] {
        if self.capacity == 0 {
            return &mut [];
        }
        // SAFETY: as in `as_slice`; `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.capacity) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if self.capacity > 0 {
            // SAFETY: mapped in `with_capacity` with this same length; no slice of it
            // outlives `self`.
            unsafe { libc::munmap(self.ptr.cast(), self.capacity) };
        }
    }
}

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
        libc::statx(
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
        let fd = crate::file::open_above_stdio(path, access | libc::O_DIRECT | libc::O_CLOEXEC, 0)
            .map_err(DirectOpenError::Open)?;
        let align_bytes = direct_io_alignment(fd);
        if align_bytes > BUFFER_ALIGN_BYTES || !align_bytes.is_power_of_two() {
            // SAFETY: we own the fd and nothing has locked through it.
            unsafe { libc::close(fd) };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `buffer` resident in memory (mincore(2)).
    fn resident_pages(buffer: &AlignedBuffer) -> usize {
        let page_bytes = BUFFER_ALIGN_BYTES;
        let mut residency = vec![0u8; buffer.capacity().div_ceil(page_bytes)];
        // SAFETY: the range is the buffer's own mapping; the vector has a byte per page.
        let rc = unsafe {
            libc::mincore(
                buffer.as_ptr() as *mut libc::c_void,
                buffer.capacity(),
                residency.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        residency.iter().filter(|&&r| r & 1 == 1).count()
    }

    /// A fresh buffer costs no memory until it is written: the 2 MiB write-behind arena
    /// must not be zeroed page by page at the first write of a process.
    #[test]
    fn fresh_buffers_take_memory_only_where_written() {
        let mut buffer = AlignedBuffer::with_capacity(2 << 20);
        assert_eq!(resident_pages(&buffer), 0);
        assert!(buffer.full_mut()[..3 * BUFFER_ALIGN_BYTES]
            .iter()
            .all(|&b| b == 0));
        buffer.extend_from_slice(&[1; 100]);
        // Reading maps the shared zero page at most; writing makes a page of its own.
        // A transparent huge page could back a whole 2 MiB at once: then this test says
        // nothing, so it only requires far less than the whole buffer.
        let resident = resident_pages(&buffer);
        assert!(resident >= 1, "the written page is resident");
        assert!(
            resident < 512
                || std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
                    .is_ok_and(|mode| mode.contains("[always]")),
            "{resident} of 512 pages resident after a 100-byte write"
        );
    }

    #[test]
    fn aligned_buffer_is_aligned_and_pads_with_zeros() {
        let mut buffer = AlignedBuffer::with_capacity(3 * BUFFER_ALIGN_BYTES);
        assert_eq!(buffer.as_slice().as_ptr() as usize % BUFFER_ALIGN_BYTES, 0);
        buffer.extend_from_slice(&[7; 10]);
        buffer.pad_to(512);
        assert_eq!(buffer.len(), 512);
        assert!(buffer.as_slice()[10..].iter().all(|&b| b == 0));
        buffer.extend_from_slice(&[9; 4]);
        assert_eq!(&buffer.as_slice()[512..], &[9; 4]);
        buffer.clear();
        assert_eq!(buffer.len(), 0);
        assert!(AlignedBuffer::empty().as_slice().is_empty());
    }

    #[test]
    #[should_panic(expected = "past the buffer's capacity")]
    fn aligned_buffer_refuses_to_overflow() {
        let mut buffer = AlignedBuffer::with_capacity(16);
        buffer.extend_from_slice(&[0; 17]);
    }
}
