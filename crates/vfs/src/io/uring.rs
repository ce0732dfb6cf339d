//! The io_uring backend. This is the only file that touches a ring.
//!
//! One ring per thread (`thread_local!`), created on first use. A ring is driven only by
//! the thread that owns it, which is what lets us ask for `IORING_SETUP_SINGLE_ISSUER` and
//! `IORING_SETUP_DEFER_TASKRUN` (completion work runs in our own `io_uring_enter`, not in
//! interrupts or extra task wakeups; see io_uring_setup(2)).
//!
//! Files opened with `uring_sqpoll=on` use a second ring of the thread, created with
//! `IORING_SETUP_SQPOLL`: a kernel thread picks submissions up from shared memory, so
//! submitting needs no system call while it is awake (it sleeps after `SQPOLL_IDLE_MS`
//! without work and is woken by `io_uring_enter(SQ_WAKEUP)`), and completions are awaited
//! by spinning on the completion queue for up to `SQPOLL_SPIN` before falling back to
//! `io_uring_enter(GETEVENTS)`. DEFER_TASKRUN cannot be combined with SQPOLL.
//!
//! Every `perform` submits its whole batch, waits for every completion, and returns with
//! none of its ops in flight: see the buffer-lifetime rule in `op.rs`. The one exception
//! is read-ahead's prefetch reads ([`prefetch_on_thread_ring`]), which carry no caller's
//! buffer (they land in a sink that is never freed) and are reaped whenever the ring is
//! next used.

use std::cell::RefCell;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

use crate::sys::{last_errno, AlignedBuffer};

use super::diagnose::{
    explain_setup_failure, kernel_release, ProbeReport, RingCompletion, RingPlacement,
};
use super::fixed::{buffer_registration_switched_off, fixed_region, FixedRegion};
use super::op::{batch_array, Engine, Op, MAX_BATCH};
use super::record;
use super::routing::Routing;
use super::syscall::{chain_completed, SyscallEngine};
use crate::sys::fork::fork_generation;

/// Submission-queue entries per ring. SQLite rarely has more than a few ops ready at
/// once; bigger batches are split, never dropped.
const RING_ENTRIES: u32 = 128;

/// How long an SQPOLL ring's poller thread keeps polling without work before it sleeps.
const SQPOLL_IDLE_MS: u32 = 50;
/// How long a waiter on an SQPOLL ring spins on the completion queue before it enters the
/// kernel to sleep: longer than a commit's fsync on a fast disk, so a commit's batch
/// usually completes within the spin (docs/DESIGN.md, "SQPOLL is opt-in").
const SQPOLL_SPIN: std::time::Duration = std::time::Duration::from_micros(500);

/// Consecutive EINTR/EAGAIN/EBUSY answers from `io_uring_enter` tolerated before the
/// batch is treated as failed.
const ENTER_RETRY_LIMIT: u32 = 1000;

/// Environment switch that makes ring creation fail as if `io_uring_setup` had returned
/// the named errno (`EPERM`, `ENOSYS`, `ENOMEM`). It exists so tests and users can see the
/// "io_uring unavailable" path on a machine where io_uring works.
pub(crate) const SIMULATE_UNAVAILABLE_ENV: &str = "SQLITE_URING_SIMULATE_UNAVAILABLE";

pub(crate) struct Ring {
    ring: IoUring,
    has_ftruncate: bool,
    /// `FORK_GENERATION` when the ring was created (see [`fork_generation`]).
    generation: u64,
    /// Created with IORING_SETUP_SQPOLL.
    sqpoll: bool,
    fixed_buffers: FixedBuffers,
    /// Writes this ring issued as IORING_OP_WRITE_FIXED (tests read it).
    #[cfg(feature = "test-support")]
    fixed_writes: u64,
    /// Fsyncs this ring issued linked behind writes in the same submission (tests read
    /// it).
    #[cfg(feature = "test-support")]
    linked_syncs: u64,
    /// Prefetch reads submitted and not yet reaped ([`Ring::submit_prefetch`]).
    prefetches_in_flight: u32,
}

/// `IORING_ENTER_GETEVENTS` of `<linux/io_uring.h>`.
const IORING_ENTER_GETEVENTS: u32 = 1;

/// `user_data` of a prefetch read: no batch op index has this bit.
const PREFETCH_TAG: u64 = 1 << 63;
/// Most prefetch reads a ring has in flight; more are not submitted (the completion queue
/// holds twice `RING_ENTRIES`, so this never overflows it together with a full batch).
const MAX_PREFETCHES_IN_FLIGHT: u32 = RING_ENTRIES;
/// Bytes of the prefetch sink (a prefetch read lands one byte of its page there).
const PREFETCH_SINK_BYTES: usize = 64 << 10;
/// The kernel page one prefetch read brings into the page cache.
const PREFETCH_PAGE_BYTES: u32 = 4096;

/// Where prefetch reads land: one allocation for the whole process, made on first use and
/// never freed, never read by this program. A prefetch read is a buffered read whose only
/// purpose is the page cache it fills; the kernel copies the data into the sink at some
/// point after submission (in this thread's `io_uring_enter`, with DEFER_TASKRUN), with no
/// caller waiting. Because the sink outlives every ring and no Rust reference to it exists,
/// a read may complete after its ring, its thread or its file is gone, and reads may
/// overwrite one another: nothing observes the bytes.
fn prefetch_sink() -> *mut u8 {
    static SINK: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SINK.get_or_init(|| {
        Box::leak(vec![0u8; PREFETCH_SINK_BYTES].into_boxed_slice()).as_mut_ptr() as usize
    }) as *mut u8
}

/// Submits `ops` (all `Op::Prefetch`) as reads into the page cache on this thread's ring
/// (its SQPOLL ring with `sqpoll`), without waiting for them; returns the kernel entries
/// made. See [`Ring::submit_prefetch`].
pub(crate) fn prefetch_on_thread_ring(ops: &[Op]) -> Result<u64, i32> {
    // Always the ordinary ring: an SQPOLL ring's poller may sleep with entries queued
    // until it is woken, after the file (and its descriptor number) is gone.
    with_thread_ring(false, |ring| ring.submit_prefetch(ops))
}

