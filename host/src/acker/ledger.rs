//! `AckLedger`: the XOR bookkeeping of Storm's acker, with no threads, no clock
//! and no messages.
//!
//! This follows `org.apache.storm.daemon.Acker` (`Acker.execute`) in Storm 2.x
//! (seed 004). The acker task, which is not part of this file, turns each
//! `__ack_init`, `__ack_ack`, `__ack_fail` and `__ack_reset_timeout` message
//! into one call on an [`AckLedger`]. It sends every [`Completion`] the ledger
//! returns to the spout task named in it, and on each tick it calls
//! [`rotate`](AckLedger::rotate).
//!
//! # How a root is tracked
//!
//! For each root the ledger keeps an entry with three fields:
//! - `ack_val`: the XOR of every value received for the root. The spout's init
//!   value is the XOR of the root's first edge ids. A bolt's ack value is the
//!   id of the edge it acks XOR the ids of the edges it emitted anchored on it.
//!   Every edge id is therefore XORed in twice, once when the edge is created
//!   and once when it is acked, and `ack_val` is back at zero exactly when no
//!   edge is outstanding (but see the known limits below).
//! - `spout_task`: the task to notify. Only the init message carries it.
//! - `failed`: set by a fail from any bolt.
//!
//! An init, an ack or a fail creates the entry if it is missing, because the
//! messages travel on different paths and a bolt's ack or fail can reach the
//! acker before the spout's init. After each of these operations, once the
//! spout task is known:
//! 1. if `failed` is set, the entry is removed and reported as [`Outcome::Failed`];
//! 2. otherwise, if `ack_val == 0`, it is removed and reported as
//!    [`Outcome::Acked`].
//!
//! The entries live in a [`RotatingMap`] with
//! [`AckLedger::TIMEOUT_BUCKET_NUM`] (3) buckets, as in Storm. A new entry goes
//! to the newest bucket. Fails and `reset_timeout` move it back to the newest
//! bucket, as Storm's `pending.put` does. Inits and acks leave it where it is.
//! With a rotation every `T`, an untouched entry is dropped between `2T` and
//! `3T` after it was created. Expired entries are dropped silently: the spout's
//! own 2-bucket map has already timed the tuple out and called `fail`.
//!
//! # Invariants
//!
//! - `ack_val` of an entry is the XOR of all init and ack values received for
//!   its root since the entry was created.
//! - No stored entry has a known spout task together with `failed` set or
//!   `ack_val == 0`: such an entry is removed and reported by the operation
//!   that made it so. So [`reset_timeout`](AckLedger::reset_timeout) never has a
//!   completion to report.
//! - A root completes at most once. Only `init` sets the spout task, a spout
//!   sends one init per root, and a completion removes the entry. A message
//!   that arrives later creates a new entry with no spout task, which never
//!   completes.
//!
//! # Deliberate differences / known limits
//!
//! - **Fail wins.** Storm tests `val == 0` before `failed`, so a root that was
//!   failed and whose value then also reached zero (for example a bolt that
//!   both fails and acks the same tuple) is acked. Here `failed` is tested
//!   first: once a fail has reached the entry, no later ack can turn the
//!   outcome into [`Outcome::Acked`].
//! - **False completion on a XOR collision.** If the ids of the edges still
//!   outstanding happen to XOR to zero, the root is reported as acked while
//!   parts of its tree are still being processed. For example, with a spout
//!   tuple sent on edges `1` and `6`, and the bolt on edge `6` emitting
//!   children on edges `2` and `3`, the acker has seen `1 ^ 6 ^ 6 ^ 2 ^ 3 == 0`
//!   while edges 1, 2 and 3 are outstanding. Storm accepts this risk, and so do
//!   we: with random 64-bit ids each check collides with probability 2⁻⁶⁴.
//!   Storm's docs put it at once in 50,000,000 years at 10k acks/s. The test
//!   `xor_collision_completes_a_root_with_edges_still_outstanding` shows the
//!   case.
//! - **No clock.** Storm stores the time an entry was created and reports the
//!   time delta with the ack. The ledger is time-free. The caller measures
//!   complete latency (the spout knows when it emitted the tuple).
//! - **Late messages linger.** An ack or fail for a root that has already
//!   completed, or that expired, creates an orphan entry with no spout task. It
//!   costs a little memory until it rotates out. This is Storm's behaviour too.
//! - **A fail lost to expiry is forgotten.** If a fail arrives before the init
//!   and the entry expires before the init arrives, the init starts a fresh
//!   entry. By then the spout has timed the tuple out, so whatever the acker
//!   reports later is ignored.

use crate::ids::{EdgeId, RootId, TaskId};
use crate::timeout::RotatingMap;

/// How a tuple tree ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every edge of the tree was acked: the spout's `ack(msg_id)` runs.
    Acked,
    /// Some bolt failed a tuple of the tree: the spout's `fail(msg_id)` runs.
    Failed,
}

