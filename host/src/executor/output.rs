//! The host side of the collector: what a plugin's emit, ack, fail and
//! reset_timeout calls do.

use abi_stable::std_types::{ROption, RSlice};
use squall_plugin_api::abi::Output;
use squall_plugin_api::{Anchor, MessageId, StreamId, Value};

use super::tracking::{InputTracker, SpoutTracker};
use super::transfer::{EmitError, Transfer};
use crate::metrics::{LocalStats, StatField};

/// Which kind of task is emitting.
#[derive(Debug)]
pub enum Side<'a> {
    /// A spout task: emits may carry a message id.
    Spout {
        /// Its pending roots.
        tracker: &'a mut SpoutTracker,
        /// Its task id (for acker inits).
        task: crate::ids::TaskId,
    },
    /// A bolt task: emits may carry anchors.
    Bolt {
        /// Its tracked inputs.
        inputs: &'a mut InputTracker,
        /// A basic bolt: emits are anchored to the current input.
        auto_ack: bool,
    },
    /// A windowed bolt's window (or late tuple): every emit is anchored to
    /// `anchors`; acks and fails are the host's.
    Window {
        /// Its tracked inputs.
        inputs: &'a mut InputTracker,
        /// The window's tuples.
        anchors: &'a [Anchor],
    },
}

/// The object behind the `Output` handed to plugin code for one call.
#[derive(Debug)]
pub struct HostOutput<'a> {
    /// Routing and batching.
    pub transfer: &'a mut Transfer,
    /// The task's counters.
    pub stats: &'a mut LocalStats,
    /// The first emit error of the call, reported when the call returns.
    pub error: &'a mut Option<EmitError>,
    /// Spout or bolt state.
    pub side: Side<'a>,
}

impl HostOutput<'_> {
    #[inline]
    fn push_untracked(&mut self, stream: u32, targets: usize, values: &[Value]) {
        for i in 0..targets {
            let target = self.transfer.target(i);
            self.transfer.push(target, stream, values, &[], self.stats);
        }
    }
}

impl Output for HostOutput<'_> {
    #[inline]
    fn emit(
        &mut self,
        stream: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
        message_id: ROption<MessageId>,
        direct_task: ROption<u32>,
    ) {
        let values = values.as_slice();
        let (stream, targets) =
            match self.transfer.route(StreamId(stream), values, direct_task.into_option()) {
                Ok(routed) => routed,
                Err(e) => {
                    self.error.get_or_insert(e);
                    return;
                }
            };
        self.stats.add(StatField::Emitted, 1);
        if self.transfer.counts_bytes() {
            self.transfer.emitted_bytes +=
                values.iter().map(|v| v.encoded_len() as u64).sum::<u64>();
        }
        let acking = self.transfer.acking();
        match &mut self.side {
            Side::Spout { tracker, task } => match message_id {
                ROption::RSome(id) if acking && targets > 0 => {
                    let task = *task;
                    tracker.emit_tracked(
                        self.transfer,
                        self.stats,
                        (stream, targets),
                        values,
                        id,
                        task,
                    );
                }
                ROption::RSome(id) => {
                    tracker.ack_now.push(id);
                    self.push_untracked(stream, targets, values);
                }
                ROption::RNone => self.push_untracked(stream, targets, values),
            },
            Side::Window { inputs, anchors } => {
                if !acking || !inputs.any_tracked(anchors) {
                    self.push_untracked(stream, targets, values);
                    return;
                }
                for i in 0..targets {
                    let edge = self.transfer.rng.next_nonzero();
                    let target = self.transfer.target(i);
                    let ids = inputs.anchor_edge(anchors, edge);
                    self.transfer.push(target, stream, values, ids, self.stats);
                }
            }
            Side::Bolt { inputs, auto_ack } => {
                let current = [inputs.current_anchor()];
                let anchors: &[Anchor] = if *auto_ack { &current } else { anchors.as_slice() };
                if !acking || !inputs.any_tracked(anchors) {
                    self.push_untracked(stream, targets, values);
                    return;
                }
                for i in 0..targets {
                    let edge = self.transfer.rng.next_nonzero();
                    let target = self.transfer.target(i);
                    let ids = inputs.anchor_edge(anchors, edge);
                    self.transfer.push(target, stream, values, ids, self.stats);
                }
            }
        }
    }

    fn ack(&mut self, anchor: Anchor) {
        if let Side::Bolt { inputs, .. } = &mut self.side {
            inputs.ack(anchor, self.transfer, self.stats);
        }
    }

    fn fail(&mut self, anchor: Anchor) {
        if let Side::Bolt { inputs, .. } = &mut self.side {
            inputs.fail(anchor, self.transfer, self.stats, StatField::FailedExplicit);
        }
    }

    fn reset_timeout(&mut self, anchor: Anchor) {
        if let Side::Bolt { inputs, .. } = &mut self.side {
            inputs.reset_timeout(anchor, self.transfer);
        }
    }
}
