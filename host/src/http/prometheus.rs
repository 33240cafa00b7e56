//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4).
//!
//! Every series is labelled `topology`, `component` and `task`; failures
//! also carry `reason`. Counter names end in `_total`, durations are in
//! seconds, as Prometheus' naming conventions ask.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use squall_plugin_api::abi::MetricKind;

use crate::metrics::{StatField, TaskStats};
use crate::plugin::services::UserMetric;
use crate::runtime::TopologyHandle;
use crate::topology::{Kind, Topology};

/// Upper bounds (seconds) of the latency histograms' buckets: 10 µs to 10 s.
const BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One counter or gauge family: name, type, help, and how to read a task.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    read: fn(&TaskStats, f64) -> Option<f64>,
}

fn secs(s: &TaskStats, f: StatField) -> f64 {
    s.get(f) as f64 / 1e9
}

const FAMILIES: &[Family] = &[
    Family {
        name: "squall_emitted_total",
        kind: "counter",
        help: "Tuples emitted by the component's code.",
        read: |s, _| Some(s.get(StatField::Emitted) as f64),
    },
    Family {
        name: "squall_transferred_total",
        kind: "counter",
        help: "Tuples handed to downstream queues (one per target task).",
        read: |s, _| Some(s.get(StatField::Transferred) as f64),
    },
    Family {
        name: "squall_executed_total",
        kind: "counter",
        help: "Tuples executed (bolts; tick tuples excluded).",
        read: |s, _| Some(s.get(StatField::Executed) as f64),
    },
    Family {
        name: "squall_acked_total",
        kind: "counter",
        help: "Trees acked (spouts) or inputs acked (bolts).",
        read: |s, _| Some(s.get(StatField::Acked) as f64),
    },
    Family {
        name: "squall_restarts_total",
        kind: "counter",
        help: "Instances rebuilt after a panic.",
        read: |s, _| Some(s.get(StatField::Restarts) as f64),
    },
    Family {
        name: "squall_errors_total",
        kind: "counter",
        help: "Errors returned by plugin calls.",
        read: |s, _| Some(s.get(StatField::Errors) as f64),
    },
    Family {
        name: "squall_ticks_total",
        kind: "counter",
        help: "Tick tuples delivered (bolts).",
        read: |s, _| Some(s.get(StatField::Ticks) as f64),
    },
    Family {
        name: "squall_backpressure_seconds_total",
        kind: "counter",
        help: "Time spent waiting because a downstream queue was full.",
        read: |s, _| Some(secs(s, StatField::BackpressureNanos)),
    },
    Family {
        name: "squall_max_pending_seconds_total",
        kind: "counter",
        help: "Time spent waiting because max_spout_pending was reached (spouts).",
        read: |s, _| Some(secs(s, StatField::MaxPendingNanos)),
    },
    Family {
        name: "squall_throttle_seconds_total",
        kind: "counter",
        help: "Time spent waiting in the throttler.",
        read: |s, _| Some(secs(s, StatField::ThrottleNanos)),
    },
    Family {
        name: "squall_capacity",
        kind: "gauge",
        help: "Fraction of time spent executing since start (bolts) or in next_tuple (spouts).",
        read: |s, elapsed| Some((secs(s, StatField::BusyNanos) / elapsed.max(1e-9)).min(1.0)),
    },
    Family {
        name: "squall_pending_trees",
        kind: "gauge",
        help: "Trees in flight (spouts).",
        read: |s, _| Some(s.get(StatField::Pending) as f64),
    },
];

/// The failure reasons and their counters.
const REASONS: &[(&str, StatField)] = &[
    ("explicit", StatField::FailedExplicit),
    ("timeout", StatField::FailedTimeout),
    ("panic", StatField::FailedPanic),
    ("shutdown", StatField::FailedShutdown),
];

/// One task's series: its labels, its counters, its kind and its id.
struct Series {
    labels: String,
    stats: std::sync::Arc<TaskStats>,
    kind: Kind,
    task: u32,
}

/// Renders every metric of the running topology.
pub fn render(handle: &TopologyHandle) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let topology = handle.topology();
    let tasks = series(handle, &topology);
    let elapsed = handle.elapsed().as_secs_f64();
    for f in FAMILIES {
        header(&mut out, f.name, f.kind, f.help);
        for s in &tasks {
            if let Some(v) = (f.read)(&s.stats, elapsed) {
                let _ = writeln!(out, "{}{{{}}} {v}", f.name, s.labels);
            }
        }
    }
    let topology_label = format!("topology=\"{}\"", escape(&topology.name));
    reloads(&mut out, handle, &topology_label);
    if let Some(d) = handle.durable() {
        checkpoints(&mut out, &d.stats, &topology_label);
    }
    failures(&mut out, &tasks);
    queue_depths(&mut out, handle, &tasks);
    latencies(&mut out, &tasks);
    user_metrics(&mut out, &tasks);
    process(&mut out);
    out
}

