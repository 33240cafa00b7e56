//! [`JetStreamSpout`]: a reliable spout over a durable JetStream pull consumer.
//!
//! # Threads
//! The spout owns one I/O thread running a single-threaded tokio runtime
//! with the async-nats client. Two tasks run there:
//! - the **puller** asks the consumer for as many messages as the bounded
//!   channel to the spout has room for (`batch` at most), waits for that
//!   batch, and puts its messages into the channel. While the channel is
//!   full it asks for nothing, so back-pressure reaches the server: unpulled
//!   messages stay on the server, where other hosts sharing the consumer can
//!   take them;
//! - the **commander** carries out what the spout decided (ack, nak, dead
//!   letter, stop), in the order the spout decided it.
//!
//! `next_tuple` never blocks: it takes what the channel holds, at most
//! `batch` messages per call.
//!
//! # Guarantees
//! A message is acked to JetStream only when squall acks its tree; a failed
//! or timed-out tree naks it (`nak_delay`). At `close` (after the host's
//! drain) the puller is stopped and its last batch received, every message
//! still held or still in the channel is naked for immediate redelivery, and
//! the client is flushed before `close` returns, so nothing is left to
//! `ack_wait`.
//!
//! # Close protocol
//! 1. `deactivate`: the puller stops asking for more; the pull in progress
//!    runs to its end (at most `fetch_wait`) while the host drains.
//! 2. `close`: `Stop` with a reply; the puller says it has stopped. A pull
//!    still in progress gets at most `min(fetch_wait, close_timeout)` more,
//!    then it is cancelled.
//! 3. Messages left in the channel, and held ones, are naked.
//! 4. `Close`: the commander carries out what is queued, flushes the
//!    client, and the thread ends; `close` waits for it (at most
//!    `close_timeout`). A message the server sent into a cancelled pull is
//!    redelivered after `ack_wait`.
//!
//! The pending map, the dead-letter decision, the feed, the I/O thread and
//! the connection's health are `squall_connector`'s.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, AckKind};
use futures_util::StreamExt;
use serde::Deserialize;
use squall_connector::feed::Empty;
use squall_connector::{
    feed, Acked, Backoff, Delivery, Failed, Feed, Feeder, Health, IoThread, Pending, Positions,
    Redelivery, RetryPolicy,
};

/// The format of a JetStream spout's checkpoint position (stream sequences).
const POSITION_FORMAT: &str = "squall-jetstream-position/1";
use squall_plugin_api::metrics::{self, Counter, Gauge};
use squall_plugin_api::prelude::*;
use tokio::sync::mpsc;

use crate::connect::{runtime, with_connection, Connection};

/// The longest `close_timeout` (the declared close budget is twice it).
const MAX_CLOSE_TIMEOUT_SECS: u64 = 15;

/// The header a dead-lettered message carries its reason in.
pub const DEAD_LETTER_REASON: &str = "Squall-Dead-Letter-Reason";
/// The header a dead-lettered message carries its original subject in.
pub const ORIGINAL_SUBJECT: &str = "Squall-Original-Subject";
/// The header a dead-lettered message carries its delivery count in.
pub const DELIVERIES: &str = "Squall-Deliveries";

/// What the spout emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Emit {
    /// `["subject", "payload", "headers"]` on stream `default`.
    Message,
    /// `["payload"]` on stream `payload`.
    Payload,
}

/// How the payload is emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PayloadAs {
    /// As bytes (a shared buffer), as it came.
    Bytes,
    /// As a string, decoded as UTF-8 (invalid sequences become U+FFFD).
    String,
}

