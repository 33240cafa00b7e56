//! Storm's commit rule, per partition: the offset to commit is one past the
//! highest offset below which every emitted offset is done (its tree
//! completed, or it was dead-lettered). Offsets need not be contiguous
//! (compaction and transaction markers leave gaps): only the emitted ones
//! count.
//!
//! ```text
//! emitted  5  6  8  9  12
//! done     ✓  ✓  .  ✓  ✓     -> commit 7: a restart reads from 7, and the
//!                               next offset there is 8, not yet done
//! ```
//!
//! Kafka's committed offset is the next offset to read, so the value to
//! commit is one past the last offset of the done prefix.

use std::collections::VecDeque;

/// One partition's emitted offsets, in order, and which are done.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Emitted offsets not yet below the commit point, ascending, with done.
    entries: VecDeque<(i64, bool)>,
    /// The offset to commit: everything emitted below it is done.
    committable: Option<i64>,
    /// The last offset handed out by [`Tracker::take_commit`].
    committed: Option<i64>,
    /// The highest offset emitted.
    last: Option<i64>,
}

impl Tracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// `offset` is emitted (for the first time). False, and nothing
    /// recorded, when it is not above every offset emitted before (a
    /// message the partition sent twice): the caller drops it.
    #[inline]
    pub fn emitted(&mut self, offset: i64) -> bool {
        if self.last.is_some_and(|l| offset <= l) {
            return false;
        }
        self.last = Some(offset);
        self.entries.push_back((offset, false));
        true
    }

    /// `offset` is done; advances the commit point over every done offset
    /// at the front. False when `offset` is not waiting here.
    #[inline]
    pub fn done(&mut self, offset: i64) -> bool {
        let Ok(i) = self.entries.binary_search_by_key(&offset, |e| e.0) else { return false };
        if self.entries[i].1 {
            return false;
        }
        self.entries[i].1 = true;
        while let Some(&(o, true)) = self.entries.front() {
            self.entries.pop_front();
            self.committable = Some(o + 1);
        }
        true
    }

    /// The offset to commit now (Kafka's "next offset to read"), if any
    /// message is done.
    #[inline]
    pub fn committable(&self) -> Option<i64> {
        self.committable
    }

    /// The offset to commit when it moved since the last call.
    pub fn take_commit(&mut self) -> Option<i64> {
        let c = self.committable?;
        if self.committed.is_some_and(|p| p >= c) {
            return None;
        }
        self.committed = Some(c);
        Some(c)
    }

    /// The highest offset emitted.
    #[inline]
    pub fn last(&self) -> Option<i64> {
        self.last
    }

    /// Emitted offsets not yet below the commit point (in flight, waiting
    /// for a replay, or done behind one that is not).
    pub fn waiting(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_point_is_the_first_emitted_offset_not_done() {
        let mut t = Tracker::new();
        for o in [5, 6, 8, 9, 12] {
            assert!(t.emitted(o));
        }
        assert!(!t.emitted(12), "an offset seen before is refused");
        assert_eq!(t.committable(), None);
        assert!(t.done(9));
        assert_eq!(t.committable(), None, "5 is not done");
        assert!(t.done(5));
        assert_eq!(t.committable(), Some(6));
        assert!(t.done(6));
        assert_eq!(t.committable(), Some(7), "a restart reads 8 next");
        assert_eq!(t.take_commit(), Some(7));
        assert_eq!(t.take_commit(), None, "unchanged");
        assert!(t.done(8));
        assert_eq!(t.committable(), Some(10), "8 and 9 done; 12 is next");
        assert!(t.done(12));
        assert_eq!(t.committable(), Some(13));
        assert_eq!(t.waiting(), 0);
        assert!(!t.done(12), "once");
        assert!(!t.done(7), "never emitted");
    }

    #[test]
    fn acks_in_any_order_end_one_past_the_last() {
        let mut t = Tracker::new();
        for o in 0..100 {
            t.emitted(o);
        }
        // Reversed: nothing is committable until 0 is done.
        for o in (1..100).rev() {
            t.done(o);
            assert_eq!(t.committable(), None);
        }
        t.done(0);
        assert_eq!(t.committable(), Some(100));
    }
}
