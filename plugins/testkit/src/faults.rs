//! Fault injection: [`ChaosBolt`], [`PanicBolt`], [`PanicSpout`],
//! [`FailOnNew`] and [`PanicOnNew`].
//!
//! The host rebuilds a component instance that panicked from its
//! constructor, so per-instance state starts over after every panic. What
//! must outlive an instance (how many panics are left, how many instances were
//! built) lives in process-wide statics.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use squall_plugin_api::prelude::*;

use squall_plugin_api::rng::SplitMix64;

/// What [`ChaosBolt`] does with one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChaosAction {
    Panic,
    Fail,
    Drop,
    Pass,
}

/// The three rates of [`ChaosBolt`], validated: each in `[0, 1]`, sum at most 1.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChaosConfig {
    /// Inputs with a value whose text contains this are always failed
    /// (poison), before any draw.
    #[serde(default)]
    fail_matching: Option<String>,
    #[serde(default)]
    fail_rate: f64,
    #[serde(default)]
    drop_rate: f64,
    #[serde(default)]
    panic_rate: f64,
    #[serde(default = "default_seed")]
    seed: u64,
    /// Every `error_every`-th input (0 = never) returns an error from
    /// `execute` instead (the host counts it and fails the input).
    #[serde(default)]
    error_every: u64,
}

fn default_seed() -> u64 {
    42
}

impl ChaosConfig {
    fn validate(&self) -> Result<()> {
        for (key, rate) in [
            ("fail_rate", self.fail_rate),
            ("drop_rate", self.drop_rate),
            ("panic_rate", self.panic_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("{key} must be between 0 and 1, got {rate}").into());
            }
        }
        let total = self.panic_rate + self.fail_rate + self.drop_rate;
        if total > 1.0 {
            return Err(format!(
                "panic_rate + fail_rate + drop_rate must be at most 1, got {total}"
            )
            .into());
        }
        Ok(())
    }

    /// The action for a draw `r` in `[0, 1)`: the unit interval is cut into
    /// panic, fail and drop slices, in that order, and the rest passes.
    fn action(&self, r: f64) -> ChaosAction {
        if r < self.panic_rate {
            ChaosAction::Panic
        } else if r < self.panic_rate + self.fail_rate {
            ChaosAction::Fail
        } else if r < self.panic_rate + self.fail_rate + self.drop_rate {
            ChaosAction::Drop
        } else {
            ChaosAction::Pass
        }
    }
}

/// How many `ChaosBolt` instances this process has built.
static CHAOS_INSTANCES: AtomicU64 = AtomicU64::new(0);

/// A rich bolt that panics, fails or drops a random share of its inputs and
/// passes the rest on `["value"]`, anchored and acked.
///
/// Config: `fail_rate`, `drop_rate`, `panic_rate` (each 0.0 by default, sum at
/// most 1) and `seed` (u64, 42). Per input it draws `r` in `[0, 1)`:
/// `r < panic_rate` panics; below `panic_rate + fail_rate` it fails the input;
/// below `panic_rate + fail_rate + drop_rate` it does nothing, so the tree
/// times out; otherwise it emits the input's values anchored to it and acks it.
///
/// The first instance built in the process draws from `seed`; every later one
/// (another task, or a rebuild after a panic) from its own stream derived from
/// `seed`. A rebuilt instance therefore does not repeat the draws that made
/// its predecessor panic. With `error_every = N` (0 = never), every N-th
/// input returns an error from `execute` instead of drawing.
#[derive(Debug)]
pub struct ChaosBolt {
    config: ChaosConfig,
    rng: SplitMix64,
    inputs: u64,
}

