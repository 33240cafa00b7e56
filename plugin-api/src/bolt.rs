//! The [`Bolt`] and [`BasicBolt`] traits: processing steps.

use crate::abi::InputDecl;
use crate::{
    BasicBatchCollector, BasicCollector, BoltCollector, ComponentConfig, ConfigKey, OutputDeclarer,
    Result, State, TaskContext, Tuple,
};

/// A processing step that anchors and acks by itself, like Storm's `IRichBolt`.
///
/// Every input must eventually be acked or failed through the
/// [`BoltCollector`], or its tree times out. Returning `Err` from `execute`
/// fails the input.
pub trait Bolt: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// Contract 1.1: the config keys the bolt accepts. When declared,
    /// `squall validate` reports any other key, with a did-you-mean, before
    /// `new` runs, and `squall inspect` prints them.
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;
    /// Contract 1.1: fields every input stream must carry; `squall validate`
    /// checks them against what the bolt subscribes to.
    const INPUT_FIELDS: &'static [&'static str] = &[];
    /// Contract 1.2: how long `cleanup` may take at shutdown; the host waits
    /// at least this long for the task's thread before it reports the task
    /// as blocked (`None`: the host's default grace).
    const CLOSE_BUDGET: Option<std::time::Duration> = None;
    /// Contract 1.2: the bolt does its work on tick tuples (a periodic
    /// flush, an expiry) and needs one at least this often. `squall
    /// validate` refuses a topology that gives the bolt no
    /// `tick_tuple_freq_secs`, or a longer one, instead of letting it run
    /// doing nothing (`None`: it needs no ticks).
    const TICKS: Option<std::time::Duration> = None;
    /// Contract 1.2: the streams the component emits on, by name. When
    /// given, `squall validate` refuses a topology whose config makes the
    /// component declare outputs without one of them (a config that
    /// renames or drops a stream), instead of letting every such emit be
    /// refused at run time (empty: not declared; nothing is checked).
    const EMITS: &'static [&'static str] = &[];
    /// Contract 1.3: the durable stores [`stores`](Self::stores) may
    /// return, by name and kind (`None`, the default: not declared). Declared,
    /// `squall inspect` lists them and `squall validate` refuses a keyed
    /// store whose inputs are not grouped by fields (several tasks would
    /// write one key); a checkpoint whose stores differ from the list is
    /// refused.
    const STORES: Option<&'static [crate::state::StoreSpec]> = None;

    /// Declares the output streams and their fields.
    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    /// Builds an instance from the component's `config` table.
    ///
    /// # Errors
    /// When the config is invalid; the message reaches the user.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

    /// Contract 1.3: the most bytes one task of this component holds
    /// outside the host's queues with `config` (records fetched ahead,
    /// output not yet confirmed). The host adds it, times the parallelism,
    /// to its memory estimate at validate time, so that `memory_budget_mib`
    /// bounds what the plugin buffers too. The default is 0.
    ///
    /// # Errors
    /// When the config is invalid (as in `new`): reported at the component.
    fn buffer_bytes(_config: &ComponentConfig<'_>) -> Result<u64> {
        Ok(0)
    }

    /// Called once on the task's thread before the first `execute`.
    ///
    /// # Errors
    /// When the bolt cannot start; the topology does not run.
    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        Ok(())
    }

    /// Processes one input.
    ///
    /// # Errors
    /// An error fails the input tuple.
    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()>;

    /// Contract 1.3: processes a run of inputs in one call (one boundary
    /// crossing for the whole run). The default takes them one by one and
    /// calls [`execute`](Self::execute) on each; a bolt may override it to
    /// work on the whole run at once. Anchor emits and ack or fail each
    /// input through `collector`, exactly as `execute` does.
    ///
    /// # Errors
    /// An error fails the input taken last ([`Inputs`](crate::Inputs)
    /// counts them); the host hands the inputs not taken yet to the next
    /// call.
    fn execute_batch(
        &mut self,
        inputs: &mut crate::Inputs<'_, '_>,
        collector: &mut BoltCollector<'_>,
    ) -> Result<()> {
        for input in inputs {
            self.execute(&input, collector)?;
        }
        Ok(())
    }

    /// Contract 1.3: the bolt's wake handle was called. A bolt that took
    /// [`TaskContext::waker`](crate::TaskContext::waker) in `prepare` is
    /// called here, on its own thread, after one or more `wake`s, to ack,
    /// fail or emit what its other threads finished (a sink's delivery
    /// reports, say) without waiting for its next input or tick. Wakes
    /// that arrive while it runs call it once more afterwards. The
    /// default does nothing.
    fn woken(&mut self, _collector: &mut BoltCollector<'_>) -> Result<()> {
        Ok(())
    }

    /// Called once at shutdown.
    fn cleanup(&mut self) {}

    /// Contract 1.1: declares the outputs for a given config. The default
    /// calls `declare_outputs`.
    ///
    /// # Errors
    /// When the config is invalid.
    fn declare_outputs_for(
        _config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        Self::declare_outputs(outputs);
        Ok(())
    }

    /// Contract 1.1: checks the inputs the topology subscribes the bolt to
    /// (streams, groupings, fields); an error refuses the topology at
    /// `squall validate`, at the component's location.
    ///
    /// # Errors
    /// When the bolt cannot work with these inputs.
    fn check_inputs(_config: &ComponentConfig<'_>, _inputs: &[InputDecl]) -> Result<()> {
        Ok(())
    }

    /// Contract 1.1: saves the state a replacing instance takes over
    /// (`None`, the default: the bolt keeps no state).
    fn save_state(&mut self) -> Option<State> {
        None
    }

    /// Contract 1.1: takes over a predecessor's state, before `prepare`.
    ///
    /// # Errors
    /// When the format is unknown: the replacement is then rolled back. The
    /// default refuses every state.
    fn restore_state(&mut self, state: State) -> Result<()> {
        Err(format!("{} keeps no state; it cannot take over `{}`", Self::NAME, state.format).into())
    }

    /// Contract 1.2: the durable stores the bolt keeps (none by default).
    /// The host checkpoints what they change and restores them after a
    /// restart, each key on the task its fields grouping routes it to; a
    /// live swap hands them to the new instance (docs/state.md).
    fn stores(&mut self) -> crate::state::Stores<'_> {
        crate::state::Stores::none()
    }

    /// Contract 1.2: checkpoint `checkpoint`'s barrier has come from every
    /// input task. The host reads the stores right after this returns, so
    /// what they hold then is what the checkpoint records; tuples executed
    /// after it belong to the next checkpoint. A sink that writes elsewhere
    /// seals what it staged here, under this number, to write it once
    /// [`committed`](Self::committed) says the number committed. The default
    /// does nothing.
    fn barrier(&mut self, _checkpoint: u64) {}

    /// Contract 1.2: checkpoint `checkpoint` is committed: everything the
    /// stores held at its barrier is durable (a sink that writes elsewhere
    /// may write what it staged for it now).
    fn committed(&mut self, _checkpoint: u64) {}
}

