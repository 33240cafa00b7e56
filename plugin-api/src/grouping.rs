//! The [`Grouping`] trait: a custom stream grouping (contract 1.1), like
//! Storm's `CustomStreamGrouping`.

use crate::abi::GroupingContext;
use crate::{ComponentConfig, ConfigKey, Result, Value};

/// Chooses, per tuple, which tasks of the subscribing component receive it.
///
/// A topology names it in an input:
/// `inputs = [{ from = "split", grouping = { custom = "alias::Name", config = { ... } } }]`.
/// The host builds one instance per sending task and subscription, calls
/// [`Grouping::prepare`] once with the target tasks, then [`Grouping::choose`]
/// for every tuple, on the sending task's thread.
pub trait Grouping: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// The config keys the grouping accepts.
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;

    /// Builds an instance from the grouping's `config` table.
    ///
    /// # Errors
    /// When the config is invalid.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

    /// Called once with the sending component, the stream and its fields,
    /// and the target tasks.
    ///
    /// # Errors
    /// When the grouping cannot route this stream (for example a field it
    /// needs is missing); the topology does not start.
    fn prepare(&mut self, _context: &GroupingContext) -> Result<()> {
        Ok(())
    }

    /// Pushes onto `targets` the indexes (into `GroupingContext::targets`)
    /// of the tasks that receive `values`. `targets` arrives empty; an index
    /// out of range is ignored and counted as an error.
    fn choose(&mut self, values: &[Value], targets: &mut Vec<u32>);
}
