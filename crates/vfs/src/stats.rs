//! I/O counters: per open file, and summed per registered VFS.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::sys::fork::{fork_generation, ForkLocal};

/// Adds `value` to a counter only one thread at a time writes: a plain load and store
/// instead of a locked read-modify-write, which costs tens of cycles on every call.
/// Readers on other threads see the old value or the new one.
#[inline]
fn add_single_writer(field: &AtomicU64, value: u64) {
    field.store(field.load(Ordering::Relaxed) + value, Ordering::Relaxed);
}

/// Counters of one file or of a whole VFS.
///
/// `*_calls` count what SQLite asked for (VFS method calls); `fsyncs`, `ops` and
/// `kernel_entries` count what the engine did to the kernel for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    pub read_calls: u64,
    pub write_calls: u64,
    pub sync_calls: u64,
    pub truncate_calls: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// fsync/fdatasync operations performed, directory syncs included.
    pub fsyncs: u64,
    /// I/O operations performed (SQEs on io_uring, syscalls on the syscall backend).
    pub ops: u64,
    /// Kernel entries made for I/O: `io_uring_enter` calls, or one per syscall.
    pub kernel_entries: u64,
    /// xRead calls read from the device through the O_DIRECT descriptor (`uring_direct`).
    pub direct_reads: u64,
    /// xRead calls served from the O_DIRECT read-ahead buffer, without a kernel entry.
    pub readahead_hits: u64,
    /// Block-aligned writes of a WAL's frames through its O_DIRECT descriptor
    /// (`uring_wal_direct`).
    pub wal_direct_writes: u64,
    /// Pages B-tree read-ahead asked the kernel to read before SQLite asked for them.
    pub prefetched_pages: u64,
    /// Read-ahead batches skipped because the kernel already had the pages cached.
    pub prefetch_skips: u64,
}

/// Number of counters in [`IoStats`].
const FIELD_COUNT: usize = 14;

/// Names of the counters, in [`IoStats::as_array`] order (the JSON keys).
const FIELD_NAMES: [&str; FIELD_COUNT] = [
    "read_calls",
    "write_calls",
    "sync_calls",
    "truncate_calls",
    "bytes_read",
    "bytes_written",
    "fsyncs",
    "ops",
    "kernel_entries",
    "direct_reads",
    "readahead_hits",
    "wal_direct_writes",
    "prefetched_pages",
    "prefetch_skips",
];

impl IoStats {
    /// What was counted since `earlier`, a snapshot of the same counters (every field
    /// `self − earlier`, 0 where a reset in between made it smaller).
    pub fn since(&self, earlier: &IoStats) -> IoStats {
        let (now, then) = (self.as_array(), earlier.as_array());
        IoStats::from_array(std::array::from_fn(|i| now[i].saturating_sub(then[i])))
    }

    pub fn to_json(&self) -> String {
        let fields: Vec<String> = FIELD_NAMES
            .iter()
            .zip(self.as_array())
            .map(|(name, value)| format!("\"{name}\":{value}"))
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    /// Every counter, in a fixed order (that of [`IoStats::to_json`]'s keys): for passing
    /// the counters between processes; [`IoStats::from_array`] is the inverse.
    pub fn as_array(&self) -> [u64; FIELD_COUNT] {
        [
            self.read_calls,
            self.write_calls,
            self.sync_calls,
            self.truncate_calls,
            self.bytes_read,
            self.bytes_written,
            self.fsyncs,
            self.ops,
            self.kernel_entries,
            self.direct_reads,
            self.readahead_hits,
            self.wal_direct_writes,
            self.prefetched_pages,
            self.prefetch_skips,
        ]
    }

    pub fn from_array(values: [u64; FIELD_COUNT]) -> IoStats {
        let [read_calls, write_calls, sync_calls, truncate_calls, bytes_read, bytes_written, fsyncs, ops, kernel_entries, direct_reads, readahead_hits, wal_direct_writes, prefetched_pages, prefetch_skips] =
            values;
        IoStats {
            read_calls,
            write_calls,
            sync_calls,
            truncate_calls,
            bytes_read,
            bytes_written,
            fsyncs,
            ops,
            kernel_entries,
            direct_reads,
            readahead_hits,
            wal_direct_writes,
            prefetched_pages,
            prefetch_skips,
        }
    }
}

/// Lock-free counters of one VFS or file; calls add their deltas as they go.
#[derive(Default)]
pub(crate) struct SharedStats {
    fields: [AtomicU64; FIELD_COUNT],
}

impl SharedStats {
    // Indices into `fields`, in `FIELD_NAMES` order.
    pub(crate) const WRITE_CALLS: usize = 1;
    pub(crate) const SYNC_CALLS: usize = 2;
    pub(crate) const BYTES_WRITTEN: usize = 5;
    pub(crate) const FSYNCS: usize = 6;
    pub(crate) const OPS: usize = 7;
    pub(crate) const KERNEL_ENTRIES: usize = 8;

