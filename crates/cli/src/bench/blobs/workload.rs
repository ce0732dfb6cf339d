//! Deterministic workload generation: distinct keys, distinct contents, checksums.
//!
//! Everything derives from `(seed, index)`, so a blob can be regenerated at any time
//! instead of being kept in memory (10,000 blobs of 2 MB would not fit).

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::bench::common::rng::{SplitMix64, GOLDEN_GAMMA};

/// What the blobs contain: decides what compression can gain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContentKind {
    /// Word-salad text from a 64-word vocabulary: zstd shrinks it about 3-4×.
    Text,
    /// Uniformly random bytes: incompressible, zstd can only add its frame overhead.
    Random,
}

impl ContentKind {
    pub fn name(self) -> &'static str {
        match self {
            ContentKind::Text => "text",
            ContentKind::Random => "random",
        }
    }
}

const WORDS: [&str; 64] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "file", "page", "write",
    "read", "commit", "journal", "sqlite", "kernel", "ring", "queue", "block", "cache", "blob",
    "index", "table", "value",
];

/// The smallest blob size for which every index up to 2^32 gets distinct content.
pub const MIN_SIZE_BYTES: u64 = 16;

/// The blobs of one case: key `i` and content `i` for `i` in `0..count`.
#[derive(Clone, Debug)]
pub struct Workload {
    pub seed: u64,
    pub size_bytes: usize,
    pub content: ContentKind,
}

impl Workload {
    /// Name of file `index`, in one of 1000 directories: consecutive files land in 1000
    /// places of the primary-key index, as the files of a tree would, not all at its end.
    pub fn key(&self, index: u64) -> String {
        format!("dir{:03}/file-{index:010}.dat", index % 1000)
    }

    /// Content of file `index`, exactly `size_bytes` long.
    ///
    /// It starts with the index in hex and a space; that header is prefix-free, so two
    /// indices never give the same bytes as long as the header fits (sizes ≥ 16 B).
    pub fn content(&self, index: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_bytes + 16);
        out.extend_from_slice(format!("{index:x} ").as_bytes());
        // Mix the seed and index so neighbouring files do not share a stream.
        let mut rng = SplitMix64::new(self.seed ^ index.wrapping_mul(0xA24B_AED4_963E_E407));
        match self.content {
            ContentKind::Text => {
                while out.len() < self.size_bytes {
                    let r = rng.next_u64();
                    // 6 bits pick a word; the rest decide punctuation, so text is not
                    // one endless line (which would compress unrealistically well).
                    out.extend_from_slice(WORDS[(r & 63) as usize].as_bytes());
                    match (r >> 6) % 16 {
                        0 => out.extend_from_slice(b".\n"),
                        1 => out.extend_from_slice(b", "),
                        2 => out.extend_from_slice(format!(" {} ", (r >> 10) % 10_000).as_bytes()),
                        _ => out.push(b' '),
                    }
                }
            }
            ContentKind::Random => {
                while out.len() < self.size_bytes {
                    out.extend_from_slice(&rng.next_u64().to_le_bytes());
                }
            }
        }
        out.truncate(self.size_bytes);
        out
    }
}

/// 64-bit checksum of a blob (length included), to verify what is read back.
///
/// Not cryptographic: it only has to catch a wrong, truncated or corrupted blob.
pub fn checksum(data: &[u8]) -> u64 {
    const PRIME: u64 = GOLDEN_GAMMA;
    let mut hash = 0xCBF2_9CE4_8422_2325 ^ (data.len() as u64).wrapping_mul(PRIME);
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunks_exact gives 8 bytes"));
        hash = (hash ^ word).wrapping_mul(PRIME).rotate_left(29);
    }
    for &byte in chunks.remainder() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(PRIME).rotate_left(29);
    }
    // Final avalanche so that a one-bit change in the last word spreads.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    hash ^ (hash >> 33)
}

/// The order in which `count` written files are read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadOrder {
    Sequential,
    Random,
}

/// Indices `0..count` in read order; the random order is a seeded Fisher-Yates shuffle.
pub fn read_order(order: ReadOrder, count: u64, seed: u64) -> Vec<u64> {
    let mut indices: Vec<u64> = (0..count).collect();
    if order == ReadOrder::Random {
        let mut rng = SplitMix64::new(seed ^ 0x5EAD_0A0D_E15E_EDED);
        for i in (1..indices.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            indices.swap(i, j);
        }
    }
    indices
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn workload(size_bytes: usize, content: ContentKind) -> Workload {
        Workload {
            seed: 42,
            size_bytes,
            content,
        }
    }

    #[test]
    fn keys_and_contents_are_distinct_and_sized() {
        for content in [ContentKind::Text, ContentKind::Random] {
            for size in [16usize, 64, 1000, 300_000] {
                let w = workload(size, content);
                let count = if size > 1000 { 50 } else { 5000 };
                let mut keys = HashSet::new();
                let mut sums = HashSet::new();
                for i in 0..count {
                    let blob = w.content(i);
                    assert_eq!(blob.len(), size);
                    assert!(keys.insert(w.key(i)), "duplicate key {i}");
                    assert!(
                        sums.insert(checksum(&blob)),
                        "duplicate content {i} at {size}"
                    );
                }
            }
        }
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        let a = workload(300, ContentKind::Text);
        let b = workload(300, ContentKind::Text);
        assert_eq!(a.content(7), b.content(7));
        assert_eq!(a.key(7), b.key(7));
        let c = Workload {
            seed: 43,
            ..a.clone()
        };
        assert_ne!(a.content(7), c.content(7));
        assert_eq!(
            read_order(ReadOrder::Random, 100, 1),
            read_order(ReadOrder::Random, 100, 1)
        );
    }

    #[test]
    fn read_orders_are_permutations() {
        assert_eq!(read_order(ReadOrder::Sequential, 5, 9), vec![0, 1, 2, 3, 4]);
        let mut shuffled = read_order(ReadOrder::Random, 1000, 9);
        assert_ne!(shuffled, (0..1000).collect::<Vec<_>>());
        shuffled.sort_unstable();
        assert_eq!(shuffled, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn checksum_sees_small_changes() {
        let blob = workload(2000, ContentKind::Random).content(3);
        let mut flipped = blob.clone();
        flipped[1999] ^= 1;
        assert_ne!(checksum(&blob), checksum(&flipped));
        assert_ne!(checksum(&blob), checksum(&blob[..1999]));
        assert_ne!(checksum(b""), checksum(b"\0"));
    }
}
