//! Wiring executors: queues, routers, contexts, threads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use squall_plugin_api::{ComponentTasks, TaskContext};

use super::{system, Instances, RunningTopology, StartError};
use crate::acker::ledger::AckLedger;
use crate::acker::task::AckerTask;
use crate::config::{ThrottleMode, ThrottleRate, ThrottleSpec};
use crate::executor::batch::{Batch, Control};
use crate::executor::bolt::{BoltExecutor, SourceTable};
use crate::executor::spout::{SpoutExecutor, ThrottleUnit};
use crate::executor::tracking::{InputTracker, SpoutTracker};
use crate::executor::transfer::{StreamRoutes, Transfer};
use crate::executor::{RestartPolicy, RunControl};
use crate::metrics::TaskStats;
use crate::throttle::{self, Throttler};
use crate::topology::grouping::Router;
use crate::topology::{Component, Kind, Topology};

/// The acker's pending-map buckets (Storm's `Acker.TIMEOUT_BUCKET_NUM`).
const ACKER_BUCKETS: usize = 3;

/// Emptied batches a producer keeps for reuse.
const RECYCLED_BATCHES: usize = 16;

/// Starts every thread of the topology.
///
/// # Errors
/// When a thread cannot be spawned.
pub fn start(topology: Topology, mut instances: Instances) -> Result<RunningTopology, StartError> {
    let topology = Arc::new(topology);
    let settings = &topology.settings;
    let n = topology.task_count as usize;
    let run = Arc::new(RunControl::default());
    let batch_size = settings.producer_batch_size.max(1);
    let capacity = (settings.receive_buffer_size / batch_size).max(1);
    let mut data_tx: Vec<Option<Sender<Batch>>> = vec![None; n];
    let mut data_rx: Vec<Option<Receiver<Batch>>> = (0..n).map(|_| None).collect();
    for c in topology.components.iter().filter(|c| c.kind == Kind::Bolt) {
        for t in c.tasks.clone() {
            let (tx, rx) = bounded(capacity);
            data_tx[t as usize] = Some(tx);
            data_rx[t as usize] = Some(rx);
        }
    }
    let (control_tx, mut control_rx): (Vec<Sender<Control>>, Vec<Option<Receiver<Control>>>) =
        (0..n).map(|_| unbounded()).map(|(tx, rx)| (tx, Some(rx))).unzip();
    let (acker_tx, acker_rx): (Vec<_>, Vec<_>) =
        (0..settings.acker_executors).map(|_| unbounded()).unzip();
    // Emptied batches go back to their producer (bounded: extras are freed).
    let (recycle_tx, mut recycle_rx): (Vec<Sender<Batch>>, Vec<Option<Receiver<Batch>>>) =
        (0..n).map(|_| bounded(RECYCLED_BATCHES)).map(|(tx, rx)| (tx, Some(rx))).unzip();
    let stats: Vec<Arc<TaskStats>> = (0..n).map(|_| Arc::new(TaskStats::default())).collect();
    let sources = Arc::new(source_table(&topology));
    let mut threads = Vec::new();
    let flush = Duration::from_millis(settings.batch_flush_interval_millis);
    let restarts = || {
        RestartPolicy::new(settings.max_restarts, Duration::from_secs(settings.restart_window_secs))
    };

    for c in &topology.components {
        for task in c.tasks.clone() {
            let t = task as usize;
            let mut transfer = Transfer::new(
                task,
                batch_size,
                flush,
                routes(c, task),
                c.default_stream,
                data_tx.clone(),
                acker_tx.clone(),
            );
            transfer.recycled = recycle_rx[t].take();
            let context = context(&topology, c, task);
            let (main_wait, bp_wait) =
                instances.waits[t].take().expect("instantiate builds waits for every task");
            let control = control_rx[t].take().expect("one control receiver per task");
            let name = format!("{}-{}", c.name, task);
            let handle = match c.kind {
                Kind::Spout => {
                    let throttle = c.throttle.as_ref().map(throttler);
                    transfer.count_bytes = matches!(throttle, Some((_, ThrottleUnit::Bytes)));
                    let executor = SpoutExecutor {
                        context,
                        constructor: c.new,
                        config: c.config.clone(),
                        spout: instances.spouts[t].take().expect("instantiate builds every spout"),
                        transfer,
                        tracker: SpoutTracker::new(settings.timeout_buckets as usize),
                        control,
                        spout_wait: main_wait,
                        backpressure_wait: bp_wait,
                        shared: stats[t].clone(),
                        run: run.clone(),
                        max_pending: c.max_spout_pending.filter(|&m| m > 0).map(|m| m as usize),
                        recvq_skips: settings.spout_recvq_skips,
                        throttle,
                        restarts: restarts(),
                        poisoned: false,
                    };
                    spawn(name, move || executor.run())?
                }
                Kind::Bolt => {
                    let (edge_throttle, throttles) = edge_throttles(&topology, c);
                    let executor = BoltExecutor {
                        context,
                        constructor: c.new,
                        config: c.config.clone(),
                        bolt: instances.bolts[t].take().expect("instantiate builds every bolt"),
                        auto_ack: c.auto_ack,
                        transfer,
                        inputs: InputTracker::new(),
                        receive: data_rx[t].take().expect("bolts have a receive queue"),
                        control,
                        bolt_wait: main_wait,
                        backpressure_wait: bp_wait,
                        shared: stats[t].clone(),
                        run: run.clone(),
                        sources: sources.clone(),
                        edge_throttle,
                        throttles,
                        restarts: restarts(),
                        recycle: recycle_tx.clone(),
                        poisoned: false,
                    };
                    spawn(name, move || executor.run())?
                }
            };
            threads.push(handle);
        }
    }
    for (i, input) in acker_rx.into_iter().enumerate() {
        let acker = AckerTask {
            ledger: AckLedger::new(ACKER_BUCKETS),
            input,
            spouts: control_tx.clone(),
            run: run.clone(),
        };
        threads.push(spawn(format!("__acker-{i}"), move || acker.run())?);
    }
    {
        let (topology, run, controls, ackers) =
            (topology.clone(), run.clone(), control_tx.clone(), acker_tx.clone());
        threads.push(
            std::thread::Builder::new()
                .name("__system".into())
                .spawn(move || system::run(topology, run, controls, ackers))?,
        );
    }
    drop(acker_tx);
    Ok(RunningTopology { topology, run, stats, queues: data_tx, threads, started: Instant::now() })
}