/// Every task of `topology`, labelled, with its counters.
fn series(handle: &TopologyHandle, topology: &Topology) -> Vec<Series> {
    topology
        .components
        .iter()
        .flat_map(|c| c.tasks.clone().map(move |task| (c, task)))
        .map(|(c, task)| Series {
            labels: format!(
                "topology=\"{}\",component=\"{}\",task=\"{task}\"",
                escape(&topology.name),
                escape(&c.name)
            ),
            stats: handle.task_stats(task),
            kind: c.kind,
            task,
        })
        .collect()
}

/// The reload counters.
fn reloads(out: &mut String, handle: &TopologyHandle, topology_label: &str) {
    let (reloads, failed) = handle.reloads();
    let counters = [
        (
            "squall_reloads_total",
            "Live reloads applied in full (or with nothing to change).",
            reloads,
        ),
        (
            "squall_reload_failures_total",
            "Live reloads that failed or were refused (the topology ran on unchanged).",
            failed,
        ),
        (
            "squall_reload_partial_total",
            "Live reloads that committed but were only partly applied (the log names what was \
             not).",
            handle.partial_reloads(),
        ),
    ];
    for (name, help, value) in counters {
        header(out, name, "counter", help);
        let _ = writeln!(out, "{name}{{{topology_label}}} {value}");
    }
}

/// Durable state's figures.
fn checkpoints(out: &mut String, s: &crate::state::CheckpointStats, topology_label: &str) {
    use std::sync::atomic::Ordering::Relaxed;
    let figures: [(&str, &str, &str, f64); 7] = [
        ("squall_checkpoint_last_committed", "gauge", "The last committed checkpoint (0: none yet).", s.last_committed.load(Relaxed) as f64),
        ("squall_checkpoints_total", "counter", "Checkpoints committed by this process.", s.committed.load(Relaxed) as f64),
        ("squall_checkpoint_failures_total", "counter", "Commits the state backend refused (their writes are retried with the next checkpoint).", s.failed.load(Relaxed) as f64),
        ("squall_checkpoints_aborted_total", "counter", "Checkpoints abandoned (a task did not report in time, or could not read its stores).", s.aborted.load(Relaxed) as f64),
        ("squall_checkpoint_duration_seconds", "gauge", "The last committed checkpoint's duration, barrier to commit.", s.last_micros.load(Relaxed) as f64 / 1e6),
        ("squall_checkpoint_bytes", "gauge", "Bytes (keys and values) the last commit wrote.", s.last_bytes.load(Relaxed) as f64),
        ("squall_state_restore_seconds", "gauge", "How long the restore at start took.", s.restore_micros.load(Relaxed) as f64 / 1e6),
    ];
    for (name, kind, help, value) in figures {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name}{{{topology_label}}} {value}");
    }
}

/// Failures by reason, per task.
fn failures(out: &mut String, tasks: &[Series]) {
    header(out, "squall_failed_total", "counter", "Failures, by reason.");
    for s in tasks {
        for (reason, field) in REASONS {
            let labels = &s.labels;
            let value = s.stats.get(*field);
            let _ = writeln!(out, "squall_failed_total{{{labels},reason=\"{reason}\"}} {value}");
        }
    }
}

/// The bolts' receive queue depths.
fn queue_depths(out: &mut String, handle: &TopologyHandle, tasks: &[Series]) {
    let help = "Batches waiting in the receive queue (bolts).";
    header(out, "squall_queue_depth_batches", "gauge", help);
    for s in tasks.iter().filter(|s| s.kind == Kind::Bolt) {
        let depth = handle.queue_depth(s.task);
        let _ = writeln!(out, "squall_queue_depth_batches{{{}}} {depth}", s.labels);
    }
}

/// The spouts' complete latency and the bolts' execute latency.
fn latencies(out: &mut String, tasks: &[Series]) {
    let name = "squall_complete_latency_seconds";
    let help = "Complete latency of acked trees, measured at the acker (spouts).";
    header(out, name, "histogram", help);
    for s in tasks.iter().filter(|s| s.kind == Kind::Spout) {
        histogram(out, name, &s.labels, &s.stats.latency.snapshot());
    }
    let name = "squall_execute_latency_seconds";
    let help = "Execute latency: the mean of each executed run of tuples (bolts).";
    header(out, name, "histogram", help);
    for s in tasks.iter().filter(|s| s.kind == Kind::Bolt) {
        histogram(out, name, &s.labels, &s.stats.execute_latency.snapshot());
    }
}

