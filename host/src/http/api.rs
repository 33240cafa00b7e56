//! The REST API, in the shape of Storm UI's, as JSON. Every route is
//! documented in `docs/http-api.md`.

use serde::Serialize;
use serde_json::{json, Value as Json};

use super::history::{Counts, History, WindowStats};
use crate::metrics::{ComponentSummary, StatField};
use crate::runtime::reload::{ReloadOutcome, ReloadReport};
use crate::runtime::{HandleError, TopologyHandle};
use crate::topology::grouping::Grouping;
use crate::topology::{Component, Input, Kind, Topology};

/// The windows of `/api/v1/topology`: name and length in seconds (`None` = all time).
pub const WINDOWS: &[(&str, Option<f64>)] =
    &[("10s", Some(10.0)), ("1m", Some(60.0)), ("10m", Some(600.0)), ("all", None)];

/// An answer: HTTP status and JSON body.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Json,
}

impl Answer {
    fn ok(body: Json) -> Self {
        Self { status: 200, body }
    }

    /// A JSON error `{"error": message}` with `status`.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self { status, body: json!({ "error": message.into() }) }
    }
}

fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Spout => "spout",
        Kind::Bolt => "bolt",
    }
}

fn state(handle: &TopologyHandle) -> &'static str {
    match handle.state() {
        crate::control::RunState::Running => "running",
        crate::control::RunState::Draining => "draining",
        crate::control::RunState::Stopping => "stopping",
    }
}

/// A grouping as the topology file writes it: `shuffle`, `fields(word)`, ...
fn grouping_label(g: &Grouping, fields: &[String]) -> String {
    g.label(fields)
}

/// One edge of the graph.
#[derive(Debug, Serialize)]
struct Edge {
    from: String,
    stream: String,
    to: String,
    grouping: String,
    /// The subscriber runs chained to the source: task `k` of each on one
    /// thread (`config::chain`).
    chained: bool,
    /// Tuples/s the source component emitted over the last 10 s (all its streams).
    rate: f64,
}

fn windows(history: &History, handle: &TopologyHandle, i: usize) -> serde_json::Map<String, Json> {
    let now = Counts::of(handle, i);
    let elapsed = handle.elapsed().as_secs_f64();
    WINDOWS
        .iter()
        .map(|(name, w)| {
            let stats: WindowStats = history.window(i, now, elapsed, *w);
            ((*name).to_owned(), serde_json::to_value(stats).unwrap_or(Json::Null))
        })
        .collect()
}

/// `GET /api/v1/topology`.
pub fn topology(handle: &TopologyHandle, history: &History) -> Answer {
    let t = handle.topology();
    let report = handle.report();
    let mut edges = Vec::new();
    let mut components = Vec::new();
    for (i, (c, summary)) in t.components.iter().zip(&report.components).enumerate() {
        let w = windows(history, handle, i);
        let rate = w.get("10s").and_then(|s| s["emit_rate"].as_f64()).unwrap_or(0.0);
        edges.extend(edges_from(&t, i, rate));
        components.push(overview(handle, c, summary, w));
    }
    Answer::ok(json!({
        "name": t.name,
        "state": state(handle),
        "uptime_secs": handle.elapsed().as_secs_f64(),
        "reloads": handle.reloads().0,
        "failed_reloads": handle.reloads().1,
        "partial_reloads": handle.partial_reloads(),
        "durable_state": durable_state(handle),
        "taps": taps(handle),
        "error": handle.fatal().map(|e| e.to_string()),
        "windows": WINDOWS.iter().map(|w| w.0).collect::<Vec<_>>(),
        "components": components,
        "edges": edges,
        "history": history.series(handle, 300),
        "process": {
            "cpu_secs": super::prometheus::process_cpu_secs(),
            "rss_bytes": super::prometheus::process_rss_bytes(),
        },
    }))
}

