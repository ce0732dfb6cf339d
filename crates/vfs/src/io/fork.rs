//! What happens in a child after `fork()`: a generation counter (a ring made before the
//! fork belongs to the parent) and a list of hooks the layers above register, such as
//! the write-behind queue forgetting the parent's queued writes. A leaf of `io/`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Bumped in the child after every `fork()`. A forked child inherits its parent's ring
/// mappings: submitting on them would mix the child's I/O into the parent's queues, so a
/// ring from an older generation is abandoned (the parent still uses it) and a new one
/// is created.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static FORK_HANDLER: std::sync::Once = std::sync::Once::new();

/// Most hooks that can be registered (the write-behind queue, the WAL-index nodes and
/// the database lock states use one each).
const MAX_HOOKS: usize = 8;

/// Registered hooks, as `fn()` pointers cast to usize (0 = empty slot): plain atomics, so
/// the child reads them without taking a lock another thread of the parent may have held.
static HOOKS: [AtomicUsize; MAX_HOOKS] = [const { AtomicUsize::new(0) }; MAX_HOOKS];

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

fn install_handler() {
    FORK_HANDLER.call_once(|| {
        // A child handler that only touches atomics and runs the registered hooks, each
        // of which must be safe in the single-threaded child (they only `try_lock`).
        crate::sys::at_fork_in_child(after_fork_in_child);
    });
}

/// The current fork generation (installs the child handler on first use).
pub(crate) fn fork_generation() -> u64 {
    install_handler();
    FORK_GENERATION.load(Ordering::Relaxed)
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

/// A process-wide list of shared per-file state (the WAL-index nodes, the database lock
/// states), one list per process: a forked child starts from an empty one. The list sits
/// behind a pointer so that the child can drop it without taking a lock a thread of its
/// parent may have held at the fork; the parent's list is leaked in the child (its
/// entries belong to the parent's connections).
pub(crate) struct ProcessRegistry<T> {
    list: std::sync::atomic::AtomicPtr<std::sync::Mutex<Vec<std::sync::Arc<T>>>>,
}

impl<T> ProcessRegistry<T> {
    pub(crate) const fn new() -> ProcessRegistry<T> {
        ProcessRegistry {
            list: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This process's list. `forget` is the `fn()` that calls [`Self::forget`] on this
    /// registry; it is registered as a fork hook when the list is first made.
    pub(crate) fn list(
        &'static self,
        forget: fn(),
    ) -> &'static std::sync::Mutex<Vec<std::sync::Arc<T>>> {
        let current = self.list.load(Ordering::Acquire);
        if !current.is_null() {
            // SAFETY: lists are leaked boxes, never freed, so the pointer stays valid.
            return unsafe { &*current };
        }
        let fresh = Box::into_raw(Box::new(std::sync::Mutex::new(Vec::new())));
        match self.list.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                register_child_hook(forget);
                // SAFETY: just leaked above; never freed.
                unsafe { &*fresh }
            }
            Err(existing) => {
                // SAFETY: `fresh` was never published; we still own it.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above, lists are never freed.
                unsafe { &*existing }
            }
        }
    }

    /// For the fork hook: the child's next user makes a new list. Touches one atomic.
    pub(crate) fn forget(&self) {
        self.list.store(std::ptr::null_mut(), Ordering::Release);
    }
}
