//! One host in the Kafka consumer group: a consumer subscribed to the
//! group's topic that reads no record (each partition it is assigned is
//! paused at once), whose rebalances tell the host which partitions to run.
//!
//! # Rebalances
//! librdkafka runs the rebalance callback inside `poll`, on the host's
//! `__group` thread. An assignment is taken at once (and paused); its
//! epoch is fixed after the callback ([`Member::claim`]). A revocation is
//! *not* given back in the callback: the partitions are handed to the host
//! as revoked, and `incremental_unassign` is called only once the host
//! released every one of them ([`Ownership::give_back`]). Until then
//! librdkafka waits for that call (its `WAIT_UNASSIGN_CALL` state, in which
//! it keeps sending heartbeats), so the group's next round, which assigns
//! those partitions to another member, begins after this host stopped them
//! and committed their last checkpoint. A lost assignment (this member was
//! fenced out of the group) is given back at once and reported lost.
//!
//! # Epochs
//! A partition's epoch is the group generation it was assigned in, or one
//! above the epoch its last owner wrote, whichever is higher: at each
//! assignment the member reads the group's committed offset metadata for
//! the partition (`squall-epoch=N`), and commits its own epoch there. The
//! commit is the group's, so the broker refuses it from a member of an old
//! generation. A group the broker forgot (an empty group without offsets
//! restarts at generation 1) still gives each new owner a higher epoch than
//! the last, as long as its offsets are kept.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use squall_plugin_api::abi::PartitionEvent;
use squall_plugin_api::Result;

use super::ownership::{Own, Ownership};
use crate::client::Context0;

/// The prefix of the epoch in a partition's committed offset metadata.
pub const EPOCH_TAG: &str = "squall-epoch=";
/// How long one request of the member's own (committed offsets, an epoch's
/// commit, the group's description) may wait.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the member asks the broker for the group's members.
const VIEW_EVERY: Duration = Duration::from_secs(2);

/// What a rebalance callback did, for the member to act on after `poll`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// Assigned (and paused) in `generation` (`None`: it could not be read).
    Assigned { parts: Vec<u32>, generation: Option<i32> },
    /// Revoked; given back at once when `lost`.
    Revoked { parts: Vec<u32>, lost: bool },
}

/// The consumer's context: logging and connection errors as the other
/// components do, and the rebalance callback.
pub struct GroupContext {
    base: Context0,
    topic: String,
    changes: Mutex<Vec<Change>>,
    /// Set before the consumer closes: a revocation is given back at once.
    closing: AtomicBool,
    /// Requests sent to the brokers, from librdkafka's statistics.
    requests: Arc<AtomicU64>,
}

impl std::fmt::Debug for GroupContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupContext").field("topic", &self.topic).finish_non_exhaustive()
    }
}

impl ClientContext for GroupContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        self.base.log(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.base.error(error, reason);
    }

    fn stats(&self, statistics: rdkafka::Statistics) {
        let sent: u64 = statistics.brokers.values().map(|b| b.tx).sum();
        self.requests.store(sent, Ordering::Relaxed);
    }
}

impl GroupContext {
    fn push(&self, change: Change) {
        self.changes.lock().unwrap_or_else(|p| p.into_inner()).push(change);
    }

    fn parts(&self, tpl: &TopicPartitionList) -> Vec<u32> {
        tpl.elements()
            .iter()
            .filter(|e| e.topic() == self.topic)
            .filter_map(|e| u32::try_from(e.partition()).ok())
            .collect()
    }
}