impl Bolt for ChaosBolt {
    const NAME: &'static str = "ChaosBolt";
    const DESCRIPTION: &'static str =
        "panics, fails or drops a random share of its inputs; passes the rest";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[
        ConfigKey::optional("fail_rate", KeyKind::Float, "0.0", "share of inputs failed (0 to 1)"),
        ConfigKey::optional(
            "drop_rate",
            KeyKind::Float,
            "0.0",
            "share of inputs dropped, so they time out (0 to 1)",
        ),
        ConfigKey::optional(
            "panic_rate",
            KeyKind::Float,
            "0.0",
            "share of inputs that panic (0 to 1)",
        ),
        ConfigKey::optional("seed", KeyKind::Integer, "42", "seeds the draws"),
        ConfigKey::maybe(
            "fail_matching",
            KeyKind::String,
            "inputs with a value containing this text are always failed (poison)",
        ),
        ConfigKey::optional(
            "error_every",
            KeyKind::Integer,
            "0",
            "every N-th input returns an error from execute (0: never)",
        ),
    ]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: ChaosConfig = config.parse()?;
        config.validate()?;
        let instance = CHAOS_INSTANCES.fetch_add(1, Ordering::Relaxed);
        let rng = SplitMix64::for_stream(config.seed, instance);
        Ok(Self { config, rng, inputs: 0 })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BoltCollector<'_>) -> Result<()> {
        self.inputs += 1;
        let every = self.config.error_every;
        if every > 0 && self.inputs.is_multiple_of(every) {
            return Err(format!("chaos: error on purpose (input #{})", self.inputs).into());
        }
        if let Some(needle) = &self.config.fail_matching {
            if input.values().iter().any(|v| v.to_string().contains(needle.as_str())) {
                collector.fail(input);
                return Ok(());
            }
        }
        match self.config.action(self.rng.next_f64()) {
            ChaosAction::Panic => panic!("chaos: panic on purpose"),
            ChaosAction::Fail => collector.fail(input),
            ChaosAction::Drop => {}
            ChaosAction::Pass => {
                collector.emit(&[input.anchor()], input.values());
                collector.ack(input);
            }
        }
        Ok(())
    }
}

/// `after` and `times`, shared by [`PanicBolt`] and [`PanicSpout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct PanicConfig {
    #[serde(default)]
    after: u64,
    #[serde(default = "default_times")]
    times: u64,
}

fn default_times() -> u64 {
    u64::MAX
}

/// A process-wide count of the panics a component type has thrown.
#[derive(Debug)]
struct PanicBudget {
    thrown: &'static AtomicU64,
    times: u64,
}

impl PanicBudget {
    /// Takes one panic from the budget; false once `times` panics were thrown
    /// by all instances together.
    fn take(&self) -> bool {
        self.thrown
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.times).then_some(n + 1)
            })
            .is_ok()
    }
}

/// The config keys of [`PanicBolt`] and [`PanicSpout`] ([`PanicConfig`]).
const PANIC_KEYS: Option<&[ConfigKey]> = Some(&[
    ConfigKey::optional(
        "after",
        KeyKind::Integer,
        "0",
        "tuples each instance passes before it panics",
    ),
    ConfigKey::maybe(
        "times",
        KeyKind::Integer,
        "panics allowed to all instances of the process together (unlimited when left out)",
    ),
]);

/// Panics thrown by every `PanicBolt` of the process.
static BOLT_PANICS: AtomicU64 = AtomicU64::new(0);
/// Panics thrown by every `PanicSpout` of the process.
static SPOUT_PANICS: AtomicU64 = AtomicU64::new(0);

/// Re-emits its inputs on `["value"]`, and panics on input number
/// `after + 1` of each instance.
///
/// Config: `after` (u64, 0) and `times` (u64, unlimited): the panics allowed
/// to all `PanicBolt` instances of the process together. Once they are used
/// up, it only passes inputs through. Since the host rebuilds a panicked
/// instance, `after = 0, times = 3` fails three inputs and then passes all.
#[derive(Debug)]
pub struct PanicBolt {
    after: u64,
    budget: PanicBudget,
    executed: u64,
}

