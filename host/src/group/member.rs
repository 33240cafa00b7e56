//! One host's membership in its group, driven through a coordinator
//! plugin (contract 1.3's [`DynCoordinator`]).
//!
//! One thread, `__group`, owns the coordinator and calls it, one call at a
//! time: `join`, then `poll` every 50 ms at most, and for each event:
//!
//! - **assigned**: start the partition's topology run in a thread of its
//!   own ([`Partitions::start`]), restored from the partition's state
//!   namespace and fenced ([`Fence`]) by the event's epoch, valid for the
//!   event's `valid_for_ms` counted from before the poll began (so the host
//!   never relies on an ownership longer than the coordinator does);
//! - **renewed**: move the partition's fence to the new deadline;
//! - **revoked**: stop the partition gracefully (its last checkpoint
//!   commits while the coordinator keeps renewing it), then call `released`;
//! - **lost**: lose the fence at once (no more commits) and stop the
//!   partition without releasing it.
//!
//! A partition that cannot start, or stops on its own, is released too.
//! At shutdown the member calls `leave` (the coordinator takes nothing
//! more), stops every partition gracefully while it keeps polling (the
//! renewals go on), releases each, and ends once none is left.
//!
//! A partition whose ownership is not renewed in time can no longer commit:
//! its fence expires on its own, whatever the coordinator does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use squall_plugin_api::abi::{CoordinatorBox, PartitionChange, PartitionEvent};

use crate::runtime::{RunningTopology, TopologyHandle};
use crate::state::Fence;

/// How long one poll of the coordinator may wait.
const POLL: Duration = Duration::from_millis(50);
/// How often the member asks the coordinator for its view (members, share,
/// counters) while joined.
const VIEW_EVERY: Duration = Duration::from_millis(500);

/// Builds and starts one partition's topology.
pub trait Partitions: Send + Sync + 'static {
    /// Starts partition `partition` fenced by `fence` (its state restored
    /// from the partition's namespace).
    ///
    /// # Errors
    /// Why it could not start, in one line.
    fn start(&self, partition: u32, fence: Arc<Fence>) -> Result<RunningTopology, PartitionError>;
}

/// Why a partition could not start. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Its topology does not read, validate or bind.
    #[error("{0}")]
    Config(crate::config::Diagnostics),
    /// Its libraries do not load.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Load(Vec<crate::plugin::LoadError>),
    /// A constructor failed, or its run could not start.
    #[error("{0}")]
    Start(crate::runtime::StartError),
    /// Its thread cannot start.
    #[error("no thread: {0}")]
    Thread(std::io::Error),
    /// Anything else, as the command line says it.
    #[error("{0}")]
    Other(String),
}

/// Why a member could not join its group.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The coordinator could not join (its message).
    #[error("{}", .0.message)]
    Coordinator(squall_plugin_api::PluginError),
    /// The member's thread cannot start.
    #[error("cannot start the group's thread: {0}")]
    Thread(std::io::Error),
}

/// A group member's settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The group.
    pub name: String,
    /// Its partition count as the topology declares it (0: the coordinator
    /// knows it).
    pub partitions: u32,
    /// This host.
    pub host_id: String,
}

/// Counters of what the member did (`/metrics`, the final summary).
#[derive(Debug, Default)]
pub struct Counters {
    /// Partitions assigned to this host.
    pub taken: AtomicU64,
    /// Of those, taken from a host whose ownership expired (as the
    /// coordinator counts them).
    pub takeovers: AtomicU64,
    /// Partitions released after a stop.
    pub released: AtomicU64,
    /// Partitions lost to another host.
    pub lost: AtomicU64,
    /// Partitions that could not start.
    pub start_failures: AtomicU64,
    /// Renewals that failed (as the coordinator counts them).
    pub renew_errors: AtomicU64,
    /// Requests the coordinator sent to its broker (as it counts them).
    pub broker_requests: Arc<AtomicU64>,
}

