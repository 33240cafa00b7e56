//! Adapters from the plain-Rust traits to the contract 1.1 objects, and the
//! constructors and descriptors a 1.1 catalogue lists.

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{ROption, RSlice, RStr, RVec},
};

use super::ext::{
    BoltExtBox, ComponentExt, ComponentExtBox, DynBoltExt, DynBoltExt_TO, DynGrouping,
    DynGrouping_TO, DynSpoutExt, DynSpoutExt_TO, GroupingContext, SpoutOutputMut, State, WakerBox,
    WindowView,
};
use super::guard::to_plugin_error;
use super::{guard, ComponentKind, InputDecl, OutputMut, PResult, TaskContext, TaskExt};
use crate::collector::BoltOut;
use crate::{
    BasicBatchCollector, BasicBolt, BasicCollector, Bolt, BoltCollector, ComponentConfig,
    ConfigKey, ErrorKind, Grouping, MessageId, OutputDeclarer, Spout, SpoutCollector, StreamDecl,
    Tuple, Value, Waker, Window, WindowedBolt,
};

pub(crate) fn runtime(e: crate::Error) -> crate::PluginError {
    to_plugin_error(ErrorKind::RUNTIME)(e)
}

pub(crate) fn config(e: crate::Error) -> crate::PluginError {
    to_plugin_error(ErrorKind::CONFIG)(e)
}

pub(crate) struct SpoutExtAdapter<S>(pub(crate) S);

impl<S: Spout> DynSpoutExt for SpoutExtAdapter<S> {
    fn open(&mut self, context: &TaskContext, ext: &TaskExt, waker: WakerBox) -> PResult<bool> {
        let context = crate::TaskContext::from_host(
            context.clone(),
            Some(ext.clone()),
            Some(Waker::from_host(waker)),
        );
        guard(|| {
            self.0.open(&context).map_err(runtime)?;
            Ok(context.waker_taken())
        })
    }

    fn activate(&mut self) -> PResult<()> {
        guard(|| {
            self.0.activate();
            Ok(())
        })
    }

    fn deactivate(&mut self) -> PResult<()> {
        guard(|| {
            self.0.deactivate();
            Ok(())
        })
    }

    fn next_tuple(&mut self, output: SpoutOutputMut<'_>) -> PResult<()> {
        guard(|| self.0.next_tuple(&mut SpoutCollector::from_ext(output)).map_err(runtime))
    }

    fn ack(&mut self, message_id: MessageId) -> PResult<()> {
        guard(|| {
            self.0.ack(message_id);
            Ok(())
        })
    }

    fn fail(&mut self, message_id: MessageId) -> PResult<()> {
        guard(|| {
            self.0.fail(message_id);
            Ok(())
        })
    }

    fn close(&mut self) -> PResult<()> {
        guard(|| {
            self.0.close();
            Ok(())
        })
    }

    fn save_state(&mut self) -> PResult<ROption<State>> {
        guard(|| Ok(self.0.save_state().into()))
    }

    fn restore_state(&mut self, state: State) -> PResult<()> {
        guard(|| self.0.restore_state(state).map_err(runtime))
    }
}

/// What a bolt adapter needs from a rich or a basic bolt.
pub(crate) trait AnyBolt: Send + 'static {
    /// The bolt's declared stores (contract 1.3).
    const STORES: Option<&'static [crate::state::StoreSpec]>;
    /// True when the bolt has a [`woken`](Self::woken) (rich bolts).
    const WOKEN: bool = false;
    fn prepare(&mut self, context: &crate::TaskContext) -> crate::Result<()>;
    fn execute(&mut self, input: &Tuple<'_>, output: BoltOut<'_>) -> crate::Result<()>;
    /// Contract 1.3: a run of inputs in one call.
    fn execute_batch(
        &mut self,
        _inputs: &mut crate::Inputs<'_, '_>,
        _output: BoltOut<'_>,
    ) -> crate::Result<()> {
        Err("a windowed bolt takes windows, not batches of tuples".into())
    }
    fn cleanup(&mut self);
    fn execute_window(
        &mut self,
        _window: &WindowView<'_>,
        _output: BoltOut<'_>,
    ) -> crate::Result<()> {
        Err("not a windowed bolt: the host handed it a window".into())
    }
    fn save_state(&mut self) -> Option<State>;
    fn restore_state(&mut self, state: State) -> crate::Result<()>;
    /// Contract 1.2.
    fn stores(&mut self) -> crate::state::Stores<'_>;
    /// Contract 1.2.
    fn committed(&mut self, checkpoint: u64);
    /// Contract 1.2 (a barrier aligned, before the stores are read).
    fn barrier(&mut self, _checkpoint: u64) {}
    /// Contract 1.3: the wake handle was called (rich bolts only).
    fn woken(&mut self, _output: BoltOut<'_>) -> crate::Result<()> {
        Ok(())
    }
}