impl ConsumerContext for GroupContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(consumer.rebalance_protocol(), RebalanceProtocol::Cooperative);
        let label = self.base.label();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let generation = generation(consumer);
                let taken = if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                };
                if let Err(e) = taken {
                    squall_plugin_api::error!("{label}: cannot take assigned partitions: {e}");
                }
                // The member reads no record: the partitions' topologies do.
                if let Err(e) = consumer.pause(tpl) {
                    squall_plugin_api::warn!("{label}: cannot pause assigned partitions: {e}");
                }
                self.push(Change::Assigned { parts: self.parts(tpl), generation });
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let lost = consumer.assignment_lost();
                if lost || self.closing.load(Ordering::Acquire) {
                    give_back(consumer, tpl, &self.base);
                }
                self.push(Change::Revoked { parts: self.parts(tpl), lost });
            }
            other => {
                squall_plugin_api::error!(
                    "{label}: rebalance error {other:?}: the whole assignment counts as lost"
                );
                let all = consumer.assignment().map(|a| self.parts(&a)).unwrap_or_default();
                let _ = consumer.unassign();
                self.push(Change::Revoked { parts: all, lost: true });
            }
        }
    }
}

/// Gives `tpl` back to the group: the revocation completes.
fn give_back(consumer: &BaseConsumer<GroupContext>, tpl: &TopicPartitionList, base: &Context0) {
    let done = match consumer.rebalance_protocol() {
        RebalanceProtocol::Cooperative => consumer.incremental_unassign(tpl),
        _ => consumer.unassign(),
    };
    if let Err(e) = done {
        squall_plugin_api::error!("{}: cannot give revoked partitions back: {e}", base.label());
    }
}

/// The consumer's current group generation (`None`: not in a group now).
fn generation(consumer: &BaseConsumer<GroupContext>) -> Option<i32> {
    use rdkafka::bindings as rd;
    let client = consumer.client().native_ptr();
    // SAFETY: `client` is the live handle `consumer` owns, borrowed for
    // this call. `rd_kafka_consumer_group_metadata` returns null or a new
    // object that the caller owns; it is read, then destroyed once, here.
    // librdkafka serves the request on its own main thread, so calling it
    // from the rebalance callback (this thread, inside `poll`) cannot
    // deadlock.
    unsafe {
        let cgmd = rd::rd_kafka_consumer_group_metadata(client);
        if cgmd.is_null() {
            return None;
        }
        let generation = rd::rd_kafka_consumer_group_metadata_generation_id(cgmd);
        rd::rd_kafka_consumer_group_metadata_destroy(cgmd);
        Some(generation)
    }
}

/// The epoch in a partition's committed offset metadata.
pub fn parse_epoch(metadata: &str) -> Option<u64> {
    metadata.strip_prefix(EPOCH_TAG)?.parse().ok()
}

/// A new owner's epoch: one above the generation (a group's first
/// generation may be 0, and a state backend's first fencing commit must be
/// above 0), or one above the last owner's epoch, whichever is higher.
pub fn next_epoch(generation: Option<i32>, last: Option<u64>) -> u64 {
    let generation = generation.and_then(|g| u64::try_from(g).ok()).unwrap_or(0);
    generation.saturating_add(1).max(last.map_or(0, |e| e.saturating_add(1)))
}

/// What a joined member counts (its status document's `counters`).
#[derive(Debug, Default, serde::Serialize)]
pub struct Counters {
    /// Rebalance callbacks served.
    pub rebalances: u64,
    /// Partitions assigned (again, after a wait, too).
    pub assigned: u64,
    /// Partitions revoked.
    pub revoked: u64,
    /// Partitions lost without a revoke.
    pub lost: u64,
    /// Partitions released by the host.
    pub released: u64,
    /// Revocations given back to the group.
    pub given_back: u64,
    /// Epoch reads or commits that failed (the epoch is then the
    /// generation, or above the last epoch known here).
    pub epoch_errors: u64,
    /// Requests sent to the brokers (librdkafka's statistics, every second).
    pub broker_requests: u64,
}

/// The member's view of the group (its `status` while joined).
#[derive(Debug, Default)]
struct View {
    members: Vec<String>,
    at: Option<Instant>,
}