impl BasicBolt for PanicBolt {
    const NAME: &'static str = "PanicBolt";
    const DESCRIPTION: &'static str =
        "panics after `after` inputs, `times` times per process; else re-emits";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = PANIC_KEYS;

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: PanicConfig = config.parse()?;
        Ok(Self {
            after: config.after,
            budget: PanicBudget { thrown: &BOLT_PANICS, times: config.times },
            executed: 0,
        })
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        if self.executed >= self.after && self.budget.take() {
            panic!("panic_bolt: panicking on purpose after {} tuples", self.executed);
        }
        self.executed += 1;
        collector.emit(input.values());
        Ok(())
    }
}

/// Emits a counter (`U64`, unreliable) on `["value"]`, one per
/// `next_tuple`, and panics in `next_tuple` once an instance has emitted
/// `after` tuples.
///
/// Config: `after` (u64, 0) and `times` (u64, unlimited): the panics allowed
/// to all `PanicSpout` instances of the process together; after that it just
/// keeps emitting. The counter starts at 0 in every (rebuilt) instance.
#[derive(Debug)]
pub struct PanicSpout {
    after: u64,
    budget: PanicBudget,
    emitted: u64,
}

impl Spout for PanicSpout {
    const NAME: &'static str = "PanicSpout";
    const DESCRIPTION: &'static str =
        "emits a counter; panics after `after` emits, `times` times per process";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = PANIC_KEYS;

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: PanicConfig = config.parse()?;
        Ok(Self {
            after: config.after,
            budget: PanicBudget { thrown: &SPOUT_PANICS, times: config.times },
            emitted: 0,
        })
    }

    fn next_tuple(&mut self, collector: &mut SpoutCollector<'_>) -> Result<()> {
        if self.emitted >= self.after && self.budget.take() {
            panic!("panic_spout: panicking on purpose after {} emits", self.emitted);
        }
        collector.emit(&[Value::U64(self.emitted)]);
        self.emitted += 1;
        Ok(())
    }
}

/// A spout (declaring `["value"]`) whose constructor always fails: for the
/// host's "constructor returns an error" path. Its config is not read.
#[derive(Debug)]
pub struct FailOnNew;

impl Spout for FailOnNew {
    const NAME: &'static str = "FailOnNew";
    const DESCRIPTION: &'static str = "its constructor always returns an error";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Err("fail_on_new: refusing to start on purpose".into())
    }

    fn next_tuple(&mut self, _collector: &mut SpoutCollector<'_>) -> Result<()> {
        Ok(())
    }
}

/// A spout (declaring `["value"]`) whose constructor blocks for `secs`
/// seconds (default: an hour) before returning: for the host's
/// `startup_timeout_secs`.
#[derive(Debug)]
pub struct BlockOnNew;

#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockConfig {
    #[serde(default = "an_hour")]
    secs: u64,
}

fn an_hour() -> u64 {
    3600
}

impl Spout for BlockOnNew {
    const NAME: &'static str = "BlockOnNew";
    const DESCRIPTION: &'static str = "its constructor blocks for `secs` seconds";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[ConfigKey::optional(
        "secs",
        KeyKind::Integer,
        "3600",
        "seconds the constructor blocks",
    )]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: BlockConfig = config.parse()?;
        std::thread::sleep(std::time::Duration::from_secs(config.secs));
        Ok(BlockOnNew)
    }

    fn next_tuple(&mut self, _collector: &mut SpoutCollector<'_>) -> Result<()> {
        Ok(())
    }
}

/// A basic bolt (declaring `["value"]`) whose constructor always panics: for
/// the host's "constructor panics" path. Its config is not read.
#[derive(Debug)]
pub struct PanicOnNew;

impl BasicBolt for PanicOnNew {
    const NAME: &'static str = "PanicOnNew";
    const DESCRIPTION: &'static str = "its constructor always panics";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        panic!("panic_on_new: panicking on purpose")
    }

    fn execute(&mut self, _input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        Ok(())
    }
}

/// A basic bolt (declaring `["value"]`) whose `prepare` always panics: for
/// the host's "a task cannot start" path, which must stop the run promptly,
/// not after the whole shutdown timeout. Its config is not read.
#[derive(Debug)]
pub struct PanicOnPrepare;

