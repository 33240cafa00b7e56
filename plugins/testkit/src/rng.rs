//! A tiny, fast, non-locking random number generator.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a Weyl sequence passed through a mixing
/// function. One add, two multiplies and three shifts per number, no lock and
/// no allocation; plenty for test and benchmark components.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The Weyl increment: 2^64 divided by the golden ratio, made odd.
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// A generator whose sequence is fixed by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator for stream `index` of `seed`: index 0 is `seed` itself,
    /// other indexes start at unrelated points of the sequence.
    pub(crate) fn for_stream(seed: u64, index: u64) -> Self {
        if index == 0 {
            Self::new(seed)
        } else {
            Self::new(seed ^ Self::new(index).next_u64())
        }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float uniformly distributed in `[0, 1)`: the top 53 bits of the next
    /// number, scaled by 2^-53, so every value is exactly representable.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_the_same_sequence() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(SplitMix64::new(1).next_u64(), SplitMix64::new(2).next_u64());
    }

    #[test]
    fn next_f64_stays_in_the_unit_interval_and_spreads_out() {
        let mut rng = SplitMix64::new(7);
        let mut buckets = [0u32; 10];
        for _ in 0..10_000 {
            let r = rng.next_f64();
            assert!((0.0..1.0).contains(&r), "{r}");
            buckets[(r * 10.0) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| n > 800), "{buckets:?}");
    }

    #[test]
    fn stream_zero_is_the_seed_itself() {
        assert_eq!(SplitMix64::for_stream(9, 0).next_u64(), SplitMix64::new(9).next_u64());
        assert_ne!(SplitMix64::for_stream(9, 1).next_u64(), SplitMix64::new(9).next_u64());
    }
}
