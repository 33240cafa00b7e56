//! Starting a bound topology, steering it while it runs, and stopping it
//! gracefully.
//!
//! # Start: plan, then spawn
//! 1. [`instantiate`] builds every instance, so a constructor error or panic
//!    is reported before any thread starts.
//! 2. [`Plan::new`] builds the queues (a bounded data channel per bolt task
//!    of `receive_buffer_size / producer_batch_size` batches, an unbounded
//!    control channel per task, an unbounded channel per acker), the
//!    executors, the ackers and the system task. Nothing runs yet.
//! 3. [`Plan::spawn`] starts one thread per task (or per operator chain:
//!    `config::chain`), one per acker, and the system thread (timeout ticks, tick tuples; it parks 5000 µs per turn),
//!    and returns the [`RunningTopology`]. A host thread that panics fails
//!    the run ([`RunError::ThreadDied`]) instead of stopping silently.
//!
//! # While it runs
//! [`TopologyHandle`] (cloneable, `Send + Sync`) gives stats snapshots,
//! deactivates and activates spouts (all, or one component's), and starts
//! the drain. The CLI, the HTTP API and the live swap use it.
//!
//! # Stop (graceful drain)
//! 1. `Draining`: throttled waits are canceled (for good: the backlog of a
//!    throttled edge is executed unthrottled); every spout calls `deactivate`
//!    once and stops calling `next_tuple`; spouts keep receiving acks and
//!    timeouts, bolts keep executing, executors flush partial batches
//!    whenever idle. With `--duration`, a throttled wait that ends at or past
//!    the deadline begins this step itself (`RunControl::throttle`).
//! 2. Wait until the topology is drained — no spout active, no tree pending,
//!    nothing unsent anywhere, and every transferred tuple received and
//!    executed, twice in a row 10 ms apart — or until `shutdown_timeout_secs`.
//!    A drain that times out names the components still holding work. When a
//!    task could not start (its `open` or `prepare` failed), it never executes
//!    what is queued for it: the drain then waits at most
//!    [`START_FAILURE_DRAIN`] (1 s) more, so a failed start exits within a
//!    second plus the close budgets, not after the whole timeout.
//!    Meanwhile, once no spout is active and no tuple moves between two
//!    samples, the windowed bolts flush ([`WindowFlusher`]): the tuples
//!    still in their windows get the windows they wait for, then their acks,
//!    so a windowed topology drains instead of waiting out the timeout.
//! 3. `Stopping`: spouts fail what is still pending (reason: shutdown) and
//!    call `close`; bolts call `cleanup`.
//! 4. Join every thread. A thread still inside plugin code [`join_grace`]
//!    after step 3 (a call that blocks) is reported and left behind: the
//!    process exits anyway, with an error. The grace is the longest close
//!    budget the components declare (`CLOSE_BUDGET`), at least 2 s.
//!
//! Emits that race with shutdown: a bolt that emits during step 3 may find
//! its downstream already stopped; such tuples are untracked or belong to a
//! tree the spout has just failed, so nothing is lost silently.

mod handle;
mod instantiate;
mod plan;
pub mod reload;
mod reshape;
mod system;
pub mod watch;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use handle::{Durable, HandleError, Live, LiveCell, TopologyHandle, WindowFlusher};
pub use instantiate::{instantiate, instantiate_within, wait_strategy, Instances, StartError};
pub use plan::{Plan, Wiring};
pub use reload::Reloader;
pub use system::SystemTask;

use crate::control::{RunControl, RunError, RunState};
use crate::metrics::{Report, StatField};
pub use crate::state::coordinator::TaskDirectory;
use crate::topology::{Kind, Topology};

/// Builds and starts `topology`: [`Plan::new`], then [`Plan::spawn`].
///
/// # Errors
/// When a thread cannot be spawned.
pub fn start(topology: Topology, instances: Instances) -> Result<RunningTopology, StartError> {
    start_with(topology, instances, None)
}

/// [`start`] for one partition of a group: before the state is read, an
/// empty commit numbered [`Fence::first_checkpoint`] fences off every
/// older owner of the partition (the backend refuses their commits from
/// then on), and the coordinator commits only while `fence` allows it.
/// (See `state::fence`.)
///
/// # Errors
/// As [`start`]; a topology without `[state]` cannot be fenced.
///
/// [`Fence::first_checkpoint`]: crate::state::Fence::first_checkpoint
pub fn start_fenced(
    topology: Topology,
    instances: Instances,
    fence: Arc<crate::state::Fence>,
) -> Result<RunningTopology, StartError> {
    start_with(topology, instances, Some(fence))
}

