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

use crate::cancel::Canceler;

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
    /// The sleep of the first call after that, in ms.
    pub level3_sleep_millis: u64,
    /// The longest sleep: each further call doubles the sleep up to this
    /// (equal to `level3_sleep_millis`: no back-off, Storm's behaviour).
    pub level3_max_sleep_millis: u64,
    /// How long the first idle turn after work polls the queues before
    /// level 1 (squall's own, the bolt wait only; 0 = no spin). The
    /// executor does the polling: see [`super::spin_until`].
    pub spin: Duration,
}

/// How many doublings a level-3 counter remembers (2^16 ms is past any cap).
const MAX_DOUBLINGS: u32 = 16;

impl Progressive {
    /// A strategy with these levels.
    pub fn new(level1_count: u32, level2_count: u32, level3_sleep_millis: u64) -> Self {
        Self {
            level1_count,
            level2_count,
            level3_sleep_millis,
            level3_max_sleep_millis: level3_sleep_millis,
            spin: Duration::ZERO,
        }
    }

    /// The same levels, after a spin of `micros` µs on the first idle turn.
    pub fn with_spin(mut self, micros: u64) -> Self {
        self.spin = Duration::from_micros(micros);
        self
    }

    /// The same levels, backing off up to `max_millis` at level 3.
    pub fn with_max_sleep(mut self, max_millis: u64) -> Self {
        self.level3_max_sleep_millis = max_millis.max(self.level3_sleep_millis);
        self
    }

    /// The defaults for a situation: the config's (Storm's levels, with
    /// squall's spout back-off and bolt spin), so there is one definition.
    pub fn default_for(situation: WaitSituation) -> Self {
        use crate::config::defaults;
        let spec = match situation {
            WaitSituation::SPOUT_WAIT => defaults::spout_wait(),
            WaitSituation::BOLT_WAIT => defaults::bolt_wait(),
            _ => defaults::backpressure_wait(),
        };
        Self::from_spec(&spec).expect("the default wait strategies are progressive")
    }

    /// The strategy a progressive spec describes; `None` for another spec.
    pub fn from_spec(spec: &crate::config::WaitSpec) -> Option<Self> {
        match *spec {
            crate::config::WaitSpec::Progressive {
                level1_count,
                level2_count,
                level3_sleep_millis,
                level3_max_sleep_millis,
                spin_micros,
            } => Some(
                Self::new(level1_count, level2_count, level3_sleep_millis)
                    .with_max_sleep(level3_max_sleep_millis)
                    .with_spin(spin_micros),
            ),
            _ => None,
        }
    }

    /// The level for a counter, and the next counter. At level 3 the
    /// counter keeps counting (up to [`MAX_DOUBLINGS`] past level 2) only
    /// when the strategy backs off; without back-off it stays, as in Storm.
    pub fn level(&self, counter: u32) -> (Level, u32) {
        let level3 = self.level1_count.saturating_add(self.level2_count);
        if counter < self.level1_count {
            (Level::Spin, counter + 1)
        } else if counter < level3 {
            (Level::Park, counter + 1)
        } else if self.level3_max_sleep_millis > self.level3_sleep_millis
            && counter < level3.saturating_add(MAX_DOUBLINGS)
        {
            (Level::Sleep, counter + 1)
        } else {
            (Level::Sleep, counter)
        }
    }

    /// The level-3 sleep for a counter: `level3_sleep_millis` doubled once
    /// per idle turn already spent at level 3, at most `level3_max_sleep_millis`.
    pub fn sleep_millis(&self, counter: u32) -> u64 {
        let turns = counter.saturating_sub(self.level1_count.saturating_add(self.level2_count));
        let doubled = self.level3_sleep_millis.saturating_mul(1u64 << turns.min(MAX_DOUBLINGS));
        doubled.min(self.level3_max_sleep_millis)
    }