squall_connector::connector_config! {
    /// The spout's own keys (the connection's are in `connect::Connection`).
    #[derive(Debug, Clone, PartialEq)]
    struct SpoutKeys {
        stream: String = required(String, "the JetStream stream"),
        consumer: String = required(String, "the durable pull consumer"),
        create_consumer: bool = default(Bool, "false", "create the durable consumer if it is absent"),
        subject: Option<String> = maybe(String, "the created consumer's filter subject (only with create_consumer)"),
        batch: usize = default(Integer, "256", "most messages per pull; the capacity of the channel to next_tuple"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        fetch_wait: Duration = default(Duration, "\"1s\"", "how long one pull request waits for messages"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        ack_wait: Duration = default(Duration, "\"30s\"", "the created consumer's ack wait (redelivery after it)"),
        max_ack_pending: i64 = default(Integer, "1000", "the created consumer's limit of unacked messages"),
        max_deliver: u32 = default(Integer, "10", "deliveries after which a failing message is dead-lettered"),
        dead_letter_subject: Option<String> = maybe(String, "where dead messages are published (default: terminated, logged and counted only)"),
        #[serde(default, deserialize_with = "squall_connector::config::opt_duration")]
        nak_delay: Option<Duration> = maybe(Duration, "how long the server waits to redeliver a failed message (default at once)"),
        emit: Emit = default(String, "\"message\"", "\"message\": [subject, payload, headers]; \"payload\": [payload] on stream payload"),
        payload_as: PayloadAs = default(String, "\"bytes\"", "\"bytes\", or \"string\" (decoded as UTF-8, invalid sequences replaced)"),
        payload_field: String = default(String, "\"payload\"", "the name of the payload's field in the emitted tuples"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        close_timeout: Duration = default(Duration, "\"5s\"", "how long close waits for its acks and naks to be flushed"),
        unsafe_ack_on_emit: bool = default(Bool, "false", "tests only: ack on emit, not on tree completion (loses messages on failure)"),
    }
}

with_connection!(SpoutConfig, SpoutKeys);

fn default_payload_field() -> String {
    "payload".to_owned()
}

impl SpoutConfig {
    fn check(&self) -> Result<()> {
        self.connection().check()?;
        for (key, name) in [("stream", &self.stream), ("consumer", &self.consumer)] {
            if name.is_empty() || name.contains(|c: char| c.is_whitespace() || ".*>".contains(c)) {
                return Err(format!(
                    "{key} {name:?} is not a valid name (non-empty; no whitespace, '.', '*' or '>')"
                )
                .into());
            }
        }
        if self.batch == 0 || self.batch > 100_000 {
            return Err(format!("batch must be 1 ... 100000, found {}", self.batch).into());
        }
        if self.fetch_wait < Duration::from_millis(10) {
            return Err("fetch_wait must be at least 10ms".into());
        }
        if self.max_ack_pending < 1 {
            return Err("max_ack_pending must be at least 1".into());
        }
        if self.close_timeout > Duration::from_secs(MAX_CLOSE_TIMEOUT_SECS) {
            return Err(format!(
                "close_timeout must be at most {MAX_CLOSE_TIMEOUT_SECS}s (the spout's declared close budget is twice it), found {:?}",
                self.close_timeout
            )
            .into());
        }
        if self.max_deliver < 1 {
            return Err(
                format!("max_deliver must be at least 1, found {}", self.max_deliver).into()
            );
        }
        if self.payload_field.is_empty()
            || (self.emit == Emit::Message
                && ["subject", "headers"].contains(&self.payload_field.as_str()))
        {
            return Err(format!(
                "payload_field {:?} must be a non-empty name other than \"subject\" and \"headers\"",
                self.payload_field
            )
            .into());
        }
        if self.subject.is_some() && !self.create_consumer {
            return Err(
                "subject (the consumer's filter) is used only with create_consumer = true".into()
            );
        }
        Ok(())
    }

    /// The consumer the spout creates when `create_consumer` is set. Its
    /// `max_deliver` is one more than the spout's, so the delivery after the
    /// last allowed one reaches the spout, which dead-letters it, instead of
    /// the server silently giving up on it.
    fn consumer_config(&self) -> pull::Config {
        pull::Config {
            durable_name: Some(self.consumer.clone()),
            filter_subject: self.subject.clone().unwrap_or_default(),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: self.ack_wait,
            max_ack_pending: self.max_ack_pending,
            max_deliver: i64::from(self.max_deliver) + 1,
            ..Default::default()
        }
    }
}

/// Looks the stream and consumer up, and creates the consumer if asked to.
// String: the JetStream errors here are several types, and the message
// becomes the spout's `open` error.
async fn ensure_consumer(
    client: &async_nats::Client,
    config: &SpoutConfig,
    create: bool,
) -> std::result::Result<jetstream::consumer::Consumer<pull::Config>, String> {
    let js = jetstream::new(client.clone());
    let stream = js.get_stream(&config.stream).await.map_err(|e| {
        if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
            if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND)
        {
            format!("stream {:?} does not exist on {}", config.stream, config.connection.url)
        } else {
            format!("cannot look up stream {:?} on {}: {e}", config.stream, config.connection.url)
        }
    })?;
    match stream.consumer_info(&config.consumer).await {
        Ok(_) => {}
        Err(e) if e.kind() == jetstream::context::ConsumerInfoErrorKind::NotFound => {
            if !(create && config.create_consumer) {
                if config.create_consumer {
                    // `new` only checks; `open` creates.
                    return Err(String::new());
                }
                return Err(format!(
                    "consumer {:?} does not exist on stream {:?} (create it, or set create_consumer = true)",
                    config.consumer, config.stream
                ));
            }
            stream.create_consumer(config.consumer_config()).await.map_err(|e| {
                format!(
                    "cannot create consumer {:?} on stream {:?}: {e}",
                    config.consumer, config.stream
                )
            })?;
        }
        Err(e) => {
            return Err(format!(
                "cannot look up consumer {:?} on stream {:?}: {e}",
                config.consumer, config.stream
            ))
        }
    }
    stream.get_consumer(&config.consumer).await.map_err(|e| {
        format!(
            "consumer {:?} on stream {:?} is not a pull consumer: {e}",
            config.consumer, config.stream
        )
    })
}

/// What the spout asks the I/O thread to do, in order.
#[derive(Debug)]
enum Command {
    Ack(jetstream::Message),
    /// Durable state: double-ack these (their effects are committed) and
    /// report the sequences the server confirmed.
    AckConfirmed(Vec<jetstream::Message>),
    Nak(jetstream::Message, Option<Duration>),
    DeadLetter {
        message: jetstream::Message,
        reason: String,
        deliveries: i64,
    },
    /// Stop pulling; reply once the last batch is in the channel.
    Stop(Option<std::sync::mpsc::Sender<()>>),
    /// Carry out what is queued, flush, end.
    Close,
}

/// The spout's metrics (registered in `open`).
#[derive(Debug, Clone)]
struct SpoutMetrics {
    received: Counter,
    redelivered: Counter,
    acked: Counter,
    naked: Counter,
    dead_lettered: Counter,
    held: Gauge,
}

impl SpoutMetrics {
    fn register() -> Self {
        Self {
            received: metrics::counter("nats_received", "JetStream messages received."),
            redelivered: metrics::counter(
                "nats_redelivered",
                "JetStream messages received with a delivery count above 1.",
            ),
            acked: metrics::counter("nats_acked", "JetStream messages acked to the server."),
            naked: metrics::counter(
                "nats_naked",
                "JetStream messages naked (failed, timed out or unresolved at close).",
            ),
            dead_lettered: metrics::counter(
                "nats_dead_lettered",
                "JetStream messages dead-lettered after max_deliver deliveries.",
            ),
            held: metrics::gauge(
                "nats_held",
                "JetStream messages emitted and not yet acked or failed.",
            ),
        }
    }
}

/// What the I/O thread tells a durable spout.
#[derive(Debug)]
enum Report {
    /// The server confirmed the acks of these stream sequences.
    Confirmed(Vec<u64>),
    /// The consumer's ack floor at connect: every sequence up to it is acked.
    AckFloor(u64),
}

/// The running I/O side: the thread and the channels to and from it.
#[derive(Debug)]
struct Io {
    messages: Feed<jetstream::Message>,
    commands: mpsc::UnboundedSender<Command>,
    reports: crossbeam_channel::Receiver<Report>,
    thread: IoThread,
}

/// A reliable spout over a durable JetStream pull consumer (see the module
/// doc and docs/connectors.md for every key).
#[derive(Debug)]
pub struct JetStreamSpout {
    config: SpoutConfig,
    label: String,
    io: Option<Io>,
    /// Emitted, not yet acked or failed (the broker redelivers a nak).
    held: Pending<jetstream::Message>,
    health: Health,
    metrics: Option<SpoutMetrics>,
    stream: StreamId,
    headers: String,
    io_gone_reported: bool,
    /// Durable state's bookkeeping (`None`: the topology has no `[state]`).
    durable: Option<Positions<u64>>,
}

impl Spout for JetStreamSpout {
    const NAME: &'static str = "JetStreamSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&SpoutConfig::KEYS);
    /// `close` waits at most `min(fetch_wait, close_timeout)` for the pull
    /// in progress, then `close_timeout` for the flush: within twice the
    /// longest `close_timeout` allowed.
    const CLOSE_BUDGET: Option<Duration> = Some(Duration::from_secs(2 * MAX_CLOSE_TIMEOUT_SECS));
    const DESCRIPTION: &'static str =
        "pulls from a durable JetStream consumer; acks on tree completion, naks on failure";
    /// With durable state, a message is acked to the server once the
    /// checkpoint holding its effects commits (see `durable`).
    const CHECKPOINTS: bool = true;

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["subject", "payload", "headers"]).declare_stream("payload", &["payload"]);
    }

    /// With `payload_field`, the payload's field has that name on both
    /// streams.
    fn declare_outputs_for(
        config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        /// Only the key that shapes the outputs; the rest is checked by `new`.
        #[derive(Deserialize)]
        struct Outputs {
            #[serde(default = "default_payload_field")]
            payload_field: String,
        }
        let field = config.parse::<Outputs>()?.payload_field;
        outputs.declare(&["subject", &field, "headers"]).declare_stream("payload", &[&field]);
        Ok(())
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = SpoutConfig::parse(config)?;
        config.check()?;
        // With a server to ask, a missing stream or consumer is a config
        // error now (exit 78 at the component's table). Without one, `open`
        // retries and reports.
        let rt = runtime()?;
        rt.block_on(async {
            let Ok(client) = config.connection().connect_once("squall-check").await else {
                return Ok(());
            };
            let checked = ensure_consumer(&client, &config, false).await.map(drop);
            let _ = client.drain().await;
            match checked {
                Err(e) if !e.is_empty() => Err(e),
                _ => Ok(()),
            }
        })?;
        Ok(Self {
            held: Pending::new(usize::MAX, retry_policy(&config.keys), Redelivery::Broker),
            config,
            label: String::new(),
            io: None,
            health: Health::new(String::new()),
            metrics: None,
            stream: StreamId::DEFAULT,
            headers: String::new(),
            io_gone_reported: false,
            durable: None,
        })
    }

    fn restore_checkpoint(&mut self, position: State) -> Result<()> {
        self.start_durable(&position)
    }

    /// A live swap hands a durable spout's position to its successor: the
    /// messages acked downstream and waiting for a commit are left to the
    /// server (not acked, not naked) and are covered in the new instance.
    fn save_state(&mut self) -> Option<State> {
        self.drain_reports();
        self.durable.as_ref().map(Positions::position)
    }

    fn restore_state(&mut self, state: State) -> Result<()> {
        self.start_durable(&state)
    }

    fn checkpoint(&mut self, checkpoint: u64) -> Option<State> {
        self.drain_reports();
        let epoch = self.held.barrier();
        let durable = self.durable.as_mut()?;
        durable.barrier(checkpoint, epoch);
        Some(durable.position())
    }

    fn committed(&mut self, checkpoint: u64) {
        let Some(epoch) = self.durable.as_mut().and_then(|d| d.committed(checkpoint)) else {
            return;
        };
        let messages: Vec<jetstream::Message> = self.held.commit(epoch).map(|(_, m)| m).collect();
        if messages.is_empty() {
            return;
        }
        if let Some(d) = &mut self.durable {
            for m in &messages {
                d.released(stream_sequence(m));
            }
        }
        if let Some(m) = &self.metrics {
            m.acked.add(messages.len() as u64);
        }
        self.command(Command::AckConfirmed(messages));
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self.label = format!("{} task {}", context.component, context.task_id);
        self.metrics = Some(SpoutMetrics::register());
        self.health = Health::new(format!("nats {}", self.label));
        self.health.register("nats", context.waker());
        if self.config.emit == Emit::Payload {
            self.stream =
                context.stream_id("payload").ok_or("stream \"payload\" is not declared")?;
        }
        let (message_tx, message_rx) = feed(self.config.batch, context.waker());
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (report_tx, report_rx) = crossbeam_channel::unbounded();
        let config = self.config.clone();
        let name = format!("squall {} {}", context.topology, self.label);
        let label = self.label.clone();
        let health = self.health.clone();
        let mut thread = IoThread::spawn(
            format!("nats-{}-{}", context.component, context.task_id),
            move |ready| {
                let rt = match runtime() {
                    Ok(rt) => rt,
                    Err(e) => {
                        ready.ready(Err(format!("cannot start the I/O runtime: {e}")));
                        return;
                    }
                };
                let channels =
                    Channels { messages: message_tx, commands: command_rx, reports: report_tx };
                rt.block_on(io_main(config, name, label, channels, ready, health));
            },
        )?;
        let budget = self.config.connection().connect_budget() + Duration::from_secs(5);
        let ready = thread.wait_ready(budget);
        self.io =
            Some(Io { messages: message_rx, commands: command_tx, reports: report_rx, thread });
        ready.map_err(Into::into)
    }

    fn deactivate(&mut self) {
        self.command(Command::Stop(None));
    }

    /// Up to `batch` messages per call: one call per message would cost a
    /// plugin crossing and an executor turn each.
    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        self.emit_up_to(self.config.batch, collector)
    }

    /// Up to `max` messages: a throttled spout is asked for one at a time,
    /// so that its rate holds over short windows too.
    fn next_batch(&mut self, max: usize, collector: &mut SpoutCollector<'_>) -> Result<()> {
        self.emit_up_to(max, collector)
    }

    fn ack(&mut self, id: MessageId) {
        let Acked::Now(message) = self.held.ack(id.0) else {
            // Deferred (durable state): acked to the server at the commit.
            return;
        };
        if let Some(m) = &self.metrics {
            m.acked.inc();
            m.held.set(self.held.len() as i64);
        }
        self.command(Command::Ack(message));
    }

    fn fail(&mut self, id: MessageId) {
        let failed = self.held.fail(id.0, Instant::now());
        if let Some(m) = &self.metrics {
            m.held.set(self.held.len() as i64);
        }
        if let (Some(d), Failed::Dead { item, .. } | Failed::Redeliver { item, .. }) =
            (&mut self.durable, &failed)
        {
            d.forget(stream_sequence(item));
        }
        match failed {
            Failed::Dead { item, reason } => {
                if let Some(m) = &self.metrics {
                    m.dead_lettered.inc();
                }
                let deliveries = i64::from(reason.deliveries);
                let reason = format!("{reason} (squall)");
                self.command(Command::DeadLetter { message: item, reason, deliveries });
            }
            Failed::Redeliver { item, delay } => {
                if let Some(m) = &self.metrics {
                    m.naked.inc();
                }
                let delay = (!delay.is_zero()).then_some(delay);
                self.command(Command::Nak(item, delay));
            }
            Failed::Replay { .. } | Failed::Unknown => {}
        }
    }

    fn close(&mut self) {
        let Some(mut io) = self.io.take() else { return };
        // 1-2. Stop the puller (its pull in progress is cancelled) and wait
        // until it says so.
        let (stopped_tx, stopped_rx) = std::sync::mpsc::channel();
        let _ = io.commands.send(Command::Stop(Some(stopped_tx)));
        let _ = stopped_rx.recv_timeout(self.config.close_timeout);
        // 3. Nak what was never emitted, and what is still held.
        let mut unresolved = 0u64;
        while let Ok(message) = io.messages.take() {
            let _ = io.commands.send(Command::Nak(message, None));
            unresolved += 1;
        }
        for message in self.held.drain() {
            let _ = io.commands.send(Command::Nak(message, None));
            unresolved += 1;
        }
        self.log_left_to_server();
        if let Some(m) = &self.metrics {
            m.naked.add(unresolved);
            m.held.set(0);
        }
        // 4. Flush and end.
        let _ = io.commands.send(Command::Close);
        if !io.thread.join_within(self.config.close_timeout) {
            squall_plugin_api::warn!(
                "{}: the NATS client did not finish within close_timeout = {:?}; unflushed acks are redelivered after ack_wait",
                self.label,
                self.config.close_timeout
            );
        }
    }
}