impl BasicBolt for PanicOnPrepare {
    const NAME: &'static str = "PanicOnPrepare";
    const DESCRIPTION: &'static str = "its prepare always panics";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> = Some(&[]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(_config: &ComponentConfig<'_>) -> Result<Self> {
        Ok(PanicOnPrepare)
    }

    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        panic!("panic_on_prepare: panicking on purpose")
    }

    fn execute(&mut self, _input: &Tuple<'_>, _collector: &mut BasicCollector<'_>) -> Result<()> {
        Ok(())
    }
}

/// A basic bolt whose `prepare` blocks for `secs` seconds (0 by default),
/// then re-emits its input: a new version that takes long to prepare, for
/// the live reload's deadline. It logs when `prepare` begins and ends.
#[derive(Debug)]
pub struct BlockOnPrepare {
    secs: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockOnPrepareConfig {
    #[serde(default)]
    secs: u64,
}

impl BasicBolt for BlockOnPrepare {
    const NAME: &'static str = "BlockOnPrepare";
    const DESCRIPTION: &'static str = "its prepare blocks for `secs` seconds; re-emits its input";
    const CONFIG_KEYS: Option<&'static [ConfigKey]> =
        Some(&[ConfigKey::optional("secs", KeyKind::Integer, "0", "seconds prepare blocks")]);

    fn declare_outputs(outputs: &mut OutputDeclarer) {
        outputs.declare(&["value"]);
    }

    fn new(config: &ComponentConfig<'_>) -> Result<Self> {
        let config: BlockOnPrepareConfig = config.parse()?;
        Ok(Self { secs: config.secs })
    }

    fn prepare(&mut self, _context: &TaskContext) -> Result<()> {
        if self.secs > 0 {
            squall_plugin_api::info!("block_on_prepare: prepare blocks for {} s", self.secs);
            std::thread::sleep(std::time::Duration::from_secs(self.secs));
            squall_plugin_api::info!("block_on_prepare: prepare returned");
        }
        Ok(())
    }

