//! The [`Spout`] trait: a source of tuples.

use crate::{
    ComponentConfig, ConfigKey, MessageId, OutputDeclarer, Result, SpoutCollector, State,
    TaskContext,
};

/// A source of tuples, like Storm's `IRichSpout`.
///
/// The host calls every method from the spout task's own thread. Panics are
/// caught: the host fails what was in flight and rebuilds the instance.
pub trait Spout: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// Contract 1.1: the config keys the spout accepts. When declared,
    /// `squall validate` reports any other key, with a did-you-mean, before
    /// [`Spout::new`] runs, and `squall inspect` prints them.
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;
    /// Contract 1.1: true when a message id this spout emits can be acked or
    /// failed by a later instance that took over its state (the id names the
    /// message in the source, e.g. a broker's delivery, rather than an entry
    /// of this instance's memory). A live swap then hands the pending trees
    /// to the new instance at once, with no drain. False (the default): the
    /// old instance is deactivated and its pending trees complete or fail
    /// back to it, bounded by the message timeout, before the new one opens.
    const IDS_SURVIVE_SWAP: bool = false;
    /// Contract 1.2: how long `close` may take at shutdown; the host waits
    /// at least this long for the task's thread before it reports the task
    /// as blocked (`None`: the host's default grace).
    const CLOSE_BUDGET: Option<std::time::Duration> = None;
    /// Contract 1.2: true for a spout that keeps a checkpoint position
    /// ([`checkpoint`](Self::checkpoint)), so that durable state is exact
    /// after a restart: it emits again from the last committed checkpoint's
    /// position, and tells its broker only what a committed checkpoint covers.
    const CHECKPOINTS: bool = false;
    /// Contract 1.2: the streams the component emits on, by name. When
    /// given, `squall validate` refuses a topology whose config makes the
    /// component declare outputs without one of them (a config that
    /// renames or drops a stream), instead of letting every such emit be
    /// refused at run time (empty: not declared; nothing is checked).
    const EMITS: &'static [&'static str] = &[];

    /// Declares the output streams and their fields.
    fn declare_outputs(outputs: &mut OutputDeclarer);

    /// Contract 1.1: declares the outputs for a given config (outputs that
    /// depend on config). The default calls [`Spout::declare_outputs`].
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

    /// Called once on the task's thread before anything else.
    ///
    /// # Errors
    /// When the spout cannot start; the topology does not run.
    fn open(&mut self, _context: &TaskContext) -> Result<()> {
        Ok(())
    }

    /// The topology was activated: `next_tuple` calls follow.
    fn activate(&mut self) {}

    /// The topology was deactivated: no `next_tuple` calls until the next `activate`.
    fn deactivate(&mut self) {}

    /// Emits zero or more tuples. Must not block: when there is nothing to emit,
    /// return, and the host's spout wait strategy takes over.
    ///
    /// # Errors
    /// An error is reported and counted; the spout keeps running.
    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()>;

    /// Contract 1.3: emits up to `max` tuples in one call (one boundary
    /// crossing for all of them); the host gives `max` from its
    /// max-spout-pending room and its batch size. The default calls
    /// [`next_tuple`](Self::next_tuple) until it emits nothing or `max`
    /// tuples were emitted. Must not block.
    ///
    /// # Errors
    /// As `next_tuple`: reported and counted.
    fn next_batch(&mut self, max: usize, collector: &mut SpoutCollector<'_>) -> Result<()> {
        loop {
            let before = collector.emitted();
            self.next_tuple(collector)?;
            let emitted = collector.emitted();
            if emitted == before || emitted >= max {
                return Ok(());
            }
        }
    }

    /// The tuple tree of `message_id` was fully processed.
    fn ack(&mut self, _message_id: MessageId) {}

    /// The tuple tree of `message_id` failed or timed out; replay it if you need to.
    fn fail(&mut self, _message_id: MessageId) {}

    /// Called once at shutdown, after in-flight tuples were acked or failed.
    fn close(&mut self) {}

    /// Contract 1.1: saves the state a replacing instance takes over
    /// (`None`, the default: the spout keeps no state).
    fn save_state(&mut self) -> Option<State> {
        None
    }

    /// Contract 1.1: takes over a predecessor's state, before `open`.
    ///
    /// # Errors
    /// When the format is unknown: the replacement is then rolled back. The
    /// default refuses every state.
    fn restore_state(&mut self, state: State) -> Result<()> {
        Err(format!("{} keeps no state; it cannot take over `{}`", Self::NAME, state.format).into())
    }

    /// Contract 1.2: a checkpoint barrier. Returns the position from which
    /// a restart emits again: it must cover every tuple emitted so far (a
    /// file offset, a broker's sequence numbers). Called only when
    /// [`CHECKPOINTS`](Self::CHECKPOINTS) is true.
    fn checkpoint(&mut self, _checkpoint: u64) -> Option<State> {
        None
    }

    /// Contract 1.2: checkpoint `checkpoint` is committed: the effects of
    /// every tuple emitted before its barrier are durable, so the spout may
    /// now acknowledge them to its broker (or advance its own checkpoint).
    fn committed(&mut self, _checkpoint: u64) {}

    /// Contract 1.2: takes back the position of the last committed
    /// checkpoint, before `open`. In a topology with `[state]` it is called
    /// on every task of a spout that sets [`CHECKPOINTS`](Self::CHECKPOINTS),
    /// with [`State::no_checkpoint`] when nothing was committed yet: a spout
    /// that is called knows it runs durably, so its broker acks (or its own
    /// checkpoint) must wait for [`committed`](Self::committed). A spout
    /// that is never called runs without durable state.
    ///
    /// # Errors
    /// When the position cannot be used; the topology does not start.
    fn restore_checkpoint(&mut self, position: State) -> Result<()> {
        if position.is_no_checkpoint() {
            return Ok(());
        }
        Err(format!(
            "{} keeps no checkpoint position; it cannot take `{}`",
            Self::NAME,
            position.format
        )
        .into())
    }
}
