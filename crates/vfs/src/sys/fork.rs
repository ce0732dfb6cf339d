//! Which process this is, across `fork()`: a generation counter the child bumps, the
//! hooks the layers above run in the child (the write-behind queue forgetting the
//! parent's queued writes), and [`ForkLocal`], a value a forked child starts afresh
//! instead of touching the parent's (which a thread of the parent, absent in the child,
//! may have held locked at the fork). A ring made before a fork belongs to the parent: a
//! child inherits its ring mappings, and submitting on them would mix its I/O into the
//! parent's queues, so `io/uring.rs` abandons a ring of an older generation. A leaf of
//! `sys/`.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Bumped in the child after every `fork()`, by the one handler [`install_handler`]
/// registers.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static FORK_HANDLER: std::sync::Once = std::sync::Once::new();

/// Most hooks that can be registered (the write-behind queue uses one).
const MAX_HOOKS: usize = 8;

/// Registered hooks, as `fn()` pointers cast to usize (0 = empty slot): plain atomics, so
/// the child reads them without taking a lock another thread of the parent may have held.
static HOOKS: [AtomicUsize; MAX_HOOKS] = [const { AtomicUsize::new(0) }; MAX_HOOKS];

/// Runs `f` in the child after every later `fork()` (pthread_atfork(3)).
fn at_fork_in_child(f: extern "C" fn()) {
    // SAFETY: `f` is a function of the program text, which lives as long as the process.
    unsafe { libc::pthread_atfork(None, None, Some(f)) };
}

/// The child handler. The child's other threads are gone, possibly while one of them
/// held a lock or was inside a `Once`: it touches atomics only, and runs the hooks, each
/// of which must be safe in the single-threaded child (they only `try_lock`).
extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    for slot in &HOOKS {
        let hook = slot.load(Ordering::Acquire);
        if hook != 0 {
            // SAFETY: only `register_child_hook` stores here, and it stores `fn()`
            // pointers; functions live for the whole process.
            let hook: fn() = unsafe { std::mem::transmute::<usize, fn()>(hook) };
            hook();
        }
    }
}

/// Installs the child handler once. The first call is [`INSTALL_AT_LOAD`]'s, made while
/// the library loads, before any thread can call into it; a call from a link that left
/// that entry out installs it here instead.
#[inline]
fn install_handler() {
    if !FORK_HANDLER.is_completed() {
        install_handler_now();
    }
}

#[cold]
#[inline(never)]
fn install_handler_now() {
    // Names the load-time entry, so a link that takes this code takes it too (an entry
    // nothing names can be left out of a static link with its object file).
    std::hint::black_box(&INSTALL_AT_LOAD);
    FORK_HANDLER.call_once(|| at_fork_in_child(after_fork_in_child));
}

/// Installs the child handler as the library loads: at program start when it is linked
/// into the program, inside `dlopen` for the loadable extension. No other thread can be
/// in [`install_handler`] yet. Installed lazily instead, a `fork()` by one thread while
/// another was inside `call_once` would leave the `Once` running for good in the child,
/// whose first `fork_generation` would then wait forever.
#[used]
#[link_section = ".init_array"]
static INSTALL_AT_LOAD: extern "C" fn() = install_at_load;

/// Set by [`install_at_load`] in the unit tests' build, for the test that it ran.
#[cfg(test)]
static INSTALLED_AT_LOAD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn install_at_load() {
    install_handler();
    #[cfg(test)]
    INSTALLED_AT_LOAD.store(true, Ordering::Relaxed);
}

/// This process's fork generation: 0 in a process that never forked, one more in each
/// forked child than in its parent at the fork. Installs the child handler on first use,
/// so a value read before a fork is never current after it.
pub(crate) fn fork_generation() -> u64 {
    install_handler();
    FORK_GENERATION.load(Ordering::Relaxed)
}

/// Whether `generation`, a value [`fork_generation`] gave, is of an earlier process
/// than this one (a forked child's parent). One load: the value came from
/// `fork_generation`, which installed the child handler, so every fork since bumped the
/// counter.
#[inline]
pub(crate) fn is_older_generation(generation: u64) -> bool {
    FORK_GENERATION.load(Ordering::Relaxed) != generation
}

