//! Page-aligned heap buffers: O_DIRECT needs the address aligned, and a ring
//! entry points at this memory until its completion is reaped, so the memory
//! must not move when the owning struct moves (it does not: only the pointer moves).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf uniquely owns its allocation, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// `len_bytes` zeroed bytes aligned to 4096 (at least one byte is allocated).
    pub fn new(len_bytes: usize) -> anyhow::Result<AlignedBuf> {
        let layout = Layout::from_size_align(len_bytes.max(1), 4096)
            .map_err(|_| anyhow::anyhow!("--block-size {len_bytes} is too large for one buffer"))?;
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)
            .ok_or_else(|| anyhow::anyhow!("out of memory allocating a {len_bytes}-byte buffer; lower --block-size, --entries or --threads"))?;
        Ok(AlignedBuf { ptr, layout })
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is a live allocation of layout.size() bytes owned by self,
        // and &mut self guarantees no other reference to it exists.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is a live allocation of layout.size() bytes owned by self; the
        // shared borrow of self rules out a &mut to it, and a ring only writes a buffer
        // while it is in flight, when its owner hands out no slice of it.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligned_and_sized() {
        let mut buf = super::AlignedBuf::new(4096 * 3).unwrap();
        assert_eq!(buf.as_ptr() as usize % 4096, 0);
        assert_eq!(buf.len(), 4096 * 3);
        buf.as_mut_slice()[4096 * 3 - 1] = 9;
        assert_eq!(buf.as_slice()[4096 * 3 - 1], 9);
    }
}
