//! Memory-mapped reads of the database file (xFetch/xUnfetch, `PRAGMA mmap_size`).
//!
//! Mirrors os_unix.c: a read-only `MAP_SHARED` mapping of the first
//! `min(file size, mmap_size)` bytes. Writes still go through the engine; the mapping
//! stays coherent with them because both use the page cache. The mapping only changes
//! while no page is fetched (`fetch_count == 0`), since SQLite holds pointers into it.
//! If `mmap` fails, mapping is switched off for the file and reads fall back to the
//! engine, as os_unix.c does ("assume that all subsequent mmap() calls will probably
//! fail too").

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error::Failure;
use crate::sys::Mapping;

/// `SQLITE_MAX_MMAP_SIZE` of the default build: the largest mapping SQLite asks for.
pub(crate) const MAX_MMAP_SIZE_BYTES: i64 = 0x7fff_0000;

/// Bytes of addressable memory xFetch requires after a page it hands out, as the `unix`
/// VFS of SQLite `libversion_number` does. From SQLite 3.46.0 on, os_unix.c's unixFetch
/// serves a page from the mapping only when 256 more mapped bytes follow it ("nEofBuffer":
/// SQLite may over-read a corrupt page slightly), so the file's last page is read with
/// xRead; up to 3.45 it requires none and the last page is fetched too. Matching it keeps
/// the number of xRead calls (SQLite's `mmap1.test` counts them) and what a corrupt page
/// can reach identical to `unix` of the same SQLite.
pub(crate) fn eof_buffer_bytes(libversion_number: i32) -> i64 {
    if libversion_number >= 3_046_000 {
        256
    } else {
        0
    }
}

pub(crate) struct MemoryMap {
    /// The current mapping; SQLite holds pointers into it while `fetch_count > 0`, so it
    /// is replaced or dropped only while that is 0 (and when the file is dropped).
    mapping: Option<Mapping>,
    /// Bytes usable; reads at offsets below this can be served from the mapping (at most
    /// its length: truncation lowers it).
    size_bytes: i64,
    /// `PRAGMA mmap_size` for this file; 0 disables mapping.
    limit_bytes: i64,
    /// Pages handed to SQLite by xFetch and not yet returned by xUnfetch.
    fetch_count: i32,
    /// Mapped bytes a fetched page must be followed by ([`eof_buffer_bytes`]).
    eof_buffer_bytes: i64,
    /// errno of an `mmap` that failed and switched mapping off, until
    /// [`MemoryMap::take_failure`] collects it for the log.
    failed_errno: Option<i32>,
}

impl MemoryMap {
    pub(crate) fn new(limit_bytes: i64, eof_buffer_bytes: i64) -> MemoryMap {
        MemoryMap {
            mapping: None,
            size_bytes: 0,
            limit_bytes,
            fetch_count: 0,
            eof_buffer_bytes,
            failed_errno: None,
        }
    }

    /// The errno of the `mmap` that failed since the last call, if one did.
    pub(crate) fn take_failure(&mut self) -> Option<i32> {
        self.failed_errno.take()
    }

    pub(crate) fn is_mapped(&self) -> bool {
        self.mapping.is_some()
    }

    /// Copies from the mapping when `[offset, offset + buf.len())` lies inside it.
    /// Returns how many leading bytes of `buf` were filled (os_unix.c unixRead serves
    /// the mapped prefix from memory and reads the rest).
    pub(crate) fn read_prefix(&self, buf: &mut [u8], offset: i64) -> usize {
        let Some(mapping) = self.mapping.as_ref() else {
            return 0;
        };
        if offset >= self.size_bytes {
            return 0;
        }
        let available = (self.size_bytes - offset) as usize;
        let count = available.min(buf.len());
        // offset + count <= size_bytes <= the mapping's length.
        mapping.copy_to(offset as usize, &mut buf[..count]);
        count
    }

    /// Truncation: pages past the new end must not be served from the mapping.
    pub(crate) fn clamp_to(&mut self, size_bytes: i64) {
        self.size_bytes = self.size_bytes.min(size_bytes);
    }