/// One router per subscriber of each output stream, round robin seeded by the task.
fn routes(c: &Component, task: u32) -> Vec<StreamRoutes> {
    c.outputs
        .iter()
        .map(|s| StreamRoutes {
            name: s.decl.name.to_string(),
            direct: s.decl.direct,
            routers: s
                .subscribers
                .iter()
                .map(|sub| Router::new(sub.grouping.clone(), sub.tasks.clone(), u64::from(task)))
                .collect(),
        })
        .collect()
}

fn context(topology: &Topology, c: &Component, task: u32) -> TaskContext {
    let mut downstream: Vec<ComponentTasks> = Vec::new();
    for s in &c.outputs {
        for sub in &s.subscribers {
            let name = topology.components[sub.component].name.as_str();
            if !downstream.iter().any(|d| d.component.as_str() == name) {
                downstream.push(ComponentTasks {
                    component: name.into(),
                    tasks: sub.tasks.clone().into(),
                });
            }
        }
    }
    TaskContext {
        topology: topology.name.as_str().into(),
        component: c.name.as_str().into(),
        task_id: task,
        task_index: task - c.tasks.start,
        parallelism: c.parallelism(),
        outputs: c.stream_decls().into(),
        downstream: downstream.into(),
    }
}

fn source_table(topology: &Topology) -> SourceTable {
    let mut table = SourceTable {
        task_component: vec![0; topology.task_count as usize],
        components: Vec::new(),
    };
    for (i, c) in topology.components.iter().enumerate() {
        for t in c.tasks.clone() {
            table.task_component[t as usize] = i as u32;
        }
        let streams =
            c.outputs.iter().map(|s| (s.decl.name.to_string(), s.decl.fields.to_vec())).collect();
        table.components.push((c.name.clone(), streams));
    }
    table
}

fn throttler(spec: &ThrottleSpec) -> (Throttler, ThrottleUnit) {
    let mode = match spec.mode {
        ThrottleMode::Period => throttle::ThrottleMode::Period,
        ThrottleMode::Smooth => throttle::ThrottleMode::Smooth,
    };
    let (rate, unit) = match spec.rate {
        ThrottleRate::TuplesPerSec(r) => (r, ThrottleUnit::Tuples),
        ThrottleRate::BytesPerSec(r) => (r, ThrottleUnit::Bytes),
    };
    (Throttler::new(mode, rate, Duration::from_millis(spec.period_millis)), unit)
}

#[allow(clippy::type_complexity)]
fn edge_throttles(
    topology: &Topology,
    c: &Component,
) -> (Vec<Vec<Option<usize>>>, Vec<(Throttler, ThrottleUnit)>) {
    let mut table: Vec<Vec<Option<usize>>> =
        topology.components.iter().map(|s| vec![None; s.outputs.len()]).collect();
    let mut throttles = Vec::new();
    for input in &c.inputs {
        if let Some(spec) = &input.throttle {
            table[input.from][input.stream as usize] = Some(throttles.len());
            throttles.push(throttler(spec));
        }
    }
    (table, throttles)
}

/// Spawns a named executor thread.
///
/// Measured and rejected: a 1 µs timer slack (`PR_SET_TIMERSLACK`) makes
/// Storm's progressive level 2 ("park ~1 ns") really short, which lowers
/// latency at light load, but turns the 1000 level-2 parks into a loop of
/// syscalls that takes CPU from busy threads: word count lost ~40% of its
/// throughput on the 2-core dev machine. With the default 50 µs slack a
/// level-2 park lasts ~80 µs, as Java's `parkNanos(1)` does on Linux.
fn spawn(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(f)
}
