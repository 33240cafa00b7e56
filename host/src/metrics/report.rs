//! Reports: the periodic stats table and the end-of-run summary (also JSON).
//!
//! The JSON schema is documented in `docs/metrics.md`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::{LocalStats, StatField, TaskStats};
use crate::topology::{Kind, Topology};

/// Percentiles of complete latency, in µs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LatencySummary {
    /// Trees measured.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
}

/// One component's figures, summed over its tasks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ComponentSummary {
    /// Its name.
    pub name: String,
    /// "spout" or "bolt".
    pub kind: &'static str,
    /// `alias::Component`.
    pub component: String,
    /// Task count.
    pub tasks: u32,
    /// The component this bolt runs chained to: its task `k` runs on the
    /// thread of that component's task `k` (`null`: threads of its own).
    pub chained_to: Option<String>,
    /// Tuples emitted.
    pub emitted: u64,
    /// Tuples handed to downstream queues.
    pub transferred: u64,
    /// Tuples executed (bolts).
    pub executed: u64,
    /// Trees acked (spouts) or inputs acked (bolts).
    pub acked: u64,
    /// All failures.
    pub failed: u64,
    /// Failures by explicit fail or an `execute` error.
    pub failed_explicit: u64,
    /// Failures by message timeout.
    pub failed_timeout: u64,
    /// Failures because plugin code panicked.
    pub failed_panic: u64,
    /// Failures at shutdown after the drain timed out.
    pub failed_shutdown: u64,
    /// Trees in flight now (spouts).
    pub pending: u64,
    /// Instances rebuilt after a panic.
    pub restarts: u64,
    /// Errors returned by plugin calls.
    pub errors: u64,
    /// Tick tuples delivered.
    pub ticks: u64,
    /// Fraction of time spent executing, averaged over tasks (bolts).
    pub capacity: f64,
    /// Mean execute latency in µs (bolts).
    pub execute_latency_us: f64,
    /// Seconds spent waiting because of backpressure, summed over tasks.
    pub backpressure_secs: f64,
    /// Seconds spent waiting because max-spout-pending was reached.
    pub max_pending_secs: f64,
    /// Seconds spent waiting in the throttler.
    pub throttle_secs: f64,
    /// Batches waiting in the receive queues now (each holds up to
    /// `producer_batch_size` tuples).
    pub queue_depth_batches: u64,
    /// Complete latency (spouts with tracked trees).
    pub complete_latency_us: Option<LatencySummary>,
}

/// A snapshot of every component.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Seconds since the topology started.
    pub elapsed_secs: f64,
    /// One entry per component, spouts first.
    pub components: Vec<ComponentSummary>,
}

/// How a run ended, as the JSON summary spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Drained and stopped with no fatal error.
    Completed,
    /// A fatal error stopped the run (see `error`).
    Failed,
}

/// The end-of-run summary written by `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// Bumped when a field changes meaning or disappears.
    pub schema_version: u32,
    /// The topology's name.
    pub topology: String,
    /// How the run ended.
    pub outcome: Outcome,
    /// The fatal error, when the outcome is "failed".
    pub error: Option<String>,
    /// Seconds from start to the end of the drain.
    pub elapsed_secs: f64,
    /// How the drain went.
    pub drain: DrainReport,
    /// Live reloads during the run.
    pub reloads: ReloadSummary,
    /// Durable state's checkpoints and restore (`null` without `[state]`;
    /// the same object as `GET /api/v1/topology`'s `durable_state`).
    pub durable_state: serde_json::Value,
    /// Per component.
    pub components: Vec<ComponentSummary>,
}

/// Live reloads during a run (SIGHUP, `POST /api/v1/reload`, `--watch`).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ReloadSummary {
    /// Reloads applied in full (or with nothing to change).
    pub succeeded: u64,
    /// Reloads that failed or were refused and rolled back; the topology
    /// ran on unchanged.
    pub failed: u64,
    /// Reloads that committed but were only partly applied.
    pub partial: u64,
}

fn secs(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

impl Report {
    /// Collects a report from published counters.
    pub fn collect(
        topology: &Topology,
        stats: &[Arc<TaskStats>],
        depths: &[u64],
        elapsed: Duration,
    ) -> Self {
        let components = topology
            .components
            .iter()
            .map(|c| {
                let chained_to = c.chain_from.and_then(|i| topology.components.get(i));
                let totals = TaskTotals::of(c, stats, depths);
                summarise(c, totals, elapsed, chained_to.map(|u| u.name.clone()))
            })
            .collect();
        Report { elapsed_secs: elapsed.as_secs_f64(), components }
    }

    /// Renders the compact stats table. `previous` (if any) gives rates.
    pub fn table(&self, previous: Option<&Report>) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<14} {:>5} {:>12} {:>11} {:>12} {:>10} {:>8} {:>6} {:>6} {:>8} {:>9} {:>9} {:>8}",
            "component",
            "tasks",
            "emitted",
            "emit/s",
            "executed",
            "acked",
            "failed",
            "cap",
            "queued",
            "bp_s",
            "lat_p50",
            "lat_p99",
            "errors"
        );
        for c in &self.components {
            let rate = self.emit_rate(c, previous);
            write_row(&mut out, c, rate);
        }
        out
    }

    /// A component's tuples emitted per second: since `previous` when it
    /// has the component, else since the start.
    fn emit_rate(&self, c: &ComponentSummary, previous: Option<&Report>) -> f64 {
        previous
            .and_then(|p| {
                p.components
                    .iter()
                    .find(|x| x.name == c.name)
                    .map(|x| (x, self.elapsed_secs - p.elapsed_secs))
            })
            .map_or(c.emitted as f64 / self.elapsed_secs.max(1e-9), |(x, dt)| {
                (c.emitted - x.emitted.min(c.emitted)) as f64 / dt.max(1e-9)
            })
    }
}

