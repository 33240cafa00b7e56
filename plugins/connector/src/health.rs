//! The connection's health, as the operator sees it.
//!
//! The I/O thread says what happens to the connection; this module turns
//! it into the four things an operator looks at, so no connector stalls in
//! silence:
//!
//! - a **log line** when the connection drops ([`Health::lost`]) and when it
//!   is back ([`Health::restored`], with how long it was down);
//! - the gauge **`connector_up`** (1 or 0): the host's `/readyz` answers
//!   503 while any task's is 0;
//! - the counter **`<prefix>_reconnects`**;
//! - the error **`next_tuple` returns** ([`Health::take_error`]): the host
//!   counts it in the task's `errors` and shows it as `last_error`.
//!
//! A problem that is not a lost connection but keeps the spout from reading
//! (a consumer group that vanished and may not be recreated, a topic a
//! broker restarted empty no longer has) is reported with
//! [`Health::failing`]: it also turns `connector_up` to 0, and each distinct
//! reason is logged once per outage, also when the connection was lost
//! first (a broker that comes back without the spout's topics says so).
//!
//! The I/O thread's calls take a lock only when the state changes; the
//! spout's [`Health::take_error`] is one relaxed atomic load when nothing
//! happened.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use squall_plugin_api::metrics::{self, Counter, Gauge};
use squall_plugin_api::Waker;

/// The most distinct `failing` reasons logged per outage (later ones are
/// logged as repeats, at powers of two).
const MAX_REASONS: usize = 16;

/// The name of the readiness gauge the host's `/readyz` reads.
pub const UP_GAUGE: &str = "connector_up";

#[derive(Debug)]
struct Metrics {
    up: Gauge,
    reconnects: Counter,
}

#[derive(Debug)]
struct Inner {
    label: String,
    up: AtomicBool,
    news: AtomicBool,
    state: Mutex<State>,
    metrics: OnceLock<Metrics>,
    waker: OnceLock<Waker>,
}

#[derive(Debug, Default)]
struct State {
    down_since: Option<Instant>,
    error: Option<String>,
    repeats: u64,
    /// The `failing` reasons logged in this outage (each is logged once,
    /// up to `MAX_REASONS`).
    reasons: Vec<String>,
}

/// Shared between the spout and its I/O thread (module doc).
#[derive(Debug, Clone)]
pub struct Health(Arc<Inner>);

impl Health {
    /// Health for the task `label` names (`"orders task 0"`), up.
    pub fn new(label: impl Into<String>) -> Self {
        Self(Arc::new(Inner {
            label: label.into(),
            up: AtomicBool::new(true),
            news: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            metrics: OnceLock::new(),
            waker: OnceLock::new(),
        }))
    }

    /// Registers `connector_up` and `<prefix>_reconnects`, and keeps the
    /// spout's wake handle, so that an error reaches `next_tuple` also while
    /// the spout is idle. Call it from `open` (metrics are registered on the
    /// task's thread).
    pub fn register(&self, prefix: &str, waker: Option<Waker>) {
        if let Some(w) = waker {
            let _ = self.0.waker.set(w);
        }
        let m = Metrics {
            up: metrics::gauge(UP_GAUGE, "1 while the connector's connection works, 0 while it does not (/readyz answers 503)."),
            reconnects: metrics::counter(
                &format!("{prefix}_reconnects"),
                "Connections to the broker restored after a loss.",
            ),
        };
        m.up.set(i64::from(self.is_up()));
        let _ = self.0.metrics.set(m);
    }

    /// The task's label.
    pub fn label(&self) -> &str {
        &self.0.label
    }

    /// True while the connection works.
    #[inline]
    pub fn is_up(&self) -> bool {
        self.0.up.load(Ordering::Relaxed)
    }

    /// The connection dropped (`why`). Logged once per outage; later calls
    /// during the same outage only update the error.
    pub fn lost(&self, why: &str) {
        self.down(why, false);
    }

    /// Connected, but the spout cannot read (`why`); like [`Health::lost`].
    pub fn failing(&self, why: &str) {
        self.down(why, true);
    }

