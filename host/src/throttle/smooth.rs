//! [`SmoothThrottler`]: a GCRA-style throttler without period-boundary bursts.
//!
//! This is the "smoother mode" the design asks for next to HDFS's period mode.
//! It follows two virtual schedules, each a *theoretical arrival time* as in
//! GCRA (and the `governor` crate): the point up to which units have been
//! handed out, advancing by `1 / rate` per unit.
//!
//! - The **rate schedule** (`tat`) advances at the target rate. It may lag
//!   behind the clock by up to the catch-up horizon (default 100 ms), so time
//!   lost to a very late wake-up, a preempted thread or a short pause is made
//!   up later: this keeps the long-run rate exact.
//! - The **burst schedule** (`burst_tat`) advances at the rate plus the catch-up
//!   margin (default 4 %) and may lag by only one quantum plus the slack
//!   (default 250 µs, the lateness of a wake-up it absorbs). It is what bounds
//!   every short window, including while lost time is made up.
//!
//! To keep the clock off the hot path, units are handed out as **credit** in
//! quanta (default 125 µs worth, at least one unit). A call that the credit
//! covers only decrements it: no clock read, no syscall. When the credit runs
//! out, the throttler reads the clock once and grants a quantum as soon as one
//! is *due* (earned) on both schedules, sleeping until then if needed. A
//! request larger than a quantum is granted whole once a quantum is due, and
//! the calls after it wait for the rest (pay later).
//!
//! # Bounds (a request counts when `throttle` returns)
//!
//! Let `R = rate * (1 + margin)`, `q` the quantum in units, `s` the slack and
//! `n` the largest request. Before each grant in a window `[a, a + W)` the
//! burst schedule is at least `a - s - q/R`, and a grant happens only once a
//! quantum is due, so the grants made in the window add up to at most
//! `(W + s) * R + max(q, n)`; at most `q - 1` units of credit were left from
//! before. So a window holds at most `(W + s) * R + q + max(q, n) - 1` units.
//! With the defaults and `W = 10 ms` that is at most `1.04 * 10.25 ms + 0.25 ms
//! = 10.91 ms` worth when `q` is 125 µs worth, and `1.04 * (share + 0.25 ms) + 1`
//! when `q` is one unit: below 1.1 x the window's share, plus one request.
//!
//! The long-run rate is the target rate as long as the lag stays below the
//! horizon, that is as long as less than about the margin (4 %) of the time is
//! lost to stalls longer than the slack. After an idle longer than the horizon,
//! at most `horizon * rate` extra units are made up, at 4 % over the rate.

use std::time::Duration;

use crate::clock::{Clock, SystemClock};

use super::sleeper::{RealSleeper, Sleeper};
use super::ThrottleOutcome;
use crate::cancel::Canceler;

/// Credit granted per clock read, as time at the target rate.
pub const DEFAULT_QUANTUM: Duration = Duration::from_micros(125);

/// How late a wake-up may be without costing the burst schedule any time.
pub const DEFAULT_SLACK: Duration = Duration::from_micros(250);

/// The most lost time that the rate schedule remembers and makes up later.
pub const DEFAULT_CATCH_UP_HORIZON: Duration = Duration::from_millis(100);

/// How much faster than the rate lost time is made up, in percent.
pub const DEFAULT_CATCH_UP_PERCENT: u32 = 4;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// The tuning of a [`SmoothThrottler`]. [`SmoothParams::default`] meets the
/// 10 ms burst bound described in the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmoothParams {
    /// Credit granted per clock read, as time at the target rate (at least one unit).
    pub quantum: Duration,
    /// How late a wake-up may be without costing the burst schedule any time.
    pub slack: Duration,
    /// The most lost time that the rate schedule remembers and makes up later.
    pub catch_up_horizon: Duration,
    /// How much faster than the rate lost time is made up, in percent.
    pub catch_up_percent: u32,
}

impl Default for SmoothParams {
    fn default() -> Self {
        SmoothParams {
            quantum: DEFAULT_QUANTUM,
            slack: DEFAULT_SLACK,
            catch_up_horizon: DEFAULT_CATCH_UP_HORIZON,
            catch_up_percent: DEFAULT_CATCH_UP_PERCENT,
        }
    }
}

