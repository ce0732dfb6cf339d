//! O_DIRECT mode (URI `uring_direct=on`, [`crate::Options::direct_io`]): the main
//! database's page-aligned reads and writes bypass the page cache through a second,
//! `O_DIRECT` descriptor of the same file. The O_DIRECT WAL (`uring_wal_direct=on`,
//! [`WalDirect`], at the end of this file) writes a WAL's synced commits as whole blocks.
//!
//! # What goes direct
//! * **Writes queued by write-behind** whose offset and length are multiples of the
//!   file's direct-I/O alignment: they are copied into the queue's aligned arena and
//!   reach the device as one batch on the ring: many O_DIRECT writes in flight at once,
//!   what io_uring is made for (docs/DESIGN.md, "O_DIRECT writes go through the ring").
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
use std::os::fd::{AsFd, AsRawFd, RawFd};

use crate::io::Submitter;
use crate::sys::{AlignedBuffer, DbFd, Fd, Reuse, BUFFER_ALIGN_BYTES};

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

impl DirectOpenError {
    /// What went wrong, for the log line of a file opened with `parameter=on`.
    pub(crate) fn describe(&self, parameter: &str) -> String {
        match self {
            DirectOpenError::Open(libc::EINVAL) => format!(
                "{parameter}=on: this filesystem does not support O_DIRECT (EINVAL); \
                 drop {parameter} or put the database on ext4, xfs or btrfs"
            ),
            DirectOpenError::Open(errno) => format!(
                "{parameter}=on: opening the file with O_DIRECT failed: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            DirectOpenError::Alignment(bytes) => format!(
                "{parameter}=on: the filesystem requires {bytes}-byte alignment for O_DIRECT, \
                 more than the {BUFFER_ALIGN_BYTES} bytes this VFS aligns to"
            ),
        }
    }

    /// The errno SQLITE_CANTOPEN reports.
    pub(crate) fn errno(&self) -> i32 {
        match self {
            DirectOpenError::Open(errno) => *errno,
            DirectOpenError::Alignment(_) => libc::EINVAL,
        }
    }
}

/// Opens `path` again with O_DIRECT (never creating it: the buffered descriptor did);
/// `reuse_parked`: a database's descriptor parked at a close may be taken back.
fn open_direct(path: &CStr, readwrite: bool, reuse_parked: bool) -> Result<Fd, DirectOpenError> {
    let access = if readwrite {
        libc::O_RDWR
    } else {
        libc::O_RDONLY
    };
    let flags = access | libc::O_DIRECT | libc::O_CLOEXEC;
    // The file exists (the buffered descriptor opened it first): no mode is needed.
    if reuse_parked {
        crate::sys::open_reusing_parked(path, flags, 0)
    } else {
        crate::sys::open_above_stdio(path, flags, 0)
    }
    .map_err(DirectOpenError::Open)
}

/// Direct-I/O alignment of an open file: `statx(STATX_DIOALIGN)` (Linux 6.1+), the larger
/// of the memory and offset requirements; the logical block size of a page (4096) when
/// the kernel does not say. An error when this VFS cannot align to it.
fn direct_io_alignment(fd: &impl AsFd) -> Result<usize, DirectOpenError> {
    let align_bytes = crate::sys::direct_io_alignment(fd.as_fd()).unwrap_or(BUFFER_ALIGN_BYTES);
    if align_bytes > BUFFER_ALIGN_BYTES || !align_bytes.is_power_of_two() {
        return Err(DirectOpenError::Alignment(align_bytes));
    }
    Ok(align_bytes)
}

