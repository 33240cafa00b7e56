//! [`TopologyHandle`]: what other parts of the host hold while a topology
//! runs, to watch it and steer it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::plan::Wiring;
use super::reload::{ReloadCounts, ReloadReport, ReloadRequest};
use crate::control::{Control, RunControl, RunError, RunState};
use crate::metrics::{Report, StatField, TaskStats};
use crate::topology::{Kind, Topology};

/// Why a steering request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandleError {
    /// No component has that name.
    #[error("no component named {name:?}{}", suggestion.as_ref().map(|s| format!("; did you mean {s:?}?")).unwrap_or_default())]
    UnknownComponent {
        /// The name asked for.
        name: String,
        /// The closest existing name, if one is close.
        suggestion: Option<String>,
    },
    /// The component is a bolt; only spouts are activated and deactivated.
    #[error("{0:?} is a bolt; only spouts can be activated or deactivated")]
    NotASpout(String),
    /// The topology is draining or stopped: spouts stay deactivated.
    #[error("the topology is draining; spouts can no longer be activated")]
    Draining,
}

/// A cloneable, thread-safe handle on a running topology.
#[derive(Debug, Clone)]
pub struct TopologyHandle {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    live: Arc<LiveCell>,
    run: Arc<RunControl>,
    started: Instant,
    reloads: ReloadCounts,
    reloader: OnceLock<Sender<ReloadRequest>>,
    /// Threads started by live reloads (new tasks), joined at stop.
    late_threads: Mutex<Vec<JoinHandle<()>>>,
    /// Held by each checkpoint and by each live reload: they never overlap.
    checkpoint_gate: Arc<Mutex<()>>,
    /// Durable state's figures (`[state]` topologies).
    checkpoints: OnceLock<Durable>,
}

/// A durable topology's checkpoint figures and its last-checkpoint request.
#[derive(Debug)]
pub struct Durable {
    /// The coordinator's counters.
    pub stats: Arc<crate::state::CheckpointStats>,
    /// The backend's name (`memory` or `alias::Name`).
    pub backend: String,
    /// The namespace.
    pub namespace: String,
    /// Asks the coordinator for the last checkpoint (once the drain is over).
    pub last: Mutex<Option<Sender<Sender<()>>>>,
}

/// The running topology as it is now: its components and tasks, and every
/// queue by task id. A live reload that adds or replaces tasks installs a
/// new one; readers take a snapshot ([`LiveCell::get`]), never per tuple.
#[derive(Debug)]
pub struct Live {
    /// The topology (components keep their task ids across reloads).
    pub topology: Arc<Topology>,
    /// Every queue and counter, by task id.
    pub wiring: Wiring,
}

/// The shared, replaceable [`Live`].
#[derive(Debug)]
pub struct LiveCell {
    live: RwLock<Arc<Live>>,
}

impl LiveCell {
    /// A cell holding `topology` wired as `wiring`.
    pub fn new(topology: Arc<Topology>, wiring: Wiring) -> Self {
        Self { live: RwLock::new(Arc::new(Live { topology, wiring })) }
    }

