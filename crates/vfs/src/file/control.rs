//! Locks, file controls (decoded at the FFI edge into [`FileControl`]; the reply goes
//! back as a [`ControlReply`]), `PRAGMA io_uring_stats`, shared memory and
//! memory-mapped pages.

use std::ffi::c_int;

use crate::error::Failure;
use crate::ffi::*;
use crate::shm::Shm;
pub(crate) use crate::shm::ShmLockRequest;
use crate::sys::stat_c_path;
use crate::write_behind;

use super::open::temp_file_name;
use super::{round_up, File};

/// os_unix.c SQLITE_DEFAULT_SECTOR_SIZE: what `unix` reports on Linux.
const SECTOR_SIZE_BYTES: c_int = 4096;
/// Blocks a size hint extends per write batch (one byte written in each).
const SIZE_HINT_BATCH_BLOCKS: usize = 64;

impl File {
    /// The lock level this connection holds (what SQLITE_FCNTL_LOCKSTATE reports).
    pub(crate) fn lock_level(&self) -> c_int {
        self.lock.level()
    }

    /// Whether xLock and xUnlock lock anything: only a main database's do. On a journal,
    /// WAL or temporary file they are SQLITE_OK, record no level, and xCheckReservedLock
    /// finds nothing, as os_unix.c's nolockIoMethods (which `unix` gives those files)
    /// answer whatever the level.
    pub(crate) fn takes_locks(&self) -> bool {
        self.settings.carries_locks
    }

    /// Logs, under this file's name, a call refused at the FFI edge (`entry.rs`) with the
    /// code it returns; `what` names the call, its arguments and the outcome.
    pub(crate) fn log_refusal(&self, code: c_int, what: &str) {
        let path = self.path.as_deref().unwrap_or("");
        self.vfs
            .api
            .log(code, &format!("sqlite-uring: {path}: {what}"));
    }

    /// xTruncate to a negative size, answered as os_unix.c answers it: ftruncate(2)'s
    /// EINVAL, logged as os_unix.c logs a failed ftruncate.
    pub(crate) fn refuse_negative_truncate(&self) -> Failure {
        self.log_os_error(SQLITE_IOERR_TRUNCATE, "ftruncate", libc::EINVAL);
        Failure::Truncate(libc::EINVAL)
    }

    pub(crate) fn lock(&mut self, level: c_int) -> Result<(), Failure> {
        self.flush_queue(write_behind::Caller::Quiet)?;
        if !self.settings.carries_locks {
            return Ok(());
        }
        self.forget_cached_reads();
        if self.settings.nolock {
            self.lock
                .set_level_without_os_lock(level.max(self.lock.level()));
            return Ok(());
        }
        // The last connection of a WAL database locks it exclusively to checkpoint and
        // delete the WAL and its index: not while another process still uses the index.
        if level > SQLITE_LOCK_SHARED
            && self.lock.level() < level
            && self.shm.as_ref().is_some_and(Shm::used_by_another_process)
        {
            return Err(Failure::Busy);
        }
        let locked = self.lock.lock(level);
        if locked.is_err() && self.lock.is_inherited() {
            self.log_inherited_use();
        }
        locked
    }

    /// Logs, once per file, a lock or WAL-index request made through a connection that
    /// was opened before a `fork()` in the parent: refused, as the locks it would take
    /// are the parent's (lock.rs, "A connection carried across `fork()`").
    #[cold]
    fn log_inherited_use(&mut self) {
        if self.lock.first_inherited_use() {
            self.log_refusal(
                SQLITE_BUSY,
                "locking refused: this connection was opened in the parent of this forked \
                 process; open a new connection in the child",
            );
        }
    }