/// A finished root: what the acker must send to the spout task (Storm's
/// `emitDirect(spout-task, __ack_ack | __ack_fail, ...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The root that finished.
    pub root: RootId,
    /// The spout task that emitted the root, as given in its init.
    pub spout_task: TaskId,
    /// Whether the tree was acked or failed.
    pub outcome: Outcome,
}

/// What the ledger knows about one root.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// XOR of every init and ack value received since the entry was created.
    ack_val: EdgeId,
    /// Set by the init. A root never completes before its init arrives.
    spout_task: Option<TaskId>,
    /// Set by any fail, never cleared.
    failed: bool,
}

impl Entry {
    /// A root the ledger has heard nothing about yet.
    const EMPTY: Entry = Entry { ack_val: EdgeId::ZERO, spout_task: None, failed: false };

    /// The completion this entry has reached, if any. Fail is tested first
    /// (see "Fail wins" in the module docs).
    fn completion(&self, root: RootId) -> Option<Completion> {
        let spout_task = self.spout_task?;
        let outcome = if self.failed {
            Outcome::Failed
        } else if self.ack_val == EdgeId::ZERO {
            Outcome::Acked
        } else {
            return None;
        };
        Some(Completion { root, spout_task, outcome })
    }
}

/// The acker's pending roots: the pure state behind Storm's `Acker.execute`.
///
/// # Example
///
/// ```
/// # use squall_host::acker::{AckLedger, Completion, Outcome};
/// # use squall_host::ids::{EdgeId, RootId, TaskId};
/// let mut ledger = AckLedger::default();
/// let (root, spout) = (RootId(42), TaskId(1));
/// let (a, b) = (EdgeId(0x1111), EdgeId(0x2222));
///
/// // The spout sent the root to two tasks, on edges a and b.
/// assert_eq!(ledger.init(root, a ^ b, spout), None);
/// // The bolt on edge a emits nothing and acks.
/// assert_eq!(ledger.ack(root, a), None);
/// // The bolt on edge b acks the last edge: the tree is complete.
/// let done = ledger.ack(root, b);
/// assert_eq!(done, Some(Completion { root, spout_task: spout, outcome: Outcome::Acked }));
/// assert!(ledger.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct AckLedger {
    pending: RotatingMap<RootId, Entry>,
}

impl Default for AckLedger {
    /// A ledger with Storm's [`TIMEOUT_BUCKET_NUM`](AckLedger::TIMEOUT_BUCKET_NUM)
    /// buckets.
    fn default() -> Self {
        AckLedger::new(AckLedger::TIMEOUT_BUCKET_NUM)
    }
}

impl AckLedger {
    /// The number of buckets Storm's acker uses (`Acker.TIMEOUT_BUCKET_NUM`).
    pub const TIMEOUT_BUCKET_NUM: usize = 3;

    /// Creates an empty ledger whose pending map has `num_buckets` buckets.
    ///
    /// # Panics
    ///
    /// Panics if `num_buckets < 2` (see [`RotatingMap::new`]).
    pub fn new(num_buckets: usize) -> Self {
        AckLedger { pending: RotatingMap::new(num_buckets) }
    }

    /// Records the spout's `__ack_init`: XORs in `init_val` (the XOR of the
    /// root's first edge ids) and remembers `spout_task`.
    ///
    /// Returns the root's completion if it is now complete: acks or a fail
    /// that arrived before the init may already have settled it, and an
    /// `init_val` of zero with nothing else pending completes it at once.
    #[must_use = "a completion must be sent to its spout task"]
    pub fn init(
        &mut self,
        root: RootId,
        init_val: EdgeId,
        spout_task: TaskId,
    ) -> Option<Completion> {
        let entry = self.pending.get_or_insert_with(root, || Entry::EMPTY);
        entry.ack_val ^= init_val;
        entry.spout_task = Some(spout_task);
        let completion = entry.completion(root)?;
        self.pending.remove(&root);
        Some(completion)
    }

    /// Records a bolt's `__ack_ack`: XORs in `ack_val` (the acked edge id XOR
    /// the ids of the edges emitted anchored on it).
    ///
    /// Creates the entry if it is missing, since an ack may overtake the init.
    /// Returns the root's completion if this ack completed the tree.
    #[must_use = "a completion must be sent to its spout task"]
    pub fn ack(&mut self, root: RootId, ack_val: EdgeId) -> Option<Completion> {
        let entry = self.pending.get_or_insert_with(root, || Entry::EMPTY);
        entry.ack_val ^= ack_val;
        let completion = entry.completion(root)?;
        self.pending.remove(&root);
        Some(completion)
    }

