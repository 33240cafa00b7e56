//! Contract 1.2: durable state, state backends and declared close budgets.
//!
//! As 1.1 did, 1.2 adds new types instead of growing frozen ones: the root
//! module's `extensions_1_2` field lists a [`ComponentExt12`] per component
//! whose instances a 1.2 host builds through [`ComponentExt12::new`]. A 1.2
//! object ([`DynSpout12`], [`DynBolt12`]) has every 1.1 method and the 1.2
//! ones after them. A 1.0 or 1.1 library has no such field, and loads and
//! runs as before.
//!
//! A 1.2 bolt also emits through its own output, [`BoltOutput`]: every
//! argument of its emits fits in registers (the 1.0 [`Output`](super::Output)
//! passes two options by value, which spill to the stack on every emit), and
//! `emit_many` hands a run of tuples over in one call, as spouts have had
//! since 1.1.
//!
//! These types are frozen for all of 1.2; a later minor adds its own.

use abi_stable::{
    sabi_trait,
    sabi_types::RMut,
    std_types::{RBox, ROption, RSlice, RStr, RString, RVec},
    StableAbi,
};

use super::ext::{SpoutOutputMut, State, StateEntry, WakerBox, WindowView};
use super::{ComponentKind, PResult, TaskContext, TaskExt};
use crate::{Anchor, MessageId, Tuple, Value};

/// What a 1.2 bolt's `execute` and `execute_window` emit, ack and fail
/// through, implemented by the host.
///
/// Streams are as in [`Output::emit`](super::Output::emit): an index into
/// the declared streams, or `u32::MAX` for `"default"`. Errors (an
/// undeclared stream, a wrong field count, a bad direct task) are recorded
/// by the host and reported when the current call returns.
#[sabi_trait]
pub trait BoltOutput {
    /// Emits one tuple on a non-direct stream, anchored to `anchors`
    /// (empty: untracked; a basic bolt's emits are anchored by the host).
    fn emit(&mut self, stream: u32, values: RSlice<'_, Value>, anchors: RSlice<'_, Anchor>);

    /// Emits one tuple on a direct stream, to task `task`.
    fn emit_direct(
        &mut self,
        stream: u32,
        task: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
    );

    /// Emits `count` tuples on a non-direct stream, each anchored to
    /// `anchors`: `values` holds their values back to back, the stream's
    /// field count each. A call that breaks a rule emits nothing.
    fn emit_many(
        &mut self,
        stream: u32,
        count: u32,
        values: RSlice<'_, Value>,
        anchors: RSlice<'_, Anchor>,
    );

    /// Acks an input tuple.
    fn ack(&mut self, anchor: Anchor);

    /// Fails an input tuple; its whole tree fails at once.
    fn fail(&mut self, anchor: Anchor);

    /// Restarts the message timeout of the tree an input tuple belongs to.
    #[sabi(last_prefix_field)]
    fn reset_timeout(&mut self, anchor: Anchor);
}

/// A borrowed [`BoltOutput`] object, valid for one call.
pub type BoltOutputMut<'a> = BoltOutput_TO<'a, RMut<'a, ()>>;

/// What one store of a bolt changed since the previous checkpoint, or (at
/// a restore) what a checkpoint holds for a task's keys.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct StoreDelta {
    /// The store's name.
    pub store: RString,
    /// Entries written: the key (the grouping fields' values; empty for a
    /// per-task value) and the value's bytes.
    pub entries: RVec<StateEntry>,
    /// Keys deleted (never present at a restore).
    pub removed: RVec<RVec<Value>>,
}

