//! [`Plan`]: the queues, executors and ackers of a topology, built but not
//! started.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use squall_plugin_api::abi::{TaskContext, TaskExt};
use squall_plugin_api::{ComponentTasks, InputStream};

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
use crate::executor::chain::{Chain, Task};
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
    /// Every queue by task id, and the published counters.
    pub wiring: Wiring,
    /// One executor per spout task.
    pub spouts: Vec<SpoutExecutor>,
    /// One executor per bolt task.
    pub bolts: Vec<BoltExecutor>,
    /// The acker tasks (`acker_executors` of them).
    pub ackers: Vec<AckerTask>,
    /// Timeout ticks and tick tuples.
    pub system: SystemTask,
    /// Where tasks report their checkpoint parts (`[state]` topologies).
    pub reports: Option<Receiver<crate::state::Report>>,
}

/// The sending ends of every queue of a running topology, by task id, and
/// every task's published counters. A live reload that adds tasks grows it
/// (tasks are never renumbered; a retired task keeps its slot).
#[derive(Debug, Clone)]
pub struct Wiring {
    /// The data queue of each bolt task (`None` for spouts).
    pub data: Vec<Option<Sender<Batch>>>,
    /// The control queue of each task.
    pub controls: Vec<Sender<Control>>,
    /// The acker tasks' queues.
    pub ackers: Vec<Sender<AckerInput>>,
    /// Where consumers hand emptied batches back to each producer task.
    pub recycle: Vec<Sender<Batch>>,
    /// Byte budgets of the bolt tasks' queues (`receive_buffer_bytes`).
    pub queue_bytes: Vec<Option<Arc<QueueBytes>>>,
    /// Published counters of each task.
    pub stats: Vec<Arc<TaskStats>>,
    /// The tap point of each task (`squall tap`).
    pub taps: Vec<Arc<crate::tap::TapPoint>>,
    /// Where tasks report their part of each checkpoint (durable state;
    /// `None`: the topology has no `[state]`).
    pub checkpoints: Option<Sender<crate::state::Report>>,
}

/// The receiving ends of one task's queues, before its executor takes them.
#[derive(Debug)]
pub struct TaskEnds {
    pub(super) data: Option<Receiver<Batch>>,
    pub(super) control: Receiver<Control>,
    /// The sending end of `control`, for a bolt's own wake handle.
    pub(super) control_tx: Sender<Control>,
    pub(super) recycled: Receiver<Batch>,
}

/// The acker queues' receiving ends.
type AckerEnds = Vec<Receiver<AckerInput>>;

impl Wiring {
    /// Every queue of `topology`: a bounded data channel per bolt task
    /// (`receive_buffer_size / producer_batch_size` batches), an unbounded
    /// control channel per task, an unbounded channel per acker, and a small
    /// recycling channel per task.
    pub(super) fn new(topology: &Topology) -> (Self, Vec<Option<TaskEnds>>, AckerEnds) {
        let (ackers, acker_ends) =
            (0..topology.settings.acker_executors).map(|_| unbounded()).unzip();
        let mut wiring = Self {
            data: Vec::new(),
            controls: Vec::new(),
            ackers,
            recycle: Vec::new(),
            queue_bytes: Vec::new(),
            stats: Vec::new(),
            taps: Vec::new(),
            checkpoints: None,
        };
        let all: Vec<u32> = (0..topology.task_count).collect();
        let ends = wiring.grow(topology, &all);
        (wiring, ends, acker_ends)
    }

