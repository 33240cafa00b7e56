//! `KafkaPublish` with `delivery = "exactly-once"`: a Kafka transaction per
//! checkpoint, and the records of each checkpoint staged in a durable store
//! until their transaction committed (docs/connectors.md, Kafka, "Exactly
//! once").
//!
//! # A lane
//! Each task writes through one transactional id, `PREFIX-<task index>`,
//! the same in every run (a zombie of the previous run is fenced by the
//! next `init_transactions`, and the broker keeps no ids minted per run).
//! The records executed since the last barrier are the *open* batch; at
//! checkpoint `n`'s barrier they become batch `n`, numbered with the lane's
//! next *sequence* (1, 2, ... per transactional id, never reused), and the
//! store `transactions` reports it with the checkpoint.
//!
//! # A transaction
//! After a commit, the first record begins a transaction and every record
//! is produced into it as it comes (nothing waits for the barrier). Once
//! the barrier sealed the batch, later records are only staged: they belong
//! to the next checkpoint. At `committed(k)` every batch numbered `k` or
//! less is durable: whatever of them is not in the open transaction yet is
//! produced into it, then the transaction commits with, through
//! `send_offsets_to_transaction`, the *marker*: the offset of consumer group
//! `<transactional id>` on partition 0 of the progress topic, set to the
//! last batch's sequence (and, with `offsets_group`, the input offsets the
//! batches carry). The records and the marker commit together or not at
//! all. Then the batches leave the store (a change of the next checkpoint).
//!
//! # After a crash
//! The restore hands back every batch not yet removed by a committed
//! checkpoint. `prepare` first fences (`init_transactions`: the broker
//! aborts, or completes if it was already committing, the dead instance's
//! transaction), then reads the marker `M`: a batch with a sequence `≤ M`
//! was committed before the crash and is dropped; the others are produced
//! again, in a new transaction, at the first commit. A batch is thus in
//! exactly one committed transaction. Batches of a transactional id no task
//! uses any more (a restart with fewer tasks) go to task `i mod n` with the
//! store, which fences that id too and settles them under it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use squall_connector::health::UP_GAUGE;
use squall_plugin_api::metrics::{self, Counter, Gauge};
use squall_plugin_api::ValueState;

use crate::client::Context0;

/// The store's name (its scope is `COMPONENT/transactions`).
pub const STORE: &str = "transactions";

/// A key or a value: text when it is UTF-8 (readable in `squall state
/// show`), else the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Payload {
    /// UTF-8 bytes.
    Text(String),
    /// Other bytes.
    Raw(Vec<u8>),
}

impl Payload {
    /// From bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(s) => Payload::Text(s),
            Err(e) => Payload::Raw(e.into_bytes()),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Text(s) => s.as_bytes(),
            Payload::Raw(b) => b,
        }
    }
}

/// One record, as staged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rec {
    /// The topic (the template rendered).
    pub topic: String,
    /// The key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Payload>,
    /// The partition (`None`: librdkafka's partitioner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// The headers, as text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// The value.
    pub value: Payload,
}

impl Rec {
    /// The bytes the record holds as staged: its topic, key, value, and
    /// each header's name and value. What `max_staged_bytes` bounds.
    pub fn bytes(&self) -> u64 {
        let key = self.key.as_ref().map_or(0, |k| k.bytes().len());
        let headers: usize = self.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
        (self.topic.len() + key + self.value.bytes().len() + headers) as u64
    }
}

/// The bytes of every record in `staged` ([`Rec::bytes`]): every lane's
/// sealed batches and open records.
pub fn staged_bytes(staged: &Staged) -> u64 {
    let records = |r: &[Rec]| r.iter().map(Rec::bytes).sum::<u64>();
    staged
        .values()
        .map(|l| records(&l.open) + l.batches.iter().map(|b| records(&b.records)).sum::<u64>())
        .sum()
}

/// The bytes a task's store holds staged, against `max_staged_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageBound {
    max: u64,
    bytes: u64,
}

/// Why a record was not staged: the store holds `bytes` of `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// The record's bytes.
    pub size: u64,
    /// The bytes staged.
    pub bytes: u64,
    /// `max_staged_bytes`.
    pub max: u64,
}

impl StageBound {
    /// A bound of `max` bytes, nothing staged.
    pub fn new(max: u64) -> Self {
        Self { max, bytes: 0 }
    }

    /// The bytes staged.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Counts the store again (after a restore, and after each commit,
    /// which removes the committed batches).
    pub fn recount(&mut self, staged: &Staged) {
        self.bytes = staged_bytes(staged);
    }

    /// Counts `size` more bytes staged, or refuses them when the bound
    /// would be passed (nothing is counted then).
    ///
    /// # Errors
    /// The bytes staged plus `size` would exceed the bound.
    pub fn take(&mut self, size: u64) -> Result<(), Full> {
        let after = self.bytes.saturating_add(size);
        if after > self.max {
            return Err(Full { size, bytes: self.bytes, max: self.max });
        }
        self.bytes = after;
        Ok(())
    }
}

/// An input offset a batch carries: one past the highest offset of
/// `(topic, partition)` among its records' inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputOffset {
    /// The input topic.
    pub topic: String,
    /// The input partition.
    pub partition: i32,
    /// The offset to commit (the next to read).
    pub next: i64,
}

