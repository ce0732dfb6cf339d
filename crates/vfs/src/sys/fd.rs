//! The descriptors this VFS owns, and how each kind is closed.
//!
//! * [`Fd`]: a descriptor of a file no SQLite lock lives on — a journal, a WAL, a
//!   temporary file, a directory opened to be synced. It is closed exactly once, through
//!   the system-call table: when it is consumed by [`Fd::close`], which reports a failed
//!   close for the caller to log, or when it is dropped (an error path).
//! * [`DbFd`]: a descriptor of a database or its `-shm`. A `unix` connection of this
//!   process may hold POSIX locks on that file, and closing *any* descriptor of it drops
//!   them all (fcntl(2), "Advisory record locking"), so it never closes plainly: consumed
//!   by [`DbFd::close`] or dropped, it goes through [`close_preserving_process_locks`],
//!   which parks it instead while such a lock stands. An `Fd` opened on a database
//!   becomes one with `DbFd::from`, or `DbFd::reusable` when a later open of the same
//!   file may take it back once parked ([`take_parked`], as os_unix.c reuses its own
//!   pending descriptors, `findReusableFd`); nothing else turns a `DbFd` back into an
//!   `Fd`.
//!
//! Neither type can be copied, and closing consumes it, so a descriptor cannot be closed
//! twice or used after it closed; one that is never closed by hand is closed when its
//! owner drops it. Where a descriptor must outlive its first owner on purpose, the
//! ownership moves, visibly: a database's descriptor is an `Arc<DbFd>` shared with the
//! process's lock state of the file (`lock.rs`), which keeps it open for the other
//! connections that lock through it; a parked descriptor belongs to the parking list.
//!
//! Code that uses a descriptor without owning it takes a `BorrowedFd<'_>`, which cannot
//! outlive its owner. The I/O layer names descriptors by number instead (`io/op.rs`: an
//! op carries its descriptor to the kernel as an SQE does, and may sit in a write-behind
//! queue between calls), under the rule that a file's queued and in-flight I/O ends
//! before its descriptors close (`write_behind::Queue::flush_before_close`).

use std::ffi::c_int;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::calls;

/// A descriptor this VFS owns, of a file no SQLite lock lives on (see the module docs).
#[derive(Debug)]
pub(crate) struct Fd {
    /// `None` only while it is being closed.
    fd: Option<OwnedFd>,
}

impl Fd {
    /// Takes ownership of `raw`, a descriptor a system call just returned to `sys`.
    ///
    /// # Safety
    /// `raw` must be open and owned by nothing else.
    pub(super) unsafe fn from_raw(raw: RawFd) -> Fd {
        // SAFETY: forwarded caller contract.
        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
        Fd { fd: Some(owned) }
    }

    fn owned(&self) -> &OwnedFd {
        self.fd.as_ref().expect("an Fd is open until it is closed")
    }

    /// close(2) through the system-call table; `Err(errno)` when it failed (the
    /// descriptor is gone either way: Linux frees it whatever close returns).
    pub(crate) fn close(mut self) -> Result<(), i32> {
        let fd = self.fd.take().expect("an Fd is closed once");
        if calls::close(fd.into_raw_fd()) != 0 {
            return Err(calls::last_errno());
        }
        Ok(())
    }
}

impl From<OwnedFd> for Fd {
    fn from(fd: OwnedFd) -> Fd {
        Fd { fd: Some(fd) }
    }
}

impl AsFd for Fd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.owned().as_fd()
    }
}

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.owned().as_raw_fd()
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            // Through the table, as every close; a failure here has no one to tell.
            calls::close(fd.into_raw_fd());
        }
    }
}

/// A descriptor of a database or `-shm` file, which closes only without dropping this
/// process's POSIX locks on the file (see the module docs).
#[derive(Debug)]
pub(crate) struct DbFd {
    /// `None` only while it is being closed.
    fd: Option<Fd>,
    /// What a later open may take it back for once it is parked; `None`: never.
    reuse: Option<Reuse>,
}

