//! One host's membership: the lease keeper's loop and the partitions it
//! runs.
//!
//! # The loop (one thread, `__group`, on its own current-thread runtime)
//! Every `lease / 4`:
//! 1. **Heartbeat**: `h.HOST` = `alive`.
//! 2. **Renew** every partition held (also while it starts or stops), each
//!    against the revision it last wrote. A success moves the partition's
//!    [`Fence`] to the time the renewal was sent plus the lease time, less
//!    an eighth for clock rates. A conflict means another host took it: the
//!    fence is lost at once (no more commits), and the partition stops
//!    without releasing.
//! 3. **Read** every partition's lease and every heartbeat, noting when each
//!    revision was first seen, and **plan** ([`View::plan`]).
//! 4. **Take** (compare-and-set, epoch + 1) and start a partition in a
//!    thread of its own; or **release**: stop it gracefully (its last
//!    checkpoint commits: it is still renewed), then write it released, so
//!    another host takes it at once. A take another host won first (the
//!    lowest free partitions are everyone's first choice) sends the host
//!    back to step 3 at once, for up to four rounds, so it still takes its
//!    share of what is free now rather than on its next turn.
//!
//! Between turns it handles what the partition threads report (started,
//! stopped) every 50 ms.
//!
//! A revision the host has not read before dates from when its watch saw
//! it written (or else from when the read returned), so a lease expires a
//! lease time after its last renewal was written, not after this host next
//! read it. Each read also foresees the next instant a lease of another
//! host, or its heartbeat, runs out unrenewed ([`View::next_expiry`]); the
//! first 50 ms step at or after it reads and acts, so a dead host's
//! partitions are taken at its leases' expiry, not up to a turn later.
//!
//! Steps 3 and 4 also come early, within those 50 ms, when a watch on the
//! bucket sees a change that moves partitions ([`Wakes`]): a partition
//! released, a host that joined, or one that is leaving or left. So a
//! released partition waits for its taker's restore, not for the taker's
//! next turn. Renewals, which every host writes every turn, wake nobody.
//! The watch also notes when it saw each revision (a release among them),
//! so a take on the taker's own turn says whether its read began before
//! the watch reported the release (the read came first) or after (the wake
//! was missed; the partition waited for the turn).
//!
//! At shutdown the heartbeat says `leaving` first (the others count this
//! host out of the shares at once, and take each partition as it is
//! released), every partition stops gracefully and is released, and the
//! heartbeat says `left`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};

use super::assign::{Action, LeaseValue, Seen, View};
use super::lease::{member_key, partition_key, LeaseError, Leases};
use crate::runtime::{RunningTopology, TopologyHandle};
use crate::state::Fence;

/// Builds and starts one partition's topology.
pub trait Partitions: Send + Sync + 'static {
    /// Starts partition `partition` fenced by `fence` (its state restored
    /// from the partition's namespace).
    ///
    /// # Errors
    /// Why it could not start, in one line.
    fn start(&self, partition: u32, fence: Arc<Fence>) -> Result<RunningTopology, String>;
}

/// A group member's settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The group.
    pub name: String,
    /// Its partition count.
    pub partitions: u32,
    /// The lease time.
    pub lease: Duration,
    /// The NATS server.
    pub url: String,
    /// The KV bucket.
    pub bucket: String,
    /// This host.
    pub host_id: String,
}

impl Settings {
    /// How often leases are renewed and the group read.
    pub fn turn(&self) -> Duration {
        self.lease / 4
    }

    /// How long after a renewal was sent this host relies on it.
    fn relied(&self) -> Duration {
        self.lease - self.lease / 8
    }
}

/// Counters of what the member did (`/metrics`, the final summary).
#[derive(Debug, Default)]
pub struct Counters {
    /// Partitions taken (free or expired).
    pub taken: AtomicU64,
    /// Of those, taken from a host whose lease expired.
    pub takeovers: AtomicU64,
    /// Partitions released after a graceful stop.
    pub released: AtomicU64,
    /// Leases lost to another host (found at a renewal).
    pub lost: AtomicU64,
    /// Partitions that could not start.
    pub start_failures: AtomicU64,
    /// Renewals that failed for another reason than a conflict.
    pub renew_errors: AtomicU64,
    /// Requests sent to the lease broker (reads, writes, key listings).
    pub broker_requests: Arc<AtomicU64>,
}

