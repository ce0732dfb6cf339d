//! Which writes must reach the kernel before xWrite returns: write-behind's flush points
//! that only the file itself can see, inferred from the sequence of VFS calls on a
//! database, its rollback journal and its WAL.
//!
//! Under `unix` every xWrite is in the file when it returns. The write-behind queue
//! (`write_behind.rs`) keeps writes back until the next flush point — any other VFS call
//! on a file of the database, among others — which is safe wherever SQLite makes such a
//! call before anything can depend on the bytes. Where SQLite does *not*, because it
//! publishes the bytes, changes its cache trusting them, or leaves them for a reader of
//! the file with no further call, the write must go at once, exactly as under `unix`.
//! [`FlushPoints`] recognises those writes: one value per open file, fed every call
//! ([`FlushPoints::call`]), every read ([`FlushPoints::read`]), every write
//! ([`FlushPoints::write`], which answers whether to queue it or flush) and a
//! checkpoint's bounds. It does no I/O and knows no descriptor: the file asks it and
//! acts on the answer (`file/rw.rs`, `file/control.rs`), so its rules are tested here
//! against a model of `unix`'s visibility, without a file.

/// Size of a WAL frame header (walformat.html, "WAL Frame Format").
const WAL_FRAME_HEADER_BYTES: usize = 24;
/// Size of the WAL file header, which precedes the first frame.
const WAL_HEADER_BYTES: u64 = 32;
/// The checksum that ends a rollback-journal record (fileformat.html, "The Rollback
/// Journal").
const JOURNAL_CHECKSUM_BYTES: usize = 4;
/// The page number that starts a rollback-journal record.
const JOURNAL_PAGE_NUMBER_BYTES: u64 = 4;
/// SQLite's smallest page size.
const MIN_PAGE_BYTES: usize = 512;

/// What a file is to SQLite, as far as its flush points go (from xOpen's flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushRole {
    /// A main database (SQLite's locks live on it): rollback commits and checkpoints
    /// write its pages.
    Database,
    /// A rollback journal, a main database's or a temporary database's: queued writes
    /// never span a journal record.
    Journal,
    /// A WAL.
    Wal,
    /// Anything else (temporary and transient files, statement journals,
    /// super-journals): only checkpoints and memory maps force a write through.
    Other,
}

/// What kind of file-method call [`FlushPoints::call`] sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallKind {
    Write,
    Sync,
    Other,
}

/// What to do with an xWrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteDecision {
    /// Queue it: a later VFS call flushes it before anything can depend on it.
    Queue,
    /// Write it, and everything queued before it, before xWrite returns.
    FlushNow(FlushReason),
}

impl WriteDecision {
    pub(crate) fn flush_now(self) -> bool {
        matches!(self, WriteDecision::FlushNow(_))
    }
}

/// Why a write must reach the kernel before xWrite returns (the rules below).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushReason {
    /// Between SQLITE_FCNTL_CKPT_START and CKPT_DONE.
    Checkpoint,
    /// A main database's page written outside a commit's run (a spill, a cache flush).
    PageOutsideCommit,
    /// The checksum that ends a rollback-journal record.
    JournalRecordEnd,
    /// The file is memory-mapped.
    Mapped,
    /// A WAL commit frame's page, or its header's checksum rewrite.
    CommitFrame,
    /// The rest of a `psow=0` padding frame, written right after the commit's sync.
    AfterCommitSync,
}

/// How a WAL commit's flush was followed, told by [`FlushPoints::call`] once the commit
/// is over: an O_DIRECT WAL pays its device writes only for commits synced at once
/// (`direct.rs`, `WalDirect::set_pays`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommitSync {
    /// The next call on any file was this WAL's xSync, as in `synchronous=FULL`.
    Immediate,
    /// Anything else came first (a checkpoint's sync comes after other calls).
    NotImmediate,
}

/// Where a WAL commit stands, by the thread's call numbers: the commit frame's page
/// flushed at call N (then padding frames at N+1, …), then the WAL's xSync at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalCommit {
    Idle,
    Flushed(u64),
    Synced(u64),
}

/// The flush-point state of one open file.
#[derive(Clone, Debug)]
pub(crate) struct FlushPoints {
    /// This thread's number of the call in progress on this file ([`FlushPoints::call`]).
    call_number: u64,
    /// Between SQLITE_FCNTL_CKPT_START and CKPT_DONE: writes go straight through.
    in_checkpoint: bool,
    rules: Rules,
}

/// The state each role's rules infer.
#[derive(Clone, Debug)]
enum Rules {
    Database {
        /// A commit is writing its pages: opened by the write of page 1, closed by any
        /// other call on this file ("Pages outside a commit" in [`FlushPoints::write`]).
        commit_run: bool,
    },
    Journal {
        /// Start offset and length of this file's previous write, to recognise record
        /// ends.
        last_write: Option<(u64, usize)>,
    },
    Wal(WalRules),
    Other,
}

#[derive(Clone, Debug)]
struct WalRules {
    /// The last write was a commit-frame header: its page must be flushed at once.
    commit_frame_pending: bool,
    /// Where a commit stands, by this thread's call numbers.
    commit: WalCommit,
    /// This write finishes a frame after the commit's sync (`psow=0`): write it at once.
    after_commit_sync: bool,
    /// The last xRead: its offset and call number (a checksum rewrite follows one).
    last_read: Option<(u64, u64)>,
}

impl FlushPoints {
    pub(crate) fn new(role: FlushRole) -> FlushPoints {
        let rules = match role {
            FlushRole::Database => Rules::Database { commit_run: false },
            FlushRole::Journal => Rules::Journal { last_write: None },
            FlushRole::Wal => Rules::Wal(WalRules {
                commit_frame_pending: false,
                commit: WalCommit::Idle,
                after_commit_sync: false,
                last_read: None,
            }),
            FlushRole::Other => Rules::Other,
        };
        FlushPoints {
            call_number: 0,
            in_checkpoint: false,
            rules,
        }
    }

