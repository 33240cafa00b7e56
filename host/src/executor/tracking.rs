//! Ack-tree bookkeeping on the executor side.
//!
//! - [`SpoutTracker`]: the spout task's pending map of in-flight roots (a
//!   [`RotatingMap`] rotated by message-timeout ticks, seed 003), plus the
//!   ids to ack at once when no acker tracks them.
//! - [`InputTracker`]: a bolt task's view of its tracked inputs. For every
//!   input it keeps the input's `(root, edge)` ids and `ack_val`, the XOR of
//!   the edge ids of the children anchored to it (Storm's `Tuple.ackVal`).
//!   Acking the input sends `edge ^ ack_val` per root to the acker (seed 004).
//!   The input being executed lives in plain fields; a rich bolt's input that
//!   is still open when `execute` returns moves into a rotating map, so a bolt
//!   can ack later, and inputs it never acks are dropped after the timeout.

use std::time::Instant;

use squall_plugin_api::{Anchor, MessageId};

use super::transfer::Transfer;
use crate::acker::msg::AckerMsg;
use crate::ids::{EdgeId, RootId, TaskId};
use crate::metrics::{LocalStats, StatField};
use crate::timeout::RotatingMap;

/// A tracked root, in the spout's pending map.
#[derive(Debug, Clone, Copy)]
pub struct PendingRoot {
    /// The spout's message id.
    pub message_id: MessageId,
    /// When it was emitted (complete latency starts here).
    pub emitted: Instant,
}

/// A spout task's in-flight roots.
#[derive(Debug)]
pub struct SpoutTracker {
    /// In-flight roots, rotated every `message_timeout_secs`.
    pub pending: RotatingMap<RootId, PendingRoot>,
    /// Message ids to ack right after `next_tuple` returns: emitted with no
    /// acker (`acker_executors = 0`) or to no subscriber.
    pub ack_now: Vec<MessageId>,
    call_time: Option<Instant>,
}

impl SpoutTracker {
    /// A tracker whose pending map has `buckets` buckets.
    pub fn new(buckets: usize) -> Self {
        Self { pending: RotatingMap::new(buckets.max(2)), ack_now: Vec::new(), call_time: None }
    }

    /// Marks the start of a `next_tuple` call; every root emitted during it
    /// shares one clock reading.
    pub fn begin_call(&mut self) {
        self.call_time = None;
    }

    fn now(&mut self) -> Instant {
        *self.call_time.get_or_insert_with(Instant::now)
    }

    /// Emits a reliable tuple: one edge per target, an init to the acker,
    /// and an entry in the pending map. `failed`: a custom grouping dropped
    /// the tuple for some subscriber, so the tree fails (the fail goes to
    /// the acker before the init: a fail wins, even over an init of zero).
    /// Returns the tree's root id.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn emit_tracked(
        &mut self,
        transfer: &mut Transfer,
        stats: &mut LocalStats,
        (stream, targets): (u32, usize),
        values: &[squall_plugin_api::Value],
        message_id: MessageId,
        spout_task: TaskId,
        failed: bool,
    ) -> RootId {
        let root = RootId(transfer.rng.next_nonzero());
        if failed {
            transfer.to_acker(root, AckerMsg::Fail { root });
        }
        let mut init = 0u64;
        for i in 0..targets {
            let edge = transfer.rng.next_nonzero();
            init ^= edge;
            let target = transfer.target(i);
            transfer.push(target, stream, values, &[(root, EdgeId(edge))], stats);
        }
        let emitted = self.now();
        self.pending.put(root, PendingRoot { message_id, emitted });
        transfer.to_acker(root, AckerMsg::Init { root, val: init, spout_task });
        root
    }
}

/// A tracked input kept past its `execute` call.
#[derive(Debug, Clone)]
struct OpenInput {
    ids: Vec<(RootId, EdgeId)>,
    ack_val: u64,
}

