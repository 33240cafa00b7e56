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
//! 1. `deactivate`: the puller stops asking for more.
//! 2. `close`: `Stop` with a reply; the puller finishes its current batch
//!    (at most `fetch_wait`) and says so.
//! 3. Messages left in the channel, and held ones, are naked.
//! 4. `Close`: the commander carries out what is queued, flushes the
//!    client, and the thread ends; `close` waits for it (at most
//!    `close_timeout`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, AckKind};
use futures_util::StreamExt;
use serde::Deserialize;
use squall_plugin_api::metrics::{self, Counter, Gauge};
use squall_plugin_api::prelude::*;
use tokio::sync::mpsc;

use crate::connect::{connection_keys, declare_keys, runtime, Connection, ReadyHook};

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

connection_keys! {
    #[derive(Debug, Clone, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SpoutConfig {
        stream: String,
        consumer: String,
        #[serde(default)]
        create_consumer: bool,
        #[serde(default)]
        subject: Option<String>,
        #[serde(default = "default_batch")]
        batch: usize,
        #[serde(default = "default_fetch_wait", deserialize_with = "crate::connect::duration")]
        fetch_wait: Duration,
        #[serde(default = "default_ack_wait", deserialize_with = "crate::connect::duration")]
        ack_wait: Duration,
        #[serde(default = "default_max_ack_pending")]
        max_ack_pending: i64,
        #[serde(default)]
        max_deliver: Option<i64>,
        #[serde(default)]
        dead_letter_subject: Option<String>,
        #[serde(default, deserialize_with = "crate::connect::opt_duration")]
        nak_delay: Option<Duration>,
        #[serde(default = "default_emit")]
        emit: Emit,
        #[serde(default = "default_payload_as")]
        payload_as: PayloadAs,
        #[serde(default = "default_payload_field")]
        payload_field: String,
        #[serde(default = "default_close_timeout", deserialize_with = "crate::connect::duration")]
        close_timeout: Duration,
        /// For tests only: ack to the broker on emit, not on tree
        /// completion. This loses messages on failures; a test uses it to
        /// show the loss test can fail.
        #[serde(default, rename = "unsafe_ack_on_emit")]
        ack_on_emit: bool,
    }
}

fn default_batch() -> usize {
    256
}
fn default_fetch_wait() -> Duration {
    Duration::from_secs(1)
}
fn default_ack_wait() -> Duration {
    Duration::from_secs(30)
}
fn default_max_ack_pending() -> i64 {
    1000
}
fn default_emit() -> Emit {
    Emit::Message
}
fn default_payload_as() -> PayloadAs {
    PayloadAs::Bytes
}
fn default_payload_field() -> String {
    "payload".to_owned()
}
fn default_close_timeout() -> Duration {
    Duration::from_secs(5)
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
        if let Some(n) = self.max_deliver {
            if n < 1 {
                return Err(format!("max_deliver must be at least 1, found {n}").into());
            }
        }
        if self.dead_letter_subject.is_some() && self.max_deliver.is_none() {
            return Err("dead_letter_subject needs max_deliver (after how many deliveries a message is dead)".into());
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
            max_deliver: self.max_deliver.map_or(-1, |n| n + 1),
            ..Default::default()
        }
    }
}

