//! xRead, xWrite, xTruncate, xSync and xFileSize. xWrite asks the file's flush points
//! (`flush_point.rs`) whether a write must reach the kernel before it returns (a WAL
//! commit frame, a rollback-journal record's end, a database page outside a commit, a
//! memory-mapped file, a checkpoint); the rest of the rule is in `write_behind.rs`.

use std::ffi::c_int;
use std::os::fd::{AsRawFd, RawFd};

use crate::error::Failure;
use crate::ffi::{SQLITE_CANTOPEN, SQLITE_IOERR_CLOSE, SQLITE_IOERR_FSYNC, SQLITE_IOERR_TRUNCATE};
use crate::io::syscall::pread_fully;
use crate::io::Submitter;
use crate::readahead::{PageSource, Sample};
use crate::stats::{IoStats, SharedStats};
use crate::sys::{calls, open_directory_of};

#[cfg(test)]
use super::DeviceReadDurations;
use super::{File, PrefetchFd, ReadAheadSide};

impl File {
    /// xRead: fills `buf` from `offset`; a read past the end zero-fills the rest and
    /// reports SQLITE_IOERR_SHORT_READ, as SQLite requires. A buffered file read by
    /// syscall, not memory-mapped and not traced — every read of the default
    /// configuration — takes the `pread` path here; the others are `read_otherwise`'s.
    #[inline(always)]
    pub(crate) fn read(&mut self, buf: &mut [u8], offset: i64) -> Result<(), Failure> {
        assert!(offset >= 0);
        self.flush_queue(self.as_reader())?;
        let (read, whole_file_read) = if !self.mmap.is_mapped() && self.rest_by_pread() {
            let (outcome, preads) = self.pread(buf, offset as u64);
            self.count_pread(*outcome.as_ref().unwrap_or(&0) as u64, preads);
            (outcome, true)
        } else {
            self.read_otherwise(buf, offset as u64)
        };
        self.flush_points.read(offset as u64);
        let total = read.map_err(Failure::from_read_errno)?;
        if total < buf.len() {
            buf[total..].fill(0);
            return Err(Failure::ShortRead);
        }
        if whole_file_read {
            self.after_whole_read(buf, offset as u64);
        }
        Ok(())
    }

    /// Whether what the memory map does not serve of a read goes by `pread` from the
    /// buffered descriptor: no O_DIRECT side, reads routed to syscalls and no I/O trace.
    #[inline]
    fn rest_by_pread(&self) -> bool {
        self.direct.database.is_none()
            && self.settings.engine.reads_by_syscall()
            && !crate::trace::enabled(crate::trace::TARGET_IO)
    }

    /// `pread` of `buf` at `at` from the buffered descriptor, with its number of calls.
    /// Read-ahead sleeps while the pages SQLite reads are cached; one read in
    /// `READS_PER_SAMPLE` tells it whether the device was needed, and wakes it if so.
    #[inline(always)]
    fn pread(&mut self, buf: &mut [u8], at: u64) -> (Result<usize, i32>, u64) {
        let fd = self.fd();
        match self.readahead.as_deref_mut() {
            Some(side) => side.read(fd, buf, at),
            None => pread_fully(fd, buf, at),
        }
    }

