//! [`QueueSpout`]: a reliable spout over a RabbitMQ queue, manual acks.
//!
//! # Threads
//! One I/O thread per task runs a single-threaded tokio runtime with the
//! `lapin` client. It consumes the queue with `basic.qos(prefetch)`: the
//! server never has more than `prefetch` messages unacked on the channel,
//! so the pending map's cap and the broker's agree, and a slow topology
//! leaves the rest in the queue. Deliveries go to `next_tuple` over the
//! connector's bounded feed, which wakes the executor; the spout's verdicts
//! (ack, nack, dead letter, stop) go back over a command channel, in order.
//!
//! # Guarantees
//! A delivery is acked when its tree completes. A failed tree is emitted
//! again by the spout itself (same message id) after a backoff; the
//! delivery that fails `max_deliver` times is published to the dead-letter
//! queue with its reason (a publisher confirm is awaited) and then acked.
//! At close the consumer is cancelled and everything still held or not
//! yet emitted is nacked with requeue, so nothing waits for a timeout.
//! When the connection drops, RabbitMQ requeues every unacked delivery;
//! the spout reconnects with backoff and receives them again (acks for
//! deliveries of the old channel are dropped: at least once, not exactly
//! once). Deliveries are counted by the spout; across a reconnect a
//! classic queue's count starts again (a quorum queue's `x-delivery-count`
//! header is used when present).

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::BasicProperties;
use serde::Deserialize;
use squall_connector::feed::Empty;
use squall_connector::{
    feed, Acked, Backoff, Failed, Feed, Feeder, Health, IoThread, Pending, Redelivery, RetryPolicy,
};
use squall_plugin_api::metrics::{self, Counter, Gauge};
use squall_plugin_api::prelude::*;
use tokio::sync::mpsc;

use crate::conn;

/// The longest `close_timeout` (the declared close budget is twice it).
const MAX_CLOSE_TIMEOUT_SECS: u64 = 15;

/// The header a dead letter carries its reason in.
pub const DEAD_LETTER_REASON: &str = "x-squall-dead-letter-reason";
/// The header a dead letter carries its delivery count in.
pub const DELIVERIES: &str = "x-squall-deliveries";
/// The header a dead letter carries its original queue in.
pub const ORIGINAL_QUEUE: &str = "x-squall-original-queue";

/// What the spout emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Emit {
    /// `["payload", "routing_key"]`.
    Message,
    /// `["payload"]`.
    Payload,
}

/// How the payload is emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PayloadAs {
    /// As bytes, as it came.
    Bytes,
    /// As a string, decoded as UTF-8 (invalid sequences become U+FFFD).
    String,
}

