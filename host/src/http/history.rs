//! [`History`]: per-second samples of a running topology, for the REST API's
//! windows (10 s, 1 min, 10 min) and the web page's sparklines.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::metrics::{new_histogram, StatField};
use crate::runtime::TopologyHandle;
use crate::topology::Kind;

/// How many samples are kept: ten minutes and one, at one per second.
pub const KEEP: usize = 601;

/// Cumulative counters of one component at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Tuples emitted.
    pub emitted: u64,
    /// Tuples handed to downstream queues.
    pub transferred: u64,
    /// Tuples executed.
    pub executed: u64,
    /// Trees (spouts) or inputs (bolts) acked.
    pub acked: u64,
    /// Failures of every reason.
    pub failed: u64,
}

impl Counts {
    /// The counters of one component, summed over its tasks.
    pub fn of(handle: &TopologyHandle, component: usize) -> Self {
        let c = &handle.topology().components[component];
        let mut out = Counts::default();
        for t in c.tasks.clone() {
            let s = handle.task_stats(t);
            out.emitted += s.get(StatField::Emitted);
            out.transferred += s.get(StatField::Transferred);
            out.executed += s.get(StatField::Executed);
            out.acked += s.get(StatField::Acked);
            out.failed += s.get(StatField::FailedExplicit)
                + s.get(StatField::FailedTimeout)
                + s.get(StatField::FailedPanic)
                + s.get(StatField::FailedShutdown);
        }
        out
    }

    fn minus(self, earlier: Counts) -> Counts {
        Counts {
            emitted: self.emitted.saturating_sub(earlier.emitted),
            transferred: self.transferred.saturating_sub(earlier.transferred),
            executed: self.executed.saturating_sub(earlier.executed),
            acked: self.acked.saturating_sub(earlier.acked),
            failed: self.failed.saturating_sub(earlier.failed),
        }
    }
}

/// One sample: when, every component's counters, and the complete latency
/// of the trees acked in the second before it.
#[derive(Debug, Clone)]
struct Sample {
    secs: f64,
    counts: Vec<Counts>,
    /// p50 and p99 complete latency (µs) of the second before, all spouts.
    latency: Option<(u64, u64)>,
}

/// A component's figures over one window.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct WindowStats {
    /// The window's length in seconds actually covered (shorter early on).
    pub secs: f64,
    /// Counts within the window.
    #[serde(flatten)]
    pub counts: Counts,
    /// Emitted per second.
    pub emit_rate: f64,
    /// Executed per second.
    pub execute_rate: f64,
    /// Acked per second.
    pub ack_rate: f64,
}

/// The last [`KEEP`] seconds of samples.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

/// A series for the web page's sparklines.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    /// Seconds since start of each point.
    pub secs: Vec<f64>,
    /// Tuples executed per second, all bolts, per point.
    pub executed_per_sec: Vec<f64>,
    /// Trees acked per second, all spouts, per point.
    pub acked_per_sec: Vec<f64>,
    /// Complete latency p50 (µs) of the second before each point.
    pub complete_latency_p50_us: Vec<Option<u64>>,
    /// Complete latency p99 (µs) of the second before each point.
    pub complete_latency_p99_us: Vec<Option<u64>>,
}