    /// Adds the queues of `tasks` (task ids of `topology`, past the current
    /// end) and returns their receiving ends, by task id.
    pub fn grow(&mut self, topology: &Topology, tasks: &[u32]) -> Vec<Option<TaskEnds>> {
        let settings = &topology.settings;
        let capacity = (settings.receive_buffer_size / settings.producer_batch_size.max(1)).max(1);
        let n = topology.task_count as usize;
        let mut ends: Vec<Option<TaskEnds>> = (0..n).map(|_| None).collect();
        let mut bolt = vec![false; n];
        for c in topology.components.iter().filter(|c| c.kind == Kind::Bolt) {
            for t in c.tasks.clone() {
                bolt[t as usize] = true;
            }
        }
        while self.controls.len() < n {
            // Filled below for the tasks built here; any other new slot stays closed.
            self.data.push(None);
            self.controls.push(bounded(0).0);
            self.recycle.push(bounded(0).0);
            self.queue_bytes.push(None);
            self.stats.push(Arc::new(TaskStats::default()));
            self.taps.push(Arc::default());
        }
        for &t in tasks {
            let t = t as usize;
            let data = bolt[t].then(|| bounded(capacity));
            let (control_tx, control) = unbounded();
            // Emptied batches go back to their producer (bounded: extras are freed).
            let (recycle_tx, recycled) = bounded(RECYCLED_BATCHES);
            self.data[t] = data.as_ref().map(|(tx, _)| tx.clone());
            self.controls[t] = control_tx.clone();
            self.recycle[t] = recycle_tx;
            self.queue_bytes[t] = (settings.receive_buffer_bytes > 0 && bolt[t])
                .then(|| Arc::new(QueueBytes::new(settings.receive_buffer_bytes)));
            let data = data.map(|(_, rx)| rx);
            ends[t] = Some(TaskEnds { data, control, control_tx, recycled });
        }
        ends
    }
}

/// A built executor of either kind.
pub enum Executor {
    /// A spout task.
    Spout(Box<SpoutExecutor>),
    /// A bolt task.
    Bolt(Box<BoltExecutor>),
}

/// Builds the executor of task `task` of `c` around its instance.
///
/// # Panics
/// When `instances` lacks the task's instance or waits: they are built for
/// every task this is called for.
#[allow(clippy::too_many_arguments)] // the parts of a task, each from its own owner
pub fn task_executor(
    topology: &Topology,
    c: &Component,
    task: u32,
    instances: &mut Instances,
    wiring: &Wiring,
    ends: TaskEnds,
    sources: &Arc<SourceTable>,
    run: &Arc<RunControl>,
) -> Executor {
    let t = task as usize;
    let parts = TaskParts { topology, c, task, wiring, sources };
    let waits = instances.waits[t].take().expect("instantiate builds every wait");
    let throttle = c.throttle.as_ref().map(throttler);
    let count_bytes = matches!(throttle, Some((_, ThrottleUnit::Bytes)));
    let transfer = parts.transfer(&mut instances.groupings[t], ends.recycled, count_bytes);
    let mut core = parts.core(transfer, ends.control, waits, run);
    core.checkpoints = wiring.checkpoints.clone();
    match c.kind {
        Kind::Spout => {
            let spout = instances.spouts[t].take().expect("a spout per spout task");
            let options = SpoutOptions {
                max_pending: c.max_spout_pending.map(|m| m as usize),
                recvq_skips: topology.settings.spout_recvq_skips,
                timeout_buckets: topology.settings.timeout_buckets as usize,
                throttle,
            };
            Executor::Spout(Box::new(SpoutExecutor::new(core, spout, options)))
        }
        Kind::Bolt => {
            let bolt = instances.bolts[t].take().expect("a bolt per bolt task");
            let receive = ends.data.expect("bolts have a receive queue");
            let inputs = parts.bolt_inputs(receive, instances);
            let executor = BoltExecutor::new(core, bolt, inputs).woken_by(ends.control_tx);
            Executor::Bolt(Box::new(executor))
        }
    }
}

/// What building the executor of one task reads: the topology, the task's
/// component and id, the wiring and the source table.
struct TaskParts<'p> {
    topology: &'p Topology,
    c: &'p Component,
    task: u32,
    wiring: &'p Wiring,
    sources: &'p Arc<SourceTable>,
}

