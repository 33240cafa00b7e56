//! [`Plan`]: the queues, executors and ackers of a topology, built but not
//! started.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use squall_plugin_api::abi::{TaskContext, TaskExt};
use squall_plugin_api::ComponentTasks;

use super::instantiate::CustomInstance;
use super::system::SystemTask;
use super::{Instances, RunningTopology, StartError};
use crate::acker::ledger::AckLedger;
use crate::acker::msg::AckerInput;
use crate::acker::task::AckerTask;
use crate::config::{ThrottleRate, ThrottleSpec};
use crate::control::{Control, RunControl, TaskName};
use crate::executor::batch::{Batch, QueueBytes};
use crate::executor::bolt::{BoltExecutor, BoltInputs, SourceTable, WindowState};
use crate::executor::core::TaskCore;
use crate::executor::spout::{SpoutExecutor, SpoutOptions, ThrottleUnit};
use crate::executor::transfer::{StreamRoutes, Transfer, TransferWiring};
use crate::executor::RestartPolicy;
use crate::ids::TaskId;
use crate::metrics::TaskStats;
use crate::throttle::Throttler;
use crate::topology::grouping::Router;
use crate::topology::{Component, Kind, Topology};

/// The acker's pending-map buckets (Storm's `Acker.TIMEOUT_BUCKET_NUM`).
const ACKER_BUCKETS: usize = 3;

/// Emptied batches a producer keeps for reuse.
const RECYCLED_BATCHES: usize = 16;

/// A topology with every queue, executor and acker built, and no thread
/// started. [`Plan::spawn`] starts it.
#[derive(Debug)]
pub struct Plan {
    /// The topology.
    pub topology: Arc<Topology>,
    /// The run state every thread will share.
    pub run: Arc<RunControl>,
    /// Published counters per task id.
    pub stats: Vec<Arc<TaskStats>>,
    /// The data queue of each bolt task, by task id (`None` for spouts).
    pub queues: Vec<Option<Sender<Batch>>>,
    /// The control queue of each task, by task id.
    pub controls: Vec<Sender<Control>>,
    /// One executor per spout task.
    pub spouts: Vec<SpoutExecutor>,
    /// One executor per bolt task.
    pub bolts: Vec<BoltExecutor>,
    /// The acker tasks (`acker_executors` of them).
    pub ackers: Vec<AckerTask>,
    /// Timeout ticks and tick tuples.
    pub system: SystemTask,
}

/// Both ends of every queue of a topology, before the executors take theirs.
struct Queues {
    data_tx: Vec<Option<Sender<Batch>>>,
    data_rx: Vec<Option<Receiver<Batch>>>,
    control_tx: Vec<Sender<Control>>,
    control_rx: Vec<Option<Receiver<Control>>>,
    acker_tx: Vec<Sender<AckerInput>>,
    acker_rx: Vec<Receiver<AckerInput>>,
    recycle_tx: Vec<Sender<Batch>>,
    recycle_rx: Vec<Option<Receiver<Batch>>>,
    /// Byte budgets of the bolt tasks' queues, by task id (`receive_buffer_bytes`).
    queue_bytes: Vec<Option<Arc<QueueBytes>>>,
}

