//! Component instances as the executors drive them, whichever contract built
//! them: a 1.0 library's objects ([`SpoutBox`], [`BoltBox`]) or a 1.1
//! library's ([`SpoutExtBox`], [`BoltExtBox`]). The executors call one type;
//! a call on a 1.0 object that 1.0 lacks (state, wake handle) answers as a
//! component without that feature would.

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RResult};
use squall_plugin_api::abi::{
    Bolt12Box, Bolt13Box, BoltBox, BoltExtBox, BoltOutput, BoltOutput_TO, ComponentBox,
    ComponentBox12, ComponentBox13, ComponentExtBox, CoordinatorBox, Output, Output_TO, PResult,
    Spout12Box, Spout13Box, SpoutBox, SpoutExtBox, SpoutOutput, SpoutOutput_TO, State, StoreDelta,
    TaskContext, TaskExt, WakerBox, WindowView,
};
use squall_plugin_api::{ErrorKind, MessageId, PluginError, RunView, Tuple};

/// A component constructor from a plugin's catalogue (the 1.0 descriptor).
pub type Constructor = extern "C" fn(abi_stable::std_types::RStr<'_>) -> PResult<ComponentBox>;

/// A 1.1 constructor (see [`squall_plugin_api::abi::ComponentExt::new`]).
pub type ExtConstructor =
    extern "C" fn(abi_stable::std_types::RStr<'_>) -> PResult<ComponentExtBox>;

/// A 1.2 constructor (see [`squall_plugin_api::abi::ComponentExt12::new`]).
pub type Constructor12 = extern "C" fn(abi_stable::std_types::RStr<'_>) -> PResult<ComponentBox12>;

/// A 1.3 constructor (see [`squall_plugin_api::abi::ComponentExt13::new`]).
pub type Constructor13 = extern "C" fn(abi_stable::std_types::RStr<'_>) -> PResult<ComponentBox13>;

/// How a component's instances are built.
#[derive(Debug, Clone, Copy)]
pub enum Factory {
    /// Through the 1.0 descriptor.
    V1(Constructor),
    /// Through the 1.1 descriptor.
    Ext(ExtConstructor),
    /// Through the 1.2 descriptor.
    V12(Constructor12),
    /// Through the 1.3 descriptor.
    V13(Constructor13),
}

/// A freshly built spout, bolt or coordinator.
pub enum Instance {
    /// A spout.
    Spout(SpoutObj),
    /// A bolt.
    Bolt(BoltObj),
    /// A group coordinator (contract 1.3).
    Coordinator(CoordinatorBox),
    /// Something else (a wait strategy, a grouping or a state backend where
    /// a spout or bolt was expected).
    Other,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Instance::Spout(s) => s.fmt(f),
            Instance::Bolt(b) => b.fmt(f),
            Instance::Coordinator(_) => f.write_str("Instance::Coordinator"),
            Instance::Other => f.write_str("Instance::Other"),
        }
    }
}

impl Factory {
    /// Builds an instance from the component's config.
    ///
    /// # Errors
    /// The constructor's error, or its panic.
    pub fn build(self, config: &str) -> Result<Instance, PluginError> {
        match self {
            Factory::V1(new) => new(config.into()).into_result().map(|built| match built {
                ComponentBox::Spout(s) => Instance::Spout(SpoutObj::V1(s)),
                ComponentBox::Bolt(b) => Instance::Bolt(BoltObj::V1(b)),
                ComponentBox::WaitStrategy(_) => Instance::Other,
            }),
            Factory::Ext(new) => new(config.into()).into_result().map(|built| match built {
                ComponentExtBox::Spout(s) => Instance::Spout(SpoutObj::Ext(s)),
                ComponentExtBox::Bolt(b) => Instance::Bolt(BoltObj::Ext(b)),
                ComponentExtBox::Grouping(_) => Instance::Other,
            }),
            Factory::V12(new) => new(config.into()).into_result().map(|built| match built {
                ComponentBox12::Spout(s) => Instance::Spout(SpoutObj::V12(s)),
                ComponentBox12::Bolt(b) => Instance::Bolt(BoltObj::V12(b)),
                ComponentBox12::StateBackend(_) => Instance::Other,
            }),
            Factory::V13(new) => new(config.into()).into_result().map(|built| match built {
                ComponentBox13::Spout(s) => Instance::Spout(SpoutObj::V13(s)),
                ComponentBox13::Bolt(b) => Instance::Bolt(BoltObj::V13(b)),
                ComponentBox13::Coordinator(c) => Instance::Coordinator(c),
            }),
        }
    }
}

fn no_state(state: &State) -> PResult<()> {
    RResult::RErr(PluginError::new(
        ErrorKind::RUNTIME,
        format!("built against contract 1.0, it cannot take over state `{}`", state.format),
    ))
}

/// A spout instance.
pub enum SpoutObj {
    /// Built through contract 1.0.
    V1(SpoutBox),
    /// Built through contract 1.1.
    Ext(SpoutExtBox),
    /// Built through contract 1.2.
    V12(Spout12Box),
    /// Built through contract 1.3.
    V13(Spout13Box),
}

impl std::fmt::Debug for SpoutObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpoutObj::V1(_) => "SpoutObj::V1",
            SpoutObj::Ext(_) => "SpoutObj::Ext",
            SpoutObj::V12(_) => "SpoutObj::V12",
            SpoutObj::V13(_) => "SpoutObj::V13",
        })
    }
}