/// One partition as this host holds it, for status readers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionStatus {
    /// The partition.
    pub partition: u32,
    /// Its fencing epoch.
    pub epoch: u64,
    /// `starting`, `running` or `stopping`.
    pub phase: &'static str,
    /// The last checkpoint it committed (0: none yet in this run).
    pub last_checkpoint: u64,
}

/// What the member shows of itself.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Status {
    /// The group.
    pub group: String,
    /// This host.
    pub host: String,
    /// The live members, as the coordinator last said.
    pub members: Vec<String>,
    /// This host's share, as the coordinator last said.
    pub share: u32,
    /// The partitions this host holds.
    pub partitions: Vec<PartitionStatus>,
}

impl Status {
    /// The status of a member that just joined: its group and host, and
    /// nothing held yet.
    fn joined(settings: &Settings) -> Self {
        Status { group: settings.name.clone(), host: settings.host_id.clone(), ..Status::default() }
    }
}

/// A running member: its thread, its status and its stop switch.
#[derive(Debug)]
pub struct Member {
    thread: std::thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<Status>>,
    counters: Arc<Counters>,
}

impl Member {
    /// Joins the group through `coordinator` and starts the member's thread.
    ///
    /// # Errors
    /// The coordinator could not join, or the thread cannot start.
    pub fn start(
        settings: Settings,
        mut coordinator: CoordinatorBox,
        partitions: Arc<dyn Partitions>,
    ) -> Result<Self, JoinError> {
        let count = coordinator
            .join(settings.host_id.as_str().into(), settings.partitions)
            .into_result()
            .map_err(JoinError::Coordinator)?;
        tracing::info!(
            "group {}: host {} joined ({count} partitions)",
            settings.name,
            settings.host_id
        );
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(Status::joined(&settings)));
        let counters = Arc::new(Counters::default());
        let (events_tx, events) = crossbeam_channel::unbounded();
        let driver = Driver {
            settings,
            coordinator,
            partitions,
            held: BTreeMap::new(),
            pending: BTreeMap::new(),
            events_tx,
            events,
            stop: stop.clone(),
            status: status.clone(),
            counters: counters.clone(),
            view: (Vec::new(), 0),
            view_at: None,
            warned: 0,
        };
        let thread = std::thread::Builder::new()
            .name("__group".into())
            .spawn(move || driver.run())
            .map_err(JoinError::Thread)?;
        Ok(Self { thread, stop, status, counters })
    }

    /// A snapshot of what this host holds.
    pub fn status(&self) -> Status {
        self.status.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The member's counters.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// A shared handle on the status, for readers that outlive this value.
    pub fn status_cell(&self) -> Arc<Mutex<Status>> {
        self.status.clone()
    }

    /// True once the member's thread ended (after [`leave`](Self::leave),
    /// or when it failed).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Stops every partition gracefully (each commits its last checkpoint),
    /// releases them, leaves, and returns once all that is done.
    pub fn leave(self) {
        self.stop.store(true, Ordering::SeqCst);
        if self.thread.join().is_err() {
            tracing::error!("group: the member's thread panicked");
        }
    }
}

/// Where a held partition is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Starting,
    Running,
    /// Stopping; `release` once it stopped (false when it was lost).
    Stopping {
        release: bool,
    },
}

/// A partition this host runs.
#[derive(Debug)]
struct Held {
    epoch: u64,
    fence: Arc<Fence>,
    phase: Phase,
    /// Tells the partition's thread to stop. A queue of one, written with
    /// `try_send`: one stop is enough, and the member must never block on
    /// it (a partition still starting reads it only once it started, and
    /// the coordinator's renewals cannot wait that long).
    stop: Sender<()>,
    handle: Option<TopologyHandle>,
}

/// What a partition's thread reports.
#[derive(Debug)]
enum Event {
    Started(u32, Result<TopologyHandle, PartitionError>),
    Stopped(u32, Option<String>),
}

