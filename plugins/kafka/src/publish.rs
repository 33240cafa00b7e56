//! [`KafkaPublish`]: a rich bolt that produces each input to Kafka and acks
//! it only on the broker's delivery report.
//!
//! # Threads
//! `prepare` creates librdkafka's `BaseProducer` (idempotent by default)
//! and one I/O thread that polls it, so delivery reports are served while
//! `execute` is not running. `execute` hands the record to librdkafka
//! (`produce` enqueues it; librdkafka batches and sends), and returns: many
//! records are in flight, no round trip per tuple. Each delivery report
//! is appended, with the input's anchor, to a list the bolt's thread takes
//! whole, and is acked or failed there: in `woken`, which the host calls
//! once a report found the list empty and called the bolt's wake handle (a
//! 1.3 host), and before and after every run of inputs (`execute_batch`)
//! or `execute`, tick tuples included (the bolt declares that
//! it needs a tick at least every second, which is how a host without wake
//! handles for bolts gets the last reports in). With `max_in_flight`
//! records outstanding, `execute` waits for the oldest reports before it
//! produces more: that is the bolt's back-pressure, and librdkafka's queue
//! is bounded by it.
//!
//! A failed delivery (after librdkafka's own retries, within
//! `delivery_timeout`) fails the input, and the spout replays it. The
//! idempotent producer keeps librdkafka's retries from writing a record
//! twice; a replay by the spout is a new record (at least once).
//!
//! # Exactly once
//! With `delivery = "exactly-once"` (and the topology's `[state]`) the bolt
//! writes through Kafka transactions instead, one per checkpoint, on a
//! transactional id per task that every run reuses; records are staged in
//! the durable store `transactions` until their transaction committed, and
//! inputs are acked at `execute` (their effect is in the store). At most
//! `max_staged_bytes` of records are staged per task: an input whose record
//! would pass it fails (its spout replays it) until a commit frees space;
//! nothing waits, since the commit runs on this thread. No poll thread of
//! this module runs then: `transact.rs` has the producer.

use std::borrow::Cow;
use std::ffi::{c_void, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::bindings as rdsys;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use squall_plugin_api::metrics::{self, Counter};
use squall_plugin_api::prelude::*;

use crate::client::{self, with_connection, Context0};
use crate::template::{push_text, TopicTemplate};
use crate::transact::{self, LaneConfig, Payload, Rec, Staged, TxSink};

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
        buffer_bytes: u64 = default(Integer, "33554432", "queue.buffering.max.kbytes: bytes of records librdkafka holds unsent or unconfirmed, per task (1 MiB ... 2 GiB); execute waits while it is full"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        delivery_timeout: Duration = default(Duration, "\"30s\"", "message.timeout.ms: a record not delivered by then fails its input"),
        create_partitions: Option<i32> = maybe(Integer, "create the (literal) topic in prepare if missing, with this many partitions"),
        delivery: Delivery = default(String, "\"at-least-once\"", "at-least-once (acked on the delivery report) or exactly-once (a Kafka transaction per checkpoint; needs [state])"),
        transactional_id_prefix: Option<String> = maybe(String, "exactly-once: each task's transactional.id is PREFIX-<task index>, the same in every run (default TOPOLOGY.COMPONENT)"),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        transaction_timeout: Duration = default(Duration, "\"60s\"", "exactly-once: transaction.timeout.ms; must outlast a checkpoint interval plus a restart"),
        progress_topic: Option<String> = maybe(String, "exactly-once: the topic whose partition 0 holds each transactional id's commit marker (default: topic, when literal)"),
        offsets_group: Option<String> = maybe(String, "exactly-once: the consumer group each transaction commits the input offsets for (the inputs need fields topic, partition, offset)"),
        sequence_header: Option<String> = maybe(String, "exactly-once: a header on each record naming its transaction, \"<transactional id>:<sequence>\""),
        #[serde(deserialize_with = "squall_connector::config::duration")]
        checkpoint_wait: Duration = default(Duration, "\"60s\"", "exactly-once: fail inputs once records waited this long for a checkpoint (no [state])"),
        max_staged_bytes: u64 = default(Integer, "67108864", "exactly-once: bytes of records (topic, key, value, headers) staged per task until their checkpoint's transaction commits (1 MiB ... 2 GiB); inputs fail while it is full"),
    }
}

/// What a tuple's acknowledgement promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Delivery {
    /// Each input is acked on its record's delivery report; a replay
    /// writes the record again.
    AtLeastOnce,
    /// Records are staged with the checkpoint and committed in a Kafka
    /// transaction once it is durable (`transact.rs`).
    ExactlyOnce,
}

with_connection!(PublishConfig, PublishKeys);

impl PublishConfig {
    fn client_config(&self) -> Result<rdkafka::ClientConfig> {
        let mut fixed = vec![
            ("enable.idempotence", self.idempotent.to_string()),
            ("message.timeout.ms", self.delivery_timeout.as_millis().to_string()),
            ("queue.buffering.max.kbytes", (self.buffer_bytes / 1024).to_string()),
        ];
        if self.delivery == Delivery::ExactlyOnce {
            let t = self.transaction_timeout.as_millis().to_string();
            fixed.push(("transaction.timeout.ms", t));
        }
        self.connection.client_config(&[("linger.ms", "5".into())], &fixed)
    }