squall_connector::connector_config! {
    /// The spout's `config` table: the struct and its declared keys.
    #[derive(Debug, Clone, PartialEq)]
    struct SpoutConfig {
        url: String = default(String, "\"amqp://guest:guest@127.0.0.1:5672/%2f\"", "amqp://user:password@host:port/vhost (vhost / is %2f)"),
        queue: String = required(String, "the queue to consume"),
        declare: bool = default(Bool, "true", "declare the queue (durable) and the dead-letter queue if absent"),
        prefetch: u16 = default(Integer, "1000", "basic.qos: most deliveries unacked per task (the pending cap)"),
        max_deliver: u32 = default(Integer, "10", "deliveries after which a failing message is dead-lettered"),
        dead_letter_queue: Option<String> = maybe(String, "where dead messages are published (default <queue>.dead-letters)"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        retry_backoff: Duration = default(Duration, "\"100ms\"", "the pause before a failed message's first replay, doubled per retry (at most 5s)"),
        emit: Emit = default(String, "\"message\"", "\"message\": [payload, routing_key]; \"payload\": [payload]"),
        payload_as: PayloadAs = default(String, "\"string\"", "\"string\" (UTF-8, invalid sequences replaced) or \"bytes\""),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        connect_timeout: Duration = default(Duration, "\"5s\"", "the limit of one connection attempt"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        close_timeout: Duration = default(Duration, "\"5s\"", "how long close waits for its nacks to be sent (at most 15s)"),
    }
}

impl SpoutConfig {
    fn check(&self) -> Result<()> {
        conn::check_url(&self.url)?;
        if self.queue.is_empty() {
            return Err("queue must not be empty".into());
        }
        if self.prefetch == 0 {
            return Err("prefetch must be at least 1".into());
        }
        if self.max_deliver < 1 {
            return Err(
                format!("max_deliver must be at least 1, found {}", self.max_deliver).into()
            );
        }
        if self.connect_timeout.is_zero() {
            return Err("connect_timeout must be longer than 0".into());
        }
        if self.close_timeout > Duration::from_secs(MAX_CLOSE_TIMEOUT_SECS) {
            return Err(format!(
                "close_timeout must be at most {MAX_CLOSE_TIMEOUT_SECS}s, found {:?}",
                self.close_timeout
            )
            .into());
        }
        if self.dead_letter_queue.as_deref().is_some_and(|q| q.is_empty() || q == self.queue) {
            return Err("dead_letter_queue must be a non-empty queue other than queue".into());
        }
        Ok(())
    }

    fn dead_letter_queue(&self) -> String {
        self.dead_letter_queue.clone().unwrap_or_else(|| format!("{}.dead-letters", self.queue))
    }
}

/// What the spout asks the I/O thread to do, in order.
#[derive(Debug)]
enum Command {
    Ack(Delivery),
    /// Back to the queue (at close).
    Requeue(Delivery),
    DeadLetter {
        delivery: Delivery,
        reason: String,
        deliveries: u32,
    },
    /// Cancel the consumer: no more deliveries.
    Stop,
    /// Consume again after a `Stop` (the spout was activated again).
    Resume,
    /// Carry out what is queued, close the connection, end.
    Close,
}

/// The spout's metrics (registered in `open`).
#[derive(Debug)]
struct SpoutMetrics {
    received: Counter,
    acked: Counter,
    replayed: Counter,
    dead_lettered: Counter,
    held: Gauge,
}

#[derive(Debug)]
struct Io {
    deliveries: Feed<Delivery>,
    commands: mpsc::UnboundedSender<Command>,
    thread: IoThread,
}

/// Consumes a RabbitMQ queue with manual acks and emits one tracked tuple
/// per message on `["payload", "routing_key"]` (`emit = "payload"`:
/// `["payload"]`) (see the module doc and
/// docs/connectors.md for every key).
#[derive(Debug)]
pub struct QueueSpout {
    config: SpoutConfig,
    label: String,
    io: Option<Io>,
    held: Pending<Delivery>,
    health: Health,
    metrics: Option<SpoutMetrics>,
    io_gone_reported: bool,
}

/// Deliveries taken from the feed per `next_tuple` call.
const PER_CALL: usize = 256;

impl Spout for QueueSpout {
    const NAME: &'static str = "QueueSpout";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(SpoutConfig::KEYS);
    /// `close` waits at most `close_timeout` for the consumer's cancel and
    /// `close_timeout` for the nacks: within twice the longest allowed.
    const CLOSE_BUDGET: Option<Duration> = Some(Duration::from_secs(2 * MAX_CLOSE_TIMEOUT_SECS));
    const DESCRIPTION: &'static str =
        "consumes a RabbitMQ queue; acks on tree completion, dead-letters after max_deliver";

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["payload", "routing_key"]);
    }

    /// With `emit = "payload"`, only `["payload"]`.
    fn declare_outputs_for(
        config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        match SpoutConfig::parse(config)?.emit {
            Emit::Message => outputs.declare(&["payload", "routing_key"]),
            Emit::Payload => outputs.declare(&["payload"]),
        };
        Ok(())
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = SpoutConfig::parse(config)?;
        config.check()?;
        let policy = RetryPolicy {
            max_deliver: config.max_deliver,
            backoff: Backoff::new(config.retry_backoff, Duration::from_secs(5)),
        };
        Ok(Self {
            held: Pending::new(usize::from(config.prefetch), policy, Redelivery::Local),
            config,
            label: String::new(),
            io: None,
            health: Health::new(String::new()),
            metrics: None,
            io_gone_reported: false,
        })
    }

    fn open(&mut self, context: &TaskContext) -> Result<()> {
        self.label = format!("{} task {}", context.component, context.task_id);
        self.metrics = Some(SpoutMetrics {
            received: metrics::counter("rabbitmq_received", "RabbitMQ deliveries received."),
            acked: metrics::counter("rabbitmq_acked", "RabbitMQ deliveries acked to the server."),
            replayed: metrics::counter(
                "rabbitmq_replayed",
                "Failed messages emitted again by the spout.",
            ),
            dead_lettered: metrics::counter(
                "rabbitmq_dead_lettered",
                "Messages dead-lettered after max_deliver deliveries.",
            ),
            held: metrics::gauge("rabbitmq_held", "Deliveries emitted and not yet resolved."),
        });
        self.health = Health::new(format!("rabbitmq {}", self.label));
        self.health.register("rabbitmq", context.waker());
        let (tx, rx) = feed(usize::from(self.config.prefetch), context.waker());
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let config = self.config.clone();
        let name = format!("squall {} {}", context.topology, self.label);
        let label = self.label.clone();
        let health = self.health.clone();
        let mut thread = IoThread::spawn(
            format!("amqp-{}-{}", context.component, context.task_id),
            move |ready| match conn::runtime() {
                Ok(rt) => rt.block_on(io_main(config, name, label, tx, command_rx, ready, health)),
                Err(e) => ready.ready(Err(format!("cannot start the I/O runtime: {e}"))),
            },
        )?;
        let ready = thread.wait_ready(self.config.connect_timeout + Duration::from_secs(5));
        self.io = Some(Io { deliveries: rx, commands: command_tx, thread });
        ready.map_err(Into::into)
    }

    fn activate(&mut self) {
        self.command(Command::Resume);
    }

    fn deactivate(&mut self) {
        self.command(Command::Stop);
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if let Some(e) = self.health.take_error() {
            return Err(e.into());
        }
        // Replays first: a failed message waits its backoff, then goes again.
        if self.held.has_replays() {
            let now = Instant::now();
            while let Some((id, delivery)) = self.held.next_replay(now) {
                emit(&self.config, delivery, collector, id);
                if let Some(m) = &self.metrics {
                    m.replayed.inc();
                }
            }
        }
        for _ in 0..PER_CALL {
            let Some(io) = &self.io else { return Ok(()) };
            let delivery = match io.deliveries.take() {
                Ok(d) => d,
                Err(Empty::Now) => break,
                Err(Empty::Closed) => {
                    if !std::mem::replace(&mut self.io_gone_reported, true) {
                        return Err(
                            format!("{}: the RabbitMQ I/O thread has stopped", self.label).into()
                        );
                    }
                    return Ok(());
                }
            };
            let delivery_no = first_delivery(&delivery);
            let id = self.held.insert(delivery, delivery_no);
            if let Some(d) = self.held.get(id) {
                emit(&self.config, d, collector, id);
            }
            if let Some(m) = &self.metrics {
                m.received.inc();
            }
        }
        if let Some(m) = &self.metrics {
            m.held.set(self.held.len() as i64);
        }
        Ok(())
    }

    fn ack(&mut self, id: MessageId) {
        if let Acked::Now(delivery) = self.held.ack(id.0) {
            if let Some(m) = &self.metrics {
                m.acked.inc();
            }
            self.command(Command::Ack(delivery));
        }
    }

    fn fail(&mut self, id: MessageId) {
        if let Failed::Dead { item, reason } = self.held.fail(id.0, Instant::now()) {
            if let Some(m) = &self.metrics {
                m.dead_lettered.inc();
            }
            let deliveries = reason.deliveries;
            let reason = reason.to_string();
            squall_plugin_api::warn!(
                "{}: dead-lettering a message of {:?}: {reason}",
                self.label,
                self.config.queue
            );
            self.command(Command::DeadLetter { delivery: item, reason, deliveries });
        }
    }

    fn close(&mut self) {
        let Some(mut io) = self.io.take() else { return };
        let _ = io.commands.send(Command::Stop);
        // Not emitted yet, and still held: back to the queue now.
        while let Ok(d) = io.deliveries.take() {
            let _ = io.commands.send(Command::Requeue(d));
        }
        for d in self.held.drain() {
            let _ = io.commands.send(Command::Requeue(d));
        }
        if let Some(m) = &self.metrics {
            m.held.set(0);
        }
        let _ = io.commands.send(Command::Close);
        if !io.thread.join_within(self.config.close_timeout) {
            squall_plugin_api::warn!(
                "{}: the RabbitMQ client did not finish within close_timeout = {:?}; unacked deliveries are requeued when the connection closes",
                self.label,
                self.config.close_timeout
            );
        }
    }
}

