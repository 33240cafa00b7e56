//! The counters every task keeps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hdrhistogram::Histogram;

/// The counters of one task. Index with [`StatField`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LocalStats {
    /// Values indexed by `StatField as usize`.
    pub values: [u64; StatField::COUNT],
}

/// One counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum StatField {
    /// Tuples emitted by the component's code (per emit call, not per target).
    Emitted,
    /// Tuples handed to downstream queues (one per target task).
    Transferred,
    /// Tuples executed (bolts) — tick tuples excluded.
    Executed,
    /// Trees acked back to the spout (spouts), or inputs acked (bolts).
    Acked,
    /// Failures by explicit `fail` or an error from `execute`.
    FailedExplicit,
    /// Failures by message timeout (spouts).
    FailedTimeout,
    /// Failures because plugin code panicked.
    FailedPanic,
    /// Failures at shutdown, after the drain timed out (spouts).
    FailedShutdown,
    /// Time spent executing (bolts, measured per batch) or in `next_tuple`
    /// (spouts, sampled: one call in 64 is timed and counts 64 times), in ns.
    BusyNanos,
    /// Time spent waiting because of backpressure, in ns.
    BackpressureNanos,
    /// Time spent waiting because max-spout-pending was reached, in ns.
    MaxPendingNanos,
    /// Time spent waiting in the throttler, in ns.
    ThrottleNanos,
    /// Times the instance was rebuilt after a panic.
    Restarts,
    /// Errors returned by plugin calls (other than panics).
    Errors,
    /// Trees in flight right now (spouts; a gauge).
    Pending,
    /// Tuples received (bolts; for drain detection).
    Received,
    /// Tick tuples delivered (bolts).
    Ticks,
    /// 1 while emits or acker messages wait to be sent (a gauge, for drain detection).
    Unsent,
    /// 1 while the spout is active (a gauge).
    Active,
    /// Trees in the spout's pending map when it saw the drain begin (spouts;
    /// set when the task ends, like the four `Drain*` outcomes below, which
    /// add up to it exactly).
    DrainInFlight,
    /// Of those: acked during the drain.
    DrainAcked,
    /// Of those: failed during the drain (explicitly or by a panic).
    DrainFailed,
    /// Of those: timed out during the drain.
    DrainTimedOut,
    /// Of those: failed at shutdown, because the drain timed out.
    DrainShutdown,
}

impl StatField {
    /// The number of fields.
    pub const COUNT: usize = 24;
}

impl LocalStats {
    /// Adds `n` to a counter.
    #[inline]
    pub fn add(&mut self, field: StatField, n: u64) {
        self.values[field as usize] += n;
    }

    /// Sets a gauge.
    #[inline]
    pub fn set(&mut self, field: StatField, n: u64) {
        self.values[field as usize] = n;
    }

    /// Reads a counter.
    pub fn get(&self, field: StatField) -> u64 {
        self.values[field as usize]
    }
}

/// A task's published counters, readable from any thread.
#[derive(Debug, Default)]
pub struct TaskStats {
    values: [AtomicU64; StatField::COUNT],
    /// Complete latency of acked trees in µs (spouts), merged at publication.
    pub latency: LatencyHistogram,
    /// Execute latency in µs (bolts): the mean of each executed batch,
    /// merged now and then (see the bolt executor).
    pub execute_latency: LatencyHistogram,
    /// The last errors the task's plugin calls returned.
    pub errors: ErrorLog,
    /// The metrics the task's plugin registered (contract 1.1).
    pub user: crate::plugin::services::UserMetrics,
}

/// One error a plugin call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorRecord {
    /// When, as seconds since the Unix epoch.
    pub unix_secs: u64,
    /// The error's text, as logged.
    pub message: String,
}

/// The last [`ErrorLog::CAPACITY`] errors of a task. Written only on the
/// error path (and rate-limited there), read by the HTTP API.
#[derive(Debug, Default)]
pub struct ErrorLog {
    inner: Mutex<std::collections::VecDeque<ErrorRecord>>,
}

impl ErrorLog {
    /// How many errors are kept.
    pub const CAPACITY: usize = 8;