    /// xRead where the file is mapped or `rest_by_pread` says no: from the memory map as
    /// far as it reaches, the rest by `pread` (`rest_by_pread`), through the O_DIRECT side
    /// or through the engine (the ring, or a traced read).
    /// Counts the read. Returns the bytes read (or the errno) and whether the file gave
    /// all of them (none from the map).
    #[inline(never)]
    fn read_otherwise(&mut self, buf: &mut [u8], offset: u64) -> (Result<usize, i32>, bool) {
        let from_map = self.mmap.read_prefix(buf, offset as i64);
        let fd = self.fd();
        let rest = &mut buf[from_map..];
        let at = offset + from_map as u64;
        let mut direct_read = None;
        let mut preads = 0u64;
        let read = if rest.is_empty() {
            Ok(0)
        } else if self.rest_by_pread() {
            // Mapped, but past the map's end: as the `pread` path.
            let (outcome, calls) = self.pread(rest, at);
            preads = calls;
            outcome
        } else {
            // Whether this read reached the device is not known here: read-ahead stays
            // awake.
            if let Some(readahead) = self.readahead.as_deref_mut() {
                readahead.btree.note_uncached_read();
            }
            let mut io = Submitter {
                engine: &self.settings.engine,
                file_stats: &self.stats,
                vfs_stats: &self.vfs.stats.totals,
            };
            match self
                .direct
                .database
                .as_mut()
                .filter(|d| d.is_aligned(at, rest.len()))
            {
                Some(direct) => match direct.read(&mut io, rest, at) {
                    Ok(done) => {
                        direct_read = Some(done.from_readahead);
                        Ok(done.bytes)
                    }
                    // A short read that stopped off the alignment (a file whose size is
                    // not a multiple of it) cannot continue direct: the buffered fd can.
                    Err(libc::EINVAL) => {
                        direct.invalidate();
                        io.read_at(fd, rest, at)
                    }
                    Err(errno) => Err(errno),
                },
                None => io.read_at(fd, rest, at),
            }
        };
        let total = from_map + *read.as_ref().unwrap_or(&0);
        if direct_read.is_none() {
            // A `pread`'s kernel entries are counted here (`preads`); engine reads counted
            // theirs through the Submitter.
            self.count_pread(total as u64, preads);
        } else {
            // Direct reads count their kernel entries through the Submitter.
            self.count(IoStats {
                read_calls: 1,
                bytes_read: total as u64,
                direct_reads: (direct_read == Some(false)) as u64,
                readahead_hits: (direct_read == Some(true)) as u64,
                ..IoStats::default()
            });
        }
        (read.map(|_| total), from_map == 0)
    }

    /// After a whole read of `buf` at `offset` from the file (none of it from the map):
    /// read-ahead learns from it when it follows the file's reads.
    #[inline]
    fn after_whole_read(&mut self, buf: &[u8], offset: u64) {
        if self
            .readahead
            .as_deref()
            .is_some_and(|side| side.btree.follows_read_at(offset, buf))
        {
            self.readahead_after_read(buf, offset);
        }
    }

    /// `after_whole_read` for a read read-ahead follows.
    #[inline(never)]
    fn readahead_after_read(&mut self, buf: &[u8], offset: u64) {
        let fd = self.fd();
        if let Some(readahead) = self.readahead.as_deref_mut() {
            let mut pages = DatabasePages {
                fd,
                prefetch_fd: &mut readahead.prefetch_fd,
                io: Submitter {
                    engine: &self.settings.engine,
                    file_stats: &self.stats,
                    vfs_stats: &self.vfs.stats.totals,
                },
            };
            readahead.btree.after_read(buf, offset, &mut pages);
        }
    }

    /// xWrite: queued for write-behind (see `write_behind.rs` for when it reaches the
    /// kernel), or written at once when write-behind is off. A write that cannot make
    /// progress is SQLITE_FULL, as in os_unix.c.
    #[inline(always)]
    pub(crate) fn write(&mut self, buf: &[u8], offset: i64) -> Result<(), Failure> {
        assert!(offset >= 0);
        self.count_field(SharedStats::WRITE_CALLS, 1);
        // Which writes may wait in the queue (`flush_point.rs`): every write is told,
        // whether write-behind is on or not.
        let decision = self
            .flush_points
            .write(offset as u64, buf, self.mmap.is_mapped());
        if let Some(direct) = self.direct.database.as_mut() {
            direct.invalidate_range(offset as u64, buf.len());
        }
        // An O_DIRECT WAL side learns of the write in the queue (`Queue::write`). A file
        // without a descriptor (after SQLITE_FCNTL_NULL_IO) writes at once, so its EBADF
        // is this call's answer, as under `unix`, not a later call's.
        let result = if self.settings.write_behind && self.descriptor.borrowed().is_some() {
            let flush_now = decision.flush_now();
            // An aligned page write of an O_DIRECT file is queued for its direct fd; a
            // write that must reach the kernel at once (a checkpoint's) is one lone write,
            // cheaper into the page cache than a device round trip.
            let writer = match self
                .direct
                .database
                .as_ref()
                .filter(|d| !flush_now && d.is_aligned(offset as u64, buf.len()))
            {
                Some(direct) => self.writer_through(direct.fd.as_raw_fd(), direct.align_bytes),
                None => self.writer(),
            };
            self.queue()
                .write(&writer, offset as u64, buf, flush_now)
                .map_err(Failure::from)
        } else {
            self.flush_queue(self.as_writer()).and_then(|()| {
                let fd = self.fd();
                self.submitter()
                    .write_at(fd, buf, offset as u64)
                    .map_err(Failure::from)
            })
        };
        match result {
            Ok(()) => {
                self.count_field(SharedStats::BYTES_WRITTEN, buf.len() as u64);
                self.size.note_at_least(offset + buf.len() as i64);
                Ok(())
            }
            Err(failure) => {
                self.size.forget();
                Err(failure)
            }
        }
    }