/// A joined member.
pub struct Member {
    consumer: BaseConsumer<GroupContext>,
    group: String,
    group_id: String,
    topic: String,
    host: String,
    own: Ownership,
    counters: Counters,
    generation: Option<i32>,
    /// The highest epoch this member knows per partition.
    epochs: std::collections::BTreeMap<u32, u64>,
    view: View,
    requests: Arc<AtomicU64>,
    warned: u64,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("group_id", &self.group_id)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// Who joins, and how.
#[derive(Debug)]
pub struct Joining {
    /// The squall group's name.
    pub group: String,
    /// The Kafka consumer group.
    pub group_id: String,
    /// The input topic.
    pub topic: String,
    /// This host.
    pub host: String,
    /// A partition given up by the host is assigned again after this.
    pub retry_after: Duration,
}

impl Member {
    /// Subscribes a consumer built from `config` (which sets `group.id`)
    /// to the topic.
    ///
    /// # Errors
    /// The consumer cannot be built or subscribe.
    pub fn join(config: &rdkafka::ClientConfig, joining: Joining) -> Result<Self> {
        let requests = Arc::new(AtomicU64::new(0));
        let context = GroupContext {
            base: Context0::new(&format!("group {}", joining.group), None),
            topic: joining.topic.clone(),
            changes: Mutex::new(Vec::new()),
            closing: AtomicBool::new(false),
            requests: requests.clone(),
        };
        let consumer: BaseConsumer<GroupContext> = config
            .create_with_context(context)
            .map_err(|e| format!("cannot create the group's consumer: {e}"))?;
        consumer
            .subscribe(&[&joining.topic])
            .map_err(|e| format!("cannot subscribe to {}: {e}", joining.topic))?;
        squall_plugin_api::info!(
            "group {}: host {} joins Kafka group {} on topic {}",
            joining.group,
            joining.host,
            joining.group_id,
            joining.topic
        );
        Ok(Self {
            consumer,
            group: joining.group,
            group_id: joining.group_id,
            topic: joining.topic,
            host: joining.host,
            own: Ownership::new(joining.retry_after),
            counters: Counters::default(),
            generation: None,
            epochs: std::collections::BTreeMap::new(),
            view: View::default(),
            requests,
            warned: 0,
        })
    }

    /// Serves the group for at most `wait` and returns what changed.
    pub fn poll(&mut self, wait: Duration) -> Vec<PartitionEvent> {
        if let Some(Err(e)) = self.consumer.poll(wait) {
            self.warn(&format!("the group's consumer: {e}"));
        }
        let context = self.consumer.context().clone();
        let changes =
            std::mem::take(&mut *context.changes.lock().unwrap_or_else(|p| p.into_inner()));
        let mut events = Vec::new();
        for change in changes {
            self.counters.rebalances += 1;
            events.extend(self.apply(change));
        }
        let due = self.own.due(Instant::now());
        if !due.is_empty() {
            let parts: Vec<u32> = due.iter().map(|(k, _)| *k).collect();
            events.extend(self.claim(&parts, self.generation));
        }
        self.finish_revocation();
        events
    }

    /// What one rebalance callback did, as events for the host.
    fn apply(&mut self, change: Change) -> Vec<PartitionEvent> {
        match change {
            Change::Assigned { parts, generation } => {
                if generation.is_some() {
                    self.generation = generation;
                }
                self.claim(&parts, generation)
            }
            Change::Revoked { parts, lost: true } => {
                let lost = self.own.lost(&parts);
                self.counters.lost += lost.len() as u64;
                for e in &lost {
                    squall_plugin_api::warn!(
                        "partition {}: the assignment of epoch {} was lost (this member fell \
                         out of the group); stopping it without committing",
                        e.partition,
                        e.epoch
                    );
                }
                lost
            }
            Change::Revoked { parts, lost: false } => {
                let revoked = self.own.revoked(&parts);
                self.counters.revoked += revoked.len() as u64;
                for e in &revoked {
                    squall_plugin_api::info!(
                        "partition {}: revoked (epoch {}); it goes back to the group once \
                         stopped and released",
                        e.partition,
                        e.epoch
                    );
                }
                revoked
            }
        }
    }

