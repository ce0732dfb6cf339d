//! The memory rings may register with the kernel (IORING_REGISTER_BUFFERS).
//!
//! **Registered-buffer rule.** A ring that registers memory pins its pages for as long as
//! the ring lives, and then writes from it without pinning them per I/O
//! (IORING_OP_WRITE_FIXED). A registered range must therefore never be freed or remapped
//! while any ring lives — a ring would go on writing from the old pages. So the only
//! memory ever offered for registration is [`fixed_region`]: the write-behind arena
//! region, reserved once and never freed or remapped (`write_behind.rs`). It is cut into
//! equal slots, one per queue holding writes; a ring registers a slot (as the buffer of
//! the same index in a sparse table) the first time it writes from it, so a ring pins
//! only the slots it uses.

use crate::sys::SlotRegion;

/// The memory rings may register: `slots` slots of `slot_bytes` each from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FixedRegion {
    pub(crate) start: usize,
    pub(crate) slot_bytes: usize,
    pub(crate) slots: usize,
}

impl FixedRegion {
    /// The slot that holds all of `len` bytes at `buf`, if one does.
    pub(crate) fn slot_of(&self, buf: *const u8, len: usize) -> Option<usize> {
        let offset = (buf as usize).checked_sub(self.start)?;
        let slot = offset / self.slot_bytes;
        let slot_end = (slot + 1) * self.slot_bytes;
        (slot < self.slots && offset + len <= slot_end).then_some(slot)
    }

    /// The address of slot `index`.
    pub(crate) fn slot_start(&self, index: usize) -> usize {
        self.start + index * self.slot_bytes
    }
}

/// Where the memory rings may register lives; published once.
static FIXED_REGION: std::sync::OnceLock<FixedRegion> = std::sync::OnceLock::new();

/// Most slots a region may have: rings keep a bit per slot in a `u64`.
pub(crate) const MAX_FIXED_SLOTS: usize = 64;

/// Environment switch: `SQLITE_URING_REGISTER_BUFFERS=off` keeps rings from registering
/// the arena (for measuring what registration buys, or under a tight RLIMIT_MEMLOCK).
pub(crate) const REGISTER_BUFFERS_ENV: &str = "SQLITE_URING_REGISTER_BUFFERS";

/// Offers `region`'s slots to the rings for registration; only the first region offered
/// is kept. A `&'static` region is never unmapped, which is what the registered-buffer
/// rule asks: rings keep writing from the pages they pinned.
pub(crate) fn publish_fixed_region(region: &'static SlotRegion) {
    assert!(region.slots() <= MAX_FIXED_SLOTS);
    let _ = FIXED_REGION.set(FixedRegion {
        start: region.start() as usize,
        slot_bytes: region.slot_bytes(),
        slots: region.slots(),
    });
}

/// Whether `SQLITE_URING_REGISTER_BUFFERS=off` (or `0`) was set; read once.
pub(crate) fn buffer_registration_switched_off() -> bool {
    static SWITCHED_OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SWITCHED_OFF.get_or_init(|| {
        std::env::var(REGISTER_BUFFERS_ENV).is_ok_and(|value| value == "off" || value == "0")
    })
}

/// The region a ring may register: `None` before the arena region exists, or when
/// registration is switched off.
pub(crate) fn fixed_region() -> Option<FixedRegion> {
    if buffer_registration_switched_off() {
        None
    } else {
        FIXED_REGION.get().copied()
    }
}