/// A bolt task's tracked inputs.
#[derive(Debug)]
pub struct InputTracker {
    next_token: u64,
    current: u64,
    current_ids: Vec<(RootId, EdgeId)>,
    current_ack_val: u64,
    current_open: bool,
    open: RotatingMap<u64, OpenInput>,
    scratch: Vec<(RootId, EdgeId)>,
    /// Emptied id lists of settled inputs, reused for the next open ones
    /// (at most [`SPARE_IDS`]), so that keeping inputs open allocates
    /// nothing in a steady state.
    spare: Vec<Vec<(RootId, EdgeId)>>,
    /// A basic bolt's batch (contract 1.3): its tracked inputs, anchors
    /// `run_base..`, whose ids lie in `run_ids`. The host settles each of
    /// them when the call returns, so they never enter `open`.
    run: Vec<RunInput>,
    run_ids: Vec<(RootId, EdgeId)>,
    run_base: u64,
}

/// One tracked input of a basic bolt's batch.
#[derive(Debug, Clone, Copy)]
struct RunInput {
    /// Its ids: `run_ids[start..end]`.
    start: u32,
    end: u32,
    ack_val: u64,
    open: bool,
}

/// How many emptied id lists an [`InputTracker`] keeps for reuse.
const SPARE_IDS: usize = 1024;

impl Default for InputTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl InputTracker {
    /// Moves the open-input map's per-update data into memory the calling
    /// thread allocates (see `Transfer::rehome`).
    pub fn rehome(&mut self) {
        self.open.rehome();
    }

    /// An empty tracker.
    pub fn new() -> Self {
        Self {
            next_token: 1,
            current: 0,
            current_ids: Vec::new(),
            current_ack_val: 0,
            current_open: false,
            open: RotatingMap::new(3),
            scratch: Vec::new(),
            spare: Vec::new(),
            run: Vec::new(),
            run_ids: Vec::new(),
            run_base: 0,
        }
    }

    /// Starts executing an input with these ids; returns its anchor
    /// ([`Anchor::NONE`] when it is not tracked).
    #[inline]
    pub fn begin(&mut self, ids: &[(RootId, EdgeId)]) -> Anchor {
        if ids.is_empty() {
            self.current = 0;
            self.current_open = false;
            return Anchor::NONE;
        }
        self.current = self.next_token;
        self.next_token += 1;
        self.current_ids.clear();
        self.current_ids.extend_from_slice(ids);
        self.current_ack_val = 0;
        self.current_open = true;
        Anchor(self.current)
    }

    /// Registers one input of a batch (contract 1.3) as open, as a rich
    /// bolt's input is once its `execute` returned: the bolt (or a basic
    /// bolt's adapter) acks or fails it by its anchor. Returns the anchor
    /// ([`Anchor::NONE`] when it is not tracked). No input is current
    /// meanwhile.
    #[inline]
    pub fn open_input(&mut self, ids: &[(RootId, EdgeId)]) -> Anchor {
        self.current_open = false;
        if ids.is_empty() {
            return Anchor::NONE;
        }
        let token = self.next_token;
        self.next_token += 1;
        let mut list = self.spare.pop().unwrap_or_default();
        list.extend_from_slice(ids);
        self.open.put(token, OpenInput { ids: list, ack_val: 0 });
        Anchor(token)
    }

    /// Starts a basic bolt's batch: the inputs [`run_input`](Self::run_input)
    /// registers until [`end_run`](Self::end_run) are settled by the host.
    pub fn begin_run(&mut self) {
        self.current_open = false;
        self.run.clear();
        self.run_ids.clear();
        self.run_base = self.next_token;
    }

    /// Registers one input of a basic bolt's batch; returns its anchor
    /// ([`Anchor::NONE`] when it is not tracked).
    #[inline]
    pub fn run_input(&mut self, ids: &[(RootId, EdgeId)]) -> Anchor {
        if ids.is_empty() {
            return Anchor::NONE;
        }
        let start = self.run_ids.len() as u32;
        self.run_ids.extend_from_slice(ids);
        let end = self.run_ids.len() as u32;
        self.run.push(RunInput { start, end, ack_val: 0, open: true });
        let token = self.next_token;
        self.next_token += 1;
        Anchor(token)
    }

    /// True when an input of the current basic bolt's batch is tracked
    /// (registered by [`run_input`](Self::run_input) with ids).
    #[inline]
    pub fn run_tracks_any(&self) -> bool {
        !self.run.is_empty()
    }