/// A smooth throttler: two GCRA schedules handed out in small quanta of credit.
///
/// Time is kept *scaled* and relative to the throttler's creation: nanoseconds
/// times `rate * (100 + margin)`, so that one unit is a whole number of ticks
/// on both schedules and no rounding error accumulates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmoothThrottler {
    /// Target rate.
    units_per_sec: u64,
    /// Units granted per clock read, at least 1.
    quantum: u64,
    /// The tuning this throttler was built with.
    params: SmoothParams,
    /// Clock reading at creation.
    origin: Duration,
    /// Ticks at creation: one quantum on the rate schedule, so that the
    /// schedules can start one quantum in the past, at tick 0.
    epoch: u128,
    /// Scaled ticks per nanosecond: `rate * (100 + margin)`.
    ticks_per_nano: u128,
    /// Ticks per unit on the rate schedule: `10^9 * (100 + margin)`.
    rate_unit: u128,
    /// Ticks per unit on the burst schedule: `10^9 * 100`.
    burst_unit: u128,
    /// Largest lag of the burst schedule: one quantum plus the slack.
    slack: u128,
    /// Largest lag of the rate schedule: one quantum plus the horizon.
    horizon: u128,
    /// Rate schedule: end of the units handed out so far, in ticks.
    tat: u128,
    /// Burst schedule, in ticks.
    burst_tat: u128,
    /// Units granted and not used yet.
    credit: u64,
}

impl SmoothThrottler {
    /// A throttler with the default tuning; one quantum is available at once.
    ///
    /// A zero `units_per_sec` is treated as 1.
    pub fn new(units_per_sec: u64, now: Duration) -> Self {
        Self::with_params(units_per_sec, SmoothParams::default(), now)
    }

    /// A throttler with explicit tuning; one quantum is available at once.
    pub fn with_params(units_per_sec: u64, params: SmoothParams, now: Duration) -> Self {
        let units_per_sec = units_per_sec.max(1);
        let rate = u128::from(units_per_sec);
        let quantum = u64::try_from(rate * params.quantum.as_nanos() / NANOS_PER_SEC)
            .unwrap_or(u64::MAX)
            .max(1);
        let hundred_plus = 100 + u128::from(params.catch_up_percent);
        let ticks_per_nano = rate * hundred_plus;
        let rate_unit = NANOS_PER_SEC * hundred_plus;
        let burst_unit = NANOS_PER_SEC * 100;
        SmoothThrottler {
            units_per_sec,
            quantum,
            params,
            origin: now,
            // The schedules start at tick 0, one quantum in the past, so that
            // the first quantum is due at once.
            epoch: u128::from(quantum) * rate_unit,
            ticks_per_nano,
            rate_unit,
            burst_unit,
            // A schedule may lag by one quantum plus its tolerance, so that a
            // quantum is due at once after an idle.
            slack: (u128::from(quantum) * burst_unit)
                .saturating_add(params.slack.as_nanos().saturating_mul(ticks_per_nano)),
            horizon: (u128::from(quantum) * rate_unit)
                .saturating_add(params.catch_up_horizon.as_nanos().saturating_mul(ticks_per_nano)),
            tat: 0,
            burst_tat: 0,
            credit: 0,
        }
    }

    /// The target rate, in units per second.
    pub fn units_per_sec(&self) -> u64 {
        self.units_per_sec
    }

    /// Units granted per clock read (unless a request needs more).
    pub fn quantum(&self) -> u64 {
        self.quantum
    }

    /// The tuning this throttler was built with.
    pub fn params(&self) -> SmoothParams {
        self.params
    }

    /// Units that the next calls may use without reading the clock.
    pub fn credit(&self) -> u64 {
        self.credit
    }

    /// The theoretical arrival time of the rate schedule: the clock reading at
    /// which the units handed out so far are paid for at the target rate.
    pub fn theoretical_arrival(&self) -> Duration {
        if self.tat >= self.epoch {
            self.origin.saturating_add(self.unscale(self.tat - self.epoch))
        } else {
            self.origin.saturating_sub(self.unscale(self.epoch - self.tat))
        }
    }