/// The records sealed at one barrier (or, `open`, since the last one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The lane's sequence number of the batch (the marker's value once
    /// its transaction committed).
    pub seq: u64,
    /// The checkpoint whose barrier sealed it (0: open).
    pub checkpoint: u64,
    /// The records, in execution order.
    pub records: Vec<Rec>,
    /// The input offsets (with `offsets_group`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<InputOffset>,
}

/// One transactional id's staged batches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneStage {
    /// The sequence of the next batch.
    pub next_seq: u64,
    /// Sealed batches whose transaction has not committed, in order.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub batches: VecDeque<Batch>,
    /// Records since the last barrier (present only in a live swap's
    /// handover: at a checkpoint it was just sealed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open: Vec<Rec>,
    /// The open records' input offsets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_offsets: Vec<InputOffset>,
}

/// The store's value: the lanes by transactional id.
pub type Staged = BTreeMap<String, LaneStage>;

/// Merges two tasks' stores (a restore with fewer tasks): the lanes of
/// both; a lane in both (never, unless the prefix changed) keeps every
/// batch once, by sequence.
pub fn merge(into: &mut Staged, other: Staged) {
    for (tid, lane) in other {
        let mine = into.entry(tid).or_default();
        mine.next_seq = mine.next_seq.max(lane.next_seq);
        for b in lane.batches {
            if !mine.batches.iter().any(|m| m.seq == b.seq) {
                mine.batches.push_back(b);
            }
        }
        mine.batches.make_contiguous().sort_by_key(|b| b.seq);
        mine.open.extend(lane.open);
        for o in lane.open_offsets {
            note_offset(&mut mine.open_offsets, &o.topic, o.partition, o.next - 1);
        }
    }
}

/// Records that an input at `offset` of `(topic, partition)` is in a batch.
pub fn note_offset(offsets: &mut Vec<InputOffset>, topic: &str, partition: i32, offset: i64) {
    match offsets.iter_mut().find(|o| o.partition == partition && o.topic == topic) {
        Some(o) => o.next = o.next.max(offset + 1),
        None => offsets.push(InputOffset { topic: topic.to_owned(), partition, next: offset + 1 }),
    }
}

/// Why a transaction step failed.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// Another producer took the transactional id: this instance is a
    /// zombie and must write nothing more.
    #[error(
        "fenced: another producer took transactional.id {tid:?} (a second instance of this \
         topology, or a restart of it, runs this task): this instance writes nothing more ({why})"
    )]
    Fenced {
        /// The transactional id.
        tid: String,
        /// librdkafka's message.
        why: String,
    },
    /// A step failed; the batches stay staged for the next commit.
    #[error("{0}")]
    Failed(String),
}

impl TxError {
    fn from_kafka(tid: &str, what: &str, e: &KafkaError) -> Self {
        let fenced = match e {
            KafkaError::Transaction(t) => t.is_fatal() || is_fencing(t.code()),
            other => other.rdkafka_error_code().is_some_and(is_fencing),
        };
        if fenced {
            TxError::Fenced { tid: tid.to_owned(), why: format!("{what}: {e}") }
        } else {
            TxError::Failed(format!("{what}: {e}"))
        }
    }
}

/// The codes by which the broker says a newer producer holds the id.
fn is_fencing(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::InvalidTransactionalState
    )
}

/// What the delivery reports of a lane's producer said since the last
/// transaction began.
#[derive(Debug, Default)]
struct Reports {
    /// A delivery failed: the transaction must be aborted.
    broken: AtomicBool,
    /// A delivery failed because the id is fenced.
    fenced: AtomicBool,
    /// The first failure's message.
    first: Mutex<Option<String>>,
}

/// The producer's context: librdkafka's log and errors, and the delivery
/// reports' failures.
struct TxContext {
    base: Context0,
    reports: Arc<Reports>,
}

impl ClientContext for TxContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        self.base.log(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.base.error(error, reason);
    }
}

impl ProducerContext for TxContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            let code = e.rdkafka_error_code();
            // Records purged by an abort this lane asked for.
            if matches!(code, Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight))
            {
                return;
            }
            if code.is_some_and(is_fencing) {
                self.reports.fenced.store(true, Ordering::Relaxed);
            }
            self.reports.broken.store(true, Ordering::Relaxed);
            let mut first = self.reports.first.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| e.to_string());
        }
    }
}

/// What a lane needs of the bolt's config.
#[derive(Debug, Clone)]
pub struct LaneConfig {
    /// The producer's configuration (without `transactional.id`).
    pub client: ClientConfig,
    /// The topic whose partition 0 holds the markers.
    pub progress_topic: String,
    /// The group the input offsets are sent for.
    pub offsets_group: Option<String>,
    /// A header naming each record's transaction, `<id>:<sequence>`.
    pub sequence_header: Option<String>,
    /// How long a transaction call may take.
    pub timeout: Duration,
    /// The task's label, for log lines.
    pub label: String,
}

/// The open transaction of a lane.
#[derive(Debug, Default)]
struct Txn {
    /// `begin_transaction` was called and neither commit nor abort since.
    open: bool,
    /// The sealed batches (by sequence) whose records are all in it.
    sealed: Vec<u64>,
    /// How many of the open batch's records are in it.
    open_records: usize,
    /// A record could not be produced into it: abort at the commit.
    broken: bool,
}

