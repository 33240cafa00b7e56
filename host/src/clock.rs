//! Monotonic time for the host, behind a trait so that time can be injected.
//!
//! Everything in squall that measures time on a hot path or makes decisions from
//! it (the throttler first of all) reads it through [`Clock`], never through
//! `Instant::now()` directly. Production code uses [`SystemClock`]; tests use
//! [`ManualClock`], which only moves when the test says so, so timing behaviour
//! can be checked with exact arithmetic instead of sleeps.
//!
//! A clock reports a [`Duration`] since an arbitrary, fixed origin. Values from the
//! same clock can be subtracted; values from different clock kinds cannot be
//! compared. All [`SystemClock`]s in a process share one origin.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A source of monotonic time.
///
/// `now` never goes backwards for a given clock. It is called only on slow paths
/// (for instance when a throttler's credit runs out), so implementations may cost
/// a few tens of nanoseconds.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Time elapsed since this clock's origin.
    fn now(&self) -> Duration;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Duration {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Box<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }
}

/// The process origin shared by every [`SystemClock`].
static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// The real monotonic clock, backed by [`Instant`].
///
/// The origin is fixed the first time any `SystemClock` is read in the process,
/// so readings from different `SystemClock` values are comparable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SystemClock;

impl SystemClock {
    /// Returns the real clock.
    pub const fn new() -> Self {
        SystemClock
    }

    /// The [`Instant`] that corresponds to a reading of this clock.
    ///
    /// Useful to hand a deadline computed from [`Clock::now`] to an API that
    /// takes an `Instant`.
    pub fn instant_at(&self, reading: Duration) -> Instant {
        *ORIGIN.get_or_init(Instant::now) + reading
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        ORIGIN.get_or_init(Instant::now).elapsed()
    }
}

/// A clock that only moves when told to, for tests.
///
/// Clones share the same time, so a test can keep one handle and give another
/// to the code under test. It also counts how often it was read, which lets a
/// test check that a hot path does not read the clock.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug, Default)]
struct ManualInner {
    /// Current reading in nanoseconds (584 years fit in a `u64`).
    nanos: AtomicU64,
    /// How many times [`Clock::now`] was called.
    reads: AtomicU64,
}

impl ManualClock {
    /// A manual clock that reads zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// A manual clock that reads `start`.
    pub fn starting_at(start: Duration) -> Self {
        let clock = Self::new();
        clock.set(start);
        clock
    }

    /// Moves the clock forward by `by`, saturating at the largest reading.
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos(by);
        // fetch_update cannot fail with a closure that always returns Some.
        let _ = self
            .inner
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| Some(now.saturating_add(by)));
    }

    /// Sets the clock to `to`.
    ///
    /// # Panics
    ///
    /// Panics if `to` is earlier than the current reading: a clock is monotonic.
    pub fn set(&self, to: Duration) {
        let to = duration_to_nanos(to);
        let before = self.inner.nanos.fetch_max(to, Ordering::SeqCst);
        assert!(before <= to, "ManualClock::set would move time backwards");
    }

    /// How many times [`Clock::now`] has been called on this clock or its clones.
    pub fn reads(&self) -> u64 {
        self.inner.reads.load(Ordering::SeqCst)
    }

    /// The current reading, without counting it as a read.
    pub fn peek(&self) -> Duration {
        Duration::from_nanos(self.inner.nanos.load(Ordering::SeqCst))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.inner.reads.fetch_add(1, Ordering::SeqCst);
        self.peek()
    }
}

/// Simulated time for a whole run (`squall test`): the clock that the
/// system thread's tick tuples and message timeouts and the windowed bolts'
/// processing time read, moved only by the test; and how far the system
/// thread has sent what is due.
///
/// Clones share the clock and the progress.
#[derive(Debug, Clone, Default)]
pub struct SimulatedTime {
    /// The simulated clock (starts at 0).
    pub clock: ManualClock,
    /// The clock reading (ns) up to which the system thread has sent every
    /// tick tuple and timeout tick due (Release after the sends; read with
    /// Acquire).
    ticked_to: Arc<AtomicU64>,
}

impl SimulatedTime {
    /// A simulated clock at 0, nothing ticked yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that everything due up to `at` has been sent.
    pub fn ticked(&self, at: Duration) {
        self.ticked_to.fetch_max(duration_to_nanos(at), Ordering::Release);
    }

    /// True once everything due up to `at` has been sent.
    pub fn has_ticked(&self, at: Duration) -> bool {
        self.ticked_to.load(Ordering::Acquire) >= duration_to_nanos(at)
    }

    /// The simulated reading in milliseconds (what a processing-time window
    /// reads).
    pub fn now_millis(&self) -> u64 {
        self.clock.peek().as_millis() as u64
    }
}

/// `d` in nanoseconds, saturating at `u64::MAX`.
fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_never_goes_backwards() {
        let clock = SystemClock::new();
        let mut last = clock.now();
        for _ in 0..1000 {
            let now = clock.now();
            assert!(now >= last);
            last = now;
        }
    }

    #[test]
    fn system_clocks_share_one_origin() {
        let a = SystemClock::new().now();
        let b = SystemClock.now();
        assert!(b >= a);
        assert!(b - a < Duration::from_secs(1));
    }

    #[test]
    fn system_clock_maps_readings_back_to_instants() {
        let clock = SystemClock::new();
        let reading = clock.now();
        let instant = clock.instant_at(reading);
        assert!(instant <= Instant::now());
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new();
        assert_eq!(clock.now(), Duration::ZERO);
        clock.advance(Duration::from_millis(3));
        assert_eq!(clock.now(), Duration::from_millis(3));
        clock.set(Duration::from_secs(2));
        assert_eq!(clock.now(), Duration::from_secs(2));
    }

    #[test]
    fn manual_clock_clones_share_time_and_read_counts() {
        let clock = ManualClock::starting_at(Duration::from_secs(1));
        let other = clock.clone();
        other.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), Duration::from_secs(2));
        assert_eq!(other.reads(), 1);
        assert_eq!(clock.peek(), Duration::from_secs(2));
        assert_eq!(clock.reads(), 1, "peek does not count as a read");
    }

    #[test]
    #[should_panic(expected = "backwards")]
    fn manual_clock_refuses_to_go_backwards() {
        let clock = ManualClock::starting_at(Duration::from_secs(5));
        clock.set(Duration::from_secs(4));
    }

    #[test]
    fn manual_clock_saturates_instead_of_overflowing() {
        let clock = ManualClock::new();
        clock.advance(Duration::MAX);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.peek(), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn clocks_work_through_references_and_smart_pointers() {
        let clock = ManualClock::starting_at(Duration::from_millis(7));
        let as_dyn: &dyn Clock = &clock;
        let boxed: Box<dyn Clock> = Box::new(clock.clone());
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        assert_eq!(as_dyn.now(), Duration::from_millis(7));
        assert_eq!((&as_dyn).now(), Duration::from_millis(7));
        assert_eq!(boxed.now(), Duration::from_millis(7));
        assert_eq!(shared.now(), Duration::from_millis(7));
    }
}