    /// Ends a basic bolt's batch. An input left open (none is, once the
    /// host has settled the call) stays tracked as a rich bolt's would.
    pub fn end_run(&mut self) {
        for (i, input) in self.run.iter().enumerate().filter(|(_, r)| r.open) {
            let mut ids = self.spare.pop().unwrap_or_default();
            ids.extend_from_slice(&self.run_ids[input.start as usize..input.end as usize]);
            self.open.put(self.run_base + i as u64, OpenInput { ids, ack_val: input.ack_val });
        }
        self.run.clear();
        self.run_ids.clear();
    }

    /// The index in `run` of an open input of the current batch.
    #[inline]
    fn in_run(&self, anchor: Anchor) -> Option<usize> {
        let i = anchor.0.checked_sub(self.run_base)? as usize;
        (anchor.0 != 0 && self.run.get(i).is_some_and(|r| r.open)).then_some(i)
    }

    /// The current input's anchor.
    pub fn current_anchor(&self) -> Anchor {
        if self.current_open {
            Anchor(self.current)
        } else {
            Anchor::NONE
        }
    }

    /// The ids of a child emitted on edge `edge`, anchored to `anchors`: each
    /// anchor's `ack_val` takes the edge, and the child carries the edge
    /// under every root of every anchor (XOR-merged per root, as Storm does).
    /// Empty when no anchor is tracked.
    #[inline]
    pub fn anchor_edge(&mut self, anchors: &[Anchor], edge: u64) -> &[(RootId, EdgeId)] {
        self.scratch.clear();
        for &anchor in anchors {
            let ids: &[(RootId, EdgeId)] =
                if anchor.0 != 0 && anchor.0 == self.current && self.current_open {
                    self.current_ack_val ^= edge;
                    &self.current_ids
                } else if let Some(i) = self.in_run(anchor) {
                    let input = &mut self.run[i];
                    input.ack_val ^= edge;
                    &self.run_ids[input.start as usize..input.end as usize]
                } else if let Some(open) = self.open.get_mut(&anchor.0) {
                    open.ack_val ^= edge;
                    &open.ids
                } else {
                    continue;
                };
            for &(root, _) in ids {
                match self.scratch.iter_mut().find(|(r, _)| *r == root) {
                    Some((_, e)) => *e = EdgeId(e.0 ^ edge),
                    None => self.scratch.push((root, EdgeId(edge))),
                }
            }
        }
        &self.scratch
    }

    /// Fails the trees of `anchors` (every root of every tracked anchor) at
    /// the acker, leaving the inputs tracked: a child anchored to them was
    /// dropped (a custom grouping chose an index out of range).
    pub fn fail_roots(&mut self, anchors: &[Anchor], transfer: &mut Transfer) {
        // An edge of zero changes no `ack_val`: this only collects the roots.
        for &(root, _) in self.anchor_edge(anchors, 0) {
            transfer.to_acker(root, AckerMsg::Fail { root });
        }
    }

    /// True when any anchor refers to a tracked input.
    #[inline]
    pub fn any_tracked(&self, anchors: &[Anchor]) -> bool {
        anchors.iter().any(|a| {
            (a.0 != 0 && a.0 == self.current && self.current_open)
                || self.in_run(*a).is_some()
                || self.open.contains_key(&a.0)
        })
    }

    /// Takes an input out of tracking: its ids and `ack_val`.
    fn take(&mut self, anchor: Anchor) -> Option<(Vec<(RootId, EdgeId)>, u64)> {
        if anchor.0 == 0 {
            return None;
        }
        if anchor.0 == self.current && self.current_open {
            self.current_open = false;
            return Some((std::mem::take(&mut self.current_ids), self.current_ack_val));
        }
        self.open.remove(&anchor.0).map(|o| (o.ids, o.ack_val))
    }

