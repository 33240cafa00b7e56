//! The [`Bolt`] and [`BasicBolt`] traits: processing steps.

use crate::{
    BasicCollector, BoltCollector, ComponentConfig, OutputDeclarer, Result, TaskContext, Tuple,
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

    /// Declares the output streams and their fields.
    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    /// Builds an instance from the component's `config` table.
    ///
    /// # Errors
    /// When the config is invalid; the message reaches the user.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

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

    /// Called once at shutdown.
    fn cleanup(&mut self) {}
}

/// A processing step whose inputs are acked for it, like Storm's `BaseBasicBolt`:
/// every emit is anchored to the input, and the input is acked when `execute`
/// returns `Ok` and failed when it returns `Err`.
pub trait BasicBolt: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";

    /// Declares the output streams and their fields.
    fn declare_outputs(_outputs: &mut OutputDeclarer) {}

    /// Builds an instance from the component's `config` table.
    ///
    /// # Errors
    /// When the config is invalid; the message reaches the user.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

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

    /// Called once at shutdown.
    fn cleanup(&mut self) {}
}