impl History {
    /// Starts a sampler thread that records `handle` once a second until
    /// the topology stops.
    ///
    /// # Errors
    /// When the thread cannot be spawned.
    pub fn start(handle: TopologyHandle) -> std::io::Result<Arc<History>> {
        let history = Arc::new(History::default());
        let keep = history.clone();
        std::thread::Builder::new().name("__http-history".into()).spawn(move || {
            let started = Instant::now();
            let mut previous = new_histogram();
            let mut tick = 0u32;
            loop {
                keep.sample(&handle, &mut previous);
                tick += 1;
                let next = started + Duration::from_secs(u64::from(tick));
                if handle.state() == crate::control::RunState::Stopping {
                    return;
                }
                // Wakes at the next second; the drain does not end sampling,
                // so the page follows the drain too.
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        })?;
        Ok(history)
    }

    fn sample(&self, handle: &TopologyHandle, previous: &mut Histogram<u64>) {
        let n = handle.topology().components.len();
        let counts = (0..n).map(|i| Counts::of(handle, i)).collect();
        let mut now = new_histogram();
        for c in handle.topology().components.iter().filter(|c| c.kind == Kind::Spout) {
            for t in c.tasks.clone() {
                let _ = now.add(handle.task_stats(t).latency.snapshot());
            }
        }
        let mut delta = now.clone();
        let latency = (delta.subtract(&*previous).is_ok() && !delta.is_empty())
            .then(|| (delta.value_at_quantile(0.5), delta.value_at_quantile(0.99)));
        *previous = now;
        let sample = Sample { secs: handle.elapsed().as_secs_f64(), counts, latency };
        if let Ok(mut samples) = self.samples.lock() {
            if samples.len() == KEEP {
                samples.pop_front();
            }
            samples.push_back(sample);
        }
    }

    /// Component `component`'s figures over the last `window` seconds
    /// (`None` = since start), ending at `now` (its current counters).
    pub fn window(
        &self,
        component: usize,
        now: Counts,
        elapsed: f64,
        window: Option<f64>,
    ) -> WindowStats {
        let samples = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        // A window longer than the run so far covers the whole run (from
        // zero counts at start), not just the samples taken since.
        let start = window.filter(|&w| elapsed > w).and_then(|w| {
            samples
                .iter()
                .find(|s| elapsed - s.secs <= w + 0.5)
                .map(|s| (s.secs, s.counts.get(component).copied().unwrap_or_default()))
        });
        let (from, base) = start.unwrap_or((0.0, Counts::default()));
        let secs = (elapsed - from).max(1e-9);
        let counts = now.minus(base);
        WindowStats {
            secs,
            counts,
            emit_rate: counts.emitted as f64 / secs,
            execute_rate: counts.executed as f64 / secs,
            ack_rate: counts.acked as f64 / secs,
        }
    }

    /// The per-second series of the last `points` samples.
    pub fn series(&self, handle: &TopologyHandle, points: usize) -> Series {
        let samples = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        let kinds: Vec<Kind> = handle.topology().components.iter().map(|c| c.kind).collect();
        let sum = |s: &Sample, kind: Kind, f: fn(&Counts) -> u64| -> u64 {
            s.counts.iter().zip(&kinds).filter(|(_, k)| **k == kind).map(|(c, _)| f(c)).sum()
        };
        let mut out = Series::default();
        let skip = samples.len().saturating_sub(points + 1);
        for pair in samples.iter().skip(skip).collect::<Vec<_>>().windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let dt = (b.secs - a.secs).max(1e-9);
            let executed =
                sum(b, Kind::Bolt, |c| c.executed)
                    .saturating_sub(sum(a, Kind::Bolt, |c| c.executed));
            let acked =
                sum(b, Kind::Spout, |c| c.acked).saturating_sub(sum(a, Kind::Spout, |c| c.acked));
            out.secs.push(b.secs);
            out.executed_per_sec.push(executed as f64 / dt);
            out.acked_per_sec.push(acked as f64 / dt);
            out.complete_latency_p50_us.push(b.latency.map(|l| l.0));
            out.complete_latency_p99_us.push(b.latency.map(|l| l.1));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(points: &[(f64, u64)]) -> History {
        let samples = points
            .iter()
            .map(|&(secs, emitted)| Sample {
                secs,
                counts: vec![Counts { emitted, ..Counts::default() }],
                latency: None,
            })
            .collect();
        History { samples: Mutex::new(samples) }
    }

    #[test]
    fn a_window_longer_than_the_run_covers_the_whole_run() {
        // One sample just after start, taken after a burst of 1000.
        let h = history(&[(0.2, 1000)]);
        let now = Counts { emitted: 1000, ..Counts::default() };
        let w = h.window(0, now, 0.4, Some(10.0));
        assert_eq!(w.counts.emitted, 1000, "counted from the start, not from the sample");
        assert!((w.emit_rate - 2500.0).abs() < 1e-6);
    }

    #[test]
    fn a_window_counts_from_the_oldest_sample_inside_it() {
        let points: Vec<(f64, u64)> =
            (0..=30u32).map(|s| (f64::from(s), u64::from(s) * 100)).collect();
        let h = history(&points);
        let now = Counts { emitted: 3000, ..Counts::default() };
        let w = h.window(0, now, 30.0, Some(10.0));
        assert_eq!(w.counts.emitted, 1000, "the last 10 s");
        assert!((w.secs - 10.0).abs() < 1e-9);
        let all = h.window(0, now, 30.0, None);
        assert_eq!(all.counts.emitted, 3000);
    }
}