/// What a parked descriptor may be taken back for ([`take_parked`]). Without reuse, a
/// process in which a `unix` connection holds its lock on a database for good (a WAL
/// connection holds SHARED for its whole life) would park one more descriptor at every
/// close of a connection of ours, until opens failed with EMFILE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// A database's or `-shm`'s descriptor as SQLite's calls use it (buffered, or the
    /// O_DIRECT side): for an open of the same file with the same access mode and
    /// O_DIRECT flag.
    Open,
    /// Read-ahead's own descriptor of a database, with `POSIX_FADV_RANDOM` on its open
    /// file description: for read-ahead's next descriptor of the same file alone.
    Prefetch,
}

impl DbFd {
    /// A descriptor that, once parked, an open of the same file for `reuse` may take
    /// back ([`take_parked`]).
    pub(crate) fn reusable(fd: Fd, reuse: Reuse) -> DbFd {
        DbFd {
            fd: Some(fd),
            reuse: Some(reuse),
        }
    }

    /// Closes it, or parks it while this process holds POSIX locks on its file
    /// ([`close_preserving_process_locks`]); each failed close(2) goes to `failed_close`.
    pub(crate) fn close(mut self, failed_close: impl FnMut(i32)) {
        let fd = self.fd.take().expect("a DbFd is closed once");
        close_preserving_process_locks(fd, self.reuse, failed_close);
    }
}

impl From<Fd> for DbFd {
    fn from(fd: Fd) -> DbFd {
        DbFd {
            fd: Some(fd),
            reuse: None,
        }
    }
}

impl AsFd for DbFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd
            .as_ref()
            .expect("a DbFd is open until it is closed")
            .as_fd()
    }
}

impl AsRawFd for DbFd {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

impl Drop for DbFd {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            close_preserving_process_locks(fd, self.reuse, |_| {});
        }
    }
}

// ─── Closing descriptors without dropping this process's POSIX locks ─────────────────
//
// POSIX record locks belong to the process, and close(2) of *any* descriptor of a file
// releases all of them (fcntl(2), "Advisory record locking"). If a `unix`-VFS connection
// in this process holds SQLite locks on a database (or its -shm) that we also have open,
// closing our descriptor would silently release its locks. As os_unix.c does for its own
// connections, such a descriptor is parked instead and closed once the process holds no
// POSIX lock on that file any more. Our own OFD locks are released before parking, so a
// parked descriptor blocks nobody.
//
// Whose locks are on a file is read from /proc/self/fdinfo, not /proc/locks: /proc/locks
// is rendered a page at a time, one walk of the machine's lock list per read(2), and a
// walk starts at the line number where the last one stopped. A lock released anywhere
// earlier in the list between two reads shifts the lines, and one is skipped; with
// other processes taking and dropping locks, this process's own line goes missing now and
// then, and the close then dropped a `unix` connection's EXCLUSIVE lock.

// ─── The gate between these closes and `unix` connections' lock requests ────────────────
//
// A close below decides from probes, then closes: two steps. A `unix` connection of
// another thread that takes its first lock on the file between them would lose it to the
// close(2), and go on holding a SQLite lock the kernel no longer does (another process
// could then write under its reader, or beside its writer). os_unix.c keeps its own
// connections out of that window with the inode's mutex, which its closes and its lock
// requests both take; this VFS cannot take that mutex. So it puts a gate in `unix`'s
// system-call table instead (`FoundVfs::gate_lock_requests`, at every open of a main
// database): `unix`'s POSIX lock requests (F_SETLK through its `fcntl` entry) pass it
// shared, and a close here holds it exclusively from its first probe to its last
// close(2), so such a request waits for the close (microseconds) and then finds the file
// as the close left it. Every other `fcntl` of `unix`'s goes straight through, F_SETLKW
// among them: a request the kernel makes wait (SQLite built with
// SQLITE_ENABLE_SETLK_TIMEOUT) could wait for a lock of the very thread that is closing,
// and holding the gate meanwhile would deadlock the two.
//
// The gate is two atomics' worth of state, no allocation and no lock a forked child could
// inherit held. The gate forwards to the C library's `fcntl`, and goes in only where `unix`'s entry is
// that one: an entry someone replaced (a test's fault injection) is left alone, and with
// it the window. `xSetSystemCall` resetting `unix`'s table takes the gate out until the
// next open of a database puts it back. Its entry is a non-variadic function standing in
// for C's variadic `fcntl`, which the two ABIs this gate is built for (x86-64 System V,
// AArch64 AAPCS64 on Linux) allow: a variadic call passes its integer and pointer
// arguments in the registers a plain call uses. Elsewhere there is no gate.