    /// Records a bolt's `__ack_fail`: marks the root failed and moves it to the
    /// newest bucket, as Storm's `pending.put` does.
    ///
    /// Creates the entry if it is missing. Returns [`Outcome::Failed`] at once
    /// if the spout task is known, and otherwise when the init arrives.
    #[must_use = "a completion must be sent to its spout task"]
    pub fn fail(&mut self, root: RootId) -> Option<Completion> {
        let entry = self.pending.get_or_insert_with(root, || Entry::EMPTY);
        entry.failed = true;
        match entry.completion(root) {
            Some(completion) => {
                self.pending.remove(&root);
                Some(completion)
            }
            None => {
                self.pending.reset(&root);
                None
            }
        }
    }

    /// Records a bolt's `__ack_reset_timeout`: moves the root to the newest
    /// bucket, which restarts its timeout.
    ///
    /// Returns the spout task to pass the reset on to (so that the spout resets
    /// its own pending map too), or `None` if the root is unknown or its init
    /// has not arrived yet. An unknown root is not created, as in Storm.
    pub fn reset_timeout(&mut self, root: RootId) -> Option<TaskId> {
        if self.pending.reset(&root) {
            self.pending.get(&root).and_then(|entry| entry.spout_task)
        } else {
            None
        }
    }
    /// Moves the pending map's per-update data into memory the calling
    /// thread allocates (see `RotatingMap::rehome`).
    pub fn rehome(&mut self) {
        self.pending.rehome();
    }

    /// Rotates the pending map on a tick and returns how many roots expired.
    ///
    /// Expired roots are dropped silently: Storm's acker only logs them, and
    /// the spout times the tuple out through its own pending map.
    pub fn rotate(&mut self) -> usize {
        self.pending.rotate().count()
    }