    /// Throttles `n` units against the real clock, blocking the thread until
    /// they may go. A cancel of `canceler` ends the wait at once.
    #[inline]
    pub fn throttle(&mut self, n: u64, canceler: &Canceler) -> ThrottleOutcome {
        self.throttle_with(n, &SystemClock, &mut RealSleeper, canceler)
    }

    /// Throttles `n` units about to be used, with an injected clock and sleeper.
    ///
    /// Returns at once, without reading the clock, while the credit covers `n`.
    /// Otherwise waits until a quantum is due, or until `canceler` is canceled.
    #[inline]
    pub fn throttle_with<C, S>(
        &mut self,
        n: u64,
        clock: &C,
        sleeper: &mut S,
        canceler: &Canceler,
    ) -> ThrottleOutcome
    where
        C: Clock + ?Sized,
        S: Sleeper + ?Sized,
    {
        if n <= self.credit {
            self.credit -= n;
            return ThrottleOutcome::PASSED;
        }
        self.acquire(n, clock, sleeper, canceler)
    }

    /// The slow path: read the clock, grant or sleep.
    #[cold]
    #[inline(never)]
    fn acquire<C, S>(
        &mut self,
        n: u64,
        clock: &C,
        sleeper: &mut S,
        canceler: &Canceler,
    ) -> ThrottleOutcome
    where
        C: Clock + ?Sized,
        S: Sleeper + ?Sized,
    {
        let mut wait_started: Option<Duration> = None;
        loop {
            if canceler.is_canceled() {
                // The request goes through unpaid, using up what credit there was.
                self.credit = 0;
                let waited =
                    wait_started.map_or(Duration::ZERO, |t0| clock.now().saturating_sub(t0));
                return ThrottleOutcome { waited, canceled: true };
            }
            let now = clock.now();
            let ticks = self.ticks(now);
            let due = self.due(ticks);
            if due <= ticks {
                self.grant(n);
                let waited = wait_started.map_or(Duration::ZERO, |t0| now.saturating_sub(t0));
                return ThrottleOutcome { waited, canceled: false };
            }
            wait_started.get_or_insert(now);
            let wait_nanos = (due - ticks).div_ceil(self.ticks_per_nano);
            sleeper.sleep(
                Duration::from_nanos(u64::try_from(wait_nanos).unwrap_or(u64::MAX)),
                canceler,
            );
        }
    }

    /// When (in ticks) the next quantum may be granted on both schedules,
    /// once lag beyond the horizon (rate) or the slack (burst) at `ticks`
    /// is forgotten.
    fn due(&mut self, ticks: u128) -> u128 {
        self.tat = self.tat.max(ticks.saturating_sub(self.horizon));
        self.burst_tat = self.burst_tat.max(ticks.saturating_sub(self.slack));
        self.tat
            .saturating_add(self.quantum_ticks(self.rate_unit))
            .max(self.burst_tat.saturating_add(self.quantum_ticks(self.burst_unit)))
    }

    /// Grants at least `n` (a whole quantum when `n` is smaller) on both
    /// schedules and takes `n` from the credit.
    fn grant(&mut self, n: u64) {
        let grant = self.quantum.max(n - self.credit);
        self.tat = self.tat.saturating_add(u128::from(grant) * self.rate_unit);
        self.burst_tat = self.burst_tat.saturating_add(u128::from(grant) * self.burst_unit);
        // `credit + grant >= n`, and the credit left is below `max(quantum, n)`.
        self.credit = self.credit + grant - n;
    }

    /// One quantum on a schedule whose unit is `unit` ticks.
    fn quantum_ticks(&self, unit: u128) -> u128 {
        u128::from(self.quantum) * unit
    }

    /// A clock reading in ticks.
    fn ticks(&self, time: Duration) -> u128 {
        let since_origin = time.saturating_sub(self.origin).as_nanos();
        since_origin.saturating_mul(self.ticks_per_nano).saturating_add(self.epoch)
    }

