//! [`KafkaPublish`]: a rich bolt that produces each input to Kafka and acks
//! it only on the broker's delivery report.
//!
//! # Threads
//! `prepare` creates librdkafka's `BaseProducer` (idempotent by default)
//! and one I/O thread that polls it, so delivery reports are served while
//! `execute` is not running. `execute` hands the record to librdkafka
//! (`produce` enqueues it; librdkafka batches and sends), and returns: many
//! records are in flight, no round trip per tuple. Each delivery report
//! goes back to the bolt's thread over a channel with the input's anchor,
//! and is acked or failed there, at the start of every `execute`, tick
//! tuples included (the bolt declares that it needs a tick at least every
//! second). With `max_in_flight` records outstanding, `execute` waits for
//! the oldest reports before it produces more: that is the bolt's
//! back-pressure, and librdkafka's queue is bounded by it.
//!
//! A failed delivery (after librdkafka's own retries, within
//! `delivery_timeout`) fails the input, and the spout replays it. The
//! idempotent producer keeps librdkafka's retries from writing a record
//! twice; a replay by the spout is a new record (at least once).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use squall_plugin_api::metrics::{self, Counter};
use squall_plugin_api::prelude::*;

use crate::client::{self, with_connection, Context0};
use crate::template::{push_text, TopicTemplate};

squall_connector::connector_config! {
    /// The bolt's own keys (the connection's are in `client::Connection`).
    #[derive(Debug, Clone, PartialEq)]
    struct PublishKeys {
        topic: String = required(String, "the topic template: literal text and {field}"),
        value_field: Option<String> = maybe(String, "the field whose value is the record's value (default: all fields as a JSON object)"),
        key_field: Option<String> = maybe(String, "the field whose value is the record's key (default: no key)"),
        partition_field: Option<String> = maybe(String, "an integer field naming the partition (default: librdkafka's partitioner, by key)"),
        header_fields: Vec<String> = default(Array, "[]", "fields sent as headers, named after the field"),
        idempotent: bool = default(Bool, "true", "enable.idempotence: librdkafka's retries never write a record twice"),
        max_in_flight: usize = default(Integer, "10000", "records awaiting their delivery report before execute waits"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        delivery_timeout: Duration = default(Duration, "\"30s\"", "message.timeout.ms: a record not delivered by then fails its input"),
        create_partitions: Option<i32> = maybe(Integer, "create the (literal) topic in prepare if missing, with this many partitions"),
    }
}

with_connection!(PublishConfig, PublishKeys);

impl PublishConfig {
    fn client_config(&self) -> Result<rdkafka::ClientConfig> {
        self.connection.client_config(
            &[("linger.ms", "5".into())],
            &[
                ("enable.idempotence", self.idempotent.to_string()),
                ("message.timeout.ms", self.delivery_timeout.as_millis().to_string()),
            ],
        )
    }
}

/// A delivery report, with the input it is for.
#[derive(Debug)]
struct Outcome {
    anchor: Anchor,
    result: std::result::Result<(), String>,
}

/// The producer's context: delivery reports to the bolt's channel.
struct PublishContext {
    base: Context0,
    outcomes: Sender<Outcome>,
}

impl ClientContext for PublishContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        self.base.log(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.base.error(error, reason);
    }
}

impl ProducerContext for PublishContext {
    type DeliveryOpaque = Box<Anchor>;

    fn delivery(&self, result: &DeliveryResult<'_>, anchor: Box<Anchor>) {
        let result = match result {
            Ok(_) => Ok(()),
            Err((e, _)) => Err(e.to_string()),
        };
        let _ = self.outcomes.send(Outcome { anchor: *anchor, result });
    }
}

#[derive(Debug, Clone)]
struct PublishMetrics {
    produced: Counter,
    failed: Counter,
}

struct Io {
    producer: Arc<BaseProducer<PublishContext>>,
    outcomes: Receiver<Outcome>,
    stop: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").field("outcomes", &self.outcomes.len()).finish()
    }
}

/// Produces each input to a topic built from a template over its fields, and
/// acks it on the broker's delivery report (see the module doc and
/// docs/connectors.md).
#[derive(Debug)]
pub struct KafkaPublish {
    config: PublishConfig,
    template: TopicTemplate,
    label: String,
    io: Option<Io>,
    in_flight: usize,
    topic: String,
    key: String,
    metrics: Option<PublishMetrics>,
    failures: u64,
}