/// Runs `hook` in the child after every later `fork()`. The hook runs in a process with
/// one thread, where any lock may have been held by a thread that no longer exists: it
/// must only `try_lock`, never block. Registering the same hook twice is a no-op.
pub(crate) fn register_child_hook(hook: fn()) {
    install_handler();
    let value = hook as usize;
    for slot in &HOOKS {
        match slot.compare_exchange(0, value, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(existing) if existing == value => return,
            Err(_) => continue,
        }
    }
    panic!("more than {MAX_HOOKS} fork hooks registered");
}

/// For a fork hook: `mutex` locked, unless a thread of the parent held it at the fork
/// (it then stays locked for good in the child, and the hook passes it over). A poisoned
/// one is taken all the same: the hooks only read what it guards.
pub(crate) fn lock_in_child<T>(
    mutex: &std::sync::Mutex<T>,
) -> Option<std::sync::MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// `/dev/null`, opened by a fork hook to put over the child's copies of descriptors whose
/// open file description is the parent's, with the OFD locks on it: once the child's
/// copy no longer refers to it, the parent's locks go when the parent's own descriptors
/// close (at its exit, too), not when this child's do. The descriptor numbers stay
/// taken, so a handle the child inherited reaches `/dev/null` through them, never
/// another file. Plain `libc` calls, outside the system-call table: a fork hook runs
/// where only async-signal-safe calls are allowed, and `open`, `dup3` and `close` are.
pub(crate) struct NullDescriptor(std::os::fd::RawFd);

impl NullDescriptor {
    pub(crate) fn open() -> Option<NullDescriptor> {
        // SAFETY: a NUL-terminated path and flags; the descriptor returned is owned here.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        (fd >= 0).then_some(NullDescriptor(fd))
    }

    /// Makes `fd` a descriptor of `/dev/null` (close-on-exec, as every descriptor of the
    /// VFS is), dropping this process's reference to what it referred to.
    pub(crate) fn put_over(&self, fd: std::os::fd::RawFd) {
        if fd >= 0 && fd != self.0 {
            // SAFETY: dup3 takes two descriptor numbers; `fd` is one the caller owns in
            // this (forked, single-threaded) process.
            unsafe { libc::dup3(self.0, fd, libc::O_CLOEXEC) };
        }
    }
}

impl Drop for NullDescriptor {
    fn drop(&mut self) {
        // SAFETY: our own descriptor of /dev/null, on which no lock is held.
        unsafe { libc::close(self.0) };
    }
}

/// A value of this process: `get` in a forked child gives a new `T::default()`, never
/// the parent's. For state a thread may hold locked (a `Mutex` of a process-wide list):
/// in the child, that thread is gone and the lock would be held for good, so the child
/// must not even look at it.
///
/// The value is a leaked box behind an `AtomicPtr`, stamped with the generation that
/// made it. A box of an older generation is never touched again and never freed (in the
/// child it may be mid-update; its contents belong to the parent); the current one is
/// freed when the `ForkLocal` drops. A `static` one (`new` is `const`) lives for the
/// process.
pub(crate) struct ForkLocal<T> {
    current: AtomicPtr<Stamped<T>>,
    /// Owns a `T` (for drop check); the `Send`/`Sync` bounds are below.
    _owns: std::marker::PhantomData<T>,
}

// SAFETY: `get` shares `&T` among the threads that share the `ForkLocal` (so `T: Sync`),
// and the value one thread's `get` made is dropped by whichever thread drops the
// `ForkLocal` (so `T: Send`): the bounds of std's `OnceLock`.
unsafe impl<T: Send + Sync> Sync for ForkLocal<T> {}
// SAFETY: sending the `ForkLocal` sends the `T` it owns.
unsafe impl<T: Send> Send for ForkLocal<T> {}

struct Stamped<T> {
    generation: u64,
    value: T,
}

impl<T: Default> ForkLocal<T> {
    pub(crate) const fn new() -> ForkLocal<T> {
        ForkLocal {
            current: AtomicPtr::new(std::ptr::null_mut()),
            _owns: std::marker::PhantomData,
        }
    }

