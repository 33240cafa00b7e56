//! Collectors: how spouts and bolts emit, ack and fail.
//!
//! Emits copy the values into the host's outgoing batch, so a caller may pass
//! a slice on its own stack. Short strings are stored inline in a
//! [`Value`], so a typical emit allocates nothing.

use abi_stable::std_types::ROption;

use crate::abi::{BoltOutputMut, OutputMut, SpoutOutputMut};
use crate::{Anchor, MessageId, Run, StreamId, Tuple, Value};

/// Handed to a spout's `next_tuple`.
///
/// Besides one-tuple emits it offers [`emit_many`](Self::emit_many), which
/// hands a whole run of tuples to the host in one call: a spout that has
/// many tuples at hand (a broker fetch, a file chunk) pays the boundary
/// crossing, the stream lookup and the arity check once per call instead
/// of once per tuple.
pub struct SpoutCollector<'a> {
    output: SpoutOut<'a>,
    emitted: usize,
}

/// The host object behind a [`SpoutCollector`].
enum SpoutOut<'a> {
    /// A contract 1.0 output (a 1.0 host, or a test's recorder): many-tuple
    /// emits are made one tuple at a time.
    V1(OutputMut<'a>),
    /// A contract 1.1 spout output, with `emit_many`.
    Ext(SpoutOutputMut<'a>),
}

impl<'a> SpoutCollector<'a> {
    /// Wraps the host's contract 1.0 output object (also what
    /// [`Recorder::output`](crate::testing::Recorder::output) returns).
    pub fn new(output: OutputMut<'a>) -> Self {
        Self { output: SpoutOut::V1(output), emitted: 0 }
    }

    /// Wraps the host's contract 1.1 spout output object (also what
    /// [`Recorder::spout_output`](crate::testing::Recorder::spout_output)
    /// returns).
    pub fn from_ext(output: SpoutOutputMut<'a>) -> Self {
        Self { output: SpoutOut::Ext(output), emitted: 0 }
    }

    /// How many tuples this collector was asked to emit so far (the host
    /// may still refuse one that breaks a rule).
    pub fn emitted(&self) -> usize {
        self.emitted
    }

    /// Emits an untracked tuple on the default stream.
    pub fn emit(&mut self, values: &[Value]) {
        self.emit_to(StreamId::DEFAULT, values, None);
    }

    /// Emits a tuple on the default stream, tracked under `message_id`: the
    /// spout's `ack` or `fail` receives the id exactly once.
    pub fn emit_with_id(&mut self, values: &[Value], message_id: impl Into<MessageId>) {
        self.emit_to(StreamId::DEFAULT, values, Some(message_id.into()));
    }

    /// Emits on a declared stream, tracked when `message_id` is set.
    pub fn emit_to(&mut self, stream: StreamId, values: &[Value], message_id: Option<MessageId>) {
        self.emit_raw(stream, values, message_id, None);
    }

    /// Emits on a direct stream to one task of a subscribing component.
    pub fn emit_direct(
        &mut self,
        task: u32,
        stream: StreamId,
        values: &[Value],
        message_id: Option<MessageId>,
    ) {
        self.emit_raw(stream, values, message_id, Some(task));
    }

    /// Emits `count` untracked tuples on the default stream in one call.
    /// `values` holds their values back to back: `count` times the stream's
    /// field count. A call whose length does not fit emits nothing and is
    /// counted as an error of the spout, as an emit with the wrong number of
    /// values is.
    ///
    /// ```
    /// # use squall_plugin_api::prelude::*;
    /// # use squall_plugin_api::testing::Recorder;
    /// # let mut recorder = Recorder::default();
    /// # let mut collector = SpoutCollector::new(recorder.output());
    /// let values: Vec<Value> = (0..64_u64).map(Value::U64).collect();
    /// // 64 one-field tuples: values[i] is tuple i's only field.
    /// collector.emit_many(64, &values);
    /// # drop(collector);
    /// # assert_eq!(recorder.emitted.len(), 64);
    /// ```
    pub fn emit_many(&mut self, count: usize, values: &[Value]) {
        self.emit_many_to(StreamId::DEFAULT, count, values, &[]);
    }

    /// Emits one tuple per message id on the default stream in one call,
    /// each tracked under its id (as [`emit_with_id`](Self::emit_with_id)):
    /// `values` holds the tuples' values back to back.
    pub fn emit_many_with_ids(&mut self, values: &[Value], message_ids: &[MessageId]) {
        self.emit_many_to(StreamId::DEFAULT, message_ids.len(), values, message_ids);
    }

    /// Emits `count` tuples on a declared, non-direct stream in one call:
    /// `values` holds their values back to back, and `message_ids` is empty
    /// (untracked) or holds one id per tuple.
    pub fn emit_many_to(
        &mut self,
        stream: StreamId,
        count: usize,
        values: &[Value],
        message_ids: &[MessageId],
    ) {
        match &mut self.output {
            SpoutOut::Ext(output) => {
                self.emitted += count;
                // A count beyond u32 cannot match the values: the host refuses it.
                let count = u32::try_from(count).unwrap_or(u32::MAX);
                output.emit_many(stream.0, count, values.into(), message_ids.into());
            }
            SpoutOut::V1(_) => {
                // One emit per tuple; a call whose shape is wrong emits nothing.
                if count == 0
                    || !values.len().is_multiple_of(count)
                    || !(message_ids.is_empty() || message_ids.len() == count)
                {
                    return;
                }
                let arity = values.len() / count;
                for i in 0..count {
                    let id = message_ids.get(i).copied();
                    self.emit_raw(stream, &values[i * arity..(i + 1) * arity], id, None);
                }
            }
        }
    }

    fn emit_raw(
        &mut self,
        stream: StreamId,
        values: &[Value],
        message_id: Option<MessageId>,
        direct: Option<u32>,
    ) {
        self.emitted += 1;
        match &mut self.output {
            SpoutOut::V1(output) => output.emit(
                stream.0,
                values.into(),
                (&[][..]).into(),
                message_id.into(),
                direct.into(),
            ),
            SpoutOut::Ext(output) => {
                output.emit(stream.0, values.into(), message_id.into(), direct.into());
            }
        }
    }
}

impl std::fmt::Debug for SpoutCollector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpoutCollector")
    }
}