/// The member's thread: the coordinator and the partitions it runs.
struct Driver {
    settings: Settings,
    coordinator: CoordinatorBox,
    partitions: Arc<dyn Partitions>,
    held: BTreeMap<u32, Held>,
    /// Partitions assigned again while their previous run still stops (it
    /// was lost or revoked): their epoch and deadline, to start once it
    /// stopped.
    pending: BTreeMap<u32, (u64, Instant)>,
    events_tx: Sender<Event>,
    events: Receiver<Event>,
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<Status>>,
    counters: Arc<Counters>,
    /// The members and share the coordinator last said.
    view: (Vec<String>, u32),
    view_at: Option<Instant>,
    /// Coordinator errors logged so far (the first few, then every 100th).
    warned: u64,
}

/// The instant `valid_for_ms` after `from` (`u64::MAX`: far away).
fn deadline(from: Instant, valid_for_ms: u64) -> Instant {
    const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);
    from.checked_add(Duration::from_millis(valid_for_ms).min(FAR)).unwrap_or(from + FAR)
}

impl Driver {
    /// The member's loop: applies the partitions' and the coordinator's
    /// events, re-reads the group's view now and then, and publishes the
    /// status; once asked to stop, leaves and returns when every partition
    /// is released.
    fn run(mut self) {
        let mut leaving = false;
        loop {
            self.handle_events();
            if self.stop.load(Ordering::SeqCst) && !leaving {
                leaving = true;
                self.begin_leaving();
            }
            if leaving && self.held.is_empty() && self.pending.is_empty() {
                tracing::info!("group {}: host {} left", self.settings.name, self.settings.host_id);
                self.view = (Vec::new(), 0);
                self.publish();
                return;
            }
            self.poll(leaving);
            if !leaving && self.view_at.is_none_or(|at| at.elapsed() >= VIEW_EVERY) {
                self.view_at = Some(Instant::now());
                self.read_view();
            }
            self.publish();
        }
    }

    /// Leaves the group: tells the coordinator, stops every held partition
    /// gracefully (each is released once it stopped) and releases those
    /// waiting to start.
    fn begin_leaving(&mut self) {
        if let Err(e) = self.coordinator.leave().into_result() {
            self.warn("leaving", &e.message);
        }
        tracing::info!(
            "group {}: leaving; stopping {} partitions gracefully, then releasing them",
            self.settings.name,
            self.held.len()
        );
        for (&k, h) in self.held.iter_mut() {
            if !matches!(h.phase, Phase::Stopping { .. }) {
                h.phase = Phase::Stopping { release: true };
                let _ = h.stop.try_send(());
                tracing::debug!("partition {k}: stopping (leave)");
            }
        }
        for (k, (epoch, _)) in std::mem::take(&mut self.pending) {
            self.release(k, epoch);
        }
    }

    /// Waits up to [`POLL`] for the coordinator's events and applies them;
    /// a failed poll is logged and waited out.
    fn poll(&mut self, leaving: bool) {
        let before = Instant::now();
        let wait = u64::try_from(POLL.as_millis()).unwrap_or(50);
        match self.coordinator.poll(wait).into_result() {
            Ok(events) => {
                for event in events {
                    self.apply(event, before, leaving);
                }
            }
            Err(e) => {
                self.warn("polling", &e.message);
                std::thread::sleep(POLL);
            }
        }
    }

    fn warn(&mut self, what: &str, e: &str) {
        self.warned += 1;
        if self.warned <= 5 || self.warned.is_multiple_of(100) {
            tracing::warn!(
                "group {}: the coordinator failed {what}: {e} (warning #{})",
                self.settings.name,
                self.warned
            );
        }
    }

