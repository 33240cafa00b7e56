//! Logging through the host and user metrics (contract 1.1).
//!
//! # Logging
//! [`error!`](crate::error), [`warn!`](crate::warn), [`info!`](crate::info),
//! [`debug!`](crate::debug) and [`trace!`](crate::trace) take `format!`
//! arguments and go through the host's `tracing` subscriber, with the
//! component and task attached, filtered by `RUST_LOG` (target `plugin`, so
//! `RUST_LOG=plugin=debug` shows a plugin's debug events). A message that the
//! filter drops is not formatted. Errors and warnings are also kept as the
//! component's last errors in the HTTP API.
//!
//! # Metrics
//! Register in `open` or `prepare` (on the task's thread), keep the handle,
//! and update it from the task's own calls: an update is one relaxed atomic
//! operation, no lock and no call into the host. The host exports them in
//! `/metrics` (as `squall_user_<name>`) and in the REST API, labelled by
//! component and task (Storm's `registerCounter`, `registerGauge`,
//! `registerHistogram`).
//!
//! ```
//! use squall_plugin_api::metrics::{counter, gauge};
//! let words = counter("words", "words counted");
//! let distinct = gauge("distinct_words", "distinct words seen");
//! words.inc();
//! distinct.set(1);
//! assert_eq!(words.get(), 1);
//! ```
//!
//! Without a host that speaks 1.1 (a unit test, an older host) logging is
//! silent and metrics count locally.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use abi_stable::std_types::{RArc, RVec};

use crate::abi::{
    AtomicCell, HostBox, LogLevel, MetricCells, MetricKind, MetricStorage, HISTOGRAM_CELLS,
};

static HOST: OnceLock<HostBox> = OnceLock::new();

/// `PluginRoot::attach_host`: the host hands over its services once.
pub(crate) extern "C" fn attach(host: HostBox) {
    let _ = HOST.set(host);
}

#[doc(hidden)]
pub fn __enabled(level: LogLevel) -> bool {
    HOST.get().is_some_and(|h| h.log_enabled(level))
}

#[doc(hidden)]
pub fn __log(level: LogLevel, message: &str) {
    if let Some(h) = HOST.get() {
        h.log(level, message.into());
    }
}

/// Logs at `level` through the host (see the module doc); formats only when
/// the host's filter lets the event through.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {{
        let level = $level;
        if $crate::host::__enabled(level) {
            $crate::host::__log(level, &::std::format!($($arg)+));
        }
    }};
}

/// Logs an error through the host, with the component and task attached.
#[macro_export]
macro_rules! error { ($($arg:tt)+) => { $crate::log!($crate::abi::LogLevel::ERROR, $($arg)+) }; }
/// Logs a warning through the host, with the component and task attached.
#[macro_export]
macro_rules! warn { ($($arg:tt)+) => { $crate::log!($crate::abi::LogLevel::WARN, $($arg)+) }; }
/// Logs information through the host, with the component and task attached.
#[macro_export]
macro_rules! info { ($($arg:tt)+) => { $crate::log!($crate::abi::LogLevel::INFO, $($arg)+) }; }
/// Logs debugging detail through the host, with the component and task attached.
#[macro_export]
macro_rules! debug { ($($arg:tt)+) => { $crate::log!($crate::abi::LogLevel::DEBUG, $($arg)+) }; }
/// Logs very verbose detail through the host, with the component and task attached.
#[macro_export]
macro_rules! trace { ($($arg:tt)+) => { $crate::log!($crate::abi::LogLevel::TRACE, $($arg)+) }; }

/// Cells from the host, or local ones when no host is attached or it
/// refuses (the error is logged through the host when there is one).
fn cells(kind: MetricKind, name: &str, help: &str) -> RArc<MetricStorage> {
    if let Some(h) = HOST.get() {
        match h.register_metric(kind, name.into(), help.into()).into_result() {
            Ok(MetricCells { cells }) => return cells,
            Err(e) => __log(LogLevel::WARN, &format!("metric {name:?} not registered: {e}")),
        }
    }
    let len = if kind == MetricKind::HISTOGRAM { HISTOGRAM_CELLS } else { 1 };
    let values: RVec<AtomicCell> = (0..len).map(|_| AtomicCell::default()).collect();
    RArc::new(MetricStorage { kind, values })
}

