//! The engine a file uses ([`EngineKind`]): io_uring with a routing, plain syscalls, or
//! the fault-injecting engine of the tests, dispatched here so the layers above perform
//! batches without knowing which one runs. They may ask it questions whose answer is a
//! property of the routing (can a lone read be a plain `pread`?), never its kind.
//!
//! [`EngineKind::for_file`] and [`EngineKind::for_filesystem`] are where a file's routing
//! is decided, at open, and nowhere else.

use crate::config::{Backend, Options, Submission, UriOptions};
use crate::open_name::UriParameters;
use crate::sys::Filesystem;

#[cfg(feature = "test-support")]
use super::fault::FaultPlan;
use super::op::{Engine, Op};
use super::routing::Routing;
use super::{syscall, uring};

/// Which engine a file uses. Chosen at open.
#[derive(Clone)]
pub(crate) enum EngineKind {
    /// The ring, with reads, writes and/or syncs issued by syscall (see [`Submission`]).
    IoUring(Routing),
    Syscall,
    /// The fault-injecting engine of the tests (feature `test-support`).
    #[cfg(feature = "test-support")]
    Fault(std::sync::Arc<FaultPlan>),
}

impl std::fmt::Debug for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a file is, as far as its routing is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileRole {
    /// A main database or its rollback journal.
    DatabaseOrJournal,
    /// A WAL, a temporary file, a super-journal, …
    Other,
}

impl EngineKind {
    /// The engine of a file being opened: the VFS's engine (`vfs_engine`, with
    /// `vfs_routing` the routing its options give), as the file's URI parameters and its
    /// role change it.
    ///
    /// * `uring_backend` switches between the ring and syscalls (a fault-injecting VFS
    ///   keeps its engine: the test decides).
    /// * `uring_reads` / `uring_writes` / `uring_syncs` / `uring_sqpoll` override the
    ///   VFS's routing.
    /// * With O_DIRECT (`direct`), the database and its rollback journal put writes and
    ///   syncs on the ring unless told otherwise: O_DIRECT page writes run inline there
    ///   and overlap on the device, a direct rollback commit has io-wq workers anyway,
    ///   and ring syncs link the journal's header rewrite to its fsync (the measurements:
    ///   docs/DESIGN.md, "O_DIRECT writes go through the ring"). A WAL keeps the VFS's
    ///   routing: WAL commits touch no direct file, and a ring fsync would add the io-wq
    ///   thread that slows every later commit.
    pub(crate) fn for_file(
        vfs_engine: &EngineKind,
        vfs_routing: Routing,
        uri: &UriOptions,
        direct: bool,
        role: FileRole,
    ) -> EngineKind {
        let mut engine = match (vfs_engine, uri.backend) {
            #[cfg(feature = "test-support")]
            (EngineKind::Fault(_), _) => vfs_engine.clone(),
            (_, None) => vfs_engine.clone(),
            (_, Some(Backend::IoUring)) => EngineKind::IoUring(vfs_routing),
            (_, Some(Backend::Syscall)) => EngineKind::Syscall,
        };
        if let EngineKind::IoUring(routing) = &mut engine {
            let (default_writes, default_syncs) = if direct && role == FileRole::DatabaseOrJournal {
                (Submission::Ring, Submission::Ring)
            } else {
                (routing.writes(), routing.syncs())
            };
            *routing = Routing::new(
                uri.reads.unwrap_or(routing.reads()),
                uri.writes.unwrap_or(default_writes),
                uri.syncs.unwrap_or(default_syncs),
            )
            .with_sqpoll(uri.sqpoll.unwrap_or(routing.sqpoll));
        }
        engine
    }