/// One component as the topology answer lists it: its counters' `summary`,
/// its rate `windows`, whether a spout is active, and its latest error.
fn overview(
    handle: &TopologyHandle,
    c: &Component,
    summary: &ComponentSummary,
    windows: serde_json::Map<String, Json>,
) -> Json {
    let last_error = task_errors(handle, c)
        .max_by_key(|(_, e)| e.unix_secs)
        .map(|(task, e)| json!({ "task": task, "time": e.unix_secs, "message": e.message }));
    json!({
        "name": c.name,
        "kind": kind(c.kind),
        "component": c.reference,
        "tasks": c.parallelism(),
        "active": c.kind == Kind::Spout && c.tasks.clone().any(|task| handle.task_stats(task).get(StatField::Active) == 1),
        "summary": summary,
        "windows": windows,
        "last_error": last_error,
    })
}

/// The graph edges leaving component `i`, one per subscriber of each of
/// its output streams, all labelled with the component's emit `rate`.
fn edges_from(t: &Topology, i: usize, rate: f64) -> Vec<Edge> {
    let c = &t.components[i];
    let mut edges = Vec::new();
    for s in &c.outputs {
        let fields: Vec<String> = s.decl.fields.iter().map(|f| f.to_string()).collect();
        for sub in &s.subscribers {
            edges.push(Edge {
                from: c.name.clone(),
                stream: s.decl.name.to_string(),
                to: t.components[sub.component].name.clone(),
                grouping: grouping_label(&sub.grouping, &fields),
                chained: t.components[sub.component].chain_from == Some(i),
                rate,
            });
        }
    }
    edges
}

/// The errors recorded by each of `c`'s tasks, paired with the task.
fn task_errors<'a>(
    handle: &'a TopologyHandle,
    c: &Component,
) -> impl Iterator<Item = (u32, crate::metrics::ErrorRecord)> + 'a {
    c.tasks.clone().flat_map(move |task| {
        handle.task_stats(task).errors.snapshot().into_iter().map(move |e| (task, e))
    })
}

fn find<'t>(t: &'t Topology, name: &str) -> Result<(usize, &'t Component), Answer> {
    t.components.iter().enumerate().find(|(_, c)| c.name == name).ok_or_else(|| {
        let e = HandleError::UnknownComponent {
            name: name.to_owned(),
            suggestion: crate::config::suggest(name, t.components.iter().map(|c| c.name.as_str())),
        };
        Answer::error(404, e.to_string())
    })
}

/// `GET /api/v1/components/{name}`.
pub fn component(handle: &TopologyHandle, history: &History, name: &str) -> Answer {
    let t = handle.topology();
    let (i, c) = match find(&t, name) {
        Ok(found) => found,
        Err(answer) => return answer,
    };
    let elapsed = handle.elapsed().as_secs_f64();
    let tasks: Vec<Json> = c.tasks.clone().map(|task| task_json(handle, task, elapsed)).collect();
    let inputs: Vec<Json> = c.inputs.iter().map(|input| input_json(&t, c, input)).collect();
    let outputs: Vec<Json> = c
        .outputs
        .iter()
        .map(|s| {
            let to: Vec<&str> = s.subscribers.iter().map(|sub| t.components[sub.component].name.as_str()).collect();
            let fields: Vec<&str> = s.decl.fields.iter().map(|f| f.as_str()).collect();
            json!({ "stream": s.decl.name.as_str(), "fields": fields, "direct": s.decl.direct, "to": to })
        })
        .collect();
    let mut errors: Vec<(u32, crate::metrics::ErrorRecord)> = task_errors(handle, c).collect();
    errors.sort_by_key(|(_, e)| std::cmp::Reverse(e.unix_secs));
    let last_errors: Vec<Json> = errors
        .into_iter()
        .map(|(task, e)| json!({ "task": task, "time": e.unix_secs, "message": e.message }))
        .collect();
    Answer::ok(json!({
        "name": c.name,
        "kind": kind(c.kind),
        "component": c.reference,
        "parallelism": c.parallelism(),
        "user_metrics": user_metrics(handle, c),
        "windows": windows(history, handle, i),
        "tasks": tasks,
        "inputs": inputs,
        "outputs": outputs,
        "last_errors": last_errors,
    }))
}

