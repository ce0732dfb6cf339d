//! Shared memory for the WAL index (xShmMap/xShmLock/xShmBarrier/xShmUnmap).
//!
//! # Layout, compatible with SQLite's `unix` VFS (os_unix.c, walformat.html)
//! * File: the database path plus `-shm`, created with the database file's permission bits
//!   (and owner, when running as root).
//! * Regions of `region_size_bytes` (SQLite asks for 32 KiB) mapped `MAP_SHARED` from the
//!   file at `region * region_size_bytes`; the file is extended by writing one byte at
//!   the end of each new 4 KiB page, so that later accesses do not SIGBUS.
//! * Lock slots: `SQLITE_SHM_NLOCK` (8) one-byte locks at `SHM_LOCK_BASE` (120) + slot:
//!   0 WRITE, 1 CHECKPOINT, 2 RECOVER, 3..7 READ(0..4). The dead-man switch (DMS) byte
//!   is `SHM_LOCK_BASE + 8` (128): every connection using the file holds a read lock on
//!   it; the first one in (no lock held by anyone) takes it for write and truncates the
//!   file, discarding an index that a crash may have left inconsistent.
//!
//! # Per-connection state
//! Each database handle opens its own `-shm` descriptor, mapping and OFD locks. OFD locks
//! make two connections of one process conflict like two processes (see `lock.rs`), and
//! `MAP_SHARED` mappings of one file share the same pages, so no in-process registry (the
//! `unixShmNode` of os_unix.c) is needed.
//!
//! # Flush rule (for write-behind)
//! No connection may observe a WAL-index header that names frames not yet written to the
//! `-wal` file. Any queued writes of this process must therefore be submitted and completed
//! before xShmBarrier, before xShmLock changes a lock, and before xSync or a database-lock
//! change returns (docs/ARCHITECTURE.md, "Write-behind and its flush points").

use std::ffi::CString;
use std::os::fd::RawFd;

use crate::error::Failure;
use crate::ffi::{
    SQLITE_SHM_EXCLUSIVE, SQLITE_SHM_LOCK, SQLITE_SHM_NLOCK, SQLITE_SHM_SHARED, SQLITE_SHM_UNLOCK,
};
use crate::io::Submitter;
use crate::lock::{conflicting_lock, set_lock, LockType};
use crate::sys::calls;

/// Offset of the first lock slot in the `-shm` file (os_unix.c UNIX_SHM_BASE:
/// `(22 + SQLITE_SHM_NLOCK) * 4`, just past the two copies of the WAL-index header and
/// the checkpoint info).
pub(crate) const SHM_LOCK_BASE: i64 = (22 + SQLITE_SHM_NLOCK as i64) * 4;
/// The dead-man-switch byte (os_unix.c UNIX_SHM_DMS).
pub(crate) const SHM_DMS: i64 = SHM_LOCK_BASE + SQLITE_SHM_NLOCK as i64;
/// Page size used when extending the `-shm` file (os_unix.c unixShmMap, `pgsz`).
const SHM_EXTEND_PAGE_BYTES: i64 = 4096;
/// The first read-mark slot (wal.c WAL_READ_LOCK(0)).
const FIRST_READ_SLOT: i64 = 3;

pub(crate) struct Shm {
    fd: RawFd,
    path: CString,
    readonly: bool,
    /// A read-only connection found no one holding the DMS: SQLite must build a private
    /// heap index (SQLITE_READONLY_CANTINIT) until someone initialises the file.
    dms_unlocked: bool,
    region_size_bytes: usize,
    regions: Vec<*mut u8>,
    shared_mask: u16,
    exclusive_mask: u16,
}

// SAFETY: the regions are shared file mappings owned by one database handle, which SQLite
// uses from one thread at a time.
unsafe impl Send for Shm {}