/// The host object behind a bolt's collector.
pub(crate) enum BoltOut<'a> {
    /// A contract 1.0 output (a 1.0 or 1.1 host, the 1.0 and 1.1 build
    /// paths, or a test's recorder): many-tuple emits are made one tuple at
    /// a time.
    V1(OutputMut<'a>),
    /// A contract 1.2 bolt output: emits without options passed by value,
    /// and `emit_many`.
    V12(BoltOutputMut<'a>),
}

impl BoltOut<'_> {
    #[inline]
    fn emit(&mut self, stream: StreamId, values: &[Value], anchors: &[Anchor]) {
        match self {
            BoltOut::V1(o) => {
                o.emit(stream.0, values.into(), anchors.into(), ROption::RNone, ROption::RNone)
            }
            BoltOut::V12(o) => o.emit(stream.0, values.into(), anchors.into()),
        }
    }

    #[inline]
    fn emit_direct(&mut self, task: u32, stream: StreamId, values: &[Value], anchors: &[Anchor]) {
        match self {
            BoltOut::V1(o) => o.emit(
                stream.0,
                values.into(),
                anchors.into(),
                ROption::RNone,
                ROption::RSome(task),
            ),
            BoltOut::V12(o) => o.emit_direct(stream.0, task, values.into(), anchors.into()),
        }
    }

    fn emit_many(&mut self, stream: StreamId, count: usize, values: &[Value], anchors: &[Anchor]) {
        match self {
            BoltOut::V12(o) => {
                // A count beyond u32 cannot match the values: the host refuses it.
                let count = u32::try_from(count).unwrap_or(u32::MAX);
                o.emit_many(stream.0, count, values.into(), anchors.into());
            }
            BoltOut::V1(_) => {
                // One emit per tuple; a call whose shape is wrong emits
                // nothing, as a spout's `emit_many` on a 1.0 output.
                if count == 0 || !values.len().is_multiple_of(count) {
                    return;
                }
                let arity = values.len() / count;
                for i in 0..count {
                    self.emit(stream, &values[i * arity..(i + 1) * arity], anchors);
                }
            }
        }
    }

    // Acking, failing or resetting an untracked input does nothing
    // (`Anchor::NONE`), so those calls never cross the boundary: in a
    // topology without ackers a bolt makes no per-input call back.
    #[inline]
    fn ack(&mut self, anchor: Anchor) {
        match self {
            _ if anchor == Anchor::NONE => {}
            BoltOut::V1(o) => o.ack(anchor),
            BoltOut::V12(o) => o.ack(anchor),
        }
    }

    #[inline]
    fn fail(&mut self, anchor: Anchor) {
        match self {
            _ if anchor == Anchor::NONE => {}
            BoltOut::V1(o) => o.fail(anchor),
            BoltOut::V12(o) => o.fail(anchor),
        }
    }

    fn reset_timeout(&mut self, anchor: Anchor) {
        match self {
            _ if anchor == Anchor::NONE => {}
            BoltOut::V1(o) => o.reset_timeout(anchor),
            BoltOut::V12(o) => o.reset_timeout(anchor),
        }
    }
}