impl QueueSpout {
    fn command(&self, command: Command) {
        if let Some(io) = &self.io {
            // Fails only when the I/O thread has ended: RabbitMQ requeues
            // the delivery when the connection closes.
            let _ = io.commands.send(command);
        }
    }
}

/// The delivery number of a message as it arrives: a quorum queue's
/// `x-delivery-count` (redeliveries so far) plus one, else 1.
fn first_delivery(delivery: &Delivery) -> u32 {
    let count = delivery.properties.headers().as_ref().and_then(|h| {
        h.inner().get("x-delivery-count").and_then(|v| match v {
            AMQPValue::LongLongInt(n) => u32::try_from(*n).ok(),
            AMQPValue::LongInt(n) => u32::try_from(*n).ok(),
            AMQPValue::LongUInt(n) => Some(*n),
            _ => None,
        })
    });
    count.map_or(1, |n| n.saturating_add(1))
}

fn emit(config: &SpoutConfig, d: &Delivery, collector: &mut SpoutCollector<'_>, id: u64) {
    let payload = match config.payload_as {
        PayloadAs::Bytes => Value::shared_bytes(&d.data),
        PayloadAs::String => match std::str::from_utf8(&d.data) {
            Ok(text) => Value::str(text),
            Err(_) => Value::str(&String::from_utf8_lossy(&d.data)),
        },
    };
    match config.emit {
        Emit::Message => {
            collector.emit_with_id(&[payload, Value::str(d.routing_key.as_str())], MessageId(id))
        }
        Emit::Payload => collector.emit_with_id(&[payload], MessageId(id)),
    }
}