    /// Adds `value` to the field at `index` (one of the constants above): the one
    /// counter a write or sync call bumps, without `add`'s pass over every field.
    /// `single_writer`: a plain load and store, as in [`SharedStats::add_single_writer`].
    #[inline]
    pub(crate) fn add_field(&self, index: usize, value: u64, single_writer: bool) {
        let field = &self.fields[index];
        if single_writer {
            add_single_writer(field, value);
        } else {
            field.fetch_add(value, Ordering::Relaxed);
        }
    }

    /// Adds `delta` with atomic read-modify-writes: for counters several threads update.
    pub(crate) fn add(&self, delta: &IoStats) {
        self.add_all(delta, false);
    }

    /// `add` for counters with one writer at a time: a plain load and store per field
    /// instead of a locked read-modify-write, which costs tens of cycles on every call.
    /// Per-file counters qualify — SQLite never calls one file from two threads at once;
    /// the only other writer is a thread flushing that file's queued writes, and a race
    /// with it can lose an increment of a counter, never data.
    pub(crate) fn add_single_writer(&self, delta: &IoStats) {
        self.add_all(delta, true);
    }

    /// Every non-zero field of `delta`, by [`SharedStats::add_field`].
    fn add_all(&self, delta: &IoStats, single_writer: bool) {
        for (index, value) in delta.as_array().into_iter().enumerate() {
            if value != 0 {
                self.add_field(index, value, single_writer);
            }
        }
    }

    pub(crate) fn snapshot(&self) -> IoStats {
        IoStats::from_array(std::array::from_fn(|i| {
            self.fields[i].load(Ordering::Relaxed)
        }))
    }

    pub(crate) fn reset(&self) {
        for field in &self.fields {
            field.store(0, Ordering::Relaxed);
        }
    }
}

/// A file's `xRead`s served by `pread` (the hot path), counted where they happen and
/// never added to the VFS's totals while the file is open: its one writer, the thread
/// SQLite calls the file from, makes a plain load and store per counter (no locked
/// instruction); [`VfsStats::snapshot`] reads them from any thread and adds them in.
/// They only grow: a reset moves the reader's starting point ([`ReadCounts`]), never
/// these.
#[derive(Debug, Default)]
pub(crate) struct FileReads {
    read_calls: AtomicU64,
    bytes_read: AtomicU64,
    preads: AtomicU64,
    /// The fork generation of the process that listed them ([`VfsStats::open_file`]).
    generation: u64,
}

impl FileReads {
    /// Counts one read of `bytes` made in `preads` calls. Only the file's one caller at a
    /// time may call it (SQLite never calls one file from two threads at once).
    #[inline]
    pub(crate) fn add(&self, bytes: u64, preads: u64) {
        for (field, value) in [
            (&self.read_calls, 1),
            (&self.bytes_read, bytes),
            (&self.preads, preads),
        ] {
            add_single_writer(field, value);
        }
    }

    /// The counts now.
    pub(crate) fn counts(&self) -> ReadCounts {
        ReadCounts {
            read_calls: self.read_calls.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            preads: self.preads.load(Ordering::Relaxed),
        }
    }
}

/// A reading of a [`FileReads`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReadCounts {
    read_calls: u64,
    bytes_read: u64,
    preads: u64,
}

impl ReadCounts {
    /// What was counted since `earlier`, a reading of the same counters.
    pub(crate) fn since(self, earlier: ReadCounts) -> ReadCounts {
        ReadCounts {
            read_calls: self.read_calls.saturating_sub(earlier.read_calls),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            preads: self.preads.saturating_sub(earlier.preads),
        }
    }

    /// Adds them to `stats`: each `pread` is an operation and a kernel entry.
    pub(crate) fn add_to(self, stats: &mut IoStats) {
        stats.read_calls += self.read_calls;
        stats.bytes_read += self.bytes_read;
        stats.ops += self.preads;
        stats.kernel_entries += self.preads;
    }
}

