//! What a broker spout keeps when its topology has durable state (contract
//! 1.2): which broker messages a committed checkpoint covers, so that a
//! restart neither loses nor counts twice. `nats::JetStreamSpout` keys it by
//! stream sequence, `redis::StreamSpout` by entry id.
//!
//! # The position
//! A message's broker ack waits until the checkpoint holding its effects
//! has committed ([`Pending::defer_broker_acks`](crate::Pending::defer_broker_acks));
//! the key is forgotten only when the broker confirms the ack. So at a
//! barrier, every message emitted before it whose ack the broker has not
//! confirmed is in the position: in flight, acked downstream and waiting for
//! the commit, or released and not yet confirmed. A message the spout
//! replays from its own memory ([`Positions::replaying`]) is not: it is
//! emitted again after a restart too.
//!
//! After a restart (or in the instance a live swap brings in), a delivery
//! whose key is in the position restored is *covered*: its effects are in
//! the stores already, so it is not emitted again; its broker ack waits for
//! the next commit like any other. A redelivery of a message still in
//! flight here is not emitted twice. A covered key that never comes back
//! was acked before the crash; [`Positions::prune`] drops those the broker
//! says are done.
//!
//! # Stale redeliveries
//! A broker that redelivers after an ack timeout (JetStream's `ack_wait`)
//! may send a message again while its ack is on the way. That copy can
//! reach the spout *after* the broker confirmed the ack: it waited in the
//! spout's feed behind other messages. Its key has then left the position,
//! yet its effects are committed, so it must not be emitted. A confirmed
//! key is therefore remembered for the next [`Positions::stale_horizon`]
//! deliveries (the most that can be received before such a copy, given
//! the feed's and the pull's sizes), and a delivery of it is
//! [`Delivery::Released`]: acked again, never emitted.
//!
//! The keys remembered so go into the position too, and a successor (after
//! a restart, a swap, or on another host of a group) remembers them for its
//! first deliveries. A broker restarted just after it confirmed acks can
//! lose them and send those messages again: a successor that knew only the
//! unconfirmed keys would emit them, and count them twice.

use std::collections::VecDeque;
use std::hash::Hash;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use squall_plugin_api::{Result, State};

/// What a delivery is, for the spout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// New here: emit it.
    Emit,
    /// Covered by the restored position: do not emit; ack at the next commit.
    Covered,
    /// A redelivery of a message still in flight here: ignore it.
    InFlight,
    /// A redelivery of a message whose ack is sent and not confirmed: ack
    /// this delivery too (at once: its effects are committed).
    Released,
}

/// The position as it is stored.
#[derive(Debug, Serialize, Deserialize)]
struct Stored<K> {
    /// What the keys are keys of, e.g. `stream "S" consumer "C"`.
    source: String,
    keys: Vec<K>,
    /// Keys whose ack the broker confirmed lately (module doc, "Stale
    /// redeliveries"); absent from positions written before they were kept.
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    confirmed: Vec<K>,
}

/// The durable bookkeeping of one spout task (module doc), keyed by `K`.
#[derive(Debug)]
pub struct Positions<K> {
    /// The format tag of this spout's positions.
    format: &'static str,
    /// What the keys belong to; a position for another source is refused.
    source: String,
    /// Emitted or covered, broker ack not confirmed; `true` once released.
    unconfirmed: FxHashMap<K, bool>,
    /// Restored keys not delivered yet.
    covered: FxHashSet<K>,
    /// Checkpoints whose barrier came, with the deferred-ack epoch each closed.
    epochs: VecDeque<(u64, u64)>,
    /// Keys whose ack the broker confirmed, with the delivery count then
    /// (module doc, "Stale redeliveries"), oldest first.
    recent: VecDeque<(K, u64)>,
    recent_keys: FxHashSet<K>,
    /// Deliveries so far.
    deliveries: u64,
    /// How many deliveries a confirmed key is remembered for.
    horizon: u64,
    /// Deliveries of confirmed keys, recognised and not emitted.
    stale: u64,
}