impl Bolt for KafkaPublish {
    const NAME: &'static str = "KafkaPublish";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&PublishConfig::KEYS);
    const DESCRIPTION: &'static str =
        "produces each input to Kafka (topic from a template); acks it on the delivery report";
    /// Delivery reports are acked on the bolt's thread, so they need a tick
    /// when input stops.
    const TICKS: Option<Duration> = Some(Duration::from_secs(1));
    /// `cleanup` flushes for at most `delivery_timeout` (at most 5 minutes).
    const CLOSE_BUDGET: Option<Duration> = Some(Duration::from_secs(300));

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = PublishConfig::parse(config)?;
        config.connection.check()?;
        let template = TopicTemplate::parse(&config.topic)?;
        if config.max_in_flight == 0 || config.max_in_flight > 1_000_000 {
            return Err("max_in_flight must be 1 ... 1000000".into());
        }
        if config.delivery_timeout < Duration::from_millis(100)
            || config.delivery_timeout > Duration::from_secs(300)
        {
            return Err("delivery_timeout must be 100ms ... 5m".into());
        }
        if config.create_partitions.is_some() && template.literal().is_none() {
            return Err("create_partitions needs a literal topic (no {field})".into());
        }
        if config.create_partitions.is_some_and(|p| p < 1) {
            return Err("create_partitions must be at least 1".into());
        }
        config.client_config()?;
        Ok(Self {
            config,
            template,
            label: String::new(),
            io: None,
            in_flight: 0,
            topic: String::new(),
            key: String::new(),
            metrics: None,
            failures: 0,
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.label = format!("{} task {}", context.component, context.task_id);
        self.metrics = Some(PublishMetrics {
            produced: metrics::counter(
                "kafka_produced",
                "Inputs produced to Kafka and confirmed by a delivery report.",
            ),
            failed: metrics::counter(
                "kafka_produce_failed",
                "Inputs whose record was not delivered (inputs failed).",
            ),
        });
        let client_config = self.config.client_config()?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let producer: BaseProducer<PublishContext> = client_config
            .create_with_context(PublishContext {
                base: Context0::new(&self.label, None),
                outcomes: tx,
            })
            .map_err(|e| format!("cannot create the producer: {e}"))?;
        let timeout = self.config.connection.connect_timeout;
        let brokers = self.config.connection.brokers.trim();
        let metadata = producer.client().fetch_metadata(None, timeout).map_err(|e| {
            format!("cannot reach Kafka at {brokers} within connect_timeout = {timeout:?}: {e}")
        })?;
        if let Some(topic) = self.template.literal() {
            let known = client::partitions(&metadata, &[topic.to_owned()]);
            if known[0].1.is_none() {
                match self.config.create_partitions {
                    Some(n) => {
                        client::create_topics(&client_config, &[topic.to_owned()], n, timeout)?
                    }
                    None => {
                        return Err(format!(
                            "topic {topic:?} does not exist on {brokers} (create it, or set create_partitions)"
                        )
                        .into())
                    }
                }
            }
        }
        let producer = Arc::new(producer);
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let producer = producer.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("kafka-{}-{}", context.component, context.task_id))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        producer.poll(Duration::from_millis(100));
                    }
                })?
        };
        self.io = Some(Io { producer, outcomes: rx, stop, poller: Some(poller) });
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        self.collect(collector, None);
        if input.is_tick() {
            return Ok(());
        }
        while self.in_flight >= self.config.max_in_flight {
            if !self.collect(collector, Some(self.config.delivery_timeout * 2)) {
                break;
            }
        }
        self.template.render_into(input, &mut self.topic)?;
        let value = self.value(input)?;
        let key = match &self.config.key_field {
            Some(f) => {
                let v = input
                    .field(f)
                    .ok_or_else(|| format!("key_field: the input has no field {f:?}"))?;
                self.key.clear();
                push_text(v, &mut self.key);
                Some(self.key.as_bytes())
            }
            None => None,
        };
        let partition = match &self.config.partition_field {
            Some(f) => {
                let v = input
                    .field(f)
                    .ok_or_else(|| format!("partition_field: the input has no field {f:?}"))?;
                let p =
                    v.as_i64().and_then(|p| i32::try_from(p).ok()).filter(|p| *p >= 0).ok_or_else(
                        || format!("partition_field {f:?} = {v} is not a partition number"),
                    )?;
                Some(p)
            }
            None => None,
        };
        let mut headers = None;
        if !self.config.header_fields.is_empty() {
            let mut h = OwnedHeaders::new_with_capacity(self.config.header_fields.len());
            let mut text = String::new();
            for f in &self.config.header_fields {
                let v = input
                    .field(f)
                    .ok_or_else(|| format!("header_fields: the input has no field {f:?}"))?;
                text.clear();
                push_text(v, &mut text);
                h = h.insert(Header { key: f, value: Some(text.as_bytes()) });
            }
            headers = Some(h);
        }
        let io = self.io.as_ref().ok_or("the Kafka producer is not open")?;
        let mut record: BaseRecord<'_, [u8], [u8], Box<Anchor>> =
            BaseRecord::with_opaque_to(&self.topic, Box::new(input.anchor())).payload(&value);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(p) = partition {
            record = record.partition(p);
        }
        if let Some(h) = headers {
            record = record.headers(h);
        }
        let mut waited = Duration::ZERO;
        loop {
            match io.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if waited < self.config.delivery_timeout =>
                {
                    // librdkafka's queue is full: wait for reports, then again.
                    record = r;
                    let wait = Duration::from_millis(50);
                    waited += wait;
                    std::thread::sleep(wait);
                }
                Err((e, _)) => {
                    if let Some(m) = &self.metrics {
                        m.failed.inc();
                    }
                    return Err(format!("cannot produce to {:?}: {e}", self.topic).into());
                }
            }
        }
        self.in_flight += 1;
        self.collect(collector, None);
        Ok(())
    }

    fn cleanup(&mut self) {
        if let Some(mut io) = self.io.take() {
            if self.in_flight > 0 {
                if let Err(e) = io.producer.flush(self.config.delivery_timeout) {
                    squall_plugin_api::warn!(
                        "{}: {} record(s) not confirmed at cleanup: {e}",
                        self.label,
                        self.in_flight
                    );
                }
            }
            io.stop.store(true, Ordering::Relaxed);
            if let Some(t) = io.poller.take() {
                let _ = t.join();
            }
        }
    }
}