/// One task's counters, with its capacity (busy share of the uptime
/// `elapsed`, in seconds) and mean execute latency derived from them.
fn task_json(handle: &TopologyHandle, task: u32, elapsed: f64) -> Json {
    let s = handle.task_stats(task);
    let executed = s.get(StatField::Executed);
    let busy = s.get(StatField::BusyNanos) as f64;
    json!({
        "task": task,
        "emitted": s.get(StatField::Emitted),
        "transferred": s.get(StatField::Transferred),
        "executed": executed,
        "acked": s.get(StatField::Acked),
        "failed_explicit": s.get(StatField::FailedExplicit),
        "failed_timeout": s.get(StatField::FailedTimeout),
        "failed_panic": s.get(StatField::FailedPanic),
        "failed_shutdown": s.get(StatField::FailedShutdown),
        "pending": s.get(StatField::Pending),
        "restarts": s.get(StatField::Restarts),
        "errors": s.get(StatField::Errors),
        "ticks": s.get(StatField::Ticks),
        "active": s.get(StatField::Active) == 1,
        "capacity": (busy / 1e9 / elapsed.max(1e-9)).min(1.0),
        "execute_latency_us": if executed > 0 { busy / 1e3 / executed as f64 } else { 0.0 },
        "queue_depth_batches": handle.queue_depth(task),
    })
}

/// One input of `c`: the component and stream it reads, and the grouping
/// it subscribed with.
fn input_json(t: &Topology, c: &Component, input: &Input) -> Json {
    let from = &t.components[input.from];
    let stream = &from.outputs[input.stream as usize];
    let fields: Vec<String> = stream.decl.fields.iter().map(|f| f.to_string()).collect();
    let grouping = stream
        .subscribers
        .iter()
        .find(|s| t.components[s.component].name == c.name)
        .map(|s| grouping_label(&s.grouping, &fields));
    json!({ "from": from.name, "stream": stream.decl.name.as_str(), "grouping": grouping })
}

/// The metrics the component's plugin registered, per task (a labelled
/// series with its `labels`, while the plugin holds it).
fn user_metrics(handle: &TopologyHandle, c: &Component) -> Vec<Json> {
    use squall_plugin_api::abi::MetricKind;
    let mut out = Vec::new();
    for task in c.tasks.clone() {
        for m in handle.task_stats(task).user.snapshot() {
            let value = match m.kind() {
                MetricKind::COUNTER => json!({ "kind": "counter", "value": m.cell(0) }),
                MetricKind::GAUGE => json!({ "kind": "gauge", "value": m.cell(0) as i64 }),
                MetricKind::DURATION => {
                    // Recorded in µs; given in seconds, as in /metrics.
                    let (count, sum) = (m.cell(0), m.cell(1) as f64 / 1e6);
                    let mean = if count > 0 { sum / count as f64 } else { 0.0 };
                    json!({ "kind": "histogram", "unit": "seconds", "count": count, "sum": sum, "mean": mean })
                }
                _ => {
                    let (count, sum) = (m.cell(0), m.cell(1));
                    let mean = if count > 0 { sum as f64 / count as f64 } else { 0.0 };
                    json!({ "kind": "histogram", "count": count, "sum": sum, "mean": mean })
                }
            };
            let mut entry = json!({ "task": task, "name": m.name, "help": m.help });
            if !m.labels.is_empty() {
                // A labelled series (contract 1.3): its labels, in order.
                let labels: serde_json::Map<String, Json> =
                    m.labels.iter().map(|(n, v)| (n.clone(), json!(v))).collect();
                entry["labels"] = Json::Object(labels);
            }
            if let (Some(e), Some(v)) = (entry.as_object_mut(), value.as_object()) {
                e.extend(v.clone());
            }
            out.push(entry);
        }
    }
    out
}

/// `POST /api/v1/activate` and `/deactivate`, for `component` or every spout.
pub fn steer(handle: &TopologyHandle, activate: bool, component: Option<&str>) -> Answer {
    let result = if activate { handle.activate(component) } else { handle.deactivate(component) };
    match result {
        Ok(tasks) => Answer::ok(json!({
            "ok": true,
            "action": if activate { "activate" } else { "deactivate" },
            "component": component,
            "tasks": tasks,
        })),
        Err(e @ HandleError::UnknownComponent { .. }) => Answer::error(404, e.to_string()),
        Err(e @ HandleError::NotASpout(_)) => Answer::error(400, e.to_string()),
        Err(e @ HandleError::Draining) => Answer::error(409, e.to_string()),
    }
}