/// One transactional id: its producer and its open transaction.
pub struct Lane {
    tid: String,
    producer: ThreadedProducer<TxContext>,
    reports: Arc<Reports>,
    /// A consumer of group `tid`, never subscribed: the marker's group
    /// metadata, and the marker's committed offset.
    marker: BaseConsumer<Context0>,
    /// The input offsets' group, as a consumer never subscribed.
    offsets: Option<BaseConsumer<Context0>>,
    txn: Txn,
    /// After a failed commit, records are only staged until one succeeds.
    hold: bool,
    config: LaneConfig,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").field("tid", &self.tid).field("txn", &self.txn).finish()
    }
}

/// What a commit did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// Batches committed.
    pub batches: usize,
    /// Records committed.
    pub records: u64,
}

impl Lane {
    /// Opens transactional id `tid`: creates its producer and fences every
    /// earlier producer of it (`init_transactions`), then reads its marker.
    /// Returns the lane and the marker (0: none committed).
    ///
    /// # Errors
    /// The producer cannot be built, or the broker does not answer.
    pub fn open(tid: &str, config: &LaneConfig) -> Result<(Self, u64), TxError> {
        let reports = Arc::new(Reports::default());
        let producer = transactional(tid, config, &reports)?;
        let marker = consumer(&config.client, tid)?;
        let offsets = match &config.offsets_group {
            Some(g) => Some(consumer(&config.client, g)?),
            None => None,
        };
        let mut lane = Self {
            tid: tid.to_owned(),
            producer,
            reports,
            marker,
            offsets,
            txn: Txn::default(),
            hold: false,
            config: config.clone(),
        };
        let committed = lane.read_marker()?;
        lane.marker_check()?;
        Ok((lane, committed))
    }