fn cell(storage: &MetricStorage, i: usize) -> &AtomicU64 {
    &storage.values[i].0
}

/// A monotonic count; cloning shares it.
#[derive(Debug, Clone)]
pub struct Counter(RArc<MetricStorage>);

impl Counter {
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        cell(&self.0, 0).fetch_add(n, Ordering::Relaxed);
    }

    /// The current count.
    pub fn get(&self) -> u64 {
        cell(&self.0, 0).load(Ordering::Relaxed)
    }
}

/// A value that goes up and down; cloning shares it.
#[derive(Debug, Clone)]
pub struct Gauge(RArc<MetricStorage>);

impl Gauge {
    /// Sets the value.
    #[inline]
    pub fn set(&self, v: i64) {
        cell(&self.0, 0).store(v as u64, Ordering::Relaxed);
    }

    /// Adds `d` (may be negative).
    #[inline]
    pub fn add(&self, d: i64) {
        cell(&self.0, 0).fetch_add(d as u64, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> i64 {
        cell(&self.0, 0).load(Ordering::Relaxed) as i64
    }
}

/// A distribution of `u64` values in power-of-two buckets; cloning shares it.
#[derive(Debug, Clone)]
pub struct Histogram(RArc<MetricStorage>);

impl Histogram {
    /// Records one value: three relaxed atomic adds.
    #[inline]
    pub fn record(&self, v: u64) {
        let bucket = 64 - v.leading_zeros() as usize;
        cell(&self.0, 0).fetch_add(1, Ordering::Relaxed);
        cell(&self.0, 1).fetch_add(v, Ordering::Relaxed);
        cell(&self.0, 2 + bucket).fetch_add(1, Ordering::Relaxed);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        cell(&self.0, 0).load(Ordering::Relaxed)
    }

    /// Their sum (wrapping).
    pub fn sum(&self) -> u64 {
        cell(&self.0, 1).load(Ordering::Relaxed)
    }
}

/// User metrics (see the module doc of [`crate::host`]).
pub mod metrics {
    pub use super::{Counter, Gauge, Histogram};
    use crate::abi::MetricKind;

    /// Registers a counter of the calling task.
    pub fn counter(name: &str, help: &str) -> Counter {
        Counter(super::cells(MetricKind::COUNTER, name, help))
    }

    /// Registers a gauge of the calling task.
    pub fn gauge(name: &str, help: &str) -> Gauge {
        Gauge(super::cells(MetricKind::GAUGE, name, help))
    }

    /// Registers a histogram of the calling task.
    pub fn histogram(name: &str, help: &str) -> Histogram {
        Histogram(super::cells(MetricKind::HISTOGRAM, name, help))
    }
}

#[cfg(test)]
mod tests {
    use super::metrics::{counter, gauge, histogram};

    #[test]
    fn without_a_host_metrics_count_locally() {
        let c = counter("c", "");
        c.inc();
        c.add(2);
        assert_eq!(c.clone().get(), 3, "clones share the cell");
        let g = gauge("g", "");
        g.set(5);
        g.add(-7);
        assert_eq!(g.get(), -2);
        let h = histogram("h", "");
        for v in [0, 1, 3, 1000] {
            h.record(v);
        }
        assert_eq!((h.count(), h.sum()), (4, 1004));
        let buckets: Vec<u64> = (0..4)
            .map(|i| h.0.values[2 + i].0.load(std::sync::atomic::Ordering::Relaxed))
            .collect();
        assert_eq!(buckets, [1, 1, 1, 0], "0 -> bucket 0, 1 -> 1, 3 -> 2");
        assert_eq!(
            h.0.values[2 + 10].0.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "1000 -> bucket 10"
        );
    }
}
