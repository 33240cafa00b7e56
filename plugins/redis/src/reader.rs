//! The spout's I/O thread: the only code that talks to Redis for a
//! [`StreamSpout`](crate::StreamSpout) task.
//!
//! One blocking connection, one thread, no async runtime. The thread loops:
//! apply the spout's commands (acks, dead letters, stop), flush them in
//! pipelines, claim idle entries (XAUTOCLAIM) when due, then read new entries
//! (XREADGROUP ... BLOCK) — but only as many as the bounded channel to the
//! spout has room for. A full channel therefore stops the reads, and Redis
//! keeps the entries: that is the back-pressure.
//!
//! A lost connection is reopened with a growing pause; acks and dead letters
//! wait in memory meanwhile, and entries already in the channel are not
//! affected.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use redis::{Client, Connection, RedisError, Value as RedisValue};
use rustc_hash::FxHashSet;
use squall_connector::{Feeder, Health};
use squall_plugin_api::host::metrics::{self, Counter};

use crate::conn::{self, RawEntry, Timeouts};

/// One entry handed to the spout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivery {
    /// The entry as read.
    pub entry: RawEntry,
    /// How many times it has been delivered, this delivery included.
    pub deliveries: u64,
}

/// What the spout asks of its I/O thread.
#[derive(Debug)]
pub(crate) enum Command {
    /// XACK this entry (its tree completed).
    Ack(String),
    /// XADD it to the dead-letter stream and XACK the original, atomically.
    DeadLetter(DeadLetter),
    /// Flush what is buffered and exit.
    Stop,
}

/// An entry to move to the dead-letter stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeadLetter {
    /// The entry.
    pub entry: RawEntry,
    /// Its deliveries so far.
    pub deliveries: u64,
    /// Why it is dead-lettered.
    pub reason: String,
}

/// The reader's settings, taken from the spout's config.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub stream: String,
    pub group: String,
    pub consumer: String,
    pub batch: usize,
    pub block: Duration,
    pub min_idle: Duration,
    pub claim_interval: Duration,
    pub max_deliver: u64,
    pub dead_letter_stream: String,
    pub timeouts: Timeouts,
    /// How long an ack may wait to be sent with others.
    pub ack_interval: Duration,
    /// Create the group again when it vanished (NOGROUP).
    pub create_group: bool,
    /// Where a created group starts.
    pub start_id: String,
}

/// The counters the reader updates (registered by the spout in `open`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReaderMetrics {
    pub claimed: Option<Counter>,
    pub dead_lettered: Option<Counter>,
    pub groups_recreated: Option<Counter>,
}

impl ReaderMetrics {
    /// Registers the reader's metrics.
    pub(crate) fn register() -> Self {
        Self {
            claimed: Some(metrics::counter(
                "redis_claimed",
                "Idle entries claimed from other consumers with XAUTOCLAIM.",
            )),
            dead_lettered: Some(metrics::counter(
                "redis_dead_lettered",
                "Entries moved to the dead-letter stream after max_deliver deliveries.",
            )),
            groups_recreated: Some(metrics::counter(
                "redis_groups_recreated",
                "Consumer groups created again after they vanished (a Redis restart that lost the stream).",
            )),
        }
    }

    fn add(counter: &Option<Counter>, n: u64) {
        if let Some(c) = counter {
            c.add(n);
        }
    }
}

/// Where entries not read as new come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// XAUTOCLAIM: idle in some consumer of the group.
    Claimed,
    /// This consumer's own pending list.
    Own,
}

/// Most ids in one XACK.
const ACK_CHUNK: usize = 1000;

/// How long the final flush may wait for a connection, and for a reply.
pub(crate) const CLOSE_CONNECT: Duration = Duration::from_millis(500);
pub(crate) const CLOSE_REPLY: Duration = Duration::from_secs(1);

/// The longest pause between two reconnection attempts.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(2);

