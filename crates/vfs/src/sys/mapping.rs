//! Memory the VFS maps, owned: a [`Mapping`] is one `mmap` that `Drop` unmaps, and a
//! [`SlotRegion`] is an anonymous mapping cut into equal slots, each lent to one holder
//! at a time as a [`Slot`]. The `unsafe` of mapped memory lives here: the layers above
//! read through range-checked accessors and see raw addresses only where SQLite must get
//! one (xFetch, xShmMap) or a ring registers one.
//!
//! A raw address a `Mapping` hands out is a plain number to Rust: nothing here
//! dereferences it. That SQLite stops using one before its mapping is dropped is the
//! contract of the code that keeps the `Mapping` (`mmap.rs`: no remap or unmap while a
//! page is fetched; `shm.rs`: a WAL-index node's regions stay mapped until its last
//! connection leaves).

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::calls;

/// One mapping made by `mmap`, unmapped when dropped.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len_bytes: usize,
}

// SAFETY: a `Mapping` owns its address range, which no thread-local state backs: it may
// be dropped (unmapped) on any thread. Shared, it offers only copies out of the mapping
// (`copy_to`) and addresses, so sharing it between threads hands out no aliasing `&mut`.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len_bytes` of `fd` from `offset`, `MAP_SHARED` with protection `prot` (readable:
    /// `copy_to` reads it), through the system-call table; the errno of a failed `mmap`
    /// (a closed file's -1 gives EBADF).
    pub(crate) fn of_file(
        len_bytes: usize,
        prot: libc::c_int,
        fd: RawFd,
        offset: i64,
    ) -> Result<Mapping, i32> {
        assert!(prot & libc::PROT_READ != 0, "a mapping is readable");
        let base = calls::mmap(len_bytes, prot, libc::MAP_SHARED, fd, offset);
        if base == libc::MAP_FAILED {
            return Err(calls::last_errno());
        }
        // The kernel never places a mapping at 0 without MAP_FIXED; a replaced `mmap`
        // that answers null has failed without an errno.
        let base = NonNull::new(base.cast()).ok_or(calls::UNKNOWN_ERRNO)?;
        Ok(Mapping { base, len_bytes })
    }

    /// `len_bytes` of private, zero-filled memory that costs nothing until written
    /// (`MAP_NORESERVE`); `None` when the kernel refuses. Anonymous memory is not in the
    /// system-call table: tests cannot replace it.
    fn reserve_anonymous(len_bytes: usize) -> Option<Mapping> {
        // SAFETY: a new private mapping at an address the kernel chooses: it overlaps no
        // memory in use.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return None;
        }
        Some(Mapping {
            base: NonNull::new(start.cast())?,
            len_bytes,
        })
    }

    /// In a forked child: puts zero-filled private memory where the mapping of the
    /// parent's file was, at the same addresses, so the mapping no longer holds the file's
    /// open file description (and the parent's OFD locks on it) alive; an inherited
    /// pointer into it reads zeros instead of faulting. For a fork hook: `mmap` is a
    /// plain system call.
    pub(crate) fn let_go_of_file(&self) {
        // SAFETY: MAP_FIXED over exactly this mapping's own range, which it owns: no other
        // mapping is replaced, and the range stays mapped (readable and writable) until
        // `drop` unmaps it as before.
        unsafe {
            libc::mmap(
                self.base.as_ptr().cast(),
                self.len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
    }

    /// The address of byte `offset` (`offset < len_bytes`), for SQLite (a fetched page,
    /// a WAL-index region). Valid while `self` lives.
    pub(crate) fn address_at(&self, offset: usize) -> *mut u8 {
        assert!(offset < self.len_bytes, "address past the mapping");
        self.base.as_ptr().wrapping_add(offset)
    }

    /// Copies `buf.len()` bytes from `offset` into `buf`; the range must lie inside the
    /// mapping. A copy rather than a slice: a shared file mapping changes under us when
    /// anyone writes the file, so no `&[u8]` may claim its bytes stay put.
    pub(crate) fn copy_to(&self, offset: usize, buf: &mut [u8]) {
        let end = offset.checked_add(buf.len());
        assert!(
            end.is_some_and(|end| end <= self.len_bytes),
            "copy past the mapping"
        );
        // SAFETY: `[offset, offset + buf.len())` lies inside the live mapping (checked
        // above), which is readable (every mapping made here has PROT_READ); `buf` is a
        // Rust buffer the mapping cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().add(offset),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len_bytes` are exactly the mapping made in a constructor, and
        // it is unmapped only here, once. No Rust reference into it exists: accessors
        // copy out or hand out raw addresses, which the code holding the `Mapping` keeps
        // from being used past its drop (see the module docs).
        unsafe { calls::munmap(self.base.as_ptr().cast(), self.len_bytes) };
    }
}

/// An anonymous mapping of up to 64 equal slots, each lent to one holder at a time.
/// Kept for the life of the process (the layers above hold it in a `static`), so a ring
/// may register its pages ([`SlotRegion::start`]).
#[derive(Debug)]
pub(crate) struct SlotRegion {
    mapping: Mapping,
    slot_bytes: usize,
    slots: usize,
    /// Bit `i` set: slot `i` is free. Acquire on taking a slot, Release on returning it:
    /// the next holder's use of it happens after the previous holder's last.
    free: AtomicU64,
}

impl SlotRegion {
    /// `slots` (1..=64) slots of `slot_bytes`, zero-filled and costing nothing until
    /// written; `None` when the kernel refuses the mapping.
    pub(crate) fn reserve(slot_bytes: usize, slots: usize) -> Option<SlotRegion> {
        assert!(slot_bytes > 0 && (1..=u64::BITS as usize).contains(&slots));
        let mapping = Mapping::reserve_anonymous(slot_bytes.checked_mul(slots)?)?;
        let free = if slots == u64::BITS as usize {
            u64::MAX
        } else {
            (1u64 << slots) - 1
        };
        Some(SlotRegion {
            mapping,
            slot_bytes,
            slots,
            free: AtomicU64::new(free),
        })
    }

    /// A free slot, or `None` when every slot is lent.
    pub(crate) fn take(&'static self) -> Option<Slot> {
        let mut free = self.free.load(Ordering::Relaxed);
        loop {
            if free == 0 {
                return None;
            }
            let index = free.trailing_zeros() as usize;
            match self.free.compare_exchange_weak(
                free,
                free & !(1 << index),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Slot {
                        region: self,
                        index,
                    })
                }
                Err(now) => free = now,
            }
        }
    }

    /// Whether slot `index` is free (for invariant checks).
    #[cfg(test)]
    pub(crate) fn is_free(&self, index: usize) -> bool {
        self.free.load(Ordering::Acquire) & (1 << index) != 0
    }

    /// The region's first byte, for the rings to register.
    pub(crate) fn start(&self) -> *const u8 {
        self.mapping.base.as_ptr()
    }

    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    pub(crate) fn slots(&self) -> usize {
        self.slots
    }
}