    /// The last sequence committed under this id (0: none).
    fn read_marker(&mut self) -> Result<u64, TxError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&self.config.progress_topic, 0);
        let committed = self.marker.committed_offsets(tpl, self.config.timeout).map_err(|e| {
            TxError::Failed(format!("cannot read the marker of group {:?}: {e}", self.tid))
        })?;
        let offset = committed.elements().first().and_then(|e| e.offset().to_raw()).unwrap_or(-1);
        Ok(u64::try_from(offset).unwrap_or(0))
    }

    /// Both group metadata handles exist (librdkafka hands them out for a
    /// consumer with a `group.id`).
    fn marker_check(&self) -> Result<(), TxError> {
        if self.marker.group_metadata().is_none()
            || self.offsets.as_ref().is_some_and(|c| c.group_metadata().is_none())
        {
            return Err(TxError::Failed("librdkafka gave no consumer group metadata".into()));
        }
        Ok(())
    }

    /// Produces `rec` (of batch `seq`) into the open transaction, beginning
    /// one if none is open.
    fn produce(&mut self, rec: &Rec, seq: u64) -> Result<(), TxError> {
        if !self.txn.open {
            self.reports.broken.store(false, Ordering::Relaxed);
            *self.reports.first.lock().unwrap_or_else(|p| p.into_inner()) = None;
            self.producer
                .begin_transaction()
                .map_err(|e| TxError::from_kafka(&self.tid, "begin_transaction", &e))?;
            self.txn = Txn { open: true, ..Txn::default() };
        }
        let headers = self.headers(rec, seq);
        let mut record: BaseRecord<'_, [u8], [u8], ()> =
            BaseRecord::to(&rec.topic).payload(rec.value.bytes());
        if let Some(k) = &rec.key {
            record = record.key(k.bytes());
        }
        if let Some(p) = rec.partition {
            record = record.partition(p);
        }
        if let Some(h) = headers {
            record = record.headers(h);
        }
        let mut waited = Duration::ZERO;
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if waited < self.config.timeout =>
                {
                    record = r;
                    waited += Duration::from_millis(20);
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err((e, _)) => {
                    self.txn.broken = true;
                    let what = format!("producing to {:?}", rec.topic);
                    return Err(TxError::from_kafka(&self.tid, &what, &e));
                }
            }
        }
    }

    /// The record's headers, and the sequence header if configured.
    fn headers(&self, rec: &Rec, seq: u64) -> Option<OwnedHeaders> {
        if rec.headers.is_empty() && self.config.sequence_header.is_none() {
            return None;
        }
        let mut h = OwnedHeaders::new_with_capacity(rec.headers.len() + 1);
        for (k, v) in &rec.headers {
            h = h.insert(Header { key: k, value: Some(v.as_bytes()) });
        }
        if let Some(name) = &self.config.sequence_header {
            let text = format!("{}:{seq}", self.tid);
            h = h.insert(Header { key: name, value: Some(text.as_bytes()) });
        }
        Some(h)
    }

    /// True when a delivery report said the id is fenced.
    pub fn fenced(&self) -> bool {
        self.reports.fenced.load(Ordering::Relaxed)
    }

    /// A record of the open batch `seq` was staged at `position` in it:
    /// produces it now when the open transaction may take it. It may not
    /// when a sealed batch is in it (the record belongs to a later
    /// checkpoint), when an older batch waits to be produced (`backlog`:
    /// records reach the topic in checkpoint order), when an earlier
    /// record of the batch was not produced, or after a failed commit.
    ///
    /// # Errors
    /// The id is fenced (a failure to produce only marks the transaction
    /// for an abort: the record is staged and produced again).
    pub fn staged(
        &mut self,
        rec: &Rec,
        seq: u64,
        position: usize,
        backlog: bool,
    ) -> Result<(), TxError> {
        if self.hold || backlog || !self.txn.sealed.is_empty() || self.txn.open_records != position
        {
            return Ok(());
        }
        match self.produce(rec, seq) {
            Ok(()) => {
                self.txn.open_records += 1;
                Ok(())
            }
            Err(TxError::Failed(_)) => Ok(()),
            Err(fenced) => Err(fenced),
        }
    }

    /// The open batch was sealed as batch `seq` with `len` records.
    pub fn sealed(&mut self, seq: u64, len: usize) {
        if self.txn.open && self.txn.open_records == len && len > 0 {
            self.txn.sealed.push(seq);
        } else if self.txn.open_records > 0 {
            // Part of the batch is in the transaction: abort it at the commit.
            self.txn.broken = true;
        }
        self.txn.open_records = 0;
    }

    /// Commits every batch of `stage` sealed at checkpoint `k` or before,
    /// in one transaction with the marker; then produces the open records
    /// into the next one. On success the batches leave `stage`.
    ///
    /// # Errors
    /// The id is fenced, or a step failed (the batches stay staged; the
    /// transaction was aborted).
    pub fn commit(&mut self, stage: &mut LaneStage, k: u64) -> Result<Committed, TxError> {
        let due = stage.batches.iter().take_while(|b| b.checkpoint <= k).count();
        if due == 0 {
            return Ok(Committed::default());
        }
        match self.commit_due(&stage.batches, due) {
            Ok(()) => {}
            Err(TxError::Failed(why)) => {
                self.hold = true;
                let aborted = match self.abort() {
                    Ok(()) => "the transaction was aborted".to_owned(),
                    Err(e @ TxError::Fenced { .. }) => return Err(e),
                    // A producer that cannot abort is replaced: the new
                    // one's init_transactions aborts the transaction.
                    Err(e) => match transactional(&self.tid, &self.config, &self.reports) {
                        Ok(p) => {
                            self.producer = p;
                            format!("aborting it failed ({e}); the producer was replaced")
                        }
                        Err(f) => return Err(f),
                    },
                };
                return Err(TxError::Failed(format!("{why}; {aborted}")));
            }
            Err(fenced) => return Err(fenced),
        }
        let mut done = Committed::default();
        for b in stage.batches.drain(..due) {
            done.batches += 1;
            done.records += b.records.len() as u64;
        }
        self.txn = Txn::default();
        self.hold = false;
        let backlog = !stage.batches.is_empty();
        for (i, rec) in stage.open.iter().enumerate() {
            self.staged(rec, stage.next_seq, i, backlog)?;
        }
        Ok(done)
    }

    fn commit_due(&mut self, batches: &VecDeque<Batch>, due: usize) -> Result<(), TxError> {
        let due = batches.iter().take(due);
        let fits = self.txn.sealed.iter().all(|s| due.clone().any(|b| b.seq == *s));
        if self.txn.open
            && (self.txn.broken
                || self.txn.open_records > 0
                || !fits
                || self.reports.broken.load(Ordering::Relaxed))
        {
            if self.fenced() {
                return Err(self.fenced_error("a delivery report"));
            }
            self.abort()?;
        }
        let mut last = 0;
        let mut offsets = Vec::new();
        for b in due {
            if !self.txn.sealed.contains(&b.seq) {
                for rec in &b.records {
                    self.produce(rec, b.seq)?;
                }
            }
            for o in &b.offsets {
                note_offset(&mut offsets, &o.topic, o.partition, o.next - 1);
            }
            last = b.seq;
        }
        if !self.txn.open {
            // Every due batch is empty: nothing to commit (a batch is
            // sealed only with records, so this does not happen).
            return Ok(());
        }
        self.send_offsets(last, &offsets)?;
        let t = self.config.timeout;
        self.producer
            .commit_transaction(t)
            .map_err(|e| TxError::from_kafka(&self.tid, "commit_transaction", &e))?;
        if self.fenced() {
            return Err(self.fenced_error("a delivery report"));
        }
        Ok(())
    }

    fn fenced_error(&self, what: &str) -> TxError {
        let first = self.reports.first.lock().unwrap_or_else(|p| p.into_inner()).clone();
        TxError::Fenced {
            tid: self.tid.clone(),
            why: format!("{what}: {}", first.unwrap_or_default()),
        }
    }

    /// Sends the marker (`last`) and the input offsets into the transaction.
    fn send_offsets(&self, last: u64, inputs: &[InputOffset]) -> Result<(), TxError> {
        let t = self.config.timeout;
        let mut tpl = TopicPartitionList::new();
        let marker = i64::try_from(last).unwrap_or(i64::MAX);
        tpl.add_partition_offset(&self.config.progress_topic, 0, Offset::Offset(marker))
            .map_err(|e| TxError::Failed(format!("the marker: {e}")))?;
        let meta = self
            .marker
            .group_metadata()
            .ok_or_else(|| TxError::Failed("no group metadata".into()))?;
        self.producer.send_offsets_to_transaction(&tpl, &meta, t).map_err(|e| {
            TxError::from_kafka(&self.tid, "send_offsets_to_transaction (marker)", &e)
        })?;
        let (Some(consumer), false) = (&self.offsets, inputs.is_empty()) else { return Ok(()) };
        let mut tpl = TopicPartitionList::new();
        for o in inputs {
            tpl.add_partition_offset(&o.topic, o.partition, Offset::Offset(o.next))
                .map_err(|e| TxError::Failed(format!("the input offsets: {e}")))?;
        }
        let meta =
            consumer.group_metadata().ok_or_else(|| TxError::Failed("no group metadata".into()))?;
        self.producer
            .send_offsets_to_transaction(&tpl, &meta, t)
            .map_err(|e| TxError::from_kafka(&self.tid, "send_offsets_to_transaction (inputs)", &e))
    }

    /// Aborts the open transaction, if any.
    ///
    /// # Errors
    /// The abort failed.
    pub fn abort(&mut self) -> Result<(), TxError> {
        let open = self.txn.open;
        self.txn = Txn::default();
        if !open {
            return Ok(());
        }
        self.producer
            .abort_transaction(self.config.timeout)
            .map_err(|e| TxError::from_kafka(&self.tid, "abort_transaction", &e))
    }
}