/// The default [`Positions::stale_horizon`].
pub const DEFAULT_STALE_HORIZON: u64 = 4096;

impl<K: Copy + Eq + Hash + Ord + Serialize + DeserializeOwned> Positions<K> {
    /// Bookkeeping in `format` for `source` (say, `stream "S" consumer
    /// "C"`) that starts from `position` (`State::no_checkpoint()` for none).
    ///
    /// # Errors
    /// A position in another format, or for another source.
    pub fn restore(format: &'static str, source: String, position: &State) -> Result<Self> {
        let mut p = Self {
            format,
            source,
            unconfirmed: FxHashMap::default(),
            covered: FxHashSet::default(),
            epochs: VecDeque::new(),
            recent: VecDeque::new(),
            recent_keys: FxHashSet::default(),
            deliveries: 0,
            horizon: DEFAULT_STALE_HORIZON,
            stale: 0,
        };
        if position.is_no_checkpoint() {
            return Ok(p);
        }
        if position.format != format {
            return Err(format!(
                "a position in format {:?} is not this spout's ({format:?})",
                position.format
            )
            .into());
        }
        for entry in position.entries.iter() {
            let stored: Stored<K> = serde_json::from_slice(&entry.bytes)
                .map_err(|e| format!("a position that does not parse: {e}"))?;
            if stored.source != p.source {
                return Err(format!(
                    "the committed position is for {}, and this spout reads {}; restoring it \
                     would count messages wrongly (`squall state rm` starts the state over)",
                    stored.source, p.source
                )
                .into());
            }
            p.covered.extend(stored.keys);
            for key in stored.confirmed {
                if p.recent_keys.insert(key) {
                    p.recent.push_back((key, 0));
                }
            }
        }
        Ok(p)
    }

    /// Sorts a delivery of `seq` (see [`Delivery`]); an [`Delivery::Emit`]
    /// or [`Delivery::Covered`] one is tracked from now.
    #[inline]
    pub fn deliver(&mut self, seq: K) -> Delivery {
        self.deliveries += 1;
        if let Some(&released) = self.unconfirmed.get(&seq) {
            return if released { Delivery::Released } else { Delivery::InFlight };
        }
        if !self.recent.is_empty() {
            self.forget_old_confirmations();
            if self.recent_keys.contains(&seq) {
                // A stale redelivery: its effects are committed and its ack
                // confirmed. Ack it again; never emit it.
                self.stale += 1;
                return Delivery::Released;
            }
        }
        self.unconfirmed.insert(seq, false);
        if !self.covered.is_empty() && self.covered.remove(&seq) {
            Delivery::Covered
        } else {
            Delivery::Emit
        }
    }

    /// `seq` leaves without an ack (naked or dead-lettered): the broker
    /// sends it again, or it is done.
    #[inline]
    pub fn forget(&mut self, seq: K) {
        self.unconfirmed.remove(&seq);
    }

    /// `seq` failed and is replayed from the spout's memory: a checkpoint
    /// before its replay must not cover it.
    #[inline]
    pub fn replaying(&mut self, seq: K) {
        self.unconfirmed.remove(&seq);
    }

    /// `seq` is emitted again from memory (after [`Positions::replaying`]).
    #[inline]
    pub fn replayed(&mut self, seq: K) {
        self.unconfirmed.insert(seq, false);
    }

    /// `seq`'s ack is sent.
    #[inline]
    pub fn released(&mut self, seq: K) {
        if let Some(r) = self.unconfirmed.get_mut(&seq) {
            *r = true;
        }
    }

    /// The broker confirmed the acks of `seqs`.
    pub fn confirmed(&mut self, seqs: impl IntoIterator<Item = K>) {
        for seq in seqs {
            if self.unconfirmed.remove(&seq).is_some() && self.recent_keys.insert(seq) {
                self.recent.push_back((seq, self.deliveries));
            }
        }
        self.forget_old_confirmations();
    }