/// Handed to a rich [`Bolt`](crate::Bolt)'s `execute`: it anchors and acks by itself.
///
/// Besides one-tuple emits it offers [`emit_many`](Self::emit_many), which
/// hands a run of tuples anchored alike (the words of one sentence, say) to
/// the host in one call.
pub struct BoltCollector<'a> {
    output: BoltOut<'a>,
}

impl<'a> BoltCollector<'a> {
    /// Wraps the host's contract 1.0 output object (also what
    /// [`Recorder::output`](crate::testing::Recorder::output) returns).
    pub fn new(output: OutputMut<'a>) -> Self {
        Self { output: BoltOut::V1(output) }
    }

    /// Wraps the host's contract 1.2 bolt output object (also what
    /// [`Recorder::bolt_output`](crate::testing::Recorder::bolt_output)
    /// returns).
    pub fn from_bolt_output(output: BoltOutputMut<'a>) -> Self {
        Self { output: BoltOut::V12(output) }
    }

    pub(crate) fn from_out(output: BoltOut<'a>) -> Self {
        Self { output }
    }

    /// Emits on the default stream, anchored to `anchors` (empty = untracked).
    pub fn emit(&mut self, anchors: &[Anchor], values: &[Value]) {
        self.output.emit(StreamId::DEFAULT, values, anchors);
    }

    /// Emits on a declared stream, anchored to `anchors`.
    pub fn emit_to(&mut self, stream: StreamId, anchors: &[Anchor], values: &[Value]) {
        self.output.emit(stream, values, anchors);
    }

    /// Emits on a direct stream to one task, anchored to `anchors`.
    pub fn emit_direct(
        &mut self,
        task: u32,
        stream: StreamId,
        anchors: &[Anchor],
        values: &[Value],
    ) {
        self.output.emit_direct(task, stream, values, anchors);
    }

    /// Emits `count` tuples on the default stream in one call, each
    /// anchored to `anchors`. `values` holds their values back to back:
    /// `count` times the stream's field count. A call whose length does not
    /// fit emits nothing and is counted as an error of the bolt, as an emit
    /// with the wrong number of values is.
    pub fn emit_many(&mut self, anchors: &[Anchor], count: usize, values: &[Value]) {
        self.output.emit_many(StreamId::DEFAULT, count, values, anchors);
    }

    /// Emits `count` tuples on a declared, non-direct stream in one call,
    /// each anchored to `anchors`, as [`emit_many`](Self::emit_many).
    pub fn emit_many_to(
        &mut self,
        stream: StreamId,
        anchors: &[Anchor],
        count: usize,
        values: &[Value],
    ) {
        self.output.emit_many(stream, count, values, anchors);
    }

    /// Acks an input (now or later): its part of the tree is done.
    pub fn ack(&mut self, input: impl Into<Anchor>) {
        self.output.ack(input.into());
    }