    /// Checks the exactly-once keys: only with that delivery, and
    /// consistent with each other.
    fn check_delivery(&self, template: &TopicTemplate) -> Result<()> {
        let tx_keys = [
            ("transactional_id_prefix", self.transactional_id_prefix.is_some()),
            ("progress_topic", self.progress_topic.is_some()),
            ("offsets_group", self.offsets_group.is_some()),
            ("sequence_header", self.sequence_header.is_some()),
        ];
        if self.delivery == Delivery::AtLeastOnce {
            if let Some((key, _)) = tx_keys.iter().find(|(_, set)| *set) {
                return Err(format!("{key} applies only with delivery = \"exactly-once\"").into());
            }
            return Ok(());
        }
        if !self.idempotent {
            return Err("delivery = \"exactly-once\" needs idempotent = true".into());
        }
        if self.transaction_timeout < self.delivery_timeout
            || self.transaction_timeout > Duration::from_secs(900)
        {
            return Err("transaction_timeout must be at least delivery_timeout and at most 15m \
                        (the broker's default transaction.max.timeout.ms)"
                .into());
        }
        if self.checkpoint_wait.is_zero() {
            return Err("checkpoint_wait must be longer than 0".into());
        }
        if self.transactional_id_prefix.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err("transactional_id_prefix must not be empty".into());
        }
        for (key, group) in [("offsets_group", &self.offsets_group)] {
            if group.as_deref().is_some_and(|g| g.trim().is_empty()) {
                return Err(format!("{key} must not be empty").into());
            }
        }
        match (&self.progress_topic, template.literal()) {
            (Some(t), _) => client::check_topic("progress_topic", t),
            (None, Some(_)) => Ok(()),
            (None, None) => Err("delivery = \"exactly-once\" with a topic template needs \
                                 progress_topic (a topic that exists, for the commit markers)"
                .into()),
        }
    }

    /// The topic of the commit markers.
    fn progress(&self, template: &TopicTemplate) -> String {
        self.progress_topic
            .clone()
            .or_else(|| template.literal().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// A delivery report, with the input it is for.
#[derive(Debug)]
struct Outcome {
    anchor: Anchor,
    result: std::result::Result<(), KafkaError>,
}

/// The delivery reports not yet settled, shared by the poll thread (which
/// appends one per record) and the bolt's thread (which takes them all at
/// once): one uncontended lock per report and one per `collect`, instead
/// of a channel operation on each side per report.
#[derive(Debug, Default)]
struct Reports {
    /// Set when a report was appended to an empty list, cleared when the
    /// bolt takes the list: a `collect` that finds it clear takes no lock
    /// (a report it misses that way comes with a wake of its own).
    any: AtomicBool,
    state: Mutex<ReportState>,
    /// Signalled when a report arrives while the bolt waits in `collect`.
    arrived: Condvar,
}

#[derive(Debug, Default)]
struct ReportState {
    outcomes: Vec<Outcome>,
    /// The bolt waits on `arrived` (at `max_in_flight`).
    waiting: bool,
}

impl Reports {
    fn lock(&self) -> MutexGuard<'_, ReportState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a report. True when there was none before it: the bolt has
    /// taken every earlier one, so it must be woken for this one (a wake
    /// for each later report, until the bolt takes them, would be wasted).
    fn push(&self, outcome: Outcome) -> bool {
        let mut state = self.lock();
        let first = state.outcomes.is_empty();
        state.outcomes.push(outcome);
        if first {
            self.any.store(true, Ordering::Release);
        }
        let waiting = state.waiting;
        drop(state);
        if waiting {
            self.arrived.notify_one();
        }
        first
    }

    /// Moves every report in into `into` (empty), after waiting up to
    /// `wait` for one when none is in. False when that wait timed out.
    fn take(&self, into: &mut Vec<Outcome>, wait: Option<Duration>) -> bool {
        if wait.is_none() && !self.any.load(Ordering::Acquire) {
            return true;
        }
        let mut state = self.lock();
        if let Some(wait) = wait {
            let deadline = Instant::now() + wait;
            while state.outcomes.is_empty() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                state.waiting = true;
                state = self
                    .arrived
                    .wait_timeout(state, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                state.waiting = false;
            }
        }
        std::mem::swap(&mut state.outcomes, into);
        self.any.store(false, Ordering::Release);
        true
    }

    /// How many reports wait to be taken.
    fn len(&self) -> usize {
        self.lock().outcomes.len()
    }
}

/// The producer's context: delivery reports to the bolt.
struct PublishContext {
    base: Context0,
    reports: Arc<Reports>,
    /// The bolt's wake handle: a report that finds none before it wakes
    /// the bolt to settle the reports.
    waker: Option<Waker>,
}

impl ClientContext for PublishContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        self.base.log(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.base.error(error, reason);
    }
}

// The anchor (a u64) rides with its record as librdkafka's opaque pointer
// value, so no allocation is made per record for it.
const _: () = assert!(usize::BITS == u64::BITS, "an anchor must fit the opaque pointer");

/// An anchor as a record's opaque value.
#[inline]
fn to_opaque(anchor: Anchor) -> usize {
    anchor.0 as usize
}

/// The anchor a delivery report's opaque value carries.
#[inline]
fn from_opaque(opaque: usize) -> Anchor {
    Anchor(opaque as u64)
}

impl ProducerContext for PublishContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, anchor: usize) {
        let result = match result {
            Ok(_) => Ok(()),
            Err((e, _)) => Err(e.clone()),
        };
        let first = self.reports.push(Outcome { anchor: from_opaque(anchor), result });
        if let (true, Some(waker)) = (first, &self.waker) {
            waker.wake();
        }
    }
}