    pub(crate) fn unlock(&mut self, level: c_int) -> Result<(), Failure> {
        self.flush_queue(write_behind::Caller::Quiet)?;
        if !self.settings.carries_locks {
            return Ok(());
        }
        self.forget_cached_reads();
        // Another connection may change the file once we drop EXCLUSIVE.
        self.size.lock_dropped();
        if self.settings.nolock {
            self.lock
                .set_level_without_os_lock(level.min(self.lock.level()));
            return Ok(());
        }
        self.lock.unlock(level)
    }

    pub(crate) fn check_reserved_lock(&mut self) -> Result<bool, Failure> {
        self.flush_queue(write_behind::Caller::Quiet)?;
        if self.settings.nolock || !self.settings.carries_locks {
            return Ok(false);
        }
        self.lock.check_reserved()
    }

    pub(crate) fn sector_size(&self) -> c_int {
        SECTOR_SIZE_BYTES
    }

    /// Exactly what the `unix` VFS reports on Linux (os_unix.c setDeviceCharacteristics):
    /// POWERSAFE_OVERWRITE (unless `psow=0`) and SUBPAGE_READ. Claiming SAFE_APPEND or
    /// SEQUENTIAL would let SQLite skip journal syncs.
    ///
    /// SUBPAGE_READ (SQLite ≥ 3.48) is what lets the pager read a blob's overflow pages
    /// straight into the caller's buffer (sqlite3PagerDirectReadOk) instead of through
    /// its page cache (what that costs: docs/DESIGN.md, "Parity with `unix` comes
    /// first").
    /// `read` serves any offset and length: it flushes pending writes first, and an O_DIRECT
    /// file sends a read its alignment does not allow to the buffered descriptor.
    pub(crate) fn device_characteristics(&self) -> c_int {
        let psow = if self.settings.psow {
            SQLITE_IOCAP_POWERSAFE_OVERWRITE
        } else {
            0
        };
        psow | SQLITE_IOCAP_SUBPAGE_READ
    }

    /// SQLITE_FCNTL_SIZE_HINT (os_unix.c fcntlSizeHint): with a chunk size, allocate up
    /// to the next chunk; with mmap on, extend the file and the mapping.
    fn size_hint(&mut self, size_bytes: i64) -> Result<(), Failure> {
        if let Some(chunk) = self.settings.chunk_bytes() {
            let target = round_up(size_bytes, chunk);
            let st = self.fstat().map_err(Failure::Fstat)?;
            if target > st.st_size {
                // Write one byte at the end of every block of the new region, then at the
                // new end, like os_unix.c does without posix_fallocate, a batch of blocks
                // at a time (no allocation), stopping at the first batch that fails.
                let block = st.st_blksize.max(512);
                let zero = [0u8];
                let mut pieces = [(0u64, &zero[..]); SIZE_HINT_BATCH_BLOCKS];
                let mut at = (st.st_size / block) * block + block - 1;
                let end = target.saturating_add(block - 1);
                let fd = self.fd();
                while at < end {
                    let mut count = 0;
                    while count < SIZE_HINT_BATCH_BLOCKS && at < end {
                        pieces[count] = (at.min(target - 1) as u64, &zero[..]);
                        count += 1;
                        at = at.saturating_add(block);
                    }
                    self.submitter()
                        .write_batch(fd, &pieces[..count])
                        .map_err(Failure::from)?;
                }
                self.size.note_at_least(target);
            }
        }
        if self.mmap.wants_growth(size_bytes) {
            if self.settings.chunk_bytes().is_none() {
                // os_unix.c ftruncates to the hint, which shrinks a file longer than it
                // (but longer than the mapping): the cached size is the hint's.
                let fd = self.fd();
                if let Err(errno) = self.submitter().truncate(fd, size_bytes as u64) {
                    self.size.forget();
                    self.log_os_error(SQLITE_IOERR_TRUNCATE, "ftruncate", errno);
                    return Err(Failure::Truncate(errno));
                }
                self.size.remember(size_bytes, self.exclusive());
            }
            let grown = self.mmap.grow_to(self.descriptor.borrowed(), size_bytes);
            self.log_map_failure();
            grown?;
        }
        Ok(())
    }