/// One partition as this host holds it, for status readers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionStatus {
    /// The partition.
    pub partition: u32,
    /// Its lease's epoch.
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
    /// The live members as last read.
    pub members: Vec<String>,
    /// This host's share at the last turn.
    pub share: u32,
    /// The partitions this host holds.
    pub partitions: Vec<PartitionStatus>,
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
    /// Connects to the broker and starts the member's thread.
    ///
    /// # Errors
    /// The broker cannot be reached, or the thread cannot start.
    pub fn start(settings: Settings, partitions: Arc<dyn Partitions>) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the group's runtime: {e}"))?;
        let timeout = settings.turn().clamp(Duration::from_millis(100), Duration::from_secs(2));
        let leases = runtime
            .block_on(Leases::open(&settings.url, &settings.bucket, timeout))
            .map_err(|e| format!("group {}: {e}", settings.name))?;
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(Status {
            group: settings.name.clone(),
            host: settings.host_id.clone(),
            ..Status::default()
        }));
        let counters =
            Arc::new(Counters { broker_requests: leases.requests(), ..Counters::default() });
        let (events_tx, events) = crossbeam_channel::unbounded();
        let wake = Arc::new(AtomicBool::new(false));
        let reports = Reports::default();
        let watcher = watch(
            leases.clone(),
            Wakes::new(settings.host_id.clone()),
            wake.clone(),
            reports.clone(),
            stop.clone(),
            settings.turn(),
        );
        let keeper = Keeper {
            view: View {
                me: settings.host_id.clone(),
                partitions: settings.partitions,
                lease: settings.lease,
                leases: BTreeMap::new(),
                members: BTreeMap::new(),
                held: BTreeSet::new(),
            },
            settings,
            leases,
            partitions,
            held: BTreeMap::new(),
            avoid: BTreeMap::new(),
            events_tx,
            events,
            stop: stop.clone(),
            wake,
            reports,
            expiry_due: None,
            prev_tick: Instant::now(),
            status: status.clone(),
            counters: counters.clone(),
            warned: 0,
        };
        let thread = std::thread::Builder::new()
            .name("__group".into())
            .spawn(move || {
                // The watch runs on the same thread, while the keeper sleeps
                // between its steps; it ends with the runtime.
                runtime.spawn(watcher);
                runtime.block_on(keeper.run());
            })
            .map_err(|e| format!("cannot start the group's thread: {e}"))?;
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
    /// releases them, says it left, and returns once all that is done.
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
    /// Stopping; `release` once it stopped (false when the lease was lost).
    Stopping {
        release: bool,
    },
}

/// A partition this host holds.
#[derive(Debug)]
struct Held {
    epoch: u64,
    revision: u64,
    fence: Arc<Fence>,
    phase: Phase,
    /// Tells the partition's thread to stop. A queue of one, written with
    /// `try_send`: one stop is enough, and the keeper must never block on
    /// it (a partition still starting reads it only once it started, and
    /// the keeper's renewals cannot wait that long).
    stop: Sender<()>,
    handle: Option<TopologyHandle>,
}

/// What a partition's thread reports.
#[derive(Debug)]
enum Event {
    Started(u32, Result<TopologyHandle, String>),
    Stopped(u32, Option<String>),
}

