//! `KafkaSpout`'s checkpoint positions (contract 1.2): what a topology with
//! `[state]` records per partition, and how partitions pass between the
//! spout's tasks in one process without losing or doubling a record.
//!
//! # A partition's position
//! [`PartPos`]: `next`, the offset after the last record the spout emitted
//! before the barrier, and `replay`, the offsets below it that must be
//! emitted again (failed trees waiting for their replay, and records on
//! their way to the dead-letter topic). A restart seeks to the lowest of
//! them ([`PartPos::from`]): a record below `next` and not in `replay` is
//! *covered* (its effects are in the restored stores) and is not emitted;
//! the others are.
//!
//! # Who reports a partition
//! Each task of a consumer group is a member of its own, and a rebalance
//! moves partitions between tasks (at every start, too, as the tasks join
//! one by one). A task's position holds the partitions it reads (live) and
//! a frozen copy of every partition it gave up or was restored with. Each
//! entry carries a `version`, raised at every hand-over: at a restore, the
//! highest version of a partition wins, across every task's position.
//!
//! The hand-over goes through a [`Book`] shared by the group's tasks in the
//! process. The task giving up a partition (a revocation) leaves its
//! position there, *sealed* with the number of the last barrier it saw
//! (`k`); everything it emitted of the partition is then in checkpoint
//! `k + 1`. The task given the partition reads from that position, and
//! starts emitting only once it has seen barrier `k` itself: its records
//! then belong to checkpoint `k + 1` or later, never to one whose
//! barrier already passed the giver with the partition's older position.
//! Until then its records wait in the spout (bounded by the prefetch). The
//! giver keeps reporting its frozen copy: that copy is right for every
//! later checkpoint until the taker's own (higher) version is in one.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use squall_plugin_api::{Result, State};

/// The format tag of a `KafkaSpout` position.
pub const POSITION_FORMAT: &str = "squall-kafka-position/1";

/// One partition's position (module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartPos {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// One past the last offset emitted before the barrier.
    pub next: i64,
    /// Offsets below `next` to emit again, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay: Vec<i64>,
    /// Hand-overs of the partition so far; the highest wins at a restore.
    pub version: u64,
}

impl PartPos {
    /// Where reading must start: the lowest offset to emit again.
    pub fn from(&self) -> i64 {
        self.replay.first().map_or(self.next, |&r| r.min(self.next))
    }
}

/// The position as it is stored.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    /// The consumer group the positions were taken in (informative).
    group: String,
    parts: Vec<PartPos>,
}

/// Encodes `parts` as a position.
pub fn encode(group: &str, mut parts: Vec<PartPos>) -> State {
    parts.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    let stored = Stored { group: group.to_owned(), parts };
    let mut state = State::new(POSITION_FORMAT);
    // A struct of strings and integers always serializes.
    state.push(&[], serde_json::to_vec(&stored).unwrap_or_default());
    state
}

/// Decodes a position (`State::no_checkpoint()`: none).
///
/// # Errors
/// A position of another spout's format, or bytes that do not parse.
pub fn decode(position: &State) -> Result<Vec<PartPos>> {
    if position.is_no_checkpoint() {
        return Ok(Vec::new());
    }
    if position.format != POSITION_FORMAT {
        return Err(format!(
            "a position in format {:?} is not a KafkaSpout's ({POSITION_FORMAT:?}); `squall state \
             rm` starts the state over",
            position.format
        )
        .into());
    }
    let mut parts = Vec::new();
    for entry in position.entries.iter() {
        let stored: Stored = serde_json::from_slice(&entry.bytes)
            .map_err(|e| format!("a KafkaSpout position that does not parse: {e}"))?;
        parts.extend(stored.parts);
    }
    Ok(parts)
}

/// A partition in the [`Book`].
#[derive(Debug)]
struct Entry {
    /// Its position when it was restored or last given up (`None`: the
    /// task reading it has emitted nothing yet, and nobody had it before).
    pos: Option<PartPos>,
    /// The version of the current or last reader.
    version: u64,
    /// The last barrier the last giver saw (0: restored).
    sealed: u64,
    /// The spout instance reading it now.
    owner: Option<u64>,
}