    /// xTruncate, rounding up to the chunk size like os_unix.c.
    pub(crate) fn truncate(&mut self, size_bytes: i64) -> Result<(), Failure> {
        assert!(size_bytes >= 0);
        self.count(IoStats {
            truncate_calls: 1,
            ..IoStats::default()
        });
        let size_bytes = self.settings.chunked(size_bytes);
        self.flush_queue(self.as_writer())?;
        if let Some(direct) = self.direct.database.as_mut() {
            direct.invalidate();
        }
        if self.direct.wal {
            self.queue()
                .with_wal_direct(self.id, |wal| wal.truncated(size_bytes as u64));
        }
        let fd = self.fd();
        if let Err(errno) = self.submitter().truncate(fd, size_bytes as u64) {
            self.size.forget();
            self.log_os_error(SQLITE_IOERR_TRUNCATE, "ftruncate", errno);
            return Err(Failure::Truncate(errno));
        }
        self.mmap.clamp_to(size_bytes);
        self.size.truncated_to(size_bytes, self.exclusive());
        Ok(())
    }

    /// xSync: one fsync/fdatasync of the file (the SQLITE_SYNC_* flags make no difference
    /// on Linux, as in os_unix.c full_fsync), plus the one-time directory sync after a
    /// journal or WAL was created.
    pub(crate) fn sync(&mut self, _flags: c_int) -> Result<(), Failure> {
        self.count_field(SharedStats::SYNC_CALLS, 1);
        // The directory sync is independent of the file's: both are submitted together
        // and both complete before xSync returns, as os_unix.c's two sequential calls do.
        let (directory, directory_errno) = match (&self.path, self.dir_sync_pending) {
            (Some(path), true) => match open_directory_of(path.as_c_str()) {
                Ok(fd) => (Some(fd), None),
                Err(errno) => (None, Some(errno)),
            },
            _ => (None, None),
        };
        let request = self
            .settings
            .sync_request(directory.as_ref().map(AsRawFd::as_raw_fd));
        let result = self.queue().sync(&self.writer(), request);
        if let Some(directory) = directory {
            if let Err(errno) = directory.close() {
                self.log_os_error(SQLITE_IOERR_CLOSE, "close", errno);
            }
        }
        // Logged as os_unix.c unixSync logs: a failed fsync of the file; otherwise a
        // directory that could not be opened (which fails nothing). os_unix.c opens the
        // directory only after the file's fsync succeeded, so it logs one or the other.
        match result.map_err(Failure::from) {
            Err(Failure::Fsync(errno)) => {
                self.log_os_error(SQLITE_IOERR_FSYNC, "full_fsync", errno);
                return Err(Failure::Fsync(errno));
            }
            Err(failure) => return Err(failure),
            Ok(()) => {}
        }
        if let (Some(errno), Some(path), false) = (
            directory_errno,
            self.path.as_deref(),
            calls::is_replaced(c"openDirectory"),
        ) {
            self.vfs.api.log_os_error(
                SQLITE_CANTOPEN,
                "openDirectory",
                &crate::sys::directory_of(path),
                errno,
            );
        }
        self.dir_sync_pending = false;
        Ok(())
    }

    /// xFileSize. Caches the size while nobody else can change the file.
    pub(crate) fn file_size(&mut self) -> Result<i64, Failure> {
        self.flush_queue(self.as_reader())?;
        if let Some(size) = self.size.get(self.exclusive()) {
            return Ok(size);
        }
        let mut size = self.fstat().map_err(Failure::Fstat)?.st_size;
        // os_unix.c: a 1-byte file is reported as empty (a workaround some filesystems
        // need when a zero-size database is opened); kept for identical behaviour.
        if size == 1 {
            size = 0;
        }
        self.size.remember(size, self.exclusive());
        Ok(size)
    }
}

