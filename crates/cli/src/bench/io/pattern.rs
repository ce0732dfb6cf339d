//! Data written by every method: a seeded counter-based generator, so any
//! thread can produce the bytes of any offset on its own, and `--verify` can
//! regenerate them. Not zeros (IO Playground's dd and one implementation wrote
//! zeros or allocator filler, which compressing or deduplicating storage
//! would store for free).
//!
//! Not a statistical PRNG: it only has to be cheap, seeded, position-dependent
//! and not trivially compressible or deduplicable.

use std::os::unix::fs::FileExt;

use crate::bench::common::rng;

/// Words per 4 KiB page: each page gets its own key.
const PAGE_WORDS: u64 = 512;
/// Odd step of the per-page Weyl sequence (2^64 / golden ratio).
const STEP: u64 = rng::GOLDEN_GAMMA;

/// SplitMix64's finalizer: a well-mixed 64-bit key per (seed, page).
#[inline]
fn page_key(seed: u64, page: u64) -> u64 {
    rng::mix(page.wrapping_mul(STEP) ^ seed)
}

/// Word `index` (8 bytes at file offset 8×index) of the stream for `seed`: the
/// page's key plus a Weyl sequence. One mixed key per 4 KiB and one add per
/// word keeps generation far below the cost of the write itself (~50 ns per
/// 4 KiB), while every page (and so every misplaced write) differs.
#[inline]
fn word(seed: u64, index: u64) -> u64 {
    page_key(seed, index / PAGE_WORDS).wrapping_add((index % PAGE_WORDS).wrapping_mul(STEP))
}

/// Fills `buf` with the bytes that belong at file offset `offset`.
pub fn fill(buf: &mut [u8], seed: u64, offset: u64) {
    if offset.is_multiple_of(8) && buf.len().is_multiple_of(8) {
        // Fast path (every write of an aligned run): page by page, one key each.
        let mut index = offset / 8;
        let mut rest = buf;
        while !rest.is_empty() {
            let in_page = (PAGE_WORDS - index % PAGE_WORDS) as usize;
            let take = (in_page * 8).min(rest.len());
            let (head, tail) = rest.split_at_mut(take);
            let key = page_key(seed, index / PAGE_WORDS);
            let first = index % PAGE_WORDS;
            for (j, chunk) in head.chunks_exact_mut(8).enumerate() {
                let value = key.wrapping_add((first + j as u64).wrapping_mul(STEP));
                chunk.copy_from_slice(&value.to_le_bytes());
            }
            index += (take / 8) as u64;
            rest = tail;
        }
        return;
    }
    for (i, byte) in buf.iter_mut().enumerate() {
        let position = offset + i as u64;
        *byte = word(seed, position / 8).to_le_bytes()[(position % 8) as usize];
    }
}

/// What `--verify` found wrong.
#[derive(Debug, PartialEq, Eq)]
pub enum VerifyError {
    Length {
        expected_bytes: u64,
        actual_bytes: u64,
    },
    Mismatch {
        offset: u64,
        expected: u8,
        actual: u8,
    },
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Length { expected_bytes, actual_bytes } => write!(
                f,
                "file is {actual_bytes} bytes, expected {expected_bytes}: writes were lost or doubled"
            ),
            VerifyError::Mismatch { offset, expected, actual } => write!(
                f,
                "byte at offset {offset} is {actual:#04x}, expected {expected:#04x}: a write went to the wrong place or was torn"
            ),
        }
    }
}

/// Reads the whole file back and compares it with the generator.
pub fn verify(
    file: &std::fs::File,
    seed: u64,
    size_bytes: u64,
) -> anyhow::Result<Result<(), VerifyError>> {
    let actual_bytes = file.metadata()?.len();
    if actual_bytes != size_bytes {
        return Ok(Err(VerifyError::Length {
            expected_bytes: size_bytes,
            actual_bytes,
        }));
    }
    const CHUNK_BYTES: usize = 1 << 20;
    let mut read = vec![0u8; CHUNK_BYTES];
    let mut expected = vec![0u8; CHUNK_BYTES];
    let mut offset = 0u64;
    while offset < size_bytes {
        let len = (size_bytes - offset).min(CHUNK_BYTES as u64) as usize;
        file.read_exact_at(&mut read[..len], offset)?;
        fill(&mut expected[..len], seed, offset);
        if read[..len] != expected[..len] {
            let at = read[..len]
                .iter()
                .zip(&expected[..len])
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Ok(Err(VerifyError::Mismatch {
                offset: offset + at as u64,
                expected: expected[at],
                actual: read[at],
            }));
        }
        offset += len as u64;
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn deterministic_and_not_zeros() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        fill(&mut a, 7, 8192);
        fill(&mut b, 7, 8192);
        assert_eq!(a, b);
        assert!(
            a.iter().filter(|&&x| x == 0).count() < 64,
            "looks like zeros"
        );
        fill(&mut b, 8, 8192);
        assert_ne!(a, b, "seed must matter");
        fill(&mut b, 7, 12288);
        assert_ne!(a, b, "offset must matter");
    }

    #[test]
    fn unaligned_pieces_match_the_aligned_stream() {
        let mut whole = vec![0u8; 10_000];
        fill(&mut whole, 3, 0);
        for (offset, len) in [
            (1usize, 7usize),
            (5, 4096),
            (4095, 3),
            (9000, 1000),
            (4088, 16),
            (8, 8192),
        ] {
            let mut piece = vec![0u8; len];
            fill(&mut piece, 3, offset as u64);
            assert_eq!(piece, whole[offset..offset + len]);
        }
    }

    fn written(size: usize, seed: u64) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let mut data = vec![0u8; size];
        fill(&mut data, seed, 0);
        file.write_all(&data).unwrap();
        file.flush().unwrap();
        file
    }

    #[test]
    fn verify_accepts_a_correct_file() {
        let file = written(3 << 20, 11);
        assert_eq!(verify(file.as_file(), 11, 3 << 20).unwrap(), Ok(()));
    }

    #[test]
    fn verify_catches_one_corrupted_byte() {
        let file = written((2 << 20) + 123, 11);
        let offset = (1 << 20) + 77;
        let mut byte = [0u8];
        file.as_file().read_exact_at(&mut byte, offset).unwrap();
        file.as_file()
            .write_all_at(&[byte[0] ^ 0x01], offset)
            .unwrap();
        match verify(file.as_file(), 11, (2 << 20) + 123).unwrap() {
            Err(VerifyError::Mismatch { offset: at, .. }) => assert_eq!(at, offset),
            other => panic!("corruption not caught: {other:?}"),
        }
    }

    #[test]
    fn verify_catches_wrong_length_and_wrong_seed() {
        let file = written(8192, 1);
        assert!(matches!(
            verify(file.as_file(), 1, 4096).unwrap(),
            Err(VerifyError::Length { .. })
        ));
        assert!(matches!(
            verify(file.as_file(), 2, 8192).unwrap(),
            Err(VerifyError::Mismatch { offset: 0, .. })
        ));
    }
}