/// The gate: how many `unix` lock requests are passing it, with [`GATE_CLOSED`] set while
/// a close holds it. Plain atomics, no allocation, so a forked child can open it again
/// (`open_gate_after_fork`: a thread of the parent may have held it at the fork).
static UNIX_LOCK_GATE: AtomicU32 = AtomicU32::new(0);
/// The bit of [`UNIX_LOCK_GATE`] a close sets.
const GATE_CLOSED: u32 = 1 << 31;

/// A `unix` lock request passing the gate: waits, yielding the CPU, while a close holds
/// it (microseconds; longer only for a close that reads /proc to find whose lock it saw).
struct GatePass;

impl GatePass {
    fn enter() -> GatePass {
        loop {
            let now = UNIX_LOCK_GATE.load(Ordering::Acquire);
            if now & GATE_CLOSED == 0
                && UNIX_LOCK_GATE
                    .compare_exchange_weak(now, now + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return GatePass;
            }
            std::thread::yield_now();
        }
    }
}

impl Drop for GatePass {
    fn drop(&mut self) {
        UNIX_LOCK_GATE.fetch_sub(1, Ordering::Release);
    }
}

/// The gate held by a close, until it is dropped. Closes are one at a time already (they
/// hold the parked list), so the close only waits for the requests inside to leave.
struct ClosedGate;

impl Drop for ClosedGate {
    fn drop(&mut self) {
        UNIX_LOCK_GATE.fetch_and(!GATE_CLOSED, Ordering::Release);
    }
}

/// In a forked child (one thread, holding nothing): the gate open and empty.
fn open_gate_after_fork() {
    UNIX_LOCK_GATE.store(0, Ordering::Relaxed);
}

/// `unix`'s `fcntl` entry once gated: POSIX lock requests that do not wait in the kernel
/// wait here while a close is deciding.
///
/// # Safety
/// The contract of fcntl(2) for `cmd` and its argument, as `unix` calls it.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
unsafe extern "C" fn gated_fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    if cmd != libc::F_SETLK {
        // SAFETY: forwarded caller contract; `arg` carries the caller's third argument
        // in the register it came in (see the section's comment).
        return unsafe { libc::fcntl(fd, cmd, arg) };
    }
    let open = GatePass::enter();
    // SAFETY: as above; errno is this thread's own variable.
    let (result, errno) = unsafe { (libc::fcntl(fd, cmd, arg), *libc::__errno_location()) };
    // Letting go of the gate may wake a close (a futex call): `unix` reads the lock
    // request's errno (EAGAIN or EACCES: busy) after this returns, as fcntl left it.
    drop(open);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    result
}

/// Whether `unix`'s `fcntl` entry (`current`) should become the gate: only when it is
/// the C library's `fcntl`, not when it is the gate already, another function someone
/// put there, or on a target without the gate.
#[cold]
pub(crate) fn unix_fcntl_gate(current: crate::ffi::sqlite3_syscall_ptr) -> GateInstall {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let address = |entry: crate::ffi::sqlite3_syscall_ptr| entry.map(|f| f as usize);
        // SAFETY: only the address is kept; SQLite calls the entry with fcntl's C
        // signature, which `gated_fcntl` takes (see the section's comment).
        let gate: crate::ffi::sqlite3_syscall_ptr = Some(unsafe {
            std::mem::transmute::<
                unsafe extern "C" fn(c_int, c_int, usize) -> c_int,
                unsafe extern "C" fn(),
            >(gated_fcntl)
        });
        let plain = Some(libc::fcntl as *const () as usize);
        match address(current) {
            now if now == address(gate) => GateInstall::InPlace,
            now if now == plain => {
                // Before any request can pass it: a child forked while one was inside
                // must find it open.
                super::fork::register_child_hook(open_gate_after_fork);
                GateInstall::Replace(gate)
            }
            _ => GateInstall::NotOurs,
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = current;
        GateInstall::NotOurs
    }
}

