//! Adapters from the plain-Rust traits to the contract 1.3 objects, and the
//! descriptors a 1.3 library lists.

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{ROption, RStr, RString, RVec},
};

use super::adapt_1_2::{Bolt12Adapter, Spout12Adapter};
use super::ext::{SpoutOutputMut, State, WakerBox, WindowView};
use super::ext_adapt::{
    config, runtime, AnyBolt, Basic, BoltExtAdapter, Rich, SpoutExtAdapter, Windowed,
};
use super::v1_2::{BoltOutputMut, DynBolt12, DynSpout12, StoreDelta};
use super::v1_3::{
    ComponentBox13, ComponentExt13, DynBolt13, DynBolt13_TO, DynCoordinator, DynCoordinator_TO,
    DynSpout13, DynSpout13_TO, PartitionEvent, StoreDecl,
};
use super::{guard, ComponentKind, PResult, TaskContext, TaskExt};
use crate::collector::BoltOut;
use crate::state::StoreSpec;
use crate::{
    BasicBolt, Bolt, ComponentConfig, Coordinator, Inputs, MessageId, RunView, Spout,
    SpoutCollector, Tuple, Waker, WindowedBolt,
};

/// A 1.3 spout: the 1.2 adapter's calls, then `next_batch`.
struct Spout13Adapter<S>(Spout12Adapter<S>);

impl<S: Spout> DynSpout13 for Spout13Adapter<S> {
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
        DynSpout12::next_tuple(&mut self.0, output)
    }

    fn ack(&mut self, message_id: MessageId) -> PResult<()> {
        DynSpout12::ack(&mut self.0, message_id)
    }

    fn fail(&mut self, message_id: MessageId) -> PResult<()> {
        DynSpout12::fail(&mut self.0, message_id)
    }

    fn close(&mut self) -> PResult<()> {
        DynSpout12::close(&mut self.0)
    }

    fn save_state(&mut self) -> PResult<ROption<State>> {
        DynSpout12::save_state(&mut self.0)
    }

    fn restore_state(&mut self, state: State) -> PResult<()> {
        DynSpout12::restore_state(&mut self.0, state)
    }

    fn checkpoint(&mut self, checkpoint: u64) -> PResult<ROption<State>> {
        self.0.checkpoint(checkpoint)
    }

    fn committed(&mut self, checkpoint: u64) -> PResult<()> {
        self.0.committed(checkpoint)
    }

    fn restore_checkpoint(&mut self, position: State) -> PResult<()> {
        self.0.restore_checkpoint(position)
    }

    fn next_batch(&mut self, max: u32, output: SpoutOutputMut<'_>) -> PResult<()> {
        let spout = &mut self.0 .0 .0;
        guard(|| {
            let mut collector = SpoutCollector::from_ext(output);
            spout.next_batch(max as usize, &mut collector).map_err(runtime)
        })
    }
}

/// A 1.3 bolt: the 1.2 adapter's calls, then `execute_batch` and the
/// wake handle's two calls. `.1`: the wake handle, until `prepare`, boxed:
/// held inline (16 bytes more in the adapter), unchained word count ran
/// about 40 % slower (docs/performance.md, "A 16-byte field").
struct Bolt13Adapter<B>(Bolt12Adapter<B>, Option<Box<Waker>>);

impl<B: AnyBolt> DynBolt13 for Bolt13Adapter<B> {
    fn prepare(&mut self, context: &TaskContext, ext: &TaskExt) -> PResult<()> {
        // Only a rich bolt has `woken`: the others are not offered a handle.
        let waker = self.1.take().filter(|_| B::WOKEN).map(|w| *w);
        let context = crate::TaskContext::from_host(context.clone(), Some(ext.clone()), waker);
        let bolt = &mut self.0 .0 .0;
        guard(|| bolt.prepare(&context).map_err(runtime))
    }

    fn execute(&mut self, input: &Tuple<'_>, output: BoltOutputMut<'_>) -> PResult<()> {
        DynBolt12::execute(&mut self.0, input, output)
    }

    fn cleanup(&mut self) -> PResult<()> {
        DynBolt12::cleanup(&mut self.0)
    }