struct Keeper {
    settings: Settings,
    leases: Leases,
    partitions: Arc<dyn Partitions>,
    view: View,
    held: BTreeMap<u32, Held>,
    /// Partitions not to take again before the instant (they failed to start).
    avoid: BTreeMap<u32, Instant>,
    events_tx: Sender<Event>,
    events: Receiver<Event>,
    stop: Arc<AtomicBool>,
    /// Set by the watch: take a turn now.
    wake: Arc<AtomicBool>,
    /// What the watch saw: since when, and each key's last revision
    /// ([`Reports`]).
    reports: Reports,
    /// The next expiry the view foresees ([`View::next_expiry`]), as of
    /// the last read: a step of the loop at or after it reads and acts.
    expiry_due: Option<Instant>,
    /// When the loop's last step began (before the current one's).
    prev_tick: Instant,
    status: Arc<Mutex<Status>>,
    counters: Arc<Counters>,
    /// Broker errors logged so far (the first few, then every 100th).
    warned: u64,
}

impl Keeper {
    async fn run(mut self) {
        let s = &self.settings;
        tracing::info!(
            "group {}: host {} joins ({} partitions, lease {} ms, bucket {})",
            s.name,
            s.host_id,
            s.partitions,
            s.lease.as_millis(),
            self.leases.bucket()
        );
        let mut next_turn = Instant::now();
        let mut leaving = false;
        loop {
            self.handle_events().await;
            if self.stop.load(Ordering::SeqCst) && !leaving {
                leaving = true;
                // Counted out of the shares now, so the others take each
                // partition the moment it is released, not a turn later.
                let said = Bytes::from_static(b"leaving");
                if let Err(e) = self.leases.put(&member_key(&self.settings.host_id), said).await {
                    self.warn("saying this host is leaving", &e);
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
            }
            if leaving && self.held.is_empty() {
                let left = Bytes::from_static(b"left");
                if let Err(e) = self.leases.put(&member_key(&self.settings.host_id), left).await {
                    tracing::warn!("group: could not say this host left ({e}); it ages out");
                }
                tracing::info!("group {}: host {} left", self.settings.name, self.settings.host_id);
                self.publish(0);
                return;
            }
            let tick = Instant::now();
            if tick >= next_turn {
                next_turn = Instant::now() + self.settings.turn();
                // A pending wake is left for the turn's own read and plan
                // to take ([`Keeper::act`]).
                self.turn(leaving).await;
            } else if !leaving && self.wake.swap(false, Ordering::SeqCst) {
                // Something moved: read and act now; the renewals keep their pace.
                self.act(Cause::Wake).await;
            } else if !leaving && self.expiry_due.is_some_and(|due| tick >= due) {
                // A lease or a heartbeat ran out unrenewed: take it now,
                // not up to a turn later.
                self.act(Cause::Expiry).await;
            }
            self.prev_tick = tick;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn warn(&mut self, what: &str, e: &LeaseError) {
        self.warned += 1;
        if self.warned <= 5 || self.warned.is_multiple_of(100) {
            tracing::warn!("group {}: {what}: {e} (warning #{})", self.settings.name, self.warned);
        }
    }

    /// One turn: heartbeat, renewals, read, plan, act.
    async fn turn(&mut self, leaving: bool) {
        if !leaving {
            let alive = Bytes::from_static(b"alive");
            if let Err(e) = self.leases.put(&member_key(&self.settings.host_id), alive).await {
                self.warn("heartbeat", &e);
            }
        }
        self.renew().await;
        if leaving {
            self.publish(0);
            return;
        }
        self.act(Cause::Turn).await;
    }

    /// Reads the group, plans, and takes or releases. A take that another
    /// host won first (both read the same partitions free, and the lowest
    /// free ones are everyone's first choice) leaves this host short of its
    /// share: it reads and plans again at once, for a few rounds, rather
    /// than leave the partitions it could take idle until its next turn.
    async fn act(&mut self, cause: Cause) {
        let read_began = Instant::now();
        // A wake that came before this read is served by it, whichever
        // started the read: a turn that meets a pending wake acts on it.
        let cause = match cause {
            Cause::Turn if self.wake.swap(false, Ordering::SeqCst) => Cause::WakeOnTurn,
            other => other,
        };
        // What this read comes after: an expiry that was due, and whether
        // an earlier step of the loop had already come after it.
        let expiry = match self.expiry_due {
            Some(due) if due <= read_began && self.prev_tick < due => After::ExpiryFirst,
            Some(due) if due <= read_began => After::ExpiryMissed(read_began - due),
            _ => After::Nothing,
        };
        for _ in 0..4 {
            if !self.act_once(cause, read_began, expiry).await {
                break;
            }
        }
        self.expiry_due = self.view.next_expiry(Instant::now());
    }

    /// One read, plan and act; true when a take lost to another host.
    async fn act_once(&mut self, cause: Cause, read_began: Instant, expiry: After) -> bool {
        if let Err(e) = self.read().await {
            self.warn("reading the group", &e);
            return false;
        }
        let now = Instant::now();
        self.avoid.retain(|_, until| *until > now);
        self.view.held = self.held.keys().copied().collect();
        let busy: BTreeSet<u32> =
            self.held.iter().filter(|(_, h)| h.phase != Phase::Running).map(|(k, _)| *k).collect();
        let avoid: BTreeSet<u32> = self.avoid.keys().copied().collect();
        let share = self.view.share(now);
        let mut lost_a_race = false;
        for action in self.view.plan(now, &busy, &avoid) {
            match action {
                Action::Take { partition, revision, epoch, from } => {
                    let woken = matches!(cause, Cause::Wake | Cause::WakeOnTurn);
                    let after = match (revision, &from) {
                        // Taken over: what the read came after.
                        (_, Some(_)) if cause != Cause::Expiry => expiry,
                        // A released lease: how this host learnt of it.
                        (Some(released), None) if !woken => {
                            let key = partition_key(partition);
                            let seen = self.reports.written_at(&key, released);
                            match (seen, self.reports.watching_since()) {
                                (Some(at), _) if at <= read_began => {
                                    After::ReleaseMissed(read_began - at)
                                }
                                (_, Some(since)) if since <= read_began => After::BeforeReport,
                                _ => After::Unwatched,
                            }
                        }
                        _ => After::Nothing,
                    };
                    let how = Learnt { cause, after };
                    lost_a_race |= self.take(partition, revision, epoch, from, how).await;
                }
                Action::Release { partition } => {
                    if let Some(h) = self.held.get_mut(&partition) {
                        tracing::info!(
                            "partition {partition}: giving it up (share {share}); stopping it, \
                             then releasing it"
                        );
                        h.phase = Phase::Stopping { release: true };
                        let _ = h.stop.try_send(());
                    }
                }
            }
        }
        self.publish(share);
        lost_a_race
    }

    fn lease_value(&self, epoch: u64, owned: bool) -> Bytes {
        let value = LeaseValue { owner: owned.then(|| self.settings.host_id.clone()), epoch };
        Bytes::from(serde_json::to_vec(&value).unwrap_or_default())
    }

    /// Renews every held lease; a conflict loses the partition.
    async fn renew(&mut self) {
        let keys: Vec<u32> = self.held.keys().copied().collect();
        for k in keys {
            let Some(h) = self.held.get(&k) else { continue };
            if h.fence.is_lost() {
                continue;
            }
            let (epoch, revision) = (h.epoch, h.revision);
            let sent = Instant::now();
            let value = self.lease_value(epoch, true);
            match self.leases.update(&partition_key(k), value, revision).await {
                Ok(new) => {
                    if let Some(h) = self.held.get_mut(&k) {
                        h.revision = new;
                        h.fence.extend(sent + self.settings.relied());
                    }
                }
                Err(LeaseError::Conflict) => self.lose(k),
                Err(e) => {
                    self.counters.renew_errors.fetch_add(1, Ordering::Relaxed);
                    self.warn(&format!("renewing partition {k}"), &e);
                }
            }
        }
    }

    /// Another host holds `k` now: no more commits, stop without releasing.
    fn lose(&mut self, k: u32) {
        let Some(h) = self.held.get_mut(&k) else { return };
        h.fence.lose();
        self.counters.lost.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "partition {k}: the lease of epoch {} was lost to another host; stopping it \
             without committing",
            h.epoch
        );
        h.phase = Phase::Stopping { release: false };
        let _ = h.stop.try_send(());
    }

    /// Reads every lease and heartbeat into the view.
    ///
    /// A revision not seen before dates from when the watch saw it written,
    /// or else from when its read returned: never before it was written,
    /// so its writer's [`Fence`] (the time it sent the write plus less than
    /// a lease) always ends before this host may take it.
    async fn read(&mut self) -> Result<(), LeaseError> {
        for k in 0..self.settings.partitions {
            let key = partition_key(k);
            let read = self.leases.read(&key).await?;
            let now = Instant::now();
            let seen = read.and_then(|(revision, bytes)| {
                let value: LeaseValue = serde_json::from_slice(&bytes).ok()?;
                let since = match self.view.leases.get(&k) {
                    Some(Some(old)) if old.revision == revision => old.since,
                    _ => self.reports.dated(&key, revision, now),
                };
                Some(Seen { revision, value, since })
            });
            self.view.leases.insert(k, seen);
        }
        let mut members = BTreeMap::new();
        for key in self.leases.keys("h.").await? {
            let Some((revision, bytes)) = self.leases.read(&key).await? else { continue };
            let now = Instant::now();
            let id = key["h.".len()..].to_owned();
            let since = match self.view.members.get(&id) {
                Some(old) if old.revision == revision => old.since,
                _ => self.reports.dated(&key, revision, now),
            };
            members.insert(id, Seen { revision, value: bytes.as_ref() == b"alive", since });
        }
        self.view.members = members;
        Ok(())
    }

    /// Takes partition `k` (compare-and-set) and starts it; true when
    /// another host took it first.
    async fn take(
        &mut self,
        k: u32,
        revision: Option<u64>,
        epoch: u64,
        from: Option<String>,
        how: Learnt,
    ) -> bool {
        let sent = Instant::now();
        let value = self.lease_value(epoch, true);
        let key = partition_key(k);
        let result = match revision {
            None => self.leases.create(&key, value).await,
            Some(r) => self.leases.update(&key, value, r).await,
        };
        let revision = match result {
            Ok(r) => r,
            Err(LeaseError::Conflict) => {
                tracing::debug!("partition {k}: another host took it first");
                return true;
            }
            Err(e) => {
                self.warn(&format!("taking partition {k}"), &e);
                return false;
            }
        };
        self.counters.taken.fetch_add(1, Ordering::Relaxed);
        match &from {
            Some(old) => {
                self.counters.takeovers.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("{}", takeover_line(k, old, epoch, &how));
            }
            None => tracing::info!("partition {k}: taken (epoch {epoch}) {how}"),
        }
        let fence = Arc::new(Fence::new(k, epoch, sent + self.settings.relied()));
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
        self.held.insert(
            k,
            Held {
                epoch,
                revision,
                fence: fence.clone(),
                phase: Phase::Starting,
                stop: stop_tx,
                handle: None,
            },
        );
        let partitions = self.partitions.clone();
        let events = self.events_tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("__partition-{k}"))
            .spawn(move || run_partition(&*partitions, k, fence, &stop_rx, &events));
        if let Err(e) = spawned {
            let _ = self.events_tx.send(Event::Started(k, Err(format!("no thread: {e}"))));
        }
        false
    }

    /// Handles what the partition threads reported.
    async fn handle_events(&mut self) {
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
                    let wait = self.settings.lease * 3;
                    self.avoid.insert(k, Instant::now() + wait);
                    self.finish(k, true).await;
                }
                Event::Stopped(k, error) => {
                    if let Some(e) = &error {
                        tracing::warn!("partition {k}: stopped with an error: {e}");
                    }
                    let release = match self.held.get(&k).map(|h| h.phase) {
                        Some(Phase::Stopping { release }) => release,
                        // It stopped on its own (a fatal error): let another try.
                        Some(_) => {
                            let wait = self.settings.lease * 3;
                            self.avoid.insert(k, Instant::now() + wait);
                            true
                        }
                        None => false,
                    };
                    self.finish(k, release).await;
                }
            }
        }
    }

    /// `k` stopped (or never started): release it if asked and still ours.
    async fn finish(&mut self, k: u32, release: bool) {
        let Some(h) = self.held.remove(&k) else { return };
        if !release || h.fence.is_lost() {
            return;
        }
        let value = self.lease_value(h.epoch, false);
        match self.leases.update(&partition_key(k), value, h.revision).await {
            Ok(_) => {
                self.counters.released.fetch_add(1, Ordering::Relaxed);
                tracing::info!("partition {k}: released (epoch {})", h.epoch);
            }
            Err(LeaseError::Conflict) => {
                tracing::warn!("partition {k}: taken by another host before it was released");
            }
            Err(e) => self.warn(&format!("releasing partition {k} (it expires instead)"), &e),
        }
    }

    /// Publishes the status.
    fn publish(&self, share: u32) {
        let now = Instant::now();
        let members = self.view.live(now).into_iter().map(str::to_owned).collect();
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
        status.members = members;
        status.share = share;
        status.partitions = partitions;
    }
}