    fn execute(&mut self, input: &Tuple<'_>, collector: &mut BasicCollector<'_>) -> Result<()> {
        collector.emit(input.values());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use super::*;
    use squall_plugin_api::testing::Recorder;

    fn chaos(config: &str) -> Result<ChaosConfig> {
        let config: ChaosConfig = ComponentConfig::new(config).parse()?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn chaos_cuts_the_unit_interval_into_panic_fail_drop_pass() {
        let config = chaos("panic_rate = 0.1\nfail_rate = 0.2\ndrop_rate = 0.3").unwrap();
        let table = [
            (0.0, ChaosAction::Panic),
            (0.099, ChaosAction::Panic),
            (0.1, ChaosAction::Fail),
            (0.29, ChaosAction::Fail),
            (0.31, ChaosAction::Drop),
            (0.59, ChaosAction::Drop),
            (0.61, ChaosAction::Pass),
            (0.999, ChaosAction::Pass),
        ];
        for (r, expected) in table {
            assert_eq!(config.action(r), expected, "r = {r}");
        }
        let calm = chaos("").unwrap();
        assert_eq!(calm.action(0.0), ChaosAction::Pass);
    }

    #[test]
    fn chaos_refuses_rates_out_of_range_or_summing_above_one() {
        assert_eq!(
            chaos("fail_rate = 1.5").unwrap_err().to_string(),
            "fail_rate must be between 0 and 1, got 1.5"
        );
        assert_eq!(
            chaos("drop_rate = nan").unwrap_err().to_string(),
            "drop_rate must be between 0 and 1, got NaN"
        );
        assert_eq!(
            chaos("fail_rate = 0.5\ndrop_rate = 0.6").unwrap_err().to_string(),
            "panic_rate + fail_rate + drop_rate must be at most 1, got 1.1"
        );
    }

    #[test]
    fn chaos_with_no_rates_emits_anchored_and_acks() {
        let mut bolt = ChaosBolt::new(&ComponentConfig::new("")).unwrap();
        let values = [Value::U64(1)];
        let input = Tuple::new(&values, &[], "spout", "default", 1, Anchor(77));
        let mut recorder = Recorder::default();
        bolt.execute(&input, &mut BoltCollector::new(recorder.output())).unwrap();
        assert_eq!(recorder.emitted[0].anchors, [Anchor(77)]);
        assert_eq!(recorder.emitted[0].values, values);
        assert_eq!(recorder.acked, [Anchor(77)]);
        let mut failing = ChaosBolt::new(&ComponentConfig::new("fail_rate = 1.0")).unwrap();
        failing.execute(&input, &mut BoltCollector::new(recorder.output())).unwrap();
        assert_eq!(recorder.failed, [Anchor(77)]);
        assert_eq!(recorder.emitted.len(), 1);
    }

    #[test]
    fn panic_budget_is_shared_and_runs_out() {
        static THROWN: AtomicU64 = AtomicU64::new(0);
        let a = PanicBudget { thrown: &THROWN, times: 3 };
        let b = PanicBudget { thrown: &THROWN, times: 3 };
        assert_eq!(
            [a.take(), b.take(), a.take(), b.take(), a.take()],
            [true, true, true, false, false]
        );
        static NONE: AtomicU64 = AtomicU64::new(0);
        assert!(!PanicBudget { thrown: &NONE, times: 0 }.take());
    }

    #[test]
    fn panic_bolt_passes_after_inputs_then_panics_then_passes_when_the_budget_is_spent() {
        static THROWN: AtomicU64 = AtomicU64::new(0);
        let mut bolt =
            PanicBolt { after: 2, budget: PanicBudget { thrown: &THROWN, times: 1 }, executed: 0 };
        let values = [Value::U64(5)];
        let input = Tuple::new(&values, &[], "spout", "default", 1, Anchor(1));
        let mut recorder = Recorder::default();
        let mut run = |bolt: &mut PanicBolt| {
            catch_unwind(AssertUnwindSafe(|| {
                bolt.execute(&input, &mut BasicCollector::new(recorder.output()))
            }))
        };
        assert!(run(&mut bolt).is_ok());
        assert!(run(&mut bolt).is_ok());
        let payload = run(&mut bolt).unwrap_err();
        assert_eq!(
            payload.downcast_ref::<String>().unwrap(),
            "panic_bolt: panicking on purpose after 2 tuples"
        );
        // A rebuilt instance: the process-wide budget is spent, so it passes.
        let mut rebuilt =
            PanicBolt { after: 0, budget: PanicBudget { thrown: &THROWN, times: 1 }, executed: 0 };
        assert!(run(&mut rebuilt).is_ok());
        assert_eq!(recorder.emitted.len(), 3);
    }

    #[test]
    fn declared_config_keys_match_the_config_structs() {
        use squall_plugin_api::testing::check_config_keys;
        check_config_keys::<ChaosConfig>(ChaosBolt::CONFIG_KEYS, "fail_matching = \"x\"").unwrap();
        check_config_keys::<PanicConfig>(PanicBolt::CONFIG_KEYS, "times = 3").unwrap();
        check_config_keys::<PanicConfig>(PanicSpout::CONFIG_KEYS, "times = 3").unwrap();
        check_config_keys::<BlockConfig>(BlockOnNew::CONFIG_KEYS, "").unwrap();
        // Their constructors do not read their config: they declare none.
        assert_eq!(FailOnNew::CONFIG_KEYS, Some(&[][..]));
        assert_eq!(PanicOnNew::CONFIG_KEYS, Some(&[][..]));
    }

    #[test]
    fn fail_on_new_refuses_to_start() {
        let err = FailOnNew::new(&ComponentConfig::new("")).unwrap_err();
        assert_eq!(err.to_string(), "fail_on_new: refusing to start on purpose");
    }
}
