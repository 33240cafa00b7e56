//! The wait-strategy object that crosses the boundary, and its adapter.

use abi_stable::{sabi_trait, std_types::RBox};

use super::{guard, guard::to_plugin_error, PResult};
use crate::{ErrorKind, WaitSituation, WaitStrategy};

/// A wait strategy instance, as the host drives it.
#[sabi_trait]
pub trait DynWaitStrategy: Send {
    /// Called once, with the situation this instance serves.
    fn prepare(&mut self, situation: WaitSituation) -> PResult<()>;
    /// Waits once; returns the next counter (Storm's `idle(counter)`).
    // Evolution rule: last field of contract 1.0's prefix; never move it.
    #[sabi(last_prefix_field)]
    fn idle(&mut self, counter: u32) -> PResult<u32>;
}

/// An owned wait-strategy object.
pub type WaitStrategyBox = DynWaitStrategy_TO<'static, RBox<()>>;

/// Adapts a plain [`WaitStrategy`] to [`DynWaitStrategy`], guarding every call.
pub(crate) struct WaitAdapter<W>(pub(crate) W);

impl<W: WaitStrategy> DynWaitStrategy for WaitAdapter<W> {
    fn prepare(&mut self, situation: WaitSituation) -> PResult<()> {
        guard(|| self.0.prepare(situation).map_err(to_plugin_error(ErrorKind::RUNTIME)))
    }

    fn idle(&mut self, counter: u32) -> PResult<u32> {
        guard(|| Ok(self.0.idle(counter)))
    }
}