/// What [`unix_fcntl_gate`] found in `unix`'s table.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GateInstall {
    /// The gate is there.
    InPlace,
    /// The C library's `fcntl` is there: put this entry in its place.
    Replace(crate::ffi::sqlite3_syscall_ptr),
    /// Another function is there (or this target has no gate): left alone.
    NotOurs,
}

/// Closes this process's `unix` connections' lock requests out until it is dropped. The
/// caller holds the parked list, which keeps closes one at a time.
fn close_gate() -> ClosedGate {
    super::fork::register_child_hook(open_gate_after_fork);
    let before = UNIX_LOCK_GATE.fetch_or(GATE_CLOSED, Ordering::AcqRel);
    debug_assert_eq!(
        before & GATE_CLOSED,
        0,
        "one close at a time holds the gate"
    );
    while UNIX_LOCK_GATE.load(Ordering::Acquire) & !GATE_CLOSED != 0 {
        std::thread::yield_now();
    }
    ClosedGate
}

/// Runs between a close's first probe and its close(2)s, with the gate held (tests: a
/// `unix` connection's lock request made there must wait for the close).
#[cfg(feature = "test-support")]
static BETWEEN_PROBE_AND_CLOSE: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>> =
    std::sync::Mutex::new(None);

/// Sets the function the next close runs between its first probe and its close(2)s
/// (once), with the gate held.
#[cfg(feature = "test-support")]
pub(crate) fn run_between_probe_and_close(hook: Box<dyn FnOnce() + Send>) {
    *BETWEEN_PROBE_AND_CLOSE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(hook);
}

/// A file, as fstat(2) names it: its device and inode.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileKey {
    dev: libc::dev_t,
    inode: libc::ino_t,
}

impl FileKey {
    pub(crate) fn of(stat: &libc::stat) -> FileKey {
        FileKey {
            dev: stat.st_dev,
            inode: stat.st_ino,
        }
    }
}

/// Parked descriptors, owned by the list alone. A forked child starts with none: the
/// parent's (the same open files, through the descriptors it inherited) stay open in it
/// untouched, as the list may have been locked at the fork.
static PARKED: super::fork::ForkLocal<std::sync::Mutex<Vec<Parked>>> =
    super::fork::ForkLocal::new();

/// A parked descriptor, and the open that may take it back.
struct Parked {
    fd: Fd,
    reusable: Option<Reusable>,
}

/// The open a parked descriptor may be taken back by: of its file, for its use, with its
/// access mode and O_DIRECT flag ([`REUSE_FLAGS`] of `F_GETFL`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Reusable {
    reuse: Reuse,
    file: FileKey,
    flags: c_int,
}

/// The open flags a parked descriptor must share with the open that takes it back.
const REUSE_FLAGS: c_int = libc::O_ACCMODE | libc::O_DIRECT;

impl Parked {
    fn new(fd: Fd, reuse: Option<Reuse>) -> Parked {
        // Two calls on a path taken only while a `unix` connection holds a lock.
        let reusable = reuse.and_then(|reuse| {
            let file = file_key(fd.as_raw_fd())?;
            let flags = calls::fcntl_getfl(fd.as_raw_fd());
            (flags >= 0).then_some(Reusable {
                reuse,
                file,
                flags: flags & REUSE_FLAGS,
            })
        });
        Parked { fd, reusable }
    }
}

fn parked_list() -> std::sync::MutexGuard<'static, Vec<Parked>> {
    PARKED
        .get()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A parked descriptor of the file `file` names, for `reuse`, opened with `os_flags`'
