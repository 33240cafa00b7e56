//! [`StreamSpout`]: reads a Redis stream through a consumer group, at least once.

use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use squall_connector::feed::Empty;
use squall_connector::{
    feed, Acked, Backoff, Delivery as Seen, Failed, Feed, Health, IoThread, Pending, Positions,
    Redelivery, RetryPolicy,
};
use squall_plugin_api::host::metrics::{self, Counter};
use squall_plugin_api::prelude::*;

use crate::conn::{self, RawEntry, Timeouts};
use crate::reader::{Command, DeadLetter, Delivery, Reader, ReaderMetrics, Settings};

/// How long `close` waits for the reader's final flush: its reconnection
/// attempt and its replies are bounded by `reader::CLOSE_CONNECT` and
/// `reader::CLOSE_REPLY`, after the read in progress (`block_ms`, at most 1 s).
pub(crate) const CLOSE_BUDGET: Duration = Duration::from_millis(3_500);

squall_connector::connector_config! {
    /// The spout's `config` table: the struct and its declared keys.
    #[derive(Debug, Clone, PartialEq)]
    struct SpoutConfig {
        url: String = required(String, "redis://[user:password@]host[:port][/db]"),
        stream: String = required(String, "the stream to read"),
        group: String = required(String, "the consumer group"),
        consumer: Option<String> = maybe(String, "this task's consumer name (default <hostname>-<pid>-<task index>)"),
        batch: usize = default(Integer, "100", "most entries per XREADGROUP and XAUTOCLAIM page, and per next_tuple"),
        block_ms: u64 = default(Integer, "500", "how long an XREADGROUP waits for new entries (1 ... 1000)"),
        min_idle_ms: u64 = default(Integer, "60000", "entries pending this long in any consumer are claimed"),
        claim_interval_ms: u64 = default(Integer, "10000", "how often to claim"),
        max_deliver: u32 = default(Integer, "10", "deliveries before an entry goes to the dead-letter stream"),
        dead_letter_stream: Option<String> = maybe(String, "where dead entries go (default <stream>:dead)"),
        max_pending: usize = default(Integer, "1000", "most entries in flight"),
        create_group: bool = default(Bool, "true", "create the group (and the stream) if it does not exist, also when it vanished while running"),
        start_id: String = default(String, "\"0\"", "where a created group starts: \"0\" the whole stream, \"$\" new entries"),
        connect_timeout_ms: u64 = default(Integer, "5000", "how long open retries the first connection"),
        ack_interval_ms: u64 = default(Integer, "100", "the longest an ack waits to be sent with others (0 ... 60000)"),
    }
}

impl SpoutConfig {
    fn validate(&self) -> Result<()> {
        for (key, value) in
            [("stream", &self.stream), ("group", &self.group), ("start_id", &self.start_id)]
        {
            if value.is_empty() {
                return Err(format!("{key} must not be empty").into());
            }
        }
        if !(1..=10_000).contains(&self.batch) {
            return Err(format!("batch must be between 1 and 10000, got {}", self.batch).into());
        }
        // Bounded so that close (which waits for the read in progress) ends
        // well within the host's 2 s grace after the drain.
        if !(1..=1_000).contains(&self.block_ms) {
            return Err(
                format!("block_ms must be between 1 and 1000, got {}", self.block_ms).into()
            );
        }
        if self.claim_interval_ms == 0 {
            return Err("claim_interval_ms must be at least 1".into());
        }
        if self.max_deliver == 0 {
            return Err("max_deliver must be at least 1".into());
        }
        if self.max_pending == 0 {
            return Err("max_pending must be at least 1".into());
        }
        if self.ack_interval_ms > 60_000 {
            return Err(format!(
                "ack_interval_ms must be at most 60000, got {}",
                self.ack_interval_ms
            )
            .into());
        }
        if self.connect_timeout_ms == 0 {
            return Err("connect_timeout_ms must be at least 1".into());
        }
        if self.consumer.as_deref() == Some("") {
            return Err("consumer must not be empty".into());
        }
        if self.dead_letter_stream.as_deref() == Some(&self.stream) {
            return Err("dead_letter_stream must differ from stream".into());
        }
        Ok(())
    }
}

/// An entry emitted and not yet acked.
#[derive(Debug)]
struct InFlight {
    entry_id: Value,
    fields: Value,
    raw: RawEntry,
}