    /// Fixes the epoch of each of `parts` (module doc), commits it, and
    /// returns their assignments.
    fn claim(&mut self, parts: &[u32], generation: Option<i32>) -> Vec<PartitionEvent> {
        if parts.is_empty() {
            return Vec::new();
        }
        let written = match self.read_epochs(parts) {
            Ok(w) => w,
            Err(e) => {
                self.counters.epoch_errors += 1;
                self.warn(&format!("cannot read the partitions' last epochs: {e}"));
                Vec::new()
            }
        };
        let mut tpl = TopicPartitionList::with_capacity(parts.len());
        let mut events = Vec::new();
        for &k in parts {
            let (offset, last) = written
                .iter()
                .find(|(p, _, _)| *p == k)
                .map_or((0, None), |(_, offset, epoch)| (*offset, *epoch));
            let known = self.epochs.get(&k).copied();
            let epoch = next_epoch(generation, last.max(known));
            self.epochs.insert(k, epoch);
            let partition = i32::try_from(k).unwrap_or(i32::MAX);
            let _ = tpl.add_partition_offset(&self.topic, partition, Offset::Offset(offset));
            if let Some(mut e) = tpl.find_partition(&self.topic, partition) {
                e.set_metadata(format!("{EPOCH_TAG}{epoch}"));
            }
            self.counters.assigned += 1;
            squall_plugin_api::info!(
                "partition {k}: assigned in generation {} (epoch {epoch}; the last owner's was {})",
                generation.map_or_else(|| "?".to_owned(), |g| g.to_string()),
                last.map_or_else(|| "none".to_owned(), |e| e.to_string())
            );
            events.push(self.own.assigned(k, epoch));
        }
        if let Err(e) = self.consumer.commit(&tpl, CommitMode::Sync) {
            self.counters.epoch_errors += 1;
            self.warn(&format!("cannot commit the partitions' epochs: {e}"));
        }
        events
    }

    /// The group's committed offset and epoch of each of `parts`.
    fn read_epochs(
        &self,
        parts: &[u32],
    ) -> std::result::Result<Vec<(u32, i64, Option<u64>)>, KafkaError> {
        let mut tpl = TopicPartitionList::with_capacity(parts.len());
        for &k in parts {
            tpl.add_partition(&self.topic, i32::try_from(k).unwrap_or(i32::MAX));
        }
        let committed = self.consumer.committed_offsets(tpl, REQUEST_TIMEOUT)?;
        Ok(committed
            .elements()
            .iter()
            .filter_map(|e| {
                let k = u32::try_from(e.partition()).ok()?;
                let offset = e.offset().to_raw().filter(|o| *o >= 0).unwrap_or(0);
                Some((k, offset, parse_epoch(e.metadata())))
            })
            .collect())
    }

    /// Gives the revocation under way back to the group once every
    /// partition of it is released.
    fn finish_revocation(&mut self) {
        let Some(parts) = self.own.give_back() else { return };
        let mut tpl = TopicPartitionList::with_capacity(parts.len());
        for &k in &parts {
            tpl.add_partition(&self.topic, i32::try_from(k).unwrap_or(i32::MAX));
        }
        give_back(&self.consumer, &tpl, &self.consumer.context().base);
        self.counters.given_back += 1;
        squall_plugin_api::info!(
            "group {}: partitions {parts:?} given back to the group (every one released)",
            self.group
        );
    }