/// Waits for this thread's prefetch reads in flight, if it has a ring: called before a
/// descriptor they may read through is closed, so no request keeps its open file
/// description (and a deleted file's blocks) alive after the close.
pub(crate) fn wait_for_thread_prefetches() {
    THREAD_RINGS.with(|slots| {
        if let Ok(mut slot) = slots[0].try_borrow_mut() {
            if let Slot::Ready(ring) = &mut *slot {
                if ring.generation == fork_generation() {
                    ring.wait_for_prefetches();
                }
            }
        }
    });
}

/// Which slots of the write-behind arena region (`io::fixed_region`) this ring has
/// registered, as the buffers of the same index in a sparse table, so writes from them
/// skip the per-I/O page pinning (IORING_OP_WRITE_FIXED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FixedBuffers {
    /// Not tried yet: the region may not exist yet.
    NotYet,
    /// A sparse table of `region.slots` buffers: bit `i` of `registered` set when slot
    /// `i` is registered, of `refused` when the kernel refused it (RLIMIT_MEMLOCK: each
    /// registered slot pins its pages for this ring).
    Sparse {
        region: FixedRegion,
        registered: u64,
        refused: u64,
    },
    /// Switched off, or the kernel refused the table (old kernel): plain writes.
    Unavailable,
}

impl FixedBuffers {
    /// The registered buffer that holds all `len` bytes at `buf`, if any.
    fn buffer_of(self, buf: *const u8, len: u32) -> Option<u16> {
        match self {
            FixedBuffers::Sparse {
                region, registered, ..
            } => region
                .slot_of(buf, len as usize)
                .filter(|&slot| registered & (1 << slot) != 0)
                .map(|slot| slot as u16),
            FixedBuffers::NotYet | FixedBuffers::Unavailable => None,
        }
    }
}

enum Slot {
    Uninit,
    Ready(Box<Ring>),
    Failed(String, i32),
}

thread_local! {
    /// This thread's ordinary ring and its SQPOLL ring (index `sqpoll as usize`).
    static THREAD_RINGS: [RefCell<Slot>; 2] =
        const { [RefCell::new(Slot::Uninit), RefCell::new(Slot::Uninit)] };
}

/// Creates this thread's ring (its SQPOLL ring with `sqpoll`) if needed; the error names
/// the cause and the remedy.
fn ensure_thread_ring(sqpoll: bool) -> Result<(), String> {
    THREAD_RINGS.with(|slots| {
        let mut slot = slots[sqpoll as usize].borrow_mut();
        init_slot(&mut slot, sqpoll);
        match &*slot {
            Slot::Ready(_) => Ok(()),
            Slot::Failed(reason, _) => Err(reason.clone()),
            Slot::Uninit => unreachable!("init_slot leaves the slot initialised"),
        }
    })
}

/// Checks that a file with `routing` can run on this thread: its ring (or, when its
/// reads, writes and syncs all go by syscall and it never submits, only that this process
/// can make rings at all: such a file does not make its thread set one up).
pub(crate) fn ensure_available(routing: Routing) -> Result<(), String> {
    if routing.reads_writes_syncs_by_syscall() && !routing.sqpoll {
        ensure_process_can_make_rings()
    } else {
        ensure_thread_ring(routing.sqpoll)
    }
}