/// The I/O thread and the two channels to it.
#[derive(Debug)]
struct Io {
    entries: Feed<Delivery>,
    commands: Sender<Command>,
    thread: Option<IoThread>,
}

/// The spout's counters.
#[derive(Debug)]
struct SpoutMetrics {
    redeliveries: Counter,
}

impl SpoutMetrics {
    /// Registers the spout's metrics.
    fn register() -> Self {
        Self {
            redeliveries: metrics::counter(
                "redis_redeliveries",
                "Entries re-emitted after their tuple tree failed.",
            ),
        }
    }
}

/// Starts the reader on its own thread.
fn spawn_reader(context: &TaskContext, reader: Reader) -> Result<IoThread> {
    let thread = IoThread::spawn(
        format!("redis-{}-{}", context.component, context.task_index),
        move |ready| {
            ready.connected();
            reader.run();
        },
    )
    .map_err(|e| format!("cannot start the redis reader thread: {e}"))?;
    Ok(thread)
}

/// Reads a Redis stream through a consumer group (XREADGROUP) and emits one
/// tuple per entry on `["id", "fields"]`: `id` is the entry id (a string)
/// and `fields` a list of alternating field names and values (strings, or
/// bytes when not UTF-8), in the entry's order.
///
/// Each tuple is tracked: the entry is XACKed only when its whole tuple tree
/// is acked (at least once). A failed tree is re-emitted from the spout's
/// memory; after `max_deliver` deliveries the entry goes to the dead-letter
/// stream with the reason and is XACKed. Entries left idle by dead consumers
/// are claimed with XAUTOCLAIM at start and every `claim_interval_ms`.
/// Redis I/O runs on a thread of its own; `next_tuple` only takes from a
/// bounded channel. Every key is described in `docs/connectors-redis.md`.
#[derive(Debug)]
pub struct StreamSpout {
    config: SpoutConfig,
    client: redis::Client,
    io: Option<Io>,
    pending: Pending<InFlight>,
    draining: bool,
    metrics: Option<SpoutMetrics>,
    health: Health,
    /// Durable state's bookkeeping (`None`: the topology has no `[state]`).
    durable: Option<Durable>,
}

/// The format of a stream spout's checkpoint position (entry ids).
const POSITION_FORMAT: &str = "squall-redis-stream-position/1";

/// A durable spout's positions and the reader's confirmed XACKs.
#[derive(Debug)]
struct Durable {
    positions: Positions<u128>,
    confirmed: crossbeam_channel::Receiver<Vec<String>>,
    confirm_to: crossbeam_channel::Sender<Vec<String>>,
}

/// An entry id `<ms>-<seq>` as one number (ordered as Redis orders ids).
fn id_key(id: &str) -> Option<u128> {
    let (ms, seq) = id.split_once('-')?;
    Some((u128::from(ms.parse::<u64>().ok()?) << 64) | u128::from(seq.parse::<u64>().ok()?))
}

impl StreamSpout {
    /// Durable state from `position`: XACKs wait for commits from now.
    fn start_durable(&mut self, position: &State) -> Result<()> {
        let source = format!("stream {:?} group {:?}", self.config.stream, self.config.group);
        let positions = Positions::restore(POSITION_FORMAT, source, position)?;
        let (confirm_to, confirmed) = crossbeam_channel::unbounded();
        self.pending.defer_broker_acks(true);
        self.durable = Some(Durable { positions, confirmed, confirm_to });
        Ok(())
    }

    /// Takes in the XACKs Redis confirmed.
    fn drain_confirmed(&mut self) {
        let Some(d) = &mut self.durable else { return };
        while let Ok(ids) = d.confirmed.try_recv() {
            d.positions.confirmed(ids.iter().filter_map(|id| id_key(id)));
        }
    }

    /// Connects, checks the group (or creates it with `create_group`) and
    /// prunes what the restored position covers. Returns the connection,
    /// its timeouts and how long a read blocks.
    fn connect(&mut self) -> Result<(redis::Connection, Timeouts, Duration)> {
        let c = &self.config;
        let timeouts = Timeouts {
            connect: Duration::from_millis(c.connect_timeout_ms),
            reply: Duration::from_secs(5),
        };
        let block = Duration::from_millis(c.block_ms);
        let mut con = conn::connect_with_retry(&self.client, timeouts, block)?;
        if c.create_group {
            self.create_group(&mut con)?;
        } else {
            self.check_group(&mut con)?;
        }
        self.prune_covered(&mut con);
        Ok((con, timeouts, block))
    }

