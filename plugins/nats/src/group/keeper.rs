//! One host's membership in the leases: the keeper's steps, which
//! [`JetStreamLeases::poll`](super::JetStreamLeases) runs one at a time on
//! the host's group thread, on the coordinator's own current-thread runtime.
//!
//! # A step
//! Every `lease / 4` a turn:
//! 1. **Heartbeat**: `h.HOST` = `alive`.
//! 2. **Renew** every partition held (also while the host stops it), each
//!    against the revision it last wrote. A success is reported
//!    [`RENEWED`](PartitionChange::RENEWED), valid until the time the
//!    renewal was sent plus the lease time, less an eighth for clock rates.
//!    A conflict means another host took it: it is reported
//!    [`LOST`](PartitionChange::LOST) (the host stops it at once, and its
//!    fence refuses any further commit).
//! 3. **Read** every partition's lease and every heartbeat, noting when each
//!    revision was first seen, and **plan** ([`View::plan`]).
//! 4. **Take** (compare-and-set, epoch + 1) and report it
//!    [`ASSIGNED`](PartitionChange::ASSIGNED); or **revoke**: report it
//!    [`REVOKED`](PartitionChange::REVOKED), keep renewing it while the
//!    host stops it gracefully, and write it released when the host says
//!    it was (`released`), so another host takes it at once. A take
//!    another host won first (the lowest free partitions are everyone's
//!    first choice) sends the keeper back to step 3 at once, for up to
//!    four rounds.
//!
//! Between turns (the host polls every 50 ms) a step reads and acts early
//! when the watch on the bucket saw a change that moves partitions
//! ([`Wakes`]: a partition released, a host that joined, or one that is
//! leaving or left), or when a lease of another host, or its heartbeat,
//! runs out unrenewed ([`View::next_expiry`]). A revision not read before
//! dates from when the watch saw it written (or else from when the read
//! returned), so a lease expires a lease time after its last renewal was
//! written, not after this host next read it.
//!
//! A partition the host releases without a revoke (it could not start, or
//! stopped on its own) is not taken again for three lease times.
//!
//! At `leave` the heartbeat says `leaving` (the others count this host out
//! of the shares at once, and take each partition as it is released); the
//! keeper takes nothing more and keeps renewing until the host released
//! every partition, then the heartbeat says `left`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_plugin_api::abi::{PartitionChange, PartitionEvent};

use super::assign::{Action, LeaseValue, Seen, View};
use super::lease::{member_key, partition_key, LeaseError, Leases};

/// A member's settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// The group.
    pub name: String,
    /// Its partition count.
    pub partitions: u32,
    /// The lease time.
    pub lease: Duration,
    /// This host.
    pub host_id: String,
}

impl Settings {
    /// How often leases are renewed and the group read.
    pub fn turn(&self) -> Duration {
        self.lease / 4
    }

    /// How long after a renewal was sent the host may rely on it.
    fn relied(&self) -> Duration {
        self.lease - self.lease / 8
    }
}

/// What the keeper counted (the host's `/metrics` shows them through
/// `status`).
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub(crate) struct Counters {
    /// Partitions taken from a host whose lease expired.
    pub takeovers: u64,
    /// Renewals that failed for another reason than a conflict.
    pub renew_errors: u64,
}

/// A partition this host holds.
#[derive(Debug)]
struct Held {
    epoch: u64,
    revision: u64,
    /// Revoked: the host is stopping it, and releases it when done.
    revoked: bool,
}

/// A change for the host, its deadline still an instant.
#[derive(Debug, Clone, Copy)]
struct Change {
    change: PartitionChange,
    partition: u32,
    epoch: u64,
    until: Option<Instant>,
}

