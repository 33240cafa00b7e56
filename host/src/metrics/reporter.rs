//! Reporters: where the run's figures go. The run loop takes one stats
//! snapshot per interval and hands it to every [`Reporter`], then hands each
//! the end-of-run summary; adding a reporter does not touch the run loop.
//!
//! - [`TableReporter`]: the stats table on stderr every interval, and the
//!   final table and drain line at the end.
//! - [`JsonReporter`]: the `--json` summary file at the end.

use std::io::Write as _;
use std::path::PathBuf;

use super::{Report, RunSummary};

/// A consumer of the run's figures.
pub trait Reporter: std::fmt::Debug + Send {
    /// Called with one snapshot per stats interval while the topology runs.
    fn interval(&mut self, _report: &Report) {}

    /// Called once, after the drain, with the end-of-run summary.
    ///
    /// # Errors
    /// When the reporter cannot write its output.
    fn finish(&mut self, summary: &RunSummary) -> std::io::Result<()>;
}

/// The stats table on stderr, with rates since the previous interval.
#[derive(Debug, Default)]
pub struct TableReporter {
    previous: Option<Report>,
}

impl Reporter for TableReporter {
    fn interval(&mut self, report: &Report) {
        // A closed stderr is no reason to stop the topology.
        let _ = write!(std::io::stderr(), "{}", report.table(self.previous.as_ref()));
        self.previous = Some(report.clone());
    }

    fn finish(&mut self, summary: &RunSummary) -> std::io::Result<()> {
        let d = &summary.drain;
        let report =
            Report { elapsed_secs: summary.elapsed_secs, components: summary.components.clone() };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}", report.table(None));
        let _ = writeln!(
            err,
            "drain: {} in flight at start; {} acked, {} failed, {} timed out, {} failed at shutdown; {} in {:.2}s",
            d.in_flight_at_start,
            d.acked,
            d.failed,
            d.timed_out,
            d.failed_at_shutdown,
            if d.completed { "completed" } else { "timed out" },
            d.secs
        );
        Ok(())
    }
}

/// Writes the end-of-run summary as JSON to a file (`--json`).
#[derive(Debug)]
pub struct JsonReporter {
    path: PathBuf,
}

impl JsonReporter {
    /// A reporter writing to `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

impl Reporter for JsonReporter {
    fn finish(&mut self, summary: &RunSummary) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
        std::fs::write(&self.path, text).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot write {}: {e}", self.path.display()))
        })
    }
}