    /// Before every call on the file (`number`: this thread's call count, which every
    /// call on any file advances). Any call but xWrite ends a commit's run of page
    /// writes, and a WAL's commit once it is over: the answer says whether it was
    /// synced at once (the next call on any file was this file's xSync, as in
    /// `synchronous=FULL`; a checkpoint's sync comes after other calls).
    ///
    /// With `psow=0` SQLite pads a synced WAL commit to a sector boundary with copies of
    /// the commit frame and syncs at the boundary, inside the frame that straddles it
    /// (wal.c `walWriteToLog`): the rest of that frame is written right after the sync
    /// and published with the commit, with no call in between, so those writes go at
    /// once (`after_commit_sync`).
    #[inline]
    pub(crate) fn call(&mut self, number: u64, kind: CallKind) -> Option<CommitSync> {
        self.call_number = number;
        match &mut self.rules {
            Rules::Database { commit_run } => {
                if kind != CallKind::Write {
                    *commit_run = false;
                }
                None
            }
            Rules::Wal(wal) => wal.call(number, kind),
            Rules::Journal { .. } | Rules::Other => None,
        }
    }

    /// xRead of `offset` (after [`FlushPoints::call`]).
    pub(crate) fn read(&mut self, offset: u64) {
        if let Rules::Wal(wal) = &mut self.rules {
            wal.last_read = Some((offset, self.call_number));
        }
    }

    /// Checkpoint writes go straight through: SQLite ignores CKPT_DONE's result and
    /// then publishes nBackfill, so nothing may still be queued by then (the file
    /// flushes its queue at CKPT_START, and the rule holds whatever that flush returns).
    pub(crate) fn checkpoint_start(&mut self) {
        self.in_checkpoint = true;
    }

    pub(crate) fn checkpoint_done(&mut self) {
        self.in_checkpoint = false;
    }

    /// xWrite of `data` at `offset` (after [`FlushPoints::call`]); `mapped`: the file is
    /// memory-mapped now. Whether the write may be queued.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8], mapped: bool) -> WriteDecision {
        let number = self.call_number;
        // Every rule sees every write, whatever decides it: each keeps its own state.
        let rule = match &mut self.rules {
            Rules::Database { commit_run } => {
                // Pages outside a commit. A rollback-mode database page written before
                // its transaction commits — a spill of an overflowing page cache, or
                // `sqlite3_db_cacheflush()` — is followed by no VFS call that could flush
                // it, so it is written before xWrite returns, as under `unix`: a copy of
                // the file, or a reader of its bytes, sees it at once. A commit's pages
                // are queued: SQLite writes them in page order (pager.c
                // `pager_write_pagelist` over the sorted dirty list) and page 1 first,
                // because every rollback commit that changes the file changes page 1's
                // change counter (`pager_incr_changecounter`), while page 1 is never
                // spilled (the b-tree holds it referenced during a write transaction, and
                // only unreferenced pages are spilled or cache-flushed). So the write of
                // page 1 opens the commit's run, and any other call on the file (its
                // `SQLITE_FCNTL_SYNC`, a lock change, a read) closes it
                // ([`FlushPoints::call`]). A commit that leaves page 1 alone
                // (`locking_mode=EXCLUSIVE` after the first commit) writes its pages at
                // once, as `unix` does. A WAL-mode database is written only by
                // checkpoints, which write through anyway.
                if offset == 0 {
                    *commit_run = true;
                }
                (!*commit_run).then_some(FlushReason::PageOutsideCommit)
            }
            Rules::Journal { last_write } => {
                let record_end = is_journal_record_end(*last_write, offset, data.len());
                *last_write = Some((offset, data.len()));
                record_end.then_some(FlushReason::JournalRecordEnd)
            }
            Rules::Wal(wal) => wal.write(offset, data, number),
            Rules::Other => None,
        };
        // While the file is memory-mapped, SQLite may read the new bytes through the
        // mapping without another VFS call (its sorter does): they must be in the page
        // cache when xWrite returns, as with `unix`.
        let mapped = mapped.then_some(FlushReason::Mapped);
        let checkpoint = self.in_checkpoint.then_some(FlushReason::Checkpoint);
        match checkpoint.or(rule).or(mapped) {
            Some(reason) => WriteDecision::FlushNow(reason),
            None => WriteDecision::Queue,
        }
    }
}

/// A journal record is a 4-byte page number, the page, and a 4-byte checksum. Its
/// checksum write flushes: SQLite reads the journal back to roll back its cache, so a
/// failed journal write must surface before SQLite modifies the page, exactly where a
/// failed pwrite surfaces under `unix`. The checksum is told from the page number of the
/// record after a journal header (also 4 bytes after ≥ 512) by where the write before it
/// started: records start at a header's end and are page size + 8 bytes long, headers
/// sit at multiples of the sector size (pager.c `journalHdrOffset`), so a record's page
/// starts at 4 mod 8 and a header at 0.
fn is_journal_record_end(previous: Option<(u64, usize)>, offset: u64, len: usize) -> bool {
    previous.is_some_and(|(previous_start, previous_len)| {
        len == JOURNAL_CHECKSUM_BYTES
            && previous_len >= MIN_PAGE_BYTES
            && previous_start + previous_len as u64 == offset
            && previous_start % 8 == JOURNAL_PAGE_NUMBER_BYTES
    })
}

