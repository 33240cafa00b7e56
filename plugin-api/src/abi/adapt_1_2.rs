//! Adapters from the plain-Rust traits to the contract 1.2 objects, and the
//! descriptors a 1.2 library lists.

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{ROption, RSlice, RStr, RString, RVec},
};

use super::ext::{DynBoltExt, DynSpoutExt};
use super::ext::{SpoutOutputMut, State, WakerBox, WindowView};
use super::ext_adapt::{
    config, runtime, AnyBolt, Basic, BoltExtAdapter, Rich, SpoutExtAdapter, Windowed,
};
use super::v1_2::BoltOutputMut;
use super::v1_2::{
    ComponentBox12, ComponentExt12, DynBolt12, DynBolt12_TO, DynSpout12, DynSpout12_TO,
    DynStateBackend, DynStateBackend_TO, ScopeWrites, StateRecord, StoreDelta,
};
use super::{guard, ComponentKind, PResult, TaskContext, TaskExt};
use crate::collector::BoltOut;
use crate::state::{StateBackend, STORES_FORMAT};
use crate::{BasicBolt, Bolt, ComponentConfig, MessageId, Spout, Tuple, WindowedBolt};

fn millis(budget: Option<std::time::Duration>) -> u64 {
    budget.map_or(0, |d| d.as_millis().clamp(1, u128::from(u64::MAX)) as u64)
}

/// A 1.2 spout: the 1.1 adapter's calls, then the checkpoint ones.
pub(crate) struct Spout12Adapter<S>(pub(crate) SpoutExtAdapter<S>);

impl<S: Spout> DynSpout12 for Spout12Adapter<S> {
    fn open(&mut self, context: &TaskContext, ext: &TaskExt, waker: WakerBox) -> PResult<bool> {
        self.0.open(context, ext, waker)
    }

    fn activate(&mut self) -> PResult<()> {
        self.0.activate()
    }

    fn deactivate(&mut self) -> PResult<()> {
        self.0.deactivate()
    }

    fn next_tuple(&mut self, output: SpoutOutputMut<'_>) -> PResult<()> {
        self.0.next_tuple(output)
    }

    fn ack(&mut self, message_id: MessageId) -> PResult<()> {
        self.0.ack(message_id)
    }

    fn fail(&mut self, message_id: MessageId) -> PResult<()> {
        self.0.fail(message_id)
    }

    fn close(&mut self) -> PResult<()> {
        self.0.close()
    }

    fn save_state(&mut self) -> PResult<ROption<State>> {
        self.0.save_state()
    }

    fn restore_state(&mut self, state: State) -> PResult<()> {
        self.0.restore_state(state)
    }

    fn checkpoint(&mut self, checkpoint: u64) -> PResult<ROption<State>> {
        crate::state::checkpoint_seen(checkpoint);
        guard(|| Ok(self.0 .0.checkpoint(checkpoint).into()))
    }

    fn committed(&mut self, checkpoint: u64) -> PResult<()> {
        guard(|| {
            self.0 .0.committed(checkpoint);
            Ok(())
        })
    }

    fn restore_checkpoint(&mut self, position: State) -> PResult<()> {
        guard(|| self.0 .0.restore_checkpoint(position).map_err(runtime))
    }
}

/// A 1.2 bolt: the 1.1 adapter's calls, its stores in `save_state` and
/// `restore_state`, then the checkpoint ones.
pub(crate) struct Bolt12Adapter<B>(pub(crate) BoltExtAdapter<B>);

impl<B: AnyBolt> DynBolt12 for Bolt12Adapter<B> {
    fn prepare(&mut self, context: &TaskContext, ext: &TaskExt) -> PResult<()> {
        self.0.prepare(context, ext)
    }

    fn execute(&mut self, input: &Tuple<'_>, output: BoltOutputMut<'_>) -> PResult<()> {
        guard(|| self.0 .0.execute(input, BoltOut::V12(output)).map_err(runtime))
    }

    fn cleanup(&mut self) -> PResult<()> {
        self.0.cleanup()
    }