    /// The reader's settings, as consumer `consumer`.
    fn settings(&self, consumer: String, timeouts: Timeouts, block: Duration) -> Settings {
        let c = &self.config;
        Settings {
            stream: c.stream.clone(),
            group: c.group.clone(),
            consumer,
            batch: c.batch,
            block,
            min_idle: Duration::from_millis(c.min_idle_ms),
            claim_interval: Duration::from_millis(c.claim_interval_ms),
            max_deliver: u64::from(c.max_deliver),
            dead_letter_stream: c
                .dead_letter_stream
                .clone()
                .unwrap_or_else(|| format!("{}:dead", c.stream)),
            timeouts,
            ack_interval: Duration::from_millis(c.ack_interval_ms),
            create_group: c.create_group,
            start_id: c.start_id.clone(),
        }
    }

    /// Emits the failed entries whose backoff is over, while `budget` lasts.
    fn replay(&mut self, budget: &mut usize, collector: &mut SpoutCollector<'_>) {
        let now = Instant::now();
        while *budget > 0 {
            let Some((id, flight)) = self.pending.next_replay(now) else { break };
            collector.emit_with_id(&[flight.entry_id.clone(), flight.fields.clone()], id);
            if let (Some(d), Some(key)) = (&mut self.durable, id_key(&flight.raw.id)) {
                d.positions.replayed(key);
            }
            if let Some(m) = &self.metrics {
                m.redeliveries.inc();
            }
            *budget -= 1;
        }
    }

    /// With durable state, what a delivery is: back when it is to be
    /// emitted; None when it is taken care of (covered by the restored
    /// stores: XACKed at the next commit; in flight already; released:
    /// XACKed at once).
    fn durable_delivery(&mut self, delivery: Delivery) -> Option<Delivery> {
        let (Some(d), Some(key)) = (&mut self.durable, id_key(&delivery.entry.id)) else {
            return Some(delivery);
        };
        match d.positions.deliver(key) {
            Seen::Emit => Some(delivery),
            Seen::Covered => {
                // Its effects are in the restored stores: XACK it
                // at the next commit, never emit it again.
                let entry_id = Value::from(delivery.entry.id.as_str());
                let fields = Value::Null;
                self.pending.defer(InFlight { entry_id, fields, raw: delivery.entry });
                None
            }
            Seen::InFlight => None,
            Seen::Released => {
                self.send(Command::Ack(delivery.entry.id));
                None
            }
        }
    }

    /// Drops the covered ids no longer pending in the group (XPENDING): they
    /// were acked before the restart and never come back.
    fn prune_covered(&mut self, con: &mut redis::Connection) {
        let Some(d) = &mut self.durable else { return };
        let reply: redis::RedisResult<redis::Value> = redis::cmd("XPENDING")
            .arg(&self.config.stream)
            .arg(&self.config.group)
            .arg("-")
            .arg("+")
            .arg(1_000_000)
            .query(con);
        let Ok(reply) = reply else { return };
        let pending: rustc_hash::FxHashSet<u128> = conn::items(&reply)
            .iter()
            .filter_map(|e| conn::items(e).first().and_then(conn::text))
            .filter_map(|id| id_key(&id))
            .collect();
        d.positions.prune(|key| !pending.contains(&key));
    }

    /// The consumer name: the configured one (with the task index appended
    /// when there are several tasks), or `<host>-<pid>-<task index>`.
    fn consumer_name(&self, context: &TaskContext) -> String {
        match &self.config.consumer {
            Some(name) if context.parallelism > 1 => format!("{name}-{}", context.task_index),
            Some(name) => name.clone(),
            None => format!("{}-{}-{}", hostname(), std::process::id(), context.task_index),
        }
    }