impl SpoutObj {
    /// `open`; true when the spout took its wake handle (1.0 spouts never do).
    pub fn open(
        &mut self,
        context: &TaskContext,
        ext: &TaskExt,
        waker: &WakerBox,
    ) -> PResult<bool> {
        super::services::instance_starts();
        match self {
            SpoutObj::V1(s) => s.open(context).map(|()| false),
            SpoutObj::Ext(s) => s.open(context, ext, waker.clone()),
            SpoutObj::V12(s) => s.open(context, ext, waker.clone()),
            SpoutObj::V13(s) => s.open(context, ext, waker.clone()),
        }
    }

    /// `activate`.
    pub fn activate(&mut self) -> PResult<()> {
        match self {
            SpoutObj::V1(s) => s.activate(),
            SpoutObj::Ext(s) => s.activate(),
            SpoutObj::V12(s) => s.activate(),
            SpoutObj::V13(s) => s.activate(),
        }
    }

    /// `deactivate`.
    pub fn deactivate(&mut self) -> PResult<()> {
        match self {
            SpoutObj::V1(s) => s.deactivate(),
            SpoutObj::Ext(s) => s.deactivate(),
            SpoutObj::V12(s) => s.deactivate(),
            SpoutObj::V13(s) => s.deactivate(),
        }
    }

    /// `next_tuple`, emitting through `output`: as a 1.0 [`Output`] to a
    /// 1.0 spout, as a 1.1 [`SpoutOutput`] (with `emit_many`) to a 1.1 spout.
    #[inline]
    pub fn next_tuple<O: Output + SpoutOutput>(&mut self, output: &mut O) -> PResult<()> {
        match self {
            SpoutObj::V1(s) => s.next_tuple(Output_TO::from_ptr(output, TD_Opaque)),
            SpoutObj::Ext(s) => s.next_tuple(SpoutOutput_TO::from_ptr(output, TD_Opaque)),
            SpoutObj::V12(s) => s.next_tuple(SpoutOutput_TO::from_ptr(output, TD_Opaque)),
            SpoutObj::V13(s) => s.next_tuple(SpoutOutput_TO::from_ptr(output, TD_Opaque)),
        }
    }

    /// `next_batch` (contract 1.3 spouts), emitting up to `max` tuples;
    /// `next_tuple` for the others.
    #[inline]
    pub fn next_batch<O: Output + SpoutOutput>(&mut self, max: u32, output: &mut O) -> PResult<()> {
        match self {
            SpoutObj::V13(s) => s.next_batch(max, SpoutOutput_TO::from_ptr(output, TD_Opaque)),
            _ => self.next_tuple(output),
        }
    }

    /// `ack`.
    #[inline]
    pub fn ack(&mut self, id: MessageId) -> PResult<()> {
        match self {
            SpoutObj::V1(s) => s.ack(id),
            SpoutObj::Ext(s) => s.ack(id),
            SpoutObj::V12(s) => s.ack(id),
            SpoutObj::V13(s) => s.ack(id),
        }
    }

    /// `fail`.
    pub fn fail(&mut self, id: MessageId) -> PResult<()> {
        match self {
            SpoutObj::V1(s) => s.fail(id),
            SpoutObj::Ext(s) => s.fail(id),
            SpoutObj::V12(s) => s.fail(id),
            SpoutObj::V13(s) => s.fail(id),
        }
    }

    /// `close`.
    pub fn close(&mut self) -> PResult<()> {
        match self {
            SpoutObj::V1(s) => s.close(),
            SpoutObj::Ext(s) => s.close(),
            SpoutObj::V12(s) => s.close(),
            SpoutObj::V13(s) => s.close(),
        }
    }

    /// The state its successor takes over (`None` for 1.0 spouts).
    pub fn save_state(&mut self) -> PResult<ROption<State>> {
        match self {
            SpoutObj::V1(_) => RResult::ROk(ROption::RNone),
            SpoutObj::Ext(s) => s.save_state(),
            SpoutObj::V12(s) => s.save_state(),
            SpoutObj::V13(s) => s.save_state(),
        }
    }