    /// os_unix.c fileHasMoved: the path no longer names this file. SQLite asks before
    /// every write transaction; like os_unix.c (which compares with the inode it noted at
    /// open), this costs one stat(2) of the path, not a stat and an fstat.
    fn has_moved(&mut self) -> bool {
        let Some(path) = &self.path else { return false };
        let identity = match self.identity {
            Some(identity) => identity,
            None => {
                // A failed fstat says nothing about the path: not moved (os_unix.c
                // compares with the inode it read at open and never fstats here).
                let Ok(mine) = self.fstat() else {
                    return false;
                };
                let identity = (mine.st_dev, mine.st_ino);
                self.identity = Some(identity);
                identity
            }
        };
        match stat_c_path(path.as_c_str()) {
            Some(st) => (st.st_dev, st.st_ino) != identity,
            None => true,
        }
    }

    /// `PRAGMA io_uring_stats` (this file's and the VFS's counters as JSON) and
    /// `PRAGMA io_uring_stats=reset`. Other pragmas are SQLite's.
    fn pragma(&mut self, name: &str, value: Option<&str>) -> ControlReply {
        if !name.eq_ignore_ascii_case("io_uring_stats") {
            return ControlReply::NotFound;
        }
        match value {
            None => ControlReply::Text(format!(
                "{{\"vfs\":\"{}\",\"engine\":\"{}\",{},\"direct_align_bytes\":{},\"file\":{},\"vfs_total\":{}}}",
                self.vfs.name,
                self.settings.engine.name(),
                self.settings.engine.routing_json(),
                self.direct
                    .database
                    .as_ref()
                    .map_or("null".to_string(), |d| d.align_bytes.to_string()),
                self.stats_snapshot().to_json(),
                self.vfs.stats.snapshot().to_json()
            )),
            Some(v) if v.eq_ignore_ascii_case("reset") => {
                self.stats.reset();
                if let Some(reads) = &self.reads {
                    self.reads_at_reset = reads.counts();
                }
                self.vfs.stats.reset();
                ControlReply::Text("reset".to_string())
            }
            Some(other) => ControlReply::TextError(format!(
                "unknown argument `{other}`: use PRAGMA io_uring_stats or PRAGMA io_uring_stats=reset"
            )),
        }
    }

