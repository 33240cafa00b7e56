//! The host side of the collector: what a plugin's emit, ack, fail and
//! reset_timeout calls do.

use abi_stable::std_types::{ROption, RSlice};
use squall_plugin_api::abi::{BoltOutput, Output, SpoutOutput};
use squall_plugin_api::{Anchor, MessageId, StreamId, Value};

use super::tracking::{InputTracker, SpoutTracker};
use super::transfer::{EmitError, Transfer};
use crate::metrics::{LocalStats, StatField};
use crate::tap::{Sample, TapSide};
use crate::topology::grouping::Misroute;

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

/// Appends an untracked tuple to each of the last route's `targets`.
#[inline]
fn push_untracked(
    transfer: &mut Transfer,
    stats: &mut LocalStats,
    stream: u32,
    targets: usize,
    values: &[Value],
) {
    for i in 0..targets {
        let target = transfer.target(i);
        transfer.push(target, stream, values, &[], stats);
    }
}

/// Counts what custom groupings got wrong for an emit on `stream`: every
/// bad index is an error, and the call reports the first (logged once per
/// component and stream, see `count_emit_error`). True when an index out
/// of range dropped the tuple for some subscriber: its tree then fails.
#[cold]
#[inline(never)]
fn misrouted(
    stats: &mut LocalStats,
    error: &mut Option<EmitError>,
    transfer: &mut Transfer,
    stream: u32,
    misroute: Misroute,
) -> bool {
    stats.add(StatField::Errors, misroute.errors());
    match error {
        Some(EmitError::Misrouted(ref mut detail)) => detail.errors += misroute.errors(),
        Some(_) => {}
        None => *error = Some(transfer.misroute_error(stream, misroute.errors())),
    }
    misroute.out_of_range > 0
}

/// One routed emit: the stream's index, how many targets it goes to,
/// whether a custom grouping dropped it for some subscriber, and whether
/// acking is on and a tap is due to sample it.
#[derive(Debug, Clone, Copy)]
struct Routed {
    stream: u32,
    targets: usize,
    dropped: bool,
    acking: bool,
    tapped: bool,
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
        let Some(routed) = self.route_one(stream, values, direct_task.into_option()) else {
            return;
        };
        if matches!(self.side, Side::Spout { .. }) {
            self.spout_tail(routed, values, message_id);
        } else {
            self.anchored_tail(routed, values, anchors.as_slice());
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

/// What a contract 1.2 bolt emits through: the same emits as [`Output`]'s
/// for a bolt, without the options, and `emit_many`.
impl BoltOutput for HostOutput<'_> {
    #[inline]
    fn emit(&mut self, stream: u32, values: RSlice<'_, Value>, anchors: RSlice<'_, Anchor>) {
        let values = values.as_slice();
        if let Some(routed) = self.route_one(stream, values, None) {
            self.anchored_tail(routed, values, anchors.as_slice());
        }
    }

    fn emit_direct(
        &mut self,
        stream: u32,
        task: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
    ) {
        let values = values.as_slice();
        if let Some(routed) = self.route_one(stream, values, Some(task)) {
            self.anchored_tail(routed, values, anchors.as_slice());
        }
    }

    fn emit_many(
        &mut self,
        stream: u32,
        count: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
    ) {
        self.emit_many_anchored(stream, count as usize, values.as_slice(), anchors.as_slice());
    }

    fn ack(&mut self, anchor: Anchor) {
        Output::ack(self, anchor);
    }

    fn fail(&mut self, anchor: Anchor) {
        Output::fail(self, anchor);
    }

    fn reset_timeout(&mut self, anchor: Anchor) {
        Output::reset_timeout(self, anchor);
    }
}

impl HostOutput<'_> {
    /// Routes one emit and counts it (`None`: refused, the error recorded).
    /// Shared by every emit (inlined into each, so none pays a call more
    /// than another).
    #[inline(always)]
    fn route_one(&mut self, stream: u32, values: &[Value], direct: Option<u32>) -> Option<Routed> {
        let (stream, targets) = match self.transfer.route(StreamId(stream), values, direct) {
            Ok(routed) => routed,
            Err(e) => {
                self.error.get_or_insert(e);
                return None;
            }
        };
        let misroute = self.transfer.take_misroute();
        let dropped =
            misroute.any() && misrouted(self.stats, self.error, self.transfer, stream, misroute);
        self.stats.add(StatField::Emitted, 1);
        if self.transfer.counts_bytes() {
            self.transfer.emitted_bytes +=
                values.iter().map(|v| v.encoded_len() as u64).sum::<u64>();
        }
        let acking = self.transfer.acking();
        // The one load a tap costs while none is attached; with one, a
        // tuple that no tap is due to sample costs a countdown.
        let tapped = self.transfer.tap().attached() && self.transfer.tap_due(TapSide::Outputs);
        Some(Routed { stream, targets, dropped, acking, tapped })
    }