/// How a session ended.
enum End {
    /// Close was asked for (or the spout is gone).
    Closed,
    /// The connection or the channel failed.
    Lost(String),
}

/// A connected session: the connection, the consuming channel, the
/// dead-letter channel (with confirms) and the consumer.
struct Session {
    connection: lapin::Connection,
    channel: lapin::Channel,
    dead: lapin::Channel,
    consumer: lapin::Consumer,
}

const CONSUMER_TAG: &str = "squall";

async fn session(
    config: &SpoutConfig,
    name: &str,
) -> std::result::Result<Session, conn::AmqpError> {
    let connection = conn::connect(&config.url, name, config.connect_timeout).await?;
    let failed = |what, cause| conn::AmqpError::Step { what, cause };
    let channel = connection.create_channel().await.map_err(|e| failed("open a channel", e))?;
    let dead = connection.create_channel().await.map_err(|e| failed("open a channel", e))?;
    dead.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| failed("enable publisher confirms", e))?;
    if config.declare {
        conn::declare(&channel, &config.queue).await?;
        conn::declare(&channel, &config.dead_letter_queue()).await?;
    }
    channel
        .basic_qos(config.prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| failed("set the prefetch", e))?;
    let consumer = consume(&channel, config).await?;
    Ok(Session { connection, channel, dead, consumer })
}