/// The reader's state, owned by its thread.
pub(crate) struct Reader {
    client: Client,
    con: Option<Connection>,
    settings: Settings,
    entries: Feeder<Delivery>,
    commands: Receiver<Command>,
    acks: Vec<String>,
    dead: Vec<DeadLetter>,
    /// Entries handed to the spout and not yet acked or dead-lettered: a
    /// claim that returns one of them (it was idle too long in this very
    /// task) must not deliver it twice.
    outstanding: FxHashSet<String>,
    /// Durable state: where the ids of the XACKs Redis replied to go.
    confirmed: Option<crossbeam_channel::Sender<Vec<String>>>,
    /// When the oldest unsent ack arrived.
    acks_since: Option<Instant>,
    claim_cursor: String,
    /// Whether this consumer's own pending entries are to be read back
    /// (at start and after a reconnection), and from which id.
    recover: bool,
    own_cursor: String,
    next_claim: Instant,
    stopping: bool,
    metrics: ReaderMetrics,
    errors: u64,
    /// Entries this reader has dead-lettered (for rate-limited logging).
    dead_lettered: u64,
    /// The connection's health, as the host shows it (the `connector_up`
    /// gauge, `redis_reconnects`, the task's last error).
    health: Health,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("settings", &self.settings)
            .field("connected", &self.con.is_some())
            .field("acks", &self.acks.len())
            .field("outstanding", &self.outstanding.len())
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// A reader on an open connection; `entries` must be bounded.
    pub(crate) fn new(
        client: Client,
        con: Connection,
        settings: Settings,
        entries: Feeder<Delivery>,
        commands: Receiver<Command>,
        metrics: ReaderMetrics,
        health: Health,
    ) -> Self {
        Self {
            client,
            con: Some(con),
            settings,
            entries,
            commands,
            acks: Vec::new(),
            dead: Vec::new(),
            outstanding: FxHashSet::default(),
            confirmed: None,
            acks_since: None,
            claim_cursor: "0-0".to_owned(),
            recover: true,
            own_cursor: "0".to_owned(),
            next_claim: Instant::now(),
            stopping: false,
            metrics,
            health,
            errors: 0,
            dead_lettered: 0,
        }
    }

    /// Reports the ids of the XACKs Redis replied to on `to` (durable state).
    pub(crate) fn confirm_to(&mut self, to: crossbeam_channel::Sender<Vec<String>>) {
        self.confirmed = Some(to);
    }

    /// The thread's body: runs until [`Command::Stop`] or until the spout
    /// drops its sender, then flushes acks and dead letters once more.
    pub(crate) fn run(mut self) {
        let mut pause = Duration::from_millis(50);
        while !self.stopping {
            self.take_commands(Duration::ZERO);
            match self.step() {
                Ok(()) => {
                    pause = Duration::from_millis(50);
                    self.health.restored("reading again");
                }
                Err(e) if e.code() == Some("NOGROUP") => {
                    self.group_vanished(&e);
                    self.take_commands(pause);
                    pause = (pause * 2).min(MAX_RECONNECT_PAUSE);
                }
                Err(e) => {
                    self.report(&e);
                    if conn::is_connection_error(&e) {
                        self.con = None;
                        self.health.lost(&e.to_string());
                    }
                    // Wait before retrying, but keep taking acks (and a stop).
                    self.take_commands(pause);
                    pause = (pause * 2).min(MAX_RECONNECT_PAUSE);
                }
            }
        }
        self.final_flush();
    }