    /// A spout's routed emit: tracked under its message id when acking.
    #[inline(always)]
    fn spout_tail(&mut self, routed: Routed, values: &[Value], message_id: ROption<MessageId>) {
        let Routed { stream, targets, dropped, acking, tapped } = routed;
        let Side::Spout { tracker, task } = &mut self.side else { return };
        match message_id {
            ROption::RSome(id) if acking && (targets > 0 || dropped) => {
                let task = *task;
                let root = tracker.emit_tracked(
                    self.transfer,
                    self.stats,
                    (stream, targets),
                    values,
                    id,
                    task,
                    dropped,
                );
                if tapped {
                    tap_output(self.transfer, stream, values, || vec![root.0], Some(id));
                }
            }
            ROption::RSome(id) => {
                tracker.ack_now.push(id);
                if tapped {
                    tap_output(self.transfer, stream, values, Vec::new, Some(id));
                }
                push_untracked(self.transfer, self.stats, stream, targets, values);
            }
            ROption::RNone => {
                if tapped {
                    tap_output(self.transfer, stream, values, Vec::new, None);
                }
                push_untracked(self.transfer, self.stats, stream, targets, values);
            }
        }
    }

    /// A bolt's or a window's routed emit: anchored to `anchors` (a basic
    /// bolt's to its current input, a window's to the window's tuples).
    #[inline(always)]
    fn anchored_tail(&mut self, routed: Routed, values: &[Value], anchors: &[Anchor]) {
        let Routed { stream, targets, dropped, acking, tapped } = routed;
        let current;
        let (inputs, anchors): (&mut InputTracker, &[Anchor]) = match &mut self.side {
            Side::Bolt { inputs, auto_ack } => {
                current = [inputs.current_anchor()];
                (inputs, if *auto_ack { &current } else { anchors })
            }
            Side::Window { inputs, anchors } => (inputs, anchors),
            Side::Spout { .. } => {
                push_untracked(self.transfer, self.stats, stream, targets, values);
                return;
            }
        };
        if tapped {
            let roots = || roots_of(inputs, anchors);
            tap_output(self.transfer, stream, values, roots, None);
        }
        if !acking || !inputs.any_tracked(anchors) {
            push_untracked(self.transfer, self.stats, stream, targets, values);
            return;
        }
        if dropped {
            inputs.fail_roots(anchors, self.transfer);
        }
        for i in 0..targets {
            let edge = self.transfer.rng.next_nonzero();
            let target = self.transfer.target(i);
            let ids = inputs.anchor_edge(anchors, edge);
            self.transfer.push(target, stream, values, ids, self.stats);
        }
    }