/// The retry policy: `max_deliver`, and `nak_delay` as the broker's delay.
fn retry_policy(keys: &SpoutKeys) -> RetryPolicy {
    let delay = keys.nak_delay.unwrap_or_default();
    RetryPolicy { max_deliver: keys.max_deliver.max(1), backoff: Backoff::new(delay, delay) }
}

impl JetStreamSpout {
    /// At close, with durable state: what waits for a commit is left to the
    /// server (a successor or a restart covers it, by the position); says
    /// how much, and how many stale redeliveries were recognised.
    fn log_left_to_server(&self) {
        let stale = self.durable.as_ref().map_or(0, Positions::stale_redeliveries);
        if stale > 0 {
            squall_plugin_api::info!(
                "{}: {stale} redelivered message(s) whose acks were already confirmed were \
                 recognised and not emitted again",
                self.label
            );
        }
        let waiting = self.held.deferred();
        if waiting > 0 {
            squall_plugin_api::info!(
                "{}: {waiting} message(s) acked downstream wait for a checkpoint commit; left \
                 unacked on the server, and covered by the position a restart or a successor \
                 takes",
                self.label
            );
        }
    }

    /// Emits up to `max` tuples from the I/O thread's channel (fewer when
    /// it holds fewer). Messages that emit nothing (covered by the restored
    /// state, or in flight already) do not count: a call that took one of
    /// those and stopped would emit nothing, and the executor would wait
    /// for a wake that does not come while the channel still holds
    /// messages.
    fn emit_up_to(&mut self, max: usize, collector: &mut SpoutCollector<'_>) -> Result<()> {
        // A dropped connection is this task's error (errors, last_error)
        // once; the client reconnects by itself.
        if let Some(e) = self.health.take_error() {
            return Err(e.into());
        }
        let until = collector.emitted() + max;
        while collector.emitted() < until {
            let Some(io) = &mut self.io else { return Ok(()) };
            let message = match io.messages.take() {
                Ok(m) => m,
                Err(Empty::Now) => return Ok(()),
                Err(Empty::Closed) => {
                    if !std::mem::replace(&mut self.io_gone_reported, true) {
                        return Err(
                            format!("{}: the NATS I/O thread has stopped", self.label).into()
                        );
                    }
                    return Ok(());
                }
            };
            self.take(message, collector);
        }
        Ok(())
    }