    /// Fails an input: its whole tree fails at once and the spout replays it.
    pub fn fail(&mut self, input: impl Into<Anchor>) {
        self.output.fail(input.into());
    }

    /// Restarts the message timeout of the input's tree.
    pub fn reset_timeout(&mut self, input: impl Into<Anchor>) {
        self.output.reset_timeout(input.into());
    }
}

impl std::fmt::Debug for BoltCollector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoltCollector")
    }
}

/// Handed to a [`BasicBolt`](crate::BasicBolt)'s `execute`: every emit is
/// anchored to the input, which is acked when `execute` returns `Ok` and
/// failed when it returns `Err`. (A windowed bolt's emits are anchored to
/// every tuple of its window.)
pub struct BasicCollector<'a> {
    output: BoltOut<'a>,
    /// The input being executed, in a batch (contract 1.3), where the host
    /// does not know which input an emit belongs to: emits are anchored to
    /// it explicitly. Empty when the host anchors them (one call per tuple), or
    /// when the input is not tracked. Emits borrow it in place: a copy of
    /// it, read in one wide load right after `set_input` stored its two
    /// parts, waits for those stores (a store-forwarding stall;
    /// docs/performance.md, "Operator chains").
    anchor: Option<[Anchor; 1]>,
}

impl<'a> BasicCollector<'a> {
    /// Wraps the host's contract 1.0 output object (also what
    /// [`Recorder::output`](crate::testing::Recorder::output) returns).
    pub fn new(output: OutputMut<'a>) -> Self {
        Self { output: BoltOut::V1(output), anchor: None }
    }

    /// Wraps the host's contract 1.2 bolt output object (also what
    /// [`Recorder::bolt_output`](crate::testing::Recorder::bolt_output)
    /// returns).
    pub fn from_bolt_output(output: BoltOutputMut<'a>) -> Self {
        Self { output: BoltOut::V12(output), anchor: None }
    }

    pub(crate) fn from_out(output: BoltOut<'a>) -> Self {
        Self { output, anchor: None }
    }

    /// In a batch: the input the next emits belong to.
    pub(crate) fn set_input(&mut self, anchor: Anchor) {
        // An untracked input's emits are untracked: no anchor to look up.
        self.anchor = (anchor != Anchor::NONE).then_some([anchor]);
    }

    /// Emits on the default stream.
    pub fn emit(&mut self, values: &[Value]) {
        self.output.emit(StreamId::DEFAULT, values, anchor_slice(&self.anchor));
    }

    /// Emits on a declared stream.
    pub fn emit_to(&mut self, stream: StreamId, values: &[Value]) {
        self.output.emit(stream, values, anchor_slice(&self.anchor));
    }

    /// Emits on a direct stream to one task.
    pub fn emit_direct(&mut self, task: u32, stream: StreamId, values: &[Value]) {
        self.output.emit_direct(task, stream, values, anchor_slice(&self.anchor));
    }

    /// Emits `count` tuples on the default stream in one call: `values`
    /// holds their values back to back, `count` times the stream's field
    /// count. A call whose length does not fit emits nothing and is counted
    /// as an error of the bolt.
    ///
    /// ```
    /// # use squall_plugin_api::prelude::*;
    /// # use squall_plugin_api::testing::Recorder;
    /// # let mut recorder = Recorder::default();
    /// # let mut collector = BasicCollector::new(recorder.output());
    /// let words: Vec<Value> = "the cow jumped".split(' ').map(Value::from).collect();
    /// // One one-field tuple per word of the sentence, in one call.
    /// collector.emit_many(words.len(), &words);
    /// # drop(collector);
    /// # assert_eq!(recorder.first_strings(), ["the", "cow", "jumped"]);
    /// ```
    pub fn emit_many(&mut self, count: usize, values: &[Value]) {
        self.output.emit_many(StreamId::DEFAULT, count, values, anchor_slice(&self.anchor));
    }

    /// Emits `count` tuples on a declared, non-direct stream in one call,
    /// as [`emit_many`](Self::emit_many).
    pub fn emit_many_to(&mut self, stream: StreamId, count: usize, values: &[Value]) {
        self.output.emit_many(stream, count, values, anchor_slice(&self.anchor));
    }