#[derive(Debug, Clone)]
struct PublishMetrics {
    produced: Counter,
    failed: Counter,
}

impl PublishMetrics {
    /// Registers the bolt's metrics.
    fn register() -> Self {
        Self {
            produced: metrics::counter(
                "kafka_produced",
                "Inputs produced to Kafka and confirmed by a delivery report.",
            ),
            failed: metrics::counter(
                "kafka_produce_failed",
                "Inputs whose record was not delivered (inputs failed).",
            ),
        }
    }
}

/// The headers of a record: each of `fields` of the input, as text.
/// None: no `header_fields`.
fn headers_of(fields: &[String], input: &Tuple<'_>) -> Result<Option<OwnedHeaders>> {
    if fields.is_empty() {
        return Ok(None);
    }
    let mut h = OwnedHeaders::new_with_capacity(fields.len());
    let mut text = String::new();
    for f in fields {
        let v =
            input.field(f).ok_or_else(|| format!("header_fields: the input has no field {f:?}"))?;
        text.clear();
        push_text(v, &mut text);
        h = h.insert(Header { key: f, value: Some(text.as_bytes()) });
    }
    Ok(Some(h))
}

/// librdkafka's handle of a literal topic. Given a topic's name,
/// `rd_kafka_producev` (what `BaseProducer::send` calls) copies the name
/// into a C string and looks the topic up under the client's write lock
/// for every record; given this handle it takes a reference count.
struct TopicHandle {
    rkt: NonNull<rdsys::rd_kafka_topic_t>,
    /// The client the handle belongs to, kept alive until the handle is
    /// destroyed (`Drop` runs before the fields are dropped).
    producer: Arc<BaseProducer<PublishContext>>,
}

// SAFETY: librdkafka's topic handles may be used from any thread (its
// produce calls are thread-safe); the handle is only passed to them and
// destroyed once, in `Drop`.
unsafe impl Send for TopicHandle {}
// SAFETY: as for `Send`: `&TopicHandle` only produces through librdkafka.
unsafe impl Sync for TopicHandle {}

impl TopicHandle {
    fn open(producer: &Arc<BaseProducer<PublishContext>>, topic: &str) -> Result<Self> {
        let name = CString::new(topic).map_err(|e| format!("topic {topic:?}: {e}"))?;
        // SAFETY: the client pointer is live (the producer is borrowed, and
        // kept in the handle); `name` is a NUL-terminated string that
        // librdkafka copies; a null config takes the client's default topic
        // config, as `producev` by name does.
        let rkt = unsafe {
            rdsys::rd_kafka_topic_new(
                producer.client().native_ptr(),
                name.as_ptr(),
                std::ptr::null_mut(),
            )
        };
        let rkt = NonNull::new(rkt).ok_or_else(|| format!("librdkafka refused topic {topic:?}"))?;
        Ok(Self { rkt, producer: producer.clone() })
    }

    /// Enqueues one record (librdkafka copies `value` and `key`), as
    /// `BaseProducer::send` would with the topic's name.
    fn produce(
        &self,
        value: &[u8],
        key: Option<&[u8]>,
        partition: Option<i32>,
        opaque: usize,
    ) -> std::result::Result<(), RDKafkaErrorCode> {
        let (key_ptr, key_len) = key.map_or((std::ptr::null(), 0), |k| (k.as_ptr(), k.len()));
        // SAFETY: the client and the topic handle are live (`self` holds
        // both); every argument is passed with the C type its tag names:
        // the handle, an int32 partition (-1: the partitioner's choice), int
        // flags (COPY: librdkafka copies the value and key before it
        // returns, so the borrowed slices need not outlive the call), a
        // pointer and a size_t each for value and key, the opaque pointer
        // value (the anchor, handed back in the delivery report, as
        // `usize`'s `IntoOpaque` does), and the END tag.
        let err = unsafe {
            rdsys::rd_kafka_producev(
                self.producer.client().native_ptr(),
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_RKT,
                self.rkt.as_ptr(),
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION,
                partition.unwrap_or(-1),
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS,
                rdsys::RD_KAFKA_MSG_F_COPY,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE,
                value.as_ptr() as *mut c_void,
                value.len(),
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_KEY,
                key_ptr as *mut c_void,
                key_len,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_OPAQUE,
                opaque as *mut c_void,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_END,
            )
        };
        match RDKafkaErrorCode::from(err) {
            RDKafkaErrorCode::NoError => Ok(()),
            e => Err(e),
        }
    }
}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from `rd_kafka_topic_new` and is destroyed
        // once; its client is still alive (`self.producer` is dropped after
        // this); records in flight keep their own references.
        unsafe { rdsys::rd_kafka_topic_destroy(self.rkt.as_ptr()) }
    }
}

struct Io {
    /// The literal topic's handle (None with a topic template).
    topic: Option<TopicHandle>,
    producer: Arc<BaseProducer<PublishContext>>,
    reports: Arc<Reports>,
    stop: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").field("reports", &self.reports.len()).finish()
    }
}