/// The I/O thread: connect (the first outcome is `open`'s), consume, carry
/// out the spout's commands; reconnect with backoff when the connection is
/// lost, until `Close`.
async fn io_main(
    config: SpoutConfig,
    name: String,
    label: String,
    deliveries: Feeder<Delivery>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    ready: squall_connector::io::Handshake,
    health: Health,
) {
    let mut ready = Some(ready);
    let mut attempts = Backoff::new(Duration::from_millis(200), Duration::from_secs(5)).attempts();
    let mut stopped = false;
    loop {
        match session(&config, &name).await {
            Ok(s) => {
                if let Some(r) = ready.take() {
                    r.connected();
                } else {
                    health.restored("reconnected to RabbitMQ");
                }
                attempts.reset();
                let end = run(&config, &label, s, &deliveries, &mut commands, &mut stopped).await;
                match end {
                    End::Closed => return,
                    End::Lost(why) => health.lost(&why),
                }
            }
            Err(e) => {
                if let Some(r) = ready.take() {
                    r.ready(Err(e.to_string()));
                    return;
                }
                health.lost(&e.to_string());
            }
        }
        if !pause(attempts.next_delay(), &mut commands, &mut stopped).await {
            return;
        }
    }
}

/// Waits `delay` before the next attempt to connect; commands still come
/// (acks of the lost channel are dropped: RabbitMQ requeued those
/// deliveries). False: `Close`, or the spout is gone.
async fn pause(
    delay: Duration,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    stopped: &mut bool,
) -> bool {
    let pause = tokio::time::sleep(delay);
    tokio::pin!(pause);
    loop {
        tokio::select! {
            () = &mut pause => return true,
            c = commands.recv() => match c {
                None | Some(Command::Close) => return false,
                Some(Command::Stop) => *stopped = true,
                Some(Command::Resume) => *stopped = false,
                Some(_) => {}
            },
        }
    }
}

/// One session: deliveries into the feed, commands to the server.
async fn run(
    config: &SpoutConfig,
    label: &str,
    mut s: Session,
    deliveries: &Feeder<Delivery>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    stopped: &mut bool,
) -> End {
    if *stopped {
        cancel(&s).await;
    }
    let dead_letter_queue = config.dead_letter_queue();
    let mut warned = 0u64;
    let end = loop {
        tokio::select! {
            d = s.consumer.next(), if !*stopped => match d {
                Some(Ok(d)) => {
                    if !deliveries.push(d) {
                        break End::Closed;
                    }
                }
                Some(Err(e)) => break End::Lost(e.to_string()),
                None => break End::Lost("the server cancelled the consumer".into()),
            },
            c = commands.recv() => {
                let result = match obey(c, &mut s, config, label, &dead_letter_queue, stopped).await {
                    ControlFlow::Continue(result) => result,
                    ControlFlow::Break(end) => break end,
                };
                if let Err(e) = result {
                    if let Some(end) = unsent(&e, &s, &mut warned, label) {
                        break end;
                    }
                }
            }
        }
    };
    if matches!(end, End::Closed) {
        let _ = s.channel.close(200, "squall closing".into()).await;
        let _ = s.connection.close(200, "squall closing".into()).await;
    }
    end
}

/// An ack or nack not sent: the session is lost with the connection;
/// otherwise it is counted, and logged at powers of two.
fn unsent(e: &lapin::Error, s: &Session, warned: &mut u64, label: &str) -> Option<End> {
    if !s.connection.status().connected() {
        return Some(End::Lost(e.to_string()));
    }
    *warned += 1;
    if warned.is_power_of_two() {
        squall_plugin_api::warn!(
            "{label}: ack/nack not sent ({e}); RabbitMQ requeues the delivery when the channel closes (warning #{warned})"
        );
    }
    None
}