    /// XGROUP CREATE ... MKSTREAM, tolerating a group that already exists.
    fn create_group(&self, con: &mut redis::Connection) -> Result<()> {
        let c = &self.config;
        let created = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&c.stream)
            .arg(&c.group)
            .arg(&c.start_id)
            .arg("MKSTREAM")
            .query::<redis::Value>(con);
        match created {
            Ok(_) => {
                squall_plugin_api::info!(
                    "redis stream {:?}: created group {:?} at {}",
                    c.stream,
                    c.group,
                    c.start_id
                );
                Ok(())
            }
            Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
            Err(e) => {
                Err(format!("cannot create group {:?} on stream {:?}: {e}", c.group, c.stream)
                    .into())
            }
        }
    }

    /// Checks that the group exists (when the spout is not to create it).
    fn check_group(&self, con: &mut redis::Connection) -> Result<()> {
        let c = &self.config;
        let groups: redis::Value = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&c.stream)
            .query(con)
            .map_err(|e| format!("stream {:?}: {e}", c.stream))?;
        let found = conn::items(&groups).iter().any(|g| {
            let fields = conn::items(g);
            let map_name = match g {
                redis::Value::Map(m) => m
                    .iter()
                    .find(|(k, _)| conn::text(k).as_deref() == Some("name"))
                    .and_then(|(_, v)| conn::text(v)),
                _ => None,
            };
            map_name.as_deref() == Some(c.group.as_str())
                || fields.chunks_exact(2).any(|p| {
                    conn::text(&p[0]).as_deref() == Some("name")
                        && conn::text(&p[1]).as_deref() == Some(c.group.as_str())
                })
        });
        if found {
            Ok(())
        } else {
            Err(format!(
                "stream {:?} has no consumer group {:?} (and create_group = false)",
                c.stream, c.group
            )
            .into())
        }
    }

    fn send(&self, command: Command) {
        if let Some(io) = &self.io {
            // The reader only exits after Stop or when we drop the sender.
            let _ = io.commands.send(command);
        }
    }

    /// Hands an entry to the reader for the dead-letter stream (the reader
    /// counts it once written).
    fn dead_letter(&mut self, flight: InFlight, deliveries: u32, reason: String) {
        self.send(Command::DeadLetter(DeadLetter {
            entry: flight.raw,
            deliveries: u64::from(deliveries),
            reason,
        }));
    }

    /// Stops the reader and waits for its final flush.
    fn stop_io(&mut self) {
        if let Some(mut io) = self.io.take() {
            let _ = io.commands.send(Command::Stop);
            if let Some(mut thread) = io.thread.take() {
                if !thread.join_within(CLOSE_BUDGET) {
                    squall_plugin_api::warn!(
                        "redis stream {:?}: the reader did not finish its final flush within {:?}; \
                         unwritten acks leave their entries pending for XAUTOCLAIM",
                        self.config.stream,
                        CLOSE_BUDGET
                    );
                }
            }
        }
    }
}

/// This machine's host name, for default consumer names.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "squall".to_owned())
}

/// A field name or value as a tuple value: a string when it is UTF-8.
pub(crate) fn bytes_value(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(s) => Value::from(s),
        Err(_) => Value::from(bytes.to_vec()),
    }
}

/// The `fields` value of an entry: `[name1, value1, name2, value2, ...]`.
fn fields_value(entry: &RawEntry) -> Value {
    let mut list = Vec::with_capacity(entry.fields.len() * 2);
    for (k, v) in &entry.fields {
        list.push(bytes_value(k));
        list.push(bytes_value(v));
    }
    Value::List(list.into())
}

impl Spout for StreamSpout {
    const NAME: &'static str = "StreamSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(SpoutConfig::KEYS);
    const CLOSE_BUDGET: Option<Duration> = Some(CLOSE_BUDGET);
    const DESCRIPTION: &'static str =
        "reads a Redis stream through a consumer group; XACKs when the tuple tree completes";
    /// With durable state an entry is XACKed once its effects are committed.
    const CHECKPOINTS: bool = true;

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["id", "fields"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = SpoutConfig::parse(config)?;
        config.validate()?;
        let client = conn::client(&config.url)?;
        let policy = RetryPolicy { max_deliver: config.max_deliver, backoff: Backoff::NONE };
        let pending = Pending::new(config.max_pending, policy, Redelivery::Local);
        Ok(Self {
            config,
            client,
            io: None,
            pending,
            draining: false,
            metrics: None,
            health: Health::new(String::new()),
            durable: None,
        })
    }

    /// Contract 1.2: with durable state an entry is XACKed once the
    /// checkpoint holding its effects commits.
    fn restore_checkpoint(&mut self, position: State) -> Result<()> {
        self.start_durable(&position)
    }

    /// A live swap hands a durable spout's position to its successor.
    fn save_state(&mut self) -> Option<State> {
        self.drain_confirmed();
        self.durable.as_ref().map(|d| d.positions.position())
    }