/// Metrics plugins registered (contract 1.1), as `squall_user_<name>`. A
/// name registered with different kinds by different components keeps the
/// first kind seen; the others are left out (one family, one type). A
/// labelled series (contract 1.3) carries its labels after the task's.
fn user_metrics(out: &mut String, tasks: &[Series]) {
    let mut families = UserFamilies::new();
    for Series { labels, stats, .. } in tasks {
        for m in stats.user.snapshot() {
            let mut name = format!("squall_user_{}", m.name);
            if m.kind() == MetricKind::COUNTER && !name.ends_with("_total") {
                name.push_str("_total");
            }
            if m.kind() == MetricKind::DURATION && !name.ends_with("_seconds") {
                name.push_str("_seconds");
            }
            let family = families
                .entry(name.clone())
                .or_insert_with(|| (m.kind(), m.help.clone(), Vec::new()));
            if family.0 != m.kind() {
                continue;
            }
            family.2.push(user_series(&name, &user_labels(labels, &m), &m));
        }
    }
    for (name, (kind, help, series)) in families {
        let kind = match kind {
            MetricKind::COUNTER => "counter",
            MetricKind::GAUGE => "gauge",
            _ => "histogram",
        };
        let help = if help.is_empty() {
            "A metric registered by a plugin.".to_owned()
        } else {
            help.replace('\\', "\\\\").replace('\n', "\\n")
        };
        header(out, &name, kind, &help);
        for s in series {
            out.push_str(&s);
        }
    }
}

/// The task's `labels` followed by `m`'s own, their values escaped.
fn user_labels(labels: &str, m: &UserMetric) -> String {
    let mut all = labels.to_owned();
    for (name, value) in &m.labels {
        let _ = write!(all, ",{name}=\"{}\"", escape(value));
    }
    all
}

/// The user metrics by family name: the family's kind and help, and the
/// lines of each task's series.
type UserFamilies = std::collections::BTreeMap<String, (MetricKind, String, Vec<String>)>;

/// One task's series of user metric `m` as family `name`, with the task's
/// `labels`: one line for a counter or a gauge, the buckets, sum and count
/// of a histogram (a duration's bounds and sum in seconds, from the
/// microseconds recorded).
fn user_series(name: &str, labels: &str, m: &UserMetric) -> String {
    let mut lines = String::new();
    match m.kind() {
        MetricKind::COUNTER => {
            let _ = writeln!(lines, "{name}{{{labels}}} {}", m.cell(0));
        }
        MetricKind::GAUGE => {
            let _ = writeln!(lines, "{name}{{{labels}}} {}", m.cell(0) as i64);
        }
        _ => {
            // Cells: count, sum, then buckets by bit length.
            // A value as exported: a duration's microseconds in seconds.
            let seconds = m.kind() == MetricKind::DURATION;
            let value =
                |v: u128| if seconds { (v as f64 / 1e6).to_string() } else { v.to_string() };
            let last = (0..65).rev().find(|&i| m.cell(2 + i) > 0).unwrap_or(0);
            let mut cumulative = 0;
            for i in 0..=last {
                cumulative += m.cell(2 + i);
                let le = value(if i == 0 { 0 } else { (1u128 << i) - 1 });
                let _ = writeln!(lines, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
            }
            let _ = writeln!(lines, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", m.cell(0));
            let _ = writeln!(lines, "{name}_sum{{{labels}}} {}", value(u128::from(m.cell(1))));
            let _ = writeln!(lines, "{name}_count{{{labels}}} {}", m.cell(0));
        }
    }
    lines
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A histogram recorded in µs, exposed in seconds with cumulative buckets.
fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram<u64>) {
    for &le in BUCKETS {
        let micros = (le * 1e6) as u64;
        let n = if h.is_empty() { 0 } else { h.count_between(0, micros) };
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {n}");
    }
    let total = h.len();
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {total}");
    let sum: f64 =
        h.iter_recorded().map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64).sum();
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", sum / 1e6);
    let _ = writeln!(out, "{name}_count{{{labels}}} {total}");
}

/// `process_cpu_seconds_total` and `process_resident_memory_bytes`, the
/// standard process metrics, from /proc (Linux).
fn process(out: &mut String) {
    if let Some(cpu) = process_cpu_secs() {
        header(
            out,
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time of the squall process.",
        );
        let _ = writeln!(out, "process_cpu_seconds_total {cpu}");
    }
    if let Some(rss) = process_rss_bytes() {
        header(
            out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory of the squall process.",
        );
        let _ = writeln!(out, "process_resident_memory_bytes {rss}");
    }
}

/// utime + stime from /proc/self/stat, in seconds (USER_HZ is 100 on Linux).
pub fn process_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// VmRSS from /proc/self/status, in bytes.
pub fn process_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib * 1024)
}