/// One component's counters summed over its tasks.
struct TaskTotals {
    /// Every counter, summed.
    sum: LocalStats,
    /// A spout's complete latencies, merged (`None` for a bolt, or a
    /// spout with none recorded).
    latency: Option<LatencySummary>,
    /// Batches queued at its tasks.
    depth: u64,
}

impl TaskTotals {
    /// Sums the counters of `c`'s tasks, as published in `stats` and
    /// `depths` (by task id).
    fn of(c: &crate::topology::Component, stats: &[Arc<TaskStats>], depths: &[u64]) -> Self {
        let mut sum = LocalStats::default();
        let mut latency = super::counters::new_histogram();
        let mut depth = 0;
        for t in c.tasks.clone() {
            let s = stats[t as usize].snapshot();
            for (acc, v) in sum.values.iter_mut().zip(s.values) {
                *acc += v;
            }
            if c.kind == Kind::Spout {
                let _ = latency.add(stats[t as usize].latency.snapshot());
            }
            depth += depths.get(t as usize).copied().unwrap_or(0);
        }
        let latency = (c.kind == Kind::Spout && !latency.is_empty()).then(|| LatencySummary {
            count: latency.len(),
            p50: latency.value_at_quantile(0.5),
            p99: latency.value_at_quantile(0.99),
            p999: latency.value_at_quantile(0.999),
            max: latency.max(),
        });
        TaskTotals { sum, latency, depth }
    }
}

/// A component's summary from its tasks' totals over `elapsed`.
fn summarise(
    c: &crate::topology::Component,
    totals: TaskTotals,
    elapsed: Duration,
    chained_to: Option<String>,
) -> ComponentSummary {
    let g = |f| totals.sum.get(f);
    let task_secs = elapsed.as_secs_f64() * f64::from(c.parallelism()).max(1.0);
    let executed = g(StatField::Executed);
    let busy = g(StatField::BusyNanos);
    ComponentSummary {
        name: c.name.clone(),
        kind: if c.kind == Kind::Spout { "spout" } else { "bolt" },
        component: c.reference.clone(),
        tasks: c.parallelism(),
        chained_to,
        emitted: g(StatField::Emitted),
        transferred: g(StatField::Transferred),
        executed,
        acked: g(StatField::Acked),
        failed: g(StatField::FailedExplicit)
            + g(StatField::FailedTimeout)
            + g(StatField::FailedPanic)
            + g(StatField::FailedShutdown),
        failed_explicit: g(StatField::FailedExplicit),
        failed_timeout: g(StatField::FailedTimeout),
        failed_panic: g(StatField::FailedPanic),
        failed_shutdown: g(StatField::FailedShutdown),
        pending: g(StatField::Pending),
        restarts: g(StatField::Restarts),
        errors: g(StatField::Errors),
        ticks: g(StatField::Ticks),
        capacity: if task_secs > 0.0 { (secs(busy) / task_secs).min(1.0) } else { 0.0 },
        execute_latency_us: if executed > 0 { busy as f64 / 1e3 / executed as f64 } else { 0.0 },
        backpressure_secs: secs(g(StatField::BackpressureNanos)),
        max_pending_secs: secs(g(StatField::MaxPendingNanos)),
        throttle_secs: secs(g(StatField::ThrottleNanos)),
        queue_depth_batches: totals.depth,
        complete_latency_us: totals.latency,
    }
}

/// Appends one component's row of the stats table, emitting `rate`
/// tuples a second.
fn write_row(out: &mut String, c: &ComponentSummary, rate: f64) {
    let (p50, p99) = c
        .complete_latency_us
        .as_ref()
        .map_or(("-".into(), "-".into()), |l| (format!("{}us", l.p50), format!("{}us", l.p99)));
    let _ = writeln!(
        out,
        "{:<14} {:>5} {:>12} {:>11.0} {:>12} {:>10} {:>8} {:>6.2} {:>6} {:>8.2} {:>9} {:>9} {:>8}",
        truncate(&c.name, 14),
        c.tasks,
        c.emitted,
        rate,
        c.executed,
        c.acked,
        c.failed,
        c.capacity,
        c.queue_depth_batches,
        c.backpressure_secs,
        p50,
        p99,
        c.errors
    );
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        s.chars().take(n - 1).chain(std::iter::once('~')).collect()
    }
}

/// What happened to the trees in flight when the drain began. Counted by
/// each spout from its own pending map, so `acked + failed + timed_out +
/// failed_at_shutdown == in_flight_at_start` exactly (unless a spout's
/// thread is stuck, whose figures are then missing).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DrainReport {
    /// Trees pending at the spouts when the drain began.
    pub in_flight_at_start: u64,
    /// Of those: acked during the drain.
    pub acked: u64,
    /// ... failed explicitly or by a panic.
    pub failed: u64,
    /// ... timed out.
    pub timed_out: u64,
    /// ... failed at shutdown because the drain timed out.
    pub failed_at_shutdown: u64,
    /// True when the drain finished before `shutdown_timeout_secs`.
    pub completed: bool,
    /// How long the drain took, in seconds.
    pub secs: f64,
    /// Threads that had not stopped `runtime::JOIN_GRACE` after `Stopping`: their
    /// plugin code blocks. The process exits without them.
    pub stuck_threads: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_an_errors_column() {
        let c = ComponentSummary { name: "split".into(), errors: 1234, ..Default::default() };
        let report = Report { elapsed_secs: 1.0, components: vec![c] };
        let table = report.table(None);
        let mut lines = table.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let at = header.iter().position(|&h| h == "errors").expect("an errors column");
        assert_eq!(row[at], "1234", "{table}");
    }
}