    /// Remembers a confirmed key for `deliveries` more deliveries (module
    /// doc, "Stale redeliveries"); at least the deliveries the spout can
    /// have received but not yet taken (its feed, plus a pull in progress).
    pub fn stale_horizon(mut self, deliveries: u64) -> Self {
        self.horizon = deliveries;
        self
    }

    /// Deliveries of keys whose ack was already confirmed, recognised and
    /// not emitted, so far.
    pub fn stale_redeliveries(&self) -> u64 {
        self.stale
    }

    fn forget_old_confirmations(&mut self) {
        while let Some(&(seq, at)) = self.recent.front() {
            if self.deliveries.saturating_sub(at) <= self.horizon {
                break;
            }
            self.recent.pop_front();
            self.recent_keys.remove(&seq);
        }
    }

    /// Drops the covered keys the broker says are done (`done(key)`): they
    /// were acked and never come back. Returns how many.
    pub fn prune(&mut self, done: impl Fn(K) -> bool) -> usize {
        let before = self.covered.len();
        self.covered.retain(|&s| !done(s));
        before - self.covered.len()
    }

    /// Checkpoint `checkpoint`'s barrier closed deferred-ack epoch `epoch`.
    pub fn barrier(&mut self, checkpoint: u64, epoch: u64) {
        self.epochs.push_back((checkpoint, epoch));
    }

    /// Checkpoint `checkpoint` committed: the last deferred-ack epoch it
    /// releases (`None`: no barrier of it or before it is waiting).
    pub fn committed(&mut self, checkpoint: u64) -> Option<u64> {
        let mut last = None;
        while let Some(&(n, epoch)) = self.epochs.front() {
            if n > checkpoint {
                break;
            }
            last = Some(epoch);
            self.epochs.pop_front();
        }
        last
    }