    /// Final flush, kept short (the host reports a close that outlasts
    /// the drain by 2 s): one reconnection attempt of at most 500 ms if
    /// needed, replies within 1 s, then give up; whatever is not acked
    /// stays pending in the group.
    fn final_flush(&mut self) {
        self.settings.timeouts = Timeouts {
            connect: self.settings.timeouts.connect.min(CLOSE_CONNECT),
            reply: self.settings.timeouts.reply.min(CLOSE_REPLY),
        };
        self.settings.block = Duration::ZERO;
        if let Some(con) = &self.con {
            let _ = con.set_read_timeout(Some(CLOSE_REPLY));
            let _ = con.set_write_timeout(Some(CLOSE_REPLY));
        }
        if let Err(e) = self.flush(true) {
            self.report(&e);
            if conn::is_connection_error(&e) {
                self.con = None;
                if let Err(e) = self.flush(true) {
                    self.report(&e);
                }
            }
        }
        if !self.acks.is_empty() || !self.dead.is_empty() {
            squall_plugin_api::warn!(
                "redis stream {:?}: {} acks and {} dead letters could not be written at close; \
                 those entries stay pending in group {:?} for XAUTOCLAIM",
                self.settings.stream,
                self.acks.len(),
                self.dead.len(),
                self.settings.group
            );
        }
    }

    /// Logs an error: the 1st, 2nd, 4th, 8th ... and every 100th time.
    fn report(&mut self, e: &RedisError) {
        self.errors += 1;
        if self.errors.is_power_of_two() || self.errors.is_multiple_of(100) {
            squall_plugin_api::warn!(
                "redis stream {:?} group {:?}: {e} (error #{}); retrying",
                self.settings.stream,
                self.settings.group,
                self.errors
            );
        }
    }

