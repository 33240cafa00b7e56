//! The pending map: every message emitted and not yet resolved, with its
//! cap, its retries and the dead-letter decision.
//!
//! ```text
//!  insert ──► in flight ──ack──► Acked::Now(item)  ──► ack the broker now
//!                │                Acked::Deferred   ──► held until commit(epoch)
//!                └──fail──► Failed::Replay         (kept; next_replay emits it after a backoff)
//!                           Failed::Redeliver      (the broker sends it again: nak with the delay)
//!                           Failed::Dead(reason)   (its last allowed delivery failed)
//! ```
//!
//! **Acked downstream is not acked to the broker.** By default an ack
//! hands the item back at once ([`Acked::Now`]) and the connector acks the
//! broker (JetStream ack, XACK, checkpoint advance). With
//! [`Pending::defer_broker_acks`] the item is kept instead, under the
//! current epoch; [`Pending::barrier`] closes an epoch and
//! [`Pending::commit`] releases the items of every epoch up to it, for the
//! connector to ack then. That is the shape a checkpointed topology needs:
//! the broker ack waits until the checkpoint that holds the tuple's effects
//! has committed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::backoff::Backoff;
use crate::ids::MessageIds;

/// When to give up on a message, and how long to wait between tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Deliveries after which a message that fails again is dead (at least 1).
    pub max_deliver: u32,
    /// The pause before the n-th retry.
    pub backoff: Backoff,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_deliver: crate::DEFAULT_MAX_DELIVER, backoff: Backoff::NONE }
    }
}

/// Who sends a failed message again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivery {
    /// The spout, from its memory ([`Pending::next_replay`]): Redis entries,
    /// file lines.
    Local,
    /// The broker, after a nak (JetStream): the item leaves the map.
    Broker,
}

/// Why a message is dead, attached to the dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadReason {
    /// Deliveries so far.
    pub deliveries: u32,
    /// The policy's limit.
    pub max_deliver: u32,
    /// What happened.
    pub cause: DeadCause,
}

/// What made a message dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadCause {
    /// Its tree failed (or timed out) on its last allowed delivery.
    Failed,
    /// It arrived with more deliveries than allowed (the broker counted
    /// deliveries this spout never saw fail: a crashed consumer's).
    DeliveredTooOften,
    /// The connector found it unusable (say, it cannot be decoded).
    Rejected(String),
}

impl fmt::Display for DeadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            DeadCause::Failed => write!(
                f,
                "failed on delivery {} of max_deliver = {}",
                self.deliveries, self.max_deliver
            ),
            DeadCause::DeliveredTooOften => write!(
                f,
                "delivered {} times, more than max_deliver = {}",
                self.deliveries, self.max_deliver
            ),
            DeadCause::Rejected(why) => {
                write!(f, "rejected on delivery {}: {why}", self.deliveries)
            }
        }
    }
}

/// What [`Pending::ack`] hands back.
#[derive(Debug, PartialEq, Eq)]
pub enum Acked<T> {
    /// Ack it to the broker now.
    Now(T),
    /// Kept until [`Pending::commit`] releases it.
    Deferred,
    /// Not an id of this map (acked already, or a predecessor's).
    Unknown,
}

/// What [`Pending::fail`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Failed<T> {
    /// Kept; [`Pending::next_replay`] returns it once `delay` has passed.
    Replay {
        /// The delivery number of the replay.
        delivery: u32,
        /// The backoff before it.
        delay: Duration,
    },
    /// Gone from the map: have the broker deliver it again after `delay`.
    Redeliver {
        /// The message.
        item: T,
        /// The backoff to ask the broker for.
        delay: Duration,
    },
    /// Gone from the map: dead-letter it, with the reason.
    Dead {
        /// The message.
        item: T,
        /// Why.
        reason: DeadReason,
    },
    /// Not an id of this map.
    Unknown,
}

#[derive(Debug)]
struct Slot<T> {
    item: T,
    deliveries: u32,
}

/// The messages a spout task emitted and has not resolved (module doc).
#[derive(Debug)]
pub struct Pending<T> {
    slots: FxHashMap<u64, Slot<T>>,
    replay: BinaryHeap<Reverse<(Instant, u64)>>,
    cap: usize,
    policy: RetryPolicy,
    redelivery: Redelivery,
    defer: bool,
    epoch: u64,
    deferred: VecDeque<(u64, u64, T)>,
    ids: MessageIds,
}

impl<T> Pending<T> {
    /// An empty map holding at most `cap` messages in flight (at least 1).
    pub fn new(cap: usize, policy: RetryPolicy, redelivery: Redelivery) -> Self {
        assert!(policy.max_deliver >= 1, "max_deliver must be at least 1");
        Self {
            slots: FxHashMap::default(),
            replay: BinaryHeap::new(),
            cap: cap.max(1),
            policy,
            redelivery,
            defer: false,
            epoch: 0,
            deferred: VecDeque::new(),
            ids: MessageIds,
        }
    }

