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
    /// flushes its queue before it starts).
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
