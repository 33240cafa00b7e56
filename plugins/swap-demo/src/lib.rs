//! A plugin whose behaviour is fixed when it is built: the hot-swap test
//! builds it twice with a different `SQUALL_SWAP_FLAVOR`, swaps the `.so`
//! between two runs of the same host binary, and checks that the second run
//! shows the new behaviour.

use serde::Deserialize;
use squall_plugin_api::prelude::*;

/// The flavour baked into this build.
pub const FLAVOR: &str = match option_env!("SQUALL_SWAP_FLAVOR") {
    Some(flavor) => flavor,
    None => "v1",
};

/// [`FlavorSpout`] takes no config: every key is refused.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoConfig {}

/// Emits its flavour once, and prints it when opened. Takes no config.
#[derive(Debug, Default)]
pub struct FlavorSpout {
    sent: bool,
}

impl Spout for FlavorSpout {
    const NAME: &'static str = "FlavorSpout";
    const DESCRIPTION: &'static str = "emits the flavour this library was built with, once";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["flavor"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        config.parse::<NoConfig>()?;
        Ok(Self::default())
    }

    fn open(&mut self, _context: &TaskContext) -> Result<()> {
        println!("swap-demo flavor: {FLAVOR}");
        Ok(())
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if !self.sent {
            self.sent = true;
            collector.emit(&[Value::from(FLAVOR)]);
        }
        Ok(())
    }
}

squall_plugin_api::export_plugin! {
    spouts: [FlavorSpout],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_config_keys_match_the_config_struct() {
        squall_plugin_api::testing::check_config_keys::<NoConfig>(FlavorSpout::CONFIG_KEYS, "")
            .unwrap();
        assert!(FlavorSpout::new(&ComponentConfig::new("flavor = \"v3\"")).is_err());
    }
}
