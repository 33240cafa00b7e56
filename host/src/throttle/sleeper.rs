//! [`Sleeper`]: how a throttler waits, injected so that tests need no real time.
//!
//! HDFS waits with `Object.wait(ms)` inside the synchronized `throttle`. Here the
//! pure throttler cores ask a `Sleeper` to wait and then re-read their
//! [`Clock`](crate::clock::Clock). [`RealSleeper`] blocks on the
//! [`Canceler`]'s condition variable, so a cancel ends the wait at once;
//! [`ManualSleeper`] advances a [`ManualClock`] instead of blocking.

use std::fmt;
use std::time::Duration;

use crate::clock::ManualClock;

use crate::cancel::Canceler;

/// Something that can wait for a while, or less if canceled.
pub trait Sleeper: Send + fmt::Debug {
    /// Waits for `duration`, or until `canceler` fires if that comes first.
    ///
    /// May return early (the caller re-reads its clock and decides again), and
    /// returns at once when `canceler` is already canceled.
    fn sleep(&mut self, duration: Duration, canceler: &Canceler);
}

impl<S: Sleeper + ?Sized> Sleeper for &mut S {
    fn sleep(&mut self, duration: Duration, canceler: &Canceler) {
        (**self).sleep(duration, canceler);
    }
}

impl<S: Sleeper + ?Sized> Sleeper for Box<S> {
    fn sleep(&mut self, duration: Duration, canceler: &Canceler) {
        (**self).sleep(duration, canceler);
    }
}

/// Really blocks the thread, on the canceler's condition variable.
///
/// Pairs with [`SystemClock`](crate::clock::SystemClock). A cancel from another
/// thread wakes it immediately.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealSleeper;

impl Sleeper for RealSleeper {
    fn sleep(&mut self, duration: Duration, canceler: &Canceler) {
        canceler.wait_timeout(duration);
    }
}

/// A sleeper for tests: "sleeping" advances a [`ManualClock`].
///
/// It records how many sleeps were asked for and how much time they took, can
/// oversleep (as real timers do), and can simulate a cancel
/// that arrives in the middle of a given sleep.
#[derive(Debug, Clone)]
pub struct ManualSleeper {
    clock: ManualClock,
    /// Lateness of successive sleeps, used cyclically.
    lateness: Vec<Duration>,
    cancel_during: Option<u64>,
    sleeps: u64,
    slept: Duration,
}

impl ManualSleeper {
    /// A sleeper that advances `clock` by exactly the requested duration.
    pub fn new(clock: ManualClock) -> Self {
        ManualSleeper {
            clock,
            lateness: Vec::new(),
            cancel_during: None,
            sleeps: 0,
            slept: Duration::ZERO,
        }
    }

    /// Makes every sleep last `lateness` longer than asked, like a real timer
    /// that wakes late.
    pub fn with_lateness(self, lateness: Duration) -> Self {
        self.with_lateness_pattern(vec![lateness])
    }

    /// Makes successive sleeps late by the durations of `pattern` in turn,
    /// starting over at the end: for instance 999 short delays and one long
    /// stall, like a thread that is sometimes preempted.
    pub fn with_lateness_pattern(mut self, pattern: Vec<Duration>) -> Self {
        self.lateness = pattern;
        self
    }

    /// Makes the `nth` sleep (counting from 1) end halfway: the clock advances
    /// by half the requested duration, then the canceler passed to that sleep
    /// is canceled, as if a shutdown arrived during the wait.
    pub fn cancel_during_sleep(mut self, nth: u64) -> Self {
        self.cancel_during = Some(nth);
        self
    }

    /// How many times [`Sleeper::sleep`] was called.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }

    /// Total time the clock was advanced by sleeping.
    pub fn slept(&self) -> Duration {
        self.slept
    }

    /// The clock this sleeper advances.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }
}

impl Sleeper for ManualSleeper {
    fn sleep(&mut self, duration: Duration, canceler: &Canceler) {
        self.sleeps += 1;
        if canceler.is_canceled() {
            return;
        }
        let advance = if self.cancel_during == Some(self.sleeps) {
            duration / 2
        } else {
            let late = match self.lateness.len() {
                0 => Duration::ZERO,
                len => self.lateness[(self.sleeps - 1) as usize % len],
            };
            duration.saturating_add(late)
        };
        self.clock.advance(advance);
        self.slept = self.slept.saturating_add(advance);
        if self.cancel_during == Some(self.sleeps) {
            canceler.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;

    #[test]
    fn manual_sleeper_advances_its_clock_by_the_requested_time_plus_lateness() {
        let clock = ManualClock::new();
        let mut sleeper = ManualSleeper::new(clock.clone()).with_lateness(Duration::from_micros(5));
        let canceler = Canceler::new();
        sleeper.sleep(Duration::from_millis(2), &canceler);
        sleeper.sleep(Duration::from_millis(3), &canceler);
        assert_eq!(clock.now(), Duration::from_micros(5010));
        assert_eq!(sleeper.sleeps(), 2);
        assert_eq!(sleeper.slept(), Duration::from_micros(5010));
        assert_eq!(sleeper.clock().peek(), clock.peek());
    }

    #[test]
    fn manual_sleeper_cycles_through_a_lateness_pattern() {
        let clock = ManualClock::new();
        let pattern = vec![Duration::ZERO, Duration::from_millis(5)];
        let mut sleeper = ManualSleeper::new(clock.clone()).with_lateness_pattern(pattern);
        let canceler = Canceler::new();
        for _ in 0..3 {
            sleeper.sleep(Duration::from_millis(1), &canceler);
        }
        assert_eq!(clock.peek(), Duration::from_millis(3 + 5));
    }

    #[test]
    fn manual_sleeper_cancels_halfway_through_the_chosen_sleep() {
        let clock = ManualClock::new();
        let mut sleeper = ManualSleeper::new(clock.clone()).cancel_during_sleep(2);
        let canceler = Canceler::new();
        sleeper.sleep(Duration::from_millis(10), &canceler);
        assert!(!canceler.is_canceled());
        sleeper.sleep(Duration::from_millis(10), &canceler);
        assert!(canceler.is_canceled());
        assert_eq!(clock.peek(), Duration::from_millis(15));
    }

    #[test]
    fn manual_sleeper_does_not_advance_time_once_canceled() {
        let clock = ManualClock::new();
        let mut sleeper = ManualSleeper::new(clock.clone());
        let canceler = Canceler::new();
        canceler.cancel();
        sleeper.sleep(Duration::from_secs(1), &canceler);
        assert_eq!(clock.peek(), Duration::ZERO);
        assert_eq!(sleeper.sleeps(), 1);
    }

    #[test]
    fn real_sleeper_returns_at_once_when_already_canceled() {
        let canceler = Canceler::new();
        canceler.cancel();
        let mut sleeper: Box<dyn Sleeper> = Box::new(RealSleeper);
        sleeper.sleep(Duration::MAX, &canceler);
    }
}