    /// A number of ticks as a duration.
    fn unscale(&self, ticks: u128) -> Duration {
        Duration::from_nanos(u64::try_from(ticks / self.ticks_per_nano).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::throttle::sleeper::ManualSleeper;
    use proptest::prelude::*;

    const US: Duration = Duration::from_micros(1);
    const MS: Duration = Duration::from_millis(1);
    const WINDOW: Duration = Duration::from_millis(10);

    /// A throttler driven by a manual clock, recording each call.
    struct Harness {
        throttler: SmoothThrottler,
        clock: ManualClock,
        sleeper: ManualSleeper,
        canceler: Canceler,
        /// (return time, units) per call.
        admitted: Vec<(Duration, u64)>,
    }

    impl Harness {
        fn new(units_per_sec: u64) -> Self {
            Self::with_sleeper(units_per_sec, |s| s)
        }

        fn with_sleeper(
            units_per_sec: u64,
            configure: impl FnOnce(ManualSleeper) -> ManualSleeper,
        ) -> Self {
            let clock = ManualClock::starting_at(Duration::from_secs(100));
            let throttler = SmoothThrottler::new(units_per_sec, clock.peek());
            let sleeper = configure(ManualSleeper::new(clock.clone()));
            Harness { throttler, clock, sleeper, canceler: Canceler::new(), admitted: Vec::new() }
        }

        fn call(&mut self, n: u64) -> ThrottleOutcome {
            let outcome =
                self.throttler.throttle_with(n, &self.clock, &mut self.sleeper, &self.canceler);
            self.admitted.push((self.clock.peek(), n));
            outcome
        }

        /// A call that is not recorded, for long runs.
        fn call_quiet(&mut self, n: u64) {
            self.throttler.throttle_with(n, &self.clock, &mut self.sleeper, &self.canceler);
        }

        fn idle(&self, gap: Duration) {
            self.clock.advance(gap);
        }

        /// Largest number of units returned within any window of `width`.
        fn max_in_window(&self, width: Duration) -> u64 {
            let (mut lo, mut sum, mut max) = (0, 0, 0);
            for hi in 0..self.admitted.len() {
                sum += self.admitted[hi].1;
                while self.admitted[hi].0 - self.admitted[lo].0 >= width {
                    sum -= self.admitted[lo].1;
                    lo += 1;
                }
                max = max.max(sum);
            }
            max
        }
    }

    /// `units * 1000 <= 1.1 * rate * 10 ms * 1000 + request * 1000`, in integers.
    fn within_burst_bound(units: u64, rate: u64, largest_request: u64) -> bool {
        u128::from(units) * 1000 <= u128::from(rate) * 11 + u128::from(largest_request) * 1000
    }

    #[test]
    fn defaults_grant_125_microseconds_of_credit_per_clock_read() {
        let t = SmoothThrottler::new(1_000_000, Duration::ZERO);
        assert_eq!(t.quantum(), 125);
        assert_eq!(t.params(), SmoothParams::default());
        assert_eq!(t.units_per_sec(), 1_000_000);
        assert_eq!(SmoothThrottler::new(1000, Duration::ZERO).quantum(), 1);
        assert_eq!(SmoothThrottler::new(0, Duration::ZERO).units_per_sec(), 1);
    }

    #[test]
    fn the_first_call_is_admitted_at_once_with_a_quantum_of_credit() {
        let mut h = Harness::new(100_000);
        assert_eq!(h.call(1), ThrottleOutcome::PASSED);
        assert_eq!(h.throttler.quantum(), 12);
        assert_eq!(h.throttler.credit(), 11);
        // The quantum was due at once: the schedule is paid for up to now.
        assert_eq!(h.throttler.theoretical_arrival(), h.clock.peek());
    }

    #[test]
    fn calls_within_the_credit_never_read_the_clock() {
        let mut h = Harness::new(1_000_000);
        h.call(1);
        let reads = h.clock.reads();
        for _ in 0..124 {
            assert_eq!(h.call(1), ThrottleOutcome::PASSED);
        }
        assert_eq!(h.clock.reads(), reads);
        assert_eq!(h.throttler.credit(), 0);
    }

    #[test]
    fn a_caller_that_outruns_the_rate_sleeps_one_quantum_at_a_time() {
        let mut h = Harness::new(100_000);
        let start = h.clock.peek();
        for _ in 0..12 {
            h.call(1);
        }
        let outcome = h.call(1);
        assert_eq!(outcome, ThrottleOutcome { waited: 120 * US, canceled: false });
        assert_eq!(h.clock.peek(), start + 120 * US);
        assert_eq!(h.sleeper.sleeps(), 1);
    }

    #[test]
    fn a_request_larger_than_a_quantum_is_admitted_whole_and_the_next_one_pays_for_it() {
        let mut h = Harness::new(100_000);
        let start = h.clock.peek();
        assert_eq!(h.call(1000), ThrottleOutcome::PASSED);
        assert_eq!(h.throttler.credit(), 0);
        let next = h.call(1);
        assert_eq!(next.waited, 10 * MS);
        assert_eq!(h.clock.peek(), start + 10 * MS);
    }

    #[test]
    fn after_an_idle_only_the_slack_goes_through_at_once() {
        let mut h = Harness::new(100_000);
        assert_eq!(h.call(12), ThrottleOutcome::PASSED);
        assert_eq!(h.throttler.credit(), 0);
        h.idle(Duration::from_secs(5));
        // The burst schedule restarts one quantum plus the slack (365 µs, 38
        // units at 104 000/s) in the past: three quanta of 12 are due.
        let mut at_once = 0;
        while h.call(1) == ThrottleOutcome::PASSED {
            at_once += 1;
        }
        assert_eq!(at_once, 36);
    }

    /// Calls `throttle(n)` until `span` has passed; returns the units admitted.
    fn saturate(h: &mut Harness, n: u64, span: Duration) -> u64 {
        let end = h.clock.peek() + span;
        let mut units = 0;
        while h.clock.peek() < end {
            h.call_quiet(n);
            units += n;
        }
        units
    }

    #[test]
    fn a_pause_within_the_horizon_is_made_up_at_4_percent_over_the_rate() {
        let mut h = Harness::new(100_000);
        let start = h.clock.peek();
        let mut units = saturate(&mut h, 1, Duration::from_secs(1));
        h.idle(50 * MS);
        // 50 ms are made up at 4 % over the rate: in 1.25 s.
        let resumed = h.clock.peek();
        let first = h.admitted.len();
        while h.clock.peek() < resumed + Duration::from_millis(1250) {
            h.call(1);
        }
        let mut windows = vec![0u64; 125];
        for &(at, n) in &h.admitted[first..] {
            units += n;
            if let Some(w) =
                windows.get_mut(((at - resumed).as_nanos() / WINDOW.as_nanos()) as usize)
            {
                *w += n;
            }
        }
        units += saturate(&mut h, 1, Duration::from_secs(1));
        let elapsed = (h.clock.peek() - start).as_secs_f64();
        assert!((units as f64 / elapsed / 100_000.0 - 1.0).abs() < 0.001, "{units} in {elapsed}");
        // While catching up (until the last window), each 10 ms holds about 4 %
        // more than its share, never 10 % more.
        assert!(windows[..120].iter().all(|&w| (1_030..=1_100).contains(&w)), "{windows:?}");
    }

    #[test]
    fn idle_longer_than_the_horizon_is_forgotten() {
        let mut h = Harness::new(100_000);
        saturate(&mut h, 1, Duration::from_secs(1));
        h.idle(Duration::from_secs(5));
        // Only the 100 ms horizon (10 000 units) is made up, not 5 s.
        let units = saturate(&mut h, 1, Duration::from_secs(5));
        assert!(units.abs_diff(500_000 + 10_000) <= 20, "{units}");
    }

    #[test]
    fn lateness_within_the_slack_does_not_lower_the_rate() {
        let mut h = Harness::with_sleeper(100_000, |s| s.with_lateness(240 * US));
        let start = h.clock.peek();
        let units = saturate(&mut h, 3, Duration::from_secs(10));
        let rate = units as f64 / (h.clock.peek() - start).as_secs_f64();
        assert!((rate / 100_000.0 - 1.0).abs() < 0.001, "rate {rate}");
    }

    #[test]
    fn rare_long_stalls_are_made_up() {
        // One sleep in a thousand wakes 5 ms late (2.5 % of the time).
        let mut pattern = vec![100 * US; 999];
        pattern.push(5 * MS);
        let mut h = Harness::with_sleeper(100_000, |s| s.with_lateness_pattern(pattern));
        let start = h.clock.peek();
        let units = saturate(&mut h, 1, Duration::from_secs(20));
        let rate = units as f64 / (h.clock.peek() - start).as_secs_f64();
        assert!((rate / 100_000.0 - 1.0).abs() < 0.002, "rate {rate}");
    }

    #[test]
    fn tiny_rates_space_single_units_evenly() {
        let mut h = Harness::new(4);
        let mut returns = Vec::new();
        for _ in 0..8 {
            h.call(1);
            returns.push(h.clock.peek());
        }
        for pair in returns.windows(2) {
            assert_eq!(pair[1] - pair[0], 250 * MS);
        }
    }

    #[test]
    fn a_cancel_during_a_wait_ends_it_and_later_calls_do_not_wait() {
        let mut h = Harness::with_sleeper(10, |s| s.cancel_during_sleep(1));
        h.call(1);
        let outcome = h.call(1);
        assert_eq!(outcome, ThrottleOutcome { waited: 50 * MS, canceled: true });
        for _ in 0..5 {
            assert!(h.call(1).canceled);
        }
        assert_eq!(h.sleeper.sleeps(), 1);
    }

    /// A workload: (idle before the call in µs, units).
    fn workload(max_gap_us: u64, max_n: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
        let gap = prop_oneof![6 => Just(0u64), 3 => 0..2_000u64, 1 => 0..max_gap_us];
        prop::collection::vec((gap, 1..=max_n), 1..2_000)
    }

    fn rate_strategy() -> impl Strategy<Value = u64> {
        prop_oneof![1u64..1_000, 1_000u64..100_000, 100_000u64..2_000_000]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn no_10ms_window_admits_more_than_1_1x_its_share_plus_one_request(
            rate in rate_strategy(),
            max_n in prop_oneof![Just(1u64), 1u64..500],
            work in workload(50_000, 500),
            lateness_us in prop_oneof![Just(0u64), 0u64..2_000],
        ) {
            let mut h = Harness::with_sleeper(rate, |s| s.with_lateness(Duration::from_micros(lateness_us)));
            let mut largest = 0;
            for &(gap, n) in &work {
                let n = n.min(max_n);
                largest = largest.max(n);
                h.idle(Duration::from_micros(gap));
                h.call(n);
            }
            let max = h.max_in_window(WINDOW);
            prop_assert!(within_burst_bound(max, rate, largest),
                "{} units in 10 ms at {}/s (largest request {})", max, rate, largest);
        }

        #[test]
        fn bursts_of_saturation_after_pauses_stay_within_1_1x_per_10ms(
            rate in 1u64..200_000,
            phases in prop::collection::vec((0u64..150_000, 1u64..40, 1u64..8), 1..20),
            stall_us in prop_oneof![Just(0u64), 0u64..5_000],
        ) {
            // Pauses (made up later) and stalls (made up later) followed by
            // phases of saturation: the worst case for the catch-up margin.
            let mut pattern = vec![Duration::from_micros(100); 99];
            pattern.push(Duration::from_micros(stall_us));
            let mut h = Harness::with_sleeper(rate, |s| s.with_lateness_pattern(pattern));
            let mut largest = 0;
            for &(pause_us, busy_ms, n) in &phases {
                let n = n.max(rate / 20_000);
                largest = largest.max(n);
                h.idle(Duration::from_micros(pause_us));
                let end = h.clock.peek() + Duration::from_millis(busy_ms);
                while h.clock.peek() < end {
                    h.call(n);
                }
            }
            let max = h.max_in_window(WINDOW);
            prop_assert!(within_burst_bound(max, rate, largest),
                "{} units in 10 ms at {}/s (largest request {})", max, rate, largest);
        }

        #[test]
        fn long_run_rate_is_within_1_percent_of_the_target(
            rate in rate_strategy(),
            n in 1u64..50,
            lateness_us in 0u64..250,
            stall_every in 1_000usize..3_000,
            stall_us in prop_oneof![Just(0u64), 0u64..2_500],
        ) {
            // Every sleep wakes late by up to the slack, and one in
            // `stall_every` stalls for up to 2.5 ms: with one sleep per
            // 125 µs quantum that loses at most 2.5 ms / 125 ms = 2 % of the
            // time, inside the module's stated domain (less than the 4 %
            // catch-up margin lost to stalls). An earlier version drew stalls
            // of up to 5 ms every 500 sleeps (8 % of the time) and found,
            // correctly, that the rate then falls short: 0.98998 of 100 k/s.
            let mut pattern = vec![Duration::from_micros(lateness_us); stall_every - 1];
            pattern.push(Duration::from_micros(stall_us));
            let mut h = Harness::with_sleeper(rate, |s| s.with_lateness_pattern(pattern));
            let start = h.clock.peek();
            // At least 2 s and 2000 units; no request above 1 ms worth.
            let n = n.min(rate.div_ceil(1000));
            let span = Duration::from_secs(2).max(Duration::from_secs_f64(2_000.0 / rate as f64));
            let units = saturate(&mut h, n, span);
            let rate_seen = units as f64 / (h.clock.peek() - start).as_secs_f64();
            prop_assert!((rate_seen / rate as f64 - 1.0).abs() <= 0.01,
                "achieved {} for target {}", rate_seen, rate);
        }

        #[test]
        fn no_call_waits_or_reads_the_clock_while_the_credit_covers_it(
            rate in rate_strategy(),
            work in workload(50_000, 300),
        ) {
            let mut h = Harness::new(rate);
            for &(gap, n) in &work {
                h.idle(Duration::from_micros(gap));
                let covered = h.throttler.credit() >= n;
                let (reads, sleeps) = (h.clock.reads(), h.sleeper.sleeps());
                let outcome = h.call(n);
                if covered {
                    prop_assert_eq!(outcome, ThrottleOutcome::PASSED);
                    prop_assert_eq!(h.clock.reads(), reads);
                    prop_assert_eq!(h.sleeper.sleeps(), sleeps);
                } else {
                    prop_assert_eq!(h.clock.reads(), reads + 1 + (h.sleeper.sleeps() - sleeps));
                }
                prop_assert!(h.throttler.credit() < h.throttler.quantum().max(n));
            }
        }

        #[test]
        fn an_idle_never_releases_more_than_the_slack_plus_a_quantum_at_once(
            rate in rate_strategy(),
            before in workload(50_000, 100),
            idle_us in 500u64..10_000_000,
        ) {
            let mut h = Harness::new(rate);
            for &(gap, n) in &before {
                h.idle(Duration::from_micros(gap));
                h.call(n);
            }
            h.idle(Duration::from_micros(idle_us));
            let credit = h.throttler.credit();
            let mut at_once = 0u64;
            while h.call(1) == ThrottleOutcome::PASSED {
                at_once += 1;
            }
            let burst_rate = u128::from(rate) * u128::from(100 + DEFAULT_CATCH_UP_PERCENT) / 100;
            let slack_units = u64::try_from(burst_rate * DEFAULT_SLACK.as_nanos() / NANOS_PER_SEC).unwrap();
            prop_assert!(at_once <= credit + slack_units + h.throttler.quantum(),
                "{} at once (credit {}, slack {}, quantum {})", at_once, credit, slack_units, h.throttler.quantum());
        }

        #[test]
        fn a_cancel_always_ends_a_wait(
            rate in rate_strategy(),
            work in workload(50_000, 300),
            nth_sleep in 1u64..6,
        ) {
            let mut h = Harness::with_sleeper(rate, |s| s.cancel_during_sleep(nth_sleep));
            let mut canceled_once = false;
            for &(gap, n) in &work {
                h.idle(Duration::from_micros(gap));
                let sleeps = h.sleeper.sleeps();
                let outcome = h.call(n);
                if canceled_once {
                    prop_assert_eq!(h.sleeper.sleeps(), sleeps);
                    prop_assert_eq!(outcome.waited, Duration::ZERO);
                }
                if outcome.canceled {
                    prop_assert_eq!(h.sleeper.sleeps(), nth_sleep);
                    canceled_once = true;
                }
            }
            prop_assert_eq!(canceled_once, h.sleeper.sleeps() >= nth_sleep);
        }
    }
}