/// Which changes in the bucket call for a turn now: those that move
/// partitions. A pure filter, tested without a broker.
#[derive(Debug)]
struct Wakes {
    me: String,
    /// The other hosts last seen `alive`.
    alive: BTreeSet<String>,
}

impl Wakes {
    fn new(me: String) -> Self {
        Self { me, alive: BTreeSet::new() }
    }

    /// Whether `key` written with `value` moves partitions: a partition
    /// released (no owner), another host's first `alive` (it joined: the
    /// others give up their excess), or its `leaving` or `left` (the others
    /// take its share). Renewals and repeated heartbeats do not.
    fn wakes(&mut self, key: &str, value: &[u8]) -> bool {
        if key.starts_with("p.") {
            return released(key, value).is_some();
        }
        let Some(host) = key.strip_prefix("h.") else { return false };
        if host == self.me {
            return false;
        }
        if value == b"alive" {
            self.alive.insert(host.to_owned())
        } else {
            self.alive.remove(host) || value == b"leaving"
        }
    }
}

/// What made a host read the group and act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// Its turn, every `lease_ms / 4`.
    Turn,
    /// The watch saw a change that moves partitions.
    Wake,
    /// The watch saw such a change, and this host's turn began before the
    /// step between turns could act on it: the turn's read served the wake.
    WakeOnTurn,
    /// A lease of another host, or its heartbeat, reached the end of its
    /// lease time unrenewed (as the view foresaw it: [`View::next_expiry`]).
    Expiry,
}