    /// The policy.
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// Keep acked items until [`Pending::commit`] (see the module doc).
    pub fn defer_broker_acks(&mut self, defer: bool) {
        self.defer = defer;
    }

    /// True while fewer than the cap are in flight: a new message may be taken.
    #[inline]
    pub fn has_room(&self) -> bool {
        self.slots.len() < self.cap
    }

    /// How many more may be taken now.
    #[inline]
    pub fn room(&self) -> usize {
        self.cap.saturating_sub(self.slots.len())
    }

    /// Messages in flight (replays waiting included).
    #[inline]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Checks a message as it arrives with the broker's delivery count:
    /// one delivered more often than allowed is dead on arrival.
    ///
    /// # Errors
    /// The reason, when it is dead.
    pub fn admit(&self, deliveries: u32) -> Result<(), DeadReason> {
        if deliveries > self.policy.max_deliver {
            return Err(DeadReason {
                deliveries,
                max_deliver: self.policy.max_deliver,
                cause: DeadCause::DeliveredTooOften,
            });
        }
        Ok(())
    }

    /// A message the connector cannot use: dead at once, with `why`.
    pub fn reject(&self, deliveries: u32, why: impl Into<String>) -> DeadReason {
        DeadReason {
            deliveries,
            max_deliver: self.policy.max_deliver,
            cause: DeadCause::Rejected(why.into()),
        }
    }

    /// Records a message about to be emitted, on its `delivery` (1 for the
    /// first), and returns its message id. The cap is the caller's to
    /// respect ([`Pending::has_room`]): a message the broker pushed beyond
    /// it is still kept.
    #[inline]
    pub fn insert(&mut self, item: T, delivery: u32) -> u64 {
        let id = self.ids.next();
        self.slots.insert(id, Slot { item, deliveries: delivery.max(1) });
        id
    }

    /// The message of `id`, if it is in flight.
    #[inline]
    pub fn get(&self, id: u64) -> Option<&T> {
        self.slots.get(&id).map(|s| &s.item)
    }

    /// The delivery number of `id`, if it is in flight.
    pub fn deliveries(&self, id: u64) -> Option<u32> {
        self.slots.get(&id).map(|s| s.deliveries)
    }

    /// The tree of `id` completed.
    #[inline]
    pub fn ack(&mut self, id: u64) -> Acked<T> {
        let Some(slot) = self.slots.remove(&id) else { return Acked::Unknown };
        if self.defer {
            self.deferred.push_back((self.epoch, id, slot.item));
            Acked::Deferred
        } else {
            Acked::Now(slot.item)
        }
    }

    /// The tree of `id` failed or timed out at `now`: replay, redeliver or
    /// dead-letter it (the module doc).
    pub fn fail(&mut self, id: u64, now: Instant) -> Failed<T> {
        let Some(slot) = self.slots.get_mut(&id) else { return Failed::Unknown };
        if slot.deliveries >= self.policy.max_deliver {
            let slot = self.slots.remove(&id).expect("just found");
            return Failed::Dead {
                item: slot.item,
                reason: DeadReason {
                    deliveries: slot.deliveries,
                    max_deliver: self.policy.max_deliver,
                    cause: DeadCause::Failed,
                },
            };
        }
        let delay = self.policy.backoff.delay(slot.deliveries);
        match self.redelivery {
            Redelivery::Local => {
                slot.deliveries += 1;
                let delivery = slot.deliveries;
                self.replay.push(Reverse((now + delay, id)));
                Failed::Replay { delivery, delay }
            }
            Redelivery::Broker => {
                let slot = self.slots.remove(&id).expect("just found");
                Failed::Redeliver { item: slot.item, delay }
            }
        }
    }

    /// A failed message whose backoff has passed at `now`, to emit again
    /// with the same id; `None` when none is due.
    #[inline]
    pub fn next_replay(&mut self, now: Instant) -> Option<(u64, &T)> {
        loop {
            let &Reverse((due, id)) = self.replay.peek()?;
            if due > now {
                return None;
            }
            self.replay.pop();
            if self.slots.contains_key(&id) {
                return self.slots.get(&id).map(|s| (id, &s.item));
            }
        }
    }

    /// True when failed messages wait for their replay (due or not).
    #[inline]
    pub fn has_replays(&self) -> bool {
        !self.replay.is_empty()
    }

    /// When the next replay is due.
    pub fn next_replay_at(&self) -> Option<Instant> {
        self.replay.peek().map(|r| r.0 .0)
    }

    /// The failed messages waiting for their replay (due or not), oldest
    /// id first: what a checkpoint position must still emit again.
    pub fn replays(&self) -> Vec<(u64, &T)> {
        let mut ids: Vec<u64> = self.replay.iter().map(|r| r.0 .1).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().filter_map(|id| self.slots.get(&id).map(|s| (id, &s.item))).collect()
    }

    /// Takes `id` out without a verdict (a drain leaves it to the broker).
    pub fn remove(&mut self, id: u64) -> Option<T> {
        self.slots.remove(&id).map(|s| s.item)
    }