    /// This process's value, made on the first call (in this process).
    pub(crate) fn get(&self) -> &T {
        let generation = fork_generation();
        let mut seen = self.current.load(Ordering::Acquire);
        loop {
            if !seen.is_null() {
                // SAFETY: a published pointer is a leaked box that is freed only by
                // `drop`, which takes `&mut self`, so no `&self` (ours) outlives it.
                let stamped = unsafe { &*seen };
                if stamped.generation == generation {
                    return &stamped.value;
                }
            }
            // None yet, or the parent's: publish a new one (the parent's stays leaked).
            let fresh = Box::into_raw(Box::new(Stamped {
                generation,
                value: T::default(),
            }));
            match self
                .current
                .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: just published; freed only by `drop` (see above).
                Ok(_) => return unsafe { &(*fresh).value },
                Err(other) => {
                    // Another thread published first: ours was never shared.
                    // SAFETY: `fresh` came from `Box::into_raw` above and nobody else
                    // saw it.
                    drop(unsafe { Box::from_raw(fresh) });
                    seen = other;
                }
            }
        }
    }
}

impl<T> ForkLocal<T> {
    /// The value last published, of whatever generation: in a fork hook, the parent's
    /// (nothing in the child has called `get` yet). The parent's threads may have held
    /// it at the fork, so a hook may only `try_lock` what it holds.
    pub(crate) fn last_published(&self) -> Option<&T> {
        let published = self.current.load(Ordering::Acquire);
        // SAFETY: as in `get`: a published box is freed only by `drop`.
        (!published.is_null()).then(|| unsafe { &(*published).value })
    }
}

impl<T> Drop for ForkLocal<T> {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        if current.is_null() {
            return;
        }
        // SAFETY: the published box; `&mut self` means no reference from `get` is alive.
        let stamped = unsafe { Box::from_raw(current) };
        // A box from an older generation (the parent's, in a forked child) may be in any
        // state: leak it, as `get` does.
        if stamped.generation != FORK_GENERATION.load(Ordering::Relaxed) {
            std::mem::forget(stamped);
        }
    }
}

impl<T: Default> Default for ForkLocal<T> {
    fn default() -> ForkLocal<T> {
        ForkLocal::new()
    }
}

/// Runs `child` in a forked child of this process and says how it ended: `Ok` if it
/// returned true within 30 s. For tests of what a child does with state a parent's
/// thread held at the fork; `child` must not print (the parent's stdout lock may be
/// held) and should only allocate, lock and count.
#[cfg(test)]
pub(crate) fn run_in_forked_child(child: impl FnOnce() -> bool) -> Result<(), String> {
    // SAFETY: the child runs `child` (allocation is fork-safe in glibc; locks it takes
    // are the child's own, which is what is tested) and leaves with `_exit`, running
    // no handler or destructor of the parent's.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let passed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child));
        // SAFETY: ends the child at once (see above).
        unsafe { libc::_exit(if matches!(passed, Ok(true)) { 0 } else { 1 }) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child, without blocking.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            return if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else {
                Err(format!("the child failed (wait status {status})"))
            };
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: our own child, which has not been reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err("the child was still running after 30 s: blocked for good".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn the_child_handler_is_installed_as_the_library_loads() {
        // Before any test could call `fork_generation`: no `Once` is left to race a fork.
        assert!(INSTALLED_AT_LOAD.load(Ordering::Relaxed));
        assert!(FORK_HANDLER.is_completed());
    }

    #[test]
    fn one_value_per_process_until_dropped() {
        let local: ForkLocal<Mutex<Vec<u32>>> = ForkLocal::new();
        local.get().lock().unwrap().push(7);
        assert_eq!(*local.get().lock().unwrap(), vec![7]);
        let here = local.get() as *const Mutex<Vec<u32>> as usize;
        std::thread::scope(|scope| {
            let others: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| local.get() as *const Mutex<Vec<u32>> as usize))
                .collect();
            for other in others {
                assert_eq!(other.join().unwrap(), here, "one value for every thread");
            }
        });
    }

    #[test]
    fn a_forked_child_starts_afresh_even_from_a_value_locked_at_the_fork() {
        let local: ForkLocal<Mutex<Vec<u32>>> = ForkLocal::new();
        local.get().lock().unwrap().push(1);
        let generation = fork_generation();
        // Held across the fork, as a thread of the parent may hold it: in the child the
        // lock would stay taken for good.
        let held = local.get().lock().unwrap();
        let child = run_in_forked_child(|| {
            let fresh = local.get().lock().unwrap().is_empty();
            local.get().lock().unwrap().push(2);
            let kept = *local.get().lock().unwrap() == vec![2];
            fresh && kept && fork_generation() == generation + 1
        });
        drop(held);
        child.unwrap();
        assert_eq!(
            *local.get().lock().unwrap(),
            vec![1],
            "the parent's own value"
        );
        assert_eq!(fork_generation(), generation);
    }
}
