//! A fault-injecting engine for tests: wraps the io_uring or syscall engine and makes
//! chosen ops fail with an errno or complete short, so every error path of the
//! SQLite-facing code can be driven deterministically (TigerBeetle-style).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::{Backend, Submission};

use super::op::{Engine, Op, OpKind};
use super::routing::Routing;
use super::syscall::SyscallEngine;
use super::uring;

/// What happens to a matching op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The op fails with this errno (e.g. `libc::EIO`, `libc::ENOSPC`) and does nothing.
    Errno(i32),
    /// A read or write transfers at most this many bytes (a short completion).
    Short(u32),
    /// The engine panics while performing the op's batch: on the io_uring backend after
    /// handing the batch to the kernel and before reaping it, which must stop the process
    /// with a message (the kernel may still use the buffers SQLite would free on return);
    /// by syscall before performing it, with nothing in flight, so the panic surfaces to
    /// SQLite as an I/O error.
    PanicInFlight,
}

/// Which ops fail: the ops of `op` kind on files whose path ends with `path_suffix`
/// (any file when `None`), after skipping `skip` matches, for `count` matches.
#[derive(Clone, Debug)]
pub struct FaultRule {
    pub op: OpKind,
    pub path_suffix: Option<String>,
    pub skip: u64,
    pub count: u64,
    pub kind: FaultKind,
}

struct ActiveRule {
    rule: FaultRule,
    seen: u64,
    fired: u64,
}

/// One op a recording [`FaultPlan`] was handed: its kind, its file, and for reads and
/// writes the byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedOp {
    pub kind: OpKind,
    pub path: String,
    /// `(offset, length)` of a read or write.
    pub range: Option<(u64, u32)>,
}

/// A shared, mutable set of fault rules over a real engine.
pub struct FaultPlan {
    /// The engine underneath: io_uring with this routing, or plain syscalls (`None`).
    inner: Option<Routing>,
    rules: Mutex<Vec<ActiveRule>>,
    injected: AtomicU64,
    /// While recording: every op seen, in submission order (a test of which syscalls run
    /// in which order, as a trace of `unix` would show).
    recorded: Mutex<Option<Vec<RecordedOp>>>,
    /// Called with the file's path before each sync is performed (see
    /// [`FaultPlan::before_sync`]).
    sync_hook: Mutex<Option<SyncHook>>,
    /// The power-loss recorder, when a test attached one (`power_loss.rs`).
    pub(super) power_loss: super::power_loss::Slot,
}

type SyncHook = Arc<dyn Fn(&str) + Send + Sync>;

