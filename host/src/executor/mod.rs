//! Executors: the spout loop, the bolt loop, and what they share.
//!
//! One thread per task. Data flows between tasks as batches over bounded
//! crossbeam channels ([`batch::Batch`]); acks, ticks and other control
//! messages flow over separate unbounded channels, so they never wait behind
//! data (the cause of Storm's false timeouts under backpressure, STORM-2359).

pub mod batch;
pub mod bolt;
pub mod output;
pub mod rng;
pub mod spout;
pub mod tracking;
pub mod transfer;

#[cfg(test)]
mod loop_tests;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::throttle::{Canceler, ThrottleOutcome, Throttler};

/// The topology's run state, shared by every thread.
#[derive(Debug)]
pub struct RunControl {
    state: AtomicU8,
    fatal: Mutex<Option<String>>,
    /// Canceled when the drain begins: ends every throttled wait at once (see
    /// [`RunControl::advance`]).
    pub canceler: Canceler,
    /// When the run's time is up (`squall run --duration`); set at most once.
    deadline: OnceLock<Instant>,
}

/// The phases of a run (see `runtime`'s shutdown protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum RunState {
    /// Spouts are active.
    Running = 0,
    /// Spouts are deactivated; in-flight trees complete or time out.
    Draining = 1,
    /// Every executor leaves its loop, calls cleanup/close and exits.
    Stopping = 2,
}

impl Default for RunControl {
    fn default() -> Self {
        Self {
            state: AtomicU8::new(RunState::Running as u8),
            fatal: Mutex::new(None),
            canceler: Canceler::new(),
            deadline: OnceLock::new(),
        }
    }
}

impl RunControl {
    /// The current state (a relaxed load: executors poll it once per turn).
    #[inline]
    pub fn state(&self) -> RunState {
        match self.state.load(Ordering::Relaxed) {
            0 => RunState::Running,
            1 => RunState::Draining,
            _ => RunState::Stopping,
        }
    }

    /// Moves to `state` if it is later than the current one.
    ///
    /// From `Draining` on, every throttled wait is canceled, at once and for
    /// good (a canceled throttler never waits again). A spout pays after use,
    /// so its wait is for an emit the drain forbids anyway; without the cancel
    /// the drain would sit out the rest of that wait (up to a whole period, or
    /// `shutdown_timeout_secs`). A bolt edge's backlog is executed without its
    /// throttle, so the drain finishes the trees in flight instead of waiting
    /// out the rate.
    pub fn advance(&self, state: RunState) {
        self.state.fetch_max(state as u8, Ordering::AcqRel);
        if state >= RunState::Draining {
            self.canceler.cancel();
        }
    }

    /// Sets the run's deadline (`--duration`); only the first call counts.
    pub fn set_deadline(&self, at: Instant) {
        let _ = self.deadline.set(at);
    }

    /// The run's deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline.get().copied()
    }

    /// Throttles `n` units with the run's canceler. A wait that ends at or
    /// past the deadline starts the drain at once.
    ///
    /// Why: the period mode hands out its budget in lumps at period starts,
    /// and a run whose duration is a multiple of the period ends exactly where
    /// the next lump begins. The run loop only notices the deadline on its
    /// next poll, so without this check the executor, just woken at the
    /// deadline, would spend a whole extra period's budget (10 % more tuples
    /// in a 5 s run at the default 500 ms period) before the drain begins.
    /// Only a wait that happened pays for the clock read.
    #[inline]
    pub fn throttle(&self, throttler: &mut Throttler, n: u64) -> ThrottleOutcome {
        let outcome = throttler.throttle(n, &self.canceler);
        if !outcome.waited.is_zero()
            && self.deadline.get().is_some_and(|&deadline| Instant::now() >= deadline)
        {
            self.advance(RunState::Draining);
        }
        outcome
    }

    /// Records a fatal error (the first one wins) and starts draining.
    pub fn fail(&self, message: String) {
        if let Ok(mut fatal) = self.fatal.lock() {
            if fatal.is_none() {
                tracing::error!("{message}");
                *fatal = Some(message);
            }
        }
        self.advance(RunState::Draining);
    }

    /// The fatal error, if any.
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().ok().and_then(|f| f.clone())
    }
}

