//! The seeded generator of the tests and of `examples/torture.rs` (which includes this
//! file by path), so a test can replay the draws of a torture child given the same seed:
//! rand's Xoshiro256PlusPlus, named rather than `StdRng`, whose algorithm may change
//! between rand releases.
#![allow(dead_code)] // each user needs a different subset

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// Uniform in `[0, n)`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.random_range(0..n)
    }

    /// Uniform in `[low, high]`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        self.0.random_range(low..=high)
    }
}