    /// Restarts the message timeout of the input's tree.
    pub fn reset_timeout(&mut self, input: impl Into<Anchor>) {
        self.output.reset_timeout(input.into());
    }
}

/// Handed to a [`BasicBolt`](crate::BasicBolt)'s `execute_batch` (contract
/// 1.3): a run of inputs in one call, whose emits the host does not anchor
/// for the bolt. Every emit names the input it belongs to, so it is
/// anchored exactly as it would be in one `execute` call per input:
/// through [`for_input`](Self::for_input), a [`BasicCollector`] for one
/// input, or [`emit_each`](Self::emit_each), one tuple per input of a run.
/// The host acks the inputs taken from [`Inputs`](crate::Inputs) when the
/// call returns, as it acks each input whose `execute` returned `Ok`.
pub struct BasicBatchCollector<'a> {
    basic: BasicCollector<'a>,
}

impl<'a> BasicBatchCollector<'a> {
    /// Wraps the host's contract 1.0 output object (also what
    /// [`Recorder::output`](crate::testing::Recorder::output) returns):
    /// `emit_each` then emits the tuples one by one.
    pub fn new(output: OutputMut<'a>) -> Self {
        Self { basic: BasicCollector::new(output) }
    }

    /// Wraps the host's contract 1.2 bolt output object (also what
    /// [`Recorder::bolt_output`](crate::testing::Recorder::bolt_output)
    /// returns).
    pub fn from_bolt_output(output: BoltOutputMut<'a>) -> Self {
        Self { basic: BasicCollector::from_bolt_output(output) }
    }

    pub(crate) fn from_out(output: BoltOut<'a>) -> Self {
        Self { basic: BasicCollector::from_out(output) }
    }

    /// The collector for `input`'s emits: each is anchored to it (not at
    /// all when it is untracked), as in `execute(input, collector)`.
    #[inline]
    pub fn for_input(&mut self, input: &Tuple<'_>) -> &mut BasicCollector<'a> {
        self.basic.set_input(input.anchor());
        &mut self.basic
    }

    /// Emits one tuple per input of `inputs` on the default stream:
    /// `values` holds them back to back, the same number of values for
    /// each (so `values.len()` is `inputs.len()` times the stream's field
    /// count), and tuple `i` is anchored to input `i`, as
    /// `for_input(&input).emit(..)` would anchor it. A row of untracked
    /// inputs (a topology without ackers: every input) goes to the host in
    /// one `emit_many` call; a tracked input's tuple in an `emit` of its
    /// own. A call whose length does not split evenly emits nothing and is
    /// counted as an error of the bolt, as `emit_many`'s is.
    ///
    /// A bolt that re-emits its inputs unchanged passes
    /// [`Run::values`](crate::Run::values): the plugin makes no copy of its
    /// own, and the host copies the values once, from its incoming batch
    /// into its outgoing one.
    ///
    /// ```
    /// # use squall_plugin_api::prelude::*;
    /// # use squall_plugin_api::testing::{Recorder, TestRun};
    /// let mut run = TestRun::new("numbers");
    /// run.push(&[Value::U64(1)], Anchor::NONE).push(&[Value::U64(2)], Anchor::NONE);
    /// let mut recorder = Recorder::default();
    /// let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
    /// // Every input once more, doubled: one call for the untracked run.
    /// let inputs = run.run();
    /// let doubled: Vec<Value> =
    ///     inputs.iter().map(|t| Value::U64(2 * t.values()[0].as_u64().unwrap())).collect();
    /// collector.emit_each(&inputs, &doubled);
    /// # drop(collector);
    /// # assert_eq!(recorder.emit_many_calls, [2]);
    /// ```
    pub fn emit_each(&mut self, inputs: &Run<'_>, values: &[Value]) {
        self.emit_each_to(StreamId::DEFAULT, inputs, values);
    }

    /// Emits one tuple per input on a declared, non-direct stream, as
    /// [`emit_each`](Self::emit_each).
    pub fn emit_each_to(&mut self, stream: StreamId, inputs: &Run<'_>, values: &[Value]) {
        let count = inputs.len();
        let fits = if count == 0 { values.is_empty() } else { values.len().is_multiple_of(count) };
        if !fits {
            // The host refuses it, and counts the error, as it does a
            // mis-shaped `emit_many`.
            self.basic.output.emit_many(stream, count, values, &[]);
            return;
        }
        let Some(arity) = values.len().checked_div(count) else { return };
        if !inputs.tracks_any() {
            self.basic.output.emit_many(stream, count, values, &[]);
            return;
        }
        let mut start = 0;
        while start < count {
            let anchor = inputs.anchor(start);
            if anchor != Anchor::NONE {
                let tuple = &values[start * arity..(start + 1) * arity];
                self.basic.output.emit(stream, tuple, &[anchor]);
                start += 1;
                continue;
            }
            // A row of untracked inputs: their tuples carry no anchor.
            let end = (start..count).find(|&i| inputs.anchor(i) != Anchor::NONE).unwrap_or(count);
            let run = &values[start * arity..end * arity];
            self.basic.output.emit_many(stream, end - start, run, &[]);
            start = end;
        }
    }
}

impl std::fmt::Debug for BasicBatchCollector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BasicBatchCollector")
    }
}

