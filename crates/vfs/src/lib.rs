//! `sqlite-uring`: a SQLite VFS for Linux built on io_uring — a drop-in for SQLite's `unix`
//! VFS that batches writes (write-behind, coalescing) and submits through the ring what can
//! overlap there, while lone operations stay plain syscalls where the ring cannot win
//! (the routing is in `docs/ARCHITECTURE.md`, the measurements behind it in
//! `docs/DESIGN.md`).
//!
//! Two shapes share this crate:
//! * the loadable extension (`crates/ext`, `libsqlite_uring.so`) calls
//!   [`register_with_api_routines`] with the `sqlite3_api_routines` SQLite hands it;
//! * Rust programs that link SQLite (rusqlite with `bundled`) call [`register`], which
//!   uses the SQLite symbols linked into the program.
//!
//! After registration, open a database with the VFS name (default `io_uring`):
//! `Connection::open_with_flags_and_vfs(path, flags, "io_uring")`.
//!
//! Every VFS call, engine batch and ring submission can be traced through the `log`
//! facade (`RUST_LOG=sqlite_uring=trace` with any logger; feature `trace`): see [`trace`].
//!
//! The module map and invariants are in `docs/ARCHITECTURE.md`.

// Layers, each importing only from the ones above it in this list
// (tests/module_graph.rs fails on any cycle; docs/ARCHITECTURE.md has the map):
// leaves
mod api;
mod btree_page;
mod config;
mod error;
mod ffi;
mod flush_point;
mod open_name;
mod stats;
mod sys;
pub mod trace;
// the I/O engines
mod io;
// what files are built from
mod direct;
mod lock;
mod mmap;
mod readahead;
mod shm;
mod write_behind;
// the VFS's shared state, its files, the C entry points, registration
mod entry;
mod file;
mod register;
mod vfs;

pub use config::{Backend, Options, Submission, SyncMode, SyncPlan};
pub use error::Error;
pub use io::diagnose::{ProbeReport, RingCompletion, RingPlacement};
pub use register::{
    alloc_error_message, register, register_with_api_routines, reset_vfs_stats, sqlite_version,
    vfs_stats, Registration,
};
pub use stats::IoStats;

/// Creates a ring, asks the kernel what it supports, and explains failures (the cause and
/// the remedy) when io_uring cannot be used here.
pub fn probe() -> ProbeReport {
    io::uring::probe_report()
}

/// What [`probe_filesystem`] found about one directory.
#[derive(Clone, Debug)]
pub struct FilesystemReport {
    /// The filesystem's name from its `statfs` magic number (`ext4`, `xfs`, `btrfs`,
    /// `tmpfs`, …; ext2/3 share ext4's magic), or the magic in hex.
    pub filesystem: String,
    /// Whether ring writes and fsyncs there complete inline or on io-wq workers.
    pub placement: RingPlacement,
    /// `"engine":"…","reads":"…","writes":"…","syncs":"…","lone_ops":"…","sqpoll":"…"`:
    /// what a main database opened there without URI parameters gets from a VFS
    /// registered with default [`Options`], as `PRAGMA io_uring_stats` reports it.
    pub default_routing: String,
}

/// Names the filesystem of `dir`, submits batches of ring writes and an fsync to a
/// temporary file there to see whether the kernel completes them inline or hands them to
/// io-wq worker threads, and says how the VFS routes a database there by default
/// (docs/FILESYSTEMS.md). Takes a few milliseconds and a few fsyncs; the temporary files
/// never have a name for longer than their open.
pub fn probe_filesystem(dir: &std::path::Path) -> Result<FilesystemReport, Error> {
    use std::os::fd::AsFd;
    let handle = std::fs::File::open(dir)
        .map_err(|error| Error::FilesystemProbe(format!("{}: {error}", dir.display())))?;
    let filesystem = sys::Filesystem::of_fd(handle.as_fd()).map_err(|errno| {
        Error::FilesystemProbe(format!(
            "fstatfs of {}: {}",
            dir.display(),
            std::io::Error::from_raw_os_error(errno)
        ))
    })?;
    let placement = io::uring::ring_placement(dir).map_err(Error::FilesystemProbe)?;
    Ok(FilesystemReport {
        filesystem: filesystem.name(),
        placement,
        default_routing: io::EngineKind::default_database_routing_json(
            &Options::default(),
            filesystem,
        ),
    })
}

// ─── Test machinery (feature `test-support`, off in every shipped build) ──────────────

/// Fault injection for tests of error paths (hidden: not a stable API).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub use io::{
    fault::{FaultKind, FaultPlan, FaultRule, RecordedOp},
    op::OpKind,
};
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub use register::register_with_faults;

/// Power-loss crash states for tests (hidden: not a stable API; `io/power_loss.rs`).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub mod power_loss {
    pub use crate::io::power_loss::{
        CrashChoice, Cut, Event, History, Metadata, MetadataOp, PendingOp, PowerLossLog,
        TORN_SECTOR_BYTES,
    };
}

/// Writes the calling thread's ring issued as IORING_OP_WRITE_FIXED from the registered
/// write-behind arena (hidden: for tests).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub fn thread_ring_fixed_writes() -> u64 {
    io::uring::thread_ring_fixed_writes()
}

/// Whether the calling thread owns a ring (hidden: for tests; files whose reads, writes
/// and syncs all go by syscall do not make their thread set one up).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub fn thread_has_ring() -> bool {
    io::uring::thread_has_ring()
}

/// Descriptor closes of a database or -shm, process-wide, that found a lock held on the
/// file (or a descriptor parked beside a `unix` connection's lock) and so checked whose
/// locks they are before closing (hidden: for tests).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub fn lock_owner_checks() -> u64 {
    sys::fd::lock_owner_checks()
}

/// Runs `hook` once, in the next close of a database's or -shm's descriptor, between
/// its first probe for locks and its close(2)s, with `unix`'s lock requests held back
/// (hidden: for tests of that gate, `sys/fd.rs`).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub fn run_between_probe_and_close(hook: Box<dyn FnOnce() + Send>) {
    sys::fd::run_between_probe_and_close(hook)
}

/// Fsyncs the calling thread's ring issued linked behind queued writes in one submission
/// (`uring_sync_plan=linked` on the ring; hidden: for tests).
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub fn thread_ring_linked_syncs() -> u64 {
    io::uring::thread_ring_linked_syncs()
}