/// Produces each input to a topic built from a template over its fields, and
/// acks it on the broker's delivery report; or, with `delivery =
/// "exactly-once"`, commits each checkpoint's records in one Kafka
/// transaction (see the module doc and docs/connectors.md).
#[derive(Debug)]
pub struct KafkaPublish {
    config: PublishConfig,
    template: TopicTemplate,
    label: String,
    io: Option<Io>,
    in_flight: usize,
    /// The reports being settled (kept for its capacity between calls).
    outcomes: Vec<Outcome>,
    topic: String,
    key: String,
    metrics: Option<PublishMetrics>,
    failures: u64,
    /// With `delivery = "exactly-once"`: the staged batches (a durable
    /// store, `transactions`) and the transactions.
    staged: ValueState<Staged>,
    tx: Option<TxSink>,
}

impl Bolt for KafkaPublish {
    const NAME: &'static str = "KafkaPublish";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&PublishConfig::KEYS);
    const DESCRIPTION: &'static str =
        "produces each input to Kafka (topic from a template); acks it on \
         the delivery report, or commits each checkpoint in a Kafka transaction (exactly-once)";
    /// Delivery reports are acked on the bolt's thread, so they need a tick
    /// when input stops.
    const TICKS: Option<Duration> = Some(Duration::from_secs(1));
    const STORES: Option<&'static [StoreSpec]> = Some(&[StoreSpec::value(transact::STORE)]);
    /// `cleanup` flushes for at most `delivery_timeout` (at most 5 minutes).
    const CLOSE_BUDGET: Option<Duration> = Some(Duration::from_secs(300));

