//! The memory rings may register with the kernel (IORING_REGISTER_BUFFERS).
//!
//! **Registered-buffer rule.** A ring that registers memory pins its pages for as long as
//! the ring lives, and then writes from it without pinning them per I/O
//! (IORING_OP_WRITE_FIXED). A registered range must therefore never be freed or remapped
//! while any ring lives — a ring would go on writing from the old pages. So the only
//! memory ever offered for registration is [`fixed_region`]: the write-behind arena,
//! allocated once and never freed (`write_behind.rs`).

/// Where the memory rings may register lives, `(address, length)`; published once.
static FIXED_REGION: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

/// Environment switch: `SQLITE_URING_REGISTER_BUFFERS=off` keeps rings from registering
/// the arena (for measuring what registration buys, or under a tight RLIMIT_MEMLOCK).
pub(crate) const REGISTER_BUFFERS_ENV: &str = "SQLITE_URING_REGISTER_BUFFERS";

/// Offers `len` bytes at `start` to the rings for registration; only the first region
/// offered is kept.
///
/// # Safety
/// The memory must stay allocated, at this address, until the process exits (the
/// registered-buffer rule): rings keep writing from the pages they pinned.
pub(crate) unsafe fn publish_fixed_region(start: *const u8, len: usize) {
    assert!(!start.is_null() && len > 0);
    let _ = FIXED_REGION.set((start as usize, len));
}

/// Whether `SQLITE_URING_REGISTER_BUFFERS=off` (or `0`) was set; read once.
pub(crate) fn buffer_registration_switched_off() -> bool {
    static SWITCHED_OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SWITCHED_OFF.get_or_init(|| {
        std::env::var(REGISTER_BUFFERS_ENV).is_ok_and(|value| value == "off" || value == "0")
    })
}

/// The region a ring may register: `None` before the arena exists, or when registration
/// is switched off.
pub(crate) fn fixed_region() -> Option<(usize, usize)> {
    if buffer_registration_switched_off() {
        None
    } else {
        FIXED_REGION.get().copied()
    }
}
