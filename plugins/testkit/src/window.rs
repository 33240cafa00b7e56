//! [`WindowSizeBolt`]: a windowed bolt that reports each window's shape.

use squall_plugin_api::prelude::*;

/// Emits one tuple per window on the default stream
/// `["tuples", "new", "expired", "first"]`: how many tuples the window holds,
/// how many entered and left since the previous window, and the first
/// value of its oldest tuple's `Display` (empty for an empty window). Takes
/// no config; the window is set in the topology.
#[derive(Debug, Default)]
pub struct WindowSizeBolt;

impl WindowedBolt for WindowSizeBolt {
    const NAME: &'static str = "WindowSizeBolt";
    const DESCRIPTION: &'static str = "emits (tuples, new, expired, first) per window";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["tuples", "new", "expired", "first"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(Self)
    }

    fn execute(&mut self, window: &Window<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        let first = window
            .tuples()
            .first()
            .and_then(|t| t.get(0))
            .map(|v| match v {
                Value::U64(n) => n.to_string(),
                Value::I64(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        collector.emit(&[
            Value::U64(window.tuples().len() as u64),
            Value::U64(window.new_tuples().len() as u64),
            Value::U64(window.expired().len() as u64),
            Value::from(first.as_str()),
        ]);
        Ok(())
    }
}