pub(crate) struct Windowed<B>(pub(crate) B);

impl<B: WindowedBolt> AnyBolt for Windowed<B> {
    const STORES: Option<&'static [crate::state::StoreSpec]> = B::STORES;
    fn prepare(&mut self, context: &crate::TaskContext) -> crate::Result<()> {
        self.0.prepare(context)
    }
    fn execute(&mut self, _input: &Tuple<'_>, _output: BoltOut<'_>) -> crate::Result<()> {
        Err("a windowed bolt takes windows, not single tuples".into())
    }
    fn cleanup(&mut self) {
        self.0.cleanup();
    }
    fn execute_window(
        &mut self,
        window: &WindowView<'_>,
        output: BoltOut<'_>,
    ) -> crate::Result<()> {
        self.0.execute(&Window::new(window), &mut BasicCollector::from_out(output))
    }
    fn save_state(&mut self) -> Option<State> {
        self.0.save_state()
    }
    fn restore_state(&mut self, state: State) -> crate::Result<()> {
        self.0.restore_state(state)
    }
    fn stores(&mut self) -> crate::state::Stores<'_> {
        self.0.stores()
    }
    fn committed(&mut self, checkpoint: u64) {
        self.0.committed(checkpoint);
    }
}

pub(crate) struct Rich<B>(pub(crate) B);
pub(crate) struct Basic<B>(pub(crate) B);

impl<B: Bolt> AnyBolt for Rich<B> {
    const STORES: Option<&'static [crate::state::StoreSpec]> = B::STORES;
    const WOKEN: bool = true;
    fn prepare(&mut self, context: &crate::TaskContext) -> crate::Result<()> {
        self.0.prepare(context)
    }
    fn execute(&mut self, input: &Tuple<'_>, output: BoltOut<'_>) -> crate::Result<()> {
        self.0.execute(input, &mut BoltCollector::from_out(output))
    }
    fn execute_batch(
        &mut self,
        inputs: &mut crate::Inputs<'_, '_>,
        output: BoltOut<'_>,
    ) -> crate::Result<()> {
        self.0.execute_batch(inputs, &mut BoltCollector::from_out(output))
    }
    fn cleanup(&mut self) {
        self.0.cleanup();
    }
    fn save_state(&mut self) -> Option<State> {
        self.0.save_state()
    }
    fn restore_state(&mut self, state: State) -> crate::Result<()> {
        self.0.restore_state(state)
    }
    fn stores(&mut self) -> crate::state::Stores<'_> {
        self.0.stores()
    }
    fn committed(&mut self, checkpoint: u64) {
        self.0.committed(checkpoint);
    }
    fn barrier(&mut self, checkpoint: u64) {
        self.0.barrier(checkpoint);
    }
    fn woken(&mut self, output: BoltOut<'_>) -> crate::Result<()> {
        self.0.woken(&mut BoltCollector::from_out(output))
    }
}