/// `POST /api/v1/drain`: starts the graceful drain; the process then stops.
pub fn drain(handle: &TopologyHandle) -> Answer {
    tracing::info!("drain requested over HTTP");
    handle.drain();
    Answer { status: 202, body: json!({ "ok": true, "state": state(handle) }) }
}

/// How long `POST /api/v1/reload` waits for its reload: twice the swap
/// timeout for the tasks, plus loading.
pub const RELOAD_WAIT: std::time::Duration =
    std::time::Duration::from_secs(crate::runtime::reload::SWAP_TIMEOUT.as_secs() * 3);

/// `POST /api/v1/reload`, once its reload is over (`report`), or `None`
/// when it did not end within [`RELOAD_WAIT`]: 200 when applied (or
/// nothing changed), 409 when it was rolled back (the topology runs
/// unchanged), 500 when it was only partly applied, 504 past the wait.
pub fn reload_answer(handle: &TopologyHandle, report: Option<ReloadReport>) -> Answer {
    let (reloads, failed) = handle.reloads();
    let Some(report) = report else {
        return Answer::error(504, "the reload did not finish in time; see the log");
    };
    let status = match report.outcome {
        ReloadOutcome::NothingChanged | ReloadOutcome::Applied(_) => 200,
        ReloadOutcome::RolledBack(_) => 409,
        ReloadOutcome::Partial { .. } => 500,
    };
    let mut body = report.to_json();
    body["ok"] = json!(status == 200);
    body["reloads"] = json!(reloads);
    body["failed_reloads"] = json!(failed);
    body["partial_reloads"] = json!(handle.partial_reloads());
    if status != 200 {
        body["error"] = json!(report.line);
    }
    Answer { status, body }
}

/// `POST /api/v1/reload` when this run cannot reload.
pub fn reload_unavailable() -> Answer {
    Answer::error(503, "reloading is not available for this run")
}

/// `GET /healthz`: the process serves (liveness).
pub fn healthz(handle: &TopologyHandle) -> Answer {
    Answer::ok(json!({ "status": "ok", "state": state(handle) }))
}

/// `GET /readyz`: 200 while the topology runs, 503 once it drains or
/// failed, and 503 while a connector says its broker connection is down
/// (a task's user gauge `connector_up` is 0: `squall_connector::health`).
pub fn readyz(handle: &TopologyHandle) -> Answer {
    let running = handle.state() == crate::control::RunState::Running && handle.fatal().is_none();
    let down = connectors_down(handle);
    let ready = running && down.is_empty();
    let mut body = json!({ "ready": ready, "state": state(handle) });
    if !down.is_empty() {
        body["connectors_down"] = json!(down);
    }
    Answer { status: if ready { 200 } else { 503 }, body }
}

/// The name of the gauge a connector sets to 0 while it cannot read or write.
const CONNECTOR_UP: &str = "connector_up";

/// `{component, task}` of every task whose `connector_up` gauge is 0.
fn connectors_down(handle: &TopologyHandle) -> Vec<Json> {
    use squall_plugin_api::abi::MetricKind;
    let t = handle.topology();
    let mut down = Vec::new();
    for c in &t.components {
        for task in c.tasks.clone() {
            let metrics = handle.task_stats(task).user.snapshot();
            let up = metrics
                .iter()
                .find(|m| {
                    m.name == CONNECTOR_UP && m.kind() == MetricKind::GAUGE && m.labels.is_empty()
                })
                .map(|m| m.cell(0) as i64);
            if up == Some(0) {
                down.push(json!({ "component": c.name, "task": task }));
            }
        }
    }
    down
}

/// Durable state's figures (`null` for a topology without `[state]`).
/// `taps`: how many are attached, and what every tap sampled and dropped
/// since the start (a slow client's losses show here).
fn taps(handle: &TopologyHandle) -> serde_json::Value {
    let (attached, sampled, dropped) = handle.tap_totals();
    serde_json::json!({ "attached": attached, "sampled": sampled, "dropped": dropped })
}

pub(crate) fn durable_state(handle: &TopologyHandle) -> serde_json::Value {
    handle.durable().map_or(serde_json::Value::Null, crate::runtime::Durable::to_json)
}