    /// The engine once the file is open and its filesystem can be asked (`filesystem`:
    /// one fstatfs, made only when the answer could change the routing). This is the one
    /// place where a file's routing follows its filesystem:
    ///
    /// * tmpfs/ramfs: fsync does nothing, so not even the journal/directory sync pair has
    ///   anything to overlap and the ring would only add worker hand-offs (docs/DESIGN.md,
    ///   "The default does not depend on the filesystem"): a routing that sends only some
    ///   kinds of op to the ring becomes plain syscalls. Explicitly routing everything to
    ///   the ring keeps it.
    /// * ext4, XFS, btrfs keep the routing they were given. None of them completes a
    ///   commit's buffered ring writes inline on Linux 6.18 (XFS only while the file's
    ///   mtime needs no update, which a commit's first write never finds), and
    ///   `uring_writes=ring` showed no win on any of them, so ring writes are not made
    ///   their default (docs/FILESYSTEMS.md; `sqlite-uring probe --dir` re-checks a
    ///   filesystem, `scripts/filesystems.sh` re-measures).
    pub(crate) fn for_filesystem(
        self,
        filesystem: impl FnOnce() -> Option<Filesystem>,
    ) -> EngineKind {
        match self {
            EngineKind::IoUring(routing)
                if routing.lone_op_by_syscall
                    && !routing.reads_writes_syncs_by_syscall()
                    && filesystem().is_some_and(Filesystem::is_memory_backed) =>
            {
                EngineKind::Syscall
            }
            other => other,
        }
    }

    /// `"engine":"…","reads":"…",…`: the engine and routing a main database opened
    /// without URI parameters on `filesystem` gets from a VFS registered with `options`,
    /// decided by the same two functions an open calls, in the form
    /// `PRAGMA io_uring_stats` reports them.
    pub(crate) fn default_database_routing_json(
        options: &Options,
        filesystem: Filesystem,
    ) -> String {
        let routing = Routing::from_options(options);
        let vfs_engine = match options.backend {
            Backend::IoUring => EngineKind::IoUring(routing),
            Backend::Syscall => EngineKind::Syscall,
        };
        let uri = UriOptions::parse(&UriParameters::default()).expect("no parameters parse");
        let engine = EngineKind::for_file(
            &vfs_engine,
            routing,
            &uri,
            options.direct_io,
            FileRole::DatabaseOrJournal,
        )
        .for_filesystem(|| Some(filesystem));
        format!(r#""engine":"{}",{}"#, engine.name(), engine.routing_json())
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            EngineKind::IoUring(_) => "io_uring",
            EngineKind::Syscall => "syscall",
            #[cfg(feature = "test-support")]
            EngineKind::Fault(_) => "fault-injection",
        }
    }

    /// Whether this is the fault-injecting engine of the tests.
    pub(crate) fn injects_faults(&self) -> bool {
        match self {
            EngineKind::IoUring(_) | EngineKind::Syscall => false,
            #[cfg(feature = "test-support")]
            EngineKind::Fault(_) => true,
        }
    }

    /// The routing in effect: everything by syscall for the syscall and fault engines
    /// (the fault engine's own inner routing is the test's business).
    fn routing(&self) -> Routing {
        match self {
            EngineKind::IoUring(routing) => *routing,
            EngineKind::Syscall => Routing::ALL_SYSCALL,
            #[cfg(feature = "test-support")]
            EngineKind::Fault(_) => Routing::ALL_SYSCALL,
        }
    }

    /// How reads, writes and syncs are issued, for `PRAGMA io_uring_stats`.
    pub(crate) fn routing_json(&self) -> String {
        self.routing().to_json()
    }

    /// Whether a lone read goes by `pread` from the calling thread (never for the
    /// fault-injecting engine, whose point is to see every op).
    pub(crate) fn reads_by_syscall(&self) -> bool {
        match self {
            EngineKind::Syscall => true,
            EngineKind::IoUring(routing) => routing.syscall_reads || routing.lone_op_by_syscall,
            #[cfg(feature = "test-support")]
            EngineKind::Fault(_) => false,
        }
    }

