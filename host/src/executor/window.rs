//! The windowing logic of a windowed bolt task, kept pure: no clock, no
//! queues, no plugin. The executor feeds it tuples with their times and asks
//! it, with the time it reads, which windows are due (modelled on Storm's
//! `WindowManager` with its count and time trigger and eviction policies).
//!
//! # Windows
//! - **Count**: a window fires every `slide` tuples and holds the last
//!   `length` tuples (fewer before `length` arrived). Tumbling when
//!   `slide == length`.
//! - **Time**: windows end at multiples of `slide` ms since the epoch; the
//!   window ending at `end` holds the tuples with a time in
//!   `[end - length, end)`. Processing time: a tuple's time is its arrival,
//!   and the window fires once the clock reaches `end`. Event time: a tuple's
//!   time is its timestamp field, the watermark is the largest timestamp seen
//!   minus the lag, a window fires once the watermark reaches `end`, and a
//!   tuple older than the watermark is late (it is handed back, never
//!   buffered). A window with no tuple and nothing expired does not fire.
//!
//! # Lifetimes (acking)
//! After a window fires, [`Windower::settle`] removes the tuples that no
//! later window can hold: they left every window, so the executor acks them
//! (or fails them when the window's execute failed). They stay as the next
//! window's `expired` tuples, then are dropped. A tuple therefore lives in
//! the buffer for at most `length + slide` (tuples or ms).
//!
//! # Flush
//! When no more tuples will come (the end of a harness feed, a drain),
//! [`Windower::fire_flush`] fires the windows the buffered tuples are
//! still waiting for, as if the clock (or the watermark) had passed them all
//! and a count window's slide had been reached; then
//! [`Windower::retire_rest`] hands back whatever is left to ack. Every
//! trailing tuple gets its windows, then its ack.

use std::collections::VecDeque;
use std::ops::Range;

/// How windows are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// By tuple count.
    Count {
        /// Tuples per window.
        length: usize,
        /// Tuples between two windows (`== length`: tumbling).
        slide: usize,
    },
    /// By time in milliseconds.
    Time {
        /// The window's duration.
        length: u64,
        /// The time between two window ends (`== length`: tumbling).
        slide: u64,
        /// Event time: the lag behind the largest timestamp seen (`None`:
        /// processing time).
        lag: Option<u64>,
    },
}

/// One buffered tuple and its time (ms).
#[derive(Debug, Clone)]
pub struct Entry<T> {
    /// The time that places it in windows (arrival or event time).
    pub time: u64,
    /// What the executor keeps (values, anchor).
    pub item: T,
}

/// A window that is due: where its tuples are in [`Windower::buffer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firing {
    /// Every tuple of the window.
    pub tuples: Range<usize>,
    /// The tuples that entered since the previous window (a sub-range of
    /// `tuples`, at its end).
    pub new_tuples: Range<usize>,
    /// The window's start (ms; 0 for count windows).
    pub start: u64,
    /// The window's end (ms; 0 for count windows).
    pub end: u64,
}

/// What [`Windower::push`] did with a tuple.
#[derive(Debug)]
pub enum Pushed<T> {
    /// Buffered.
    Buffered,
    /// Older than the watermark: not buffered, handed back.
    Late(T),
}

/// A windowed task's buffer and triggers.
#[derive(Debug)]
pub struct Windower<T> {
    trigger: Trigger,
    /// Sorted by time (arrival order for count windows).
    buffer: VecDeque<Entry<T>>,
    /// The tuples that left every window at the last firing.
    expired: Vec<Entry<T>>,
    /// Count windows: tuples since the last firing.
    since_fire: usize,
    /// Time windows: the end of the next window (`None`: from the oldest
    /// buffered tuple).
    next_end: Option<u64>,
    /// Event time: the largest timestamp seen.
    max_seen: Option<u64>,
    /// The window fired last and not settled yet.
    firing: Option<Firing>,
    /// During a count window's flush: how many tuple slots the windows
    /// have slid past the last real tuple (slots of tuples that never
    /// came), up to the window fired last.
    flush_pad: Option<usize>,
}

