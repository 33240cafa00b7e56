//! Contract 1.3: batches across the boundary, and group coordinators.
//!
//! As 1.1 and 1.2 did, 1.3 adds new types instead of growing frozen ones:
//! the root module's `extensions_1_3` field lists a [`ComponentExt13`] per
//! component whose instances a 1.3 host builds through
//! [`ComponentExt13::new`]. A 1.3 spout or bolt object has every 1.2 method
//! and one batch entry point after them:
//!
//! - [`DynBolt13::execute_batch`] takes a run of input tuples in one call;
//!   [`DynBolt13::set_waker`] and [`DynBolt13::woken`] give a bolt a wake
//!   handle, as spouts have had since 1.1;
//! - [`DynSpout13::next_batch`] may emit up to a given number of tuples in
//!   one call.
//!
//! A group coordinator ([`DynCoordinator`]) is a new component kind: it
//! decides which of a group's partitions this host runs, and the fencing
//! epoch of each.
//!
//! A bolt's descriptor may also list the durable stores it keeps
//! ([`StoreDecl`]), so that `squall inspect` names them and `squall
//! validate` checks a keyed store's inputs before anything runs.
//!
//! A 1.0, 1.1 or 1.2 library has no `extensions_1_3` field, and loads and
//! runs as before: the host calls it once per tuple. These types are frozen
//! for all of 1.3; a later minor adds its own.

use abi_stable::{
    sabi_trait,
    std_types::{RBox, ROption, RStr, RString, RVec},
    StableAbi,
};

use super::ext::{SpoutOutputMut, State, WakerBox, WindowView};
use super::v1_2::{BoltOutputMut, StoreDelta};
use super::{ComponentKind, PResult, TaskContext, TaskExt};
use crate::{MessageId, RunView, Tuple};