    /// Records an error now, dropping the oldest past the capacity.
    pub fn record(&self, message: String) {
        let unix_secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Ok(mut log) = self.inner.lock() {
            if log.len() == Self::CAPACITY {
                log.pop_front();
            }
            log.push_back(ErrorRecord { unix_secs, message });
        }
    }

    /// The kept errors, oldest first.
    pub fn snapshot(&self) -> Vec<ErrorRecord> {
        self.inner.lock().map(|l| l.iter().cloned().collect()).unwrap_or_default()
    }

    /// When the newest error was recorded, if any.
    pub fn newest_secs(&self) -> Option<u64> {
        self.inner.lock().ok()?.back().map(|e| e.unix_secs)
    }
}

impl TaskStats {
    /// Publishes the owner's counters (relaxed stores; see the module doc).
    pub fn publish(&self, local: &LocalStats) {
        for (slot, &v) in self.values.iter().zip(local.values.iter()) {
            slot.store(v, Ordering::Relaxed);
        }
    }

    /// A snapshot of the published counters.
    pub fn snapshot(&self) -> LocalStats {
        let mut out = LocalStats::default();
        for (dst, src) in out.values.iter_mut().zip(self.values.iter()) {
            *dst = src.load(Ordering::Relaxed);
        }
        out
    }

    /// Reads one published counter.
    pub fn get(&self, field: StatField) -> u64 {
        self.values[field as usize].load(Ordering::Relaxed)
    }
}

/// A shared HDR histogram of complete latencies in µs.
#[derive(Debug)]
pub struct LatencyHistogram {
    inner: Mutex<Histogram<u64>>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self { inner: Mutex::new(new_histogram()) }
    }
}

/// A task's own histogram, merged into its shared [`LatencyHistogram`] at
/// most once per [`LocalHistogram::MERGE_EVERY`] (and when the task ends).
///
/// Merging adds a whole HDR histogram (tens of thousands of counts) under a
/// lock: done per batch, a mostly idle bolt would spend on it the CPU the
/// busy threads need.
#[derive(Debug)]
pub struct LocalHistogram {
    histogram: Histogram<u64>,
    merged_at: std::time::Instant,
}

impl Default for LocalHistogram {
    fn default() -> Self {
        Self { histogram: new_histogram(), merged_at: std::time::Instant::now() }
    }
}

impl LocalHistogram {
    /// How long samples may wait before they are merged.
    pub const MERGE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

    /// Records one value (µs, clamped to the histogram's range).
    #[inline]
    pub fn record(&mut self, micros: u64) {
        let _ = self.histogram.record(micros.clamp(1, 3_600_000_000));
    }

    /// Merges into `shared` when forced, or when samples have waited
    /// [`Self::MERGE_EVERY`]; one clock read when samples wait.
    pub fn merge_into(&mut self, shared: &LatencyHistogram, force: bool) {
        if self.histogram.is_empty() {
            return;
        }
        let now = std::time::Instant::now();
        if force || now.duration_since(self.merged_at) >= Self::MERGE_EVERY {
            shared.merge_from(&mut self.histogram);
            self.merged_at = now;
        }
    }
}

/// A histogram of 1 µs to 1 hour with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant bounds are valid")
}

impl LatencyHistogram {
    /// Merges a task-local histogram in, and resets it. Called once per
    /// publication, never per tuple.
    pub fn merge_from(&self, local: &mut Histogram<u64>) {
        if local.is_empty() {
            return;
        }
        if let Ok(mut h) = self.inner.lock() {
            // Same bounds on both sides, so adding cannot fail.
            let _ = h.add(&*local);
        }
        local.reset();
    }

    /// A copy of the merged histogram.
    pub fn snapshot(&self) -> Histogram<u64> {
        self.inner.lock().map(|h| h.clone()).unwrap_or_else(|_| new_histogram())
    }
}

impl crate::plugin::services::TaskSink for TaskStats {
    fn record_error(&self, message: String) {
        self.errors.record(message);
    }

    fn user_metrics(&self) -> &crate::plugin::services::UserMetrics {
        &self.user
    }
}