    /// Acks an input: `edge ^ ack_val` for each of its roots goes to the acker.
    pub fn ack(&mut self, anchor: Anchor, transfer: &mut Transfer, stats: &mut LocalStats) {
        if let Some(i) = self.in_run(anchor) {
            let input = &mut self.run[i];
            input.open = false;
            for &(root, edge) in &self.run_ids[input.start as usize..input.end as usize] {
                transfer.to_acker(root, AckerMsg::Ack { root, val: edge.0 ^ input.ack_val });
            }
            stats.add(StatField::Acked, 1);
            return;
        }
        if let Some((ids, ack_val)) = self.take(anchor) {
            for &(root, edge) in &ids {
                transfer.to_acker(root, AckerMsg::Ack { root, val: edge.0 ^ ack_val });
            }
            self.recycle(ids);
            stats.add(StatField::Acked, 1);
        }
    }

    /// Fails an input: each of its roots fails at once (fail-fast).
    pub fn fail(
        &mut self,
        anchor: Anchor,
        transfer: &mut Transfer,
        stats: &mut LocalStats,
        field: StatField,
    ) {
        if let Some(i) = self.in_run(anchor) {
            let input = &mut self.run[i];
            input.open = false;
            for &(root, _) in &self.run_ids[input.start as usize..input.end as usize] {
                transfer.to_acker(root, AckerMsg::Fail { root });
            }
            stats.add(field, 1);
            return;
        }
        if let Some((ids, _)) = self.take(anchor) {
            for &(root, _) in &ids {
                transfer.to_acker(root, AckerMsg::Fail { root });
            }
            self.recycle(ids);
            stats.add(field, 1);
        }
    }

    /// Asks the acker to restart the timeout of each of the input's roots.
    pub fn reset_timeout(&mut self, anchor: Anchor, transfer: &mut Transfer) {
        let ids: &[(RootId, EdgeId)] =
            if anchor.0 != 0 && anchor.0 == self.current && self.current_open {
                &self.current_ids
            } else if let Some(i) = self.in_run(anchor) {
                let input = self.run[i];
                &self.run_ids[input.start as usize..input.end as usize]
            } else if let Some(open) = self.open.get(&anchor.0) {
                &open.ids
            } else {
                return;
            };
        for &(root, _) in ids {
            transfer.to_acker(root, AckerMsg::Reset { root });
        }
        if anchor.0 != self.current {
            self.open.reset(&anchor.0);
        }
    }

    /// Ends the current input's `execute`. A basic bolt's input is acked on
    /// success and failed on error; a rich bolt's input is failed on error
    /// and otherwise stays open for a later ack.
    // Inlined: for an untracked input (acking off) it is one test per tuple.
    #[inline]
    pub fn finish(
        &mut self,
        ok: bool,
        auto_ack: bool,
        transfer: &mut Transfer,
        stats: &mut LocalStats,
    ) {
        if self.current_open {
            self.finish_open(ok, auto_ack, transfer, stats);
        }
    }

    /// [`finish`](Self::finish) for a tracked input.
    fn finish_open(
        &mut self,
        ok: bool,
        auto_ack: bool,
        transfer: &mut Transfer,
        stats: &mut LocalStats,
    ) {
        let anchor = Anchor(self.current);
        if !ok {
            self.fail(anchor, transfer, stats, StatField::FailedExplicit);
        } else if auto_ack {
            self.ack(anchor, transfer, stats);
        } else {
            self.current_open = false;
            let mut ids = self.spare.pop().unwrap_or_default();
            ids.extend_from_slice(&self.current_ids);
            self.open.put(self.current, OpenInput { ids, ack_val: self.current_ack_val });
        }
    }

    /// Fails the current input because plugin code panicked.
    pub fn fail_current_panic(&mut self, transfer: &mut Transfer, stats: &mut LocalStats) {
        let anchor = self.current_anchor();
        self.fail(anchor, transfer, stats, StatField::FailedPanic);
    }

    /// Drops open inputs older than the timeout (their roots timed out at the spout).
    pub fn rotate(&mut self) -> usize {
        self.open.rotate().count()
    }

    fn recycle(&mut self, mut ids: Vec<(RootId, EdgeId)>) {
        ids.clear();
        if self.current_ids.capacity() == 0 {
            self.current_ids = ids;
        } else if self.spare.len() < SPARE_IDS {
            self.spare.push(ids);
        }
    }
}
