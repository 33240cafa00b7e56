//! A tiny, fast, non-locking random number generator.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a Weyl sequence passed through a mixing
/// function. One add, two multiplies and three shifts per number, no lock and
/// no allocation; plenty for picking sentences.
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

    /// Where the sequence is: `SplitMix64::new(g.position())` goes on as
    /// `g` would (a live swap hands it to the new instance).
    pub(crate) fn position(&self) -> u64 {
        self.state
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by Lemire's multiply-and-shift, which
    /// avoids a division; its bias (at most n / 2^64) does not matter here.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
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
    fn below_stays_in_range_and_hits_every_value() {
        let mut rng = SplitMix64::new(7);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            seen[rng.below(5) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 1_500), "{seen:?}");
    }

    #[test]
    fn stream_zero_is_the_seed_itself() {
        assert_eq!(SplitMix64::for_stream(9, 0).next_u64(), SplitMix64::new(9).next_u64());
        assert_ne!(SplitMix64::for_stream(9, 1).next_u64(), SplitMix64::new(9).next_u64());
    }
}