impl Queues {
    /// A bounded data channel per bolt task (`receive_buffer_size /
    /// producer_batch_size` batches), an unbounded control channel per task,
    /// an unbounded channel per acker, and a small recycling channel per task.
    fn new(topology: &Topology) -> Self {
        let settings = &topology.settings;
        let n = topology.task_count as usize;
        let capacity = (settings.receive_buffer_size / settings.producer_batch_size.max(1)).max(1);
        let mut data_tx: Vec<Option<Sender<Batch>>> = vec![None; n];
        let mut data_rx: Vec<Option<Receiver<Batch>>> = (0..n).map(|_| None).collect();
        for c in topology.components.iter().filter(|c| c.kind == Kind::Bolt) {
            for t in c.tasks.clone() {
                let (tx, rx) = bounded(capacity);
                data_tx[t as usize] = Some(tx);
                data_rx[t as usize] = Some(rx);
            }
        }
        let (control_tx, control_rx) =
            (0..n).map(|_| unbounded()).map(|(t, r)| (t, Some(r))).unzip();
        let (acker_tx, acker_rx) = (0..settings.acker_executors).map(|_| unbounded()).unzip();
        // Emptied batches go back to their producer (bounded: extras are freed).
        let (recycle_tx, recycle_rx) =
            (0..n).map(|_| bounded(RECYCLED_BATCHES)).map(|(t, r)| (t, Some(r))).unzip();
        let queue_bytes = (0..n)
            .map(|t| {
                (settings.receive_buffer_bytes > 0 && data_tx[t].is_some())
                    .then(|| Arc::new(QueueBytes::new(settings.receive_buffer_bytes)))
            })
            .collect();
        Self {
            data_tx,
            data_rx,
            control_tx,
            control_rx,
            acker_tx,
            acker_rx,
            recycle_tx,
            recycle_rx,
            queue_bytes,
        }
    }
}

impl Plan {
    /// Builds every queue and executor of `topology` around `instances`.
    pub fn new(topology: Topology, mut instances: Instances) -> Self {
        let topology = Arc::new(topology);
        let run = Arc::new(RunControl::default());
        let n = topology.task_count as usize;
        let stats: Vec<Arc<TaskStats>> = (0..n).map(|_| Arc::new(TaskStats::default())).collect();
        let mut q = Queues::new(&topology);
        let sources = Arc::new(source_table(&topology));
        let (mut spouts, mut bolts) = (Vec::new(), Vec::new());
        for c in &topology.components {
            for task in c.tasks.clone() {
                let t = task as usize;
                let waits = instances.waits[t].take().expect("instantiate builds every wait");
                let throttle = c.throttle.as_ref().map(throttler);
                let count_bytes = matches!(throttle, Some((_, ThrottleUnit::Bytes)));
                let wiring = TransferWiring {
                    batch_size: topology.settings.producer_batch_size,
                    flush_interval: Duration::from_millis(
                        topology.settings.batch_flush_interval_millis,
                    ),
                    streams: routes(c, task, &mut instances.groupings[task as usize]),
                    default_stream: c.default_stream,
                    queues: q.data_tx.clone(),
                    ackers: q.acker_tx.clone(),
                    recycled: q.recycle_rx[t].take(),
                    count_bytes,
                    queue_bytes: q.queue_bytes.clone(),
                };
                let core = TaskCore::new(
                    TaskName { kind: c.kind, component: c.name.clone(), task: TaskId(task) },
                    context(&topology, c, task),
                    c.factory,
                    c.config.clone(),
                    Transfer::new(TaskId(task), wiring),
                    q.control_rx[t].take().expect("one control receiver per task"),
                    waits,
                    stats[t].clone(),
                    run.clone(),
                    RestartPolicy::from_settings(&topology.settings),
                );
                match c.kind {
                    Kind::Spout => {
                        let spout = instances.spouts[t].take().expect("a spout per spout task");
                        let options = SpoutOptions {
                            max_pending: c.max_spout_pending.map(|m| m as usize),
                            recvq_skips: topology.settings.spout_recvq_skips,
                            timeout_buckets: topology.settings.timeout_buckets as usize,
                            throttle,
                        };
                        spouts.push(SpoutExecutor::new(core, spout, options));
                    }
                    Kind::Bolt => {
                        let bolt = instances.bolts[t].take().expect("a bolt per bolt task");
                        let (edge_throttle, throttles) = edge_throttles(&topology, c);
                        let inputs = BoltInputs {
                            auto_ack: c.auto_ack,
                            receive: q.data_rx[t].take().expect("bolts have a receive queue"),
                            sources: sources.clone(),
                            edge_throttle,
                            throttles,
                            recycle: q.recycle_tx.clone(),
                            queue_bytes: q.queue_bytes[t].clone(),
                            window: c.window.as_ref().map(|w| {
                                let outputs: Vec<&str> =
                                    c.outputs.iter().map(|s| s.decl.name.as_str()).collect();
                                Box::new(WindowState::new(w, &sources, &outputs))
                            }),
                        };
                        bolts.push(BoltExecutor::new(core, bolt, inputs));
                    }
                }
            }
        }
        Self::assemble(topology, run, stats, q, spouts, bolts)
    }

