//! The one pseudo-random generator of every benchmark: SplitMix64 (Steele, Lea and
//! Flood, 2014). Tiny, fast, seedable, and the same stream on every platform, which the
//! benchmarks rely on: `bench blobs` regenerates a blob from `(seed, index)` to verify it,
//! `bench io --verify` regenerates the bytes of any file offset, and `bench speed`
//! inserts the same rows on every target so their checksums must agree.

/// Weyl-sequence increment of SplitMix64 (2^64 divided by the golden ratio, made odd).
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijective, well-avalanched mix of 64 bits.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A SplitMix64 stream.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        mix(self.0)
    }

    /// Uniform in `0..bound` (bound > 0); the modulo bias is irrelevant for benchmark data.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference outputs of SplitMix64 for seed 1234567 (from the generator's
    /// published reference implementation, splitmix64.c): the stream every benchmark's
    /// data and checksums are built from must not drift.
    #[test]
    fn matches_the_reference_stream() {
        let mut rng = SplitMix64::new(1_234_567);
        let expected = [
            6_457_827_717_110_365_317,
            3_203_168_211_198_807_973,
            9_817_491_932_198_370_423,
            4_593_380_528_125_082_431,
            16_408_922_859_458_223_821,
        ];
        for value in expected {
            assert_eq!(rng.next_u64(), value);
        }
    }

    #[test]
    fn below_stays_below_and_covers_the_range() {
        let mut rng = SplitMix64::new(7);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let value = rng.below(10);
            assert!(value < 10);
            seen[value as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
