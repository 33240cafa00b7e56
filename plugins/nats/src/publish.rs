//! [`JetStreamPublish`]: a rich bolt that publishes each input to JetStream
//! and acks it only after the server's PubAck.
//!
//! # Threads
//! `prepare` starts an I/O thread with a single-threaded tokio runtime and
//! the async-nats client. `execute` hands each input's subject and payload to
//! it over a channel and returns: publishes are pipelined, many in flight,
//! no round trip per tuple. For each publish a task awaits the PubAck (at
//! most `ack_timeout`) and sends the outcome back over a second channel.
//!
//! Acks must come from the bolt's own thread, so the outcomes are collected
//! there: in `woken`, which a 1.3 host calls once an outcome's sender
//! called the bolt's wake handle, and at the start of every `execute`,
//! including tick tuples. On a host without wake handles for bolts, give the
//! bolt `tick_tuple_freq_secs = 1` so that acks keep flowing when input
//! stops. With `max_in_flight` publishes outstanding, `execute` waits for
//! the oldest outcomes before it publishes more: that is the bolt's
//! back-pressure.
//!
//! A failed publish or a PubAck that does not come in time fails the input
//! (the spout then replays it: at-least-once, so duplicates are possible;
//! set `message_id_field` to let the server drop them within its duplicate
//! window).

use std::future::IntoFuture;
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use squall_plugin_api::metrics::{self, Counter};
use squall_plugin_api::prelude::*;
use tokio::sync::mpsc;

use crate::connect::{runtime, with_connection};
use crate::template::SubjectTemplate;

squall_connector::connector_config! {
    /// The bolt's own keys (the connection's are in `connect::Connection`).
    #[derive(Debug, Clone, PartialEq)]
    struct PublishKeys {
        subject: String = required(String, "the subject template: literal text, {field}, {partition(field, N)}"),
        payload_field: Option<String> = maybe(String, "the field whose value is the payload (default: all fields as JSON)"),
        message_id_field: Option<String> = maybe(String, "a field whose value becomes the Nats-Msg-Id header"),
        max_in_flight: usize = default(Integer, "4096", "publishes awaiting their PubAck before execute waits"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        ack_timeout: Duration = default(Duration, "\"5s\"", "how long a PubAck may take; a later one fails the input"),
        create_stream: Option<String> = maybe(String, "create this stream in prepare if absent (with stream_subjects)"),
        stream_subjects: Vec<String> = default(Array, "[]", "the subjects of the stream to create (only with create_stream)"),
        stream_max_messages: Option<i64> = maybe(Integer, "the created stream keeps only the newest this many messages"),
    }
}

with_connection!(PublishConfig, PublishKeys);

/// One publish for the I/O thread.
#[derive(Debug)]
struct Publish {
    anchor: Anchor,
    subject: String,
    payload: Bytes,
    message_id: Option<String>,
}

/// The outcome of one publish.
#[derive(Debug)]
struct Outcome {
    anchor: Anchor,
    result: std::result::Result<(), NotAcked>,
}

/// Why a publish was not acknowledged.
#[derive(Debug)]
enum NotAcked {
    /// The publish or its PubAck failed (the client's words).
    Failed(String),
    /// No PubAck within `ack_timeout`.
    Timeout(Duration),
}

impl NotAcked {
    fn failed(e: impl std::fmt::Display) -> Self {
        Self::Failed(e.to_string())
    }
}

impl std::fmt::Display for NotAcked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(cause) => f.write_str(cause),
            Self::Timeout(t) => write!(f, "no PubAck within ack_timeout = {t:?}"),
        }
    }
}

#[derive(Debug)]
struct Io {
    publishes: mpsc::UnboundedSender<Publish>,
    outcomes: Receiver<Outcome>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Clone)]
struct PublishMetrics {
    published: Counter,
    failed: Counter,
}

impl PublishMetrics {
    /// Registers the bolt's metrics.
    fn register() -> Self {
        Self {
            published: metrics::counter(
                "nats_published",
                "Inputs published and acked by JetStream.",
            ),
            failed: metrics::counter(
                "nats_publish_failed",
                "Publishes that failed or timed out (inputs failed).",
            ),
        }
    }
}

/// Connects, and creates the stream `stream` describes if it is absent.
// String: `Connection::connect`'s text (connect.rs says why), or the
// stream step's; it becomes `prepare`'s error.
async fn connect(
    connection: &crate::connect::Connection,
    name: &str,
    stream: Option<jetstream::stream::Config>,
) -> std::result::Result<async_nats::Client, String> {
    let client = connection.connect(name, None).await?;
    if let Some(stream) = stream {
        let name = stream.name.clone();
        if let Err(e) = jetstream::new(client.clone()).get_or_create_stream(stream).await {
            return Err(format!("cannot create stream {name:?}: {e}"));
        }
    }
    Ok(client)
}

