//! Contract 1.1: what a 1.1 library exports beside its 1.0 catalogue.
//!
//! abi_stable refuses a library whose prefix types (the root module and every
//! `#[sabi_trait]` vtable) have fewer fields than the host's, so the 1.0
//! types ([`DynSpout`](super::DynSpout), [`DynBolt`](super::DynBolt),
//! [`Output`](super::Output), [`ComponentDescriptor`](super::ComponentDescriptor))
//! are frozen: growing them would make every 1.0 library fail the check. Contract
//! 1.1 adds new types instead, reached only through the root module's
//! `extensions` field, which a 1.0 library does not have. A 1.1 host builds a
//! component through its [`ComponentExt`] when the library has one, and through
//! the 1.0 descriptor otherwise.
//!
//! These types are frozen for all of 1.1 in turn; a later minor adds its own.

use abi_stable::{
    sabi_trait,
    sabi_types::RMut,
    std_types::{RArc, RBox, ROption, RSlice, RStr, RString, RVec},
    StableAbi,
};

use super::{ComponentKind, InputDecl, OutputMut, PResult, TaskContext, TaskExt};
use crate::{MessageId, StreamDecl, Tuple, Value};

/// What a 1.1 spout's `next_tuple` emits through, implemented by the host:
/// the 1.0 [`Output`](super::Output)'s emit, and `emit_many`, which hands
/// over many tuples in one call (one boundary crossing, one stream lookup
/// and one arity check for all of them).
#[sabi_trait]
pub trait SpoutOutput {
    /// Emits one tuple, as [`Output::emit`](super::Output::emit) without
    /// anchors: `stream` is an index into the declared streams or `u32::MAX`
    /// for `"default"`, `message_id` tracks it, `direct_task` is set for
    /// `emit_direct`.
    fn emit(
        &mut self,
        stream: u32,
        values: RSlice<'_, Value>,
        message_id: ROption<MessageId>,
        direct_task: ROption<u32>,
    );

    /// Emits `count` tuples on `stream` (not a direct stream): `values`
    /// holds their values back to back, the stream's field count each, so
    /// its length must be `count` times that. `message_ids` is empty
    /// (untracked) or holds one id per tuple. A call that breaks a rule
    /// emits nothing; the error is recorded as for `emit`.
    #[sabi(last_prefix_field)]
    fn emit_many(
        &mut self,
        stream: u32,
        count: u32,
        values: RSlice<'_, Value>,
        message_ids: RSlice<'_, MessageId>,
    );
}

/// A borrowed [`SpoutOutput`] object, valid for one `next_tuple` call.
pub type SpoutOutputMut<'a> = SpoutOutput_TO<'a, RMut<'a, ()>>;

/// A wake handle, implemented by the host: `wake` tells a spout's executor
/// that `next_tuple` has something to emit.
#[sabi_trait]
pub trait DynWaker: Send + Sync + Clone {
    /// Wakes the executor if it is blocked; cheap when it is not.
    #[sabi(last_prefix_field)]
    fn wake(&self);
}

/// An owned, cloneable wake handle.
pub type WakerBox = DynWaker_TO<'static, RArc<()>>;

/// One piece of a component's saved state.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct StateEntry {
    /// The key this entry belongs to: the values of the fields the
    /// component's input is grouped by, in grouping order. Empty for state
    /// that belongs to the instance as a whole.
    pub key: RVec<Value>,
    /// The entry, in the component's own encoding.
    pub bytes: RVec<u8>,
}

/// A component's saved state: a format tag and its entries.
///
/// When a component is replaced, the new instance receives the old one's
/// state. Keyed entries go to the task that the fields grouping routes their
/// key to, so state follows its keys when the parallelism changes.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct State {
    /// A version tag of the encoding, e.g. `"word-count/1"`. A component
    /// refuses a format it does not know.
    pub format: RString,
    /// The entries.
    pub entries: RVec<StateEntry>,
}