/// The O_DIRECT descriptor of a main database file, and its read-ahead buffer.
pub(crate) struct DirectFile {
    /// A second descriptor of the database: it closes only without dropping this
    /// process's POSIX locks on the file.
    pub(crate) fd: DbFd,
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
        // Dropped on an error below: closed like any descriptor of the database.
        let fd = DbFd::reusable(open_direct(path, readwrite, true)?, Reuse::Open);
        let align_bytes = direct_io_alignment(&fd)?;
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
        let got = io.read_at(self.fd.as_raw_fd(), target, offset)?;
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

// ─── O_DIRECT WAL (`uring_wal_direct=on`) ─────────────────────────────────────────────

/// Bytes of one direct write of a WAL piece: a longer piece goes as several writes, split
/// at block boundaries.
const WAL_STAGING_BYTES: usize = 256 << 10;
/// The WAL header, which precedes the first frame (walformat.html).
const WAL_HEADER_BYTES: u64 = 32;
/// A WAL frame header: page number, database size after a commit, two salts, checksum.
const WAL_FRAME_HEADER_BYTES: u64 = 24;
/// The WAL magic whose checksums read big-endian words (0x377f0682: little-endian).
const WAL_MAGIC_BIG_ENDIAN: u32 = 0x377f_0683;

/// SQLite's WAL checksum (wal.c `walChecksumBytes`) of `bytes` (a multiple of 8 long),
/// continuing from `seed`; `big_endian`: the words are read big-endian.
fn wal_checksum(big_endian: bool, bytes: &[u8], seed: [u32; 2]) -> [u32; 2] {
    let word = |b: &[u8]| {
        let b = [b[0], b[1], b[2], b[3]];
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let [mut s1, mut s2] = seed;
    for pair in bytes.chunks_exact(8) {
        s1 = s1.wrapping_add(word(&pair[..4])).wrapping_add(s2);
        s2 = s2.wrapping_add(word(&pair[4..])).wrapping_add(s1);
    }
    [s1, s2]
}

/// The cumulative checksum a frame header carries (bytes 16..24, big-endian).
fn frame_checksum(header: &[u8]) -> [u32; 2] {
    let at =
        |i: usize| u32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    [at(16), at(20)]
}

/// The O_DIRECT side of a WAL opened with `uring_wal_direct=on` (see ARCHITECTURE.md,
/// "O_DIRECT WAL"). Its write-behind flushes are written through this descriptor as
/// whole blocks: a piece of frames `[start, end)` becomes one write of
/// `[floor(start), ceil(end))`, whose head `[floor(start), start)` holds the file's
/// current bytes and whose tail `[end, ceil(end))` holds the file's current bytes, or
/// zeros where nothing this connection wrote since it last wrote the WAL header lies
/// beyond `end` (past the writer's frames, under the WAL write lock, lie only frames no
/// reader reads).
///
/// Owner: the write-behind queue of the WAL's database (`write_behind.rs`,
/// `Queue::adopt_wal_direct`), from the file's open to its close, since a flush may run
/// on another connection's thread. It is used under the queue's lock only: by flushes,
/// and by the file's bookkeeping calls through `Queue::with_wal_direct` (its writes are
/// noted in `Queue::write`); a ring-routed xSync of the file takes it out of the queue
/// with the file's batch and puts it back after.
pub(crate) struct WalDirect {
    /// No lock is ever taken through a WAL descriptor: it closes plainly, when dropped.
    fd: Fd,
    align_bytes: usize,
    /// One block-aligned write: `WAL_STAGING_BYTES` plus a block for the head.
    staging: AlignedBuffer,
    /// The block that ends this connection's last direct write, as written, and the
    /// checksum of the frame that ends there. What proves the block still the file's:
    /// SQLite chains every frame's checksum from the frame before it, seeding a
    /// transaction's first frame with the last committed frame's, so a piece whose first
    /// frame starts exactly at `valid_end` and whose checksum continues the cached
    /// frame's follows that very frame — not frames a rolled-back transaction left there
    /// and another connection has since overwritten with the same salts (a 64-bit
    /// coincidence aside). Anything else reads the head back.
    tail: Option<TailBlock>,
    tail_bytes: AlignedBuffer,
    /// Page size + 24, learnt from the WAL header or a frame header and its page.
    frame_bytes: u64,
    /// The previous write's offset and length (to learn `frame_bytes`).
    last_write: (u64, usize),
    /// The WAL's checksums read big-endian words (its magic, from the WAL header this
    /// connection wrote; little-endian, SQLite's choice on this platform, until then).
    big_endian_checksums: bool,
    /// The end of this connection's highest write since it last wrote the WAL header:
    /// beyond it, in a transaction this connection holds the WAL write lock for, lie no
    /// frames anyone needs.
    written_end: u64,
    /// Whether direct writes are used: a commit's flush was followed at once by the
    /// WAL's xSync (`synchronous=FULL`). Without that sync a commit is a copy into the
    /// page cache under `unix`, far cheaper than a device write.
    pays: bool,
}

#[derive(Clone, Copy)]
struct TailBlock {
    offset: u64,
    valid_end: u64,
    checksum: [u32; 2],
}

impl WalDirect {
    /// Opens the WAL at `path` again with O_DIRECT.
    pub(crate) fn open(path: &CStr) -> Result<WalDirect, DirectOpenError> {
        let fd = open_direct(path, true, false)?;
        let align_bytes = direct_io_alignment(&fd)?;
        Ok(WalDirect {
            fd,
            align_bytes,
            staging: AlignedBuffer::empty(),
            tail: None,
            tail_bytes: AlignedBuffer::empty(),
            frame_bytes: 0,
            last_write: (0, 0),
            big_endian_checksums: false,
            written_end: 0,
            pays: false,
        })
    }

    /// Whether flushes go through the O_DIRECT descriptor now.
    pub(crate) fn pays(&self) -> bool {
        self.pays && self.frame_bytes > 0
    }

    /// Records whether the last commit's flush was followed at once by the WAL's sync.
    pub(crate) fn set_pays(&mut self, synced_after_commit: bool) {
        self.pays = synced_after_commit;
    }

    /// Every xWrite of the WAL, before it is queued.
    pub(crate) fn note_write(&mut self, offset: u64, data: &[u8]) {
        let (previous_offset, previous_len) = self.last_write;
        if offset == 0 && data.len() as u64 == WAL_HEADER_BYTES {
            // A new WAL generation starts here; bytes 8..12 are the page size (1: 65536).
            let page = u32::from_be_bytes([data[8], data[9], data[10], data[11]]);
            let page_bytes = if page == 1 { 65536 } else { u64::from(page) };
            if page_bytes.is_power_of_two() && (512..=65536).contains(&page_bytes) {
                self.frame_bytes = page_bytes + WAL_FRAME_HEADER_BYTES;
            }
            let magic = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
            self.big_endian_checksums = magic == WAL_MAGIC_BIG_ENDIAN;
            self.written_end = 0;
        } else if previous_len as u64 == WAL_FRAME_HEADER_BYTES
            && offset == previous_offset + WAL_FRAME_HEADER_BYTES
            && data.len().is_power_of_two()
        {
            self.frame_bytes = data.len() as u64 + WAL_FRAME_HEADER_BYTES;
        }
        self.last_write = (offset, data.len());
        self.written_end = self.written_end.max(offset + data.len() as u64);
    }

    /// Something changed the file around this state (a buffered flush, a write-through,
    /// a truncate): the cached block may no longer be the file's.
    pub(crate) fn forget(&mut self) {
        self.tail = None;
    }

    /// xTruncate of the WAL to `size_bytes`.
    pub(crate) fn truncated(&mut self, size_bytes: u64) {
        self.tail = None;
        self.written_end = self.written_end.min(size_bytes);
    }

    fn floor(&self, offset: u64) -> u64 {
        offset & !(self.align_bytes as u64 - 1)
    }

    fn ceil(&self, offset: u64) -> u64 {
        offset.next_multiple_of(self.align_bytes as u64)
    }

    fn is_frame_start(&self, offset: u64) -> bool {
        self.frame_bytes > 0
            && offset >= WAL_HEADER_BYTES
            && (offset - WAL_HEADER_BYTES).is_multiple_of(self.frame_bytes)
    }

    /// Whether the frame at the start of `data` (at `at`) continues `tail`'s frame:
    /// its header's checksum is the cached frame's carried on over its own header and
    /// page.
    fn continues(&self, tail: &TailBlock, at: u64, data: &[u8]) -> bool {
        let frame = self.frame_bytes as usize;
        if tail.valid_end != at || !self.is_frame_start(at) || data.len() < frame {
            return false;
        }
        let header = &data[..WAL_FRAME_HEADER_BYTES as usize];
        let seeded = wal_checksum(self.big_endian_checksums, &header[..8], tail.checksum);
        let checksum = wal_checksum(
            self.big_endian_checksums,
            &data[WAL_FRAME_HEADER_BYTES as usize..frame],
            seeded,
        );
        checksum == frame_checksum(header)
    }

    /// Writes the pieces of one write-behind flush through the O_DIRECT descriptor, in
    /// order; `buffered_fd` is the WAL's ordinary descriptor, which current bytes of
    /// partly written blocks are read through (coherent with direct I/O: the kernel
    /// writes back and invalidates cached pages of a direct write's range).
    pub(crate) fn write_pieces(
        &mut self,
        io: &mut Submitter<'_>,
        buffered_fd: RawFd,
        pieces: &[(u64, &[u8])],
    ) -> Result<(), crate::io::FlushFailure> {
        if self.staging.capacity() == 0 {
            self.staging = AlignedBuffer::with_capacity(WAL_STAGING_BYTES + BUFFER_ALIGN_BYTES);
            self.tail_bytes = AlignedBuffer::with_capacity(BUFFER_ALIGN_BYTES);
        }
        for &(start, data) in pieces {
            if let Err(failure) = self.write_piece(io, buffered_fd, start, data) {
                // What reached the device is unknown.
                self.tail = None;
                return Err(failure);
            }
        }
        Ok(())
    }

    fn write_piece(
        &mut self,
        io: &mut Submitter<'_>,
        buffered_fd: RawFd,
        start: u64,
        data: &[u8],
    ) -> Result<(), crate::io::FlushFailure> {
        use crate::io::{FlushFailure, WriteFailure};
        assert!(!data.is_empty());
        let end = start + data.len() as u64;
        let align = self.align_bytes as u64;
        assert_eq!(WAL_STAGING_BYTES as u64 % align, 0);
        let continues_last_block = self
            .tail
            .is_some_and(|t| t.offset == self.floor(start) && self.continues(&t, start, data));
        let mut at = start;
        while at < end {
            let block_start = self.floor(at);
            let chunk_end = end.min(block_start + WAL_STAGING_BYTES as u64);
            let head_bytes = (at - block_start) as usize;
            let write_end = self.ceil(chunk_end);
            let len = (write_end - block_start) as usize;
            // Head: this connection's last block when the piece provably continues it,
            // else the file's bytes.
            let staging = &mut self.staging.full_mut()[..len];
            if head_bytes > 0 {
                if continues_last_block && at == start {
                    staging[..head_bytes].copy_from_slice(self.tail_bytes.prefix(head_bytes));
                } else {
                    let got = io
                        .read_at(buffered_fd, &mut staging[..head_bytes], block_start)
                        .map_err(|errno| FlushFailure::Write(WriteFailure::Errno(errno)))?;
                    staging[got..head_bytes].fill(0);
                }
            }
            let from = (at - start) as usize;
            let to = (chunk_end - start) as usize;
            staging[head_bytes..head_bytes + (to - from)].copy_from_slice(&data[from..to]);
            // Tail: zeros past everything this connection wrote (garbage or end of file
            // there, under the WAL write lock), else the file's bytes.
            let tail_from = head_bytes + (to - from);
            if tail_from < len {
                if chunk_end >= self.written_end {
                    staging[tail_from..].fill(0);
                } else {
                    let got = io
                        .read_at(buffered_fd, &mut staging[tail_from..], chunk_end)
                        .map_err(|errno| FlushFailure::Write(WriteFailure::Errno(errno)))?;
                    staging[tail_from + got..].fill(0);
                }
            }
            let staged = self.staging.prefix(len);
            io.write_at(self.fd.as_raw_fd(), staged, block_start)
                .map_err(FlushFailure::Write)?;
            io.count(crate::stats::IoStats {
                wal_direct_writes: 1,
                ..crate::stats::IoStats::default()
            });
            if chunk_end == end {
                let last_block = self.floor(end);
                // Cache the last block when the piece ends with a whole frame.
                let frame = self.frame_bytes as usize;
                let ends_a_frame =
                    !end.is_multiple_of(align) && self.is_frame_start(end) && data.len() >= frame;
                self.tail = ends_a_frame.then(|| {
                    let from_block = (last_block - block_start) as usize;
                    let bytes =
                        &self.staging.prefix(len)[from_block..from_block + self.align_bytes];
                    self.tail_bytes.full_mut()[..self.align_bytes].copy_from_slice(bytes);
                    TailBlock {
                        offset: last_block,
                        valid_end: end,
                        checksum: frame_checksum(&data[data.len() - frame..]),
                    }
                });
            }
            at = chunk_end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::EngineKind;
    use crate::stats::SharedStats;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    const PAGE_BYTES: usize = 1024;
    const FRAME_BYTES: u64 = PAGE_BYTES as u64 + WAL_FRAME_HEADER_BYTES;
    const SALTS: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    /// A WAL header (little-endian checksums, 1 KiB pages) and its checksum.
    fn header() -> (Vec<u8>, [u32; 2]) {
        let mut bytes = vec![0u8; WAL_HEADER_BYTES as usize];
        bytes[0..4].copy_from_slice(&0x377f_0682u32.to_be_bytes());
        bytes[8..12].copy_from_slice(&(PAGE_BYTES as u32).to_be_bytes());
        bytes[16..24].copy_from_slice(&SALTS);
        let checksum = wal_checksum(false, &bytes[..24], [0, 0]);
        bytes[24..28].copy_from_slice(&checksum[0].to_be_bytes());
        bytes[28..32].copy_from_slice(&checksum[1].to_be_bytes());
        (bytes, checksum)
    }

    /// Frame `number` (1-based) as SQLite writes it after a frame whose checksum is
    /// `previous`: header with the salts and the chained checksum, a page of `fill`.
    fn frame(number: u64, fill: u8, previous: [u32; 2]) -> (u64, Vec<u8>, [u32; 2]) {
        let mut bytes = vec![0u8; FRAME_BYTES as usize];
        bytes[0..4].copy_from_slice(&(number as u32).to_be_bytes());
        bytes[4..8].copy_from_slice(&1u32.to_be_bytes());
        bytes[8..16].copy_from_slice(&SALTS);
        bytes[24..].fill(fill);
        let seeded = wal_checksum(false, &bytes[..8], previous);
        let checksum = wal_checksum(false, &bytes[24..], seeded);
        bytes[16..20].copy_from_slice(&checksum[0].to_be_bytes());
        bytes[20..24].copy_from_slice(&checksum[1].to_be_bytes());
        (
            WAL_HEADER_BYTES + (number - 1) * FRAME_BYTES,
            bytes,
            checksum,
        )
    }

    struct Wal {
        _dir: tempfile::TempDir,
        file: std::fs::File,
        direct: WalDirect,
        stats: SharedStats,
        vfs_stats: SharedStats,
        engine: EngineKind,
    }

    impl Wal {
        /// A WAL with a 4 KiB direct-write block, whose direct writes are in use.
        fn new() -> Wal {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.db-wal");
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            let mut direct = WalDirect::open(&c_path).expect("O_DIRECT on the test directory");
            direct.align_bytes = direct.align_bytes.max(4096);
            direct.set_pays(true);
            Wal {
                _dir: dir,
                file,
                direct,
                stats: SharedStats::default(),
                vfs_stats: SharedStats::default(),
                engine: EngineKind::Syscall,
            }
        }

        /// This connection writes `pieces` (each one xWrite) and flushes them as one
        /// coalesced piece.
        fn flush(&mut self, pieces: &[(u64, &[u8])]) {
            let mut joined = Vec::new();
            for (offset, bytes) in pieces {
                self.direct.note_write(*offset, bytes);
                joined.extend_from_slice(bytes);
            }
            let mut io = Submitter {
                engine: &self.engine,
                file_stats: &self.stats,
                vfs_stats: &self.vfs_stats,
            };
            let fd = self.file.as_raw_fd();
            self.direct
                .write_pieces(&mut io, fd, &[(pieces[0].0, &joined)])
                .unwrap();
        }

        fn bytes(&self, offset: u64, len: usize) -> Vec<u8> {
            let mut out = vec![0u8; len];
            self.file.read_exact_at(&mut out, offset).unwrap();
            out
        }

        /// Kernel operations that were not direct writes: read-backs of a block.
        fn reads(&self) -> u64 {
            let stats = self.stats.snapshot();
            stats.ops - stats.wal_direct_writes
        }
    }

    /// The checksum chain of a WAL SQLite wrote itself (its own `unix` VFS), recomputed.
    #[test]
    fn the_wal_checksum_is_sqlites() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("c.db");
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
             CREATE TABLE t(x); INSERT INTO t VALUES(randomblob(3000));
             INSERT INTO t SELECT randomblob(2000) FROM t;",
        )
        .unwrap();
        let wal = std::fs::read(dir.path().join("c.db-wal")).unwrap();
        let magic = u32::from_be_bytes(wal[0..4].try_into().unwrap());
        let big_endian = magic == WAL_MAGIC_BIG_ENDIAN;
        let page = u32::from_be_bytes(wal[8..12].try_into().unwrap()) as usize;
        let mut checksum = wal_checksum(big_endian, &wal[..24], [0, 0]);
        assert_eq!(
            checksum,
            frame_checksum(&wal[8..32]),
            "the WAL header's checksum"
        );
        let mut frames = 0;
        for frame in wal[32..].chunks_exact(24 + page) {
            let seeded = wal_checksum(big_endian, &frame[..8], checksum);
            checksum = wal_checksum(big_endian, &frame[24..], seeded);
            assert_eq!(checksum, frame_checksum(frame), "frame {}", frames + 1);
            frames += 1;
        }
        assert!(frames >= 3, "{frames} frames: the test proves little");
    }

    #[test]
    fn a_commit_continuing_the_last_frame_reuses_its_block_and_others_writes_are_read_back() {
        let mut wal = Wal::new();
        let (head, seed) = header();
        let (first_at, first, c1) = frame(1, 0xA1, seed);
        wal.flush(&[(0, &head), (first_at, &first)]);
        assert_eq!(wal.direct.frame_bytes, FRAME_BYTES);
        // The next commit continues exactly where the last ended: its head comes from the
        // cached block, with no read.
        let (second_at, second, c2) = frame(2, 0xB2, c1);
        let reads_before = wal.reads();
        wal.flush(&[(second_at, &second)]);
        assert_eq!(
            wal.reads(),
            reads_before,
            "the continuing commit read its head"
        );
        // Another writer appends frame 3, which ends inside the block this connection
        // wrote last; this connection's frame 4 follows it and must not rewrite it from
        // its copy.
        let (third_at, third, c3) = frame(3, 0xC3, c2);
        wal.file.write_all_at(&third, third_at).unwrap();
        let (fourth_at, fourth, _) = frame(4, 0xD4, c3);
        wal.flush(&[(fourth_at, &fourth)]);
        assert!(
            wal.reads() > reads_before,
            "the other writer's block was not read back"
        );
        assert_eq!(wal.bytes(0, 32), head);
        for (at, bytes) in [
            (first_at, first),
            (second_at, second),
            (third_at, third),
            (fourth_at, fourth),
        ] {
            assert!(wal.bytes(at, bytes.len()) == bytes, "frame at {at} differs");
        }
    }

    #[test]
    fn frames_a_rolled_back_transaction_left_are_not_taken_for_the_files() {
        let mut wal = Wal::new();
        let (head, seed) = header();
        let (first_at, first, c1) = frame(1, 0x11, seed);
        let (second_at, second, c2) = frame(2, 0x22, c1);
        wal.flush(&[(0, &head), (first_at, &first), (second_at, &second)]);
        // This connection spills frames 3 and 4, written direct, then rolls back.
        let (third_at, ours_third, c3) = frame(3, 0x33, c2);
        let (fourth_at, ours_fourth, _) = frame(4, 0x44, c3);
        wal.flush(&[(third_at, &ours_third), (fourth_at, &ours_fourth)]);
        // Another connection commits its own frames 3 and 4 over them: same salts, same
        // end.
        let (_, their_third, t3) = frame(3, 0x55, c2);
        let (_, their_fourth, t4) = frame(4, 0x66, t3);
        wal.file.write_all_at(&their_third, third_at).unwrap();
        wal.file.write_all_at(&their_fourth, fourth_at).unwrap();
        assert_eq!(
            wal.direct.tail.map(|t| (t.offset, t.valid_end)),
            Some((
                wal.direct.floor(fourth_at + FRAME_BYTES),
                fourth_at + FRAME_BYTES
            )),
            "the rolled-back frames must be cached for this test to prove anything"
        );
        // This connection's next commit follows their frame 4 (SQLite seeds its checksum
        // with the last committed frame's): the head must be theirs, read back.
        let (fifth_at, fifth, _) = frame(5, 0x77, t4);
        wal.flush(&[(fifth_at, &fifth)]);
        assert!(wal.bytes(third_at, their_third.len()) == their_third);
        assert!(
            wal.bytes(fourth_at, their_fourth.len()) == their_fourth,
            "the other connection's committed frame 4 was overwritten"
        );
        assert!(wal.bytes(fifth_at, fifth.len()) == fifth);
    }

    #[test]
    fn a_rewrite_in_the_middle_keeps_the_frames_after_it() {
        let mut wal = Wal::new();
        let (head, mut previous) = header();
        let mut frames = Vec::new();
        for n in 1..=4 {
            let (at, bytes, checksum) = frame(n, n as u8, previous);
            previous = checksum;
            frames.push((at, bytes));
        }
        let mut first: Vec<(u64, &[u8])> = vec![(0, &head)];
        first.extend(frames.iter().map(|(at, bytes)| (*at, bytes.as_slice())));
        wal.flush(&first);
        // SQLite rewrites frame 2's page in place (a page a spill had written): the tail
        // of its last block is frame 3's, not zeros.
        let at = frames[1].0 + WAL_FRAME_HEADER_BYTES;
        let page = vec![0xEEu8; PAGE_BYTES];
        wal.flush(&[(at, &page)]);
        assert_eq!(wal.bytes(at, PAGE_BYTES), page);
        for (at, bytes) in [&frames[0], &frames[2], &frames[3]] {
            assert!(
                wal.bytes(*at, bytes.len()) == *bytes,
                "frame at {at} differs"
            );
        }
    }
}