    /// True when it can take over state (built against contract 1.1).
    pub fn takes_state(&self) -> bool {
        matches!(self, SpoutObj::Ext(_) | SpoutObj::V12(_) | SpoutObj::V13(_))
    }

    /// Takes over a predecessor's state (a 1.0 spout refuses any).
    pub fn restore_state(&mut self, state: State) -> PResult<()> {
        match self {
            SpoutObj::V1(_) => no_state(&state),
            SpoutObj::Ext(s) => s.restore_state(state),
            SpoutObj::V12(s) => s.restore_state(state),
            SpoutObj::V13(s) => s.restore_state(state),
        }
    }
}

impl SpoutObj {
    /// A checkpoint barrier: the spout's position (contract 1.2 spouts;
    /// `None` for the others, which keep none).
    pub fn checkpoint(&mut self, checkpoint: u64) -> PResult<ROption<State>> {
        match self {
            SpoutObj::V12(s) => s.checkpoint(checkpoint),
            SpoutObj::V13(s) => s.checkpoint(checkpoint),
            _ => RResult::ROk(ROption::RNone),
        }
    }

    /// Checkpoint `checkpoint` committed (contract 1.2 spouts).
    pub fn committed(&mut self, checkpoint: u64) -> PResult<()> {
        match self {
            SpoutObj::V12(s) => s.committed(checkpoint),
            SpoutObj::V13(s) => s.committed(checkpoint),
            _ => RResult::ROk(()),
        }
    }

    /// Takes back a committed position, before `open` (contract 1.2 spouts).
    pub fn restore_checkpoint(&mut self, position: State) -> PResult<()> {
        match self {
            SpoutObj::V12(s) => s.restore_checkpoint(position),
            SpoutObj::V13(s) => s.restore_checkpoint(position),
            _ => RResult::RErr(PluginError::new(
                ErrorKind::RUNTIME,
                "built before contract 1.2, it keeps no checkpoint position",
            )),
        }
    }
}

/// A bolt instance.
pub enum BoltObj {
    /// Built through contract 1.0.
    V1(BoltBox),
    /// Built through contract 1.1.
    Ext(BoltExtBox),
    /// Built through contract 1.2.
    V12(Bolt12Box),
    /// Built through contract 1.3.
    V13(Bolt13Box),
}

impl std::fmt::Debug for BoltObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BoltObj::V1(_) => "BoltObj::V1",
            BoltObj::Ext(_) => "BoltObj::Ext",
            BoltObj::V12(_) => "BoltObj::V12",
            BoltObj::V13(_) => "BoltObj::V13",
        })
    }
}

impl BoltObj {
    /// `prepare`; a 1.3 bolt is first handed `waker`, its wake handle
    /// (earlier bolts have none).
    pub fn prepare(
        &mut self,
        context: &TaskContext,
        ext: &TaskExt,
        waker: Option<&WakerBox>,
    ) -> PResult<()> {
        super::services::instance_starts();
        match self {
            BoltObj::V1(b) => b.prepare(context),
            BoltObj::Ext(b) => b.prepare(context, ext),
            BoltObj::V12(b) => b.prepare(context, ext),
            BoltObj::V13(b) => {
                if let Some(waker) = waker {
                    if let RResult::RErr(e) = b.set_waker(waker.clone()) {
                        return RResult::RErr(e);
                    }
                }
                b.prepare(context, ext)
            }
        }
    }

    /// `woken` (contract 1.3 bolts; the others have no wake handle, so
    /// are never woken, and this does nothing for them).
    pub fn woken<O: Output + BoltOutput>(&mut self, output: &mut O) -> PResult<()> {
        match self {
            BoltObj::V13(b) => b.woken(BoltOutput_TO::from_ptr(output, TD_Opaque)),
            _ => RResult::ROk(()),
        }
    }

    /// `execute`, emitting through `output`: as a 1.0 [`Output`] to a 1.0
    /// or 1.1 bolt, as a 1.2 [`BoltOutput`] (no options by value, and
    /// `emit_many`) to a 1.2 bolt.
    #[inline]
    pub fn execute<O: Output + BoltOutput>(
        &mut self,
        input: &Tuple<'_>,
        output: &mut O,
    ) -> PResult<()> {
        match self {
            BoltObj::V1(b) => b.execute(input, Output_TO::from_ptr(output, TD_Opaque)),
            BoltObj::Ext(b) => b.execute(input, Output_TO::from_ptr(output, TD_Opaque)),
            BoltObj::V12(b) => b.execute(input, BoltOutput_TO::from_ptr(output, TD_Opaque)),
            BoltObj::V13(b) => b.execute(input, BoltOutput_TO::from_ptr(output, TD_Opaque)),
        }
    }