    /// What `buffer_bytes` bounds, librdkafka's queue of records, and with
    /// `delivery = "exactly-once"` what `max_staged_bytes` bounds, the
    /// records staged until their transaction commits.
    fn buffer_bytes(config: &ComponentConfig<'_>) -> Result<u64> {
        let config = PublishConfig::parse(config)?;
        Ok(match config.delivery {
            Delivery::AtLeastOnce => config.buffer_bytes,
            Delivery::ExactlyOnce => config.buffer_bytes.saturating_add(config.max_staged_bytes),
        })
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = PublishConfig::parse(config)?;
        config.connection.check()?;
        let template = TopicTemplate::parse(&config.topic)?;
        if config.max_in_flight == 0 || config.max_in_flight > 1_000_000 {
            return Err("max_in_flight must be 1 ... 1000000".into());
        }
        if !(1 << 20..=1 << 31).contains(&config.buffer_bytes) {
            return Err("buffer_bytes must be 1048576 ... 2147483648 (1 MiB ... 2 GiB)".into());
        }
        if !(1 << 20..=1 << 31).contains(&config.max_staged_bytes) {
            return Err("max_staged_bytes must be 1048576 ... 2147483648 (1 MiB ... 2 GiB)".into());
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
        config.check_delivery(&template)?;
        config.client_config()?;
        Ok(Self {
            config,
            template,
            label: String::new(),
            io: None,
            in_flight: 0,
            outcomes: Vec::new(),
            topic: String::new(),
            key: String::new(),
            metrics: None,
            failures: 0,
            staged: transact::store(),
            tx: None,
        })
    }

    fn prepare(&mut self, context: &TaskContext) -> Result<()> {
        self.label = format!("{} task {}", context.component, context.task_id);
        self.metrics = Some(PublishMetrics::register());
        if let Some(topic) = self.template.literal() {
            self.topic = topic.to_owned();
        }
        let client_config = self.config.client_config()?;
        let reports = Arc::new(Reports::default());
        let producer: BaseProducer<PublishContext> = client_config
            .create_with_context(PublishContext {
                base: Context0::new(&self.label, None),
                reports: reports.clone(),
                waker: context.waker(),
            })
            .map_err(|e| format!("cannot create the producer: {e}"))?;
        self.ensure_topic(&producer, &client_config)?;
        if self.config.delivery == Delivery::ExactlyOnce {
            return self.prepare_tx(context, &producer, client_config);
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
        let topic = match self.template.literal() {
            Some(topic) => Some(TopicHandle::open(&producer, topic)?),
            None => None,
        };
        self.io = Some(Io { topic, producer, reports, stop, poller: Some(poller) });
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        if self.tx.is_some() {
            return self.execute_tx(input, collector);
        }
        self.collect(collector, None);
        if input.is_tick() {
            return Ok(());
        }
        self.produce(input, collector)?;
        self.collect(collector, None);
        Ok(())
    }

    /// A run of inputs (contract 1.3): the reports already in are settled
    /// once before the run and once after it, not around every input.
    fn execute_batch(
        &mut self,
        inputs: &mut Inputs<'_, '_>,
        collector: &mut BoltCollector<'_>,
    ) -> Result<()> {
        if self.tx.is_some() {
            for input in inputs {
                self.execute_tx(&input, collector)?;
            }
            return Ok(());
        }
        self.collect(collector, None);
        for input in inputs {
            if !input.is_tick() {
                self.produce(&input, collector)?;
            }
        }
        self.collect(collector, None);
        Ok(())
    }

    /// A delivery report came in (its callback woke the bolt): settle it
    /// now rather than at the next input or tick.
    fn woken(&mut self, collector: &mut BoltCollector<'_>) -> Result<()> {
        self.collect(collector, None);
        Ok(())
    }

    fn stores(&mut self) -> Stores<'_> {
        match self.config.delivery {
            Delivery::ExactlyOnce => Stores::none().with(&mut self.staged),
            Delivery::AtLeastOnce => Stores::none(),
        }
    }

    fn barrier(&mut self, checkpoint: u64) {
        if let Some(tx) = &mut self.tx {
            tx.barrier(&mut self.staged, checkpoint);
        }
    }

    fn committed(&mut self, checkpoint: u64) {
        if let Some(tx) = &mut self.tx {
            tx.committed(&mut self.staged, checkpoint);
        }
    }

    fn cleanup(&mut self) {
        if let Some(mut tx) = self.tx.take() {
            tx.close(&self.staged);
        }
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
    /// `prepare` with `delivery = "exactly-once"`: checks the progress
    /// topic, then opens the transactional lanes (fencing earlier
    /// producers of their ids).
    fn prepare_tx(
        &mut self,
        context: &TaskContext,
        probe: &BaseProducer<PublishContext>,
        client_config: rdkafka::ClientConfig,
    ) -> Result<()> {
        let timeout = self.config.connection.connect_timeout;
        let progress = self.config.progress(&self.template);
        let metadata = probe
            .client()
            .fetch_metadata(Some(&progress), timeout)
            .map_err(|e| format!("cannot read the metadata of progress topic {progress:?}: {e}"))?;
        if client::partitions(&metadata, std::slice::from_ref(&progress))[0].1.is_none() {
            return Err(format!(
                "progress_topic {progress:?} does not exist on {} (create it)",
                self.config.connection.brokers.trim()
            )
            .into());
        }
        if self.config.offsets_group.is_some() && context.parallelism > 1 {
            offsets_grouping(context.inputs())?;
        }
        let prefix = match &self.config.transactional_id_prefix {
            Some(p) => p.trim().to_owned(),
            None => format!("{}.{}", context.topology, context.component),
        };
        let tid = format!("{prefix}-{}", context.task_index);
        let lane = LaneConfig {
            client: client_config,
            progress_topic: progress,
            offsets_group: self.config.offsets_group.clone(),
            sequence_header: self.config.sequence_header.clone(),
            timeout: self.config.delivery_timeout.max(timeout),
            label: self.label.clone(),
        };
        let tx = TxSink::open(
            &mut self.staged,
            &tid,
            &lane,
            self.config.checkpoint_wait,
            self.config.max_staged_bytes,
        )
        .map_err(|e| format!("transactional.id {tid:?}: {e}"))?;
        squall_plugin_api::debug!("{}: writes in transactions as {tid:?}", self.label);
        self.tx = Some(tx);
        Ok(())
    }

    /// `execute` with `delivery = "exactly-once"`: stages the record (and
    /// produces it into the open transaction), and acks the input: its
    /// effect is in the store, so in the checkpoint.
    fn execute_tx(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        let Some(tx) = &mut self.tx else { return Err("the Kafka producer is not open".into()) };
        if input.is_tick() {
            tx.tick(&self.staged);
            return Ok(());
        }
        if let Some(refusal) = tx.refusal() {
            return Err(refusal.into());
        }
        let rec = self.rec(input)?;
        let from = match &self.config.offsets_group {
            Some(_) => Some(input_offset(input)?),
            None => None,
        };
        let Some(tx) = &mut self.tx else { return Err("the Kafka producer is not open".into()) };
        let from = from.as_ref().map(|(t, p, o)| (t.as_str(), *p, *o));
        tx.stage(&mut self.staged, rec, from)?;
        collector.ack(input.anchor());
        Ok(())
    }

    /// The record of `input`, owned (to be staged).
    fn rec(&mut self, input: &Tuple<'_>) -> Result<Rec> {
        self.template.render_into(input, &mut self.topic)?;
        let value = Payload::new(self.value(input)?.into_owned());
        let key = match &self.config.key_field {
            Some(f) => {
                let v = input
                    .field(f)
                    .ok_or_else(|| format!("key_field: the input has no field {f:?}"))?;
                let mut text = String::new();
                push_text(v, &mut text);
                Some(Payload::Text(text))
            }
            None => None,
        };
        let mut headers = Vec::with_capacity(self.config.header_fields.len());
        for f in &self.config.header_fields {
            let v = input
                .field(f)
                .ok_or_else(|| format!("header_fields: the input has no field {f:?}"))?;
            let mut text = String::new();
            push_text(v, &mut text);
            headers.push((f.clone(), text));
        }
        let partition = self.partition(input)?;
        Ok(Rec { topic: self.topic.clone(), key, partition, headers, value })
    }

    /// The partition `partition_field` names, if set.
    /// With a literal topic: looks it up, and creates it when missing if
    /// `create_partitions` is set.
    fn ensure_topic(
        &self,
        producer: &BaseProducer<PublishContext>,
        client_config: &rdkafka::ClientConfig,
    ) -> Result<()> {
        let timeout = self.config.connection.connect_timeout;
        let brokers = self.config.connection.brokers.trim();
        let metadata = producer.client().fetch_metadata(None, timeout).map_err(|e| {
            format!("cannot reach Kafka at {brokers} within connect_timeout = {timeout:?}: {e}")
        })?;
        let Some(topic) = self.template.literal() else { return Ok(()) };
        let known = client::partitions(&metadata, &[topic.to_owned()]);
        if known[0].1.is_some() {
            return Ok(());
        }
        let Some(n) = self.config.create_partitions else {
            return Err(format!(
                "topic {topic:?} does not exist on {brokers} (create it, or set create_partitions)"
            )
            .into());
        };
        client::create_topics(client_config, &[topic.to_owned()], n, timeout)?;
        Ok(())
    }

    /// Hands `input`'s record to librdkafka (at-least-once). With
    /// `max_in_flight` records awaiting their reports, first waits for
    /// reports (acking or failing their inputs).
    fn produce(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        while self.in_flight >= self.config.max_in_flight {
            if !self.collect(collector, Some(self.config.delivery_timeout * 2)) {
                break;
            }
        }
        // A literal topic was rendered once, in `prepare`.
        if self.template.literal().is_none() {
            self.template.render_into(input, &mut self.topic)?;
        }
        let value = self.value(input)?;
        let keyed = self.render_key(input)?;
        let partition = self.partition(input)?;
        let headers = headers_of(&self.config.header_fields, input)?;
        let io = self.io.as_ref().ok_or("the Kafka producer is not open")?;
        if let (Some(handle), None) = (&io.topic, &headers) {
            let key = keyed.then_some(self.key.as_bytes());
            self.send_to(handle, &value, key, partition, to_opaque(input.anchor()))?;
            self.in_flight += 1;
            return Ok(());
        }
        let mut record: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(&self.topic, to_opaque(input.anchor())).payload(&*value);
        if keyed {
            record = record.key(self.key.as_bytes());
        }
        if let Some(p) = partition {
            record = record.partition(p);
        }
        if let Some(h) = headers {
            record = record.headers(h);
        }
        self.send(io, record)?;
        self.in_flight += 1;
        Ok(())
    }

    /// Renders the input's `key_field` into `self.key`. False: no
    /// `key_field`, the record has no key.
    fn render_key(&mut self, input: &Tuple<'_>) -> Result<bool> {
        let Some(f) = &self.config.key_field else { return Ok(false) };
        let v = input.field(f).ok_or_else(|| format!("key_field: the input has no field {f:?}"))?;
        self.key.clear();
        push_text(v, &mut self.key);
        Ok(true)
    }

    /// Hands `record` to librdkafka. While its queue is full (for up to
    /// delivery_timeout) it waits for reports and tries again.
    // The record refused for a full queue comes back in the error, as
    // rdkafka's `send` hands it back, to be tried again.
    #[allow(clippy::result_large_err)]
    fn send(&self, io: &Io, record: BaseRecord<'_, [u8], [u8], usize>) -> Result<()> {
        self.until_queued(record, |r| io.producer.send(r))
    }

    /// [`send`](Self::send) through the literal topic's handle.
    fn send_to(
        &self,
        handle: &TopicHandle,
        value: &[u8],
        key: Option<&[u8]>,
        partition: Option<i32>,
        opaque: usize,
    ) -> Result<()> {
        self.until_queued((), |()| {
            let produced = handle.produce(value, key, partition, opaque);
            produced.map_err(|e| (KafkaError::MessageProduction(e), ()))
        })
    }

    /// Calls `attempt` with `record` until librdkafka takes it: while its
    /// queue is full, waits for reports (50 ms at a time, up to
    /// `delivery_timeout`) and tries again with the record it gave back;
    /// any other error (or a queue still full) is counted and returned.
    fn until_queued<R>(
        &self,
        mut record: R,
        mut attempt: impl FnMut(R) -> std::result::Result<(), (KafkaError, R)>,
    ) -> Result<()> {
        let mut waited = Duration::ZERO;
        loop {
            match attempt(record) {
                Ok(()) => return Ok(()),
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
    }

    fn partition(&self, input: &Tuple<'_>) -> Result<Option<i32>> {
        let Some(f) = &self.config.partition_field else { return Ok(None) };
        let v = input
            .field(f)
            .ok_or_else(|| format!("partition_field: the input has no field {f:?}"))?;
        let p = v
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p >= 0)
            .ok_or_else(|| format!("partition_field {f:?} = {v} is not a partition number"))?;
        Ok(Some(p))
    }

    /// Acks or fails every input whose report is in. With `wait`, first
    /// waits up to that long for one. False when the wait timed out.
    fn collect(&mut self, collector: &mut BoltCollector<'_>, wait: Option<Duration>) -> bool {
        let Some(io) = &self.io else { return false };
        let mut outcomes = std::mem::take(&mut self.outcomes);
        if !io.reports.take(&mut outcomes, wait) {
            self.outcomes = outcomes;
            return false;
        }
        let (mut produced, mut failed) = (0, 0);
        for outcome in outcomes.drain(..) {
            match outcome.result {
                Ok(()) => {
                    produced += 1;
                    collector.ack(outcome.anchor);
                }
                Err(e) => {
                    failed += 1;
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
        self.in_flight = self.in_flight.saturating_sub(produced + failed);
        if let Some(m) = &self.metrics {
            if produced > 0 {
                m.produced.add(produced as u64);
            }
            if failed > 0 {
                m.failed.add(failed as u64);
            }
        }
        // The emptied vector goes back to be swapped with the next reports.
        self.outcomes = outcomes;
        true
    }

    /// The record's value: borrowed from the input when `value_field` holds
    /// bytes or a string (librdkafka copies it), built otherwise.
    fn value<'t>(&self, input: &'t Tuple<'_>) -> Result<Cow<'t, [u8]>> {
        match &self.config.value_field {
            Some(field) => {
                let value = input
                    .field(field)
                    .ok_or_else(|| format!("value_field: the input has no field {field:?}"))?;
                if let Some(b) = value.as_bytes() {
                    return Ok(Cow::Borrowed(b));
                }
                if let Some(s) = value.as_str() {
                    return Ok(Cow::Borrowed(s.as_bytes()));
                }
                let mut text = String::new();
                push_text(value, &mut text);
                Ok(Cow::Owned(text.into_bytes()))
            }
            None => {
                let mut object = serde_json::Map::new();
                for (name, value) in input.fields().iter().zip(input.values()) {
                    object.insert(name.to_string(), to_json(value));
                }
                Ok(Cow::Owned(serde_json::to_vec(&object)?))
            }
        }
    }
}

/// With `offsets_group` and several tasks, each input partition's records
/// must reach one task (the one that commits its offsets): every input
/// grouped by fields among `topic` and `partition`, or `global`.
fn offsets_grouping(inputs: &[squall_plugin_api::abi::InputDecl]) -> Result<()> {
    for input in inputs {
        let by_partition = input.grouping.as_str() == "fields"
            && input.grouping_fields.iter().any(|f| f.as_str() == "partition")
            && input.grouping_fields.iter().all(|f| matches!(f.as_str(), "topic" | "partition"));
        if !by_partition && input.grouping.as_str() != "global" {
            return Err(format!(
                "offsets_group with several tasks needs every input grouped by fields \
                 [\"partition\"] (or [\"topic\", \"partition\"]), so that one task commits each \
                 input partition's offsets; the input from \"{}\" is grouped by {}",
                input.component, input.grouping
            )
            .into());
        }
    }
    Ok(())
}

/// The input's Kafka position, from the fields `topic`, `partition` and
/// `offset` (KafkaSpout's, with `fields = [..., "topic", "partition",
/// "offset"]`), for `offsets_group`.
fn input_offset(input: &Tuple<'_>) -> Result<(String, i32, i64)> {
    let field = |name: &str| {
        input.field(name).ok_or_else(|| {
            format!(
                "offsets_group needs the input fields topic, partition and offset (KafkaSpout's \
                 fields = [..., \"topic\", \"partition\", \"offset\"]); the input has no {name:?}"
            )
        })
    };
    let topic = field("topic")?;
    let topic =
        topic.as_str().ok_or_else(|| format!("the input's topic = {topic} is not a string"))?;
    let p = field("partition")?;
    let partition = p
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| format!("the input's partition = {p} is not a partition number"))?;
    let o = field("offset")?;
    let offset = o.as_i64().ok_or_else(|| format!("the input's offset = {o} is not an offset"))?;
    Ok((topic.to_owned(), partition, offset))
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
        assert_eq!(c.get("queue.buffering.max.kbytes"), Some("32768"), "buffer_bytes' default");
        let buffers = |t: &str| KafkaPublish::buffer_bytes(&ComponentConfig::new(t));
        assert_eq!(buffers("topic = \"t\"\nbuffer_bytes = 2097152").unwrap(), 2 << 20);
        assert!(
            KafkaPublish::new(&ComponentConfig::new("topic = \"t\"\nbuffer_bytes = 1")).is_err()
        );
        let e = PublishConfig::parse(&ComponentConfig::new("topic = \"t\"\nbrokerz = \"x\""));
        assert!(e.unwrap_err().to_string().contains("`brokerz`"));
    }

    #[test]
    fn the_value_is_the_field_as_it_is_and_the_anchor_survives_the_delivery_report() {
        let bolt = |text: &str| KafkaPublish::new(&ComponentConfig::new(text)).unwrap();
        // The host's field names (`RString`, inferred from `Tuple::new`).
        let fields = ["v".into(), "n".into()];
        let long = "x".repeat(100);
        for (v, want) in [
            (Value::str(&long), long.as_bytes().to_vec()),
            (Value::str("short"), b"short".to_vec()),
            (Value::shared_bytes(&[0, 255, 7]), vec![0, 255, 7]),
        ] {
            let values = [v, Value::I64(42)];
            let input = Tuple::new(&values, &fields, "in", "default", 0, Anchor(1));
            let value = bolt("topic = \"t\"\nvalue_field = \"v\"").value(&input).unwrap();
            assert!(matches!(value, Cow::Borrowed(_)), "no copy of a string or bytes field");
            assert_eq!(&*value, want.as_slice());
            let value = bolt("topic = \"t\"\nvalue_field = \"n\"").value(&input).unwrap();
            assert_eq!(&*value, b"42", "other values as their text");
        }
        // Every anchor comes back from librdkafka's opaque value unchanged.
        for anchor in [1u64, u64::from(u32::MAX) + 1, u64::MAX] {
            let opaque = to_opaque(Anchor(anchor));
            assert_eq!(rdkafka::util::IntoOpaque::into_ptr(opaque) as usize, opaque);
            assert_eq!(from_opaque(opaque), Anchor(anchor));
        }
    }

    #[test]
    fn reports_come_as_one_list_and_only_the_first_after_a_take_wakes() {
        let outcome = |a: u64| Outcome { anchor: Anchor(a), result: Ok(()) };
        let reports = Arc::new(Reports::default());
        let mut list = Vec::new();
        assert!(reports.take(&mut list, None) && list.is_empty(), "nothing in");
        assert!(reports.push(outcome(1)), "the first report wakes the bolt");
        assert!(!reports.push(outcome(2)), "the next ones find it already woken");
        assert!(!reports.push(outcome(3)));
        assert!(reports.take(&mut list, None));
        let anchors: Vec<u64> = list.drain(..).map(|o| o.anchor.0).collect();
        assert_eq!(anchors, [1, 2, 3], "every report, in order");
        assert!(reports.take(&mut list, None) && list.is_empty(), "taken once");
        assert!(reports.push(outcome(4)), "the first after a take wakes again");
        assert!(reports.take(&mut list, None));
        assert_eq!(list.drain(..).map(|o| o.anchor.0).collect::<Vec<_>>(), [4]);
        // The wait at max_in_flight: a timeout, then a report from the
        // poll thread ends the wait.
        assert!(!reports.take(&mut list, Some(Duration::from_millis(20))), "timed out");
        let poller = {
            let reports = reports.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                reports.push(outcome(5));
            })
        };
        assert!(reports.take(&mut list, Some(Duration::from_secs(30))));
        assert_eq!(list.drain(..).map(|o| o.anchor.0).collect::<Vec<_>>(), [5]);
        poller.join().unwrap();
    }

    #[test]
    fn exactly_once_declares_its_staged_records_bound_among_its_buffers() {
        let parse = |t: &str| PublishConfig::parse(&ComponentConfig::new(t));
        assert_eq!(parse("topic = \"t\"").unwrap().max_staged_bytes, 64 << 20, "the default");
        let buffers = |t: &str| KafkaPublish::buffer_bytes(&ComponentConfig::new(t)).unwrap();
        let tx = "topic = \"t\"\ndelivery = \"exactly-once\"";
        assert_eq!(buffers(tx), (32 << 20) + (64 << 20), "librdkafka's queue and the staged");
        assert_eq!(buffers(&format!("{tx}\nmax_staged_bytes = 1048576")), (32 << 20) + (1 << 20));
        assert_eq!(buffers("topic = \"t\"\nmax_staged_bytes = 1048576"), 32 << 20, "none staged");
        let new = |extra: &str| KafkaPublish::new(&ComponentConfig::new(&format!("{tx}\n{extra}")));
        for ok in [1_u64 << 20, 1 << 31] {
            assert!(new(&format!("max_staged_bytes = {ok}")).is_ok(), "{ok}");
        }
        for bad in [0_u64, (1 << 20) - 1, (1 << 31) + 1] {
            let e = new(&format!("max_staged_bytes = {bad}")).unwrap_err().to_string();
            assert!(e.contains("max_staged_bytes must be 1048576 ... 2147483648"), "{bad}: {e}");
        }
        let e = new("max_stage_bytes = 1048576").unwrap_err().to_string();
        // The host turns this into file:line:col and a did-you-mean (e2e).
        assert!(e.contains("unknown field `max_stage_bytes`") && e.contains("max_staged_bytes"));
    }

    #[test]
    fn input_offsets_with_several_tasks_need_the_partition_grouping() {
        let input = |grouping: &str, fields: &[&str]| squall_plugin_api::abi::InputDecl {
            component: "in".into(),
            stream: "default".into(),
            grouping: grouping.into(),
            grouping_fields: fields.iter().map(|f| (*f).into()).collect(),
            fields: ["value", "topic", "partition", "offset"].iter().map(|f| (*f).into()).collect(),
            custom: "".into(),
        };
        assert!(offsets_grouping(&[input("fields", &["partition"])]).is_ok());
        assert!(offsets_grouping(&[input("fields", &["topic", "partition"])]).is_ok());
        assert!(offsets_grouping(&[input("global", &[])]).is_ok());
        let e = offsets_grouping(&[input("shuffle", &[])]).unwrap_err().to_string();
        assert!(e.contains("grouped by shuffle") && e.contains("\"partition\""), "{e}");
        assert!(offsets_grouping(&[input("fields", &["value"])]).is_err());
        assert!(offsets_grouping(&[input("fields", &["topic"])]).is_err());
    }

    #[test]
    fn exactly_once_sets_the_transaction_timeout_and_checks_its_keys() {
        let text = "topic = \"t\"\ndelivery = \"exactly-once\"\ntransaction_timeout = \"90s\"";
        let config = PublishConfig::parse(&ComponentConfig::new(text)).unwrap();
        assert_eq!(config.delivery, Delivery::ExactlyOnce);
        let c = config.client_config().unwrap();
        assert_eq!(c.get("transaction.timeout.ms"), Some("90000"));
        assert!(KafkaPublish::new(&ComponentConfig::new(text)).is_ok());
        let e =
            |text: &str| KafkaPublish::new(&ComponentConfig::new(text)).unwrap_err().to_string();
        assert!(e("topic = \"t\"\ndelivery = \"twice\"").contains("exactly-once"));
        assert!(e("topic = \"{k}\"\ndelivery = \"exactly-once\"").contains("progress_topic"));
        assert!(e("topic = \"t\"\nsequence_header = \"h\"").contains("only with delivery"));
        let at_least_once = PublishConfig::parse(&ComponentConfig::new("topic = \"t\"")).unwrap();
        assert_eq!(at_least_once.client_config().unwrap().get("transaction.timeout.ms"), None);
    }
}