    /// The host stopped `k` (held under `epoch`).
    pub fn released(&mut self, k: u32, epoch: u64) {
        match self.own.released(k, epoch, Instant::now()) {
            Some(Own::Revoking { .. }) => {
                self.counters.released += 1;
                squall_plugin_api::info!("partition {k}: released (epoch {epoch})");
            }
            Some(Own::Held { .. }) if self.own.is_leaving() => {
                self.counters.released += 1;
                squall_plugin_api::info!(
                    "partition {k}: released (epoch {epoch}); this host leaves"
                );
            }
            Some(Own::Held { .. }) => {
                self.counters.released += 1;
                squall_plugin_api::info!(
                    "partition {k}: released (epoch {epoch}) while still assigned to this member: \
                     it starts again under a new epoch"
                );
            }
            _ => {}
        }
        self.finish_revocation();
    }

    /// This host leaves: nothing is assigned again; the consumer leaves the
    /// group when it is dropped, after the host released every partition.
    pub fn leave(&mut self) {
        self.own.leave();
    }

    /// This member's view: members, share, partitions and counters.
    pub fn status(&mut self) -> serde_json::Value {
        if self.view.at.is_none_or(|at| at.elapsed() >= VIEW_EVERY) {
            self.view.at = Some(Instant::now());
            self.view.members = self.members();
        }
        self.counters.broker_requests = self.requests.load(Ordering::Relaxed);
        let partitions: Vec<serde_json::Value> = self
            .own
            .parts()
            .iter()
            .map(|(k, own)| {
                let (state, epoch) = match *own {
                    Own::Held { epoch } => ("held", epoch),
                    Own::Revoking { epoch } => ("revoking", epoch),
                    Own::Waiting { epoch, .. } => ("waiting", epoch),
                };
                serde_json::json!({ "partition": k, "epoch": epoch, "state": state })
            })
            .collect();
        serde_json::json!({
            "group": self.group,
            "group_id": self.group_id,
            "topic": self.topic,
            "host": self.host,
            "generation": self.generation,
            "members": self.view.members,
            "share": self.own.share(),
            "partitions": partitions,
            "counters": self.counters,
        })
    }

    /// The group's members' client ids (each host's id), from the broker's
    /// description of the group; this host alone when the broker names
    /// none (Tansu lists the members with empty client ids).
    fn members(&self) -> Vec<String> {
        let mut members = BTreeSet::new();
        if let Ok(list) =
            self.consumer.fetch_group_list(Some(&self.group_id), Duration::from_secs(1))
        {
            for g in list.groups().iter().filter(|g| g.name() == self.group_id) {
                let named = g.members().iter().map(|m| m.client_id()).filter(|c| !c.is_empty());
                members.extend(named.map(str::to_owned));
            }
        }
        if members.is_empty() {
            members.insert(self.host.clone());
        }
        members.into_iter().collect()
    }

    fn warn(&mut self, message: &str) {
        self.warned += 1;
        if self.warned <= 5 || self.warned.is_multiple_of(100) {
            squall_plugin_api::warn!("group {}: {message} (warning #{})", self.group, self.warned);
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Whatever is still assigned goes back at once while the consumer
        // closes (it leaves the group then).
        self.consumer.context().closing.store(true, Ordering::Release);
        squall_plugin_api::info!(
            "group {}: host {} leaves Kafka group {}",
            self.group,
            self.host,
            self.group_id
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_is_above_the_last_owners_and_at_least_the_generation() {
        // Tansu's first generation is 0: its owners hold epoch 1, and the
        // next generation's (1) epoch 2.
        assert_eq!(next_epoch(Some(0), None), 1);
        assert_eq!(next_epoch(Some(1), None), 2);
        assert_eq!(next_epoch(Some(7), Some(3)), 8);
        assert_eq!(next_epoch(Some(7), Some(8)), 9, "the group forgot: above the last owner");
        assert_eq!(next_epoch(Some(1), Some(40)), 41);
        assert_eq!(next_epoch(None, None), 1);
        assert_eq!(next_epoch(Some(-1), Some(2)), 3);
        assert_eq!(parse_epoch("squall-epoch=12"), Some(12));
        assert_eq!(parse_epoch(""), None);
        assert_eq!(parse_epoch("squall-epoch=x"), None);
    }
}
