//! A plugin whose behaviour is fixed when it is built: the hot-swap tests
//! build it twice with a different `SQUALL_SWAP_FLAVOR` and swap the `.so`,
//! between two runs of the same host binary ([`FlavorSpout`]) or live, while
//! the topology runs ([`FlavorBolt`]), and check that the new behaviour shows.

use squall_plugin_api::prelude::*;

/// The flavour baked into this build.
pub const FLAVOR: &str = match option_env!("SQUALL_SWAP_FLAVOR") {
    Some(flavor) => flavor,
    None => "v1",
};

squall_plugin_api::declare_config! {
    /// [`FlavorSpout`] takes no config: every key is refused.
    #[derive(Debug, PartialEq, Eq)]
    struct NoConfig {}
}

/// Emits its flavour once, and prints it when opened. Takes no config.
#[derive(Debug, Default)]
pub struct FlavorSpout {
    sent: bool,
}

impl Spout for FlavorSpout {
    const NAME: &'static str = "FlavorSpout";
    const DESCRIPTION: &'static str = "emits the flavour this library was built with, once";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(NoConfig::KEYS);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["flavor"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        NoConfig::parse(config)?;
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

squall_plugin_api::declare_config! {
    /// [`FlavorBolt`]'s config.
    #[derive(Debug)]
    struct FlavorConfig {
        label: String = default(String, "\"none\"", "shown in its output lines"),
        modulo: u64 = default(Integer, "10", "how many distinct words"),
        fail_prepare: bool = default(Bool, "false", "make prepare fail"),
    }
}

/// The tag of [`FlavorBolt`]'s saved state: one entry, the number of tuples
/// seen, as 8 little-endian bytes.
pub const STATE_FORMAT: &str = "swap-demo/1";

/// A basic bolt that turns a number (the first value, an unsigned integer)
/// into the word `w<n % modulo>` on `["word"]`, and counts the tuples it
/// has seen, a count it hands over to its successor in a live swap.
///
/// Config: `label` (a string shown in its lines, default `"none"`),
/// `modulo` (default 10), `fail_prepare` (default false: `prepare` fails
/// when true, for the reload rollback test). Prints
/// `swap-demo bolt prepared: flavor <F> label <L> seen <n>` in `prepare`
/// and `swap-demo bolt cleanup: flavor <F> label <L> seen <n>` in `cleanup`.
#[derive(Debug)]
pub struct FlavorBolt {
    label: String,
    modulo: u64,
    fail_prepare: bool,
    seen: u64,
}

impl BasicBolt for FlavorBolt {
    const NAME: &'static str = "FlavorBolt";
    const DESCRIPTION: &'static str =
        "maps n to the word w<n % modulo>; shows the flavour it was built with";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(FlavorConfig::KEYS);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["word"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config = FlavorConfig::parse(config)?;
        if config.modulo == 0 {
            return Err("modulo must be at least 1".into());
        }
        Ok(Self {
            label: config.label,
            modulo: config.modulo,
            fail_prepare: config.fail_prepare,
            seen: 0,
        })
    }

    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        if self.fail_prepare {
            return Err(format!(
                "prepare fails on purpose (flavor {FLAVOR}, label {})",
                self.label
            )
            .into());
        }
        println!(
            "swap-demo bolt prepared: flavor {FLAVOR} label {} seen {}",
            self.label, self.seen
        );
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        if input.is_tick() {
            return Ok(());
        }
        let n = input.get(0).and_then(Value::as_u64).ok_or("expected an unsigned integer")?;
        self.seen += 1;
        collector.emit(&[Value::from(format!("w{}", n % self.modulo))]);
        Ok(())
    }

    fn save_state(&mut self) -> Option<State> {
        let mut state = State::new(STATE_FORMAT);
        state.push(&[], self.seen.to_le_bytes().to_vec());
        Some(state)
    }

    fn restore_state(&mut self, state: State) -> Result<()> {
        if state.format.as_str() != STATE_FORMAT {
            return Err(format!("unknown state format `{}`", state.format).into());
        }
        let entry = state.entries.first().ok_or("a state without its count")?;
        let bytes: [u8; 8] =
            entry.bytes.as_slice().try_into().map_err(|_| "a count that is not 8 bytes")?;
        self.seen += u64::from_le_bytes(bytes);
        Ok(())
    }

    fn cleanup(&mut self) {
        println!("swap-demo bolt cleanup: flavor {FLAVOR} label {} seen {}", self.label, self.seen);
    }
}

squall_plugin_api::export_plugin! {
    spouts: [FlavorSpout],
    basic_bolts: [FlavorBolt],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spout_refuses_every_key_and_the_bolt_fills_its_defaults() {
        assert!(FlavorSpout::CONFIG_KEYS.is_some_and(<[ConfigKey]>::is_empty));
        let e = FlavorSpout::new(&ComponentConfig::new("flavor = \"v3\"")).unwrap_err();
        assert!(e.to_string().contains("unknown field `flavor`"), "{e}");
        let bolt = FlavorBolt::new(&ComponentConfig::new("modulo = 3")).unwrap();
        assert_eq!((bolt.label.as_str(), bolt.modulo, bolt.fail_prepare), ("none", 3, false));
    }
}