impl Cause {
    /// How a take's log line begins to say it.
    fn said(self) -> &'static str {
        match self {
            Cause::Turn => "on its turn",
            Cause::Wake => "at once, woken by the watch",
            Cause::WakeOnTurn => {
                "on its turn, which came first after the watch woke it (woken by the watch)"
            }
            Cause::Expiry => "at the expiry it foresaw",
        }
    }
}

/// How a host came to take a partition, as its log line says it: the
/// [`Cause`] of the read that found it free, and what that read came after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Learnt {
    cause: Cause,
    after: After,
}

/// What the read that found a partition free came after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Nothing to say: a wake served it, or the partition was never taken.
    Nothing,
    /// A release: the read began before the watch reported it, so the read
    /// found it first.
    BeforeReport,
    /// A release: the read began before the watch was watching (the host
    /// had just joined, or its watch was starting again).
    Unwatched,
    /// A release the watch had reported this long before the read began,
    /// and no wake served it.
    ReleaseMissed(Duration),
    /// An expiry (a takeover): the read began after the expiry that was
    /// due, and it was the first step of the loop to come after it.
    ExpiryFirst,
    /// An expiry that was due this long before the read began, when an
    /// earlier step of the loop had come after it and no timer served it.
    ExpiryMissed(Duration),
}