/// Publishes each input to a subject built from a template over its fields,
/// and acks it after the server's PubAck (see the module doc and
/// docs/connectors.md).
#[derive(Debug)]
pub struct JetStreamPublish {
    config: PublishConfig,
    template: SubjectTemplate,
    label: String,
    io: Option<Io>,
    in_flight: usize,
    subject: String,
    metrics: Option<PublishMetrics>,
    failures: u64,
}

impl Bolt for JetStreamPublish {
    const NAME: &'static str = "JetStreamPublish";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&PublishConfig::KEYS);
    const DESCRIPTION: &'static str =
        "publishes each input to JetStream (subject from a template); acks it after the PubAck";

    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = PublishConfig::parse(config)?;
        config.connection().check()?;
        let template = SubjectTemplate::parse(&config.subject)?;
        if config.max_in_flight == 0 {
            return Err("max_in_flight must be at least 1".into());
        }
        if config.ack_timeout.is_zero() {
            return Err("ack_timeout must be longer than 0".into());
        }
        if config.create_stream.is_some() == config.stream_subjects.is_empty() {
            return Err("create_stream and stream_subjects go together: the stream to create if absent, and its subjects".into());
        }
        if config.stream_max_messages.is_some_and(|n| n < 1) {
            return Err("stream_max_messages must be at least 1".into());
        }
        Ok(Self {
            config,
            template,
            label: String::new(),
            io: None,
            in_flight: 0,
            subject: String::new(),
            metrics: None,
            failures: 0,
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.label = format!("{} task {}", context.component, context.task_id);
        self.metrics = Some(PublishMetrics::register());
        let (publish_tx, publish_rx) = mpsc::unbounded_channel();
        let (outcome_tx, outcome_rx) = crossbeam_channel::unbounded();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let connection = self.config.connection();
        let ack_timeout = self.config.ack_timeout;
        let stream = self.stream_config();
        let name = format!("squall {} {}", context.topology, self.label);
        let waker = context.waker();
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
                rt.block_on(async move {
                    let client = match connect(&connection, &name, stream).await {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    let outcomes = Outcomes { tx: outcome_tx, waker };
                    publish_loop(client, publish_rx, outcomes, ack_timeout).await;
                });
            })?;
        self.io = Some(Io { publishes: publish_tx, outcomes: outcome_rx, thread: Some(thread) });
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err("the NATS I/O thread ended before connecting".into()),
        }
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        self.collect(collector, None);
        if input.is_tick() {
            return Ok(());
        }
        // Back-pressure: wait for room among the in-flight publishes.
        while self.in_flight >= self.config.max_in_flight {
            if !self.collect(collector, Some(self.config.ack_timeout * 2)) {
                break;
            }
        }
        self.template.render_into(input, &mut self.subject)?;
        let payload = self.payload(input)?;
        let message_id = match &self.config.message_id_field {
            Some(f) => Some(
                input
                    .field(f)
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .ok_or_else(|| format!("message_id_field: the input has no field {f:?}"))?,
            ),
            None => None,
        };
        let io = self.io.as_ref().ok_or("the NATS connection is not open")?;
        io.publishes
            .send(Publish {
                anchor: input.anchor(),
                subject: self.subject.clone(),
                payload,
                message_id,
            })
            .map_err(|_| "the NATS I/O thread has stopped")?;
        self.in_flight += 1;
        Ok(())
    }

    /// An outcome came in (its sender woke the bolt): settle it now rather
    /// than at the next input or tick.
    fn woken(&mut self, collector: &mut BoltCollector<'_>) -> Result<()> {
        self.collect(collector, None);
        Ok(())
    }

    fn cleanup(&mut self) {
        if let Some(mut io) = self.io.take() {
            drop(io.publishes);
            // The loop ends once its channel closes and the outcomes are in
            // (each at most ack_timeout away).
            if let Some(t) = io.thread.take() {
                let _ = t.join();
            }
        }
    }
}

impl JetStreamPublish {
    /// The stream to create if absent (`create_stream`).
    fn stream_config(&self) -> Option<jetstream::stream::Config> {
        self.config.create_stream.clone().map(|name| jetstream::stream::Config {
            name,
            subjects: self.config.stream_subjects.clone(),
            max_messages: self.config.stream_max_messages.unwrap_or(-1),
            ..Default::default()
        })
    }