    /// Emits one received message (or dead-letters it when it was delivered
    /// more than `max_deliver` times) and holds it until its tree completes.
    fn take(&mut self, message: jetstream::Message, collector: &mut SpoutCollector<'_>) {
        let info = message.info().map(|i| (i.delivered, i.stream_sequence));
        let deliveries = info.as_ref().map_or(1, |i| i.0);
        let seq = info.as_ref().ok().map(|&(_, seq)| seq);
        let Some(message) = self.durable_delivery(message, seq) else { return };
        if let Some(m) = &self.metrics {
            m.received.inc();
            if deliveries > 1 {
                m.redelivered.inc();
            }
        }
        let deliveries = u32::try_from(deliveries.max(1)).unwrap_or(u32::MAX);
        if let Err(reason) = self.held.admit(deliveries) {
            self.give_up(message, seq, reason.to_string(), deliveries);
            return;
        }
        if self.config.unsafe_ack_on_emit {
            self.emit(&message, collector, None);
            if let Some(m) = &self.metrics {
                m.acked.inc();
            }
            self.command(Command::Ack(message));
            return;
        }
        let id = self.held.insert(message, deliveries);
        if let Some(message) = self.held.get(id) {
            emit(
                &self.config,
                self.stream,
                &mut self.headers,
                message,
                collector,
                Some(MessageId(id)),
            );
        }
        if let Some(m) = &self.metrics {
            m.held.set(self.held.len() as i64);
        }
    }