    /// The position now (module doc).
    pub fn position(&self) -> State {
        let mut keys: Vec<K> =
            self.unconfirmed.keys().chain(self.covered.iter()).copied().collect();
        keys.sort_unstable();
        let confirmed = self.recent.iter().map(|&(key, _)| key).collect();
        let stored = Stored { source: self.source.clone(), keys, confirmed };
        let mut state = State::new(self.format);
        state.push(&[], serde_json::to_vec(&stored).expect("a position serializes"));
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMAT: &str = "test-position/1";

    fn seqs(state: &State) -> Vec<u64> {
        let stored: Stored<u64> = serde_json::from_slice(&state.entries[0].bytes).unwrap();
        stored.keys
    }

    fn fresh(source: &str) -> Positions<u64> {
        Positions::restore(FORMAT, source.into(), &State::no_checkpoint()).unwrap()
    }

    #[test]
    fn the_position_holds_what_the_server_has_not_confirmed() {
        let mut d = fresh("S");
        for seq in 1..=4 {
            assert_eq!(d.deliver(seq), Delivery::Emit);
        }
        d.forget(2); // naked: the server sends it again
        d.released(3);
        d.confirmed([4]);
        assert_eq!(seqs(&d.position()), [1, 3]);
        d.replaying(1);
        assert_eq!(seqs(&d.position()), [3], "a replay from memory is not covered");
        d.replayed(1);
        assert_eq!(d.deliver(1), Delivery::InFlight);
        assert_eq!(d.deliver(3), Delivery::Released);
        assert_eq!(d.deliver(2), Delivery::Emit);
    }

    #[test]
    fn a_redelivery_that_arrives_after_the_ack_was_confirmed_is_not_emitted() {
        let mut d = fresh("S").stale_horizon(3);
        assert_eq!(d.deliver(1), Delivery::Emit);
        d.released(1);
        d.confirmed([1]);
        // The broker sent 1 again (its ack timed out) before the ack landed;
        // the copy waited in the feed behind other messages.
        assert_eq!(d.deliver(2), Delivery::Emit);
        assert_eq!(d.deliver(1), Delivery::Released, "a stale copy is acked, not emitted");
        assert_eq!(d.stale_redeliveries(), 1);
        assert_eq!(seqs(&d.position()), [2], "a confirmed key is not in the position");
        // Past the horizon the key is forgotten.
        for seq in 3..=6 {
            assert_eq!(d.deliver(seq), Delivery::Emit);
        }
        assert!(d.recent_keys.is_empty() && d.recent.is_empty());
    }

    #[test]
    fn a_restored_position_covers_its_sequences_once() {
        let mut d = fresh("S");
        for seq in [5, 7, 9] {
            d.deliver(seq);
        }
        let position = d.position();
        let mut after = Positions::<u64>::restore(FORMAT, "S".into(), &position).unwrap();
        assert_eq!(after.prune(|s| s <= 5), 1);
        assert_eq!(after.deliver(7), Delivery::Covered);
        assert_eq!(after.deliver(7), Delivery::InFlight, "covered, waiting for its ack");
        assert_eq!(after.deliver(8), Delivery::Emit);
        // Until confirmed, a covered sequence stays in the position.
        assert_eq!(seqs(&after.position()), [7, 8, 9]);
        after.released(7);
        after.confirmed([7]);
        assert_eq!(seqs(&after.position()), [8, 9]);
    }

    /// A broker restarted just after it confirmed acks may have lost them:
    /// JetStream then redelivers messages whose effects are committed (seen
    /// in `group::a_broker_restart…`: 256 messages counted twice, delivered
    /// a third time to the partition's next owner). The confirmed keys go
    /// into the position, so a successor acks such a copy, never emits it.
    #[test]
    fn a_successor_acks_a_redelivery_of_what_its_predecessor_saw_confirmed() {
        let mut d = fresh("S");
        for seq in 1..=4 {
            assert_eq!(d.deliver(seq), Delivery::Emit);
        }
        d.released(1);
        d.released(2);
        d.confirmed([1, 2]);
        let position = d.position();
        assert_eq!(seqs(&position), [3, 4], "the covered keys are the unconfirmed ones");
        let mut after = Positions::<u64>::restore(FORMAT, "S".into(), &position).unwrap();
        assert_eq!(after.deliver(1), Delivery::Released, "confirmed before the checkpoint");
        assert_eq!(after.deliver(3), Delivery::Covered);
        assert_eq!(after.deliver(5), Delivery::Emit);
        assert_eq!(after.stale_redeliveries(), 1);
        // A position written before confirmed keys were kept still restores.
        let old = br#"{"source":"S","keys":[3]}"#;
        let mut state = State::new(FORMAT);
        state.push(&[], old.to_vec());
        let mut older = Positions::<u64>::restore(FORMAT, "S".into(), &state).unwrap();
        assert_eq!(older.deliver(3), Delivery::Covered);
    }

    #[test]
    fn a_position_for_another_source_is_refused() {
        let position = fresh("stream S").position();
        let e = Positions::<u64>::restore(FORMAT, "stream T".into(), &position);
        let e = e.unwrap_err().to_string();
        assert!(e.contains("stream S") && e.contains("squall state rm"), "{e}");
        let e = Positions::<u64>::restore(FORMAT, "S".into(), &State::new("x/1"));
        assert!(e.unwrap_err().to_string().contains("x/1"));
    }

    #[test]
    fn a_commit_releases_every_epoch_up_to_its_barrier() {
        let mut d = fresh("S");
        d.barrier(3, 0);
        d.barrier(4, 1);
        d.barrier(6, 2);
        assert_eq!(d.committed(2), None);
        assert_eq!(d.committed(5), Some(1), "4 aborted or not: 5's commit covers it");
        assert_eq!(d.committed(6), Some(2));
        assert_eq!(d.committed(7), None);
    }
}