/// The path `fd` was opened with, as rules, recordings and hooks name files (empty if
/// /proc cannot say).
fn path_of(fd: std::os::fd::RawFd) -> String {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl FaultPlan {
    /// A plan with no rules over `backend` (it then behaves exactly like `backend`), with
    /// every read, write and sync of the io_uring backend on the ring.
    pub fn new(backend: Backend) -> Arc<FaultPlan> {
        let all_ring = [Submission::Ring; 3];
        FaultPlan::with_submissions(backend, all_ring)
    }

    /// As [`FaultPlan::new`], with the io_uring backend issuing reads, writes and syncs
    /// as `[reads, writes, syncs]` say (the `uring_reads/writes/syncs` routing), so the
    /// paths between ring and syscalls meet injected faults too.
    pub fn with_submissions(backend: Backend, submissions: [Submission; 3]) -> Arc<FaultPlan> {
        let [reads, writes, syncs] = submissions;
        Arc::new(FaultPlan {
            inner: match backend {
                Backend::IoUring => Some(Routing::new(reads, writes, syncs)),
                Backend::Syscall => None,
            },
            rules: Mutex::new(Vec::new()),
            injected: AtomicU64::new(0),
            recorded: Mutex::new(None),
            sync_hook: Mutex::new(None),
            power_loss: Default::default(),
        })
    }

    /// Starts recording every op from now on, dropping earlier ones.
    pub fn start_recording(&self) {
        *self.lock_recorded() = Some(Vec::new());
    }

    /// The ops recorded since [`FaultPlan::start_recording`], in submission order.
    pub fn recorded(&self) -> Vec<RecordedOp> {
        self.lock_recorded().clone().unwrap_or_default()
    }

    fn lock_recorded(&self) -> std::sync::MutexGuard<'_, Option<Vec<RecordedOp>>> {
        self.recorded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `hook` with the file's path before every sync from now on, on the syncing
    /// thread, so a test can hold a sync at the disk and see what other threads can do
    /// meanwhile.
    pub fn before_sync(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        *self
            .sync_hook
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::new(hook));
    }

    /// Starts recording, for power-loss crash states, what the engine hands the kernel for
    /// the files of `directory` (`io/power_loss.rs`). The directory should be empty or
    /// durable: files already there count as synced. Replaces an earlier recorder.
    pub fn record_power_loss(
        &self,
        directory: &std::path::Path,
    ) -> std::io::Result<Arc<super::power_loss::PowerLossLog>> {
        self.power_loss.start(directory)
    }

    /// Stops power-loss recording (the log keeps what it has).
    pub fn stop_power_loss(&self) {
        self.power_loss.stop();
    }

    pub fn add(&self, rule: FaultRule) {
        self.lock_rules().push(ActiveRule {
            rule,
            seen: 0,
            fired: 0,
        });
    }

    pub fn clear(&self) {
        self.lock_rules().clear();
    }

    /// How many faults have been injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// The routing of the io_uring engine underneath; `None` for plain syscalls.
    pub(crate) fn inner_routing(&self) -> Option<Routing> {
        self.inner
    }

    fn lock_rules(&self) -> std::sync::MutexGuard<'_, Vec<ActiveRule>> {
        // A panicking test thread must not disable fault injection for the others.
        self.rules
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn decide(&self, op: &Op<'_>) -> Option<FaultKind> {
        let fd = match *op {
            Op::Read { fd, .. }
            | Op::Write { fd, .. }
            | Op::Sync { fd, .. }
            | Op::SyncAfterWrites { fd, .. }
            | Op::Truncate { fd, .. }
            | Op::Prefetch { fd, .. } => fd,
        };
        let path = || path_of(fd);
        if let Some(recorded) = self.lock_recorded().as_mut() {
            let range = match *op {
                Op::Read { offset, .. } | Op::Write { offset, .. } => {
                    Some((offset, op.buffer_len()))
                }
                Op::Prefetch { len, offset, .. } => Some((offset, len)),
                Op::Sync { .. } | Op::SyncAfterWrites { .. } | Op::Truncate { .. } => None,
            };
            recorded.push(RecordedOp {
                kind: op.kind(),
                path: path(),
                range,
            });
        }
        let mut rules = self.lock_rules();
        if rules.is_empty() {
            return None;
        }
        let path = path();
        for active in rules.iter_mut() {
            let rule = &active.rule;
            if rule.op != op.kind()
                || !rule
                    .path_suffix
                    .as_ref()
                    .is_none_or(|suffix| path.ends_with(suffix.as_str()))
            {
                continue;
            }
            active.seen += 1;
            if active.seen > rule.skip && active.fired < rule.count {
                active.fired += 1;
                self.injected.fetch_add(1, Ordering::Relaxed);
                return Some(rule.kind);
            }
        }
        None
    }

    /// [`Engine::perform`] with the plan's faults: an op that fails is answered here, a
    /// short one goes on with a shorter buffer, the rest go to the wrapped engine.
    pub(crate) fn perform(&self, ops: &mut [Op<'_>], results: &mut [i32]) -> Result<u64, i32> {
        // Test-only engine: allocating here is fine. First what happens to each op, then
        // the ops to forward, each borrowing its buffer from `ops` (shortened if short).
        let mut forward: Vec<Option<u32>> = vec![None; ops.len()];
        let mut faulted = vec![false; ops.len()];
        let sync_hook = self
            .sync_hook
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let power_loss = self.power_loss.active();
        let mut panic_in_flight = false;
        for (index, op) in ops.iter().enumerate() {
            if power_loss.as_ref().is_some_and(|log| log.defers(index, op)) {
                results[index] = 0;
                continue;
            }
            if let (Some(hook), Op::Sync { fd, .. } | Op::SyncAfterWrites { fd, .. }) =
                (&sync_hook, op)
            {
                hook(&path_of(*fd));
            }
            let decision = self.decide(op);
            if decision == Some(FaultKind::PanicInFlight) {
                panic_in_flight = true;
                forward[index] = Some(u32::MAX);
                continue;
            }
            faulted[index] = decision.is_some();
            if let Op::SyncAfterWrites { fd, .. } = *op {
                // A fault in the chain cancels the sync, as a failed link does on io_uring.
                let chain_faulted = ops[..index]
                    .iter()
                    .zip(&faulted)
                    .rev()
                    .take_while(
                        |(op, _)| matches!(op, Op::Write { fd: write_fd, .. } if *write_fd == fd),
                    )
                    .any(|(_, &fault)| fault);
                if chain_faulted {
                    results[index] = -libc::ECANCELED;
                    continue;
                }
            }
            match (decision, op) {
                (Some(FaultKind::Errno(errno)), _) => results[index] = -errno,
                (Some(FaultKind::Short(max)), Op::Read { .. } | Op::Write { .. }) => {
                    forward[index] = Some(max);
                }
                _ => forward[index] = Some(u32::MAX),
            }
        }
        let mut forwarded: Vec<Op<'_>> = Vec::with_capacity(ops.len());
        let mut forwarded_index = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter_mut().enumerate() {
            let Some(max) = forward[index] else {
                continue;
            };
            forwarded.push(match op {
                Op::Read { fd, buf, offset } => {
                    let len = (max as usize).min(buf.len());
                    Op::Read {
                        fd: *fd,
                        buf: &mut buf[..len],
                        offset: *offset,
                    }
                }
                Op::Write { fd, buf, offset } => Op::Write {
                    fd: *fd,
                    buf: &buf[..(max as usize).min(buf.len())],
                    offset: *offset,
                },
                other => other.reborrow(),
            });
            forwarded_index.push(index);
        }
        let mut forwarded_results = vec![0i32; forwarded.len()];
        let entries = match (self.inner, panic_in_flight) {
            (Some(routing), false) => {
                uring::perform_routed(routing, &mut forwarded, &mut forwarded_results)
            }
            (Some(routing), true) => uring::perform_on_ring_and_panic_in_flight(
                routing.sqpoll,
                &mut forwarded,
                &mut forwarded_results,
            ),
            (None, false) => SyscallEngine.perform(&mut forwarded, &mut forwarded_results),
            (None, true) => {
                panic!("injected panic before a syscall batch (FaultKind::PanicInFlight)")
            }
        }?;
        drop(forwarded);
        for (index, result) in forwarded_index.into_iter().zip(forwarded_results) {
            results[index] = result;
        }
        if let Some(log) = power_loss {
            log.record_batch(ops, results);
        }
        Ok(entries)
    }
}