/// Storm-less restart policy: at most `max_restarts` rebuilds of a task's
/// instance within `window`; past that the topology stops.
#[derive(Debug)]
pub struct RestartPolicy {
    max_restarts: u32,
    window: Duration,
    recent: Vec<Instant>,
}

impl RestartPolicy {
    /// A policy allowing `max_restarts` within `window`.
    pub fn new(max_restarts: u32, window: Duration) -> Self {
        Self { max_restarts, window, recent: Vec::new() }
    }

    /// Records a restart at `now`; false when it exceeds the limit.
    pub fn allow(&mut self, now: Instant) -> bool {
        self.recent.retain(|&t| now.duration_since(t) < self.window);
        self.recent.push(now);
        self.recent.len() <= self.max_restarts as usize
    }
}

/// Counts a plugin error in the task's stats and logs it the 1st, 10th,
/// 100th, 1000th... time, so a failing plugin cannot flood the log.
pub(crate) fn count_error(stats: &mut crate::metrics::LocalStats, name: &str, message: &str) {
    use crate::metrics::StatField;
    stats.add(StatField::Errors, 1);
    let n = stats.get(StatField::Errors);
    if (n as f64).log10().fract() == 0.0 {
        tracing::warn!("{name}: {message} (error #{n})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_past_the_limit_within_the_window_are_refused() {
        let mut p = RestartPolicy::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(p.allow(t0));
        assert!(p.allow(t0 + Duration::from_secs(1)));
        assert!(!p.allow(t0 + Duration::from_secs(2)));
        let mut q = RestartPolicy::new(1, Duration::from_secs(10));
        assert!(q.allow(t0));
        assert!(q.allow(t0 + Duration::from_secs(11)), "an old restart leaves the window");
    }

    #[test]
    fn run_state_only_moves_forward() {
        let c = RunControl::default();
        c.advance(RunState::Stopping);
        c.advance(RunState::Draining);
        assert_eq!(c.state(), RunState::Stopping);
        assert!(c.canceler.is_canceled());
    }

    #[test]
    fn the_drain_cancels_throttled_waits() {
        let c = RunControl::default();
        assert!(!c.canceler.is_canceled());
        c.advance(RunState::Draining);
        assert!(c.canceler.is_canceled(), "a drain does not sit out throttled waits");
    }

    #[test]
    fn a_throttled_wait_that_ends_past_the_deadline_starts_the_drain() {
        use crate::throttle::ThrottleMode;

        let c = RunControl::default();
        c.set_deadline(Instant::now());
        // 1000 units/s with a 5 ms period: a budget of 5; the fifth call
        // exhausts it and waits for the next period, past the deadline.
        let mut t = Throttler::new(ThrottleMode::Period, 1000, Duration::from_millis(5));
        for _ in 0..4 {
            assert!(c.throttle(&mut t, 1).waited.is_zero());
            assert_eq!(c.state(), RunState::Running, "no wait, no clock read, no drain");
        }
        assert!(!c.throttle(&mut t, 1).waited.is_zero());
        assert_eq!(c.state(), RunState::Draining);
        assert!(c.canceler.is_canceled());
    }

    #[test]
    fn a_throttled_wait_before_the_deadline_keeps_the_run_going() {
        use crate::throttle::ThrottleMode;

        let c = RunControl::default();
        c.set_deadline(Instant::now() + Duration::from_secs(3600));
        let mut t = Throttler::new(ThrottleMode::Period, 1000, Duration::from_millis(5));
        let waited: Duration = (0..6).map(|_| c.throttle(&mut t, 1).waited).sum();
        assert!(!waited.is_zero());
        assert_eq!(c.state(), RunState::Running);
        assert!(!c.canceler.is_canceled());
    }
}
