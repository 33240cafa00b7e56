//! [`TickCountBolt`]: a bolt that does its work on tick tuples.

use squall_plugin_api::prelude::*;

/// Counts its inputs and emits the count on every tick tuple, on the
/// default stream `["count"]`. Declares that it needs a tick at least every
/// 2 s (contract 1.2's `TICKS`), so a topology without
/// `tick_tuple_freq_secs` (or with a longer one) is refused. No config.
#[derive(Debug, Default)]
pub struct TickCountBolt {
    count: u64,
}

impl BasicBolt for TickCountBolt {
    const NAME: &'static str = "TickCountBolt";
    const DESCRIPTION: &'static str = "emits how many tuples it got on every tick (needs ticks)";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);
    const TICKS: Option<std::time::Duration> = Some(std::time::Duration::from_secs(2));

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["count"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self::default())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        if input.is_tick() {
            collector.emit(&[Value::U64(self.count)]);
        } else {
            self.count += 1;
        }
        Ok(())
    }
}