impl ReadAheadSide {
    /// SQLite's read of `buf` at `at`, as `pread_fully` makes it, and what read-ahead asks
    /// of it (`ReadAhead::sample_this_read`). A read of the burst after a lock change is
    /// only recorded: on cached data the burst is a short transaction's every read, and
    /// anything more than a store costs it (a probe, a few hundred nanoseconds more than a
    /// `pread` in a process that has made few; two clock reads, about 50 ns). A sampled read
    /// of a whole page asks the page cache first (`sampled_read`); a sampled read of a few
    /// header bytes (the change counter SQLite reads at each rollback-mode transaction's
    /// start) is timed instead (`timed_read`).
    #[inline(always)]
    fn read(&mut self, fd: RawFd, buf: &mut [u8], at: u64) -> (Result<usize, i32>, u64) {
        match self.btree.sample_this_read() {
            Sample::No => pread_fully(fd, buf, at),
            Sample::Record => {
                let read = pread_fully(fd, buf, at);
                if read.0 == Ok(buf.len()) {
                    self.btree.record_burst_read(at, buf.len());
                }
                read
            }
            Sample::Spread => self.sample(fd, buf, at),
        }
    }

    /// `read` of a sampled read.
    #[inline(never)]
    fn sample(&mut self, fd: RawFd, buf: &mut [u8], at: u64) -> (Result<usize, i32>, u64) {
        match self.btree.page_size_bytes() {
            Some(page_bytes) if page_bytes as usize != buf.len() => self.timed_read(fd, buf, at),
            _ => self.sampled_read(fd, buf, at),
        }
    }

    /// SQLite's read of `buf` at `at` when read-ahead samples it: the same bytes and result
    /// as `pread_fully`, with its kernel entries (the probe below counted as one more), and
    /// read-ahead told whether the read needed the device (`ReadAhead::note_uncached_read`,
    /// which wakes it).
    ///
    /// The page cache is asked alone first (`RWF_NOWAIT`, outside the system-call table:
    /// it fails nothing SQLite sees). Cached bytes are the answer, in one call. Bytes it
    /// did not give are read through the table's `pread`, which waits for the device; that
    /// read wakes read-ahead if it also took `device_read.after_miss`
    /// ([`crate::readahead::DEVICE_READ_AFTER_MISS`]), since `EAGAIN` alone can mean a
    /// lock a writer holds (XFS) or, before Linux 6.12, a cached page that carries the
    /// kernel's read-ahead mark. Where the probe cannot be made — while a test replaces the
    /// table's I/O calls (every read must reach the stand-in), and once the kernel refused
    /// it with anything but `EAGAIN` or `EINTR` (a file system that cannot read without
    /// waiting, a filter that denies `preadv2`: it is not tried again on this file) — the
    /// read is timed (`timed_read`).
    fn sampled_read(&mut self, fd: RawFd, buf: &mut [u8], at: u64) -> (Result<usize, i32>, u64) {
        if !self.nowait_probe || calls::io_replaced() {
            return self.timed_read(fd, buf, at);
        }
        let cached = match crate::sys::page_cache::read_nowait(fd, buf, at) {
            // All of it cached, or nothing to read (the end of the file).
            Ok(n) if n == buf.len() || n == 0 => return (Ok(n), 1),
            // The cache, or the file, stops after `n` bytes.
            Ok(n) => n,
            Err(libc::EAGAIN) => 0,
            Err(libc::EINTR) => {
                let (outcome, preads) = pread_fully(fd, buf, at);
                return (outcome, preads + 1);
            }
            Err(_) => {
                self.nowait_probe = false;
                let (outcome, preads) = self.timed_read(fd, buf, at);
                return (outcome, preads + 1);
            }
        };
        let started = std::time::Instant::now();
        let (rest, preads) = pread_fully(fd, &mut buf[cached..], at + cached as u64);
        if rest.is_ok_and(|more| more > 0) && started.elapsed() >= self.device_read.after_miss {
            self.btree.note_uncached_read();
        }
        (rest.map(|more| cached + more), preads + 1)
    }