impl<B: BasicBolt> AnyBolt for Basic<B> {
    const STORES: Option<&'static [crate::state::StoreSpec]> = B::STORES;
    fn prepare(&mut self, context: &crate::TaskContext) -> crate::Result<()> {
        self.0.prepare(context)
    }
    fn execute(&mut self, input: &Tuple<'_>, output: BoltOut<'_>) -> crate::Result<()> {
        self.0.execute(input, &mut BasicCollector::from_out(output))
    }
    /// Each input's emits are anchored to it (the bolt's `execute_batch`
    /// names the input of every emit); the host acks the inputs taken
    /// once the call returns (it knows them from how far the bolt got), as
    /// it does for one call per tuple.
    fn execute_batch(
        &mut self,
        inputs: &mut crate::Inputs<'_, '_>,
        output: BoltOut<'_>,
    ) -> crate::Result<()> {
        self.0.execute_batch(inputs, &mut BasicBatchCollector::from_out(output))
    }
    fn cleanup(&mut self) {
        self.0.cleanup();
    }
    fn save_state(&mut self) -> Option<State> {
        self.0.save_state()
    }
    fn restore_state(&mut self, state: State) -> crate::Result<()> {
        self.0.restore_state(state)
    }
    fn stores(&mut self) -> crate::state::Stores<'_> {
        self.0.stores()
    }
    fn committed(&mut self, checkpoint: u64) {
        self.0.committed(checkpoint);
    }
    fn barrier(&mut self, checkpoint: u64) {
        self.0.barrier(checkpoint);
    }
}

pub(crate) struct BoltExtAdapter<B>(pub(crate) B);

impl<B: AnyBolt> DynBoltExt for BoltExtAdapter<B> {
    fn prepare(&mut self, context: &TaskContext, ext: &TaskExt) -> PResult<()> {
        let context = crate::TaskContext::from_host(context.clone(), Some(ext.clone()), None);
        guard(|| self.0.prepare(&context).map_err(runtime))
    }

    fn execute(&mut self, input: &Tuple<'_>, output: OutputMut<'_>) -> PResult<()> {
        guard(|| self.0.execute(input, BoltOut::V1(output)).map_err(runtime))
    }

    fn cleanup(&mut self) -> PResult<()> {
        guard(|| {
            self.0.cleanup();
            Ok(())
        })
    }

    fn execute_window(&mut self, window: &WindowView<'_>, output: OutputMut<'_>) -> PResult<()> {
        guard(|| self.0.execute_window(window, BoltOut::V1(output)).map_err(runtime))
    }

    fn save_state(&mut self) -> PResult<ROption<State>> {
        guard(|| Ok(self.0.save_state().into()))
    }

    fn restore_state(&mut self, state: State) -> PResult<()> {
        guard(|| self.0.restore_state(state).map_err(runtime))
    }
}

pub(crate) struct GroupingAdapter<G> {
    grouping: G,
    chosen: Vec<u32>,
}

impl<G: Grouping> DynGrouping for GroupingAdapter<G> {
    fn prepare(&mut self, context: &GroupingContext) -> PResult<()> {
        guard(|| self.grouping.prepare(context).map_err(runtime))
    }

    fn choose(&mut self, values: RSlice<'_, Value>, out: &mut RVec<u32>) {
        self.chosen.clear();
        // A panic here cannot be reported per tuple: it sends the tuple nowhere.
        let chosen = &mut self.chosen;
        let grouping = &mut self.grouping;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            grouping.choose(values.as_slice(), chosen);
        }));
        if caught.is_ok() {
            out.extend_from_slice(&self.chosen);
        }
    }
}

pub(crate) fn keys(keys: Option<&'static [ConfigKey]>) -> (bool, RVec<super::ConfigKeyDecl>) {
    match keys {
        Some(keys) => (true, keys.iter().map(|k| k.to_decl()).collect()),
        None => (false, RVec::new()),
    }
}

fn fields(fields: &[&str]) -> RVec<abi_stable::std_types::RString> {
    fields.iter().map(|f| (*f).into()).collect()
}

pub(crate) extern "C" fn no_outputs(_config: RStr<'_>) -> PResult<RVec<StreamDecl>> {
    PResult::ROk(RVec::new())
}

pub(crate) extern "C" fn any_inputs(
    _config: RStr<'_>,
    _inputs: RSlice<'_, InputDecl>,
) -> PResult<()> {
    PResult::ROk(())
}

