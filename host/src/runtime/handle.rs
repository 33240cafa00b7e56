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
    /// Attaches taps (`squall tap`).
    taps: crate::tap::TapHub,
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

impl Durable {
    /// The figures as `GET /api/v1/topology` and the `--json` summary give
    /// them (`durable_state`).
    pub fn to_json(&self) -> serde_json::Value {
        use std::sync::atomic::Ordering::Relaxed;
        let s = &self.stats;
        let ms = |micros: u64| micros as f64 / 1e3;
        serde_json::json!({
            "backend": self.backend,
            "namespace": self.namespace,
            "last_committed": s.last_committed.load(Relaxed),
            "committed": s.committed.load(Relaxed),
            "failed": s.failed.load(Relaxed),
            "aborted": s.aborted.load(Relaxed),
            "fenced": s.fenced.load(Relaxed),
            "last_duration_ms": ms(s.last_micros.load(Relaxed)),
            "last_records": s.last_records.load(Relaxed),
            "last_bytes": s.last_bytes.load(Relaxed),
            "duration_p50_ms": s.duration_quantile(0.5).map(ms),
            "duration_p99_ms": s.duration_quantile(0.99).map(ms),
            "restored_records": s.restored_records.load(Relaxed),
            "restore_secs": s.restore_micros.load(Relaxed) as f64 / 1e6,
            "last_error": s.last_error.lock().ok().and_then(|e| e.clone()),
        })
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
                taps: crate::tap::TapHub::default(),
            }),
        }
    }

    /// Taps attached now, and samples sampled and dropped by every tap so
    /// far (see [`crate::tap::TapHub::totals`]).
    pub fn tap_totals(&self) -> (u64, u64, u64) {
        self.inner.taps.totals()
    }

    /// Attaches a tap to every task of `request.component` (see
    /// [`crate::tap`]); also returns the field names of each stream it can
    /// sample (outputs: the component's streams; inputs: those of the
    /// streams it subscribes to, as `(stream, fields)`). Tasks a live
    /// reload adds later are tapped as the reload installs them.
    ///
    /// # Errors
    /// An unknown component or stream, or the inputs of a spout (one line,
    /// naming what exists).
    pub fn tap(
        &self,
        request: &crate::tap::TapRequest,
    ) -> Result<(crate::tap::Tap, crate::tap::StreamFields), crate::tap::TapError> {
        use crate::tap::{TapError, TapSide};
        let live = self.inner.live.get();
        let topology = &live.topology;
        let Some(c) = topology.components.iter().find(|c| c.name == request.component) else {
            let known = topology.components.iter().map(|c| c.name.clone()).collect();
            return Err(TapError::UnknownComponent { component: request.component.clone(), known });
        };
        let streams: Vec<(String, Vec<String>)> = match request.side {
            TapSide::Outputs => c
                .outputs
                .iter()
                .map(|o| {
                    let fields = o.decl.fields.iter().map(ToString::to_string).collect();
                    (o.decl.name.to_string(), fields)
                })
                .collect(),
            TapSide::Inputs if c.kind == Kind::Spout => {
                return Err(TapError::SpoutInputs(c.name.clone()));
            }
            TapSide::Inputs => c
                .inputs
                .iter()
                .filter_map(|i| topology.components.get(i.from)?.outputs.get(i.stream as usize))
                .map(|o| {
                    let fields = o.decl.fields.iter().map(ToString::to_string).collect();
                    (o.decl.name.to_string(), fields)
                })
                .collect(),
        };
        if let Some(stream) = &request.stream {
            if !streams.iter().any(|(s, _)| s == stream) {
                return Err(TapError::UnknownStream {
                    component: c.name.clone(),
                    side: request.side,
                    stream: stream.clone(),
                    streams: streams.iter().map(|(s, _)| s.clone()).collect(),
                });
            }
        }
        let points = task_points(&live, &c.name).unwrap_or_default();
        Ok((self.inner.taps.attach(request, points), streams))
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
    pub(super) fn install(&self, mut live: Live) {
        // Tasks are chained onto threads at start; a reload moves none.
        let running = self.inner.live.get();
        if live.topology.components.iter().any(|c| c.chain_from.is_some()) {
            let mut topology = (*live.topology).clone();
            topology.keep_running_chains(&running.topology);
            live.topology = Arc::new(topology);
        }
        self.inner.live.set(live);
        // Taps cover the tasks the reload added.
        let live = self.inner.live.get();
        self.inner.taps.cover(|component| task_points(&live, component));
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
        let reply = move |report| {
            let _ = tx.send(report);
        };
        self.request_reload_then(trigger, reply).then_some(rx)
    }

    /// Asks for a reload without waiting: `reply` is called with the
    /// report once it is over, on the reload thread (it must not block).
    /// The request joins the queue of the reload thread, which serves
    /// every request waiting when it starts a reload with that one reload.
    /// False when reloading is not set up for this run or its thread has
    /// ended (`reply` is then never called).
    pub fn request_reload_then(
        &self,
        trigger: &'static str,
        reply: impl FnOnce(ReloadReport) + Send + 'static,
    ) -> bool {
        let request = ReloadRequest { trigger, reply: Some(Box::new(reply)) };
        self.inner.reloader.get().is_some_and(|r| r.send(request).is_ok())
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

    /// A signature of the topology's progress when no tuple is moving:
    /// nothing unsent, nothing queued, every transferred tuple received
    /// (trees may be pending: windows hold them). Equal twice in a row with
    /// no work in between means quiet.
    fn quiet_signature(&self) -> Option<(u64, u64)> {
        let unsent = self.sum(None, StatField::Unsent);
        let transferred = self.sum(None, StatField::Transferred);
        let received = self.sum(Some(Kind::Bolt), StatField::Received);
        let queued: usize = self.live().wiring.data.iter().flatten().map(Sender::len).sum();
        (unsent == 0 && queued == 0 && transferred == received)
            .then_some((transferred, self.sum(Some(Kind::Bolt), StatField::Executed)))
    }

    /// The topology's progress when no tuple is moving, `None` while one
    /// is (see `quiet_signature`): equal twice in a row, with no work in
    /// between, means quiet.
    pub fn quiet_progress(&self) -> Option<(u64, u64)> {
        self.quiet_signature()
    }

    /// Sends a [`Control::Sync`] to every task; returns the counter they
    /// add to and how many were told (simulated time, `squall test`).
    pub fn sync_tasks(&self) -> (Arc<std::sync::atomic::AtomicUsize>, usize) {
        let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let live = self.inner.live.get();
        let told = live
            .wiring
            .controls
            .iter()
            .filter(|c| c.send(Control::Sync(done.clone())).is_ok())
            .count();
        (done, told)
    }

    /// Sends an [`AckerInput::Sync`](crate::acker::msg::AckerInput::Sync)
    /// to every acker task; returns the counter and how many were told.
    pub fn sync_ackers(&self) -> (Arc<std::sync::atomic::AtomicUsize>, usize) {
        let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let live = self.inner.live.get();
        let told = live
            .wiring
            .ackers
            .iter()
            .filter(|a| a.send(crate::acker::msg::AckerInput::Sync(done.clone())).is_ok())
            .count();
        (done, told)
    }

    /// Tells every windowed bolt task to flush its windows
    /// ([`Control::FlushWindows`]); returns how many were told.
    pub fn flush_windows(&self) -> usize {
        let live = self.inner.live.get();
        let mut told = 0;
        for c in live.topology.components.iter().filter(|c| c.window.is_some()) {
            for t in c.tasks.clone() {
                if live.wiring.controls[t as usize].send(Control::FlushWindows).is_ok() {
                    told += 1;
                }
            }
        }
        told
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

/// Flushes the windows once the topology is quiet: call
/// [`WindowFlusher::poll`] every 10 ms or more while no new tuple can enter
/// (the feeds are done, or the spouts are deactivated). Once no tuple has
/// moved between two polls, every windowed bolt flushes; the windows'
/// emits then move again, and the next quiet spell flushes the windowed
/// bolts downstream of them.
#[derive(Debug, Default)]
pub struct WindowFlusher {
    last: Option<(u64, u64)>,
    flushed: Option<(u64, u64)>,
}

impl WindowFlusher {
    /// Samples the topology; flushes when it was quiet since the last
    /// sample and has not been flushed in this state yet.
    pub fn poll(&mut self, handle: &TopologyHandle) {
        let signature = handle.quiet_signature();
        if signature.is_some() && signature == self.last && signature != self.flushed {
            handle.flush_windows();
            self.flushed = signature;
        }
        self.last = signature;
    }
}

/// Ends a spout swap's drain that waits on windows. The old instance
/// emits nothing more while it drains, so a count window downstream (or an
/// event-time one, whose watermark no longer moves) may hold its trees
/// until the message timeout. Call [`DrainFlusher::poll`] every 100 ms or
/// so while the spouts drain: once their pending trees and those windowed
/// bolts' progress stayed the same between two polls, with nothing queued
/// for the bolts, the bolts flush their windows, as a stop's drain does
/// ([`Control::FlushWindows`]). Processing-time windows close on their own
/// and are left alone.
#[derive(Debug)]
pub struct DrainFlusher {
    /// The draining spouts' tasks.
    spouts: Vec<u32>,
    /// The count and event-time windowed bolts downstream of them.
    windows: Vec<u32>,
    last: Option<(u64, u64)>,
    flushed: Option<(u64, u64)>,
}

impl DrainFlusher {
    /// For the spout tasks `spouts` (task ids), in the topology `handle` runs.
    pub fn new(handle: &TopologyHandle, spouts: Vec<u32>) -> Self {
        let live = handle.inner.live.get();
        let topology = &live.topology;
        let mut reached: Vec<bool> = topology
            .components
            .iter()
            .map(|c| c.tasks.clone().any(|t| spouts.contains(&t)))
            .collect();
        // Downstream, transitively (a flushed window's emits may fill the
        // next window, which the next quiet spell flushes).
        loop {
            let before = reached.iter().filter(|r| **r).count();
            for (i, c) in topology.components.iter().enumerate() {
                if c.inputs.iter().any(|input| reached.get(input.from) == Some(&true)) {
                    reached[i] = true;
                }
            }
            if reached.iter().filter(|r| **r).count() == before {
                break;
            }
        }
        let stalls = |w: &crate::config::WindowDecl| {
            w.timestamp_field.is_some() || matches!(w.size, crate::config::WindowSize::Count { .. })
        };
        let windows = topology
            .components
            .iter()
            .zip(&reached)
            .filter(|(c, reached)| **reached && c.window.as_ref().is_some_and(stalls))
            .flat_map(|(c, _)| c.tasks.clone())
            .collect();
        Self { spouts, windows, last: None, flushed: None }
    }

    /// Samples the drain; flushes the windows when it stalled (see the type).
    /// Returns how many bolt tasks were told to flush.
    pub fn poll(&mut self, handle: &TopologyHandle) -> usize {
        if self.windows.is_empty() {
            return 0;
        }
        let live = handle.inner.live.get();
        let stat =
            |t: &u32, f: StatField| live.wiring.stats.get(*t as usize).map_or(0, |s| s.get(f));
        let pending: u64 = self.spouts.iter().map(|t| stat(t, StatField::Pending)).sum();
        let executed: u64 = self.windows.iter().map(|t| stat(t, StatField::Executed)).sum();
        let queued: usize = self
            .windows
            .iter()
            .filter_map(|t| live.wiring.data.get(*t as usize)?.as_ref())
            .map(Sender::len)
            .sum();
        let signature = (pending > 0 && queued == 0).then_some((pending, executed));
        let mut told = 0;
        if signature.is_some() && signature == self.last && signature != self.flushed {
            for &t in &self.windows {
                if live.wiring.controls[t as usize].send(Control::FlushWindows).is_ok() {
                    told += 1;
                }
            }
            self.flushed = signature;
        }
        self.last = signature;
        told
    }
}

/// The tap points of `component`'s tasks in `live` (`None`: no such
/// component).
fn task_points(live: &Live, component: &str) -> Option<Vec<Arc<crate::tap::TapPoint>>> {
    let c = live.topology.components.iter().find(|c| c.name == component)?;
    Some(c.tasks.clone().filter_map(|t| live.wiring.taps.get(t as usize).cloned()).collect())
}

#[cfg(test)]
mod tests {
    use super::super::plan::TaskEnds;
    use super::*;
    use crate::executor::batch::Batch;
    use crate::ids::TaskId;
    use crate::metrics::LocalStats;
    use crate::topology::fixtures::{bolt, component, linked, topology};

    /// A handle on `topology` wired as it would run, with no thread started:
    /// the handle and every task's receiving ends.
    fn handle(topology: Topology) -> (TopologyHandle, Vec<Option<TaskEnds>>) {
        let (wiring, ends, _ackers) = super::super::plan::Wiring::new(&topology);
        let live = Arc::new(LiveCell::new(Arc::new(topology), wiring));
        (TopologyHandle::new(live, Arc::new(RunControl::default()), Instant::now()), ends)
    }

    fn publish(h: &TopologyHandle, task: u32, values: &[(StatField, u64)]) {
        let mut local = LocalStats::default();
        for &(field, n) in values {
            local.set(field, n);
        }
        h.task_stats(task).publish(&local);
    }

    fn deactivations(ends: &[Option<TaskEnds>]) -> Vec<usize> {
        ends.iter()
            .map(|e| {
                e.as_ref().map_or(0, |e| {
                    e.control.try_iter().filter(|m| matches!(m, Control::Deactivate)).count()
                })
            })
            .collect()
    }

    #[test]
    fn deactivating_tells_each_spout_task_once_and_no_bolt() {
        let t = linked(vec![
            component("s", Kind::Spout, 0..2),
            component("u", Kind::Spout, 2..3),
            bolt("b", 3..5, &[0, 1]),
        ]);
        let (h, ends) = handle(t);
        assert_eq!(h.deactivate(None), Ok(3));
        assert_eq!(deactivations(&ends), [1, 1, 1, 0, 0]);
        assert_eq!(h.deactivate(Some("u")), Ok(1));
        assert_eq!(deactivations(&ends), [0, 0, 1, 0, 0]);
    }

    #[test]
    fn steering_refuses_bolts_unknown_names_and_activating_a_draining_topology() {
        let (h, _ends) = handle(topology());
        assert_eq!(h.deactivate(Some("b")), Err(HandleError::NotASpout("b".into())));
        let unknown = h.deactivate(Some("sx")).expect_err("no such component");
        assert_eq!(
            unknown,
            HandleError::UnknownComponent { name: "sx".into(), suggestion: Some("s".into()) }
        );
        assert_eq!(unknown.to_string(), "no component named \"sx\"; did you mean \"s\"?");
        assert_eq!(h.activate(Some("s")), Ok(1));
        h.drain();
        assert_eq!(h.state(), RunState::Draining);
        assert_eq!(h.activate(None), Err(HandleError::Draining));
    }

    #[test]
    fn a_task_that_has_ended_is_not_counted_as_told() {
        let (h, mut ends) = handle(topology());
        ends[0] = None;
        assert_eq!(h.deactivate(None), Ok(0));
        assert!(!h.send_control(0, Control::Wake));
        assert!(h.send_control(1, Control::Wake));
        assert!(!h.send_control(99, Control::Wake), "no such task");
    }

    #[test]
    fn drained_means_no_active_spout_no_pending_tree_and_every_tuple_received() {
        let (h, ends) = handle(topology());
        publish(&h, 0, &[(StatField::Active, 1), (StatField::Transferred, 5)]);
        assert_eq!(h.drained_signature(), None, "a spout is active");
        publish(&h, 0, &[(StatField::Transferred, 5), (StatField::Pending, 2)]);
        assert_eq!(h.drained_signature(), None, "trees are pending");
        assert_eq!(h.backlog_summary(), "\"s\": 2 pending trees");
        publish(&h, 0, &[(StatField::Transferred, 5)]);
        publish(&h, 1, &[(StatField::Received, 3), (StatField::Executed, 3)]);
        assert_eq!(h.drained_signature(), None, "2 tuples not received yet");
        publish(&h, 2, &[(StatField::Received, 2), (StatField::Executed, 2)]);
        assert_eq!(h.drained_signature(), Some((5, 5)));
        assert_eq!(h.backlog_summary(), "nothing visible");
        let queue = h.live().wiring.data[2].clone().expect("a bolt queue");
        queue.send(Batch::with_capacity(TaskId(0), 1)).expect("room");
        assert_eq!(h.queue_depth(2), 1);
        assert_eq!(h.drained_signature(), None, "a batch is queued");
        assert_eq!(h.backlog_summary(), "\"b\": 1 queued batches");
        drop(ends);
    }

    #[test]
    fn the_counters_of_retired_tasks_still_count() {
        let mut b = bolt("b", 3..5, &[0]);
        b.retired = vec![1, 2];
        let (h, _ends) = handle(linked(vec![component("s", Kind::Spout, 0..1), b]));
        for (task, n) in [(1, 10), (2, 20), (3, 1), (4, 2)] {
            publish(&h, task, &[(StatField::Executed, n)]);
        }
        publish(&h, 0, &[(StatField::Executed, 100)]);
        assert_eq!(h.sum(Some(Kind::Bolt), StatField::Executed), 33);
        assert_eq!(h.sum(None, StatField::Executed), 133);
    }

    #[test]
    fn a_reload_is_requested_only_once_a_reloader_is_registered() {
        let (h, _ends) = handle(topology());
        assert!(h.request_reload("SIGHUP").is_none());
        let (tx, rx) = crossbeam_channel::unbounded();
        h.set_reloader(tx);
        let reply = h.request_reload("HTTP").expect("registered");
        let request = rx.try_recv().expect("a request");
        assert_eq!(request.trigger, "HTTP");
        assert!(request.reply.is_some());
        drop(request);
        assert!(reply.recv().is_err(), "the reloader went away without answering");
    }

    #[test]
    fn installing_a_topology_is_what_every_reader_sees_next() {
        let (h, _ends) = handle(topology());
        let before = h.topology();
        let mut next = (*before).clone();
        next.components[1].outdated = true;
        h.install(Live { topology: Arc::new(next), wiring: h.live().wiring.clone() });
        assert!(h.topology().components[1].outdated);
        assert!(!before.components[1].outdated, "a snapshot taken earlier is unchanged");
    }
}
