//! Storm's `WaitStrategyProgressive` (seed 000).
//!
//! ```text
//! counter <  level1_count                 -> counter + 1, return at once (spin)
//! counter <  level1_count + level2_count  -> counter + 1, park ~1 ns
//! otherwise                               -> sleep level3_sleep_millis, counter unchanged
//! ```
//! Defaults (Storm 2.x `defaults.yaml`): spout 0/0/1, bolt 1/1000/1,
//! backpressure 1/1000/1. So an idle spout sleeps 1 ms on every idle turn,
//! and a bolt spins once, parks 1000 times (tens of µs each on Linux, because
//! of timer slack), then sleeps 1 ms per turn.

use std::time::Duration;

use crate::throttle::Canceler;

use squall_plugin_api::WaitSituation;

/// What one `idle` call does; [`Progressive::level`] is the pure decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Level 1: return at once.
    Spin,
    /// Level 2: park for about a nanosecond.
    Park,
    /// Level 3: sleep for the configured milliseconds.
    Sleep,
}

/// The progressive strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progressive {
    /// Calls that return at once.
    pub level1_count: u32,
    /// Calls after those that park ~1 ns.
    pub level2_count: u32,
    /// The sleep of every call after that, in ms.
    pub level3_sleep_millis: u64,
}

impl Progressive {
    /// A strategy with these levels.
    pub fn new(level1_count: u32, level2_count: u32, level3_sleep_millis: u64) -> Self {
        Self { level1_count, level2_count, level3_sleep_millis }
    }

    /// Storm's defaults for a situation.
    pub fn default_for(situation: WaitSituation) -> Self {
        use crate::config::defaults::{
            BACKPRESSURE_WAIT_LEVELS, BOLT_WAIT_LEVELS, SPOUT_WAIT_LEVELS,
        };
        let (l1, l2, l3) = match situation {
            WaitSituation::SPOUT_WAIT => SPOUT_WAIT_LEVELS,
            WaitSituation::BOLT_WAIT => BOLT_WAIT_LEVELS,
            _ => BACKPRESSURE_WAIT_LEVELS,
        };
        Self::new(l1, l2, l3)
    }

    /// The level for a counter, and the next counter.
    pub fn level(&self, counter: u32) -> (Level, u32) {
        if counter < self.level1_count {
            (Level::Spin, counter + 1)
        } else if counter < self.level1_count.saturating_add(self.level2_count) {
            (Level::Park, counter + 1)
        } else {
            (Level::Sleep, counter)
        }
    }

    /// Waits once; returns the next counter. A level-3 sleep ends when the
    /// drain begins (`drain` is canceled), see [`super::nap`].
    pub fn idle(&self, counter: u32, drain: &Canceler) -> u32 {
        let (level, next) = self.level(counter);
        match level {
            Level::Spin => std::hint::spin_loop(),
            Level::Park => std::thread::park_timeout(Duration::from_nanos(1)),
            Level::Sleep => super::nap(Duration::from_millis(self.level3_sleep_millis), drain),
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_maps_to_storm_levels_for_each_situation() {
        let spout = Progressive::default_for(WaitSituation::SPOUT_WAIT);
        let bolt = Progressive::default_for(WaitSituation::BOLT_WAIT);
        let bp = Progressive::default_for(WaitSituation::BACK_PRESSURE_WAIT);
        let table: &[(&Progressive, u32, Level, u32)] = &[
            // Spout 0/0/1: every idle turn sleeps, and the counter stays.
            (&spout, 0, Level::Sleep, 0),
            (&spout, 5, Level::Sleep, 5),
            // Bolt 1/1000/1: one spin, 1000 parks, then sleeps.
            (&bolt, 0, Level::Spin, 1),
            (&bolt, 1, Level::Park, 2),
            (&bolt, 1000, Level::Park, 1001),
            (&bolt, 1001, Level::Sleep, 1001),
            (&bolt, 5000, Level::Sleep, 5000),
            // Backpressure has the bolt's defaults.
            (&bp, 0, Level::Spin, 1),
            (&bp, 500, Level::Park, 501),
            (&bp, 1001, Level::Sleep, 1001),
        ];
        for &(strategy, counter, level, next) in table {
            assert_eq!(strategy.level(counter), (level, next), "{strategy:?} at {counter}");
        }
        assert_eq!(spout.level3_sleep_millis, 1);
        assert_eq!(bolt.level3_sleep_millis, 1);
    }

    #[test]
    fn custom_levels_move_the_boundaries() {
        let p = Progressive::new(2, 3, 5);
        let levels: Vec<Level> = (0..7).map(|c| p.level(c).0).collect();
        use Level::*;
        assert_eq!(levels, [Spin, Spin, Park, Park, Park, Sleep, Sleep]);
    }
}