    fn execute_window(
        &mut self,
        window: &WindowView<'_>,
        output: BoltOutputMut<'_>,
    ) -> PResult<()> {
        DynBolt12::execute_window(&mut self.0, window, output)
    }

    fn save_state(&mut self) -> PResult<ROption<State>> {
        DynBolt12::save_state(&mut self.0)
    }

    fn restore_state(&mut self, state: State) -> PResult<()> {
        DynBolt12::restore_state(&mut self.0, state)
    }

    fn checkpoint(&mut self, checkpoint: u64) -> PResult<RVec<StoreDelta>> {
        self.0.checkpoint(checkpoint)
    }

    fn committed(&mut self, checkpoint: u64) -> PResult<()> {
        self.0.committed(checkpoint)
    }

    fn restore_stores(&mut self, stores: RVec<StoreDelta>) -> PResult<()> {
        self.0.restore_stores(stores)
    }

    fn execute_batch(
        &mut self,
        inputs: RunView<'_>,
        output: BoltOutputMut<'_>,
        taken: &mut u32,
    ) -> PResult<()> {
        let bolt = &mut self.0 .0 .0;
        guard(|| {
            let mut inputs = Inputs::new(inputs, taken);
            bolt.execute_batch(&mut inputs, BoltOut::V12(output)).map_err(runtime)
        })
    }

    fn set_waker(&mut self, waker: WakerBox) -> PResult<()> {
        self.1 = Some(Box::new(Waker::from_host(waker)));
        PResult::ROk(())
    }

    fn woken(&mut self, output: BoltOutputMut<'_>) -> PResult<()> {
        let bolt = &mut self.0 .0 .0;
        guard(|| bolt.woken(BoltOut::V12(output)).map_err(runtime))
    }
}

struct CoordinatorAdapter<C>(C);

impl<C: Coordinator> DynCoordinator for CoordinatorAdapter<C> {
    fn join(&mut self, member: RStr<'_>, partitions: u32) -> PResult<u32> {
        guard(|| self.0.join(member.as_str(), partitions).map_err(runtime))
    }

    fn poll(&mut self, wait_ms: u64) -> PResult<RVec<PartitionEvent>> {
        let wait = std::time::Duration::from_millis(wait_ms);
        guard(|| self.0.poll(wait).map(RVec::from).map_err(runtime))
    }

    fn released(&mut self, partition: u32, epoch: u64) -> PResult<()> {
        guard(|| self.0.released(partition, epoch).map_err(runtime))
    }

    fn status(&mut self) -> PResult<RString> {
        guard(|| self.0.status().map(RString::from).map_err(runtime))
    }

    fn leave(&mut self) -> PResult<()> {
        guard(|| {
            self.0.leave();
            Ok(())
        })
    }
}

extern "C" fn new_spout<S: Spout>(cfg: RStr<'_>) -> PResult<ComponentBox13> {
    guard(|| {
        let spout = S::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?;
        let adapter = Spout13Adapter(Spout12Adapter(SpoutExtAdapter(spout)));
        Ok(ComponentBox13::Spout(DynSpout13_TO::from_value(adapter, TD_Opaque)))
    })
}

fn bolt_box<B: AnyBolt>(bolt: B) -> ComponentBox13 {
    let adapter = Bolt13Adapter(Bolt12Adapter(BoltExtAdapter(bolt)), None);
    ComponentBox13::Bolt(DynBolt13_TO::from_value(adapter, TD_Opaque))
}

extern "C" fn new_bolt<B: Bolt>(cfg: RStr<'_>) -> PResult<ComponentBox13> {
    guard(|| Ok(bolt_box(Rich(B::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?))))
}

extern "C" fn new_basic<B: BasicBolt>(cfg: RStr<'_>) -> PResult<ComponentBox13> {
    guard(|| Ok(bolt_box(Basic(B::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?))))
}

extern "C" fn new_windowed<B: WindowedBolt>(cfg: RStr<'_>) -> PResult<ComponentBox13> {
    guard(|| Ok(bolt_box(Windowed(B::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?))))
}