/// The keeper: the view, what this host holds, and what changed since the
/// host last polled.
pub(crate) struct Keeper {
    settings: Settings,
    leases: Leases,
    view: View,
    held: BTreeMap<u32, Held>,
    /// Partitions not to take again before the instant (the host gave them
    /// up without a revoke).
    avoid: BTreeMap<u32, Instant>,
    /// Set by the watch: take a step now.
    wake: Arc<AtomicBool>,
    /// What the watch saw ([`Reports`]).
    reports: Reports,
    /// Ends the watch.
    stop: Arc<AtomicBool>,
    /// The next expiry the view foresees, as of the last read.
    expiry_due: Option<Instant>,
    /// When the previous step began.
    prev_tick: Instant,
    next_turn: Instant,
    leaving: bool,
    left: bool,
    share: u32,
    counters: Counters,
    /// Broker errors logged so far (the first few, then every 100th).
    warned: u64,
    changes: Vec<Change>,
}

impl std::fmt::Debug for Keeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Logs that this host joins the group.
fn log_join(settings: &Settings, leases: &Leases) {
    squall_plugin_api::info!(
        "group {}: host {} joins ({} partitions, lease {} ms, bucket {})",
        settings.name,
        settings.host_id,
        settings.partitions,
        settings.lease.as_millis(),
        leases.bucket()
    );
}

impl View {
    /// The view of host `settings.host_id` before the first read: no
    /// leases, no members.
    fn empty(settings: &Settings) -> Self {
        View {
            me: settings.host_id.clone(),
            partitions: settings.partitions,
            lease: settings.lease,
            leases: BTreeMap::new(),
            members: BTreeMap::new(),
            held: BTreeSet::new(),
        }
    }
}

impl Keeper {
    /// A keeper over `leases`, and the watch that wakes it (to spawn on the
    /// same runtime).
    pub fn new(
        settings: Settings,
        leases: Leases,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let wake = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let reports = Reports::default();
        let watcher = watch(
            leases.clone(),
            Wakes::new(settings.host_id.clone()),
            wake.clone(),
            reports.clone(),
            stop.clone(),
            settings.turn(),
        );
        log_join(&settings, &leases);
        let keeper = Keeper {
            view: View::empty(&settings),
            settings,
            leases,
            held: BTreeMap::new(),
            avoid: BTreeMap::new(),
            wake,
            reports,
            stop,
            expiry_due: None,
            prev_tick: Instant::now(),
            next_turn: Instant::now(),
            leaving: false,
            left: false,
            share: 0,
            counters: Counters::default(),
            warned: 0,
            changes: Vec::new(),
        };
        (keeper, watcher)
    }

    /// One step: a turn when one is due, else a read and plan when the
    /// watch woke the keeper or an expiry is due.
    pub async fn step(&mut self) {
        let tick = Instant::now();
        if tick >= self.next_turn {
            self.next_turn = tick + self.settings.turn();
            // A pending wake is left for the turn's own read and plan to
            // take ([`Keeper::act`]).
            self.turn().await;
        } else if !self.leaving && self.wake.swap(false, Ordering::SeqCst) {
            // Something moved: read and act now; the renewals keep their pace.
            self.act(Cause::Wake).await;
        } else if !self.leaving && self.expiry_due.is_some_and(|due| tick >= due) {
            // A lease or a heartbeat ran out unrenewed: take it now, not up
            // to a turn later.
            self.act(Cause::Expiry).await;
        }
        self.prev_tick = tick;
    }

    /// True when changes wait for the host.
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// The changes since the last call; each deadline counted from now.
    pub fn drain(&mut self) -> Vec<PartitionEvent> {
        let now = Instant::now();
        self.changes
            .drain(..)
            .map(|c| PartitionEvent {
                change: c.change,
                partition: c.partition,
                epoch: c.epoch,
                valid_for_ms: c.until.map_or(0, |until| {
                    // Rounded down: the host never relies on a renewal longer
                    // than the keeper does.
                    u64::try_from(until.saturating_duration_since(now).as_millis())
                        .unwrap_or(u64::MAX)
                }),
            })
            .collect()
    }

    fn push(
        &mut self,
        change: PartitionChange,
        partition: u32,
        epoch: u64,
        until: Option<Instant>,
    ) {
        self.changes.push(Change { change, partition, epoch, until });
    }

    fn warn(&mut self, what: &str, e: &LeaseError) {
        self.warned += 1;
        if self.warned <= 5 || self.warned.is_multiple_of(100) {
            squall_plugin_api::warn!(
                "group {}: {what}: {e} (warning #{})",
                self.settings.name,
                self.warned
            );
        }
    }