    /// `execute_batch` (contract 1.3 bolts): a run of inputs in one call;
    /// `taken` tells how far it got (see
    /// [`DynBolt13::execute_batch`](squall_plugin_api::abi::DynBolt13::execute_batch)).
    /// A bolt built through an earlier contract refuses the call: the
    /// executor calls it once per tuple.
    #[inline]
    pub fn execute_batch<O: Output + BoltOutput>(
        &mut self,
        inputs: RunView<'_>,
        output: &mut O,
        taken: &mut u32,
    ) -> PResult<()> {
        match self {
            BoltObj::V13(b) => {
                b.execute_batch(inputs, BoltOutput_TO::from_ptr(output, TD_Opaque), taken)
            }
            _ => RResult::RErr(PluginError::new(
                ErrorKind::RUNTIME,
                "built before contract 1.3, it takes one tuple per call",
            )),
        }
    }

    /// True when it takes a run of inputs per call (contract 1.3).
    pub fn batches(&self) -> bool {
        matches!(self, BoltObj::V13(_))
    }

    /// `cleanup`.
    pub fn cleanup(&mut self) -> PResult<()> {
        match self {
            BoltObj::V1(b) => b.cleanup(),
            BoltObj::Ext(b) => b.cleanup(),
            BoltObj::V12(b) => b.cleanup(),
            BoltObj::V13(b) => b.cleanup(),
        }
    }

    /// `execute_window` (windowed bolts, contract 1.1 only).
    pub fn execute_window<O: Output + BoltOutput>(
        &mut self,
        window: &WindowView<'_>,
        output: &mut O,
    ) -> PResult<()> {
        match self {
            BoltObj::V1(_) => RResult::RErr(PluginError::new(
                ErrorKind::RUNTIME,
                "a contract 1.0 bolt cannot take windows",
            )),
            BoltObj::Ext(b) => b.execute_window(window, Output_TO::from_ptr(output, TD_Opaque)),
            BoltObj::V12(b) => b.execute_window(window, BoltOutput_TO::from_ptr(output, TD_Opaque)),
            BoltObj::V13(b) => b.execute_window(window, BoltOutput_TO::from_ptr(output, TD_Opaque)),
        }
    }

    /// The state its successor takes over (`None` for 1.0 bolts).
    pub fn save_state(&mut self) -> PResult<ROption<State>> {
        match self {
            BoltObj::V1(_) => RResult::ROk(ROption::RNone),
            BoltObj::Ext(b) => b.save_state(),
            BoltObj::V12(b) => b.save_state(),
            BoltObj::V13(b) => b.save_state(),
        }
    }

    /// True when it can take over state (built against contract 1.1).
    pub fn takes_state(&self) -> bool {
        matches!(self, BoltObj::Ext(_) | BoltObj::V12(_) | BoltObj::V13(_))
    }

    /// Takes over a predecessor's state (a 1.0 bolt refuses any).
    pub fn restore_state(&mut self, state: State) -> PResult<()> {
        match self {
            BoltObj::V1(_) => no_state(&state),
            BoltObj::Ext(b) => b.restore_state(state),
            BoltObj::V12(b) => b.restore_state(state),
            BoltObj::V13(b) => b.restore_state(state),
        }
    }
}

impl BoltObj {
    /// A checkpoint: what its stores changed (empty for bolts built before
    /// contract 1.2, which keep none).
    pub fn checkpoint(
        &mut self,
        checkpoint: u64,
    ) -> PResult<abi_stable::std_types::RVec<StoreDelta>> {
        match self {
            BoltObj::V12(b) => b.checkpoint(checkpoint),
            BoltObj::V13(b) => b.checkpoint(checkpoint),
            _ => RResult::ROk(abi_stable::std_types::RVec::new()),
        }
    }

    /// Checkpoint `checkpoint` committed (contract 1.2 bolts).
    pub fn committed(&mut self, checkpoint: u64) -> PResult<()> {
        match self {
            BoltObj::V12(b) => b.committed(checkpoint),
            BoltObj::V13(b) => b.committed(checkpoint),
            _ => RResult::ROk(()),
        }
    }

    /// Takes back a checkpoint's stores, before `prepare`.
    pub fn restore_stores(
        &mut self,
        stores: abi_stable::std_types::RVec<StoreDelta>,
    ) -> PResult<()> {
        match self {
            BoltObj::V12(b) => b.restore_stores(stores),
            BoltObj::V13(b) => b.restore_stores(stores),
            _ if stores.is_empty() => RResult::ROk(()),
            _ => RResult::RErr(PluginError::new(
                ErrorKind::RUNTIME,
                "built before contract 1.2, it keeps no durable stores",
            )),
        }
    }
}