/// A spout instance built through contract 1.3: the 1.2 methods, then
/// `next_batch`.
#[sabi_trait]
pub trait DynSpout13: Send {
    /// As [`DynSpout12::open`](super::DynSpout12::open).
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
    /// Saves the instance's state for its successor.
    fn save_state(&mut self) -> PResult<ROption<State>>;
    /// Takes over a predecessor's state, before `open`.
    fn restore_state(&mut self, state: State) -> PResult<()>;
    /// A checkpoint barrier: the spout's position.
    fn checkpoint(&mut self, checkpoint: u64) -> PResult<ROption<State>>;
    /// Checkpoint `checkpoint` is committed.
    fn committed(&mut self, checkpoint: u64) -> PResult<()>;
    /// Takes back the position of the last committed checkpoint, before `open`.
    fn restore_checkpoint(&mut self, position: State) -> PResult<()>;
    /// Emits up to `max` tuples through `output` in one call (more are
    /// refused by no one, but break the host's max-spout-pending and
    /// batch bounds). Must not block. Returns when it has nothing more to
    /// emit now.
    #[sabi(last_prefix_field)]
    fn next_batch(&mut self, max: u32, output: SpoutOutputMut<'_>) -> PResult<()>;
}

/// An owned 1.3 spout object.
pub type Spout13Box = DynSpout13_TO<'static, RBox<()>>;

/// A bolt instance built through contract 1.3: the 1.2 methods, then
/// `execute_batch`.
#[sabi_trait]
pub trait DynBolt13: Send {
    /// As [`DynBolt12::prepare`](super::DynBolt12::prepare).
    fn prepare(&mut self, context: &TaskContext, ext: &TaskExt) -> PResult<()>;
    /// Processes one input tuple.
    fn execute(&mut self, input: &Tuple<'_>, output: BoltOutputMut<'_>) -> PResult<()>;
    /// Storm's `cleanup`.
    fn cleanup(&mut self) -> PResult<()>;
    /// A windowed bolt's window.
    fn execute_window(&mut self, window: &WindowView<'_>, output: BoltOutputMut<'_>)
        -> PResult<()>;
    /// Saves the instance's state for its successor.
    fn save_state(&mut self) -> PResult<ROption<State>>;
    /// Takes over a predecessor's state, before `prepare`.
    fn restore_state(&mut self, state: State) -> PResult<()>;
    /// A checkpoint: what every store changed since the previous one.
    fn checkpoint(&mut self, checkpoint: u64) -> PResult<RVec<StoreDelta>>;
    /// Checkpoint `checkpoint` is committed.
    fn committed(&mut self, checkpoint: u64) -> PResult<()>;
    /// Takes back what the last committed checkpoint holds, before `prepare`.
    fn restore_stores(&mut self, stores: RVec<StoreDelta>) -> PResult<()>;
    /// Processes a run of input tuples, in order, in one call.
    ///
    /// The run comes as one [`RunView`] (values back to back, a header
    /// and an anchor per input), not a tuple per input: the plugin builds
    /// the tuples it reads.
    ///
    /// Emits are anchored explicitly. A rich bolt acks or fails each input
    /// through `output`; a basic bolt's inputs are acked by the host, once
    /// the call returns, up to where the bolt got. `taken` counts the
    /// inputs the bolt has begun: on return it says how far the bolt got.
    /// On an error or a panic, input `taken - 1` (the one being executed;
    /// input 0 when none was taken) fails, and the inputs after it are
    /// handed to the next call, so that every input is executed once, as
    /// one call per tuple would.
    #[sabi(last_prefix_field)]
    fn execute_batch(
        &mut self,
        inputs: RunView<'_>,
        output: BoltOutputMut<'_>,
        taken: &mut u32,
    ) -> PResult<()>;
    /// Hands the bolt its wake handle, before `prepare`: the plugin's
    /// `TaskContext::waker` returns it. A wake makes the host call
    /// [`woken`](Self::woken) on the bolt's thread.
    fn set_waker(&mut self, waker: WakerBox) -> PResult<()>;
    /// The wake handle was called since the last `woken`: the bolt may ack,
    /// fail and emit through `output`, with no current input.
    fn woken(&mut self, output: BoltOutputMut<'_>) -> PResult<()>;
}

/// An owned 1.3 bolt object.
pub type Bolt13Box = DynBolt13_TO<'static, RBox<()>>;

/// How a partition's ownership changed (an open set of constants).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionChange(pub u8);

impl PartitionChange {
    /// This host now owns the partition, fenced by `epoch`: the host
    /// restores its state and starts running it.
    pub const ASSIGNED: Self = Self(0);
    /// The partition is to be given up: the host stops it, commits what is
    /// complete, and calls [`DynCoordinator::released`].
    pub const REVOKED: Self = Self(1);
    /// The ownership of a partition this host runs was confirmed: it holds
    /// for `valid_for_ms` more.
    pub const RENEWED: Self = Self(2);
    /// The partition was lost without a revoke (another member holds it
    /// now): the host stops it at once, and its state backend refuses any
    /// further commit under the old epoch.
    pub const LOST: Self = Self(3);
}

/// One change of one partition, as a coordinator reports it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionEvent {
    /// What changed.
    pub change: PartitionChange,
    /// The partition.
    pub partition: u32,
    /// Its fencing epoch (a lease's epoch, a Kafka group generation):
    /// higher for each new owner.
    pub epoch: u64,
    /// For an assignment or a renewal: how long, from now, the ownership
    /// holds without another renewal, in milliseconds (`u64::MAX`: until a
    /// revoke).
    pub valid_for_ms: u64,
}

/// A group coordinator instance (a new component kind in 1.3): decides
/// which of a group's partitions this host runs. All calls come from one
/// host thread, one at a time.
#[sabi_trait]
pub trait DynCoordinator: Send {
    /// Joins the group as `member`. `partitions` is the partition count the
    /// topology declares (0: the coordinator knows it, as Kafka's does from
    /// the input topic). Returns the partition count.
    fn join(&mut self, member: RStr<'_>, partitions: u32) -> PResult<u32>;
    /// Runs the protocol (heartbeats, renewals, rebalances) for at most
    /// `wait_ms`, and returns what changed since the last call.
    fn poll(&mut self, wait_ms: u64) -> PResult<RVec<PartitionEvent>>;
    /// The host stopped running `partition` (held under `epoch`) and its
    /// last checkpoint is committed: another member may take it.
    fn released(&mut self, partition: u32, epoch: u64) -> PResult<()>;
    /// The group as this instance sees it, as one JSON document (what
    /// `squall group status` prints). Works without `join`; once joined,
    /// this member's view (fields `members`, `share`, `counters`).
    fn status(&mut self) -> PResult<RString>;
    /// This host is leaving: take nothing more. The host then stops every
    /// partition (still polling, so ownership stays renewed) and calls
    /// `released` for each; the member has left once all are released.
    #[sabi(last_prefix_field)]
    fn leave(&mut self) -> PResult<()>;
}

/// An owned coordinator object.
pub type CoordinatorBox = DynCoordinator_TO<'static, RBox<()>>;

/// What a contract 1.3 constructor builds.
#[repr(u8)]
#[derive(StableAbi)]
pub enum ComponentBox13 {
    /// A spout.
    Spout(Spout13Box),
    /// A bolt.
    Bolt(Bolt13Box),
    /// A group coordinator.
    Coordinator(CoordinatorBox),
}

impl std::fmt::Debug for ComponentBox13 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ComponentBox13::Spout(_) => "ComponentBox13::Spout",
            ComponentBox13::Bolt(_) => "ComponentBox13::Bolt",
            ComponentBox13::Coordinator(_) => "ComponentBox13::Coordinator",
        })
    }
}