impl WalRules {
    fn call(&mut self, number: u64, kind: CallKind) -> Option<CommitSync> {
        self.after_commit_sync = false;
        let at_once = |call: u64| call + 1 == number;
        let (commit, synced) = match (self.commit, kind) {
            (WalCommit::Idle, _) => (WalCommit::Idle, None),
            // Padding frames before the sync.
            (WalCommit::Flushed(call), CallKind::Write) if at_once(call) => {
                (WalCommit::Flushed(number), None)
            }
            (WalCommit::Flushed(call), kind) => {
                if kind == CallKind::Sync && at_once(call) {
                    (WalCommit::Synced(number), Some(CommitSync::Immediate))
                } else {
                    (WalCommit::Idle, Some(CommitSync::NotImmediate))
                }
            }
            (WalCommit::Synced(call), CallKind::Write) if at_once(call) => {
                self.after_commit_sync = true;
                (WalCommit::Synced(number), None)
            }
            (WalCommit::Synced(_), _) => (WalCommit::Idle, None),
        };
        self.commit = commit;
        synced
    }

    /// SQLite publishes a WAL commit right after writing the commit frame's page, with
    /// no reportable call in between: that page flushes the queue.
    /// A commit-frame header rewritten right after SQLite read its frame back is
    /// walRewriteChecksums' last write (a commit that rewrote frames a spill had
    /// written): nothing follows it before SQLite publishes the commit, so it is written
    /// at once too. The headers before it are flushed by the read of the next frame.
    fn write(&mut self, offset: u64, data: &[u8], number: u64) -> Option<FlushReason> {
        // Bytes 4..8 of a frame header: database size after a commit, 0 otherwise.
        let commit_frame_header = data.len() == WAL_FRAME_HEADER_BYTES
            && offset >= WAL_HEADER_BYTES
            && data[4..8] != [0, 0, 0, 0];
        let checksum_rewrite =
            commit_frame_header && self.last_read == Some((offset, number.saturating_sub(1)));
        let commit_frame = std::mem::take(&mut self.commit_frame_pending) || checksum_rewrite;
        if commit_frame {
            self.commit = WalCommit::Flushed(number);
        }
        if commit_frame_header && !checksum_rewrite {
            // Its page, written next, ends the commit.
            self.commit_frame_pending = true;
        }
        if commit_frame {
            Some(FlushReason::CommitFrame)
        } else {
            self.after_commit_sync
                .then_some(FlushReason::AfterCommitSync)
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each rule alone, then a property: over generated sequences of SQLite's calls on a
    //! database, its rollback journal and its WAL (commits, spills, checkpoints, reads,
    //! memory maps) interleaved with arbitrary other calls, every write is flushed by the
    //! point where something could depend on it without a further reporting VFS call on
    //! its file — where under `unix` it is in the file already.

    use super::*;
    use proptest::prelude::*;

    const PAGE_BYTES: usize = 4096;
    const SECTOR_BYTES: u64 = 512;
    const FRAME_BYTES: u64 = (WAL_FRAME_HEADER_BYTES + PAGE_BYTES) as u64;

    /// The files of one database, as a connection's thread calls them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum F {
        Db,
        Journal,
        Wal,
    }

    /// One thread's calls on the files of a database, each file with its flush points,
    /// and a model of `unix`'s visibility: which file has writes SQLite cannot yet count
    /// on (queued, and not flushed by a call that reports a failure).
    struct Thread {
        number: u64,
        files: [FlushPoints; 3],
        unreported: [bool; 3],
        /// The database is memory-mapped.
        mapped: bool,
        /// Decisions for this reason are taken as `Queue`: a machine with that rule
        /// broken, which the model must catch.
        broken: Option<FlushReason>,
        /// SQLITE_FCNTL_COMMIT_PHASETWO flushes the database's queue and returns the
        /// flush's result (false: a machine that does not, which the model must catch).
        phase_two_reports: bool,
        /// The WAL: the next frame's number (1-based), and the first frame of the
        /// open transaction.
        next_frame: u64,
        transaction_first_frame: u64,
        /// The rollback journal's end.
        journal_end: u64,
        /// The database's size in pages.
        db_pages: u32,
    }

    fn index(file: F) -> usize {
        match file {
            F::Db => 0,
            F::Journal => 1,
            F::Wal => 2,
        }
    }

    fn frame_offset(frame: u64) -> u64 {
        WAL_HEADER_BYTES + (frame - 1) * FRAME_BYTES
    }

    fn page_offset(page: u32) -> u64 {
        u64::from(page - 1) * PAGE_BYTES as u64
    }

    impl Thread {
        fn new(broken: Option<FlushReason>) -> Thread {
            Thread {
                number: 0,
                files: [
                    FlushPoints::new(FlushRole::Database),
                    FlushPoints::new(FlushRole::Journal),
                    FlushPoints::new(FlushRole::Wal),
                ],
                unreported: [false; 3],
                mapped: false,
                broken,
                phase_two_reports: true,
                next_frame: 1,
                transaction_first_frame: 1,
                journal_end: 0,
                db_pages: 1,
            }
        }

        fn file(&mut self, file: F) -> &mut FlushPoints {
            &mut self.files[index(file)]
        }

        /// A call on another database's file: only the thread's count moves.
        fn unrelated_call(&mut self) {
            self.number += 1;
        }

        /// A call other than xWrite on `file`; `reports`: it flushes the file's queued
        /// writes and returns their failure (a sync, a truncate, a read of the file
        /// itself, `SQLITE_FCNTL_SYNC`), not a lock change or CKPT_DONE, whose errors
        /// SQLite ignores.
        fn call(&mut self, file: F, kind: CallKind, reports: bool) -> Option<CommitSync> {
            assert_ne!(kind, CallKind::Write);
            self.number += 1;
            let number = self.number;
            let sync = self.file(file).call(number, kind);
            if reports {
                self.unreported[index(file)] = false;
            }
            sync
        }

        /// SQLITE_FCNTL_COMMIT_PHASETWO, a call on the database: its flush writes the
        /// whole queue of the database, and its failure, whichever file's write failed, is
        /// the call's result.
        fn commit_phase_two(&mut self) {
            self.call(F::Db, CallKind::Other, false);
            if self.phase_two_reports {
                self.unreported = [false; 3];
            }
        }

        fn read(&mut self, file: F, offset: u64) {
            self.call(file, CallKind::Other, true);
            self.file(file).read(offset);
        }

        fn write(&mut self, file: F, offset: u64, data: &[u8]) -> WriteDecision {
            self.number += 1;
            let number = self.number;
            let mapped = self.mapped && file == F::Db;
            let points = self.file(file);
            points.call(number, CallKind::Write);
            let decision = match points.write(offset, data, mapped) {
                WriteDecision::FlushNow(reason) if Some(reason) == self.broken => {
                    WriteDecision::Queue
                }
                decision => decision,
            };
            // A flush writes the whole queue of the database; a queued write waits.
            // (Conservative: the queue also flushes at a write to another file of the
            // database, which the model does not count on.)
            match decision {
                WriteDecision::FlushNow(_) => self.unreported = [false; 3],
                WriteDecision::Queue => self.unreported[index(file)] = true,
            }
            decision
        }

        /// Something may depend on `file`'s bytes now, with no further reporting call.
        fn observe(&self, file: F, what: &str) -> Result<(), String> {
            if self.unreported[index(file)] {
                Err(format!("{what}: {file:?} still has queued writes"))
            } else {
                Ok(())
            }
        }

        fn checkpoint_bound(&mut self, start: bool) {
            // The file control is a call on the database; CKPT_START's flush reports,
            // CKPT_DONE's does not.
            self.call(F::Db, CallKind::Other, start);
            if start {
                self.file(F::Db).checkpoint_start();
            } else {
                self.file(F::Db).checkpoint_done();
            }
        }

        /// Journal records for `pages` (pager.c `pager_write` → `pagerAddPageToRollbackJournal`),
        /// after a new journal header at the next sector boundary when `header`.
        fn journal_records(&mut self, header: bool, pages: &[u32]) -> Result<(), String> {
            if header || self.journal_end == 0 {
                let at = self.journal_end.div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
                self.write(F::Journal, at, &[0; SECTOR_BYTES as usize]);
                self.journal_end = at + SECTOR_BYTES;
            }
            for _ in pages {
                let at = self.journal_end;
                self.write(F::Journal, at, &[0; 4]);
                self.write(F::Journal, at + 4, &[0; PAGE_BYTES]);
                self.write(F::Journal, at + 4 + PAGE_BYTES as u64, &[0; 4]);
                self.observe(F::Journal, "a journal record's checksum")?;
                self.journal_end = at + PAGE_BYTES as u64 + 8;
            }
            Ok(())
        }

        /// The journal's sync before database pages are written: with `full`, its
        /// header's record count rewritten and synced again (pager.c `syncJournal`).
        fn journal_sync(&mut self, full: bool) {
            self.call(F::Journal, CallKind::Sync, true);
            if full {
                let header = (self.journal_end - 1) / SECTOR_BYTES * SECTOR_BYTES;
                self.write(F::Journal, header.min(self.journal_end) + 8, &[0; 4]);
                self.call(F::Journal, CallKind::Sync, true);
            }
        }

        fn db_page(&mut self, page: u32) -> WriteDecision {
            self.db_pages = self.db_pages.max(page);
            self.write(F::Db, page_offset(page), &[0; PAGE_BYTES])
        }

        /// A mapped database's every write can be read through the map at once.
        fn observe_mapped(&self) -> Result<(), String> {
            if self.mapped {
                self.observe(F::Db, "a write to the memory-mapped database")?;
            }
            Ok(())
        }

        fn wal_frame_header(&mut self, frame: u64, commit: bool) -> WriteDecision {
            let mut header = [0u8; WAL_FRAME_HEADER_BYTES];
            if commit {
                header[4..8].copy_from_slice(&self.db_pages.max(1).to_be_bytes());
            }
            self.write(F::Wal, frame_offset(frame), &header)
        }

        /// One frame's header and page (wal.c `walWriteOneFrame`); with `sync_at`, the
        /// frame straddles the sync point at that byte (`walWriteToLog`).
        fn wal_frame(&mut self, frame: u64, commit: bool, sync_at: Option<usize>) {
            let mut header = [0u8; WAL_FRAME_HEADER_BYTES];
            if commit {
                header[4..8].copy_from_slice(&self.db_pages.max(1).to_be_bytes());
            }
            let page = [0u8; PAGE_BYTES];
            let start = frame_offset(frame);
            for (at, bytes) in [(0, &header[..]), (WAL_FRAME_HEADER_BYTES, &page[..])] {
                match sync_at {
                    Some(sync) if at < sync && sync <= at + bytes.len() => {
                        let first = sync - at;
                        self.write(F::Wal, start + at as u64, &bytes[..first]);
                        self.call(F::Wal, CallKind::Sync, true);
                        if first < bytes.len() {
                            self.write(F::Wal, start + sync as u64, &bytes[first..]);
                        }
                    }
                    _ => {
                        self.write(F::Wal, start + at as u64, bytes);
                    }
                }
            }
        }

        fn run(&mut self, op: &Op) -> Result<(), String> {
            match op {
                Op::Call {
                    file,
                    sync,
                    reports,
                } => {
                    let kind = if *sync {
                        CallKind::Sync
                    } else {
                        CallKind::Other
                    };
                    self.call(*file, kind, *reports || *sync);
                }
                Op::Unrelated => self.unrelated_call(),
                Op::ReadDb { page } => self.read(F::Db, page_offset(*page)),
                Op::ReadWal { frame } => {
                    // Only committed frames are read (and the header, as frame 0).
                    let committed = self.transaction_first_frame - 1;
                    let offset = match frame % (committed + 1) {
                        0 => 0,
                        frame => frame_offset(frame),
                    };
                    self.read(F::Wal, offset);
                }
                Op::Map(on) => {
                    // xFetch/xUnfetch, calls on the database.
                    self.call(F::Db, CallKind::Other, false);
                    self.mapped = *on;
                }
                Op::RollbackCommit {
                    pages,
                    page_one,
                    full,
                    end,
                } => {
                    let mut pages: Vec<u32> = pages.iter().map(|p| p + 1).collect();
                    if *page_one {
                        pages.insert(0, 1);
                    }
                    self.call(F::Db, CallKind::Other, false); // RESERVED lock
                    self.journal_records(true, &pages)?;
                    self.journal_sync(*full);
                    self.call(F::Db, CallKind::Other, false); // EXCLUSIVE lock
                    self.call(F::Db, CallKind::Other, true); // SQLITE_FCNTL_SIZE_HINT
                    for &page in &pages {
                        self.db_page(page);
                        self.observe_mapped()?;
                    }
                    self.call(F::Db, CallKind::Other, true); // SQLITE_FCNTL_SYNC
                    self.observe(F::Db, "a commit after SQLITE_FCNTL_SYNC")?;
                    if *full {
                        self.call(F::Db, CallKind::Sync, true);
                    }
                    match end {
                        // The journal's xClose (its flush reports); xDelete is no file
                        // call. Or its xTruncate.
                        JournalEnd::Delete | JournalEnd::Truncate => {
                            self.call(F::Journal, CallKind::Other, true);
                        }
                        JournalEnd::Persist { synced } => {
                            self.write(F::Journal, 0, &[0; 28]);
                            if *synced {
                                self.call(F::Journal, CallKind::Sync, true);
                            }
                        }
                    }
                    self.journal_end = 0;
                    self.commit_phase_two();
                    // Once the lock drops, another connection's hot-journal check reads
                    // the journal's header: a reset that never reached the file would
                    // roll a committed transaction back.
                    self.observe(F::Journal, "a finished journal at the commit's unlock")?;
                    self.call(F::Db, CallKind::Other, false); // unlock
                }
                Op::RollbackSpill { pages, size_hint } => {
                    let pages: Vec<u32> = pages.iter().map(|p| p + 1).collect();
                    self.journal_records(false, &pages)?;
                    self.journal_sync(false);
                    self.call(F::Db, CallKind::Other, false); // EXCLUSIVE lock
                    for (i, &page) in pages.iter().enumerate() {
                        self.db_page(page);
                        self.observe(F::Db, "a spilled page")?;
                        if i == 0 && *size_hint {
                            self.call(F::Db, CallKind::Other, true);
                        }
                    }
                }
                Op::WalFrames { frames, commit } => {
                    if self.next_frame == 1 {
                        self.write(F::Wal, 0, &[0; WAL_HEADER_BYTES as usize]);
                    }
                    // An overwrite in place of a frame this transaction wrote: the
                    // commit rewrites checksums from there.
                    let mut rewrite_from = None;
                    for i in 0..*frames {
                        let frame = self.next_frame;
                        self.next_frame += 1;
                        self.wal_frame(frame, false, None);
                        if i == 0 && commit.as_ref().is_some_and(|c| c.rewrite) {
                            rewrite_from = Some(frame);
                        }
                    }
                    let Some(commit) = commit else {
                        return Ok(());
                    };
                    let commit_frame = self.next_frame;
                    self.next_frame += 1;
                    self.wal_frame(commit_frame, true, None);
                    if let Some(from) = rewrite_from {
                        // wal.c walRewriteChecksums.
                        if from > 1 {
                            self.read(F::Wal, frame_offset(from - 1) + 16);
                        }
                        for frame in from..=commit_frame {
                            self.read(F::Wal, frame_offset(frame));
                            self.wal_frame_header(frame, frame == commit_frame);
                        }
                    }
                    if commit.sync {
                        match commit.padding {
                            // psow=0: copies of the commit frame up to the sector
                            // boundary, synced inside the last one.
                            Some((full_frames, sync_at)) => {
                                for _ in 0..full_frames {
                                    let frame = self.next_frame;
                                    self.next_frame += 1;
                                    self.wal_frame(frame, true, None);
                                }
                                let frame = self.next_frame;
                                self.next_frame += 1;
                                self.wal_frame(frame, true, Some(sync_at));
                            }
                            None => {
                                self.call(F::Wal, CallKind::Sync, true);
                            }
                        }
                    }
                    self.observe(F::Wal, "a published WAL commit")?;
                    self.transaction_first_frame = self.next_frame;
                }
                Op::Checkpoint { pages } => {
                    self.checkpoint_bound(true);
                    let committed = self.transaction_first_frame - 1;
                    if committed > 0 {
                        self.read(F::Wal, frame_offset(committed));
                        self.call(F::Wal, CallKind::Sync, true);
                    }
                    for &page in pages {
                        self.db_page(page + 1);
                        self.observe(F::Db, "a checkpoint's write")?;
                    }
                    self.call(F::Db, CallKind::Sync, true);
                    self.checkpoint_bound(false);
                }
            }
            Ok(())
        }
    }

    /// A file's flush points, and the thread's call count driving them.
    struct Calls {
        number: u64,
        points: FlushPoints,
    }

    impl Calls {
        fn new(role: FlushRole) -> Calls {
            Calls {
                number: 0,
                points: FlushPoints::new(role),
            }
        }

        fn call(&mut self, kind: CallKind) -> Option<CommitSync> {
            self.number += 1;
            self.points.call(self.number, kind)
        }

        fn write_mapped(&mut self, offset: u64, data: &[u8], mapped: bool) -> WriteDecision {
            self.call(CallKind::Write);
            self.points.write(offset, data, mapped)
        }

        fn write(&mut self, offset: u64, data: &[u8]) -> WriteDecision {
            self.write_mapped(offset, data, false)
        }

        fn read(&mut self, offset: u64) {
            self.call(CallKind::Other);
            self.points.read(offset);
        }
    }

    fn flush(reason: FlushReason) -> WriteDecision {
        WriteDecision::FlushNow(reason)
    }

    fn commit_header() -> [u8; WAL_FRAME_HEADER_BYTES] {
        let mut header = [0u8; WAL_FRAME_HEADER_BYTES];
        header[7] = 3;
        header
    }

    const QUEUE: WriteDecision = WriteDecision::Queue;

    #[test]
    fn a_journal_record_ends_at_its_checksum() {
        let mut journal = Calls::new(FlushRole::Journal);
        // The header, then the first record's page number: 4 bytes after ≥ 512 too, but
        // the write before it started at a sector boundary.
        assert_eq!(journal.write(0, &[0; 512]), QUEUE);
        assert_eq!(journal.write(512, &[0; 4]), QUEUE);
        assert_eq!(journal.write(516, &[0; PAGE_BYTES]), QUEUE);
        let checksum = 516 + PAGE_BYTES as u64;
        assert_eq!(
            journal.write(checksum, &[0; 4]),
            flush(FlushReason::JournalRecordEnd)
        );
        // The next record: the same, whatever calls come between.
        journal.call(CallKind::Other);
        assert_eq!(journal.write(checksum + 4, &[0; 4]), QUEUE);
        assert_eq!(journal.write(checksum + 8, &[0; PAGE_BYTES]), QUEUE);
        assert_eq!(
            journal.write(checksum + 8 + PAGE_BYTES as u64, &[0; 4]),
            flush(FlushReason::JournalRecordEnd)
        );
        // Not after a write that ends elsewhere, nor in another role's file.
        assert_eq!(journal.write(100_000, &[0; 4]), QUEUE);
        let mut other = Calls::new(FlushRole::Other);
        other.write(516, &[0; PAGE_BYTES]);
        assert_eq!(other.write(checksum, &[0; 4]), QUEUE);
    }

    #[test]
    fn page_one_opens_a_commit_run_and_any_other_call_closes_it() {
        let mut db = Calls::new(FlushRole::Database);
        let page = |n: u64| (n - 1) * PAGE_BYTES as u64;
        // A spill: no run is open.
        assert_eq!(
            db.write(page(3), &[0; PAGE_BYTES]),
            flush(FlushReason::PageOutsideCommit)
        );
        assert_eq!(db.write(page(1), &[0; PAGE_BYTES]), QUEUE);
        assert_eq!(db.write(page(2), &[0; PAGE_BYTES]), QUEUE);
        assert_eq!(db.write(page(7), &[0; PAGE_BYTES]), QUEUE);
        for kind in [CallKind::Other, CallKind::Sync] {
            db.write(page(1), &[0; PAGE_BYTES]);
            db.call(kind);
            assert_eq!(
                db.write(page(2), &[0; PAGE_BYTES]),
                flush(FlushReason::PageOutsideCommit)
            );
        }
    }

    #[test]
    fn a_commit_frame_header_then_its_page_flushes() {
        let mut wal = Calls::new(FlushRole::Wal);
        assert_eq!(wal.write(0, &[0; WAL_HEADER_BYTES as usize]), QUEUE);
        let frame = |n: u64| WAL_HEADER_BYTES + (n - 1) * FRAME_BYTES;
        // A frame that is no commit's.
        assert_eq!(wal.write(frame(1), &[0; WAL_FRAME_HEADER_BYTES]), QUEUE);
        assert_eq!(wal.write(frame(1) + 24, &[0; PAGE_BYTES]), QUEUE);
        assert_eq!(wal.write(frame(2), &commit_header()), QUEUE);
        assert_eq!(
            wal.write(frame(2) + 24, &[0; PAGE_BYTES]),
            flush(FlushReason::CommitFrame)
        );
        // The commit is over at the next call; a later frame waits again.
        assert_eq!(wal.call(CallKind::Other), Some(CommitSync::NotImmediate));
        assert_eq!(wal.write(frame(3), &[0; WAL_FRAME_HEADER_BYTES]), QUEUE);
        assert_eq!(wal.write(frame(3) + 24, &[0; PAGE_BYTES]), QUEUE);
    }

    #[test]
    fn a_checksum_rewrite_after_reading_the_frame_back_flushes() {
        let mut wal = Calls::new(FlushRole::Wal);
        let frame = |n: u64| WAL_HEADER_BYTES + (n - 1) * FRAME_BYTES;
        // walRewriteChecksums: each frame read, then its header written.
        wal.read(frame(1));
        assert_eq!(wal.write(frame(1), &[0; WAL_FRAME_HEADER_BYTES]), QUEUE);
        wal.read(frame(2));
        assert_eq!(
            wal.write(frame(2), &commit_header()),
            flush(FlushReason::CommitFrame)
        );
        // A rewrite is not a new commit frame: the write after it waits.
        assert_eq!(wal.write(frame(3), &[0; WAL_FRAME_HEADER_BYTES]), QUEUE);
        // A commit header not right after the read of its frame is an ordinary one.
        wal.read(frame(4));
        wal.call(CallKind::Other);
        assert_eq!(wal.write(frame(4), &commit_header()), QUEUE);
        // And a read of another file does not count.
        let mut db = Calls::new(FlushRole::Database);
        db.read(frame(5));
        assert_eq!(
            db.write(frame(5), &commit_header()),
            flush(FlushReason::PageOutsideCommit)
        );
    }

    #[test]
    fn padding_after_the_commits_sync_flushes_with_psow_off() {
        let mut wal = Calls::new(FlushRole::Wal);
        let frame = |n: u64| WAL_HEADER_BYTES + (n - 1) * FRAME_BYTES;
        wal.write(frame(1), &commit_header());
        assert_eq!(
            wal.write(frame(1) + 24, &[0; PAGE_BYTES]),
            flush(FlushReason::CommitFrame)
        );
        // A padding frame (a copy of the commit frame), synced inside its page.
        assert_eq!(wal.write(frame(2), &commit_header()), QUEUE);
        assert_eq!(
            wal.write(frame(2) + 24, &[0; 1000]),
            flush(FlushReason::CommitFrame)
        );
        assert_eq!(wal.call(CallKind::Sync), Some(CommitSync::Immediate));
        assert_eq!(
            wal.write(frame(2) + 1024, &[0; PAGE_BYTES - 1000]),
            flush(FlushReason::AfterCommitSync)
        );
        // Until any other call.
        wal.call(CallKind::Other);
        assert_eq!(wal.write(frame(3), &[0; WAL_FRAME_HEADER_BYTES]), QUEUE);
    }

    #[test]
    fn a_commit_is_synced_at_once_only_by_the_very_next_call() {
        let frame = |n: u64| WAL_HEADER_BYTES + (n - 1) * FRAME_BYTES;
        let committed = || {
            let mut wal = Calls::new(FlushRole::Wal);
            wal.write(frame(1), &commit_header());
            wal.write(frame(1) + 24, &[0; PAGE_BYTES]);
            wal
        };
        let mut wal = committed();
        assert_eq!(wal.call(CallKind::Sync), Some(CommitSync::Immediate));
        assert_eq!(wal.call(CallKind::Sync), None);
        // A call on any other file first (its number is taken).
        let mut wal = committed();
        wal.number += 1;
        assert_eq!(wal.call(CallKind::Sync), Some(CommitSync::NotImmediate));
        // No commit, no answer.
        let mut wal = Calls::new(FlushRole::Wal);
        assert_eq!(wal.call(CallKind::Sync), None);
    }

    #[test]
    fn checkpoint_writes_go_through() {
        let mut db = Calls::new(FlushRole::Database);
        db.call(CallKind::Other);
        db.points.checkpoint_start();
        // Page 1 too, which would otherwise open a commit's run.
        assert_eq!(
            db.write(0, &[0; PAGE_BYTES]),
            flush(FlushReason::Checkpoint)
        );
        assert_eq!(
            db.write(PAGE_BYTES as u64, &[0; PAGE_BYTES]),
            flush(FlushReason::Checkpoint)
        );
        db.call(CallKind::Other);
        db.points.checkpoint_done();
        assert_eq!(db.write(0, &[0; PAGE_BYTES]), QUEUE);
    }

    #[test]
    fn mapped_writes_go_through() {
        for role in [FlushRole::Database, FlushRole::Other, FlushRole::Wal] {
            let mut file = Calls::new(role);
            file.write(0, &[0; PAGE_BYTES]);
            assert_eq!(
                file.write_mapped(PAGE_BYTES as u64, &[0; PAGE_BYTES], true),
                flush(FlushReason::Mapped)
            );
            assert_eq!(file.write(2 * PAGE_BYTES as u64, &[0; PAGE_BYTES]), QUEUE);
        }
    }

    /// What SQLite does, in the model's terms.
    #[derive(Clone, Debug)]
    enum Op {
        /// Any call but a write on one of the files.
        Call {
            file: F,
            sync: bool,
            reports: bool,
        },
        /// A call on another database's file.
        Unrelated,
        ReadDb {
            page: u32,
        },
        /// A read of a committed frame (or the WAL header).
        ReadWal {
            frame: u64,
        },
        /// The database is memory-mapped from now on, or no more.
        Map(bool),
        /// Journal records, the journal's sync, the pages in order (page 1 first
        /// unless `page_one` is false), `SQLITE_FCNTL_SYNC`, with `full` the syncs
        /// of `synchronous=FULL`, the journal's end as `end` says, and
        /// `SQLITE_FCNTL_COMMIT_PHASETWO`. Pages are 1-based after adding 1.
        RollbackCommit {
            pages: std::collections::BTreeSet<u32>,
            page_one: bool,
            full: bool,
            end: JournalEnd,
        },
        /// A cache spill or `sqlite3_db_cacheflush()` in rollback mode: journal
        /// records, the journal's sync, then the pages (never page 1).
        RollbackSpill {
            pages: std::collections::BTreeSet<u32>,
            size_hint: bool,
        },
        /// WAL frames, and a commit frame when `commit` (without: a spill).
        WalFrames {
            frames: u64,
            commit: Option<WalCommitShape>,
        },
        /// A checkpoint writing these pages (0-based: page + 1).
        Checkpoint {
            pages: Vec<u32>,
        },
    }

    /// How a rollback commit ends its journal (pager.c `pager_end_transaction`).
    #[derive(Clone, Copy, Debug)]
    enum JournalEnd {
        /// `journal_mode=DELETE`: xClose, then xDelete.
        Delete,
        /// `journal_mode=TRUNCATE`: xTruncate to 0 (and its sync, if any).
        Truncate,
        /// `journal_mode=PERSIST` (`zeroJournalHdr`): the header's 28 bytes zeroed by an
        /// xWrite, then synced unless `synchronous=OFF` (`synced` false).
        Persist { synced: bool },
    }

    #[derive(Clone, Debug)]
    struct WalCommitShape {
        sync: bool,
        /// The transaction overwrote a frame it had written (a spill's): checksums are
        /// rewritten up to the commit frame.
        rewrite: bool,
        /// With `psow=0`: full padding frames, then the byte of the last one at which
        /// the sync falls.
        padding: Option<(u8, usize)>,
    }

    fn pages() -> impl Strategy<Value = std::collections::BTreeSet<u32>> {
        proptest::collection::btree_set(1u32..40, 1..6)
    }

    fn journal_end() -> impl Strategy<Value = JournalEnd> {
        prop_oneof![
            Just(JournalEnd::Delete),
            Just(JournalEnd::Truncate),
            any::<bool>().prop_map(|synced| JournalEnd::Persist { synced }),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        let file = prop_oneof![Just(F::Db), Just(F::Journal), Just(F::Wal)];
        let commit = (
            any::<bool>(),
            any::<bool>(),
            proptest::option::of((0u8..3, 1usize..=(WAL_FRAME_HEADER_BYTES + PAGE_BYTES))),
        )
            .prop_map(|(sync, rewrite, padding)| WalCommitShape {
                sync,
                rewrite,
                padding: padding.filter(|_| sync),
            });
        prop_oneof![
            3 => (file, any::<bool>(), any::<bool>())
                .prop_map(|(file, sync, reports)| Op::Call { file, sync, reports }),
            2 => Just(Op::Unrelated),
            1 => (1u32..40).prop_map(|page| Op::ReadDb { page }),
            1 => any::<u64>().prop_map(|frame| Op::ReadWal { frame }),
            1 => any::<bool>().prop_map(Op::Map),
            2 => (pages(), any::<bool>(), any::<bool>(), journal_end())
                .prop_map(|(pages, page_one, full, end)| Op::RollbackCommit {
                    pages,
                    page_one,
                    full,
                    end,
                }),
            2 => (pages(), any::<bool>())
                .prop_map(|(pages, size_hint)| Op::RollbackSpill { pages, size_hint }),
            3 => (0u64..4, proptest::option::of(commit))
                .prop_map(|(frames, commit)| Op::WalFrames { frames, commit }),
            1 => proptest::collection::vec(0u32..40, 0..5)
                .prop_map(|pages| Op::Checkpoint { pages }),
        ]
    }

    fn run(ops: &[Op], broken: Option<FlushReason>) -> Result<(), String> {
        let mut thread = Thread::new(broken);
        for (step, op) in ops.iter().enumerate() {
            thread
                .run(op)
                .map_err(|why| format!("step {step} ({op:?}): {why}"))?;
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Whatever SQLite does, and whatever comes between, no write is left queued
        /// where something depends on it without a further reporting call.
        #[test]
        fn nothing_queued_where_unix_would_be_seen(ops in proptest::collection::vec(op(), 1..40)) {
            prop_assert_eq!(run(&ops, None), Ok(()));
        }
    }

    /// The model can fail: a machine whose SQLITE_FCNTL_COMMIT_PHASETWO does not report
    /// its flush leaves `journal_mode=PERSIST`'s reset unreported under
    /// `synchronous=OFF`.
    #[test]
    fn the_model_catches_a_silent_commit_phase_two() {
        let commit = Op::RollbackCommit {
            pages: [2u32, 5].into_iter().collect(),
            page_one: true,
            full: false,
            end: JournalEnd::Persist { synced: false },
        };
        let mut silent = Thread::new(None);
        silent.phase_two_reports = false;
        assert!(silent.run(&commit).is_err());
        assert_eq!(Thread::new(None).run(&commit), Ok(()));
    }

    /// The model can fail: with any one rule broken, a sequence that needs it does.
    #[test]
    fn the_model_catches_each_broken_rule() {
        let commit = |sync, rewrite, padding| WalCommitShape {
            sync,
            rewrite,
            padding,
        };
        let some_pages = || {
            [2u32, 5]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
        };
        let cases = [
            (
                FlushReason::Checkpoint,
                vec![Op::Checkpoint { pages: vec![0, 3] }],
            ),
            (
                FlushReason::PageOutsideCommit,
                vec![Op::RollbackSpill {
                    pages: some_pages(),
                    size_hint: false,
                }],
            ),
            (
                FlushReason::JournalRecordEnd,
                vec![Op::RollbackCommit {
                    pages: some_pages(),
                    page_one: true,
                    full: false,
                    end: JournalEnd::Delete,
                }],
            ),
            (
                FlushReason::Mapped,
                vec![
                    Op::Map(true),
                    Op::RollbackCommit {
                        pages: some_pages(),
                        page_one: true,
                        full: false,
                        end: JournalEnd::Delete,
                    },
                ],
            ),
            (
                FlushReason::CommitFrame,
                vec![Op::WalFrames {
                    frames: 2,
                    commit: Some(commit(false, false, None)),
                }],
            ),
            (
                FlushReason::CommitFrame,
                vec![Op::WalFrames {
                    frames: 2,
                    commit: Some(commit(false, true, None)),
                }],
            ),
            (
                FlushReason::AfterCommitSync,
                vec![Op::WalFrames {
                    frames: 1,
                    commit: Some(commit(true, false, Some((1, 100)))),
                }],
            ),
        ];
        for (broken, ops) in cases {
            assert_eq!(run(&ops, None), Ok(()), "{ops:?}");
            assert!(
                run(&ops, Some(broken)).is_err(),
                "{broken:?} not needed by {ops:?}"
            );
        }
    }
}