    /// xFileControl. Answers the opcodes os_unix.c answers on Linux, plus
    /// `PRAGMA io_uring_stats`; everything else is [`ControlReply::NotFound`].
    pub(crate) fn file_control(&mut self, control: FileControl) -> Result<ControlReply, Failure> {
        match control {
            // Checkpoint writes go straight through: SQLite ignores CKPT_DONE's result and
            // then publishes nBackfill, so nothing may still be queued by then. It ignores
            // CKPT_START's result too and checkpoints anyway, so the rule is in force
            // whatever the flush returns; a failure there is the writing file's, which is
            // told too (`write_behind.rs`, "Failed flushes").
            FileControl::CheckpointStart => {
                self.flush_points.checkpoint_start();
                self.flush_queue(self.as_writer())?;
                return Ok(ControlReply::NotFound);
            }
            FileControl::CheckpointDone => {
                self.flush_points.checkpoint_done();
                self.flush_queue(write_behind::Caller::Quiet)?;
                return Ok(ControlReply::NotFound);
            }
            // Reportable flush points, whose result SQLite checks. SYNC: sent after a
            // commit's database writes, before xSync or instead of it with
            // synchronous=OFF. COMMIT_PHASETWO: sent as a rollback commit ends, right after
            // the journal's reset (pager.c zeroJournalHdr: 28 bytes, queued, and followed
            // by no call on the journal when synchronous=OFF), so a failed reset fails the
            // commit, as under `unix`.
            FileControl::Sync | FileControl::CommitPhaseTwo => {
                self.flush_queue(self.as_writer())?;
                return Ok(ControlReply::NotFound);
            }
            FileControl::SizeHint(_) => self.flush_queue(self.as_writer())?,
            _ => self.flush_queue(write_behind::Caller::Quiet)?,
        }
        Ok(match control {
            FileControl::LockState => ControlReply::Int(self.lock.level()),
            FileControl::LastErrno => ControlReply::Int(self.last_errno),
            FileControl::ChunkSize(bytes) => {
                self.settings.chunk_size_bytes = bytes;
                ControlReply::Done
            }
            FileControl::SizeHint(bytes) => {
                self.size_hint(bytes)?;
                ControlReply::Done
            }
            FileControl::PersistWal(arg) => mode_bit(&mut self.settings.persist_wal, arg),
            FileControl::PowersafeOverwrite(arg) => mode_bit(&mut self.settings.psow, arg),
            FileControl::VfsName => ControlReply::Text(self.vfs.name.clone()),
            FileControl::TempFilename => ControlReply::Text(temp_file_name()),
            FileControl::HasMoved => ControlReply::Int(self.has_moved() as c_int),
            FileControl::MmapSize(requested) => {
                // Mapped reads would go through the page cache O_DIRECT bypasses.
                let requested = if self.direct.database.is_some() {
                    0
                } else {
                    requested
                };
                let old = self.mmap.set_limit(self.descriptor.borrowed(), requested);
                self.log_map_failure();
                ControlReply::Int64(old?)
            }
            FileControl::ExternalReader => {
                let external = match &self.shm {
                    Some(shm) => shm.has_external_reader()?,
                    None => false,
                };
                ControlReply::Int(external as c_int)
            }
            FileControl::NullIo => {
                self.close_descriptors();
                ControlReply::Done
            }
            FileControl::Pragma { name, value } => self.pragma(&name, value.as_deref()),
            FileControl::CheckpointStart
            | FileControl::CheckpointDone
            | FileControl::Sync
            | FileControl::CommitPhaseTwo
            | FileControl::Other(_) => ControlReply::NotFound,
        })
    }

    /// xShmMap. `Ok((pointer, readonly))`; SQLite gets SQLITE_READONLY when `readonly`.
    pub(crate) fn shm_map(
        &mut self,
        region: usize,
        region_size_bytes: usize,
        extend: bool,
    ) -> Result<(*mut u8, bool), Failure> {
        self.flush_queue(write_behind::Caller::Quiet)?;
        if self.shm.is_none() {
            let path = self.path.clone().ok_or(Failure::ShmOpen(libc::EINVAL))?;
            let st = self.fstat().map_err(Failure::Fstat)?;
            self.shm = Some(Shm::open(
                &path,
                &st,
                self.settings.readonly_shm,
                &self.vfs.api,
            )?);
        }
        let mut shm = self.shm.take().expect("opened above");
        let vfs = self.vfs;
        let result = shm.map(
            &mut self.submitter(),
            &vfs.api,
            region,
            region_size_bytes,
            extend,
        );
        let inherited = shm.is_inherited();
        self.shm = Some(shm);
        if result.is_err() && inherited {
            self.log_inherited_use();
        }
        result
    }

    /// xShmLock on slots `[offset, offset + count)`, within the eight (`entry.rs` refuses
    /// others). With no WAL index mapped it is SQLITE_IOERR_SHMLOCK, as os_unix.c
    /// answers before looking at the request. Inline into xShmLock, its one caller: a WAL
    /// read transaction makes two of these calls.
    #[inline(always)]
    pub(crate) fn shm_lock(
        &mut self,
        offset: c_int,
        count: c_int,
        request: ShmLockRequest,
    ) -> Result<(), Failure> {
        // Taking or dropping an exclusive WAL-index lock (a writer, a checkpointer, a
        // recovery) can publish what was written: flush first. A read mark publishes
        // nothing (write_behind.rs, "Flush points").
        if matches!(
            request,
            ShmLockRequest::Exclusive | ShmLockRequest::Unlock { shared: false }
        ) {
            self.flush_queue(write_behind::Caller::Quiet)?;
        }
        // A read transaction starts or ends here.
        self.forget_cached_reads();
        match self.shm.as_mut() {
            None => Err(Failure::ShmLock),
            Some(shm) => {
                let locked = shm.lock(offset, count, request);
                if locked.is_err() && shm.is_inherited() {
                    self.log_inherited_use();
                }
                locked
            }
        }
    }

