//! Exponential backoff with a cap: the pause before a retry or a
//! reconnection.

use std::time::Duration;

/// `initial`, doubled per attempt, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first pause (attempt 1).
    pub initial: Duration,
    /// The longest pause.
    pub max: Duration,
}

impl Backoff {
    /// A backoff from `initial` to `max`.
    pub const fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max }
    }

    /// No pause at all.
    pub const NONE: Backoff = Backoff::new(Duration::ZERO, Duration::ZERO);

    /// The pause before retry number `attempt` (1 for the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(30);
        self.initial.saturating_mul(1 << shift).min(self.max)
    }

    /// An iterator-like state for a loop of attempts (reconnecting).
    pub fn attempts(self) -> Attempts {
        Attempts { backoff: self, attempt: 0 }
    }
}

/// The pauses of successive attempts; [`Attempts::reset`] after a success.
#[derive(Debug, Clone, Copy)]
pub struct Attempts {
    backoff: Backoff,
    attempt: u32,
}

impl Attempts {
    /// The pause before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.attempt = self.attempt.saturating_add(1);
        self.backoff.delay(self.attempt)
    }

    /// Attempts failed since the last reset.
    pub fn failures(&self) -> u32 {
        self.attempt
    }

    /// Back to the first pause.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let ms: Vec<u128> = (1..=6).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
        let mut a = b.attempts();
        assert_eq!(a.next_delay(), Duration::from_millis(100));
        assert_eq!(a.next_delay(), Duration::from_millis(200));
        a.reset();
        assert_eq!(a.next_delay(), Duration::from_millis(100));
        assert_eq!(Backoff::NONE.delay(5), Duration::ZERO);
    }
}