impl std::fmt::Display for Learnt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.cause.said())?;
        match self.after {
            After::Nothing => Ok(()),
            After::BeforeReport => {
                f.write_str(", whose read began before the watch reported the release")
            }
            After::Unwatched => f.write_str(", whose read began before the watch was watching"),
            After::ReleaseMissed(d) => write!(
                f,
                ", {} ms after the watch reported the release (no wake served it)",
                d.as_millis()
            ),
            After::ExpiryFirst => f.write_str(", which came first after the expiry was due"),
            After::ExpiryMissed(d) => {
                write!(f, ", {} ms after the expiry was due (no timer served it)", d.as_millis())
            }
        }
    }
}

/// What the watch saw: since when it has been watching, and when it saw
/// each key's last revision (a release is the revision a take replaces).
/// Written by the watch and read by the keeper, on the same thread.
#[derive(Debug, Clone, Default)]
struct Reports(Arc<Mutex<Watched>>);

/// The contents of [`Reports`].
#[derive(Debug, Default)]
struct Watched {
    watching: Option<Instant>,
    /// Key: its last revision and when it was seen.
    written: BTreeMap<String, (u64, Instant)>,
}

impl Reports {
    fn lock(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The watch is watching from now (`true`) or no longer (`false`).
    fn watching(&self, on: bool) {
        self.lock().watching = on.then(Instant::now);
    }

    fn watching_since(&self) -> Option<Instant> {
        self.lock().watching
    }

    /// The watch saw `key` written at `revision` now.
    fn written(&self, key: &str, revision: u64) {
        let now = Instant::now();
        let mut watched = self.lock();
        match watched.written.get_mut(key) {
            Some(last) => *last = (revision, now),
            None => {
                watched.written.insert(key.to_owned(), (revision, now));
            }
        }
    }

    /// When the watch saw `key` written at `revision`.
    fn written_at(&self, key: &str, revision: u64) -> Option<Instant> {
        self.lock().written.get(key).filter(|(r, _)| *r == revision).map(|(_, at)| *at)
    }

    /// When `key`'s `revision`, read at `read`, was first seen: when the
    /// watch saw it written, if that was earlier, else `read`.
    fn dated(&self, key: &str, revision: u64, read: Instant) -> Instant {
        self.written_at(key, revision).map_or(read, |at| at.min(read))
    }
}

/// The partition and epoch of a lease written released (no owner).
fn released(key: &str, value: &[u8]) -> Option<(u32, u64)> {
    let k = key.strip_prefix("p.")?.parse().ok()?;
    let v: LeaseValue = serde_json::from_slice(value).ok()?;
    v.owner.is_none().then_some((k, v.epoch))
}

/// Watches the bucket and sets `wake` at each change that moves
/// partitions, until `stop`. A watch that ends (the broker went away) is
/// started again after a turn; meanwhile the turns still come on time.
async fn watch(
    leases: Leases,
    mut wakes: Wakes,
    wake: Arc<AtomicBool>,
    reports: Reports,
    stop: Arc<AtomicBool>,
    turn: Duration,
) {
    while !stop.load(Ordering::SeqCst) {
        if let Ok(mut changes) = leases.watch().await {
            reports.watching(true);
            tracing::debug!("group: the watch is watching the leases");
            while let Some((key, revision, value)) = changes.next().await {
                reports.written(&key, revision);
                if wakes.wakes(&key, &value) {
                    wake.store(true, Ordering::SeqCst);
                }
                if let Some((k, epoch)) = released(&key, &value) {
                    tracing::debug!("group: the watch saw partition {k} released (epoch {epoch})");
                }
            }
            reports.watching(false);
            tracing::debug!("group: the watch ended; it starts again after a turn");
        }
        tokio::time::sleep(turn).await;
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

/// The log line of a takeover: the lease that expired is `old`'s, of the
/// epoch before `epoch` (a take raises the epoch by one), and this host
/// now holds `epoch`.
fn takeover_line(k: u32, old: &str, epoch: u64, how: &impl std::fmt::Display) -> String {
    format!(
        "partition {k}: taken over from {old}, whose lease expired (epoch {}); this host holds \
         epoch {epoch}, {how}",
        epoch.saturating_sub(1)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_takeover_names_the_epoch_that_expired_and_the_new_one() {
        let how = Learnt { cause: Cause::Expiry, after: After::Nothing };
        let line = takeover_line(3, "h1", 8, &how);
        assert!(
            line.starts_with(
                "partition 3: taken over from h1, whose lease expired (epoch 7); this host holds \
                 epoch 8, "
            ),
            "{line}"
        );
    }

    fn lease(owner: Option<&str>, epoch: u64) -> Vec<u8> {
        serde_json::to_vec(&LeaseValue { owner: owner.map(str::to_owned), epoch }).unwrap()
    }

    #[test]
    fn a_release_wakes_and_a_renewal_or_a_take_does_not() {
        let mut w = Wakes::new("h0".into());
        assert!(w.wakes("p.3", &lease(None, 4)));
        assert!(!w.wakes("p.3", &lease(Some("h1"), 5)));
        assert!(!w.wakes("p.3", &lease(Some("h1"), 5)));
        assert!(!w.wakes("p.3", b"not json"));
    }

    #[test]
    fn a_join_wakes_once_and_a_leave_wakes_whether_or_not_the_join_was_seen() {
        let mut w = Wakes::new("h0".into());
        assert!(w.wakes("h.h1", b"alive"), "a host first seen alive joined");
        assert!(!w.wakes("h.h1", b"alive"), "its next heartbeats are renewals");
        assert!(w.wakes("h.h1", b"leaving"));
        assert!(!w.wakes("h.h1", b"left"), "already counted out when it said leaving");
        assert!(w.wakes("h.h1", b"alive"), "it came back");
        assert!(w.wakes("h.h1", b"left"), "left without saying leaving (an older host)");
        assert!(w.wakes("h.h2", b"leaving"), "a leave seen before any heartbeat");
    }

    #[test]
    fn this_hosts_own_heartbeats_and_other_keys_wake_nobody() {
        let mut w = Wakes::new("h0".into());
        assert!(!w.wakes("h.h0", b"alive"));
        assert!(!w.wakes("h.h0", b"leaving"));
        assert!(!w.wakes("x.y", b"alive"));
    }

    #[test]
    fn the_watch_reports_releases_and_revisions_and_a_take_says_what_its_read_came_after() {
        assert_eq!(released("p.3", &lease(None, 4)), Some((3, 4)));
        assert_eq!(released("p.3", &lease(Some("h1"), 5)), None, "a take or a renewal");
        assert_eq!(released("p.x", &lease(None, 4)), None);
        let reports = Reports::default();
        let before = Instant::now();
        assert_eq!(reports.written_at("p.3", 7), None);
        reports.watching(true);
        reports.written("p.3", 7);
        let at = reports.written_at("p.3", 7).expect("noted");
        assert!(at >= before && reports.watching_since().is_some_and(|w| w <= at));
        reports.watching(false);
        assert_eq!(reports.watching_since(), None);
        let late =
            Learnt { cause: Cause::Turn, after: After::ReleaseMissed(Duration::from_millis(461)) };
        assert_eq!(
            late.to_string(),
            "on its turn, 461 ms after the watch reported the release (no wake served it)"
        );
        reports.written("p.3", 9);
        let seen = reports.written_at("p.3", 9).expect("noted");
        assert_eq!(reports.written_at("p.3", 8), None, "only the revision last seen");
        reports.written("p.3", 10);
        assert!(reports.written_at("p.3", 10).is_some_and(|at| at >= seen));
        assert_eq!(reports.written_at("p.3", 9), None);
        let missed =
            Learnt { cause: Cause::Turn, after: After::ExpiryMissed(Duration::from_millis(300)) };
        assert_eq!(
            missed.to_string(),
            "on its turn, 300 ms after the expiry was due (no timer served it)"
        );
        let timer = Learnt { cause: Cause::Expiry, after: After::Nothing };
        assert_eq!(timer.to_string(), "at the expiry it foresaw");
    }
}