/// A spout instance built through contract 1.2: the 1.1 methods, then the
/// checkpoint ones.
#[sabi_trait]
pub trait DynSpout12: Send {
    /// As [`DynSpoutExt::open`](super::DynSpoutExt::open).
    fn open(&mut self, context: &TaskContext, ext: &TaskExt, waker: WakerBox) -> PResult<bool>;
    /// Storm's `activate`.
    fn activate(&mut self) -> PResult<()>;
    /// Storm's `deactivate`.
    fn deactivate(&mut self) -> PResult<()>;
    /// Emits zero or more tuples through `output`. Must not block.
    fn next_tuple(&mut self, output: SpoutOutputMut<'_>) -> PResult<()>;
    /// The tree of `message_id` completed.
    fn ack(&mut self, message_id: MessageId) -> PResult<()>;
    /// The tree of `message_id` failed or timed out.
    fn fail(&mut self, message_id: MessageId) -> PResult<()>;
    /// Storm's `close`.
    fn close(&mut self) -> PResult<()>;
    /// Saves the instance's state for its successor (`None`: it keeps none).
    fn save_state(&mut self) -> PResult<ROption<State>>;
    /// Takes over a predecessor's state, before `open`.
    fn restore_state(&mut self, state: State) -> PResult<()>;
    /// A checkpoint barrier: the position from which a restart must emit
    /// again, covering every tuple emitted so far (`None`: the spout keeps
    /// no position).
    fn checkpoint(&mut self, checkpoint: u64) -> PResult<ROption<State>>;
    /// Checkpoint `checkpoint` is committed: the effects of every tuple
    /// emitted before its barrier are durable, so the broker may be told.
    fn committed(&mut self, checkpoint: u64) -> PResult<()>;
    /// Takes back the position of the last committed checkpoint, before `open`.
    #[sabi(last_prefix_field)]
    fn restore_checkpoint(&mut self, position: State) -> PResult<()>;
}

/// An owned 1.2 spout object.
pub type Spout12Box = DynSpout12_TO<'static, RBox<()>>;

/// A bolt instance built through contract 1.2: the 1.1 methods, then the
/// durable-state ones.
#[sabi_trait]
pub trait DynBolt12: Send {
    /// As [`DynBoltExt::prepare`](super::DynBoltExt::prepare).
    fn prepare(&mut self, context: &TaskContext, ext: &TaskExt) -> PResult<()>;
    /// Processes one input tuple.
    fn execute(&mut self, input: &Tuple<'_>, output: BoltOutputMut<'_>) -> PResult<()>;
    /// Storm's `cleanup`.
    fn cleanup(&mut self) -> PResult<()>;
    /// A windowed bolt's window.
    fn execute_window(&mut self, window: &WindowView<'_>, output: BoltOutputMut<'_>)
        -> PResult<()>;
    /// Saves the instance's state for its successor (`None`: it keeps none).
    /// A bolt with stores hands them over here too.
    fn save_state(&mut self) -> PResult<ROption<State>>;
    /// Takes over a predecessor's state, before `prepare`.
    fn restore_state(&mut self, state: State) -> PResult<()>;
    /// A checkpoint: what every store changed since the previous one.
    fn checkpoint(&mut self, checkpoint: u64) -> PResult<RVec<StoreDelta>>;
    /// Checkpoint `checkpoint` is committed.
    fn committed(&mut self, checkpoint: u64) -> PResult<()>;
    /// Takes back what the last committed checkpoint holds for this task's
    /// keys, before `prepare`.
    #[sabi(last_prefix_field)]
    fn restore_stores(&mut self, stores: RVec<StoreDelta>) -> PResult<()>;
}

/// An owned 1.2 bolt object.
pub type Bolt12Box = DynBolt12_TO<'static, RBox<()>>;

/// One record a state backend keeps: a key and its value, both opaque
/// bytes the host encodes.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct StateRecord {
    /// The key.
    pub key: RVec<u8>,
    /// The value; `None` in a write deletes the key.
    pub value: ROption<RVec<u8>>,
}

/// The writes of one scope (one store of one component) in a checkpoint.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ScopeWrites {
    /// The scope, `component/store` (or `component/$position` for a
    /// spout's positions).
    pub scope: RString,
    /// The records written or deleted.
    pub records: RVec<StateRecord>,
}

/// A state backend instance (a new component kind in 1.2): where a
/// topology's checkpoints are committed. All calls come from one host
/// thread, one at a time.
#[sabi_trait]
pub trait DynStateBackend: Send {
    /// Connects, for the topology state called `namespace`.
    fn open(&mut self, namespace: RStr<'_>) -> PResult<()>;
    /// The last committed checkpoint (`None`: nothing committed yet).
    fn last_committed(&mut self) -> PResult<ROption<u64>>;
    /// Commits checkpoint `checkpoint` atomically: every write, and the
    /// checkpoint's number, become visible together or not at all.
    fn commit(&mut self, checkpoint: u64, writes: RSlice<'_, ScopeWrites>) -> PResult<()>;
    /// Every record of `scope` as last committed.
    fn load(&mut self, scope: RStr<'_>) -> PResult<RVec<StateRecord>>;
    /// The scopes that hold committed records.
    fn scopes(&mut self) -> PResult<RVec<RString>>;
    /// Deletes the namespace's whole state.
    fn clear(&mut self) -> PResult<()>;
    /// Disconnects.
    #[sabi(last_prefix_field)]
    fn close(&mut self) -> PResult<()>;
}

/// An owned state backend object.
pub type StateBackendBox = DynStateBackend_TO<'static, RBox<()>>;

/// What a contract 1.2 constructor builds.
#[repr(u8)]
#[derive(StableAbi)]
pub enum ComponentBox12 {
    /// A spout.
    Spout(Spout12Box),
    /// A bolt.
    Bolt(Bolt12Box),
    /// A state backend.
    StateBackend(StateBackendBox),
}

impl std::fmt::Debug for ComponentBox12 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ComponentBox12::Spout(_) => "ComponentBox12::Spout",
            ComponentBox12::Bolt(_) => "ComponentBox12::Bolt",
            ComponentBox12::StateBackend(_) => "ComponentBox12::StateBackend",
        })
    }
}

/// A component as contract 1.2 describes it, beside its 1.1 descriptor
/// (same kind and name); state backends have only the 1.1 descriptor's
/// config keys and this one.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct ComponentExt12 {
    /// Spout, bolt or state backend.
    pub kind: ComponentKind,
    /// The component's name.
    pub name: RString,
    /// How long `close` (spouts) or `cleanup` (bolts) may take at shutdown,
    /// in milliseconds (0: not declared; the host's default grace applies).
    pub close_budget_ms: u64,
    /// True for a bolt that keeps durable stores, or a spout that keeps a
    /// checkpoint position.
    pub durable: bool,
    /// Builds an instance through contract 1.2.
    pub new: extern "C" fn(config: RStr<'_>) -> PResult<ComponentBox12>,
    /// A bolt that needs tick tuples: the longest it may go between two,
    /// in milliseconds (`Bolt::TICKS`; 0: it needs none). The host refuses
    /// a topology that gives it no `tick_tuple_freq_secs`, or a longer one.
    pub ticks_ms: u64,
    /// The streams the component emits on (`EMITS`; empty: not declared).
    /// The host refuses a topology whose declared outputs for the
    /// component's config lack one of them.
    pub emits: RVec<RString>,
}
