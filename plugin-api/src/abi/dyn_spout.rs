//! The spout object that crosses the boundary, and its adapter from [`Spout`].

use abi_stable::{sabi_trait, std_types::RBox};

use super::TaskContext;
use super::{guard, guard::to_plugin_error, OutputMut, PResult};
use crate::{ErrorKind, MessageId, Spout, SpoutCollector};

/// A spout instance, as the host drives it.
#[sabi_trait]
pub trait DynSpout: Send {
    /// Storm's `open`.
    fn open(&mut self, context: &TaskContext) -> PResult<()>;
    /// Storm's `activate`.
    fn activate(&mut self) -> PResult<()>;
    /// Storm's `deactivate`.
    fn deactivate(&mut self) -> PResult<()>;
    /// Storm's `nextTuple`: emits zero or more tuples through `output`. Must not block.
    fn next_tuple(&mut self, output: OutputMut<'_>) -> PResult<()>;
    /// The tree of `message_id` completed.
    fn ack(&mut self, message_id: MessageId) -> PResult<()>;
    /// The tree of `message_id` failed or timed out.
    fn fail(&mut self, message_id: MessageId) -> PResult<()>;
    /// Storm's `close`.
    // Evolution rule: last field of contract 1.0's prefix; never move it.
    #[sabi(last_prefix_field)]
    fn close(&mut self) -> PResult<()>;
}

/// An owned spout object.
pub type SpoutBox = DynSpout_TO<'static, RBox<()>>;

/// Adapts a plain [`Spout`] to [`DynSpout`], guarding every call.
pub(crate) struct SpoutAdapter<S>(pub(crate) S);

impl<S: Spout> DynSpout for SpoutAdapter<S> {
    fn open(&mut self, context: &TaskContext) -> PResult<()> {
        let context = crate::TaskContext::from_host(context.clone(), None, None);
        guard(|| self.0.open(&context).map_err(to_plugin_error(ErrorKind::RUNTIME)))
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

    fn next_tuple(&mut self, output: OutputMut<'_>) -> PResult<()> {
        guard(|| {
            let mut collector = SpoutCollector::new(output);
            self.0.next_tuple(&mut collector).map_err(to_plugin_error(ErrorKind::RUNTIME))
        })
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
}