impl<T> Windower<T> {
    /// An empty windower.
    pub fn new(trigger: Trigger) -> Self {
        Self {
            trigger,
            buffer: VecDeque::new(),
            expired: Vec::new(),
            since_fire: 0,
            next_end: None,
            max_seen: None,
            firing: None,
            flush_pad: None,
        }
    }

    /// The trigger.
    pub fn trigger(&self) -> Trigger {
        self.trigger
    }

    /// Whether [`Windower::fire`] reads its `now` argument: only windows on
    /// processing time do (count windows and event time never look at the
    /// clock, so their caller need not read it).
    pub fn reads_clock(&self) -> bool {
        matches!(self.trigger, Trigger::Time { lag: None, .. })
    }

    /// The buffered tuples, oldest first.
    pub fn buffer(&self) -> &VecDeque<Entry<T>> {
        &self.buffer
    }

    /// The tuples that left every window at the last firing (the next
    /// window's `expired`).
    pub fn expired(&self) -> &[Entry<T>] {
        &self.expired
    }

    /// The number of buffered tuples (plus the expired ones kept for the
    /// next window).
    pub fn len(&self) -> usize {
        self.buffer.len() + self.expired.len()
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The event-time watermark (`None` before the first tuple, and for
    /// other windows).
    pub fn watermark(&self) -> Option<u64> {
        match self.trigger {
            Trigger::Time { lag: Some(lag), .. } => self.max_seen.map(|m| m.saturating_sub(lag)),
            _ => None,
        }
    }

    /// The trigger state a checkpoint keeps: tuples since the last firing,
    /// the next window's end, the largest event time seen.
    pub fn triggers(&self) -> (usize, Option<u64>, Option<u64>) {
        (self.since_fire, self.next_end, self.max_seen)
    }

    /// Starts again from a checkpoint: `buffer` (in the buffer's order: by
    /// arrival for count windows, by time for time windows), the next
    /// window's `expired`, and [`Windower::triggers`].
    pub fn restore(
        &mut self,
        buffer: Vec<Entry<T>>,
        expired: Vec<Entry<T>>,
        (since_fire, next_end, max_seen): (usize, Option<u64>, Option<u64>),
    ) {
        self.buffer = buffer.into();
        self.expired = expired;
        self.since_fire = since_fire.min(self.buffer.len());
        self.next_end = next_end;
        self.max_seen = max_seen;
        self.firing = None;
    }

    /// Adds a tuple at `time` (arrival time, or its timestamp for event time).
    pub fn push(&mut self, time: u64, item: T) -> Pushed<T> {
        match self.trigger {
            Trigger::Count { .. } => {
                self.buffer.push_back(Entry { time, item });
                self.since_fire += 1;
            }
            Trigger::Time { lag: None, .. } => {
                // Arrival times never go back; a clock that does is clamped.
                let time = self.buffer.back().map_or(time, |last| time.max(last.time));
                self.buffer.push_back(Entry { time, item });
            }
            Trigger::Time { lag: Some(_), .. } => {
                if self.watermark().is_some_and(|w| time < w) {
                    return Pushed::Late(item);
                }
                self.max_seen = Some(self.max_seen.map_or(time, |m| m.max(time)));
                // In order (the common case of an event-time stream): append
                // without searching; else after every entry not later.
                if self.buffer.back().is_none_or(|last| last.time <= time) {
                    self.buffer.push_back(Entry { time, item });
                } else {
                    let at = self.buffer.partition_point(|e| e.time <= time);
                    self.buffer.insert(at, Entry { time, item });
                }
            }
        }
        Pushed::Buffered
    }

    /// When the next time window is due, in the windower's time (processing
    /// time only; `None`: no window is waiting for the clock).
    pub fn next_deadline(&self) -> Option<u64> {
        match self.trigger {
            Trigger::Time { lag: None, slide, .. } => {
                self.next_end.or_else(|| self.buffer.front().map(|e| align_after(e.time, slide)))
            }
            _ => None,
        }
    }

    /// The next window that is due at `now` (processing time; ignored for
    /// count and event-time windows), or `None`. After executing it, call
    /// [`Windower::settle`] before asking again.
    pub fn fire(&mut self, now: u64) -> Option<Firing> {
        debug_assert!(self.firing.is_none(), "settle the previous window first");
        let firing = match self.trigger {
            Trigger::Count { length, slide } => {
                if self.since_fire < slide {
                    return None;
                }
                let n = self.buffer.len();
                Firing {
                    tuples: n.saturating_sub(length)..n,
                    new_tuples: n - slide..n,
                    start: 0,
                    end: 0,
                }
            }
            Trigger::Time { length, slide, lag } => {
                let clock = match lag {
                    None => now,
                    Some(_) => self.watermark()?,
                };
                self.time_window(length, slide, clock)?
            }
        };
        self.firing = Some(firing.clone());
        Some(firing)
    }

    /// The next window of a flush, whatever the clock, the watermark or
    /// the count says. A count window slides on by `slide` tuples that never
    /// come, so its windows are those of a stream that goes on, with empty
    /// slots after the last tuple: first the window that holds the trailing
    /// tuples (the ones since the last window as new), then windows of no
    /// new tuple until the last tuple has left. A time window: the
    /// next one that holds a buffered or expired tuple. `None` when none is
    /// left; then call [`Windower::retire_rest`]. Settle each one as after
    /// [`Windower::fire`].
    pub fn fire_flush(&mut self) -> Option<Firing> {
        debug_assert!(self.firing.is_none(), "settle the previous window first");
        let firing = match self.trigger {
            Trigger::Count { length, slide } => {
                // The windows go on at every `slide` slots as in a stream
                // that goes on; the slots after the last tuple are empty.
                let pad = match self.flush_pad {
                    Some(pad) => pad + slide,
                    None => slide - self.since_fire.min(slide),
                };
                let holds = length.saturating_sub(pad);
                let n = self.buffer.len();
                if holds == 0 || n == 0 {
                    return None;
                }
                self.flush_pad = Some(pad);
                Firing {
                    tuples: n.saturating_sub(holds)..n,
                    new_tuples: n.saturating_sub(self.since_fire)..n,
                    start: 0,
                    end: 0,
                }
            }
            Trigger::Time { length, slide, .. } => self.time_window(length, slide, u64::MAX)?,
        };
        self.firing = Some(firing.clone());
        Some(firing)
    }

    /// Ends a flush: hands back every tuple still buffered (they had every
    /// window they will get) to ack, and starts the time windows afresh
    /// from the next tuple.
    pub fn retire_rest(&mut self) -> &mut [Entry<T>] {
        debug_assert!(self.firing.is_none(), "settle the last window first");
        self.expired.clear();
        self.expired.extend(self.buffer.drain(..));
        self.since_fire = 0;
        self.next_end = None;
        self.flush_pad = None;
        &mut self.expired
    }

    /// The next time window ending at or before `clock` that holds a
    /// tuple (or the previous window's expired ones).
    fn time_window(&mut self, length: u64, slide: u64, clock: u64) -> Option<Firing> {
        loop {
            let end = match self.next_end {
                Some(end) => end,
                None => align_after(self.buffer.front()?.time, slide),
            };
            if end > clock {
                self.next_end = Some(end);
                return None;
            }
            let start = end.saturating_sub(length);
            let lo = self.buffer.partition_point(|e| e.time < start);
            let hi = self.buffer.partition_point(|e| e.time < end);
            let new_lo = self.buffer.partition_point(|e| e.time < end - slide).max(lo);
            if lo == hi && self.expired.is_empty() {
                // Empty: skip to the window of the oldest tuple left.
                self.next_end = self.buffer.front().map(|e| align_after(e.time, slide));
                self.next_end = self.next_end.map(|n| n.max(end + slide));
                if self.buffer.is_empty() {
                    return None;
                }
                continue;
            }
            self.next_end = Some(end);
            return Some(Firing { tuples: lo..hi, new_tuples: new_lo..hi, start, end });
        }
    }

    /// Ends the window [`Windower::fire`] returned: drops the previous
    /// window's expired tuples, and moves out of the buffer the tuples that
    /// no later window holds. Returns them (to ack or fail); they are the
    /// next window's `expired`.
    pub fn settle(&mut self) -> &mut [Entry<T>] {
        let Some(firing) = self.firing.take() else {
            self.expired.clear();
            return &mut self.expired;
        };
        let keep_from = match self.trigger {
            Trigger::Count { length, slide } => {
                self.since_fire = 0;
                if let Some(pad) = self.flush_pad {
                    // A flush: the next window holds the last
                    // `length - pad - slide` tuples, if any.
                    let next = length.saturating_sub(pad + slide);
                    self.buffer.len().saturating_sub(next)
                } else {
                    // The next window holds the last `length - slide` of these.
                    self.buffer.len().saturating_sub(length - slide)
                }
            }
            Trigger::Time { length, slide, .. } => {
                let next = firing.end + slide;
                self.next_end = Some(next);
                self.buffer.partition_point(|e| e.time < next.saturating_sub(length))
            }
        };
        self.expired.clear();
        self.expired.extend(self.buffer.drain(..keep_from));
        &mut self.expired
    }
}

/// The first multiple of `slide` after `time`: the end of the first window
/// that holds a tuple at `time`.
fn align_after(time: u64, slide: u64) -> u64 {
    (time / slide + 1) * slide
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fires every due window at `now`, settling each; returns per window
    /// (tuples, new, expired before settle, retired at settle), as items.
    #[allow(clippy::type_complexity)]
    fn run(w: &mut Windower<u32>, now: u64) -> Vec<(Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>)> {
        let mut out = Vec::new();
        while let Some(f) = w.fire(now) {
            let items = |r: Range<usize>| r.map(|i| w.buffer()[i].item).collect::<Vec<_>>();
            let expired = w.expired().iter().map(|e| e.item).collect();
            let tuples = items(f.tuples.clone());
            let new = items(f.new_tuples.clone());
            let retired = w.settle().iter().map(|e| e.item).collect();
            out.push((tuples, new, expired, retired));
        }
        out
    }

    fn push_all(w: &mut Windower<u32>, items: impl IntoIterator<Item = (u64, u32)>) {
        for (t, i) in items {
            assert!(matches!(w.push(t, i), Pushed::Buffered));
        }
    }

    /// Flushes: every window the flush fires (as [`run`] gives them), then
    /// what [`Windower::retire_rest`] hands back.
    #[allow(clippy::type_complexity)]
    fn flush(w: &mut Windower<u32>) -> (Vec<(Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>)>, Vec<u32>) {
        let mut out = Vec::new();
        while let Some(f) = w.fire_flush() {
            let items = |r: Range<usize>| r.map(|i| w.buffer()[i].item).collect::<Vec<_>>();
            let expired = w.expired().iter().map(|e| e.item).collect();
            let tuples = items(f.tuples.clone());
            let new = items(f.new_tuples.clone());
            let retired = w.settle().iter().map(|e| e.item).collect();
            out.push((tuples, new, expired, retired));
        }
        let rest = w.retire_rest().iter().map(|e| e.item).collect();
        (out, rest)
    }

    #[test]
    fn a_flush_gives_a_count_window_s_trailing_tuples_their_window_then_retires_them() {
        // Pushed one by one, each followed by the windows it made due.
        let feed = |w: &mut Windower<u32>, items: std::ops::RangeInclusive<u32>| {
            for i in items {
                push_all(w, [(0, i)]);
                let _ = run(w, 0);
            }
        };
        let mut w = Windower::new(Trigger::Count { length: 3, slide: 3 });
        feed(&mut w, 1..=5);
        let (fired, rest) = flush(&mut w);
        assert_eq!(fired, vec![(vec![4, 5], vec![4, 5], vec![1, 2, 3], vec![4, 5])]);
        assert!(rest.is_empty());
        assert!(w.is_empty());
        // Sliding: the windows go on at every `slide` slots (by tuples that
        // never come) until the last tuple has left, as in a stream that
        // goes on: at slot 6 the window holds slots 3..=6, at 8 slots 5..=8.
        let mut w = Windower::new(Trigger::Count { length: 4, slide: 2 });
        feed(&mut w, 1..=5);
        let (fired, rest) = flush(&mut w);
        assert_eq!(
            fired,
            vec![
                (vec![3, 4, 5], vec![5], vec![1, 2], vec![3, 4]),
                (vec![5], vec![], vec![3, 4], vec![5])
            ]
        );
        assert!(rest.is_empty());
        // Nothing new since the last window: it slides on all the same.
        let mut w = Windower::new(Trigger::Count { length: 4, slide: 2 });
        feed(&mut w, 1..=4);
        let (fired, rest) = flush(&mut w);
        assert_eq!(fired, vec![(vec![3, 4], vec![], vec![1, 2], vec![3, 4])]);
        assert!(rest.is_empty());
        assert!(w.buffer().is_empty());
        // Issue 41: six tuples, length 4, slide 2: windows of 2, 4, 4 and 2
        // tuples, so each tuple is in length / slide = 2 windows.
        let mut w = Windower::new(Trigger::Count { length: 4, slide: 2 });
        let mut sizes = Vec::new();
        for i in 1..=6 {
            push_all(&mut w, [(0, i)]);
            sizes.extend(run(&mut w, 0).into_iter().map(|f| f.0.len()));
        }
        let (fired, rest) = flush(&mut w);
        sizes.extend(fired.into_iter().map(|f| f.0.len()));
        assert_eq!(sizes, [2, 4, 4, 2]);
        assert!(rest.is_empty());
    }

    #[test]
    fn a_flush_fires_every_time_window_the_buffered_tuples_wait_for() {
        let mut w = Windower::new(Trigger::Time { length: 30, slide: 10, lag: None });
        push_all(&mut w, [(5, 1), (12, 2)]);
        assert_eq!(run(&mut w, 15), vec![(vec![1], vec![1], vec![], vec![])]);
        let (fired, rest) = flush(&mut w);
        assert_eq!(
            fired,
            vec![
                (vec![1, 2], vec![2], vec![], vec![]), // [-10, 20)
                (vec![1, 2], vec![], vec![], vec![1]), // [0, 30)
                (vec![2], vec![], vec![1], vec![2]),   // [10, 40)
                (vec![], vec![], vec![2], vec![]),     // [20, 50)
            ]
        );
        assert!(rest.is_empty());
        assert!(w.is_empty());
        // Afterwards a tuple starts its windows afresh.
        push_all(&mut w, [(1000, 3)]);
        assert_eq!(w.next_deadline(), Some(1010));
        // Event time: the watermark plays no part in a flush.
        let mut w = Windower::new(Trigger::Time { length: 10, slide: 10, lag: Some(5) });
        push_all(&mut w, [(3, 1), (8, 2)]);
        assert!(run(&mut w, 0).is_empty());
        let (fired, _) = flush(&mut w);
        assert_eq!(
            fired,
            vec![
                (vec![1, 2], vec![1, 2], vec![], vec![1, 2]),
                (vec![], vec![], vec![1, 2], vec![])
            ]
        );
    }

    #[test]
    fn count_tumbling() {
        let mut w = Windower::new(Trigger::Count { length: 3, slide: 3 });
        push_all(&mut w, (1..=2).map(|i| (0, i)));
        assert!(run(&mut w, 0).is_empty());
        push_all(&mut w, [(0, 3)]);
        let fired = run(&mut w, 0);
        assert_eq!(fired, vec![(vec![1, 2, 3], vec![1, 2, 3], vec![], vec![1, 2, 3])]);
        push_all(&mut w, (4..=6).map(|i| (0, i)));
        let fired = run(&mut w, 0);
        assert_eq!(fired, vec![(vec![4, 5, 6], vec![4, 5, 6], vec![1, 2, 3], vec![4, 5, 6])]);
        assert_eq!(w.buffer().len(), 0);
    }

    /// A windower restored from another's buffer, expired tuples and
    /// triggers fires exactly the windows the original fires.
    #[test]
    fn a_restored_windower_fires_what_the_original_fires() {
        let triggers = [
            Trigger::Count { length: 4, slide: 2 },
            Trigger::Time { length: 30, slide: 10, lag: None },
            Trigger::Time { length: 20, slide: 10, lag: Some(5) },
        ];
        for trigger in triggers {
            let mut original = Windower::new(trigger);
            push_all(&mut original, (0..7).map(|i| (i * 4, i as u32)));
            let before = run(&mut original, 27);
            assert!(!before.is_empty(), "{trigger:?}: something fired before the snapshot");
            let copy = |es: &mut dyn Iterator<Item = &Entry<u32>>| -> Vec<Entry<u32>> {
                es.map(|e| Entry { time: e.time, item: e.item }).collect()
            };
            let mut restored = Windower::new(trigger);
            restored.restore(
                copy(&mut original.buffer().iter()),
                copy(&mut original.expired().iter()),
                original.triggers(),
            );
            let later: Vec<(u64, u32)> = (7..15).map(|i| (i * 4, i as u32)).collect();
            push_all(&mut original, later.clone());
            push_all(&mut restored, later);
            assert_eq!(run(&mut restored, 80), run(&mut original, 80), "{trigger:?}");
        }
    }

    #[test]
    fn count_sliding() {
        let mut w = Windower::new(Trigger::Count { length: 5, slide: 2 });
        let mut fired = Vec::new();
        for i in 1..=8 {
            push_all(&mut w, [(0, i)]);
            fired.extend(run(&mut w, 0));
        }
        assert_eq!(
            fired,
            vec![
                (vec![1, 2], vec![1, 2], vec![], vec![]),
                (vec![1, 2, 3, 4], vec![3, 4], vec![], vec![1]),
                (vec![2, 3, 4, 5, 6], vec![5, 6], vec![1], vec![2, 3]),
                (vec![4, 5, 6, 7, 8], vec![7, 8], vec![2, 3], vec![4, 5]),
            ]
        );
        // Bounded: the window plus the expired ones.
        assert_eq!(w.buffer().iter().map(|e| e.item).collect::<Vec<_>>(), vec![6, 7, 8]);
    }

    #[test]
    fn time_tumbling() {
        let mut w = Windower::new(Trigger::Time { length: 10, slide: 10, lag: None });
        push_all(&mut w, [(3, 1), (9, 2), (10, 3), (15, 4)]);
        assert_eq!(w.next_deadline(), Some(10));
        assert!(run(&mut w, 9).is_empty());
        // At 12 only [0, 10) is due.
        assert_eq!(run(&mut w, 12), vec![(vec![1, 2], vec![1, 2], vec![], vec![1, 2])]);
        assert_eq!(w.next_deadline(), Some(20));
        push_all(&mut w, [(21, 5)]);
        // At 35: [10, 20) then [20, 30); [30, 40) is not due.
        assert_eq!(
            run(&mut w, 35),
            vec![
                (vec![3, 4], vec![3, 4], vec![1, 2], vec![3, 4]),
                (vec![5], vec![5], vec![3, 4], vec![5]),
            ]
        );
        // [30, 40) is empty but holds the expired of [20, 30).
        assert_eq!(run(&mut w, 40), vec![(vec![], vec![], vec![5], vec![])]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), Some(50));
        // Long idle: the next tuple's window is the next to fire.
        push_all(&mut w, [(1234, 6)]);
        assert_eq!(
            run(&mut w, 5000),
            vec![(vec![6], vec![6], vec![], vec![6]), (vec![], vec![], vec![6], vec![])]
        );
    }

    #[test]
    fn time_sliding() {
        let mut w = Windower::new(Trigger::Time { length: 30, slide: 10, lag: None });
        push_all(&mut w, [(5, 1), (12, 2), (25, 3), (31, 4)]);
        assert_eq!(
            run(&mut w, 40),
            vec![
                (vec![1], vec![1], vec![], vec![]),         // [-20, 10)
                (vec![1, 2], vec![2], vec![], vec![]),      // [-10, 20)
                (vec![1, 2, 3], vec![3], vec![], vec![1]),  // [0, 30)
                (vec![2, 3, 4], vec![4], vec![1], vec![2]), // [10, 40)
            ]
        );
        assert_eq!(
            run(&mut w, 70),
            vec![
                (vec![3, 4], vec![], vec![2], vec![3]), // [20, 50)
                (vec![4], vec![], vec![3], vec![4]),    // [30, 60)
                (vec![], vec![], vec![4], vec![]),      // [40, 70)
            ]
        );
        assert!(w.is_empty());
    }

    #[test]
    fn event_time_with_lag_and_late_tuples() {
        let mut w = Windower::new(Trigger::Time { length: 10, slide: 10, lag: Some(5) });
        // Out of order within the lag: sorted by timestamp.
        push_all(&mut w, [(8, 3), (3, 2), (12, 1)]);
        assert_eq!(w.watermark(), Some(7));
        assert!(run(&mut w, u64::MAX).is_empty(), "the clock plays no part");
        push_all(&mut w, [(16, 4)]); // watermark 11: [0, 10) is due
        assert_eq!(run(&mut w, 0), vec![(vec![2, 3], vec![2, 3], vec![], vec![2, 3])]);
        // 9 < watermark 11: late, handed back, not buffered.
        assert!(matches!(w.push(9, 5), Pushed::Late(5)));
        // 11 is not late (it is in [10, 20), which has not fired).
        push_all(&mut w, [(11, 6)]);
        push_all(&mut w, [(27, 7)]); // watermark 22: [10, 20) is due
        assert_eq!(run(&mut w, 0), vec![(vec![6, 1, 4], vec![6, 1, 4], vec![2, 3], vec![6, 1, 4])]);
        assert!(matches!(w.push(19, 8), Pushed::Late(8)));
        assert_eq!(w.buffer().iter().map(|e| e.item).collect::<Vec<_>>(), vec![7]);
    }

    #[test]
    fn event_time_buffers_by_timestamp_and_keeps_arrival_order_among_equals() {
        let mut w = Windower::new(Trigger::Time { length: 10, slide: 10, lag: Some(100) });
        // Appended in order, inserted out of order, equals after equals.
        push_all(&mut w, [(5, 1), (5, 2), (3, 3), (5, 4), (7, 5), (4, 6)]);
        let held =
            |w: &Windower<u32>| w.buffer().iter().map(|e| (e.time, e.item)).collect::<Vec<_>>();
        assert_eq!(held(&w), vec![(3, 3), (4, 6), (5, 1), (5, 2), (5, 4), (7, 5)]);
    }

    #[test]
    fn only_processing_time_windows_read_the_clock() {
        let time = |lag| Windower::<u32>::new(Trigger::Time { length: 10, slide: 10, lag });
        assert!(time(None).reads_clock());
        assert!(!time(Some(0)).reads_clock());
        assert!(!Windower::<u32>::new(Trigger::Count { length: 3, slide: 3 }).reads_clock());
    }

    #[test]
    fn event_time_sliding_holds_each_tuple_until_its_last_window() {
        let mut w = Windower::new(Trigger::Time { length: 20, slide: 10, lag: Some(0) });
        push_all(&mut w, [(5, 1), (15, 2)]);
        // Watermark 15: [-10, 10) fired; 1 is still in [0, 20).
        assert_eq!(run(&mut w, 0), vec![(vec![1], vec![1], vec![], vec![])]);
        push_all(&mut w, [(25, 3)]);
        assert_eq!(run(&mut w, 0), vec![(vec![1, 2], vec![2], vec![], vec![1])]);
        push_all(&mut w, [(40, 4)]);
        assert_eq!(
            run(&mut w, 0),
            vec![
                (vec![2, 3], vec![3], vec![1], vec![2]), // [10, 30)
                (vec![3], vec![], vec![2], vec![3]),     // [20, 40)
            ]
        );
    }
}
