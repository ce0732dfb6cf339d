//! Routing: which operations of an io_uring file go through the ring and which by plain
//! syscall, and the rule that a batch with a single ring op left runs it as a syscall.
//! A file's routing is decided at open, in one place: `EngineKind::for_file` and
//! `EngineKind::for_filesystem` (engine.rs).

use crate::config::{Options, Submission};

use super::op::Op;

/// Which operations of the io_uring engine bypass the ring (see [`Submission`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Routing {
    pub(crate) syscall_reads: bool,
    pub(crate) syscall_writes: bool,
    /// Syncs (plain or linked) run by syscall after the batch's ring ops, one after the
    /// other, instead of together on the ring (where each runs on an io-wq worker): less
    /// CPU, no overlap (ARCHITECTURE.md, "What goes through the ring").
    pub(crate) syscall_syncs: bool,
    /// A batch left with a single ring op runs it as a syscall: one op alone cannot
    /// overlap with anything, so the ring only adds a worker hand-off.
    pub(crate) lone_op_by_syscall: bool,
    /// Use this thread's SQPOLL ring instead of its ordinary one (`uring_sqpoll`).
    pub(crate) sqpoll: bool,
}

impl Routing {
    pub(crate) const ALL_RING: Routing =
        Routing::new(Submission::Ring, Submission::Ring, Submission::Ring);
    pub(crate) const ALL_SYSCALL: Routing = Routing::new(
        Submission::Syscall,
        Submission::Syscall,
        Submission::Syscall,
    );

    /// What io_uring files of a VFS registered with `options` send through the ring
    /// unless their URI says otherwise.
    pub(crate) fn from_options(options: &Options) -> Routing {
        Routing::new(
            options.read_submission,
            options.write_submission,
            options.sync_submission,
        )
        .with_sqpoll(options.sqpoll)
    }

    /// `"reads":"…","writes":"…","syncs":"…","lone_ops":"…","sqpoll":"…"`, for
    /// `PRAGMA io_uring_stats`.
    pub(crate) fn to_json(self) -> String {
        format!(
            r#""reads":"{}","writes":"{}","syncs":"{}","lone_ops":"{}","sqpoll":"{}""#,
            self.reads().name(),
            self.writes().name(),
            self.syncs().name(),
            Routing::submission(self.lone_op_by_syscall).name(),
            if self.sqpoll { "on" } else { "off" }
        )
    }

    /// Routing for the given submissions; asking for everything on the ring means every
    /// op, lone ones included.
    pub(crate) const fn new(reads: Submission, writes: Submission, syncs: Submission) -> Routing {
        let syscall_reads = matches!(reads, Submission::Syscall);
        let syscall_writes = matches!(writes, Submission::Syscall);
        let syscall_syncs = matches!(syncs, Submission::Syscall);
        Routing {
            syscall_reads,
            syscall_writes,
            syscall_syncs,
            lone_op_by_syscall: syscall_reads || syscall_writes || syscall_syncs,
            sqpoll: false,
        }
    }

    /// The same routing on this thread's SQPOLL ring (`on`) or its ordinary ring.
    pub(crate) const fn with_sqpoll(self, on: bool) -> Routing {
        Routing { sqpoll: on, ..self }
    }

    fn submission(by_syscall: bool) -> Submission {
        if by_syscall {
            Submission::Syscall
        } else {
            Submission::Ring
        }
    }

    pub(crate) fn reads(self) -> Submission {
        Self::submission(self.syscall_reads)
    }

    pub(crate) fn writes(self) -> Submission {
        Self::submission(self.syscall_writes)
    }

    pub(crate) fn syncs(self) -> Submission {
        Self::submission(self.syscall_syncs)
    }

    /// Whether reads, writes and syncs all bypass the ring (the default for buffered
    /// files): only a batch of two or more truncates could still reach it.
    pub(crate) fn reads_writes_syncs_by_syscall(self) -> bool {
        self.syscall_reads && self.syscall_writes && self.syscall_syncs
    }

    /// Whether the whole batch goes by syscall: at most one op is left for the ring, and
    /// a lone ring op goes by syscall too.
    pub(crate) fn all_by_syscall(self, ops: &[Op]) -> bool {
        self.lone_op_by_syscall && ops.iter().filter(|op| !self.bypasses(op)).count() <= 1
    }

    pub(crate) fn bypasses(self, op: &Op) -> bool {
        match op {
            Op::Read { .. } => self.syscall_reads,
            Op::Write { .. } => self.syscall_writes,
            Op::Sync { .. } | Op::SyncAfterWrites { .. } => self.syscall_syncs,
            Op::Truncate { .. } => false,
            // Inside a batch that waits for every op, a prefetch is `posix_fadvise`: the
            // ring carries prefetches only without waiting (`EngineKind::prefetch`).
            Op::Prefetch { .. } => true,
        }
    }
}