/// How each kind of component declares its outputs and checks its inputs,
/// so one pair of boundary functions serves them all.
pub(crate) trait Declares {
    fn declare(config: &ComponentConfig<'_>, outputs: &mut OutputDeclarer) -> crate::Result<()>;
    fn check(_config: &ComponentConfig<'_>, _inputs: &[InputDecl]) -> crate::Result<()> {
        Ok(())
    }
}

impl<S: Spout> Declares for SpoutExtAdapter<S> {
    fn declare(config: &ComponentConfig<'_>, outputs: &mut OutputDeclarer) -> crate::Result<()> {
        S::declare_outputs_for(config, outputs)
    }
}

impl<B: Bolt> Declares for Rich<B> {
    fn declare(config: &ComponentConfig<'_>, outputs: &mut OutputDeclarer) -> crate::Result<()> {
        B::declare_outputs_for(config, outputs)
    }
    fn check(config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> crate::Result<()> {
        B::check_inputs(config, inputs)
    }
}

impl<B: BasicBolt> Declares for Basic<B> {
    fn declare(config: &ComponentConfig<'_>, outputs: &mut OutputDeclarer) -> crate::Result<()> {
        B::declare_outputs_for(config, outputs)
    }
    fn check(config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> crate::Result<()> {
        B::check_inputs(config, inputs)
    }
}

impl<B: WindowedBolt> Declares for Windowed<B> {
    fn declare(config: &ComponentConfig<'_>, outputs: &mut OutputDeclarer) -> crate::Result<()> {
        B::declare_outputs_for(config, outputs)
    }
    fn check(config: &ComponentConfig<'_>, inputs: &[InputDecl]) -> crate::Result<()> {
        B::check_inputs(config, inputs)
    }
}

pub(crate) extern "C" fn outputs_of<D: Declares>(config: RStr<'_>) -> PResult<RVec<StreamDecl>> {
    guard(|| {
        let mut outputs = OutputDeclarer::default();
        D::declare(&ComponentConfig::new(config.as_str()), &mut outputs).map_err(self::config)?;
        Ok(outputs.into_streams().into())
    })
}

extern "C" fn inputs_of<D: Declares>(
    config: RStr<'_>,
    inputs: RSlice<'_, InputDecl>,
) -> PResult<()> {
    guard(|| {
        D::check(&ComponentConfig::new(config.as_str()), inputs.as_slice()).map_err(self::config)
    })
}

extern "C" fn new_spout<S: Spout>(config: RStr<'_>) -> PResult<ComponentExtBox> {
    guard(|| {
        let spout = S::new(&ComponentConfig::new(config.as_str())).map_err(self::config)?;
        let object = DynSpoutExt_TO::from_value(SpoutExtAdapter(spout), TD_Opaque);
        Ok(ComponentExtBox::Spout(object))
    })
}

fn bolt_box<B: AnyBolt>(bolt: B) -> ComponentExtBox {
    let object: BoltExtBox = DynBoltExt_TO::from_value(BoltExtAdapter(bolt), TD_Opaque);
    ComponentExtBox::Bolt(object)
}

extern "C" fn new_bolt<B: Bolt>(config: RStr<'_>) -> PResult<ComponentExtBox> {
    guard(|| {
        let bolt = B::new(&ComponentConfig::new(config.as_str())).map_err(self::config)?;
        Ok(bolt_box(Rich(bolt)))
    })
}

extern "C" fn new_basic<B: BasicBolt>(config: RStr<'_>) -> PResult<ComponentExtBox> {
    guard(|| {
        let bolt = B::new(&ComponentConfig::new(config.as_str())).map_err(self::config)?;
        Ok(bolt_box(Basic(bolt)))
    })
}

extern "C" fn new_grouping<G: Grouping>(config: RStr<'_>) -> PResult<ComponentExtBox> {
    guard(|| {
        let grouping = G::new(&ComponentConfig::new(config.as_str())).map_err(self::config)?;
        let adapter = GroupingAdapter { grouping, chosen: Vec::new() };
        Ok(ComponentExtBox::Grouping(DynGrouping_TO::from_value(adapter, TD_Opaque)))
    })
}

/// The 1.1 descriptor of a spout.
pub(crate) fn spout_ext<S: Spout>() -> ComponentExt {
    let (declares_config, config_keys) = keys(S::CONFIG_KEYS);
    ComponentExt {
        kind: ComponentKind::SPOUT,
        name: S::NAME.into(),
        description: S::DESCRIPTION.into(),
        declares_config,
        config_keys,
        input_fields: RVec::new(),
        auto_ack: false,
        windowed: false,
        ids_survive_swap: S::IDS_SURVIVE_SWAP,
        declare_outputs: outputs_of::<SpoutExtAdapter<S>>,
        check_inputs: any_inputs,
        new: ROption::RSome(new_spout::<S>),
    }
}

/// The 1.1 descriptor of a rich bolt.
pub(crate) fn bolt_ext<B: Bolt>() -> ComponentExt {
    let (declares_config, config_keys) = keys(B::CONFIG_KEYS);
    ComponentExt {
        kind: ComponentKind::BOLT,
        name: B::NAME.into(),
        description: B::DESCRIPTION.into(),
        declares_config,
        config_keys,
        input_fields: fields(B::INPUT_FIELDS),
        auto_ack: false,
        windowed: false,
        ids_survive_swap: false,
        declare_outputs: outputs_of::<Rich<B>>,
        check_inputs: inputs_of::<Rich<B>>,
        new: ROption::RSome(new_bolt::<B>),
    }
}

/// The 1.1 descriptor of a basic bolt.
pub(crate) fn basic_bolt_ext<B: BasicBolt>() -> ComponentExt {
    let (declares_config, config_keys) = keys(B::CONFIG_KEYS);
    ComponentExt {
        kind: ComponentKind::BOLT,
        name: B::NAME.into(),
        description: B::DESCRIPTION.into(),
        declares_config,
        config_keys,
        input_fields: fields(B::INPUT_FIELDS),
        auto_ack: true,
        windowed: false,
        ids_survive_swap: false,
        declare_outputs: outputs_of::<Basic<B>>,
        check_inputs: inputs_of::<Basic<B>>,
        new: ROption::RSome(new_basic::<B>),
    }
}

/// The 1.1 descriptor of a wait strategy (built through its 1.0 constructor).
pub(crate) fn wait_ext<W: crate::WaitStrategy>() -> ComponentExt {
    let (declares_config, config_keys) = keys(W::CONFIG_KEYS);
    ComponentExt {
        kind: ComponentKind::WAIT_STRATEGY,
        name: W::NAME.into(),
        description: W::DESCRIPTION.into(),
        declares_config,
        config_keys,
        input_fields: RVec::new(),
        auto_ack: false,
        windowed: false,
        ids_survive_swap: false,
        declare_outputs: no_outputs,
        check_inputs: any_inputs,
        new: ROption::RNone,
    }
}

/// The 1.1 descriptor of a custom grouping.
pub(crate) fn grouping_ext<G: Grouping>() -> ComponentExt {
    let (declares_config, config_keys) = keys(G::CONFIG_KEYS);
    ComponentExt {
        kind: ComponentKind::GROUPING,
        name: G::NAME.into(),
        description: G::DESCRIPTION.into(),
        declares_config,
        config_keys,
        input_fields: RVec::new(),
        auto_ack: false,
        windowed: false,
        ids_survive_swap: false,
        declare_outputs: no_outputs,
        check_inputs: any_inputs,
        new: ROption::RSome(new_grouping::<G>),
    }
}

extern "C" fn new_windowed<B: WindowedBolt>(config: RStr<'_>) -> PResult<ComponentExtBox> {
    guard(|| {
        let bolt = B::new(&ComponentConfig::new(config.as_str())).map_err(self::config)?;
        Ok(bolt_box(Windowed(bolt)))
    })
}

/// The 1.1 descriptor of a windowed bolt (it has no 1.0 descriptor).
pub(crate) fn windowed_bolt_ext<B: WindowedBolt>() -> ComponentExt {
    let (declares_config, config_keys) = keys(B::CONFIG_KEYS);
    ComponentExt {
        kind: ComponentKind::BOLT,
        name: B::NAME.into(),
        description: B::DESCRIPTION.into(),
        declares_config,
        config_keys,
        input_fields: fields(B::INPUT_FIELDS),
        auto_ack: false,
        windowed: true,
        ids_survive_swap: false,
        declare_outputs: outputs_of::<Windowed<B>>,
        check_inputs: inputs_of::<Windowed<B>>,
        new: ROption::RSome(new_windowed::<B>),
    }
}