    /// xFetch: a pointer to `amount` bytes at `offset`, or null (SQLite then reads).
    /// `fd` is the file's descriptor (`None` once it is closed).
    pub(crate) fn fetch(
        &mut self,
        fd: Option<BorrowedFd<'_>>,
        offset: i64,
        amount: i32,
    ) -> Result<*mut u8, Failure> {
        if self.limit_bytes <= 0 {
            return Ok(std::ptr::null_mut());
        }
        if self.mapping.is_none() {
            self.map(fd, None)?;
        }
        match self.mapping.as_ref() {
            Some(mapping) if self.size_bytes >= offset + amount as i64 + self.eof_buffer_bytes => {
                self.fetch_count += 1;
                // offset < size_bytes <= the mapping's length.
                Ok(mapping.address_at(offset as usize))
            }
            _ => Ok(std::ptr::null_mut()),
        }
    }

    /// Pages xFetch handed out that xUnfetch has not returned.
    pub(crate) fn fetched_pages(&self) -> i32 {
        self.fetch_count
    }

    /// xUnfetch: returns one page (`page` non-null) or, with null, drops the whole
    /// mapping so the next fetch maps the file at its current size.
    pub(crate) fn unfetch(&mut self, page: *mut u8) {
        if page.is_null() {
            assert_eq!(
                self.fetch_count, 0,
                "xUnfetch(NULL) with pages still fetched"
            );
            self.unmap();
        } else {
            assert!(self.fetch_count > 0, "xUnfetch of a page never fetched");
            self.fetch_count -= 1;
        }
    }

    /// SQLITE_FCNTL_MMAP_SIZE: sets a new limit (negative: query only) and returns the old.
    pub(crate) fn set_limit(
        &mut self,
        fd: Option<BorrowedFd<'_>>,
        requested_bytes: i64,
    ) -> Result<i64, Failure> {
        let old = self.limit_bytes;
        let new = requested_bytes.min(MAX_MMAP_SIZE_BYTES);
        if new >= 0 && new != self.limit_bytes && self.fetch_count == 0 {
            self.limit_bytes = new;
            if self.size_bytes > 0 {
                self.unmap();
                self.map(fd, None)?;
            }
        }
        Ok(old)
    }

    /// SQLITE_FCNTL_SIZE_HINT growth: map `size_bytes` (the file has been extended).
    pub(crate) fn grow_to(
        &mut self,
        fd: Option<BorrowedFd<'_>>,
        size_bytes: i64,
    ) -> Result<(), Failure> {
        self.map(fd, Some(size_bytes))
    }

    pub(crate) fn wants_growth(&self, size_bytes: i64) -> bool {
        self.limit_bytes > 0 && size_bytes > self.size_bytes
    }

    /// Maps `min(size, limit)` bytes, `size` defaulting to the file's current size.
    fn map(&mut self, fd: Option<BorrowedFd<'_>>, size_bytes: Option<i64>) -> Result<(), Failure> {
        if self.fetch_count > 0 {
            return Ok(());
        }
        let file_size = match size_bytes {
            Some(size) => size,
            None => fd
                .map_or(Err(libc::EBADF), crate::sys::fstat)
                .map(|st| st.st_size)
                .map_err(Failure::Fstat)?,
        };
        let want = file_size.min(self.limit_bytes);
        if want == self.size_bytes && self.mapping.is_some() {
            return Ok(());
        }
        self.unmap();
        if want <= 0 {
            return Ok(());
        }
        // A new read-only shared mapping, kept until `unmap`. A closed file's descriptor
        // is -1: the kernel answers EBADF.
        match Mapping::of_file(
            want as usize,
            libc::PROT_READ,
            fd.map_or(-1, |fd| fd.as_raw_fd()),
            0,
        ) {
            Ok(mapping) => {
                self.mapping = Some(mapping);
                self.size_bytes = want;
            }
            Err(errno) => {
                self.failed_errno = Some(errno);
                self.limit_bytes = 0;
            }
        }
        Ok(())
    }

    /// Drops the mapping. Callers check that no fetched page remains (`fetch_count`).
    pub(crate) fn unmap(&mut self) {
        self.mapping = None;
        self.size_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::eof_buffer_bytes;

    #[test]
    fn the_eof_buffer_follows_the_running_sqlite() {
        assert_eq!(eof_buffer_bytes(3_040_001), 0);
        assert_eq!(eof_buffer_bytes(3_045_003), 0);
        assert_eq!(eof_buffer_bytes(3_046_000), 256);
        assert_eq!(eof_buffer_bytes(3_054_001), 256);
    }
}