/// access mode and O_DIRECT flag, taken off the list for its new owner (which locks
/// through it, or closes it as any descriptor of the file); `None` when none is parked,
/// or when the open must create the file (`O_EXCL`). `file` (a `stat` of the path, or an
/// `fstat`) is called only when some parked descriptor has that use and those flags, so
/// an open with nothing parked makes no call. The descriptor holds no lock: this VFS
/// released its own before parking it.
pub(crate) fn take_parked(
    os_flags: c_int,
    reuse: Reuse,
    file: impl FnOnce() -> Option<FileKey>,
) -> Option<Fd> {
    if os_flags & libc::O_EXCL != 0 {
        return None;
    }
    let flags = os_flags & REUSE_FLAGS;
    let mut parked = parked_list();
    let candidate = |parked: &Parked| {
        parked
            .reusable
            .is_some_and(|r| r.reuse == reuse && r.flags == flags)
    };
    if !parked.iter().any(candidate) {
        return None;
    }
    let wanted = Reusable {
        reuse,
        file: file()?,
        flags,
    };
    let at = parked
        .iter()
        .position(|parked| parked.reusable == Some(wanted))?;
    Some(parked.swap_remove(at).fd)
}

/// Closes that found a lock on the file (or a parked descriptor) and so had to find out
/// whose locks they are (for tests: the one-fcntl path must be the usual one).
#[cfg(feature = "test-support")]
static LOCK_OWNER_CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(feature = "test-support")]
pub(crate) fn lock_owner_checks() -> u64 {
    LOCK_OWNER_CHECKS.load(std::sync::atomic::Ordering::Relaxed)
}

/// The file a descriptor of this process is open on, by number: the walk of
/// `/proc/self/fd` meets descriptors this VFS does not own, which may even close
/// meanwhile (then fstat fails, or describes what took the number, which the walk
/// tolerates).
pub(super) fn file_key(fd: RawFd) -> Option<FileKey> {
    // SAFETY: `stat` is plain C data, for which all-zero bytes are a valid value.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    (calls::fstat(fd, &mut stat) == 0).then(|| FileKey::of(&stat))
}

/// A `flock` of `l_type` (F_RDLCK, F_WRLCK, F_UNLCK) over `len` bytes at `start`
/// (`len` 0: to the end of the file), with `l_pid` 0 as OFD locks require.
pub(crate) fn flock(l_type: libc::c_int, start: i64, len: i64) -> libc::flock {
    // SAFETY: `flock` is plain C data, for which all-zero bytes are a valid value.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = l_type as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = start;
    lock.l_len = len;
    lock
}

/// What a whole-file `F_OFD_GETLK` from a descriptor holding no lock itself says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// No lock on any byte: an OFD lock conflicts with every other lock, this process's
    /// POSIX locks included (fcntl(2), "Open file description locks"), so there is
    /// nothing to preserve.
    Free,
    /// The first conflicting lock is a POSIX lock of this process.
    ThisProcess,
    /// Another owner's lock (another process's, or an OFD lock), which may hide one of
    /// this process's on the same bytes; or the probe failed.
    Unknown,
}

fn probe(fd: BorrowedFd<'_>) -> Probe {
    let mut lock = flock(libc::F_WRLCK, 0, 0);
    if calls::fcntl_ofd_getlk(fd.as_raw_fd(), &mut lock) != 0 {
        return Probe::Unknown;
    }
    if lock.l_type as libc::c_int == libc::F_UNLCK {
        Probe::Free
    } else if lock.l_pid > 0 && lock.l_pid as u32 == std::process::id() {
        // F_OFD_GETLK reports an OFD lock's l_pid as -1, a POSIX lock's as its process.
        Probe::ThisProcess
    } else {
        Probe::Unknown
    }
}

/// Of `files`, those on which this process holds a POSIX lock; `None` when that cannot
/// be found out (no /proc).
///
/// A POSIX lock is listed (`lock:` lines, Linux 4.1+) in /proc/self/fdinfo/N of the
/// descriptor it was taken through, and closing any descriptor of the file drops all of
/// them, so every one this process still holds shows under a descriptor of that file it
/// has open. Each fdinfo file is rendered whole in one go, so it cannot skip a line.
fn files_with_process_posix_locks(files: &[FileKey]) -> Option<Vec<FileKey>> {
    let mut locked = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        let Some(fd) = entry
            .ok()
            .and_then(|entry| entry.file_name().to_str()?.parse::<RawFd>().ok())
        else {
            continue;
        };
        let Some(file) = file_key(fd) else {
            continue;
        };
        if !files.contains(&file) || locked.contains(&file) {
            continue;
        }
        // A descriptor closed since the listing has no fdinfo, and held no lock still
        // standing: its close dropped them.
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
            continue;
        };
        // `lock:\t1: POSIX  ADVISORY  READ 1234 fe:00:10018963 1073741826 1073742335`;
        // only this process's own POSIX locks are listed.
        if info.lines().any(|line| {
            line.strip_prefix("lock:")
                .is_some_and(|lock| lock.split_whitespace().nth(1) == Some("POSIX"))
        }) {
            locked.push(file);
        }
    }
    Some(locked)
}