    /// With durable state, what a delivery of stream sequence `seq` is: the
    /// message back when it is to be emitted; None when it is taken care of
    /// (covered by the restored stores: acked at the next commit; in flight
    /// already; released: acked at once).
    #[inline]
    fn durable_delivery(
        &mut self,
        message: jetstream::Message,
        seq: Option<u64>,
    ) -> Option<jetstream::Message> {
        let (Some(d), Some(seq)) = (&mut self.durable, seq) else { return Some(message) };
        match d.deliver(seq) {
            Delivery::Emit => Some(message),
            Delivery::Covered => {
                // Its effects are in the restored stores: ack it at the
                // next commit, never emit it again.
                self.held.defer(message);
                None
            }
            Delivery::InFlight => None,
            Delivery::Released => {
                self.command(Command::AckConfirmed(vec![message]));
                None
            }
        }
    }

    /// Gives up a message delivered more than `max_deliver` times: it goes
    /// to the dead-letter subject (or is terminated).
    fn give_up(
        &mut self,
        message: jetstream::Message,
        seq: Option<u64>,
        reason: String,
        deliveries: u32,
    ) {
        if let (Some(d), Some(seq)) = (&mut self.durable, seq) {
            d.forget(seq);
        }
        if let Some(m) = &self.metrics {
            m.dead_lettered.inc();
        }
        self.command(Command::DeadLetter { message, reason, deliveries: i64::from(deliveries) });
    }

    /// Durable state from `position`: broker acks wait for commits from now.
    fn start_durable(&mut self, position: &State) -> Result<()> {
        let source = format!("stream {:?} consumer {:?}", self.config.stream, self.config.consumer);
        // A stale copy of a confirmed message is received at most the feed
        // plus one pull (each `batch` at most) before it is taken; with a
        // wide margin.
        let horizon =
            (4 * self.config.batch as u64).max(squall_connector::durable::DEFAULT_STALE_HORIZON);
        let durable = Positions::restore(POSITION_FORMAT, source, position)?.stale_horizon(horizon);
        self.held.defer_broker_acks(true);
        self.durable = Some(durable);
        Ok(())
    }