/// The anchors a basic bolt's emit carries: none when the host anchors it.
#[inline]
fn anchor_slice(anchor: &Option<[Anchor; 1]>) -> &[Anchor] {
    anchor.as_ref().map_or(&[], |a| &a[..])
}

impl std::fmt::Debug for BasicCollector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BasicCollector")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Recorder;

    fn words(words: &[&str]) -> Vec<Value> {
        words.iter().map(|w| Value::from(*w)).collect()
    }

    #[test]
    fn settling_an_untracked_input_never_reaches_the_host() {
        let mut recorder = Recorder::default();
        let mut collector = BoltCollector::from_bolt_output(recorder.bolt_output());
        for anchor in [Anchor::NONE, Anchor(5)] {
            collector.ack(anchor);
            collector.fail(anchor);
            collector.reset_timeout(anchor);
        }
        drop(collector);
        assert_eq!(
            (recorder.acked, recorder.failed, recorder.reset),
            (vec![Anchor(5)], vec![Anchor(5)], vec![Anchor(5)])
        );
        let mut recorder = Recorder::default();
        let mut collector = BoltCollector::new(recorder.output());
        collector.ack(Anchor::NONE);
        collector.ack(Anchor(6));
        drop(collector);
        assert_eq!(recorder.acked, [Anchor(6)], "a 1.0 output too");
    }

    #[test]
    fn emit_many_reaches_a_1_1_output_as_one_call_with_every_tuple() {
        let values = words(&["a", "1", "b", "2", "c", "3"]);
        let mut recorder = Recorder::default();
        let mut collector = SpoutCollector::from_ext(recorder.spout_output());
        collector.emit_many(3, &values);
        collector.emit_many_with_ids(&values[..4], &[MessageId(7), MessageId(8)]);
        collector.emit(&values[..2]);
        drop(collector);
        assert_eq!(recorder.emit_many_calls, [3, 2]);
        let tuples: Vec<_> = recorder.emitted.iter().map(|e| e.values.clone()).collect();
        assert_eq!(
            tuples,
            [
                &values[0..2],
                &values[2..4],
                &values[4..6],
                &values[0..2],
                &values[2..4],
                &values[0..2]
            ]
        );
        let ids: Vec<_> = recorder.emitted.iter().map(|e| e.message_id).collect();
        assert_eq!(ids, [None, None, None, Some(MessageId(7)), Some(MessageId(8)), None]);
    }

    #[test]
    fn emit_many_on_a_1_0_output_emits_the_tuples_one_by_one() {
        let values = words(&["a", "1", "b", "2"]);
        let mut recorder = Recorder::default();
        let mut collector = SpoutCollector::new(recorder.output());
        collector.emit_many_to(StreamId(1), 2, &values, &[MessageId(1), MessageId(2)]);
        // Shapes that cannot be split emit nothing.
        collector.emit_many(3, &values);
        collector.emit_many_with_ids(&values, &[MessageId(3), MessageId(4), MessageId(5)]);
        drop(collector);
        assert!(recorder.emit_many_calls.is_empty());
        assert_eq!(recorder.emitted.len(), 2);
        assert_eq!(recorder.emitted[1].values, &values[2..]);
        assert_eq!(recorder.emitted[1].stream, 1);
        assert_eq!(recorder.emitted[1].message_id, Some(MessageId(2)));
    }

    /// Two-value inputs, with these anchors (0: untracked).
    fn run_of(anchors: &[u64], values: &[Value]) -> crate::testing::TestRun {
        let mut run = crate::testing::TestRun::new("up");
        for (i, &a) in anchors.iter().enumerate() {
            let anchor = if a == 0 { Anchor::NONE } else { Anchor(a) };
            run.push(&values[2 * i..2 * i + 2], anchor);
        }
        run
    }

    #[test]
    fn emit_each_anchors_every_tuple_to_its_input_and_sends_untracked_rows_in_one_call() {
        let values = words(&["a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6"]);
        let inputs = run_of(&[0, 0, 5, 0, 7, 0], &values);
        let mut recorder = Recorder::default();
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        collector.emit_each(&inputs.run(), &values);
        drop(collector);
        assert_eq!(recorder.emit_many_calls, [2, 1, 1], "one call per untracked row");
        let anchors: Vec<_> = recorder.emitted.iter().map(|e| e.anchors.clone()).collect();
        let none = Vec::new;
        assert_eq!(
            anchors,
            [none(), none(), vec![Anchor(5)], none(), vec![Anchor(7)], none()],
            "as for_input(input).emit(..) per input"
        );
        let tuples: Vec<_> = recorder.emitted.iter().map(|e| e.values.clone()).collect();
        let expected: Vec<_> = values.chunks(2).map(<[Value]>::to_vec).collect();
        assert_eq!(tuples, expected);

        // A run with no tracked input: one call for all of it.
        let inputs = run_of(&[0; 6], &values);
        let mut recorder = Recorder::default();
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        collector.emit_each(&inputs.run(), &values);
        drop(collector);
        assert_eq!(recorder.emit_many_calls, [6]);
        assert!(recorder.emitted.iter().all(|e| e.anchors.is_empty()));
    }

    #[test]
    fn emit_each_refuses_values_that_do_not_split_over_the_inputs() {
        let values = words(&["a", "1", "b", "2"]);
        let inputs = run_of(&[0, 3], &values);
        let inputs = inputs.run();
        let mut recorder = Recorder::default();
        let mut collector = BasicBatchCollector::from_bolt_output(recorder.bolt_output());
        collector.emit_each(&inputs, &values[..3]);
        collector.emit_each(&inputs.range(0..0), &values[..1]);
        collector.emit_each(&inputs.range(0..0), &[]);
        drop(collector);
        assert_eq!((recorder.refused, recorder.emitted.len()), (2, 0));
        // On a 1.0 output, one emit per tuple, anchored alike.
        let mut recorder = Recorder::default();
        let mut collector = BasicBatchCollector::new(recorder.output());
        collector.emit_each(&inputs, &values);
        collector.for_input(&inputs.get(1).unwrap()).emit(&values[..2]);
        drop(collector);
        let anchors: Vec<_> = recorder.emitted.iter().map(|e| e.anchors.clone()).collect();
        assert_eq!(anchors, [vec![], vec![Anchor(3)], vec![Anchor(3)]]);
    }

    #[test]
    fn the_recorder_refuses_an_emit_many_that_does_not_split_evenly() {
        let values = words(&["a", "b", "c"]);
        let mut recorder = Recorder::default();
        let mut collector = SpoutCollector::from_ext(recorder.spout_output());
        collector.emit_many(2, &values);
        collector.emit_many_with_ids(&values, &[MessageId(1), MessageId(2)]);
        drop(collector);
        assert_eq!(recorder.refused, 2);
        assert!(recorder.emitted.is_empty());
    }
}
