//! Windowed bolts (contract 1.1), modelled on Storm's `BaseWindowedBolt`.
//!
//! The host buffers a windowed bolt's input tuples into the windows its
//! topology entry configures (`window = { length = "30s", slide = "5s" }`,
//! or `{ length_count = 1000, slide_count = 100 }`), and calls
//! [`WindowedBolt::execute`] once per window with every tuple in it, the
//! tuples that entered it and the ones that left it. Emits are anchored to
//! every tuple of the window; a tuple is acked when it leaves the last window
//! that holds it.

use crate::abi::{InputDecl, WindowView};
use crate::{
    BasicCollector, ComponentConfig, ConfigKey, OutputDeclarer, Result, State, TaskContext, Tuple,
};

/// One window, as [`WindowedBolt::execute`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    view: &'a WindowView<'a>,
}

impl<'a> Window<'a> {
    /// Wraps the host's view (the host does this; tests can too).
    pub fn new(view: &'a WindowView<'a>) -> Self {
        Self { view }
    }

    /// Every tuple in the window, oldest first.
    pub fn tuples(&self) -> &'a [Tuple<'a>] {
        self.view.tuples.as_slice()
    }

    /// The tuples that entered the window since the previous one.
    pub fn new_tuples(&self) -> &'a [Tuple<'a>] {
        self.view.new_tuples.as_slice()
    }

    /// The tuples that left the window since the previous one.
    pub fn expired(&self) -> &'a [Tuple<'a>] {
        self.view.expired.as_slice()
    }

    /// The window's start in milliseconds since the Unix epoch (0 for count
    /// windows).
    pub fn start_millis(&self) -> u64 {
        self.view.start_millis
    }

    /// The window's end in milliseconds since the Unix epoch (0 for count
    /// windows).
    pub fn end_millis(&self) -> u64 {
        self.view.end_millis
    }
}

/// A bolt that processes windows of tuples instead of single tuples.
///
/// Export it with `windowed_bolts: [...]` in
/// [`export_plugin!`](crate::export_plugin). It exists only in contract 1.1:
/// a 1.0 host does not see it.
pub trait WindowedBolt: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// The config keys the bolt accepts (see [`Spout::CONFIG_KEYS`](crate::Spout::CONFIG_KEYS)).
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;
    /// Fields every input stream must carry.
    const INPUT_FIELDS: &'static [&'static str] = &[];

    /// Declares the output streams and their fields.
    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    /// Declares the outputs for a given config; the default calls
    /// `declare_outputs`.
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

    /// Checks the subscribed inputs (see [`Bolt::check_inputs`](crate::Bolt::check_inputs)).
    ///
    /// # Errors
    /// When the bolt cannot work with these inputs.
    fn check_inputs(_config: &ComponentConfig<'_>, _inputs: &[InputDecl]) -> Result<()> {
        Ok(())
    }

    /// Builds an instance from the component's `config` table (the `window`
    /// settings are the host's, not in it).
    ///
    /// # Errors
    /// When the config is invalid.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

    /// Called once on the task's thread before the first window.
    ///
    /// # Errors
    /// When the bolt cannot start.
    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        Ok(())
    }

    /// Processes one window. Emits are anchored to the window's tuples.
    ///
    /// # Errors
    /// An error fails every tuple of the window that is not in a later one
    /// yet: their trees fail and their spouts replay them.
    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()>;

    /// Called once at shutdown.
    fn cleanup(&mut self) {}

    /// Saves the state a replacing instance takes over (`None`: none).
    fn save_state(&mut self) -> Option<State> {
        None
    }

    /// Takes over a predecessor's state, before `prepare`.
    ///
    /// # Errors
    /// When the format is unknown; the default refuses every state.
    fn restore_state(&mut self, state: State) -> Result<()> {
        Err(format!("{} keeps no state; it cannot take over `{}`", Self::NAME, state.format).into())
    }
}