impl Shm {
    /// Opens (creating if allowed) `<db>-shm` and joins the DMS protocol.
    /// `db_stat` is the database file's fstat, for permission bits and owner.
    pub(crate) fn open(
        db_path: &str,
        db_stat: &libc::stat,
        readonly_shm: bool,
    ) -> Result<Shm, Failure> {
        let path =
            CString::new(format!("{db_path}-shm")).map_err(|_| Failure::CantOpen(libc::EINVAL))?;
        let mode = db_stat.st_mode & 0o777;
        // os_unix.c unixOpenSharedMemory opens it through robust_open with the database's
        // bits: created with them and, when the umask took some away, fchmod'ed to them.
        let open =
            |flags: i32| crate::sys::open_with_created_mode(&path, flags | libc::O_NOFOLLOW, mode);
        let mut readonly = false;
        let read_write = if readonly_shm {
            Err(libc::EACCES)
        } else {
            open(libc::O_RDWR | libc::O_CREAT)
        };
        let fd = match read_write {
            Ok(fd) => fd,
            Err(_) => {
                readonly = true;
                open(libc::O_RDONLY).map_err(Failure::CantOpen)?
            }
        };
        // Running as root must not leave a -shm file other users of the database cannot
        // open (os_unix.c robustFchown).
        // SAFETY: plain syscalls on our own fd.
        unsafe {
            if calls::geteuid() == 0 {
                let _ = calls::fchown(fd, db_stat.st_uid, db_stat.st_gid);
            }
        }
        let mut shm = Shm {
            fd,
            path,
            readonly,
            dms_unlocked: false,
            region_size_bytes: 0,
            regions: Vec::new(),
            shared_mask: 0,
            exclusive_mask: 0,
        };
        match shm.join_dead_man_switch() {
            Ok(()) | Err(Failure::ReadonlyCantInit) => Ok(shm),
            Err(failure) => Err(failure),
        }
    }

    /// os_unix.c unixLockSharedMemory: first user in truncates the index; later users
    /// join with a shared DMS lock; a user mid-initialisation makes us return BUSY.
    fn join_dead_man_switch(&mut self) -> Result<(), Failure> {
        match conflicting_lock(self.fd, LockType::Write, SHM_DMS, 1).map_err(Failure::Lock)? {
            None if self.readonly => {
                self.dms_unlocked = true;
                return Err(Failure::ReadonlyCantInit);
            }
            None => {
                set_lock(self.fd, LockType::Write, SHM_DMS, 1).map_err(|_| Failure::Busy)?;
                // Truncate to 3 bytes rather than 0, as os_unix.c does, so a legitimate
                // truncation is recognisable when debugging.
                // SAFETY: plain syscall on our own fd.
                if unsafe { calls::ftruncate(self.fd, 3) } != 0 {
                    return Err(Failure::ShmOpen(crate::sys::last_errno()));
                }
            }
            Some(LockType::Write) => return Err(Failure::Busy),
            Some(_) => {}
        }
        set_lock(self.fd, LockType::Read, SHM_DMS, 1).map_err(|_| Failure::Busy)?;
        self.dms_unlocked = false;
        Ok(())
    }

    /// xShmMap. Returns the region pointer (null when it does not exist and `extend` is
    /// false) and whether the connection is read-only (SQLite then gets SQLITE_READONLY).
    pub(crate) fn map(
        &mut self,
        io: &mut Submitter<'_>,
        region: usize,
        region_size_bytes: usize,
        extend: bool,
    ) -> Result<*mut u8, Failure> {
        if self.dms_unlocked {
            self.join_dead_man_switch()?;
        }
        assert!(self.regions.is_empty() || region_size_bytes == self.region_size_bytes);
        assert!(region_size_bytes > 0 && region_size_bytes as i64 % SHM_EXTEND_PAGE_BYTES == 0);
        self.region_size_bytes = region_size_bytes;
        if self.regions.len() <= region {
            let needed_bytes = ((region + 1) * region_size_bytes) as i64;
            let size_bytes = crate::sys::fstat(self.fd)
                .map_err(Failure::ShmSize)?
                .st_size;
            if size_bytes < needed_bytes {
                if !extend {
                    return Ok(std::ptr::null_mut());
                }
                self.extend(io, size_bytes, needed_bytes)?;
            }
            let protection = if self.readonly {
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_WRITE
            };
            while self.regions.len() <= region {
                let offset = (self.regions.len() * region_size_bytes) as i64;
                // SAFETY: a new shared mapping of our own fd; kept until `unmap`.
                let base = unsafe {
                    calls::mmap(
                        std::ptr::null_mut(),
                        region_size_bytes,
                        protection,
                        libc::MAP_SHARED,
                        self.fd,
                        offset,
                    )
                };
                if base == libc::MAP_FAILED {
                    return Err(Failure::ShmMap(crate::sys::last_errno()));
                }
                self.regions.push(base as *mut u8);
            }
        }
        Ok(self.regions[region])
    }