    pub(crate) fn shm_unmap(&mut self, delete: bool) {
        let _ = self.flush_queue(write_behind::Caller::Quiet);
        if let Some(shm) = self.shm.take() {
            shm.close(delete, &self.vfs.api, self.path.as_deref().unwrap_or(""));
        }
    }

    pub(crate) fn fetch(&mut self, offset: i64, amount: c_int) -> Result<*mut u8, Failure> {
        // A fetched page is read straight from the page cache: queued writes first.
        self.flush_queue(self.as_reader())?;
        let page = self.mmap.fetch(self.descriptor.borrowed(), offset, amount);
        self.log_map_failure();
        page
    }

    /// A failed `mmap` switches mapping off and is logged as os_unix.c unixRemapfile logs
    /// it, with SQLITE_OK: SQLite goes on with xRead.
    fn log_map_failure(&mut self) {
        if let Some(errno) = self.mmap.take_failure() {
            self.log_os_error(SQLITE_OK, "mmap", errno);
        }
    }

    /// xUnfetch. Returning a page when none is out, or dropping the mapping while pages
    /// are out (SQLite may still be reading them), is ignored and logged: os_unix.c would
    /// count fetched pages below zero, or unmap memory under the reader.
    pub(crate) fn unfetch(&mut self, page: *mut u8) {
        let out = self.mmap.fetched_pages();
        if page.is_null() && out > 0 {
            self.log_refusal(
                SQLITE_OK,
                &format!("xUnfetch of the whole mapping with {out} pages still fetched ignored"),
            );
            return;
        }
        if !page.is_null() && out == 0 {
            self.log_refusal(SQLITE_OK, "xUnfetch of a page never fetched ignored");
            return;
        }
        self.mmap.unfetch(page)
    }
}

/// os_unix.c unixModeBit: negative queries, zero clears, positive sets.
fn mode_bit(flag: &mut bool, arg: c_int) -> ControlReply {
    if arg < 0 {
        ControlReply::Int(*flag as c_int)
    } else {
        *flag = arg != 0;
        ControlReply::Done
    }
}

/// A file control SQLite sent, its argument decoded at the FFI edge (`entry.rs`): the
/// opcodes this VFS answers, and `Other` for the rest.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FileControl {
    LockState,
    LastErrno,
    ChunkSize(i64),
    SizeHint(i64),
    /// The int argument: negative queries, zero clears, positive sets.
    PersistWal(c_int),
    PowersafeOverwrite(c_int),
    VfsName,
    TempFilename,
    HasMoved,
    MmapSize(i64),
    ExternalReader,
    NullIo,
    Pragma {
        name: String,
        value: Option<String>,
    },
    CheckpointStart,
    CheckpointDone,
    Sync,
    CommitPhaseTwo,
    Other(c_int),
}

/// What a file control gives back, written into its argument by `entry.rs`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ControlReply {
    /// Not this VFS's: SQLITE_NOTFOUND, so SQLite applies its own default (answering OK
    /// to an unknown opcode would make SQLite ignore PRAGMAs).
    NotFound,
    /// Handled; nothing to write back.
    Done,
    /// Handled; the int the argument points to receives this.
    Int(c_int),
    /// Handled; the i64 the argument points to receives this.
    Int64(i64),
    /// Handled; the `char*` the argument points to receives a copy from sqlite3_malloc.
    Text(String),
    /// As `Text`, but the control failed (SQLITE_ERROR): the text is the message.
    TextError(String),
}