/// One slot of a [`SlotRegion`], lent to its holder until dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    region: &'static SlotRegion,
    index: usize,
}

impl Slot {
    #[cfg(test)]
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The slot's first byte: inside the region's mapping (`index < slots`).
    fn start(&self) -> *mut u8 {
        let region = self.region;
        region.mapping.address_at(self.index * region.slot_bytes)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the slot is `slot_bytes` of the region's mapping, which lives for the
        // process (`&'static`); anonymous memory is zero-filled, so initialised; the free
        // mask lent this slot to this `Slot` alone, so only `&self`/`&mut self` reach it.
        unsafe { std::slice::from_raw_parts(self.start(), self.region.slot_bytes) }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.region.slot_bytes) }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let bit = 1u64 << self.index;
        let before = self.region.free.fetch_or(bit, Ordering::Release);
        if before & bit != 0 {
            // Two holders of one slot: one of them may have I/O naming it. Unwinding
            // would return to SQLite, which may reuse memory the kernel still uses.
            eprintln!("sqlite-uring: a mapped slot returned twice; aborting");
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_lent_once_and_come_back() {
        static REGION: std::sync::OnceLock<SlotRegion> = std::sync::OnceLock::new();
        let region = REGION.get_or_init(|| SlotRegion::reserve(4096, 2).expect("mapped"));
        let mut first = region.take().expect("a free slot");
        let second = region.take().expect("a second free slot");
        assert!(region.take().is_none());
        assert_ne!(first.index(), second.index());
        assert!(first.bytes().iter().all(|&byte| byte == 0));
        first.bytes_mut()[4095] = 7;
        assert_eq!(first.bytes()[4095], 7);
        assert_eq!(second.bytes()[4095], 0);
        let index = first.index();
        drop(first);
        assert!(region.is_free(index));
        assert_eq!(region.take().map(|slot| slot.index()), Some(index));
    }

    #[test]
    fn copies_are_range_checked() {
        let region = SlotRegion::reserve(4096, 1).expect("mapped");
        let mut buf = [1u8; 16];
        region.mapping.copy_to(4080, &mut buf);
        assert_eq!(buf, [0; 16]);
        let past = std::panic::catch_unwind(move || {
            let mut buf = [0u8; 16];
            region.mapping.copy_to(4081, &mut buf);
        });
        assert!(past.is_err());
    }
}
