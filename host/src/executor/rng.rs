//! A per-executor random number generator: SplitMix64, no locking.
//!
//! Edge ids and root ids are random 64-bit numbers (Storm's
//! `MessageId.generateId`). They only need to be unpredictable enough that
//! XOR collisions are negligible, not cryptographically strong.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators").
#[derive(Debug, Clone)]
pub struct FastRng {
    state: u64,
}

impl FastRng {
    /// A generator seeded from `seed` and the process's randomised hasher keys.
    pub fn new(seed: u64) -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(seed);
        Self { state: h.finish() }
    }

    /// The next 64-bit number.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next non-zero 64-bit number (zero would be invisible in an XOR).
    #[inline]
    pub fn next_nonzero(&mut self) -> u64 {
        loop {
            let v = self.next_u64();
            if v != 0 {
                return v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_with_the_same_seed_differ_across_instances_and_never_yield_zero() {
        let mut a = FastRng::new(1);
        let mut b = FastRng::new(1);
        let xs: Vec<u64> = (0..100).map(|_| a.next_nonzero()).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.next_nonzero()).collect();
        assert_ne!(xs, ys);
        assert!(xs.iter().all(|&x| x != 0));
        let distinct: std::collections::HashSet<_> = xs.iter().collect();
        assert_eq!(distinct.len(), 100);
    }
}