/// The producer of `tid`, with every earlier producer of it fenced
/// (`init_transactions`).
fn transactional(
    tid: &str,
    config: &LaneConfig,
    reports: &Arc<Reports>,
) -> Result<ThreadedProducer<TxContext>, TxError> {
    let mut client = config.client.clone();
    client.set("transactional.id", tid);
    let producer: ThreadedProducer<TxContext> = client
        .create_with_context(TxContext {
            base: Context0::new(&config.label, None),
            reports: reports.clone(),
        })
        .map_err(|e| TxError::Failed(format!("cannot create the producer of {tid:?}: {e}")))?;
    producer
        .init_transactions(config.timeout)
        .map_err(|e| TxError::from_kafka(tid, "init_transactions", &e))?;
    Ok(producer)
}

/// A consumer of `group` that is never subscribed (group metadata, and
/// committed offsets).
fn consumer(client: &ClientConfig, group: &str) -> Result<BaseConsumer<Context0>, TxError> {
    let mut c = ClientConfig::new();
    for (k, v) in client.config_map() {
        if k == "bootstrap.servers" || k.starts_with("socket.") || k.starts_with("security.") {
            c.set(k, v);
        }
    }
    c.set("group.id", group).set("enable.auto.commit", "false");
    c.create_with_context(Context0::quiet())
        .map_err(|e| TxError::Failed(format!("cannot create a consumer of group {group:?}: {e}")))
}

/// The exactly-once side of a `KafkaPublish` task: its own lane, the lanes
/// of ids it settles for tasks that no longer exist, and what the operator
/// sees (log lines, `/readyz`, metrics).
pub struct TxSink {
    own: Lane,
    foreign: Vec<Lane>,
    fenced: Option<String>,
    /// `connector_up`: 0 once fenced (`/readyz` answers 503).
    up: Gauge,
    last_barrier: Instant,
    checkpoint_wait: Duration,
    no_checkpoint: bool,
    /// The bytes staged against `max_staged_bytes`.
    bound: StageBound,
    /// Inputs refused because the bound was reached.
    full: u64,
    metrics: TxMetrics,
    label: String,
}

impl std::fmt::Debug for TxSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxSink")
            .field("own", &self.own)
            .field("foreign", &self.foreign)
            .field("fenced", &self.fenced)
            .finish_non_exhaustive()
    }
}

struct TxMetrics {
    committed: Counter,
    records: Counter,
    failed: Counter,
    staged_full: Counter,
    staged_bytes: Gauge,
}

impl TxMetrics {
    fn new() -> Self {
        TxMetrics {
            committed: metrics::counter(
                "kafka_transactions_committed",
                "Kafka transactions committed (one per checkpoint with records).",
            ),
            records: metrics::counter(
                "kafka_transaction_records",
                "Records committed in Kafka transactions.",
            ),
            failed: metrics::counter(
                "kafka_transaction_failures",
                "Transactions that failed and were aborted (their records stay staged).",
            ),
            staged_full: metrics::counter(
                "kafka_staged_full",
                "Inputs failed because the staged records reached max_staged_bytes (their \
                 spout replays them).",
            ),
            staged_bytes: metrics::gauge(
                "kafka_staged_bytes",
                "Bytes of records staged until their checkpoint's transaction commits.",
            ),
        }
    }
}

impl TxSink {
    /// Opens `tid` (fencing its earlier producers) and every other id the
    /// restored store holds batches of; drops the batches their markers
    /// say were committed. At most `max_staged` bytes of records are
    /// staged at a time ([`Rec::bytes`]).
    ///
    /// # Errors
    /// A lane cannot be opened (the broker is unreachable, or refuses).
    pub fn open(
        staged: &mut ValueState<Staged>,
        tid: &str,
        config: &LaneConfig,
        checkpoint_wait: Duration,
        max_staged: u64,
    ) -> Result<Self, TxError> {
        let up = metrics::gauge(
            UP_GAUGE,
            "1 while the task can write, 0 once it is fenced (/readyz answers 503).",
        );
        up.set(1);
        let (own, marker) = Lane::open(tid, config)?;
        let mut foreign = Vec::new();
        let others: Vec<String> = staged.get().keys().filter(|k| *k != tid).cloned().collect();
        settle(staged, tid, marker, &config.label);
        for other in others {
            let (lane, marker) = Lane::open(&other, config)?;
            if settle(staged, &other, marker, &config.label) {
                squall_plugin_api::info!(
                    "{}: settles the staged batches of transactional.id {other:?} (a task that \
                     no longer runs), fenced now",
                    config.label
                );
                foreign.push(lane);
            }
        }
        let metrics = TxMetrics::new();
        let mut bound = StageBound::new(max_staged);
        bound.recount(staged.get());
        metrics.staged_bytes.set(i64::try_from(bound.bytes()).unwrap_or(i64::MAX));
        Ok(Self {
            own,
            foreign,
            fenced: None,
            up,
            last_barrier: Instant::now(),
            checkpoint_wait,
            no_checkpoint: false,
            bound,
            full: 0,
            metrics,
            label: config.label.clone(),
        })
    }