    /// Takes in what the I/O thread reported (confirmed acks, the ack floor).
    fn drain_reports(&mut self) {
        let (Some(io), Some(d)) = (&self.io, &mut self.durable) else { return };
        while let Ok(report) = io.reports.try_recv() {
            match report {
                Report::Confirmed(seqs) => d.confirmed(seqs),
                Report::AckFloor(floor) => {
                    d.prune(|seq| seq <= floor);
                }
            }
        }
    }

    fn command(&self, command: Command) {
        if let Some(io) = &self.io {
            // A send fails only when the I/O thread has ended; the message is
            // then redelivered by the server after ack_wait.
            let _ = io.commands.send(command);
        }
    }

    fn emit(
        &mut self,
        message: &jetstream::Message,
        collector: &mut SpoutCollector<'_>,
        id: Option<MessageId>,
    ) {
        emit(&self.config, self.stream, &mut self.headers, message, collector, id);
    }
}

/// A message's stream sequence (0 for one without JetStream metadata).
fn stream_sequence(message: &jetstream::Message) -> u64 {
    message.info().map_or(0, |i| i.stream_sequence)
}

/// The I/O thread's ends of the channels to the spout.
struct Channels {
    messages: Feeder<jetstream::Message>,
    commands: mpsc::UnboundedReceiver<Command>,
    reports: crossbeam_channel::Sender<Report>,
}

/// Double-acks `messages` (concurrently) and reports the sequences the
/// server confirmed; the others stay in the position, and their
/// redeliveries are acked again.
async fn ack_confirmed(
    messages: Vec<jetstream::Message>,
    reports: crossbeam_channel::Sender<Report>,
    label: String,
) {
    let acks = messages.iter().map(|m| async move { m.double_ack().await.map(|()| m) });
    let results = futures_util::future::join_all(acks).await;
    let mut confirmed = Vec::with_capacity(results.len());
    let mut failed = 0usize;
    let mut first_error = None;
    for r in results {
        match r {
            Ok(m) => confirmed.push(stream_sequence(m)),
            Err(e) => {
                failed += 1;
                first_error.get_or_insert(e.to_string());
            }
        }
    }
    if let Some(e) = first_error {
        squall_plugin_api::warn!(
            "{label}: {failed} committed message ack(s) not confirmed ({e}); they stay in the \
             checkpoint position and their redeliveries are acked again"
        );
    }
    let _ = reports.send(Report::Confirmed(confirmed));
}

/// Emits a message's values on the configured stream (no `Vec`: the values
/// are built on the stack).
fn emit(
    config: &SpoutConfig,
    stream: StreamId,
    headers_text: &mut String,
    message: &jetstream::Message,
    collector: &mut SpoutCollector<'_>,
    id: Option<MessageId>,
) {
    let payload = match config.payload_as {
        PayloadAs::Bytes => Value::shared_bytes(&message.payload),
        PayloadAs::String => match std::str::from_utf8(&message.payload) {
            Ok(text) => Value::str(text),
            Err(_) => Value::str(&String::from_utf8_lossy(&message.payload)),
        },
    };
    let send = |collector: &mut SpoutCollector<'_>, values: &[Value]| match id {
        Some(id) => collector.emit_to(stream, values, Some(id)),
        None => collector.emit_to(stream, values, None),
    };
    match config.emit {
        Emit::Payload => send(collector, &[payload]),
        Emit::Message => {
            headers_text.clear();
            if let Some(headers) = &message.headers {
                for (name, values) in headers.iter() {
                    for value in values {
                        let _ = write!(headers_text, "{name}: {}\r\n", value.as_str());
                    }
                }
            }
            let values = [Value::str(message.subject.as_str()), payload, Value::str(headers_text)];
            send(collector, &values);
        }
    }
}

/// The I/O thread's main task: connect (bounded), look the consumer up (or
/// create it), report to `open`, then run the puller and the commander.
async fn io_main(
    config: SpoutConfig,
    name: String,
    label: String,
    channels: Channels,
    ready: squall_connector::io::Handshake,
    health: Health,
) {
    let Channels { messages, mut commands, reports } = channels;
    let connection: Connection = config.connection();
    let client = match connection.connect(&name, Some(&health)).await {
        Ok(c) => c,
        Err(e) => {
            ready.ready(Err(e));
            return;
        }
    };
    let mut consumer = match ensure_consumer(&client, &config, true).await {
        Ok(c) => c,
        Err(e) => {
            ready.ready(Err(e));
            return;
        }
    };
    // Durable state prunes its covered sequences by the ack floor.
    if let Ok(info) = consumer.info().await {
        let _ = reports.send(Report::AckFloor(info.ack_floor.stream_sequence));
    }
    ready.connected();
    let mut commander = Commander::start(&client, consumer, &config, label, messages, reports);
    while let Some(command) = commands.recv().await {
        if !commander.run(command).await {
            break;
        }
    }
    commander.close(&client).await;
}