    fn restore_state(&mut self, state: State) -> Result<()> {
        self.start_durable(&state)
    }

    fn checkpoint(&mut self, checkpoint: u64) -> Option<State> {
        self.drain_confirmed();
        let epoch = self.pending.barrier();
        let d = self.durable.as_mut()?;
        d.positions.barrier(checkpoint, epoch);
        Some(d.positions.position())
    }

    fn committed(&mut self, checkpoint: u64) {
        let Some(d) = &mut self.durable else { return };
        let Some(epoch) = d.positions.committed(checkpoint) else { return };
        let released: Vec<InFlight> = self.pending.commit(epoch).map(|(_, f)| f).collect();
        for flight in &released {
            if let Some(key) = id_key(&flight.raw.id) {
                d.positions.released(key);
            }
        }
        for flight in released {
            self.send(Command::Ack(flight.raw.id));
        }
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        let (con, timeouts, block) = self.connect()?;
        let c = &self.config;
        let consumer = self.consumer_name(context);
        self.health = Health::new(format!("redis stream {:?} group {:?}", c.stream, c.group));
        self.health.register("redis", context.waker());
        let settings = self.settings(consumer.clone(), timeouts, block);
        let reader_metrics = ReaderMetrics::register();
        self.metrics = Some(SpoutMetrics::register());
        // Room for two reads: the reader can fetch the next batch while the
        // spout emits the last one, and no more.
        let (entries_tx, entries_rx) = feed(c.batch * 2, context.waker());
        let (commands_tx, commands_rx) = crossbeam_channel::unbounded();
        let mut reader = Reader::new(
            self.client.clone(),
            con,
            settings,
            entries_tx,
            commands_rx,
            reader_metrics,
            self.health.clone(),
        );
        if let Some(d) = &self.durable {
            reader.confirm_to(d.confirm_to.clone());
        }
        let thread = spawn_reader(context, reader)?;
        squall_plugin_api::info!(
            "reading redis stream {:?} in group {:?} as consumer {:?}",
            c.stream,
            c.group,
            consumer
        );
        self.io = Some(Io { entries: entries_rx, commands: commands_tx, thread: Some(thread) });
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        // What went wrong on the I/O thread is this task's error (errors,
        // last_error); reading goes on.
        if let Some(e) = self.health.take_error() {
            return Err(e.into());
        }
        // Failed entries first, then new ones; never more than max_pending
        // in flight, never waiting.
        let mut budget = self.config.batch;
        if self.pending.has_replays() {
            self.replay(&mut budget, collector);
        }
        while budget > 0 && self.pending.has_room() {
            let Some(io) = &self.io else { return Ok(()) };
            let delivery = match io.entries.take() {
                Ok(d) => d,
                Err(Empty::Now) => break,
                Err(Empty::Closed) => {
                    self.io = None;
                    return Err("the redis reader thread has stopped".into());
                }
            };
            let Some(delivery) = self.durable_delivery(delivery) else { continue };
            let flight = InFlight {
                entry_id: Value::from(delivery.entry.id.as_str()),
                fields: fields_value(&delivery.entry),
                raw: delivery.entry,
            };
            let values = [flight.entry_id.clone(), flight.fields.clone()];
            let deliveries = u32::try_from(delivery.deliveries).unwrap_or(u32::MAX);
            let id = self.pending.insert(flight, deliveries);
            collector.emit_with_id(&values, id);
            budget -= 1;
        }
        Ok(())
    }

    fn ack(&mut self, message_id: MessageId) {
        if let Acked::Now(flight) = self.pending.ack(message_id.0) {
            self.send(Command::Ack(flight.raw.id));
        }
    }

    fn fail(&mut self, message_id: MessageId) {
        let id = message_id.0;
        if self.draining {
            // Failed by the drain (or while it runs): leave the entry pending
            // in the group, where XAUTOCLAIM finds it; no delivery is counted.
            if let Some(flight) = self.pending.remove(id) {
                if let (Some(d), Some(key)) = (&mut self.durable, id_key(&flight.raw.id)) {
                    d.positions.replaying(key);
                }
            }
            return;
        }
        let failed = self.pending.fail(id, Instant::now());
        if let Some(d) = &mut self.durable {
            match &failed {
                Failed::Dead { item, .. } => {
                    if let Some(key) = id_key(&item.raw.id) {
                        d.positions.forget(key);
                    }
                }
                Failed::Replay { .. } => {
                    if let Some(key) = self.pending.get(id).and_then(|f| id_key(&f.raw.id)) {
                        d.positions.replaying(key);
                    }
                }
                Failed::Redeliver { .. } | Failed::Unknown => {}
            }
        }
        match failed {
            Failed::Dead { item, reason } => {
                self.dead_letter(item, reason.deliveries, reason.to_string());
            }
            // Replayed from memory by next_tuple; Redis never redelivers on
            // its own (only a claim does, after min_idle_ms).
            Failed::Replay { .. } | Failed::Redeliver { .. } | Failed::Unknown => {}
        }
    }