extern "C" fn new_coordinator<C: Coordinator>(cfg: RStr<'_>) -> PResult<ComponentBox13> {
    guard(|| {
        let coordinator = C::new(&ComponentConfig::new(cfg.as_str())).map_err(config)?;
        let object = DynCoordinator_TO::from_value(CoordinatorAdapter(coordinator), TD_Opaque);
        Ok(ComponentBox13::Coordinator(object))
    })
}

fn descriptor(
    kind: ComponentKind,
    name: &str,
    batch: bool,
    new: extern "C" fn(RStr<'_>) -> PResult<ComponentBox13>,
) -> ComponentExt13 {
    let (declares_stores, stores) = (false, RVec::new());
    let buffer_bytes = no_buffers;
    ComponentExt13 { kind, name: name.into(), batch, new, declares_stores, stores, buffer_bytes }
}

/// A descriptor with `buffer_bytes` set.
fn with_buffers(
    mut d: ComponentExt13,
    buffer_bytes: extern "C" fn(RStr<'_>) -> PResult<u64>,
) -> ComponentExt13 {
    d.buffer_bytes = buffer_bytes;
    d
}

extern "C" fn no_buffers(_: RStr<'_>) -> PResult<u64> {
    PResult::ROk(0)
}

extern "C" fn spout_buffers<S: Spout>(cfg: RStr<'_>) -> PResult<u64> {
    guard(|| S::buffer_bytes(&ComponentConfig::new(cfg.as_str())).map_err(config))
}

extern "C" fn bolt_buffers<B: Bolt>(cfg: RStr<'_>) -> PResult<u64> {
    guard(|| B::buffer_bytes(&ComponentConfig::new(cfg.as_str())).map_err(config))
}

extern "C" fn basic_buffers<B: BasicBolt>(cfg: RStr<'_>) -> PResult<u64> {
    guard(|| B::buffer_bytes(&ComponentConfig::new(cfg.as_str())).map_err(config))
}

/// A bolt's descriptor with the stores it declares (`Bolt::STORES`).
fn with_stores(mut d: ComponentExt13, declared: Option<&[StoreSpec]>) -> ComponentExt13 {
    if let Some(declared) = declared {
        d.declares_stores = true;
        d.stores =
            declared.iter().map(|s| StoreDecl { name: s.name.into(), kind: s.kind }).collect();
    }
    d
}

/// The 1.3 descriptor of a spout: the host calls `next_batch`.
pub(crate) fn spout_13<S: Spout>() -> ComponentExt13 {
    with_buffers(
        descriptor(ComponentKind::SPOUT, S::NAME, true, new_spout::<S>),
        spout_buffers::<S>,
    )
}

/// The 1.3 descriptor of a rich bolt: the host calls `execute_batch`.
pub(crate) fn bolt_13<B: Bolt>() -> ComponentExt13 {
    let d = with_stores(descriptor(ComponentKind::BOLT, B::NAME, true, new_bolt::<B>), B::STORES);
    with_buffers(d, bolt_buffers::<B>)
}

/// The 1.3 descriptor of a basic bolt: the host calls `execute_batch`,
/// and the adapter anchors and acks each input.
pub(crate) fn basic_bolt_13<B: BasicBolt>() -> ComponentExt13 {
    let d = with_stores(descriptor(ComponentKind::BOLT, B::NAME, true, new_basic::<B>), B::STORES);
    with_buffers(d, basic_buffers::<B>)
}

/// The 1.3 descriptor of a windowed bolt: no batch entry point (the host
/// hands it windows, and builds it through its 1.2 descriptor), only its
/// declared stores.
pub(crate) fn windowed_bolt_13<B: WindowedBolt>() -> ComponentExt13 {
    with_stores(descriptor(ComponentKind::BOLT, B::NAME, false, new_windowed::<B>), B::STORES)
}

/// The 1.3 descriptor of a coordinator, and its 1.1 descriptor (for its
/// config keys).
pub(crate) fn coordinator_13<C: Coordinator>() -> (ComponentExt13, super::ComponentExt) {
    let (declares_config, config_keys) = super::ext_adapt::keys(C::CONFIG_KEYS);
    let ext = super::ComponentExt {
        kind: ComponentKind::COORDINATOR,
        name: C::NAME.into(),
        description: C::DESCRIPTION.into(),
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
    (descriptor(ComponentKind::COORDINATOR, C::NAME, false, new_coordinator::<C>), ext)
}

#[cfg(test)]
mod tests {
    use super::super::v1_3::PartitionChange;
    use super::super::CatalogueBuilder;
    use super::*;

    /// Assigns every partition to the one member, at epoch 7, then nothing.
    struct Solo {
        partitions: u32,
        told: bool,
    }

    impl Coordinator for Solo {
        const NAME: &'static str = "Solo";
        const CONFIG_KEYS: Option<&'static [crate::ConfigKey]> = Some(&[]);

        fn new(_config: &ComponentConfig<'_>) -> crate::Result<Self> {
            Ok(Solo { partitions: 0, told: false })
        }

        fn join(&mut self, _member: &str, partitions: u32) -> crate::Result<u32> {
            self.partitions = partitions;
            Ok(partitions)
        }

        fn poll(&mut self, _wait: std::time::Duration) -> crate::Result<Vec<PartitionEvent>> {
            if std::mem::replace(&mut self.told, true) {
                return Ok(Vec::new());
            }
            let event = |partition| PartitionEvent {
                change: PartitionChange::ASSIGNED,
                partition,
                epoch: 7,
                valid_for_ms: u64::MAX,
            };
            Ok((0..self.partitions).map(event).collect())
        }

        fn released(&mut self, _partition: u32, _epoch: u64) -> crate::Result<()> {
            Err("not held".into())
        }

        fn status(&mut self) -> crate::Result<String> {
            Ok(format!("{{\"partitions\":{}}}", self.partitions))
        }
    }

    /// Emits each input twice, as two one-tuple emits; errs on "bad".
    struct Twice;

    impl BasicBolt for Twice {
        const NAME: &'static str = "Twice";

        fn new(_config: &ComponentConfig<'_>) -> crate::Result<Self> {
            Ok(Twice)
        }

        fn execute(
            &mut self,
            input: &Tuple<'_>,
            collector: &mut crate::BasicCollector<'_>,
        ) -> crate::Result<()> {
            if input.values()[0] == crate::Value::from("bad") {
                return Err("bad".into());
            }
            collector.emit(input.values());
            collector.emit(input.values());
            Ok(())
        }
    }

    /// Re-emits a run with one `emit_each`.
    struct Each;

    impl BasicBolt for Each {
        const NAME: &'static str = "Each";

        fn new(_config: &ComponentConfig<'_>) -> crate::Result<Self> {
            Ok(Each)
        }

        fn execute(
            &mut self,
            _input: &Tuple<'_>,
            _collector: &mut crate::BasicCollector<'_>,
        ) -> crate::Result<()> {
            Err("execute_batch only".into())
        }

        fn execute_batch(
            &mut self,
            inputs: &mut Inputs<'_, '_>,
            collector: &mut crate::BasicBatchCollector<'_>,
        ) -> crate::Result<()> {
            let run = inputs.take_all();
            let values: Vec<_> = run.iter().flat_map(|t| t.values().to_vec()).collect();
            collector.emit_each(&run, &values);
            Ok(())
        }
    }

    /// `execute_batch` through the 1.3 boundary on `tuples` (anchors as
    /// given; 0: untracked), returning what it recorded, `taken` and
    /// whether it returned `Ok`.
    fn basic_batch<B: BasicBolt>(
        words: &[&str],
        anchors: &[u64],
    ) -> (crate::testing::Recorder, u32, bool) {
        let mut run = crate::testing::TestRun::new("up");
        for (w, &a) in words.iter().zip(anchors) {
            let anchor = if a == 0 { crate::Anchor::NONE } else { crate::Anchor(a) };
            run.push(&[crate::Value::from(*w)], anchor);
        }
        let ComponentBox13::Bolt(mut bolt) = (basic_bolt_13::<B>().new)("".into()).unwrap() else {
            panic!("a bolt box");
        };
        let mut recorder = crate::testing::Recorder::default();
        let mut taken = 0;
        let ok = bolt.execute_batch(run.view(), recorder.bolt_output(), &mut taken).is_ok();
        (recorder, taken, ok)
    }

    fn anchors_of(recorder: &crate::testing::Recorder) -> Vec<Vec<u64>> {
        recorder.emitted.iter().map(|e| e.anchors.iter().map(|a| a.0).collect()).collect()
    }

    #[test]
    fn a_basic_bolts_batch_anchors_each_emit_to_its_input_and_acks_nothing_itself() {
        let (recorder, taken, ok) = basic_batch::<Twice>(&["a", "b", "c"], &[4, 0, 6]);
        assert!(ok);
        assert_eq!(taken, 3);
        assert_eq!(anchors_of(&recorder), [vec![4], vec![4], vec![], vec![], vec![6], vec![6]]);
        assert_eq!(recorder.first_strings(), ["a", "a", "b", "b", "c", "c"]);
        assert!(recorder.acked.is_empty() && recorder.failed.is_empty(), "the host acks");

        // An error stops the run at the input that erred: the host fails it
        // (input `taken - 1`), acks the ones before it, and hands the rest on.
        let (recorder, taken, ok) = basic_batch::<Twice>(&["a", "bad", "c"], &[4, 5, 6]);
        assert!(!ok);
        assert_eq!(taken, 2);
        assert_eq!(anchors_of(&recorder), [vec![4], vec![4]]);
        assert!(recorder.acked.is_empty() && recorder.failed.is_empty());
    }

    #[test]
    fn a_basic_bolt_may_emit_a_whole_run_at_once_each_tuple_anchored_to_its_input() {
        let (recorder, taken, ok) = basic_batch::<Each>(&["a", "b", "c", "d"], &[0, 0, 0, 0]);
        assert!(ok);
        assert_eq!(taken, 4);
        assert_eq!(recorder.emit_many_calls, [4], "one call for the untracked run");
        assert_eq!(recorder.first_strings(), ["a", "b", "c", "d"]);
        let (recorder, taken, ok) = basic_batch::<Each>(&["a", "b", "c", "d"], &[0, 0, 3, 0]);
        assert!(ok && taken == 4);
        assert_eq!(recorder.emit_many_calls, [2, 1]);
        assert_eq!(anchors_of(&recorder), [vec![], vec![], vec![3], vec![]]);
        assert!(recorder.acked.is_empty() && recorder.failed.is_empty(), "the host acks");
    }

    #[test]
    fn a_coordinator_is_listed_in_1_1_and_1_3_and_answers_through_the_boundary() {
        let mut builder = CatalogueBuilder::new("demo", "0.1.0");
        builder.coordinator::<Solo>();
        let (v11, v13) = {
            let mut other = CatalogueBuilder::new("demo", "0.1.0");
            other.coordinator::<Solo>();
            (builder.build_extensions(), other.build_extensions_13())
        };
        assert_eq!(v11.len(), 1);
        assert_eq!(v11[0].kind, ComponentKind::COORDINATOR);
        assert!(v11[0].declares_config && v11[0].config_keys.is_empty());
        assert_eq!(
            (v13[0].kind, v13[0].name.as_str(), v13[0].batch),
            (ComponentKind::COORDINATOR, "Solo", false)
        );
        let ComponentBox13::Coordinator(mut c) = (v13[0].new)("".into()).unwrap() else {
            panic!("a coordinator box");
        };
        assert_eq!(c.join("host-a".into(), 3).unwrap(), 3);
        let events = c.poll(10).unwrap();
        assert_eq!(
            events.iter().map(|e| (e.partition, e.epoch)).collect::<Vec<_>>(),
            [(0, 7), (1, 7), (2, 7)]
        );
        assert!(c.poll(10).unwrap().is_empty());
        assert_eq!(c.status().unwrap().as_str(), "{\"partitions\":3}");
        let refused = c.released(0, 7).into_result().unwrap_err();
        assert!(refused.message.contains("not held"), "{refused:?}");
        assert!(c.leave().is_ok());
    }
}