    /// The number of roots the ledger is tracking, including orphan entries
    /// whose init never arrived.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Tells whether the ledger tracks no root.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Picks which of `acker_count` acker tasks tracks `root`: an index in
/// `0..acker_count`.
///
/// Every init, ack, fail and reset of a root must reach the same acker task.
/// Storm does this with a fields grouping on the root id ("mod hashing"). Root
/// ids are random, but the root id is still mixed (with the SplitMix64
/// finalizer) so that sequential ids, as a test or a custom id source would
/// produce, spread evenly too. The mixed value is mapped onto the range with a
/// multiply-high rather than a modulo, which is cheaper.
///
/// # Panics
///
/// Panics if `acker_count` is zero. With no acker tasks, acking is disabled and
/// nothing should be routed to an acker.
pub fn acker_for(root: RootId, acker_count: usize) -> usize {
    assert!(acker_count > 0, "acker_for needs at least one acker task");
    let mixed = u128::from(squall_plugin_api::rng::SplitMix64::mix(root.0));
    // (mixed · count) >> 64 lies in 0..count because mixed < 2⁶⁴.
    ((mixed * acker_count as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use proptest::prelude::*;
    use proptest::sample::Index;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

    const ROOT: RootId = RootId(0x5eed);
    const SPOUT: TaskId = TaskId(3);

    fn acked(root: RootId) -> Option<Completion> {
        Some(Completion { root, spout_task: SPOUT, outcome: Outcome::Acked })
    }

    fn failed(root: RootId) -> Option<Completion> {
        Some(Completion { root, spout_task: SPOUT, outcome: Outcome::Failed })
    }

    impl AckLedger {
        /// Test helper: the stored entry of `root`, if any.
        fn entry(&self, root: RootId) -> Option<Entry> {
            self.pending.get(&root).copied()
        }

        /// Test helper: no stored entry may already be complete.
        fn holds_no_settled_entry(&self) -> bool {
            self.pending.iter().all(|(root, entry)| entry.completion(*root).is_none())
        }
    }

    #[test]
    fn root_completes_when_last_edge_acked() {
        let mut ledger = AckLedger::default();
        let (a, b, c) = (EdgeId(0xa1), EdgeId(0xb2), EdgeId(0xc3));
        assert_eq!(ledger.init(ROOT, a ^ b, SPOUT), None);
        // The bolt on edge a emits c anchored on a, then acks a.
        assert_eq!(ledger.ack(ROOT, a ^ c), None);
        assert_eq!(ledger.ack(ROOT, b), None);
        assert_eq!(ledger.ack(ROOT, c), acked(ROOT));
        assert!(ledger.is_empty());
    }

    #[test]
    fn init_with_zero_value_completes_at_once() {
        // A spout tuple that went to no task has nothing to wait for.
        let mut ledger = AckLedger::default();
        assert_eq!(ledger.init(ROOT, EdgeId::ZERO, SPOUT), acked(ROOT));
        assert!(ledger.is_empty());
    }

    #[test]
    fn acks_that_overtake_the_init_are_kept_until_it_arrives() {
        let mut ledger = AckLedger::default();
        let (a, b) = (EdgeId(0xa1), EdgeId(0xb2));
        assert_eq!(ledger.ack(ROOT, a), None);
        assert_eq!(ledger.ack(ROOT, b), None);
        assert_eq!(ledger.len(), 1);
        assert_eq!(ledger.init(ROOT, a ^ b, SPOUT), acked(ROOT));
        assert!(ledger.is_empty());
    }

    #[test]
    fn fail_wins_over_pending_acks() {
        let mut ledger = AckLedger::default();
        let (a, b) = (EdgeId(0xa1), EdgeId(0xb2));
        assert_eq!(ledger.init(ROOT, a ^ b, SPOUT), None);
        assert_eq!(ledger.ack(ROOT, a), None);
        assert_eq!(ledger.fail(ROOT), failed(ROOT));
        // The last ack arrives after the fail: it finds no live entry and
        // cannot complete the root a second time.
        assert_eq!(ledger.ack(ROOT, b), None);
    }

    #[test]
    fn fail_wins_even_when_the_acks_also_reach_zero() {
        // A fail that overtakes the init, then acks that bring the value to 0:
        // Storm would ack here, squall fails (see "Fail wins").
        let mut ledger = AckLedger::default();
        let a = EdgeId(0xa1);
        assert_eq!(ledger.fail(ROOT), None);
        assert_eq!(ledger.ack(ROOT, a), None);
        assert_eq!(ledger.init(ROOT, a, SPOUT), failed(ROOT));
    }

    #[test]
    fn fail_before_init_fails_the_root_when_the_init_arrives() {
        let mut ledger = AckLedger::default();
        assert_eq!(ledger.fail(ROOT), None);
        assert_eq!(ledger.init(ROOT, EdgeId(0xa1), SPOUT), failed(ROOT));
        assert!(ledger.is_empty());
    }

    #[test]
    fn acks_for_unknown_roots_never_complete() {
        let mut ledger = AckLedger::default();
        let stranger = RootId(99);
        assert_eq!(ledger.ack(stranger, EdgeId(0xa1)), None);
        assert_eq!(ledger.ack(stranger, EdgeId(0xa1)), None); // value back to 0
        assert_eq!(ledger.fail(stranger), None);
        assert_eq!(ledger.len(), 1, "an orphan entry waits for an init that never comes");
    }

    #[test]
    fn messages_after_completion_do_not_complete_the_root_again() {
        let mut ledger = AckLedger::default();
        let a = EdgeId(0xa1);
        assert_eq!(ledger.init(ROOT, a, SPOUT), None);
        assert_eq!(ledger.ack(ROOT, a), acked(ROOT));
        assert_eq!(ledger.ack(ROOT, a), None);
        assert_eq!(ledger.ack(ROOT, a), None);
        assert_eq!(ledger.fail(ROOT), None);
    }

    #[test]
    fn expired_roots_are_dropped_silently_after_three_rotations() {
        let mut ledger = AckLedger::default();
        assert_eq!(ledger.init(ROOT, EdgeId(0xa1), SPOUT), None);
        assert_eq!(ledger.rotate(), 0);
        // An ack does not restart the timeout.
        assert_eq!(ledger.ack(ROOT, EdgeId(0xb2)), None);
        assert_eq!(ledger.rotate(), 0);
        assert_eq!(ledger.rotate(), 1);
        assert!(ledger.is_empty());
    }

    #[test]
    fn reset_timeout_keeps_a_root_alive_and_names_its_spout() {
        let mut ledger = AckLedger::default();
        let a = EdgeId(0xa1);
        assert_eq!(ledger.init(ROOT, a, SPOUT), None);
        for _ in 0..10 {
            assert_eq!(ledger.rotate(), 0);
            assert_eq!(ledger.reset_timeout(ROOT), Some(SPOUT));
        }
        assert_eq!(ledger.ack(ROOT, a), acked(ROOT));
    }

    #[test]
    fn reset_timeout_before_init_moves_the_entry_but_names_no_spout() {
        let mut ledger = AckLedger::default();
        assert_eq!(ledger.ack(ROOT, EdgeId(0xa1)), None);
        assert_eq!(ledger.rotate(), 0);
        assert_eq!(ledger.rotate(), 0);
        assert_eq!(ledger.reset_timeout(ROOT), None);
        assert_eq!(ledger.rotate(), 0, "the reset moved the entry to the newest bucket");
        assert_eq!(ledger.len(), 1);
    }

    #[test]
    fn reset_timeout_of_an_unknown_root_creates_nothing() {
        let mut ledger = AckLedger::default();
        assert_eq!(ledger.reset_timeout(ROOT), None);
        assert!(ledger.is_empty());
    }

    #[test]
    fn fail_restarts_the_timeout_of_a_root_waiting_for_its_init() {
        let mut ledger = AckLedger::default();
        assert_eq!(ledger.ack(ROOT, EdgeId(0xa1)), None);
        assert_eq!(ledger.rotate(), 0);
        assert_eq!(ledger.rotate(), 0);
        assert_eq!(ledger.fail(ROOT), None);
        assert_eq!(ledger.rotate(), 0);
        assert_eq!(ledger.rotate(), 0);
        assert_eq!(ledger.init(ROOT, EdgeId(0xb2), SPOUT), failed(ROOT));
    }

    /// The known false-completion case (module docs, "Deliberate differences
    /// / known limits"). Edges 1, 2 and 3 are still outstanding, but
    /// `1 ^ 2 ^ 3 == 0`, so the acker cannot tell the tree apart from a
    /// finished one. Random 64-bit edge ids make this negligible; the
    /// small-range property test below makes it happen on purpose.
    #[test]
    fn xor_collision_completes_a_root_with_edges_still_outstanding() {
        let mut ledger = AckLedger::default();
        let (e1, e6, e2, e3) = (EdgeId(1), EdgeId(6), EdgeId(2), EdgeId(3));
        assert_eq!(ledger.init(ROOT, e1 ^ e6, SPOUT), None);
        // The bolt on edge 6 emits children on edges 2 and 3 and acks edge 6.
        let completion = ledger.ack(ROOT, e6 ^ e2 ^ e3);
        assert_eq!(completion, acked(ROOT), "1, 2 and 3 are outstanding, yet the root is acked");
    }

    #[test]
    #[should_panic(expected = "at least one acker task")]
    fn acker_for_refuses_zero_ackers() {
        acker_for(ROOT, 0);
    }

    #[test]
    fn acker_for_spreads_sequential_and_random_roots_evenly() {
        const ACKERS: usize = 4;
        const ROOTS: u64 = 40_000;
        let sequential = (0..ROOTS).map(RootId);
        let random =
            (0..ROOTS).map(|i| RootId(squall_plugin_api::rng::SplitMix64::mix(i ^ 0xdead_beef)));
        for (kind, roots) in
            [("sequential", sequential.collect::<Vec<_>>()), ("random", random.collect())]
        {
            let mut counts = [0_u64; ACKERS];
            for root in roots {
                counts[acker_for(root, ACKERS)] += 1;
            }
            let mean = ROOTS / ACKERS as u64;
            for count in counts {
                assert!(
                    count.abs_diff(mean) < mean / 20,
                    "{kind} roots spread unevenly: {counts:?}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn acker_for_is_stable_and_in_range(root in any::<u64>(), ackers in 1_usize..64) {
            let acker = acker_for(RootId(root), ackers);
            prop_assert!(acker < ackers);
            prop_assert_eq!(acker, acker_for(RootId(root), ackers));
            prop_assert_eq!(acker_for(RootId(root), 1), 0);
        }
    }

    // ---- Model-based test --------------------------------------------------
    //
    // A small topology runs beside the ledger, in the style of Vector's
    // `OrderedAcknowledgements` tests. Spouts emit roots (`Init`), bolts ack
    // or anchor on edges and fail roots, and ticks rotate the ledger
    // (`Expire`). The spout's init may be held back (`delay`) and delivered
    // later (`DeliverInit`), because in Storm it travels on another path than
    // the tuples and may reach the acker after their acks.
    //
    // Two models are checked against the ledger:
    // - `Heard`, per root, is what the acker has been told since its entry was
    //   created: the set of edge ids it has heard an odd number of times
    //   (`HashMap<RootId, HashSet<EdgeId>>`), plus whether the init and a fail
    //   were seen and how many rotations the entry has sat through. The XOR of
    //   that set is what the ledger's `ack_val` must be.
    // - `RootTruth`, per root, is the topology's truth: the edges still
    //   outstanding in the tree, whether a fail reached the acker, and how the
    //   root ended.

    /// The spout task of root number `index`.
    fn spout_task(index: usize) -> TaskId {
        TaskId(10 + index as u32)
    }

    /// Root number `index` of the topology.
    fn root_id(index: usize) -> RootId {
        RootId(0x1000 + index as u64)
    }

    /// A root no spout ever emits, for stray messages.
    fn unknown_root(index: usize) -> RootId {
        RootId(u64::MAX - index as u64)
    }

    const ROOTS: usize = 6;

    #[derive(Clone, Debug)]
    enum Action {
        /// A spout emits root `root` on `edges`. If `delay`, the init to the
        /// acker is held back until `DeliverInit`. Ignored if already emitted.
        Init { root: usize, edges: Vec<EdgeId>, delay: bool },
        /// A held-back init reaches the acker.
        DeliverInit { root: usize },
        /// A bolt takes an outstanding edge `parent`, emits `new_edges`
        /// anchored on it, and acks it: `ack(parent ^ xor(new_edges))`.
        Anchor { root: usize, parent: Index, new_edges: Vec<EdgeId> },
        /// A bolt acks an outstanding edge without emitting anything.
        Ack { root: usize, edge: Index },
        /// A bolt fails a tuple of the root (it may never have been emitted).
        Fail { root: usize },
        /// A bolt asks to reset the root's timeout.
        ResetTimeout { root: usize },
        /// An ack with an arbitrary value for a root that has finished, or else
        /// for a root that no spout emitted.
        StrayAck { root: usize, val: EdgeId },
        /// A tick: the ledger rotates.
        Expire,
    }

    fn arb_action(edge: BoxedStrategy<EdgeId>) -> impl Strategy<Value = Action> {
        let root = 0..ROOTS;
        prop_oneof![
            3 => (root.clone(), prop::collection::vec(edge.clone(), 0..4), any::<bool>())
                .prop_map(|(root, edges, delay)| Action::Init { root, edges, delay }),
            2 => root.clone().prop_map(|root| Action::DeliverInit { root }),
            4 => (root.clone(), any::<Index>(), prop::collection::vec(edge.clone(), 0..3))
                .prop_map(|(root, parent, new_edges)| Action::Anchor { root, parent, new_edges }),
            6 => (root.clone(), any::<Index>()).prop_map(|(root, edge)| Action::Ack { root, edge }),
            1 => root.clone().prop_map(|root| Action::Fail { root }),
            1 => root.clone().prop_map(|root| Action::ResetTimeout { root }),
            1 => (root, edge).prop_map(|(root, val)| Action::StrayAck { root, val }),
            1 => Just(Action::Expire),
        ]
    }

    fn arb_actions(edge: BoxedStrategy<EdgeId>) -> impl Strategy<Value = Vec<Action>> {
        prop::collection::vec(arb_action(edge), 0..150)
    }

    /// Random 64-bit edge ids, as the executors draw them.
    fn random_edge() -> BoxedStrategy<EdgeId> {
        any::<u64>().prop_map(EdgeId).boxed()
    }

    /// Edge ids from 1..8, so that XOR collisions are common.
    fn small_edge() -> BoxedStrategy<EdgeId> {
        (1_u64..8).prop_map(EdgeId).boxed()
    }

    /// Which edge-id strategy a run uses, and so which properties hold.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum EdgeIds {
        /// Random 64-bit ids: the ledger agrees exactly with the models.
        Random64,
        /// Ids from a small range: XOR collisions cause false completions, so
        /// only the safety properties and liveness are checked.
        SmallRange,
    }

    /// What the acker has been told about one root since its entry was created.
    #[derive(Debug, Default)]
    struct Heard {
        /// Edge ids heard an odd number of times.
        edges: HashSet<EdgeId>,
        spout_known: bool,
        failed: bool,
        /// Rotations since the entry was created or last moved to the newest
        /// bucket.
        age: usize,
    }

    impl Heard {
        fn toggle(&mut self, edge: EdgeId) {
            if !self.edges.remove(&edge) {
                self.edges.insert(edge);
            }
        }

        fn xor(&self) -> EdgeId {
            EdgeId::xor_all(self.edges.iter().copied())
        }

        /// The completion under the model's rule: the set is empty, not merely
        /// its XOR.
        fn completion(&self, root: RootId, spout_task: TaskId) -> Option<Completion> {
            if !self.spout_known {
                return None;
            }
            let outcome = if self.failed {
                Outcome::Failed
            } else if self.edges.is_empty() {
                Outcome::Acked
            } else {
                return None;
            };
            Some(Completion { root, spout_task, outcome })
        }
    }

    /// The topology's view of one root.
    #[derive(Debug, Default)]
    struct RootTruth {
        emitted: bool,
        /// Edges emitted and not yet acked (a multiset: small ids repeat).
        tree: Vec<EdgeId>,
        held_init: Option<Vec<EdgeId>>,
        init_delivered: bool,
        /// A fail reached the acker before the root finished.
        fail_pending: bool,
        /// The acker's entry for this root was dropped by a rotation at least
        /// once, so the acker has forgotten some of what it was told.
        expired: bool,
        outcome: Option<Outcome>,
    }

    /// A message to the acker.
    enum Msg {
        Init(Vec<EdgeId>),
        Ack(Vec<EdgeId>),
        Fail,
    }

    struct Harness {
        ids: EdgeIds,
        ledger: AckLedger,
        heard: HashMap<RootId, Heard>,
        roots: Vec<RootTruth>,
        false_completions: usize,
    }

    impl Harness {
        fn new(ids: EdgeIds) -> Self {
            Harness {
                ids,
                ledger: AckLedger::default(),
                heard: HashMap::new(),
                roots: (0..ROOTS).map(|_| RootTruth::default()).collect(),
                false_completions: 0,
            }
        }

        fn run(mut self, actions: Vec<Action>) -> Result<Self, TestCaseError> {
            for action in actions {
                self.apply(action)?;
                self.check_state()?;
            }
            for root in 0..ROOTS {
                self.apply(Action::DeliverInit { root })?;
            }
            self.check_state()?;
            Ok(self)
        }

        fn apply(&mut self, action: Action) -> Result<(), TestCaseError> {
            match action {
                Action::Init { root, edges, delay } => {
                    if self.roots[root].emitted {
                        return Ok(());
                    }
                    self.assume_fresh(root, &edges)?;
                    let truth = &mut self.roots[root];
                    truth.emitted = true;
                    truth.tree = edges.clone();
                    if delay {
                        truth.held_init = Some(edges);
                    } else {
                        self.deliver(root_id(root), Some(root), Msg::Init(edges))?;
                    }
                }
                Action::DeliverInit { root } => {
                    if let Some(edges) = self.roots[root].held_init.take() {
                        self.deliver(root_id(root), Some(root), Msg::Init(edges))?;
                    }
                }
                Action::Anchor { root, parent, new_edges } => {
                    if self.roots[root].tree.is_empty() {
                        return Ok(());
                    }
                    self.assume_fresh(root, &new_edges)?;
                    let tree = &mut self.roots[root].tree;
                    let parent = tree.swap_remove(parent.index(tree.len()));
                    tree.extend(&new_edges);
                    let mut toggles = new_edges;
                    toggles.push(parent);
                    self.deliver(root_id(root), Some(root), Msg::Ack(toggles))?;
                }
                Action::Ack { root, edge } => {
                    let tree = &mut self.roots[root].tree;
                    if tree.is_empty() {
                        return Ok(());
                    }
                    let edge = tree.swap_remove(edge.index(tree.len()));
                    self.deliver(root_id(root), Some(root), Msg::Ack(vec![edge]))?;
                }
                Action::Fail { root } => {
                    let truth = &mut self.roots[root];
                    if truth.outcome.is_none() {
                        truth.fail_pending = true;
                    }
                    self.deliver(root_id(root), Some(root), Msg::Fail)?;
                }
                Action::ResetTimeout { root } => {
                    let expected = self.heard.get_mut(&root_id(root)).and_then(|heard| {
                        heard.age = 0;
                        heard.spout_known.then(|| spout_task(root))
                    });
                    prop_assert_eq!(self.ledger.reset_timeout(root_id(root)), expected);
                }
                Action::StrayAck { root, val } => {
                    let (target, index) = match self.roots[root].outcome {
                        Some(_) => (root_id(root), Some(root)),
                        None => (unknown_root(root), None),
                    };
                    self.deliver(target, index, Msg::Ack(vec![val]))?;
                }
                Action::Expire => self.expire()?,
            }
            Ok(())
        }

        /// With random ids, new edges are assumed distinct from the live ones
        /// and non-zero. Shrinking moves ids towards 0 and would otherwise
        /// report a collision instead of the real failure.
        fn assume_fresh(&self, root: usize, edges: &[EdgeId]) -> Result<(), TestCaseError> {
            if self.ids == EdgeIds::Random64 {
                let heard = self.heard.get(&root_id(root));
                let mut seen: HashSet<EdgeId> = self.roots[root].tree.iter().copied().collect();
                seen.extend(heard.iter().flat_map(|heard| heard.edges.iter().copied()));
                for edge in edges {
                    prop_assume!(*edge != EdgeId::ZERO && seen.insert(*edge));
                }
            }
            Ok(())
        }

        /// Delivers one message to the ledger and to the `Heard` model, then
        /// checks the ledger's answer.
        fn deliver(
            &mut self,
            root: RootId,
            index: Option<usize>,
            msg: Msg,
        ) -> Result<(), TestCaseError> {
            let heard = self.heard.entry(root).or_default();
            let spout = spout_task(index.unwrap_or(0));
            let actual = match msg {
                Msg::Init(edges) => {
                    edges.iter().for_each(|edge| heard.toggle(*edge));
                    heard.spout_known = true;
                    self.ledger.init(root, EdgeId::xor_all(edges), spout)
                }
                Msg::Ack(edges) => {
                    edges.iter().for_each(|edge| heard.toggle(*edge));
                    self.ledger.ack(root, EdgeId::xor_all(edges))
                }
                Msg::Fail => {
                    heard.failed = true;
                    heard.age = 0;
                    self.ledger.fail(root)
                }
            };
            if let Some(truth) = index.map(|index| &mut self.roots[index]) {
                truth.init_delivered |= heard.spout_known;
            }
            let expected = heard.completion(root, spout);
            match self.ids {
                EdgeIds::Random64 => {
                    // Exact agreement: completion iff the heard set is empty.
                    let collision = !heard.edges.is_empty() && heard.xor() == EdgeId::ZERO;
                    prop_assume!(!collision || !heard.spout_known || heard.failed);
                    prop_assert_eq!(actual, expected);
                }
                EdgeIds::SmallRange => {
                    if expected.is_some() || !heard.spout_known {
                        // Liveness, fail wins, and no completion before init.
                        prop_assert_eq!(actual, expected);
                    } else if let Some(completion) = actual {
                        // The only extra completion allowed: a false one caused
                        // by a XOR collision among the outstanding edges.
                        prop_assert_eq!(completion.outcome, Outcome::Acked);
                        prop_assert!(!heard.edges.is_empty() && heard.xor() == EdgeId::ZERO);
                        self.false_completions += 1;
                    }
                }
            }
            if let Some(completion) = actual {
                self.heard.remove(&root);
                self.record(index, completion)?;
            }
            Ok(())
        }

        /// Checks a completion against the topology's truth and records it.
        fn record(
            &mut self,
            index: Option<usize>,
            completion: Completion,
        ) -> Result<(), TestCaseError> {
            let Some(index) = index else {
                return Err(TestCaseError::fail("a root that no spout emitted completed"));
            };
            let truth = &mut self.roots[index];
            prop_assert_eq!(truth.outcome, None, "root {} completed twice", index);
            prop_assert!(truth.init_delivered, "root {} completed before its init", index);
            prop_assert_eq!(completion.spout_task, spout_task(index));
            truth.outcome = Some(completion.outcome);
            if completion.outcome == Outcome::Acked && !truth.expired {
                prop_assert!(!truth.fail_pending, "root {} was acked after a fail", index);
                if self.ids == EdgeIds::Random64 {
                    prop_assert!(
                        truth.tree.is_empty(),
                        "root {} acked with edges outstanding",
                        index
                    );
                }
            }
            Ok(())
        }

        fn expire(&mut self) -> Result<(), TestCaseError> {
            let oldest = AckLedger::TIMEOUT_BUCKET_NUM - 1;
            let dropped: Vec<RootId> = self
                .heard
                .iter()
                .filter(|(_, heard)| heard.age == oldest)
                .map(|(root, _)| *root)
                .collect();
            for root in &dropped {
                self.heard.remove(root);
                if let Some(truth) = (0..ROOTS).find(|i| root_id(*i) == *root) {
                    self.roots[truth].expired = true;
                }
            }
            self.heard.values_mut().for_each(|heard| heard.age += 1);
            prop_assert_eq!(self.ledger.rotate(), dropped.len());
            Ok(())
        }

        /// Checks the whole state after each action.
        fn check_state(&self) -> Result<(), TestCaseError> {
            // The ledger holds exactly the entries of the `Heard` model, and
            // each entry's value is the XOR of what was heard.
            prop_assert_eq!(self.ledger.len(), self.heard.len());
            prop_assert!(self.ledger.holds_no_settled_entry());
            for (root, heard) in &self.heard {
                let entry = self.ledger.entry(*root);
                prop_assert!(entry.is_some(), "entry of {:?} missing", root);
                let entry = entry.expect("checked just above");
                prop_assert_eq!(entry.ack_val, heard.xor());
                prop_assert_eq!(entry.spout_task.is_some(), heard.spout_known);
                prop_assert_eq!(entry.failed, heard.failed);
            }
            for (index, truth) in self.roots.iter().enumerate() {
                if !truth.init_delivered || truth.expired || truth.outcome.is_some() {
                    continue;
                }
                // Liveness: a finished tree or a fail settles the root at once.
                prop_assert!(!truth.fail_pending, "root {} failed but not reported", index);
                prop_assert!(!truth.tree.is_empty(), "root {} complete but not reported", index);
                if self.ids == EdgeIds::Random64 {
                    // The acker's set is exactly the tree's outstanding edges.
                    let tree: HashSet<EdgeId> = truth.tree.iter().copied().collect();
                    prop_assert_eq!(&self.heard[&root_id(index)].edges, &tree);
                }
            }
            Ok(())
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// With random 64-bit edge ids the ledger completes a root iff its set
        /// of outstanding edges is empty, fails it iff a fail arrived, at most
        /// once, and never before its init.
        #[test]
        fn ledger_agrees_with_the_model_for_random_edge_ids(actions in arb_actions(random_edge())) {
            Harness::new(EdgeIds::Random64).run(actions)?;
        }

        /// With edge ids from 1..8, XOR collisions happen. A root may then be
        /// acked while edges are outstanding (the known false completion), but
        /// every finished tree is still acked, every failed root is failed,
        /// fail still wins, and no root completes twice or before its init.
        #[test]
        fn ledger_stays_safe_when_small_edge_ids_collide(actions in arb_actions(small_edge())) {
            Harness::new(EdgeIds::SmallRange).run(actions)?;
        }
    }

    /// The small-range strategy does force the false-completion case, so the
    /// safety test above is not vacuous.
    #[test]
    fn small_edge_ids_do_produce_false_completions() {
        let mut runner = TestRunner::deterministic();
        let strategy = arb_actions(small_edge());
        let mut false_completions = 0;
        for _ in 0..64 {
            let actions = strategy.new_tree(&mut runner).expect("strategy never rejects").current();
            let harness =
                Harness::new(EdgeIds::SmallRange).run(actions).expect("safety properties hold");
            false_completions += harness.false_completions;
        }
        assert!(false_completions > 0);
    }
}