    /// One event of the coordinator's; `before`: when the poll began.
    fn apply(&mut self, event: PartitionEvent, before: Instant, leaving: bool) {
        let PartitionEvent { change, partition: k, epoch, valid_for_ms } = event;
        let until = deadline(before, valid_for_ms);
        match change {
            PartitionChange::ASSIGNED if leaving => {
                // Taken nothing more while leaving: give it straight back.
                self.release(k, epoch);
            }
            PartitionChange::ASSIGNED => self.assigned(k, epoch, until),
            PartitionChange::RENEWED => {
                if let Some(h) = self.held.get(&k).filter(|h| h.epoch == epoch) {
                    h.fence.extend(until);
                }
                if let Some((_, pending)) = self.pending.get_mut(&k).filter(|p| p.0 == epoch) {
                    *pending = (*pending).max(until);
                }
            }
            PartitionChange::REVOKED | PartitionChange::LOST
                if self.pending.get(&k).is_some_and(|p| p.0 == epoch) =>
            {
                // Never started: a revoke is released at once, a loss dropped.
                self.pending.remove(&k);
                if change == PartitionChange::REVOKED {
                    self.release(k, epoch);
                }
            }
            PartitionChange::REVOKED => {
                if let Some(h) = self.held.get_mut(&k).filter(|h| h.epoch == epoch) {
                    if !matches!(h.phase, Phase::Stopping { .. }) {
                        h.phase = Phase::Stopping { release: true };
                        let _ = h.stop.try_send(());
                    }
                }
            }
            PartitionChange::LOST => self.lost(k, epoch),
            other => tracing::debug!("partition {k}: an unknown change ({}) ignored", other.0),
        }
    }

    /// Partition `k` assigned as `epoch` until `until`: started, or, while
    /// its previous run still stops, started once that stopped.
    fn assigned(&mut self, k: u32, epoch: u64, until: Instant) {
        match self.held.get(&k) {
            Some(h) if matches!(h.phase, Phase::Stopping { .. }) => {
                tracing::debug!(
                    "partition {k}: assigned again (epoch {epoch}); it starts once its \
                     previous run (epoch {}) stopped",
                    h.epoch
                );
                self.pending.insert(k, (epoch, until));
            }
            Some(h) => tracing::warn!(
                "partition {k}: assigned (epoch {epoch}) while it still runs (epoch {}); \
                 ignored",
                h.epoch
            ),
            None => self.start(k, epoch, until),
        }
    }