/// A VFS's counters: the totals every call adds to as it goes, and the `pread` reads of
/// its open files ([`FileReads`]), which a snapshot adds in and a file's close adds to
/// the totals. Every snapshot is exact — none lags behind a read already returned —
/// and a reset leaves none of an open file's earlier reads to arrive later.
///
/// A forked child starts with an empty list of open files (the parent's may have been
/// locked at the fork by a thread the child does not have): the reads of a file open
/// across a `fork()` — which SQLite forbids using in the child — count in the parent
/// only.
#[derive(Default)]
pub(crate) struct VfsStats {
    /// Everything but open files' `pread` reads; the I/O paths add to it directly.
    pub(crate) totals: SharedStats,
    /// Open files' reads, each with the reading already in `totals` or before the last
    /// reset (its starting point). Locked only at a file's first read, its close, a
    /// snapshot and a reset: never on the read path. This process's: a forked child
    /// starts a new one.
    open_files: ForkLocal<Mutex<Vec<OpenFileReads>>>,
}

struct OpenFileReads {
    reads: Arc<FileReads>,
    counted: ReadCounts,
}

impl VfsStats {
    fn open_files(&self) -> MutexGuard<'_, Vec<OpenFileReads>> {
        // A panic elsewhere while the list was held leaves it consistent: each change is
        // one push or one swap_remove.
        self.open_files
            .get()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Counters for a file's `pread` reads, counted in every snapshot until
    /// [`VfsStats::close_file`].
    pub(crate) fn open_file(&self) -> Arc<FileReads> {
        let reads = Arc::new(FileReads {
            generation: fork_generation(),
            ..FileReads::default()
        });
        self.open_files().push(OpenFileReads {
            reads: Arc::clone(&reads),
            counted: ReadCounts::default(),
        });
        reads
    }

    /// The file whose counters [`VfsStats::open_file`] gave is closing: its reads since
    /// its starting point join the totals, under the lock a snapshot takes, so no
    /// snapshot counts them twice or not at all.
    pub(crate) fn close_file(&self, reads: &Arc<FileReads>) {
        let mut open_files = self.open_files();
        let Some(at) = open_files
            .iter()
            .position(|open| Arc::ptr_eq(&open.reads, reads))
        else {
            // Listed before a fork, in the parent's list: counted there alone.
            debug_assert!(
                reads.generation != fork_generation(),
                "a file's read counters closed twice"
            );
            return;
        };
        let closed = open_files.swap_remove(at);
        let mut delta = IoStats::default();
        closed
            .reads
            .counts()
            .since(closed.counted)
            .add_to(&mut delta);
        self.totals.add(&delta);
    }

    /// The totals with every open file's reads.
    pub(crate) fn snapshot(&self) -> IoStats {
        let open_files = self.open_files();
        let mut stats = self.totals.snapshot();
        for open in open_files.iter() {
            open.reads.counts().since(open.counted).add_to(&mut stats);
        }
        stats
    }