/// Escapes a label value: backslash, double quote and newline.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_in_microseconds_is_exposed_in_seconds_with_cumulative_buckets() {
        let mut h = crate::metrics::new_histogram();
        h.record(5).unwrap(); // 5 µs: in every bucket
        h.record(300).unwrap(); // 0.3 ms: from le=0.0005 on
        h.record(2_000_000).unwrap(); // 2 s: from le=2.5 on
        let mut out = String::new();
        histogram(&mut out, "x", "a=\"b\"", &h);
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.00001\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.00025\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.0005\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"1\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"2.5\"} 3\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_count{a=\"b\"} 3\n"), "{out}");
    }

    #[test]
    fn labelled_user_series_render_after_the_tasks_labels_escaped_one_family_each() {
        use crate::plugin::services::{enter_task, HostServices};
        use squall_plugin_api::abi::{DynHost13 as _, MetricLabel};
        let stats = std::sync::Arc::new(TaskStats::default());
        enter_task("in", 2, stats.clone());
        let register = |kind, name: &str, labels: &[(&str, &str)]| {
            let labels: Vec<MetricLabel<'_>> = labels
                .iter()
                .map(|&(name, value)| MetricLabel { name: name.into(), value: value.into() })
                .collect();
            let answer = HostServices.register_labelled_metric(
                kind,
                name.into(),
                "Records \\ behind\nthe end.".into(),
                labels.as_slice().into(),
            );
            answer.unwrap().cells
        };
        let p0 = register(MetricKind::GAUGE, "lag", &[("topic", "a\"b\\c\nd"), ("partition", "0")]);
        let p1 = register(MetricKind::GAUGE, "lag", &[("topic", "t"), ("partition", "1")]);
        let h = register(MetricKind::HISTOGRAM, "commit_ms", &[("topic", "t")]);
        let d = register(MetricKind::DURATION, "wait", &[("topic", "t")]);
        // 1 µs, 2 µs and 3 µs recorded: buckets 1 and 2 (twice), sum 6 µs.
        for (i, v) in [(0, 3), (1, 6), (3, 1), (4, 2)] {
            d.values[i].0.store(v, std::sync::atomic::Ordering::Relaxed);
        }
        p0.values[0].0.store(-3i64 as u64, std::sync::atomic::Ordering::Relaxed);
        p1.values[0].0.store(100, std::sync::atomic::Ordering::Relaxed);
        for (i, v) in [(0, 1), (1, 2), (3, 1)] {
            h.values[i].0.store(v, std::sync::atomic::Ordering::Relaxed);
        }
        let task = "topology=\"x\",component=\"in\",task=\"2\"".to_owned();
        let tasks = [Series { labels: task, stats: stats.clone(), kind: Kind::Spout, task: 2 }];
        let mut out = String::new();
        user_metrics(&mut out, &tasks);
        let expected = "\
# HELP squall_user_commit_ms Records \\\\ behind\\nthe end.
# TYPE squall_user_commit_ms histogram
squall_user_commit_ms_bucket{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",le=\"0\"} 0
squall_user_commit_ms_bucket{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",le=\"1\"} 1
squall_user_commit_ms_bucket{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",le=\"+Inf\"} 1
squall_user_commit_ms_sum{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\"} 2
squall_user_commit_ms_count{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\"} 1
# HELP squall_user_lag Records \\\\ behind\\nthe end.
# TYPE squall_user_lag gauge
squall_user_lag{topology=\"x\",component=\"in\",task=\"2\",topic=\"a\\\"b\\\\c\\nd\",partition=\"0\"} -3
squall_user_lag{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",partition=\"1\"} 100
# HELP squall_user_wait_seconds Records \\\\ behind\\nthe end.
# TYPE squall_user_wait_seconds histogram
squall_user_wait_seconds_bucket{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",le=\"0\"} 0
squall_user_wait_seconds_bucket{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",le=\"0.000001\"} 1
squall_user_wait_seconds_bucket{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",le=\"0.000003\"} 3
squall_user_wait_seconds_bucket{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\",le=\"+Inf\"} 3
squall_user_wait_seconds_sum{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\"} 0.000006
squall_user_wait_seconds_count{topology=\"x\",component=\"in\",task=\"2\",topic=\"t\"} 3
";
        assert_eq!(out, expected);
        // Partition 0's handle dropped: the next render leaves it out.
        drop(p0);
        let mut out = String::new();
        user_metrics(&mut out, &tasks);
        assert!(!out.contains("partition=\"0\""), "{out}");
        assert!(out.contains("partition=\"1\"} 100\n"), "{out}");
        drop((p1, h, d));
        let mut out = String::new();
        user_metrics(&mut out, &tasks);
        assert_eq!(out, "", "no series, no family");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn this_process_has_cpu_time_and_memory() {
        assert!(process_cpu_secs().is_some());
        assert!(process_rss_bytes().is_some_and(|b| b > 0));
    }
}
