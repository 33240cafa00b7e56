//! Per-task metrics and the reports built from them.
//!
//! Each executor counts in plain fields it owns ([`LocalStats`]) and publishes
//! them now and then (once per batch or per few hundred loop turns) into its
//! [`TaskStats`] with relaxed stores: no atomic read-modify-write per tuple.
//! The reporter reads the published values, so a report lags the truth by at
//! most one publication.
//!
//! [`Reporter`]s take one snapshot per stats interval and the end-of-run
//! summary: the stats table and the JSON file today.

mod counters;
mod report;
mod reporter;

pub use counters::{
    new_histogram, ErrorLog, ErrorRecord, LatencyHistogram, LocalHistogram, LocalStats, StatField,
    TaskStats,
};
pub use report::{ComponentSummary, DrainReport, Outcome, ReloadSummary, Report, RunSummary};
pub use reporter::{JsonReporter, Reporter, TableReporter};