    /// Takes out every message still in flight (at close: the connector
    /// hands them back to the broker).
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.replay.clear();
        self.slots.drain().map(|(_, s)| s.item)
    }

    /// Ends the current epoch of deferred acks (at a checkpoint barrier)
    /// and returns it, for [`Pending::commit`] once that checkpoint commits.
    pub fn barrier(&mut self) -> u64 {
        let epoch = self.epoch;
        self.epoch += 1;
        epoch
    }

    /// Releases the deferred items of every epoch up to `epoch`, oldest
    /// first, with their message ids: ack them to the broker now.
    pub fn commit(&mut self, epoch: u64) -> impl Iterator<Item = (u64, T)> + '_ {
        let n = self.deferred.iter().take_while(|(e, ..)| *e <= epoch).count();
        self.deferred.drain(..n).map(|(_, id, item)| (id, item))
    }

    /// Holds `item` as if it were acked downstream now (deferred: released
    /// by the next [`Pending::commit`]): for a message whose effects are
    /// already in committed state, whose broker ack must still wait for a
    /// commit.
    pub fn defer(&mut self, item: T) {
        self.deferred.push_back((self.epoch, 0, item));
    }

    /// Acked downstream, not yet released to the broker.
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max: u32) -> RetryPolicy {
        RetryPolicy {
            max_deliver: max,
            backoff: Backoff::new(Duration::from_millis(10), Duration::from_millis(40)),
        }
    }

    #[test]
    fn a_local_replay_waits_its_backoff_and_the_last_delivery_dead_letters() {
        let mut p = Pending::new(10, policy(3), Redelivery::Local);
        let t0 = Instant::now();
        let id = p.insert("m", 1);
        assert_eq!(
            p.fail(id, t0),
            Failed::Replay { delivery: 2, delay: Duration::from_millis(10) }
        );
        assert!(p.next_replay(t0).is_none(), "not due yet");
        assert_eq!(p.next_replay(t0 + Duration::from_millis(10)), Some((id, &"m")));
        assert!(p.next_replay(t0 + Duration::from_secs(1)).is_none(), "once");
        assert_eq!(
            p.fail(id, t0),
            Failed::Replay { delivery: 3, delay: Duration::from_millis(20) }
        );
        let Failed::Dead { item, reason } = p.fail(id, t0) else { panic!("dead") };
        assert_eq!(item, "m");
        assert_eq!(reason.to_string(), "failed on delivery 3 of max_deliver = 3");
        assert!(p.is_empty());
        assert_eq!(p.fail(id, t0), Failed::Unknown);
        assert!(p.next_replay(t0 + Duration::from_secs(1)).is_none(), "a dead id is not replayed");
    }

    #[test]
    fn a_broker_redelivery_leaves_the_map() {
        let mut p = Pending::new(10, policy(2), Redelivery::Broker);
        let id = p.insert(1, 1);
        assert_eq!(
            p.fail(id, Instant::now()),
            Failed::Redeliver { item: 1, delay: Duration::from_millis(10) }
        );
        assert!(p.is_empty());
        let id = p.insert(1, 2);
        assert!(matches!(p.fail(id, Instant::now()), Failed::Dead { item: 1, .. }));
        let dead = p.admit(3).unwrap_err();
        assert_eq!(dead.to_string(), "delivered 3 times, more than max_deliver = 2");
        assert!(p.admit(2).is_ok());
    }

    #[test]
    fn the_cap_counts_what_is_in_flight() {
        let mut p = Pending::new(2, RetryPolicy::default(), Redelivery::Local);
        let a = p.insert('a', 1);
        assert!(p.has_room());
        let _b = p.insert('b', 1);
        assert!(!p.has_room());
        assert_eq!(p.room(), 0);
        assert_eq!(p.ack(a), Acked::Now('a'));
        assert_eq!(p.ack(a), Acked::Unknown);
        assert!(p.has_room());
        assert_eq!(p.drain().collect::<Vec<_>>(), ['b']);
    }

    #[test]
    fn deferred_acks_wait_for_the_commit_of_their_epoch() {
        let mut p = Pending::new(10, RetryPolicy::default(), Redelivery::Local);
        p.defer_broker_acks(true);
        let a = p.insert("a", 1);
        let b = p.insert("b", 1);
        let c = p.insert("c", 1);
        assert_eq!(p.ack(a), Acked::Deferred);
        let first = p.barrier();
        assert_eq!(p.ack(b), Acked::Deferred);
        assert_eq!(p.deferred(), 2);
        assert_eq!(p.commit(first).collect::<Vec<_>>(), [(a, "a")]);
        let second = p.barrier();
        assert_eq!(p.ack(c), Acked::Deferred, "after the barrier: the next epoch");
        assert_eq!(p.commit(second).collect::<Vec<_>>(), [(b, "b")]);
        assert_eq!(p.deferred(), 1);
    }
}