impl State {
    /// The format of the position a durable topology hands a spout's
    /// `restore_checkpoint` when no checkpoint has been committed yet
    /// (contract 1.2): see [`State::no_checkpoint`].
    pub const NO_CHECKPOINT: &'static str = "squall-no-checkpoint";

    /// An empty state in `format`.
    pub fn new(format: &str) -> Self {
        Self { format: format.into(), entries: RVec::new() }
    }

    /// The position of a fresh start (contract 1.2). In a topology with
    /// `[state]`, the host calls `restore_checkpoint` on every task of a
    /// spout that keeps positions before `open`: with the last committed
    /// checkpoint's position, or with this when none was committed. Either
    /// way the spout knows that its broker acks must wait for `committed`.
    pub fn no_checkpoint() -> Self {
        Self::new(Self::NO_CHECKPOINT)
    }

    /// True for [`State::no_checkpoint`].
    pub fn is_no_checkpoint(&self) -> bool {
        self.format == Self::NO_CHECKPOINT
    }

    /// Adds an entry for `key` (empty for the whole instance).
    pub fn push(&mut self, key: &[Value], bytes: Vec<u8>) -> &mut Self {
        self.entries.push(StateEntry { key: key.into(), bytes: bytes.into() });
        self
    }
}

/// A spout instance built through contract 1.1.
#[sabi_trait]
pub trait DynSpoutExt: Send {
    /// Storm's `open`, with the 1.1 settings and a wake handle. Returns true
    /// when the spout took the wake handle (it will wake its executor).
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
    #[sabi(last_prefix_field)]
    fn restore_state(&mut self, state: State) -> PResult<()>;
}

/// An owned 1.1 spout object.
pub type SpoutExtBox = DynSpoutExt_TO<'static, RBox<()>>;

/// One window of a windowed bolt, as the host hands it over: every tuple in
/// the window, the tuples that entered it since the last window, and the
/// ones that left it. The views borrow the host's window buffer for the call.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct WindowView<'a> {
    /// Every tuple in the window, oldest first.
    pub tuples: RSlice<'a, Tuple<'a>>,
    /// The tuples that entered the window since the previous one.
    pub new_tuples: RSlice<'a, Tuple<'a>>,
    /// The tuples that left the window since the previous one.
    pub expired: RSlice<'a, Tuple<'a>>,
    /// The window's start: milliseconds since the Unix epoch (event time for
    /// event-time windows, arrival time otherwise); 0 for count windows.
    pub start_millis: u64,
    /// The window's end, as `start_millis`.
    pub end_millis: u64,
}

/// A bolt instance built through contract 1.1.
#[sabi_trait]
pub trait DynBoltExt: Send {
    /// Storm's `prepare`, with the 1.1 settings.
    fn prepare(&mut self, context: &TaskContext, ext: &TaskExt) -> PResult<()>;
    /// Processes one input tuple.
    fn execute(&mut self, input: &Tuple<'_>, output: OutputMut<'_>) -> PResult<()>;
    /// Storm's `cleanup`.
    fn cleanup(&mut self) -> PResult<()>;
    /// A windowed bolt's window (only for components whose [`ComponentExt`]
    /// says `windowed`). Emits are anchored by the host to every tuple of
    /// the window; the host acks each tuple when it leaves its last window.
    fn execute_window(&mut self, window: &WindowView<'_>, output: OutputMut<'_>) -> PResult<()>;
    /// Saves the instance's state for its successor (`None`: it keeps none).
    fn save_state(&mut self) -> PResult<ROption<State>>;
    /// Takes over a predecessor's state, before `prepare`.
    #[sabi(last_prefix_field)]
    fn restore_state(&mut self, state: State) -> PResult<()>;
}

/// An owned 1.1 bolt object.
pub type BoltExtBox = DynBoltExt_TO<'static, RBox<()>>;

