//! Executors: the spout loop, the bolt loop, and what they share.
//!
//! One thread per task, or per chain of tasks ([`chain`]). Data flows between tasks as batches over bounded
//! crossbeam channels ([`batch::Batch`]); acks, ticks and other control
//! messages flow over separate unbounded channels, so they never wait behind
//! data (the cause of Storm's false timeouts under backpressure, STORM-2359).

pub use crate::queue::batch;
pub mod bolt;
pub mod chain;
pub mod core;
pub mod output;
pub mod spout;
pub mod swap;
pub mod tracking;
pub mod transfer;
pub mod wake;
pub mod window;

#[cfg(test)]
mod loop_tests;

use std::time::{Duration, Instant};

/// What one turn of a task's loop came to, for a chain that runs several
/// tasks on one thread ([`chain`]) and waits for them together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// It did work: the next turn follows at once.
    Busy,
    /// Its emits wait for room downstream; it consumed nothing.
    Blocked,
    /// It found nothing to do, and would wait as [`Idle`] says.
    Idle(Idle),
    /// The task ended (the run stopped, or a reload retired it).
    Stop,
}

/// How an idle task waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// A spout's nap, by its wait strategy.
    Nap,
    /// A spout blocks on its control queue and, when `woken`, on its wake
    /// signal.
    Block {
        /// The spout took its wake handle.
        woken: bool,
    },
    /// A bolt waits on its receive and control queues.
    Queues,
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

    /// The policy of `max_restarts` within `restart_window_secs`.
    pub fn from_settings(settings: &crate::config::Settings) -> Self {
        Self::new(settings.max_restarts, Duration::from_secs(settings.restart_window_secs))
    }

    /// Records a restart at `now`; false when it exceeds the limit.
    pub fn allow(&mut self, now: Instant) -> bool {
        self.recent.retain(|&t| now.duration_since(t) < self.window);
        self.recent.push(now);
        self.recent.len() <= self.max_restarts as usize
    }
}

/// Counts a plugin error in the task's stats and logs it the 1st, 10th,
/// 100th, 1000th... time, so a failing plugin cannot flood the log. The
/// error's text is kept for the HTTP API's last errors when it is logged,
/// and otherwise at most once a second.
pub(crate) fn count_error(
    stats: &mut crate::metrics::LocalStats,
    shared: &crate::metrics::TaskStats,
    name: &str,
    message: &str,
) {
    count_error_logging(stats, shared, name, message, true, 1);
}

/// Counts a refused emit of `core`'s task made in `call`, as
/// [`count_error`] does, except that a value count that differs from the
/// stream's fields (a plugin bug, the same at every call) is logged once per
/// topology, component and stream, whatever the number of tasks. So is a
/// custom grouping's bad index, once per stream and subscriber; each bad
/// index was already counted by the emit (`HostOutput::misrouted`), so it
/// is not counted again here.
#[cold]
pub(crate) fn count_emit_error(
    stats: &mut crate::metrics::LocalStats,
    core: &core::TaskCore,
    call: &str,
    e: &transfer::EmitError,
) {
    let message = format!("{call}: {e}");
    let once = match e {
        transfer::EmitError::Arity(a) => Some(a.stream.clone()),
        transfer::EmitError::Misrouted(m) => Some(format!("{} -> {}", m.stream, m.target)),
        _ => None,
    };
    let add = match e {
        transfer::EmitError::Misrouted(_) => 0,
        _ => 1,
    };
    let log = match once {
        Some(stream) => {
            type Seen = std::collections::BTreeSet<(String, String, String)>;
            static SEEN: std::sync::Mutex<Seen> = std::sync::Mutex::new(Seen::new());
            let key = (core.context.topology.to_string(), core.name.component.clone(), stream);
            let first = SEEN.lock().map(|mut seen| seen.insert(key)).unwrap_or(true);
            if first {
                tracing::error!(
                    "{}: {message} (logged once per component and stream; every one is counted \
                     in `errors`)",
                    core.label
                );
            }
            false
        }
        None => true,
    };
    count_error_logging(stats, &core.shared, &core.label, &message, log, add);
}

fn count_error_logging(
    stats: &mut crate::metrics::LocalStats,
    shared: &crate::metrics::TaskStats,
    name: &str,
    message: &str,
    log: bool,
    add: u64,
) {
    use crate::metrics::StatField;
    stats.add(StatField::Errors, add);
    let n = stats.get(StatField::Errors);
    let logged = (n as f64).log10().fract() == 0.0;
    if logged && log {
        tracing::warn!("{name}: {message} (error #{n})");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if logged || shared.errors.newest_secs().is_none_or(|t| t < now) {
        shared.errors.record(format!("{message} (error #{n})"));
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
}