    /// Acks or fails every input whose outcome is in. With `wait`, first
    /// waits up to that long for one. Returns false if the wait timed out or
    /// the I/O thread is gone.
    fn collect(&mut self, collector: &mut BoltCollector<'_>, wait: Option<Duration>) -> bool {
        let Some(io) = &self.io else { return false };
        let mut first = match wait {
            Some(w) => match io.outcomes.recv_timeout(w) {
                Ok(o) => Some(o),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return false,
            },
            None => None,
        };
        let metrics = self.metrics.as_ref().expect("metrics are registered in prepare");
        while let Some(outcome) = first.take().or_else(|| io.outcomes.try_recv().ok()) {
            self.in_flight -= 1;
            match outcome.result {
                Ok(()) => {
                    metrics.published.inc();
                    collector.ack(outcome.anchor);
                }
                Err(e) => {
                    metrics.failed.inc();
                    self.failures += 1;
                    if self.failures.is_power_of_two() {
                        squall_plugin_api::warn!(
                            "{}: publish failed, input failed: {e} (failure #{})",
                            self.label,
                            self.failures
                        );
                    }
                    collector.fail(outcome.anchor);
                }
            }
        }
        true
    }

    fn payload(&self, input: &Tuple<'_>) -> Result<Bytes> {
        match &self.config.payload_field {
            Some(field) => {
                let value = input
                    .field(field)
                    .ok_or_else(|| format!("payload_field: the input has no field {field:?}"))?;
                Ok(value_bytes(value))
            }
            None => {
                let mut object = serde_json::Map::new();
                for (name, value) in input.fields().iter().zip(input.values()) {
                    object.insert(name.to_string(), to_json(value));
                }
                Ok(Bytes::from(serde_json::to_vec(&object)?))
            }
        }
    }
}

/// A value as a payload: bytes and strings as they are, anything else in
/// its `Display` form.
fn value_bytes(value: &Value) -> Bytes {
    if let Some(b) = value.as_bytes() {
        return Bytes::copy_from_slice(b);
    }
    if let Some(s) = value.as_str() {
        return Bytes::copy_from_slice(s.as_bytes());
    }
    Bytes::from(value.to_string())
}

/// A value as JSON: bytes as a UTF-8 string when they are one, else an
/// array of numbers.
fn to_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::I64(n) => J::from(*n),
        Value::U64(n) => J::from(*n),
        Value::F64(f) => J::from(*f),
        Value::List(items) => J::Array(items.iter().map(to_json).collect()),
        other => match (other.as_str(), other.as_bytes()) {
            (Some(s), _) => J::String(s.to_owned()),
            (None, Some(b)) => match std::str::from_utf8(b) {
                Ok(s) => J::String(s.to_owned()),
                Err(_) => J::Array(b.iter().map(|&x| J::from(x)).collect()),
            },
            (None, None) => J::String(other.to_string()),
        },
    }
}

/// Where the I/O side reports outcomes: the channel, and the bolt's wake
/// handle (on a 1.3 host), called after each so that the bolt settles it.
#[derive(Clone)]
struct Outcomes {
    tx: Sender<Outcome>,
    waker: Option<Waker>,
}

impl Outcomes {
    fn send(&self, outcome: Outcome) {
        let _ = self.tx.send(outcome);
        if let Some(waker) = &self.waker {
            waker.wake();
        }
    }
}

/// The I/O side: publish each request at once (pipelined), and await its
/// PubAck in a task of its own that reports the outcome.
async fn publish_loop(
    client: async_nats::Client,
    mut publishes: mpsc::UnboundedReceiver<Publish>,
    outcomes: Outcomes,
    ack_timeout: Duration,
) {
    let js = jetstream::new(client.clone());
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(p) = publishes.recv().await {
        let sent = match p.message_id {
            Some(id) => {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
                js.publish_with_headers(p.subject, headers, p.payload).await
            }
            None => js.publish(p.subject, p.payload).await,
        };
        let anchor = p.anchor;
        match sent {
            Ok(ack) => {
                let outcomes = outcomes.clone();
                tasks.spawn(async move {
                    let result = match tokio::time::timeout(ack_timeout, ack.into_future()).await {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err(e)) => Err(NotAcked::failed(e)),
                        Err(_) => Err(NotAcked::Timeout(ack_timeout)),
                    };
                    outcomes.send(Outcome { anchor, result });
                });
            }
            Err(e) => {
                outcomes.send(Outcome { anchor, result: Err(NotAcked::failed(e)) });
            }
        }
        // Reap finished tasks so the set does not grow.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let _ = client.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_holds_the_bolt_keys_and_the_connection_keys() {
        let text = "subject = \"counts.{word}\"\nurl = \"nats://h:1\"\nack_timeout = \"2s\"";
        let config = PublishConfig::parse(&ComponentConfig::new(text)).unwrap();
        assert_eq!(config.ack_timeout, Duration::from_secs(2));
        assert_eq!(config.connection().url, "nats://h:1");
        assert_eq!(config.max_in_flight, 4096);
        let names: Vec<&str> = PublishConfig::KEYS.iter().map(|k| k.name).collect();
        assert!(names.contains(&"subject") && names.contains(&"connect_attempts"), "{names:?}");
        let e = PublishConfig::parse(&ComponentConfig::new("subject = \"s\"\nurll = \"x\""));
        assert!(e.unwrap_err().to_string().contains("`urll`"));
    }
}