/// Looks the stream and consumer up, and creates the consumer if asked to.
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
            format!("stream {:?} does not exist on {}", config.stream, config.url)
        } else {
            format!("cannot look up stream {:?} on {}: {e}", config.stream, config.url)
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

/// A message emitted and not yet acked or failed.
#[derive(Debug)]
struct Held {
    message: jetstream::Message,
    deliveries: i64,
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

/// The running I/O side: the thread and the two channels to it.
#[derive(Debug)]
struct Io {
    messages: mpsc::Receiver<jetstream::Message>,
    commands: mpsc::UnboundedSender<Command>,
    thread: Option<std::thread::JoinHandle<()>>,
    done: std::sync::mpsc::Receiver<()>,
}

/// A reliable spout over a durable JetStream pull consumer (see the module
/// doc and docs/connectors.md for every key).
#[derive(Debug)]
pub struct JetStreamSpout {
    config: SpoutConfig,
    label: String,
    io: Option<Io>,
    held: HashMap<u64, Held>,
    next_id: u64,
    metrics: Option<SpoutMetrics>,
    stream: StreamId,
    headers: String,
    io_gone_reported: bool,
}

impl Spout for JetStreamSpout {
    const NAME: &'static str = "JetStreamSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = declare_keys![
        ConfigKey::required("stream", KeyKind::String, "the JetStream stream"),
        ConfigKey::required("consumer", KeyKind::String, "the durable pull consumer"),
        ConfigKey::optional(
            "create_consumer",
            KeyKind::Bool,
            "false",
            "create the durable consumer if it is absent",
        ),
        ConfigKey::maybe(
            "subject",
            KeyKind::String,
            "the created consumer's filter subject (only with create_consumer)",
        ),
        ConfigKey::optional(
            "batch",
            KeyKind::Integer,
            "256",
            "most messages per pull; the capacity of the channel to next_tuple",
        ),
        ConfigKey::optional(
            "fetch_wait",
            KeyKind::Duration,
            "\"1s\"",
            "how long one pull request waits for messages",
        ),
        ConfigKey::optional(
            "ack_wait",
            KeyKind::Duration,
            "\"30s\"",
            "the created consumer's ack wait (redelivery after it)",
        ),
        ConfigKey::optional(
            "max_ack_pending",
            KeyKind::Integer,
            "1000",
            "the created consumer's limit of unacked messages",
        ),
        ConfigKey::maybe(
            "max_deliver",
            KeyKind::Integer,
            "deliveries after which a message is dead (default unlimited)",
        ),
        ConfigKey::maybe(
            "dead_letter_subject",
            KeyKind::String,
            "where dead messages are published (needs max_deliver)",
        ),
        ConfigKey::maybe(
            "nak_delay",
            KeyKind::Duration,
            "how long the server waits to redeliver a failed message (default at once)",
        ),
        ConfigKey::optional(
            "emit",
            KeyKind::String,
            "\"message\"",
            "\"message\": [subject, payload, headers]; \"payload\": [payload] on stream payload",
        ),
        ConfigKey::optional(
            "payload_as",
            KeyKind::String,
            "\"bytes\"",
            "\"bytes\", or \"string\" (decoded as UTF-8, invalid sequences replaced)",
        ),
        ConfigKey::optional(
            "payload_field",
            KeyKind::String,
            "\"payload\"",
            "the name of the payload's field in the emitted tuples",
        ),
        ConfigKey::optional(
            "close_timeout",
            KeyKind::Duration,
            "\"5s\"",
            "how long close waits for its acks and naks to be flushed",
        ),
        ConfigKey::optional(
            "unsafe_ack_on_emit",
            KeyKind::Bool,
            "false",
            "tests only: ack on emit, not on tree completion (loses messages on failure)",
        ),
    ];
    const DESCRIPTION: &'static str =
        "pulls from a durable JetStream consumer; acks on tree completion, naks on failure";

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
        let config: SpoutConfig = config.parse()?;
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
            config,
            label: String::new(),
            io: None,
            held: HashMap::new(),
            next_id: 0,
            metrics: None,
            stream: StreamId::DEFAULT,
            headers: String::new(),
            io_gone_reported: false,
        })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self.label = format!("{} task {}", context.component, context.task_id);
        self.metrics = Some(SpoutMetrics::register());
        if self.config.emit == Emit::Payload {
            self.stream =
                context.stream_id("payload").ok_or("stream \"payload\" is not declared")?;
        }
        let (message_tx, message_rx) = mpsc::channel(self.config.batch);
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let config = self.config.clone();
        let name = format!("squall {} {}", context.topology, self.label);
        let label = self.label.clone();
        let hook = ReadyHook(context.waker());
        let thread = std::thread::Builder::new()
            .name(format!("nats-{}-{}", context.component, context.task_id))
            .spawn(move || {
                let rt = match runtime() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("cannot start the I/O runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(io_main(config, name, label, message_tx, command_rx, ready_tx, hook));
                let _ = done_tx.send(());
            })?;
        self.io = Some(Io {
            messages: message_rx,
            commands: command_tx,
            thread: Some(thread),
            done: done_rx,
        });
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err("the NATS I/O thread ended before connecting".into()),
        }
    }

    fn deactivate(&mut self) {
        self.command(Command::Stop(None));
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        // Up to `batch` messages per call: one call per message would cost
        // a plugin crossing and an executor turn each.
        for _ in 0..self.config.batch {
            let Some(io) = &mut self.io else { return Ok(()) };
            let message = match io.messages.try_recv() {
                Ok(m) => m,
                Err(mpsc::error::TryRecvError::Empty) => return Ok(()),
                Err(mpsc::error::TryRecvError::Disconnected) => {
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

    fn ack(&mut self, id: MessageId) {
        let Some(held) = self.held.remove(&id.0) else { return };
        if let Some(m) = &self.metrics {
            m.acked.inc();
            m.held.set(self.held.len() as i64);
        }
        self.command(Command::Ack(held.message));
    }

    fn fail(&mut self, id: MessageId) {
        let Some(held) = self.held.remove(&id.0) else { return };
        if let Some(m) = &self.metrics {
            m.held.set(self.held.len() as i64);
        }
        match self.config.max_deliver {
            Some(max) if held.deliveries >= max => {
                if let Some(m) = &self.metrics {
                    m.dead_lettered.inc();
                }
                let reason = format!(
                    "failed in squall on delivery {} of max_deliver = {max}",
                    held.deliveries
                );
                self.command(Command::DeadLetter {
                    message: held.message,
                    reason,
                    deliveries: held.deliveries,
                });
            }
            _ => {
                if let Some(m) = &self.metrics {
                    m.naked.inc();
                }
                self.command(Command::Nak(held.message, self.config.nak_delay));
            }
        }
    }

    fn close(&mut self) {
        let Some(mut io) = self.io.take() else { return };
        // 1-2. Stop the puller and wait for its last batch.
        let (stopped_tx, stopped_rx) = std::sync::mpsc::channel();
        let _ = io.commands.send(Command::Stop(Some(stopped_tx)));
        let wait = self.config.fetch_wait + self.config.close_timeout;
        let _ = stopped_rx.recv_timeout(wait);
        // 3. Nak what was never emitted, and what is still held.
        let mut unresolved = 0u64;
        while let Ok(message) = io.messages.try_recv() {
            let _ = io.commands.send(Command::Nak(message, None));
            unresolved += 1;
        }
        for (_, held) in self.held.drain() {
            let _ = io.commands.send(Command::Nak(held.message, None));
            unresolved += 1;
        }
        if let Some(m) = &self.metrics {
            m.naked.add(unresolved);
            m.held.set(0);
        }
        // 4. Flush and end.
        let _ = io.commands.send(Command::Close);
        match io.done.recv_timeout(self.config.close_timeout) {
            Ok(()) => {
                if let Some(t) = io.thread.take() {
                    let _ = t.join();
                }
            }
            Err(_) => squall_plugin_api::warn!(
                "{}: the NATS client did not finish within close_timeout = {:?}; unflushed acks are redelivered after ack_wait",
                self.label,
                self.config.close_timeout
            ),
        }
    }
}

impl JetStreamSpout {
    /// Emits one received message (or dead-letters it when it was delivered
    /// more than `max_deliver` times) and holds it until its tree completes.
    fn take(&mut self, message: jetstream::Message, collector: &mut SpoutCollector<'_>) {
        let metrics = self.metrics.as_ref().expect("metrics are registered in open");
        metrics.received.inc();
        let deliveries = message.info().map_or(1, |i| i.delivered);
        if deliveries > 1 {
            metrics.redelivered.inc();
        }
        if let Some(max) = self.config.max_deliver {
            if deliveries > max {
                metrics.dead_lettered.inc();
                let reason = format!("delivered {deliveries} times, more than max_deliver = {max}");
                self.command(Command::DeadLetter { message, reason, deliveries });
                return;
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.emit(&message, collector, MessageId(id));
        let metrics = self.metrics.as_ref().expect("metrics are registered in open");
        if self.config.ack_on_emit {
            metrics.acked.inc();
            self.command(Command::Ack(message));
            return;
        }
        self.held.insert(id, Held { message, deliveries });
        metrics.held.set(self.held.len() as i64);
    }

    fn command(&self, command: Command) {
        if let Some(io) = &self.io {
            // A send fails only when the I/O thread has ended; the message is
            // then redelivered by the server after ack_wait.
            let _ = io.commands.send(command);
        }
    }

    /// Emits a message's values on the configured stream (no `Vec`: the
    /// values are built on the stack).
    fn emit(
        &mut self,
        message: &jetstream::Message,
        collector: &mut SpoutCollector<'_>,
        id: MessageId,
    ) {
        let payload = match self.config.payload_as {
            PayloadAs::Bytes => Value::shared_bytes(&message.payload),
            PayloadAs::String => match std::str::from_utf8(&message.payload) {
                Ok(text) => Value::str(text),
                Err(_) => Value::str(&String::from_utf8_lossy(&message.payload)),
            },
        };
        match self.config.emit {
            Emit::Payload => collector.emit_to(self.stream, &[payload], Some(id)),
            Emit::Message => {
                self.headers.clear();
                if let Some(headers) = &message.headers {
                    for (name, values) in headers.iter() {
                        for value in values {
                            let _ = write!(self.headers, "{name}: {}\r\n", value.as_str());
                        }
                    }
                }
                let values =
                    [Value::str(message.subject.as_str()), payload, Value::str(&self.headers)];
                collector.emit_to(self.stream, &values, Some(id));
            }
        }
    }
}

/// The I/O thread's main task: connect (bounded), look the consumer up (or
/// create it), report to `open`, then run the puller and the commander.
async fn io_main(
    config: SpoutConfig,
    name: String,
    label: String,
    messages: mpsc::Sender<jetstream::Message>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    ready: std::sync::mpsc::Sender<std::result::Result<(), String>>,
    hook: ReadyHook,
) {
    let connection: Connection = config.connection();
    let client = match connection.connect(&name).await {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let consumer = match ensure_consumer(&client, &config, true).await {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let js = jetstream::new(client.clone());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let puller =
        tokio::spawn(pull(consumer, config.clone(), label.clone(), messages, stop_rx, hook));
    let mut puller = Some(puller);
    let dead_letter_subject: Option<Arc<str>> =
        config.dead_letter_subject.as_deref().map(Arc::from);
    let mut warned = 0u64;
    while let Some(command) = commands.recv().await {
        let result = match command {
            Command::Ack(m) => m.ack().await,
            Command::Nak(m, delay) => m.ack_with(AckKind::Nak(delay)).await,
            Command::DeadLetter { message, reason, deliveries } => {
                let js = js.clone();
                let subject = dead_letter_subject.clone();
                let label = label.clone();
                tokio::spawn(dead_letter(js, subject, message, reason, deliveries, label));
                Ok(())
            }
            Command::Stop(reply) => {
                let _ = stop_tx.send(true);
                if let Some(reply) = reply {
                    if let Some(p) = puller.take() {
                        let _ = p.await;
                    }
                    let _ = reply.send(());
                }
                Ok(())
            }
            Command::Close => break,
        };
        if let Err(e) = result {
            warned += 1;
            if warned.is_power_of_two() {
                squall_plugin_api::warn!("{label}: ack/nak not sent ({e}); the server redelivers after ack_wait (warning #{warned})");
            }
        }
    }
    let _ = stop_tx.send(true);
    if let Some(p) = puller.take() {
        p.abort();
    }
    if let Err(e) = client.flush().await {
        squall_plugin_api::warn!("{label}: flushing acks at close failed: {e}");
    }
}

/// The puller: fetches as many messages as the channel has room for, in
/// batches that end after `fetch_wait`, until told to stop.
async fn pull(
    consumer: jetstream::consumer::Consumer<pull::Config>,
    config: SpoutConfig,
    label: String,
    messages: mpsc::Sender<jetstream::Message>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    hook: ReadyHook,
) {
    let mut errors = 0u64;
    loop {
        if *stop.borrow() {
            return;
        }
        let want = messages.capacity().clamp(1, config.batch);
        // Wait for room (or a stop).
        let permits = tokio::select! {
            p = messages.reserve_many(want) => match p { Ok(p) => p, Err(_) => return },
            _ = stop.changed() => return,
        };
        let batch = consumer.batch().max_messages(want).expires(config.fetch_wait).messages().await;
        let mut batch = match batch {
            Ok(b) => b,
            Err(e) => {
                errors += 1;
                if errors.is_power_of_two() {
                    squall_plugin_api::warn!(
                        "{label}: pull request failed ({e}); retrying (error #{errors})"
                    );
                }
                drop(permits);
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
        };
        let mut permits = permits;
        while let Some(item) = batch.next().await {
            match item {
                Ok(message) => match permits.next() {
                    Some(permit) => {
                        permit.send(message);
                        hook.ready();
                    }
                    // The server sent more than asked: keep it anyway.
                    None => {
                        if messages.send(message).await.is_err() {
                            return;
                        }
                        hook.ready();
                    }
                },
                Err(e) => {
                    errors += 1;
                    if errors.is_power_of_two() {
                        squall_plugin_api::warn!(
                            "{label}: pull batch error ({e}) (error #{errors})"
                        );
                    }
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
    use squall_plugin_api::testing::check_config_keys;

    use super::*;
    use crate::connect::CONNECTION_SAMPLES;

    #[test]
    fn declared_keys_match_the_config_struct() {
        let samples = format!(
            r#"
stream = "ORDERS"
consumer = "squall"
subject = "orders.>"
max_deliver = 3
dead_letter_subject = "dead.orders"
nak_delay = "2s"
{CONNECTION_SAMPLES}"#
        );
        check_config_keys::<SpoutConfig>(JetStreamSpout::CONFIG_KEYS, &samples).unwrap();
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
            ComponentConfig::new(&text).parse::<SpoutConfig>().unwrap().check()
        };
        assert!(config("payload_field = \"word\"").is_ok());
        assert!(config("payload_field = \"subject\"").is_err());
        assert!(config("payload_field = \"\"").is_err());
        // Only the payload stream is emitted: "headers" names nothing else.
        assert!(config("payload_field = \"headers\"\nemit = \"payload\"").is_ok());
    }
}
