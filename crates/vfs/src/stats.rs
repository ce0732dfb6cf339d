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
}

impl IoStats {
    pub fn to_json(&self) -> String {
        format!(
            "{{\"read_calls\":{},\"write_calls\":{},\"sync_calls\":{},\"truncate_calls\":{},\
             \"bytes_read\":{},\"bytes_written\":{},\"fsyncs\":{},\"ops\":{},\"kernel_entries\":{}}}",
            self.read_calls,
            self.write_calls,
            self.sync_calls,
            self.truncate_calls,
            self.bytes_read,
            self.bytes_written,
            self.fsyncs,
            self.ops,
            self.kernel_entries
        )
    }
}

/// Lock-free totals of one VFS; files add their deltas as they go.
#[derive(Default)]
pub(crate) struct SharedStats {
    fields: [AtomicU64; 9],
}

impl IoStats {
    /// The counters in `SharedStats::fields` order.
    fn as_array(&self) -> [u64; 9] {
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
        ]
    }
}

impl SharedStats {
    pub(crate) fn add(&self, delta: &IoStats) {
        for (field, value) in self.fields.iter().zip(delta.as_array()) {
            if value != 0 {
                field.fetch_add(value, Ordering::Relaxed);
            }
        }
    }

    /// `add` for counters with one writer at a time: a plain load and store per field
    /// instead of a locked read-modify-write, which costs tens of cycles on every call.
    /// Per-file counters qualify — SQLite never calls one file from two threads at once;
    /// the only other writer is a thread flushing that file's queued writes, and a race
    /// with it can lose an increment of a counter, never data.
    pub(crate) fn add_single_writer(&self, delta: &IoStats) {
        for (field, value) in self.fields.iter().zip(delta.as_array()) {
            if value != 0 {
                field.store(field.load(Ordering::Relaxed) + value, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn snapshot(&self) -> IoStats {
        let v: Vec<u64> = self
            .fields
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect();
        IoStats {
            read_calls: v[0],
            write_calls: v[1],
            sync_calls: v[2],
            truncate_calls: v[3],
            bytes_read: v[4],
            bytes_written: v[5],
            fsyncs: v[6],
            ops: v[7],
            kernel_entries: v[8],
        }
    }

    pub(crate) fn reset(&self) {
        for field in &self.fields {
            field.store(0, Ordering::Relaxed);
        }
    }
}