    /// Takes the spout's commands: everything queued now, or the first one
    /// within `wait` (then everything queued after it).
    fn take_commands(&mut self, wait: Duration) {
        let mut first = if wait.is_zero() {
            None
        } else {
            match self.commands.recv_timeout(wait) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => return,
                Err(RecvTimeoutError::Disconnected) => {
                    self.stopping = true;
                    return;
                }
            }
        };
        loop {
            let command = match first.take() {
                Some(c) => c,
                None => match self.commands.try_recv() {
                    Ok(c) => c,
                    Err(TryRecvError::Empty) => return,
                    Err(TryRecvError::Disconnected) => {
                        self.stopping = true;
                        return;
                    }
                },
            };
            match command {
                Command::Ack(id) => {
                    self.acks_since.get_or_insert_with(Instant::now);
                    self.acks.push(id);
                }
                Command::DeadLetter(d) => self.dead.push(d),
                Command::Stop => self.stopping = true,
            }
        }
    }

    /// The connection, reopened if it was lost (one attempt).
    fn connection(&mut self) -> redis::RedisResult<&mut Connection> {
        if self.con.is_none() {
            let con =
                conn::connect_once(&self.client, self.settings.timeouts, self.settings.block)?;
            // A reply lost with the old connection may have handed entries
            // to this consumer: read them back from its pending list.
            self.recover = true;
            self.own_cursor = "0".to_owned();
            self.health.restored(&format!("reconnected as consumer {:?}", self.settings.consumer));
            self.con = Some(con);
        }
        Ok(self.con.as_mut().expect("just set"))
    }

    /// One round: flush, claim when due, read what there is room for.
    fn step(&mut self) -> redis::RedisResult<()> {
        self.flush(false)?;
        if self.stopping {
            return Ok(());
        }
        if self.recover {
            self.recover_own()?;
        }
        if Instant::now() >= self.next_claim {
            self.claim()?;
            self.next_claim = Instant::now() + self.settings.claim_interval;
        }
        let room = self.room();
        if room == 0 {
            // The spout is behind: read nothing, wait for its acks.
            self.take_commands(Duration::from_millis(5));
            return Ok(());
        }
        self.read(room)
    }

    /// How many entries the channel can take now.
    fn room(&self) -> usize {
        self.entries.room()
    }

    /// The group is gone (NOGROUP): Redis restarted without its data, or
    /// someone destroyed the group. With `create_group` it is created again
    /// (and the stream with it) and reading goes on from `start_id`;
    /// entries in flight from the lost stream are forgotten (their acks
    /// find nothing). Without it the spout is not ready (`connector_up` 0,
    /// `/readyz` 503, `last_error` says why) and keeps checking.
    fn group_vanished(&mut self, e: &RedisError) {
        let s = self.settings.clone();
        if !s.create_group {
            self.health.failing(&format!(
                "consumer group {:?} of stream {:?} does not exist ({e}); create it \
                 (XGROUP CREATE {} {} $ MKSTREAM) or set create_group = true",
                s.group, s.stream, s.stream, s.group
            ));
            return;
        }
        let mut cmd = redis::cmd("XGROUP");
        cmd.arg("CREATE").arg(&s.stream).arg(&s.group).arg(&s.start_id).arg("MKSTREAM");
        let created = match self.connection() {
            Ok(con) => cmd.query::<RedisValue>(con).map(drop),
            Err(e) => Err(e),
        };
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => {
                self.report(&e);
                self.health.failing(&format!("cannot create consumer group again: {e}"));
            }
            _ => {
                ReaderMetrics::add(&self.metrics.groups_recreated, 1);
                let message = format!(
                    "redis stream {:?}: consumer group {:?} had vanished (the server lost its \
                     data?); created it again at {}",
                    s.stream, s.group, s.start_id
                );
                squall_plugin_api::warn!("{message}");
                self.health.report(message);
                self.outstanding.clear();
                self.claim_cursor = "0-0".to_owned();
                self.recover = true;
                self.own_cursor = "0".to_owned();
            }
        }
    }

    /// Sends the buffered dead letters, and the acks when `all`, when
    /// [`ACK_CHUNK`] have gathered or when the oldest has waited
    /// `ack_interval` (each kept until its reply).
    fn flush(&mut self, all: bool) -> redis::RedisResult<()> {
        let due = all
            || self.acks.len() >= ACK_CHUNK
            || self.acks_since.is_some_and(|t| t.elapsed() >= self.settings.ack_interval);
        if due {
            self.flush_acks()?;
        }
        self.flush_dead()
    }

    /// Sends the buffered acks, [`ACK_CHUNK`] at a time (each kept until its
    /// reply), and reports the ids Redis confirmed (durable state).
    fn flush_acks(&mut self) -> redis::RedisResult<()> {
        while !self.acks.is_empty() {
            let n = self.acks.len().min(ACK_CHUNK);
            let mut cmd = redis::cmd("XACK");
            cmd.arg(&self.settings.stream).arg(&self.settings.group).arg(&self.acks[..n]);
            let con = self.connection()?;
            cmd.query::<RedisValue>(con)?;
            let done: Vec<String> = self.acks.drain(..n).collect();
            for id in &done {
                self.outstanding.remove(id);
            }
            if let Some(to) = &self.confirmed {
                let _ = to.send(done);
            }
            if self.acks.is_empty() {
                self.acks_since = None;
            }
        }
        Ok(())
    }

    /// Sends the buffered dead letters (each kept until its reply; one
    /// Redis refuses stays pending in the group).
    fn flush_dead(&mut self) -> redis::RedisResult<()> {
        while let Some(dead) = self.dead.last() {
            let pipe = dead_letter_pipeline(&self.settings, dead);
            let con = self.connection()?;
            if let Err(e) = pipe.query::<RedisValue>(con) {
                if conn::is_connection_error(&e) {
                    return Err(e);
                }
                // Refused (say, the dead-letter key is not a stream): the
                // entry stays pending in the group, to be claimed and tried
                // again after min_idle; the reads go on meanwhile.
                let dead = self.dead.pop().expect("just looked");
                self.outstanding.remove(&dead.entry.id);
                squall_plugin_api::error!(
                    "redis stream {:?}: cannot dead-letter entry {} to {:?}: {e}; it stays pending",
                    self.settings.stream,
                    dead.entry.id,
                    self.settings.dead_letter_stream
                );
                continue;
            }
            let dead = self.dead.pop().expect("just looked");
            self.dead_lettered(&dead);
        }
        Ok(())
    }

    /// A dead letter written: counted, and logged the 1st, 2nd, 4th ...
    /// and every 1000th time.
    fn dead_lettered(&mut self, dead: &DeadLetter) {
        self.outstanding.remove(&dead.entry.id);
        ReaderMetrics::add(&self.metrics.dead_lettered, 1);
        self.dead_lettered += 1;
        let n = self.dead_lettered;
        if n.is_power_of_two() || n.is_multiple_of(1000) {
            squall_plugin_api::warn!(
                "redis stream {:?}: entry {} dead-lettered to {:?}: {} ({n} so far)",
                self.settings.stream,
                dead.entry.id,
                self.settings.dead_letter_stream,
                dead.reason
            );
        }
    }

    /// XAUTOCLAIMs entries idle longer than `min_idle` (from any consumer
    /// of the group: dead ones are the point) and delivers them, or
    /// dead-letters those already delivered `max_deliver` times.
    fn claim(&mut self) -> redis::RedisResult<()> {
        // A few pages per round, each no larger than the room left.
        for _ in 0..8 {
            let room = self.room();
            if room == 0 {
                return Ok(());
            }
            let s = &self.settings;
            let mut cmd = redis::cmd("XAUTOCLAIM");
            cmd.arg(&s.stream)
                .arg(&s.group)
                .arg(&s.consumer)
                .arg(s.min_idle.as_millis() as u64)
                .arg(&self.claim_cursor)
                .arg("COUNT")
                .arg(room.min(s.batch));
            let reply: RedisValue = cmd.query(self.connection()?)?;
            let parts = conn::items(&reply);
            let cursor = parts.first().and_then(conn::text).unwrap_or_else(|| "0-0".into());
            let claimed: Vec<RawEntry> = parts
                .get(1)
                .map(conn::entries)
                .unwrap_or_default()
                .into_iter()
                .filter(|e| !self.outstanding.contains(&e.id))
                .collect();
            if !claimed.is_empty() {
                self.deliver_claimed(claimed, Source::Claimed)?;
            }
            self.claim_cursor = cursor;
            if self.claim_cursor == "0-0" {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Reads this consumer's own pending entries (XREADGROUP ... 0, in
    /// pages) and delivers those not in flight here: after a reconnection,
    /// entries whose XREADGROUP reply was lost on the way, and at start,
    /// what a previous process of the same consumer name left pending.
    fn recover_own(&mut self) -> redis::RedisResult<()> {
        loop {
            let room = self.room();
            if room == 0 {
                return Ok(()); // the rest on a later round
            }
            let s = &self.settings;
            let mut cmd = redis::cmd("XREADGROUP");
            cmd.arg("GROUP")
                .arg(&s.group)
                .arg(&s.consumer)
                .arg("COUNT")
                .arg(room.min(s.batch))
                .arg("STREAMS")
                .arg(&s.stream)
                .arg(&self.own_cursor);
            let reply: RedisValue = cmd.query(self.connection()?)?;
            let page = conn::xreadgroup_entries(&reply);
            let Some(last) = page.last() else {
                self.recover = false;
                self.own_cursor = "0".to_owned();
                return Ok(());
            };
            self.own_cursor = last.id.clone();
            let mine: Vec<RawEntry> =
                page.into_iter().filter(|e| !self.outstanding.contains(&e.id)).collect();
            if !mine.is_empty() {
                self.deliver_claimed(mine, Source::Own)?;
            }
        }
    }

    /// Looks up the delivery counts of claimed or recovered entries (one
    /// pipelined XPENDING each), then delivers or dead-letters each.
    fn deliver_claimed(
        &mut self,
        claimed: Vec<RawEntry>,
        source: Source,
    ) -> redis::RedisResult<()> {
        let mut pipe = redis::pipe();
        for e in &claimed {
            pipe.cmd("XPENDING")
                .arg(&self.settings.stream)
                .arg(&self.settings.group)
                .arg(&e.id)
                .arg(&e.id)
                .arg(1);
        }
        let counts: Vec<RedisValue> = pipe.query(self.connection()?)?;
        self.log_claimed(claimed.len(), source);
        for (entry, count) in claimed.into_iter().zip(counts.iter()) {
            // [[id, consumer, idle, deliveries]]; the claim already counted.
            let deliveries = conn::items(count)
                .first()
                .and_then(|row| conn::items(row).get(3))
                .and_then(conn::int)
                .map_or(1, |n| n.max(1) as u64);
            self.deliver_pending(entry, deliveries);
        }
        Ok(())
    }

    /// Counts and logs `n` entries claimed or recovered.
    fn log_claimed(&self, n: usize, source: Source) {
        match source {
            Source::Claimed => {
                ReaderMetrics::add(&self.metrics.claimed, n as u64);
                squall_plugin_api::info!(
                    "redis stream {:?}: claimed {} idle entries for consumer {:?}",
                    self.settings.stream,
                    n,
                    self.settings.consumer
                );
            }
            Source::Own => squall_plugin_api::info!(
                "redis stream {:?}: recovered {} entries pending for consumer {:?}",
                self.settings.stream,
                n,
                self.settings.consumer
            ),
        }
    }

    /// A claimed or recovered entry delivered `deliveries` times (this one
    /// included): acked when deleted from the stream meanwhile,
    /// dead-lettered past `max_deliver`, delivered otherwise.
    fn deliver_pending(&mut self, entry: RawEntry, deliveries: u64) {
        if entry.fields.is_empty() {
            // Deleted from the stream while pending: nothing to deliver.
            self.acks.push(entry.id);
            return;
        }
        self.outstanding.insert(entry.id.clone());
        if deliveries > self.settings.max_deliver {
            let reason = format!(
                "delivered {} times without being acked (max_deliver = {})",
                deliveries - 1,
                self.settings.max_deliver
            );
            self.dead.push(DeadLetter { entry, deliveries: deliveries - 1, reason });
        } else {
            self.deliver(Delivery { entry, deliveries });
        }
    }

    /// XREADGROUP of at most `room` new entries, blocking up to `block`.
    fn read(&mut self, room: usize) -> redis::RedisResult<()> {
        let s = &self.settings;
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(&s.group)
            .arg(&s.consumer)
            .arg("COUNT")
            .arg(room.min(s.batch))
            .arg("BLOCK")
            .arg(s.block.as_millis() as u64)
            .arg("STREAMS")
            .arg(&s.stream)
            .arg(">");
        let reply: RedisValue = cmd.query(self.connection()?)?;
        for entry in conn::xreadgroup_entries(&reply) {
            self.outstanding.insert(entry.id.clone());
            self.deliver(Delivery { entry, deliveries: 1 });
        }
        Ok(())
    }

    /// Hands one entry to the spout and wakes its executor (the feed
    /// does). The reads never ask for more than the room left, so the feed
    /// stays within its capacity; if the spout is gone, the entry just
    /// stays pending in the group.
    fn deliver(&mut self, delivery: Delivery) {
        let _ = self.entries.push(delivery);
    }
}

/// MULTI; XADD <dead-letter stream> * <metadata> <fields>; XACK; EXEC.
fn dead_letter_pipeline(s: &Settings, dead: &DeadLetter) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.atomic();
    let xadd = pipe.cmd("XADD").arg(&s.dead_letter_stream).arg("*");
    xadd.arg("source_id")
        .arg(&dead.entry.id)
        .arg("source_stream")
        .arg(&s.stream)
        .arg("group")
        .arg(&s.group)
        .arg("deliveries")
        .arg(dead.deliveries)
        .arg("reason")
        .arg(&dead.reason);
    for (k, v) in &dead.entry.fields {
        xadd.arg(k).arg(v);
    }
    pipe.ignore();
    pipe.cmd("XACK").arg(&s.stream).arg(&s.group).arg(&dead.entry.id).ignore();
    pipe
}