/// A descriptor a close looks at: the one closed, or a parked one.
struct Candidate {
    fd: Fd,
    /// A parked one's open that may take it back (`Ok`), or the closed one's use once
    /// parked (`Err`).
    reusable: Result<Option<Reusable>, Option<Reuse>>,
    /// What its whole-file probe says.
    probe: Probe,
    /// Its file, when the probe could not settle whether this process holds a lock on it.
    file: Option<FileKey>,
}

/// Closes `fd` (of a database or -shm file, which carry SQLite's locks) unless that would
/// release POSIX locks this process holds on the same file; then parks it. The caller
/// has released the OFD locks taken through `fd` first, so a parked descriptor blocks
/// nobody. Parked descriptors whose file is free again are closed on the way. Each
/// close(2) that fails is reported to `failed_close` with its errno (os_unix.c's
/// robust_close logs those of its closeUnixFile, closePendingFds and unixShmPurge); the
/// descriptor is gone either way, as Linux frees it whatever close(2) returns.
fn close_preserving_process_locks(fd: Fd, reuse: Option<Reuse>, mut failed_close: impl FnMut(i32)) {
    let mut close = |fd: Fd| {
        if let Err(errno) = fd.close() {
            failed_close(errno);
        }
    };
    let mut parked = parked_list();
    // From the first probe to the last close(2), `unix`'s lock requests wait (see the gate).
    let _gate = close_gate();
    // The common case in one fcntl: nobody holds any lock on any byte of the file.
    // Otherwise the process's descriptors of the file tell whose locks they are.
    let this = probe(fd.as_fd());
    #[cfg(feature = "test-support")]
    {
        let hook = BETWEEN_PROBE_AND_CLOSE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(hook) = hook {
            hook();
        }
    }
    if parked.is_empty() && this == Probe::Free {
        close(fd);
        return;
    }
    #[cfg(feature = "test-support")]
    LOCK_OWNER_CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Each descriptor with what its probe says, and its file when the probe cannot settle
    // whether this process holds a lock on it; the parked ones with what may take them
    // back, the new one with what may once it is parked.
    let mut candidates: Vec<Candidate> = Vec::with_capacity(parked.len() + 1);
    candidates.extend(parked.drain(..).map(|parked| Candidate {
        probe: probe(parked.fd.as_fd()),
        fd: parked.fd,
        reusable: Ok(parked.reusable),
        file: None,
    }));
    candidates.push(Candidate {
        fd,
        reusable: Err(reuse),
        probe: this,
        file: None,
    });
    for candidate in candidates.iter_mut() {
        if candidate.probe == Probe::Unknown {
            candidate.file = file_key(candidate.fd.as_raw_fd());
        }
    }
    let unsettled: Vec<FileKey> = candidates.iter().filter_map(|c| c.file).collect();
    // One walk of the descriptor table for the files the probes could not settle.
    let locked_files = if unsettled.is_empty() {
        Some(Vec::new())
    } else {
        files_with_process_posix_locks(&unsettled)
    };
    for Candidate {
        fd,
        reusable,
        probe,
        file,
    } in candidates
    {
        let keep = match probe {
            Probe::Free => false,
            Probe::ThisProcess => true,
            // Without /proc (or fstat) only the probe can tell, and it saw another
            // owner's lock first, which may hide ours: closed, as os_unix.c's own
            // bookkeeping cannot be read from here.
            Probe::Unknown => match (&locked_files, file) {
                (Some(files), Some(file)) => files.contains(&file),
                _ => false,
            },
        };
        if keep {
            parked.push(match reusable {
                Ok(reusable) => Parked { fd, reusable },
                Err(reuse) => Parked::new(fd, reuse),
            });
        } else {
            close(fd);
        }
    }
}
