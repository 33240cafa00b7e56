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
//! Without a host (a unit test) logging is silent and metrics count
//! locally.
//!
//! # Labelled metrics (contract 1.3)
//! [`metrics::counter_with`], [`metrics::gauge_with`] and
//! [`metrics::histogram_with`] register one series of a family, told apart
//! by extra labels (a Kafka partition's lag: `topic` and `partition`). A
//! family's series share its kind and help; each label set is its own
//! series. A labelled series lives while a handle to it does: once every
//! clone of its handle is dropped, the host stops exporting it (from the
//! next scrape), so a series that no longer means anything (a partition
//! given up) is not exported stale. Registering it again later starts it
//! again (from the cells the host still holds, or from zero once it was
//! dropped from the export). Label names are `[a-zA-Z_][a-zA-Z0-9_]*`, not
//! starting with `__`, never the host's own (`topology`, `component`,
//! `task`, `le`), each at most once; values are any text.
//!
//! ```
//! use squall_plugin_api::metrics::gauge_with;
//! let lag = gauge_with("partition_lag", "records behind", &[("topic", "t"), ("partition", "3")]);
//! lag.set(100);
//! drop(lag); // no longer exported
//! ```
//!
//! # Durations (contract 1.3)
//! [`metrics::duration_histogram`] registers a histogram of
//! [`Duration`]s, recorded in microseconds and exported in seconds (the
//! unit Prometheus names ask for), as `squall_user_<name>` with `_seconds`
//! appended when the name lacks it.
//!
//! ```
//! use std::time::Duration;
//! use squall_plugin_api::metrics::duration_histogram;
//! let latency = duration_histogram("commit_latency_seconds", "time to commit");
//! latency.record(Duration::from_millis(3));
//! assert_eq!((latency.count(), latency.sum()), (1, Duration::from_millis(3)));
//! ```
//!
//! A 1.3 host hands the library its labelled metrics through
//! [`PluginRoot::attach_host_1_3`](crate::abi::PluginRoot). A host older
//! than that field does not know labelled metrics, and a 1.3 library
//! refuses to list its components to it (see
//! [`PluginRoot::catalogue`](crate::abi::PluginRoot)); without a host (a
//! unit test) labelled handles and durations count locally.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use abi_stable::std_types::{RArc, RVec};

use crate::abi::{
    AtomicCell, Host13Box, HostBox, LogLevel, MetricCells, MetricKind, MetricLabel, MetricStorage,
};

static HOST: OnceLock<HostBox> = OnceLock::new();

/// `PluginRoot::attach_host`: the host hands over its services once.
pub(crate) extern "C" fn attach(host: HostBox) {
    let _ = HOST.set(host);
}

static HOST13: OnceLock<Host13Box> = OnceLock::new();

/// `PluginRoot::attach_host_1_3`: a 1.3 host hands over its labelled
/// metrics once.
pub(crate) extern "C" fn attach13(host: Host13Box) {
    let _ = HOST13.set(host);
}

/// Why this library refuses the host that loaded it, if it does: its
/// contract is older than the library's. Contract minors only add, so a
/// library built against 1.N may rely on what a 1.(N-1) host lacks (a 1.2
/// host would run a 1.3 library's bolts one call per tuple and drop its
/// labelled metrics without a word). A 1.3 or later host says its
/// contract through [`DynHost13::contract_version`]; a host that never
/// attached that object is older than 1.3.
pub(crate) fn older_host() -> Option<String> {
    let host = HOST13.get().map(|h| h.contract_version());
    refusal(host.as_ref().map(|v| v.as_str()), crate::abi::CONTRACT_VERSION)
}

/// [`older_host`] for a host that says `host` (`None`: it said nothing,
/// so it is older than 1.3) and a library built against `library`.
fn refusal(host: Option<&str>, library: &str) -> Option<String> {
    let minor = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split('.');
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    };
    let needed = minor(library)?;
    let speaks = match host {
        Some(v) if minor(v).is_some_and(|h| h >= needed) => return None,
        Some(v) => format!("contract {v}"),
        None => "contract 1.2 or older".to_owned(),
    };
    Some(format!(
        "built against plugin contract {library}, which this host ({speaks}) does not \
         speak: run it on a squall host of contract {}.{} or later, or build it against \
         the squall-plugin-api of the host's contract",
        needed.0, needed.1
    ))
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
    host_cells(HOST.get(), HOST13.get(), kind, name, help)
}

