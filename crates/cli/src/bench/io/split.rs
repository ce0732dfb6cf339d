//! Splitting the file into one range per thread.
//!
//! IO Playground divided the size by the thread count, which gives ranges that
//! start mid-page (so O_DIRECT fails) and can lose the remainder. Here every
//! boundary is a multiple of both 4096 and the block size, the ranges are
//! disjoint, and together they cover `0..size` exactly once.

use std::ops::Range;

/// Boundaries are multiples of this, so every write but the file's last one is a
/// whole block and every range starts page-aligned (O_DIRECT-safe).
pub fn split_unit_bytes(block_size_bytes: u64) -> u64 {
    lcm(block_size_bytes.max(1), 4096)
}

/// `threads` ranges of `0..size_bytes`, as even as whole units allow, in order.
/// Threads beyond the number of units get empty ranges (they start and stop
/// the clock like the others but write nothing).
pub fn split_ranges(size_bytes: u64, block_size_bytes: u64, threads: u32) -> Vec<Range<u64>> {
    let threads = u64::from(threads.max(1));
    let unit = split_unit_bytes(block_size_bytes);
    let units = size_bytes.div_ceil(unit);
    (0..threads)
        .map(|i| {
            // u128: units × threads can exceed u64 for absurd sizes; never panic.
            let first = (u128::from(units) * u128::from(i) / u128::from(threads)) as u64;
            let last = (u128::from(units) * u128::from(i + 1) / u128::from(threads)) as u64;
            let start = first.saturating_mul(unit).min(size_bytes);
            let end = last.saturating_mul(unit).min(size_bytes);
            start..end
        })
        .collect()
}

/// The writes of one range: `(offset, length)` in block-size steps; only the
/// file's very last write may be shorter than a block.
pub fn blocks(range: Range<u64>, block_size_bytes: u64) -> impl Iterator<Item = (u64, usize)> {
    let step = block_size_bytes.max(1);
    let end = range.end;
    (range.start..end)
        .step_by(step as usize)
        .map(move |offset| (offset, (end - offset).min(step) as usize))
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(size: u64, block: u64, threads: u32) {
        let ranges = split_ranges(size, block, threads);
        assert_eq!(ranges.len(), threads as usize);
        let unit = split_unit_bytes(block);
        let mut expected_start = 0;
        for range in &ranges {
            // Contiguous in order ⇒ disjoint and gap-free.
            assert_eq!(range.start, expected_start, "gap or overlap in {ranges:?}");
            assert!(range.start <= range.end);
            assert_eq!(range.start % 4096, 0, "unaligned start in {ranges:?}");
            assert_eq!(range.start % block, 0, "start not on a block in {ranges:?}");
            if range.end != size {
                assert_eq!(range.end % unit, 0, "unaligned end in {ranges:?}");
            }
            expected_start = range.end;
        }
        assert_eq!(expected_start, size, "ranges do not cover the file");
        // Every byte exactly once, through the per-block iterator the writers use.
        let mut covered = 0u64;
        let mut next = 0u64;
        for range in ranges {
            for (offset, len) in blocks(range, block) {
                assert_eq!(offset, next);
                assert!(len as u64 <= block && len > 0);
                next += len as u64;
                covered += len as u64;
            }
        }
        assert_eq!(covered, size);
    }

    proptest! {
        #[test]
        fn ranges_are_disjoint_aligned_complete(
            size in 0u64..50_000_000,
            block_pages in 1u64..64,
            threads in 1u32..300,
        ) {
            check(size, block_pages * 4096, threads);
        }

        #[test]
        fn odd_block_sizes_still_split_on_pages(
            size in 0u64..5_000_000,
            block in 1u64..20_000,
            threads in 1u32..40,
        ) {
            check(size, block, threads);
        }
    }

    #[test]
    fn playground_case_and_edges() {
        check(1 << 30, 4096, 100);
        check(1 << 30, 4096, 1);
        check(4096, 4096, 100);
        check(1, 4096, 3);
        check(0, 4096, 3);
        // IO Playground's 1 GiB / 100 threads = 10737418.24 bytes: not aligned.
        let ranges = split_ranges(1 << 30, 4096, 100);
        assert!(ranges.iter().all(|r| r.start % 4096 == 0));
    }

    #[test]
    fn huge_sizes_do_not_overflow() {
        let ranges = split_ranges(u64::MAX - 5, 4096, 1000);
        assert_eq!(ranges.last().unwrap().end, u64::MAX - 5);
    }
}