    /// A 1.2 bolt's `emit_many`: the stream and the shape are checked once;
    /// untracked runs are batched as a spout's are, tracked tuples each get
    /// their edges. Kept in one piece on purpose: its loop runs once per
    /// emitted tuple (a hot loop), so it is not cut into steps.
    fn emit_many_anchored(
        &mut self,
        stream: u32,
        count: usize,
        values: &[Value],
        anchors: &[Anchor],
    ) {
        let (stream, arity) =
            match self.transfer.check_many(StreamId(stream), count, values.len(), 0) {
                Ok(checked) => checked,
                Err(e) => {
                    self.error.get_or_insert(e);
                    return;
                }
            };
        if count == 0 {
            return;
        }
        self.stats.add(StatField::Emitted, count as u64);
        if self.transfer.counts_bytes() {
            self.transfer.emitted_bytes +=
                values.iter().map(|v| v.encoded_len() as u64).sum::<u64>();
        }
        let acking = self.transfer.acking();
        let tapped = self.transfer.tap().attached();
        let current;
        let (inputs, anchors): (&mut InputTracker, &[Anchor]) = match &mut self.side {
            Side::Bolt { inputs, auto_ack } => {
                current = [inputs.current_anchor()];
                (inputs, if *auto_ack { &current } else { anchors })
            }
            Side::Window { inputs, anchors } => (inputs, anchors),
            // Only bolt executors hand out a bolt output.
            Side::Spout { .. } => {
                self.transfer.push_many(stream, arity, count, values, self.stats);
                return;
            }
        };
        if !acking || !inputs.any_tracked(anchors) {
            if tapped {
                for tuple in values.chunks_exact(arity) {
                    if self.transfer.tap_due(TapSide::Outputs) {
                        let roots = || roots_of(inputs, anchors);
                        tap_output(self.transfer, stream, tuple, roots, None);
                    }
                }
            }
            self.transfer.push_many(stream, arity, count, values, self.stats);
            let misroute = self.transfer.take_misroute();
            if misroute.any() {
                misrouted(self.stats, self.error, self.transfer, stream, misroute);
            }
            return;
        }
        let mut all = Misroute::default();
        for tuple in values.chunks_exact(arity) {
            let targets = self.transfer.route_checked(stream, tuple);
            let misroute = self.transfer.take_misroute();
            if misroute.out_of_range > 0 {
                inputs.fail_roots(anchors, self.transfer);
            }
            all.add(misroute);
            if tapped && self.transfer.tap_due(TapSide::Outputs) {
                let roots = || roots_of(inputs, anchors);
                tap_output(self.transfer, stream, tuple, roots, None);
            }
            for i in 0..targets {
                let edge = self.transfer.rng.next_nonzero();
                let target = self.transfer.target(i);
                let ids = inputs.anchor_edge(anchors, edge);
                self.transfer.push(target, stream, tuple, ids, self.stats);
            }
        }
        if all.any() {
            misrouted(self.stats, self.error, self.transfer, stream, all);
        }
    }
}

/// What a contract 1.1 spout emits through: `emit` is the 1.0 emit without
/// anchors; `emit_many` checks the stream and the shape once per call.
impl SpoutOutput for HostOutput<'_> {
    #[inline]
    fn emit(
        &mut self,
        stream: u32,
        values: RSlice<'_, Value>,
        message_id: ROption<MessageId>,
        direct_task: ROption<u32>,
    ) {
        let values = values.as_slice();
        if let Some(routed) = self.route_one(stream, values, direct_task.into_option()) {
            self.spout_tail(routed, values, message_id);
        }
    }

    /// A spout's `emit_many`: the stream and the shape are checked once,
    /// then the tuples go out in runs. Kept in one piece on purpose: its
    /// loop runs once per emitted tuple (a hot loop), so it is not cut into
    /// steps.
    fn emit_many(
        &mut self,
        stream: u32,
        count: u32,
        values: RSlice<'_, Value>,
        message_ids: RSlice<'_, MessageId>,
    ) {
        let (values, ids, count) = (values.as_slice(), message_ids.as_slice(), count as usize);
        let (stream, arity) =
            match self.transfer.check_many(StreamId(stream), count, values.len(), ids.len()) {
                Ok(checked) => checked,
                Err(e) => {
                    self.error.get_or_insert(e);
                    return;
                }
            };
        if count == 0 {
            return;
        }
        if !matches!(self.side, Side::Spout { .. }) {
            // Only spout executors hand out a spout output; anything else
            // emits the tuples one by one, as plain emits.
            for i in 0..count {
                let tuple = &values[i * arity..(i + 1) * arity];
                let id = ids.get(i).copied().into();
                Output::emit(self, stream, tuple.into(), RSlice::default(), id, ROption::RNone);
            }
            return;
        }
        self.stats.add(StatField::Emitted, count as u64);
        if self.transfer.counts_bytes() {
            self.transfer.emitted_bytes +=
                values.iter().map(|v| v.encoded_len() as u64).sum::<u64>();
        }
        let acking = self.transfer.acking();
        let tapped = self.transfer.tap().attached();
        let Side::Spout { tracker, task } = &mut self.side else { return };
        if ids.is_empty() || !acking {
            if tapped {
                for i in 0..count {
                    if !self.transfer.tap_due(TapSide::Outputs) {
                        continue;
                    }
                    let tuple = &values[i * arity..(i + 1) * arity];
                    let id = ids.get(i).copied();
                    tap_output(self.transfer, stream, tuple, Vec::new, id);
                }
            }
            tracker.ack_now.extend_from_slice(ids);
            self.transfer.push_many(stream, arity, count, values, self.stats);
            let misroute = self.transfer.take_misroute();
            if misroute.any() {
                misrouted(self.stats, self.error, self.transfer, stream, misroute);
            }
            return;
        }
        let task = *task;
        let mut all = Misroute::default();
        for (i, &id) in ids.iter().enumerate() {
            let tuple = &values[i * arity..(i + 1) * arity];
            let targets = self.transfer.route_checked(stream, tuple);
            let misroute = self.transfer.take_misroute();
            let dropped = misroute.out_of_range > 0;
            all.add(misroute);
            if targets > 0 || dropped {
                let routed = (stream, targets);
                let root = tracker.emit_tracked(
                    self.transfer,
                    self.stats,
                    routed,
                    tuple,
                    id,
                    task,
                    dropped,
                );
                if tapped && self.transfer.tap_due(TapSide::Outputs) {
                    tap_output(self.transfer, stream, tuple, || vec![root.0], Some(id));
                }
            } else {
                tracker.ack_now.push(id);
            }
        }
        if all.any() {
            misrouted(self.stats, self.error, self.transfer, stream, all);
        }
    }
}

