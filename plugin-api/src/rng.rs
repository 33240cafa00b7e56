//! A small, fast random number generator for plugins, the host and tests:
//! SplitMix64.
//!
//! Plain Rust, not part of the stable ABI: nothing here crosses the
//! plugin boundary, so a plugin and the host each compile their own copy and
//! a library built against an older contract is unaffected. It is not
//! cryptographic. It is what squall itself uses for edge and root ids (the
//! host), sentence picking (the example spout) and fault injection (the
//! test kit).
//!
//! ```
//! use squall_plugin_api::rng::SplitMix64;
//!
//! let mut rng = SplitMix64::new(42);
//! let die = 1 + rng.below(6);
//! assert!((1..=6).contains(&die));
//! // The same seed gives the same sequence; a saved position goes on from there.
//! let mut again = SplitMix64::new(42);
//! assert_eq!(again.below(6) + 1, die);
//! let mut resumed = SplitMix64::new(again.position());
//! assert_eq!(resumed.next_u64(), again.next_u64());
//! ```

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a Weyl sequence passed through a mixing
/// function. One add, two multiplies and three shifts per number, no lock and
/// no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The Weyl increment: 2^64 divided by the golden ratio, made odd.
    pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// A generator whose sequence is fixed by `seed`.
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator for stream `index` of `seed` (one per task, say): index 0
    /// is `seed` itself, other indexes start at unrelated points of the
    /// sequence.
    pub fn for_stream(seed: u64, index: u64) -> Self {
        if index == 0 {
            Self::new(seed)
        } else {
            Self::new(seed ^ Self::new(index).next_u64())
        }
    }

    /// A generator seeded from `salt` and the process's randomised hasher
    /// keys (std's `RandomState`): two generators, in one process or two,
    /// differ even with the same salt. Unpredictable enough for random ids
    /// whose collisions must be negligible; not cryptographic.
    pub fn unpredictable(salt: u64) -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        Self::new(h.finish())
    }

    /// Where the sequence is: `SplitMix64::new(g.position())` goes on as
    /// `g` would (a live swap can hand it to the new instance).
    pub const fn position(&self) -> u64 {
        self.state
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        Self::mix(self.state)
    }

    /// The next number that is not zero (a zero would be invisible in an
    /// XOR, as acker ids are).
    #[inline]
    pub fn next_nonzero(&mut self) -> u64 {
        loop {
            let v = self.next_u64();
            if v != 0 {
                return v;
            }
        }
    }

    /// A number in `0..n` (`n > 0`), by Lemire's multiply-and-shift, which
    /// avoids a division; its bias is at most n / 2^64.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A float uniformly distributed in `[0, 1)`: the top 53 bits of the next
    /// number, scaled by 2^-53, so every value is exactly representable.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// SplitMix64's finalizer: a bijection on `u64` in which every input bit
    /// affects every output bit. Spreads sequential or nearby numbers (ids,
    /// seeds) evenly.
    #[inline]
    pub const fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_splitmix64s() {
        // The first outputs for seed 0 and seed 1234567, as the reference C
        // implementation (`splitmix64.c`, Vigna) gives them.
        let mut zero = SplitMix64::new(0);
        assert_eq!(zero.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(zero.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut other = SplitMix64::new(1_234_567);
        assert_eq!(other.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(other.next_u64(), 3_203_168_211_198_807_973);
    }

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
    fn a_position_resumes_the_sequence() {
        let mut a = SplitMix64::new(5);
        a.next_u64();
        let mut b = SplitMix64::new(a.position());
        for _ in 0..10 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn stream_zero_is_the_seed_itself() {
        assert_eq!(SplitMix64::for_stream(9, 0).next_u64(), SplitMix64::new(9).next_u64());
        assert_ne!(SplitMix64::for_stream(9, 1).next_u64(), SplitMix64::new(9).next_u64());
        assert_ne!(
            SplitMix64::for_stream(9, 1).next_u64(),
            SplitMix64::for_stream(9, 2).next_u64()
        );
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
    fn unpredictable_generators_differ_with_the_same_salt_and_never_yield_zero() {
        let mut a = SplitMix64::unpredictable(1);
        let mut b = SplitMix64::unpredictable(1);
        let xs: Vec<u64> = (0..100).map(|_| a.next_nonzero()).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.next_nonzero()).collect();
        assert_ne!(xs, ys);
        assert!(xs.iter().all(|&x| x != 0));
        let distinct: std::collections::HashSet<_> = xs.iter().collect();
        assert_eq!(distinct.len(), 100);
    }

    #[test]
    fn mix_is_the_step_without_the_increment() {
        let mut rng = SplitMix64::new(3);
        assert_eq!(rng.next_u64(), SplitMix64::mix(3u64.wrapping_add(SplitMix64::GAMMA)));
        assert_eq!(SplitMix64::mix(0), 0, "the finalizer fixes zero");
        assert_ne!(SplitMix64::mix(1), 1);
    }
}
