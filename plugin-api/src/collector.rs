//! Collectors: how spouts and bolts emit, ack and fail.
//!
//! Emits copy the values into the host's outgoing batch, so a caller may pass
//! a slice on its own stack. Short strings are stored inline in a
//! [`Value`], so a typical emit allocates nothing.

use abi_stable::std_types::ROption;

use crate::abi::OutputMut;
use crate::{Anchor, MessageId, StreamId, Value};

/// Handed to a spout's `next_tuple`.
pub struct SpoutCollector<'a> {
    output: OutputMut<'a>,
}

impl<'a> SpoutCollector<'a> {
    /// Wraps the host's output object.
    pub fn new(output: OutputMut<'a>) -> Self {
        Self { output }
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
        self.output.emit(
            stream.0,
            values.into(),
            (&[][..]).into(),
            message_id.into(),
            ROption::RNone,
        );
    }

    /// Emits on a direct stream to one task of a subscribing component.
    pub fn emit_direct(
        &mut self,
        task: u32,
        stream: StreamId,
        values: &[Value],
        message_id: Option<MessageId>,
    ) {
        self.output.emit(
            stream.0,
            values.into(),
            (&[][..]).into(),
            message_id.into(),
            ROption::RSome(task),
        );
    }
}

impl std::fmt::Debug for SpoutCollector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpoutCollector")
    }
}

/// Handed to a rich [`Bolt`](crate::Bolt)'s `execute`: it anchors and acks by itself.
pub struct BoltCollector<'a> {
    output: OutputMut<'a>,
}

impl<'a> BoltCollector<'a> {
    /// Wraps the host's output object.
    pub fn new(output: OutputMut<'a>) -> Self {
        Self { output }
    }

    /// Emits on the default stream, anchored to `anchors` (empty = untracked).
    pub fn emit(&mut self, anchors: &[Anchor], values: &[Value]) {
        self.emit_to(StreamId::DEFAULT, anchors, values);
    }

    /// Emits on a declared stream, anchored to `anchors`.
    pub fn emit_to(&mut self, stream: StreamId, anchors: &[Anchor], values: &[Value]) {
        self.output.emit(stream.0, values.into(), anchors.into(), ROption::RNone, ROption::RNone);
    }

    /// Emits on a direct stream to one task, anchored to `anchors`.
    pub fn emit_direct(
        &mut self,
        task: u32,
        stream: StreamId,
        anchors: &[Anchor],
        values: &[Value],
    ) {
        self.output.emit(
            stream.0,
            values.into(),
            anchors.into(),
            ROption::RNone,
            ROption::RSome(task),
        );
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
/// failed when it returns `Err`.
pub struct BasicCollector<'a> {
    output: OutputMut<'a>,
}

impl<'a> BasicCollector<'a> {
    /// Wraps the host's output object.
    pub fn new(output: OutputMut<'a>) -> Self {
        Self { output }
    }

    /// Emits on the default stream.
    pub fn emit(&mut self, values: &[Value]) {
        self.emit_to(StreamId::DEFAULT, values);
    }

    /// Emits on a declared stream.
    pub fn emit_to(&mut self, stream: StreamId, values: &[Value]) {
        self.output.emit(stream.0, values.into(), (&[][..]).into(), ROption::RNone, ROption::RNone);
    }

    /// Emits on a direct stream to one task.
    pub fn emit_direct(&mut self, task: u32, stream: StreamId, values: &[Value]) {
        self.output.emit(
            stream.0,
            values.into(),
            (&[][..]).into(),
            ROption::RNone,
            ROption::RSome(task),
        );
    }

    /// Restarts the message timeout of the input's tree.
    pub fn reset_timeout(&mut self, input: impl Into<Anchor>) {
        self.output.reset_timeout(input.into());
    }
}

impl std::fmt::Debug for BasicCollector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BasicCollector")
    }
}