    /// A snapshot.
    pub fn get(&self) -> Arc<Live> {
        match self.live.read() {
            Ok(live) => live.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Installs a new state.
    pub fn set(&self, live: Live) {
        let live = Arc::new(live);
        match self.live.write() {
            Ok(mut slot) => *slot = live,
            Err(poisoned) => *poisoned.into_inner() = live,
        }
    }
}

impl TopologyHandle {
    pub(super) fn new(live: Arc<LiveCell>, run: Arc<RunControl>, started: Instant) -> Self {
        let (reloads, reloader) = (ReloadCounts::default(), OnceLock::new());
        Self {
            inner: Arc::new(Shared {
                live,
                run,
                started,
                reloads,
                reloader,
                late_threads: Mutex::default(),
                checkpoint_gate: Arc::default(),
                checkpoints: OnceLock::new(),
            }),
        }
    }

    /// Held by each checkpoint and each live reload, so they never overlap.
    pub fn checkpoint_gate(&self) -> Arc<Mutex<()>> {
        self.inner.checkpoint_gate.clone()
    }

    /// Durable state's figures, when the topology has `[state]`.
    pub fn durable(&self) -> Option<&Durable> {
        self.inner.checkpoints.get()
    }

    pub(super) fn set_durable(&self, durable: Durable) {
        let _ = self.inner.checkpoints.set(durable);
    }

    /// The topology as it runs now.
    pub fn topology(&self) -> Arc<Topology> {
        self.inner.live.get().topology.clone()
    }

    /// The live topology and its queues.
    pub fn live(&self) -> Arc<Live> {
        self.inner.live.get()
    }

    /// Installs the topology and queues a live reload built: the one
    /// current topology, which the next reload compares against.
    pub(super) fn install(&self, live: Live) {
        self.inner.live.set(live);
    }

    /// Keeps a thread a live reload started, to join it at stop.
    pub(super) fn adopt_thread(&self, thread: JoinHandle<()>) {
        if let Ok(mut threads) = self.inner.late_threads.lock() {
            threads.push(thread);
        }
    }

    /// The threads live reloads started.
    pub(super) fn take_late_threads(&self) -> Vec<JoinHandle<()>> {
        self.inner.late_threads.lock().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default()
    }

    /// The run state shared with every thread.
    pub fn run(&self) -> &RunControl {
        &self.inner.run
    }

    /// The run state, to hand to a thread a live reload starts.
    pub(super) fn run_shared(&self) -> Arc<RunControl> {
        self.inner.run.clone()
    }

    /// The current phase.
    pub fn state(&self) -> RunState {
        self.inner.run.state()
    }

    /// The first fatal error, if the run has failed.
    pub fn fatal(&self) -> Option<RunError> {
        self.inner.run.fatal()
    }

    /// Time since start.
    pub fn elapsed(&self) -> Duration {
        self.inner.started.elapsed()
    }

    /// The published counters of task `task`.
    ///
    /// # Panics
    /// When `task` is not a task of the topology.
    pub fn task_stats(&self, task: u32) -> Arc<TaskStats> {
        self.inner.live.get().wiring.stats[task as usize].clone()
    }

    /// Batches waiting in task `task`'s receive queue (0 for spouts).
    pub fn queue_depth(&self, task: u32) -> usize {
        let live = self.inner.live.get();
        live.wiring.data.get(task as usize).and_then(Option::as_ref).map_or(0, Sender::len)
    }

    /// A snapshot of every component's published figures.
    pub fn report(&self) -> Report {
        let live = self.inner.live.get();
        let depths: Vec<u64> =
            live.wiring.data.iter().map(|q| q.as_ref().map_or(0, |q| q.len() as u64)).collect();
        Report::collect(&live.topology, &live.wiring.stats, &depths, self.elapsed())
    }

    /// Deactivates the spouts of `component`, or every spout: `deactivate`
    /// is called once on each task and `next_tuple` no more, while acks and
    /// timeouts keep flowing. Returns the tasks told.
    ///
    /// # Errors
    /// An unknown component, or a bolt.
    pub fn deactivate(&self, component: Option<&str>) -> Result<usize, HandleError> {
        self.tell_spouts(component, || Control::Deactivate)
    }

    /// Activates the spouts of `component`, or every spout, again.
    ///
    /// # Errors
    /// An unknown component, a bolt, or a topology already draining.
    pub fn activate(&self, component: Option<&str>) -> Result<usize, HandleError> {
        if self.state() != RunState::Running {
            return Err(HandleError::Draining);
        }
        self.tell_spouts(component, || Control::Activate)
    }

    /// Starts the graceful drain (see the runtime module doc). The thread
    /// that owns the [`RunningTopology`](super::RunningTopology) sees it and
    /// stops the topology.
    pub fn drain(&self) {
        self.inner.run.advance(RunState::Draining);
    }

    /// The reload counts.
    pub fn reload_counts(&self) -> &ReloadCounts {
        &self.inner.reloads
    }

    /// `(succeeded, failed)` reloads so far: applied in full (or nothing to
    /// change), and rolled back. See [`TopologyHandle::partial_reloads`].
    pub fn reloads(&self) -> (u64, u64) {
        let c = &self.inner.reloads;
        (c.reloads.load(Ordering::Relaxed), c.failed.load(Ordering::Relaxed))
    }

    /// Reloads that committed but were only partly applied.
    pub fn partial_reloads(&self) -> u64 {
        self.inner.reloads.partial.load(Ordering::Relaxed)
    }

    /// Registers the reload thread (once).
    pub(super) fn set_reloader(&self, requests: Sender<ReloadRequest>) {
        let _ = self.inner.reloader.set(requests);
    }

    /// Asks for a reload; `None` when reloading is not set up for this run
    /// (the topology was not started from a file) or its thread has ended.
    /// The receiver gets the reload's report.
    pub fn request_reload(
        &self,
        trigger: &'static str,
    ) -> Option<crossbeam_channel::Receiver<ReloadReport>> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let request = ReloadRequest { trigger, reply: Some(tx) };
        self.inner.reloader.get()?.send(request).ok()?;
        Some(rx)
    }

    /// Sends `message` to task `task`; false when the task has ended.
    pub(super) fn send_control(&self, task: u32, message: Control) -> bool {
        let live = self.inner.live.get();
        live.wiring.controls.get(task as usize).is_some_and(|c| c.send(message).is_ok())
    }

    /// Waits until `at`, or until the drain begins, whichever is first;
    /// true when the drain has begun.
    pub fn wait_until(&self, at: Instant) -> bool {
        self.inner.run.canceler.wait_until(at)
    }

    fn tell_spouts(
        &self,
        component: Option<&str>,
        message: impl Fn() -> Control,
    ) -> Result<usize, HandleError> {
        let live = self.inner.live.get();
        let topology = &live.topology;
        let chosen: Vec<_> = match component {
            None => topology.components.iter().filter(|c| c.kind == Kind::Spout).collect(),
            Some(name) => {
                let c = topology.components.iter().find(|c| c.name == name).ok_or_else(|| {
                    HandleError::UnknownComponent {
                        name: name.to_owned(),
                        suggestion: crate::config::suggest(
                            name,
                            topology.components.iter().map(|c| c.name.as_str()),
                        ),
                    }
                })?;
                if c.kind != Kind::Spout {
                    return Err(HandleError::NotASpout(name.to_owned()));
                }
                vec![c]
            }
        };
        let mut told = 0;
        for c in chosen {
            for t in c.tasks.clone() {
                // A task that already ended has dropped its receiver; nothing to tell.
                if live.wiring.controls[t as usize].send(message()).is_ok() {
                    told += 1;
                }
            }
        }
        Ok(told)
    }

    /// The sum of a published counter over the tasks of one kind (or all).
    pub(super) fn sum(&self, kind: Option<Kind>, field: StatField) -> u64 {
        let live = self.inner.live.get();
        live.topology
            .components
            .iter()
            .filter(|c| kind.is_none_or(|k| c.kind == k))
            .flat_map(|c| c.counted_tasks())
            .map(|t| live.wiring.stats[t as usize].get(field))
            .sum()
    }

    /// A signature of the topology's progress; equal twice in a row with no
    /// work in between means drained.
    pub(super) fn drained_signature(&self) -> Option<(u64, u64)> {
        let active = self.sum(Some(Kind::Spout), StatField::Active);
        let pending = self.sum(Some(Kind::Spout), StatField::Pending);
        let unsent = self.sum(None, StatField::Unsent);
        let transferred = self.sum(None, StatField::Transferred);
        let received = self.sum(Some(Kind::Bolt), StatField::Received);
        let queued: usize = self.live().wiring.data.iter().flatten().map(Sender::len).sum();
        (active == 0 && pending == 0 && unsent == 0 && queued == 0 && transferred == received)
            .then_some((transferred, self.sum(Some(Kind::Bolt), StatField::Executed)))
    }

    /// The components that still hold work, with how much: queued batches
    /// (bolts) and pending trees (spouts). "nothing visible" if none does.
    pub(super) fn backlog_summary(&self) -> String {
        let mut parts = Vec::new();
        let live = self.inner.live.get();
        for c in &live.topology.components {
            let tasks = c.tasks.clone();
            let queued: usize = tasks
                .clone()
                .filter_map(|t| live.wiring.data[t as usize].as_ref())
                .map(Sender::len)
                .sum();
            let pending: u64 =
                tasks.map(|t| live.wiring.stats[t as usize].get(StatField::Pending)).sum();
            if queued > 0 {
                parts.push(format!("{:?}: {queued} queued batches", c.name));
            }
            if pending > 0 {
                parts.push(format!("{:?}: {pending} pending trees", c.name));
            }
        }
        if parts.is_empty() {
            "nothing visible".to_owned()
        } else {
            parts.join(", ")
        }
    }
}