    fn execute_window(
        &mut self,
        window: &WindowView<'_>,
        output: BoltOutputMut<'_>,
    ) -> PResult<()> {
        guard(|| self.0 .0.execute_window(window, BoltOut::V12(output)).map_err(runtime))
    }

    /// The bolt's own state if it saves one, else its stores.
    fn save_state(&mut self) -> PResult<ROption<State>> {
        let bolt = &mut self.0 .0;
        guard(|| {
            if let Some(state) = bolt.save_state() {
                return Ok(ROption::RSome(state));
            }
            let stores = bolt.stores();
            if stores.is_empty() {
                return Ok(ROption::RNone);
            }
            Ok(ROption::RSome(stores.save().map_err(runtime)?))
        })
    }

    fn restore_state(&mut self, state: State) -> PResult<()> {
        let bolt = &mut self.0 .0;
        guard(|| {
            if state.format.as_str() == STORES_FORMAT {
                bolt.stores().restore_saved(&state).map_err(runtime)
            } else {
                bolt.restore_state(state).map_err(runtime)
            }
        })
    }

    fn checkpoint(&mut self, checkpoint: u64) -> PResult<RVec<StoreDelta>> {
        crate::state::checkpoint_seen(checkpoint);
        guard(|| {
            self.0 .0.barrier(checkpoint);
            let mut stores = self.0 .0.stores();
            stores.check_declared(B::STORES).map_err(runtime)?;
            stores.take_changes().map_err(runtime)
        })
    }

    fn committed(&mut self, checkpoint: u64) -> PResult<()> {
        guard(|| {
            self.0 .0.committed(checkpoint);
            Ok(())
        })
    }

    fn restore_stores(&mut self, stores: RVec<StoreDelta>) -> PResult<()> {
        guard(|| {
            let mut own = self.0 .0.stores();
            own.check_declared(B::STORES).map_err(runtime)?;
            own.restore(&stores).map_err(runtime)
        })
    }
}

pub(crate) struct BackendAdapter<S>(S);

impl<S: StateBackend> DynStateBackend for BackendAdapter<S> {
    fn open(&mut self, namespace: RStr<'_>) -> PResult<()> {
        guard(|| self.0.open(namespace.as_str()).map_err(runtime))
    }

    fn last_committed(&mut self) -> PResult<ROption<u64>> {
        guard(|| self.0.last_committed().map(ROption::from).map_err(runtime))
    }

    fn commit(&mut self, checkpoint: u64, writes: RSlice<'_, ScopeWrites>) -> PResult<()> {
        guard(|| self.0.commit(checkpoint, writes.as_slice()).map_err(runtime))
    }

    fn load(&mut self, scope: RStr<'_>) -> PResult<RVec<StateRecord>> {
        guard(|| self.0.load(scope.as_str()).map(RVec::from).map_err(runtime))
    }

    fn scopes(&mut self) -> PResult<RVec<RString>> {
        guard(|| {
            let scopes = self.0.scopes().map_err(runtime)?;
            Ok(scopes.into_iter().map(RString::from).collect())
        })
    }

    fn clear(&mut self) -> PResult<()> {
        guard(|| self.0.clear().map_err(runtime))
    }

    fn close(&mut self) -> PResult<()> {
        guard(|| {
            self.0.close();
            Ok(())
        })
    }
}

extern "C" fn new_spout<S: Spout>(cfg: RStr<'_>) -> PResult<ComponentBox12> {
    guard(|| {
        let spout = S::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?;
        let adapter = Spout12Adapter(SpoutExtAdapter(spout));
        Ok(ComponentBox12::Spout(DynSpout12_TO::from_value(adapter, TD_Opaque)))
    })
}

fn bolt_box<B: AnyBolt>(bolt: B) -> ComponentBox12 {
    ComponentBox12::Bolt(DynBolt12_TO::from_value(Bolt12Adapter(BoltExtAdapter(bolt)), TD_Opaque))
}

extern "C" fn new_bolt<B: Bolt>(cfg: RStr<'_>) -> PResult<ComponentBox12> {
    guard(|| Ok(bolt_box(Rich(B::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?))))
}