    /// Why the task refuses inputs, if it does (fenced, or no checkpoint).
    pub fn refusal(&self) -> Option<String> {
        if let Some(f) = &self.fenced {
            return Some(f.clone());
        }
        self.no_checkpoint.then(|| self.no_checkpoint_error())
    }

    fn no_checkpoint_error(&self) -> String {
        format!(
            "{}: no checkpoint reached the sink in {:?}: with delivery = \"exactly-once\" it \
             commits records only when a checkpoint commits, so the topology needs a [state] \
             table (docs/state.md); failing inputs",
            self.label, self.checkpoint_wait
        )
    }

    /// Stages `rec` (with its input's `(topic, partition, offset)`) in the
    /// open batch, and produces it into the open transaction when that may
    /// take it.
    ///
    /// # Errors
    /// The task refuses inputs ([`TxSink::refusal`]), or staging `rec`
    /// would pass `max_staged_bytes` (nothing is staged: the input fails,
    /// and its spout replays it; a commit frees the space).
    pub fn stage(
        &mut self,
        staged: &mut ValueState<Staged>,
        rec: Rec,
        input: Option<(&str, i32, i64)>,
    ) -> squall_plugin_api::Result<()> {
        if let Some(r) = self.refusal() {
            return Err(r.into());
        }
        if let Err(full) = self.bound.take(rec.bytes()) {
            return Err(self.staged_full(full).into());
        }
        self.metrics.staged_bytes.set(i64::try_from(self.bound.bytes()).unwrap_or(i64::MAX));
        let lanes = staged.get_mut();
        if !lanes.contains_key(&self.own.tid) {
            lanes.insert(self.own.tid.clone(), LaneStage::default());
        }
        let Some(lane) = lanes.get_mut(&self.own.tid) else { return Err("no lane".into()) };
        if let Some((topic, partition, offset)) = input {
            note_offset(&mut lane.open_offsets, topic, partition, offset);
        }
        lane.open.push(rec);
        let position = lane.open.len() - 1;
        let backlog = !lane.batches.is_empty();
        let result = self.own.staged(&lane.open[position], lane.next_seq, position, backlog);
        if self.own.fenced() {
            self.fence(self.own.fenced_error("a delivery report"));
        }
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                self.fence(e);
                Err(self.refusal().unwrap_or_default().into())
            }
        }
    }

    /// An input refused by `max_staged_bytes`: counted, a warning at the
    /// 1st, 2nd, 4th, ... refusal; returns the input's error.
    #[cold]
    fn staged_full(&mut self, full: Full) -> String {
        self.metrics.staged_full.inc();
        self.full += 1;
        if full.size > full.max {
            return format!(
                "{}: a record of {} bytes is larger than max_staged_bytes = {}; input failed",
                self.label, full.size, full.max
            );
        }
        if self.full.is_power_of_two() {
            squall_plugin_api::warn!(
                "{}: {} bytes of records wait for their checkpoint's transaction to commit, \
                 max_staged_bytes = {}: inputs fail until a commit frees space, and their \
                 spouts replay them (input #{} refused so far); a shorter checkpoint interval \
                 ([state] interval_ms) stages less, a larger max_staged_bytes holds more",
                self.label,
                full.bytes,
                full.max,
                self.full
            );
        }
        format!(
            "{}: max_staged_bytes = {} is full until the next commit; input failed",
            self.label, full.max
        )
    }

    /// Checkpoint `n`'s barrier: the open batch becomes batch `n`.
    pub fn barrier(&mut self, staged: &mut ValueState<Staged>, n: u64) {
        self.last_barrier = Instant::now();
        self.no_checkpoint = false;
        let tid = &self.own.tid;
        if staged.get().get(tid).is_none_or(|l| l.open.is_empty()) {
            return;
        }
        let lane = staged.get_mut().entry(tid.clone()).or_default();
        let seq = lane.next_seq;
        lane.next_seq += 1;
        let batch = Batch {
            seq,
            checkpoint: n,
            records: std::mem::take(&mut lane.open),
            offsets: std::mem::take(&mut lane.open_offsets),
        };
        self.own.sealed(seq, batch.records.len());
        lane.batches.push_back(batch);
    }

    /// Checkpoint `k` committed: commits every lane's batches of `k` and
    /// before.
    /// The batches committed leave the store, and their bytes the bound.
    pub fn committed(&mut self, staged: &mut ValueState<Staged>, k: u64) {
        if self.fenced.is_some() {
            return;
        }
        self.commit_lanes(staged, k);
        self.bound.recount(staged.get());
        self.metrics.staged_bytes.set(i64::try_from(self.bound.bytes()).unwrap_or(i64::MAX));
    }

    fn commit_lanes(&mut self, staged: &mut ValueState<Staged>, k: u64) {
        let foreign = std::mem::take(&mut self.foreign);
        for mut lane in foreign {
            if self.commit_lane(staged, &mut lane, k) {
                self.foreign.push(lane);
            } else {
                staged.get_mut().remove(&lane.tid);
                squall_plugin_api::info!(
                    "{}: transactional.id {:?} is settled: every staged batch committed",
                    self.label,
                    lane.tid
                );
            }
        }
        let tid = self.own.tid.clone();
        let due = staged
            .get()
            .get(&tid)
            .is_some_and(|l| l.batches.front().is_some_and(|b| b.checkpoint <= k));
        if !due {
            return;
        }
        let stage = staged.get_mut().entry(tid).or_default();
        match self.own.commit(stage, k) {
            Ok(done) => self.done(&done),
            Err(e) => self.failed(e, k),
        }
    }

    /// Commits `lane`'s due batches; true while it still has batches.
    fn commit_lane(&mut self, staged: &mut ValueState<Staged>, lane: &mut Lane, k: u64) -> bool {
        let Some(stage) = staged.get_mut().get_mut(&lane.tid) else { return false };
        match lane.commit(stage, k) {
            Ok(done) => self.done(&done),
            Err(e) => self.failed(e, k),
        }
        staged.get().get(&lane.tid).is_some_and(|l| !l.batches.is_empty())
    }

    fn done(&self, done: &Committed) {
        if done.batches > 0 {
            self.metrics.committed.inc();
            self.metrics.records.add(done.records);
        }
    }

    fn failed(&mut self, e: TxError, k: u64) {
        match e {
            TxError::Failed(why) => {
                self.metrics.failed.inc();
                squall_plugin_api::warn!(
                    "{}: the Kafka transaction of checkpoint {k} failed: {why}; its records stay \
                     staged and are produced again at the next commit",
                    self.label
                );
            }
            fenced @ TxError::Fenced { .. } => self.fence(fenced),
        }
    }

    /// This instance is fenced: one error line, `/readyz` 503, and every
    /// later input fails with the reason.
    fn fence(&mut self, e: TxError) {
        if self.fenced.is_some() {
            return;
        }
        squall_plugin_api::error!("{}: {e}; failing every input", self.label);
        self.up.set(0);
        // Each refused input's error is logged by the host: short.
        self.fenced = Some(format!(
            "{}: fenced as transactional.id {:?}; input failed",
            self.label, self.own.tid
        ));
    }

    /// A tick: fails inputs once records waited `checkpoint_wait` for a
    /// barrier.
    pub fn tick(&mut self, staged: &ValueState<Staged>) {
        let waiting = staged.get().get(&self.own.tid).is_some_and(|l| !l.open.is_empty());
        if waiting && !self.no_checkpoint && self.last_barrier.elapsed() >= self.checkpoint_wait {
            self.no_checkpoint = true;
            squall_plugin_api::error!("{}", self.no_checkpoint_error());
        }
    }

    /// Shutdown: aborts the open transaction (its records are not in a
    /// committed checkpoint; the spouts' positions are before them).
    pub fn close(&mut self, staged: &ValueState<Staged>) {
        let open = staged.get().get(&self.own.tid).map_or(0, |l| l.open.len());
        let sealed: usize = staged.get().values().map(|l| l.batches.len()).sum();
        if open > 0 || sealed > 0 {
            squall_plugin_api::info!(
                "{}: at shutdown {open} record(s) after the last checkpoint are not committed \
                 (the spouts emit them again), and {sealed} staged batch(es) wait for the next \
                 run's first commit",
                self.label
            );
        }
        if self.fenced.is_none() {
            if let Err(e) = self.own.abort() {
                squall_plugin_api::warn!(
                    "{}: aborting the open transaction at close: {e}",
                    self.label
                );
            }
        }
    }
}

