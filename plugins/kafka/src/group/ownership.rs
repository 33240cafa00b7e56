//! What one member owns, and when a revocation may be given back to the
//! group: the pure core of [`KafkaGroup`](super::KafkaGroup), tested
//! without a broker.
//!
//! A partition the broker assigns is **held** under its epoch. A revoke
//! makes it **revoking**: the host stops it and commits its last
//! checkpoint, then calls `released`. The revocation's partitions go back
//! to the group (librdkafka's `incremental_unassign`, which lets the
//! rebalance go on) only once none of them is still revoking, so the next
//! owner is assigned a partition only after this host stopped it. A
//! partition the host gave up on its own (it could not start, or stopped)
//! stays assigned to this member: it **waits** `retry_after`, then is
//! assigned again under a new epoch. A lost assignment (the group moved
//! on without this member) is dropped at once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use squall_plugin_api::abi::{PartitionChange, PartitionEvent};

/// One partition as this member holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Own {
    /// The host runs it (or starts it) under `epoch`.
    Held {
        /// Its fencing epoch.
        epoch: u64,
    },
    /// Revoked: the host stops it; it goes back once released.
    Revoking {
        /// Its fencing epoch.
        epoch: u64,
    },
    /// The host gave it up on its own; it is assigned again at `at`.
    Waiting {
        /// The epoch it last ran under.
        epoch: u64,
        /// When it is assigned again.
        at: Instant,
    },
}

/// The partitions of one member, and its revocation under way.
#[derive(Debug)]
pub struct Ownership {
    parts: BTreeMap<u32, Own>,
    /// A revocation's partitions, given back once none is revoking.
    deferred: Option<Vec<u32>>,
    leaving: bool,
    retry_after: Duration,
}

/// An event for the host.
fn event(change: PartitionChange, partition: u32, epoch: u64) -> PartitionEvent {
    PartitionEvent { change, partition, epoch, valid_for_ms: u64::MAX }
}

impl Ownership {
    /// An empty book; a partition given up by the host is assigned again
    /// after `retry_after`.
    pub fn new(retry_after: Duration) -> Self {
        Self { parts: BTreeMap::new(), deferred: None, leaving: false, retry_after }
    }

    /// Partition `k` is this member's under `epoch`.
    pub fn assigned(&mut self, k: u32, epoch: u64) -> PartitionEvent {
        self.parts.insert(k, Own::Held { epoch });
        event(PartitionChange::ASSIGNED, k, epoch)
    }

    /// The broker revoked `parts`. Held ones become revoking (an event
    /// each); the others are dropped. The revocation is given back once
    /// [`give_back`](Self::give_back) says so.
    pub fn revoked(&mut self, parts: &[u32]) -> Vec<PartitionEvent> {
        let mut events = Vec::new();
        for &k in parts {
            match self.parts.get(&k).copied() {
                Some(Own::Held { epoch }) => {
                    self.parts.insert(k, Own::Revoking { epoch });
                    events.push(event(PartitionChange::REVOKED, k, epoch));
                }
                Some(Own::Revoking { .. }) => {}
                Some(Own::Waiting { .. }) | None => {
                    self.parts.remove(&k);
                }
            }
        }
        let deferred = self.deferred.get_or_insert_with(Vec::new);
        for &k in parts {
            if !deferred.contains(&k) {
                deferred.push(k);
            }
        }
        events
    }

    /// The assignment of `parts` was lost: each held or revoking one is
    /// lost (an event each), and none waits for a release.
    pub fn lost(&mut self, parts: &[u32]) -> Vec<PartitionEvent> {
        let mut events = Vec::new();
        for k in parts {
            match self.parts.remove(k) {
                Some(Own::Held { epoch } | Own::Revoking { epoch }) => {
                    events.push(event(PartitionChange::LOST, *k, epoch));
                }
                Some(Own::Waiting { .. }) | None => {}
            }
        }
        if let Some(deferred) = &mut self.deferred {
            deferred.retain(|k| !parts.contains(k));
            if deferred.is_empty() {
                self.deferred = None;
            }
        }
        events
    }

    /// The host stopped `k` (held under `epoch`). Returns what it was.
    pub fn released(&mut self, k: u32, epoch: u64, now: Instant) -> Option<Own> {
        let own = self.parts.get(&k).copied()?;
        match own {
            Own::Revoking { epoch: e } if e == epoch => {
                self.parts.remove(&k);
            }
            Own::Held { epoch: e } if e == epoch => {
                if self.leaving {
                    self.parts.remove(&k);
                } else {
                    self.parts.insert(k, Own::Waiting { epoch, at: now + self.retry_after });
                }
            }
            _ => return None,
        }
        Some(own)
    }