impl TaskParts<'_> {
    /// The task's transfer: its routes through `groupings`, the queues and
    /// the batch settings; `count_bytes` when a byte throttle needs sizes.
    fn transfer(
        &self,
        groupings: &mut Vec<CustomInstance>,
        recycled: Receiver<Batch>,
        count_bytes: bool,
    ) -> Transfer {
        let (topology, wiring) = (self.topology, self.wiring);
        let wiring = TransferWiring {
            batch_size: topology.settings.producer_batch_size,
            flush_interval: Duration::from_millis(topology.settings.batch_flush_interval_millis),
            streams: routes(self.c, self.task, groupings),
            default_stream: self.c.default_stream,
            queues: wiring.data.clone(),
            ackers: wiring.ackers.clone(),
            recycled: Some(recycled),
            count_bytes,
            queue_bytes: wiring.queue_bytes.clone(),
            tap: wiring.taps[self.task as usize].clone(),
        };
        Transfer::new(TaskId(self.task), wiring)
    }

    /// The task's core around `transfer`, its `control` queue and `waits`.
    fn core(
        &self,
        transfer: Transfer,
        control: Receiver<Control>,
        waits: crate::executor::core::Waits,
        run: &Arc<RunControl>,
    ) -> TaskCore {
        let (topology, c, task) = (self.topology, self.c, self.task);
        TaskCore::new(
            TaskName { kind: c.kind, component: c.name.clone(), task: TaskId(task) },
            context(topology, c, task),
            c.factory,
            c.config.clone(),
            transfer,
            control,
            waits,
            self.wiring.stats[task as usize].clone(),
            run.clone(),
            RestartPolicy::from_settings(&topology.settings),
        )
    }

    /// A bolt task's inputs: its `receive` queue, the throttles on its
    /// edges, and its window (durable, with what `instances` restored for
    /// it, when the topology has state).
    fn bolt_inputs(&self, receive: Receiver<Batch>, instances: &mut Instances) -> BoltInputs {
        let (topology, c, task) = (self.topology, self.c, self.task);
        let (edge_throttle, throttles) = edge_throttles(topology, c);
        BoltInputs {
            auto_ack: c.auto_ack,
            receive,
            sources: self.sources.clone(),
            edge_throttle,
            throttles,
            recycle: self.wiring.recycle.clone(),
            queue_bytes: self.wiring.queue_bytes[task as usize].clone(),
            window: c.window.as_ref().map(|w| self.window(w, instances)),
            upstream: upstream_tasks(topology, c, task),
        }
    }

    /// The state of the bolt's `window`; made durable when the topology has
    /// state.
    fn window(&self, w: &crate::config::WindowDecl, instances: &mut Instances) -> Box<WindowState> {
        let (c, task, sources) = (self.c, self.task, &**self.sources);
        let outputs: Vec<&str> = c.outputs.iter().map(|s| s.decl.name.as_str()).collect();
        let simulated = self.topology.simulated.clone();
        let mut window = Box::new(WindowState::new(w, sources, &outputs, simulated));
        if self.topology.state.is_some() {
            let label = format!("{} task {task}", c.name);
            let restored = instances.windows.remove(&task);
            window.make_durable(&label, task - c.tasks.start, restored, sources);
        }
        window
    }
}

impl Plan {
    /// Builds every queue and executor of `topology` around `instances`.
    pub fn new(topology: Topology, mut instances: Instances) -> Self {
        let topology = Arc::new(topology);
        let run = Arc::new(RunControl::default());
        let (mut wiring, mut ends, acker_ends) = Wiring::new(&topology);
        let reports = topology.state.as_ref().map(|_| {
            let (tx, rx) = unbounded();
            wiring.checkpoints = Some(tx);
            rx
        });
        let sources = Arc::new(source_table(&topology));
        let (mut spouts, mut bolts) = (Vec::new(), Vec::new());
        for c in &topology.components {
            for task in c.tasks.clone() {
                let task_ends = ends[task as usize].take().expect("queues for every task");
                let built = task_executor(
                    &topology,
                    c,
                    task,
                    &mut instances,
                    &wiring,
                    task_ends,
                    &sources,
                    &run,
                );
                match built {
                    Executor::Spout(s) => spouts.push(*s),
                    Executor::Bolt(b) => bolts.push(*b),
                }
            }
        }
        let ackers = acker_tasks(&topology, acker_ends, &wiring, &run);
        let system = SystemTask::new(&topology, run.clone(), wiring.ackers.clone());
        Self { topology, run, wiring, spouts, bolts, ackers, system, reports }
    }

    /// Starts one thread per task (a chain's tasks share one:
    /// `config::chain`), one per acker, and the system thread.
    ///
    /// # Errors
    /// When a thread cannot be spawned; the threads already started are
    /// stopped first.
    pub fn spawn(self) -> Result<RunningTopology, StartError> {
        self.spawn_with(None)
    }

