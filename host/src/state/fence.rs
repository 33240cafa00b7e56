//! Fencing: a partition of a group (docs/scaling.md) commits only while
//! this host holds its lease.
//!
//! Each lease carries an **epoch**, higher for every new owner of the
//! partition. Two checks keep a host that lost its lease (it was stopped,
//! hung or cut off long enough for another host to take the partition) from
//! committing state or acknowledging the broker for it:
//!
//! 1. **In the backend, atomically.** A partition's checkpoints are
//!    numbered `epoch × 2³² + sequence` ([`Fence::first_checkpoint`]), and a
//!    state backend refuses a commit whose number is not above the last one
//!    committed (docs/state.md, "Writing a state backend"). A new owner's
//!    first act, before it reads the state, is an empty commit numbered
//!    `epoch × 2³²`: from then on every commit of an older epoch is refused,
//!    whatever the old owner's clock or scheduling did.
//! 2. **In the host, before the commit.** The lease keeper records until
//!    when the lease is surely held (the time its last renewal was sent,
//!    plus the lease time: other hosts wait at least that long, on their own
//!    clocks, before they take it) and whether it was lost. The coordinator
//!    asks [`Fence::check`] before each commit, so a host that wakes up past
//!    its lease does not even try.
//!
//! A refused commit is like a failed one: its writes stay pending, and no
//! spout acknowledges its broker (that waits for a commit). The lease keeper
//! then stops the partition.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many bits of a checkpoint number the sequence within one epoch takes.
pub const EPOCH_SHIFT: u32 = 32;

/// The fence of one partition's run: its epoch, and until when its lease is
/// held. Shared by the lease keeper (which moves the deadline) and the
/// checkpoint coordinator (which checks it).
#[derive(Debug)]
pub struct Fence {
    partition: u32,
    epoch: u64,
    origin: Instant,
    /// Microseconds after `origin` until which the lease is held.
    valid_until: AtomicU64,
    lost: AtomicBool,
    refused: AtomicU64,
}

/// Why a commit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    /// The lease keeper knows another host holds the partition now.
    #[error("partition {partition}: the lease of epoch {epoch} was lost to another host")]
    Lost {
        /// The partition.
        partition: u32,
        /// The epoch this host held.
        epoch: u64,
    },
    /// The lease was not renewed in time: another host may hold it.
    #[error(
        "partition {partition}: the lease of epoch {epoch} expired {late_ms} ms ago without a \
         renewal"
    )]
    Expired {
        /// The partition.
        partition: u32,
        /// The epoch this host held.
        epoch: u64,
        /// How long ago it expired.
        late_ms: u64,
    },
}

impl Fence {
    /// The fence of `partition` held with `epoch` until `valid_until`.
    pub fn new(partition: u32, epoch: u64, valid_until: Instant) -> Self {
        let origin = Instant::now();
        let fence = Self {
            partition,
            epoch,
            origin,
            valid_until: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            refused: AtomicU64::new(0),
        };
        fence.extend(valid_until);
        fence
    }

    /// The partition.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The lease's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The number of the empty commit a new owner makes before it reads the
    /// state: every checkpoint of an older epoch is numbered below it.
    pub fn first_checkpoint(&self) -> u64 {
        self.epoch << EPOCH_SHIFT
    }

    /// A renewal succeeded: the lease is held until `until`.
    pub fn extend(&self, until: Instant) {
        let micros = until.saturating_duration_since(self.origin).as_micros() as u64;
        self.valid_until.fetch_max(micros, Ordering::SeqCst);
    }

    /// Until when the lease is held.
    pub fn valid_until(&self) -> Instant {
        self.origin + Duration::from_micros(self.valid_until.load(Ordering::SeqCst))
    }

    /// Another host holds the partition now: nothing more may commit.
    pub fn lose(&self) {
        self.lost.store(true, Ordering::SeqCst);
    }

    /// True once [`lose`](Self::lose) was called.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Commits this fence refused.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Whether a commit may go ahead now; a refusal is counted.
    ///
    /// # Errors
    /// The lease was lost, or it expired without a renewal.
    pub fn check(&self) -> Result<(), Fenced> {
        self.check_at(Instant::now())
    }

    /// [`check`](Self::check) at `now`.
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub fn check_at(&self, now: Instant) -> Result<(), Fenced> {
        let (partition, epoch) = (self.partition, self.epoch);
        let refusal = if self.is_lost() {
            Some(Fenced::Lost { partition, epoch })
        } else {
            let until = self.valid_until();
            (now >= until).then(|| Fenced::Expired {
                partition,
                epoch,
                late_ms: now.duration_since(until).as_millis() as u64,
            })
        };
        match refusal {
            Some(r) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                Err(r)
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_allows_commits_until_its_lease_ends_and_none_after() {
        let start = Instant::now();
        let fence = Fence::new(3, 7, start + Duration::from_secs(5));
        assert_eq!(fence.check_at(start + Duration::from_secs(4)), Ok(()));
        let late = fence.check_at(start + Duration::from_secs(6));
        assert!(matches!(late, Err(Fenced::Expired { partition: 3, epoch: 7, .. })), "{late:?}");
        fence.extend(start + Duration::from_secs(10));
        assert_eq!(fence.check_at(start + Duration::from_secs(6)), Ok(()), "renewed");
        assert_eq!(fence.refused(), 1);
    }

    #[test]
    fn a_renewal_never_moves_the_deadline_back() {
        let start = Instant::now();
        let fence = Fence::new(0, 1, start + Duration::from_secs(10));
        fence.extend(start + Duration::from_secs(2));
        assert_eq!(fence.check_at(start + Duration::from_secs(9)), Ok(()));
    }

    #[test]
    fn a_lost_lease_refuses_every_commit_even_before_its_deadline() {
        let start = Instant::now();
        let fence = Fence::new(1, 2, start + Duration::from_secs(60));
        fence.lose();
        assert_eq!(fence.check_at(start), Err(Fenced::Lost { partition: 1, epoch: 2 }));
    }

    #[test]
    fn checkpoints_of_a_newer_epoch_are_numbered_above_every_older_one() {
        let at = Instant::now();
        let old = Fence::new(0, 4, at);
        let new = Fence::new(0, 5, at);
        // The old owner's highest possible checkpoint is below the new first.
        assert!(old.first_checkpoint() + u64::from(u32::MAX) < new.first_checkpoint());
    }
}