fn start_with(
    topology: Topology,
    mut instances: Instances,
    fence: Option<Arc<crate::state::Fence>>,
) -> Result<RunningTopology, StartError> {
    let durable = match (&topology.state, fence) {
        (Some(plan), fence) => Some(restore(&topology, plan, &mut instances, fence)?),
        (None, Some(_)) => {
            return Err(StartError::State(crate::state::StateError {
                backend: "none".into(),
                call: "fence",
                cause: "a partition of a group needs [state]: its fence is checked at commit"
                    .into(),
            }))
        }
        (None, None) => {
            warn_unkept_stores(&topology, &mut instances);
            None
        }
    };
    Plan::new(topology, instances).spawn_with(durable)
}

/// Warns, once per component, about bolts that keep durable stores in a
/// topology without `[state]`: nothing checkpoints them, so a restart
/// loses them. (A bolt may keep stores and run without `[state]` on
/// purpose, as the Nexmark queries do, so this is not refused.) Asks the
/// first task's instance, before `prepare`, for the state a live swap
/// would hand over: a bolt whose stores make it says so by its format.
fn warn_unkept_stores(topology: &Topology, instances: &mut Instances) {
    use crate::plugin::object::BoltObj;
    for c in topology.components.iter().filter(|c| c.kind == Kind::Bolt) {
        let Some(Some(bolt)) = instances.bolts.get_mut(c.tasks.start as usize) else { continue };
        if !matches!(bolt, BoltObj::V12(_) | BoltObj::V13(_)) {
            continue;
        }
        let Ok(abi_stable::std_types::ROption::RSome(state)) = bolt.save_state().into_result()
        else {
            continue;
        };
        if state.format.as_str() == squall_plugin_api::state::STORES_FORMAT {
            tracing::warn!(
                "bolt {:?} keeps durable stores, but {} has no [state] table: they live in memory \
                 only and a restart loses them. Add [state] (backend = \"memory\" for tests, a \
                 state backend such as EmbeddedState to keep them; docs/state.md)",
                c.name,
                topology.file.display()
            );
        }
    }
}

/// Durable state, opened and restored, waiting for its coordinator's thread.
#[derive(Debug)]
pub struct DurableStart {
    backend: crate::state::Backend,
    last: Option<u64>,
    interval: Duration,
    namespace: String,
    stats: Arc<crate::state::CheckpointStats>,
    fence: Option<Arc<crate::state::Fence>>,
}