/// Where a custom grouping routes: the subscribing component's tasks.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct GroupingContext {
    /// The component that sends.
    pub source: RString,
    /// The stream it sends on.
    pub stream: RString,
    /// The stream's fields.
    pub fields: RVec<RString>,
    /// The component that receives.
    pub target: RString,
    /// Its task ids, in task-index order; `choose` returns indexes into them.
    pub targets: RVec<u32>,
}

/// A custom stream grouping (Storm's `CustomStreamGrouping`), one instance
/// per sending task and subscription.
#[sabi_trait]
pub trait DynGrouping: Send {
    /// Called once, before the first tuple.
    fn prepare(&mut self, context: &GroupingContext) -> PResult<()>;
    /// Chooses the targets of one tuple: pushes indexes into
    /// `GroupingContext::targets` onto `out` (which arrives empty).
    #[sabi(last_prefix_field)]
    fn choose(&mut self, values: RSlice<'_, Value>, out: &mut RVec<u32>);
}

/// An owned grouping object.
pub type GroupingBox = DynGrouping_TO<'static, RBox<()>>;

/// What a contract 1.1 constructor builds.
#[repr(u8)]
#[derive(StableAbi)]
pub enum ComponentExtBox {
    /// A spout.
    Spout(SpoutExtBox),
    /// A bolt.
    Bolt(BoltExtBox),
    /// A custom grouping.
    Grouping(GroupingBox),
}

impl std::fmt::Debug for ComponentExtBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ComponentExtBox::Spout(_) => "ComponentExtBox::Spout",
            ComponentExtBox::Bolt(_) => "ComponentExtBox::Bolt",
            ComponentExtBox::Grouping(_) => "ComponentExtBox::Grouping",
        })
    }
}

/// One declared config key of a component.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ConfigKeyDecl {
    /// The key.
    pub name: RString,
    /// Its TOML type: `string`, `integer`, `float`, `bool`, `array`, `table`,
    /// `duration` (a string such as `"5s"`), or `any`.
    pub kind: RString,
    /// The default as TOML text (empty when the key is required).
    pub default: RString,
    /// True when the key must be given.
    pub required: bool,
    /// A one-line description.
    pub doc: RString,
}

/// A component as contract 1.1 describes it, beside its 1.0 descriptor.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct ComponentExt {
    /// Spout, bolt, wait strategy or grouping.
    pub kind: ComponentKind,
    /// The component's name (as in its 1.0 descriptor, if it has one).
    pub name: RString,
    /// A one-line description.
    pub description: RString,
    /// True when the component declared its config keys: then `validate`
    /// reports every other key as unknown.
    pub declares_config: bool,
    /// The declared config keys.
    pub config_keys: RVec<ConfigKeyDecl>,
    /// The fields the component expects on every input stream (bolts).
    pub input_fields: RVec<RString>,
    /// True for a basic bolt: the host anchors its emits and acks its inputs.
    pub auto_ack: bool,
    /// True for a windowed bolt: the host buffers its inputs into the
    /// windows its topology entry configures and calls `execute_window`.
    pub windowed: bool,
    /// True for a spout whose message ids can be acked or failed by the
    /// instance that replaces it in a live swap: the swap hands its pending
    /// trees over instead of draining them (`Spout::IDS_SURVIVE_SWAP`).
    pub ids_survive_swap: bool,
    /// The output streams for a given config (outputs may depend on config).
    pub declare_outputs: extern "C" fn(config: RStr<'_>) -> PResult<RVec<StreamDecl>>,
    /// Checks the subscribed inputs; an error refuses the topology at
    /// validate time.
    pub check_inputs: extern "C" fn(config: RStr<'_>, inputs: RSlice<'_, InputDecl>) -> PResult<()>,
    /// Builds an instance (`None` for wait strategies: their 1.0 constructor serves).
    pub new: ROption<extern "C" fn(config: RStr<'_>) -> PResult<ComponentExtBox>>,
}