    fn assemble(
        topology: Arc<Topology>,
        run: Arc<RunControl>,
        stats: Vec<Arc<TaskStats>>,
        q: Queues,
        spouts: Vec<SpoutExecutor>,
        bolts: Vec<BoltExecutor>,
    ) -> Self {
        let ackers = q
            .acker_rx
            .into_iter()
            .map(|input| AckerTask {
                ledger: AckLedger::new(ACKER_BUCKETS),
                input,
                spouts: q.control_tx.clone(),
                run: run.clone(),
            })
            .collect();
        let system =
            SystemTask::new(&topology, run.clone(), q.control_tx.clone(), q.acker_tx.clone());
        Self {
            topology,
            run,
            stats,
            queues: q.data_tx,
            controls: q.control_tx,
            spouts,
            bolts,
            ackers,
            system,
        }
    }

    /// Starts one thread per task, one per acker, and the system thread.
    ///
    /// # Errors
    /// When a thread cannot be spawned; the threads already started are
    /// stopped first.
    pub fn spawn(self) -> Result<RunningTopology, StartError> {
        let Plan { topology, run, stats, queues, controls, spouts, bolts, ackers, system } = self;
        let mut threads = Vec::new();
        let spawned = (|| {
            for s in spouts {
                let name = format!("{}-{}", s.context().component, s.context().task_id);
                threads.push(super::spawn(name, &run, move || s.run())?);
            }
            for b in bolts {
                let name = format!("{}-{}", b.context().component, b.context().task_id);
                threads.push(super::spawn(name, &run, move || b.run())?);
            }
            for (i, acker) in ackers.into_iter().enumerate() {
                threads.push(super::spawn(format!("__acker-{i}"), &run, move || acker.run())?);
            }
            threads.push(super::spawn("__system".into(), &run, move || system.run())?);
            Ok::<_, std::io::Error>(())
        })();
        let running = RunningTopology::new(topology, run, stats, queues, controls, threads);
        match spawned {
            Ok(()) => Ok(running),
            Err(e) => {
                let _ = running.stop();
                Err(StartError::Spawn(e))
            }
        }
    }
}

/// One router per subscriber of each output stream, round robin seeded by the task.
fn routes(c: &Component, task: u32, custom: &mut Vec<CustomInstance>) -> Vec<StreamRoutes> {
    c.outputs
        .iter()
        .enumerate()
        .map(|(stream, s)| StreamRoutes {
            name: s.decl.name.to_string(),
            direct: s.decl.direct,
            fields: s.decl.fields.len(),
            routers: s
                .subscribers
                .iter()
                .enumerate()
                .map(|(sub_index, sub)| {
                    let tasks = sub.tasks.clone();
                    match custom
                        .iter()
                        .position(|c| c.stream == stream && c.subscriber == sub_index)
                    {
                        Some(i) => {
                            let instance = custom.swap_remove(i).instance;
                            Router::with_instance(sub.grouping.clone(), tasks, instance)
                        }
                        None => Router::new(sub.grouping.clone(), tasks, u64::from(task)),
                    }
                })
                .collect(),
        })
        .collect()
}

fn context(topology: &Topology, c: &Component, task: u32) -> (TaskContext, TaskExt) {
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
    let context = TaskContext {
        topology: topology.name.as_str().into(),
        component: c.name.as_str().into(),
        task_id: task,
        task_index: task - c.tasks.start,
        parallelism: c.parallelism(),
        outputs: c.stream_decls().into(),
        downstream: downstream.into(),
    };
    (context, topology.task_ext(c))
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
    let (rate, unit) = match spec.rate {
        ThrottleRate::TuplesPerSec(r) => (r, ThrottleUnit::Tuples),
        ThrottleRate::BytesPerSec(r) => (r, ThrottleUnit::Bytes),
    };
    (Throttler::new(spec.mode, rate, Duration::from_millis(spec.period_millis)), unit)
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
