//! Wait strategies: how an idle or blocked executor thread waits (seed 000,
//! Storm's `IWaitStrategy`).
//!
//! Variants, behind one enum so built-ins never pay a call across the FFI:
//! 1. [`Progressive`](progressive::Progressive) — Storm's `WaitStrategyProgressive`:
//!    spin, then park ~1 ns, then sleep.
//! 2. [`Park`](park::Park) — Storm's `WaitStrategyPark`: park a fixed number of µs
//!    (0 = busy spin).
//! 3. `Plugin` — a strategy exported by a plugin library.
//!
//! Each executor holds one strategy per [`WaitSituation`]: spout wait, bolt
//! wait and backpressure wait. The executor passes the situation's counter to
//! `idle` and stores the returned counter; it resets the counter to 0 when the
//! situation ends (useful work was done, or pending emits cleared).
//!
//! # Deliberate differences
//! - A bolt whose progressive strategy reaches level 3 does not sleep
//!   `level3_sleep_millis` per turn: it blocks on its receive and control
//!   queues, so a tuple or a tick wakes it at once, and an idle bolt wakes
//!   once a second (for housekeeping) instead of 1000 times. The same holds
//!   for an idle acker, a spout held by `max_spout_pending` or waiting on its
//!   wake handle, and the system thread: each blocks for up to a second, and
//!   a change of run state (the drain, the stop) wakes them all at once
//!   (`RunControl::set_waker`). Every timed wake-up costs CPU whatever the
//!   thread then does, so idle CPU is the number of them
//!   (docs/performance.md, "What limits the figures"); latency is the same
//!   or lower. Spouts keep Storm's sleep: nothing can tell a spout that its
//!   source has data.
//! - An idle spout backs off: each idle turn at level 3 doubles its sleep,
//!   from `level3_sleep_millis` (1 ms) up to `level3_max_sleep_millis`
//!   (default 8 ms for the spout wait, no back-off for the others). Storm
//!   sleeps 1 ms on every idle turn: about 1,000 timed wake-ups per second
//!   for a spout with nothing to do. With the cap at 8 ms an idle spout
//!   wakes about 125 times a second, and its first tuple after an idle
//!   spell is picked up within 8 ms (docs/performance.md has the idle
//!   cost).
//! - A spout held by `max_spout_pending` (with ackers) blocks on its control
//!   queue until an acker reply or a timeout tick can ungate it, instead of
//!   running the spout wait; a spout that took its wake handle (contract
//!   1.1) blocks until it wakes the executor. Storm polls both.
//! - A bolt at progressive level 2 waits on its receive and control queues
//!   for up to the park time (100 us) instead of parking 1 ns: a tuple wakes
//!   it at once, where a 1 ns park sleeps for Linux's timer slack (50 us)
//!   or more whether or not a tuple arrived.
//! - A task under backpressure whose backpressure strategy is progressive
//!   waits, past its level-1 spins, on the full queue its pending batch is
//!   for, instead of parking 1 ns (level 2) or sleeping (level 3): for up
//!   to `level3_sleep_millis` (at level 2 at least [`PARK_WAIT`], what the
//!   park lasts), or until the consumer takes a batch and so
//!   makes room, which wakes it at once (crossbeam wakes a sender blocked
//!   on a full channel), or until the drain begins. A 1 ns park sleeps
//!   for the timer slack whether or not room came, so a spout held by a
//!   busy bolt woke thousands of times a second, taking CPU from the very
//!   bolts it waited for; it now wakes about once per batch the bolt
//!   takes, or once per `level3_sleep_millis` while the bolt takes none
//!   (word count's gain is in docs/performance.md). A batch held back by
//!   its target's byte budget, not by a full queue, still waits with the
//!   strategy itself, as do the park and plugin strategies.
//! - A bolt that runs out of tuples first polls its receive and control
//!   queues for `spin_micros` of its bolt wait (default 20 us), yielding the
//!   core between rounds of polls, before its first idle call; an acker does
//!   the same after each batch, with `[wait.bolt]`'s `spin_micros` (Storm's
//!   acker is a bolt). A tuple that arrives within the spin is taken without
//!   a futex wake-up, which is slow on a virtual machine whose idle vCPU
//!   must be woken. A longer spin buys latency with CPU (the named
//!   low-latency profile spins 150 us; the trade is measured in
//!   docs/performance.md). The spin yields between rounds because, with
//!   more busy threads than cores, a spin that does not yield holds the
//!   core the thread with work needs. An idle topology never spins.
//! - Every host-side sleep of a built-in strategy ends when the drain begins,
//!   and naps at most [`DRAIN_NAP`] while it lasts, so a long
//!   `level3_sleep_millis` or `park_micros` cannot hold the drain (Storm
//!   sleeps them out).
//! - A plugin strategy that panics is replaced by the built-in default for its
//!   situation, with an error log, instead of killing the executor.

pub mod park;
pub mod progressive;
#[cfg(test)]
pub mod recording;

use std::time::Duration;

use crate::cancel::Canceler;

/// The longest a built-in strategy sleeps once the drain has begun.
pub const DRAIN_NAP: Duration = Duration::from_millis(1);

/// How long a task at progressive level 2 waits on a queue instead of
/// parking 1 ns (a bolt on its input queues; under backpressure, at least
/// this long on the full queue): about what a 1 ns park sleeps on Linux
/// (timer slack), so the level lasts as long as in Storm, but the queue's
/// readiness ends the wait at once.
pub const PARK_WAIT: Duration = Duration::from_micros(100);