/// What kind of store a bolt keeps (an open set of constants).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreKind(pub u8);

impl StoreKind {
    /// A store keyed by the values of the fields the bolt's input is
    /// grouped by ([`KeyValueState`](crate::state::KeyValueState)): each
    /// key belongs to the task the fields grouping routes it to.
    pub const KEYED: Self = Self(0);
    /// One value per task ([`ValueState`](crate::state::ValueState)).
    pub const VALUE: Self = Self(1);
    /// A store the plugin implements itself (`StateStore`): squall
    /// checks nothing about its keys at validate.
    pub const OTHER: Self = Self(2);

    /// The kind's name as `squall inspect` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::KEYED => "keyed",
            Self::VALUE => "value",
            _ => "other",
        }
    }
}

/// One durable store a bolt declares (`Bolt::STORES`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct StoreDecl {
    /// The store's name, unique within its bolt.
    pub name: RString,
    /// What kind of store it is.
    pub kind: StoreKind,
}

/// A component as contract 1.3 describes it, beside its earlier
/// descriptors (same kind and name). A coordinator has its 1.1 descriptor
/// (for its config keys) and this one.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct ComponentExt13 {
    /// Spout, bolt or coordinator.
    pub kind: ComponentKind,
    /// The component's name.
    pub name: RString,
    /// True when the host should call the batch entry point
    /// (`execute_batch`, `next_batch`) rather than one call per tuple.
    pub batch: bool,
    /// Builds an instance through contract 1.3.
    pub new: extern "C" fn(config: RStr<'_>) -> PResult<ComponentBox13>,
    /// True when a bolt declares its durable stores (`Bolt::STORES`):
    /// `stores` then lists every store its `stores()` returns, and the
    /// adapter refuses a checkpoint whose stores differ from the list.
    /// False: not declared (`stores` is empty).
    pub declares_stores: bool,
    /// The declared stores.
    pub stores: RVec<StoreDecl>,
    /// The most bytes one task holds outside the host's queues with this
    /// config (`Spout::buffer_bytes`, `Bolt::buffer_bytes`): added to the
    /// host's memory estimate. 0 for a component that declares none.
    pub buffer_bytes: extern "C" fn(config: RStr<'_>) -> PResult<u64>,
}