    /// `pread_fully`, and read-ahead woken if it read something, took as long as a device
    /// read and the thread's I/O accounting confirms one (`device_was_read`).
    fn timed_read(&mut self, fd: RawFd, buf: &mut [u8], at: u64) -> (Result<usize, i32>, u64) {
        let started = std::time::Instant::now();
        let read = pread_fully(fd, buf, at);
        if read.0.is_ok_and(|n| n > 0)
            && started.elapsed() >= self.device_read.alone
            && device_was_read()
        {
            self.btree.note_uncached_read();
        }
        read
    }
}

thread_local! {
    /// The thread's device-read blocks (`sys::page_cache::thread_blocks_read`) when a
    /// slow read last asked; `None` before the first.
    static THREAD_BLOCKS_SEEN: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// After a read that took a device read's time: whether the calling thread had bytes read
/// from a device for it since the last slow read asked (since it started, the first
/// time). A hot read that was merely descheduled or interrupted (on a VM, about one in 500
/// takes that long) adds nothing, so it wakes nothing. A device read another process or
/// thread started, which this read only waited for, is not counted either: read-ahead then
/// wakes at a later sample. Only durations tell where the kernel cannot (the call failed)
/// and while a test replaces the table's I/O calls (its stand-in reads reach no device).
/// Asked on slow reads only, so it costs nothing on cached data.
#[cold]
fn device_was_read() -> bool {
    if calls::io_replaced() {
        return true;
    }
    let Some(now) = crate::sys::page_cache::thread_blocks_read() else {
        return true;
    };
    let seen = THREAD_BLOCKS_SEEN.with(|seen| seen.replace(Some(now)));
    now > seen.unwrap_or(0)
}

/// The database file as B-tree read-ahead sees it: its page cache, asked about outside the
/// system-call table (`sys::page_cache`), and prefetches performed by the file's engine
/// (one ring submission per batch on the io_uring backend, `posix_fadvise` calls on the
/// syscall backend), counted with the file's I/O.
struct DatabasePages<'a> {
    fd: RawFd,
    /// The file's read-ahead descriptor (`sys::page_cache::open_for_prefetch`), opened at
    /// the first prefetch; -1 until then, or for good when it could not be had.
    prefetch_fd: &'a mut PrefetchFd,
    io: Submitter<'a>,
}

impl DatabasePages<'_> {
    fn page_size_bytes(page: &[u8]) -> u64 {
        page.len() as u64
    }

    /// Where page `page_number` of `page_size_bytes` starts; `None` for page 0, which no
    /// file has (read-ahead's page numbers come from page bytes). A page past the end
    /// needs no check here: its offset fits (below 2^48), and the kernel finds nothing
    /// cached and nothing to read there.
    fn offset_of(page_number: u32, page_size_bytes: u64) -> Option<u64> {
        Some(u64::from(page_number.checked_sub(1)?) * page_size_bytes)
    }

    /// The descriptor read-ahead reads through: its own, or the file's when it has none.
    fn reader(&mut self) -> RawFd {
        if let PrefetchFd::NotYet = self.prefetch_fd {
            *self.prefetch_fd = match crate::sys::page_cache::open_for_prefetch(self.fd) {
                Some(fd) => PrefetchFd::Open(fd),
                None => PrefetchFd::Unavailable,
            };
        }
        match &*self.prefetch_fd {
            PrefetchFd::Open(fd) => fd.as_raw_fd(),
            PrefetchFd::NotYet | PrefetchFd::Unavailable => self.fd,
        }
    }
}

