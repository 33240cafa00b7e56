//! What [`JetStreamSpout`](crate::JetStreamSpout) keeps when its topology
//! has durable state (contract 1.2): which stream sequences a committed
//! checkpoint covers, so that a restart neither loses nor counts twice.
//!
//! # The position
//! A message's broker ack waits until the checkpoint holding its effects
//! has committed ([`squall_connector::Pending::defer_broker_acks`]); the
//! ack is then sent as a double ack, and the sequence is forgotten only
//! when the server confirms it. So at a barrier, every message emitted
//! before it whose ack the server has not confirmed is in the position:
//! in flight, acked downstream and waiting for the commit, or released and
//! not yet confirmed.
//!
//! After a restart (or in the instance a live swap brings in), a delivery
//! whose sequence is in the position restored is *covered*: its effects are
//! in the stores already, so it is not emitted again; its broker ack waits
//! for the next commit like any other. A redelivery of a message still in
//! flight here (the server's `ack_wait` passed) is not emitted twice. A
//! covered sequence that never comes back was acked before the crash; the
//! consumer's ack floor, read at `open`, prunes those.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use squall_plugin_api::{Result, State};

/// The position's format tag (in checkpoints and in swap state).
pub const FORMAT: &str = "squall-jetstream-position/1";

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
struct Stored {
    stream: String,
    consumer: String,
    sequences: Vec<u64>,
}

/// The durable bookkeeping of one spout task (module doc).
#[derive(Debug, Default)]
pub struct Durable {
    /// Emitted or covered, broker ack not confirmed; `true` once released.
    unconfirmed: FxHashMap<u64, bool>,
    /// Restored sequences not delivered yet.
    covered: FxHashSet<u64>,
    /// Checkpoints whose barrier came, with the deferred-ack epoch each closed.
    epochs: VecDeque<(u64, u64)>,
}

impl Durable {
    /// Bookkeeping that starts from `position` (`State::no_checkpoint` for
    /// none), which must be for `stream`'s `consumer`.
    ///
    /// # Errors
    /// A position in another format, or for another stream or consumer.
    pub fn restore(position: &State, stream: &str, consumer: &str) -> Result<Self> {
        let mut durable = Self::default();
        if position.is_no_checkpoint() {
            return Ok(durable);
        }
        if position.format != FORMAT {
            return Err(format!(
                "a position in format {:?} is not a JetStream spout's ({FORMAT:?})",
                position.format
            )
            .into());
        }
        for entry in position.entries.iter() {
            let stored: Stored = serde_json::from_slice(&entry.bytes)
                .map_err(|e| format!("a JetStream position that does not parse: {e}"))?;
            if stored.stream != stream || stored.consumer != consumer {
                return Err(format!(
                    "the committed position is for stream {:?} consumer {:?}, and this spout \
                     reads stream {stream:?} consumer {consumer:?}; restoring it would count \
                     messages wrongly (`squall state rm` starts the state over)",
                    stored.stream, stored.consumer
                )
                .into());
            }
            durable.covered.extend(stored.sequences);
        }
        Ok(durable)
    }

    /// Sorts a delivery of stream sequence `seq` (see [`Delivery`]); an
    /// [`Delivery::Emit`] or [`Delivery::Covered`] one is tracked from now.
    #[inline]
    pub fn deliver(&mut self, seq: u64) -> Delivery {
        if let Some(&released) = self.unconfirmed.get(&seq) {
            return if released { Delivery::Released } else { Delivery::InFlight };
        }
        self.unconfirmed.insert(seq, false);
        if !self.covered.is_empty() && self.covered.remove(&seq) {
            Delivery::Covered
        } else {
            Delivery::Emit
        }
    }

    /// `seq` leaves without an ack (naked or dead-lettered): the server
    /// sends it again, or it is done.
    #[inline]
    pub fn forget(&mut self, seq: u64) {
        self.unconfirmed.remove(&seq);
    }

    /// `seq`'s ack is sent.
    #[inline]
    pub fn released(&mut self, seq: u64) {
        if let Some(r) = self.unconfirmed.get_mut(&seq) {
            *r = true;
        }
    }

    /// The server confirmed the acks of `seqs`.
    pub fn confirmed(&mut self, seqs: &[u64]) {
        for seq in seqs {
            self.unconfirmed.remove(seq);
        }
    }

    /// Drops covered sequences at or below the consumer's ack floor: they
    /// were acked and never come back.
    pub fn prune(&mut self, ack_floor: u64) -> usize {
        let before = self.covered.len();
        self.covered.retain(|&s| s > ack_floor);
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

    /// The position now (module doc), for `stream`'s `consumer`.
    pub fn position(&self, stream: &str, consumer: &str) -> State {
        let mut sequences: Vec<u64> =
            self.unconfirmed.keys().chain(self.covered.iter()).copied().collect();
        sequences.sort_unstable();
        let stored = Stored { stream: stream.to_owned(), consumer: consumer.to_owned(), sequences };
        let mut state = State::new(FORMAT);
        state.push(&[], serde_json::to_vec(&stored).expect("a position serializes"));
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(state: &State) -> Vec<u64> {
        let stored: Stored = serde_json::from_slice(&state.entries[0].bytes).unwrap();
        stored.sequences
    }

    #[test]
    fn the_position_holds_what_the_server_has_not_confirmed() {
        let mut d = Durable::restore(&State::no_checkpoint(), "S", "C").unwrap();
        for seq in 1..=4 {
            assert_eq!(d.deliver(seq), Delivery::Emit);
        }
        d.forget(2); // naked: the server sends it again
        d.released(3);
        d.confirmed(&[4]);
        assert_eq!(seqs(&d.position("S", "C")), [1, 3]);
        assert_eq!(d.deliver(1), Delivery::InFlight);
        assert_eq!(d.deliver(3), Delivery::Released);
        assert_eq!(d.deliver(2), Delivery::Emit);
    }

    #[test]
    fn a_restored_position_covers_its_sequences_once() {
        let mut d = Durable::default();
        for seq in [5, 7, 9] {
            d.deliver(seq);
        }
        let position = d.position("S", "C");
        let mut after = Durable::restore(&position, "S", "C").unwrap();
        assert_eq!(after.prune(5), 1);
        assert_eq!(after.deliver(7), Delivery::Covered);
        assert_eq!(after.deliver(7), Delivery::InFlight, "covered, waiting for its ack");
        assert_eq!(after.deliver(8), Delivery::Emit);
        // Until confirmed, a covered sequence stays in the position.
        assert_eq!(seqs(&after.position("S", "C")), [7, 8, 9]);
        after.released(7);
        after.confirmed(&[7]);
        assert_eq!(seqs(&after.position("S", "C")), [8, 9]);
    }

    #[test]
    fn a_position_for_another_consumer_is_refused() {
        let position = Durable::default().position("S", "C");
        let e = Durable::restore(&position, "S", "OTHER").unwrap_err().to_string();
        assert!(e.contains("consumer \"C\"") && e.contains("squall state rm"), "{e}");
        let e = Durable::restore(&State::new("x/1"), "S", "C").unwrap_err().to_string();
        assert!(e.contains("x/1"), "{e}");
    }

    #[test]
    fn a_commit_releases_every_epoch_up_to_its_barrier() {
        let mut d = Durable::default();
        d.barrier(3, 0);
        d.barrier(4, 1);
        d.barrier(6, 2);
        assert_eq!(d.committed(2), None);
        assert_eq!(d.committed(5), Some(1), "4 aborted or not: 5's commit covers it");
        assert_eq!(d.committed(6), Some(2));
        assert_eq!(d.committed(7), None);
    }
}