/// Sleeps `d`, or until `drain` is canceled if that comes first; once the
/// drain has begun, sleeps at most [`DRAIN_NAP`], so a drain is never held
/// by a long configured sleep and an idle thread does not spin through it.
pub fn nap(d: Duration, drain: &Canceler) {
    if drain.is_canceled() {
        std::thread::sleep(d.min(DRAIN_NAP));
    } else {
        drain.wait_timeout(d);
    }
}

/// Polls of `ready` between two clock reads in [`spin_until`].
const POLLS_PER_CLOCK_READ: u32 = 32;

/// Polls `ready` until it returns true or `limit` has passed; true when it
/// did. Between polls the core is told it spins (`spin_loop`), and at every
/// clock read the thread yields, so on a machine with fewer cores than busy
/// threads a spin gives way to the threads that have work. A bounded busy
/// wait: the bolt and acker spin of the wait module's deliberate differences.
pub fn spin_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if limit.is_zero() {
        return false;
    }
    let started = std::time::Instant::now();
    loop {
        for _ in 0..POLLS_PER_CLOCK_READ {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if started.elapsed() >= limit {
            return ready();
        }
        std::thread::yield_now();
    }
}

use squall_plugin_api::{abi::WaitStrategyBox, WaitSituation};

use crate::config::WaitSpec;

/// A wait strategy serving one situation.
#[derive(Debug)]
pub enum WaitStrategy {
    /// Storm's progressive strategy.
    Progressive(progressive::Progressive),
    /// Storm's park strategy.
    Park(park::Park),
    /// A plugin's strategy.
    Plugin(PluginWait),
    /// Records every call instead of waiting (executor loop tests).
    #[cfg(test)]
    Recording(recording::Recording),
}

/// A plugin wait strategy and the situation it serves.
pub struct PluginWait {
    strategy: WaitStrategyBox,
    situation: WaitSituation,
    name: String,
}

impl std::fmt::Debug for PluginWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginWait")
            .field("name", &self.name)
            .field("situation", &self.situation)
            .finish()
    }
}

impl PluginWait {
    /// Wraps a constructed plugin strategy, calling its `prepare`.
    ///
    /// # Errors
    /// The plugin's error when `prepare` fails.
    pub fn new(
        mut strategy: WaitStrategyBox,
        situation: WaitSituation,
        name: String,
    ) -> Result<Self, squall_plugin_api::PluginError> {
        strategy.prepare(situation).into_result()?;
        Ok(Self { strategy, situation, name })
    }
}

impl WaitStrategy {
    /// The built-in default for a situation, with Storm's defaults.
    pub fn default_for(situation: WaitSituation) -> Self {
        WaitStrategy::Progressive(progressive::Progressive::default_for(situation))
    }

    /// Builds a built-in strategy from its spec; `None` for plugin specs.
    pub fn builtin(spec: &WaitSpec) -> Option<Self> {
        match *spec {
            WaitSpec::Progressive { .. } => {
                progressive::Progressive::from_spec(spec).map(WaitStrategy::Progressive)
            }
            WaitSpec::Park { park_micros } => {
                Some(WaitStrategy::Park(park::Park::new(park_micros)))
            }
            WaitSpec::Plugin { .. } => None,
        }
    }

    /// Waits once; returns the next counter. Built-in sleeps end when
    /// `drain` is canceled (the drain began); a plugin's own sleep cannot be
    /// cut short.
    #[inline]
    pub fn idle(&mut self, counter: u32, drain: &Canceler) -> u32 {
        match self {
            WaitStrategy::Progressive(p) => p.idle(counter, drain),
            WaitStrategy::Park(p) => p.idle(counter, drain),
            #[cfg(test)]
            WaitStrategy::Recording(r) => r.idle(counter, drain),
            WaitStrategy::Plugin(p) => match p.strategy.idle(counter).into_result() {
                Ok(next) => next,
                Err(e) => {
                    tracing::error!(strategy = %p.name, error = %e, "plugin wait strategy failed; using the default");
                    *self = WaitStrategy::default_for(p.situation);
                    self.idle(counter, drain)
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn a_spin_ends_at_the_first_poll_that_finds_its_condition() {
        // True on the fifth poll only: a spin that went on polling after it
        // would find it false again and, at the limit, return false.
        let mut polls = 0;
        assert!(spin_until(Duration::from_secs(60), || {
            polls += 1;
            polls == 5
        }));
        assert_eq!(polls, 5);
    }

    #[test]
    fn a_spin_gives_up_after_its_limit_and_a_zero_limit_does_not_poll() {
        let polls = AtomicU32::new(0);
        let never = || {
            polls.fetch_add(1, Ordering::Relaxed);
            false
        };
        assert!(!spin_until(Duration::from_micros(200), never));
        // At least one round of polls and the last look after the limit.
        assert!(polls.load(Ordering::Relaxed) > POLLS_PER_CLOCK_READ);
        polls.store(0, Ordering::Relaxed);
        assert!(!spin_until(Duration::ZERO, never));
        assert_eq!(polls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_bolt_default_spins_and_the_other_situations_do_not() {
        let spin = |s| match WaitStrategy::default_for(s) {
            WaitStrategy::Progressive(p) => p.spin,
            other => panic!("{other:?}"),
        };
        assert_eq!(spin(WaitSituation::BOLT_WAIT), Duration::from_micros(20));
        assert_eq!(spin(WaitSituation::SPOUT_WAIT), Duration::ZERO);
        assert_eq!(spin(WaitSituation::BACK_PRESSURE_WAIT), Duration::ZERO);
        // The spec and the built strategy agree.
        let built = WaitStrategy::builtin(&crate::config::defaults::bolt_wait());
        assert!(
            matches!(built, Some(WaitStrategy::Progressive(p)) if p.spin == Duration::from_micros(20))
        );
    }
}
