//! I/O counters: per open file, and summed per registered VFS.

use std::sync::atomic::{AtomicU64, Ordering};

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
    pub(crate) const READ_CALLS: usize = 0;
    pub(crate) const WRITE_CALLS: usize = 1;
    pub(crate) const SYNC_CALLS: usize = 2;
    pub(crate) const BYTES_READ: usize = 4;
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
            field.store(field.load(Ordering::Relaxed) + value, Ordering::Relaxed);
        } else {
            field.fetch_add(value, Ordering::Relaxed);
        }
    }

    /// Adds `delta` with atomic read-modify-writes: for counters several threads update.
    pub(crate) fn add(&self, delta: &IoStats) {
        self.add_all(delta, false);
    }

    /// The counters of `reads` `xRead`s served by `pread` (`bytes` in `preads` calls): the
    /// hot path of a read, so four fields are touched directly instead of looping over all
    /// of them.
    #[inline]
    pub(crate) fn add_preads(&self, reads: u64, bytes: u64, preads: u64, single_writer: bool) {
        for (index, value) in [
            (Self::READ_CALLS, reads),
            (Self::BYTES_READ, bytes),
            (Self::OPS, preads),
            (Self::KERNEL_ENTRIES, preads),
        ] {
            self.add_field(index, value, single_writer);
        }
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

/// Counts of a file's `xRead`s served by `pread` not yet added to its VFS's shared totals.
/// A read adds them to plain fields; every [`UnpublishedReads::MAX_READS`] reads, and at
/// each lock change and close of the file, they go to the totals in one batch, so the
/// hot read path makes no locked read-modify-write. The VFS's totals lag by at most that
/// many reads per open file, and not at all once its transactions have ended.
#[derive(Debug, Default)]
pub(crate) struct UnpublishedReads {
    read_calls: u64,
    bytes_read: u64,
    preads: u64,
}

impl UnpublishedReads {
    /// Reads counted before the batch is due.
    pub(crate) const MAX_READS: u64 = 64;

    /// Counts one read of `bytes` (`preads` calls); true when the batch is due.
    #[inline]
    pub(crate) fn add(&mut self, bytes: u64, preads: u64) -> bool {
        self.read_calls += 1;
        self.bytes_read += bytes;
        self.preads += preads;
        self.read_calls >= Self::MAX_READS
    }

    /// Adds the counts to `totals` and starts again from zero.
    pub(crate) fn publish(&mut self, totals: &SharedStats) {
        if self.read_calls == 0 {
            return;
        }
        totals.add_preads(self.read_calls, self.bytes_read, self.preads, false);
        self.discard();
    }

    /// Forgets the counts (the totals were reset).
    pub(crate) fn discard(&mut self) {
        *self = UnpublishedReads::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_path_counters_land_in_their_named_fields() {
        assert_eq!(FIELD_NAMES[SharedStats::READ_CALLS], "read_calls");
        assert_eq!(FIELD_NAMES[SharedStats::WRITE_CALLS], "write_calls");
        assert_eq!(FIELD_NAMES[SharedStats::SYNC_CALLS], "sync_calls");
        assert_eq!(FIELD_NAMES[SharedStats::BYTES_READ], "bytes_read");
        assert_eq!(FIELD_NAMES[SharedStats::BYTES_WRITTEN], "bytes_written");
        assert_eq!(FIELD_NAMES[SharedStats::FSYNCS], "fsyncs");
        assert_eq!(FIELD_NAMES[SharedStats::OPS], "ops");
        assert_eq!(FIELD_NAMES[SharedStats::KERNEL_ENTRIES], "kernel_entries");
        for single_writer in [true, false] {
            let stats = SharedStats::default();
            stats.add_preads(1, 4096, 2, single_writer);
            let expected = IoStats {
                read_calls: 1,
                bytes_read: 4096,
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
    fn unpublished_reads_reach_the_totals_in_batches_and_add_up() {
        let totals = SharedStats::default();
        let mut reads = UnpublishedReads::default();
        let mut expected = IoStats::default();
        for n in 1..=(2 * UnpublishedReads::MAX_READS + 5) {
            let preads = 1 + n % 2;
            if reads.add(4096, preads) {
                reads.publish(&totals);
                assert_eq!(
                    n % UnpublishedReads::MAX_READS,
                    0,
                    "a batch after {n} reads"
                );
            }
            expected.read_calls += 1;
            expected.bytes_read += 4096;
            expected.ops += preads;
            expected.kernel_entries += preads;
        }
        assert_eq!(
            totals.snapshot().read_calls,
            2 * UnpublishedReads::MAX_READS
        );
        reads.publish(&totals);
        assert_eq!(totals.snapshot(), expected);
        // Nothing left: publishing again adds nothing.
        reads.publish(&totals);
        assert_eq!(totals.snapshot(), expected);
        reads.add(512, 1);
        reads.discard();
        reads.publish(&totals);
        assert_eq!(totals.snapshot(), expected);
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