/// The roots of the trees `anchors` belong to (empty when untracked).
#[cold]
#[inline(never)]
fn roots_of(inputs: &mut InputTracker, anchors: &[Anchor]) -> Vec<u64> {
    // An edge of zero changes no `ack_val`: this only collects the roots.
    inputs.anchor_edge(anchors, 0).iter().map(|(root, _)| root.0).collect()
}

/// Offers one emitted tuple to the taps on the task's outputs (cold: only
/// while a tap is attached).
#[cold]
#[inline(never)]
fn tap_output(
    transfer: &mut Transfer,
    stream: u32,
    values: &[Value],
    roots: impl FnOnce() -> Vec<u64>,
    message_id: Option<MessageId>,
) {
    let (name, task, tap) = transfer.tap_outputs(stream);
    tap.offer(TapSide::Outputs, name, || Sample {
        side: TapSide::Outputs,
        task,
        stream: name.to_owned(),
        from: None,
        fields: None,
        values: values.to_vec(),
        roots: roots(),
        message_id: message_id.map(|id| id.0),
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use crossbeam_channel::{unbounded, Receiver};

    use super::*;
    use crate::acker::msg::AckerInput;
    use crate::executor::batch::Batch;
    use crate::executor::tracking::{InputTracker, SpoutTracker};
    use crate::executor::transfer::{StreamRoutes, TransferWiring};
    use crate::ids::TaskId;
    use crate::topology::grouping::{Grouping, Router};

    /// What each task received: (stream, values, ack ids) in order.
    type Received = BTreeMap<u32, Vec<(u32, Vec<Value>, usize)>>;

    /// Task 0's transfer to tasks 1..=tasks over `streams`, in batches of
    /// `batch_size`, with `ackers` acker queues; and the task queues.
    fn wired(
        streams: Vec<StreamRoutes>,
        tasks: u32,
        batch_size: usize,
        ackers: Vec<crossbeam_channel::Sender<AckerInput>>,
    ) -> (Transfer, Vec<Option<Receiver<Batch>>>) {
        let mut queues = vec![None];
        let mut receivers = vec![None];
        for _ in 1..=tasks {
            let (tx, rx) = unbounded();
            queues.push(Some(tx));
            receivers.push(Some(rx));
        }
        let wiring = TransferWiring {
            batch_size,
            flush_interval: Duration::ZERO,
            default_stream: Some(0),
            streams,
            queues,
            ackers,
            recycled: None,
            count_bytes: false,
            queue_bytes: Vec::new(),
            tap: Default::default(),
        };
        (Transfer::new(TaskId(0), wiring), receivers)
    }

    fn stream(name: &str, fields: usize, direct: bool, routers: Vec<Router>) -> StreamRoutes {
        StreamRoutes { name: name.into(), direct, fields, routers }
    }

    /// The routers of the mixed topology: shuffle over 1..=3, fields on the
    /// first value over 4..=5, all over 6..=7, local-or-shuffle over 8.
    fn mixed_routers() -> Vec<Router> {
        vec![
            Router::new(Grouping::Shuffle, vec![1, 2, 3], 7),
            Router::new(Grouping::Fields(vec![0]), vec![4, 5], 0),
            Router::new(Grouping::All, vec![6, 7], 0),
            Router::new(Grouping::LocalOrShuffle, vec![8], 3),
        ]
    }

    fn drain(
        transfer: &mut Transfer,
        stats: &mut LocalStats,
        queues: &[Option<Receiver<Batch>>],
    ) -> Received {
        transfer.flush_all(stats);
        let mut out = Received::new();
        for (task, queue) in queues.iter().enumerate() {
            let Some(queue) = queue else { continue };
            for batch in queue.try_iter() {
                for i in 0..batch.len() {
                    let (stream, values, ids) = batch.tuple(i);
                    out.entry(task as u32).or_default().push((stream, values.to_vec(), ids.len()));
                }
            }
        }
        out
    }

    struct Rig {
        transfer: Transfer,
        queues: Vec<Option<Receiver<Batch>>>,
        stats: LocalStats,
        error: Option<EmitError>,
        tracker: SpoutTracker,
    }

    impl Rig {
        fn new(streams: Vec<StreamRoutes>, tasks: u32, batch_size: usize) -> Self {
            Self::acking(streams, tasks, batch_size, Vec::new())
        }

        fn acking(
            streams: Vec<StreamRoutes>,
            tasks: u32,
            batch_size: usize,
            ackers: Vec<crossbeam_channel::Sender<AckerInput>>,
        ) -> Self {
            let (transfer, queues) = wired(streams, tasks, batch_size, ackers);
            let (stats, error, tracker) = (LocalStats::default(), None, SpoutTracker::new(2));
            Self { transfer, queues, stats, error, tracker }
        }

        fn output(&mut self) -> HostOutput<'_> {
            HostOutput {
                transfer: &mut self.transfer,
                stats: &mut self.stats,
                error: &mut self.error,
                side: Side::Spout { tracker: &mut self.tracker, task: TaskId(0) },
            }
        }

        fn received(&mut self) -> Received {
            drain(&mut self.transfer, &mut self.stats, &self.queues)
        }
    }

    /// A bolt's output over `rig`'s transfer, with `inputs` (a basic bolt
    /// when `auto_ack`).
    fn bolt_output<'a>(
        rig: &'a mut Rig,
        inputs: &'a mut InputTracker,
        auto_ack: bool,
    ) -> HostOutput<'a> {
        HostOutput {
            transfer: &mut rig.transfer,
            stats: &mut rig.stats,
            error: &mut rig.error,
            side: Side::Bolt { inputs, auto_ack },
        }
    }

    #[test]
    fn a_bolts_emit_many_delivers_and_anchors_as_one_emit_per_tuple_does() {
        use crate::ids::{EdgeId, RootId};
        let values = tuples(30);
        let routes = || vec![stream("default", 2, false, mixed_routers())];
        let input = [(RootId(7), EdgeId(0xfeed))];
        // (emitted through emit_many?, a basic bolt?)
        let mut got = Vec::new();
        for (many, auto_ack) in [(true, true), (false, true), (true, false), (false, false)] {
            let (acker, _acks) = unbounded();
            let mut rig = Rig::acking(routes(), 8, 4, vec![acker]);
            let mut inputs = InputTracker::new();
            let anchor = inputs.begin(&input);
            let anchors = if auto_ack { &[][..] } else { &[anchor][..] };
            let mut output = bolt_output(&mut rig, &mut inputs, auto_ack);
            if many {
                BoltOutput::emit_many(
                    &mut output,
                    u32::MAX,
                    30,
                    values.as_slice().into(),
                    anchors.into(),
                );
            } else {
                for tuple in values.chunks(2) {
                    BoltOutput::emit(&mut output, u32::MAX, tuple.into(), anchors.into());
                }
            }
            assert_eq!(rig.error, None);
            assert_eq!(rig.stats.get(StatField::Emitted), 30);
            let received = rig.received();
            let edges: usize = received.values().flatten().map(|(_, _, ids)| ids).sum();
            let delivered: usize = received.values().map(Vec::len).sum();
            assert_eq!(edges, delivered, "every delivered tuple is anchored to the input");
            got.push(received);
        }
        assert_eq!(got[0], got[1], "basic bolt: emit_many routes as 30 emits do");
        assert_eq!(got[2], got[3], "rich bolt: emit_many routes as 30 emits do");
        assert_eq!(got[0], got[2]);
    }

    #[test]
    fn a_bolts_emit_many_that_breaks_a_rule_emits_nothing_and_reports_it() {
        let values = tuples(4);
        let mut rig = Rig::new(vec![stream("default", 2, false, mixed_routers())], 8, 4);
        let mut inputs = InputTracker::new();
        inputs.begin(&[]);
        let mut output = bolt_output(&mut rig, &mut inputs, true);
        BoltOutput::emit_many(
            &mut output,
            u32::MAX,
            3,
            values.as_slice().into(),
            RSlice::default(),
        );
        let error = rig.error.take().expect("refused").to_string();
        assert!(
            error.contains("emit_many on stream \"default\" of 3 tuples with 8 values"),
            "{error}"
        );
        assert_eq!(rig.stats.get(StatField::Emitted), 0);
        assert!(rig.received().is_empty());
    }

    /// Two values per tuple; the first cycles over 5 words, so the fields
    /// grouping sees repeated keys.
    fn tuples(n: usize) -> Vec<Value> {
        (0..n)
            .flat_map(|i| [Value::from(["a", "b", "c", "d", "e"][i % 5]), Value::I64(i as i64)])
            .collect()
    }

    #[test]
    fn emit_many_routes_every_tuple_as_one_emit_per_tuple_does() {
        let values = tuples(50);
        let mut many = Rig::new(vec![stream("default", 2, false, mixed_routers())], 8, 4);
        SpoutOutput::emit_many(
            &mut many.output(),
            u32::MAX,
            50,
            values.as_slice().into(),
            RSlice::default(),
        );
        let mut single = Rig::new(vec![stream("default", 2, false, mixed_routers())], 8, 4);
        for tuple in values.chunks(2) {
            SpoutOutput::emit(
                &mut single.output(),
                u32::MAX,
                tuple.into(),
                ROption::RNone,
                ROption::RNone,
            );
        }
        assert_eq!(many.error, None);
        assert_eq!(many.stats.get(StatField::Emitted), 50);
        assert_eq!(single.stats.get(StatField::Emitted), 50);
        let (got, want) = (many.received(), single.received());
        assert_eq!(got, want, "the same tuples reach the same tasks in the same order");
        let count = |task: u32| got.get(&task).map_or(0, Vec::len);
        // shuffle: an even spread; fields: every tuple once, by key; all:
        // every tuple to each task; one task: everything.
        assert_eq!([count(1), count(2), count(3)].iter().sum::<usize>(), 50);
        assert!([1, 2, 3].iter().all(|&t| (16..=17).contains(&count(t))), "{got:?}");
        assert_eq!(count(4) + count(5), 50);
        assert_eq!((count(6), count(7), count(8)), (50, 50, 50));
        for task in [4, 5] {
            for (_, values, _) in got.get(&task).into_iter().flatten() {
                let mut router = Router::new(Grouping::Fields(vec![0]), vec![4, 5], 0);
                assert_eq!(
                    router.route(values, None),
                    crate::topology::grouping::Targets::One(task)
                );
            }
        }
        let in_order: Vec<_> = got[&8].iter().map(|(_, v, _)| v[1].clone()).collect();
        assert_eq!(in_order, (0..50).map(Value::I64).collect::<Vec<_>>());
        assert_eq!(many.stats.get(StatField::Transferred), 250, "50 + 50 + 2 × 50 + 50");
    }

    #[test]
    fn emit_many_to_one_task_fills_batches_up_to_the_batch_size_in_order() {
        for grouping in [Grouping::Shuffle, Grouping::All, Grouping::Global, Grouping::None] {
            let routers = vec![Router::new(grouping.clone(), vec![1], 0)];
            let mut rig = Rig::new(vec![stream("default", 2, false, routers)], 1, 7);
            let values = tuples(20);
            let mut output = rig.output();
            SpoutOutput::emit_many(&mut output, u32::MAX, 3, values[..6].into(), RSlice::default());
            SpoutOutput::emit_many(
                &mut output,
                u32::MAX,
                17,
                values[6..].into(),
                RSlice::default(),
            );
            let sizes: Vec<_> =
                rig.queues[1].as_ref().unwrap().try_iter().map(|b| b.len()).collect();
            assert_eq!(sizes, [7, 7], "{}: full batches are sent at once", grouping.name());
            assert_eq!(rig.stats.get(StatField::Transferred), 14);
            rig.transfer.flush_all(&mut rig.stats);
            let rest: Vec<_> = rig.queues[1].as_ref().unwrap().try_iter().collect();
            assert_eq!(rest.len(), 1);
            assert_eq!(rest[0].len(), 6);
            assert_eq!(rest[0].tuple(5), (0, &values[38..40], &[][..]));
            assert_eq!(rig.stats.get(StatField::Emitted), 20);
        }
    }

    #[test]
    fn emit_many_refuses_a_call_whose_shape_breaks_a_rule_and_emits_nothing() {
        let streams = || {
            vec![
                stream("default", 2, false, vec![Router::new(Grouping::Shuffle, vec![1], 0)]),
                stream("direct", 2, true, vec![Router::new(Grouping::Direct, vec![1], 0)]),
            ]
        };
        let values = tuples(4);
        let ids = [MessageId(1), MessageId(2)];
        // (stream, count, values, ids, what the error says)
        type Case<'a> = (u32, u32, &'a [Value], &'a [MessageId], &'a str);
        let cases: [Case<'_>; 6] = [
            (
                u32::MAX,
                3,
                &values[..],
                &[],
                "emit_many on stream \"default\" of 3 tuples with 8 values",
            ),
            (u32::MAX, 4, &values[..7], &[], "of 4 tuples with 7 values"),
            (u32::MAX, 4, &values[..], &ids, "with 8 values and 2 message ids"),
            (u32::MAX, 0, &values[..2], &[], "of 0 tuples with 2 values"),
            (1, 4, &values[..], &[], "emit_direct on stream \"direct\""),
            (5, 4, &values[..], &[], "emit on undeclared stream #5"),
        ];
        for (stream_id, count, values, ids, message) in cases {
            let mut rig = Rig::new(streams(), 1, 1);
            SpoutOutput::emit_many(&mut rig.output(), stream_id, count, values.into(), ids.into());
            let error = rig.error.take().expect("refused").to_string();
            assert!(error.contains(message), "{error}");
            assert_eq!(rig.stats.get(StatField::Emitted), 0);
            assert!(rig.received().is_empty());
            assert!(rig.tracker.ack_now.is_empty());
        }
        let mut rig = Rig::new(streams(), 1, 1);
        SpoutOutput::emit_many(
            &mut rig.output(),
            u32::MAX,
            0,
            RSlice::default(),
            RSlice::default(),
        );
        assert_eq!(rig.error, None, "an empty call is fine");
    }

    #[test]
    fn emit_many_with_ids_tracks_every_tuple_when_acking_and_acks_at_once_without() {
        let routers = || vec![Router::new(Grouping::All, vec![1, 2], 0)];
        let values = tuples(5);
        let ids: Vec<_> = (10..15).map(MessageId).collect();
        let (acker, inits) = unbounded();
        let mut rig =
            Rig::acking(vec![stream("default", 2, false, routers())], 2, 100, vec![acker]);
        SpoutOutput::emit_many(
            &mut rig.output(),
            u32::MAX,
            5,
            values.as_slice().into(),
            ids.as_slice().into(),
        );
        assert_eq!(rig.error, None);
        assert_eq!(rig.tracker.pending.len(), 5, "one pending root per tuple");
        assert!(rig.tracker.ack_now.is_empty());
        let got = rig.received();
        assert!(got[&1].iter().chain(&got[&2]).all(|(_, _, ids)| *ids == 1), "one edge each");
        assert_eq!((got[&1].len(), got[&2].len()), (5, 5));
        let msgs: usize = inits
            .try_iter()
            .map(|m| match m {
                AckerInput::Msgs(m) => m.len(),
                AckerInput::Tick | AckerInput::Wake | AckerInput::Sync(_) => 0,
            })
            .sum();
        assert_eq!(msgs, 5, "one init per tree");

        let mut rig = Rig::new(vec![stream("default", 2, false, routers())], 2, 100);
        SpoutOutput::emit_many(
            &mut rig.output(),
            u32::MAX,
            5,
            values.as_slice().into(),
            ids.as_slice().into(),
        );
        assert_eq!(rig.tracker.ack_now, ids, "no acker: acked when the call returns");
        assert_eq!(rig.tracker.pending.len(), 0);
        assert_eq!(rig.received()[&2].len(), 5);
    }

    /// A grouping that sends `values[0]` (an integer) to the indexes it
    /// lists: `[i]` is one index, a negative number `-n` is index `n` twice.
    #[derive(Debug)]
    struct Listed;

    impl squall_plugin_api::abi::DynGrouping for Listed {
        fn prepare(
            &mut self,
            _: &squall_plugin_api::abi::GroupingContext,
        ) -> squall_plugin_api::abi::PResult<()> {
            abi_stable::std_types::RResult::ROk(())
        }

        fn choose(
            &mut self,
            values: RSlice<'_, Value>,
            out: &mut abi_stable::std_types::RVec<u32>,
        ) {
            match values.as_slice().first() {
                Some(Value::I64(i)) if *i < 0 => {
                    out.push(i.unsigned_abs() as u32);
                    out.push(i.unsigned_abs() as u32);
                }
                Some(Value::I64(i)) => out.push(*i as u32),
                _ => {}
            }
        }
    }

    fn listed(tasks: Vec<u32>) -> Router {
        extern "C" fn unused(
            _: abi_stable::std_types::RStr<'_>,
        ) -> squall_plugin_api::abi::PResult<squall_plugin_api::abi::ComponentExtBox> {
            unreachable!("the test builds its instance")
        }
        let custom = std::sync::Arc::new(crate::topology::grouping::CustomGrouping {
            name: "t::Listed".into(),
            new: unused,
            config: String::new(),
            source: "source".into(),
            stream: "default".into(),
            fields: Vec::new(),
            target: "sink".into(),
            loc: crate::config::Loc::START,
        });
        let instance = squall_plugin_api::abi::DynGrouping_TO::from_value(
            Listed,
            abi_stable::sabi_trait::TD_Opaque,
        );
        Router::with_instance(Grouping::Custom(custom), tasks, instance)
    }

    /// The acker messages sent so far: (inits, fails).
    fn acker_msgs(rx: &Receiver<AckerInput>) -> (usize, usize) {
        let (mut inits, mut fails) = (0, 0);
        for m in rx.try_iter() {
            if let AckerInput::Msgs(msgs) = m {
                for m in msgs {
                    match m {
                        crate::acker::msg::AckerMsg::Init { .. } => inits += 1,
                        crate::acker::msg::AckerMsg::Fail { .. } => fails += 1,
                        _ => {}
                    }
                }
            }
        }
        (inits, fails)
    }

    #[test]
    fn custom_grouping_out_of_range_index_counts_an_error_and_fails_the_tree() {
        let (acker, rx) = unbounded();
        let streams = vec![stream("default", 1, false, vec![listed(vec![1, 2])])];
        let mut rig = Rig::acking(streams, 2, 100, vec![acker]);
        // index 1 is task 2; index 5 is out of range (two tasks).
        for (i, index) in [1i64, 5, 5, 0].into_iter().enumerate() {
            Output::emit(
                &mut rig.output(),
                u32::MAX,
                [Value::I64(index)][..].into(),
                RSlice::default(),
                ROption::RSome(MessageId(i as u64)),
                ROption::RNone,
            );
        }
        let got = rig.received();
        assert_eq!((got[&1].len(), got[&2].len()), (1, 1), "in-range tuples are delivered");
        assert_eq!(rig.stats.get(StatField::Errors), 2, "each out-of-range index is an error");
        let error = rig.error.take().expect("the call reports the misroute").to_string();
        assert!(error.contains("index 5") && error.contains("t::Listed"), "{error}");
        assert!(rig.tracker.ack_now.is_empty(), "a dropped tuple is not acked");
        assert_eq!(acker_msgs(&rx), (4, 2), "each dropped tuple's tree fails");
    }

    #[test]
    fn custom_grouping_duplicated_index_delivers_once_and_counts_an_error() {
        let (acker, rx) = unbounded();
        let streams = vec![stream("default", 1, false, vec![listed(vec![1, 2])])];
        let mut rig = Rig::acking(streams, 2, 100, vec![acker]);
        Output::emit(
            &mut rig.output(),
            u32::MAX,
            [Value::I64(-1)][..].into(),
            RSlice::default(),
            ROption::RSome(MessageId(7)),
            ROption::RNone,
        );
        let got = rig.received();
        assert_eq!(got.get(&2).map_or(0, Vec::len), 1, "delivered once: {got:?}");
        assert_eq!(rig.stats.get(StatField::Errors), 1);
        assert!(rig.error.take().expect("reported").to_string().contains("twice"));
        assert_eq!(acker_msgs(&rx), (1, 0), "delivered: the tree goes on");
    }
}
