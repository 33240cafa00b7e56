//! Contract 1.1: what the host offers a plugin library (logging through the
//! host's `tracing`, user metrics), handed over once per library through
//! [`PluginRoot::attach_host`](super::PluginRoot). Contract 1.3 adds
//! labelled metrics through a second object, [`DynHost13`], handed over
//! through [`PluginRoot::attach_host_1_3`](super::PluginRoot) (`None` in a
//! library built before that field; a host older than it never calls it, and
//! the library then counts labelled series locally).
//!
//! A 1.0 library has no `attach_host` field; the host reads it as `None` and
//! the library runs as before. A 1.1 library in a 1.0 host is never
//! attached: its log calls and metrics work locally and go nowhere.

use abi_stable::{
    sabi_trait,
    std_types::{RArc, RBox, RResult, RSlice, RStr},
    StableAbi,
};

use crate::PluginError;

/// A log level, as `tracing` orders them (an open set of constants).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogLevel(pub u8);

impl LogLevel {
    /// Errors.
    pub const ERROR: Self = Self(1);
    /// Warnings.
    pub const WARN: Self = Self(2);
    /// Information.
    pub const INFO: Self = Self(3);
    /// Debugging detail.
    pub const DEBUG: Self = Self(4);
    /// Very verbose detail.
    pub const TRACE: Self = Self(5);
}

/// The kind of a user metric (an open set of constants).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MetricKind(pub u8);

impl MetricKind {
    /// A monotonic count: one cell.
    pub const COUNTER: Self = Self(0);
    /// A value that goes up and down (an `i64`'s bits): one cell.
    pub const GAUGE: Self = Self(1);
    /// A distribution: [`HISTOGRAM_CELLS`] cells (see [`MetricCells`]).
    pub const HISTOGRAM: Self = Self(2);
    /// A distribution of durations recorded in microseconds, exported in
    /// seconds (contract 1.3; a host before 1.3 refuses the kind): cells as
    /// [`HISTOGRAM`](Self::HISTOGRAM).
    pub const DURATION: Self = Self(3);

    /// How many cells a metric of this kind has: [`HISTOGRAM_CELLS`] for
    /// the distributions, one otherwise.
    pub fn cells(self) -> usize {
        if self == Self::HISTOGRAM || self == Self::DURATION {
            HISTOGRAM_CELLS
        } else {
            1
        }
    }
}

/// Cells of a histogram: count, sum, then 65 buckets by bit length (bucket
/// `i` holds the values `v` with `64 - v.leading_zeros() == i`).
pub const HISTOGRAM_CELLS: usize = 2 + 65;

/// The storage of one registered metric: `len` 64-bit cells owned by the
/// host, updated by the plugin with relaxed atomic operations on its own
/// thread (no lock). The host keeps an unlabelled metric's cells while the
/// process lives; a labelled series' cells live while a handle does.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct MetricCells {
    /// The cells, shared with the host.
    pub cells: RArc<MetricStorage>,
}

/// The host-owned cells of one metric.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct MetricStorage {
    /// What the cells mean.
    pub kind: MetricKind,
    /// The cells (1 for counters and gauges, [`HISTOGRAM_CELLS`] for histograms).
    pub values: abi_stable::std_types::RVec<AtomicCell>,
}

/// One 64-bit cell, updated atomically.
#[repr(transparent)]
#[derive(StableAbi, Debug, Default)]
pub struct AtomicCell(pub std::sync::atomic::AtomicU64);

/// One label of a labelled user metric's series (contract 1.3): its name
/// and its value.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct MetricLabel<'a> {
    /// The label's name: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`,
    /// none of the host's own (`topology`, `component`, `task`, `le`).
    pub name: RStr<'a>,
    /// The label's value: any text.
    pub value: RStr<'a>,
}

/// The host, as a plugin library sees it.
#[sabi_trait]
pub trait DynHost: Send + Sync {
    /// Whether an event at `level` would be recorded for the calling task
    /// (so the plugin skips formatting filtered messages).
    fn log_enabled(&self, level: LogLevel) -> bool;

    /// Records `message` at `level` through the host's `tracing` subscriber,
    /// with the calling task's component and task id attached.
    fn log(&self, level: LogLevel, message: RStr<'_>);

    /// Registers a metric of the calling task (call it from `open` or
    /// `prepare`, on the task's thread). Registering the same name and kind
    /// again returns the same cells.
    #[sabi(last_prefix_field)]
    fn register_metric(
        &self,
        kind: MetricKind,
        name: RStr<'_>,
        help: RStr<'_>,
    ) -> RResult<MetricCells, PluginError>;
}

/// The host object handed to a library.
pub type HostBox = DynHost_TO<'static, RBox<()>>;

/// Contract 1.3: the host's labelled metrics, as a plugin library sees them
/// (a separate object from [`DynHost`], whose layout 1.1 and 1.2 libraries
/// check, handed over through
/// [`PluginRoot::attach_host_1_3`](super::PluginRoot)).
#[sabi_trait]
pub trait DynHost13: Send + Sync {
    /// The contract version the host speaks (`"1.3.0"` for a 1.3 host). A
    /// library refuses to list its components to a host whose contract is
    /// older than its own (see [`PluginRoot::catalogue`](super::PluginRoot)).
    fn contract_version(&self) -> RStr<'static>;
    /// Registers one series of a metric family, told apart from the
    /// family's other series by `labels` (besides the calling task's own
    /// labels). Same rules as [`DynHost::register_metric`], and: the series
    /// lives while the plugin holds a handle to its cells; the host stops
    /// exporting it once every handle is dropped.
    #[sabi(last_prefix_field)]
    fn register_labelled_metric(
        &self,
        kind: MetricKind,
        name: RStr<'_>,
        help: RStr<'_>,
        labels: RSlice<'_, MetricLabel<'_>>,
    ) -> RResult<MetricCells, PluginError>;
}

/// The contract 1.3 host object handed to a library.
pub type Host13Box = DynHost13_TO<'static, RBox<()>>;