/// Opens the backend, reads the last committed checkpoint and hands each
/// task its part, before any `open` or `prepare`.
fn restore(
    topology: &Topology,
    plan: &crate::topology::StatePlan,
    instances: &mut Instances,
    fence: Option<Arc<crate::state::Fence>>,
) -> Result<DurableStart, StartError> {
    let mut backend = crate::state::Backend::build(&plan.backend)?;
    backend.open(&plan.namespace)?;
    if let Some(fence) = &fence {
        fence_in(&mut backend, fence, &plan.namespace)?;
    }
    let restored = crate::state::restore::load(topology, &mut backend)?;
    instances.windows = restored.windows;
    hand_out(topology, restored.bolts, &restored.spouts, instances)?;
    warn_unrestored(topology, &restored.orphans);
    let stats = Arc::new(crate::state::CheckpointStats::default());
    stats.restored_records.store(restored.records, std::sync::atomic::Ordering::Relaxed);
    stats.restore_micros.store((restored.secs * 1e6) as u64, std::sync::atomic::Ordering::Relaxed);
    if let Some(n) = restored.checkpoint {
        stats.last_committed.store(n, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(
            "durable state: restored checkpoint {n} from {} ({} records in {:.3} s)",
            backend.name(),
            restored.records,
            restored.secs
        );
    }
    Ok(DurableStart {
        backend,
        last: restored.checkpoint,
        interval: plan.interval,
        namespace: plan.namespace.clone(),
        stats,
        fence,
    })
}

/// Before anything is read: from this commit on, the backend refuses every
/// commit of an older owner (numbered below it).
fn fence_in(
    backend: &mut crate::state::Backend,
    fence: &crate::state::Fence,
    namespace: &str,
) -> Result<(), StartError> {
    fence.check().map_err(|e| crate::state::StateError {
        backend: backend.name().to_owned(),
        call: "fence",
        cause: e.to_string().into(),
    })?;
    backend.commit(fence.first_checkpoint(), &[])?;
    tracing::info!(
        "partition {}: epoch {} fenced in {} (namespace {namespace:?}): older owners can no longer \
         commit",
        fence.partition(),
        fence.epoch(),
        backend.name(),
    );
    Ok(())
}

/// Hands each bolt task its stores and each spout task its position; the
/// spouts that keep positions and got none learn that they run durably
/// (`State::no_checkpoint`): their broker acks wait for commits.
fn hand_out(
    topology: &Topology,
    bolts: std::collections::HashMap<u32, Vec<squall_plugin_api::abi::StoreDelta>>,
    spouts: &std::collections::HashMap<u32, squall_plugin_api::State>,
    instances: &mut Instances,
) -> Result<(), StartError> {
    let name_of = |task: u32| {
        let c = topology.components.iter().find(|c| c.tasks.contains(&task));
        c.map_or_else(String::new, |c| c.name.clone())
    };
    let refused = |task, e: squall_plugin_api::PluginError| StartError::Restore {
        component: name_of(task),
        task,
        cause: e.to_string(),
    };
    for (task, deltas) in bolts {
        let Some(Some(bolt)) = instances.bolts.get_mut(task as usize) else { continue };
        bolt.restore_stores(deltas.into()).into_result().map_err(|e| refused(task, e))?;
    }
    let durable = topology.components.iter().filter(|c| c.kind == Kind::Spout && c.checkpoints);
    let fresh = durable.flat_map(|c| c.tasks.clone()).filter(|t| !spouts.contains_key(t));
    let positions = spouts.iter().map(|(&t, p)| (t, p.clone()));
    let no_checkpoint = fresh.map(|t| (t, squall_plugin_api::State::no_checkpoint()));
    for (task, position) in positions.chain(no_checkpoint) {
        let Some(Some(spout)) = instances.spouts.get_mut(task as usize) else { continue };
        spout.restore_checkpoint(position).into_result().map_err(|e| refused(task, e))?;
    }
    Ok(())
}

/// Warns of the scopes no component owns, and of the spouts that keep no
/// position (state is exact only for spouts that do).
fn warn_unrestored(topology: &Topology, orphans: &[String]) {
    for orphan in orphans {
        tracing::warn!(
            "durable state: {orphan:?} belongs to no component of this topology; left in the \
             backend (squall state rm removes it)"
        );
    }
    for c in topology.components.iter().filter(|c| c.kind == Kind::Spout && !c.checkpoints) {
        tracing::warn!(
            "durable state: spout {:?} keeps no checkpoint position (it is built before contract \
             1.2 or does not set CHECKPOINTS), so after a restart it does not resume where the \
             last checkpoint left it: state is exact only for spouts that do",
            c.name
        );
    }
}

/// What the coordinator reads of the running topology.
struct LiveTasks(Arc<LiveCell>);

impl crate::state::coordinator::TaskDirectory for LiveTasks {
    fn current(&self) -> (Arc<Topology>, Vec<crossbeam_channel::Sender<crate::control::Control>>) {
        let live = self.0.get();
        (live.topology.clone(), live.wiring.controls.clone())
    }
}

/// Starts the checkpoint coordinator's thread.
fn start_checkpoints(
    running: &RunningTopology,
    durable: DurableStart,
    reports: crossbeam_channel::Receiver<crate::state::Report>,
    live: Arc<LiveCell>,
    run: &Arc<RunControl>,
) -> std::io::Result<JoinHandle<()>> {
    let handle = running.handle();
    let settings = &handle.topology().settings;
    // A checkpoint gathers its parts within the message timeout (a task
    // that cannot answer that long holds tuples past it anyway), 10 s at least.
    let timeout = Duration::from_secs(settings.message_timeout_secs.max(10));
    let (last_tx, last_rx) = crossbeam_channel::bounded(1);
    handle.set_durable(handle::Durable {
        stats: durable.stats.clone(),
        backend: durable.backend.name().to_owned(),
        namespace: durable.namespace.clone(),
        last: std::sync::Mutex::new(Some(last_tx)),
    });
    let coordinator = crate::state::Coordinator::new(
        durable.backend,
        durable.interval,
        timeout,
        reports,
        durable.last,
        durable.stats,
        handle.checkpoint_gate(),
    );
    let coordinator = match durable.fence {
        Some(fence) => coordinator.with_fence(fence),
        None => coordinator,
    };
    let runs = run.clone();
    spawn("__checkpoint".into(), run, move || coordinator.run(&LiveTasks(live), &runs, last_rx))
}

/// A started topology: its [`TopologyHandle`] and its threads.
#[derive(Debug)]
pub struct RunningTopology {
    handle: TopologyHandle,
    threads: Vec<JoinHandle<()>>,
}

pub use crate::metrics::DrainReport;

/// How a run ended: the last report, the drain, and the first fatal error.
#[derive(Debug)]
pub struct RunOutcome {
    /// Every component's figures after the last thread stopped.
    pub report: Report,
    /// How the drain went.
    pub drain: DrainReport,
    /// The first fatal error, if the run failed.
    pub error: Option<RunError>,
}

/// How long threads get to leave their loops after `Stopping` before they
/// are reported as stuck (a plugin call that blocks) and left behind, when
/// no component declares a longer close budget ([`join_grace`]).
pub const JOIN_GRACE: Duration = Duration::from_secs(2);

/// How long the drain waits once a task could not start (its `open` or
/// `prepare` failed): that task never executes what is queued for it, so a
/// full drain would only wait out `shutdown_timeout_secs`. The run stops
/// within this plus the components' close budgets ([`join_grace`]).
pub const START_FAILURE_DRAIN: Duration = Duration::from_secs(1);

/// True when the run failed because a task could not start or restart
/// (`open`, `prepare`, or taking over its state, failed).
fn start_failed(run: &RunControl) -> bool {
    matches!(run.fatal(), Some(RunError::Lifecycle { .. }))
}

/// What a declared close budget gets on top, for the executor's own way out
/// of its loop after the plugin's `close` returned.
const BUDGET_MARGIN: Duration = Duration::from_millis(500);

/// The join grace of a topology: the longest close budget its components
/// declare (contract 1.2's `CLOSE_BUDGET`; tasks close at the same time, so
/// the longest, not the sum) plus a margin, and never less than
/// [`JOIN_GRACE`].
pub fn join_grace(topology: &crate::topology::Topology) -> Duration {
    topology
        .components
        .iter()
        .filter_map(|c| c.close_budget)
        .map(|b| b + BUDGET_MARGIN)
        .fold(JOIN_GRACE, Duration::max)
}

impl RunningTopology {
    fn new(live: Arc<LiveCell>, run: Arc<RunControl>, threads: Vec<JoinHandle<()>>) -> Self {
        let handle = TopologyHandle::new(live, run, Instant::now());
        Self { handle, threads }
    }

    /// A handle other parts of the host can keep while the topology runs.
    pub fn handle(&self) -> &TopologyHandle {
        &self.handle
    }

    /// Runs the shutdown protocol (see the module doc) and joins every thread.
    pub fn stop(self) -> RunOutcome {
        let timeout = Duration::from_secs(self.handle.topology().settings.shutdown_timeout_secs);
        self.stop_within(timeout)
    }

    /// [`stop`](Self::stop) with a drain of at most `timeout` instead of
    /// `shutdown_timeout_secs` (the harness, whose own timeout has passed,
    /// drains for no longer).
    pub fn stop_within(mut self, timeout: Duration) -> RunOutcome {
        let h = &self.handle;
        let begin = Instant::now();
        h.drain();
        let completed = self.wait_drained(begin, timeout);
        self.last_checkpoint(timeout);
        let h = &self.handle;
        h.run().advance(RunState::Stopping);
        let stuck_threads = self.join();
        let h = &self.handle;
        let drain = DrainReport {
            in_flight_at_start: h.sum(Some(Kind::Spout), StatField::DrainInFlight),
            acked: h.sum(Some(Kind::Spout), StatField::DrainAcked),
            failed: h.sum(Some(Kind::Spout), StatField::DrainFailed),
            timed_out: h.sum(Some(Kind::Spout), StatField::DrainTimedOut),
            failed_at_shutdown: h.sum(Some(Kind::Spout), StatField::DrainShutdown),
            completed,
            secs: begin.elapsed().as_secs_f64(),
            stuck_threads: stuck_threads.clone(),
        };
        if !stuck_threads.is_empty() {
            let grace_secs = join_grace(&h.topology()).as_secs();
            h.run().fail(RunError::Stuck { threads: stuck_threads, grace_secs });
        }
        RunOutcome { report: h.report(), drain, error: h.run().fatal() }
    }

    /// Durable state: asks for one last checkpoint once the drain is over,
    /// and waits for it (at most `timeout`), so a graceful stop leaves
    /// nothing to replay.
    fn last_checkpoint(&self, timeout: Duration) {
        let Some(durable) = self.handle.durable() else { return };
        let Some(ask) = durable.last.lock().ok().and_then(|mut l| l.take()) else { return };
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        if ask.send(done_tx).is_ok() && done_rx.recv_timeout(timeout).is_err() {
            tracing::warn!(
                "durable state: the last checkpoint did not finish within {} s",
                timeout.as_secs()
            );
        }
    }

    /// Waits until the topology is drained, or `timeout` after `begin`; true
    /// when drained. A drain that times out names what still holds work.
    fn wait_drained(&self, begin: Instant, timeout: Duration) -> bool {
        let mut last = None;
        let mut timeout = timeout;
        let mut start_failure_seen = false;
        let mut flusher = WindowFlusher::default();
        let windowed = self.handle.topology().components.iter().any(|c| c.window.is_some());
        loop {
            std::thread::sleep(Duration::from_millis(10));
            if windowed && self.handle.sum(Some(Kind::Spout), StatField::Active) == 0 {
                // No spout emits any more: once nothing moves, the windows'
                // trailing tuples get their windows and their acks.
                flusher.poll(&self.handle);
            }
            let signature = self.handle.drained_signature();
            if signature.is_some() && signature == last {
                return true;
            }
            last = signature;
            if !start_failure_seen && start_failed(self.handle.run()) {
                // A task that could not start never executes what is queued
                // for it: the drain would wait the whole timeout for
                // nothing. Give the rest of the topology a moment, then stop.
                start_failure_seen = true;
                let bound = begin.elapsed() + START_FAILURE_DRAIN;
                if bound < timeout {
                    tracing::info!(
                        "a task could not start: draining for at most {} s, not shutdown_timeout_secs = {}",
                        START_FAILURE_DRAIN.as_secs(),
                        timeout.as_secs()
                    );
                    timeout = bound;
                }
            }
            if begin.elapsed() >= timeout {
                if start_failure_seen {
                    tracing::warn!(
                        "stopping without a full drain (a task could not start); still holding work: {}",
                        self.handle.backlog_summary()
                    );
                    return false;
                }
                tracing::warn!(
                    "drain did not finish within shutdown_timeout_secs = {}; still holding work: {}",
                    timeout.as_secs(),
                    self.handle.backlog_summary()
                );
                return false;
            }
        }
    }

    /// Joins every thread; a thread still running [`join_grace`] after
    /// `Stopping` (a plugin call that blocks) is left behind and named.
    fn join(&mut self) -> Vec<String> {
        self.threads.extend(self.handle.take_late_threads());
        let grace_end = Instant::now() + join_grace(&self.handle.topology());
        while self.threads.iter().any(|t| !t.is_finished()) && Instant::now() < grace_end {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut stuck = Vec::new();
        for t in self.threads.drain(..) {
            if t.is_finished() {
                // A panic was caught by `spawn` and recorded as a fatal error.
                let _ = t.join();
            } else {
                stuck.push(t.thread().name().unwrap_or("unnamed").to_owned());
            }
        }
        stuck
    }
}

/// Spawns a named host thread. A panic that escapes `f` (a host bug: plugin
/// panics are caught at the boundary) fails the run with the thread's name
/// and cause, so timeouts, ticks or tuples never stop silently.
///
/// The thread keeps Linux's default timer slack. A 1 µs slack
/// (`PR_SET_TIMERSLACK`) would make Storm's progressive level 2 ("park
/// ~1 ns") really short, but turns its parks into a loop of syscalls that
/// takes CPU from busy threads (measured and rejected:
/// docs/performance-history.md, "What limits the figures"). With the
/// default slack a level-2 park lasts about as long as Java's
/// `parkNanos(1)` does on Linux.
fn spawn(
    name: String,
    run: &Arc<RunControl>,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    let run = run.clone();
    let thread = name.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            let cause = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with a non-string payload".to_owned());
            run.fail(RunError::ThreadDied { thread, cause });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_thread_that_panics_fails_the_run_with_its_name_and_cause() {
        let run = Arc::new(RunControl::default());
        let t = spawn("__system".into(), &run, || panic!("overflow when adding duration"))
            .expect("spawn");
        t.join().expect("the panic is caught inside the thread");
        assert_eq!(run.state(), RunState::Draining, "the run drains");
        match run.fatal() {
            Some(RunError::ThreadDied { thread, cause }) => {
                assert_eq!(thread, "__system");
                assert_eq!(cause, "overflow when adding duration");
            }
            other => panic!("expected ThreadDied, got {other:?}"),
        }
    }

    #[test]
    fn a_host_thread_that_ends_normally_leaves_the_run_alone() {
        let run = Arc::new(RunControl::default());
        spawn("__acker-0".into(), &run, || {}).expect("spawn").join().expect("join");
        assert_eq!(run.state(), RunState::Running);
        assert!(run.fatal().is_none());
    }
}