    /// Down for `why`: the connection was lost, or (`failing`) it works
    /// but the spout cannot read.
    fn down(&self, why: &str, failing: bool) {
        let what = if failing { "cannot read" } else { "connection lost" };
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        let first = self.0.up.swap(false, Ordering::Relaxed);
        if first {
            state.down_since = Some(Instant::now());
            state.repeats = 0;
            state.reasons.clear();
            if let Some(m) = self.0.metrics.get() {
                m.up.set(0);
            }
        }
        let news =
            failing && state.reasons.len() < MAX_REASONS && !state.reasons.iter().any(|r| r == why);
        if first || news {
            if failing {
                state.reasons.push(why.to_owned());
            }
            squall_plugin_api::warn!("{}: {what}: {why}", self.0.label);
        } else {
            state.repeats += 1;
            if state.repeats.is_power_of_two() {
                squall_plugin_api::warn!(
                    "{}: still down ({} attempts): {why}",
                    self.0.label,
                    state.repeats
                );
            }
        }
        state.error = Some(format!("{}: {what}: {why}", self.0.label));
        self.0.news.store(true, Ordering::Release);
        drop(state);
        self.wake();
    }

    fn wake(&self) {
        if let Some(w) = self.0.waker.get() {
            w.wake();
        }
    }

    /// The connection works again (after [`Health::lost`] or
    /// [`Health::failing`]); a no-op while up.
    pub fn restored(&self, how: &str) {
        if self.0.up.load(Ordering::Relaxed) {
            return;
        }
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.0.up.swap(true, Ordering::Relaxed) {
            return;
        }
        let down = state.down_since.take().map_or(0.0, |t| t.elapsed().as_secs_f64());
        squall_plugin_api::info!("{}: {how} after {down:.1} s down", self.0.label);
        if let Some(m) = self.0.metrics.get() {
            m.up.set(1);
            m.reconnects.inc();
        }
    }

    /// An error for `next_tuple` to report, with no change of state.
    pub fn report(&self, message: String) {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        state.error = Some(message);
        self.0.news.store(true, Ordering::Release);
        drop(state);
        self.wake();
    }

    /// The error to return from `next_tuple` since the last call, if any
    /// (the host counts it and shows it as `last_error`). While down, the
    /// error is returned again at most once per call of the I/O thread's
    /// report, so `errors` counts the failed attempts.
    #[inline]
    pub fn take_error(&self) -> Option<String> {
        if !self.0.news.load(Ordering::Relaxed) {
            return None;
        }
        self.take_error_slow()
    }

    #[cold]
    fn take_error_slow(&self) -> Option<String> {
        self.0.news.store(false, Ordering::Relaxed);
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        state.error.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_reported_once_to_next_tuple_per_attempt_and_ends_on_restore() {
        let h = Health::new("t task 0");
        assert!(h.is_up());
        assert_eq!(h.take_error(), None);
        h.lost("connection refused");
        assert!(!h.is_up());
        assert_eq!(
            h.take_error().as_deref(),
            Some("t task 0: connection lost: connection refused")
        );
        assert_eq!(h.take_error(), None, "reported once");
        h.lost("connection refused");
        assert!(h.take_error().is_some(), "a new attempt failed");
        h.restored("reconnected");
        assert!(h.is_up());
        h.failing("NOGROUP");
        assert!(!h.is_up());
        assert!(h.take_error().unwrap().contains("cannot read: NOGROUP"));
    }

    #[test]
    fn a_failing_reason_is_news_once_per_outage_even_after_a_lost_connection() {
        let h = Health::new("t task 0");
        h.lost("connection refused");
        assert!(h.take_error().unwrap().contains("connection lost"));
        h.failing("topic \"a\" is gone");
        assert!(!h.is_up());
        assert!(h.take_error().unwrap().contains("cannot read: topic \"a\" is gone"));
        let reasons = |h: &Health| h.0.state.lock().unwrap().reasons.clone();
        assert_eq!(reasons(&h), ["topic \"a\" is gone"], "logged");
        h.failing("topic \"a\" is gone");
        h.lost("connection refused");
        h.failing("topic \"a\" is gone");
        assert_eq!(reasons(&h).len(), 1, "logged once per outage");
        assert!(h.take_error().is_some(), "each attempt is still reported");
        h.restored("back");
        h.failing("topic \"a\" is gone");
        assert_eq!(reasons(&h).len(), 1, "a new outage logs it again, once");
    }
}