    /// [`spawn`](Self::spawn), with durable state's coordinator (built
    /// around the backend a restore opened) on a thread of its own.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn).
    pub fn spawn_with(
        self,
        durable: Option<super::DurableStart>,
    ) -> Result<RunningTopology, StartError> {
        let Plan { topology, run, wiring, spouts, bolts, ackers, system, reports } = self;
        let chains = chains(&topology, spouts, bolts);
        let live = Arc::new(super::handle::LiveCell::new(topology, wiring));
        wake_on_state_change(&run, &live);
        let mut threads = Vec::new();
        let spawned = (|| {
            for chain in chains {
                threads.extend(spawn_chain(chain, &run)?);
            }
            for (i, acker) in ackers.into_iter().enumerate() {
                threads.push(super::spawn(format!("__acker-{i}"), &run, move || acker.run())?);
            }
            let cell = live.clone();
            threads.push(super::spawn("__system".into(), &run, move || system.run(&cell))?);
            Ok::<_, std::io::Error>(())
        })();
        let running = RunningTopology::new(live.clone(), run.clone(), threads);
        let spawned = spawned.and_then(|()| match (durable, reports) {
            (Some(durable), Some(reports)) => {
                let thread = super::start_checkpoints(&running, durable, reports, live, &run)?;
                running.handle().adopt_thread(thread);
                Ok(())
            }
            _ => Ok(()),
        });
        match spawned {
            Ok(()) => Ok(running),
            Err(e) => {
                let _ = running.stop();
                Err(StartError::Spawn(e))
            }
        }
    }
}

/// One acker task per acker queue in `ends`, replying to the spouts'
/// control queues.
fn acker_tasks(
    topology: &Topology,
    ends: AckerEnds,
    wiring: &Wiring,
    run: &Arc<RunControl>,
) -> Vec<AckerTask> {
    ends.into_iter()
        .map(|input| AckerTask {
            ledger: AckLedger::new(ACKER_BUCKETS),
            input,
            spouts: wiring.controls.clone(),
            run: run.clone(),
            spin: std::time::Duration::from_micros(topology.settings.acker_spin_micros),
        })
        .collect()
}

/// Makes a change of run state wake every task and acker blocked on its
/// queues (they block for up to a second when idle). Weak: the run control
/// must not keep the wiring alive.
fn wake_on_state_change(run: &RunControl, live: &Arc<super::handle::LiveCell>) {
    let cell = Arc::downgrade(live);
    run.set_waker(crate::control::StateWaker(Box::new(move || {
        let Some(live) = cell.upgrade() else { return };
        let live = live.get();
        for control in &live.wiring.controls {
            let _ = control.send(crate::control::Control::Wake);
        }
        for acker in &live.wiring.ackers {
            let _ = acker.send(crate::acker::msg::AckerInput::Wake);
        }
    })));
}

/// Starts the thread of one group of [`chains`]: a task alone runs its
/// own loop, a chain runs its tasks in turn ([`Chain::run`]); none for an
/// empty group.
fn spawn_chain(
    chain: Vec<Task>,
    run: &Arc<RunControl>,
) -> std::io::Result<Option<std::thread::JoinHandle<()>>> {
    if chain.is_empty() {
        return Ok(None);
    }
    let chain = Chain::new(chain);
    super::spawn(chain.thread_name(), run, move || chain.run()).map(Some)
}

/// The executors grouped by the thread they run on, each group head first
/// (a task alone is a group of one): a chained bolt's task `k` joins the
/// group of its upstream's task `k` (`config::chain`).
fn chains(
    topology: &Topology,
    spouts: Vec<SpoutExecutor>,
    bolts: Vec<BoltExecutor>,
) -> Vec<Vec<Task>> {
    // Each task's head and its depth below it.
    let mut place: Vec<(u32, u32)> = (0..topology.task_count).map(|t| (t, 0)).collect();
    for c in &topology.components {
        for (k, t) in c.tasks.clone().enumerate() {
            let (mut at, mut head, mut depth) = (c, t, 0);
            while let Some(up) = at.chain_from.and_then(|i| topology.components.get(i)) {
                let Some(task) = up.tasks.clone().nth(k) else { break };
                (at, head, depth) = (up, task, depth + 1);
            }
            place[t as usize] = (head, depth);
        }
    }
    let mut groups: std::collections::BTreeMap<u32, Vec<(u32, Task)>> = Default::default();
    let tasks = spouts
        .into_iter()
        .map(|s| (s.context().task_id, Task::Spout(Box::new(s))))
        .chain(bolts.into_iter().map(|b| (b.context().task_id, Task::Bolt(Box::new(b)))));
    for (t, task) in tasks {
        let (head, depth) = place.get(t as usize).copied().unwrap_or((t, 0));
        groups.entry(head).or_default().push((depth, task));
    }
    groups
        .into_values()
        .map(|mut g| {
            g.sort_by_key(|(depth, _)| *depth);
            g.into_iter().map(|(_, task)| task).collect()
        })
        .collect()
}

