//! Storm's `WaitStrategyPark` (seed 000): park a fixed time on every idle turn.

use std::time::Duration;

use crate::cancel::Canceler;

/// The park strategy. `park_micros = 0` busy-spins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Park {
    park: Duration,
}

impl Park {
    /// Parks `park_micros` µs per idle turn.
    pub fn new(park_micros: u64) -> Self {
        Self { park: Duration::from_micros(park_micros) }
    }

    /// The park time.
    pub fn duration(&self) -> Duration {
        self.park
    }

    /// Waits once; the counter goes up by one (saturating). A park of a
    /// millisecond or more ends when the drain begins (see [`super::nap`]).
    pub fn idle(&self, counter: u32, drain: &Canceler) -> u32 {
        if self.park.is_zero() {
            std::hint::spin_loop();
        } else if self.park < super::DRAIN_NAP {
            std::thread::park_timeout(self.park);
        } else {
            super::nap(self.park, drain);
        }
        counter.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn park_counts_up_and_zero_means_spin() {
        let p = Park::new(0);
        let drain = Canceler::new();
        assert_eq!(p.idle(0, &drain), 1);
        assert_eq!(p.idle(u32::MAX, &drain), u32::MAX);
        assert_eq!(Park::new(100).duration(), Duration::from_micros(100));
    }
}