    fn deactivate(&mut self) {
        self.draining = true;
    }

    fn close(&mut self) {
        // Every ack the host delivered has been sent to the reader; its final
        // flush writes them before it exits.
        self.stop_io();
        if !self.pending.is_empty() {
            squall_plugin_api::info!(
                "redis stream {:?}: {} entries not acked at close stay pending in group {:?}",
                self.config.stream,
                self.pending.len(),
                self.config.group
            );
        }
    }
}

impl Drop for StreamSpout {
    fn drop(&mut self) {
        // A rebuild after a panic drops the instance without close: dropping
        // the sender makes the reader flush and exit on its own.
        if let Some(io) = self.io.take() {
            drop(io.commands);
        }
    }
}

#[cfg(test)]
mod tests {
    use squall_plugin_api::testing::Recorder;

    use crossbeam_channel::Receiver;
    use squall_connector::Feeder;

    use super::*;

    #[test]
    fn the_declared_defaults_are_the_ones_used() {
        let base = "url = \"redis://127.0.0.1/\"\nstream = \"s\"\ngroup = \"g\"";
        let c = SpoutConfig::parse(&ComponentConfig::new(base)).unwrap();
        assert_eq!((c.max_deliver, c.max_pending, c.create_group), (10, 1000, true));
        assert_eq!(c.start_id, "0");
    }

    /// A spout whose I/O thread is the test: it feeds entries and reads
    /// the commands.
    fn spout(extra: &str) -> (StreamSpout, Feeder<Delivery>, Receiver<Command>) {
        let toml = format!("url = \"redis://127.0.0.1/\"\nstream = \"s\"\ngroup = \"g\"\n{extra}");
        let mut spout = StreamSpout::new(&ComponentConfig::new(&toml)).unwrap();
        let (entries_tx, entries_rx) = feed(16, None);
        let (commands_tx, commands_rx) = crossbeam_channel::unbounded();
        spout.io = Some(Io { entries: entries_rx, commands: commands_tx, thread: None });
        (spout, entries_tx, commands_rx)
    }

    fn delivery(id: &str, deliveries: u64) -> Delivery {
        let entry =
            RawEntry { id: id.into(), fields: vec![(b"uid".to_vec(), id.as_bytes().to_vec())] };
        Delivery { entry, deliveries }
    }

    fn next(spout: &mut StreamSpout) -> Vec<(String, u64)> {
        let mut recorder = Recorder::default();
        spout.next_tuple(&mut SpoutCollector::new(recorder.output())).unwrap();
        recorder
            .emitted
            .iter()
            .map(|e| (e.values[0].as_str().unwrap().to_owned(), e.message_id.unwrap().0))
            .collect()
    }

    fn commands(rx: &Receiver<Command>) -> Vec<String> {
        rx.try_iter()
            .map(|c| match c {
                Command::Ack(id) => format!("ack {id}"),
                Command::DeadLetter(d) => {
                    format!("dead {} {} {}", d.entry.id, d.deliveries, d.reason)
                }
                Command::Stop => "stop".into(),
            })
            .collect()
    }

    #[test]
    fn an_entry_is_acked_only_when_its_tree_is_and_a_failed_one_is_replayed_with_its_id() {
        let (mut spout, entries, rx) = spout("max_deliver = 3");
        assert!(entries.push(delivery("1-0", 1)));
        assert!(entries.push(delivery("1-1", 1)));
        let emitted = next(&mut spout);
        assert_eq!(emitted.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["1-0", "1-1"]);
        assert!(commands(&rx).is_empty(), "nothing is acked on emit");
        spout.ack(MessageId(emitted[0].1));
        assert_eq!(commands(&rx), ["ack 1-0"]);
        spout.fail(MessageId(emitted[1].1));
        assert!(commands(&rx).is_empty(), "a fail is replayed, not acked");
        assert_eq!(next(&mut spout), [("1-1".to_owned(), emitted[1].1)]);
        spout.ack(MessageId(emitted[1].1));
        assert_eq!(commands(&rx), ["ack 1-1"]);
        // Ids it does not know (a predecessor's) are ignored.
        spout.ack(MessageId(u64::MAX));
        spout.fail(MessageId(u64::MAX));
        assert!(commands(&rx).is_empty());
        assert!(next(&mut spout).is_empty());
    }