/// The tasks that send to task `task` of `c`: every task of each
/// component with a stream `c` subscribes to, or, on a pairwise (chained)
/// edge, only the sender's task of the same index.
fn upstream_tasks(topology: &Topology, c: &Component, task: u32) -> Vec<u32> {
    let Some(index) = topology.components.iter().position(|x| x.name == c.name) else {
        return Vec::new();
    };
    let k = task.saturating_sub(c.tasks.start);
    let mut tasks: Vec<u32> = Vec::new();
    for p in &topology.components {
        let subs = p.outputs.iter().flat_map(|s| &s.subscribers).filter(|s| s.component == index);
        for sub in subs {
            match p.tasks.clone().nth(k as usize).filter(|_| sub.pairwise) {
                Some(peer) => tasks.push(peer),
                None => tasks.extend(p.tasks.clone()),
            }
        }
    }
    tasks.sort_unstable();
    tasks.dedup();
    tasks
}

/// One router per subscriber of each output stream, round robin seeded by the task.
pub(super) fn routes(
    c: &Component,
    task: u32,
    custom: &mut Vec<CustomInstance>,
) -> Vec<StreamRoutes> {
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
                    let k = task.saturating_sub(c.tasks.start) as usize;
                    let tasks = match sub.tasks.get(k).filter(|_| sub.pairwise) {
                        Some(&peer) => vec![peer],
                        None => sub.tasks.clone(),
                    };
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

/// Which component each task belongs to, and every component's streams.
pub fn source_table(topology: &Topology) -> SourceTable {
    let mut table = SourceTable {
        task_component: vec![0; topology.task_count as usize],
        components: Vec::new(),
    };
    for (i, c) in topology.components.iter().enumerate() {
        for t in c.tasks.clone() {
            table.task_component[t as usize] = i as u32;
        }
        let streams = c
            .outputs
            .iter()
            .map(|s| InputStream { name: s.decl.name.clone(), fields: s.decl.fields.clone() })
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Loc, ThrottleMode};
    use crate::topology::fixtures::{bolt, component, linked, topology};

    #[test]
    fn every_bolt_task_gets_a_queue_of_batches_and_every_task_a_control_queue() {
        let mut t = topology();
        t.settings.receive_buffer_size = 64;
        t.settings.producer_batch_size = 8;
        t.settings.acker_executors = 2;
        let (wiring, ends, ackers) = Wiring::new(&t);
        assert!(wiring.data[0].is_none(), "a spout receives no data");
        let capacities: Vec<Option<usize>> =
            wiring.data[1..].iter().map(|q| q.as_ref().and_then(Sender::capacity)).collect();
        assert_eq!(capacities, [Some(8), Some(8)], "64 tuples in batches of 8");
        assert_eq!((wiring.controls.len(), wiring.stats.len(), wiring.recycle.len()), (3, 3, 3));
        assert_eq!((wiring.ackers.len(), ackers.len()), (2, 2));
        let budgets: Vec<bool> = wiring.queue_bytes.iter().map(Option::is_some).collect();
        assert_eq!(budgets, [false, true, true], "a byte budget by default, on bolt queues");
        assert!(ends.iter().all(Option::is_some));
        assert!(ends[0].as_ref().is_some_and(|e| e.data.is_none()));
        assert!(ends[1].as_ref().is_some_and(|e| e.data.is_some()));
        // What a task's control queue carries reaches the task's end.
        wiring.controls[2].send(Control::Wake).expect("open");
        assert!(matches!(ends[2].as_ref().map(|e| e.control.try_recv()), Some(Ok(Control::Wake))));
    }

    #[test]
    fn a_byte_budget_applies_to_bolt_queues_only() {
        let mut t = topology();
        t.settings.receive_buffer_bytes = 4096;
        let (wiring, _, _) = Wiring::new(&t);
        let budgets: Vec<bool> = wiring.queue_bytes.iter().map(Option::is_some).collect();
        assert_eq!(budgets, [false, true, true]);
        t.settings.receive_buffer_bytes = 0;
        let (wiring, _, _) = Wiring::new(&t);
        assert!(wiring.queue_bytes.iter().all(Option::is_none), "0 turns it off");
    }

    #[test]
    fn growing_adds_the_new_tasks_queues_and_leaves_the_running_ones_alone() {
        let old = topology();
        let (mut wiring, _ends, _) = Wiring::new(&old);
        let before = wiring.clone();
        let grown = linked(vec![
            component("s", Kind::Spout, 0..1),
            bolt("b", 1..3, &[0]),
            bolt("c", 3..5, &[1]),
        ]);
        let ends = wiring.grow(&grown, &[3, 4]);
        assert_eq!(wiring.controls.len(), 5);
        for (t, end) in ends.iter().enumerate().take(3) {
            assert!(
                wiring.controls[t].same_channel(&before.controls[t]),
                "task {t} keeps its queue"
            );
            assert!(end.is_none(), "task {t} runs already: no new ends");
        }
        assert!(wiring.data[3].is_some() && wiring.data[4].is_some());
        assert!(ends[3].is_some() && ends[4].is_some());
        assert_eq!(wiring.stats.len(), 5);
    }

    #[test]
    fn the_source_table_maps_every_task_to_its_component_and_streams() {
        let t = linked(vec![
            component("s", Kind::Spout, 0..1),
            bolt("b", 1..3, &[0]),
            bolt("c", 3..4, &[1]),
        ]);
        let table = source_table(&t);
        assert_eq!(table.task_component, [0, 1, 1, 2]);
        let names: Vec<&str> = table.components.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["s", "b", "c"]);
        assert_eq!(table.components[1].1[0].name, "default");
    }

    #[test]
    fn only_throttled_inputs_get_a_throttler_indexed_by_source_and_stream() {
        let mut c = bolt("c", 3..4, &[0, 1]);
        c.inputs[1].throttle = Some(ThrottleSpec {
            mode: ThrottleMode::Smooth,
            rate: ThrottleRate::TuplesPerSec(100),
            period_millis: 500,
            loc: Loc::new(7, 1),
        });
        let t = linked(vec![component("s", Kind::Spout, 0..1), bolt("b", 1..3, &[0]), c]);
        let (table, throttles) = edge_throttles(&t, &t.components[2]);
        assert_eq!(table, [vec![None], vec![Some(0)], vec![None]]);
        assert_eq!(throttles.len(), 1);
        assert!(matches!(throttles[0].1, ThrottleUnit::Tuples));
    }

    #[test]
    fn a_task_context_names_its_place_and_each_downstream_component_once() {
        let mut s = component("s", Kind::Spout, 0..1);
        s.outputs.push(s.outputs[0].clone());
        s.outputs[1].decl.name = "other".into();
        let mut b = bolt("b", 1..4, &[0, 0]);
        b.inputs[1].stream = 1;
        let t = linked(vec![s, b]);
        let (spout, _) = context(&t, &t.components[0], 0);
        assert_eq!((spout.task_id, spout.task_index, spout.parallelism), (0, 0, 1));
        let downstream: Vec<(&str, Vec<u32>)> =
            spout.downstream.iter().map(|d| (d.component.as_str(), d.tasks.to_vec())).collect();
        assert_eq!(downstream, [("b", vec![1, 2, 3])], "two streams, one component");
        assert_eq!(spout.outputs.len(), 2);
        let (bolt, _) = context(&t, &t.components[1], 3);
        assert_eq!((bolt.component.as_str(), bolt.task_index, bolt.parallelism), ("b", 2, 3));
        assert!(bolt.downstream.is_empty());
    }
}