/// Drops the batches of lane `tid` that its marker says were committed,
/// and moves its next sequence past the marker. True when batches remain.
fn settle(staged: &mut ValueState<Staged>, tid: &str, marker: u64, label: &str) -> bool {
    let known = staged.get().get(tid);
    let stale = known
        .is_none_or(|l| l.next_seq <= marker || l.batches.front().is_some_and(|b| b.seq <= marker));
    if stale {
        let lane = staged.get_mut().entry(tid.to_owned()).or_default();
        let before = lane.batches.len();
        lane.batches.retain(|b| b.seq > marker);
        lane.next_seq = lane.next_seq.max(marker + 1);
        let dropped = before - lane.batches.len();
        if dropped > 0 {
            squall_plugin_api::info!(
                "{label}: {dropped} staged batch(es) of {tid:?} were committed before the restart \
                 (marker {marker}); not produced again"
            );
        }
    }
    let left = staged.get().get(tid).map_or(0, |l| l.batches.len());
    if left > 0 {
        squall_plugin_api::info!(
            "{label}: {left} staged batch(es) of {tid:?} are not committed yet (marker \
             {marker}); produced again in a new transaction at the first commit"
        );
    }
    left > 0
}

/// A new, empty store.
pub fn store() -> ValueState<Staged> {
    ValueState::new(STORE, merge)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: &str) -> Rec {
        Rec {
            topic: "t".into(),
            key: None,
            partition: None,
            headers: vec![],
            value: Payload::new(v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn a_record_counts_its_topic_key_value_and_headers() {
        let mut r = rec("hello");
        assert_eq!(r.bytes(), 1 + 5, "topic and value");
        r.key = Some(Payload::new(vec![0xff, 0, 1]));
        r.headers = vec![("h1".into(), "abcd".into()), ("h".into(), String::new())];
        r.partition = Some(7);
        assert_eq!(r.bytes(), 1 + 3 + 5 + (2 + 4) + 1);
        let mut lane = LaneStage { open: vec![rec("ab"), rec("c")], ..Default::default() };
        lane.batches.push_back(Batch { seq: 1, checkpoint: 1, records: vec![r], offsets: vec![] });
        let other = LaneStage {
            batches: [Batch { seq: 4, checkpoint: 2, records: vec![rec("xyz")], offsets: vec![] }]
                .into(),
            ..Default::default()
        };
        let staged: Staged = [("a-0".to_owned(), lane), ("a-1".to_owned(), other)].into();
        assert_eq!(staged_bytes(&staged), (1 + 2) + (1 + 1) + 16 + (1 + 3), "every lane's");
    }

    #[test]
    fn staging_past_the_bound_is_refused_and_a_commit_frees_the_space() {
        // What TxSink::stage and TxSink::committed do with the store: take
        // each record's bytes before it is staged, recount after a commit.
        let mut staged = Staged::new();
        let mut bound = StageBound::new(20);
        let stage = |staged: &mut Staged, bound: &mut StageBound, v: &str| {
            let r = rec(v);
            bound.take(r.bytes())?;
            staged.entry("p-0".into()).or_default().open.push(r);
            Ok::<_, Full>(())
        };
        stage(&mut staged, &mut bound, "123456789").unwrap();
        assert_eq!(bound.bytes(), 10);
        // Sealed at a barrier: still staged, still counted.
        let lane = staged.get_mut("p-0").unwrap();
        let records = std::mem::take(&mut lane.open);
        lane.batches.push_back(Batch { seq: 1, checkpoint: 1, records, offsets: vec![] });
        bound.recount(&staged);
        assert_eq!(bound.bytes(), 10);
        stage(&mut staged, &mut bound, "12345678").unwrap();
        assert_eq!(bound.bytes(), 19);
        assert_eq!(
            stage(&mut staged, &mut bound, "12"),
            Err(Full { size: 3, bytes: 19, max: 20 }),
            "one byte past the bound"
        );
        assert_eq!(bound.bytes(), 19, "a refused record is not counted");
        assert_eq!(staged["p-0"].open.len(), 1, "nor staged");
        stage(&mut staged, &mut bound, "").unwrap();
        assert_eq!(bound.bytes(), 20, "up to the bound exactly");
        // Checkpoint 1's transaction committed: its batch leaves the store.
        staged.get_mut("p-0").unwrap().batches.clear();
        bound.recount(&staged);
        assert_eq!(bound.bytes(), 10, "the open records are left");
        stage(&mut staged, &mut bound, "12").unwrap();
        assert_eq!(bound.bytes(), 13);
        let huge = Full { size: 31, bytes: 13, max: 20 };
        assert_eq!(stage(&mut staged, &mut bound, &"x".repeat(30)), Err(huge));
    }

    #[test]
    fn a_store_round_trips_text_and_bytes() {
        let mut lane = LaneStage { next_seq: 3, ..Default::default() };
        let mut r = rec("hello");
        r.key = Some(Payload::new(vec![0xff, 0]));
        lane.batches.push_back(Batch { seq: 2, checkpoint: 7, records: vec![r], offsets: vec![] });
        let staged: Staged = [("a-0".to_owned(), lane)].into_iter().collect();
        let json = serde_json::to_string(&staged).unwrap();
        assert!(json.contains("\"hello\"") && json.contains("[255,0]"), "{json}");
        assert_eq!(serde_json::from_str::<Staged>(&json).unwrap(), staged);
    }

    #[test]
    fn merging_keeps_every_lane_and_each_batch_once() {
        let batch = |seq| Batch { seq, checkpoint: seq, records: vec![rec("x")], offsets: vec![] };
        let mut a: Staged = Staged::new();
        a.insert(
            "p-0".into(),
            LaneStage { next_seq: 3, batches: [batch(2)].into(), ..Default::default() },
        );
        let mut b: Staged = Staged::new();
        b.insert(
            "p-1".into(),
            LaneStage { next_seq: 5, batches: [batch(4)].into(), ..Default::default() },
        );
        b.insert(
            "p-0".into(),
            LaneStage { next_seq: 4, batches: [batch(3), batch(2)].into(), ..Default::default() },
        );
        merge(&mut a, b);
        assert_eq!(a["p-0"].next_seq, 4);
        assert_eq!(a["p-0"].batches.iter().map(|b| b.seq).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(a["p-1"].batches.len(), 1);
    }

    #[test]
    fn input_offsets_keep_one_past_the_highest() {
        let mut o = Vec::new();
        note_offset(&mut o, "in", 1, 5);
        note_offset(&mut o, "in", 1, 3);
        note_offset(&mut o, "in", 0, 9);
        assert_eq!(
            o,
            [
                InputOffset { topic: "in".into(), partition: 1, next: 6 },
                InputOffset { topic: "in".into(), partition: 0, next: 10 }
            ]
        );
    }
}