/// The I/O thread's commander: runs the spout's commands (acks, naks, dead
/// letters, the stop at close) while the puller fills the feed.
struct Commander {
    js: jetstream::Context,
    reports: crossbeam_channel::Sender<Report>,
    label: String,
    dead_letter_subject: Option<Arc<str>>,
    /// 0: pull; STOP: finish the pull in progress, ask for no more; CANCEL:
    /// abandon the pull in progress too.
    stop_tx: tokio::sync::watch::Sender<u8>,
    puller: Option<tokio::task::JoinHandle<()>>,
    /// How long close lets the pull in progress finish before cancelling it.
    finish: Duration,
    /// Acks and naks not sent (logged at powers of two).
    warned: u64,
}

impl Commander {
    /// Spawns the puller on `consumer`.
    fn start(
        client: &async_nats::Client,
        consumer: jetstream::consumer::Consumer<pull::Config>,
        config: &SpoutConfig,
        label: String,
        messages: Feeder<jetstream::Message>,
        reports: crossbeam_channel::Sender<Report>,
    ) -> Self {
        let js = jetstream::new(client.clone());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(0u8);
        let finish = config.fetch_wait.min(config.close_timeout);
        let puller = tokio::spawn(pull(consumer, config.clone(), label.clone(), messages, stop_rx));
        let dead_letter_subject: Option<Arc<str>> =
            config.dead_letter_subject.as_deref().map(Arc::from);
        Self {
            js,
            reports,
            label,
            dead_letter_subject,
            stop_tx,
            puller: Some(puller),
            finish,
            warned: 0,
        }
    }

    /// Runs one command. False: `Close`.
    async fn run(&mut self, command: Command) -> bool {
        let label = &self.label;
        let result = match command {
            Command::Ack(m) => m.ack().await,
            Command::AckConfirmed(batch) => {
                tokio::spawn(ack_confirmed(batch, self.reports.clone(), label.clone()));
                Ok(())
            }
            Command::Nak(m, delay) => m.ack_with(AckKind::Nak(delay)).await,
            Command::DeadLetter { message, reason, deliveries } => {
                let js = self.js.clone();
                let subject = self.dead_letter_subject.clone();
                let label = label.clone();
                tokio::spawn(dead_letter(js, subject, message, reason, deliveries, label));
                Ok(())
            }
            Command::Stop(reply) => {
                self.stop(reply).await;
                Ok(())
            }
            Command::Close => return false,
        };
        if let Err(e) = result {
            self.warned += 1;
            let warned = self.warned;
            if warned.is_power_of_two() {
                squall_plugin_api::warn!("{}: ack/nak not sent ({e}); the server redelivers after ack_wait (warning #{warned})", self.label);
            }
        }
        true
    }

    /// Stops the puller: it finishes the pull in progress and asks for no
    /// more. With a `reply` (close), waits up to `finish` for that, cancels
    /// the pull after, and answers.
    async fn stop(&mut self, reply: Option<std::sync::mpsc::Sender<()>>) {
        let stop_tx = &self.stop_tx;
        stop_tx.send_if_modified(|v| std::mem::replace(v, (*v).max(STOP)) < STOP);
        let Some(reply) = reply else { return };
        if let Some(mut p) = self.puller.take() {
            let (finish, label) = (self.finish, &self.label);
            if tokio::time::timeout(finish, &mut p).await.is_err() {
                let _ = stop_tx.send(CANCEL);
                let _ = p.await;
                squall_plugin_api::info!(
                    "{label}: close cancelled the pull in progress after {finish:?} (what the server sent into it is redelivered after ack_wait)"
                );
            }
        }
        let _ = reply.send(());
    }

    /// Close: the puller ends, and the acks sent are flushed.
    async fn close(mut self, client: &async_nats::Client) {
        let _ = self.stop_tx.send(CANCEL);
        if let Some(p) = self.puller.take() {
            p.abort();
        }
        if let Err(e) = client.flush().await {
            squall_plugin_api::warn!("{}: flushing acks at close failed: {e}", self.label);
        }
    }
}

/// The puller's stop levels (see `io_main`).
const STOP: u8 = 1;
const CANCEL: u8 = 2;

/// The puller: fetches as many messages as the feed has room for, in
/// batches that end after `fetch_wait`, until told to stop. At `STOP` it
/// finishes the batch in progress (so what the server sent into it is
/// received, and naked at close, not left to `ack_wait`) and asks for no
/// more; at `CANCEL` it abandons it.
async fn pull(
    consumer: jetstream::consumer::Consumer<pull::Config>,
    config: SpoutConfig,
    label: String,
    messages: Feeder<jetstream::Message>,
    mut stop: tokio::sync::watch::Receiver<u8>,
) {
    let room = Arc::new(tokio::sync::Notify::new());
    let notify = room.clone();
    messages.on_room(move || notify.notify_one());
    let mut errors = 0u64;
    loop {
        if *stop.borrow() >= STOP {
            return;
        }
        let Some(want) = wait_for_room(&messages, &room, &mut stop, config.batch).await else {
            return;
        };
        let batch = tokio::select! {
            b = consumer.batch().max_messages(want).expires(config.fetch_wait).messages() => b,
            _ = stop.changed() => return,
        };
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                if !request_failed(&e, &mut errors, &label, &mut stop).await {
                    return;
                }
                continue;
            }
        };
        if !receive(batch, &messages, &mut stop, &mut errors, &label).await {
            return;
        }
    }
}