    /// Back to zero: the totals, and each open file's reads so far.
    pub(crate) fn reset(&self) {
        let mut open_files = self.open_files();
        self.totals.reset();
        for open in open_files.iter_mut() {
            open.counted = open.reads.counts();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_path_counters_land_in_their_named_fields() {
        assert_eq!(FIELD_NAMES[SharedStats::WRITE_CALLS], "write_calls");
        assert_eq!(FIELD_NAMES[SharedStats::SYNC_CALLS], "sync_calls");
        assert_eq!(FIELD_NAMES[SharedStats::BYTES_WRITTEN], "bytes_written");
        assert_eq!(FIELD_NAMES[SharedStats::FSYNCS], "fsyncs");
        assert_eq!(FIELD_NAMES[SharedStats::OPS], "ops");
        assert_eq!(FIELD_NAMES[SharedStats::KERNEL_ENTRIES], "kernel_entries");
        for single_writer in [true, false] {
            let stats = SharedStats::default();
            stats.add_field(SharedStats::BYTES_WRITTEN, 4096, single_writer);
            stats.add_field(SharedStats::OPS, 2, single_writer);
            stats.add_field(SharedStats::KERNEL_ENTRIES, 2, single_writer);
            let expected = IoStats {
                bytes_written: 4096,
                ops: 2,
                kernel_entries: 2,
                ..IoStats::default()
            };
            assert_eq!(stats.snapshot(), expected);
            stats.add_field(SharedStats::WRITE_CALLS, 3, single_writer);
            stats.add_field(SharedStats::FSYNCS, 1, single_writer);
            let expected = IoStats {
                write_calls: 3,
                fsyncs: 1,
                ..expected
            };
            assert_eq!(stats.snapshot(), expected);
        }
    }

    #[test]
    fn open_files_reads_are_in_every_snapshot_and_join_the_totals_at_close() {
        let stats = VfsStats::default();
        let first = stats.open_file();
        let second = stats.open_file();
        stats.totals.add_field(SharedStats::WRITE_CALLS, 2, false);
        first.add(4096, 1);
        first.add(4096, 2);
        second.add(100, 1);
        let expected = IoStats {
            read_calls: 3,
            write_calls: 2,
            bytes_read: 8292,
            ops: 4,
            kernel_entries: 4,
            ..IoStats::default()
        };
        assert_eq!(stats.snapshot(), expected, "open files' reads, at once");
        stats.close_file(&first);
        assert_eq!(stats.snapshot(), expected, "a close neither adds nor drops");
        first.add(1, 1);
        assert_eq!(
            stats.snapshot(),
            expected,
            "a closed file's counters are gone"
        );
        stats.close_file(&second);
        assert_eq!(stats.totals.snapshot(), expected, "all in the totals");
        assert_eq!(stats.snapshot(), expected);
    }

    #[test]
    fn a_reset_drops_open_files_earlier_reads_for_good() {
        let stats = VfsStats::default();
        let reads = stats.open_file();
        reads.add(4096, 1);
        stats.reset();
        assert_eq!(stats.snapshot(), IoStats::default());
        reads.add(512, 1);
        let after = IoStats {
            read_calls: 1,
            bytes_read: 512,
            ops: 1,
            kernel_entries: 1,
            ..IoStats::default()
        };
        assert_eq!(stats.snapshot(), after);
        stats.close_file(&reads);
        assert_eq!(
            stats.snapshot(),
            after,
            "the read before the reset stays out"
        );
    }

    /// The counters after one counted write call and one `pread` read of `bytes`.
    fn one_write_and_one_read_of(bytes: u64) -> IoStats {
        IoStats {
            read_calls: 1,
            write_calls: 1,
            bytes_read: bytes,
            ops: 1,
            kernel_entries: 1,
            ..IoStats::default()
        }
    }

    #[test]
    fn a_forked_child_counts_its_own_files_even_with_the_list_locked_at_the_fork() {
        let stats = VfsStats::default();
        stats.totals.add_field(SharedStats::WRITE_CALLS, 1, false);
        let parents = stats.open_file();
        parents.add(4096, 1);
        // Held across the fork, as a thread of the parent taking a snapshot or closing a
        // file may hold it: in the child that lock would never be released.
        let held = stats.open_files();
        let child = crate::sys::fork::run_in_forked_child(|| {
            let own = stats.open_file();
            own.add(100, 1);
            let expected = one_write_and_one_read_of(100);
            let counted_at_once = stats.snapshot() == expected;
            // The parent's open file is the parent's to count; closing it here is no
            // error (and no double count).
            stats.close_file(&parents);
            stats.close_file(&own);
            counted_at_once && stats.snapshot() == expected && stats.totals.snapshot() == expected
        });
        drop(held);
        child.unwrap();
        let parent_expected = one_write_and_one_read_of(4096);
        assert_eq!(
            stats.snapshot(),
            parent_expected,
            "the parent's list as it was"
        );
        stats.close_file(&parents);
        assert_eq!(stats.totals.snapshot(), parent_expected);
    }

    #[test]
    fn read_counts_since_saturate() {
        let reads = FileReads::default();
        reads.add(10, 1);
        let earlier = reads.counts();
        reads.add(20, 2);
        let delta = reads.counts().since(earlier);
        assert_eq!(
            delta,
            ReadCounts {
                read_calls: 1,
                bytes_read: 20,
                preads: 2
            }
        );
        assert_eq!(earlier.since(reads.counts()), ReadCounts::default());
    }

    #[test]
    fn since_subtracts_every_field_and_saturates() {
        let earlier = IoStats::from_array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
        let later = IoStats::from_array([2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 5, 13, 14, 14]);
        assert_eq!(
            later.since(&earlier),
            IoStats::from_array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 1, 0])
        );
    }

    #[test]
    fn json_names_every_counter_in_order() {
        let stats = IoStats::from_array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
        assert_eq!(
            stats.to_json(),
            "{\"read_calls\":1,\"write_calls\":2,\"sync_calls\":3,\"truncate_calls\":4,\
             \"bytes_read\":5,\"bytes_written\":6,\"fsyncs\":7,\"ops\":8,\"kernel_entries\":9,\"direct_reads\":10,\"readahead_hits\":11,\
             \"wal_direct_writes\":12,\"prefetched_pages\":13,\"prefetch_skips\":14}"
        );
        let shared = SharedStats::default();
        shared.add(&stats);
        shared.add_single_writer(&stats);
        assert_eq!(
            shared.snapshot(),
            IoStats::from_array([2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28])
        );
        shared.reset();
        assert_eq!(shared.snapshot(), IoStats::default());
    }
}