/// Cells of an unlabelled metric from `host`, or local ones when there is
/// none or it refuses (the refusal is logged). A duration is asked of a
/// 1.3 host only (`host13` present): an older one refuses the kind, and
/// its handle counts locally without a warning.
fn host_cells(
    host: Option<&HostBox>,
    host13: Option<&Host13Box>,
    kind: MetricKind,
    name: &str,
    help: &str,
) -> RArc<MetricStorage> {
    let known = kind != MetricKind::DURATION || host13.is_some();
    if let Some(h) = host.filter(|_| known) {
        match h.register_metric(kind, name.into(), help.into()).into_result() {
            Ok(MetricCells { cells }) => return cells,
            Err(e) => {
                let message = format!("metric {name:?} not registered: {e}");
                h.log(LogLevel::WARN, message.as_str().into());
            }
        }
    }
    local_cells(kind)
}

/// Cells of one labelled series from `host13`, or local ones when there is
/// none (no host, or one that predates 1.3) or it refuses (the refusal is
/// logged through `host`).
fn labelled_cells(
    host: Option<&HostBox>,
    host13: Option<&Host13Box>,
    kind: MetricKind,
    name: &str,
    help: &str,
    labels: &[(&str, &str)],
) -> RArc<MetricStorage> {
    // Without a 1.3 host (none, or an older one) the series counts locally.
    if let Some(h13) = host13 {
        let labels: Vec<MetricLabel<'_>> = labels
            .iter()
            .map(|&(name, value)| MetricLabel { name: name.into(), value: value.into() })
            .collect();
        let answer =
            h13.register_labelled_metric(kind, name.into(), help.into(), labels.as_slice().into());
        match answer.into_result() {
            Ok(MetricCells { cells }) => return cells,
            Err(e) => {
                if let Some(h) = host {
                    let message = format!("metric {name:?} not registered: {e}");
                    h.log(LogLevel::WARN, message.as_str().into());
                }
            }
        }
    }
    local_cells(kind)
}