/// A pull request failed: counted, logged at powers of two, and retried
/// after 250 ms. False: a stop came meanwhile.
async fn request_failed(
    e: &impl std::fmt::Display,
    errors: &mut u64,
    label: &str,
    stop: &mut tokio::sync::watch::Receiver<u8>,
) -> bool {
    *errors += 1;
    if errors.is_power_of_two() {
        squall_plugin_api::warn!("{label}: pull request failed ({e}); retrying (error #{errors})");
    }
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(250)) => true,
        _ = stop.changed() => false,
    }
}

/// Waits for room in the feed (or a stop): how many messages to ask for
/// next, at most `batch`. None: stop, or the feed closed.
async fn wait_for_room(
    messages: &Feeder<jetstream::Message>,
    room: &tokio::sync::Notify,
    stop: &mut tokio::sync::watch::Receiver<u8>,
    batch: usize,
) -> Option<usize> {
    let mut want = messages.room().min(batch);
    while want == 0 {
        messages.want_room();
        want = messages.room().min(batch);
        if want > 0 {
            break;
        }
        tokio::select! {
            _ = room.notified() => {}
            _ = stop.changed() => return None,
        }
        if messages.is_closed() {
            return None;
        }
        want = messages.room().min(batch);
    }
    Some(want)
}

/// Receives one pull batch into the feed: the puller's per-message loop.
/// False: `CANCEL`, or the feed closed.
async fn receive(
    mut batch: pull::Batch,
    messages: &Feeder<jetstream::Message>,
    stop: &mut tokio::sync::watch::Receiver<u8>,
    errors: &mut u64,
    label: &str,
) -> bool {
    loop {
        let item = tokio::select! {
            item = batch.next() => item,
            _ = stop.wait_for(|v| *v >= CANCEL) => return false,
        };
        let Some(item) = item else { return true };
        match item {
            // The server may send more than asked: the feed keeps it.
            Ok(message) => {
                if !messages.push(message) {
                    return false;
                }
            }
            Err(e) => {
                *errors += 1;
                if errors.is_power_of_two() {
                    squall_plugin_api::warn!("{label}: pull batch error ({e}) (error #{errors})");
                }
            }
        }
    }
}

/// Publishes a poison message to the dead-letter subject (with the reason,
/// its original subject and its delivery count in headers), then terminates
/// the original. Without a dead-letter subject it only terminates it.
async fn dead_letter(
    js: jetstream::Context,
    subject: Option<Arc<str>>,
    message: jetstream::Message,
    reason: String,
    deliveries: i64,
    label: String,
) {
    if let Some(subject) = subject {
        let mut headers = message.headers.clone().unwrap_or_default();
        headers.insert(DEAD_LETTER_REASON, reason.as_str());
        headers.insert(ORIGINAL_SUBJECT, message.subject.as_str());
        headers.insert(DELIVERIES, deliveries.to_string().as_str());
        let published = match js
            .publish_with_headers(subject.to_string(), headers, message.payload.clone())
            .await
        {
            Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = published {
            // Keep it: nak it so it comes back and is dead-lettered again.
            squall_plugin_api::error!(
                "{label}: cannot dead-letter a message of {} to {subject} ({e}); naked to retry",
                message.subject
            );
            let _ = message.ack_with(AckKind::Nak(Some(Duration::from_secs(1)))).await;
            return;
        }
    }
    squall_plugin_api::warn!("{label}: dead-lettered a message of {}: {reason}", message.subject);
    let _ = message.ack_with(AckKind::Term).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_finite_and_a_huge_duration_is_refused_at_the_key() {
        let c =
            SpoutConfig::parse(&ComponentConfig::new("stream = \"S\"\nconsumer = \"c\"")).unwrap();
        assert_eq!(c.max_deliver, 10, "a finite default: poison is dead-lettered");
        assert_eq!(c.consumer_config().max_deliver, 11);
        assert_eq!(c.connection().url, "nats://127.0.0.1:4222");
        let e = SpoutConfig::parse(&ComponentConfig::new(
            "stream = \"S\"\nconsumer = \"c\"\nack_wait = \"100000 years\"",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("longer than a year"), "{e}");
    }

    #[test]
    fn payload_field_names_the_payload_on_both_streams() {
        let streams = |config: &str| {
            let mut outputs = OutputDeclarer::default();
            JetStreamSpout::declare_outputs_for(&ComponentConfig::new(config), &mut outputs)
                .unwrap();
            outputs
                .into_streams()
                .into_iter()
                .map(|s| {
                    let fields: Vec<String> = s.fields.iter().map(|f| f.to_string()).collect();
                    format!("{} [{}]", s.name, fields.join(", "))
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            streams(r#"stream = "S""#),
            ["default [subject, payload, headers]", "payload [payload]"]
        );
        assert_eq!(
            streams("stream = \"S\"\npayload_field = \"word\""),
            ["default [subject, word, headers]", "payload [word]"]
        );
    }

    #[test]
    fn payload_field_must_not_shadow_the_other_fields() {
        let config = |extra: &str| {
            let text = format!("stream = \"S\"\nconsumer = \"c\"\n{extra}");
            SpoutConfig::parse(&ComponentConfig::new(&text)).unwrap().check()
        };
        assert!(config("payload_field = \"word\"").is_ok());
        assert!(config("payload_field = \"subject\"").is_err());
        assert!(config("payload_field = \"\"").is_err());
        // Only the payload stream is emitted: "headers" names nothing else.
        assert!(config("payload_field = \"headers\"\nemit = \"payload\"").is_ok());
    }
}