impl KafkaPublish {
    /// Acks or fails every input whose report is in. With `wait`, first
    /// waits up to that long for one. False when the wait timed out.
    fn collect(&mut self, collector: &mut BoltCollector<'_>, wait: Option<Duration>) -> bool {
        let Some(io) = &self.io else { return false };
        let mut first = match wait {
            Some(w) => match io.outcomes.recv_timeout(w) {
                Ok(o) => Some(o),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return false,
            },
            None => None,
        };
        while let Some(outcome) = first.take().or_else(|| io.outcomes.try_recv().ok()) {
            self.in_flight = self.in_flight.saturating_sub(1);
            match outcome.result {
                Ok(()) => {
                    if let Some(m) = &self.metrics {
                        m.produced.inc();
                    }
                    collector.ack(outcome.anchor);
                }
                Err(e) => {
                    if let Some(m) = &self.metrics {
                        m.failed.inc();
                    }
                    self.failures += 1;
                    if self.failures.is_power_of_two() {
                        squall_plugin_api::warn!(
                            "{}: delivery failed, input failed: {e} (failure #{})",
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

    fn value(&self, input: &Tuple<'_>) -> Result<Vec<u8>> {
        match &self.config.value_field {
            Some(field) => {
                let value = input
                    .field(field)
                    .ok_or_else(|| format!("value_field: the input has no field {field:?}"))?;
                if let Some(b) = value.as_bytes() {
                    return Ok(b.to_vec());
                }
                let mut text = String::new();
                push_text(value, &mut text);
                Ok(text.into_bytes())
            }
            None => {
                let mut object = serde_json::Map::new();
                for (name, value) in input.fields().iter().zip(input.values()) {
                    object.insert(name.to_string(), to_json(value));
                }
                Ok(serde_json::to_vec(&object)?)
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_holds_the_bolt_keys_and_the_connection_keys() {
        let text = "topic = \"counts\"\nbrokers = \"h:1\"\ndelivery_timeout = \"2s\"";
        let config = PublishConfig::parse(&ComponentConfig::new(text)).unwrap();
        assert_eq!(config.delivery_timeout, Duration::from_secs(2));
        assert_eq!(config.connection.brokers, "h:1");
        assert!(config.idempotent);
        let c = config.client_config().unwrap();
        assert_eq!(c.get("enable.idempotence"), Some("true"));
        assert_eq!(c.get("message.timeout.ms"), Some("2000"));
        let e = PublishConfig::parse(&ComponentConfig::new("topic = \"t\"\nbrokerz = \"x\""));
        assert!(e.unwrap_err().to_string().contains("`brokerz`"));
    }
}