    /// Partition `k`'s ownership of `epoch` lost to another host: its
    /// fence closes and it stops without committing or being released.
    fn lost(&mut self, k: u32, epoch: u64) {
        if let Some(h) = self.held.get_mut(&k).filter(|h| h.epoch == epoch) {
            h.fence.lose();
            self.counters.lost.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "partition {k}: its ownership of epoch {epoch} was lost to another host; \
                 stopping it without committing"
            );
            h.phase = Phase::Stopping { release: false };
            let _ = h.stop.try_send(());
        }
    }

    /// Starts partition `k` in a thread of its own, fenced by `epoch` until
    /// `until`.
    fn start(&mut self, k: u32, epoch: u64, until: Instant) {
        self.counters.taken.fetch_add(1, Ordering::Relaxed);
        let fence = Arc::new(Fence::new(k, epoch, until));
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
        let held = Held {
            epoch,
            fence: fence.clone(),
            phase: Phase::Starting,
            stop: stop_tx,
            handle: None,
        };
        self.held.insert(k, held);
        let partitions = self.partitions.clone();
        let events = self.events_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("__partition-{k}"))
            .spawn(move || run_partition(&*partitions, k, fence, &stop_rx, &events));
        if let Err(e) = spawned {
            let _ = self.events_tx.send(Event::Started(k, Err(PartitionError::Thread(e))));
        }
    }

    /// Handles what the partition threads reported.
    fn handle_events(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            match event {
                Event::Started(k, Ok(handle)) => {
                    if let Some(h) = self.held.get_mut(&k) {
                        if h.phase == Phase::Starting {
                            h.phase = Phase::Running;
                        }
                        h.handle = Some(handle);
                        tracing::info!("partition {k}: running (epoch {})", h.epoch);
                    }
                }
                Event::Started(k, Err(e)) => {
                    self.counters.start_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::error!("partition {k}: could not start: {e}");
                    self.finish(k, true);
                }
                Event::Stopped(k, error) => {
                    if let Some(e) = &error {
                        tracing::warn!("partition {k}: stopped with an error: {e}");
                    }
                    let release = match self.held.get(&k).map(|h| h.phase) {
                        Some(Phase::Stopping { release }) => release,
                        // It stopped on its own (a fatal error): let another try.
                        Some(_) => true,
                        None => false,
                    };
                    self.finish(k, release);
                }
            }
        }
    }

    /// `k` stopped (or never started): release it if asked and still ours.
    fn finish(&mut self, k: u32, release: bool) {
        let Some(h) = self.held.remove(&k) else { return };
        if release && !h.fence.is_lost() {
            self.release(k, h.epoch);
        }
        if let Some((epoch, until)) = self.pending.remove(&k) {
            self.start(k, epoch, until);
        }
    }

    fn release(&mut self, k: u32, epoch: u64) {
        match self.coordinator.released(k, epoch).into_result() {
            Ok(()) => {
                self.counters.released.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.warn(&format!("releasing partition {k}"), &e.message),
        }
    }

    /// Asks the coordinator for its view: the live members, this host's
    /// share and its counters (the fields `members`, `share` and `counters`
    /// of its status document; those it does not give stay as they were).
    fn read_view(&mut self) {
        let text = match self.coordinator.status().into_result() {
            Ok(text) => text,
            Err(e) => return tracing::debug!("group: the coordinator's view: {}", e.message),
        };
        let Ok(view) = serde_json::from_str::<serde_json::Value>(text.as_str()) else { return };
        if let Some(members) = view["members"].as_array() {
            self.view.0 = members.iter().filter_map(|m| m.as_str().map(str::to_owned)).collect();
        }
        if let Some(share) = view["share"].as_u64() {
            self.view.1 = u32::try_from(share).unwrap_or(u32::MAX);
        }
        let counters = &view["counters"];
        let c = &self.counters;
        for (name, cell) in [
            ("takeovers", &c.takeovers),
            ("renew_errors", &c.renew_errors),
            ("broker_requests", &*c.broker_requests),
        ] {
            if let Some(n) = counters[name].as_u64() {
                cell.store(n, Ordering::Relaxed);
            }
        }
    }

    /// Publishes the status.
    fn publish(&self) {
        let partitions = self
            .held
            .iter()
            .map(|(&partition, h)| PartitionStatus {
                partition,
                epoch: h.epoch,
                phase: match h.phase {
                    Phase::Starting => "starting",
                    Phase::Running => "running",
                    Phase::Stopping { .. } => "stopping",
                },
                last_checkpoint: h
                    .handle
                    .as_ref()
                    .and_then(|t| {
                        t.durable().map(|d| d.stats.last_committed.load(Ordering::Relaxed))
                    })
                    .unwrap_or(0),
            })
            .collect();
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        status.members.clone_from(&self.view.0);
        status.share = self.view.1;
        status.partitions = partitions;
    }
}

/// A partition's thread: start it, run it until told to stop (or until it
/// stops on its own), stop it gracefully, report.
fn run_partition(
    partitions: &dyn Partitions,
    k: u32,
    fence: Arc<Fence>,
    stop: &Receiver<()>,
    events: &Sender<Event>,
) {
    let running = match partitions.start(k, fence) {
        Ok(running) => running,
        Err(e) => {
            let _ = events.send(Event::Started(k, Err(e)));
            return;
        }
    };
    let handle = running.handle().clone();
    let _ = events.send(Event::Started(k, Ok(handle.clone())));
    loop {
        match stop.recv_timeout(Duration::from_millis(100)) {
            Ok(()) | Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if handle.state() != crate::control::RunState::Running {
                    break;
                }
            }
        }
    }
    let outcome = running.stop();
    let _ = events.send(Event::Stopped(k, outcome.error.map(|e| e.to_string())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_counts_from_before_the_poll_and_never_overflows() {
        let from = Instant::now();
        assert_eq!(deadline(from, 1500), from + Duration::from_millis(1500));
        assert!(deadline(from, u64::MAX) > from + Duration::from_secs(86_400 * 365));
    }
}