/// What [`Book::take`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Take {
    /// The partition is the caller's from now, as `version`, from `pos`
    /// (`None`: from the group's committed offset, or `first_poll`).
    Now { version: u64, pos: Option<PartPos> },
    /// Not yet: another task still reads it, or the caller has not yet seen
    /// the barrier the partition was sealed at. Ask again later.
    Wait,
}

/// The partitions of one consumer group in this process (module doc).
#[derive(Debug, Default)]
pub struct Book {
    entries: HashMap<(String, i32), Entry>,
}

/// The book of consumer group `group`, shared by its tasks in this process.
pub fn book(group: &str) -> Arc<Mutex<Book>> {
    static BOOKS: OnceLock<Mutex<HashMap<String, Arc<Mutex<Book>>>>> = OnceLock::new();
    let books = BOOKS.get_or_init(Default::default);
    let mut books = books.lock().unwrap_or_else(|e| e.into_inner());
    books.entry(group.to_owned()).or_default().clone()
}

impl Book {
    /// A restored position: the highest version of a partition wins.
    pub fn restored(&mut self, pos: &PartPos) {
        let key = (pos.topic.clone(), pos.partition);
        let newer = self.entries.get(&key).is_none_or(|e| e.version < pos.version);
        if newer {
            let entry =
                Entry { pos: Some(pos.clone()), version: pos.version, sealed: 0, owner: None };
            self.entries.insert(key, entry);
        }
    }

    /// Where a partition must be read from, if the book knows.
    pub fn start(&self, topic: &str, partition: i32) -> Option<i64> {
        let e = self.entries.get(&(topic.to_owned(), partition))?;
        e.pos.as_ref().map(PartPos::from)
    }

    /// Instance `me`, which has seen barriers up to `last_barrier`, asks for
    /// a partition it was assigned.
    pub fn take(&mut self, topic: &str, partition: i32, me: u64, last_barrier: u64) -> Take {
        let key = (topic.to_owned(), partition);
        let Some(e) = self.entries.get_mut(&key) else {
            self.entries.insert(key, Entry { pos: None, version: 1, sealed: 0, owner: Some(me) });
            return Take::Now { version: 1, pos: None };
        };
        if e.owner.is_some_and(|o| o != me) || e.sealed > last_barrier {
            return Take::Wait;
        }
        e.version += 1;
        e.owner = Some(me);
        let pos = e.pos.clone().map(|p| PartPos { version: e.version, ..p });
        Take::Now { version: e.version, pos }
    }

    /// Instance `me` gives a partition up at its position `pos` (`None`:
    /// it emitted nothing of it), having seen barriers up to `sealed`.
    pub fn release(
        &mut self,
        topic: &str,
        partition: i32,
        me: u64,
        pos: Option<PartPos>,
        sealed: u64,
    ) {
        let Some(e) = self.entries.get_mut(&(topic.to_owned(), partition)) else { return };
        if e.owner != Some(me) {
            return;
        }
        e.owner = None;
        e.sealed = sealed;
        if pos.is_some() {
            e.pos = pos;
        }
    }
}

/// A partition's durable bookkeeping in the spout task reading it.
#[derive(Debug, Default)]
pub struct Resume {
    /// The version the task reads the partition as.
    pub version: u64,
    /// The position it started from: `next`, and the offsets below it to
    /// emit again (those not yet emitted again). `None` once passed.
    pub restored: Option<(i64, BTreeSet<i64>)>,
    /// Offsets on their way to the dead-letter topic.
    pub dead: BTreeSet<i64>,
}

impl Resume {
    /// From a position taken over (`None`: from the committed offset).
    pub fn new(version: u64, pos: Option<PartPos>) -> Self {
        let restored = pos.map(|p| (p.next, p.replay.into_iter().collect()));
        Self { version, restored, dead: BTreeSet::new() }
    }