    /// How long one wait on a queue lasts at most in place of this
    /// strategy's park or sleep (`None` at level 1, which spins), and the
    /// next counter: the level-3 sleep, and at level 2 at least
    /// [`PARK_WAIT`](super::PARK_WAIT), what a 1 ns park really lasts, so a
    /// `level3_sleep_millis` of 0 does not turn level 2 into a spin.
    pub fn queue_wait(&self, counter: u32) -> (Option<Duration>, u32) {
        let (level, next) = self.level(counter);
        let sleep = Duration::from_millis(self.sleep_millis(counter));
        let wait = match level {
            Level::Spin => None,
            Level::Park => Some(sleep.max(super::PARK_WAIT)),
            Level::Sleep => Some(sleep),
        };
        (wait, next)
    }

    /// Waits once; returns the next counter. A level-3 sleep ends when the
    /// drain begins (`drain` is canceled), see [`super::nap`].
    pub fn idle(&self, counter: u32, drain: &Canceler) -> u32 {
        let (level, next) = self.level(counter);
        match level {
            Level::Spin => std::hint::spin_loop(),
            Level::Park => std::thread::park_timeout(Duration::from_nanos(1)),
            Level::Sleep => super::nap(Duration::from_millis(self.sleep_millis(counter)), drain),
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
            // Spout 0/0/1: every idle turn sleeps; the counter counts the turns
            // (squall's back-off, see `an_idle_spout_backs_off...`).
            (&spout, 0, Level::Sleep, 1),
            (&spout, 5, Level::Sleep, 6),
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
    fn a_queue_wait_lasts_the_level_3_sleep_and_at_level_2_at_least_a_park() {
        let bp = Progressive::default_for(WaitSituation::BACK_PRESSURE_WAIT);
        let ms = Duration::from_millis;
        assert_eq!(bp.queue_wait(0), (None, 1), "level 1 spins");
        assert_eq!(bp.queue_wait(1), (Some(ms(1)), 2));
        assert_eq!(bp.queue_wait(1001), (Some(ms(1)), 1001));
        let no_sleep = Progressive::new(1, 10, 0);
        assert_eq!(no_sleep.queue_wait(1), (Some(super::super::PARK_WAIT), 2));
        assert_eq!(no_sleep.queue_wait(11), (Some(Duration::ZERO), 11), "level 3 as configured");
        let backing_off = Progressive::new(0, 0, 1).with_max_sleep(8);
        let waits: Vec<_> = (0..5).map(|c| backing_off.queue_wait(c).0).collect();
        assert_eq!(waits, [1, 2, 4, 8, 8].map(|m| Some(ms(m))));
    }

    #[test]
    fn an_idle_spout_backs_off_by_doubling_up_to_its_cap() {
        let spout = Progressive::default_for(WaitSituation::SPOUT_WAIT);
        // Counting idle turns at level 3, from 0: sleeps 1, 2, 4, 8, 8, ... ms.
        let mut counter = 0;
        let mut sleeps = Vec::new();
        for _ in 0..6 {
            sleeps.push(spout.sleep_millis(counter));
            counter = spout.level(counter).1;
        }
        assert_eq!(sleeps, [1, 2, 4, 8, 8, 8]);
        // The executor resets the counter after useful work: back to 1 ms.
        assert_eq!(spout.sleep_millis(0), 1);
        // The counter stops growing, so it never overflows.
        let mut c = 0;
        for _ in 0..100_000 {
            c = spout.level(c).1;
        }
        assert_eq!(c, MAX_DOUBLINGS);
        // Bolts keep Storm's fixed sleep.
        let bolt = Progressive::default_for(WaitSituation::BOLT_WAIT);
        assert_eq!((bolt.sleep_millis(1001), bolt.sleep_millis(5000)), (1, 1));
    }

    #[test]
    fn custom_levels_move_the_boundaries() {
        let p = Progressive::new(2, 3, 5);
        let levels: Vec<Level> = (0..7).map(|c| p.level(c).0).collect();
        use Level::*;
        assert_eq!(levels, [Spin, Spin, Park, Park, Park, Sleep, Sleep]);
    }
}