    /// Whether a sync runs as a syscall of its own after the writes before it (so nothing
    /// is gained by submitting both at once): everything but ring-routed syncs.
    pub(crate) fn syncs_by_syscall(&self) -> bool {
        match self {
            EngineKind::Syscall => true,
            EngineKind::IoUring(routing) => routing.syscall_syncs,
            #[cfg(feature = "test-support")]
            EngineKind::Fault(plan) => plan.inner_routing().is_none_or(|r| r.syscall_syncs),
        }
    }

    /// Checks, on this thread, that the engine can run; the error names cause and remedy.
    pub(crate) fn ensure_available(&self) -> Result<(), String> {
        match self {
            EngineKind::IoUring(routing) => uring::ensure_available(*routing),
            EngineKind::Syscall => Ok(()),
            #[cfg(feature = "test-support")]
            EngineKind::Fault(plan) => match plan.inner_routing() {
                Some(routing) => uring::ensure_available(routing),
                None => Ok(()),
            },
        }
    }

    /// Asks the kernel to bring `ops` (all `Op::Prefetch`) into the page cache, without
    /// waiting for the data; returns the kernel entries made. By default, on either
    /// backend, one `posix_fadvise(WILLNEED)` per op from the calling thread, which beat
    /// the ring's buffered reads (docs/DESIGN.md, "Read-ahead follows the B-tree, through
    /// `posix_fadvise`"). A file whose
    /// reads are routed to the ring (`uring_reads=ring`) submits them as one batch of
    /// buffered reads on the thread's ring, none of which a later call waits for
    /// (`uring::prefetch_on_thread_ring`); while a test has replaced a read or write
    /// system call, `posix_fadvise` again. The fault-injecting engine sees them as a
    /// batch.
    pub(crate) fn prefetch(&self, ops: &mut [Op<'_>]) -> Result<u64, i32> {
        debug_assert!(ops.iter().all(|op| matches!(op, Op::Prefetch { .. })));
        let mut results = [0i32; super::op::MAX_BATCH];
        let results = &mut results[..ops.len().min(super::op::MAX_BATCH)];
        match self {
            EngineKind::IoUring(routing)
                if !routing.syscall_reads && !crate::sys::calls::io_replaced() =>
            {
                uring::prefetch_on_thread_ring(ops)
            }
            EngineKind::IoUring(_) | EngineKind::Syscall => {
                syscall::SyscallEngine.perform(&mut ops[..results.len()], results)
            }
            #[cfg(feature = "test-support")]
            EngineKind::Fault(plan) => plan.perform(&mut ops[..results.len()], results),
        }
    }

    /// Before a descriptor that prefetches read through is closed: waits for this
    /// thread's prefetch reads in flight (`uring::wait_for_thread_prefetches`).
    pub(crate) fn before_prefetch_descriptor_closes(&self) {
        if let EngineKind::IoUring(_) = self {
            uring::wait_for_thread_prefetches();
        }
    }

    /// [`Engine::perform`] on this engine.
    pub(crate) fn perform(&self, ops: &mut [Op<'_>], results: &mut [i32]) -> Result<u64, i32> {
        debug_assert_eq!(ops.len(), results.len());
        match self {
            EngineKind::IoUring(routing) => uring::perform_routed(*routing, ops, results),
            EngineKind::Syscall => syscall::SyscallEngine.perform(ops, results),
            #[cfg(feature = "test-support")]
            EngineKind::Fault(plan) => plan.perform(ops, results),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "test-support")]
    use std::os::fd::AsRawFd;

    use super::*;
    #[cfg(feature = "test-support")]
    use crate::io::power_loss::Event;

    fn after_open(engine: &EngineKind, filesystem: Filesystem) -> String {
        let engine = engine.clone().for_filesystem(|| Some(filesystem));
        format!(r#""engine":"{}",{}"#, engine.name(), engine.routing_json())
    }

    /// Ring writes stay ring writes on the disk filesystems (none completes a commit's
    /// buffered ring writes inline, so none gets a different default) and become
    /// syscalls on tmpfs/ramfs; everything on the ring stays there.
    #[test]
    fn routing_follows_the_filesystem() {
        let ring_writes = EngineKind::IoUring(Routing::new(
            Submission::Syscall,
            Submission::Ring,
            Submission::Syscall,
        ));
        let given = after_open(&ring_writes, Filesystem::Other(0));
        for filesystem in [Filesystem::Ext4, Filesystem::Xfs, Filesystem::Btrfs] {
            assert_eq!(
                after_open(&ring_writes, filesystem),
                given,
                "{filesystem:?}"
            );
        }
        for filesystem in [Filesystem::Tmpfs, Filesystem::Ramfs] {
            assert!(after_open(&ring_writes, filesystem).starts_with(r#""engine":"syscall""#));
        }
        let all_ring = EngineKind::IoUring(Routing::ALL_RING);
        assert!(after_open(&all_ring, Filesystem::Tmpfs).contains(r#""writes":"ring""#));
    }

    /// A file whose routing is all syscalls (the default) never asks its filesystem.
    #[test]
    fn default_routing_makes_no_fstatfs() {
        let default = EngineKind::IoUring(Routing::from_options(&Options::default()));
        let engine = default.for_filesystem(|| panic!("the filesystem was asked"));
        assert_eq!(engine.routing(), Routing::ALL_SYSCALL);
        for filesystem in [Filesystem::Ext4, Filesystem::Xfs, Filesystem::Tmpfs] {
            assert!(
                EngineKind::default_database_routing_json(&Options::default(), filesystem)
                    .contains(r#""reads":"syscall","writes":"syscall","syncs":"syscall""#)
            );
        }
    }

    // The power-loss recorder seen through the engine a file uses (a fault engine with a
    // recorder attached).
    #[cfg(feature = "test-support")]
    #[test]
    fn the_recorder_sees_entries_writes_linked_syncs_and_the_misorder_knob() {
        let dir = tempfile::tempdir().unwrap();
        let plan = FaultPlan::with_submissions(Backend::Syscall, [Submission::Syscall; 3]);
        let log = plan.record_power_loss(dir.path()).unwrap();
        let engine = EngineKind::Fault(plan.clone());
        let f = std::fs::File::create(dir.path().join("x-journal")).unwrap();
        let fd = f.as_raw_fd();
        let data = [7u8; 600];
        let perform = |ops: &mut [Op<'_>]| {
            let mut results = vec![0i32; ops.len()];
            engine.perform(ops, &mut results).unwrap();
            results
        };
        let write = || Op::Write {
            fd,
            buf: &data,
            offset: 0,
        };
        let linked = Op::SyncAfterWrites {
            fd,
            data_only: false,
        };
        perform(&mut [write(), linked]);
        let h = log.history();
        assert!(matches!(h.events[1], Event::Create { ref name, inode: 0 } if name == "x-journal"));
        assert!(
            matches!(h.events[2], Event::Write { inode: 0, offset: 0, ref data, .. } if data.len() == 600)
        );
        assert!(matches!(h.events[3], Event::Sync { inode: 0 }));
        // Deferred: reported done, recorded after the next batch's write.
        log.defer_syncs(Some("-journal"));
        assert_eq!(
            perform(&mut [Op::Sync {
                fd,
                data_only: false
            }]),
            vec![0]
        );
        perform(&mut [write()]);
        let h = log.history();
        assert!(matches!(h.events[4], Event::Write { .. }));
        assert!(matches!(h.events[5], Event::Sync { inode: 0 }));
        drop(f);
        std::fs::remove_file(dir.path().join("x-journal")).unwrap();
        let h = log.history();
        assert!(matches!(h.events[6], Event::Unlink { ref name } if name == "x-journal"));
        plan.stop_power_loss();
    }
}