/// Cells no host sees.
fn local_cells(kind: MetricKind) -> RArc<MetricStorage> {
    let values: RVec<AtomicCell> = (0..kind.cells()).map(|_| AtomicCell::default()).collect();
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

/// A distribution of durations, recorded in microseconds and exported in
/// seconds (contract 1.3); cloning shares it.
#[derive(Debug, Clone)]
pub struct DurationHistogram(Histogram);

impl DurationHistogram {
    /// Records one duration, in whole microseconds (rounded down): three
    /// relaxed atomic adds.
    #[inline]
    pub fn record(&self, d: Duration) {
        self.0.record(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    /// Durations recorded.
    pub fn count(&self) -> u64 {
        self.0.count()
    }

    /// Their sum, in whole microseconds (wrapping).
    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.0.sum())
    }
}

/// User metrics (see the module doc of [`crate::host`]).
pub mod metrics {
    pub use super::{Counter, DurationHistogram, Gauge, Histogram};
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

    /// Registers a histogram of durations of the calling task, exported in
    /// seconds as `squall_user_<name>` (`_seconds` appended when `name`
    /// lacks it). Contract 1.3: a host before 1.3 does not export it (the
    /// handle counts locally).
    pub fn duration_histogram(name: &str, help: &str) -> DurationHistogram {
        DurationHistogram(Histogram(super::cells(MetricKind::DURATION, name, help)))
    }

    /// Registers one series of the calling task's counter family `name`,
    /// labelled `labels` (name, value) besides the task's own labels
    /// (contract 1.3; see the module doc of [`crate::host`]).
    pub fn counter_with(name: &str, help: &str, labels: &[(&str, &str)]) -> Counter {
        Counter(super::labelled_cells(
            super::HOST.get(),
            super::HOST13.get(),
            MetricKind::COUNTER,
            name,
            help,
            labels,
        ))
    }

    /// Registers one series of the calling task's gauge family `name`,
    /// labelled `labels` (contract 1.3, as [`counter_with`]).
    pub fn gauge_with(name: &str, help: &str, labels: &[(&str, &str)]) -> Gauge {
        Gauge(super::labelled_cells(
            super::HOST.get(),
            super::HOST13.get(),
            MetricKind::GAUGE,
            name,
            help,
            labels,
        ))
    }

    /// Registers one series of the calling task's histogram family `name`,
    /// labelled `labels` (contract 1.3, as [`counter_with`]).
    pub fn histogram_with(name: &str, help: &str, labels: &[(&str, &str)]) -> Histogram {
        Histogram(super::labelled_cells(
            super::HOST.get(),
            super::HOST13.get(),
            MetricKind::HISTOGRAM,
            name,
            help,
            labels,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::metrics::{counter, counter_with, gauge, gauge_with, histogram, histogram_with};
    use super::*;
    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::{RResult, RSlice, RStr};
    use std::sync::{Arc, Mutex};

    use crate::abi::{DynHost, DynHost13, DynHost13_TO, DynHost_TO, HISTOGRAM_CELLS};
    use crate::{ErrorKind, PluginError};

    /// A host of contract 1.1/1.2: no [`Host13Box`], so no labelled
    /// metrics. Records what it was asked.
    #[derive(Default, Clone)]
    struct OldHost {
        registered: Arc<Mutex<Vec<String>>>,
    }

    impl DynHost for OldHost {
        fn log_enabled(&self, _: LogLevel) -> bool {
            true
        }
        fn log(&self, _: LogLevel, _: RStr<'_>) {}
        fn register_metric(
            &self,
            kind: MetricKind,
            name: RStr<'_>,
            _: RStr<'_>,
        ) -> RResult<MetricCells, PluginError> {
            self.registered.lock().unwrap().push(name.to_string());
            RResult::ROk(MetricCells { cells: local_cells(kind) })
        }
    }

    /// A 1.3 host: hands out cells it keeps, or refuses the label `bad`.
    #[derive(Default, Clone)]
    struct NewHost {
        series: Arc<Mutex<Vec<Series>>>,
        logged: Arc<Mutex<Vec<String>>>,
    }

    /// A series as [`NewHost`] keeps it: name, labels, cells.
    type Series = (String, Vec<(String, String)>, RArc<MetricStorage>);

    impl DynHost for NewHost {
        fn log_enabled(&self, _: LogLevel) -> bool {
            true
        }
        fn log(&self, _: LogLevel, message: RStr<'_>) {
            self.logged.lock().unwrap().push(message.to_string());
        }
        fn register_metric(
            &self,
            _: MetricKind,
            _: RStr<'_>,
            _: RStr<'_>,
        ) -> RResult<MetricCells, PluginError> {
            RResult::RErr(PluginError::new(ErrorKind::RUNTIME, "unlabelled"))
        }
    }

    impl DynHost13 for NewHost {
        fn contract_version(&self) -> RStr<'static> {
            RStr::from_str("1.3.0")
        }

        fn register_labelled_metric(
            &self,
            kind: MetricKind,
            name: RStr<'_>,
            _: RStr<'_>,
            labels: RSlice<'_, MetricLabel<'_>>,
        ) -> RResult<MetricCells, PluginError> {
            let labels: Vec<(String, String)> =
                labels.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
            if labels.iter().any(|(n, _)| n == "bad") {
                let refused = PluginError::new(ErrorKind::RUNTIME, "label \"bad\" refused");
                return RResult::RErr(refused);
            }
            let cells = local_cells(kind);
            self.series.lock().unwrap().push((name.to_string(), labels, cells.clone()));
            RResult::ROk(MetricCells { cells })
        }
    }

    #[test]
    fn a_library_refuses_a_host_of_an_older_contract_in_one_line() {
        assert_eq!(refusal(Some("1.3.0"), "1.3.0"), None);
        assert_eq!(refusal(Some("1.4.2"), "1.3.0"), None, "a newer host");
        assert_eq!(refusal(Some("2.0.0"), "1.3.0"), None, "its own major is the host's check");
        let older = refusal(None, "1.3.0").expect("a host that never attached 1.3 is older");
        assert_eq!(
            older,
            "built against plugin contract 1.3.0, which this host (contract 1.2 or older) does \
             not speak: run it on a squall host of contract 1.3 or later, or build it against \
             the squall-plugin-api of the host's contract"
        );
        assert!(!older.contains('\n'));
        let one_minor = refusal(Some("1.3.0"), "1.4.0").expect("1.3 host, 1.4 library");
        assert!(one_minor.contains("this host (contract 1.3.0)"), "{one_minor}");
        assert!(one_minor.contains("contract 1.4 or later"), "{one_minor}");
        assert!(refusal(Some("garbage"), "1.3.0").is_some(), "a version it cannot read");
    }

    #[test]
    fn a_host_without_labelled_metrics_leaves_them_counting_locally() {
        let old = OldHost::default();
        let host: HostBox = DynHost_TO::from_value(old.clone(), TD_Opaque);
        let labels = [("p", "1")];
        let c = Counter(labelled_cells(Some(&host), None, MetricKind::COUNTER, "c", "", &labels));
        c.add(3);
        assert_eq!(c.get(), 3);
        assert!(old.registered.lock().unwrap().is_empty(), "not registered unlabelled instead");
    }

    #[test]
    fn labelled_series_reach_the_host_with_their_labels_in_order() {
        let new = NewHost::default();
        let host: HostBox = DynHost_TO::from_value(new.clone(), TD_Opaque);
        let host13: Host13Box = DynHost13_TO::from_value(new.clone(), TD_Opaque);
        let labels = [("topic", "t"), ("partition", "3")];
        let (h, h13) = (Some(&host), Some(&host13));
        let g = Gauge(labelled_cells(h, h13, MetricKind::GAUGE, "lag", "h", &labels));
        g.set(-5);
        let series = new.series.lock().unwrap();
        assert_eq!(series.len(), 1);
        let (name, labels, cells) = &series[0];
        assert_eq!(name, "lag");
        let expected = [("topic", "t"), ("partition", "3")].map(|(n, v)| (n.into(), v.into()));
        assert_eq!(labels, &expected);
        assert_eq!(cells.kind, MetricKind::GAUGE);
        assert_eq!(cells.values[0].0.load(Ordering::Relaxed) as i64, -5, "the host's cells");
        assert_eq!(RArc::strong_count(cells), 2, "the host's and the handle's");
        drop(g);
        assert_eq!(RArc::strong_count(cells), 1, "the host sees the handle gone");
    }

    #[test]
    fn a_refused_labelled_series_counts_locally_and_the_refusal_is_logged() {
        let new = NewHost::default();
        let host: HostBox = DynHost_TO::from_value(new.clone(), TD_Opaque);
        let host13: Host13Box = DynHost13_TO::from_value(new.clone(), TD_Opaque);
        let (hb, h13) = (Some(&host), Some(&host13));
        let h = Histogram(labelled_cells(hb, h13, MetricKind::HISTOGRAM, "x", "", &[("bad", "")]));
        h.record(7);
        assert_eq!((h.count(), h.sum()), (1, 7));
        assert!(new.series.lock().unwrap().is_empty());
        let logged = new.logged.lock().unwrap().clone();
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert!(
            logged[0].contains("\"x\" not registered") && logged[0].contains("bad"),
            "{logged:?}"
        );
    }

    #[test]
    fn a_duration_is_asked_of_a_1_3_host_only() {
        let old = OldHost::default();
        let host: HostBox = DynHost_TO::from_value(old.clone(), TD_Opaque);
        let d = DurationHistogram(Histogram(host_cells(
            Some(&host),
            None,
            MetricKind::DURATION,
            "commit_seconds",
            "",
        )));
        d.record(Duration::from_micros(1500));
        assert_eq!((d.count(), d.sum()), (1, Duration::from_micros(1500)));
        assert!(old.registered.lock().unwrap().is_empty(), "an older host is not asked");
        let host13: Host13Box = DynHost13_TO::from_value(NewHost::default(), TD_Opaque);
        let (h, h13) = (Some(&host), Some(&host13));
        let cells = host_cells(h, h13, MetricKind::DURATION, "commit_seconds", "");
        assert_eq!(*old.registered.lock().unwrap(), ["commit_seconds"], "a 1.3 host is asked");
        assert_eq!((cells.kind, cells.values.len()), (MetricKind::DURATION, HISTOGRAM_CELLS));
    }

    #[test]
    fn a_duration_records_whole_microseconds_in_their_bucket() {
        let d = super::metrics::duration_histogram("d_seconds", "");
        d.record(Duration::from_nanos(2_999));
        d.record(Duration::from_secs(1));
        assert_eq!(d.count(), 2);
        assert_eq!(d.sum(), Duration::from_micros(1_000_002), "2 us (rounded down) + 1 s");
        let cell = |i: usize| d.0 .0.values[2 + i].0.load(Ordering::Relaxed);
        assert_eq!((cell(2), cell(20)), (1, 1), "2 -> bucket 2, 1e6 -> bucket 20");
    }

    #[test]
    fn without_a_host_labelled_metrics_count_locally() {
        let labels = [("partition", "0")];
        let c = counter_with("c", "", &labels);
        c.inc();
        assert_eq!(c.get(), 1);
        let g = gauge_with("g", "", &labels);
        g.set(-1);
        assert_eq!(g.get(), -1);
        let h = histogram_with("h", "", &labels);
        h.record(2);
        assert_eq!((h.count(), h.sum(), h.0.values.len()), (1, 2, HISTOGRAM_CELLS));
    }

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