extern "C" fn new_basic<B: BasicBolt>(cfg: RStr<'_>) -> PResult<ComponentBox12> {
    guard(|| Ok(bolt_box(Basic(B::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?))))
}

extern "C" fn new_windowed<B: WindowedBolt>(cfg: RStr<'_>) -> PResult<ComponentBox12> {
    guard(|| Ok(bolt_box(Windowed(B::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?))))
}

extern "C" fn new_backend<S: StateBackend>(cfg: RStr<'_>) -> PResult<ComponentBox12> {
    guard(|| {
        let backend = S::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?;
        let object = DynStateBackend_TO::from_value(BackendAdapter(backend), TD_Opaque);
        Ok(ComponentBox12::StateBackend(object))
    })
}

fn descriptor(
    kind: ComponentKind,
    name: &str,
    budget: Option<std::time::Duration>,
    durable: bool,
    new: extern "C" fn(RStr<'_>) -> PResult<ComponentBox12>,
) -> ComponentExt12 {
    let close_budget_ms = millis(budget);
    let emits = RVec::new();
    ComponentExt12 { kind, name: name.into(), close_budget_ms, durable, new, ticks_ms: 0, emits }
}

/// A descriptor with the streams its component declares it emits on.
fn with_emits(mut d: ComponentExt12, emits: &[&str]) -> ComponentExt12 {
    d.emits = emits.iter().map(|&s| RString::from(s)).collect();
    d
}

/// A bolt's descriptor with its declared need of tick tuples.
fn with_ticks(mut d: ComponentExt12, ticks: Option<std::time::Duration>) -> ComponentExt12 {
    d.ticks_ms = ticks.map_or(0, |t| millis(Some(t)).max(1));
    d
}

/// The 1.2 descriptor of a spout.
pub(crate) fn spout_12<S: Spout>() -> ComponentExt12 {
    let d =
        descriptor(ComponentKind::SPOUT, S::NAME, S::CLOSE_BUDGET, S::CHECKPOINTS, new_spout::<S>);
    with_emits(d, S::EMITS)
}

/// The 1.2 descriptor of a rich bolt.
pub(crate) fn bolt_12<B: Bolt>() -> ComponentExt12 {
    let d = descriptor(ComponentKind::BOLT, B::NAME, B::CLOSE_BUDGET, true, new_bolt::<B>);
    with_emits(with_ticks(d, B::TICKS), B::EMITS)
}

/// The 1.2 descriptor of a basic bolt.
pub(crate) fn basic_bolt_12<B: BasicBolt>() -> ComponentExt12 {
    let d = descriptor(ComponentKind::BOLT, B::NAME, B::CLOSE_BUDGET, true, new_basic::<B>);
    with_emits(with_ticks(d, B::TICKS), B::EMITS)
}

/// The 1.2 descriptor of a windowed bolt.
pub(crate) fn windowed_bolt_12<B: WindowedBolt>() -> ComponentExt12 {
    let d = descriptor(ComponentKind::BOLT, B::NAME, B::CLOSE_BUDGET, true, new_windowed::<B>);
    with_emits(d, B::EMITS)
}

/// The 1.2 descriptor of a state backend, and its 1.1 descriptor (for its
/// config keys).
pub(crate) fn backend_12<S: StateBackend>() -> (ComponentExt12, super::ComponentExt) {
    let (declares_config, config_keys) = super::ext_adapt::keys(S::CONFIG_KEYS);
    let ext = super::ComponentExt {
        kind: ComponentKind::STATE_BACKEND,
        name: S::NAME.into(),
        description: S::DESCRIPTION.into(),
        declares_config,
        config_keys,
        input_fields: RVec::new(),
        auto_ack: false,
        windowed: false,
        ids_survive_swap: false,
        declare_outputs: super::ext_adapt::no_outputs,
        check_inputs: super::ext_adapt::any_inputs,
        new: ROption::RNone,
    };
    (descriptor(ComponentKind::STATE_BACKEND, S::NAME, None, true, new_backend::<S>), ext)
}