    #[test]
    fn the_last_allowed_delivery_failing_dead_letters_the_entry() {
        let (mut spout, entries, rx) = spout("max_deliver = 2");
        // A claimed entry already delivered twice by Redis's count.
        assert!(entries.push(delivery("2-0", 2)));
        assert!(entries.push(delivery("2-1", 1)));
        let emitted = next(&mut spout);
        spout.fail(MessageId(emitted[0].1));
        spout.fail(MessageId(emitted[1].1));
        assert_eq!(commands(&rx), ["dead 2-0 2 failed on delivery 2 of max_deliver = 2"]);
        let replayed = next(&mut spout);
        assert_eq!(replayed, [("2-1".to_owned(), emitted[1].1)]);
        spout.fail(MessageId(replayed[0].1));
        assert_eq!(commands(&rx), ["dead 2-1 2 failed on delivery 2 of max_deliver = 2"]);
        assert!(next(&mut spout).is_empty());
    }

    #[test]
    fn max_pending_bounds_what_is_in_flight_and_the_rest_waits_in_the_channel() {
        let (mut spout, entries, _rx) = spout("max_pending = 2");
        for i in 0..5 {
            assert!(entries.push(delivery(&format!("3-{i}"), 1)));
        }
        let emitted = next(&mut spout);
        assert_eq!(emitted.len(), 2);
        assert!(next(&mut spout).is_empty(), "two in flight");
        assert_eq!(entries.len(), 3, "the rest stays in the channel");
        spout.ack(MessageId(emitted[0].1));
        assert_eq!(next(&mut spout).len(), 1);
    }

    #[test]
    fn fails_during_the_drain_leave_the_entry_pending_without_a_delivery() {
        let (mut spout, entries, rx) = spout("max_deliver = 1");
        assert!(entries.push(delivery("4-0", 1)));
        let emitted = next(&mut spout);
        spout.deactivate();
        spout.fail(MessageId(emitted[0].1));
        assert!(commands(&rx).is_empty(), "neither acked nor dead-lettered");
        assert!(spout.pending.is_empty() && !spout.pending.has_replays());
        spout.close();
    }

    #[test]
    fn fields_become_a_flat_list_of_names_and_values() {
        let entry = RawEntry {
            id: "1-0".into(),
            fields: vec![(b"a".to_vec(), b"1".to_vec()), (b"bin".to_vec(), vec![0xff, 0])],
        };
        let value = fields_value(&entry);
        let list = value.as_list().unwrap();
        assert_eq!(list.len(), 4);
        assert_eq!(list[0].as_str(), Some("a"));
        assert_eq!(list[1].as_str(), Some("1"));
        assert_eq!(list[2].as_str(), Some("bin"));
        assert_eq!(list[3].as_bytes(), Some(&[0xff, 0][..]));
    }

    #[test]
    fn config_errors_name_the_key() {
        let bad = |toml: &str| match StreamSpout::new(&ComponentConfig::new(toml)) {
            Ok(_) => panic!("accepted {toml}"),
            Err(e) => e.to_string(),
        };
        let base = "url = \"redis://127.0.0.1/\"\nstream = \"s\"\ngroup = \"g\"\n";
        assert!(bad(&format!("{base}colour = 1")).contains("colour"));
        assert!(bad("url = \"nope://x\"\nstream = \"s\"\ngroup = \"g\"").contains("url"));
        assert!(bad(&format!("{base}batch = 0")).contains("batch"));
        assert!(bad(&format!("{base}max_deliver = 0")).contains("max_deliver"));
        assert!(bad(&format!("{base}dead_letter_stream = \"s\"")).contains("dead_letter_stream"));
        assert!(bad("stream = \"s\"\ngroup = \"g\"").contains("url"));
        assert!(StreamSpout::new(&ComponentConfig::new(base)).is_ok());
    }
}
