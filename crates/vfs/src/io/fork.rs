//! What happens in a child after `fork()`: the fork generation (a ring made before the
//! fork belongs to the parent: a forked child inherits its parent's ring mappings, and
//! submitting on them would mix the child's I/O into the parent's queues, so a ring of
//! an older generation is abandoned and a new one created) and a list of hooks the
//! layers above register, such as the write-behind queue forgetting the parent's queued
//! writes. Process-wide lists a child must start afresh are `sys::fork::ForkLocal`s. A
//! leaf of `io/`.

use std::sync::atomic::{AtomicUsize, Ordering};

pub(crate) use crate::sys::fork::fork_generation;

static FORK_HANDLER: std::sync::Once = std::sync::Once::new();

/// Most hooks that can be registered (the write-behind queue uses one).
const MAX_HOOKS: usize = 8;

/// Registered hooks, as `fn()` pointers cast to usize (0 = empty slot): plain atomics, so
/// the child reads them without taking a lock another thread of the parent may have held.
static HOOKS: [AtomicUsize; MAX_HOOKS] = [const { AtomicUsize::new(0) }; MAX_HOOKS];

extern "C" fn after_fork_in_child() {
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