    /// One turn: heartbeat, renewals, read, plan, act.
    async fn turn(&mut self) {
        if !self.leaving {
            let alive = Bytes::from_static(b"alive");
            if let Err(e) = self.leases.put(&member_key(&self.settings.host_id), alive).await {
                self.warn("heartbeat", &e);
            }
        }
        self.renew().await;
        if self.leaving {
            if self.held.is_empty() {
                self.say_left().await;
            }
            return;
        }
        self.act(Cause::Turn).await;
    }

    /// Reads the group, plans, and takes or revokes. A take that another
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
        // an earlier step had already come after it.
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
            self.held.iter().filter(|(_, h)| h.revoked).map(|(k, _)| *k).collect();
        let avoid: BTreeSet<u32> = self.avoid.keys().copied().collect();
        let share = self.view.share(now);
        let mut lost_a_race = false;
        for action in self.view.plan(now, &busy, &avoid) {
            match action {
                Action::Take { partition, revision, epoch, from } => {
                    let after = self.learnt(cause, read_began, expiry, partition, revision, &from);
                    let how = Learnt { cause, after };
                    lost_a_race |= self.take(partition, revision, epoch, from, how).await;
                }
                Action::Release { partition } => {
                    if let Some(h) = self.held.get_mut(&partition) {
                        squall_plugin_api::info!(
                            "partition {partition}: giving it up (share {share}); stopping it, \
                             then releasing it"
                        );
                        h.revoked = true;
                        let epoch = h.epoch;
                        self.push(PartitionChange::REVOKED, partition, epoch, None);
                    }
                }
            }
        }
        self.share = share;
        lost_a_race
    }

    /// What the read that found `partition` free came after.
    fn learnt(
        &self,
        cause: Cause,
        read_began: Instant,
        expiry: After,
        partition: u32,
        revision: Option<u64>,
        from: &Option<String>,
    ) -> After {
        let woken = matches!(cause, Cause::Wake | Cause::WakeOnTurn);
        match (revision, from) {
            // Taken over: what the read came after.
            (_, Some(_)) if cause != Cause::Expiry => expiry,
            // A released lease: how this host learnt of it.
            (Some(released), None) if !woken => {
                let key = partition_key(partition);
                let seen = self.reports.written_at(&key, released);
                match (seen, self.reports.watching_since()) {
                    (Some(at), _) if at <= read_began => After::ReleaseMissed(read_began - at),
                    (_, Some(since)) if since <= read_began => After::BeforeReport,
                    _ => After::Unwatched,
                }
            }
            _ => After::Nothing,
        }
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
            let (epoch, revision) = (h.epoch, h.revision);
            let sent = Instant::now();
            let value = self.lease_value(epoch, true);
            match self.leases.update(&partition_key(k), value, revision).await {
                Ok(new) => {
                    if let Some(h) = self.held.get_mut(&k) {
                        h.revision = new;
                        let until = sent + self.settings.relied();
                        self.push(PartitionChange::RENEWED, k, epoch, Some(until));
                    }
                }
                Err(LeaseError::Conflict) => self.lose(k),
                Err(e) => {
                    self.counters.renew_errors += 1;
                    self.warn(&format!("renewing partition {k}"), &e);
                }
            }
        }
    }

    /// Another host holds `k` now: the host stops it without committing.
    fn lose(&mut self, k: u32) {
        let Some(h) = self.held.remove(&k) else { return };
        squall_plugin_api::warn!(
            "partition {k}: a renewal found the lease of epoch {} rewritten by another host",
            h.epoch
        );
        self.push(PartitionChange::LOST, k, h.epoch, None);
    }

    /// Reads every lease and heartbeat into the view.
    ///
    /// A revision not seen before dates from when the watch saw it written,
    /// or else from when its read returned: never before it was written,
    /// so its writer's deadline (the time it sent the write plus less than
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

    /// Takes partition `k` (compare-and-set) and reports it assigned; true
    /// when another host took it first.
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
                squall_plugin_api::debug!("partition {k}: another host took it first");
                return true;
            }
            Err(e) => {
                self.warn(&format!("taking partition {k}"), &e);
                return false;
            }
        };
        match &from {
            Some(old) => {
                self.counters.takeovers += 1;
                squall_plugin_api::warn!("{}", takeover_line(k, old, epoch, &how));
            }
            None => squall_plugin_api::info!("partition {k}: taken (epoch {epoch}) {how}"),
        }
        self.held.insert(k, Held { epoch, revision, revoked: false });
        let until = sent + self.settings.relied();
        self.push(PartitionChange::ASSIGNED, k, epoch, Some(until));
        false
    }

    /// The host stopped `k` (held under `epoch`): write it released, so
    /// another host takes it at once. A partition released without a revoke
    /// (it could not start, or stopped on its own) is not taken again for
    /// three lease times.
    pub async fn released(&mut self, k: u32, epoch: u64) {
        if self.held.get(&k).is_none_or(|h| h.epoch != epoch) {
            return;
        }
        let Some(h) = self.held.remove(&k) else { return };
        if !h.revoked && !self.leaving {
            self.avoid.insert(k, Instant::now() + self.settings.lease * 3);
        }
        let value = self.lease_value(h.epoch, false);
        match self.leases.update(&partition_key(k), value, h.revision).await {
            Ok(_) => squall_plugin_api::info!("partition {k}: released (epoch {})", h.epoch),
            Err(LeaseError::Conflict) => {
                squall_plugin_api::warn!(
                    "partition {k}: taken by another host before it was released"
                );
            }
            Err(e) => self.warn(&format!("releasing partition {k} (it expires instead)"), &e),
        }
        if self.leaving && self.held.is_empty() {
            self.say_left().await;
        }
    }

    /// This host is leaving: counted out of the shares now, so the others
    /// take each partition the moment it is released; nothing more is taken.
    pub async fn leave(&mut self) {
        if self.leaving {
            return;
        }
        self.leaving = true;
        let said = Bytes::from_static(b"leaving");
        if let Err(e) = self.leases.put(&member_key(&self.settings.host_id), said).await {
            self.warn("saying this host is leaving", &e);
        }
        squall_plugin_api::info!(
            "group {}: leaving; the host stops {} partitions gracefully, then they are released",
            self.settings.name,
            self.held.len()
        );
        if self.held.is_empty() {
            self.say_left().await;
        }
    }

    async fn say_left(&mut self) {
        if self.left {
            return;
        }
        self.left = true;
        let left = Bytes::from_static(b"left");
        if let Err(e) = self.leases.put(&member_key(&self.settings.host_id), left).await {
            squall_plugin_api::warn!("group: could not say this host left ({e}); it ages out");
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    /// This member's view, as `status` gives it while joined.
    pub fn status(&self) -> serde_json::Value {
        let members: Vec<&str> = self.view.live(Instant::now()).into_iter().collect();
        serde_json::json!({
            "group": self.settings.name,
            "host": self.settings.host_id,
            "bucket": self.leases.bucket(),
            "lease_ms": u64::try_from(self.settings.lease.as_millis()).unwrap_or(u64::MAX),
            "members": if self.left { Vec::new() } else { members },
            "share": if self.leaving { 0 } else { self.share },
            "counters": {
                "takeovers": self.counters.takeovers,
                "renew_errors": self.counters.renew_errors,
                "broker_requests": self.leases.requests().load(Ordering::Relaxed),
            },
        })
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
            // Info, not debug: an operator (and the group tests) can tell a
            // take served by the watch from one that waited for a turn.
            squall_plugin_api::info!("group: the watch is watching the leases");
            while let Some((key, revision, value)) = changes.next().await {
                reports.written(&key, revision);
                if wakes.wakes(&key, &value) {
                    wake.store(true, Ordering::SeqCst);
                }
                if let Some((k, epoch)) = released(&key, &value) {
                    squall_plugin_api::info!(
                        "group: the watch saw partition {k} released (epoch {epoch})"
                    );
                }
            }
            reports.watching(false);
            squall_plugin_api::debug!("group: the watch ended; it starts again after a turn");
        }
        tokio::time::sleep(turn).await;
    }
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