    /// The revocation under way, once none of its partitions is still
    /// revoking: to give back to the group now.
    pub fn give_back(&mut self) -> Option<Vec<u32>> {
        let deferred = self.deferred.as_ref()?;
        let waiting =
            deferred.iter().any(|k| matches!(self.parts.get(k), Some(Own::Revoking { .. })));
        if waiting {
            None
        } else {
            self.deferred.take()
        }
    }

    /// The partitions given up by the host whose wait is over (not while
    /// leaving), with the epoch they last ran under: to assign again under
    /// a higher one.
    pub fn due(&self, now: Instant) -> Vec<(u32, u64)> {
        if self.leaving {
            return Vec::new();
        }
        self.parts
            .iter()
            .filter_map(|(&k, own)| match *own {
                Own::Waiting { epoch, at } if at <= now => Some((k, epoch)),
                _ => None,
            })
            .collect()
    }

    /// This host is leaving: nothing is assigned again, a release drops.
    pub fn leave(&mut self) {
        self.leaving = true;
        self.parts.retain(|_, own| !matches!(own, Own::Waiting { .. }));
    }

    /// True once [`leave`](Self::leave) was called.
    pub fn is_leaving(&self) -> bool {
        self.leaving
    }

    /// Every partition and how it is held.
    pub fn parts(&self) -> &BTreeMap<u32, Own> {
        &self.parts
    }

    /// How many partitions this host runs or stops now.
    pub fn share(&self) -> usize {
        self.parts.values().filter(|o| !matches!(o, Own::Waiting { .. })).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(events: &[PartitionEvent]) -> Vec<(u8, u32, u64)> {
        events.iter().map(|e| (e.change.0, e.partition, e.epoch)).collect()
    }

    #[test]
    fn a_revocation_is_given_back_only_once_every_partition_of_it_is_released() {
        let mut o = Ownership::new(Duration::from_secs(1));
        let now = Instant::now();
        for k in 0..4 {
            o.assigned(k, 3);
        }
        assert_eq!(o.give_back(), None);
        let events = o.revoked(&[1, 3]);
        assert_eq!(changes(&events), [(1, 1, 3), (1, 3, 3)]);
        assert_eq!(o.give_back(), None, "nothing released yet");
        assert_eq!(o.released(1, 3, now), Some(Own::Revoking { epoch: 3 }));
        assert_eq!(o.give_back(), None, "partition 3 still stops");
        assert_eq!(o.released(3, 2, now), None, "a release of another epoch is not this one");
        assert_eq!(o.give_back(), None);
        o.released(3, 3, now);
        assert_eq!(o.give_back(), Some(vec![1, 3]));
        assert_eq!(o.give_back(), None, "given back once");
        assert_eq!(o.share(), 2);
    }

    #[test]
    fn a_partition_the_host_gave_up_waits_then_is_assigned_again_unless_revoked() {
        let mut o = Ownership::new(Duration::from_secs(1));
        let now = Instant::now();
        o.assigned(0, 5);
        o.assigned(1, 5);
        assert_eq!(o.released(0, 5, now), Some(Own::Held { epoch: 5 }));
        assert_eq!(o.share(), 1);
        assert!(o.due(now).is_empty());
        assert_eq!(o.due(now + Duration::from_secs(1)), [(0, 5)]);
        // Revoked while it waits: nothing to stop, given back at once.
        assert!(o.revoked(&[0]).is_empty());
        assert_eq!(o.give_back(), Some(vec![0]));
        assert!(o.due(now + Duration::from_secs(2)).is_empty());
    }

    #[test]
    fn a_lost_assignment_waits_for_no_release() {
        let mut o = Ownership::new(Duration::from_secs(1));
        o.assigned(0, 2);
        o.assigned(1, 2);
        o.revoked(&[0, 1]);
        let events = o.lost(&[0, 1]);
        assert_eq!(changes(&events), [(3, 0, 2), (3, 1, 2)]);
        assert_eq!(o.give_back(), None, "nothing left to give back");
        assert_eq!(o.share(), 0);
    }

    #[test]
    fn while_leaving_a_release_drops_the_partition() {
        let mut o = Ownership::new(Duration::from_millis(1));
        let now = Instant::now();
        o.assigned(0, 1);
        o.assigned(1, 1);
        o.released(1, 1, now);
        o.leave();
        assert_eq!(o.share(), 1);
        o.released(0, 1, now);
        assert!(o.parts().is_empty());
        assert!(o.due(now + Duration::from_secs(1)).is_empty());
    }
}
