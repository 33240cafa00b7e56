//! Tuples and the identifiers that travel with them.

use abi_stable::{
    std_types::{RSlice, RStr, RString},
    StableAbi,
};

use crate::Value;

/// The stream that tuples arrive on when they are tick tuples.
pub const TICK_STREAM: &str = "__tick";
/// The component that tick tuples come from.
pub const SYSTEM_COMPONENT: &str = "__system";
/// The name of the default output stream.
pub const DEFAULT_STREAM: &str = "default";

/// A spout's identifier for a message it emitted reliably.
///
/// The host hands it back to the spout's `ack` or `fail` exactly once.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(pub u64);

impl From<u64> for MessageId {
    fn from(id: u64) -> Self {
        MessageId(id)
    }
}

/// One of a component's declared output streams, by position in its declaration.
///
/// Look one up once with [`TaskContext::stream_id`](crate::TaskContext::stream_id)
/// and keep it: emitting by id costs no string comparison.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamId(pub u32);

impl StreamId {
    /// The stream named `"default"`.
    pub const DEFAULT: StreamId = StreamId(u32::MAX);
}

/// A handle on an input tuple, for anchoring emits to it and for acking it.
///
/// It is a plain number, so a bolt can keep it after `execute` returns and ack
/// the tuple later. [`Anchor::NONE`] marks a tuple that is not tracked: acking it
/// does nothing.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Anchor(pub u64);

impl Anchor {
    /// The anchor of an untracked tuple.
    pub const NONE: Anchor = Anchor(0);
}

impl From<&Tuple<'_>> for Anchor {
    fn from(tuple: &Tuple<'_>) -> Self {
        tuple.anchor()
    }
}

/// An input tuple, as a bolt's `execute` sees it.
///
/// The values are borrowed from the host's batch for the duration of the call;
/// use [`Tuple::to_values`] to keep a copy, and [`Tuple::anchor`] to ack later.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct Tuple<'a> {
    values: RSlice<'a, Value>,
    fields: RSlice<'a, RString>,
    source_component: RStr<'a>,
    source_stream: RStr<'a>,
    source_task: u32,
    anchor: Anchor,
}

impl<'a> Tuple<'a> {
    /// Builds a tuple view. The host does this; plugin unit tests can too.
    pub fn new(
        values: &'a [Value],
        fields: &'a [RString],
        source_component: &'a str,
        source_stream: &'a str,
        source_task: u32,
        anchor: Anchor,
    ) -> Self {
        Self {
            values: values.into(),
            fields: fields.into(),
            source_component: source_component.into(),
            source_stream: source_stream.into(),
            source_task,
            anchor,
        }
    }

    /// All values, in the order of the stream's declared fields.
    pub fn values(&self) -> &'a [Value] {
        self.values.as_slice()
    }

    /// The value at `index`.
    pub fn get(&self, index: usize) -> Option<&'a Value> {
        self.values.as_slice().get(index)
    }

    /// The value of the field called `name` (a linear search over the fields).
    pub fn field(&self, name: &str) -> Option<&'a Value> {
        let index = self.fields.iter().position(|f| f.as_str() == name)?;
        self.get(index)
    }

    /// The names of the source stream's fields.
    pub fn fields(&self) -> &'a [RString] {
        self.fields.as_slice()
    }

    /// The component that emitted the tuple.
    pub fn source_component(&self) -> &'a str {
        self.source_component.as_str()
    }

    /// The stream the tuple was emitted on.
    pub fn source_stream(&self) -> &'a str {
        self.source_stream.as_str()
    }

    /// The task that emitted the tuple.
    pub fn source_task(&self) -> u32 {
        self.source_task
    }

    /// The handle for anchoring to and acking this tuple.
    pub fn anchor(&self) -> Anchor {
        self.anchor
    }

    /// True for a tick tuple (stream `__tick` from `__system`).
    pub fn is_tick(&self) -> bool {
        self.source_stream() == TICK_STREAM && self.source_component() == SYSTEM_COMPONENT
    }

    /// An owned copy of the values.
    pub fn to_values(&self) -> Vec<Value> {
        self.values.to_vec()
    }
}