impl PageSource for DatabasePages<'_> {
    fn is_cached(&mut self, page_number: u32, page_size_bytes: u32) -> Option<bool> {
        let Some(offset) = Self::offset_of(page_number, page_size_bytes.into()) else {
            return Some(false);
        };
        // Without cachestat (before Linux 6.5, or refused: it wants a descriptor open for
        // writing, or the file's owner), a read of one byte that never waits tells the
        // same; on a miss it starts reading the page, which read-ahead wants anyway.
        let cached = crate::sys::page_cache::is_cached(self.fd, offset, page_size_bytes.into())
            .or_else(|| {
                let fd = self.reader();
                Some(crate::sys::page_cache::read_if_cached(
                    fd,
                    &mut [0u8; 1],
                    offset,
                ))
            });
        if cached == Some(true) {
            self.io.count(IoStats {
                prefetch_skips: 1,
                ..IoStats::default()
            });
        }
        cached
    }

    fn read_if_cached(&mut self, page_number: u32, buf: &mut [u8]) -> bool {
        let Some(offset) = Self::offset_of(page_number, Self::page_size_bytes(buf)) else {
            return false;
        };
        let fd = self.reader();
        crate::sys::page_cache::read_if_cached(fd, buf, offset)
    }

    fn prefetch(&mut self, pages: &[u32], page_size_bytes: u32) {
        if pages.contains(&0) {
            // No file has a page 0: a batch naming one came from bytes no check refused.
            return;
        }
        // A failed prefetch costs only speed: SQLite's own read still happens.
        let fd = self.reader();
        self.io.prefetch_pages(fd, pages, page_size_bytes);
    }

    fn page_count(&mut self, page_size_bytes: u32) -> u32 {
        let pages = crate::sys::page_cache::size_bytes(self.fd) / u64::from(page_size_bytes);
        pages.min(u64::from(u32::MAX)) as u32
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;

    use super::*;
    use crate::readahead::ReadAhead;
    use crate::sys::page_cache::advise;

    fn side() -> ReadAheadSide {
        ReadAheadSide {
            btree: ReadAhead::dormant(),
            prefetch_fd: PrefetchFd::NotYet,
            nowait_probe: true,
            // Any read that reached the device wakes read-ahead, however fast the disk.
            device_read: DeviceReadDurations {
                alone: std::time::Duration::ZERO,
                after_miss: std::time::Duration::ZERO,
            },
        }
    }

    /// A file of `pages` 4 KiB pages on a file system whose pages can be evicted.
    fn file_of_pages(pages: u8) -> std::fs::File {
        let mut file = tempfile::tempfile_in("/var/tmp").expect("a temporary file in /var/tmp");
        for page in 0..pages {
            file.write_all(&[page; 4096]).unwrap();
        }
        file.sync_all().unwrap();
        file
    }

    fn evict(file: &std::fs::File) {
        assert_eq!(advise(file.as_raw_fd(), libc::POSIX_FADV_DONTNEED), 0);
    }

    /// A read of one page of a new file through `read`, cached and then evicted: it wakes
    /// read-ahead only when a device read the page, however long the read took (every
    /// read counts as slow here), in `calls_cached` and `calls_evicted` system calls.
    fn wakes_only_on_device_reads(read: ReadWith, calls_cached: u64, calls_evicted: u64) {
        let file = file_of_pages(4);
        let fd = file.as_raw_fd();
        let mut page = [0u8; 4096];
        let mut side = side();
        // What the thread had read from devices before, so that only this test's reads count.
        device_was_read();
        // Just written: cached.
        assert_eq!(
            read(&mut side, fd, &mut page, 4096),
            (Ok(4096), calls_cached)
        );
        assert_eq!(page, [1u8; 4096]);
        assert!(!side.btree.is_awake());
        evict(&file);
        assert_eq!(
            read(&mut side, fd, &mut page, 2 * 4096),
            (Ok(4096), calls_evicted)
        );
        assert_eq!(page, [2u8; 4096]);
        assert!(side.btree.is_awake());
        assert!(side.nowait_probe);
    }

    type ReadWith = fn(&mut ReadAheadSide, RawFd, &mut [u8], u64) -> (Result<usize, i32>, u64);

    #[test]
    fn a_sampled_read_wakes_readahead_only_when_its_pages_were_not_cached() {
        // Evicted: the page cache is asked (EAGAIN), then the table's pread reads it.
        wakes_only_on_device_reads(ReadAheadSide::sampled_read, 1, 2);
    }

    #[test]
    fn a_timed_read_wakes_readahead_only_when_a_device_read_it() {
        // The thread's I/O accounting tells a device read from a slow cached one.
        wakes_only_on_device_reads(ReadAheadSide::timed_read, 1, 1);
    }

    #[test]
    fn a_sampled_read_past_the_end_or_partly_cached_reads_what_pread_reads() {
        let file = file_of_pages(2);
        let fd = file.as_raw_fd();
        let mut two = [9u8; 2 * 4096];
        // Past the end: nothing, and no wake (in one call; two before Linux 5.16, whose
        // probe answers EAGAIN there).
        let mut past = side();
        let (outcome, preads) = past.sampled_read(fd, &mut two, 4 * 4096);
        assert_eq!(outcome, Ok(0));
        assert!(matches!(preads, 1 | 2), "{preads} calls");
        assert!(!past.btree.is_awake());
        // The file ends inside the buffer: the cached page, then the end.
        let mut end = side();
        assert_eq!(end.sampled_read(fd, &mut two, 4096), (Ok(4096), 2));
        assert_eq!(&two[..4096], &[1u8; 4096][..]);
        assert!(!end.btree.is_awake());
        // The first page cached, the second evicted: both read, and the second woke it.
        evict(&file);
        // Without it, the kernel's own read-ahead would cache the second page too.
        assert_eq!(advise(fd, libc::POSIX_FADV_RANDOM), 0);
        let mut first = [0u8; 4096];
        assert_eq!(pread_fully(fd, &mut first, 0), (Ok(4096), 1));
        // The kernel may still have brought the second page in with the first (a folio
        // of both, or read-around despite the advice): evicted again alone, and checked
        // where the kernel can tell (`cachestat`, which reads nothing in).
        use crate::sys::page_cache::{advise_range, is_cached};
        for _ in 0..8 {
            if is_cached(fd, 4096, 4096) != Some(true) {
                break;
            }
            assert_eq!(advise_range(fd, 4096, 4096, libc::POSIX_FADV_DONTNEED), 0);
        }
        assert_ne!(is_cached(fd, 0, 4096), Some(false), "the first page cached");
        assert_ne!(
            is_cached(fd, 4096, 4096),
            Some(true),
            "the second page not cached"
        );
        let mut partly = side();
        assert_eq!(partly.sampled_read(fd, &mut two, 0), (Ok(2 * 4096), 2));
        assert_eq!(&two[..4096], &[0u8; 4096][..]);
        assert_eq!(&two[4096..], &[1u8; 4096][..]);
        assert!(partly.btree.is_awake());
    }

    #[test]
    fn a_refused_probe_leaves_the_error_to_the_table_pread_and_is_not_tried_again() {
        let mut page = [0u8; 4096];
        let mut bad = side();
        let preads = pread_fully(-1, &mut page, 0).1;
        assert_eq!(
            bad.sampled_read(-1, &mut page, 0),
            (Err(libc::EBADF), preads + 1)
        );
        assert!(!bad.btree.is_awake());
        assert!(
            !bad.nowait_probe,
            "refused once, read by duration from then on"
        );
        assert_eq!(
            bad.sampled_read(-1, &mut page, 0),
            (Err(libc::EBADF), preads)
        );
    }

    #[test]
    fn database_pages_read_no_page_0_and_nothing_past_the_end() {
        let file = file_of_pages(2);
        let engine = crate::io::EngineKind::Syscall;
        let stats = SharedStats::default();
        let mut prefetch_fd = PrefetchFd::NotYet;
        let mut pages = DatabasePages {
            fd: file.as_raw_fd(),
            prefetch_fd: &mut prefetch_fd,
            io: Submitter {
                engine: &engine,
                file_stats: &stats,
                vfs_stats: &stats,
            },
        };
        let mut page = [9u8; 4096];
        assert_ne!(pages.is_cached(0, 4096), Some(true));
        assert!(!pages.read_if_cached(0, &mut page));
        assert_eq!(page, [9u8; 4096], "nothing read for page 0");
        pages.prefetch(&[0], 4096);
        // Pages 1 and 2 are the file's; page 3 lies past its end.
        assert!(pages.read_if_cached(2, &mut page));
        assert_eq!(page, [1u8; 4096]);
        assert!(!pages.read_if_cached(3, &mut page));
        assert_ne!(pages.is_cached(3, 4096), Some(true));
        assert!(!pages.read_if_cached(u32::MAX, &mut page));
        assert_ne!(pages.is_cached(u32::MAX, 4096), Some(true));
        assert_eq!(pages.page_count(4096), 2);
    }
}