/// A processing step whose inputs are acked for it, like Storm's `BaseBasicBolt`:
/// every emit is anchored to the input, and the input is acked when `execute`
/// returns `Ok` and failed when it returns `Err`.
pub trait BasicBolt: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// Contract 1.1: the config keys the bolt accepts. When declared,
    /// `squall validate` reports any other key, with a did-you-mean, before
    /// `new` runs, and `squall inspect` prints them.
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;
    /// Contract 1.1: fields every input stream must carry; `squall validate`
    /// checks them against what the bolt subscribes to.
    const INPUT_FIELDS: &'static [&'static str] = &[];
    /// Contract 1.2: how long `cleanup` may take at shutdown; the host waits
    /// at least this long for the task's thread before it reports the task
    /// as blocked (`None`: the host's default grace).
    const CLOSE_BUDGET: Option<std::time::Duration> = None;
    /// Contract 1.2: the bolt does its work on tick tuples (a periodic
    /// flush, an expiry) and needs one at least this often. `squall
    /// validate` refuses a topology that gives the bolt no
    /// `tick_tuple_freq_secs`, or a longer one, instead of letting it run
    /// doing nothing (`None`: it needs no ticks).
    const TICKS: Option<std::time::Duration> = None;
    /// Contract 1.2: the streams the component emits on, by name. When
    /// given, `squall validate` refuses a topology whose config makes the
    /// component declare outputs without one of them (a config that
    /// renames or drops a stream), instead of letting every such emit be
    /// refused at run time (empty: not declared; nothing is checked).
    const EMITS: &'static [&'static str] = &[];
    /// Contract 1.3: the durable stores [`stores`](Self::stores) may
    /// return, by name and kind (`None`, the default: not declared). Declared,
    /// `squall inspect` lists them and `squall validate` refuses a keyed
    /// store whose inputs are not grouped by fields (several tasks would
    /// write one key); a checkpoint whose stores differ from the list is
    /// refused.
    const STORES: Option<&'static [crate::state::StoreSpec]> = None;

    /// Declares the output streams and their fields.
    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    /// Builds an instance from the component's `config` table.
    ///
    /// # Errors
    /// When the config is invalid; the message reaches the user.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

    /// Contract 1.3: the most bytes one task of this component holds
    /// outside the host's queues with `config` (records fetched ahead,
    /// output not yet confirmed). The host adds it, times the parallelism,
    /// to its memory estimate at validate time, so that `memory_budget_mib`
    /// bounds what the plugin buffers too. The default is 0.
    ///
    /// # Errors
    /// When the config is invalid (as in `new`): reported at the component.
    fn buffer_bytes(_config: &ComponentConfig<'_>) -> Result<u64> {
        Ok(0)
    }

    /// Called once on the task's thread before the first `execute`.
    ///
    /// # Errors
    /// When the bolt cannot start; the topology does not run.
    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        Ok(())
    }

    /// Processes one input.
    ///
    /// # Errors
    /// An error fails the input tuple (and so its whole tree).
    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()>;

    /// Contract 1.3: processes a run of inputs in one call (one boundary
    /// crossing for the whole run). The default takes them one by one and
    /// calls [`execute`](Self::execute) on each, with
    /// [`collector.for_input(input)`](BasicBatchCollector::for_input), so
    /// that each input's emits are anchored to it. A bolt may override it
    /// to work on the whole run at once: take the inputs from `inputs`
    /// (`for input in inputs`, or `inputs.take_all()`) and emit each one's
    /// tuples through `collector.for_input(input)` or, one tuple per input,
    /// [`collector.emit_each`](BasicBatchCollector::emit_each). When the
    /// call returns `Ok` the host acks every input taken, as it acks each
    /// input whose `execute` returned `Ok`.
    ///
    /// # Errors
    /// An error fails the input taken last ([`Inputs`](crate::Inputs)
    /// counts them) and the host acks the ones taken before it; the inputs
    /// not taken yet are handed to the next call.
    fn execute_batch(
        &mut self,
        inputs: &mut crate::Inputs<'_, '_>,
        collector: &mut BasicBatchCollector<'_>,
    ) -> Result<()> {
        for input in inputs {
            self.execute(&input, collector.for_input(&input))?;
        }
        Ok(())
    }

    /// Called once at shutdown.
    fn cleanup(&mut self) {}

    /// Contract 1.1: declares the outputs for a given config. The default
    /// calls `declare_outputs`.
    ///
    /// # Errors
    /// When the config is invalid.
    fn declare_outputs_for(
        _config: &ComponentConfig<'_>,
        outputs: &mut OutputDeclarer,
    ) -> Result<()> {
        Self::declare_outputs(outputs);
        Ok(())
    }

    /// Contract 1.1: checks the inputs the topology subscribes the bolt to
    /// (streams, groupings, fields); an error refuses the topology at
    /// `squall validate`, at the component's location.
    ///
    /// # Errors
    /// When the bolt cannot work with these inputs.
    fn check_inputs(_config: &ComponentConfig<'_>, _inputs: &[InputDecl]) -> Result<()> {
        Ok(())
    }

    /// Contract 1.1: saves the state a replacing instance takes over
    /// (`None`, the default: the bolt keeps no state).
    fn save_state(&mut self) -> Option<State> {
        None
    }

    /// Contract 1.1: takes over a predecessor's state, before `prepare`.
    ///
    /// # Errors
    /// When the format is unknown: the replacement is then rolled back. The
    /// default refuses every state.
    fn restore_state(&mut self, state: State) -> Result<()> {
        Err(format!("{} keeps no state; it cannot take over `{}`", Self::NAME, state.format).into())
    }

    /// Contract 1.2: the durable stores the bolt keeps (none by default).
    /// The host checkpoints what they change and restores them after a
    /// restart, each key on the task its fields grouping routes it to; a
    /// live swap hands them to the new instance (docs/state.md).
    fn stores(&mut self) -> crate::state::Stores<'_> {
        crate::state::Stores::none()
    }

    /// Contract 1.2: checkpoint `checkpoint`'s barrier has come from every
    /// input task. The host reads the stores right after this returns, so
    /// what they hold then is what the checkpoint records; tuples executed
    /// after it belong to the next checkpoint. A sink that writes elsewhere
    /// seals what it staged here, under this number, to write it once
    /// [`committed`](Self::committed) says the number committed. The default
    /// does nothing.
    fn barrier(&mut self, _checkpoint: u64) {}

    /// Contract 1.2: checkpoint `checkpoint` is committed: everything the
    /// stores held at its barrier is durable (a sink that writes elsewhere
    /// may write what it staged for it now).
    fn committed(&mut self, _checkpoint: u64) {}
}