    /// Allocates `[from_bytes, to_bytes)` by writing the last byte of every new page, in
    /// one batch.
    fn extend(
        &mut self,
        io: &mut Submitter<'_>,
        from_bytes: i64,
        to_bytes: i64,
    ) -> Result<(), Failure> {
        static ZERO: [u8; 1] = [0];
        let first_page = from_bytes / SHM_EXTEND_PAGE_BYTES;
        let last_page = to_bytes / SHM_EXTEND_PAGE_BYTES;
        let pieces: Vec<(u64, &[u8])> = (first_page..last_page)
            .map(|page| {
                (
                    (page * SHM_EXTEND_PAGE_BYTES + SHM_EXTEND_PAGE_BYTES - 1) as u64,
                    &ZERO[..],
                )
            })
            .collect();
        io.write_batch(self.fd, &pieces)
            .map_err(|failure| match failure {
                crate::io::WriteFailure::Errno(errno) => Failure::ShmSize(errno),
                crate::io::WriteFailure::NoProgress => Failure::ShmSize(libc::ENOSPC),
            })
    }

    pub(crate) fn is_readonly(&self) -> bool {
        self.readonly
    }

    /// xShmLock on slots `[offset, offset + count)`.
    pub(crate) fn lock(&mut self, offset: i32, count: i32, flags: i32) -> Result<(), Failure> {
        assert!(offset >= 0 && count >= 1 && offset + count <= SQLITE_SHM_NLOCK);
        let mask: u16 = (((1u32 << count) - 1) << offset) as u16;
        let start = SHM_LOCK_BASE + offset as i64;
        if flags & SQLITE_SHM_UNLOCK != 0 {
            if (self.shared_mask | self.exclusive_mask) & mask != 0 {
                set_lock(self.fd, LockType::Unlock, start, count as i64)
                    .map_err(Failure::Unlock)?;
            }
            self.shared_mask &= !mask;
            self.exclusive_mask &= !mask;
            return Ok(());
        }
        assert!(flags & SQLITE_SHM_LOCK != 0);
        let kind = if flags & SQLITE_SHM_SHARED != 0 {
            assert_eq!(
                count, 1,
                "SQLite takes shared WAL-index locks one slot at a time"
            );
            LockType::Read
        } else {
            assert!(flags & SQLITE_SHM_EXCLUSIVE != 0);
            LockType::Write
        };
        // os_unix.c unixShmSystemLock: any failure to lock is reported as SQLITE_BUSY.
        set_lock(self.fd, kind, start, count as i64).map_err(|_| Failure::Busy)?;
        if kind == LockType::Read {
            self.shared_mask |= mask;
            self.exclusive_mask &= !mask;
        } else {
            self.exclusive_mask |= mask;
            self.shared_mask &= !mask;
        }
        Ok(())
    }

    /// SQLITE_FCNTL_EXTERNAL_READER: does another connection hold a read mark?
    pub(crate) fn has_external_reader(&self) -> Result<bool, Failure> {
        conflicting_lock(
            self.fd,
            LockType::Write,
            SHM_LOCK_BASE + FIRST_READ_SLOT,
            SQLITE_SHM_NLOCK as i64 - FIRST_READ_SLOT,
        )
        .map(|conflict| conflict.is_some())
        .map_err(Failure::Lock)
    }

    /// xShmUnmap: unmap, close (dropping our OFD locks) and, when SQLite says this is the
    /// last connection, delete the file.
    pub(crate) fn close(mut self, delete: bool) {
        self.unmap_regions();
        if delete {
            // SAFETY: `path` is NUL-terminated.
            unsafe { calls::unlink(self.path.as_ptr()) };
        }
    }

    fn unmap_regions(&mut self) {
        for base in self.regions.drain(..) {
            // SAFETY: each region is a mapping of region_size_bytes that we created.
            unsafe { calls::munmap(base.cast(), self.region_size_bytes) };
        }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        self.unmap_regions();
        if self.fd >= 0 {
            // Releases our OFD locks; parks the fd if a `unix` connection of this process
            // holds POSIX locks on the -shm file.
            crate::lock::close_preserving_process_locks(self.fd);
            self.fd = -1;
        }
    }
}
