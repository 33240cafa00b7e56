//! The [`WaitStrategy`] trait: how an idle or blocked executor thread waits.

use abi_stable::StableAbi;

use crate::{ComponentConfig, ConfigKey, Result};

/// Why an executor is waiting (Storm's `WaitSituation`). An open set.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WaitSituation(pub u8);

impl WaitSituation {
    /// A spout emitted nothing, or max-spout-pending was reached.
    pub const SPOUT_WAIT: Self = Self(0);
    /// A bolt found its receive queue empty.
    pub const BOLT_WAIT: Self = Self(1);
    /// Emits are pending because a downstream queue is full.
    pub const BACK_PRESSURE_WAIT: Self = Self(2);

    /// The situation's name as the TOML `[wait.*]` tables spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::SPOUT_WAIT => "spout",
            Self::BOLT_WAIT => "bolt",
            Self::BACK_PRESSURE_WAIT => "backpressure",
            _ => "unknown",
        }
    }
}

/// A wait strategy, like Storm's `IWaitStrategy`.
///
/// `idle(counter)` is called each time the executor finds nothing to do; it
/// waits (or not) and returns the next counter. The executor resets the
/// counter to 0 as soon as it does useful work.
pub trait WaitStrategy: Send + Sized + 'static {
    /// The name a topology uses after `alias::`.
    const NAME: &'static str;
    /// A one-line description for `squall inspect`.
    const DESCRIPTION: &'static str = "";
    /// Contract 1.1: the config keys the strategy accepts (besides `strategy`).
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = None;

    /// Builds an instance from the keys of the `[wait.*]` table other than `strategy`.
    ///
    /// # Errors
    /// When the config is invalid.
    fn new(config: &ComponentConfig<'_>) -> Result<Self>;

    /// Called once with the situation this instance serves.
    ///
    /// # Errors
    /// When the strategy cannot serve that situation.
    fn prepare(&mut self, _situation: WaitSituation) -> Result<()> {
        Ok(())
    }

    /// Waits once and returns the next counter.
    fn idle(&mut self, counter: u32) -> u32;
}