/// Performs a batch with `routing`: by syscall from this thread when the routing leaves
/// at most one op for the ring (the common case, a lone read or write, then never looks
/// up the thread's ring: a thread-local lookup per xRead is measurable next to a
/// page-cache pread), otherwise on the thread's ring with the syscall-routed ops around it.
pub(crate) fn perform_routed(
    routing: Routing,
    ops: &mut [Op<'_>],
    results: &mut [i32],
) -> Result<u64, i32> {
    // A replaced read/write/sync call must see every op: the ring would bypass it.
    if routing.all_by_syscall(ops) || crate::sys::calls::io_replaced() {
        return SyscallEngine.perform(ops, results);
    }
    with_thread_ring(routing.sqpoll, |ring| {
        ring.perform_with(ops, results, routing)
    })
}

/// Performs every op on this thread's ring (its SQPOLL ring with `sqpoll`), and panics
/// once the kernel holds them, before reaping them: `FaultKind::PanicInFlight`. The
/// panic aborts the process (`AbortOnUnwind`): it never returns to the buffers' owner.
#[cfg(feature = "test-support")]
pub(crate) fn perform_on_ring_and_panic_in_flight(
    sqpoll: bool,
    ops: &mut [Op<'_>],
    results: &mut [i32],
) -> Result<u64, i32> {
    with_thread_ring(sqpoll, |ring| {
        ring.perform_on_ring_or_panic::<true>(ops, results)
    })
}

/// Whether the calling thread has set up its ordinary ring.
pub(crate) fn thread_has_ring() -> bool {
    THREAD_RINGS.with(|slots| matches!(&*slots[0].borrow(), Slot::Ready(_)))
}

/// Whether this process can make rings at all, for files whose routing never submits:
/// found out once, with a throwaway ring (or this thread's, if it has one already), so
/// that a thread that only opens such files (a thread per request) does not set up and
/// tear down a ring it never uses (docs/DESIGN.md, "No ring for a thread that does not
/// submit"). A failure is not remembered: the next open asks again.
fn ensure_process_can_make_rings() -> Result<(), String> {
    static CAN_MAKE_RINGS: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);
    if CAN_MAKE_RINGS.load(std::sync::atomic::Ordering::Relaxed) || thread_has_ring() {
        return Ok(());
    }
    match Ring::new(false) {
        Ok(throwaway) => drop(throwaway),
        Err(errno) => return Err(explain_setup_failure(errno)),
    }
    CAN_MAKE_RINGS.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

fn init_slot(slot: &mut Slot, sqpoll: bool) {
    if let Slot::Ready(ring) = slot {
        if ring.generation != fork_generation() {
            // Inherited from the parent across fork(): never submit on it, and do not
            // tear it down either (io_uring teardown in a child is not worth reasoning
            // about for a few pages of leaked mapping).
            let Slot::Ready(inherited) = std::mem::replace(slot, Slot::Uninit) else {
                unreachable!("matched above")
            };
            std::mem::forget(inherited);
        }
    }
    if matches!(slot, Slot::Uninit) {
        *slot = match Ring::new(sqpoll) {
            Ok(ring) => Slot::Ready(Box::new(ring)),
            Err(errno) if sqpoll => Slot::Failed(explain_sqpoll_failure(errno), errno),
            Err(errno) => Slot::Failed(explain_setup_failure(errno), errno),
        };
    }
}

/// Runs `f` with this thread's ring (its SQPOLL ring with `sqpoll`); `Err(errno)` when the
/// ring cannot be created.
fn with_thread_ring<T>(
    sqpoll: bool,
    f: impl FnOnce(&mut Ring) -> Result<T, i32>,
) -> Result<T, i32> {
    THREAD_RINGS.with(|slots| {
        let mut slot = slots[sqpoll as usize].borrow_mut();
        init_slot(&mut slot, sqpoll);
        match &mut *slot {
            Slot::Ready(ring) => {
                let result = f(ring);
                if result.is_err() {
                    // A failed batch left nothing in flight (see `perform`); a fresh ring
                    // next time is cheaper than reasoning about this one's state.
                    *slot = Slot::Uninit;
                }
                result
            }
            Slot::Failed(_, errno) => Err(*errno),
            Slot::Uninit => unreachable!("init_slot leaves the slot initialised"),
        }
    })
}

/// A counter summed over this thread's rings.
#[cfg(feature = "test-support")]
fn thread_rings_sum(counter: fn(&Ring) -> u64) -> u64 {
    THREAD_RINGS.with(|slots| {
        slots
            .iter()
            .map(|slot| match &*slot.borrow() {
                Slot::Ready(ring) => counter(ring),
                Slot::Uninit | Slot::Failed(..) => 0,
            })
            .sum()
    })
}

/// Writes this thread's rings issued from their registered buffer.
#[cfg(feature = "test-support")]
pub(crate) fn thread_ring_fixed_writes() -> u64 {
    thread_rings_sum(|ring| ring.fixed_writes)
}

/// Fsyncs this thread's rings issued linked behind their writes.
#[cfg(feature = "test-support")]
pub(crate) fn thread_ring_linked_syncs() -> u64 {
    thread_rings_sum(|ring| ring.linked_syncs)
}

fn simulated_setup_errno() -> Option<i32> {
    let name = std::env::var(SIMULATE_UNAVAILABLE_ENV).ok()?;
    Some(match name.as_str() {
        "ENOSYS" => libc::ENOSYS,
        "ENOMEM" => libc::ENOMEM,
        _ => libc::EPERM,
    })
}

fn build_ring(single_issuer: bool, coop_taskrun: bool) -> std::io::Result<IoUring> {
    let mut builder = IoUring::builder();
    if single_issuer {
        builder.setup_single_issuer().setup_defer_taskrun();
    } else if coop_taskrun {
        builder.setup_coop_taskrun();
    }
    builder.build(RING_ENTRIES)
}

fn build_sqpoll_ring(single_issuer: bool) -> std::io::Result<IoUring> {
    let mut builder = IoUring::builder();
    builder.setup_sqpoll(SQPOLL_IDLE_MS);
    if single_issuer {
        // With SQPOLL the poller thread is the single issuer (io_uring_setup(2)).
        builder.setup_single_issuer();
    }
    builder.build(RING_ENTRIES)
}

fn explain_sqpoll_failure(errno: i32) -> String {
    let cause = match errno {
        libc::EPERM => {
            "SQPOLL needs CAP_SYS_ADMIN before Linux 5.11, or a seccomp profile refused it"
        }
        libc::EINVAL => "this kernel does not support IORING_SETUP_SQPOLL with these flags",
        _ => "the kernel refused it",
    };
    format!(
        "io_uring_setup with IORING_SETUP_SQPOLL failed with errno {errno} ({}): {cause}. \
         Remedy: drop `uring_sqpoll=on` (the ordinary ring needs no privilege).",
        std::io::Error::from_raw_os_error(errno)
    )
}

/// The sync op at `index` as a plain, unlinked `Sync`, for running apart from the writes
/// before it: a `SyncAfterWrites` whose writes did not all complete (their `results` are
/// final) is cancelled instead, as a broken link would be, and `None` returned.
fn unlinked_sync(ops: &[Op<'_>], results: &mut [i32], index: usize) -> Option<Op<'static>> {
    match ops[index] {
        Op::SyncAfterWrites { fd, data_only } => {
            if chain_completed(ops, &results[..index], index, fd) {
                Some(Op::Sync { fd, data_only })
            } else {
                results[index] = -libc::ECANCELED;
                None
            }
        }
        Op::Sync { fd, data_only } => Some(Op::Sync { fd, data_only }),
        ref other => unreachable!("not a sync: {other:?}"),
    }
}

impl Ring {
    fn new(sqpoll: bool) -> Result<Ring, i32> {
        if let Some(errno) = simulated_setup_errno() {
            return Err(errno);
        }
        // Newest flags first; older kernels reject unknown setup flags with EINVAL.
        let ring = if sqpoll {
            build_sqpoll_ring(true).or_else(|_| build_sqpoll_ring(false))
        } else {
            build_ring(true, false)
                .or_else(|_| build_ring(false, true))
                .or_else(|_| build_ring(false, false))
        }
        .map_err(|error| error.raw_os_error().unwrap_or(libc::EIO))?;
        let mut probe = io_uring::Probe::new();
        let has_ftruncate = ring.submitter().register_probe(&mut probe).is_ok()
            && probe.is_supported(opcode::Ftruncate::CODE);
        let ring = Ring {
            ring,
            has_ftruncate,
            generation: fork_generation(),
            sqpoll,
            fixed_buffers: FixedBuffers::NotYet,
            #[cfg(feature = "test-support")]
            fixed_writes: 0,
            #[cfg(feature = "test-support")]
            linked_syncs: 0,
            prefetches_in_flight: 0,
        };
        // A registered ring fd saves an fdget/fdput per io_uring_enter (Linux 5.18+);
        // without it everything still works.
        let _ = ring.ring.submitter().register_ring_fd();
        Ok(ring)
    }

    /// Registers the arena slots `ops` write from that this ring has not registered yet
    /// (after setting up the sparse table, the first time the region is published).
    fn register_fixed_buffers(&mut self, ops: &[Op<'_>]) {
        if self.fixed_buffers == FixedBuffers::NotYet {
            let Some(region) = fixed_region() else {
                if buffer_registration_switched_off() {
                    self.fixed_buffers = FixedBuffers::Unavailable;
                }
                return;
            };
            self.fixed_buffers = match self
                .ring
                .submitter()
                .register_buffers_sparse(region.slots as u32)
            {
                Ok(()) => FixedBuffers::Sparse {
                    region,
                    registered: 0,
                    refused: 0,
                },
                // EINVAL: a kernel without sparse tables (before 5.13). Plain writes are
                // correct, only slower per I/O.
                Err(_) => FixedBuffers::Unavailable,
            };
        }
        let FixedBuffers::Sparse {
            region,
            mut registered,
            mut refused,
        } = self.fixed_buffers
        else {
            return;
        };
        for op in ops {
            let Op::Write { buf, .. } = op else {
                continue;
            };
            let Some(slot) = region.slot_of(buf.as_ptr(), buf.len()) else {
                continue;
            };
            let bit = 1u64 << slot;
            if (registered | refused) & bit != 0 {
                continue;
            }
            let iovec = libc::iovec {
                iov_base: region.slot_start(slot) as *mut libc::c_void,
                iov_len: region.slot_bytes,
            };
            // SAFETY: the region is never freed or moved while the process runs (the
            // registered-buffer rule in io/fixed.rs: `publish_fixed_region` takes only a
            // `&'static` region), so the slot outlives this ring's registration.
            match unsafe {
                self.ring
                    .submitter()
                    .register_buffers_update(slot as u32, &[iovec], None)
            } {
                Ok(()) => registered |= bit,
                // ENOMEM: RLIMIT_MEMLOCK. Plain writes from this slot.
                Err(_) => refused |= bit,
            }
        }
        self.fixed_buffers = FixedBuffers::Sparse {
            region,
            registered,
            refused,
        };
    }

    /// The entry for `op`: its buffer's address and length, taken from the op's borrow
    /// (`&mut` for a read, which the kernel writes through).
    fn entry_for(&mut self, op: &mut Op<'_>) -> io_uring::squeue::Entry {
        let len = op.buffer_len();
        match *op {
            Op::Write { fd, buf, offset }
                if self.fixed_buffers.buffer_of(buf.as_ptr(), len).is_some() =>
            {
                #[cfg(feature = "test-support")]
                {
                    self.fixed_writes += 1;
                }
                let index = self
                    .fixed_buffers
                    .buffer_of(buf.as_ptr(), len)
                    .unwrap_or_default();
                opcode::WriteFixed::new(types::Fd(fd), buf.as_ptr(), len, index)
                    .offset(offset)
                    .build()
            }
            Op::Read {
                fd,
                ref mut buf,
                offset,
            } => opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), len)
                .offset(offset)
                .build(),
            Op::Write { fd, buf, offset } => opcode::Write::new(types::Fd(fd), buf.as_ptr(), len)
                .offset(offset)
                .build(),
            Op::Sync { fd, data_only } | Op::SyncAfterWrites { fd, data_only } => {
                let flags = if data_only {
                    types::FsyncFlags::DATASYNC
                } else {
                    types::FsyncFlags::empty()
                };
                opcode::Fsync::new(types::Fd(fd)).flags(flags).build()
            }
            Op::Truncate { fd, len } => opcode::Ftruncate::new(types::Fd(fd), len).build(),
            Op::Prefetch { fd, offset, len } => opcode::Read::new(
                types::Fd(fd),
                prefetch_sink(),
                len.min(PREFETCH_SINK_BYTES as u32),
            )
            .offset(offset)
            .build(),
        }
    }

    /// SQPOLL ring: hands the queued entries to the poller thread (a system call only to
    /// wake it), spins until `want` completions are there or `SQPOLL_SPIN` has passed,
    /// then sleeps in `io_uring_enter(GETEVENTS)`. Returns the kernel entries made (0–2).
    fn submit_and_spin(&mut self, want: usize) -> std::io::Result<u64> {
        let wakes_poller = self.ring.submission().need_wakeup() as u64;
        self.ring.submit()?;
        let deadline = std::time::Instant::now() + SQPOLL_SPIN;
        while std::time::Instant::now() < deadline {
            if self.ring.completion().len() >= want {
                return Ok(wakes_poller);
            }
            std::hint::spin_loop();
        }
        self.ring.submit_and_wait(want)?;
        Ok(wakes_poller + 1)
    }

    /// Submits `ops` (all `Op::Prefetch`) as buffered reads into the prefetch sink and
    /// returns without waiting for them: on a filesystem with asynchronous buffered reads
    /// (ext4, XFS, btrfs) the kernel starts each device read from this thread and fills
    /// the page cache when it completes, with no worker thread. Completions are reaped
    /// here and by later batches ([`Ring::reap_prefetches`]). A range longer than the sink
    /// is read in pieces; ops beyond `MAX_PREFETCHES_IN_FLIGHT` are dropped (a prefetch
    /// only changes speed). Returns the kernel entries made (one).
    fn submit_prefetch(&mut self, ops: &[Op<'_>]) -> Result<u64, i32> {
        let mut kernel_entries = 0;
        self.reap_prefetches();
        if self.prefetches_in_flight >= MAX_PREFETCHES_IN_FLIGHT {
            // With DEFER_TASKRUN, finished reads are posted only inside a GETEVENTS enter.
            kernel_entries += self.enter_for_prefetch(0, 0)?;
            self.reap_prefetches();
        }
        let mut queued = 0u32;
        for op in ops {
            let Op::Prefetch { fd, offset, len } = *op else {
                unreachable!("only prefetches are submitted without waiting: {op:?}")
            };
            // One read of one byte per page of the range: the kernel reads the whole page
            // into its cache (the descriptor reads exactly what is asked, page by page)
            // and copies one byte to the sink instead of the page.
            let mut done = 0u32;
            while done < len && self.prefetches_in_flight < MAX_PREFETCHES_IN_FLIGHT {
                let entry = self
                    .entry_for(&mut Op::Prefetch {
                        fd,
                        offset: offset + u64::from(done),
                        len: 1,
                    })
                    .user_data(PREFETCH_TAG);
                if self.ring.submission().is_full() {
                    let to_submit = self.ring.submission().len() as u32;
                    kernel_entries += self.enter_for_prefetch(to_submit, 0)?;
                    self.reap_prefetches();
                }
                // SAFETY: the entry names the prefetch sink, which is never freed (see
                // `prefetch_sink`), and a file the kernel takes a reference to at
                // submission.
                if unsafe { self.ring.submission().push(&entry) }.is_err() {
                    break;
                }
                self.prefetches_in_flight += 1;
                queued += 1;
                done = done.saturating_add(PREFETCH_PAGE_BYTES);
            }
        }
        if queued == 0 {
            return Ok(kernel_entries);
        }
        let to_submit = self.ring.submission().len() as u32;
        kernel_entries += self.enter_for_prefetch(to_submit, 0)?;
        self.reap_prefetches();
        Ok(kernel_entries)
    }

    /// `io_uring_enter(to_submit, min_complete, GETEVENTS)` for prefetches: GETEVENTS runs
    /// the deferred completion work of earlier reads, so their completions can be reaped.
    /// Retried on EINTR/EAGAIN/EBUSY; on any other failure the entries still queued are
    /// forgotten and the caller drops the ring (they name only the sink).
    fn enter_for_prefetch(&mut self, to_submit: u32, min_complete: u32) -> Result<u64, i32> {
        let mut entries = 0u64;
        loop {
            // SAFETY: no argument pointer; queued entries name only the prefetch sink.
            let entered = unsafe {
                self.ring.submitter().enter::<libc::sigset_t>(
                    to_submit,
                    min_complete,
                    IORING_ENTER_GETEVENTS,
                    None,
                )
            };
            entries += 1;
            match entered {
                Ok(_) => return Ok(entries),
                Err(error) => {
                    let errno = error.raw_os_error().unwrap_or(libc::EIO);
                    if matches!(errno, libc::EINTR | libc::EAGAIN | libc::EBUSY)
                        && entries < u64::from(ENTER_RETRY_LIMIT)
                    {
                        continue;
                    }
                    let still_queued = self.ring.submission().len() as u32;
                    self.prefetches_in_flight =
                        self.prefetches_in_flight.saturating_sub(still_queued);
                    return Err(errno);
                }
            }
        }
    }

    /// Waits until every prefetch read of this ring has completed, and reaps them.
    fn wait_for_prefetches(&mut self) {
        self.reap_prefetches();
        while self.prefetches_in_flight > 0 {
            let want = self.prefetches_in_flight;
            if self.enter_for_prefetch(0, want).is_err() {
                return;
            }
            self.reap_prefetches();
        }
    }

    /// Reaps the completions of finished prefetch reads; any other completion here is a
    /// broken invariant (every batch reaps its own before returning).
    fn reap_prefetches(&mut self) {
        for completion in self.ring.completion() {
            if completion.user_data() != PREFETCH_TAG || self.prefetches_in_flight == 0 {
                fatal("ring completion for an op no batch is waiting for");
            }
            self.prefetches_in_flight -= 1;
        }
    }

    fn truncate_by_syscall(fd: RawFd, len: u64) -> i32 {
        if crate::sys::calls::ftruncate(fd, len as i64) == 0 {
            0
        } else {
            -crate::sys::last_errno()
        }
    }
}

impl Engine for Ring {
    fn perform(&mut self, ops: &mut [Op<'_>], results: &mut [i32]) -> Result<u64, i32> {
        self.perform_with(ops, results, Routing::ALL_RING)
    }
}

impl Ring {
    /// [`Engine::perform`], with the reads and/or writes `routing` names issued first by
    /// syscall from this thread (see `Submission`), everything else through the ring, and
    /// syncs routed to syscalls last, after the ring ops. A `SyncAfterWrites` whose writes
    /// did not go to the ring with it runs as a plain sync when they all completed, and is
    /// cancelled otherwise, as a broken link would be.
    pub(crate) fn perform_with(
        &mut self,
        ops: &mut [Op<'_>],
        results: &mut [i32],
        routing: Routing,
    ) -> Result<u64, i32> {
        let ring_ops = ops.iter().filter(|op| !routing.bypasses(op)).count();
        if routing.all_by_syscall(ops) {
            return SyscallEngine.perform(ops, results);
        }
        if ring_ops == ops.len() {
            return self.perform_on_ring(ops, results);
        }
        let mut kernel_entries = 0u64;
        // The ring's part: which ops, in order, and for a `SyncAfterWrites` the plain sync
        // that stands in for it.
        let mut rest_index = [0usize; MAX_BATCH];
        let mut stand_ins: [Option<Op<'static>>; MAX_BATCH] = std::array::from_fn(|_| None);
        let mut rest_count = 0usize;
        // Syncs routed to syscalls run last, after the ring ops they may depend on.
        let mut deferred_syncs = [0usize; MAX_BATCH];
        let mut deferred_count = 0usize;
        for index in 0..ops.len() {
            let bypasses = routing.bypasses(&ops[index]);
            let stand_in = match ops[index] {
                Op::Sync { .. } | Op::SyncAfterWrites { .. } if bypasses => {
                    deferred_syncs[deferred_count] = index;
                    deferred_count += 1;
                    continue;
                }
                _ if bypasses => {
                    let mut one = [0i32];
                    SyscallEngine.perform(&mut ops[index..index + 1], &mut one)?;
                    results[index] = one[0];
                    kernel_entries += 1;
                    continue;
                }
                Op::SyncAfterWrites { .. } => match unlinked_sync(ops, results, index) {
                    Some(sync) => Some(sync),
                    None => continue,
                },
                _ => None,
            };
            assert!(rest_count < MAX_BATCH, "batches are at most MAX_BATCH ops");
            rest_index[rest_count] = index;
            stand_ins[rest_count] = stand_in;
            rest_count += 1;
        }
        if rest_count > 0 {
            // Each op of the ring's part borrows its buffer from `ops` until it is reaped.
            let mut rest = batch_array::<MAX_BATCH>(-1);
            let mut slot = 0;
            for (index, op) in ops.iter_mut().enumerate() {
                if slot < rest_count && rest_index[slot] == index {
                    rest[slot] = stand_ins[slot].take().unwrap_or_else(|| op.reborrow());
                    slot += 1;
                }
            }
            let mut rest_results = [0i32; MAX_BATCH];
            kernel_entries +=
                self.perform_on_ring(&mut rest[..rest_count], &mut rest_results[..rest_count])?;
            for (slot, &index) in rest_index[..rest_count].iter().enumerate() {
                results[index] = rest_results[slot];
            }
        }
        for &index in &deferred_syncs[..deferred_count] {
            let Some(mut sync) = unlinked_sync(ops, results, index) else {
                continue;
            };
            let mut one = [0i32];
            SyscallEngine.perform(std::slice::from_mut(&mut sync), &mut one)?;
            results[index] = one[0];
            kernel_entries += 1;
        }
        Ok(kernel_entries)
    }

    /// Submits every op to the ring and reaps every completion.
    fn perform_on_ring(&mut self, ops: &mut [Op<'_>], results: &mut [i32]) -> Result<u64, i32> {
        self.perform_on_ring_or_panic::<false>(ops, results)
    }

    /// [`Ring::perform_on_ring`]; with `PANIC_IN_FLIGHT` (only instantiated for
    /// `FaultKind::PanicInFlight`, so the ordinary engine carries no trace of it), it
    /// hands the first ops to the kernel and panics before reaping them (which aborts:
    /// `AbortOnUnwind`).
    ///
    /// The buffer-lifetime rule is kept here: the ops' buffers are borrowed (`&mut`) for
    /// this whole call, and it returns only once every completion of the batch is reaped;
    /// a panic or a failed `io_uring_enter` while the kernel may hold a buffer aborts the
    /// process instead of returning.
    fn perform_on_ring_or_panic<const PANIC_IN_FLIGHT: bool>(
        &mut self,
        ops: &mut [Op<'_>],
        results: &mut [i32],
    ) -> Result<u64, i32> {
        // Only prefetch reads may still be in flight between batches.
        self.reap_prefetches();
        // Writes directly before a SyncAfterWrites on the same fd are linked to it, so the
        // sync starts after they complete (and is cancelled if one fails). A chain must
        // reach the kernel in one submission: batches with chains fit the ring whole.
        let mut linked = [false; MAX_BATCH];
        let has_chain = ops
            .iter()
            .any(|op| matches!(op, Op::SyncAfterWrites { .. }));
        if has_chain {
            assert!(ops.len() <= MAX_BATCH && MAX_BATCH <= RING_ENTRIES as usize);
            for (index, op) in ops.iter().enumerate() {
                if let Op::SyncAfterWrites { fd, .. } = *op {
                    for earlier in (0..index).rev() {
                        match ops[earlier] {
                            Op::Write { fd: write_fd, .. } if write_fd == fd => {
                                linked[earlier] = true
                            }
                            _ => break,
                        }
                    }
                }
            }
        }
        if ops.iter().any(|op| matches!(op, Op::Write { .. })) {
            self.register_fixed_buffers(ops);
        }
        // From the first push on, the kernel may hold the ops' buffers until their
        // completions are reaped: a panic in between must not unwind to the caller, who
        // would return to SQLite and free or reuse them.
        let in_flight_guard = AbortOnUnwind("a panic while ring I/O was in flight");
        let mut next = 0usize;
        let mut in_flight = 0usize;
        let mut kernel_entries = 0u64;
        let mut enter_retries = 0u32;
        while next < ops.len() || in_flight > 0 {
            {
                while next < ops.len() && !self.ring.submission().is_full() {
                    let op = &mut ops[next];
                    if let (Op::Truncate { fd, len }, false) = (&*op, self.has_ftruncate) {
                        // IORING_OP_FTRUNCATE needs Linux 6.9.
                        results[next] = Self::truncate_by_syscall(*fd, *len);
                        kernel_entries += 1;
                    } else {
                        let mut entry = self.entry_for(op).user_data(next as u64);
                        if has_chain && linked[next] {
                            entry = entry.flags(io_uring::squeue::Flags::IO_LINK);
                        }
                        #[cfg(feature = "test-support")]
                        if has_chain
                            && next > 0
                            && linked[next - 1]
                            && matches!(op, Op::SyncAfterWrites { .. })
                        {
                            self.linked_syncs += 1;
                        }
                        // SAFETY: the buffer named by `entry` is borrowed by `ops` for this
                        // whole call (`&mut`, so nothing else touches it), and this
                        // function returns only after reaping this entry's completion; a
                        // panic before that aborts (`in_flight_guard`), as does a failed
                        // enter with entries in the kernel. A WRITE_FIXED entry names a
                        // range of the registered arena, which outlives the ring.
                        if unsafe { self.ring.submission().push(&entry) }.is_err() {
                            fatal("ring submission queue full after checking it was not");
                        }
                        in_flight += 1;
                    }
                    next += 1;
                }
            }
            if in_flight == 0 {
                continue;
            }
            if PANIC_IN_FLIGHT {
                // The kernel takes the entries (and may use their buffers) from here on.
                let _ = self.ring.submit();
                panic!(
                    "injected panic with {in_flight} ring ops in flight (FaultKind::PanicInFlight)"
                );
            }
            let queued = self.ring.submission().len();
            let held_by_kernel = in_flight - queued;
            let entered = if self.sqpoll {
                self.submit_and_spin(in_flight)
            } else {
                self.ring.submit_and_wait(in_flight).map(|_| 1)
            };
            match entered {
                Ok(entries) => {
                    kernel_entries += entries;
                    enter_retries = 0;
                }
                Err(error) => {
                    let errno = error.raw_os_error().unwrap_or(libc::EIO);
                    kernel_entries += 1;
                    let retryable = matches!(errno, libc::EINTR | libc::EAGAIN | libc::EBUSY);
                    if retryable && enter_retries < ENTER_RETRY_LIMIT {
                        // Interrupted wait, or the kernel asks us to reap first: retry.
                        enter_retries += 1;
                    } else if held_by_kernel > 0 || self.ring.submission().len() < queued {
                        // Some entries reached the kernel and their buffers may still be in
                        // use: returning would break the buffer-lifetime rule.
                        eprintln!("sqlite-uring: io_uring_enter failed with errno {errno}");
                        fatal("io_uring_enter failed while I/O was in flight");
                    } else {
                        // Nothing reached the kernel: report it; the caller drops the ring,
                        // and with it the entries still queued.
                        std::mem::forget(in_flight_guard);
                        return Err(errno);
                    }
                }
            }
            for completion in self.ring.completion() {
                if completion.user_data() == PREFETCH_TAG && self.prefetches_in_flight > 0 {
                    self.prefetches_in_flight -= 1;
                    continue;
                }
                let index = completion.user_data() as usize;
                if index >= ops.len() || in_flight == 0 {
                    fatal("ring completion for an op this batch did not submit");
                }
                results[index] = completion.result();
                in_flight -= 1;
            }
        }
        // Every completion is reaped: nothing of this batch is in the kernel any more.
        std::mem::forget(in_flight_guard);
        if crate::trace::enabled(crate::trace::TARGET_RING) {
            record::ring_submission(ops, &linked, kernel_entries, self.has_ftruncate);
        }
        Ok(kernel_entries)
    }
}

/// Stops the process if dropped during a panic: armed while the kernel may hold a
/// batch's buffers, and forgotten (never dropped) once it cannot.
struct AbortOnUnwind(&'static str);

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        fatal(self.0);
    }
}

/// A broken invariant while the kernel may hold buffers: unwinding would return to SQLite,
/// which may free or reuse them. Stop the process, saying why.
#[cold]
fn fatal(what: &str) -> ! {
    eprintln!("sqlite-uring: {what}; aborting rather than freeing buffers the kernel may use");
    std::process::abort()
}

/// Creates a ring, asks the kernel what it supports, and explains failures.
pub(crate) fn probe_report() -> ProbeReport {
    let kernel_release = kernel_release();
    let setup = |single_issuer, coop| match simulated_setup_errno() {
        Some(errno) => Err(errno),
        None => build_ring(single_issuer, coop).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO)),
    };
    let ring = match setup(false, false) {
        Ok(ring) => ring,
        Err(errno) => {
            return ProbeReport {
                kernel_release,
                unavailable_reason: Some(explain_setup_failure(errno)),
                features: Vec::new(),
                opcodes: Vec::new(),
            }
        }
    };
    let params = ring.params();
    let mut probe = io_uring::Probe::new();
    let probed = ring.submitter().register_probe(&mut probe).is_ok();
    let supported = |code| probed && probe.is_supported(code);
    let mut ring_fd_ring = setup(false, false).ok();
    let features = vec![
        ("single_issuer+defer_taskrun", setup(true, false).is_ok()),
        ("sqpoll (uring_sqpoll=on)", build_sqpoll_ring(true).is_ok()),
        ("coop_taskrun", setup(false, true).is_ok()),
        (
            "registered_ring_fd",
            ring_fd_ring
                .as_mut()
                .is_some_and(|r| r.submitter().register_ring_fd().is_ok()),
        ),
        ("nodrop", params.is_feature_nodrop()),
        ("submit_stable", params.is_feature_submit_stable()),
        ("native_workers", params.is_feature_native_workers()),
    ];
    let opcodes = vec![
        ("read", supported(opcode::Read::CODE)),
        ("write", supported(opcode::Write::CODE)),
        ("fsync", supported(opcode::Fsync::CODE)),
        ("ftruncate (6.9+)", supported(opcode::Ftruncate::CODE)),
        ("read_fixed", supported(opcode::ReadFixed::CODE)),
        ("write_fixed", supported(opcode::WriteFixed::CODE)),
    ];
    ProbeReport {
        kernel_release,
        unavailable_reason: None,
        features,
        opcodes,
    }
}

/// Writes per batch of a placement check, each [`PLACEMENT_BLOCK_BYTES`] long.
const PLACEMENT_WRITES: usize = 8;
const PLACEMENT_BLOCK_BYTES: usize = 4096;

/// The kind of batch a placement check submits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PlacementCase {
    BufferedAppend,
    BufferedAppendCurrentTimes,
    BufferedOverwrite,
    DirectAppend,
    DirectOverwrite,
    Fsync,
}

/// Where ring writes and fsyncs to a file in `dir` complete: inline in the submitting
/// thread, or on io-wq worker threads (docs/FILESYSTEMS.md). Each kind of batch runs on a
/// fresh thread with a ring of its own, so the workers counted (`iou-wrk-<tid>`, named
/// after the thread that submitted) are that batch's and no earlier ring's. The temporary
/// files are unlinked as soon as they are open. The error names `dir` and the cause.
pub(crate) fn ring_placement(dir: &std::path::Path) -> Result<RingPlacement, String> {
    Ok(RingPlacement {
        buffered_append: placement_of(dir, PlacementCase::BufferedAppend)?,
        buffered_append_current_times: placement_of(
            dir,
            PlacementCase::BufferedAppendCurrentTimes,
        )?,
        buffered_overwrite: placement_of(dir, PlacementCase::BufferedOverwrite)?,
        direct_append: placement_of(dir, PlacementCase::DirectAppend)?,
        direct_overwrite: placement_of(dir, PlacementCase::DirectOverwrite)?,
        fsync: placement_of(dir, PlacementCase::Fsync)?,
    })
}

fn placement_of(dir: &std::path::Path, case: PlacementCase) -> Result<RingCompletion, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| placement_on_this_thread(dir, case))
            .join()
            .unwrap_or_else(|_| Err(format!("the {case:?} check panicked")))
    })
}

/// io-wq worker threads of this process started for the calling thread's rings.
fn io_wq_workers_of_this_thread() -> usize {
    let name = format!("iou-wrk-{}", crate::sys::thread_id());
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// A file in `dir` that exists only as a descriptor (unlinked at once), closed on drop.
fn placement_file(dir: &std::path::Path, direct: bool) -> Result<std::fs::File, i32> {
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let path = dir.join(format!(
        ".sqlite-uring-placement.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(if direct { libc::O_DIRECT } else { 0 })
        .open(&path)
        .map_err(|error| error.raw_os_error().unwrap_or(libc::EIO))?;
    let _ = std::fs::remove_file(&path);
    Ok(file)
}

fn placement_on_this_thread(
    dir: &std::path::Path,
    case: PlacementCase,
) -> Result<RingCompletion, String> {
    use std::os::fd::AsRawFd;
    let failed = |what: &str, errno: i32| {
        format!(
            "{what} in {}: {}",
            dir.display(),
            std::io::Error::from_raw_os_error(errno)
        )
    };
    let direct = matches!(
        case,
        PlacementCase::DirectAppend | PlacementCase::DirectOverwrite
    );
    let file = match placement_file(dir, direct) {
        Ok(file) => file,
        Err(libc::EINVAL) if direct => return Ok(RingCompletion::Unsupported),
        Err(errno) => return Err(failed("cannot create a test file", errno)),
    };
    let fd = file.as_raw_fd();
    let mut buffer = AlignedBuffer::with_capacity(2 * PLACEMENT_WRITES * PLACEMENT_BLOCK_BYTES);
    let pattern: Vec<u8> = (0..buffer.capacity()).map(|i| (i % 251) as u8).collect();
    buffer.full_mut().copy_from_slice(&pattern);
    // What the file holds before the batch: an overwrite needs its blocks written and on
    // disk (allocated, not unwritten extents); an fsync needs dirty pages.
    let prepared_bytes = match case {
        PlacementCase::BufferedOverwrite | PlacementCase::DirectOverwrite => buffer.capacity(),
        PlacementCase::Fsync => PLACEMENT_WRITES * PLACEMENT_BLOCK_BYTES,
        PlacementCase::BufferedAppend
        | PlacementCase::BufferedAppendCurrentTimes
        | PlacementCase::DirectAppend => 0,
    };
    if prepared_bytes > 0 {
        // SAFETY: the buffer holds at least `prepared_bytes` initialised bytes.
        let written = unsafe {
            libc::pwrite(
                fd,
                buffer.prefix(prepared_bytes).as_ptr().cast(),
                prepared_bytes,
                0,
            )
        };
        if written != prepared_bytes as isize {
            return Err(failed("cannot prepare the test file", last_errno()));
        }
        // SAFETY: plain syscall on our descriptor.
        if case != PlacementCase::Fsync && unsafe { libc::fdatasync(fd) } != 0 {
            return Err(failed("cannot sync the test file", last_errno()));
        }
    }
    if case != PlacementCase::BufferedAppendCurrentTimes {
        // A write must update the file's mtime unless it already holds the current
        // time, and under IOCB_NOWAIT a filesystem that would have to do so may refuse
        // (EAGAIN → io-wq). A database's commit writes come well after its last change
        // (and SQLite's fstat makes the next timestamp fine-grained), so set the mtime
        // into the past: every write case then sees what a commit sees.
        let times = [
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            libc::timespec {
                tv_sec: 1_000_000_000,
                tv_nsec: 0,
            },
        ];
        // SAFETY: `times` is two valid timespecs; plain syscall on our descriptor.
        if unsafe { libc::futimens(fd, times.as_ptr()) } != 0 {
            return Err(failed("cannot set the test file's mtime", last_errno()));
        }
    }
    let mut ring = match simulated_setup_errno() {
        Some(errno) => Err(errno),
        None => build_ring(true, false)
            .or_else(|_| build_ring(false, true))
            .or_else(|_| build_ring(false, false))
            .map_err(|error| error.raw_os_error().unwrap_or(libc::EIO)),
    }
    .map_err(explain_setup_failure)?;
    if !ring.params().is_feature_native_workers() {
        // Before Linux 5.12 io-wq workers were kernel threads, not threads of this
        // process: counting them here would report every write as inline.
        return Err(format!(
            "this kernel's io-wq workers are not threads of the process (Linux {} is \
             older than 5.12), so where ring writes complete in {} cannot be told",
            kernel_release(),
            dir.display()
        ));
    }
    let workers_before = io_wq_workers_of_this_thread();
    let entries: Vec<io_uring::squeue::Entry> = match case {
        PlacementCase::Fsync => vec![opcode::Fsync::new(types::Fd(fd)).build()],
        _ => (0..PLACEMENT_WRITES)
            .map(|i| {
                // Appends: consecutive blocks, each extending the file. Overwrites:
                // every other block, as a commit's pages lie apart.
                let block = if prepared_bytes > 0 { 2 * i } else { i };
                let offset = block * PLACEMENT_BLOCK_BYTES;
                // Inside the buffer, which outlives the batch.
                let buf = buffer.prefix(buffer.capacity())[offset..].as_ptr();
                opcode::Write::new(types::Fd(fd), buf, PLACEMENT_BLOCK_BYTES as u32)
                    .offset(offset as u64)
                    .build()
            })
            .collect(),
    };
    for entry in &entries {
        // SAFETY: every buffer named lives in `buffer`, which is dropped only after this
        // function has reaped every completion below (or aborted).
        unsafe { ring.submission().push(entry) }.expect("the ring has room for the batch");
    }
    let mut reaped = 0usize;
    let mut failure = None;
    while reaped < entries.len() {
        match ring.submit_and_wait(entries.len() - reaped) {
            Ok(_) => {}
            Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
            Err(error) => {
                // The batch may be in the kernel with our buffer: never free it then.
                eprintln!("sqlite-uring: io_uring_enter failed during a placement check: {error}");
                std::process::abort();
            }
        }
        for completion in ring.completion() {
            reaped += 1;
            let expected = if case == PlacementCase::Fsync {
                0
            } else {
                PLACEMENT_BLOCK_BYTES as i32
            };
            if completion.result() != expected && failure.is_none() {
                failure = Some(completion.result());
            }
        }
    }
    let workers_after = io_wq_workers_of_this_thread();
    if let Some(result) = failure {
        return Err(if result < 0 {
            failed(&format!("a ring {case:?} failed"), -result)
        } else {
            format!(
                "a ring {case:?} in {} transferred {result} bytes",
                dir.display()
            )
        });
    }
    drop(ring);
    drop(file);
    Ok(if workers_after > workers_before {
        RingCompletion::Workers(workers_after)
    } else {
        RingCompletion::Inline
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory that cannot take a test file is an error naming it, not a report.
    #[test]
    fn placement_in_a_missing_directory_names_it() {
        let missing = std::path::Path::new("/nonexistent-sqlite-uring-dir");
        let error = ring_placement(missing).unwrap_err();
        assert!(
            error.contains("cannot create a test file in /nonexistent-sqlite-uring-dir"),
            "{error}"
        );
    }

    /// Workers are counted per submitting thread: a fresh thread has none, and an fsync
    /// through a ring (which io_uring always hands to io-wq) starts one of its own.
    #[test]
    fn a_ring_fsync_is_counted_as_a_worker_of_its_thread() {
        let dir = std::env::temp_dir();
        assert_eq!(
            std::thread::spawn(io_wq_workers_of_this_thread)
                .join()
                .unwrap(),
            0
        );
        assert!(matches!(
            placement_of(&dir, PlacementCase::Fsync).unwrap(),
            RingCompletion::Workers(n) if n >= 1
        ));
    }
}