    /// Whether a record at `offset`, read for the first time, is emitted:
    /// false when the position taken over covers it.
    #[inline]
    pub fn emits(&mut self, offset: i64) -> bool {
        let Some((next, replay)) = &mut self.restored else { return true };
        if offset >= *next {
            // Records come in offset order: what is left to replay below
            // `next` is gone from the partition (compacted, deleted).
            self.restored = None;
            return true;
        }
        replay.remove(&offset)
    }

    /// The position now: `last`, the last offset emitted (if any), and the
    /// failed offsets waiting for a replay from memory.
    pub fn position(
        &self,
        topic: &str,
        partition: i32,
        last: Option<i64>,
        replays: impl IntoIterator<Item = i64>,
    ) -> Option<PartPos> {
        let restored_next = self.restored.as_ref().map(|r| r.0);
        let next = match (last.map(|l| l + 1), restored_next) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b)?,
        };
        let mut replay: BTreeSet<i64> = replays.into_iter().collect();
        replay.extend(self.dead.iter().copied());
        if let Some((_, r)) = &self.restored {
            replay.extend(r.iter().copied());
        }
        replay.retain(|&o| o < next);
        Some(PartPos {
            topic: topic.to_owned(),
            partition,
            next,
            replay: replay.into_iter().collect(),
            version: self.version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(next: i64, replay: &[i64], version: u64) -> PartPos {
        PartPos { topic: "t".into(), partition: 0, next, replay: replay.to_vec(), version }
    }

    #[test]
    fn a_position_round_trips_and_a_foreign_one_is_refused() {
        let state = encode("g", vec![pos(10, &[4, 7], 2)]);
        assert_eq!(decode(&state).unwrap(), vec![pos(10, &[4, 7], 2)]);
        assert_eq!(pos(10, &[4, 7], 2).from(), 4);
        assert_eq!(pos(10, &[], 2).from(), 10);
        assert!(decode(&State::no_checkpoint()).unwrap().is_empty());
        let e = decode(&State::new("x/1")).unwrap_err().to_string();
        assert!(e.contains("x/1") && e.contains("squall state rm"), "{e}");
    }

    #[test]
    fn a_taken_position_covers_what_was_emitted_and_replays_the_rest() {
        let mut r = Resume::new(3, Some(pos(10, &[4, 7], 3)));
        let emitted: Vec<i64> = (4..13).filter(|&o| r.emits(o)).collect();
        assert_eq!(emitted, [4, 7, 10, 11, 12]);
        assert!(r.restored.is_none(), "passed");
        assert_eq!(r.position("t", 0, Some(12), [11]), Some(pos(13, &[11], 3)));
    }

    #[test]
    fn the_position_before_anything_is_read_is_the_one_taken() {
        let r = Resume::new(2, Some(pos(10, &[4], 2)));
        assert_eq!(r.position("t", 0, None, []), Some(pos(10, &[4], 2)));
        let fresh = Resume::new(1, None);
        assert_eq!(fresh.position("t", 0, None, []), None, "nothing known yet");
        let mut dead = Resume::new(1, None);
        dead.dead.insert(5);
        assert_eq!(dead.position("t", 0, Some(8), [6]), Some(pos(9, &[5, 6], 1)));
    }

    #[test]
    fn a_hand_over_waits_for_the_givers_barrier_and_raises_the_version() {
        let mut b = Book::default();
        b.restored(&pos(10, &[], 4));
        b.restored(&pos(8, &[], 3));
        assert_eq!(b.start("t", 0), Some(10), "the highest version wins");
        assert_eq!(b.take("t", 0, 1, 0), Take::Now { version: 5, pos: Some(pos(10, &[], 5)) });
        assert_eq!(b.take("t", 0, 2, 9), Take::Wait, "instance 1 still reads it");
        b.release("t", 0, 1, Some(pos(20, &[15], 5)), 7);
        assert_eq!(b.start("t", 0), Some(15));
        assert_eq!(b.take("t", 0, 2, 6), Take::Wait, "barrier 7 not seen yet");
        assert_eq!(b.take("t", 0, 2, 7), Take::Now { version: 6, pos: Some(pos(20, &[15], 6)) });
        assert_eq!(b.take("u", 1, 2, 0), Take::Now { version: 1, pos: None }, "unknown: fresh");
    }
}
