//! The bolt object that crosses the boundary, and its adapters from [`Bolt`]
//! and [`BasicBolt`].

use abi_stable::{sabi_trait, std_types::RBox};

use super::TaskContext;
use super::{guard, guard::to_plugin_error, OutputMut, PResult};
use crate::{BasicBolt, BasicCollector, Bolt, BoltCollector, ErrorKind, Tuple};

/// A bolt instance, as the host drives it.
#[sabi_trait]
pub trait DynBolt: Send {
    /// Storm's `prepare`.
    fn prepare(&mut self, context: &TaskContext) -> PResult<()>;
    /// Storm's `execute`: processes one input, emitting through `output`.
    fn execute(&mut self, input: &Tuple<'_>, output: OutputMut<'_>) -> PResult<()>;
    /// Storm's `cleanup`.
    // Evolution rule: last field of contract 1.0's prefix; never move it.
    #[sabi(last_prefix_field)]
    fn cleanup(&mut self) -> PResult<()>;
}

/// An owned bolt object.
pub type BoltBox = DynBolt_TO<'static, RBox<()>>;

/// Adapts a rich [`Bolt`] to [`DynBolt`], guarding every call.
pub(crate) struct BoltAdapter<B>(pub(crate) B);

impl<B: Bolt> DynBolt for BoltAdapter<B> {
    fn prepare(&mut self, context: &TaskContext) -> PResult<()> {
        let context = crate::TaskContext::from_host(context.clone(), None, None);
        guard(|| self.0.prepare(&context).map_err(to_plugin_error(ErrorKind::RUNTIME)))
    }

    fn execute(&mut self, input: &Tuple<'_>, output: OutputMut<'_>) -> PResult<()> {
        guard(|| {
            let mut collector = BoltCollector::new(output);
            self.0.execute(input, &mut collector).map_err(to_plugin_error(ErrorKind::RUNTIME))
        })
    }

    fn cleanup(&mut self) -> PResult<()> {
        guard(|| {
            self.0.cleanup();
            Ok(())
        })
    }
}

/// Adapts a [`BasicBolt`] to [`DynBolt`]. The host anchors its emits to the
/// input and acks or fails the input when `execute` returns.
pub(crate) struct BasicBoltAdapter<B>(pub(crate) B);

impl<B: BasicBolt> DynBolt for BasicBoltAdapter<B> {
    fn prepare(&mut self, context: &TaskContext) -> PResult<()> {
        let context = crate::TaskContext::from_host(context.clone(), None, None);
        guard(|| self.0.prepare(&context).map_err(to_plugin_error(ErrorKind::RUNTIME)))
    }

    fn execute(&mut self, input: &Tuple<'_>, output: OutputMut<'_>) -> PResult<()> {
        guard(|| {
            let mut collector = BasicCollector::new(output);
            self.0.execute(input, &mut collector).map_err(to_plugin_error(ErrorKind::RUNTIME))
        })
    }

    fn cleanup(&mut self) -> PResult<()> {
        guard(|| {
            self.0.cleanup();
            Ok(())
        })
    }
}