/// Carries out one of the spout's commands (`None`: the spout is gone) in
/// session `s`: the server's answer, or how the session ends.
async fn obey(
    command: Option<Command>,
    s: &mut Session,
    config: &SpoutConfig,
    label: &str,
    dead_letter_queue: &str,
    stopped: &mut bool,
) -> ControlFlow<End, lapin::Result<()>> {
    ControlFlow::Continue(match command {
        None | Some(Command::Close) => return ControlFlow::Break(End::Closed),
        Some(Command::Stop) => {
            *stopped = true;
            cancel(s).await;
            Ok(())
        }
        Some(Command::Resume) if *stopped => match consume(&s.channel, config).await {
            Ok(c) => {
                s.consumer = c;
                *stopped = false;
                Ok(())
            }
            Err(e) => return ControlFlow::Break(End::Lost(e.to_string())),
        },
        Some(Command::Resume) => Ok(()),
        Some(Command::Ack(d)) => d.ack(BasicAckOptions::default()).await.map(drop),
        Some(Command::Requeue(d)) => {
            d.nack(BasicNackOptions { requeue: true, ..Default::default() }).await.map(drop)
        }
        Some(Command::DeadLetter { delivery, reason, deliveries }) => {
            let queue = &config.queue;
            dead_letter(&s.dead, dead_letter_queue, queue, delivery, &reason, deliveries, label)
                .await
        }
    })
}

async fn consume(
    channel: &lapin::Channel,
    config: &SpoutConfig,
) -> std::result::Result<lapin::Consumer, conn::AmqpError> {
    channel
        .basic_consume(
            config.queue.as_str().into(),
            CONSUMER_TAG.into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|cause| conn::AmqpError::Consume { queue: config.queue.clone(), cause })
}

async fn cancel(s: &Session) {
    let _ = s.channel.basic_cancel(CONSUMER_TAG.into(), BasicCancelOptions::default()).await;
}

/// Publishes a dead message to `queue` with its reason in headers, waits for
/// the confirm, then acks the original. When the publish fails, the
/// original is nacked with requeue: it comes back and dies again.
async fn dead_letter(
    channel: &lapin::Channel,
    queue: &str,
    original: &str,
    delivery: Delivery,
    reason: &str,
    deliveries: u32,
    label: &str,
) -> lapin::Result<()> {
    let mut headers = delivery.properties.headers().clone().unwrap_or_default();
    headers.insert(DEAD_LETTER_REASON.into(), AMQPValue::LongString(reason.into()));
    headers.insert(DELIVERIES.into(), AMQPValue::LongLongInt(i64::from(deliveries)));
    headers.insert(ORIGINAL_QUEUE.into(), AMQPValue::LongString(original.into()));
    let props = BasicProperties::default().with_delivery_mode(2).with_headers(headers);
    let confirmed = match channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            &delivery.data,
            props,
        )
        .await
    {
        Ok(confirm) => match confirm.await {
            Ok(c) if c.is_ack() => Ok(()),
            Ok(_) => Err("the server nacked it".to_owned()),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    match confirmed {
        Ok(()) => delivery.ack(BasicAckOptions::default()).await.map(drop),
        Err(e) => {
            squall_plugin_api::error!(
                "{label}: cannot dead-letter a message to {queue:?} ({e}); requeued to retry"
            );
            delivery.nack(BasicNackOptions { requeue: true, ..Default::default() }).await.map(drop)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_finite_and_the_dead_letter_queue_is_named_after_the_queue() {
        let c = SpoutConfig::parse(&ComponentConfig::new("queue = \"orders\"")).unwrap();
        c.check().unwrap();
        assert_eq!(c.max_deliver, 10);
        assert_eq!(c.prefetch, 1000);
        assert_eq!(c.url, conn::DEFAULT_URL);
        assert_eq!(c.dead_letter_queue(), "orders.dead-letters");
        let bad = |extra: &str| {
            let text = format!("queue = \"q\"\n{extra}");
            SpoutConfig::parse(&ComponentConfig::new(&text)).and_then(|c| c.check())
        };
        assert!(bad("prefetch = 0").is_err());
        assert!(bad("max_deliver = 0").is_err());
        assert!(bad("dead_letter_queue = \"q\"").is_err());
        assert!(bad("close_timeout = \"1m\"").is_err());
        assert!(bad("quue = 1").unwrap_err().to_string().contains("unknown field `quue`"));
    }
}
